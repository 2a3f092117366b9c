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
    /// ring), the others into `self.learned` — only the newest `keep` of them: a learner whose window
    /// holds `keep` samples would store no older one (they would enter and leave within the insert),
    /// so under a backlog of many batches the copy is bounded by the window, not by the backlog.
    /// Likewise a held-out sample that a later one of the same insert would push out of the ring is
    /// counted as dropped without being copied.
    pub fn split(&mut self, batches: &[&SampleBlock], keep: usize) {
        self.learned.clear();
        let total: u64 = batches.iter().map(|b| b.len() as u64).sum();
        let held = (self.arrived + total) / HOLDOUT_EVERY - self.arrived / HOLDOUT_EVERY;
        let skip_learned = (total - held).saturating_sub(keep as u64);
        let skip_held = held.saturating_sub(self.capacity as u64);
        let (mut learned, mut held_seen) = (0u64, 0u64);
        for sample in batches.iter().flat_map(|b| b.iter()) {
            self.arrived += 1;
            if self.arrived.is_multiple_of(HOLDOUT_EVERY) {
                held_seen += 1;
                if held_seen <= skip_held {
                    self.dropped += 1;
                    continue;
                }
                if self.ring.len() == self.capacity {
                    self.ring.pop_front();
                    self.dropped += 1;
                }
                self.ring.push_back(sample.to_sample());
            } else {
                learned += 1;
                if learned > skip_learned {
                    self.learned.push_ref(sample);
                }
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

    /// The weighted mean loss of `model` (its support ascending, as every learner keeps it) over the ring.
    pub fn loss_of(&self, config: &LearnerConfig, model: &SparseModel) -> f64 {
        let (mut sum, mut mass) = (0.0, 0.0);
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
            mass += r.weight;
        }
        sum / crate::solver::objective::normaliser(mass)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With `keep`, an insert copies only the newest `keep` learned samples and the held-out samples
    /// the ring keeps; the ring, the counts and the kept samples are those of the full split.
    #[test]
    fn a_backlog_copies_only_what_the_window_and_the_ring_keep() {
        let data = crate::synth::sparse_stream(1003, 50, 3, 5, 0.1, true, 4);
        let block = SampleBlock::from_samples(&data.samples);
        let (mut full, mut kept) = (Holdout::new(100), Holdout::new(100));
        full.split(&[&block], usize::MAX);
        kept.split(&[&block], 300);
        assert_eq!((full.len(), full.dropped()), (20, 180));
        assert_eq!((kept.len(), kept.dropped()), (full.len(), full.dropped()));
        assert_eq!(kept.arrived(), 1003);
        assert!(kept.ring.iter().zip(&full.ring).all(|(a, b)| a == b));
        let (f, k) = (full.learned(), kept.learned());
        assert_eq!((f.len(), k.len()), (1003 - 200, 300));
        for i in 0..300 {
            let (a, b) = (k.row(i), f.row(f.len() - 300 + i));
            assert_eq!(
                (a.label, a.indices, a.values),
                (b.label, b.indices, b.values)
            );
        }
    }
}
