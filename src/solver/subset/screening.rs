//! Gap-safe screening (16) and feature inclusion (Alg. 3) of Ren & Qian.
//!
//! `D` is `gamma`-strongly concave with `gamma = mu`, the strong convexity of `l*` (1 for the 1/2-squared
//! loss), because `-sum l*` is and `sum Psi` is concave. So for the dual maximiser `alpha^`,
//! `(gamma/2)||alpha - alpha^||^2 <= D(alpha^) - D(alpha) <= P(beta) - D(alpha)` for ANY primal `beta`:
//! `alpha^` lies in the ball of radius `r = sqrt(2 (P - D) / gamma)` (Thm 2.1, eq. 15) around `alpha`.
//! Then `|x_j . alpha^| <= |x_j . alpha| + ||x_j|| r`, and if that is `< 2 sqrt(lambda0 lambda2) + lambda1`
//! (= `2 lambda2 eta0`), the link (6) zeroes feature `j` at the dual optimum: test (16).
//!
//! What "safe" covers: the features the dual optimum switches off. When the l0 problem has a saddle point
//! (zero gap at the optimum) that is the optimal support; without one the dual optimum belongs to the
//! convex relaxation of the penalty, and the unit tests check empirically that nothing our solver selects
//! without screening is ever screened. The solver never screens a feature that is currently nonzero, so
//! screening cannot raise the primal objective.

use super::columns::Columns;
use super::dual::Penalty;

/// `gamma = mu` for the 1/2-squared loss (its conjugate `a^2/2 + y a` is 1-strongly convex).
pub const SQUARED_GAMMA: f64 = 1.0;

/// The gap-ball radius (15): `sqrt(2 max(P - D, 0) / gamma)`.
pub fn ball_radius(gap: f64, gamma: f64) -> f64 {
    (2.0 * gap.max(0.0) / gamma).sqrt()
}

/// Test (16) for a unit column with `x_j . alpha = x_dot_alpha`: true when `j` can be removed.
#[inline]
pub fn screens_out(penalty: &Penalty, x_dot_alpha: f64, radius: f64) -> bool {
    x_dot_alpha.abs() + radius < penalty.screen_threshold()
}

/// `h = ceil(c log p)` (natural log), at least 1.
pub fn inclusion_size(c: f64, p: usize) -> usize {
    ((c * (p.max(1) as f64).ln()).ceil() as usize).max(1)
}

/// Alg. 3: the `h` candidates with the largest `|x_j . alpha|` (ties to the lower index), appended to
/// `chosen`. `scores[j] = x_j . alpha`.
pub fn select_inclusion(
    candidates: &mut Vec<usize>,
    scores: &[f64],
    h: usize,
    chosen: &mut Vec<usize>,
) {
    let h = h.min(candidates.len());
    if h == 0 {
        return;
    }
    let by_score =
        |a: &usize, b: &usize| scores[*b].abs().total_cmp(&scores[*a].abs()).then(a.cmp(b));
    if h < candidates.len() {
        candidates.select_nth_unstable_by(h - 1, by_score);
    }
    candidates.truncate(h);
    candidates.sort_unstable_by(by_score);
    chosen.extend_from_slice(candidates);
}

/// `x_j . alpha` of every usable column into `scores` (0 for unusable ones): one pass over X.
pub fn correlations(cols: &Columns, alpha: &[f64], scores: &mut Vec<f64>) {
    scores.clear();
    scores.extend((0..cols.p()).map(|j| {
        if cols.usable(j) {
            cols.dot(j, alpha)
        } else {
            0.0
        }
    }));
}
