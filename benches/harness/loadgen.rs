//! End-to-end load harness for `thresher serve`: starts the real daemon on loopback, streams a sparse
//! classification problem into it over HTTP while it learns, and reports
//! - ingest throughput (samples/s accepted, LIBSVM or JSON bodies, configurable batch size),
//! - `GET /v1/model` latency p50/p99 under that load (only requests issued while senders are posting),
//!   with the same figures for the idle daemon before the load (`idle_get_*`) and for the catch-up after
//!   it, when the learner drains the queue but nothing is posted (`catchup_get_*`), to attribute the tail,
//! - the daemon's own handler time for those GETs (`daemon_get_p99_ms`, the upper bound of the histogram
//!   bucket holding the p99, from `thresher_http_request_duration_seconds`): when it is far below the
//!   client's p99, the tail is time spent waiting for a CPU or a worker, not in the handler,
//! - the 1-minute load average when the load starts (`loadavg_1m`): on a shared machine other
//!   processes' run-queue time lands in the p99,
//! - the sustained accept rate (`sustained_samples_per_s`: samples accepted over the second half of the
//!   sending period; a short run mostly measures the burst that fills the ingest queue) and 503 count,
//! - model staleness (time from a batch's `202` to the first snapshot whose `samples_seen` covers it),
//! - solver throughput inside the daemon (`thresher_solver_steps_total` over the run),
//! - RSS of the daemon (after start, after the run, peak) and held-out accuracy + support size,
//! - the daemon's CPU seconds over the run (includes the 1.5 s catch-up after the last POST).
//!
//! ```sh
//! cargo build --release
//! cargo run --release --example loadgen -- --format libsvm --batch 10000 --samples 1000000
//! ```
//! The stream: d = 2^20 features, 40 nonzeros per sample, 100 true features (`synth::sparse_stream`);
//! 200k distinct samples are pre-serialised and cycled so the generator itself is not the bottleneck.
//!
//! The GET probe is a hand-written HTTP/1.1 client on its own keep-alive connection and thread: reqwest's
//! blocking client runs the I/O of all its clones on one hidden runtime thread, so a probe sharing it
//! with the senders queued behind their multi-megabyte body writes and measured the harness, not the
//! daemon. The probe still shares the two cores with the senders (a real client would sit on another
//! host); `--probe-priority fifo` runs just the probe thread under SCHED_FIFO (needs root) to take its
//! own scheduling delay out of the figure. Report the default (`normal`) figure as the raw one.
//!
//! `main` is ~170 lines: it walks the run's phases in order (bodies, daemon, warm-up, idle probe, load,
//! catch-up) and ends in the one report line of 33 figures; the phases' work is in the functions above it.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use thresher::ingest::batch::BodyFormat;
use thresher::model::Model;
use thresher::sample::Sample;

#[derive(Debug, Parser)]
struct Args {
    /// Path of the thresher binary.
    #[arg(long, default_value = "target/release/thresher")]
    daemon: String,
    /// libsvm or json (application/x-ndjson).
    #[arg(long, default_value = "libsvm")]
    format: String,
    #[arg(long, default_value_t = 10_000)]
    batch: usize,
    /// Total samples to send.
    #[arg(long, default_value_t = 1_000_000)]
    samples: usize,
    /// Concurrent HTTP senders.
    #[arg(long, default_value_t = 2)]
    senders: usize,
    /// Each sender's socket send buffer (`SO_SNDBUF`), KiB; the kernel doubles it. 0 = the kernel's
    /// autotuning, which grows to 4 MiB here: a sender's write of a 7 MB body then copies megabytes per
    /// system call on one of the two cores the daemon runs on, with no preemption in the kernel (see
    /// docs/benchmarks/daemon.md). A sender on another host would not take the daemon's cores.
    #[arg(long, default_value_t = 256)]
    sender_sndbuf_kib: usize,
    /// Window capacity of the daemon's learner.
    #[arg(long, default_value_t = 100_000)]
    capacity: usize,
    /// Sparsity of the learner.
    #[arg(short = 'k', long = "k", default_value_t = 100)]
    k: usize,
    #[arg(long, default_value = "logistic")]
    loss: String,
    #[arg(long, default_value_t = 1e-4)]
    lambda: f64,
    /// Send for this many seconds (cycling the stream) instead of `--samples` samples; 0 = off.
    /// A long run measures the sustained rate, not the burst that fills the ingest queue.
    #[arg(long, default_value_t = 0.0)]
    duration: f64,
    /// The daemon's `snapshot.interval_ms`: how often the learner certifies and publishes. 500 is the
    /// daemon's default; a shorter interval buys fresher models (lower staleness) with certificate CPU
    /// taken from ingest (each certificate is a few full passes over the window).
    #[arg(long, default_value_t = 500)]
    snapshot_ms: u64,
    /// Scheduling of the GET probe thread: normal, slice (a 100 µs EEVDF time slice, the shortest Linux
    /// grants, as a latency-sensitive client would ask for; no privilege needed), nice (-10) or fifo
    /// (SCHED_FIFO 1; needs root).
    #[arg(long, default_value = "normal")]
    probe_priority: String,
    /// Milliseconds the probe measures the idle daemon (after a warm-up batch has been learned).
    #[arg(long, default_value_t = 1000)]
    idle_ms: u64,
    /// Extra `KEY=VALUE` environment for the daemon (repeatable), e.g.
    /// `THRESHER_LEARNER_BLOCKS=4`. (`THRESHER_INGEST_DRAIN=false` cannot work here: the run
    /// needs a published model first.)
    #[arg(long = "daemon-env")]
    daemon_env: Vec<String>,
    /// Write the stream (train.svm, the 200k distinct samples in send order; heldout.svm) here and exit,
    /// for the side-by-side peers (`benches/run daemon`).
    #[arg(long)]
    dump: Option<std::path::PathBuf>,
}

const DIM: usize = 1 << 20;
const DISTINCT: usize = 200_000;

fn serialise(samples: &[Sample], format: &str) -> String {
    let format = if format == "json" {
        BodyFormat::Ndjson
    } else {
        BodyFormat::Libsvm
    };
    thresher::synth::wire_body(samples, format)
}

fn start_daemon(args: &Args) -> (Child, String) {
    let mut command = Command::new(&args.daemon);
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--fresh"])
        .env("THRESHER_WINDOW_CAPACITY", args.capacity.to_string())
        .env("THRESHER_INGEST_MAX_DIM", DIM.to_string())
        .env("THRESHER_LEARNER_K", args.k.to_string())
        .env("THRESHER_LEARNER_LOSS", &args.loss)
        .env("THRESHER_LEARNER_LAMBDA", args.lambda.to_string())
        .env(
            "THRESHER_SNAPSHOT_INTERVAL_MS",
            args.snapshot_ms.to_string(),
        );
    for kv in &args.daemon_env {
        let (k, v) = kv.split_once('=').expect("--daemon-env takes KEY=VALUE");
        command.env(k, v);
    }
    let mut child = command
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("start the daemon (cargo build --release first)");
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("daemon exited before listening")
            .unwrap();
        if let Some(pos) = line.find("listening on ") {
            let rest = &line[pos + "listening on ".len()..];
            break rest
                .split_whitespace()
                .next()
                .unwrap()
                .trim_end_matches(',')
                .to_string();
        }
    };
    // Keep draining the log so the daemon never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines.by_ref() {});
    (child, addr)
}

fn rss_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// CPU seconds (user + system) the process has used: a figure less sensitive than wall-clock rates to
/// other load on a shared machine.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th of them.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    // The kernel's USER_HZ is 100 on every Linux configuration we run on.
    f.iter().sum::<f64>() / 100.0
}

fn metric(body: &str, name: &str) -> f64 {
    body.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// One keep-alive HTTP/1.1 connection: just enough of the protocol for the daemon's responses (which
/// carry `Content-Length`), so the measured time is the write, the daemon, and the read — no hidden
/// client threads. Reconnects after an error. The GET probe and every sender each have their own.
struct Connection {
    addr: String,
    stream: Option<TcpStream>,
    buf: Vec<u8>,
    /// `SO_SNDBUF` for the socket, bytes (the kernel doubles it); `None` = the kernel's autotuning.
    send_buffer: Option<usize>,
}

impl Connection {
    fn new(addr: &str, send_buffer: Option<usize>) -> Connection {
        Connection {
            addr: addr.to_string(),
            stream: None,
            buf: Vec::with_capacity(1 << 16),
            send_buffer,
        }
    }

    /// Status and body of `GET path`.
    fn get(&mut self, path: &str) -> std::io::Result<(u16, Vec<u8>)> {
        self.request(
            &format!("GET {path} HTTP/1.1\r\nhost: {}\r\n\r\n", self.addr),
            &[],
        )
    }

    /// Status and body of `POST path` with `body`.
    fn post(
        &mut self,
        path: &str,
        content_type: &str,
        body: &[u8],
    ) -> std::io::Result<(u16, Vec<u8>)> {
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n",
            self.addr,
            body.len()
        );
        self.request(&head, body)
    }

    fn request(&mut self, head: &str, body: &[u8]) -> std::io::Result<(u16, Vec<u8>)> {
        let result = self.exchange(head, body);
        if result.is_err() {
            self.stream = None;
        }
        result
    }

    fn connect(&self) -> std::io::Result<TcpStream> {
        let s = TcpStream::connect(&self.addr)?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        if let Some(bytes) = self.send_buffer {
            use std::os::fd::AsRawFd;
            let bytes = bytes as libc::c_int;
            // SAFETY: a valid socket, and a c_int option value that outlives the call.
            let rc = unsafe {
                libc::setsockopt(
                    s.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_SNDBUF,
                    (&bytes as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if rc != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(s)
    }

    fn exchange(&mut self, head: &str, body: &[u8]) -> std::io::Result<(u16, Vec<u8>)> {
        use std::io::{Error, Read, Write};
        if self.stream.is_none() {
            self.stream = Some(self.connect()?);
        }
        let stream = self.stream.as_mut().unwrap();
        stream.write_all(head.as_bytes())?;
        stream.write_all(body)?;
        self.buf.clear();
        let mut chunk = [0u8; 1 << 14];
        let head_end = loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let n = stream.read(&mut chunk)?;
            if n == 0 {
                return Err(Error::other("connection closed"));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&self.buf[..head_end]).to_ascii_lowercase();
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Error::other("no status line"))?;
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| Error::other("response without content-length"))?;
        while self.buf.len() < head_end + length {
            let n = stream.read(&mut chunk)?;
            if n == 0 {
                return Err(Error::other("connection closed"));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
        Ok((status, self.buf[head_end..head_end + length].to_vec()))
    }
}

/// Gives the calling thread the requested scheduling (see `--probe-priority`). Panics if the kernel
/// refuses: a run that silently measured something else would be worse.
fn set_probe_priority(priority: &str) {
    // SAFETY: plain syscalls on the calling thread (`0`), with a valid parameter struct.
    let rc = unsafe {
        match priority {
            "normal" => 0,
            "nice" => libc::setpriority(libc::PRIO_PROCESS, 0, -10),
            "slice" => match thresher::sys::request_short_slice(100_000) {
                Ok(()) => 0,
                Err(_) => -1,
            },
            "fifo" => {
                let param = libc::sched_param { sched_priority: 1 };
                libc::sched_setscheduler(0, libc::SCHED_FIFO, &param)
            }
            other => panic!("--probe-priority: normal, slice, nice or fifo, not {other:?}"),
        }
    };
    assert_eq!(
        rc,
        0,
        "--probe-priority {priority}: {}",
        std::io::Error::last_os_error()
    );
}

/// Cumulative bucket counts `(le, count)` of the daemon's own `GET /v1/model` latency histogram
/// (handler time: from the router to the response, not the wait before the connection is polled).
fn get_model_histogram(client: &reqwest::blocking::Client, base: &str) -> Vec<(f64, f64)> {
    let text = client
        .get(format!("{base}/metrics"))
        .send()
        .and_then(|r| r.text())
        .unwrap_or_default();
    text.lines()
        .filter(|l| {
            l.starts_with("thresher_http_request_duration_seconds_bucket")
                && l.contains("route=\"/v1/model\"")
                && l.contains("method=\"GET\"")
        })
        .filter_map(|l| {
            let le = l.split("le=\"").nth(1)?.split('"').next()?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, l.rsplit(' ').next()?.parse().ok()?))
        })
        .collect()
}

/// The upper bound (ms) of the bucket holding quantile `q` of the requests between two histogram
/// scrapes, as text (`>5000` past the last finite bucket, `-` without requests).
fn histogram_quantile(before: &[(f64, f64)], after: &[(f64, f64)], q: f64) -> String {
    let delta: Vec<(f64, f64)> = after
        .iter()
        .map(|&(le, n)| {
            let b = before.iter().find(|p| p.0 == le).map_or(0.0, |p| p.1);
            (le, n - b)
        })
        .collect();
    let Some(&(_, total)) = delta.last() else {
        return "-".into();
    };
    if total <= 0.0 {
        return "-".into();
    }
    match delta.iter().find(|&&(_, n)| n >= q * total) {
        Some(&(le, _)) if le.is_finite() => format!("{}", le * 1e3),
        _ => ">5000".into(),
    }
}

/// One probe measurement: when it was issued (seconds since the run started) and how long it took.
#[derive(Clone, Copy)]
struct Probed {
    at: f64,
    ms: f64,
}

/// p50, p99 and max of the latencies issued in `[from, to)`, and their count.
fn latency_stats(samples: &[Probed], from: f64, to: f64) -> (f64, f64, f64, usize) {
    let mut ms: Vec<f64> = samples
        .iter()
        .filter(|s| s.at >= from && s.at < to)
        .map(|s| s.ms)
        .collect();
    ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (
        percentile(&ms, 0.5),
        percentile(&ms, 0.99),
        ms.last().copied().unwrap_or(f64::NAN),
        ms.len(),
    )
}

/// Writes the stream (`train.svm`, the distinct samples in send order; `heldout.svm`) for the peers.
fn dump(dir: &std::path::Path, train: &[Sample], held_out: &[Sample]) {
    std::fs::create_dir_all(dir).expect("create dump dir");
    std::fs::write(dir.join("train.svm"), serialise(train, "libsvm")).expect("write train.svm");
    std::fs::write(dir.join("heldout.svm"), serialise(held_out, "libsvm"))
        .expect("write heldout.svm");
}

/// Posts one batch and waits until a model is served, so the idle phase serves a real model; returns
/// the probe's connection.
fn warm_up(
    client: &reqwest::blocking::Client,
    base: &str,
    addr: &str,
    content_type: &str,
    body: &'static str,
) -> Connection {
    let warm_resp = client
        .post(format!("{base}/v1/samples"))
        .header("content-type", content_type)
        .body(body)
        .send()
        .expect("post the warm-up batch");
    assert_eq!(warm_resp.status().as_u16(), 202, "warm-up batch accepted");
    let mut probe = Connection::new(addr, None);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !matches!(probe.get("/v1/model"), Ok((200, _))) {
        assert!(
            Instant::now() < deadline,
            "no model 30 s after the warm-up batch"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    probe
}

/// What the senders share.
struct Tally {
    accepted: AtomicU64,
    rejected_503: AtomicU64,
    next_batch: AtomicU64,
    /// (time since start, cumulative accepted) after every 202, for staleness and the sustained rate.
    acceptances: Mutex<Vec<(f64, u64)>>,
}

/// `(seconds since the start, samples_seen)` of each model the probe read.
type Seen = Vec<(f64, u64)>;

/// The GET probe's thread: `GET /v1/model` every 2 ms on its own connection until `done`; returns each
/// answered GET's latency and the `samples_seen` each model reported, with their times.
fn spawn_probe(
    mut probe: Connection,
    priority: String,
    done: Arc<AtomicBool>,
    started: Instant,
) -> std::thread::JoinHandle<(Vec<Probed>, Seen)> {
    // Named so scheduler traces (`perf sched timehist`) can pick it out.
    std::thread::Builder::new()
        .name("get-probe".into())
        .spawn(move || {
            set_probe_priority(&priority);
            let mut latencies = Vec::new();
            let mut seen = Vec::new();
            while !done.load(Ordering::Relaxed) {
                let at = started.elapsed().as_secs_f64();
                let t = Instant::now();
                let resp = probe.get("/v1/model");
                let ms = t.elapsed().as_secs_f64() * 1e3;
                if let Ok((200, body)) = resp {
                    latencies.push(Probed { at, ms });
                    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&body) {
                        if let Some(s) = v.get("samples_seen").and_then(|s| s.as_u64()) {
                            seen.push((started.elapsed().as_secs_f64(), s));
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            (latencies, seen)
        })
        .expect("spawn the probe")
}

/// Posts the bodies in turn from `args.senders` keep-alive connections (a 503 is retried after 5 ms)
/// until `total_batches` were taken or `stop_at` passed.
fn send_load(
    args: &Args,
    addr: &str,
    content_type: &'static str,
    (bodies, batch_sizes): (&Arc<Vec<&'static str>>, &[usize]),
    tally: &Arc<Tally>,
    (total_batches, stop_at): (u64, Option<Instant>),
    started: Instant,
) {
    let senders: Vec<_> = (0..args.senders)
        .map(|_| {
            let send_buffer = (args.sender_sndbuf_kib > 0).then_some(args.sender_sndbuf_kib * 1024);
            let mut connection = Connection::new(addr, send_buffer);
            let (bodies, batch_sizes, tally) =
                (bodies.clone(), batch_sizes.to_vec(), tally.clone());
            let out_of_time = move || stop_at.is_some_and(|t| Instant::now() >= t);
            std::thread::spawn(move || loop {
                let b = tally.next_batch.fetch_add(1, Ordering::Relaxed);
                if b >= total_batches || out_of_time() {
                    break;
                }
                let at = b as usize % bodies.len();
                loop {
                    let (status, reply) = connection
                        .post("/v1/samples", content_type, bodies[at].as_bytes())
                        .expect("post");
                    match status {
                        202 => {
                            let total = tally
                                .accepted
                                .fetch_add(batch_sizes[at] as u64, Ordering::Relaxed)
                                + batch_sizes[at] as u64;
                            tally
                                .acceptances
                                .lock()
                                .unwrap()
                                .push((started.elapsed().as_secs_f64(), total));
                            break;
                        }
                        503 => {
                            tally.rejected_503.fetch_add(1, Ordering::Relaxed);
                            if out_of_time() {
                                break;
                            }
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        s => panic!("unexpected status {s}: {}", String::from_utf8_lossy(&reply)),
                    }
                }
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
}

/// Model staleness, sorted, ms: for each accepted batch, the time from its `202` to the first probed
/// model whose `samples_seen` covers it.
fn staleness_ms(acceptances: &[(f64, u64)], seen: &[(f64, u64)]) -> Vec<f64> {
    let mut staleness: Vec<f64> = acceptances
        .iter()
        .filter_map(|&(t_acc, total)| {
            seen.iter()
                .find(|&&(_, s)| s >= total)
                .map(|&(t_seen, _)| (t_seen - t_acc) * 1e3)
        })
        .collect();
    staleness.sort_by(|a, b| a.partial_cmp(b).unwrap());
    staleness
}

/// Samples/s accepted over the second half of the sending period: past the burst that fills the queue.
fn sustained_rate(
    acceptances: &[(f64, u64)],
    warm_samples: u64,
    (load_start, load_end): (f64, f64),
) -> f64 {
    let half = load_start + (load_end - load_start) / 2.0;
    let accepted_at = |t: f64| {
        acceptances
            .iter()
            .take_while(|&&(at, _)| at <= t)
            .last()
            .map_or(warm_samples, |&(_, total)| total)
    };
    (accepted_at(load_end) - accepted_at(half)) as f64 / (load_end - half)
}

/// The served model's accuracy on the held-out samples and its support size (NaN and 0 without one).
fn held_out_accuracy(model_json: &str, held_out: &[Sample]) -> (f64, usize) {
    let model = Model::from_json(model_json).ok();
    match &model {
        Some(m) => {
            let correct = held_out
                .iter()
                .filter(|s| m.predict(s.row()) == s.label)
                .count();
            (correct as f64 / held_out.len() as f64, m.support.len())
        }
        None => (f64::NAN, 0),
    }
}

fn main() {
    let args = Args::parse();
    let problem = thresher::synth::sparse_stream(DISTINCT + 20_000, DIM, 100, 40, 0.0, true, 7);
    let (train, held_out) = problem.samples.split_at(DISTINCT);
    if let Some(dir) = &args.dump {
        return dump(dir, train, held_out);
    }
    let content_type = if args.format == "json" {
        "application/x-ndjson"
    } else {
        "text/plain"
    };
    // Leaked once so every POST can send the body without copying it (the harness lives for one run).
    let bodies: Arc<Vec<&'static str>> = Arc::new(
        train
            .chunks(args.batch)
            .map(|c| &*Box::leak(serialise(c, &args.format).into_boxed_str()))
            .collect(),
    );
    let batch_sizes: Vec<usize> = train.chunks(args.batch).map(|c| c.len()).collect();

    let (mut child, addr) = start_daemon(&args);
    let pid = child.id();
    let base = format!("http://{addr}");
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let rss_start = rss_kib(pid, "VmRSS:");
    let started = Instant::now();

    // Warm-up: one batch learned and published, so the idle phase serves a real model. It is the
    // stream's last batch, sent again later in its turn; it counts towards `samples_seen` but not
    // towards the reported ingest figures.
    let warm = bodies.len() - 1;
    let probe = warm_up(&client, &base, &addr, content_type, bodies[warm]);
    let warm_samples = batch_sizes[warm] as u64;
    // Let the learner go idle (converged or stalled on the warm-up window) before measuring "idle".
    std::thread::sleep(Duration::from_millis(300));

    let steps_before = metric(
        &client
            .get(format!("{base}/metrics"))
            .send()
            .unwrap()
            .text()
            .unwrap(),
        "thresher_solver_steps_total",
    );
    let cpu_start = cpu_seconds(pid);

    let tally = Arc::new(Tally {
        accepted: AtomicU64::new(warm_samples),
        rejected_503: AtomicU64::new(0),
        next_batch: AtomicU64::new(0),
        acceptances: Mutex::new(Vec::new()),
    });
    let done = Arc::new(AtomicBool::new(false));
    let total_batches = if args.duration > 0.0 {
        u64::MAX
    } else {
        args.samples.div_ceil(args.batch) as u64
    };

    let poller = spawn_probe(probe, args.probe_priority.clone(), done.clone(), started);

    std::thread::sleep(Duration::from_millis(args.idle_ms));
    let handler_before = get_model_histogram(&client, &base);
    let loadavg = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "-".into());
    let load_start = started.elapsed().as_secs_f64();
    let stop_at =
        (args.duration > 0.0).then(|| Instant::now() + Duration::from_secs_f64(args.duration));
    send_load(
        &args,
        &addr,
        content_type,
        (&bodies, &batch_sizes),
        &tally,
        (total_batches, stop_at),
        started,
    );
    let load_end = started.elapsed().as_secs_f64();
    let handler_after = get_model_histogram(&client, &base);
    let ingest_seconds = load_end - load_start;
    let sent = tally.accepted.load(Ordering::Relaxed) - warm_samples;
    // Let the learner catch up and publish, then stop the poller.
    std::thread::sleep(Duration::from_millis(1500));
    done.store(true, Ordering::Relaxed);
    let (latencies, seen) = poller.join().unwrap();
    let catchup_end = started.elapsed().as_secs_f64();

    let acceptances = tally.acceptances.lock().unwrap().clone();
    let staleness = staleness_ms(&acceptances, &seen);
    let sustained = sustained_rate(&acceptances, warm_samples, (load_start, load_end));

    let metrics = client
        .get(format!("{base}/metrics"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    let steps = metric(&metrics, "thresher_solver_steps_total") - steps_before;
    let model_json = client
        .get(format!("{base}/v1/model"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    let (accuracy, support) = held_out_accuracy(&model_json, held_out);
    let rss_end = rss_kib(pid, "VmRSS:");
    let daemon_cpu = cpu_seconds(pid) - cpu_start;
    let rss_peak = rss_kib(pid, "VmHWM:");
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let _ = child.wait();

    let handler_p99 = histogram_quantile(&handler_before, &handler_after, 0.99);
    let (idle_p50, idle_p99, idle_max, idle_n) = latency_stats(&latencies, 0.0, load_start);
    let (p50, p99, max, n) = latency_stats(&latencies, load_start, load_end);
    let (catchup_p50, catchup_p99, catchup_max, catchup_n) =
        latency_stats(&latencies, load_end, catchup_end);
    println!(
        "format={} batch={} senders={} sender_sndbuf_kib={} capacity={} snapshot_ms={} samples={} seconds={:.2} samples_per_s={:.0} \
         sustained_samples_per_s={:.0} http_503={} model_get_p50_ms={:.3} model_get_p99_ms={:.3} \
         model_get_max_ms={:.3} model_gets={} idle_get_p50_ms={:.3} idle_get_p99_ms={:.3} \
         idle_get_max_ms={:.3} idle_gets={} catchup_get_p50_ms={:.3} catchup_get_p99_ms={:.3} \
         catchup_get_max_ms={:.3} catchup_gets={} daemon_get_p99_ms={} probe_priority={} loadavg_1m={} staleness_p50_ms={:.0} \
         staleness_p99_ms={:.0} solver_steps={} rss_start_mib={:.0} rss_end_mib={:.0} rss_peak_mib={:.0} \
         heldout_accuracy={:.4} support={} daemon_cpu_s={:.2}",
        args.format,
        args.batch,
        args.senders,
        args.sender_sndbuf_kib,
        args.capacity,
        args.snapshot_ms,
        sent,
        ingest_seconds,
        sent as f64 / ingest_seconds,
        sustained,
        tally.rejected_503.load(Ordering::Relaxed),
        p50,
        p99,
        max,
        n,
        idle_p50,
        idle_p99,
        idle_max,
        idle_n,
        catchup_p50,
        catchup_p99,
        catchup_max,
        catchup_n,
        handler_p99,
        args.probe_priority,
        loadavg,
        percentile(&staleness, 0.5),
        percentile(&staleness, 0.99),
        steps,
        rss_start as f64 / 1024.0,
        rss_end as f64 / 1024.0,
        rss_peak as f64 / 1024.0,
        accuracy,
        support,
        daemon_cpu,
    );
}
