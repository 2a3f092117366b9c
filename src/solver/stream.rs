//! Streaming learners: solvers that run continuously on a sliding [`Window`] while samples arrive.
//!
//! # The `StreamingLearner` contract
//!
//! A learner owns its window and is driven by one OS thread (the daemon's learner worker) through four
//! operations, each short so the worker can interleave them with ingest:
//!
//! - [`StreamingLearner::insert`] — add a batch (a [`SampleBlock`]); each sample is first *predicted*
//!   with the current model (its loss feeds progressive validation), then enters the window with a
//!   warm-start state; when the window is full the oldest sample is removed through
//!   [`StreamingLearner::evict`] *before* the new row overwrites its slot;
//! - [`StreamingLearner::evict`] — remove one sample's contribution from the learner's state;
//! - [`StreamingLearner::step`] — one unit of optimisation over the window, or a reason to idle;
//! - [`StreamingLearner::snapshot`] — the current k-sparse model with its certificate (`primal`, `dual`,
//!   `gap`) computed **exactly over the current window** (from scratch, not from running sums).
//!
//! Checkpointing goes through [`StreamingLearner::state`] and each implementation's `restore`. Another
//! solver (mirror descent, best subset) plugs in by implementing this trait; any primal solver can be
//! certified with `objective::dual_of_primal`, as the offline baselines are.
//!
//! # `StreamSdiht`: SDIHT on a window
//!
//! State as in the offline SDIHT ([`super::dual`]): duals `alpha_i` stored next to their samples in the
//! window, the unscaled sum `z = sum_i alpha_i x_i` over the window, and `w = H_k(-z / (lambda N))`
//! (dual-iht.md eq. 4.4 and S2.2) with `N` the current window size — keeping `z` unscaled makes a change
//! of `N` free. A new sample enters with the warm-start dual `alpha_i = P_F(l'(w.x_i))` (Thm 1(b): the
//! optimal dual for the current primal); a batch of them is scaled by the largest `t` in `1, 1/2, ...`
//! that does not lower `D` (see `enter_warm_starts` for why); an evicted sample's `alpha_i x_i` is
//! subtracted from `z`. Every
//! `recompute_every` steps `z` and `sum_i l_i*(alpha_i)` are rebuilt from the window so rounding cannot
//! drift. A step is one block update (eq. 4.3) on a random one of `blocks` contiguous blocks of the
//! window, with the offline solver's adaptive rule (Newton-scaled coordinate steps, backtracking on `D`).
//! The learner idles when its last certificate met `tol` and nothing arrived since, or after
//! [`IDLE_EPOCHS`] epochs without new data (a non-smooth loss may never close the gap exactly).
//!
//! The intercept is not supported in streaming (the dual constraint `sum alpha = 0` would break at every
//! warm start); the model's intercept is always 0.
//!
//! # The other learners
//!
//! [`mirror::StreamMirror`] (`solver = "mirror"`), [`mirror::StreamSmidas`] (`"smidas"`) and
//! [`subset::StreamSubset`] (`"subset"`) implement the same contract; [`build`] picks one from the config.
//! They are primal solvers: their checkpoint carries the model in [`LearnerState::primal`], and the duals
//! stored in their window are the certificate's dual point of their model (feasible duals, so a
//! checkpoint can even be resumed by another solver).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::objective::{conjugate_sum, fused_certificate, CertificateScratch};
use super::{Certificate, ModelView, StepRule};
use crate::config::LearnerConfig;
use crate::courtesy::yield_point_at_row;
use crate::model::Model;
use crate::ring::Window;
use crate::sample::{Row, Sample, SampleBlock, SampleSet};
use crate::sparse::{
    extend_with_top_k_candidates, hard_threshold_paired, masked_dot, prefetch, prefetch_all,
    reserve_dense, sparse_axpy, top_k_indices, top_k_of_pairs, ThresholdScratch,
};

pub mod mirror;
pub mod subset;

/// Epochs over an unchanged window after which a learner idles even if the gap is not below `tol`.
pub const IDLE_EPOCHS: u64 = 200;
/// Backtracking halvings tried per block step (as the offline SDIHT).
const MAX_BACKTRACK: usize = 12;
/// How many rows ahead the warm start's `dz` scatter prefetches its targets: far enough for the misses to
/// arrive in time, near enough that they are still cached when used.
const PREFETCH_ROWS_AHEAD: usize = 2;

/// How many rows ahead a block step prefetches its rows' targets in `z`, and (twice that) the rows
/// themselves (the certificate's distances, `objective::fused_certificate`).
const STEP_PREFETCH_ROWS_AHEAD: usize = 4;

/// How many coordinates ahead the warm start's gather of `z` and `dz` over the batch's coordinates
/// prefetches.
const GATHER_PREFETCH_AHEAD: usize = 16;

/// Asks the CPU to bring a row's indices and values into cache (a hint; no effect on any value).
#[inline(always)]
fn prefetch_row(r: Row<'_>) {
    prefetch_all(r.indices);
    prefetch_all(r.values);
}

/// Counters a learner keeps (and checkpoints).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LearnerStats {
    /// Samples ever inserted.
    pub samples_seen: u64,
    /// Solver steps taken.
    pub steps: u64,
    /// Changes of state (inserts and steps): the snapshot thread publishes a new version only when this
    /// moved.
    pub mutations: u64,
    /// Sum and count of progressive losses: each sample's loss under the model *before* it was learned.
    pub progressive_loss_sum: f64,
    pub progressive_count: u64,
}

impl LearnerStats {
    /// Average progressive loss (0 before any sample).
    pub fn progressive_loss(&self) -> f64 {
        if self.progressive_count == 0 {
            0.0
        } else {
            self.progressive_loss_sum / self.progressive_count as f64
        }
    }
}

/// Why `step` did no work.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Idle {
    EmptyWindow,
    /// The last certificate met `tol` and no sample arrived since.
    Converged {
        relative_gap: f64,
    },
    /// [`IDLE_EPOCHS`] epochs without new data.
    Stalled,
}

/// What one call of `step` did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StepOutcome {
    Stepped,
    Idle(Idle),
}

/// A learner's published view: the model (with its exact certificate over the window) and its counters.
#[derive(Debug, Clone, PartialEq)]
pub struct LearnerSnapshot {
    pub model: Model,
    pub stats: LearnerStats,
    pub window_samples: usize,
}

impl LearnerSnapshot {
    pub fn new(model: Model, stats: LearnerStats, window: &Window) -> LearnerSnapshot {
        LearnerSnapshot {
            model,
            stats,
            window_samples: window.len(),
        }
    }
}

/// Everything needed to resume a learner (the checkpoint payload).
#[derive(Debug, Clone, PartialEq)]
pub struct LearnerState {
    /// Window contents oldest first, with duals.
    pub samples: Vec<(Sample, f64)>,
    pub stats: LearnerStats,
    pub last_certificate: Option<Certificate>,
    /// Adaptive step scale.
    pub scale: f64,
    /// Steps since the last insert (so a stalled learner resumes idle).
    pub steps_since_insert: u64,
    /// The model of a primal learner (mirror, smidas, subset); `None` for SDIHT, whose model is a
    /// function of the window's duals.
    pub primal: Option<PrimalState>,
}

/// A primal learner's model and schedule position: enough to resume it exactly.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PrimalState {
    /// `(j, w_j, theta_j)` for every nonzero weight, in the order the learner exported them; `theta_j` is
    /// the learner's mirror-space coordinate (`grad psi(w)_j`; 0 where a learner has none).
    pub coordinates: Vec<(u32, f64, f64)>,
    /// Steps taken by the underlying solver (the `t` of the step schedule).
    pub solver_steps: u64,
    /// The running `max_i c_i ||x_i||^2` the automatic step uses.
    pub row_sq_max: f64,
    /// The subset learner's active set (empty for the others).
    pub active: Vec<u32>,
}

/// Solver-specific gauges a learner reports next to its certificate (0 where they do not apply).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SolverGauges {
    /// The subset solver's active set size.
    pub active_set_size: usize,
    /// Features the subset solver's gap-safe screening has removed.
    pub screened_features: usize,
}

/// A solver that learns continuously on a window. See the module docs for the contract.
pub trait StreamingLearner: Send {
    fn config(&self) -> &LearnerConfig;
    /// Predicts, then learns, each sample of `batches` in order. One call may carry several queued
    /// batches so the per-insert work (re-thresholding) is paid once for all of them.
    fn insert_batches(&mut self, batches: &[&SampleBlock]);
    /// [`StreamingLearner::insert_batches`] with one batch.
    fn insert(&mut self, batch: &SampleBlock) {
        self.insert_batches(&[batch]);
    }
    /// [`StreamingLearner::insert`] with owned samples (offline callers and tests).
    fn insert_samples(&mut self, samples: &[Sample]) {
        self.insert(&SampleBlock::from_samples(samples));
    }
    /// Removes the contribution of a sample leaving the window (with the dual it had).
    fn evict(&mut self, sample: Row<'_>, alpha: f64);
    /// One unit of optimisation over the window.
    fn step(&mut self) -> StepOutcome;
    /// The model with its certificate computed exactly over the current window.
    fn snapshot(&mut self) -> LearnerSnapshot;
    fn stats(&self) -> LearnerStats;
    fn window(&self) -> &Window;
    /// The checkpoint payload.
    fn state(&self) -> LearnerState;
    /// Solver-specific gauges (`thresher_active_set_size`, `thresher_screened_features`); zeros by default.
    fn gauges(&self) -> SolverGauges {
        SolverGauges::default()
    }
}

/// Builds the learner a config asks for.
pub fn build(
    config: &LearnerConfig,
    capacity: usize,
    state: Option<LearnerState>,
) -> Box<dyn StreamingLearner> {
    match config.solver {
        crate::config::StreamSolverKind::Sdiht => {
            Box::new(StreamSdiht::new(config.clone(), capacity, state))
        }
        crate::config::StreamSolverKind::Mirror => {
            Box::new(mirror::StreamMirror::new(config.clone(), capacity, state))
        }
        crate::config::StreamSolverKind::Smidas => {
            Box::new(mirror::StreamSmidas::new(config.clone(), capacity, state))
        }
        crate::config::StreamSolverKind::Subset => {
            Box::new(subset::StreamSubset::new(config.clone(), capacity, state))
        }
    }
}

/// SDIHT over a sliding window (see the module docs).
#[derive(Debug)]
pub struct StreamSdiht {
    config: LearnerConfig,
    window: Window,
    /// `z = sum_i alpha_i x_i` over the window, unscaled.
    z: Vec<f64>,
    /// `sum_i l_i*(alpha_i)` over the window.
    conj_sum: f64,
    /// `D(alpha)` for the current `alpha`, `w`.
    dual: f64,
    w: Vec<f64>,
    support: Vec<u32>,
    scale: f64,
    rng: ChaCha8Rng,
    stats: LearnerStats,
    steps_since_recompute: usize,
    steps_since_insert: u64,
    last_certificate: Option<Certificate>,
    inserted_since_certificate: bool,
    // Scratch reused across steps so the hot loop never allocates.
    old_alpha: Vec<f64>,
    new_alpha: Vec<f64>,
    margins: Vec<f64>,
    trial_w: Vec<f64>,
    trial_support: Vec<u32>,
    threshold: ThresholdScratch,
    certificate_scratch: CertificateScratch,
    new_positions: Vec<usize>,
    /// The new samples' `sum alpha_i x_i` while a warm start collects it; all zero between inserts.
    dz: Vec<f64>,
    /// The coordinates a batch touches, each once, so the warm start costs O(batch), not O(d), per trial.
    batch_coords: Vec<u32>,
    /// `z` and `dz` on `batch_coords` (parallel), contiguous for the backtracking trials.
    z_on_batch: Vec<f64>,
    dz_on_batch: Vec<f64>,
    /// The top k of `z` outside `batch_coords`, `(index, z_j)`.
    top_outside: Vec<(u32, f64)>,
    /// A trial's candidates for `H_k(z + t dz)`: `top_outside` and the entries of C that can compete.
    candidates: Vec<(u32, f64)>,
    /// A trial's `H_k(z + t dz)`: support and unscaled values, parallel.
    trial_values: Vec<f64>,
    /// Bit set over features, all zero between inserts: the support while an insert predicts, then
    /// the batch's coordinates while `enter_warm_starts` collects them.
    coord_mask: Vec<u64>,
}

impl StreamSdiht {
    /// A learner with an empty window, or resumed from `state`.
    pub fn new(config: LearnerConfig, capacity: usize, state: Option<LearnerState>) -> StreamSdiht {
        let rng =
            ChaCha8Rng::seed_from_u64(config.seed ^ state.as_ref().map_or(0, |s| s.stats.steps));
        let mut learner = StreamSdiht {
            config,
            window: Window::new(capacity),
            z: Vec::new(),
            conj_sum: 0.0,
            dual: 0.0,
            w: Vec::new(),
            support: Vec::new(),
            scale: 1.0,
            rng,
            stats: LearnerStats::default(),
            steps_since_recompute: 0,
            steps_since_insert: 0,
            last_certificate: None,
            inserted_since_certificate: false,
            old_alpha: Vec::new(),
            new_alpha: Vec::new(),
            margins: Vec::new(),
            trial_w: Vec::new(),
            trial_support: Vec::new(),
            threshold: ThresholdScratch::default(),
            certificate_scratch: CertificateScratch::default(),
            new_positions: Vec::new(),
            dz: Vec::new(),
            batch_coords: Vec::new(),
            z_on_batch: Vec::new(),
            dz_on_batch: Vec::new(),
            top_outside: Vec::new(),
            candidates: Vec::new(),
            trial_values: Vec::new(),
            coord_mask: Vec::new(),
        };
        if let Some(state) = state {
            learner.window = Window::from_oldest_first(capacity, state.samples);
            learner.stats = state.stats;
            learner.last_certificate = state.last_certificate;
            learner.scale = state.scale;
            learner.steps_since_insert = state.steps_since_insert;
            learner.recompute();
        }
        learner
    }

    /// The current primal weights (dense).
    pub fn weights(&self) -> &[f64] {
        &self.w
    }

    fn lambda_n(&self) -> f64 {
        self.config.lambda * self.window.len().max(1) as f64
    }

    fn ensure_dim(&mut self, d: usize) {
        if self.z.len() < d {
            reserve_dense(&mut self.z, d);
            reserve_dense(&mut self.w, d);
            self.z.resize(d, 0.0);
            self.w.resize(d, 0.0);
            self.coord_mask.resize(d.div_ceil(64), 0);
        }
    }

    /// `w = H_k(-z / (lambda N))` and `D` from the running sums.
    fn rethreshold(&mut self) {
        let scale = -1.0 / self.lambda_n();
        threshold_scaled(
            &self.z,
            scale,
            self.config.k,
            &mut self.w,
            &mut self.support,
            &mut self.threshold,
        );
        let n = self.window.len().max(1) as f64;
        self.dual =
            -self.conj_sum / n - 0.5 * self.config.lambda * support_sq_norm(&self.w, &self.support);
    }

    /// Rebuilds `z` and the conjugate sum from the window (drift control), then `w` and `D`.
    fn recompute(&mut self) {
        self.ensure_dim(self.window.dim());
        self.z.iter_mut().for_each(|v| *v = 0.0);
        for i in 0..self.window.len() {
            yield_point_at_row(i);
            let r = self.window.row(i);
            sparse_axpy(self.window.alphas()[i], r.indices, r.values, &mut self.z);
        }
        self.conj_sum = conjugate_sum(&self.window, &self.config.loss, self.window.alphas());
        self.steps_since_recompute = 0;
        self.rethreshold();
    }

    /// Adds the new samples' warm-start duals `t alpha_i` to `z`, with `t` the largest of `1, 1/2, ...`
    /// that does not make `D` worse than `t = 0` (all of `0`, `alpha_i` are in `F`, so `t alpha_i` is).
    ///
    /// Why the safeguard: `alpha_i = l'(w.x_i)` is optimal for the *current* `w`, but adding a batch that
    /// is large next to the window moves `w~` by `-sum alpha_i x_i / (lambda N)`; with a poor model and a
    /// small `lambda` that Picard-like step overshoots and compounds from batch to batch. Backtracking on
    /// `D` (as the block steps do) keeps every insertion an ascent step.
    fn enter_warm_starts(&mut self) {
        let loss = self.config.loss;
        let n = self.window.len() as f64;
        let lambda_n = self.lambda_n();
        let (k, lambda) = (self.config.k, self.config.lambda);
        let d = self.z.len();
        if self.dz.len() < d {
            reserve_dense(&mut self.dz, d);
            self.dz.resize(d, 0.0);
        }
        // `dz = sum_new alpha_i x_i`, marking the batch's coordinates C in the mask. Each row's 40-odd
        // targets are random in an 8 MiB vector: the entries of the row two ahead are prefetched, so
        // their cache misses overlap this row's instead of each stalling in turn (intake 1.35-1.5x
        // faster at 100k-300k samples per call, `examples/learner_insert.rs`).
        for (n, (&at, &alpha)) in self.new_positions.iter().zip(&self.new_alpha).enumerate() {
            yield_point_at_row(n);
            if let Some(&ahead) = self.new_positions.get(n + PREFETCH_ROWS_AHEAD) {
                for &j in self.window.row(ahead).indices {
                    prefetch(&self.dz, j as usize);
                }
            }
            let r = self.window.row(at);
            for (&j, &v) in r.indices.iter().zip(r.values) {
                self.coord_mask[j as usize / 64] |= 1 << (j % 64);
                self.dz[j as usize] += alpha * v;
            }
        }
        // C in ascending order, read off the mask (d/64 words): the loops over C below then sweep `z`
        // and `dz` front to back, which the hardware prefetches, instead of jumping at random — a
        // large batch touches most of the d coordinates.
        self.batch_coords.clear();
        for (word_index, &word) in self.coord_mask.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                self.batch_coords
                    .push((word_index * 64) as u32 + bits.trailing_zeros());
                bits &= bits - 1;
            }
        }
        // `z + t dz` differs from `z` only on C, so `H_k(z + t dz)` is the top k of (the top k of `z`
        // outside C) ∪ C (`sparse::top_k_of_pairs`): one dense pass here, then O(|C|) per trial `t`,
        // on contiguous copies of `z` and `dz` over C instead of random reads of three d-vectors.
        self.z_on_batch.clear();
        self.dz_on_batch.clear();
        for (m, &j) in self.batch_coords.iter().enumerate() {
            // Ascending but sparse (a 1 000-sample batch touches one coordinate in 25 at d = 2^20,
            // a cache line each), which the hardware prefetcher does not follow far enough ahead.
            if let Some(&ahead) = self.batch_coords.get(m + GATHER_PREFETCH_AHEAD) {
                prefetch(&self.z, ahead as usize);
                prefetch(&self.dz, ahead as usize);
            }
            let j = j as usize;
            self.z_on_batch.push(self.z[j]);
            self.dz_on_batch.push(self.dz[j]);
            self.z[j] = 0.0;
            self.dz[j] = 0.0;
            self.coord_mask[j / 64] = 0;
        }
        let outside = top_k_indices(&self.z, k, &mut self.threshold);
        self.top_outside.clear();
        self.top_outside
            .extend(outside.iter().map(|&j| (j, self.z[j as usize])));
        // Every trial keeps k of (top_outside ∪ C): with k entries outside, none of C below the
        // smallest of them can be kept (it loses to each of the k), nor below the k-th largest of C's
        // chunk maxima, so only C's entries reaching both are handed to the heap — a few hundred of a
        // large batch's |C| (`sparse::extend_with_top_k_candidates`). The kept set is the same, ties
        // included.
        let floor = if self.top_outside.len() == k {
            self.top_outside
                .iter()
                .map(|&(_, v)| v.abs())
                .fold(f64::INFINITY, f64::min)
        } else {
            0.0
        };
        let conj_at = |this: &Self, t: f64| -> f64 {
            this.new_positions
                .iter()
                .zip(&this.new_alpha)
                .map(|(&at, &a)| {
                    let r = this.window.row(at);
                    loss.sample(r.label, r.weight).conjugate(t * a)
                })
                .sum::<f64>()
        };
        // D at `alpha + t alpha_new`; leaves `H_k(z + t dz)` in `self.trial_support` /
        // `self.trial_values` (unscaled, ascending index order).
        let dual_at = |this: &mut Self, t: f64| -> (f64, f64) {
            this.candidates.clear();
            this.candidates.extend_from_slice(&this.top_outside);
            extend_with_top_k_candidates(
                &this.batch_coords,
                &this.z_on_batch,
                &this.dz_on_batch,
                t,
                k,
                floor,
                &mut this.candidates,
                &mut this.threshold,
            );
            let candidates = this.candidates.iter().copied();
            let kept = top_k_of_pairs(candidates, k, &mut this.threshold);
            this.trial_support.clear();
            this.trial_values.clear();
            let mut sq_norm = 0.0;
            for &(j, v) in kept {
                this.trial_support.push(j);
                this.trial_values.push(v);
                let w = v * (-1.0 / lambda_n);
                sq_norm += w * w;
            }
            let conj_new = conj_at(this, t);
            (
                -(this.conj_sum + conj_new) / n - 0.5 * lambda * sq_norm,
                conj_new,
            )
        };
        // `dual_at` reuses `trial_support`, which pairs with `trial_w` (the block step's threshold clears
        // `trial_w` on `trial_support` only): clear `trial_w` first, or its entries outside the support
        // handed to it below would survive into a later `w`.
        for &j in &self.trial_support {
            if let Some(v) = self.trial_w.get_mut(j as usize) {
                *v = 0.0;
            }
        }
        let (floor, _) = dual_at(self, 0.0);
        let mut t = 1.0;
        let mut accepted = None;
        for _ in 0..MAX_BACKTRACK {
            let trial = dual_at(self, t);
            if trial.0 >= floor - 1e-12 * floor.abs().max(1.0) {
                accepted = Some(trial);
                break;
            }
            t *= 0.5;
        }
        // The accepted trial's `sum l*(t a_i)` is kept: recomputing it costs a log per new sample.
        let (dual, conj_new) = match accepted {
            Some(trial) => trial,
            None => {
                t = 0.0;
                dual_at(self, 0.0)
            }
        };
        // Adopt `t`: the duals, `z + t dz` on C, and the trial threshold as `w`.
        for (&at, &a) in self.new_positions.iter().zip(&self.new_alpha) {
            self.window.alphas_mut()[at] = t * a;
        }
        self.conj_sum += conj_new;
        for (m, &j) in self.batch_coords.iter().enumerate() {
            self.z[j as usize] = self.z_on_batch[m] + t * self.dz_on_batch[m];
        }
        for &j in &self.support {
            self.w[j as usize] = 0.0;
        }
        let scale = -1.0 / lambda_n;
        for (&j, &v) in self.trial_support.iter().zip(&self.trial_values) {
            self.w[j as usize] = v * scale;
        }
        std::mem::swap(&mut self.support, &mut self.trial_support);
        self.dual = dual;
    }

    /// Eq. (4.3)-(4.4) and S2.2 on the window rows `rows` (the offline SDIHT's block step).
    fn block_step(&mut self, rows: std::ops::Range<usize>) {
        let loss = self.config.loss;
        let n = self.window.len() as f64;
        let lambda_n = self.lambda_n();
        self.old_alpha.clear();
        self.old_alpha
            .extend_from_slice(&self.window.alphas()[rows.clone()]);
        // As in the intake: `w` is zero off its support, so the margins test the support's bit mask
        // (cache resident) before reading `w` (8d bytes) — the same sums as `sparse_dot`.
        for &j in &self.support {
            self.coord_mask[j as usize / 64] |= 1 << (j % 64);
        }
        self.margins.clear();
        for i in rows.clone() {
            yield_point_at_row(i);
            // The rows live in their own allocations, which the hardware prefetcher cannot follow.
            if i + STEP_PREFETCH_ROWS_AHEAD < rows.end {
                prefetch_row(self.window.row(i + STEP_PREFETCH_ROWS_AHEAD));
            }
            let r = self.window.row(i);
            self.margins
                .push(masked_dot(r.indices, r.values, &self.w, &self.coord_mask));
        }
        for &j in &self.support {
            self.coord_mask[j as usize / 64] = 0;
        }
        let tries = if self.config.step == StepRule::Adaptive {
            MAX_BACKTRACK
        } else {
            1
        };
        for attempt in 0..tries {
            self.new_alpha.clear();
            for (pos, i) in rows.clone().enumerate() {
                let slot = self.window.slot(i);
                let r = slot.sample.row();
                let l = loss.sample(r.label, r.weight);
                let a = self.old_alpha[pos];
                // N g_j = x_j.w - l*'(alpha_j).
                let ng = self.margins[pos] - l.conjugate_derivative(a);
                let step = match self.config.step {
                    StepRule::Constant(eta) => eta / n,
                    _ => {
                        self.scale
                            / (l.conjugate_curvature(a) + slot.sq_norm / lambda_n).max(1e-300)
                    }
                };
                self.new_alpha.push(if ng == 0.0 {
                    a
                } else {
                    l.project(a + step * ng)
                });
            }
            let mut conj_delta = 0.0;
            for (pos, i) in rows.clone().enumerate() {
                yield_point_at_row(pos);
                // Two stages, as the certificate's scatter: the row, then (its indices cached) its
                // targets in `z` (8 MiB at d = 2^20), so the misses overlap instead of queueing.
                if i + 2 * STEP_PREFETCH_ROWS_AHEAD < rows.end {
                    prefetch_row(self.window.row(i + 2 * STEP_PREFETCH_ROWS_AHEAD));
                }
                if i + STEP_PREFETCH_ROWS_AHEAD < rows.end {
                    for &j in self.window.row(i + STEP_PREFETCH_ROWS_AHEAD).indices {
                        prefetch(&self.z, j as usize);
                    }
                }
                let delta = self.new_alpha[pos] - self.old_alpha[pos];
                if delta != 0.0 {
                    let r = self.window.row(i);
                    let l = loss.sample(r.label, r.weight);
                    sparse_axpy(delta, r.indices, r.values, &mut self.z);
                    conj_delta +=
                        l.conjugate(self.new_alpha[pos]) - l.conjugate(self.old_alpha[pos]);
                }
            }
            threshold_scaled(
                &self.z,
                -1.0 / lambda_n,
                self.config.k,
                &mut self.trial_w,
                &mut self.trial_support,
                &mut self.threshold,
            );
            let trial_dual = -(self.conj_sum + conj_delta) / n
                - 0.5 * self.config.lambda * support_sq_norm(&self.trial_w, &self.trial_support);
            let tolerance = 1e-12 * self.dual.abs().max(1.0);
            if trial_dual >= self.dual - tolerance || attempt + 1 == tries {
                self.window.alphas_mut()[rows.clone()].copy_from_slice(&self.new_alpha);
                self.conj_sum += conj_delta;
                self.dual = trial_dual;
                std::mem::swap(&mut self.w, &mut self.trial_w);
                std::mem::swap(&mut self.support, &mut self.trial_support);
                if attempt == 0 {
                    self.scale = (self.scale * 2.0).min(1.0);
                }
                return;
            }
            for (pos, i) in rows.clone().enumerate() {
                let delta = self.new_alpha[pos] - self.old_alpha[pos];
                if delta != 0.0 {
                    let r = self.window.row(i);
                    sparse_axpy(-delta, r.indices, r.values, &mut self.z);
                }
            }
            self.scale *= 0.5;
        }
    }
}

/// Takes a sample leaving the window out of `z = sum_i alpha_i x_i` and `sum_i l_i*(alpha_i)`.
fn remove_contribution(
    loss: &crate::loss::Loss,
    r: Row<'_>,
    alpha: f64,
    z: &mut [f64],
    conj_sum: &mut f64,
) {
    sparse_axpy(-alpha, r.indices, r.values, z);
    *conj_sum -= loss.sample(r.label, r.weight).conjugate(alpha);
}

/// `||w||^2` of a vector that is zero outside the ascending `support` (the same sum, in the same order,
/// as the dense `sq_norm`, without its O(d) pass).
fn support_sq_norm(w: &[f64], support: &[u32]) -> f64 {
    support.iter().map(|&j| w[j as usize] * w[j as usize]).sum()
}

/// `out = H_k(scale * z)` without materialising `scale * z` (`H_k` commutes with uniform scaling).
/// `out` stays paired with `support` (zero elsewhere), so clearing it is O(k).
fn threshold_scaled(
    z: &[f64],
    scale: f64,
    k: usize,
    out: &mut Vec<f64>,
    support: &mut Vec<u32>,
    scratch: &mut ThresholdScratch,
) {
    hard_threshold_paired(z, k, out, support, scratch);
    for &j in support.iter() {
        out[j as usize] *= scale;
    }
}

impl StreamingLearner for StreamSdiht {
    fn config(&self) -> &LearnerConfig {
        &self.config
    }

    fn insert_batches(&mut self, batches: &[&SampleBlock]) {
        let total: usize = batches.iter().map(|b| b.len()).sum();
        if total == 0 {
            return;
        }
        let loss = self.config.loss;
        let capacity = self.window.capacity();
        let dim = batches.iter().map(|b| b.dim()).max().unwrap_or(0);
        self.ensure_dim(dim);
        // Only the newest `capacity` samples of this call can still be in the window afterwards; the
        // others would enter and leave within the call, touching nothing but the progressive loss. So
        // they are only predicted, and when the whole window turns over, `z` and `sum l*` restart
        // from zero instead of subtracting every old sample (exact, and cheaper under a backlog).
        let passing = total.saturating_sub(capacity);
        if total >= capacity {
            self.window.clear();
            self.z.iter_mut().for_each(|v| *v = 0.0);
            self.conj_sum = 0.0;
        }
        // Every sample is predicted with the model as it was before this call. `w` has at most k
        // nonzeros spread over d coordinates, so the dot product tests a bit mask of the support (d/8
        // bytes, cache resident) before reading `w` (8d bytes, random access).
        for &j in &self.support {
            self.coord_mask[j as usize / 64] |= 1 << (j % 64);
        }
        self.new_positions.clear();
        self.new_alpha.clear();
        for (seq, sample) in batches.iter().flat_map(|b| b.iter()).enumerate() {
            yield_point_at_row(seq);
            let r = sample.row();
            let l = loss.sample(r.label, r.weight);
            let u = masked_dot(r.indices, r.values, &self.w, &self.coord_mask);
            let (value, alpha) = l.value_and_dual_of_margin(u);
            self.stats.progressive_loss_sum += value;
            self.stats.progressive_count += 1;
            self.stats.samples_seen += 1;
            if seq < passing {
                continue;
            }
            // The oldest sample leaves before its slot takes the new row's features. The samples
            // leaving next are prefetched (their rows, then their targets in `z`), as the block steps
            // do: the oldest slots are cold, each in its own allocation.
            if let Some(r) = self.window.oldest_ahead(2 * STEP_PREFETCH_ROWS_AHEAD) {
                prefetch_row(r);
            }
            if let Some(r) = self.window.oldest_ahead(STEP_PREFETCH_ROWS_AHEAD) {
                for &j in r.indices {
                    prefetch(&self.z, j as usize);
                }
            }
            if let Some((old, old_alpha)) = self.window.oldest_if_full() {
                remove_contribution(&loss, old, old_alpha, &mut self.z, &mut self.conj_sum);
            }
            let at = self.window.push_ref(sample, alpha);
            self.new_positions.push(at);
            self.new_alpha.push(alpha);
        }
        for &j in &self.support {
            self.coord_mask[j as usize / 64] = 0;
        }
        self.enter_warm_starts();
        self.stats.mutations += 1;
        self.inserted_since_certificate = true;
        self.steps_since_insert = 0;
    }

    fn evict(&mut self, sample: Row<'_>, alpha: f64) {
        remove_contribution(
            &self.config.loss,
            sample,
            alpha,
            &mut self.z,
            &mut self.conj_sum,
        );
    }

    fn step(&mut self) -> StepOutcome {
        let n = self.window.len();
        if n == 0 {
            return StepOutcome::Idle(Idle::EmptyWindow);
        }
        if let (Some(c), false) = (self.last_certificate, self.inserted_since_certificate) {
            if c.relative_gap() <= self.config.tol {
                return StepOutcome::Idle(Idle::Converged {
                    relative_gap: c.relative_gap(),
                });
            }
        }
        let blocks = self.config.blocks.min(n);
        if self.steps_since_insert >= IDLE_EPOCHS * blocks as u64 {
            return StepOutcome::Idle(Idle::Stalled);
        }
        let b = if blocks == 1 {
            0
        } else {
            self.rng.gen_range(0..blocks)
        };
        self.block_step(b * n / blocks..(b + 1) * n / blocks);
        self.stats.steps += 1;
        self.stats.mutations += 1;
        self.steps_since_insert += 1;
        self.steps_since_recompute += 1;
        if self.steps_since_recompute >= self.config.recompute_every {
            self.recompute();
        }
        StepOutcome::Stepped
    }

    /// `P(w)` against the larger of two feasible lower bounds, `D` at the dual iterate and `D` at the dual
    /// point of `w` itself, all three over the window from scratch (not from `z` or `conj_sum`), by
    /// [`fused_certificate`].
    fn snapshot(&mut self) -> LearnerSnapshot {
        let c = &self.config;
        let certificate = if self.window.is_empty() {
            Certificate::new(0.0, 0.0, 0)
        } else {
            fused_certificate(
                &self.window,
                &c.loss,
                c.lambda,
                c.k,
                &self.w,
                &self.support,
                Some(self.window.alphas()),
                &mut self.certificate_scratch,
            )
            .certificate(self.window.len())
        };
        self.last_certificate = Some(certificate);
        self.inserted_since_certificate = false;
        let view = ModelView {
            weights: &self.w,
            support: &self.support,
            intercept: 0.0,
        };
        let model = Model::from_view(
            view,
            c.loss.kind(),
            c.loss.gamma(),
            c.solver.name(c.blocks),
            c.k,
            c.lambda,
            certificate,
        );
        LearnerSnapshot::new(model, self.stats, &self.window)
    }

    fn stats(&self) -> LearnerStats {
        self.stats
    }

    fn window(&self) -> &Window {
        &self.window
    }

    fn state(&self) -> LearnerState {
        LearnerState {
            samples: self.window.to_pairs(),
            stats: self.stats,
            last_certificate: self.last_certificate,
            scale: self.scale,
            steps_since_insert: self.steps_since_insert,
            primal: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::loss::{Loss, LossKind};
    use crate::synth::sparse_stream;

    fn config(loss: LossKind, k: usize) -> LearnerConfig {
        let mut c = Config::defaults().learners.remove(0);
        c.loss = Loss::new(loss, 0.25).unwrap();
        c.k = k;
        c.lambda = 0.01;
        c.blocks = 4;
        c.tol = 1e-8;
        c
    }

    fn run_to_idle(l: &mut StreamSdiht) -> Certificate {
        for _ in 0..100 {
            while l.step() == StepOutcome::Stepped {}
            let snap = l.snapshot();
            if l.step() != StepOutcome::Stepped {
                return snap.model.certificate;
            }
        }
        l.snapshot().model.certificate
    }

    #[test]
    fn recovers_support_on_a_sliding_window_with_a_small_gap() {
        let data = sparse_stream(3000, 200, 5, 20, 0.01, false, 7);
        let mut l = StreamSdiht::new(config(LossKind::Squared, 5), 1000, None);
        for chunk in data.samples.chunks(100) {
            l.insert_samples(chunk);
            for _ in 0..20 {
                l.step();
            }
        }
        assert_eq!(l.window().len(), 1000);
        assert_eq!(l.stats().samples_seen, 3000);
        let cert = run_to_idle(&mut l);
        assert!(cert.gap >= -1e-9, "{cert:?}");
        assert!(cert.relative_gap() < 1e-6, "{cert:?}");
        assert_eq!(l.snapshot().model.support, data.true_support());
        assert!(l.support.len() <= 5);
    }

    #[test]
    fn running_sum_matches_a_recompute_after_evictions() {
        let data = sparse_stream(500, 50, 3, 8, 0.1, true, 3);
        let mut l = StreamSdiht::new(config(LossKind::Hinge, 3), 64, None);
        for chunk in data.samples.chunks(37) {
            l.insert_samples(chunk);
            for _ in 0..5 {
                l.step();
            }
        }
        // One batch larger than the window: its own first samples are evicted within the batch.
        let seen = l.stats().samples_seen;
        let predicted = l.stats().progressive_count;
        l.insert_batches(&[
            &SampleBlock::from_samples(&data.samples[..100]),
            &SampleBlock::from_samples(&data.samples[100..150]),
        ]);
        assert_eq!(l.window().len(), 64);
        // The window holds exactly the newest 64, in order; all 150 were seen and predicted.
        let labels: Vec<f64> = l
            .window()
            .iter_oldest_first()
            .map(|(s, _)| s.label)
            .collect();
        let expected: Vec<f64> = data.samples[86..150].iter().map(|s| s.label).collect();
        assert_eq!(labels, expected);
        assert_eq!(l.stats().samples_seen, seen + 150);
        assert_eq!(l.stats().progressive_count, predicted + 150);
        let (running, running_conj) = (l.z.clone(), l.conj_sum);
        l.recompute();
        assert!(
            (running_conj - l.conj_sum).abs() < 1e-9,
            "{running_conj} vs {}",
            l.conj_sum
        );
        for (a, b) in running.iter().zip(&l.z) {
            assert!((a - b).abs() < 1e-9, "{a} vs {b}");
        }
        // Every dual stays feasible.
        for i in 0..l.window().len() {
            let r = l.window().row(i);
            let a = l.window().alphas()[i];
            assert_eq!(l.config.loss.sample(r.label, r.weight).project(a), a);
        }
    }

    #[test]
    fn restored_state_resumes_the_same_model() {
        let data = sparse_stream(800, 100, 4, 10, 0.01, false, 11);
        let mut l = StreamSdiht::new(config(LossKind::Squared, 4), 500, None);
        l.insert_samples(&data.samples);
        let cert = run_to_idle(&mut l);
        let snap = l.snapshot();
        let mut back = StreamSdiht::new(config(LossKind::Squared, 4), 500, Some(l.state()));
        assert_eq!(back.stats(), l.stats());
        assert!(
            matches!(back.step(), StepOutcome::Idle(_)),
            "a converged learner resumes idle"
        );
        let again = back.snapshot();
        assert_eq!(again.model.support, snap.model.support);
        assert!((again.model.certificate.primal - cert.primal).abs() < 1e-9);
    }

    /// The paired O(k)-clearing threshold and the batch-sparse warm start leave exactly the model a dense
    /// `H_k(-z / (lambda N))` from scratch gives, after every insert and step.
    #[test]
    fn model_equals_a_dense_hard_threshold_of_z() {
        let data = sparse_stream(600, 5000, 5, 10, 0.1, false, 5);
        let mut l = StreamSdiht::new(config(LossKind::Squared, 5), 256, None);
        let (mut w, mut support) = (Vec::new(), Vec::new());
        let mut scratch = crate::sparse::ThresholdScratch::default();
        for chunk in data.samples.chunks(50) {
            l.insert_samples(chunk);
            for step in 0..4 {
                let scaled: Vec<f64> = l.z.iter().map(|v| v * (-1.0 / l.lambda_n())).collect();
                crate::sparse::hard_threshold(&scaled, 5, &mut w, &mut support, &mut scratch);
                assert_eq!(l.support, support, "after step {step}");
                assert_eq!(l.w.len(), w.len());
                for (a, b) in l.w.iter().zip(&w) {
                    assert_eq!(a.to_bits(), b.to_bits());
                }
                l.step();
            }
        }
        assert_eq!(l.window().len(), 256);
    }

    /// The snapshot's certificate is, bit for bit, what the separate offline calls give over the
    /// window: `P(w)` against the larger of `D` at the window's duals and `D` at `P_F(l'(w.x_i))`.
    #[test]
    fn snapshot_certificate_equals_the_separate_calls() {
        use super::super::objective::{separate_certificate, DualScratch};
        for (kind, seed) in [
            (LossKind::Squared, 1),
            (LossKind::Huber, 2),
            (LossKind::Hinge, 3),
            (LossKind::Logistic, 4),
        ] {
            let data = sparse_stream(900, 400, 5, 12, 0.1, kind != LossKind::Squared, seed);
            let mut l = StreamSdiht::new(config(kind, 5), 500, None);
            for chunk in data.samples.chunks(150) {
                l.insert_samples(chunk);
                for _ in 0..3 {
                    l.step();
                }
                let snap = l.snapshot();
                // The kernel reads `w` on its support only: `w` must be zero elsewhere.
                for (j, &v) in l.w.iter().enumerate() {
                    assert!(
                        v == 0.0 || l.support.contains(&(j as u32)),
                        "{kind:?} w[{j}]"
                    );
                }
                let (c, window) = (&l.config, &l.window);
                let reference = separate_certificate(
                    window,
                    &c.loss,
                    c.lambda,
                    c.k,
                    &l.w,
                    Some(window.alphas()),
                    &mut Vec::new(),
                    &mut DualScratch::default(),
                );
                let (primal, at_primal) = (reference.primal, reference.dual_at_primal);
                let at_iterate = reference.dual_at_iterate.unwrap_or(f64::NAN);
                let expected = Certificate::new(primal, at_iterate.max(at_primal), window.len());
                assert_eq!(snap.model.certificate, expected, "{kind:?}");
            }
        }
    }

    /// The learner's exact state on a seeded stream — weighted samples, several batches per call, and
    /// calls larger than the window. When blocks replaced per-sample inserts, these values were the
    /// per-sample path's (`Window::push_at` of a cloned `Sample`, then `evict`; commit a8eab01), bit for
    /// bit; they were re-recorded once since, when the warm start stopped leaking stale weights outside
    /// the support into `w` (which changes the model, as it should). Any other change here is a bug.
    #[test]
    fn block_inserts_give_the_pinned_state_bit_for_bit() {
        fn fnv(bits: impl Iterator<Item = u64>) -> u64 {
            bits.fold(0xcbf29ce484222325, |h, b| {
                (h ^ b).wrapping_mul(0x100000001b3)
            })
        }
        let expected = [
            (
                LossKind::Logistic,
                [21, 72, 162, 173, 189, 258],
                [
                    0xbff3c992c86c22a3,
                    0xbff58bd030e7a64e,
                    0x3ffea18eb4d36ace,
                    0x3ffe94603cbc6b91,
                    0x3ffd9585d2c2e762,
                    0xbff37cc89843ca7d,
                ],
                [0x3fd21e48d271421f, 0x3fce3a9a78292b7c, 0x406f1bb0852b22be],
                0x1ddf976197ea4ae0,
            ),
            (
                LossKind::Hinge,
                [37, 74, 162, 173, 189, 258],
                [
                    0xbfe351527cbb346f,
                    0x3fe3d4bc189f0d22,
                    0x3fe88761d5c0f066,
                    0x3feea449ee9a85e4,
                    0x3feec875d6d4a4a8,
                    0xbfec18d6697edba5,
                ],
                [0x3fdce1dd3f438782, 0x3fa54a21bfc43534, 0x40757749ecb978af],
                0xec34c7a4c54f7f36,
            ),
            (
                LossKind::Squared,
                [21, 72, 162, 173, 189, 258],
                [
                    0xbff07f1335a0e2eb,
                    0xbff4b966bda632b4,
                    0x3ff4aebf4a0e970e,
                    0x3ffe213fa545e666,
                    0x3ffbe81d0ec4041d,
                    0xbff1c0c0792025a6,
                ],
                [0x3fb5772704065c41, 0x3fb0b56875188261, 0x4082b2094c8e2c87],
                0xf1b263911ca2b8dc,
            ),
        ];
        for (kind, support, weights, [primal, dual, progressive], alphas) in expected {
            let mut data = sparse_stream(700, 300, 6, 12, 0.1, kind != LossKind::Squared, 23);
            for (i, s) in data.samples.iter_mut().enumerate() {
                if i % 3 == 0 {
                    s.weight = Some(0.5 + (i % 5) as f64 * 0.25);
                }
            }
            let mut c = config(kind, 6);
            c.tol = Config::defaults().learners[0].tol;
            let mut l: Box<dyn StreamingLearner> = build(&c, 64, None);
            let sizes = [37usize, 5, 80, 1, 19];
            let (mut at, mut n) = (0, 0);
            while at < data.samples.len() {
                let mut blocks = Vec::new();
                for _ in 0..1 + n % 3 {
                    let size = sizes[n % sizes.len()].min(data.samples.len() - at);
                    blocks.push(SampleBlock::from_samples(&data.samples[at..at + size]));
                    at += size;
                    n += 1;
                    if at == data.samples.len() {
                        break;
                    }
                }
                l.insert_batches(&blocks.iter().collect::<Vec<_>>());
                for _ in 0..3 {
                    l.step();
                }
            }
            let snap = l.snapshot();
            let m = &snap.model;
            assert_eq!(m.support, support, "{kind:?}");
            let bits: Vec<u64> = m.weights.iter().map(|w| w.to_bits()).collect();
            assert_eq!(bits, weights, "{kind:?}");
            assert_eq!(
                [
                    m.certificate.primal.to_bits(),
                    m.certificate.dual.to_bits(),
                    snap.stats.progressive_loss_sum.to_bits()
                ],
                [primal, dual, progressive],
                "{kind:?}"
            );
            assert_eq!(
                fnv(l.window().alphas().iter().map(|a| a.to_bits())),
                alphas,
                "{kind:?}"
            );
        }
    }

    #[test]
    fn learners_cross_threads() {
        fn is_send<T: Send>() {}
        is_send::<StreamSdiht>();
        is_send::<Box<dyn StreamingLearner>>();
    }
}
