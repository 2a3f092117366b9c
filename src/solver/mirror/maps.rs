//! Mirror maps `psi` as types, with `psi`, `grad psi`, `psi*`, `grad psi*` and the Bregman divergence
//! (sparse-mirror-descent.md, Def. 3.1-3.2, eq. 3.9), the convex sets `C` of problem (5.1), and the
//! restricted step solve: for a fixed support `S`, the minimiser over `{x in C, supp(x) ⊆ S}` of the
//! step objective of (5.15).
//!
//! **The step objective in mirror coordinates.** With `theta = grad psi(w_t) - eta g`,
//! `<x, g> + B_psi(x, w_t) / eta = (psi(x) - <theta, x>) / eta + const(w_t)`, so every step minimises
//! `Phi_theta(x) = psi(x) - <theta, x>` (this module normalises `psi(0) = 0`, hence `Phi(0) = 0`).
//! Without a constraint the minimiser is `grad psi*(theta)` (Alg. 3.1); the constrained solves below
//! are closed forms plus one scalar bisection.
//!
//! Maps (all even and permutation-symmetric):
//! - `Euclidean`: `psi = (1/2)||x||^2`, `grad psi = grad psi* = id`, `B = (1/2)||x - y||^2` (Ex. 3.4).
//! - `PNorm { p }`: `psi = (1/2)||x||_q^2`, `1/p + 1/q = 1` (SMIDAS's link, p = 2 ln d), `psi* = (1/2)||theta||_p^2`,
//!   `grad psi*(theta)_j = sign(theta_j) |theta_j|^{p-1} / ||theta||_p^{p-2}`; not separable.
//! - `HypEntropy { beta }`: `psi = sum_j x_j asinh(x_j/beta) - sqrt(x_j^2 + beta^2) + beta`,
//!   `grad psi = asinh(x/beta)`, `psi* = beta (cosh theta - 1)`, `grad psi* = beta sinh(theta)`: separable,
//!   Euclidean-like (curvature `1/beta`) near 0 and entropy-like (multiplicative) for `|x| >> beta`.

/// Scalar bisections (mirror-space threshold `nu`, p-norm radius `n`) run this many halvings: enough
/// for the interval to shrink below f64 resolution from any bracket the solves start with.
const BISECTIONS: usize = 200;

/// A mirror map `psi`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MirrorMap {
    Euclidean,
    /// `psi = (1/2)||x||_q^2` with `q = p / (p - 1)`; requires `p >= 2`.
    PNorm {
        p: f64,
    },
    /// Hyperbolic entropy with scale `beta > 0`.
    HypEntropy {
        beta: f64,
    },
}

/// The convex set `C` of problem (5.1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Constraint {
    None,
    /// `||x||_inf <= radius`.
    Box {
        radius: f64,
    },
    /// `||x||_1 <= radius`.
    L1Ball {
        radius: f64,
    },
}

impl Constraint {
    pub fn contains(&self, x: &[f64]) -> bool {
        match *self {
            Constraint::None => true,
            Constraint::Box { radius } => x.iter().all(|v| v.abs() <= radius * (1.0 + 1e-12)),
            Constraint::L1Ball { radius } => {
                x.iter().map(|v| v.abs()).sum::<f64>() <= radius * (1.0 + 1e-12)
            }
        }
    }
}

/// `||v||_p`, scaled by the largest magnitude so large `p` cannot overflow.
pub fn lp_norm(v: &[f64], p: f64) -> f64 {
    let max = v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    if max == 0.0 {
        return 0.0;
    }
    let sum: f64 = v.iter().map(|x| (x.abs() / max).powf(p)).sum();
    max * sum.powf(1.0 / p)
}

/// `sign(v) n (|v| / n)^e`: the coordinate map of both p-norm links (`e = p - 1` for `grad psi*`,
/// `e = q - 1` for `grad psi`), written so that `|v| / n <= 1` keeps the power in range.
#[inline]
fn pnorm_link(v: f64, n: f64, e: f64) -> f64 {
    if v == 0.0 || n == 0.0 {
        0.0
    } else {
        v.signum() * n * (v.abs() / n).powf(e)
    }
}

/// Soft threshold `sign(v) max(|v| - nu, 0)`.
#[inline]
pub fn soft(v: f64, nu: f64) -> f64 {
    v.signum() * (v.abs() - nu).max(0.0)
}

impl MirrorMap {
    /// The p-norm map with SMIDAS's exponent `p = max(2, 2 ln d)`.
    pub fn pnorm_for_dim(d: usize) -> MirrorMap {
        MirrorMap::PNorm {
            p: (2.0 * (d.max(1) as f64).ln()).max(2.0),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            MirrorMap::Euclidean => "euclidean",
            MirrorMap::PNorm { .. } => "pnorm",
            MirrorMap::HypEntropy { .. } => "hypentropy",
        }
    }

    /// `psi` is separable: a sum of one even function per coordinate.
    pub fn is_separable(&self) -> bool {
        !matches!(self, MirrorMap::PNorm { .. })
    }

    /// The gain of `grad psi*` on a support of `k` coordinates: a mirror step `eta` moves the weights
    /// like a Euclidean step of about `eta * dual_scale(k)`, so the solvers divide their Euclidean step
    /// by it. Euclidean 1; hyperbolic entropy `beta` (the slope of `beta sinh` at 0); p-norm
    /// `(p - 1) k^{-(p-2)/p}`: the largest eigenvalue of the Hessian of `psi* = (1/2)||theta||_p^2` on the
    /// directions orthogonal to `theta`, at `k` equal nonzero coordinates. It is `p - 1` (the
    /// smoothness of `psi*` w.r.t. `||.||_p`, the worst case) at `k = 1` and falls fast with `k`: on
    /// the benchmark data (`k = 100`, `p = 20`) the worst-case `p - 1` made steps ~30x too small.
    pub fn dual_scale(&self, k: usize) -> f64 {
        match *self {
            MirrorMap::Euclidean => 1.0,
            MirrorMap::PNorm { p } => (p - 1.0) * (k.max(1) as f64).powf(-(p - 2.0) / p),
            MirrorMap::HypEntropy { beta } => beta,
        }
    }

    /// `psi(x)`, normalised so that `psi(0) = 0`.
    pub fn psi(&self, x: &[f64]) -> f64 {
        match *self {
            MirrorMap::Euclidean => 0.5 * x.iter().map(|v| v * v).sum::<f64>(),
            MirrorMap::PNorm { p } => {
                let n = lp_norm(x, p / (p - 1.0));
                0.5 * n * n
            }
            MirrorMap::HypEntropy { beta } => x.iter().map(|&v| hyp_psi(v, beta)).sum(),
        }
    }

    /// `psi*(theta)`, the convex conjugate (Def. 3.1).
    pub fn psi_star(&self, theta: &[f64]) -> f64 {
        match *self {
            MirrorMap::Euclidean => 0.5 * theta.iter().map(|v| v * v).sum::<f64>(),
            MirrorMap::PNorm { p } => {
                let n = lp_norm(theta, p);
                0.5 * n * n
            }
            MirrorMap::HypEntropy { beta } => theta.iter().map(|&t| beta * (t.cosh() - 1.0)).sum(),
        }
    }

    /// `out = grad psi(x)` (primal to mirror space).
    pub fn grad_psi(&self, x: &[f64], out: &mut [f64]) {
        match *self {
            MirrorMap::Euclidean => out.copy_from_slice(x),
            MirrorMap::PNorm { p } => {
                let q = p / (p - 1.0);
                let n = lp_norm(x, q);
                for (o, &v) in out.iter_mut().zip(x) {
                    *o = pnorm_link(v, n, q - 1.0);
                }
            }
            MirrorMap::HypEntropy { beta } => {
                for (o, &v) in out.iter_mut().zip(x) {
                    *o = (v / beta).asinh();
                }
            }
        }
    }

    /// `out = grad psi*(theta)` (mirror to primal space; the inverse of [`grad_psi`](Self::grad_psi)).
    pub fn grad_psi_star(&self, theta: &[f64], out: &mut [f64]) {
        match *self {
            MirrorMap::Euclidean => out.copy_from_slice(theta),
            MirrorMap::PNorm { p } => {
                let n = lp_norm(theta, p);
                for (o, &t) in out.iter_mut().zip(theta) {
                    *o = pnorm_link(t, n, p - 1.0);
                }
            }
            MirrorMap::HypEntropy { beta } => {
                for (o, &t) in out.iter_mut().zip(theta) {
                    *o = beta * t.sinh();
                }
            }
        }
    }

    /// `B_psi(x, y) = psi(x) - psi(y) - <grad psi(y), x - y>` (eq. 3.9). The separable maps are summed
    /// per coordinate so the divergence is exactly 0 at `x = y` and never negative by rounding.
    pub fn bregman(&self, x: &[f64], y: &[f64]) -> f64 {
        match *self {
            MirrorMap::Euclidean => {
                0.5 * x.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum::<f64>()
            }
            MirrorMap::HypEntropy { beta } => x
                .iter()
                .zip(y)
                .map(|(&a, &b)| {
                    if a == b {
                        0.0
                    } else {
                        (hyp_psi(a, beta) - hyp_psi(b, beta) - (b / beta).asinh() * (a - b))
                            .max(0.0)
                    }
                })
                .sum(),
            MirrorMap::PNorm { .. } => {
                if x == y {
                    return 0.0;
                }
                let mut grad = vec![0.0; y.len()];
                self.grad_psi(y, &mut grad);
                let linear: f64 = grad
                    .iter()
                    .zip(x.iter().zip(y))
                    .map(|(g, (a, b))| g * (a - b))
                    .sum();
                self.psi(x) - self.psi(y) - linear
            }
        }
    }

    /// `Phi_theta(x) = psi(x) - <theta, x>`: the step objective of (5.15) in mirror coordinates.
    pub fn step_objective(&self, theta: &[f64], x: &[f64]) -> f64 {
        self.psi(x) - theta.iter().zip(x).map(|(t, v)| t * v).sum::<f64>()
    }

    /// `out = argmin_{x in C} Phi_theta(x)` over the coordinates given (the caller passes `theta`
    /// restricted to a support `S`; the other coordinates are 0). Closed forms plus at most one scalar
    /// bisection:
    /// - `None`: `grad psi*(theta)`.
    /// - `L1Ball`: the KKT point `grad psi*(soft(theta, nu))` (valid for every map here: `grad psi(x) =
    ///   theta - nu s`, `s` in the l1 subdifferential), `nu >= 0` by bisection on `||x||_1 = radius`
    ///   (`||x(nu)||_1` is non-increasing in `nu`).
    /// - `Box`, separable: clamp each coordinate. `Box`, p-norm: `|x_j| = min(R, |theta_j|^{p-1} / n^{p-2})`
    ///   with `n = ||x||_q` the unique root of `||x(n)||_q = n` (bisection on `log n`).
    pub fn solve_restricted(&self, constraint: Constraint, theta: &[f64], out: &mut [f64]) {
        match constraint {
            Constraint::None => self.grad_psi_star(theta, out),
            Constraint::Box { radius } => match *self {
                MirrorMap::PNorm { p } => pnorm_box(p, radius, theta, out),
                _ => {
                    self.grad_psi_star(theta, out);
                    out.iter_mut().for_each(|v| *v = v.clamp(-radius, radius));
                }
            },
            Constraint::L1Ball { radius } => {
                self.grad_psi_star(theta, out);
                if out.iter().map(|v| v.abs()).sum::<f64>() <= radius {
                    return;
                }
                let l1_at = |nu: f64, out: &mut [f64]| -> f64 {
                    self.soft_map(theta, nu, out);
                    out.iter().map(|v| v.abs()).sum::<f64>()
                };
                let (mut lo, mut hi) = (0.0, theta.iter().fold(0.0f64, |m, t| m.max(t.abs())));
                for _ in 0..BISECTIONS {
                    let mid = 0.5 * (lo + hi);
                    if mid <= lo || mid >= hi {
                        break;
                    }
                    if l1_at(mid, out) > radius {
                        lo = mid;
                    } else {
                        hi = mid;
                    }
                }
                // `hi` is feasible (its l1 norm is <= radius).
                self.soft_map(theta, hi, out);
            }
        }
    }

    /// `out = grad psi*(soft(theta, nu))`.
    fn soft_map(&self, theta: &[f64], nu: f64, out: &mut [f64]) {
        match *self {
            MirrorMap::PNorm { p } => {
                // ||soft(theta, nu)||_p without materialising it.
                let max = theta
                    .iter()
                    .fold(0.0f64, |m, t| m.max((t.abs() - nu).max(0.0)));
                let n = if max == 0.0 {
                    0.0
                } else {
                    let sum: f64 = theta
                        .iter()
                        .map(|t| ((t.abs() - nu).max(0.0) / max).powf(p))
                        .sum();
                    max * sum.powf(1.0 / p)
                };
                for (o, &t) in out.iter_mut().zip(theta) {
                    *o = pnorm_link(soft(t, nu), n, p - 1.0);
                }
            }
            MirrorMap::Euclidean => {
                for (o, &t) in out.iter_mut().zip(theta) {
                    *o = soft(t, nu);
                }
            }
            MirrorMap::HypEntropy { beta } => {
                for (o, &t) in out.iter_mut().zip(theta) {
                    *o = beta * soft(t, nu).sinh();
                }
            }
        }
    }
}

/// One coordinate of the hyperbolic entropy, `psi(0) = 0`.
#[inline]
fn hyp_psi(v: f64, beta: f64) -> f64 {
    v * (v / beta).asinh() - (v * v + beta * beta).sqrt() + beta
}

/// The p-norm step restricted to the box `||x||_inf <= radius` (see [`MirrorMap::solve_restricted`]).
fn pnorm_box(p: f64, radius: f64, theta: &[f64], out: &mut [f64]) {
    let q = p / (p - 1.0);
    let free = lp_norm(theta, p);
    if free == 0.0 {
        out.iter_mut().for_each(|v| *v = 0.0);
        return;
    }
    let fill = |n: f64, out: &mut [f64]| {
        for (o, &t) in out.iter_mut().zip(theta) {
            *o = pnorm_link(t, n, p - 1.0).clamp(-radius, radius);
        }
    };
    fill(free, out);
    if out.iter().all(|v| v.abs() < radius) {
        return;
    }
    // The root n* of ||x(n)||_q = n lies in (0, free]: x(free) is the clamped free solution, so
    // ||x(free)||_q <= free; as n -> 0 every coordinate saturates and ||x||_q -> R |S|^{1/q} > 0.
    let (mut lo, mut hi) = ((free.min(radius) * 1e-12).ln(), free.ln());
    for _ in 0..BISECTIONS {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        let n = mid.exp();
        fill(n, out);
        if lp_norm(out, q) > n {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    fill((0.5 * (lo + hi)).exp(), out);
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use crate::solver::mirror::tests::{dot, make_feasible, maps, random_vector, CONSTRAINTS};

    #[test]
    fn bregman_is_nonnegative_and_zero_only_at_equality() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for map in maps(10) {
            for _ in 0..200 {
                let x = random_vector(&mut rng, 10);
                let mut y = random_vector(&mut rng, 10);
                assert_eq!(map.bregman(&x, &x), 0.0, "{map:?}");
                let b = map.bregman(&x, &y);
                assert!(b > 0.0, "{map:?}: B(x, y) = {b} for x != y");
                // A single small perturbation is still strictly positive.
                let j = rng.gen_range(0..10);
                y.clone_from(&x);
                y[j] += 1e-3;
                assert!(
                    map.bregman(&x, &y) > 0.0 && map.bregman(&y, &x) > 0.0,
                    "{map:?}"
                );
            }
        }
    }

    #[test]
    fn grad_psi_star_inverts_grad_psi_and_fenchel_young_is_tight() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        for map in maps(10) {
            for _ in 0..200 {
                let x = random_vector(&mut rng, 10);
                let (mut theta, mut back) = (vec![0.0; 10], vec![0.0; 10]);
                map.grad_psi(&x, &mut theta);
                map.grad_psi_star(&theta, &mut back);
                let scale = x.iter().fold(1.0f64, |m, v| m.max(v.abs()));
                for j in 0..10 {
                    assert!(
                        (back[j] - x[j]).abs() <= 1e-10 * scale,
                        "{map:?}: x {} -> {}",
                        x[j],
                        back[j]
                    );
                }
                let theta2 = random_vector(&mut rng, 10);
                let mut x2 = vec![0.0; 10];
                map.grad_psi_star(&theta2, &mut x2);
                map.grad_psi(&x2, &mut back);
                let scale = theta2.iter().fold(1.0f64, |m, v| m.max(v.abs()));
                for j in 0..10 {
                    // Coordinates the p-norm link crushes below 1e-300 cannot come back; all others must.
                    if x2[j].abs() > 1e-280 || theta2[j] == 0.0 {
                        assert!(
                            (back[j] - theta2[j]).abs() <= 1e-10 * scale,
                            "{map:?}: theta {} -> {}",
                            theta2[j],
                            back[j]
                        );
                    }
                }
                // psi(x) + psi*(grad psi(x)) = <x, grad psi(x)>.
                let gap = map.psi(&x) + map.psi_star(&theta) - dot(&x, &theta);
                assert!(
                    gap.abs() <= 1e-9 * (1.0 + dot(&x, &theta).abs()),
                    "{map:?}: Fenchel-Young gap {gap}"
                );
            }
        }
    }

    #[test]
    fn restricted_solve_is_feasible_and_beats_every_random_competitor() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for map in maps(10) {
            for constraint in CONSTRAINTS {
                for _ in 0..40 {
                    let theta: Vec<f64> = (0..3).map(|_| rng.gen_range(-3.0..3.0)).collect();
                    let mut x = vec![0.0; 3];
                    map.solve_restricted(constraint, &theta, &mut x);
                    assert!(
                        constraint.contains(&x),
                        "{map:?} {constraint:?}: infeasible {x:?}"
                    );
                    let best = map.step_objective(&theta, &x);
                    for scale in [1e-1, 1e-3, 1e-5] {
                        for _ in 0..50 {
                            let mut other: Vec<f64> = x
                                .iter()
                                .map(|v| v + scale * rng.gen_range(-1.0..1.0))
                                .collect();
                            make_feasible(constraint, &mut other);
                            let value = map.step_objective(&theta, &other);
                            assert!(
                                value >= best - 1e-11 * (1.0 + best.abs()),
                                "{map:?} {constraint:?}: {other:?} gives {value} < {best} at {x:?}"
                            );
                        }
                    }
                }
            }
        }
    }
}
