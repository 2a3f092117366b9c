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
//! [`MirrorLearner`] is the state advanced sample by sample ([`MirrorLearner::step_sample`],
//! [`MirrorLearner::step_batch`]) — the shape a streaming learner needs; it grows with the feature space.
//! [`MirrorDescent`] drives it as a [`Solver`] (one epoch = one shuffled pass) and certifies it like IHT:
//! `alpha_i = l'(w.x_i + b)` projected onto `F` (Thm 1(b) of the DIHT paper), then `D(alpha)` and the gap.
//!
//! Step size ([`MirrorStep`]): the default `Auto` is `eta_t = 1 / (s_psi (L + (L/H + lambda) t))`: it
//! starts at the safe `1/L` of a smooth problem and decays like `1/t` (the classic SGD rule for a
//! strongly convex objective), with `s_psi` = [`MirrorMap::dual_scale`] at the sparsity `k` and a horizon `H`: the step
//! halves after `H` steps even when `lambda` is tiny (offline `H` = one pass; streaming default
//! 10 000 steps) — the ridge `lambda` alone is too weak a curvature to decay on (a `1/(lambda t)` step
//! stalls at the gradient-noise floor for the `lambda` of the benchmarks). `L` is the smoothness of the
//! mini-batch gradient, `l''_max L_B + lambda`: a bare learner uses `L_B = max_i c_i ||x_i||^2` over the
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
mod pending;
mod resume;
#[cfg(test)]
mod tests;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use thiserror::Error;

pub use maps::{Constraint, MirrorMap};
use pending::PendingGradient;
pub(crate) use resume::checkpoint_dim;
pub use resume::Resumable;

use super::objective::{
    best_intercept, fused_certificate, margins_into, primal_value, CertificateScratch, DualScratch,
};
use super::{Certificate, ModelView, Problem, Solver};
use crate::loss::Loss;
use crate::sample::{Row, SampleSet};
use crate::sparse::{grow_dense, masked_dot, prefetch_all, sparse_dot, sparse_sq_norm};

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

/// Everything that configures the mirror learner besides the objective.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MirrorConfig {
    pub map: MirrorMap,
    pub constraint: Constraint,
    pub step: MirrorStep,
    /// Samples per step (1 = plain stochastic mirror descent).
    pub batch: usize,
    /// Steps after which the `Auto` step has halved; 0 = the default (one pass offline,
    /// [`DEFAULT_HORIZON`] for a bare learner).
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

/// The `Auto` step's horizon for a learner that does not know its data set's size.
pub const DEFAULT_HORIZON: u64 = 10_000;

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

/// The state of stochastic sparse mirror descent, advanced one sample or mini-batch at a time.
#[derive(Debug, Clone)]
pub struct MirrorLearner {
    config: MirrorConfig,
    loss: Loss,
    lambda: f64,
    k: usize,
    fit_intercept: bool,
    /// Dense weights, nonzero only on `support`.
    w: Vec<f64>,
    /// `grad psi(w)` on `support` (kept so the next step never inverts the map); off the support 0
    /// ([`Memory::Support`]) or the coordinate's accumulated mirror-space value as of `stamp[j]`
    /// ([`Memory::Dense`]).
    theta: Vec<f64>,
    /// [`Memory::Dense`]: `decay_log` when `theta[j]` was last brought up to date (empty otherwise).
    /// Meaningful only where `theta[j] != 0`: every write of a nonzero `theta[j]` writes its stamp, so
    /// new room is left zero and unwritten ([`grow_dense`]) like `w` and `theta`.
    stamp: Vec<f64>,
    /// [`Memory::Dense`]: `sum_s ln(1 - eta_s s_psi lambda)` over the steps taken: the ridge's shrink of
    /// an off-support coordinate between two touches is `exp(decay_log - stamp[j])`.
    decay_log: f64,
    /// Steps rejected because they produced a non-finite weight, mirror-space value or intercept (the
    /// state is left as before the step).
    numeric_faults: u64,
    support: Vec<u32>,
    intercept: f64,
    steps: u64,
    /// Running `max_i c_i ||x_i||^2` over the rows seen.
    row_sq_max: f64,
    /// `L_B` when the data set is known (overrides `row_sq_max`).
    batch_curvature: Option<f64>,
    /// Samples accumulated into `grad` since the last step, and their summed intercept gradient.
    pending: usize,
    pending_intercept_grad: f64,
    /// Bit `j % 64` of word `j / 64` is set exactly for `j` in `support` (where `w` is nonzero): a
    /// margin reads a row's weight only where the mask (d/8 bytes, cache resident) says it is nonzero,
    /// instead of reading `w` (8d bytes) at 40-odd random places per sample ([`masked_dot`]).
    support_mask: Vec<u64>,
    /// The summed `l'(w.x_i + b) x_i` of the pending samples per coordinate; during a step, the
    /// candidates' mirror-space points.
    grad: PendingGradient,
    // Scratch, reused so that steps never allocate once the feature space stops growing.
    selected: Vec<u32>,
    keys: Vec<(std::cmp::Reverse<u64>, u32)>,
    sub_theta: Vec<f64>,
    sub_x: Vec<f64>,
}

impl MirrorLearner {
    /// A learner at `w = 0` for features `0..dim` (it grows when a row uses a larger index).
    pub fn new(
        config: MirrorConfig,
        loss: Loss,
        lambda: f64,
        k: usize,
        fit_intercept: bool,
        dim: usize,
    ) -> Result<MirrorLearner, MirrorError> {
        config.validate()?;
        Ok(MirrorLearner {
            config,
            loss,
            lambda,
            k,
            fit_intercept,
            w: vec![0.0; dim],
            theta: vec![0.0; dim],
            stamp: if config.memory == Memory::Dense {
                vec![0.0; dim]
            } else {
                Vec::new()
            },
            decay_log: 0.0,
            numeric_faults: 0,
            support: Vec::with_capacity(k),
            intercept: 0.0,
            steps: 0,
            row_sq_max: 0.0,
            batch_curvature: None,
            pending: 0,
            pending_intercept_grad: 0.0,
            support_mask: vec![0; dim.div_ceil(64)],
            grad: PendingGradient::default(),
            selected: Vec::new(),
            keys: Vec::new(),
            sub_theta: Vec::with_capacity(k),
            sub_x: Vec::with_capacity(k),
        })
    }

    pub fn config(&self) -> &MirrorConfig {
        &self.config
    }

    /// Sets the `Auto` step's horizon (steps; at least 1). A streaming learner sets it to one pass over
    /// its window as the window grows.
    pub fn set_horizon(&mut self, steps: u64) {
        self.config.horizon = steps.max(1);
    }

    /// The smoothness `L = l''_max L_B + lambda` of a mini-batch gradient, which the `Auto` step uses.
    pub fn smoothness(&self) -> f64 {
        self.loss.smoothness() * self.batch_curvature.unwrap_or(self.row_sq_max) + self.lambda
    }

    /// Fixes `L_B`, the curvature of a mini-batch of `X^T C X / |B|` (see the module docs); without it
    /// the learner uses the largest `c_i ||x_i||^2` seen, which is safe for any batch.
    pub fn set_batch_curvature(&mut self, curvature: f64) {
        if curvature.is_finite() && curvature > 0.0 {
            self.batch_curvature = Some(curvature);
        }
    }

    /// Tells the learner the largest `c_i ||x_i||^2` it will see (offline: the data set's), so that the
    /// first `Auto` steps are already safe; streaming learners discover it row by row instead.
    pub fn observe_row_bound(&mut self, sq_norm: f64) {
        self.row_sq_max = self.row_sq_max.max(sq_norm);
    }

    /// The `s_psi` the `Auto` step divides by: [`MirrorMap::dual_scale`] at the sparsity `k`; with
    /// [`Memory::Dense`] and the hyperbolic entropy, its local gain at the current weights,
    /// `max_j d(beta sinh theta_j)/d theta_j = sqrt(beta^2 + ||w||_inf^2)`: a mirror step `eta` moves
    /// `w_j` like a Euclidean step `eta sqrt(beta^2 + w_j^2)`, so once weights outgrow `beta` the
    /// fixed `beta` makes the largest weights take steps far above `1/L` (measured on trump_tweets, k = 100,
    /// beta = 1: relative gap stuck at ~0.14 after 20 s; with the local gain it falls like Euclidean's).
    fn gain(&self) -> f64 {
        match self.config.map {
            MirrorMap::HypEntropy { beta } if self.config.memory == Memory::Dense => {
                let w_max = self
                    .support
                    .iter()
                    .fold(0.0f64, |m, &j| m.max(self.w[j as usize].abs()));
                beta.hypot(w_max)
            }
            map => map.dual_scale(self.k),
        }
    }

    /// `eta_t` of the next step (mirror-space units).
    pub fn step_size(&self) -> f64 {
        let horizon = if self.config.horizon == 0 {
            DEFAULT_HORIZON
        } else {
            self.config.horizon
        };
        self.config.step.at(
            self.steps,
            self.gain(),
            self.smoothness(),
            self.lambda,
            horizon,
        )
    }

    pub fn model(&self) -> ModelView<'_> {
        ModelView {
            weights: &self.w,
            support: &self.support,
            intercept: self.intercept,
        }
    }

    /// `w.x + b` for one row.
    pub fn score(&self, row: Row<'_>) -> f64 {
        sparse_dot(row.indices, row.values, &self.w) + self.intercept
    }

    pub fn set_intercept(&mut self, b: f64) {
        self.intercept = b;
    }

    fn ensure_dim(&mut self, dim: usize) {
        if dim > self.w.len() {
            // Lazily zeroed room (`grow_dense`): a large feature index costs no resident memory.
            grow_dense(&mut self.w, dim);
            grow_dense(&mut self.theta, dim);
            if self.config.memory == Memory::Dense {
                // Not `resize(dim, decay_log)`: writing the new room made one sample with a large
                // feature index (`1 16777215:1`) cost 134 MB of resident stamps per learner.
                grow_dense(&mut self.stamp, dim);
            }
            self.support_mask.resize(dim.div_ceil(64), 0);
        }
    }

    /// Sets (`on`) or clears the mask bits of the current support.
    fn mark_support(&mut self, on: bool) {
        for &j in &self.support {
            let bit = 1u64 << (j % 64);
            let word = &mut self.support_mask[j as usize / 64];
            *word = if on { *word | bit } else { *word & !bit };
        }
    }

    fn on_support(&self, j: usize) -> bool {
        self.support_mask[j / 64] >> (j % 64) & 1 == 1
    }

    /// Steps rejected for a non-finite value (see [`MirrorLearner::step_batch`]).
    pub fn numeric_faults(&self) -> u64 {
        self.numeric_faults
    }

    /// [`Memory::Dense`]: the off-support `theta_j` with the ridge shrink of the steps since it was
    /// last brought up to date, in primal units (`w~_j <- rho w~_j`, mapped back through the link).
    fn decayed_theta(&self, j: usize) -> f64 {
        let theta = self.theta[j];
        if theta == 0.0 || self.w[j] != 0.0 {
            return theta;
        }
        let keep = (self.decay_log - self.stamp[j]).exp();
        if keep >= 1.0 {
            return theta;
        }
        match self.config.map {
            MirrorMap::Euclidean | MirrorMap::PNorm { .. } => keep * theta,
            MirrorMap::HypEntropy { .. } => (keep * theta.sinh()).asinh(),
        }
    }

    /// Feeds one sample: its gradient (at the current weights) joins the pending mini-batch, and the
    /// step is taken once `config.batch` samples are pending — so a stream driven sample by sample gets
    /// the same iterates as [`MirrorLearner::step_batch`] on consecutive chunks. With `batch = 1` every
    /// call is one stochastic step.
    pub fn step_sample(&mut self, row: Row<'_>) {
        self.accumulate(row);
        if self.pending >= self.config.batch {
            self.apply();
        }
    }

    /// One step on a mini-batch (the gradient is the mean over `rows` and any samples still pending
    /// from [`MirrorLearner::step_sample`]). An empty batch does nothing.
    pub fn step_batch<'r>(&mut self, rows: impl IntoIterator<Item = Row<'r>>) {
        for row in rows {
            self.accumulate(row);
        }
        self.apply();
    }

    /// Takes the step for the samples pending from [`MirrorLearner::step_sample`], if any.
    pub fn flush(&mut self) {
        self.apply();
    }

    /// Samples fed but not yet stepped on.
    pub fn pending(&self) -> usize {
        self.pending
    }

    /// Adds `l'(w.x + b) x` of one row to the pending gradient.
    fn accumulate(&mut self, row: Row<'_>) {
        if let Some(&last) = row.indices.last() {
            self.ensure_dim(last as usize + 1);
        }
        self.row_sq_max = self.row_sq_max.max(row.weight * sparse_sq_norm(row.values));
        let margin =
            masked_dot(row.indices, row.values, &self.w, &self.support_mask) + self.intercept;
        let dl = self.loss.sample(row.label, row.weight).derivative(margin);
        for (&j, &v) in row.indices.iter().zip(row.values) {
            self.grad.add(j, dl * v);
        }
        self.pending_intercept_grad += dl;
        self.pending += 1;
    }

    /// The step (1)-(4) of the module docs on the pending gradient. A step whose new weights,
    /// mirror-space values or intercept are not all finite is rejected: the state stays as it was and
    /// [`MirrorLearner::numeric_faults`] counts it.
    fn apply(&mut self) {
        if self.pending == 0 {
            return;
        }
        let count = self.pending;
        let intercept_grad = self.pending_intercept_grad;
        self.pending = 0;
        self.pending_intercept_grad = 0.0;
        let eta = self.step_size();
        let gain = self.gain();
        let count = count as f64;
        let dense = self.config.memory == Memory::Dense;
        for &j in &self.support {
            self.grad.touch(j);
        }
        // grad now holds the mirror-space point theta_j - eta g_j of every candidate coordinate. With
        // `Memory::Support`, `w` and `theta` are 0 off the support, which the mask tells without
        // reading them.
        for pos in 0..self.grad.len() {
            let j = self.grad.coords[pos] as usize;
            let (theta, w) = if dense {
                (self.decayed_theta(j), self.w[j])
            } else if self.on_support(j) {
                (self.theta[j], self.w[j])
            } else {
                (0.0, 0.0)
            };
            let g = self.grad.sums[pos];
            self.grad.sums[pos] = theta - eta * (g / count + self.lambda * w);
        }
        greedy::top_k_of_pairs(
            self.grad
                .coords
                .iter()
                .copied()
                .zip(self.grad.sums.iter().copied()),
            self.k,
            &mut self.keys,
            &mut self.selected,
        );

        self.sub_theta.clear();
        self.sub_theta
            .extend(self.selected.iter().map(|&j| self.grad.get(j)));
        self.sub_x.clear();
        self.sub_x.resize(self.selected.len(), 0.0);
        let map = self.config.map;
        let constraint = self.config.constraint;
        map.solve_restricted(constraint, &self.sub_theta, &mut self.sub_x);
        if constraint != Constraint::None {
            // The next step starts from grad psi of the feasible point (the prox form of Alg. 3.1).
            map.grad_psi(&self.sub_x, &mut self.sub_theta);
        }
        let intercept = if self.fit_intercept {
            self.intercept - eta * gain * intercept_grad / count
        } else {
            self.intercept
        };
        let finite = intercept.is_finite()
            && self.sub_x.iter().all(|v| v.is_finite())
            && self.sub_theta.iter().all(|v| v.is_finite())
            && (!dense || self.grad.sums.iter().all(|v| v.is_finite()));
        if !finite {
            self.numeric_faults += 1;
            self.grad.clear();
            return;
        }
        let decay_after = self.decay_log + (1.0 - eta * gain * self.lambda).clamp(1e-12, 1.0).ln();
        if dense {
            // Every candidate keeps its new mirror-space value, selected or not. A support coordinate
            // took this step's ridge in its gradient (`lambda w_j`), an off-support one (`w_j = 0`)
            // takes it as the lazy shrink: its stamp is set before this step's factor.
            for (&j, &theta) in self.grad.coords.iter().zip(&self.grad.sums) {
                let j = j as usize;
                self.theta[j] = theta;
                self.stamp[j] = if self.w[j] != 0.0 {
                    decay_after
                } else {
                    self.decay_log
                };
            }
        }
        self.mark_support(false);
        for &j in &self.support {
            self.w[j as usize] = 0.0;
            if !dense {
                self.theta[j as usize] = 0.0;
            }
        }
        self.support.clear();
        for (pos, &j) in self.selected.iter().enumerate() {
            if self.sub_x[pos] != 0.0 {
                self.w[j as usize] = self.sub_x[pos];
                self.theta[j as usize] = self.sub_theta[pos];
                self.support.push(j);
            }
        }
        self.mark_support(true);
        self.intercept = intercept;
        if dense {
            self.decay_log = decay_after;
        }
        self.grad.clear();
        self.steps += 1;
    }
}

/// Stochastic sparse mirror descent as a [`Solver`]: one epoch is one pass over the samples in a
/// seeded random order, in mini-batches of `config.batch`. With an intercept, `b` is refitted exactly
/// at the end of each epoch (as IHT and SDIHT do).
#[derive(Debug, Clone)]
pub struct MirrorDescent {
    learner: MirrorLearner,
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
        let mut learner = MirrorLearner::new(
            config,
            problem.loss,
            problem.lambda,
            problem.k,
            problem.intercept,
            problem.data.dim(),
        )?;
        let mut row_max: f64 = 0.0;
        for i in 0..problem.data.len() {
            let r = problem.data.row(i);
            row_max = row_max.max(r.weight * sparse_sq_norm(r.values));
        }
        learner.observe_row_bound(row_max);
        let (n, b) = (
            problem.data.len() as f64,
            config.batch.min(problem.data.len()).max(1) as f64,
        );
        if b > 1.0 {
            let full =
                super::primal::sigma_max_sq_sampled(problem, CURVATURE_SAMPLE_ROWS).min(row_max);
            learner.set_batch_curvature(
                (n - b) / (b * (n - 1.0)) * row_max + n * (b - 1.0) / (b * (n - 1.0)) * full,
            );
        }
        Ok(MirrorDescent {
            learner,
            pass: PrimalPass::new(problem.data.len(), seed),
            certificate_scratch: CertificateScratch::default(),
        })
    }

    pub fn learner(&self) -> &MirrorLearner {
        &self.learner
    }
}

/// What an offline per-sample primal solver ([`MirrorDescent`], `crate::solver::smidas::Smidas`) keeps
/// beside its learner: the seeded visiting order of its epochs, and the scratch of the intercept refit
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

impl<S: SampleSet> Solver<S> for MirrorDescent {
    fn name(&self) -> &'static str {
        match self.learner.config.map {
            MirrorMap::Euclidean => "mirror-euclidean",
            MirrorMap::PNorm { .. } => "mirror-pnorm",
            MirrorMap::HypEntropy { .. } => "mirror-hypentropy",
        }
    }

    fn epoch(&mut self, p: &Problem<S>) {
        let batch = self.learner.config.batch;
        let order = self.pass.shuffled();
        for (start, chunk) in (0..order.len()).step_by(batch).zip(order.chunks(batch)) {
            self.learner
                .step_batch(chunk.iter().enumerate().map(|(n, &i)| {
                    if let Some(&ahead) = order.get(start + n + ROW_PREFETCH_DISTANCE) {
                        let r = p.data.row(ahead);
                        prefetch_all(r.indices);
                        prefetch_all(r.values);
                    }
                    p.data.row(i)
                }));
        }
        if p.intercept {
            self.learner.intercept = self.pass.best_intercept(p, &self.learner.w);
        }
    }

    fn model(&self) -> ModelView<'_> {
        self.learner.model()
    }

    /// Without an intercept, one walk over the rows ([`fused_certificate`], the same values bit for bit
    /// as `PrimalPass::certify`'s three walks): on a million rows the walks were a tenth of a one-pass fit.
    fn certificate(&mut self, p: &Problem<S>) -> Certificate {
        let model = self.learner.model();
        if p.intercept || model.intercept != 0.0 {
            return self.pass.certify(p, p.k, model);
        }
        fused_certificate(
            p.data,
            &p.loss,
            p.lambda,
            p.k,
            model.weights,
            model.support,
            None,
            &mut self.certificate_scratch,
        )
        .certificate(p.data.len())
    }
}
