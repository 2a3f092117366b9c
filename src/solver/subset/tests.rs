//! Checks of the best-subset solver against references that know nothing of it: a plain
//! coordinate-descent elastic net and exhaustive enumeration of supports; its recorded outputs bit for
//! bit ([`golden`]); the same with the logistic loss ([`logistic`]).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use super::*;
use crate::sample::{Dataset, Sample};

/// A dense problem: `X` (row-major, `n x p`) with AR(rho) correlated columns, `y = X w + noise`, with
/// `k` nonzero weights of magnitude in [1, 2].
struct Dense {
    n: usize,
    p: usize,
    x: Vec<f64>,
    y: Vec<f64>,
}

fn dense_problem(n: usize, p: usize, k: usize, noise: f64, rho: f64, seed: u64) -> Dense {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut x = vec![0.0; n * p];
    for i in 0..n {
        let mut prev = 0.0;
        for j in 0..p {
            let z: f64 = StandardNormal.sample(&mut rng);
            let v = if j == 0 {
                z
            } else {
                rho * prev + (1.0 - rho * rho).sqrt() * z
            };
            // Uneven column scales, so the normalisation matters.
            x[i * p + j] = v * (1.0 + (j % 3) as f64);
            prev = v;
        }
    }
    let mut w = vec![0.0; p];
    for j in 0..k.min(p) {
        let at = (j * p) / k.max(1);
        w[at] = if rng.gen_bool(0.5) { 1.0 } else { -1.0 } * rng.gen_range(1.0..2.0);
    }
    let y = (0..n)
        .map(|i| {
            let clean: f64 = (0..p).map(|j| x[i * p + j] * w[j]).sum();
            let e: f64 = StandardNormal.sample(&mut rng);
            clean + noise * e
        })
        .collect();
    Dense { n, p, x, y }
}

impl Dense {
    fn dataset(&self) -> Dataset {
        let samples: Vec<Sample> = (0..self.n)
            .map(|i| {
                Sample::new(
                    (0..self.p as u32).collect(),
                    self.x[i * self.p..(i + 1) * self.p].to_vec(),
                    self.y[i],
                    None,
                )
                .unwrap()
            })
            .collect();
        Dataset::from_samples(&samples, 0)
    }

    /// Unit-norm columns (column-major) and their norms, computed independently of [`Columns`].
    fn normalised(&self) -> (Vec<Vec<f64>>, Vec<f64>) {
        let mut cols = Vec::new();
        let mut norms = Vec::new();
        for j in 0..self.p {
            let c: Vec<f64> = (0..self.n).map(|i| self.x[i * self.p + j]).collect();
            let norm = c.iter().map(|v| v * v).sum::<f64>().sqrt();
            cols.push(c.iter().map(|v| v / norm).collect());
            norms.push(norm);
        }
        (cols, norms)
    }
}

/// `ln(1 + exp(-m))`, written independently of `crate::loss`.
pub(super) fn log1pexp(m: f64) -> f64 {
    if m > 0.0 {
        (-m).exp().ln_1p()
    } else {
        -m + m.exp().ln_1p()
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Soft-thresholding, `sign(z) max(0, |z| - t)`.
fn soft(z: f64, t: f64) -> f64 {
    z.signum() * (z.abs() - t).max(0.0)
}

/// `lambda1 |b|_1 + lambda2 |b|^2`, written independently of [`Penalty`].
fn l1_l2(b: &[f64], l1: f64, l2: f64) -> f64 {
    b.iter().map(|v| l1 * v.abs() + l2 * v * v).sum::<f64>()
}

/// A reference solver's problem: unit-norm columns, labels, and the support it is restricted to.
#[derive(Clone, Copy)]
struct Restricted<'a> {
    cols: &'a [Vec<f64>],
    y: &'a [f64],
    support: &'a [usize],
}

impl<'a> Restricted<'a> {
    fn new(cols: &'a [Vec<f64>], y: &'a [f64], support: &'a [usize]) -> Self {
        Restricted { cols, y, support }
    }
}

/// Plain cyclic coordinate descent for `(1/2)||y - X_S b||^2 + lambda1 |b|_1 + lambda2 |b|^2` on the
/// columns `support` (unit norm), run to a fixed point. Returns (b over all p, objective).
fn elastic_net(problem: Restricted, l1: f64, l2: f64) -> (Vec<f64>, f64) {
    let Restricted { cols, y, support } = problem;
    let p = cols.len();
    let mut b = vec![0.0; p];
    let mut r = y.to_vec();
    for _ in 0..100_000 {
        let mut moved = 0.0f64;
        for &j in support {
            let z = dot(&cols[j], &r) + b[j];
            let new = soft(z, l1) / (1.0 + 2.0 * l2);
            let delta = new - b[j];
            if delta != 0.0 {
                for (ri, xi) in r.iter_mut().zip(&cols[j]) {
                    *ri -= delta * xi;
                }
                b[j] = new;
                moved = moved.max(delta.abs());
            }
        }
        if moved < 1e-14 {
            break;
        }
    }
    let obj = 0.5 * dot(&r, &r) + l1_l2(&b, l1, l2);
    (b, obj)
}

/// `min_S [R_S + lambda0 |S|]` over every support `S` of `p` features, where `reference(S)` returns the
/// l1 + l2 penalised optimum restricted to `S` as (b over all `p`, objective without lambda0): the global
/// optimum of P (a solution with zeros on S is also feasible for a smaller S, so the minimum over S is
/// exact). Returns (objective, support).
fn enumerate_supports(
    p: usize,
    pen: &Penalty,
    reference: impl Fn(&[usize]) -> (Vec<f64>, f64),
) -> (f64, Vec<usize>) {
    let mut best = (f64::INFINITY, Vec::new());
    for mask in 0u32..(1 << p) {
        let support: Vec<usize> = (0..p).filter(|&j| mask & (1 << j) != 0).collect();
        let (b, value) = reference(&support);
        let value = value + pen.lambda0 * b.iter().filter(|v| **v != 0.0).count() as f64;
        if value < best.0 {
            best = (value, (0..p).filter(|&j| b[j] != 0.0).collect());
        }
    }
    best
}

/// The squared-loss optimum by enumeration, with the elastic net as the per-support reference.
fn enumerate(cols: &[Vec<f64>], y: &[f64], pen: &Penalty) -> (f64, Vec<usize>) {
    enumerate_supports(cols.len(), pen, |support| {
        elastic_net(Restricted::new(cols, y, support), pen.lambda1, pen.lambda2)
    })
}

/// Solves `prob` with Alg. 2 and asserts that its primal is not below `best`, the enumerated optimum (a
/// primal value is that of a feasible point). Returns the primal and the solver.
fn solve_above_enumeration(
    prob: &Dense,
    params: SubsetParams,
    best: f64,
    seed: u64,
) -> (f64, SubsetSolver) {
    let mut solver = SubsetSolver::new(&prob.dataset(), params).unwrap();
    let ours = solver.solve(&mut |_| {}).certificate.primal;
    assert!(
        ours >= best - 1e-9 * best.abs().max(1.0),
        "seed {seed}: below the enumerated optimum?"
    );
    (ours, solver)
}

/// Solves once without screening, every feature active from the start, and once with screening (the
/// rest of `params` alike); asserts that screening removed no feature of the unscreened support and
/// returns how many features it removed.
fn screening_spares_the_unscreened_support(
    data: &Dataset,
    p: usize,
    params: SubsetParams,
    seed: u64,
) -> usize {
    let mut plain = SubsetSolver::new(
        data,
        SubsetParams {
            screening: false,
            ..params
        },
    )
    .unwrap();
    let every: Vec<u32> = (0..p as u32).collect();
    plain.warm_start(&[], &every);
    plain.solve(&mut |_| {});
    let reference = support_of(&plain);
    let mut screened = SubsetSolver::new(data, params).unwrap();
    screened.solve(&mut |_| {});
    assert_not_screened(&screened, &reference, "unscreened", seed);
    screened.screened_features().len()
}

/// [`screening_spares_the_unscreened_support`] on the problem `problem(seed)` of each seed in
/// `0..seeds`; asserts that screening removed more than `at_least` features in all (the test is only
/// meaningful if screening actually fires).
fn screening_spares_the_unscreened_support_over_seeds(
    seeds: u64,
    at_least: usize,
    problem: impl Fn(u64) -> (Dataset, usize, SubsetParams),
) {
    let mut screened_total = 0;
    for seed in 0..seeds {
        let (data, p, params) = problem(seed);
        screened_total += screening_spares_the_unscreened_support(&data, p, params, seed);
    }
    assert!(
        screened_total > at_least,
        "screening removed only {screened_total} features in total"
    );
}

/// Runs Alg. 2 and asserts at every outer step weak duality (`gap >= 0` up to rounding, finite dual) and
/// a primal that never rises. Returns the number of outer steps.
fn check_every_outer_step(data: &Dataset, params: SubsetParams, seed: u64) -> usize {
    let variant = params.variant;
    let mut solver = SubsetSolver::new(data, params).unwrap();
    let mut last = f64::INFINITY;
    let mut steps = 0;
    solver.solve(&mut |s| {
        steps += 1;
        let scale = s.row.primal.abs().max(1.0);
        assert!(s.row.dual.is_finite(), "seed {seed}: dual {}", s.row.dual);
        assert!(
            s.row.gap >= -1e-10 * scale,
            "seed {seed} {variant:?}: gap {} < 0",
            s.row.gap
        );
        assert!(
            s.row.primal <= last + 1e-12 * scale,
            "seed {seed} {variant:?}: P rose {last} -> {}",
            s.row.primal
        );
        last = s.row.primal;
    });
    steps
}

fn params(l0: f64, l1: f64, l2: f64) -> SubsetParams {
    let mut p = SubsetParams::new(Penalty::new(l0, l1, l2).unwrap());
    p.xi = 1e-12;
    p.zeta = 1e-14;
    p
}

/// Asserts that no feature of `support` (the `what` support) was screened out of `solver`.
fn assert_not_screened(solver: &SubsetSolver, support: &[usize], what: &str, seed: u64) {
    let removed = solver.screened_features();
    for j in support {
        assert!(
            !removed.contains(&(*j as u32)),
            "seed {seed}: feature {j} of the {what} support {support:?} was screened out"
        );
    }
}

/// Asserts that a convex (`lambda0 = 0`) solve found the reference weights `reference` (on the
/// unit-norm columns, mapped back by `norms`) and closed its gap.
fn assert_convex_solution(
    solver: &SubsetSolver,
    report: &SubsetReport,
    reference: &[f64],
    norms: &[f64],
    seed: u64,
) {
    let w = solver.model().weights;
    for (j, (r, norm)) in reference.iter().zip(norms).enumerate() {
        let expected = r / norm;
        assert!(
            (w[j] - expected).abs() < 1e-6,
            "seed {seed} feature {j}: {} vs {expected} ({:?}, gap {})",
            w[j],
            report.stop,
            report.certificate.gap
        );
    }
    assert!(
        report.certificate.gap < 1e-6,
        "convex case must close the gap: {}",
        report.certificate.gap
    );
}

fn support_of(s: &SubsetSolver) -> Vec<usize> {
    s.model().support.iter().map(|&j| j as usize).collect()
}

#[test]
fn lambda0_zero_is_the_elastic_net_of_a_plain_coordinate_descent() {
    for seed in 0..6u64 {
        let prob = dense_problem(40, 12, 4, 0.5, 0.5, seed);
        let (cols, norms) = prob.normalised();
        let (l1, l2) = (0.3 + 0.1 * seed as f64, 0.05 * (seed + 1) as f64);
        let all: Vec<usize> = (0..prob.p).collect();
        let (reference, _) = elastic_net(Restricted::new(&cols, &prob.y, &all), l1, l2);
        let mut par = params(0.0, l1, l2);
        par.variant = Variant::PrimDual;
        let mut solver = SubsetSolver::new(&prob.dataset(), par).unwrap();
        let report = solver.solve(&mut |_| {});
        assert_convex_solution(&solver, &report, &reference, &norms, seed);
    }
}

#[test]
fn small_problems_match_enumeration() {
    let mut matched = 0;
    for seed in 0..8u64 {
        let prob = dense_problem(30, 8, 3, 0.3, 0.3, 100 + seed);
        let (cols, _) = prob.normalised();
        let (best, best_support) =
            enumerate(&cols, &prob.y, &Penalty::new(0.5, 0.01, 0.01).unwrap());
        let (ours, solver) = solve_above_enumeration(&prob, params(0.5, 0.01, 0.01), best, seed);
        assert!(
            (ours - best).abs() <= 1e-6 * best.abs().max(1.0),
            "seed {seed}: P = {ours} but the best support {best_support:?} gives {best}; ours {:?}",
            support_of(&solver)
        );
        assert_eq!(support_of(&solver), best_support, "seed {seed}");
        matched += 1;
    }
    assert_eq!(matched, 8);
}

#[test]
fn screening_never_removes_a_feature_selected_without_screening() {
    let lambdas = [
        (0.05, 0.1, 1.0),
        (0.5, 0.05, 0.2),
        (2.0, 0.5, 0.5),
        (0.01, 0.01, 0.05),
    ];
    screening_spares_the_unscreened_support_over_seeds(40, 100, |seed| {
        let (n, p) = if seed % 2 == 0 { (30, 60) } else { (50, 25) };
        let prob = dense_problem(n, p, 4, 0.5 + 0.05 * seed as f64, 0.4, 1000 + seed);
        let (l0, l1, l2) = lambdas[(seed % 4) as usize];
        (prob.dataset(), p, params(l0, l1, l2))
    });
}

#[test]
fn screening_never_removes_a_feature_of_the_enumerated_optimum() {
    for seed in 0..6u64 {
        let prob = dense_problem(20, 10, 3, 0.4, 0.4, 500 + seed);
        let (cols, _) = prob.normalised();
        let pen = Penalty::new(0.2, 0.1, 0.5).unwrap();
        let (_, best_support) = enumerate(&cols, &prob.y, &pen);
        let mut solver = SubsetSolver::new(
            &prob.dataset(),
            params(pen.lambda0, pen.lambda1, pen.lambda2),
        )
        .unwrap();
        solver.solve(&mut |_| {});
        assert_not_screened(&solver, &best_support, "optimal", seed);
    }
}

#[test]
fn weak_duality_and_monotone_primal_at_every_outer_step() {
    for seed in 0..10u64 {
        let prob = dense_problem(40, 80, 5, 1.0, 0.4, 2000 + seed);
        let data = prob.dataset();
        for variant in [Variant::PrimDual, Variant::DualAst] {
            let mut par = SubsetParams::new(Penalty::new(0.3, 0.2, 0.5).unwrap());
            par.variant = variant;
            par.max_outer = 200;
            let steps = check_every_outer_step(&data, par, seed);
            assert!(
                steps >= 2,
                "seed {seed}: the incremental loop should take several outer steps"
            );
        }
    }
}

#[test]
fn above_lambda0_max_the_zero_model_is_certified_optimal() {
    let prob = dense_problem(30, 20, 3, 0.5, 0.3, 7);
    let mut solver = SubsetSolver::new(&prob.dataset(), params(1.0, 0.1, 1.0)).unwrap();
    let max = solver.lambda0_max();
    solver
        .set_penalty(Penalty::new(max * 1.01, 0.1, 1.0).unwrap())
        .unwrap();
    let report = solver.solve(&mut |_| {});
    assert_eq!(solver.model().support.len(), 0);
    assert!(
        report.certificate.gap.abs() < 1e-9,
        "gap {}",
        report.certificate.gap
    );
    assert_eq!(report.stop, SubsetStop::Converged);
}

#[test]
fn path_is_warm_started_and_is_no_worse_than_a_cold_solve() {
    let prob = dense_problem(60, 30, 4, 0.2, 0.2, 9);
    let data = prob.dataset();
    let mut solver = SubsetSolver::new(&data, params(0.05, 0.05, 0.1)).unwrap();
    let lambdas = geometric_path(solver.lambda0_max(), 0.05, 8);
    assert_eq!(lambdas.len(), 8);
    assert!(lambdas.windows(2).all(|w| w[0] > w[1]));
    let points = solver.path(&lambdas, &mut |_, _| {}).unwrap();
    assert_eq!(points[0].support_size, 0);
    assert!(points.last().unwrap().support_size >= 4, "{points:?}");
    let mut cold = SubsetSolver::new(&data, params(0.05, 0.05, 0.1)).unwrap();
    let cold_report = cold.solve(&mut |_| {});
    // l0 has local minima: on this seed the path finds a strictly better one than the cold start.
    let warm = points.last().unwrap().primal;
    assert!(
        warm <= cold_report.certificate.primal * (1.0 + 1e-9),
        "warm {warm} cold {}",
        cold_report.certificate.primal
    );
    assert!(points
        .iter()
        .all(|pt| pt.gap >= -1e-9 * pt.primal.abs().max(1.0)));
}

#[test]
fn weights_are_reported_in_the_original_scale() {
    let prob = dense_problem(40, 10, 3, 0.3, 0.0, 3);
    let mut scaled = Dense {
        n: prob.n,
        p: prob.p,
        x: prob.x.clone(),
        y: prob.y.clone(),
    };
    for i in 0..prob.n {
        scaled.x[i * prob.p + 2] *= 10.0;
    }
    let solve = |d: &Dense| {
        let mut s = SubsetSolver::new(&d.dataset(), params(0.1, 0.05, 0.2)).unwrap();
        let report = s.solve(&mut |_| {});
        (s.model().weights.to_vec(), report.certificate.primal)
    };
    let (w, p) = solve(&prob);
    let (ws, ps) = solve(&scaled);
    assert!((p - ps).abs() < 1e-9 * p.abs());
    assert!((w[2] - 10.0 * ws[2]).abs() < 1e-8, "{} vs {}", w[2], ws[2]);
    for j in (0..prob.p).filter(|&j| j != 2) {
        assert!((w[j] - ws[j]).abs() < 1e-8);
    }
    // objective_of re-evaluates P from caller-scale weights.
    let s = SubsetSolver::new(&prob.dataset(), params(0.1, 0.05, 0.2)).unwrap();
    assert!((s.objective_of(&w) - p).abs() < 1e-9 * p.abs());
}

#[test]
fn bad_parameters_are_errors() {
    assert!(Penalty::new(-1.0, 0.0, 1.0).is_err());
    assert!(Penalty::new(0.0, 0.0, 0.0).is_err());
    assert!(Penalty::new(f64::NAN, 0.0, 1.0).is_err());
    let prob = dense_problem(5, 3, 1, 0.1, 0.0, 1);
    let mut par = params(0.1, 0.1, 1.0);
    par.c = 0.0;
    assert!(matches!(
        SubsetSolver::new(&prob.dataset(), par),
        Err(SubsetError::Parameter { name: "c", .. })
    ));
    let empty = Dataset::from_samples(&[], 0);
    assert_eq!(
        SubsetSolver::new(&empty, params(0.1, 0.1, 1.0)).unwrap_err(),
        SubsetError::NoSamples
    );
}

#[test]
fn warm_start_from_a_published_model_resumes_where_it_left_off() {
    // What a daemon learner does on each resolve: a new solver on the (possibly changed) window, warm
    // started from the last published weights and active set.
    let prob = dense_problem(60, 40, 4, 0.3, 0.3, 21);
    let data = prob.dataset();
    let par = params(0.2, 0.1, 0.3);
    let mut cold = SubsetSolver::new(&data, par).unwrap();
    let cold_report = cold.solve(&mut |_| {});
    let published: Vec<(u32, f64)> = cold
        .model()
        .support
        .iter()
        .map(|&j| (j, cold.model().weights[j as usize]))
        .collect();
    let active = cold.active_set();
    let mut warm = SubsetSolver::new(&data, par).unwrap();
    warm.warm_start(&published, &active);
    let mut first = None;
    let warm_report = warm.solve(&mut |s| {
        first.get_or_insert(s.row.primal);
    });
    let p = cold_report.certificate.primal;
    assert!(
        (first.unwrap() - p).abs() <= 1e-9 * p.abs(),
        "the first warm step starts at the cold optimum"
    );
    assert!(warm_report.certificate.primal <= p * (1.0 + 1e-12));
    assert!(
        warm_report.outer_steps <= 5 && warm_report.outer_steps <= cold_report.outer_steps,
        "{} warm vs {} cold outer steps",
        warm_report.outer_steps,
        cold_report.outer_steps
    );
    assert_eq!(warm.model().support, cold.model().support);
    // A window that gained rows: the old model is a valid, good start (P is evaluated on the new data).
    let more = dense_problem(80, 40, 4, 0.3, 0.3, 21);
    let mut moved = SubsetSolver::new(&more.dataset(), par).unwrap();
    moved.warm_start(&published, &active);
    let report = moved.solve(&mut |s| assert!(s.row.gap >= -1e-9 * s.row.primal.abs()));
    assert!(report.certificate.gap.is_finite());
}

mod golden;

mod logistic;
