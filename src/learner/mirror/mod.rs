//! Stochastic sparse mirror descent (`solver = "mirror"`) and SMIDAS (`solver = "smidas"`) as streaming
//! learners: the per-sample states of [`crate::solver::mirror`] and [`crate::solver::smidas`] driven on
//! the window ([`StreamPrimal`]). [`engine`] binds each state to the learner's config, [`resume`]
//! exports and restores it in a checkpoint.
//!
//! - `insert`: each sample is predicted with the current model (progressive loss) and enters the
//!   window, marked *unlearned*; nothing else;
//! - `step`: while the window holds unlearned samples, a step learns from the oldest of them in arrival
//!   order, one block's worth (`window / blocks` samples, for at most [`LEARN_STEP_BUDGET`]; mirror: in
//!   mini-batches of `batch`; SMIDAS: Alg. 4.1's steps in batches of `batch`, 256 by default, with
//!   the weights held for a batch, `SmidasState::step_batch`); once every sample was learned,
//!   one pass of mirror steps over a random one of `blocks` contiguous blocks of the window, rows in a
//!   seeded random order;
//! - `evict`: nothing to undo — a primal learner keeps no per-sample sums; the window only shrinks the
//!   set `step` revisits and the certificate is taken over;
//! - `snapshot`: certified exactly like IHT over the window, from scratch: `P(w)` against `D` at the
//!   dual point `P_F(l'(w.x_i))` of `w` (`objective::fused_certificate`, bit for bit the values of
//!   `primal_value`, `dual_of_primal` and `dual_value`). SMIDAS's model is not k-sparse: its dual takes
//!   `H_k'` with `k' = max(k, |supp w|)` (as offline), so the gap stays a valid bound for the sparsity
//!   SMIDAS actually uses. The certificate's dual point is written back into the window's duals, so a
//!   checkpoint carries feasible duals.
//!
//! **Intake apart from learning.** A mirror step costs ~2 µs per sample at d = 2^20 (the scatter of its
//! gradient and the support's re-selection), a SMIDAS step O(|active|) (hence its batches): stepping at insert capped what
//! the window could take at what the solver could learn, and a backlog held the learner's lock for
//! seconds while HTTP answered 503. Now the window takes every sample at the cost of a prediction and a
//! copy, and the steps learn from the new samples as fast as the core allows, oldest first: under a
//! load the solver keeps up with, every sample is learned once in arrival order, as before, one step
//! later; under more, the samples the window evicts before a step reached them are counted
//! (`thresher_samples_unlearned_total`) and the model learns from the rest, the freshest data.
//!
//! **Step schedule on a stream.** The solvers' automatic step decays with the step count `t` (it has
//! halved after `horizon` steps; `horizon = 0`, the default, is one pass over the window and at least
//! [`DEFAULT_HORIZON`] steps, re-read at each insert as the window fills). Passes over an unchanged
//! window let it decay, so the learner converges on that window; every insert rewinds `t` to at most
//! `horizon`, so after a quiet period (or a long stream) new data can still move the model.
//!
//! **Support changes.** With `memory = "dense"` (the default) the mirror learner keeps every
//! coordinate's mirror-space value and re-selects the support from it, so a feature enters on
//! accumulated evidence and can come back after leaving. With `memory = "support"` (the thesis's step) a
//! per-sample k-sparse step swaps a feature in only when one step's move beats the smallest support
//! weight, so a model fitted hard to a wrong support stays there (measured on the integration-test stream,
//! d = 500, k = 5: 1600 passes over a first window of 200 samples locked in a wrong support, relative gap
//! ~250; on rotten_tomatoes, k = 100, held-out accuracy fell below the majority class). SDIHT, which
//! re-thresholds the whole dual sum, does not have this failure mode.
//!
//! **Intercept** (`intercept`, on by default for logistic and hinge): unpenalised, never thresholded,
//! moved by an SGD step per sample and set to its exact minimiser over the window at each certificate.
//! The certificate then projects its dual point onto `F ∩ {sum alpha = 0}`, the constraint the
//! intercept puts on the dual, so `P(w, b) - D` stays a valid gap; the checkpoint carries `b`.
//!
//! Idling as SDIHT: the last certificate met `tol` and nothing arrived since, or
//! [`super::IDLE_EPOCHS`] passes over the window without new data. The step schedule (`t` = mirror
//! steps taken, across inserts and passes) is checkpointed with the model ([`super::PrimalState`]), so a restart
//! resumes the same weights at the same step size.

pub mod engine;
pub mod resume;
#[cfg(test)]
mod tests;

use std::time::{Duration, Instant};

use rand::seq::SliceRandom;

use super::{LearnerCore, LearnerSnapshot, LearnerState, StepOutcome, StreamingLearner};
use crate::learner::params::LearnerConfig;
use crate::model::Model;
use crate::sample::{Row, SampleBlock, SampleSet};
use crate::solver::driver::SparseModel;
use crate::solver::mirror::state::MirrorState;
use crate::solver::mirror::{mean_one_scale, DEFAULT_HORIZON};
use crate::solver::objective::{
    best_intercept, fused_certificate_with_intercept, masked_margins_into, CertificateScratch,
};
use crate::solver::smidas::SmidasState;
use crate::solver::Certificate;
use engine::PrimalEngine;

/// How long one step learns from unlearned samples at most (checked between mini-batches): the
/// learner thread returns to its queue that often under load. A step of a block of the default 100k
/// window, 12,500 samples (~25 ms of mirror steps at d = 2^20, seconds of SMIDAS steps there), held new
/// batches back long enough for HTTP to answer 503 (`docs/benchmarks/learners.md`).
pub const LEARN_STEP_BUDGET: Duration = Duration::from_millis(5);

/// A per-sample primal solver on a sliding window (see the module docs).
pub struct StreamPrimal<E: PrimalEngine> {
    core: LearnerCore,
    engine: E,
    /// The current pass's rows, in the seeded random order the engine visits them.
    order: Vec<usize>,
    certificate_scratch: CertificateScratch,
    margins: Vec<f64>,
    /// The support's bit mask for the intercept's margins (all zero between certificates).
    mask: Vec<u64>,
    /// The newest samples of the window no step has learned from yet (module docs, "Intake apart from
    /// learning"); at most the window's length.
    unlearned: usize,
    /// Samples the window evicted while unlearned (`thresher_samples_unlearned_total`).
    unlearned_evicted: u64,
}

/// `solver = "mirror"`.
pub type StreamMirror = StreamPrimal<MirrorState>;
/// `solver = "smidas"`.
pub type StreamSmidas = StreamPrimal<SmidasState>;

impl<E: PrimalEngine> StreamPrimal<E> {
    /// A learner with an empty window, or resumed from `state`.
    pub fn new(
        config: LearnerConfig,
        capacity: usize,
        mut state: Option<LearnerState>,
    ) -> StreamPrimal<E> {
        let mut engine = E::from_config(&config);
        engine.sync();
        let core = LearnerCore::new(config, capacity, state.as_mut());
        if let Some(primal) = state.as_ref().and_then(|s| s.primal.as_ref()) {
            engine.restore(core.window.dim(), primal);
        }
        if E::horizon_follows_window(&core.config) {
            engine.set_horizon(auto_horizon(core.window.len(), engine.samples_per_step()));
        }
        StreamPrimal {
            core,
            engine,
            order: Vec::new(),
            certificate_scratch: CertificateScratch::default(),
            margins: Vec::new(),
            mask: Vec::new(),
            unlearned: 0,
            unlearned_evicted: 0,
        }
    }

    /// The underlying per-sample solver.
    pub fn engine(&self) -> &E {
        &self.engine
    }
}

impl<E: PrimalEngine> StreamingLearner for StreamPrimal<E> {
    fn core(&self) -> &LearnerCore {
        &self.core
    }

    fn current_model(&mut self) -> Option<SparseModel> {
        self.engine.sync();
        Some(SparseModel::from_view(self.engine.model()))
    }

    fn insert_batches(&mut self, batches: &[&SampleBlock]) {
        if batches.iter().all(|b| b.is_empty()) {
            return;
        }
        if E::horizon_follows_window(&self.core.config) {
            // One pass over the window as it will be after this insert.
            let incoming: usize = batches.iter().map(|b| b.len()).sum();
            let window = (self.core.window.len() + incoming).min(self.core.window.capacity());
            self.engine
                .set_horizon(auto_horizon(window, self.engine.samples_per_step()));
        }
        self.engine.rewind_schedule();
        let mut incoming = 0;
        for batch in batches {
            self.store_batch(batch);
            incoming += batch.len();
        }
        let pending = self.unlearned + incoming;
        let len = self.core.window.len();
        self.unlearned_evicted += pending.saturating_sub(len) as u64;
        self.unlearned = pending.min(len);
        self.core.inserted();
    }

    /// Nothing to undo: the model keeps no per-sample state.
    fn evict(&mut self, _sample: Row<'_>, _alpha: f64) {}

    fn step(&mut self) -> StepOutcome {
        // A window emptied or shrunk since (drift's `shrink`) holds fewer unlearned samples.
        self.unlearned = self.unlearned.min(self.core.window.len());
        if self.unlearned > 0 {
            self.learn_unlearned();
            return StepOutcome::Stepped;
        }
        if let Some(idle) = self.core.begin_step(&mut self.order) {
            return StepOutcome::Idle(idle);
        }
        self.order.shuffle(&mut self.core.rng);
        let batch = self.engine.batch().max(1);
        let window = &self.core.window;
        // Each row's weight at `c_i N / M`, mean 1 over the window: the stochastic steps then follow
        // the weighted mean the certificate measures (`solver::mirror::mean_one_scale`).
        let scale = mean_one_scale(window);
        for chunk in self.order.chunks(batch) {
            self.engine
                .learn(chunk.iter().map(|&i| window.row(i).scaled(scale)));
        }
        self.core.stepped();
        StepOutcome::Stepped
    }

    /// `P(w)` against `D` at the dual point of `w` (as IHT), both over the window from scratch.
    fn certify(&mut self) -> LearnerSnapshot {
        self.engine.sync();
        let c = &self.core.config;
        let k = self.engine.certificate_k(c.k);
        let certificate = if self.core.window.is_empty() {
            Certificate::new(0.0, 0.0, 0)
        } else {
            if c.intercept {
                // The intercept's SGD steps are noisy (every sample moves it); at each certificate
                // it is set to its exact minimiser over the window for the current weights (as the
                // offline solvers do after each epoch), a one-dimensional convex problem.
                let window = &self.core.window;
                // `w` is zero outside its support (after `sync`): its margins against the
                // support's bit mask read the d-long `w` only where it can be nonzero.
                let model = self.engine.model();
                masked_margins_into(
                    window,
                    model.weights,
                    model.support,
                    &mut self.mask,
                    &mut self.margins,
                );
                let b = best_intercept(window, &c.loss, &self.margins);
                if b.is_finite() {
                    self.engine.set_intercept(b);
                }
            }
            let model = self.engine.model();
            // With an intercept the dual point of `(w, b)` is projected onto `sum alpha = 0`.
            let values = fused_certificate_with_intercept(
                &self.core.window,
                &c.loss,
                c.lambda,
                k,
                (
                    model.weights,
                    model.support,
                    c.intercept.then_some(model.intercept),
                ),
                None,
                // Only `b` moved since they were taken.
                c.intercept.then_some(&self.margins[..]),
                &mut self.certificate_scratch,
            );
            // The window's duals are that dual point: the next certificate's and a checkpoint's.
            self.core
                .window
                .alphas_mut()
                .copy_from_slice(&self.certificate_scratch.alpha_from_primal);
            values.certificate(self.core.window.len())
        };
        let c = &self.core.config;
        let model = Model::from_sparse(
            &SparseModel::from_view(self.engine.model()),
            c.loss.kind(),
            c.loss.gamma(),
            &self.engine.name(),
            k,
            c.lambda,
            certificate,
        );
        self.core.certified_best(model)
    }

    fn state(&self) -> LearnerState {
        self.core.state(1.0, Some(self.engine.export()))
    }

    fn gauges(&self) -> super::SolverGauges {
        super::SolverGauges {
            unlearned_samples: self.unlearned_evicted,
            ..Default::default()
        }
    }
}

/// The horizon of `horizon = 0`: one pass over a window of `window` samples in steps of `batch`, and at
/// least [`DEFAULT_HORIZON`] steps (a small window is passed over many times before the step decays).
fn auto_horizon(window: usize, batch: usize) -> u64 {
    (window.div_ceil(batch.max(1)) as u64).max(DEFAULT_HORIZON)
}

impl<E: PrimalEngine> StreamPrimal<E> {
    /// Predicts and stores one batch; [`StreamPrimal::learn_unlearned`] learns from it.
    fn store_batch(&mut self, batch: &SampleBlock) {
        let loss = self.core.config.loss;
        for i in 0..batch.len() {
            let sample = batch.get(i);
            let r = sample.row();
            let l = loss.sample(r.label, r.weight);
            let u = self.engine.score(r);
            let (value, alpha) = l.value_and_dual_of_margin(u);
            let served = batch.served(i, self.core.config.slot);
            self.core
                .predicted_served(r.label, r.weight, u, value, served);
            // The sample the push evicts needs no `evict`: the model keeps no per-sample state.
            self.core.window.push_ref(sample, alpha);
        }
    }

    /// Learns from the oldest unlearned samples, in arrival order and in mini-batches of the engine's
    /// size: one block's worth of the window at most, and no new mini-batch after
    /// [`LEARN_STEP_BUDGET`], so inserts and snapshots interleave. The mini-batches do not depend on
    /// where a step stops: every one but the last of the unlearned samples is full.
    fn learn_unlearned(&mut self) {
        let started = Instant::now();
        let window = &self.core.window;
        let n = window.len();
        let size = self.engine.batch().max(1);
        let limit = self.unlearned.min((n / self.core.blocks()).max(size));
        let first = n - self.unlearned;
        let scale = mean_one_scale(window);
        let mut learned = 0;
        while learned < limit && started.elapsed() < LEARN_STEP_BUDGET {
            let start = first + learned;
            let end = (start + size).min(n);
            self.engine
                .learn((start..end).map(|k| window.row(window.storage_index(k)).scaled(scale)));
            learned += end - start;
        }
        self.unlearned -= learned;
        self.core.learned_new();
    }
}
