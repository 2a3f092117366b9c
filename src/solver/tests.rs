//! Theory checks for the solvers: weak duality, sparsity, the ridge closed form, best-subset recovery.

use super::driver::{run, StopRule};
use super::objective::primal_value;
use super::primal::{cholesky_solve, Htp, Iht};
use super::sdiht::offline::Sdiht;
use super::{Problem, Solver, StepRule};
use crate::loss::{Loss, LossKind};
use crate::sample::{Dataset, Row, Sample, SampleSet};
use crate::synth;

fn classify(samples: &[Sample]) -> Vec<Sample> {
    samples
        .iter()
        .map(|s| {
            let mut s = s.clone();
            s.label = if s.label >= 0.0 { 1.0 } else { -1.0 };
            s
        })
        .collect()
}

fn solvers(p: &Problem<Dataset>, seed: u64) -> Vec<Box<dyn Solver<Dataset>>> {
    vec![
        Box::new(Sdiht::new(p, 1, StepRule::Adaptive, seed).unwrap()),
        Box::new(Sdiht::new(p, 4, StepRule::Adaptive, seed).unwrap()),
        Box::new(Sdiht::new(p, 1, StepRule::Coordinate, seed).unwrap()),
        Box::new(Sdiht::new(p, 4, StepRule::Coordinate, seed).unwrap()),
        Box::new(Iht::new(p)),
        Box::new(Htp::new(p)),
    ]
}

#[test]
fn weak_duality_and_sparsity_at_every_step_of_every_solver() {
    for seed in 0..4u64 {
        let problem = synth::sparse_stream(60, 30, 4, 8, 0.3, false, seed);
        let regression = Dataset::from_samples(&problem.samples, 0);
        let classes = Dataset::from_samples(&classify(&problem.samples), 0);
        for kind in [
            LossKind::Squared,
            LossKind::Huber,
            LossKind::Hinge,
            LossKind::Logistic,
        ] {
            let data = if kind == LossKind::Squared {
                &regression
            } else {
                &classes
            };
            for intercept in [false, true] {
                let loss = Loss::new(kind, 0.25).unwrap();
                let p = Problem::new(data, loss, 0.05, 5, intercept).unwrap();
                for mut solver in solvers(&p, seed) {
                    let stop = untimed(0.0, 40, 1);
                    let mut rows = 0;
                    let name = solver.name();
                    run(&p, solver.as_mut(), &stop, &mut |row| {
                        rows += 1;
                        let scale = row.primal.abs().max(1.0);
                        assert!(
                            row.gap >= -1e-9 * scale,
                            "{} {kind} intercept={intercept}: negative gap {} at epoch {}",
                            name,
                            row.gap,
                            row.epoch
                        );
                        assert!(row.support_size <= 5);
                    });
                    assert_eq!(rows, 40);
                    let nnz = solver.model().weights.iter().filter(|w| **w != 0.0).count();
                    assert!(nnz <= 5, "{} has {nnz} nonzeros", solver.name());
                }
            }
        }
    }
}

/// `(2/N X^T X + lambda I) w = (2/N) X^T y`, the minimiser of the squared-loss objective without `H_k`.
fn ridge_closed_form(data: &Dataset, lambda: f64, features: &[usize]) -> Vec<f64> {
    let k = features.len();
    let n = data.len() as f64;
    let mut gram = vec![0.0; k * k];
    let mut rhs = vec![0.0; k];
    for i in 0..data.len() {
        let r = data.row(i);
        let mut dense = vec![0.0; k];
        for (pos, &j) in features.iter().enumerate() {
            if let Ok(at) = r.indices.binary_search(&(j as u32)) {
                dense[pos] = r.values[at];
            }
        }
        for a in 0..k {
            rhs[a] += 2.0 / n * dense[a] * r.label;
            for b in 0..k {
                gram[a * k + b] += 2.0 / n * dense[a] * dense[b];
            }
        }
    }
    for a in 0..k {
        gram[a * k + a] += lambda;
    }
    assert!(cholesky_solve(&mut gram, &mut rhs, k));
    rhs
}

#[test]
fn diht_with_k_equal_d_reaches_the_ridge_closed_form() {
    let problem = synth::sparse_stream(80, 15, 6, 6, 0.5, false, 11);
    let data = Dataset::from_samples(&problem.samples, 0);
    let d = data.dim();
    let lambda = 0.1;
    let loss = Loss::new(LossKind::Squared, 0.0).unwrap();
    let p = Problem::new(&data, loss, lambda, d, false).unwrap();
    let mut diht = Sdiht::new(&p, 1, StepRule::Adaptive, 0).unwrap();
    let stop = untimed(1e-13, 20000, 10);
    let report = run(&p, &mut diht, &stop, &mut |_| {});
    let expected = ridge_closed_form(&data, lambda, &(0..d).collect::<Vec<_>>());
    let got = Solver::<Dataset>::model(&diht).weights.to_vec();
    let err = expected
        .iter()
        .zip(&got)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(
        err < 1e-6,
        "max |w - w_ridge| = {err:e} after {} epochs ({:?})",
        report.epochs,
        report.stop_reason
    );
    assert!(
        report.certificate.gap.abs() < 1e-8,
        "gap {}",
        report.certificate.gap
    );
}

/// With squared loss the unpenalised intercept is the mean of the residual, so with `k = d` DIHT with
/// an intercept reaches the ridge closed form on centred columns and a centred response, whatever the
/// response's offset, with `b = mean(y) - mean(x).w`; `P >= D` at every epoch and the gap closes (the
/// dual's `sum alpha = 0` is exact for squared loss, whose dual domain is the whole line).
#[test]
fn squared_loss_with_an_intercept_is_ridge_on_centred_data_and_certified() {
    let problem = synth::sparse_stream(80, 12, 6, 6, 0.5, false, 5);
    let offset = 40.0;
    let shifted: Vec<Sample> = problem
        .samples
        .iter()
        .map(|s| {
            let mut s = s.clone();
            s.label += offset;
            s
        })
        .collect();
    let data = Dataset::from_samples(&shifted, 0);
    let (n, d, lambda) = (data.len(), data.dim(), 0.1);
    let loss = Loss::new(LossKind::Squared, 0.0).unwrap();
    let p = Problem::new(&data, loss, lambda, d, true).unwrap();
    let mut diht = Sdiht::new(&p, 1, StepRule::Adaptive, 0).unwrap();
    let stop = untimed(1e-13, 20000, 10);
    let report = run(&p, &mut diht, &stop, &mut |row| {
        assert!(row.gap >= -1e-9 * row.primal.abs().max(1.0), "{row:?}");
    });
    // Centre every column and the response; the ridge solution of the centred data.
    let mut mean_x = vec![0.0; d];
    let mut mean_y = 0.0;
    for i in 0..n {
        let r = data.row(i);
        mean_y += r.label / n as f64;
        for (&j, &v) in r.indices.iter().zip(r.values) {
            mean_x[j as usize] += v / n as f64;
        }
    }
    let centred: Vec<Sample> = (0..n)
        .map(|i| {
            let r = data.row(i);
            let mut dense: Vec<f64> = mean_x.iter().map(|m| -m).collect();
            for (&j, &v) in r.indices.iter().zip(r.values) {
                dense[j as usize] += v;
            }
            Sample::new((0..d as u32).collect(), dense, r.label - mean_y, None).unwrap()
        })
        .collect();
    let expected = ridge_closed_form(
        &Dataset::from_samples(&centred, d),
        lambda,
        &(0..d).collect::<Vec<_>>(),
    );
    let model = Solver::<Dataset>::model(&diht);
    let err = expected
        .iter()
        .zip(model.weights)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    let b = mean_y
        - mean_x
            .iter()
            .zip(&expected)
            .map(|(m, w)| m * w)
            .sum::<f64>();
    assert!(
        err < 1e-6,
        "max |w - w_ridge| = {err:e} ({:?})",
        report.stop_reason
    );
    assert!(
        (model.intercept - b).abs() < 1e-6,
        "b {} vs {b}",
        model.intercept
    );
    let c = report.certificate;
    assert!(c.gap >= -1e-9 && c.gap < 1e-8, "{c:?}");
    // Without the intercept the same data costs far more: the weights cannot carry the offset.
    let p0 = Problem::new(&data, loss, lambda, d, false).unwrap();
    let mut diht0 = Sdiht::new(&p0, 1, StepRule::Adaptive, 0).unwrap();
    let report0 = run(&p0, &mut diht0, &stop, &mut |_| {});
    assert!(
        report0.certificate.primal > 2.0 * c.primal,
        "{:?} vs {c:?}",
        report0.certificate
    );
}

/// Enumerates every support of size k and returns the best (support, objective).
fn best_subset(data: &Dataset, lambda: f64, k: usize) -> (Vec<u32>, f64) {
    let d = data.dim();
    let loss = Loss::new(LossKind::Squared, 0.0).unwrap();
    let mut best = (Vec::new(), f64::INFINITY);
    for subset in all_supports(d, k) {
        let weights = ridge_closed_form(data, lambda, &subset);
        let mut w = vec![0.0; d];
        for (&j, &v) in subset.iter().zip(&weights) {
            w[j] = v;
        }
        let value = primal_value(data, &loss, lambda, &w, 0.0);
        if value < best.1 {
            best = (subset.iter().map(|&j| j as u32).collect(), value);
        }
    }
    best
}

/// Every support of size `k` of `0..d`, in lexicographic order.
pub(crate) fn all_supports(d: usize, k: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut s: Vec<usize> = (0..k).collect();
    loop {
        out.push(s.clone());
        let mut i = k;
        while i > 0 && s[i - 1] == d - k + i - 1 {
            i -= 1;
        }
        if i == 0 {
            return out;
        }
        s[i - 1] += 1;
        for m in i..k {
            s[m] = s[m - 1] + 1;
        }
    }
}

/// Runs `solver` for `epochs` certified epochs, asserting a non-negative gap at each; the gaps and
/// support sizes.
pub(crate) fn gap_trace(
    p: &Problem<Dataset>,
    solver: &mut dyn Solver<Dataset>,
    epochs: usize,
) -> Vec<(f64, usize)> {
    let stop = untimed(0.0, epochs, 1);
    let mut trace = Vec::new();
    run(p, solver, &stop, &mut |row| {
        assert!(
            row.gap >= -1e-9 * row.primal.abs().max(1.0),
            "negative gap {} at epoch {}",
            row.gap,
            row.epoch
        );
        trace.push((row.gap, row.support_size));
    });
    trace
}

/// A row of unit weight.
pub(crate) fn row<'a>(indices: &'a [u32], values: &'a [f64], label: f64) -> Row<'a> {
    Row {
        indices,
        values,
        label,
        weight: 1.0,
    }
}

/// A stop rule without a time budget.
pub(crate) fn untimed(tol: f64, max_epochs: usize, cadence: usize) -> StopRule {
    StopRule {
        tol,
        max_epochs,
        time_budget: None,
        cadence,
        patience: 0,
    }
}

#[test]
fn diht_finds_the_enumerated_best_subset_and_closes_the_gap() {
    let mut closed = 0;
    for seed in 0..5u64 {
        let problem = synth::sparse_stream(60, 12, 3, 12, 0.02, false, 100 + seed);
        let data = Dataset::from_samples(&problem.samples, 12);
        // lambda large against the noise, so the sparse saddle point of Thm 3 exists.
        let (lambda, k) = (0.5, 3);
        let (support, best) = best_subset(&data, lambda, k);
        assert_eq!(
            support,
            problem.true_support(),
            "the planted support is the best subset"
        );
        let loss = Loss::new(LossKind::Squared, 0.0).unwrap();
        let p = Problem::new(&data, loss, lambda, k, false).unwrap();
        let mut diht = Sdiht::new(&p, 1, StepRule::Adaptive, seed).unwrap();
        let stop = untimed(1e-10, 20000, 10);
        let report = run(&p, &mut diht, &stop, &mut |_| {});
        assert_eq!(Solver::<Dataset>::model(&diht).support, support.as_slice());
        assert!(
            (report.certificate.primal - best).abs() < 1e-6 * best.max(1.0),
            "seed {seed}: P = {} vs best {best}, gap {}, {:?} after {}",
            report.certificate.primal,
            report.certificate.gap,
            report.stop_reason,
            report.epochs
        );
        // Thm 3: a sparse saddle point exists here, so the gap goes to ~0.
        assert!(
            report.certificate.gap < 1e-8,
            "seed {seed}: gap {}",
            report.certificate.gap
        );
        closed += 1;
    }
    assert_eq!(closed, 5);
}

#[test]
fn sdiht_is_deterministic_for_a_seed() {
    let problem = synth::sparse_stream(100, 40, 5, 10, 0.2, false, 3);
    let data = Dataset::from_samples(&problem.samples, 0);
    let loss = Loss::new(LossKind::Squared, 0.0).unwrap();
    let p = Problem::new(&data, loss, 0.05, 5, false).unwrap();
    let fit = |seed| {
        let mut s = Sdiht::new(&p, 5, StepRule::Adaptive, seed).unwrap();
        let stop = untimed(0.0, 20, 5);
        run(&p, &mut s, &stop, &mut |_| {});
        Solver::<Dataset>::model(&s).weights.to_vec()
    };
    assert_eq!(fit(9), fit(9));
}

#[test]
fn invalid_problems_are_rejected() {
    let data = Dataset::from_samples(&[Sample::new(vec![0], vec![1.0], 3.0, None).unwrap()], 0);
    let hinge = Loss::new(LossKind::Hinge, 0.0).unwrap();
    assert!(Problem::new(&data, hinge, 0.1, 1, false).is_err());
    let sq = Loss::new(LossKind::Squared, 0.0).unwrap();
    assert!(Problem::new(&data, sq, 0.0, 1, false).is_err());
    assert!(Problem::new(&data, sq, 0.1, 0, false).is_err());
    let p = Problem::new(&data, sq, 0.1, 1, false).unwrap();
    assert!(Sdiht::new(&p, 2, StepRule::Adaptive, 0).is_err());
    assert!(Sdiht::new(&p, 1, StepRule::Constant(-1.0), 0).is_err());
}
