//! Live side-by-side run of the shipped `config/two-learners.toml` (SDIHT and stochastic sparse mirror
//! descent on one stream): starts the real daemon on loopback, streams a seeded synthetic regression
//! problem into it at a fixed pace, and prints each learner's gap against wall-clock time — the numbers
//! the Grafana gap panel would draw (`thresher_duality_gap{learner=...}`).
//!
//! ```sh
//! cargo build --release
//! cargo run --release --example two_learners_live -- --samples 300000 --rate 40000
//! ```
//! Output: one CSV row per learner per tick:
//! `seconds,learner,samples_seen,window,primal,gap,relative_gap,true_in_support,support_size`.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::Value;
use thresher::synth::{sparse_stream, to_libsvm};

#[derive(Debug, Parser)]
struct Args {
    #[arg(long, default_value = "target/release/thresher")]
    daemon: String,
    #[arg(long, default_value = "config/two-learners.toml")]
    config: String,
    /// Samples to stream.
    #[arg(long, default_value_t = 300_000)]
    samples: usize,
    /// Samples per second sent.
    #[arg(long, default_value_t = 40_000)]
    rate: usize,
    /// Features.
    #[arg(long, default_value_t = 1 << 16)]
    dim: usize,
    /// True support size (the shipped config learns k = 10).
    #[arg(long, default_value_t = 10)]
    k_true: usize,
    /// Seconds to keep watching after the last batch.
    #[arg(long, default_value_t = 5.0)]
    linger: f64,
    /// Seconds between reports.
    #[arg(long, default_value_t = 0.5)]
    tick: f64,
}

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

fn start(args: &Args) -> (Daemon, String) {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(&args.daemon)
        .args(["serve", "--listen", "127.0.0.1:0", "--config", &args.config])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the daemon (cargo build --release first)");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(addr) = line.split("listening on ").nth(1) {
                let _ = tx.send(addr.trim().to_string());
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the daemon logs its address");
    (Daemon(child), format!("http://{addr}"))
}

fn main() {
    let args = Args::parse();
    let data = sparse_stream(args.samples, args.dim, args.k_true, 40, 0.1, false, 2026);
    let truth = data.true_support();
    let (_daemon, base) = start(&args);
    let client = reqwest::blocking::Client::new();
    println!(
        "seconds,learner,samples_seen,window,primal,gap,relative_gap,true_in_support,support_size"
    );
    let batch = (args.rate as f64 * args.tick).max(1.0) as usize;
    let started = Instant::now();
    let mut sent = 0usize;
    let mut tick = 0u64;
    loop {
        let due = started + Duration::from_secs_f64(args.tick * tick as f64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        tick += 1;
        if sent < data.samples.len() {
            let end = (sent + batch).min(data.samples.len());
            let body = to_libsvm(&data.samples[sent..end]);
            let r = client
                .post(format!("{base}/v1/samples"))
                .header("content-type", "text/plain")
                .body(body)
                .send()
                .expect("post");
            if r.status().as_u16() == 202 {
                sent = end;
            }
        }
        let models: Value = client
            .get(format!("{base}/v1/models"))
            .send()
            .and_then(|r| r.json())
            .expect("GET /v1/models");
        let t = started.elapsed().as_secs_f64();
        for m in models["models"].as_array().into_iter().flatten() {
            if m["version"] == 0 {
                continue;
            }
            let support: Vec<u64> = m["support"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_u64)
                .collect();
            let hits = truth
                .iter()
                .filter(|&&j| support.contains(&(j as u64)))
                .count();
            let c = &m["certificate"];
            let (primal, gap) = (c["primal"].as_f64().unwrap(), c["gap"].as_f64().unwrap());
            println!(
                "{t:.2},{},{},{},{primal:.6e},{gap:.3e},{:.3e},{hits},{}",
                m["learner"].as_str().unwrap(),
                m["samples_seen"],
                m["window_samples"],
                gap / primal.abs().max(1.0),
                support.len()
            );
        }
        if sent == data.samples.len()
            && t > args.linger + (data.samples.len() as f64 / args.rate as f64)
        {
            break;
        }
    }
}
