//! The intercept's refit in SDIHT's alternation ([`super`]'s module docs): with `w` fixed, the
//! unpenalised `b` that minimises the loss over the rows, found by a warm-started Newton.

use crate::loss::Loss;
use crate::solver::objective::intercept_reach;

/// The intercept minimising `sum_i c_i l(u_i + b)` for margins `u_i = x_i.w` (the primal side of the
/// dual constraint `sum alpha = 0`), as [`crate::solver::objective::best_intercept`] but by Newton on the
/// increasing `g(b) = sum_i c_i l'(u_i + b)` from `b0`, bracketed and bisected, so a warm start costs a
/// few passes instead of a hundred: closed form for squared loss; hinge (a step-function `g`)
/// bisects. The bracket is [`intercept_reach`]'s, fixed by the margins alone (not by `b0`, which
/// is clamped into it): a problem with one class only (no finite minimiser) ends at its edge, so
/// warm-started refits on a one-class window cannot push `b` further each time.
pub fn newton_intercept(
    loss: &Loss,
    margins: &[f64],
    b0: f64,
    label_weight: impl Fn(usize) -> (f64, f64),
) -> f64 {
    if margins.is_empty() {
        return b0;
    }
    if !loss.is_classification() {
        let (mut num, mut den) = (0.0, 0.0);
        for (pos, &u) in margins.iter().enumerate() {
            let (y, c) = label_weight(pos);
            num += c * (y - u);
            den += c;
        }
        return if den > 0.0 { num / den } else { b0 };
    }
    let g = |b: f64| -> (f64, f64) {
        let (mut slope, mut curvature) = (0.0, 0.0);
        for (pos, &u) in margins.iter().enumerate() {
            let (y, c) = label_weight(pos);
            let m = u + b;
            match loss {
                Loss::Logistic(_) => {
                    // l' = -y s, l'' = s (1 - s), s = sigmoid(-y m).
                    let s = 1.0 / (1.0 + (y * m).exp());
                    slope -= c * y * s;
                    curvature += c * s * (1.0 - s);
                }
                Loss::Huber(h) => {
                    slope += c * loss.derivative(m, y);
                    let ym = y * m;
                    if ym < 1.0 && ym >= 1.0 - h.gamma {
                        curvature += c / h.gamma;
                    }
                }
                _ => slope += c * loss.derivative(m, y),
            }
        }
        (slope, curvature)
    };
    let reach = intercept_reach(loss, margins);
    let (mut lo, mut hi) = (-reach, reach);
    let b0 = if b0.is_finite() {
        b0.clamp(lo, hi)
    } else {
        0.0
    };
    if g(lo).0 >= 0.0 {
        return lo;
    }
    if g(hi).0 <= 0.0 {
        return hi;
    }
    let mut b = b0;
    for _ in 0..100 {
        let (slope, curvature) = g(b);
        if slope > 0.0 {
            hi = b;
        } else if slope < 0.0 {
            lo = b;
        } else {
            return b;
        }
        let newton = b - slope / curvature;
        let next = if curvature > 0.0 && newton > lo && newton < hi {
            newton
        } else {
            0.5 * (lo + hi)
        };
        if (next - b).abs() <= 1e-12 * (1.0 + b.abs()) {
            return next;
        }
        b = next;
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loss::LossKind;
    use crate::solver::objective::LOGISTIC_MARGIN_BOUND;

    /// On one class, logistic has no finite intercept: refits warm-started from the last one stay at
    /// the bracket's edge `max |u| + 40` instead of doubling (they reached 9.27e60 before); hinge and
    /// Huber stop where every margin is 1.
    #[test]
    fn a_one_class_window_keeps_the_intercept_bounded() {
        let margins = [0.5, -0.25, 0.0];
        for (kind, bound) in [
            (LossKind::Logistic, LOGISTIC_MARGIN_BOUND),
            (LossKind::Hinge, 1.0),
            (LossKind::Huber, 1.0),
        ] {
            let loss = Loss::new(kind, 0.5).unwrap();
            let mut b = 0.0;
            for _ in 0..200 {
                b = newton_intercept(&loss, &margins, b, |_| (1.0, 1.0));
            }
            assert_eq!(b, 0.5 + bound, "{kind:?}");
            let b = newton_intercept(&loss, &margins, f64::MAX, |_| (-1.0, 1.0));
            assert_eq!(b, -(0.5 + bound), "{kind:?}");
        }
    }

    /// With both classes the bracket holds the minimiser, also far from 0: 1 positive in 10^6 at
    /// `w = 0` puts the logistic intercept at `-ln(10^6 - 1)`.
    #[test]
    fn both_classes_find_the_minimiser_inside_the_bracket() {
        let loss = Loss::new(LossKind::Logistic, 0.5).unwrap();
        let margins = [0.0, 0.0];
        let b = newton_intercept(&loss, &margins, 0.0, |i| {
            if i == 0 {
                (1.0, 1.0)
            } else {
                (-1.0, 1e6 - 1.0)
            }
        });
        assert!((b + (1e6f64 - 1.0).ln()).abs() < 1e-9, "{b}");
    }
}
