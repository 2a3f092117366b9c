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
    let samples: Vec<Sample> = (0..n)
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
    Dataset::from_samples(&samples, 0).with_mean_weight_one()
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
                assert!((got - want).abs() < 1e-9, "the projection meets the constraint");
            }
        }
        assert!(p.chunks(c).all(|r| r.iter().all(|&v| v >= 0.0)
            && (r.iter().sum::<f64>() - 1.0).abs() < 1e-12));
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
                .map(|_| if intercept { rng.gen_range(-2.0..2.0) } else { 0.0 })
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

/// Minimises `P` restricted to the rows `support` (and the intercepts) by damped Newton, to a
/// gradient of norm 1e-11.
fn restricted_optimum(problem: &SoftmaxProblem<Dataset>, support: &[u32]) -> f64 {
    let (c, k) = (problem.classes, support.len());
    let m = (k + 1) * c;
    // Variables: W's rows (k x C), then b (C); a sample's features on them are (x_S, 1).
    let mut v = vec![0.0; m];
    let split = |v: &[f64]| (v[..k * c].to_vec(), v[k * c..].to_vec());
    let (w, b) = split(&v);
    let mut value = primal_value(problem, support, &w, &b);
    for _ in 0..100 {
        let (w, b) = split(&v);
        let u = certificate::margins(problem, support, &w);
        let mut grad = vec![0.0; m];
        let mut hess = vec![0.0; m * m];
        let (mut p, mut lp, mut s) = (vec![0.0; c], vec![0.0; c], vec![0.0; c]);
        for i in 0..problem.data.len() {
            let row = problem.data.row(i);
            let f: Vec<f64> = support
                .iter()
                .map(|&j| row.values[j as usize])
                .chain([if problem.intercept { 1.0 } else { 0.0 }])
                .collect();
            for cl in 0..c {
                s[cl] = u[i * c + cl] + b[cl];
            }
            simplex::softmax(&s, &mut p, &mut lp);
            let scale = row.weight / problem.n();
            let y = problem.class_of(i);
            for (a, &fa) in f.iter().enumerate() {
                for cl in 0..c {
                    let r = p[cl] - if cl == y { 1.0 } else { 0.0 };
                    grad[a * c + cl] += scale * fa * r;
                    for (bb, &fb) in f.iter().enumerate() {
                        for cm in 0..c {
                            let h = if cl == cm { p[cl] } else { 0.0 } - p[cl] * p[cm];
                            hess[(a * c + cl) * m + bb * c + cm] += scale * fa * fb * h;
                        }
                    }
                }
            }
        }
        for a in 0..m {
            let ridge = if a < k * c { problem.lambda } else { 1e-9 };
            hess[a * m + a] += ridge;
            if a < k * c {
                grad[a] += problem.lambda * v[a];
            }
        }
        let norm: f64 = grad.iter().map(|g| g * g).sum::<f64>().sqrt();
        if norm < 1e-11 {
            break;
        }
        let dir = solve(hess, grad.clone(), m);
        let slope: f64 = dir.iter().zip(&grad).map(|(d, g)| d * g).sum();
        let mut t = 1.0;
        loop {
            let trial: Vec<f64> = v.iter().zip(&dir).map(|(a, d)| a - t * d).collect();
            let (tw, tb) = split(&trial);
            let tv = primal_value(problem, support, &tw, &tb);
            if tv <= value - 1e-4 * t * slope || t < 1e-12 {
                (v, value) = (trial, tv.min(value));
                break;
            }
            t *= 0.5;
        }
    }
    value
}

/// `A x = r` by Gaussian elimination with partial pivoting (`A` row-major `m x m`).
fn solve(mut a: Vec<f64>, mut r: Vec<f64>, m: usize) -> Vec<f64> {
    for col in 0..m {
        let pivot = (col..m)
            .max_by(|&x, &y| a[x * m + col].abs().total_cmp(&a[y * m + col].abs()))
            .unwrap();
        for j in 0..m {
            a.swap(col * m + j, pivot * m + j);
        }
        r.swap(col, pivot);
        for row in col + 1..m {
            let f = a[row * m + col] / a[col * m + col];
            for j in col..m {
                a[row * m + j] -= f * a[col * m + j];
            }
            r[row] -= f * r[col];
        }
    }
    let mut x = vec![0.0; m];
    for row in (0..m).rev() {
        let s: f64 = (row + 1..m).map(|j| a[row * m + j] * x[j]).sum();
        x[row] = (r[row] - s) / a[row * m + row];
    }
    x
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
        assert!(cert.dual <= optimum + 1e-9, "D = {} > P* = {optimum}", cert.dual);
        assert!(cert.primal >= optimum - 1e-9, "P = {} < P* = {optimum}", cert.primal);
        assert_eq!(report.model.support, best_support);
        assert!(
            cert.primal - optimum < 1e-6,
            "seed {seed}: P = {} vs P* = {optimum} (gap {})",
            cert.primal,
            cert.gap
        );
    }
}
