//! Criterion `holdout` of `lambda = "auto"` ([`super`]'s module docs): the ring of held-out samples,
//! which no member learns, and the mean loss of a model over it.

use std::collections::VecDeque;

use super::HOLDOUT_EVERY;
use crate::learner::params::LearnerConfig;
use crate::sample::{Sample, SampleBlock, SampleRef};
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
    /// Reused by [`Holdout::split`] (a grid whose members keep their own windows): a copy of the
    /// samples of an insert the members learn. The shared grid names them in place instead
    /// ([`Holdout::split_ring`]).
    learned: SampleBlock,
}

/// The rows of one insert the members learn ([`Holdout::split_ring`]): those not held out, past the
/// first `skip` of them. Named by position, not copied.
#[derive(Debug, Clone, Copy)]
pub struct Learned {
    /// [`Holdout::arrived`] before the insert: which of its samples are held out follows from it.
    arrived_before: u64,
    /// Learned samples of the insert left out (older than the newest `keep`).
    skip: u64,
    /// Learned samples named.
    len: usize,
    /// One past the largest feature index of the rows named.
    dim: usize,
}

impl Learned {
    /// How many rows [`Learned::rows`] yields.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no row is learned.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// One past the largest feature index of the rows.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The rows, in order, each with the score the learner at `slot` served for it (late labels).
    /// `batches` must be the insert's own.
    pub fn rows<'a>(
        self,
        batches: &'a [&'a SampleBlock],
        slot: usize,
    ) -> impl Iterator<Item = (SampleRef<'a>, Option<f64>)> + 'a {
        let mut arrived = self.arrived_before;
        batches
            .iter()
            .flat_map(move |b| (0..b.len()).map(move |i| (b, i)))
            .filter(move |_| {
                arrived += 1;
                !arrived.is_multiple_of(HOLDOUT_EVERY)
            })
            .skip(self.skip as usize)
            .map(move |(b, i)| (b.get(i), b.served(i, slot)))
    }
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
    /// ring), the others into `self.learned` — only the newest `keep` of them ([`Holdout::split_ring`]).
    pub fn split(&mut self, batches: &[&SampleBlock], keep: usize) {
        let learned = self.split_ring(batches, keep);
        self.learned.clear();
        for (sample, _) in learned.rows(batches, usize::MAX) {
            self.learned.push_ref(sample);
        }
    }

    /// The ring's side of a split: every [`HOLDOUT_EVERY`]-th sample of an insert goes into the ring
    /// (the oldest leaving a full ring); the others are the members' to learn, and the returned
    /// [`Learned`] names the newest `keep` of them without copying any: a learner whose window holds
    /// `keep` samples would store no older one (they would enter and leave within the insert), so
    /// under a backlog of many batches nothing older is touched. Likewise a held-out sample that a
    /// later one of the same insert would push out of the ring is counted as dropped without being
    /// copied.
    pub fn split_ring(&mut self, batches: &[&SampleBlock], keep: usize) -> Learned {
        let total: u64 = batches.iter().map(|b| b.len() as u64).sum();
        let held = (self.arrived + total) / HOLDOUT_EVERY - self.arrived / HOLDOUT_EVERY;
        let skip_learned = (total - held).saturating_sub(keep as u64);
        let skip_held = held.saturating_sub(self.capacity as u64);
        let mut learned = Learned {
            arrived_before: self.arrived,
            skip: skip_learned,
            len: 0,
            dim: 0,
        };
        let (mut seen, mut held_seen) = (0u64, 0u64);
        for sample in batches.iter().flat_map(|b| b.iter()) {
            self.arrived += 1;
            if self.arrived.is_multiple_of(HOLDOUT_EVERY) {
                held_seen += 1;
                if held_seen <= skip_held {
                    self.dropped += 1;
                    continue;
                }
                // The oldest of a full ring leaves, and its buffers take the new sample.
                let mut slot = if self.ring.len() == self.capacity {
                    self.dropped += 1;
                    self.ring.pop_front().expect("a full ring")
                } else {
                    Sample {
                        indices: Vec::new(),
                        values: Vec::new(),
                        label: 0.0,
                        weight: None,
                    }
                };
                sample.copy_into(&mut slot);
                self.ring.push_back(slot);
            } else {
                seen += 1;
                if seen > skip_learned {
                    learned.len += 1;
                    learned.dim = learned.dim.max(sample.dim());
                }
            }
        }
        learned
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

    /// An insert split over several batches names, without copying, the rows a full copy keeps last:
    /// the same rows in the same order, their count and their dimension; the ring and its counts
    /// are those of the copying split.
    #[test]
    fn the_learned_rows_are_named_in_place_across_batches() {
        let data = crate::synth::sparse_stream(1003, 50, 3, 5, 0.1, true, 4);
        let (a, b) = data.samples.split_at(417);
        let (a, b) = (SampleBlock::from_samples(a), SampleBlock::from_samples(b));
        let batches = [&a, &b];
        let (mut full, mut named) = (Holdout::new(100), Holdout::new(100));
        full.split(&batches, usize::MAX);
        let learned = named.split_ring(&batches, 300);
        assert_eq!((named.len(), named.dropped()), (full.len(), full.dropped()));
        assert!(named.ring.iter().zip(&full.ring).all(|(x, y)| x == y));
        // The ring holds the newest 20 of the samples 5, 10, .. (1-based), in order.
        let held: Vec<&Sample> = data.samples.iter().skip(4).step_by(5).collect();
        assert!(named
            .ring
            .iter()
            .eq(held[held.len() - 20..].iter().copied()));
        let f = full.learned();
        assert_eq!(learned.len(), 300);
        let rows: Vec<_> = learned.rows(&batches, 0).collect();
        assert_eq!(rows.len(), 300);
        let mut dim = 0;
        for (i, (row, served)) in rows.iter().enumerate() {
            let copied = f.get(f.len() - 300 + i);
            assert_eq!(*row, copied);
            assert_eq!(*served, None);
            dim = dim.max(row.dim());
        }
        assert_eq!(learned.dim(), dim);
    }

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
