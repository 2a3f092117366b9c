//! End-to-end load harness for `thresher serve`: starts the real daemon on loopback, streams a sparse
//! classification problem into it over HTTP while it learns, and reports
//! - ingest throughput (samples/s accepted, LIBSVM or JSON bodies, configurable batch size),
//! - `GET /v1/model` latency p50/p99 under that load,
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

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
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
    /// Write the stream (train.svm, the 200k distinct samples in send order; heldout.svm) here and exit,
    /// for the side-by-side peers (benches/vw_daemon.sh).
    #[arg(long)]
    dump: Option<std::path::PathBuf>,
}

const DIM: usize = 1 << 20;
const DISTINCT: usize = 200_000;

fn serialise(samples: &[Sample], format: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(samples.len() * 40 * 24);
    for s in samples {
        if format == "json" {
            let _ = write!(
                out,
                "{{\"label\":{},\"indices\":{:?},\"values\":{:?}}}",
                s.label, s.indices, s.values
            );
        } else {
            let _ = write!(out, "{}", s.label);
            for (j, v) in s.indices.iter().zip(&s.values) {
                let _ = write!(out, " {j}:{v:.6}");
            }
        }
        out.push('\n');
    }
    out
}

fn start_daemon(args: &Args) -> (Child, String) {
    let mut child = Command::new(&args.daemon)
        .args(["serve", "--listen", "127.0.0.1:0", "--fresh"])
        .env("THRESHER_WINDOW_CAPACITY", args.capacity.to_string())
        .env("THRESHER_INGEST_MAX_DIM", DIM.to_string())
        .env("THRESHER_LEARNER_K", args.k.to_string())
        .env("THRESHER_LEARNER_LOSS", &args.loss)
        .env("THRESHER_LEARNER_LAMBDA", args.lambda.to_string())
        .env("THRESHER_SNAPSHOT_INTERVAL_MS", "100")
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

fn main() {
    let args = Args::parse();
    let problem = thresher::synth::sparse_stream(DISTINCT + 20_000, DIM, 100, 40, 0.0, true, 7);
    let (train, held_out) = problem.samples.split_at(DISTINCT);
    if let Some(dir) = &args.dump {
        std::fs::create_dir_all(dir).expect("create dump dir");
        std::fs::write(dir.join("train.svm"), serialise(train, "libsvm")).expect("write train.svm");
        std::fs::write(dir.join("heldout.svm"), serialise(held_out, "libsvm"))
            .expect("write heldout.svm");
        return;
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
    let cpu_start = cpu_seconds(pid);
    let steps_before = metric(
        &client
            .get(format!("{base}/metrics"))
            .send()
            .unwrap()
            .text()
            .unwrap(),
        "thresher_solver_steps_total",
    );

    let accepted = Arc::new(AtomicU64::new(0));
    let rejected_503 = Arc::new(AtomicU64::new(0));
    let next_batch = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    // (time since start, cumulative accepted) after every 202, for staleness.
    let acceptances: Arc<Mutex<Vec<(f64, u64)>>> = Arc::new(Mutex::new(Vec::new()));
    let total_batches = args.samples.div_ceil(args.batch) as u64;
    let started = Instant::now();

    let poller = {
        let (client, base, done) = (client.clone(), base.clone(), done.clone());
        std::thread::spawn(move || {
            let mut latencies = Vec::new();
            let mut seen = Vec::new();
            while !done.load(Ordering::Relaxed) {
                let t = Instant::now();
                let resp = client.get(format!("{base}/v1/model")).send();
                let latency = t.elapsed().as_secs_f64() * 1e3;
                if let Ok(r) = resp {
                    if r.status().is_success() {
                        latencies.push(latency);
                        if let Ok(v) = r.json::<serde_json::Value>() {
                            if let Some(s) = v.get("samples_seen").and_then(|s| s.as_u64()) {
                                seen.push((started.elapsed().as_secs_f64(), s));
                            }
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            (latencies, seen)
        })
    };

    let senders: Vec<_> = (0..args.senders)
        .map(|_| {
            let (client, base) = (client.clone(), base.clone());
            let (bodies, batch_sizes) = (bodies.clone(), batch_sizes.clone());
            let (accepted, rejected_503, next_batch, acceptances) = (
                accepted.clone(),
                rejected_503.clone(),
                next_batch.clone(),
                acceptances.clone(),
            );
            std::thread::spawn(move || loop {
                let b = next_batch.fetch_add(1, Ordering::Relaxed);
                if b >= total_batches {
                    break;
                }
                let at = b as usize % bodies.len();
                loop {
                    let resp = client
                        .post(format!("{base}/v1/samples"))
                        .header("content-type", content_type)
                        .body(bodies[at])
                        .send()
                        .expect("post");
                    match resp.status().as_u16() {
                        202 => {
                            let total = accepted
                                .fetch_add(batch_sizes[at] as u64, Ordering::Relaxed)
                                + batch_sizes[at] as u64;
                            acceptances
                                .lock()
                                .unwrap()
                                .push((started.elapsed().as_secs_f64(), total));
                            break;
                        }
                        503 => {
                            rejected_503.fetch_add(1, Ordering::Relaxed);
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        s => panic!("unexpected status {s}: {}", resp.text().unwrap_or_default()),
                    }
                }
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    let ingest_seconds = started.elapsed().as_secs_f64();
    let sent = accepted.load(Ordering::Relaxed);
    // Let the learner catch up and publish, then stop the poller.
    std::thread::sleep(Duration::from_millis(1500));
    done.store(true, Ordering::Relaxed);
    let (mut latencies, seen) = poller.join().unwrap();
    latencies.sort_by(|a, b| a.partial_cmp(b).unwrap());

    let acceptances = acceptances.lock().unwrap().clone();
    let mut staleness: Vec<f64> = acceptances
        .iter()
        .filter_map(|&(t_acc, total)| {
            seen.iter()
                .find(|&&(_, s)| s >= total)
                .map(|&(t_seen, _)| (t_seen - t_acc) * 1e3)
        })
        .collect();
    staleness.sort_by(|a, b| a.partial_cmp(b).unwrap());

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
    let model = Model::from_json(&model_json).ok();
    let (accuracy, support) = match &model {
        Some(m) => {
            let correct = held_out
                .iter()
                .filter(|s| m.predict(s.row()) == s.label)
                .count();
            (correct as f64 / held_out.len() as f64, m.support.len())
        }
        None => (f64::NAN, 0),
    };
    let rss_end = rss_kib(pid, "VmRSS:");
    let daemon_cpu = cpu_seconds(pid) - cpu_start;
    let rss_peak = rss_kib(pid, "VmHWM:");
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let _ = child.wait();

    println!(
        "format={} batch={} senders={} capacity={} samples={} seconds={:.2} samples_per_s={:.0} \
         http_503={} model_get_p50_ms={:.3} model_get_p99_ms={:.3} model_gets={} staleness_p50_ms={:.0} \
         staleness_p99_ms={:.0} solver_steps={} rss_start_mib={:.0} rss_end_mib={:.0} rss_peak_mib={:.0} \
         heldout_accuracy={:.4} support={} daemon_cpu_s={:.2}",
        args.format,
        args.batch,
        args.senders,
        args.capacity,
        sent,
        ingest_seconds,
        sent as f64 / ingest_seconds,
        rejected_503.load(Ordering::Relaxed),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies.len(),
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
