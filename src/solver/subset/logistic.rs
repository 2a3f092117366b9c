//! The logistic loss for the best-subset solver: its conjugate, dual point, projected dual ascent step and
//! majorised coordinate step, the pieces Alg. 1 ([`super::inner`]) needs. The derivation is in the
//! [module docs](super).
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
use super::dual::{set_coordinate, Penalty};
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

/// One projected super-gradient ascent step on the dual (8): `alpha_i += omega g_i` with `g_i = u_i -
/// l*'(alpha_i)`, `u = y - resid` (Remark E.2), then projected onto `F = {y a in [-1, 0]}` (clipping;
/// `l*'` is evaluated with `b` clipped to `[1e-12, 1 - 1e-12]`).
pub fn ascent_step(y: &[f64], resid: &[f64], omega: f64, alpha: &mut [f64]) {
    for ((a, &r), &yi) in alpha.iter_mut().zip(resid).zip(y) {
        let g = (yi - r) - LOSS.conjugate_derivative(*a, yi);
        *a = LOSS.project(*a + omega * g, yi);
    }
}

/// One sweep of the majorised coordinate step over `A`, in place; keeps `resid = y - X beta`.
pub fn coordinate_sweep(
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
        let new = coordinate(penalty, beta[j] - grad / CURVATURE_BOUND);
        set_coordinate(cols, j, new, beta, resid);
    }
}

#[cfg(test)]
mod tests {
    use crate::solver::subset::logistic as lg;
    use crate::solver::subset::tests::log1pexp;
    use crate::solver::subset::Penalty;

    #[test]
    fn conjugate_dual_point_and_coordinate_step_are_the_scalar_definitions() {
        for &y in &[1.0, -1.0] {
            // l*(a) = sup_u a u - l(u), by a fine grid, at feasible a = -y b.
            for &b in &[0.1, 0.3, 0.5, 0.8, 0.95] {
                let a = -y * b;
                let sup = (-40_000..40_000)
                    .map(|t| {
                        let u = t as f64 * 1e-3;
                        a * u - log1pexp(y * u)
                    })
                    .fold(f64::NEG_INFINITY, f64::max);
                let ours = lg::conjugate_sum(&[y], &[a]);
                assert!((ours - sup).abs() < 1e-6, "y {y} b {b}: {ours} vs {sup}");
            }
            // Fenchel equality at the dual point of a margin: l(u) + l*(l'(u)) = u l'(u).
            for &u in &[-3.0, -0.5, 0.0, 0.7, 4.0] {
                let mut alpha = [0.0];
                lg::dual_point(&[y], &[y - u], &mut alpha);
                let lhs = log1pexp(y * u) + lg::conjugate_sum(&[y], &alpha);
                assert!((lhs - u * alpha[0]).abs() < 1e-12, "y {y} u {u}");
                assert!((-y * alpha[0]) > 0.0 && (-y * alpha[0]) < 1.0);
            }
        }
        // The majorised step minimises (1/8)(b - b~)^2 + g(b).
        let pen = Penalty::new(0.05, 0.1, 0.3).unwrap();
        for &bt in &[-3.0, -1.0, -0.4, 0.0, 0.2, 0.6, 1.5, 4.0] {
            let obj = |b: f64| (b - bt) * (b - bt) / 8.0 + pen.value(b);
            let ours = lg::coordinate(&pen, bt);
            let brute = (-500_000..=500_000)
                .map(|t| t as f64 * 1e-5)
                .map(obj)
                .fold(f64::INFINITY, f64::min)
                .min(obj(0.0));
            assert!(obj(ours) <= brute + 1e-9, "b~ {bt}: {ours}");
        }
    }
}
