use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::certificate::{certify, dual_value, primal_value, project};
use super::driver::run;
use super::*;
use crate::sample::{Dataset, Sample};
use crate::solver::driver::StopRule;

/// `n` rows of `d` dense Gaussian features, the classes from a planted model on the first two
/// features (`classes` classes), with a little label noise and weights in `[0.5, 1.5]` when `weighted`.
fn planted(n: usize, d: usize, classes: usize, seed: u64, weighted: bool) -> Dataset {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut samples: Vec<Sample> = (0..n)
        .map(|_| {
            let x: Vec<f64> = (0..d).map(|_| rng.gen_range(-1.0..1.0)).collect();
            let scores: Vec<f64> = (0..classes)
                .map(|c| {
                    let angle = c as f64 * std::f64::consts::TAU / classes as f64;
                    3.0 * (angle.cos() * x[0] + angle.sin() * x[1]) + rng.gen_range(-0.5..0.5)
                })
                .collect();
            let label = (0..classes)
                .max_by(|&a, &b| scores[a].total_cmp(&scores[b]))
                .unwrap();
            let weight = weighted.then(|| rng.gen_range(0.5..1.5));
            Sample::new((0..d as u32).collect(), x, label as f64, weight).unwrap()
        })
        .collect();
    crate::sample::mean_weight_one(&mut samples);
    Dataset::from_samples(&samples, 0)
}

fn random_simplex(rng: &mut ChaCha8Rng, c: usize) -> Vec<f64> {
    let raw: Vec<f64> = (0..c).map(|_| -rng.gen_range(1e-9f64..1.0).ln()).collect();
    let total: f64 = raw.iter().sum();
    raw.iter().map(|v| v / total).collect()
}

fn stop(epochs: usize) -> StopRule {
    StopRule {
        tol: 1e-10,
        max_epochs: epochs,
        time_budget: None,
        cadence: 1,
        patience: 0,
    }
}

#[test]
fn weak_duality_holds_on_random_states() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for trial in 0..40 {
        let (d, c) = (2 + trial % 5, 2 + trial % 4);
        let k = 1 + trial % d;
        let intercept = trial % 2 == 0;
        let data = planted(15 + trial, d, c, trial as u64, trial % 3 == 0);
        let lambda = 10f64.powf(rng.gen_range(-3.0..0.0));
        let problem = SoftmaxProblem::new(&data, c, lambda, k, intercept).unwrap();
        // Random feasible duals.
        let mut p: Vec<f64> = (0..data.len())
            .flat_map(|_| random_simplex(&mut rng, c))
            .collect();
        if intercept {
            project(&problem, &mut p);
            for cl in 0..c {
                let (mut got, mut want) = (0.0, 0.0);
                for i in 0..data.len() {
                    let w = data.row(i).weight;
                    got += w * p[i * c + cl];
                    want += if problem.class_of(i) == cl { w } else { 0.0 };
                }
                assert!(
                    (got - want).abs() < 1e-9,
                    "the projection meets the constraint"
                );
            }
        }
        assert!(p
            .chunks(c)
            .all(|r| r.iter().all(|&v| v >= 0.0) && (r.iter().sum::<f64>() - 1.0).abs() < 1e-12));
        let dual = dual_value(&problem, &p);
        // Random k-row-sparse models, with and without intercepts.
        for _ in 0..20 {
            let mut rows: Vec<u32> = (0..d as u32).collect();
            for j in (1..rows.len()).rev() {
                rows.swap(j, rng.gen_range(0..=j));
            }
            let mut support: Vec<u32> = rows[..rng.gen_range(0..=k)].to_vec();
            support.sort_unstable();
            let weights: Vec<f64> = (0..support.len() * c)
                .map(|_| rng.gen_range(-3.0..3.0))
                .collect();
            let b: Vec<f64> = (0..c)
                .map(|_| {
                    if intercept {
                        rng.gen_range(-2.0..2.0)
                    } else {
                        0.0
                    }
                })
                .collect();
            let primal = primal_value(&problem, &support, &weights, &b);
            assert!(
                primal >= dual - 1e-12,
                "trial {trial}: P = {primal} < D = {dual}"
            );
        }
        // And the solver's own states, epoch by epoch.
        let mut state = SoftmaxState::new(&problem, 1 + trial % 4, trial as u64);
        for _ in 0..5 {
            state.epoch(&problem);
            let cert = certify(&problem, &state);
            assert!(cert.gap >= 0.0, "trial {trial}: {cert:?}");
        }
    }
}

#[test]
fn a_block_step_never_lowers_the_dual_with_the_intercept_fixed() {
    let data = planted(40, 6, 4, 3, false);
    let problem = SoftmaxProblem::new(&data, 4, 0.01, 2, false).unwrap();
    let mut state = SoftmaxState::new(&problem, 3, 1);
    let mut last = dual_value(&problem, &state.p);
    assert_eq!(last, 0.0, "p = e_y is alpha = 0");
    for _ in 0..10 {
        state.epoch(&problem);
        let now = dual_value(&problem, &state.p);
        assert!(now >= last - 1e-12, "D fell from {last} to {now}");
        last = now;
    }
    assert!(last > 0.1);
}

/// Minimises `P` restricted to the rows `support` (and the intercepts) from zero, by the polish.
fn restricted_optimum(problem: &SoftmaxProblem<Dataset>, support: &[u32]) -> f64 {
    let c = problem.classes;
    let (mut w, mut b) = (vec![0.0; support.len() * c], vec![0.0; c]);
    polish::polish(problem, support, &mut w, &mut b).unwrap()
}

#[test]
fn the_solver_finds_the_optimum_that_enumerating_every_support_finds() {
    // d = 5, k = 2, C = 3: ten supports, each a smooth strongly convex problem solved to 1e-10.
    for (seed, intercept, lambda) in [(1, true, 0.05), (2, false, 0.02), (3, true, 0.2)] {
        let data = planted(60, 5, 3, seed, seed == 3);
        let problem = SoftmaxProblem::new(&data, 3, lambda, 2, intercept).unwrap();
        let mut optimum = f64::INFINITY;
        let mut best_support = vec![];
        for a in 0..5u32 {
            for b in a + 1..5 {
                let value = restricted_optimum(&problem, &[a, b]);
                if value < optimum {
                    (optimum, best_support) = (value, vec![a, b]);
                }
            }
        }
        assert_eq!(best_support, vec![0, 1], "the planted rows are the optimum");
        let mut state = SoftmaxState::new(&problem, 1, seed);
        let report = run(&problem, &mut state, &stop(300), &mut |_| {});
        let cert = report.certificate;
        assert!(
            cert.dual <= optimum + 1e-9,
            "D = {} > P* = {optimum}",
            cert.dual
        );
        assert!(
            cert.primal >= optimum - 1e-9,
            "P = {} < P* = {optimum}",
            cert.primal
        );
        assert_eq!(report.model.support, best_support);
        // The polish from the search's model lands on the same optimum.
        let (mut w, mut b) = (
            report.model.weights.clone(),
            report.model.intercepts.clone(),
        );
        let polished = polish::polish(&problem, &report.model.support, &mut w, &mut b).unwrap();
        assert!((polished - optimum).abs() < 1e-9, "{polished} vs {optimum}");
        assert!(
            cert.primal - optimum < 1e-6,
            "seed {seed}: P = {} vs P* = {optimum} (gap {})",
            cert.primal,
            cert.gap
        );
    }
}
