//! Stochastic sparse mirror descent (sparse-mirror-descent.md, Ch. 3 and 5) on the crate's objective
//! `P(w, b) = (1/N) sum_i c_i l(w.x_i + b) + (lambda/2) ||w||^2` over `w in C ∩ S_k`.
//!
//! One step on a sample (or mini-batch) `B`:
//! 1. `g = (1/|B|) sum_{i in B} l'(w.x_i + b) x_i + lambda w` (a stochastic gradient of `P`);
//! 2. mirror-space point `theta = grad psi(w_t) - eta_t g` (Alg. 3.1, `y_{k+1}`);
//! 3. the sparse Bregman step (5.15) `w_{t+1} = argmin_{x in C ∩ S_k} <x, g> + B_psi(x, w_t) / eta_t`:
//!    support by greedy selection (Sec. 5.2) — which for this crate's symmetric maps and sets is exactly
//!    "the `k` largest `|theta_j|`" (see [`greedy`]) — then the restricted solve on it ([`maps`]).
//! 4. the intercept, if any, takes a plain SGD step.
//!
//! Only `supp(w_t) ∪ supp(x_i)` can be nonzero after a step (`grad psi*(0) = 0` for every map here), so a
//! step costs `O(k + nnz(B))` (plus one scalar bisection for a constrained set), independent of `d`.
//!
//! [`state::MirrorState`] is the state advanced sample by sample ([`state::MirrorState::step_sample`],
//! [`state::MirrorState::step_batch`]) — the shape a streaming learner needs; it grows with the feature
//! space.
//! [`MirrorDescent`] drives it as a [`Solver`] (one epoch = one shuffled pass) and certifies it like IHT:
//! `alpha_i = l'(w.x_i + b)` projected onto `F` (Thm 1(b) of the DIHT paper), then `D(alpha)` and the gap.
//!
//! Step size ([`MirrorStep`]): the default `Auto` is `eta_t = 1 / (s_psi (L + (L/H + lambda) t))`: it
//! starts at the safe `1/L` of a smooth problem and decays like `1/t` (the classic SGD rule for a
//! strongly convex objective), with `s_psi` = [`MirrorMap::dual_scale`] at the sparsity `k` and a horizon `H`: the step
//! halves after `H` steps even when `lambda` is tiny (offline `H` = one pass; streaming default
//! 10 000 steps) — the ridge `lambda` alone is too weak a curvature to decay on (a `1/(lambda t)` step
//! stalls at the gradient-noise floor for the `lambda` of the benchmarks). `L` is the smoothness of the
//! mini-batch gradient, `l''_max L_B + lambda`: a bare state uses `L_B = max_i c_i ||x_i||^2` over the
//! rows seen so far; the offline solver knows the data and uses the expected smoothness of a batch of
//! `B` drawn without replacement from `N` ("b-nice" sampling, Gower et al. 2019, *SGD: general analysis and
//! improved rates*),
//! `L_B = (N - B) / (B (N - 1)) L_max + N (B - 1) / (B (N - 1)) L_full`, with `L_max = max_i c_i ||x_i||^2`
//! and `L_full = sigma_max(X^T C X / N)`, estimated by power iteration on [`CURVATURE_SAMPLE_ROWS`]
//! evenly spread rows (biased upwards on a subsample, and capped by `L_max`), so the setup does not
//! grow with `N`: on sparse text rows `L_full` is far below `L_max`, so mini-batches earn
//! proportionally larger steps.
//! The thesis's `eta_t = R / (G^2 sqrt(t) (1 + phi))` (5.71) and a constant step are options.

pub mod greedy;
pub mod maps;
pub(crate) mod pending;
pub mod state;
#[cfg(test)]
mod tests;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use thiserror::Error;

pub use maps::{Constraint, MirrorMap};
use state::MirrorState;

use super::objective::{
    best_intercept, fused_certificate_with_intercept, margins_into, primal_value,
    CertificateScratch, DualScratch,
};
use super::{Certificate, ModelView, Problem, Solver};
use crate::sample::SampleSet;
use crate::sparse::{prefetch_all, sparse_sq_norm};

/// How many rows ahead of the one it steps on an epoch asks the CPU for (the rows come in a shuffled
/// order, which the hardware prefetcher cannot follow): on the 1M-row W3 stream 4 ahead measured best
/// of 2, 4 and 8, the pass 0.86x the time without (docs/benchmarks/fit_speed.md).
const ROW_PREFETCH_DISTANCE: usize = 4;

#[derive(Debug, Clone, PartialEq, Error)]
pub enum MirrorError {
    #[error("hyperbolic-entropy beta must be finite and > 0, got {0}")]
    BadBeta(f64),
    #[error("p-norm exponent p must be finite and >= 2, got {0}")]
    BadP(f64),
    #[error("constraint radius must be finite and > 0, got {0}")]
    BadRadius(f64),
    #[error("constraint must be none, box:R or l1:R, got {0:?}")]
    BadConstraint(String),
    #[error("batch size must be >= 1")]
    ZeroBatch,
    #[error("step parameters must be finite and > 0 (phi >= 0), got {0}")]
    BadStep(f64),
    #[error("l1 strength must be finite and > 0, got {0}")]
    BadL1(f64),
}

impl std::str::FromStr for Constraint {
    type Err = MirrorError;

    /// `none`, `box:R` (`||w||_inf <= R`) or `l1:R` (`||w||_1 <= R`).
    fn from_str(text: &str) -> Result<Constraint, MirrorError> {
        let bad = || MirrorError::BadConstraint(text.to_string());
        if text == "none" {
            return Ok(Constraint::None);
        }
        let (kind, radius) = text.split_once(':').ok_or_else(bad)?;
        let radius: f64 = radius.trim().parse().map_err(|_| bad())?;
        if !(radius.is_finite() && radius > 0.0) {
            return Err(MirrorError::BadRadius(radius));
        }
        match kind {
            "box" => Ok(Constraint::Box { radius }),
            "l1" => Ok(Constraint::L1Ball { radius }),
            _ => Err(bad()),
        }
    }
}

/// How the mirror-space step `eta_t` is chosen (`t` = steps taken so far).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MirrorStep {
    /// `eta_t = 1 / (s_psi (L + (L/H + lambda) t))` (see the module docs). Needs no tuning.
    Auto,
    /// The thesis's step (5.71): `eta_t = R / (G^2 sqrt(t + 1) (1 + phi))`, `R >= B_psi(w*, w_1)`,
    /// `G >= ||grad f||_*`, `1 + phi` the greedy approximation factor (1 here, see [`greedy`]).
    Theory {
        radius: f64,
        gradient_bound: f64,
        phi: f64,
    },
    Constant(f64),
}

impl MirrorStep {
    fn validate(&self) -> Result<(), MirrorError> {
        let positive = |v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(MirrorError::BadStep(v))
            }
        };
        match *self {
            MirrorStep::Auto => Ok(()),
            MirrorStep::Constant(eta) => positive(eta),
            MirrorStep::Theory {
                radius,
                gradient_bound,
                phi,
            } => {
                positive(radius)?;
                positive(gradient_bound)?;
                if phi.is_finite() && phi >= 0.0 {
                    Ok(())
                } else {
                    Err(MirrorError::BadStep(phi))
                }
            }
        }
    }

    /// `eta_t` for a map of dual scale `s_psi`, smoothness `L`, ridge `lambda` and horizon `H` (steps).
    pub(crate) fn at(
        &self,
        steps: u64,
        dual_scale: f64,
        smoothness: f64,
        lambda: f64,
        horizon: u64,
    ) -> f64 {
        match *self {
            MirrorStep::Auto => {
                let decay = smoothness / horizon.max(1) as f64 + lambda;
                1.0 / (dual_scale * (smoothness + decay * steps as f64))
            }
            MirrorStep::Theory {
                radius,
                gradient_bound,
                phi,
            } => {
                radius
                    / (gradient_bound * gradient_bound * ((steps + 1) as f64).sqrt() * (1.0 + phi))
            }
            MirrorStep::Constant(eta) => eta,
        }
    }
}

/// Everything that configures mirror descent besides the objective.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MirrorConfig {
    pub map: MirrorMap,
    pub constraint: Constraint,
    pub step: MirrorStep,
    /// Samples per step (1 = plain stochastic mirror descent).
    pub batch: usize,
    /// Steps after which the `Auto` step has halved; 0 = the default (one pass offline,
    /// [`DEFAULT_HORIZON`] for a bare state).
    pub horizon: u64,
    /// What the mirror-space point remembers off the support (see [`Memory`]).
    pub memory: Memory,
}

/// What the mirror-space point `theta` keeps for a coordinate that is not (or no longer) in the support.
///
/// With [`Memory::Support`] (the thesis's step (5.15) taken literally) `theta` lives on `supp(w_t)`: a
/// coordinate that leaves the support forgets its history, and a coordinate enters only when one step's
/// move `eta_t |g_j|` beats the smallest support weight. On a stream of short sparse rows (text) every
/// step's fresh coordinates then compete with the support on a single sample's evidence, and the support
/// churns among recent rows' words (measured in docs/benchmarks/mirror.md: held-out accuracy below the
/// majority class on rotten_tomatoes).
///
/// With [`Memory::Dense`] every coordinate keeps its mirror-space value, as an unthresholded stochastic
/// mirror descent on the ridge objective would (`w~_j = grad psi*(theta_j)`, shrunk by the ridge's
/// `1 - eta_t s_psi lambda` per step off the support, applied lazily when the coordinate is next
/// touched), and the weights are its restriction to the `k` largest `|theta_j|` among the step's
/// candidates (`supp(w_t) ∪ supp(x_i)`). The support follows accumulated evidence, like SDIHT's
/// `w~ = -(1/(lambda N)) sum_i alpha_i x_i`, and a coordinate that left it can come back. It costs one
/// more dense vector (the decay stamps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Memory {
    Support,
    Dense,
}

/// Rows the offline solver's power iteration for `L_full` runs on (see the module docs): the setup
/// then costs the same on 10^4 and 10^7 samples (a full power iteration over 1M rows took 62% of a
/// one-pass `fit`).
pub const CURVATURE_SAMPLE_ROWS: usize = 8192;

/// The `Auto` step's horizon for a state that does not know its data set's size (a streaming learner).
pub const DEFAULT_HORIZON: u64 = 10_000;

/// Where a per-sample state stands in its step schedule: the steps taken (the `t` of the schedule) and
/// the running `max_i c_i ||x_i||^2` over the rows seen (the curvature the `Auto` step divides by).
/// [`state::MirrorState`] and [`crate::solver::smidas::SmidasState`] each keep one, export it with their
/// model and resume from it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepClock {
    pub steps: u64,
    pub row_sq_max: f64,
}

impl StepClock {
    /// Takes a row's `c_i ||x_i||^2` into the running maximum.
    pub fn observe(&mut self, sq_norm: f64) {
        self.row_sq_max = self.row_sq_max.max(sq_norm);
    }
}

impl MirrorConfig {
    pub fn new(map: MirrorMap) -> MirrorConfig {
        MirrorConfig {
            map,
            constraint: Constraint::None,
            step: MirrorStep::Auto,
            batch: 1,
            horizon: 0,
            memory: Memory::Support,
        }
    }

    pub fn validate(&self) -> Result<(), MirrorError> {
        match self.map {
            MirrorMap::HypEntropy { beta } if !(beta.is_finite() && beta > 0.0) => {
                return Err(MirrorError::BadBeta(beta))
            }
            MirrorMap::PNorm { p } if !(p.is_finite() && p >= 2.0) => {
                return Err(MirrorError::BadP(p))
            }
            _ => {}
        }
        match self.constraint {
            Constraint::Box { radius } | Constraint::L1Ball { radius }
                if !(radius.is_finite() && radius > 0.0) =>
            {
                return Err(MirrorError::BadRadius(radius))
            }
            _ => {}
        }
        if self.batch == 0 {
            return Err(MirrorError::ZeroBatch);
        }
        self.step.validate()
    }
}

/// Stochastic sparse mirror descent as a [`Solver`]: one epoch is one pass over the samples in a
/// seeded random order, in mini-batches of `config.batch`. With an intercept, `b` is refitted exactly
/// at the end of each epoch (as IHT and SDIHT do).
#[derive(Debug, Clone)]
pub struct MirrorDescent {
    state: MirrorState,
    pass: PrimalPass,
    certificate_scratch: CertificateScratch,
}

impl MirrorDescent {
    pub fn new<S: SampleSet>(
        problem: &Problem<S>,
        mut config: MirrorConfig,
        seed: u64,
    ) -> Result<MirrorDescent, MirrorError> {
        if config.horizon == 0 {
            config.horizon = problem.data.len().div_ceil(config.batch.max(1)) as u64;
        }
        let mut state = MirrorState::new(
            config,
            problem.loss,
            problem.lambda,
            problem.k,
            problem.intercept,
            problem.data.dim(),
        )?;
        let mut row_max: f64 = 0.0;
        let scale = mean_one_scale(problem.data);
        for i in 0..problem.data.len() {
            let r = problem.data.row(i).scaled(scale);
            row_max = row_max.max(r.weight * sparse_sq_norm(r.values));
        }
        state.observe_row_bound(row_max);
        let (n, b) = (
            problem.data.len() as f64,
            config.batch.min(problem.data.len()).max(1) as f64,
        );
        if b > 1.0 {
            let full =
                super::primal::sigma_max_sq_sampled(problem, CURVATURE_SAMPLE_ROWS).min(row_max);
            state.set_batch_curvature(
                (n - b) / (b * (n - 1.0)) * row_max + n * (b - 1.0) / (b * (n - 1.0)) * full,
            );
        }
        Ok(MirrorDescent {
            state,
            pass: PrimalPass::new(problem.data.len(), seed),
            certificate_scratch: CertificateScratch::default(),
        })
    }

    pub fn state(&self) -> &MirrorState {
        &self.state
    }
}

/// What an offline per-sample primal solver ([`MirrorDescent`], `crate::solver::smidas::Smidas`) keeps
/// beside its state: the seeded visiting order of its epochs, and the scratch of the intercept refit
/// and of the certificate.
#[derive(Debug, Clone)]
pub(crate) struct PrimalPass {
    rng: ChaCha8Rng,
    order: Vec<usize>,
    margins: Vec<f64>,
    alpha: Vec<f64>,
    dual_scratch: DualScratch,
}

impl PrimalPass {
    pub(crate) fn new(samples: usize, seed: u64) -> PrimalPass {
        PrimalPass {
            rng: ChaCha8Rng::seed_from_u64(seed),
            order: (0..samples).collect(),
            margins: Vec::new(),
            alpha: Vec::new(),
            dual_scratch: DualScratch::default(),
        }
    }

    /// The next epoch's order: the last one, reshuffled.
    pub(crate) fn shuffled(&mut self) -> &[usize] {
        self.order.shuffle(&mut self.rng);
        &self.order
    }

    /// The best intercept for the weights `w` (margins without an intercept).
    pub(crate) fn best_intercept<S: SampleSet>(&mut self, p: &Problem<S>, w: &[f64]) -> f64 {
        margins_into(p.data, w, &mut self.margins);
        best_intercept(p.data, &p.loss, &self.margins)
    }

    /// `P(w, b)` of a primal model against `D` at its dual point, with `H_k` at sparsity `k`: the
    /// certificate of every primal solver.
    pub(crate) fn certify<S: SampleSet>(
        &mut self,
        p: &Problem<S>,
        k: usize,
        model: ModelView<'_>,
    ) -> Certificate {
        let primal = primal_value(p.data, &p.loss, p.lambda, model.weights, model.intercept);
        let dual = p.dual_of_model(
            k,
            model.weights,
            model.intercept,
            &mut self.alpha,
            &mut self.dual_scratch,
        );
        Certificate::new(primal, dual, p.data.len())
    }
}

/// `N / M`: the factor that makes a uniformly drawn row's gradient `(N / M) c_i l'_i x_i` an unbiased
/// estimate of the weighted mean's `(1/M) sum_i c_i l'_i x_i` (the rows' weights rescaled to mean 1
/// for the step only; the objective and its certificate divide by `M`). 1 when every weight is 1.
pub fn mean_one_scale<S: SampleSet>(data: &S) -> f64 {
    let mass = data.mass();
    if mass > 0.0 {
        data.len() as f64 / mass
    } else {
        1.0
    }
}

impl<S: SampleSet> Solver<S> for MirrorDescent {
    fn spread_certificate(&mut self, spread: std::sync::Arc<dyn crate::solver::spread::Spread>) {
        self.certificate_scratch.spread = Some(spread);
    }

    fn name(&self) -> &'static str {
        match self.state.config().map {
            MirrorMap::Euclidean => "mirror-euclidean",
            MirrorMap::PNorm { .. } => "mirror-pnorm",
            MirrorMap::HypEntropy { .. } => "mirror-hypentropy",
        }
    }

    fn epoch(&mut self, p: &Problem<S>) {
        let batch = self.state.config().batch;
        let scale = mean_one_scale(p.data);
        let order = self.pass.shuffled();
        for (start, chunk) in (0..order.len()).step_by(batch).zip(order.chunks(batch)) {
            self.state
                .step_batch(chunk.iter().enumerate().map(|(n, &i)| {
                    // Where a row is, a stage before the row (the rows come in a shuffled order).
                    if let Some(&ahead) = order.get(start + n + 2 * ROW_PREFETCH_DISTANCE) {
                        p.data.prefetch_meta(ahead);
                    }
                    if let Some(&ahead) = order.get(start + n + ROW_PREFETCH_DISTANCE) {
                        let r = p.data.row(ahead);
                        prefetch_all(r.indices);
                        prefetch_all(r.values);
                    }
                    p.data.row(i).scaled(scale)
                }));
        }
        if p.intercept {
            let b = self.pass.best_intercept(p, self.state.model().weights);
            self.state.set_intercept(b);
        }
    }

    fn model(&self) -> ModelView<'_> {
        self.state.model()
    }

    /// One walk over the rows without an intercept, two with one ([`fused_certificate_with_intercept`],
    /// the same values bit for bit as `PrimalPass::certify`'s three walks; in two chunks when `fit`
    /// spreads it): on a million rows the walks were a tenth of a one-pass fit. A model with an
    /// intercept the problem does not fit (a warm start's) keeps the three walks.
    fn certificate(&mut self, p: &Problem<S>) -> Certificate {
        let model = self.state.model();
        if !p.intercept && model.intercept != 0.0 {
            return self.pass.certify(p, p.k, model);
        }
        fused_certificate_with_intercept(
            p.data,
            &p.loss,
            p.lambda,
            p.k,
            (
                model.weights,
                model.support,
                p.intercept.then_some(model.intercept),
            ),
            None,
            None,
            &mut self.certificate_scratch,
        )
        .certificate(p.data.len())
    }
}
