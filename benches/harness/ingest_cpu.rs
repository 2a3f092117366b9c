//! CPU time per sample of the body parser for the three body formats, on the ingest benchmark's body
//! (10 000 samples, 40 nonzeros, the load generator's stream), as the daemon's HTTP path runs it:
//! `parse_segments` over the body cut into the 408 KiB chunks hyper reads from a loopback socket
//! (`CHUNK_BYTES` changes that; `CHUNK_BYTES=0` parses the body as one `&str`, as the stdin reader
//! does). Measured with the thread CPU clock,
//! best of many repetitions, because wall-clock benchmarks on this shared machine swing with whatever
//! else is compiling: the minimum CPU time of a run is what the parser itself costs.
//!
//! Two more rows parse the same samples with named features (JSON lines, `{"features": {"f123": v}}`):
//! `named` against a dictionary that already holds every name (a steady stream), `named_new` against
//! an empty one each time (every name is new: noted in the body's claim and granted).
//!
//! ```sh
//! benches/run ingest                  # runs it, alternating builds with --against REV
//! cargo run --release --example ingest_cpu [repetitions] [format: libsvm|ndjson|json]
//! ```

#[path = "support/cpu.rs"]
mod cpu;
use cpu::thread_cpu_ns;

use thresher::ingest::batch::{parse_segments, BodyFormat, FeatureDictionary, Rules};
use thresher::loss::{Loss, LossKind};
use thresher::sample::Sample;
use thresher::synth::{sparse_stream, wire_body};

const SAMPLES: usize = 10_000;

/// The largest read hyper made per `read(2)` on the daemon's sockets under load (`strace`).
const HYPER_CHUNK_BYTES: usize = 417_792;

fn main() {
    let mut args = std::env::args().skip(1);
    let reps: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(200);
    let only = args.next();
    let data = sparse_stream(SAMPLES, 1 << 20, 100, 40, 0.0, true, 7);
    let rules = Rules::new(
        vec![Loss::new(LossKind::Logistic, 0.25).unwrap()],
        1 << 24,
        false,
    );
    let chunk_bytes = std::env::var("CHUNK_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(HYPER_CHUNK_BYTES);
    for (name, format) in [
        ("libsvm", BodyFormat::Libsvm),
        ("ndjson", BodyFormat::Ndjson),
        ("json", BodyFormat::JsonArray),
        ("named", BodyFormat::Ndjson),
        ("named_new", BodyFormat::Ndjson),
    ] {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let named = name.starts_with("named");
        let body = match named {
            true => named_body(&data.samples),
            false => wire_body(&data.samples, format),
        };
        if std::env::var_os("DUMP_FIRST_LINE").is_some() {
            eprintln!("{}", body.lines().next().unwrap_or(""));
        }
        let chunks: Vec<&[u8]> = match chunk_bytes {
            0 => vec![body.as_bytes()],
            n => body.as_bytes().chunks(n).collect(),
        };
        let mut rules = rules.clone();
        rules.max_new_names = usize::MAX;
        let mut dict = FeatureDictionary::new(1 << 24);
        if name == "named" {
            parse_segments(format, &chunks, &rules, &dict).expect("the body is valid");
        }
        let mut best = u128::MAX;
        let mut total = 0;
        for _ in 0..reps {
            if name == "named_new" || !named {
                dict = FeatureDictionary::new(1 << 24);
            }
            let start = thread_cpu_ns();
            let block = parse_segments(format, &chunks, &rules, &dict).expect("the body is valid");
            let spent = thread_cpu_ns() - start;
            assert_eq!(block.len(), SAMPLES);
            best = best.min(spent);
            total += spent;
        }
        println!(
            "{name:>6}: best {:7.1} ns/sample ({:.2} M samples/s), mean {:7.1} ns/sample, {} reps, {} bytes/sample, {} chunks",
            best as f64 / SAMPLES as f64,
            1e3 * SAMPLES as f64 / best as f64,
            total as f64 / (reps * SAMPLES) as f64,
            reps,
            body.len() / SAMPLES,
            chunks.len()
        );
    }
}

/// The samples as JSON lines with named features (`f` and the index).
fn named_body(samples: &[Sample]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for s in samples {
        let _ = write!(out, "{{\"label\":{},\"features\":{{", s.label);
        for (n, (j, v)) in s.indices.iter().zip(&s.values).enumerate() {
            let comma = if n == 0 { "" } else { "," };
            let _ = write!(out, "{comma}\"f{j}\":{v}");
        }
        out.push_str("}}\n");
    }
    out
}
