//! Checks of mirror descent as a solver against independent references (the planted truth of a
//! synthetic problem, the separate certificate walks, the curvature bounds), its configuration's
//! validation, and the fixtures the maps' and the selection's tests share.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::loss::{Loss, LossKind};
use crate::sample::Dataset;
use crate::solver::tests::gap_trace;
use crate::synth;

pub(super) fn maps(d: usize) -> Vec<MirrorMap> {
    vec![
        MirrorMap::Euclidean,
        MirrorMap::pnorm_for_dim(d),
        MirrorMap::PNorm {
            p: 2.0 * (1e6f64).ln(),
        },
        MirrorMap::HypEntropy { beta: 0.3 },
        MirrorMap::HypEntropy { beta: 2.0 },
    ]
}

pub(super) const CONSTRAINTS: [Constraint; 3] = [
    Constraint::None,
    Constraint::Box { radius: 0.4 },
    Constraint::L1Ball { radius: 0.9 },
];

/// A random vector with a few exact zeros and magnitudes spread over two decades.
pub(super) fn random_vector(rng: &mut ChaCha8Rng, d: usize) -> Vec<f64> {
    (0..d)
        .map(|_| {
            if rng.gen_bool(0.2) {
                0.0
            } else {
                rng.gen_range(-1.0..1.0) * 10f64.powf(rng.gen_range(-1.0..1.0))
            }
        })
        .collect()
}

pub(super) fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Projects onto `C` (Euclidean-ish: clamp, or shrink into the l1 ball) — only to generate feasible
/// competitors, not a solver under test.
pub(super) fn make_feasible(constraint: Constraint, x: &mut [f64]) {
    match constraint {
        Constraint::None => {}
        Constraint::Box { radius } => x.iter_mut().for_each(|v| *v = v.clamp(-radius, radius)),
        Constraint::L1Ball { radius } => {
            let l1: f64 = x.iter().map(|v| v.abs()).sum();
            if l1 > radius {
                x.iter_mut().for_each(|v| *v *= radius / l1);
            }
        }
    }
}

#[test]
fn mirror_descent_gap_falls_and_support_reaches_the_truth() {
    let problem = synth::sparse_stream(1500, 200, 8, 16, 0.05, false, 21);
    let truth = problem.true_support();
    let data = Dataset::from_samples(&problem.samples, 200);
    let loss = Loss::new(LossKind::Squared, 0.0).unwrap();
    let p = Problem::new(&data, loss, 1e-3, truth.len(), false).unwrap();
    for map in [
        MirrorMap::Euclidean,
        MirrorMap::pnorm_for_dim(200),
        MirrorMap::HypEntropy { beta: 1.0 },
    ] {
        for constraint in [Constraint::None, Constraint::Box { radius: 2.5 }] {
            // Per-sample steps for the separable maps; the p-norm map needs mini-batches (see below).
            let batch = if map.is_separable() { 1 } else { 32 };
            let config = MirrorConfig {
                constraint,
                batch,
                ..MirrorConfig::new(map)
            };
            let mut solver = MirrorDescent::new(&p, config, 3).unwrap();
            let trace = gap_trace(&p, &mut solver, 15);
            let (first, last) = (trace[0].0, trace[trace.len() - 1].0);
            assert_eq!(
                Solver::<Dataset>::model(&solver).support,
                &truth[..],
                "{map:?} {constraint:?}"
            );
            assert!(last < 0.1 * first, "{map:?} {constraint:?}: gap {trace:?}");
            assert!(
                trace.windows(2).filter(|w| w[1].0 > w[0].0).count() <= 5,
                "{map:?}: gap {trace:?}"
            );
        }
    }
}

/// The solver certifies in one walk without an intercept and two with one; its values are the
/// separate walks' bit for bit, at every epoch, for each loss and map, with and without an intercept.
#[test]
fn mirror_certificate_in_one_walk_is_the_separate_walks() {
    let problem = synth::sparse_stream(800, 300, 6, 12, 0.05, true, 5);
    let data = Dataset::from_samples(&problem.samples, 300);
    for (kind, intercept) in [LossKind::Logistic, LossKind::Hinge, LossKind::Squared]
        .into_iter()
        .flat_map(|kind| [(kind, false), (kind, true)])
    {
        let loss = Loss::new(kind, 0.25).unwrap();
        let p = Problem::new(&data, loss, 1e-3, 6, intercept).unwrap();
        for map in [MirrorMap::Euclidean, MirrorMap::HypEntropy { beta: 1.0 }] {
            let config = MirrorConfig {
                batch: 16,
                ..MirrorConfig::new(map)
            };
            let mut solver = MirrorDescent::new(&p, config, 9).unwrap();
            let mut pass = PrimalPass::new(data.len(), 0);
            for epoch in 0..3 {
                Solver::<Dataset>::epoch(&mut solver, &p);
                let fused = Solver::<Dataset>::certificate(&mut solver, &p);
                let separate = pass.certify(&p, p.k, solver.state().model());
                let bits = |c: Certificate| (c.primal.to_bits(), c.dual.to_bits(), c.gap.to_bits());
                assert_eq!(
                    bits(fused),
                    bits(separate),
                    "{kind:?} {map:?} intercept {intercept} epoch {epoch}"
                );
            }
        }
    }
}

/// The p-norm Bregman step makes supports sticky: a coordinate of weight `w_j` sits at
/// `|theta_j| = n (|w_j| / n)^{q-1}` with `q - 1 = 1/(p-1)` small, i.e. a sizeable fraction of `n = ||w||_q` even
/// when `w_j` is negligible, so a newcomer must beat that with one step. Per-sample steps fill the support
/// early and keep a wrong coordinate (7 of 8 right here, gap stalled); this pins the behaviour down (if it ever changes,
/// the README's advice on the p-norm map must change with it).
#[test]
fn pnorm_per_sample_steps_keep_an_early_wrong_support() {
    let problem = synth::sparse_stream(1500, 200, 8, 16, 0.05, false, 21);
    let truth = problem.true_support();
    let data = Dataset::from_samples(&problem.samples, 200);
    let loss = Loss::new(LossKind::Squared, 0.0).unwrap();
    let p = Problem::new(&data, loss, 1e-3, truth.len(), false).unwrap();
    let mut solver =
        MirrorDescent::new(&p, MirrorConfig::new(MirrorMap::pnorm_for_dim(200)), 3).unwrap();
    let trace = gap_trace(&p, &mut solver, 15);
    let support = Solver::<Dataset>::model(&solver).support.to_vec();
    eprintln!(
        "p-norm per-sample support {support:?}, truth {truth:?}, gap {:?}",
        trace.last()
    );
    assert_ne!(support, truth);
    assert!(trace[trace.len() - 1].0 > 0.3 * trace[0].0, "gap {trace:?}");
}

#[test]
fn bad_configurations_are_errors() {
    let loss = Loss::new(LossKind::Squared, 0.0).unwrap();
    let bad = [
        MirrorConfig::new(MirrorMap::HypEntropy { beta: 0.0 }),
        MirrorConfig::new(MirrorMap::PNorm { p: 1.5 }),
        MirrorConfig {
            batch: 0,
            ..MirrorConfig::new(MirrorMap::Euclidean)
        },
        MirrorConfig {
            constraint: Constraint::Box { radius: -1.0 },
            ..MirrorConfig::new(MirrorMap::Euclidean)
        },
        MirrorConfig {
            step: MirrorStep::Constant(f64::NAN),
            ..MirrorConfig::new(MirrorMap::Euclidean)
        },
    ];
    for config in bad {
        assert!(
            MirrorState::new(config, loss, 0.1, 3, false, 5).is_err(),
            "{config:?}"
        );
    }
    assert_eq!(
        "box:2".parse::<Constraint>(),
        Ok(Constraint::Box { radius: 2.0 })
    );
    assert_eq!(
        "l1:0.5".parse::<Constraint>(),
        Ok(Constraint::L1Ball { radius: 0.5 })
    );
    assert_eq!("none".parse::<Constraint>(), Ok(Constraint::None));
    for text in ["box", "box:", "l2:1", "box:-1", "l1:nan"] {
        assert!(text.parse::<Constraint>().is_err(), "{text}");
    }
}

/// The curvature the steps are sized from never understates the one a step sees: the learner's
/// `L = l''_max max_i c_i ||x_i||^2 + lambda` bounds every row's `l''_max c_i ||x_i||^2 + lambda`, and
/// the power iteration on a subsample matches the full one when the subsample is everything and stays
/// between the full one's 0.5x and `L_max` on random sparse data.
#[test]
fn row_norm_curvature_bounds_every_sample_and_the_sampled_estimate_is_close() {
    let data = synth::sparse_stream(4000, 300, 10, 12, 0.1, true, 5);
    let set = Dataset::from_samples(&data.samples, 0);
    let loss = Loss::new(LossKind::Logistic, 0.25).unwrap();
    let mut learner = MirrorState::new(
        MirrorConfig::new(MirrorMap::Euclidean),
        loss,
        0.01,
        10,
        false,
        0,
    )
    .unwrap();
    let mut row_max: f64 = 0.0;
    for i in 0..set.len() {
        let r = set.row(i);
        learner.step_sample(r);
        let curvature = loss.smoothness() * r.weight * crate::sparse::sparse_sq_norm(r.values);
        row_max = row_max.max(r.weight * crate::sparse::sparse_sq_norm(r.values));
        assert!(learner.smoothness() >= curvature + 0.01, "row {i}");
    }
    let problem = Problem::new(&set, loss, 0.01, 10, false).unwrap();
    let full = crate::solver::primal::sigma_max_sq(&problem);
    assert_eq!(
        crate::solver::primal::sigma_max_sq_sampled(&problem, set.len()),
        full
    );
    let sampled = crate::solver::primal::sigma_max_sq_sampled(&problem, 500);
    assert!(
        sampled >= 0.5 * full && sampled <= row_max,
        "{sampled} vs {full}, {row_max}"
    );
    assert!(full <= row_max);
}
