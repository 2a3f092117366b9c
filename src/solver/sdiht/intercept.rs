//! The intercept's refit in SDIHT's alternation ([`super`]'s module docs): with `w` fixed, the
//! unpenalised `b` that minimises the loss over the rows, found by a warm-started Newton.

use crate::loss::Loss;

/// The intercept minimising `sum_i c_i l(u_i + b)` for margins `u_i = x_i.w` (the primal side of the
/// dual constraint `sum alpha = 0`), as [`crate::solver::objective::best_intercept`] but by Newton on the
/// increasing `g(b) = sum_i c_i l'(u_i + b)` from `b0`, bracketed and bisected, so a warm start costs a
/// few passes instead of a hundred: closed form for squared loss; hinge (a step-function `g`)
/// bisects. A problem with one class only (no finite minimiser) ends at the bracket's edge,
/// `b0 +- (max |u_i| + |b0| + 2)`.
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
    let b0 = if b0.is_finite() { b0 } else { 0.0 };
    let reach = margins.iter().fold(0.0f64, |m, u| m.max(u.abs())) + b0.abs() + 2.0;
    let (mut lo, mut hi) = (b0 - reach, b0 + reach);
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
