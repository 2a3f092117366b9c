//! [`PrimalEngine`]: what the window driver ([`super::StreamPrimal`]) needs from a per-sample primal
//! state, and its implementations for the mirror state and the SMIDAS state, built from the learner's
//! config (`[learner.mirror]`, `[learner.smidas]`), with their checkpoint export and restore as a
//! [`PrimalState`].

use super::resume::Resumable;
use crate::learner::params::{LearnerConfig, SolverOptions};
use crate::learner::PrimalState;
use crate::sample::Row;
use crate::solver::mirror::state::MirrorState;
use crate::solver::mirror::{MirrorConfig, MirrorMap, StepClock};
use crate::solver::smidas::SmidasState;
use crate::solver::ModelView;

/// What the generic window driver needs from a per-sample primal solver (its checkpoint comes from
/// [`Resumable`]).
pub trait PrimalEngine: Resumable + Send + Sized {
    /// A fresh engine with the learner's solver options (`ingest.max_dim` is not known: it grows).
    fn from_config(config: &LearnerConfig) -> Self;
    /// `w.x` for one row.
    fn score(&self, row: Row<'_>) -> f64;
    /// One solver step on a mini-batch (SMIDAS with a batch of 1 steps sample by sample).
    fn learn<'r>(&mut self, rows: impl Iterator<Item = Row<'r>>);
    /// Samples per step.
    fn batch(&self) -> usize;
    /// Samples per step of the step schedule's clock, which the automatic horizon counts in: the
    /// mirror state counts a step per batch, SMIDAS a step per sample (its batch is that many
    /// delayed per-sample steps).
    fn samples_per_step(&self) -> usize {
        self.batch()
    }
    /// Makes [`PrimalEngine::model`] current (SMIDAS materialises `w` from `theta`).
    fn sync(&mut self);
    fn model(&self) -> ModelView<'_>;
    /// The `k` of the certificate's `H_k`.
    fn certificate_k(&self, k: usize) -> usize;
    /// The model's `solver` field.
    fn name(&self) -> String;
    /// Sets the intercept (a restored checkpoint's).
    fn set_intercept(&mut self, b: f64);
    /// Sets the automatic step's horizon, in steps.
    fn set_horizon(&mut self, steps: u64);
    /// The configured horizon is 0: one pass over the window (see the module docs).
    fn horizon_follows_window(config: &LearnerConfig) -> bool {
        match &config.options {
            SolverOptions::Mirror(m) => m.horizon == 0,
            SolverOptions::Smidas { horizon, .. } => *horizon == 0,
            _ => false,
        }
    }
    /// Steps (mirror) or samples (SMIDAS) rejected for a non-finite value.
    fn numeric_faults(&self) -> u64;
    /// The checkpointed model and schedule position.
    fn export(&self) -> PrimalState {
        PrimalState {
            coordinates: self.coordinates(),
            solver_steps: self.clock().steps,
            row_sq_max: self.clock().row_sq_max,
            active: Vec::new(),
            intercept: self.model().intercept,
        }
    }
    /// Resumes from what [`PrimalEngine::export`] wrote, sized for features `0..dim` at least.
    fn restore(&mut self, dim: usize, s: &PrimalState) {
        self.resume(
            dim,
            &s.coordinates,
            StepClock {
                steps: s.solver_steps,
                row_sq_max: s.row_sq_max,
            },
        );
        if s.intercept.is_finite() {
            self.set_intercept(s.intercept);
        }
    }
}

impl PrimalEngine for MirrorState {
    fn from_config(config: &LearnerConfig) -> Self {
        let mirror = match &config.options {
            SolverOptions::Mirror(m) => *m,
            // A config built by hand without options: the defaults of the `mirror` keys.
            _ => MirrorConfig {
                memory: crate::solver::mirror::Memory::Dense,
                ..MirrorConfig::new(MirrorMap::Euclidean)
            },
        };
        MirrorState::new(
            mirror,
            config.loss,
            config.lambda,
            config.k,
            config.intercept,
            0,
        )
        .expect("the config validated the mirror options")
    }
    fn set_intercept(&mut self, b: f64) {
        MirrorState::set_intercept(self, b);
    }
    fn set_horizon(&mut self, steps: u64) {
        MirrorState::set_horizon(self, steps);
    }
    fn numeric_faults(&self) -> u64 {
        MirrorState::numeric_faults(self)
    }
    fn score(&self, row: Row<'_>) -> f64 {
        MirrorState::score(self, row)
    }
    fn learn<'r>(&mut self, rows: impl Iterator<Item = Row<'r>>) {
        self.step_batch(rows);
    }
    fn batch(&self) -> usize {
        self.config().batch
    }
    fn sync(&mut self) {}
    fn model(&self) -> ModelView<'_> {
        MirrorState::model(self)
    }
    fn certificate_k(&self, k: usize) -> usize {
        k
    }
    fn name(&self) -> String {
        format!("mirror-{}", self.config().map.name())
    }
}

impl PrimalEngine for SmidasState {
    fn from_config(config: &LearnerConfig) -> Self {
        let (l1, p, step, horizon, batch) = match &config.options {
            SolverOptions::Smidas {
                l1,
                p,
                step,
                horizon,
                batch,
            } => (*l1, *p, *step, *horizon, *batch),
            _ => (
                1e-3,
                2.0,
                crate::solver::mirror::MirrorStep::Auto,
                crate::solver::mirror::DEFAULT_HORIZON,
                1,
            ),
        };
        let mut engine =
            SmidasState::new(l1, step, config.loss, config.lambda, config.intercept, 0)
                .and_then(|learner| learner.with_p(p))
                .expect("the config validated the smidas options");
        if horizon > 0 {
            engine.set_horizon(horizon);
        }
        // The automatic step's gain at the learner's k, as `fit` takes it (`solver::smidas::Smidas`),
        // not the worst case of one nonzero weight: 72 times larger a step at p = 2 ln 2^20, k = 100.
        engine.set_sparsity_hint(config.k);
        engine.set_batch(batch);
        engine
    }
    fn score(&self, row: Row<'_>) -> f64 {
        SmidasState::score(self, row)
    }
    fn set_intercept(&mut self, b: f64) {
        SmidasState::set_intercept(self, b);
    }
    fn set_horizon(&mut self, steps: u64) {
        SmidasState::set_horizon(self, steps);
    }
    fn numeric_faults(&self) -> u64 {
        SmidasState::numeric_faults(self)
    }
    fn learn<'r>(&mut self, rows: impl Iterator<Item = Row<'r>>) {
        if SmidasState::batch(self) > 1 {
            self.step_batch(rows);
        } else {
            for row in rows {
                self.step_sample(row);
            }
        }
    }
    fn batch(&self) -> usize {
        SmidasState::batch(self)
    }
    fn samples_per_step(&self) -> usize {
        1
    }
    fn sync(&mut self) {
        SmidasState::sync(self);
    }
    fn model(&self) -> ModelView<'_> {
        SmidasState::model(self)
    }
    fn certificate_k(&self, k: usize) -> usize {
        k.max(self.support_size())
    }
    fn name(&self) -> String {
        "smidas".into()
    }
}
