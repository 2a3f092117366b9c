//! The block step's maximiser over one sample's simplex: with `u` the sample's scores, `p0` its
//! current dual probabilities and `q >= 0` its curvature,
//!
//! ```text
//! maximise   -sum_c p_c ln p_c + p.u - (q / 2) ||p - p0||^2   over the simplex (p >= 0, sum p = 1).
//! ```
//!
//! Stationarity with a multiplier `mu` for `sum p = 1` gives, class by class,
//! `ln p_c + q p_c = v_c + mu` with `v_c = u_c + q p0_c - 1`: each `p_c` is a Lambert-W value,
//! `p_c = W(q e^(v_c + mu)) / q`, positive, and increasing and convex in `mu`. So `mu` is the root of the
//! increasing convex `g(mu) = sum_c p_c(mu) - 1`, which Newton finds from the right monotonically;
//! `q = 0` is the closed form `p = softmax(u)`. The objective is strictly concave (the entropy is), so
//! this stationary point is its unique maximiser. Nothing here allocates: the caller passes the output
//! and the log-probabilities' buffer.

/// Newton iterations of each solve (each converges monotonically and quadratically; the cap only
/// guards against a non-finite input).
const MAX_NEWTON: usize = 100;

/// `s = ln W(e^L)`: the root of `s + e^s = L` (convex and increasing in `s`), by Newton from a point
/// right of the root (`s = L` when `L < 1`, where `e^s` is small; `s = ln L` otherwise), so every
/// iterate stays right of it and the convergence is monotone.
fn log_lambert_exp(l: f64) -> f64 {
    let mut s = if l < 1.0 { l } else { l.ln() };
    for _ in 0..MAX_NEWTON {
        let e = s.exp();
        let step = (s + e - l) / (1.0 + e);
        s -= step;
        if step.is_nan() || step.abs() <= 1e-15 * s.abs().max(1.0) {
            break;
        }
    }
    s
}

/// The maximiser over the simplex (module docs) written to `p`, with `ln p` in `log_p`; returns
/// `sum_c p_c ln p_c` (the conjugate's value there). `u`, `p0`, `p` and `log_p` have one entry per
/// class; `q` must be finite and `>= 0`.
pub fn maximise(u: &[f64], p0: &[f64], q: f64, p: &mut [f64], log_p: &mut [f64]) -> f64 {
    let classes = u.len();
    if q <= 1e-300 {
        return softmax(u, p, log_p);
    }
    let ln_q = q.ln();
    let v_max = u
        .iter()
        .zip(p0)
        .map(|(&uc, &pc)| uc + q * pc - 1.0)
        .fold(f64::NEG_INFINITY, f64::max);
    // Right of the root: the largest class alone reaches p = 1 when v_max + mu = q.
    let mut mu = q - v_max;
    let mut total = 0.0;
    for _ in 0..MAX_NEWTON {
        total = 0.0;
        let mut slope = 0.0;
        for c in 0..classes {
            let t = u[c] + q * p0[c] - 1.0 + mu;
            let s = log_lambert_exp(ln_q + t);
            log_p[c] = s - ln_q;
            p[c] = log_p[c].exp();
            total += p[c];
            slope += p[c] / (1.0 + q * p[c]);
        }
        let g = total - 1.0;
        if g.is_nan() || g.abs() <= 1e-15 || slope.is_nan() || slope <= 0.0 {
            break;
        }
        let step = g / slope;
        mu -= step;
        if step.is_nan() || step.abs() <= 1e-16 * mu.abs().max(1.0) {
            break;
        }
    }
    // The last iterate sums to 1 within rounding; make it exact so the dual stays feasible.
    let ln_total = total.ln();
    let mut entropy = 0.0;
    for c in 0..classes {
        p[c] /= total;
        log_p[c] -= ln_total;
        entropy += if p[c] > 0.0 { p[c] * log_p[c] } else { 0.0 };
    }
    entropy
}

/// `p = softmax(u)` with `ln p` in `log_p`; returns `sum_c p_c ln p_c`.
pub fn softmax(u: &[f64], p: &mut [f64], log_p: &mut [f64]) -> f64 {
    let top = u.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut total = 0.0;
    for (pc, &uc) in p.iter_mut().zip(u) {
        *pc = (uc - top).exp();
        total += *pc;
    }
    let ln_total = total.ln();
    let mut entropy = 0.0;
    for c in 0..u.len() {
        p[c] /= total;
        log_p[c] = u[c] - top - ln_total;
        entropy += if p[c] > 0.0 { p[c] * log_p[c] } else { 0.0 };
    }
    entropy
}

/// `ln sum_c e^(u_c)`, stably.
pub fn log_sum_exp(u: &[f64]) -> f64 {
    let top = u.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !top.is_finite() {
        return top;
    }
    top + u.iter().map(|&x| (x - top).exp()).sum::<f64>().ln()
}

/// `sum_c p_c ln p_c` (with `0 ln 0 = 0`).
pub fn neg_entropy(p: &[f64]) -> f64 {
    p.iter()
        .map(|&x| if x > 0.0 { x * x.ln() } else { 0.0 })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objective(u: &[f64], p0: &[f64], q: f64, p: &[f64]) -> f64 {
        let dot: f64 = p.iter().zip(u).map(|(a, b)| a * b).sum();
        let dist: f64 = p.iter().zip(p0).map(|(a, b)| (a - b).powi(2)).sum();
        -neg_entropy(p) + dot - 0.5 * q * dist
    }

    #[test]
    fn lambert_solves_its_equation() {
        for l in [-700.0, -30.0, -1.0, 0.0, 0.5, 1.0, 3.0, 50.0, 1e5] {
            let s = log_lambert_exp(l);
            assert!(
                (s + s.exp() - l).abs() <= 1e-12 * l.abs().max(1.0),
                "L = {l}: s = {s}"
            );
        }
    }

    #[test]
    fn the_maximiser_beats_every_point_of_a_fine_grid_on_three_classes() {
        let cases: [(&[f64; 3], &[f64; 3], f64); 5] = [
            (&[0.3, -1.0, 2.0], &[0.0, 1.0, 0.0], 0.7),
            (&[0.0, 0.0, 0.0], &[1.0, 0.0, 0.0], 50.0),
            (&[5.0, -3.0, 0.1], &[0.2, 0.3, 0.5], 0.0),
            (&[-20.0, 20.0, 0.0], &[0.0, 0.0, 1.0], 1e4),
            (&[1.0, 2.0, 3.0], &[0.0, 1.0, 0.0], 1e-3),
        ];
        for (u, p0, q) in cases {
            let (mut p, mut lp) = ([0.0; 3], [0.0; 3]);
            let ent = maximise(u, p0, q, &mut p, &mut lp);
            assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-14);
            assert!(p.iter().all(|&x| x >= 0.0));
            assert!((ent - neg_entropy(&p)).abs() < 1e-12);
            let best = objective(u, p0, q, &p);
            let n = 300;
            for a in 0..=n {
                for b in 0..=(n - a) {
                    let x = [
                        a as f64 / n as f64,
                        b as f64 / n as f64,
                        (n - a - b) as f64 / n as f64,
                    ];
                    assert!(
                        objective(u, p0, q, &x) <= best + 1e-12,
                        "{u:?} {q}: {x:?} beats {p:?}"
                    );
                }
            }
        }
    }
}
