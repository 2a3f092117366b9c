//! CPU time per sample of `parse_body` on the ingest benchmark's LIBSVM body (10 000 samples of 40
//! nonzeros, the load generator's stream), measured as this thread's own CPU time (from
//! `/proc/thread-self/schedstat`), so other processes competing for the cores inflate it far less
//! than wall time. Prints the best and the median of the rounds.
//!
//! ```sh
//! cargo run --release --example ingest_cpu -- [rounds] [path.svm]
//! ```
//!
//! With a path, the body is that file (every line must be valid) instead of the synthetic stream.

use std::time::Duration;

use thresher::ingest::batch::{parse_body, BodyFormat, FeatureDictionary, Rules};
use thresher::loss::{Loss, LossKind};
use thresher::synth::{sparse_stream, write_wire_sample};

/// This thread's CPU time so far (Linux).
fn thread_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let ns = stat
        .split_whitespace()
        .next()
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    Duration::from_nanos(ns)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(9);
    let (body, losses) = match args.next() {
        Some(path) => (
            std::fs::read_to_string(&path).expect("readable file"),
            vec![Loss::new(LossKind::Squared, 0.25).unwrap()],
        ),
        None => {
            let data = sparse_stream(10_000, 1 << 20, 100, 40, 0.0, true, 7);
            let mut body = String::new();
            for s in &data.samples {
                write_wire_sample(&mut body, s, false);
                body.push('\n');
            }
            (body, vec![Loss::new(LossKind::Logistic, 0.25).unwrap()])
        }
    };
    let rules = Rules {
        losses,
        max_dim: 1 << 30,
        predict: false,
    };
    let dict = FeatureDictionary::new(0);
    let started = std::time::Instant::now();
    let samples = parse_body(BodyFormat::Libsvm, &body, &rules, &dict)
        .expect("valid body")
        .len();
    // Rounds of about half a second: the CPU time the kernel reports can move in whole scheduler
    // ticks (4 ms here), so a round must be long against a tick; the best of several rounds is the
    // one least disturbed by other processes on the machine.
    let per_round = (0.5 / started.elapsed().as_secs_f64().max(1e-6)).clamp(1.0, 1e4) as usize;
    let mut per_sample: Vec<f64> = (0..rounds)
        .map(|_| {
            let start = thread_cpu();
            for _ in 0..per_round {
                std::hint::black_box(parse_body(BodyFormat::Libsvm, &body, &rules, &dict).ok());
            }
            (thread_cpu() - start).as_nanos() as f64 / (per_round * samples) as f64
        })
        .collect();
    per_sample.sort_by(f64::total_cmp);
    println!(
        "libsvm parse_body: {samples} samples, {} bytes; CPU ns/sample best {:.1} median {:.1}",
        body.len(),
        per_sample[0],
        per_sample[per_sample.len() / 2]
    );
}
