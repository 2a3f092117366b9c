//! The shared-support softmax model's certificate: `P(W, b)`, `D(p)` at feasible duals, the
//! projection of any duals onto the intercept's constraint, and the intercept's refit for a fixed `W`
//! (`docs/multiclass.md` derives each).

use super::simplex::{log_sum_exp, neg_entropy, softmax};
use super::{SoftmaxProblem, SoftmaxState};
use crate::sample::SampleSet;
use crate::solver::Certificate;
use crate::sparse::{top_k_indices, ThresholdScratch};

/// Sweeps of the intercept's refit (each class in turn), at most.
const INTERCEPT_SWEEPS: usize = 500;

/// `W^T x_i` (no intercept) of every row, row-major `N x C`, for the model with rows `weights`
/// (`|S| x C`) on `support`.
pub fn margins<S: SampleSet>(
    problem: &SoftmaxProblem<S>,
    support: &[u32],
    weights: &[f64],
) -> Vec<f64> {
    let (n, c) = (problem.data.len(), problem.classes);
    let mut at = vec![u32::MAX; problem.data.dim()];
    for (pos, &j) in support.iter().enumerate() {
        if (j as usize) < at.len() {
            at[j as usize] = pos as u32;
        }
    }
    let mut out = vec![0.0; n * c];
    for i in 0..n {
        let row = problem.data.row(i);
        let ui = &mut out[i * c..(i + 1) * c];
        for (&j, &x) in row.indices.iter().zip(row.values) {
            let pos = at[j as usize];
            if pos != u32::MAX {
                let w = &weights[pos as usize * c..(pos as usize + 1) * c];
                for (u, &wc) in ui.iter_mut().zip(w) {
                    *u += x * wc;
                }
            }
        }
    }
    out
}

/// `P(W, b) = (1/N) sum_i c_i (ln sum_c e^(u_ic + b_c) - u_(i y_i) - b_(y_i)) + (lambda/2) ||W||^2`.
pub fn primal_value<S: SampleSet>(
    problem: &SoftmaxProblem<S>,
    support: &[u32],
    weights: &[f64],
    b: &[f64],
) -> f64 {
    let c = problem.classes;
    let u = margins(problem, support, weights);
    let mut loss = 0.0;
    let mut scores = vec![0.0; c];
    for i in 0..problem.data.len() {
        for (s, (&m, &bc)) in scores.iter_mut().zip(u[i * c..(i + 1) * c].iter().zip(b)) {
            *s = m + bc;
        }
        let y = problem.class_of(i);
        loss += problem.data.row(i).weight * (log_sum_exp(&scores) - scores[y]);
    }
    let norm: f64 = weights.iter().map(|w| w * w).sum();
    loss / problem.n() + 0.5 * problem.lambda * norm
}

/// `D(p) = -(1/N) sum_i c_i sum_c p_ic ln p_ic - (lambda/2) ||H_k(W~(p))||^2`, for duals `p` (row-major
/// `N x C`, each row on the simplex) that satisfy the intercept's constraint when the problem has one.
pub fn dual_value<S: SampleSet>(problem: &SoftmaxProblem<S>, p: &[f64]) -> f64 {
    let (n, c, d) = (problem.data.len(), problem.classes, problem.data.dim());
    let mut z = vec![0.0; d * c];
    let mut conj = 0.0;
    for i in 0..n {
        let row = problem.data.row(i);
        let pi = &p[i * c..(i + 1) * c];
        conj += row.weight * neg_entropy(pi);
        let y = problem.class_of(i);
        for (&j, &x) in row.indices.iter().zip(row.values) {
            let zj = &mut z[j as usize * c..(j as usize + 1) * c];
            for (cl, (zc, &pc)) in zj.iter_mut().zip(pi).enumerate() {
                let alpha = pc - if cl == y { 1.0 } else { 0.0 };
                *zc += row.weight * x * alpha;
            }
        }
    }
    let row_sq: Vec<f64> = z.chunks(c).map(|r| r.iter().map(|v| v * v).sum()).collect();
    let mut scratch = ThresholdScratch::default();
    let kept: f64 = top_k_indices(&row_sq, problem.k, &mut scratch)
        .iter()
        .map(|&j| row_sq[j as usize])
        .sum();
    let scale = problem.scale();
    -conj / problem.n() - 0.5 * problem.lambda * scale * scale * kept
}

/// `n_c = sum_(i: y_i = c) c_i` and `sum_i c_i`.
fn class_mass<S: SampleSet>(problem: &SoftmaxProblem<S>) -> (Vec<f64>, f64) {
    let mut mass = vec![0.0; problem.classes];
    for i in 0..problem.data.len() {
        mass[problem.class_of(i)] += problem.data.row(i).weight;
    }
    let total = mass.iter().sum();
    (mass, total)
}

/// Makes duals `p` (rows on the simplex) satisfy the intercept's constraint
/// `sum_i c_i p_i = n` (the class masses): `p_i <- (1 - t)(p_i - delta) + t pi` with
/// `delta = (sum_i c_i p_i - n) / sum_i c_i`, `pi = n / sum_i c_i` (the class frequencies) and the
/// least `t` in `[0, 1]` that leaves every entry non-negative. Rows keep summing to 1 (`delta` sums
/// to 0), the constraint holds for every `t`, and `t = 1` (every row `pi`) is always feasible, so the
/// result is a feasible dual point; for duals that already satisfy it, nothing moves.
pub fn project<S: SampleSet>(problem: &SoftmaxProblem<S>, p: &mut [f64]) {
    let (n, c) = (problem.data.len(), problem.classes);
    let (mass, total) = class_mass(problem);
    if total.is_nan() || total <= 0.0 {
        return;
    }
    // A class no sample has (a fold of a cross-validation) must have no probability anywhere.
    if mass.iter().any(|&m| m <= 0.0) {
        for row in p.chunks_mut(c) {
            for (value, &m) in row.iter_mut().zip(&mass) {
                if m <= 0.0 {
                    *value = 0.0;
                }
            }
            let kept: f64 = row.iter().sum();
            for (value, &m) in row.iter_mut().zip(&mass) {
                *value = if kept > 0.0 { *value / kept } else { m / total };
            }
        }
    }
    let mut delta = mass.iter().map(|m| -m / total).collect::<Vec<_>>();
    for i in 0..n {
        let weight = problem.data.row(i).weight;
        for cl in 0..c {
            delta[cl] += weight * p[i * c + cl] / total;
        }
    }
    let mut t: f64 = 0.0;
    for i in 0..n {
        for cl in 0..c {
            let shifted = p[i * c + cl] - delta[cl];
            if shifted < 0.0 {
                let prior = mass[cl] / total;
                t = t.max(-shifted / (prior - shifted));
            }
        }
    }
    let t = t.min(1.0);
    for i in 0..n {
        for cl in 0..c {
            let shifted = p[i * c + cl] - delta[cl];
            p[i * c + cl] = ((1.0 - t) * shifted + t * mass[cl] / total).max(0.0);
        }
    }
}

/// Sets `b` to the intercepts minimising `P(W, b)` for `W = scale * Z` on `support`: the optimum has
/// `sum_i c_i softmax(u_i + b)_c = n_c` for every class. One class at a time, `b_c += ln(n_c / P_c)`
/// (`P_c` the class's current mass of probability): with the other intercepts fixed this step never
/// passes the class's optimum (`P_c(b_c + s) <= e^s P_c` for `s > 0`, `>=` for `s < 0`), so each
/// class's `P_c` moves monotonically towards `n_c` and the sweeps descend the convex objective.
/// The result is centred (the loss does not change when every `b_c` moves alike).
pub fn refit_intercept<S: SampleSet>(
    problem: &SoftmaxProblem<S>,
    support: &[u32],
    z: &[f64],
    b: &mut [f64],
) {
    let (n, c) = (problem.data.len(), problem.classes);
    let scale = problem.scale();
    let weights: Vec<f64> = support
        .iter()
        .flat_map(|&j| {
            z[j as usize * c..(j as usize + 1) * c]
                .iter()
                .map(move |v| scale * v)
        })
        .collect();
    let u = margins(problem, support, &weights);
    let (mass, _) = class_mass(problem);
    // probabilities under the current b, kept up to date class by class.
    let mut prob = vec![0.0; n * c];
    let mut log_p = vec![0.0; c];
    let mut scores = vec![0.0; c];
    for i in 0..n {
        for cl in 0..c {
            scores[cl] = u[i * c + cl] + b[cl];
        }
        softmax(&scores, &mut prob[i * c..(i + 1) * c], &mut log_p);
    }
    for _ in 0..INTERCEPT_SWEEPS {
        let mut largest: f64 = 0.0;
        for cl in 0..c {
            let current: f64 = (0..n)
                .map(|i| problem.data.row(i).weight * prob[i * c + cl])
                .sum();
            if current.is_nan() || current <= 0.0 || mass[cl] <= 0.0 {
                continue;
            }
            let step = (mass[cl] / current).ln().clamp(-30.0, 30.0);
            largest = largest.max(step.abs());
            b[cl] += step;
            let factor = step.exp();
            for i in 0..n {
                let pi = &mut prob[i * c..(i + 1) * c];
                let norm = 1.0 + (factor - 1.0) * pi[cl];
                for (other, value) in pi.iter_mut().enumerate() {
                    if other == cl {
                        *value *= factor / norm;
                    } else {
                        *value /= norm;
                    }
                }
            }
        }
        if largest < 1e-12 {
            break;
        }
    }
    let mean = b.iter().sum::<f64>() / c as f64;
    b.iter_mut().for_each(|v| *v -= mean);
}

/// `P` at the state's model against the better of two feasible duals: the state's own (projected
/// onto the intercept's constraint when there is one) and the model's dual point
/// `p_i = softmax(W^T x_i + b)`, the optimal dual for that model (also projected).
pub fn certify<S: SampleSet>(problem: &SoftmaxProblem<S>, state: &SoftmaxState) -> Certificate {
    let c = problem.classes;
    let weights = state.weights(problem);
    let support = state.support();
    let primal = primal_value(problem, support, &weights, &state.b);
    let mut own = state.p.clone();
    let u = margins(problem, support, &weights);
    let mut of_model = vec![0.0; u.len()];
    let mut scores = vec![0.0; c];
    let mut log_p = vec![0.0; c];
    for i in 0..problem.data.len() {
        for cl in 0..c {
            scores[cl] = u[i * c + cl] + state.b[cl];
        }
        softmax(&scores, &mut of_model[i * c..(i + 1) * c], &mut log_p);
    }
    if problem.intercept {
        project(problem, &mut own);
        project(problem, &mut of_model);
    }
    let dual = dual_value(problem, &own).max(dual_value(problem, &of_model));
    Certificate::new(primal, dual, problem.data.len())
}

/// `P` of the empty model with its best intercepts (`b_c = ln n_c`: the class frequencies), or
/// `W = 0, b = 0` without an intercept; returns the value and the intercepts.
pub fn empty_model<S: SampleSet>(problem: &SoftmaxProblem<S>) -> (f64, Vec<f64>) {
    let c = problem.classes;
    let mut b = vec![0.0; c];
    if problem.intercept {
        let (mass, _) = class_mass(problem);
        for (bc, m) in b.iter_mut().zip(&mass) {
            *bc = if *m > 0.0 { m.ln() } else { -30.0 };
        }
        let mean = b.iter().sum::<f64>() / c as f64;
        b.iter_mut().for_each(|v| *v -= mean);
    }
    (primal_value(problem, &[], &[], &b), b)
}
