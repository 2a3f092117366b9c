//! Polishing a k-sparse model on its own support: the convex problem that remains once the support is
//! fixed, solved by Newton's method.
//!
//! The k-sparse search (SDIHT, IHT, mirror descent) picks a support `S`, `|S| <= k`, but stops with
//! weights that need not minimise the objective on it: the dual solvers stall where the support trades
//! near-tied features, and the model returned is the best *visited* iterate. On a fixed `S` problem
//! (1.1) is smooth and strongly convex (the ridge term): `P_S(w_S, b) = (1/M) sum_i c_i l(x_iS.w_S + b,
//! y_i) + (lambda/2) ||w_S||^2`, with at most `k` weights and the intercept. [`polish`] minimises it by
//! Newton's method: gradient `(1/M) sum_i c_i l'(u_i) x_iS + lambda w_S` (and `(1/M) sum_i c_i l'(u_i)`
//! for `b`), Hessian `(1/M) sum_i c_i l''(u_i) x_iS x_iS^T + lambda I` (no ridge on `b`), the step from
//! a Cholesky solve, Armijo backtracking on `P_S`, stopping when the Newton decrement `-g.d / 2` is
//! below [`TOLERANCE`] relative to `max(1, |P|)` or after [`MAX_ITERATIONS`] steps. Squared loss
//! needs one step (its `P_S` is quadratic: the ridge solution on `S`).
//!
//! **The certificate stays exact.** The polished model is still k-sparse, so weak duality
//! `P(w) >= D(alpha)` holds against every dual point the search found; [`polish_fit`] keeps the
//! polished model only when its primal is lower, keeps the search's best dual, and raises it to `D` at
//! the polished model's dual point (Thm 1(b)) when that is higher. The gap `P - D` therefore never grows.
//!
//! **Which losses.** Squared and logistic are twice differentiable. Huber is once differentiable with
//! a piecewise-constant `l''` ([`crate::loss::Loss::second_derivative`]); damped Newton on it is the
//! semismooth Newton method and the line search keeps every step a descent, so it is polished too.
//! Hinge has no curvature: polishing is skipped ([`PolishOutcome::NonSmoothLoss`]) and the search's
//! model is returned unchanged.
//!
//! **The linear solve.** The Hessian is at most `(k + 1) x (k + 1)` and dense; it is factorised by the
//! crate's own short Cholesky (`solver::primal::cholesky_solve`, which HTP already uses), damped by a
//! growing multiple of its largest diagonal if rounding makes it lose definiteness (the intercept's
//! row has no ridge). No linear-algebra crate is a dependency and a solve of this size does not need
//! one. Above [`MAX_COORDINATES`] unknowns the `O(m^3)` solve and `O(m^2)` matrix are not worth it and
//! polishing is skipped ([`PolishOutcome::TooManyCoordinates`]).
//!
//! Cost: two passes to gather each row's entries on `S` (`O(nnz)`, through a `d / 8`-byte mask and its
//! ranks: `Restricted::gather`), then per Newton step
//! `O(sum_i nnz_S(x_i)^2 + m^3)` for the Hessian and the solve, and `O(N)` per line-search trial.
//! Each walk over the rows is cut into chunks that the caller's [`Spread`] walks (`fit`: on both
//! cores); the sums are added chunk by chunk in order ([`super::spread`]).

use serde::{Deserialize, Serialize};

use super::driver::{FitReport, SparseModel};
use super::objective::{fused_certificate_with_intercept, CertificateScratch, DualScratch};
use super::primal::cholesky_solve;
use super::spread::{chunk, chunks_of, map, Spread};
use super::{Certificate, Problem};
use crate::sample::SampleSet;

/// Newton steps at most.
pub const MAX_ITERATIONS: usize = 50;
/// Stop once the Newton decrement `-g.d / 2` (the predicted decrease) is at most this times `max(1, |P|)`.
pub const TOLERANCE: f64 = 1e-13;
/// The most unknowns (support plus intercept) polished: the dense Hessian takes `8 m^2` bytes (8 MiB)
/// and its factorisation `m^3 / 3` flops (about 0.4 G).
pub const MAX_COORDINATES: usize = 1024;
// The gather's positions into the support are two bytes each.
const _: () = assert!(MAX_COORDINATES <= u16::MAX as usize);
/// Armijo's sufficient-decrease fraction.
const ARMIJO: f64 = 1e-4;
/// Step halvings before the line search gives up (the direction then makes no measurable progress).
const MAX_HALVINGS: usize = 60;

/// What polishing did (the model file's `polish`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolishOutcome {
    /// The polished model had the lower primal and replaced the search's.
    Kept,
    /// Polishing found no lower primal (the search's model was already optimal on its support, to
    /// rounding); the search's model is returned.
    NotLower,
    /// Hinge loss: no curvature to take a Newton step with; not polished.
    NonSmoothLoss,
    /// More than [`MAX_COORDINATES`] unknowns; not polished.
    TooManyCoordinates,
    /// No weight and no intercept to solve for.
    NothingToSolve,
    /// Not polished because the caller turned it off (`fit --no-polish`).
    Off,
}

/// The record of a polish, as the model file carries it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PolishRecord {
    pub outcome: PolishOutcome,
    /// `P` of the search's model (the certificate's primal before polishing).
    pub primal_search: f64,
    /// `P` of the polished model, when one was computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primal_polished: Option<f64>,
    /// Newton steps taken.
    pub iterations: usize,
}

impl PolishRecord {
    /// The record of a fit that was not polished for `outcome`'s reason.
    pub fn not_run(outcome: PolishOutcome, primal_search: f64) -> PolishRecord {
        PolishRecord {
            outcome,
            primal_search,
            primal_polished: None,
            iterations: 0,
        }
    }
}

/// A model solved on its support.
#[derive(Debug, Clone, PartialEq)]
pub struct Polished {
    pub model: SparseModel,
    /// `P` of the starting model and of [`Polished::model`], both computed here (same sums, same order).
    pub primal_start: f64,
    pub primal: f64,
    pub iterations: usize,
}

impl Polished {
    /// The record of this polish against the search's primal `primal_search`: `kept` when its primal
    /// is finite and lower than both the search's and its own start's, and its model finite.
    pub fn judged(&self, primal_search: f64) -> PolishRecord {
        let lower = self.primal.is_finite()
            && self.primal < primal_search
            && self.primal < self.primal_start
            && self.model.weights.iter().all(|w| w.is_finite())
            && self.model.intercept.is_finite();
        PolishRecord {
            outcome: if lower {
                PolishOutcome::Kept
            } else {
                PolishOutcome::NotLower
            },
            primal_search,
            primal_polished: Some(self.primal),
            iterations: self.iterations,
        }
    }
}

/// Each row's entries on the support, chunk by chunk ([`chunks_of`] of the rows, the chunks every
/// other walk of the polish takes): positions into the support (ascending) and values, CSR.
struct Restricted {
    rows: usize,
    parts: Vec<Part>,
}

/// One chunk's rows of [`Restricted`], its row ends counted from the chunk's own first entry.
struct Part {
    /// The chunk's first row.
    first: usize,
    ptr: Vec<usize>,
    /// Positions into the support: at most [`MAX_COORDINATES`], so two bytes each.
    pos: Vec<u16>,
    val: Vec<f64>,
}

impl Part {
    /// Row `i` (counted from the data set's first row) of this chunk.
    fn row(&self, i: usize) -> (&[u16], &[f64]) {
        let local = i - self.first;
        let start = if local == 0 { 0 } else { self.ptr[local - 1] };
        let range = start..self.ptr[local];
        (&self.pos[range.clone()], &self.val[range])
    }
}

impl Restricted {
    /// Each row's entries on the ascending `support`. A stored value is tested against a bit mask of
    /// the support (`d / 8` bytes, cache resident at d = 2^20), and its position is the count of the
    /// mask's bits below it: a rank per mask word (`d / 16` bytes) and a popcount, all in cache, where
    /// a dense map from feature to position (`4 d` bytes) missed at nearly every hit. Each chunk counts
    /// its entries first and writes them into buffers of that size without a branch per value (a hit
    /// advances the write position): a quarter of the W3-like stream's values are hits, too many for
    /// the branch predictor and too many for growing buffers by copies. The parts stay apart: every
    /// other walk of the polish takes the same chunks. Rows ascend in their indices, so the positions
    /// ascend too.
    fn gather<S: SampleSet>(data: &S, support: &[u32], spread: &dyn Spread) -> Restricted {
        let dim = data
            .dim()
            .max(support.last().map_or(0, |&j| j as usize + 1));
        let mut mask = vec![0u64; dim.div_ceil(64)];
        for &j in support {
            mask[j as usize / 64] |= 1 << (j % 64);
        }
        // `support.len() <= MAX_COORDINATES < 2^16` (checked by `polish`): every rank fits.
        let mut rank = Vec::with_capacity(mask.len());
        let mut below = 0u16;
        for word in &mask {
            rank.push(below);
            below += word.count_ones() as u16;
        }
        let hit = |j: u32| (mask[j as usize / 64] >> (j % 64) & 1) as usize;
        let rows = data.len();
        let chunks = chunks_of(rows);
        let parts = map(spread, chunks, |c| {
            let range = chunk(rows, chunks, c);
            let entries: usize = range
                .clone()
                .map(|i| data.row(i).indices.iter().map(|&j| hit(j)).sum::<usize>())
                .sum();
            // One slot past the last entry: a miss is written there and then overwritten.
            let (mut pos, mut val) = (vec![0u16; entries + 1], vec![0.0f64; entries + 1]);
            let mut ptr = Vec::with_capacity(range.len());
            let mut at = 0;
            for i in range.clone() {
                let r = data.row(i);
                for (&j, &v) in r.indices.iter().zip(r.values) {
                    let word = j as usize / 64;
                    let below = mask[word] & ((1u64 << (j % 64)) - 1);
                    // `at <= entries` always: it passes the last entry only on a hit, and there are
                    // `entries` of them.
                    pos[at] = rank[word] + below.count_ones() as u16;
                    val[at] = v;
                    at += hit(j);
                }
                ptr.push(at);
            }
            pos.truncate(at);
            val.truncate(at);
            Part {
                first: range.start,
                ptr,
                pos,
                val,
            }
        });
        Restricted { rows, parts }
    }

    fn rows(&self) -> usize {
        self.rows
    }

    /// `x_iS . x[..s] + offset_b` for every row, where `offset_b` is the intercept.
    fn margins(&self, x: &[f64], b: f64, out: &mut Vec<f64>, spread: &dyn Spread) {
        let (rows, chunks) = (self.rows(), self.parts.len());
        let parts = map(spread, chunks, |c| {
            let part = &self.parts[c];
            chunk(rows, chunks, c)
                .map(|i| {
                    let (pos, val) = part.row(i);
                    let dot: f64 = pos.iter().zip(val).map(|(&p, v)| x[p as usize] * v).sum();
                    dot + b
                })
                .collect::<Vec<f64>>()
        });
        out.clear();
        for part in parts {
            out.extend_from_slice(&part);
        }
    }
}

/// `P_S` at margins `u` and support weights `w`: `(1/M) sum_i c_i l(u_i) + (lambda/2) ||w||^2`.
fn objective<S: SampleSet>(problem: &Problem<S>, u: &[f64], w: &[f64], spread: &dyn Spread) -> f64 {
    let data = problem.data;
    let chunks = chunks_of(u.len());
    let parts = map(spread, chunks, |c| {
        chunk(u.len(), chunks, c)
            .map(|i| {
                let r = data.row(i);
                r.weight * problem.loss.value(u[i], r.label)
            })
            .sum::<f64>()
    });
    let loss: f64 = parts.into_iter().sum();
    loss / problem.mass() + 0.5 * problem.lambda * w.iter().map(|v| v * v).sum::<f64>()
}

/// Minimises `P` over the weights on `start`'s support and (when the problem has one) the intercept,
/// from `start`, by damped Newton (the module docs), its walks over the rows spread by `spread`. `Err`
/// names why it was not run.
pub fn polish<S: SampleSet>(
    problem: &Problem<S>,
    start: &SparseModel,
    spread: &dyn Spread,
) -> Result<Polished, PolishOutcome> {
    polish_on(problem, start, spread).map(|(polished, _)| polished)
}

/// [`polish`], with the rows restricted to the support it solved on (for [`polish_fit`]'s certificate).
fn polish_on<S: SampleSet>(
    problem: &Problem<S>,
    start: &SparseModel,
    spread: &dyn Spread,
) -> Result<(Polished, Restricted), PolishOutcome> {
    if problem.loss.second_derivative(0.0, 1.0).is_none() {
        return Err(PolishOutcome::NonSmoothLoss);
    }
    let s = start.support.len();
    let m = s + usize::from(problem.intercept);
    if m == 0 {
        return Err(PolishOutcome::NothingToSolve);
    }
    if m > MAX_COORDINATES {
        return Err(PolishOutcome::TooManyCoordinates);
    }
    let rows = Restricted::gather(problem.data, &start.support, spread);
    // x = (w_S, b): b is an unknown only with an intercept, else fixed at the start's.
    let mut x = start.weights.clone();
    let fixed_b = start.intercept;
    if problem.intercept {
        x.push(start.intercept);
    }
    let b_of = |x: &[f64]| if problem.intercept { x[s] } else { fixed_b };
    let mut u = Vec::new();
    rows.margins(&x, b_of(&x), &mut u, spread);
    let primal_start = objective(problem, &u, &x[..s], spread);
    let mut f = primal_start;
    let mut newton = NewtonScratch::new(m);
    let mut iterations = 0;
    while iterations < MAX_ITERATIONS && f.is_finite() {
        newton.gradient_and_hessian(problem, &rows, &u, &x, s, spread);
        if !newton.solve() {
            break;
        }
        // The Newton decrement squared, -g.d = g H^-1 g > 0: twice the predicted decrease.
        let slope: f64 = newton.g.iter().zip(&newton.d).map(|(g, d)| g * d).sum();
        if slope.is_nan() || slope >= 0.0 || -slope / 2.0 <= TOLERANCE * f.abs().max(1.0) {
            break;
        }
        // du_i = x_iS . d_S + d_b: the margins move linearly along d.
        rows.margins(&newton.d, b_of(&newton.d), &mut newton.du, spread);
        let Some((t, f_t)) = newton.line_search(problem, &u, &x, s, f, slope, spread) else {
            break;
        };
        for (x, d) in x.iter_mut().zip(&newton.d) {
            *x += t * d;
        }
        // Margins from scratch rather than u + t du, so no rounding drift builds up across steps;
        // the objective at them differs from the trial's `f_t` by rounding alone, and is taken once,
        // after the last step (each evaluation is a logarithm and an exponential per row).
        rows.margins(&x, b_of(&x), &mut u, spread);
        debug_assert!(f_t <= f);
        f = f_t;
        iterations += 1;
    }
    if iterations > 0 {
        f = objective(problem, &u, &x[..s], spread);
    }
    let intercept = b_of(&x);
    x.truncate(s);
    Ok((
        Polished {
            model: SparseModel {
                support: start.support.clone(),
                weights: x,
                intercept,
            },
            primal_start,
            primal: f,
            iterations,
        },
        rows,
    ))
}

/// The Newton system and its buffers, reused across steps.
struct NewtonScratch {
    m: usize,
    g: Vec<f64>,
    /// Lower triangle of the Hessian, row-major `m x m`.
    h: Vec<f64>,
    /// The factorised copy, then the step `d = -H^-1 g`.
    factor: Vec<f64>,
    d: Vec<f64>,
    du: Vec<f64>,
    trial_u: Vec<f64>,
    trial_w: Vec<f64>,
}

impl NewtonScratch {
    fn new(m: usize) -> NewtonScratch {
        NewtonScratch {
            m,
            g: vec![0.0; m],
            h: vec![0.0; m * m],
            factor: vec![0.0; m * m],
            d: vec![0.0; m],
            du: Vec::new(),
            trial_u: Vec::new(),
            trial_w: Vec::new(),
        }
    }

    /// `g` and the lower triangle of `H` at margins `u` and unknowns `x` (`s` weights, then `b` if
    /// `m > s`).
    #[allow(clippy::too_many_arguments)]
    fn gradient_and_hessian<S: SampleSet>(
        &mut self,
        problem: &Problem<S>,
        rows: &Restricted,
        u: &[f64],
        x: &[f64],
        s: usize,
        spread: &dyn Spread,
    ) {
        let m = self.m;
        let n = problem.mass();
        let chunks = rows.parts.len();
        // Each chunk's own `g` and lower triangle of `H`, then their sum in chunk order.
        let parts = map(spread, chunks, |c| {
            let (mut g, mut h) = (vec![0.0; m], vec![0.0; m * m]);
            let part = &rows.parts[c];
            for i in chunk(u.len(), chunks, c) {
                let r = problem.data.row(i);
                let (first, second) = problem.loss.derivatives(u[i], r.label);
                let d1 = r.weight * first / n;
                let d2 = r.weight * second.unwrap_or(0.0) / n;
                let (pos, val) = part.row(i);
                for (a, (&p, &v)) in pos.iter().zip(val).enumerate() {
                    let p = p as usize;
                    g[p] += d1 * v;
                    if d2 != 0.0 {
                        // Positions ascend along the row: (p, q) with q <= p is the lower triangle.
                        for (&q, &v2) in pos[..=a].iter().zip(&val[..=a]) {
                            h[p * m + q as usize] += d2 * v * v2;
                        }
                    }
                }
                if m > s {
                    g[s] += d1;
                    h[s * m + s] += d2;
                    for (&p, &v) in pos.iter().zip(val) {
                        h[s * m + p as usize] += d2 * v;
                    }
                }
            }
            (g, h)
        });
        self.g.iter_mut().for_each(|v| *v = 0.0);
        self.h.iter_mut().for_each(|v| *v = 0.0);
        for (g, h) in parts {
            self.g.iter_mut().zip(&g).for_each(|(a, b)| *a += b);
            self.h.iter_mut().zip(&h).for_each(|(a, b)| *a += b);
        }
        for (j, (g, &x)) in self.g[..s].iter_mut().zip(&x[..s]).enumerate() {
            *g += problem.lambda * x;
            self.h[j * m + j] += problem.lambda;
        }
    }

    /// `d = -H^-1 g` by Cholesky; when rounding makes `H` lose definiteness (an intercept on data
    /// whose curvature has vanished), retried with `mu I` added, `mu` from `1e-12` of the largest
    /// diagonal up by 100x. False if even that fails.
    fn solve(&mut self) -> bool {
        let m = self.m;
        let scale = (0..m)
            .map(|j| self.h[j * m + j].abs())
            .fold(0.0f64, f64::max)
            .max(f64::MIN_POSITIVE);
        let mut damping = 0.0;
        for _ in 0..8 {
            self.factor.copy_from_slice(&self.h);
            for j in 0..m {
                self.factor[j * m + j] += damping;
            }
            for (d, g) in self.d.iter_mut().zip(&self.g) {
                *d = -g;
            }
            if cholesky_solve(&mut self.factor, &mut self.d, m)
                && self.d.iter().all(|d| d.is_finite())
            {
                return true;
            }
            damping = if damping == 0.0 {
                1e-12 * scale
            } else {
                damping * 100.0
            };
        }
        false
    }

    /// Backtracking from the full step: the first `t = 2^-j` with
    /// `P(x + t d) <= P(x) + ARMIJO t g.d`, and its value; `None` if none within [`MAX_HALVINGS`].
    #[allow(clippy::too_many_arguments)]
    fn line_search<S: SampleSet>(
        &mut self,
        problem: &Problem<S>,
        u: &[f64],
        x: &[f64],
        s: usize,
        f: f64,
        slope: f64,
        spread: &dyn Spread,
    ) -> Option<(f64, f64)> {
        let mut t = 1.0;
        for _ in 0..MAX_HALVINGS {
            self.trial_u.clear();
            self.trial_u
                .extend(u.iter().zip(&self.du).map(|(u, du)| u + t * du));
            self.trial_w.clear();
            self.trial_w
                .extend(x[..s].iter().zip(&self.d).map(|(x, d)| x + t * d));
            let f_t = objective(problem, &self.trial_u, &self.trial_w, spread);
            if f_t.is_finite() && f_t <= f + ARMIJO * t * slope {
                return Some((t, f_t));
            }
            t *= 0.5;
        }
        None
    }
}

/// Polishes a run's best model ([`polish`]) and keeps it when its primal is lower than the
/// certificate's: the report's model becomes the polished one and its certificate
/// `Certificate::new(P(polished), max(D_best, D(alpha(polished))), N)`, so the gap only shrinks. The
/// record says what happened.
pub fn polish_fit<S: SampleSet>(
    problem: &Problem<S>,
    report: &mut FitReport,
    spread: &std::sync::Arc<dyn Spread>,
) -> PolishRecord {
    let primal_search = report.certificate.primal;
    let (polished, rows) = match polish_on(problem, &report.model, &**spread) {
        Ok(polished) => polished,
        Err(outcome) => return PolishRecord::not_run(outcome, primal_search),
    };
    let record = polished.judged(primal_search);
    if record.outcome == PolishOutcome::Kept {
        let model = polished.model;
        let w = model.to_dense(problem.data.dim());
        // `D` at the polished model's dual point, as `Problem::dual_of_model` gives it, in the fused
        // certificate's one walk (two with an intercept) against the support's bit mask.
        let dual = if problem.intercept || model.intercept == 0.0 {
            let at = (
                &w[..],
                &model.support[..],
                problem.intercept.then_some(model.intercept),
            );
            let mut scratch = CertificateScratch::default();
            scratch.spread = Some(std::sync::Arc::clone(spread));
            let (data, loss) = (problem.data, &problem.loss);
            // `x_iS . w_S` over the polish's restricted rows: the products the first walk's masked
            // dot would take over each whole row, in the same order, so the same margins, without
            // that walk's dot products (nor, with an intercept, its reads of every row).
            let mut dots = Vec::new();
            rows.margins(&model.weights, 0.0, &mut dots, &**spread);
            // Freed before the walk, as when the polish dropped them itself.
            drop(rows);
            fused_certificate_with_intercept(
                data,
                loss,
                problem.lambda,
                problem.k,
                at,
                None,
                Some(&dots),
                &mut scratch,
            )
            .dual_at_primal
        } else {
            let mut alpha = Vec::new();
            let mut scratch = DualScratch::default();
            problem.dual_of_model(problem.k, &w, model.intercept, &mut alpha, &mut scratch)
        };
        let best_dual = if dual.is_finite() {
            report.certificate.dual.max(dual)
        } else {
            report.certificate.dual
        };
        report.certificate =
            Certificate::new(polished.primal, best_dual, report.certificate.samples);
        report.model = model;
    }
    record
}

#[cfg(test)]
mod tests;
