//! The logistic loss for the best-subset solver: its conjugate, dual point, majorised coordinate step
//! and Alg. 1 (PrimDual / DualAst) on an active set. The derivation is in the [module docs](super).
//!
//! Conventions (the paper's, as for squared loss): `l(u, y) = ln(1 + exp(-y u))` summed over samples,
//! `y in {-1, +1}`, no sample weights. The state keeps `resid = y - X beta` like the squared solver, so
//! the margins are `u_i = y_i - resid_i`; the scalar kernels are [`crate::loss::Loss::Logistic`]'s (same
//! sign convention: `l*(a) = b ln b + (1 - b) ln(1 - b)`, `b = -y a in [0, 1]`).
//!
//! The coordinate step (the logistic T): along a unit column `x_j`, `sum_i l(u_i + t x_ij)` has curvature
//! `sum_i x_ij^2 l''(.) <= 1/4`, so `f(beta_j + t) <= f + t g_j + t^2/8` with `g_j = x_j . l'(u)`. The
//! step minimises that bound plus `g(b)`: `b = argmin (1/8)(b - b~)^2 + g(b)`, `b~ = beta_j - 4 g_j`,
//! i.e. the squared T (13) with every lambda scaled by 4 (`sign(b~)(|b~| - 4 lambda1)/(1 + 8 lambda2)`
//! if that is `>= sqrt(8 lambda0 / (1 + 8 lambda2))`, else 0). Since `beta_j` itself is a candidate and
//! the bound touches `f` there, no step increases `P`.

use super::columns::Columns;
use super::dual::Penalty;
use super::inner::{sigma_max_sq, InnerOptions, InnerOutcome, Scratch, State, Variant, PATIENCE};
use crate::loss::{Logistic, Loss};

/// `gamma = mu = 4`: `l*''(a) = 1 / (b (1 - b)) >= 4` on `F`, so `l*` is 4-strongly convex there.
pub const LOGISTIC_GAMMA: f64 = 4.0;

/// Upper bound on `l''` (the curvature the coordinate step majorises with).
pub const CURVATURE_BOUND: f64 = 0.25;

const LOSS: Loss = Loss::Logistic(Logistic);

/// `sum_i l(y_i - resid_i, y_i)`.
pub fn loss_of_residual(y: &[f64], resid: &[f64]) -> f64 {
    y.iter()
        .zip(resid)
        .map(|(&y, &r)| LOSS.value(y - r, y))
        .sum()
}

/// `sum_i l*(alpha_i)` (`+inf` if some `alpha_i` is infeasible).
pub fn conjugate_sum(y: &[f64], alpha: &[f64]) -> f64 {
    y.iter()
        .zip(alpha)
        .map(|(&y, &a)| LOSS.conjugate(a, y))
        .sum()
}

/// The dual point of a primal iterate, `alpha_i = l'(u_i) = -y_i / (1 + exp(y_i u_i))` (Remark E.3;
/// always strictly feasible).
pub fn dual_point(y: &[f64], resid: &[f64], alpha: &mut [f64]) {
    for ((a, &y), &r) in alpha.iter_mut().zip(y).zip(resid) {
        *a = LOSS.derivative(y - r, y);
    }
}

/// Labels must be +-1 and samples unweighted (the conjugate above is for unit weights).
pub fn check_labels(y: &[f64]) -> Result<(), (usize, f64)> {
    match y.iter().position(|&v| v != 1.0 && v != -1.0) {
        Some(i) => Err((i, y[i])),
        None => Ok(()),
    }
}

/// The majorised coordinate step of the module docs, for `b~ = beta_j - 4 x_j . l'(u)`.
#[inline]
pub fn coordinate(penalty: &Penalty, b_tilde: f64) -> f64 {
    let scale = 1.0 / CURVATURE_BOUND;
    Penalty {
        lambda0: scale * penalty.lambda0,
        lambda1: scale * penalty.lambda1,
        lambda2: scale * penalty.lambda2,
    }
    .coordinate(b_tilde)
}

/// `P_A(beta) = sum_i l(u_i) + sum_{j in A} g(beta_j)`.
pub fn sub_primal(
    cols: &Columns,
    penalty: &Penalty,
    active: &[usize],
    beta: &[f64],
    resid: &[f64],
) -> f64 {
    loss_of_residual(cols.y(), resid) + active.iter().map(|&j| penalty.value(beta[j])).sum::<f64>()
}

/// `D_A(alpha) = -sum_i l*(alpha_i) + sum_{j in A} Psi(eta_j(alpha))`.
pub fn sub_dual(cols: &Columns, penalty: &Penalty, active: &[usize], alpha: &[f64]) -> f64 {
    -conjugate_sum(cols.y(), alpha)
        + active
            .iter()
            .map(|&j| penalty.psi(penalty.eta(cols.dot(j, alpha))))
            .sum::<f64>()
}

/// One sweep of the majorised coordinate step over `A`, in place; keeps `resid = y - X beta`.
fn coordinate_sweep(
    cols: &Columns,
    penalty: &Penalty,
    active: &[usize],
    beta: &mut [f64],
    resid: &mut [f64],
) {
    let y = cols.y();
    for &j in active {
        let (rows, vals) = cols.column(j);
        let grad: f64 = rows
            .iter()
            .zip(vals)
            .map(|(&i, &x)| {
                let i = i as usize;
                x * LOSS.derivative(y[i] - resid[i], y[i])
            })
            .sum();
        let old = beta[j];
        let new = coordinate(penalty, old - grad / CURVATURE_BOUND);
        if new != old {
            cols.axpy(j, old - new, resid);
            beta[j] = new;
        }
    }
}

/// Buffers of the logistic inner solve (no allocation inside the iteration loop).
#[derive(Debug, Default, Clone)]
pub struct LogisticScratch {
    linked: Vec<f64>,
    linked_resid: Vec<f64>,
    link_resid: Vec<f64>,
    ascent: Vec<f64>,
    point: Vec<f64>,
    best_alpha: Vec<f64>,
    best_beta: Vec<f64>,
    best_resid: Vec<f64>,
}

/// Alg. 1 for the logistic loss on `active`, with the same choices as the squared [`super::inner`]:
/// 1. dual ascent at the exact super-gradient `g_i = x_i . B(eta(alpha)) - l*'(alpha_i)` (or at the
///    CD iterate), `alpha_i += omega g_i`, then the feasibility projection onto `F = {y a in [-1, 0]}`
///    (clipping; `l*'` is evaluated with `b` clipped to `[1e-12, 1 - 1e-12]`);
/// 2. the link `beta' = B(eta(alpha))`, taken by PrimDual only when it lowers `P_A`;
/// 3. PrimDual: one sweep of the majorised coordinate step;
/// 4. both the ascent iterate and the primal's dual point `l'(X beta)` are scored by `D_A`; best kept.
///
/// `omega` defaults to `1 / (4 + 1.1 sigma_max(X_A)^2 / (2 lambda2))`: the squared default with `l*''`
/// replaced by its minimum 4 on `F` (near the boundary of `F` the dual is stiffer, which the projection
/// and keeping the best dual point make harmless).
pub fn solve(
    cols: &Columns,
    penalty: &Penalty,
    active: &[usize],
    options: &InnerOptions,
    state: &mut State,
    power: &mut Scratch,
    scratch: &mut LogisticScratch,
) -> InnerOutcome {
    let y = cols.y();
    let omega = options.omega.unwrap_or_else(|| {
        1.0 / (LOGISTIC_GAMMA + 1.1 * sigma_max_sq(cols, active, power) / (2.0 * penalty.lambda2))
    });
    let mut best_primal = sub_primal(cols, penalty, active, &state.beta, &state.resid);
    let mut best_dual = sub_dual(cols, penalty, active, &state.alpha);
    scratch.best_alpha.clear();
    scratch.best_alpha.extend_from_slice(&state.alpha);
    scratch.best_beta.clear();
    scratch
        .best_beta
        .extend(active.iter().map(|&j| state.beta[j]));
    scratch.best_resid.clear();
    scratch.best_resid.extend_from_slice(&state.resid);
    scratch.ascent.clear();
    scratch.ascent.extend_from_slice(&state.alpha);
    scratch.point.resize(cols.n(), 0.0);
    scratch.linked.resize(active.len(), 0.0);
    scratch.link_resid.clear();
    scratch.link_resid.extend_from_slice(&state.resid);
    let mut previous_gap = best_primal - best_dual;
    let mut iterations = 0;
    let mut stale = 0;
    while iterations < options.max_iterations {
        iterations += 1;
        // 1. Projected super-gradient ascent: g_i = u_i - l*'(alpha_i), u = y - resid.
        let toward: &[f64] = if options.exact_supergradient {
            &scratch.link_resid
        } else {
            &state.resid
        };
        for ((a, &r), &yi) in scratch.ascent.iter_mut().zip(toward).zip(y) {
            let g = (yi - r) - LOSS.conjugate_derivative(*a, yi);
            *a = LOSS.project(*a + omega * g, yi);
        }
        // 2. The link, and D_A of the ascent iterate.
        let mut psi_sum = 0.0;
        for (a, &j) in active.iter().enumerate() {
            let eta = penalty.eta(cols.dot(j, &scratch.ascent));
            scratch.linked[a] = penalty.link(eta);
            psi_sum += penalty.psi(eta);
        }
        let ascent_dual = -conjugate_sum(y, &scratch.ascent) + psi_sum;
        if ascent_dual > best_dual {
            best_dual = ascent_dual;
            scratch.best_alpha.copy_from_slice(&scratch.ascent);
        }
        scratch.linked_resid.clear();
        scratch.linked_resid.extend_from_slice(y);
        for (a, &j) in active.iter().enumerate() {
            if scratch.linked[a] != 0.0 {
                cols.axpy(j, -scratch.linked[a], &mut scratch.linked_resid);
            }
        }
        scratch.link_resid.copy_from_slice(&scratch.linked_resid);
        let linked_primal = loss_of_residual(y, &scratch.linked_resid)
            + scratch
                .linked
                .iter()
                .map(|&b| penalty.value(b))
                .sum::<f64>();
        let current_primal = sub_primal(cols, penalty, active, &state.beta, &state.resid);
        let take_link = match options.variant {
            Variant::DualAst => true,
            Variant::PrimDual => linked_primal < current_primal,
        };
        if take_link {
            for (a, &j) in active.iter().enumerate() {
                state.beta[j] = scratch.linked[a];
            }
            std::mem::swap(&mut state.resid, &mut scratch.linked_resid);
        }
        // 3. Majorised coordinate descent.
        if options.variant == Variant::PrimDual {
            coordinate_sweep(cols, penalty, active, &mut state.beta, &mut state.resid);
        }
        // 4. Scores: the primal iterate and its dual point l'(X beta).
        let primal = sub_primal(cols, penalty, active, &state.beta, &state.resid);
        if primal < best_primal {
            best_primal = primal;
            for (a, &j) in active.iter().enumerate() {
                scratch.best_beta[a] = state.beta[j];
            }
            scratch.best_resid.copy_from_slice(&state.resid);
        }
        dual_point(y, &state.resid, &mut scratch.point);
        let primal_point_dual = sub_dual(cols, penalty, active, &scratch.point);
        if primal_point_dual > best_dual {
            best_dual = primal_point_dual;
            scratch.best_alpha.copy_from_slice(&scratch.point);
        }
        let gap = best_primal - best_dual;
        if gap <= options.xi {
            break;
        }
        if previous_gap - gap > options.zeta {
            previous_gap = gap;
            stale = 0;
        } else {
            stale += 1;
            if stale >= PATIENCE {
                break;
            }
        }
    }
    for (a, &j) in active.iter().enumerate() {
        state.beta[j] = scratch.best_beta[a];
    }
    state.resid.copy_from_slice(&scratch.best_resid);
    state.alpha.copy_from_slice(&scratch.best_alpha);
    InnerOutcome {
        iterations,
        primal: best_primal,
        dual: best_dual,
    }
}
