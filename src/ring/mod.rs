//! The learner's window: a bounded ring buffer of the last `window.capacity` samples, each with its dual
//! variable `alpha_i`.
//!
//! Overflow policy: **drop oldest**. When the window is full, [`Window::push`] overwrites the oldest slot
//! and hands the evicted sample and its dual back, so the learner can remove its contribution from
//! `z = sum_i alpha_i x_i`. The window implements [`SampleSet`] with rows in *storage* order (slot
//! order, not arrival order: the objective is a sum, so the order does not matter) and keeps the duals in
//! the same order, so `solver::objective::{primal_value, dual_value}` evaluate the certificate over the
//! window exactly, with `window.alphas()` as the dual point. It knows nothing of solvers or threads.

use crate::sample::{Row, Sample, SampleSet};

/// A sample in the window with its dual variable and cached `||x_i||^2`.
#[derive(Debug, Clone, PartialEq)]
pub struct Slot {
    pub sample: Sample,
    pub sq_norm: f64,
}

/// Ring buffer of at most `capacity` samples and their duals.
#[derive(Debug, Clone)]
pub struct Window {
    capacity: usize,
    slots: Vec<Slot>,
    /// `alphas[i]` is the dual of `slots[i]`; kept apart so it is one contiguous `&[f64]`.
    alphas: Vec<f64>,
    /// Storage index of the oldest sample once the window is full (0 while it fills).
    head: usize,
    /// One past the largest feature index ever stored (monotone).
    dim: usize,
}

impl Window {
    /// An empty window; `capacity >= 1` (the config guarantees it).
    pub fn new(capacity: usize) -> Window {
        let capacity = capacity.max(1);
        Window {
            capacity,
            slots: Vec::new(),
            alphas: Vec::new(),
            head: 0,
            dim: 0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn is_full(&self) -> bool {
        self.slots.len() == self.capacity
    }

    /// Adds a sample with dual `alpha`; when full, evicts and returns the oldest `(sample, alpha)`.
    pub fn push(&mut self, sample: Sample, alpha: f64) -> Option<(Sample, f64)> {
        self.push_at(sample, alpha).1
    }

    /// [`Window::push`], also returning the storage index the sample went to.
    pub fn push_at(&mut self, sample: Sample, alpha: f64) -> (usize, Option<(Sample, f64)>) {
        self.dim = self.dim.max(sample.dim());
        let sq_norm = sample.values.iter().map(|v| v * v).sum();
        let slot = Slot { sample, sq_norm };
        if self.slots.len() < self.capacity {
            self.slots.push(slot);
            self.alphas.push(alpha);
            return (self.slots.len() - 1, None);
        }
        let at = self.head;
        self.head = (self.head + 1) % self.capacity;
        let old = std::mem::replace(&mut self.slots[at], slot);
        let old_alpha = std::mem::replace(&mut self.alphas[at], alpha);
        (at, Some((old.sample, old_alpha)))
    }

    /// Empties the window (capacity and the feature bound `dim` stay).
    pub fn clear(&mut self) {
        self.slots.clear();
        self.alphas.clear();
        self.head = 0;
    }

    /// The slot at storage index `i`.
    pub fn slot(&self, i: usize) -> &Slot {
        &self.slots[i]
    }

    /// Duals in storage order (parallel to [`SampleSet::row`]).
    pub fn alphas(&self) -> &[f64] {
        &self.alphas
    }

    pub fn alphas_mut(&mut self) -> &mut [f64] {
        &mut self.alphas
    }

    /// An owned copy of the contents, oldest first, with their duals: the checkpoint payload.
    pub fn to_pairs(&self) -> Vec<(Sample, f64)> {
        self.iter_oldest_first()
            .map(|(s, a)| (s.clone(), a))
            .collect()
    }

    /// Samples from oldest to newest with their duals (for checkpoints).
    pub fn iter_oldest_first(&self) -> impl Iterator<Item = (&Sample, f64)> + '_ {
        let n = self.slots.len();
        (0..n).map(move |k| {
            let i = (self.head + k) % n.max(1);
            (&self.slots[i].sample, self.alphas[i])
        })
    }

    /// Rebuilds a window from samples oldest-first (the inverse of [`Window::iter_oldest_first`]).
    /// Samples beyond `capacity` evict the oldest, as if streamed in.
    pub fn from_oldest_first(
        capacity: usize,
        items: impl IntoIterator<Item = (Sample, f64)>,
    ) -> Window {
        let mut w = Window::new(capacity);
        for (s, a) in items {
            w.push(s, a);
        }
        w
    }
}

impl SampleSet for Window {
    fn len(&self) -> usize {
        self.slots.len()
    }
    #[inline]
    fn row(&self, i: usize) -> Row<'_> {
        self.slots[i].sample.row()
    }
    fn dim(&self) -> usize {
        self.dim
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(j: u32, y: f64) -> Sample {
        Sample::new(vec![j], vec![2.0], y, None).unwrap()
    }

    #[test]
    fn drops_oldest_and_keeps_duals_aligned() {
        let mut w = Window::new(3);
        for i in 0..3 {
            assert_eq!(w.push(s(i, i as f64), i as f64 * 10.0), None);
        }
        assert!(w.is_full());
        let (old, a) = w.push(s(7, 3.0), 30.0).unwrap();
        assert_eq!((old.label, a), (0.0, 0.0));
        assert_eq!(w.len(), 3);
        assert_eq!(w.dim(), 8);
        let order: Vec<(f64, f64)> = w.iter_oldest_first().map(|(s, a)| (s.label, a)).collect();
        assert_eq!(order, vec![(1.0, 10.0), (2.0, 20.0), (3.0, 30.0)]);
        for i in 0..w.len() {
            assert_eq!(w.row(i).label * 10.0, w.alphas()[i]);
        }
        assert_eq!(w.slot(0).sq_norm, 4.0);
        let copy = Window::from_oldest_first(3, w.iter_oldest_first().map(|(s, a)| (s.clone(), a)));
        let again: Vec<(f64, f64)> = copy
            .iter_oldest_first()
            .map(|(s, a)| (s.label, a))
            .collect();
        assert_eq!(again, order);
    }
}
