//! CPU cost of the exact global model's two computations (`docs/cluster.md`), in thread CPU time so the
//! figures hold on a busy machine: a node's part of a cut (`StreamingLearner::partial_sums`: one pass
//! over its window at the cut's model, and its `z_n`), and the merge of a complete cut's parts
//! (the proposer's: `cut_total`, `total_certificate` and its own `RemoteSums::without`), for 1 to 8 nodes. The learner is the load
//! generator's (SDIHT, logistic, k = 100, lambda = 1e-4) on its stream (d = 2^20, 40 nonzeros per
//! sample), each node's window a disjoint slice of `--window` samples.
//!
//! ```sh
//! cargo run --release --example cluster_cost -- --window 33334
//! ```
//! Each line: the nodes, the window per node, the nonzeros of one part's `z_n` and its bytes on the
//! wire (12 per pair), and ms of CPU (median [min, max] of `--repeats`) of the part and the merge.

#[path = "support/cpu.rs"]
mod cpu;
#[path = "support/learner.rs"]
mod learner;
use cpu::{ms_since, summary, thread_cpu_ns};
use learner::loadgen_learner;

use clap::Parser;
use thresher::learner::build;
use thresher::learner::global::{cut_total, total_certificate, PartialSums, RemoteSums};
use thresher::learner::params::StreamSolverKind;
use thresher::sparse::ThresholdScratch;
use thresher::synth::sparse_stream;

#[derive(Parser)]
struct Args {
    /// Samples in each node's window.
    #[arg(long, default_value_t = 33_334)]
    window: usize,
    /// The cluster sizes measured (the largest sets how many learners are built).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4,8")]
    nodes: Vec<usize>,
    #[arg(long, default_value_t = 9)]
    repeats: usize,
}

fn main() {
    let args = Args::parse();
    // As the binary: the dense d-vectors ask for huge pages.
    thresher::sparse::set_dense_advice(thresher::sys::advise_huge_pages);
    let most = args.nodes.iter().copied().max().unwrap_or(1);
    let data = sparse_stream(most * args.window, 1 << 20, 100, 40, 0.0, true, 7);
    let config = loadgen_learner(StreamSolverKind::Sdiht);
    let mut learners: Vec<_> = data
        .samples
        .chunks(args.window)
        .map(|slice| {
            let mut l = build(&config, args.window, None);
            l.insert_samples(slice);
            for _ in 0..4 {
                l.step();
            }
            l
        })
        .collect();
    // Every node answers the first node's model, as they answer the proposer's.
    let at = learners[0].cut_model().expect("SDIHT proposes");

    let mut part_ms = Vec::new();
    let mut parts: Vec<PartialSums> = Vec::new();
    for _ in 0..args.repeats {
        let start = thread_cpu_ns();
        let part = learners[0].partial_sums(&at).expect("SDIHT answers");
        part_ms.push(ms_since(start));
        parts = vec![part];
    }
    for l in &mut learners[1..] {
        parts.push(l.partial_sums(&at).expect("SDIHT answers"));
    }
    let part = summary(part_ms);
    let pairs = parts[0].z.len();
    for &n in &args.nodes {
        let refs: Vec<&PartialSums> = parts[..n].iter().collect();
        let mut merge_ms = Vec::new();
        let mut scratch = ThresholdScratch::default();
        let mut certificate = None;
        for _ in 0..args.repeats {
            let start = thread_cpu_ns();
            let total = cut_total(&refs);
            certificate = Some(total_certificate(
                &total,
                &at,
                config.lambda,
                config.k,
                &mut scratch,
            ));
            // What the proposer (the first node) keeps of the others' parts.
            let remote = RemoteSums::without(&total, refs[0], n);
            merge_ms.push(ms_since(start));
            std::hint::black_box(remote);
        }
        let c = certificate.expect("repeats > 0");
        println!(
            "nodes={n} window_per_node={} part_pairs={pairs} part_bytes={} cpu_ms part={part} \
             merge={} union_samples={} gap={:e}",
            args.window,
            pairs * 12,
            summary(merge_ms),
            c.samples,
            c.gap
        );
    }
}
