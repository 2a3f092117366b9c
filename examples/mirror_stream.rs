//! The stream learners in-process, one pass, on the loadgen stream (d = 2^20, 40 nonzeros per sample,
//! 100 true features; `examples/loadgen.rs --dump DIR` writes it): samples/s of the learning loop alone
//! (the data is parsed before the clock starts), held-out accuracy and support size, for sparse mirror
//! descent (each map, per sample and in mini-batches) and SMIDAS (an l1 sweep). Peers: benches/mirror_peers.py.
//!
//! ```text
//! cargo run --release --example mirror_stream -- data/stream [--samples 1000000] [--k 100]
//! ```
//! Prints one `key=value` line per learner.

use std::time::Instant;

use clap::Parser;
use thresher::ingest::{read_file, Format};
use thresher::loss::{Loss, LossKind};
use thresher::sample::{Row, Sample};
use thresher::solver::mirror::state::MirrorState;
use thresher::solver::mirror::{MirrorConfig, MirrorMap, MirrorStep};
use thresher::solver::smidas::SmidasState;

#[derive(Parser)]
struct Args {
    /// Directory with train.svm and heldout.svm.
    dir: std::path::PathBuf,
    #[arg(long, default_value_t = 1_000_000)]
    samples: usize,
    #[arg(long, default_value_t = 100)]
    k: usize,
    #[arg(long, default_value_t = 1e-6)]
    lambda: f64,
    /// SMIDAS l1 strengths to sweep (small ones grow a huge nonzero mirror vector, which every step
    /// touches: they are slow).
    #[arg(long, value_delimiter = ',', default_value = "0.001,0.003,0.01,0.03")]
    smidas_l1: Vec<f64>,
    /// Learners to run: mirror, smidas.
    #[arg(long, value_delimiter = ',', default_value = "mirror,smidas")]
    only: Vec<String>,
}

const DIM: usize = 1 << 20;

fn accuracy(held: &[Sample], score: impl Fn(Row<'_>) -> f64) -> f64 {
    let correct = held
        .iter()
        .filter(|s| (score(s.row()) >= 0.0) == (s.label > 0.0))
        .count();
    correct as f64 / held.len() as f64
}

fn main() -> anyhow::Result<()> {
    // As the binary: the dense d-vectors ask for huge pages.
    thresher::sparse::set_dense_advice(thresher::sys::advise_huge_pages);
    let args = Args::parse();
    let train = read_file(&args.dir.join("train.svm"), Format::Libsvm)?;
    let held = read_file(&args.dir.join("heldout.svm"), Format::Libsvm)?;
    let loss = Loss::new(LossKind::Logistic, 0.0)?;
    let stream = || (0..args.samples).map(|i| train[i % train.len()].row());
    let maps = [
        MirrorMap::Euclidean,
        MirrorMap::pnorm_for_dim(DIM),
        MirrorMap::HypEntropy { beta: 1.0 },
    ];
    for map in maps
        .into_iter()
        .filter(|_| args.only.iter().any(|o| o == "mirror"))
    {
        for batch in [1usize, 128] {
            let config = MirrorConfig {
                batch,
                ..MirrorConfig::new(map)
            };
            let mut learner = MirrorState::new(config, loss, args.lambda, args.k, true, DIM)?;
            let started = Instant::now();
            // Fed one sample at a time, as a daemon would; the learner steps every `batch` samples.
            for row in stream() {
                learner.step_sample(row);
            }
            learner.flush();
            let seconds = started.elapsed().as_secs_f64();
            println!(
                "learner=mirror-{} batch={batch} samples={} seconds={seconds:.2} samples_per_s={:.0} heldout_accuracy={:.4} support={}",
                map.name(),
                args.samples,
                args.samples as f64 / seconds,
                accuracy(&held, |r| learner.score(r)),
                learner.model().support.len()
            );
        }
    }
    for &l1 in args
        .smidas_l1
        .iter()
        .filter(|_| args.only.iter().any(|o| o == "smidas"))
    {
        let mut learner = SmidasState::new(l1, MirrorStep::Auto, loss, args.lambda, true, DIM)?;
        learner.set_sparsity_hint(args.k);
        let started = Instant::now();
        for row in stream() {
            learner.step_sample(row);
        }
        let seconds = started.elapsed().as_secs_f64();
        println!(
            "learner=smidas l1={l1} samples={} seconds={seconds:.2} samples_per_s={:.0} heldout_accuracy={:.4} support={}",
            args.samples,
            args.samples as f64 / seconds,
            accuracy(&held, |r| learner.score(r)),
            learner.support_size()
        );
    }
    Ok(())
}
