//! The l0 + l1 + l2 penalty, its primal-dual link and the dual (Ren & Qian, eqs. 6-8 and 10-13), and the
//! squared loss's pieces of Alg. 1 (its conjugate, dual ascent step and coordinate sweep T (13)).
//!
//! For unit columns `x_j` and a dual point `alpha` (one entry per sample):
//!
//! - `eta_j(alpha) = -(1/(2 lambda2)) x_j . alpha` and the threshold
//!   `eta0 = (2 sqrt(lambda0 lambda2) + lambda1) / (2 lambda2)`;
//! - the link B (6)/(11): `beta_j = sign(eta_j)(|eta_j| - lambda1/(2 lambda2))` if `|eta_j| >= eta0`, else 0;
//! - `Psi(eta_j)` (7)/(10): `-lambda2 (|eta_j| - lambda1/(2 lambda2))^2 + lambda0` if `|eta_j| >= eta0`,
//!   else 0. It is `min_b { -2 lambda2 eta_j b + g(b) }` with `g(b) = lambda0 [b != 0] + lambda1 |b| +
//!   lambda2 b^2`, the per-feature part of `min_beta L(beta, alpha)`, so `Psi <= 0` and is concave in alpha;
//! - `D(alpha) = -sum_i l*(alpha_i) + sum_j Psi(eta_j(alpha))` (8).
//!
//! Weak duality `D(alpha) <= L(beta, alpha) <= P(beta)` holds for every `beta` and feasible `alpha`
//! because `D` is a minimum of the Lagrangian (4) over `beta` and `P` its maximum over `alpha`; it does
//! not need a saddle point. Strong duality can fail for l0 problems: the gap at the l0 optimum is then
//! positive, which is why the outer loop also stops when the gap stops changing.
//!
//! Squared loss (Sec. 3.1), the paper's convention: `l(u, y) = (1/2)(y - u)^2`, `l*(a) = a^2/2 + y a`,
//! `F = R`, `l*'(a) = a + y`; the dual point of a primal `beta` is `alpha = X beta - y` (Remark E.3). Note
//! the factor 1/2 and the SUM over samples: this is NOT the `(1/N) sum (y - u)^2` of [`crate::loss`].

use thiserror::Error;

use super::columns::Columns;

/// `lambda0 ||beta||_0 + lambda1 ||beta||_1 + lambda2 ||beta||_2^2` (lambda2 without a 1/2).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Penalty {
    pub lambda0: f64,
    pub lambda1: f64,
    pub lambda2: f64,
}

#[derive(Debug, Error, PartialEq)]
pub enum PenaltyError {
    #[error("lambda0 and lambda1 must be finite and >= 0, got lambda0 = {0}, lambda1 = {1}")]
    Negative(f64, f64),
    #[error("lambda2 must be finite and > 0 (the dual needs it), got {0}")]
    Lambda2(f64),
}

impl Penalty {
    pub fn new(lambda0: f64, lambda1: f64, lambda2: f64) -> Result<Penalty, PenaltyError> {
        let ok = |v: f64| v.is_finite() && v >= 0.0;
        if !(ok(lambda0) && ok(lambda1)) {
            return Err(PenaltyError::Negative(lambda0, lambda1));
        }
        if !(lambda2.is_finite() && lambda2 > 0.0) {
            return Err(PenaltyError::Lambda2(lambda2));
        }
        Ok(Penalty {
            lambda0,
            lambda1,
            lambda2,
        })
    }

    /// `g(b) = lambda0 [b != 0] + lambda1 |b| + lambda2 b^2`.
    #[inline]
    pub fn value(&self, b: f64) -> f64 {
        if b == 0.0 {
            0.0
        } else {
            self.lambda0 + self.lambda1 * b.abs() + self.lambda2 * b * b
        }
    }

    /// `eta0 = (2 sqrt(lambda0 lambda2) + lambda1) / (2 lambda2)`.
    pub fn eta0(&self) -> f64 {
        self.screen_threshold() / (2.0 * self.lambda2)
    }

    /// `2 lambda2 eta0 = 2 sqrt(lambda0 lambda2) + lambda1`: the right-hand side of the screening test (16).
    pub fn screen_threshold(&self) -> f64 {
        2.0 * (self.lambda0 * self.lambda2).sqrt() + self.lambda1
    }

    /// `eta_j = -(1/(2 lambda2)) x_j . alpha` from `x_j . alpha`.
    #[inline]
    pub fn eta(&self, x_dot_alpha: f64) -> f64 {
        -x_dot_alpha / (2.0 * self.lambda2)
    }

    /// The primal-dual link B (6)/(11) (the tie `|eta| = eta0` resolves to the nonzero branch, as (11)).
    #[inline]
    pub fn link(&self, eta: f64) -> f64 {
        if eta.abs() >= self.eta0() && eta != 0.0 {
            eta.signum() * (eta.abs() - self.lambda1 / (2.0 * self.lambda2))
        } else {
            0.0
        }
    }

    /// `Psi(eta)` (7)/(10).
    #[inline]
    pub fn psi(&self, eta: f64) -> f64 {
        if eta.abs() >= self.eta0() && eta != 0.0 {
            let s = eta.abs() - self.lambda1 / (2.0 * self.lambda2);
            -self.lambda2 * s * s + self.lambda0
        } else {
            0.0
        }
    }

    /// The primal coordinate step T (13) for a unit column: given `b~ = x_j . (y - X beta) + beta_j`,
    /// the exact minimiser of `(1/2)(b~ - b)^2 + g(b)`: `sign(b~)(|b~| - lambda1)/(1 + 2 lambda2)` if that
    /// magnitude is `>= sqrt(2 lambda0 / (1 + 2 lambda2))`, else 0.
    #[inline]
    pub fn coordinate(&self, b_tilde: f64) -> f64 {
        let shrunk = (b_tilde.abs() - self.lambda1) / (1.0 + 2.0 * self.lambda2);
        if shrunk > 0.0 && shrunk >= (2.0 * self.lambda0 / (1.0 + 2.0 * self.lambda2)).sqrt() {
            b_tilde.signum() * shrunk
        } else {
            0.0
        }
    }
}

/// `sum_i l*(alpha_i)` for the 1/2-squared loss: `sum_i alpha_i^2 / 2 + y_i alpha_i`.
pub fn squared_conjugate_sum(y: &[f64], alpha: &[f64]) -> f64 {
    y.iter()
        .zip(alpha)
        .map(|(&y, &a)| 0.5 * a * a + y * a)
        .sum()
}

/// `(1/2) ||r||^2` for the residual `r = y - X beta`.
pub fn squared_loss_of_residual(resid: &[f64]) -> f64 {
    0.5 * resid.iter().map(|r| r * r).sum::<f64>()
}

/// One super-gradient ascent step on the dual (8) for the 1/2-squared loss: `alpha += omega g` with
/// `g = u - l*'(alpha) = (y - resid) - (alpha + y) = -resid - alpha` (Remark E.2; `F = R`, no projection).
pub fn squared_ascent_step(resid: &[f64], omega: f64, alpha: &mut [f64]) {
    for (a, &r) in alpha.iter_mut().zip(resid) {
        *a += omega * (-r - *a);
    }
}

/// One sweep of T (13) over `active`, in place; keeps `resid = y - X beta`.
pub fn squared_coordinate_sweep(
    cols: &Columns,
    penalty: &Penalty,
    active: &[usize],
    beta: &mut [f64],
    resid: &mut [f64],
) {
    for &j in active {
        let new = penalty.coordinate(cols.dot(j, resid) + beta[j]);
        set_coordinate(cols, j, new, beta, resid);
    }
}

/// `beta_j = new`, keeping `resid = y - X beta` (`resid -= (new - beta_j) x_j`); nothing when `beta_j`
/// does not change.
pub fn set_coordinate(cols: &Columns, j: usize, new: f64, beta: &mut [f64], resid: &mut [f64]) {
    let old = beta[j];
    if new != old {
        cols.axpy(j, old - new, resid);
        beta[j] = new;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_psi_and_coordinate_step_are_the_scalar_minimisers() {
        let pen = Penalty::new(0.3, 0.2, 0.7).unwrap();
        let g = |b: f64| pen.value(b);
        let grid: Vec<f64> = (-40_000..=40_000).map(|i| i as f64 * 1e-4).collect();
        for k in -30..=30 {
            let eta = k as f64 * 0.05;
            // Psi(eta) = min_b -2 lambda2 eta b + g(b), attained at B(eta).
            let brute = grid
                .iter()
                .map(|&b| -2.0 * pen.lambda2 * eta * b + g(b))
                .fold(f64::INFINITY, f64::min);
            assert!(
                (pen.psi(eta) - brute).abs() < 1e-6,
                "eta {eta}: psi {} brute {brute}",
                pen.psi(eta)
            );
            let at_link = -2.0 * pen.lambda2 * eta * pen.link(eta) + g(pen.link(eta));
            assert!((at_link - pen.psi(eta)).abs() < 1e-12);
            // T (13) = argmin (1/2)(b~ - b)^2 + g(b).
            let bt = k as f64 * 0.1;
            let brute = grid
                .iter()
                .map(|&b| 0.5 * (bt - b) * (bt - b) + g(b))
                .fold(f64::INFINITY, f64::min);
            let c = pen.coordinate(bt);
            assert!(
                (0.5 * (bt - c) * (bt - c) + g(c) - brute).abs() < 1e-6,
                "b~ {bt}"
            );
        }
        assert!((pen.eta0() - (2.0 * (0.3f64 * 0.7).sqrt() + 0.2) / 1.4).abs() < 1e-15);
    }
}
