//! Polishing: the ridge closed form on a fixed support, optimality on the support for logistic and
//! Huber, and a certificate that stays valid (weak duality) and never loosens.

use super::*;
use crate::loss::{Loss, LossKind};
use crate::sample::{Dataset, Sample};
use crate::solver::driver::{run, StopRule};
use crate::solver::objective::primal_value;
use crate::solver::sdiht::offline::Sdiht;
use crate::solver::spread::InTurn;
use crate::solver::StepRule;
use crate::synth;

fn data(kind: LossKind, seed: u64) -> Dataset {
    let mut samples =
        synth::sparse_stream(80, 30, 5, 8, 0.5, kind != LossKind::Squared, seed).samples;
    if kind == LossKind::Squared {
        // An offset the intercept has to absorb.
        samples.iter_mut().for_each(|s| s.label += 0.7);
    }
    Dataset::from_samples(&samples, 0)
}

/// Squared loss + l2 on a fixed support is a ridge regression: `(2/N) X_S^T X_S + lambda I` (no ridge on
/// the intercept's row) times `(w_S, b)` equals `(2/N) X_S^T y`. One polish from zero weights lands on
/// its solution, computed here from the dense restricted design.
#[test]
fn squared_loss_polishes_to_the_closed_form_ridge_solution() {
    let data = data(LossKind::Squared, 3);
    let support = vec![2u32, 5, 11, 17, 29];
    for intercept in [false, true] {
        let lambda = 0.05;
        let loss = Loss::new(LossKind::Squared, 0.0).unwrap();
        let problem = Problem::new(&data, loss, lambda, 5, intercept).unwrap();
        let start = SparseModel {
            support: support.clone(),
            weights: vec![0.0; support.len()],
            intercept: 0.0,
        };
        let polished = polish(&problem, &start, &InTurn).unwrap();
        // The normal equations, dense.
        let m = support.len() + usize::from(intercept);
        let n = data.len() as f64;
        let mut a = vec![0.0; m * m];
        let mut rhs = vec![0.0; m];
        for i in 0..data.len() {
            let r = data.row(i);
            let mut x = vec![0.0; m];
            for (col, &j) in support.iter().enumerate() {
                if let Some(at) = r.indices.iter().position(|&k| k == j) {
                    x[col] = r.values[at];
                }
            }
            if intercept {
                x[m - 1] = 1.0;
            }
            for p in 0..m {
                rhs[p] += 2.0 * x[p] * r.label / n;
                for q in 0..m {
                    a[p * m + q] += 2.0 * x[p] * x[q] / n;
                }
            }
        }
        for j in 0..support.len() {
            a[j * m + j] += lambda;
        }
        assert!(cholesky_solve(&mut a, &mut rhs, m));
        for (j, (&got, &want)) in polished.model.weights.iter().zip(&rhs).enumerate() {
            assert!(
                (got - want).abs() < 1e-10,
                "intercept={intercept} w[{j}] {got} vs {want}"
            );
        }
        let b = if intercept { rhs[m - 1] } else { 0.0 };
        assert!((polished.model.intercept - b).abs() < 1e-10);
        assert!(
            polished.iterations <= 2,
            "{} Newton steps",
            polished.iterations
        );
        let p = primal_value(
            &data,
            &loss,
            lambda,
            &polished.model.to_dense(data.dim()),
            b,
        );
        assert!((polished.primal - p).abs() < 1e-12 * p.max(1.0));
    }
}

/// For logistic and Huber the gradient of `P` on the support (and in `b`) vanishes at the polished
/// model: the first-order optimality of the restricted problem.
#[test]
fn smooth_losses_reach_a_stationary_point_on_the_support() {
    for kind in [LossKind::Logistic, LossKind::Huber] {
        let data = data(kind, 4);
        let loss = Loss::new(kind, 0.5).unwrap();
        let problem = Problem::new(&data, loss, 0.01, 6, true).unwrap();
        let start = SparseModel {
            support: vec![1, 4, 9, 16, 25, 28],
            weights: vec![0.3, -0.2, 0.0, 1.0, 0.1, -0.5],
            intercept: 0.2,
        };
        let polished = polish(&problem, &start, &InTurn).unwrap();
        assert!(polished.primal < polished.primal_start);
        let w = polished.model.to_dense(data.dim());
        let b = polished.model.intercept;
        let n = data.len() as f64;
        let mut grad = vec![0.0; start.support.len() + 1];
        for i in 0..data.len() {
            let r = data.row(i);
            let u = crate::sparse::sparse_dot(r.indices, r.values, &w) + b;
            let d = loss.derivative(u, r.label) / n;
            for (col, &j) in start.support.iter().enumerate() {
                if let Some(at) = r.indices.iter().position(|&k| k == j) {
                    grad[col] += d * r.values[at];
                }
            }
            grad[start.support.len()] += d;
        }
        for (col, &j) in start.support.iter().enumerate() {
            grad[col] += 0.01 * w[j as usize];
        }
        let norm = grad.iter().map(|g| g * g).sum::<f64>().sqrt();
        assert!(norm < 1e-6, "{kind:?}: |grad| = {norm:e}");
    }
}

/// After a short k-sparse search of every smooth loss, with and without an intercept, polishing never
/// raises the primal, the certificate's primal is the polished model's `P` (recomputed from scratch),
/// weak duality `P >= D` holds, and the gap never grows.
#[test]
fn polishing_never_raises_the_primal_and_never_widens_the_gap() {
    let mut kept = 0;
    for seed in 0..4u64 {
        for kind in LossKind::ALL {
            let data = data(kind, seed);
            for intercept in [false, true] {
                let loss = Loss::new(kind, 0.25).unwrap();
                let problem = Problem::new(&data, loss, 0.02, 5, intercept).unwrap();
                let mut solver = Sdiht::new(&problem, 2, StepRule::Coordinate, seed).unwrap();
                let stop = StopRule {
                    max_epochs: 3,
                    tol: 0.0,
                    ..StopRule::default()
                };
                let mut report = run(&problem, &mut solver, &stop, &mut |_| {});
                let before = report.certificate;
                let record = polish_fit(&problem, &mut report, &(std::sync::Arc::new(InTurn) as _));
                let after = report.certificate;
                assert_eq!(record.primal_search, before.primal);
                assert!(
                    after.primal <= before.primal,
                    "{kind:?} {after:?} {before:?}"
                );
                assert!(after.gap <= before.gap, "{kind:?} {after:?} {before:?}");
                assert!(after.dual >= before.dual);
                assert!(after.gap >= 0.0, "weak duality: {after:?}");
                assert!(report.model.support.len() <= problem.k);
                let w = report.model.to_dense(data.dim());
                let p = primal_value(&data, &loss, 0.02, &w, report.model.intercept);
                match record.outcome {
                    PolishOutcome::Kept => {
                        kept += 1;
                        assert!(after.primal < before.primal);
                        assert!(
                            (p - after.primal).abs() < 1e-9 * p.max(1.0),
                            "{p} {after:?}"
                        );
                    }
                    PolishOutcome::NonSmoothLoss => {
                        assert_eq!(kind, LossKind::Hinge);
                        assert_eq!(after, before);
                    }
                    PolishOutcome::NotLower => assert_eq!(after, before),
                    other => panic!("{kind:?}: unexpected {other:?}"),
                }
            }
        }
    }
    // Three epochs leave room on the support: most smooth fits are improved.
    assert!(kept >= 12, "kept {kept} of 24 smooth fits");
}

/// Nothing to solve and too many unknowns are reported, not attempted.
#[test]
fn reports_why_it_did_not_run() {
    let samples = vec![Sample::new(vec![0], vec![1.0], 1.0, None).unwrap()];
    let data = Dataset::from_samples(&samples, 0);
    let loss = Loss::new(LossKind::Logistic, 0.0).unwrap();
    let problem = Problem::new(&data, loss, 0.1, 1, false).unwrap();
    assert_eq!(
        polish(&problem, &SparseModel::default(), &InTurn),
        Err(PolishOutcome::NothingToSolve)
    );
    let big = SparseModel {
        support: (0..MAX_COORDINATES as u32 + 1).collect(),
        weights: vec![0.0; MAX_COORDINATES + 1],
        intercept: 0.0,
    };
    assert_eq!(
        polish(&problem, &big, &InTurn),
        Err(PolishOutcome::TooManyCoordinates)
    );
}

/// The gather keeps exactly each row's entries on the support, in order, with their positions into
/// the support: against a plain filter, over rows in several chunks (some rows with no entry on the
/// support, one chunk boundary inside a run of such rows), with supports at both ends of `d`.
#[test]
fn the_gather_keeps_each_rows_entries_on_the_support_in_every_chunk() {
    let rows = 3 * crate::solver::spread::MIN_CHUNK_ROWS + 5;
    let samples = synth::sparse_stream(rows, 200, 6, 10, 0.5, true, 11).samples;
    let data = Dataset::from_samples(&samples, 0);
    for support in [
        vec![0u32, 1, 63, 64, 65, 199],
        vec![7u32, 100, 128, 191],
        vec![],
    ] {
        let restricted = Restricted::gather(&data, &support, &InTurn);
        assert_eq!(restricted.rows(), rows);
        assert_eq!(
            restricted.parts.len(),
            crate::solver::spread::chunks_of(rows)
        );
        let chunks = restricted.parts.len();
        for (c, part) in restricted.parts.iter().enumerate() {
            for i in crate::solver::spread::chunk(rows, chunks, c) {
                let r = data.row(i);
                let want: Vec<(u16, f64)> = r
                    .indices
                    .iter()
                    .zip(r.values)
                    .filter_map(|(j, &v)| support.binary_search(j).ok().map(|at| (at as u16, v)))
                    .collect();
                let (pos, val) = part.row(i);
                let got: Vec<(u16, f64)> = pos.iter().copied().zip(val.iter().copied()).collect();
                assert_eq!(got, want, "row {i}, support {support:?}");
            }
        }
    }
}
