//! Each loss's dual coordinate maximiser: the exact ascent of the dual along one sample's axis that the
//! SDIHT coordinate rule (SDCA on a block, `crate::solver::sdiht`'s module docs) takes for every row.
//!
//! Along row `i`'s axis, with the model's margin `u = x_i.w + b`, the current dual `a0` and the row's
//! curvature `q = ||x_i||^2 / (lambda N)`, `N D` is up to a constant
//!
//! ```text
//! phi(a) = -l*(a) + (a - a0) u - (q / 2) (a - a0)^2
//! ```
//!
//! whose derivative `f(a) = u - l*'(a) - q (a - a0)` decreases in `a`, so the maximiser over `F` is the
//! root of `f` clipped to `F`:
//!
//! - squared (`l*(a) = a^2/4 + y a`): `a = (u - y + q a0) / (1/2 + q)`, one Newton step;
//! - Huber (`l*(a) = y a + (gamma/2) a^2` on `y a in [-1, 0]`): `a = P_F(a0 + (u - y - gamma a0) / (gamma + q))`;
//! - hinge (`l*(a) = y a` on `y a in [-1, 0]`): `a = P_F(a0 + (u - y) / q)`;
//! - logistic (`l*'(a) = -y ln(b / (1 - b))`, `b = -y a`, `l*'' = 1 / (b (1 - b))`): Newton on `f`,
//!   bracketed and bisected when a step leaves the bracket (a few iterations from a warm start).
//!
//! Per-sample weights `c` scale `l*` as `c l*(a / c)`; the formulas hold with `l_c*'` and `l_c*''`
//! ([`SampleLoss`]).

use super::{LossKind, SampleLoss};

/// Newton iterations of the logistic coordinate maximiser at most (it stops when a step moves less
/// than [`NEWTON_TOL`] of `F`'s width; from a warm start that takes 3-6).
const MAX_NEWTON: usize = 50;
const NEWTON_TOL: f64 = 1e-12;

impl SampleLoss {
    /// The maximiser over `a in F` of the dual along one row's axis, `N D` up to a constant:
    /// `phi(a) = -l*(a) + (a - a0) u - (q / 2) (a - a0)^2` (module docs), from the guess `start`.
    /// Its derivative `f(a) = u - l*'(a) - q (a - a0)` decreases in `a`, so the maximiser is the root of
    /// `f` clipped to `F`.
    ///
    /// - `l*` quadratic on `F` (squared, Huber, hinge: `l*'' = kappa` constant): one Newton step from
    ///   any point is the unconstrained maximiser, `a = start + f(start) / (kappa + q)`, and the clip
    ///   to `F` is the constrained one (a concave quadratic on an interval). With `kappa + q = 0`
    ///   (hinge, empty row) `phi` is linear: the end of `F` its slope points to.
    /// - logistic (`l*'' > 0` unbounded at the ends of `F`): Newton on `f`, safeguarded by a bracket
    ///   that every evaluation narrows and bisection when a Newton step leaves it; a few iterations
    ///   from a warm start.
    pub fn coordinate_maximiser(&self, u: f64, a0: f64, start: f64, q: f64) -> f64 {
        if self.kind() != LossKind::Logistic {
            quadratic_maximiser(self, u, a0, start, q)
        } else {
            logistic_maximiser(self, u, a0, start, q)
        }
    }
}

/// [`SampleLoss::coordinate_maximiser`] for a conjugate quadratic on `F` (squared, Huber, hinge): one
/// Newton step from `start`, clipped to `F`.
fn quadratic_maximiser(l: &SampleLoss, u: f64, a0: f64, start: f64, q: f64) -> f64 {
    let (lo, hi) = (l.project(f64::NEG_INFINITY), l.project(f64::INFINITY));
    let f = |a: f64| u - l.conjugate_derivative(a) - q * (a - a0);
    let curvature = l.conjugate_curvature(start) + q;
    let slope = f(start);
    if curvature > 0.0 {
        l.project(start + slope / curvature)
    } else if slope > 0.0 {
        hi
    } else if slope < 0.0 {
        lo
    } else {
        start
    }
}

/// [`SampleLoss::coordinate_maximiser`] for logistic loss: safeguarded Newton on `f` inside `F`.
fn logistic_maximiser(l: &SampleLoss, u: f64, a0: f64, start: f64, q: f64) -> f64 {
    let (lo, hi) = (l.project(f64::NEG_INFINITY), l.project(f64::INFINITY));
    let f = |a: f64| u - l.conjugate_derivative(a) - q * (a - a0);
    let width = hi - lo;
    let (mut low, mut high) = (lo, hi);
    let mut a = start;
    if !(a > lo && a < hi) {
        a = 0.5 * (lo + hi);
    }
    for _ in 0..MAX_NEWTON {
        let slope = f(a);
        if slope > 0.0 {
            low = a;
        } else if slope < 0.0 {
            high = a;
        } else {
            return a;
        }
        let mut next = a + slope / (l.conjugate_curvature(a) + q);
        if !(next > low && next < high) {
            next = 0.5 * (low + high);
        }
        let moved = (next - a).abs();
        a = next;
        if moved <= NEWTON_TOL * width {
            break;
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use crate::loss::{Loss, LossKind, SampleLoss};

    fn sample_loss(kind: LossKind, y: f64, c: f64) -> SampleLoss {
        Loss::new(kind, 0.25).unwrap().sample(y, c)
    }

    /// `phi(a) = -l*(a) + (a - a0) u - (q/2)(a - a0)^2`, the 1-D objective of the coordinate rule.
    fn phi(l: &SampleLoss, u: f64, a0: f64, q: f64, a: f64) -> f64 {
        -l.conjugate(a) + (a - a0) * u - 0.5 * q * (a - a0) * (a - a0)
    }

    /// The 1-D maximiser by golden-section search on `F` (the reference the closed forms meet).
    fn golden_max(l: &SampleLoss, u: f64, a0: f64, q: f64) -> f64 {
        let (mut lo, mut hi) = (l.project(-1e6), l.project(1e6));
        let g = 0.5 * (5f64.sqrt() - 1.0);
        for _ in 0..200 {
            let (x1, x2) = (hi - g * (hi - lo), lo + g * (hi - lo));
            if phi(l, u, a0, q, x1) < phi(l, u, a0, q, x2) {
                lo = x1;
            } else {
                hi = x2;
            }
        }
        0.5 * (lo + hi)
    }

    #[test]
    fn squared_coordinate_step_is_the_exact_maximiser() {
        let l = sample_loss(LossKind::Squared, 1.5, 1.0);
        let (u, a0, q) = (0.3, -0.7, 0.8);
        let a = l.coordinate_maximiser(u, a0, a0, q);
        // a = (u - y + q a0) / (1/2 + q).
        let closed = (u - 1.5 + q * a0) / (0.5 + q);
        assert!((a - closed).abs() < 1e-15, "{a} vs {closed}");
        // From any start, one step lands on it.
        assert!((l.coordinate_maximiser(u, a0, 40.0, q) - closed).abs() < 1e-12);
        // Weighted (c = 2): l_c*(a) = a^2 / 8 + y a, so a = (u - y + q a0) / (1/4 + q).
        let lc = sample_loss(LossKind::Squared, 1.5, 2.0);
        let closed = (u - 1.5 + q * a0) / (0.25 + q);
        assert!((lc.coordinate_maximiser(u, a0, 0.0, q) - closed).abs() < 1e-14);
    }

    #[test]
    fn logistic_newton_converges_to_the_maximiser() {
        for (y, c) in [(1.0, 1.0), (-1.0, 1.0), (1.0, 3.0), (-1.0, 0.5)] {
            let l = sample_loss(LossKind::Logistic, y, c);
            for (u, q) in [
                (0.0, 0.1),
                (2.0, 0.01),
                (-8.0, 1.0),
                (30.0, 1e-4),
                (-0.5, 50.0),
            ] {
                for a0 in [0.0, -y * 0.5 * c, -y * c, -y * 0.999 * c] {
                    for start in [a0, l.dual_of_margin(u)] {
                        let a = l.coordinate_maximiser(u, a0, start, q);
                        let reference = golden_max(&l, u, a0, q);
                        assert!((l.project(a) - a).abs() <= 1e-15 * c, "{a} not in F");
                        // (Near `b = 0` or `1`, `l*'` is clipped at `b = 1e-12`: the root is found to
                        // that resolution.)
                        assert!(
                            phi(&l, u, a0, q, a) >= phi(&l, u, a0, q, reference) - 1e-10,
                            "y {y} c {c} u {u} q {q} a0 {a0}: {a} vs {reference}"
                        );
                        assert!((a - reference).abs() < 1e-6 * c, "{a} vs {reference}");
                    }
                }
            }
        }
    }

    #[test]
    fn hinge_and_huber_steps_are_clipped_closed_forms() {
        let l = sample_loss(LossKind::Hinge, 1.0, 1.0);
        // Inside: a = a0 + (u - y) / q.
        assert_eq!(
            l.coordinate_maximiser(0.8, -0.5, -0.5, 2.0),
            -0.5 + (0.8 - 1.0) / 2.0
        );
        // Clipped at both ends of F = [-1, 0].
        assert_eq!(l.coordinate_maximiser(-5.0, -0.5, -0.5, 1.0), -1.0);
        assert_eq!(l.coordinate_maximiser(5.0, -0.5, -0.5, 1.0), 0.0);
        // An empty row (q = 0): the end the slope points to.
        assert_eq!(l.coordinate_maximiser(0.2, -0.5, -0.5, 0.0), -1.0);
        let l = sample_loss(LossKind::Huber, -1.0, 1.0);
        for (u, a0, q) in [(0.3, 0.2, 0.5), (-3.0, 0.9, 0.1), (4.0, 0.0, 2.0)] {
            let a = l.coordinate_maximiser(u, a0, a0, q);
            let reference = golden_max(&l, u, a0, q);
            assert!((a - reference).abs() < 1e-7, "{a} vs {reference}");
        }
    }
}
