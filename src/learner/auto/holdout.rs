//! Criterion `holdout` of `lambda = "auto"` ([`super`]'s module docs): the ring of held-out samples,
//! which no member learns, and the mean loss of a model over it.

use std::collections::VecDeque;

use super::HOLDOUT_EVERY;
use crate::learner::params::LearnerConfig;
use crate::sample::{Sample, SampleBlock};
use crate::solver::driver::SparseModel;
use crate::sparse::merge_dot;

/// Criterion `holdout`: the samples no member learns, newest last, at most `capacity`.
pub struct Holdout {
    ring: VecDeque<Sample>,
    capacity: usize,
    /// Samples that arrived (which of them is held out is decided by this count).
    arrived: u64,
    /// Held-out samples dropped from the full ring (the oldest first).
    dropped: u64,
    /// Reused: the samples of an insert the members learn.
    learned: SampleBlock,
}

impl Holdout {
    pub fn new(window_capacity: usize) -> Holdout {
        Holdout {
            ring: VecDeque::new(),
            capacity: (window_capacity / HOLDOUT_EVERY as usize).max(1),
            arrived: 0,
            dropped: 0,
            learned: SampleBlock::new(),
        }
    }

    /// Splits an insert: every [`HOLDOUT_EVERY`]-th sample into the ring (the oldest leaving a full
    /// ring), the others into `self.learned`.
    pub fn split(&mut self, batches: &[&SampleBlock]) {
        self.learned.clear();
        for sample in batches.iter().flat_map(|b| b.iter()) {
            self.arrived += 1;
            if self.arrived.is_multiple_of(HOLDOUT_EVERY) {
                if self.ring.len() == self.capacity {
                    self.ring.pop_front();
                    self.dropped += 1;
                }
                self.ring.push_back(sample.to_sample());
            } else {
                self.learned.push_ref(sample);
            }
        }
    }

    /// Held-out samples in the ring.
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// Whether the ring is empty.
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// Held-out samples dropped from the full ring (the oldest first).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The samples of the last insert the members learn (all but the held-out ones).
    pub fn learned(&self) -> &SampleBlock {
        &self.learned
    }

    /// [`Holdout::learned`], moved out (so the members can learn it while the ring is scored);
    /// [`Holdout::give_back_learned`] returns its buffers for the next split.
    pub fn take_learned(&mut self) -> SampleBlock {
        std::mem::take(&mut self.learned)
    }

    pub fn give_back_learned(&mut self, block: SampleBlock) {
        self.learned = block;
    }

    /// Samples that arrived since the start (every [`HOLDOUT_EVERY`]-th was held out).
    pub fn arrived(&self) -> u64 {
        self.arrived
    }

    /// The mean loss of `model` (its support ascending, as every learner keeps it) over the ring.
    pub fn loss_of(&self, config: &LearnerConfig, model: &SparseModel) -> f64 {
        let mut sum = 0.0;
        for sample in &self.ring {
            let r = sample.row();
            let margin = merge_dot(
                model.intercept,
                r.indices,
                r.values,
                &model.support,
                &model.weights,
            );
            sum += config.loss.sample(r.label, r.weight).value(margin);
        }
        sum / self.ring.len().max(1) as f64
    }
}
