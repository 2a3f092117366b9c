//! CPU cost of a streaming learner's certificate: `StreamingLearner::snapshot` (the primal, the dual and
//! the gap recomputed from scratch over the whole window) on the load generator's stream (d = 2^20,
//! 40 nonzeros per sample, 100 true features, logistic loss, k = 100, a full window of 100k samples), in
//! thread CPU time per snapshot, so the figure holds on a busy machine too (wall time would not).
//!
//! ```sh
//! cargo run --release --example snapshot_cost [sdiht|mirror|smidas]
//! ```
//! Each line: the solver, the window size, ms of CPU per call (median [min, max] of `REPEATS`, runs
//! interleaved so all three see the same machine load) of
//! - `multi_pass`: the certificate as the sequence of `objective` calls (`primal_value`,
//!   `dual_of_primal`, `dual_value` at its point, and for SDIHT `dual_value` at the window's duals),
//! - `fused`: the same three values from `objective::fused_certificate` (asserted bit-equal),
//! - `snapshot`: the whole `StreamingLearner::snapshot` (the fused kernel plus publishing the model),
//!
//! and the certificate itself.

#[path = "support/cpu.rs"]
mod cpu;
#[path = "support/learner.rs"]
mod learner;
use cpu::{ms_since, summary, thread_cpu_ns};
use learner::loadgen_learner;

use thresher::config::StreamSolverKind;
use thresher::learner::build;
use thresher::sample::SampleSet;
use thresher::solver::objective::{
    fused_certificate, separate_certificate, CertificateScratch, DualScratch,
};
use thresher::synth::sparse_stream;

const CAPACITY: usize = 100_000;
const REPEATS: usize = 9;

fn main() {
    // As the binary: the dense d-vectors ask for huge pages.
    thresher::sparse::set_dense_advice(thresher::sys::advise_huge_pages);
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
        let config = loadgen_learner(solver);
        let mut learner = build(&config, CAPACITY, None);
        // The steady state: a full window and a model that has taken a few steps on it.
        learner.insert_samples(&data.samples);
        for _ in 0..4 {
            learner.step();
        }
        let sdiht = solver == StreamSolverKind::Sdiht;
        let (mut multi_pass, mut fused, mut snapshot) = (Vec::new(), Vec::new(), Vec::new());
        let (mut alpha, mut dual_scratch) = (Vec::new(), DualScratch::default());
        let mut scratch = CertificateScratch::default();
        let mut certificate = None;
        for _ in 0..REPEATS {
            let start = thread_cpu_ns();
            let snap = learner.certify();
            snapshot.push(ms_since(start));
            certificate = Some(snap.model.certificate);
            // The published model, dense, as the learner holds it.
            let window = learner.window();
            let mut w = vec![0.0; window.dim()];
            for (&j, &v) in snap.model.support.iter().zip(&snap.model.weights) {
                w[j as usize] = v;
            }
            let (loss, lambda, k) = (&config.loss, config.lambda, snap.model.k);
            let iterate = sdiht.then(|| window.alphas());

            let start = thread_cpu_ns();
            let reference = separate_certificate(
                window,
                loss,
                lambda,
                k,
                &w,
                iterate,
                &mut alpha,
                &mut dual_scratch,
            );
            multi_pass.push(ms_since(start));

            let start = thread_cpu_ns();
            let values = fused_certificate(
                window,
                loss,
                lambda,
                k,
                &w,
                &snap.model.support,
                iterate,
                &mut scratch,
            );
            fused.push(ms_since(start));
            assert_eq!(values.primal.to_bits(), reference.primal.to_bits());
            assert_eq!(
                values.dual_at_primal.to_bits(),
                reference.dual_at_primal.to_bits()
            );
            assert_eq!(
                values.dual_at_iterate.map(f64::to_bits),
                reference.dual_at_iterate.map(f64::to_bits)
            );
        }
        let c = certificate.expect("REPEATS > 0");
        println!(
            "solver={solver:?} window={} cpu_ms multi_pass={} fused={} snapshot={} primal={:e} dual={:e}",
            c.samples,
            summary(multi_pass),
            summary(fused),
            summary(snapshot),
            c.primal,
            c.dual,
        );
    }
}
