//! Loss functions as types, in the conventions of the DIHT paper (dual-iht.md, Sec. 3 and the crib sheet
//! table in `shared/papers/README.md`).
//!
//! For a sample with label `y`, margin `u = w.x`, each loss gives
//! - `value(u, y)`                 — `l(u, y)`;
//! - `derivative(u, y)`            — `l'(u, y)` (a subgradient where `l` has a kink);
//! - `conjugate(a, y)`             — `l*(a) = sup_u { a u - l(u) }`, finite on the feasible set `F`;
//! - `conjugate_derivative(a, y)`  — `l*'(a)`, used by the dual super-gradient `g_i = (x_i.w - l*'(a_i))/N`;
//! - `conjugate_curvature(a, y)`   — `l*''(a)` (0 where `l*` is linear), used to scale dual steps;
//! - `project(a, y)`               — Euclidean projection onto `F = dom l*`.
//!
//! A per-sample weight `c > 0` scales the loss, `l_c(u) = c l(u)`; then `l_c*(a) = c l*(a / c)` and
//! `F_c = c F`. [`Loss::sample`] builds the weighted view once so the kernels stay branch-light.
//!
//! [`dual`] holds each loss's dual coordinate maximiser ([`SampleLoss::coordinate_maximiser`]), the
//! per-row step of SDIHT's coordinate rule.

pub mod dual;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Squared loss `l(u, y) = (y - u)^2`; `l*(a) = a^2/4 + y a`, `F = R`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Squared;

/// Huber / smoothed hinge with smoothing `gamma > 0`; `l*(a) = y a + (gamma/2) a^2` on `y a in [-1, 0]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Huber {
    pub gamma: f64,
}

/// Hinge loss `max(0, 1 - y u)`; `l*(a) = y a` on `y a in [-1, 0]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hinge;

/// Logistic loss `log(1 + exp(-y u))`; with `b = -y a`, `l*(a) = b ln b + (1-b) ln(1-b)` on `b in [0, 1]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Logistic;

/// The losses thresher learns with. Classification losses need labels in `{-1, +1}`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Loss {
    Squared(Squared),
    Huber(Huber),
    Hinge(Hinge),
    Logistic(Logistic),
}

/// The loss names used on the command line, in config files and in the model file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LossKind {
    Squared,
    Huber,
    Hinge,
    Logistic,
}

impl LossKind {
    /// Every loss, in declaration order.
    pub const ALL: [LossKind; 4] = [
        LossKind::Squared,
        LossKind::Huber,
        LossKind::Hinge,
        LossKind::Logistic,
    ];
}

/// Default Huber smoothing, as in the paper's experiments (Sec. 5.2).
pub const DEFAULT_GAMMA: f64 = 0.25;

/// Keeps `b = -y a` of the logistic conjugate away from 0 and 1 where `l*'` is infinite.
const LOGISTIC_CLIP: f64 = 1e-12;

#[derive(Debug, Error, PartialEq)]
pub enum LossError {
    #[error("huber gamma must be finite and > 0, got {0}")]
    BadGamma(f64),
    #[error("label {label} is not valid for {loss} loss: classification labels must be -1 or +1")]
    BadLabel { loss: &'static str, label: f64 },
}

impl LossKind {
    pub fn name(self) -> &'static str {
        match self {
            LossKind::Squared => "squared",
            LossKind::Huber => "huber",
            LossKind::Hinge => "hinge",
            LossKind::Logistic => "logistic",
        }
    }
}

impl std::fmt::Display for LossKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Loss {
    /// Builds a loss; `gamma` is used by Huber only.
    pub fn new(kind: LossKind, gamma: f64) -> Result<Loss, LossError> {
        Ok(match kind {
            LossKind::Squared => Loss::Squared(Squared),
            LossKind::Huber => {
                if !(gamma.is_finite() && gamma > 0.0) {
                    return Err(LossError::BadGamma(gamma));
                }
                Loss::Huber(Huber { gamma })
            }
            LossKind::Hinge => Loss::Hinge(Hinge),
            LossKind::Logistic => Loss::Logistic(Logistic),
        })
    }

    pub fn kind(&self) -> LossKind {
        match self {
            Loss::Squared(_) => LossKind::Squared,
            Loss::Huber(_) => LossKind::Huber,
            Loss::Hinge(_) => LossKind::Hinge,
            Loss::Logistic(_) => LossKind::Logistic,
        }
    }

    /// Huber's gamma, when this is Huber.
    pub fn gamma(&self) -> Option<f64> {
        match self {
            Loss::Huber(h) => Some(h.gamma),
            _ => None,
        }
    }

    pub fn is_classification(&self) -> bool {
        !matches!(self, Loss::Squared(_))
    }

    /// Rejects labels the loss cannot take: classification losses need exactly `-1` or `+1`.
    pub fn check_label(&self, label: f64) -> Result<(), LossError> {
        if self.is_classification() && label != 1.0 && label != -1.0 {
            return Err(LossError::BadLabel {
                loss: self.kind().name(),
                label,
            });
        }
        Ok(())
    }

    /// An upper bound on `l''(u)`: the smoothness constant used by the primal baselines' steps.
    /// Hinge has none; its subgradient steps are safeguarded by backtracking instead.
    pub fn smoothness(&self) -> f64 {
        match self {
            Loss::Squared(_) => 2.0,
            Loss::Huber(h) => 1.0 / h.gamma,
            Loss::Hinge(_) => 1.0,
            Loss::Logistic(_) => 0.25,
        }
    }

    /// `l(u, y)`.
    #[inline]
    pub fn value(&self, u: f64, y: f64) -> f64 {
        match self {
            Loss::Squared(_) => (y - u) * (y - u),
            Loss::Huber(h) => {
                let m = y * u;
                if m >= 1.0 {
                    0.0
                } else if m < 1.0 - h.gamma {
                    1.0 - m - h.gamma / 2.0
                } else {
                    (1.0 - m) * (1.0 - m) / (2.0 * h.gamma)
                }
            }
            Loss::Hinge(_) => (1.0 - y * u).max(0.0),
            Loss::Logistic(_) => {
                // log(1 + exp(-m)) without overflow.
                let m = y * u;
                if m > 0.0 {
                    (-m).exp().ln_1p()
                } else {
                    -m + m.exp().ln_1p()
                }
            }
        }
    }

    /// `l'(u, y)`; at a kink, the subgradient that lies in `F` and is closest to the smooth side.
    #[inline]
    pub fn derivative(&self, u: f64, y: f64) -> f64 {
        match self {
            Loss::Squared(_) => 2.0 * (u - y),
            Loss::Huber(h) => {
                let m = y * u;
                if m >= 1.0 {
                    0.0
                } else if m < 1.0 - h.gamma {
                    -y
                } else {
                    -y * (1.0 - m) / h.gamma
                }
            }
            Loss::Hinge(_) => {
                if y * u < 1.0 {
                    -y
                } else {
                    0.0
                }
            }
            Loss::Logistic(_) => {
                let m = y * u;
                // -y * sigmoid(-m), stable for both signs of m.
                if m >= 0.0 {
                    let e = (-m).exp();
                    -y * e / (1.0 + e)
                } else {
                    -y / (1.0 + m.exp())
                }
            }
        }
    }

    /// `l''(u, y)` where the loss is twice differentiable, `None` for hinge (piecewise linear: no
    /// curvature to take a Newton step with). Squared: 2. Logistic: `s (1 - s)` with
    /// `s = sigmoid(y u)`. Huber: `1 / gamma` on the quadratic piece `1 - gamma <= y u < 1`, else 0 —
    /// a generalised second derivative (Huber is once differentiable only), which is what a damped
    /// Newton step on it uses.
    #[inline]
    pub fn second_derivative(&self, u: f64, y: f64) -> Option<f64> {
        match self {
            Loss::Squared(_) => Some(2.0),
            Loss::Huber(h) => {
                let m = y * u;
                Some(if m < 1.0 && m >= 1.0 - h.gamma {
                    1.0 / h.gamma
                } else {
                    0.0
                })
            }
            Loss::Hinge(_) => None,
            Loss::Logistic(_) => {
                // sigmoid(m) (1 - sigmoid(m)) = e / (1 + e)^2 with e = exp(-|m|), stable for both signs.
                let e = (-(y * u).abs()).exp();
                Some(e / ((1.0 + e) * (1.0 + e)))
            }
        }
    }

    /// `(l'(u, y), l''(u, y))`, equal bit for bit to [`Loss::derivative`] and
    /// [`Loss::second_derivative`]; logistic computes the `exp(-|y u|)` they share once.
    #[inline]
    pub fn derivatives(&self, u: f64, y: f64) -> (f64, Option<f64>) {
        match self {
            Loss::Logistic(_) => {
                let m = y * u;
                let e = (-m.abs()).exp();
                let first = if m >= 0.0 {
                    -y * e / (1.0 + e)
                } else {
                    -y / (1.0 + e)
                };
                (first, Some(e / ((1.0 + e) * (1.0 + e))))
            }
            _ => (self.derivative(u, y), self.second_derivative(u, y)),
        }
    }

    /// `(l(u, y), l'(u, y))`, equal bit for bit to [`Loss::value`] and [`Loss::derivative`]; logistic
    /// computes the `exp` they share once (at `m = 0` both take `exp(±0) = 1`).
    #[inline]
    pub fn value_and_derivative(&self, u: f64, y: f64) -> (f64, f64) {
        match self {
            Loss::Logistic(_) => {
                let m = y * u;
                if m >= 0.0 {
                    let e = (-m).exp();
                    let value = if m > 0.0 { e.ln_1p() } else { -m + e.ln_1p() };
                    (value, -y * e / (1.0 + e))
                } else {
                    let e = m.exp();
                    (-m + e.ln_1p(), -y / (1.0 + e))
                }
            }
            _ => (self.value(u, y), self.derivative(u, y)),
        }
    }

    /// `l*(a)`; `+inf` outside `F` (callers keep `a` feasible with [`Loss::project`]).
    #[inline]
    pub fn conjugate(&self, a: f64, y: f64) -> f64 {
        match self {
            Loss::Squared(_) => a * a / 4.0 + y * a,
            Loss::Huber(h) => {
                if !in_unit_dual_box(a, y) {
                    return f64::INFINITY;
                }
                y * a + h.gamma / 2.0 * a * a
            }
            Loss::Hinge(_) => {
                if !in_unit_dual_box(a, y) {
                    return f64::INFINITY;
                }
                y * a
            }
            Loss::Logistic(_) => {
                if !in_unit_dual_box(a, y) {
                    return f64::INFINITY;
                }
                let b = -y * a;
                xlogx(b) + xlogx(1.0 - b)
            }
        }
    }

    /// `l*'(a)`.
    #[inline]
    pub fn conjugate_derivative(&self, a: f64, y: f64) -> f64 {
        match self {
            Loss::Squared(_) => a / 2.0 + y,
            Loss::Huber(h) => y + h.gamma * a,
            Loss::Hinge(_) => y,
            Loss::Logistic(_) => {
                let b = (-y * a).clamp(LOGISTIC_CLIP, 1.0 - LOGISTIC_CLIP);
                -y * (b / (1.0 - b)).ln()
            }
        }
    }

    /// `l*''(a)`: curvature of the conjugate (0 for hinge, which is linear on `F`).
    #[inline]
    pub fn conjugate_curvature(&self, a: f64, y: f64) -> f64 {
        match self {
            Loss::Squared(_) => 0.5,
            Loss::Huber(h) => h.gamma,
            Loss::Hinge(_) => 0.0,
            Loss::Logistic(_) => {
                let b = (-y * a).clamp(LOGISTIC_CLIP, 1.0 - LOGISTIC_CLIP);
                1.0 / (b * (1.0 - b))
            }
        }
    }

    /// Projection onto `F = dom l*`.
    #[inline]
    pub fn project(&self, a: f64, y: f64) -> f64 {
        match self {
            Loss::Squared(_) => a,
            // y a in [-1, 0] with y = +-1  <=>  a in [min(-y, 0), max(-y, 0)].
            _ => {
                if y > 0.0 {
                    a.clamp(-1.0, 0.0)
                } else {
                    a.clamp(0.0, 1.0)
                }
            }
        }
    }

    /// The weighted per-sample view `l_c(u) = c l(u)` of this loss.
    #[inline]
    pub fn sample(&self, y: f64, c: f64) -> SampleLoss {
        SampleLoss { loss: *self, y, c }
    }
}

fn in_unit_dual_box(a: f64, y: f64) -> bool {
    let m = y * a;
    (-1.0 - 1e-12..=1e-12).contains(&m)
}

fn xlogx(b: f64) -> f64 {
    if b <= 0.0 {
        0.0
    } else {
        b * b.ln()
    }
}

/// One sample's loss `c l(., y)` with its conjugate `c l*(a / c)`: the per-row object of the dual.
#[derive(Debug, Clone, Copy)]
pub struct SampleLoss {
    loss: Loss,
    y: f64,
    c: f64,
}

impl SampleLoss {
    #[inline]
    pub fn kind(&self) -> LossKind {
        self.loss.kind()
    }
    #[inline]
    pub fn value(&self, u: f64) -> f64 {
        self.c * self.loss.value(u, self.y)
    }
    #[inline]
    pub fn derivative(&self, u: f64) -> f64 {
        self.c * self.loss.derivative(u, self.y)
    }
    #[inline]
    pub fn conjugate(&self, a: f64) -> f64 {
        self.c * self.loss.conjugate(a / self.c, self.y)
    }
    #[inline]
    pub fn conjugate_derivative(&self, a: f64) -> f64 {
        self.loss.conjugate_derivative(a / self.c, self.y)
    }
    #[inline]
    pub fn conjugate_curvature(&self, a: f64) -> f64 {
        self.loss.conjugate_curvature(a / self.c, self.y) / self.c
    }
    #[inline]
    pub fn project(&self, a: f64) -> f64 {
        self.c * self.loss.project(a / self.c, self.y)
    }
    /// The optimal dual variable for margin `u` (Thm 1(b)): `l'(u)` projected onto `F`.
    #[inline]
    pub fn dual_of_margin(&self, u: f64) -> f64 {
        self.project(self.derivative(u))
    }
    /// `(value(u), dual_of_margin(u))` bit for bit, sharing the work they have in common.
    #[inline]
    pub fn value_and_dual_of_margin(&self, u: f64) -> (f64, f64) {
        let (value, derivative) = self.loss.value_and_derivative(u, self.y);
        (self.c * value, self.project(self.c * derivative))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn all_losses() -> Vec<Loss> {
        vec![
            Loss::new(LossKind::Squared, 0.0).unwrap(),
            Loss::new(LossKind::Huber, 0.25).unwrap(),
            Loss::new(LossKind::Huber, 1.0).unwrap(),
            Loss::new(LossKind::Hinge, 0.0).unwrap(),
            Loss::new(LossKind::Logistic, 0.0).unwrap(),
        ]
    }

    fn labels(loss: &Loss) -> Vec<f64> {
        if loss.is_classification() {
            vec![-1.0, 1.0]
        } else {
            vec![-2.5, 0.0, 1.3]
        }
    }

    /// Calls `check(rng, loss, y)` 500 times for every loss and label, drawing from one stream seeded
    /// with `seed`.
    fn for_each_draw(seed: u64, mut check: impl FnMut(&mut rand_chacha::ChaCha8Rng, &Loss, f64)) {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        for loss in all_losses() {
            for y in labels(&loss) {
                for _ in 0..500 {
                    check(&mut rng, &loss, y);
                }
            }
        }
    }

    /// The shared-`exp` pairs equal the separate calls bit for bit, at `m = 0` (both signs), far out,
    /// on NaN, and through the weighted view's projection.
    #[test]
    fn value_and_derivative_equal_the_separate_calls_bit_for_bit() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut margins = vec![
            0.0,
            -0.0,
            1e-300,
            -1e-300,
            40.0,
            -40.0,
            800.0,
            -800.0,
            f64::NAN,
        ];
        margins.extend((0..2000).map(|_| rng.gen_range(-30.0..30.0)));
        for loss in all_losses() {
            for y in labels(&loss) {
                for &u in &margins {
                    let (value, derivative) = loss.value_and_derivative(u, y);
                    assert_eq!(value.to_bits(), loss.value(u, y).to_bits(), "{loss:?} {u}");
                    let d = loss.derivative(u, y).to_bits();
                    assert_eq!(derivative.to_bits(), d, "{loss:?} {u}");
                    // The same for the pair of derivatives (a NaN margin: NaN in both, of either sign).
                    let same =
                        |a: f64, b: f64| a.to_bits() == b.to_bits() || a.is_nan() && b.is_nan();
                    let (first, second) = loss.derivatives(u, y);
                    assert!(same(first, loss.derivative(u, y)), "{loss:?} {u}");
                    match (second, loss.second_derivative(u, y)) {
                        (Some(a), Some(b)) => assert!(same(a, b), "{loss:?} {u}"),
                        (a, b) => assert_eq!(a.is_some(), b.is_some(), "{loss:?} {u}"),
                    }
                    for c in [1.0, 0.3, 2.0] {
                        let s = loss.sample(y, c);
                        let (value, dual) = s.value_and_dual_of_margin(u);
                        assert_eq!(value.to_bits(), s.value(u).to_bits());
                        assert_eq!(dual.to_bits(), s.dual_of_margin(u).to_bits());
                    }
                }
            }
        }
    }

    #[test]
    fn fenchel_young_inequality_and_equality_at_the_derivative() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        for loss in all_losses() {
            for y in labels(&loss) {
                for c in [1.0, 0.3, 2.0] {
                    let s = loss.sample(y, c);
                    for _ in 0..2000 {
                        let u: f64 = rng.gen_range(-4.0..4.0);
                        let a = s.project(rng.gen_range(-3.0..3.0));
                        // l(u) + l*(a) >= a u everywhere on F.
                        let slack = s.value(u) + s.conjugate(a) - a * u;
                        assert!(slack >= -1e-9, "{loss:?} y={y} u={u} a={a} slack={slack}");
                        // Equality at a = l'(u).
                        let a_star = s.derivative(u);
                        let eq = s.value(u) + s.conjugate(a_star) - a_star * u;
                        assert!(eq.abs() < 1e-9, "{loss:?} y={y} u={u} FY gap {eq}");
                        assert_eq!(s.project(a_star), a_star, "l'(u) must lie in F");
                    }
                }
            }
        }
    }

    #[test]
    fn conjugate_derivative_matches_finite_differences() {
        for_each_draw(2, |rng, loss, y| {
            // Stay strictly inside F so the central difference is defined.
            let a = if loss.is_classification() {
                -y * rng.gen_range(0.05..0.95)
            } else {
                rng.gen_range(-3.0..3.0)
            };
            let h = 1e-6;
            let fd = (loss.conjugate(a + h, y) - loss.conjugate(a - h, y)) / (2.0 * h);
            let an = loss.conjugate_derivative(a, y);
            assert!(
                (fd - an).abs() < 1e-5 * (1.0 + an.abs()),
                "{loss:?} a={a}: {fd} vs {an}"
            );
            let fd2 = (loss.conjugate_derivative(a + h, y) - loss.conjugate_derivative(a - h, y))
                / (2.0 * h);
            let an2 = loss.conjugate_curvature(a, y);
            assert!(
                (fd2 - an2).abs() < 1e-4 * (1.0 + an2.abs()),
                "{loss:?} a={a}: {fd2} vs {an2}"
            );
        });
    }

    #[test]
    fn loss_derivative_matches_finite_differences_off_kinks() {
        for_each_draw(3, |rng, loss, y| {
            let u: f64 = rng.gen_range(-4.0..4.0);
            let h = 1e-7;
            let fd = (loss.value(u + h, y) - loss.value(u - h, y)) / (2.0 * h);
            let kink = matches!(loss, Loss::Hinge(_)) && ((y * u) - 1.0).abs() < 1e-5;
            if !kink {
                assert!((fd - loss.derivative(u, y)).abs() < 1e-5, "{loss:?} u={u}");
            }
        });
    }

    /// `l''` against a central difference of `l'` away from Huber's two kinks; hinge has none.
    #[test]
    fn second_derivative_matches_finite_differences_off_kinks() {
        for_each_draw(5, |rng, loss, y| {
            let u: f64 = rng.gen_range(-4.0..4.0);
            let Some(an) = loss.second_derivative(u, y) else {
                assert!(matches!(loss, Loss::Hinge(_)));
                return;
            };
            let h = 1e-6;
            let kink = match loss {
                Loss::Huber(g) => {
                    let m = y * u;
                    (m - 1.0).abs() < 1e-4 || (m - 1.0 + g.gamma).abs() < 1e-4
                }
                _ => false,
            };
            if !kink {
                let fd = (loss.derivative(u + h, y) - loss.derivative(u - h, y)) / (2.0 * h);
                assert!(
                    (fd - an).abs() < 1e-5 * (1.0 + an),
                    "{loss:?} u={u}: {fd} vs {an}"
                );
            }
        });
    }

    #[test]
    fn projection_lands_in_f_and_is_idempotent() {
        for_each_draw(4, |rng, loss, y| {
            let a: f64 = rng.gen_range(-10.0..10.0);
            let p = loss.project(a, y);
            assert!(loss.conjugate(p, y).is_finite());
            assert_eq!(loss.project(p, y), p);
            if loss.is_classification() {
                assert!((-1.0..=0.0).contains(&(y * p)));
            }
        });
    }

    #[test]
    fn exact_values_from_the_crib_sheet() {
        let sq = Loss::new(LossKind::Squared, 0.0).unwrap();
        assert_eq!(sq.value(1.0, 3.0), 4.0);
        assert_eq!(sq.conjugate(2.0, 1.0), 3.0);
        let hub = Loss::new(LossKind::Huber, 0.5).unwrap();
        assert_eq!(hub.value(0.0, 1.0), 0.75);
        assert_eq!(hub.value(0.75, 1.0), 0.0625);
        assert_eq!(hub.value(2.0, 1.0), 0.0);
        let lg = Loss::new(LossKind::Logistic, 0.0).unwrap();
        assert!((lg.value(0.0, 1.0) - 2f64.ln()).abs() < 1e-15);
        assert!((lg.conjugate(-0.5, 1.0) - (0.5f64.ln())).abs() < 1e-15);
    }

    #[test]
    fn labels_and_gamma_are_validated() {
        let hinge = Loss::new(LossKind::Hinge, 0.0).unwrap();
        assert!(hinge.check_label(1.0).is_ok());
        assert_eq!(
            hinge.check_label(3.0),
            Err(LossError::BadLabel {
                loss: "hinge",
                label: 3.0
            })
        );
        assert!(Loss::new(LossKind::Squared, 0.0)
            .unwrap()
            .check_label(3.0)
            .is_ok());
        assert_eq!(
            Loss::new(LossKind::Huber, 0.0),
            Err(LossError::BadGamma(0.0))
        );
        assert!(Loss::new(LossKind::Huber, f64::NAN).is_err());
    }
}
