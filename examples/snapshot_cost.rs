//! CPU cost of a streaming learner's certificate: `StreamingLearner::snapshot` (the primal, the dual and
//! the gap recomputed from scratch over the whole window) on the load generator's stream (d = 2^20,
//! 40 nonzeros per sample, 100 true features, logistic loss, k = 100, a full window of 100k samples), in
//! thread CPU time per snapshot, so the figure holds on a busy machine too (wall time would not).
//!
//! ```sh
//! cargo run --release --example snapshot_cost [sdiht|mirror|smidas]
//! ```
//! Each line: the solver, the window size, ms of CPU per snapshot (the median of `REPEATS`), and the
//! certificate itself, so a change of kernel can be checked to leave the figures unchanged.

use thresher::config::{Config, StreamSolverKind};
use thresher::loss::{Loss, LossKind};
use thresher::solver::stream::build;
use thresher::synth::sparse_stream;

const CAPACITY: usize = 100_000;
const REPEATS: usize = 9;

fn thread_cpu_ns() -> u128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}

fn main() {
    let data = sparse_stream(CAPACITY, 1 << 20, 100, 40, 0.0, true, 7);
    // An optional argument picks one solver, e.g. for a profile.
    let only = std::env::args().nth(1);
    for solver in [
        StreamSolverKind::Sdiht,
        StreamSolverKind::Mirror,
        StreamSolverKind::Smidas,
    ] {
        if only
            .as_deref()
            .is_some_and(|o| !format!("{solver:?}").eq_ignore_ascii_case(o))
        {
            continue;
        }
        let mut config = Config::defaults().learners.remove(0);
        config.solver = solver;
        config.loss = Loss::new(LossKind::Logistic, 0.25).unwrap();
        config.k = 100;
        config.lambda = 1e-4;
        let mut learner = build(&config, CAPACITY, None);
        // The steady state: a full window and a model that has taken a few steps on it.
        learner.insert(&data.samples);
        for _ in 0..4 {
            learner.step();
        }
        let mut ms = Vec::with_capacity(REPEATS);
        let mut certificate = None;
        for _ in 0..REPEATS {
            let start = thread_cpu_ns();
            let snap = learner.snapshot();
            ms.push((thread_cpu_ns() - start) as f64 / 1e6);
            certificate = Some(snap.model.certificate);
        }
        ms.sort_by(f64::total_cmp);
        let c = certificate.expect("REPEATS > 0");
        println!(
            "solver={solver:?} window={} cpu_ms_per_snapshot={:.2} (min {:.2}, max {:.2}) primal={:e} dual={:e}",
            c.samples,
            ms[REPEATS / 2],
            ms[0],
            ms[REPEATS - 1],
            c.primal,
            c.dual,
        );
    }
}
