//! The objective, its dual and the primal-dual gap certificate shared by every solver.
//!
//! Problem (1.1) of the DIHT paper: `P(w, b) = (1/N) sum_i c_i l(w.x_i + b, y_i) + (lambda/2) ||w||^2`
//! over `||w||_0 <= k` (`b` is the optional unpenalised intercept, 0 when off).
//!
//! Dual (Lemma 1): `D(alpha) = -(1/N) sum_i l_i*(alpha_i) - (lambda/2) ||H_k(w~(alpha))||^2` with
//! `w~(alpha) = -(1/(lambda N)) sum_i alpha_i x_i`. Weak duality `P(w, b) >= D(alpha)` holds for every
//! k-sparse `w` and feasible `alpha` (Thm 1), so `P - D` certifies how far a model is from optimal.
//!
//! **Intercept.** `b` is free and unpenalised, so the Lagrangian's `inf_b (1/N) b sum_i alpha_i` is
//! `-inf` unless `sum_i alpha_i = 0`: the intercept enters the dual as the equality constraint
//! `sum_i alpha_i = 0`, with `D` unchanged on it. Dual points are therefore projected onto
//! `F^N ∩ {sum alpha = 0}` ([`project_with_sum`]) and `b` itself is recovered by minimising `P` over `b`
//! for the current `w` ([`best_intercept`]).

use crate::loss::Loss;
use crate::sample::SampleSet;
use crate::sparse::{hard_threshold, sparse_axpy, sparse_dot, ThresholdScratch};

/// A primal value, a dual value and their gap, over the same samples.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Certificate {
    pub primal: f64,
    pub dual: f64,
    pub gap: f64,
    /// Number of samples the objective was evaluated on.
    pub samples: usize,
}

impl Certificate {
    pub fn new(primal: f64, dual: f64, samples: usize) -> Certificate {
        Certificate {
            primal,
            dual,
            gap: primal - dual,
            samples,
        }
    }

    /// `(P - D) / max(1, |P|)`: the stopping measure.
    pub fn relative_gap(&self) -> f64 {
        self.gap / self.primal.abs().max(1.0)
    }
}

/// `P(w, b)`.
pub fn primal_value<S: SampleSet>(data: &S, loss: &Loss, lambda: f64, w: &[f64], b: f64) -> f64 {
    let n = data.len().max(1) as f64;
    let mut sum = 0.0;
    for i in 0..data.len() {
        let r = data.row(i);
        sum += loss
            .sample(r.label, r.weight)
            .value(sparse_dot(r.indices, r.values, w) + b);
    }
    sum / n + 0.5 * lambda * sq_norm(w)
}

pub fn sq_norm(w: &[f64]) -> f64 {
    w.iter().map(|v| v * v).sum()
}

/// `sum_i c_i l*(alpha_i / c_i)` (the unnormalised conjugate sum).
pub fn conjugate_sum<S: SampleSet>(data: &S, loss: &Loss, alpha: &[f64]) -> f64 {
    (0..data.len())
        .map(|i| {
            let r = data.row(i);
            loss.sample(r.label, r.weight).conjugate(alpha[i])
        })
        .sum()
}

/// Reusable buffers for evaluating `D(alpha)`.
#[derive(Debug, Default, Clone)]
pub struct DualScratch {
    pub w_tilde: Vec<f64>,
    pub w: Vec<f64>,
    pub support: Vec<u32>,
    pub threshold: ThresholdScratch,
}

/// `D(alpha)` from scratch (O(nnz + d)). `alpha` must be feasible (and sum to 0 with an intercept).
pub fn dual_value<S: SampleSet>(
    data: &S,
    loss: &Loss,
    lambda: f64,
    k: usize,
    alpha: &[f64],
    scratch: &mut DualScratch,
) -> f64 {
    let n = data.len().max(1) as f64;
    scratch.w_tilde.clear();
    scratch.w_tilde.resize(data.dim(), 0.0);
    for (i, &a) in alpha.iter().enumerate().take(data.len()) {
        let r = data.row(i);
        sparse_axpy(-a / (lambda * n), r.indices, r.values, &mut scratch.w_tilde);
    }
    hard_threshold(
        &scratch.w_tilde,
        k,
        &mut scratch.w,
        &mut scratch.support,
        &mut scratch.threshold,
    );
    -conjugate_sum(data, loss, alpha) / n - 0.5 * lambda * sq_norm(&scratch.w)
}

/// The dual point of a primal iterate (Thm 1(b)): `alpha_i = l'(w.x_i + b)` projected onto `F`, and with
/// an intercept onto `{sum alpha = 0}` as well.
pub fn dual_of_primal<S: SampleSet>(
    data: &S,
    loss: &Loss,
    w: &[f64],
    b: f64,
    intercept: bool,
    alpha: &mut Vec<f64>,
) {
    alpha.clear();
    for i in 0..data.len() {
        let r = data.row(i);
        let u = sparse_dot(r.indices, r.values, w) + b;
        alpha.push(loss.sample(r.label, r.weight).dual_of_margin(u));
    }
    if intercept {
        project_with_sum(data, loss, alpha, 0.0);
    }
}

/// Projects `alpha` onto `F^N ∩ {sum alpha = target}` by shifting: `alpha_i <- P_F(alpha_i - tau)` with
/// `tau` found by bisection (the sum is monotone in `tau`). For squared loss `tau` is the mean excess.
/// When the target is out of reach (e.g. one class only) the closest reachable sum is used.
pub fn project_with_sum<S: SampleSet>(data: &S, loss: &Loss, alpha: &mut [f64], target: f64) {
    project_rows_with_sum(loss, alpha, target, |i| {
        let r = data.row(i);
        (r.label, r.weight)
    });
}

/// [`project_with_sum`] over any rows described by `(label, weight)` of slot `i`.
pub fn project_rows_with_sum(
    loss: &Loss,
    alpha: &mut [f64],
    target: f64,
    label_weight: impl Fn(usize) -> (f64, f64),
) {
    if alpha.is_empty() {
        return;
    }
    if !loss.is_classification() {
        let tau = (alpha.iter().sum::<f64>() - target) / alpha.len() as f64;
        alpha.iter_mut().for_each(|a| *a -= tau);
        return;
    }
    let shifted_sum = |alpha: &[f64], tau: f64| -> f64 {
        alpha
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                let (y, c) = label_weight(i);
                loss.sample(y, c).project(a - tau)
            })
            .sum()
    };
    // Every feasible alpha_i lies in [-c_i, c_i], so shifts beyond the widest box are saturated.
    let width = (0..alpha.len())
        .map(|i| label_weight(i).1)
        .fold(0.0, f64::max)
        * 2.0
        + 1.0;
    let (mut lo, mut hi) = (-width, width);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        // The sum decreases as tau grows.
        if shifted_sum(alpha, mid) > target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let tau = 0.5 * (lo + hi);
    for (i, a) in alpha.iter_mut().enumerate() {
        let (y, c) = label_weight(i);
        *a = loss.sample(y, c).project(*a - tau);
    }
}

/// The intercept minimising `P(w, b)` over `b` for fixed `w`: the root of `sum_i c_i l'(u_i + b)`,
/// closed form for squared loss, bisection otherwise. `margins` holds `u_i = w.x_i`.
pub fn best_intercept<S: SampleSet>(data: &S, loss: &Loss, margins: &[f64]) -> f64 {
    if data.is_empty() {
        return 0.0;
    }
    if !loss.is_classification() {
        let (mut num, mut den) = (0.0, 0.0);
        for (i, &u) in margins.iter().enumerate() {
            let r = data.row(i);
            num += r.weight * (r.label - u);
            den += r.weight;
        }
        return num / den;
    }
    let slope = |b: f64| -> f64 {
        margins
            .iter()
            .enumerate()
            .map(|(i, &u)| {
                let r = data.row(i);
                loss.sample(r.label, r.weight).derivative(u + b)
            })
            .sum()
    };
    let spread = margins.iter().fold(0.0f64, |m, u| m.max(u.abs())) + 2.0;
    let (mut lo, mut hi) = (-spread, spread);
    // A single-class problem has no finite minimiser; stop at the edge of the margins.
    if slope(lo) >= 0.0 {
        return lo;
    }
    if slope(hi) <= 0.0 {
        return hi;
    }
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if slope(mid) < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Margins `u_i = w.x_i` of every sample (no intercept).
pub fn margins_into<S: SampleSet>(data: &S, w: &[f64], out: &mut Vec<f64>) {
    out.clear();
    out.extend((0..data.len()).map(|i| {
        let r = data.row(i);
        sparse_dot(r.indices, r.values, w)
    }));
}
