//! The learner's window: a bounded ring buffer of the last `window.capacity` samples, each with its dual
//! variable `alpha_i`.
//!
//! Overflow policy: **drop oldest**. A learner streaming rows in peeks at the sample about to leave
//! ([`Window::oldest_if_full`]), removes its contribution from `z = sum_i alpha_i x_i`, then
//! [`Window::push_ref`]s the new row, which is copied into the oldest slot's own vectors: once the window
//! is full (or after [`Window::clear`], whose slots are kept for reuse) a steady stream allocates nothing.
//! [`Window::push`] (owned samples, the evicted one handed back) serves checkpoint restores and tests.
//! The window implements [`SampleSet`] with rows in *storage* order (slot order, not arrival order: the
//! objective is a sum, so the order does not matter) and keeps the duals in the same order, so
//! `solver::objective::{primal_value, dual_value}` evaluate the certificate over the window exactly,
//! with `window.alphas()` as the dual point. It knows nothing of solvers or threads.

pub mod budget;

pub use budget::{Batch, QueuedBatch, SampleBudget};

use crate::sample::{DualRows, Row, Sample, SampleRef, SampleSet};

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
    /// Slots emptied by [`Window::clear`], reused (vectors and all) as the window fills again.
    spare: Vec<Slot>,
    /// One past the largest feature index ever stored (monotone).
    dim: usize,
    /// `M = sum_i c_i` over the stored samples, kept as they come and go ([`SampleSet::mass`]), and
    /// summed again from the slots every `capacity` pushes ([`Window::refresh_mass`]) so that the
    /// additions and subtractions cannot drift (with weights all 1 it is exact: integers).
    mass: f64,
    /// Pushes since the mass was last summed from the slots.
    pushes_since_refresh: usize,
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
            spare: Vec::new(),
            dim: 0,
            mass: 0.0,
            pushes_since_refresh: 0,
        }
    }

    /// Sums the mass again from the slots, in storage order: exact for the weights stored, whatever
    /// rounding the running sum had collected.
    pub fn refresh_mass(&mut self) {
        self.mass = self.slots.iter().map(|s| weight_of(&s.sample)).sum();
        self.pushes_since_refresh = 0;
    }

    /// The running mass after a sample of weight `added` took the place of one of weight `removed`
    /// (called once the new sample is stored): summed again from the slots every `capacity` pushes.
    fn account(&mut self, added: f64, removed: f64) {
        self.pushes_since_refresh += 1;
        if self.pushes_since_refresh >= self.capacity {
            self.refresh_mass();
        } else {
            self.mass = self.mass + added - removed;
        }
    }

    /// Multiplies every stored weight and dual by `factor` (a power of two, so each product is
    /// exact unless it leaves the normal range), and the mass with them: the weighted mean and
    /// `alpha_i / c_i` are unchanged. What forgetting's renormalisation does (`learner::forget`).
    pub fn scale_weights(&mut self, factor: f64) {
        for slot in &mut self.slots {
            slot.sample.weight = Some(weight_of(&slot.sample) * factor);
        }
        for a in &mut self.alphas {
            *a *= factor;
        }
        self.refresh_mass();
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn is_full(&self) -> bool {
        self.slots.len() == self.capacity
    }

    /// Adds a sample with dual `alpha`; when full, evicts and returns the oldest `(sample, alpha)`.
    pub fn push(&mut self, sample: Sample, alpha: f64) -> Option<(Sample, f64)> {
        self.dim = self.dim.max(sample.dim());
        let sq_norm = sq_norm(&sample.values);
        let slot = Slot { sample, sq_norm };
        let added = weight_of(&slot.sample);
        if self.slots.len() < self.capacity {
            self.slots.push(slot);
            self.alphas.push(alpha);
            self.account(added, 0.0);
            return None;
        }
        let at = self.advance_head();
        let old = std::mem::replace(&mut self.slots[at], slot);
        let old_alpha = std::mem::replace(&mut self.alphas[at], alpha);
        self.account(added, weight_of(&old.sample));
        Some((old.sample, old_alpha))
    }

    /// The sample the next push will evict, with its dual: `None` while the window is not full. A
    /// learner removes its contribution before [`Window::push_ref`] overwrites it.
    #[inline]
    pub fn oldest_if_full(&self) -> Option<(Row<'_>, f64)> {
        self.is_full()
            .then(|| (self.slots[self.head].sample.row(), self.alphas[self.head]))
    }

    /// The row the `ahead`-th push from now will evict (`ahead = 0` is [`Window::oldest_if_full`]'s),
    /// when the window is full: for a learner to prefetch what it will remove.
    #[inline]
    pub fn oldest_ahead(&self, ahead: usize) -> Option<Row<'_>> {
        self.is_full()
            .then(|| self.slots[(self.head + ahead) % self.capacity].sample.row())
    }

    /// Copies a row in with dual `alpha` and returns the storage index it went to. When full it replaces
    /// the oldest sample (see [`Window::oldest_if_full`]) in that slot's own vectors, which keep their
    /// capacity: no allocation unless the row has more features than the slot ever held.
    pub fn push_ref(&mut self, sample: SampleRef<'_>, alpha: f64) -> usize {
        self.dim = self.dim.max(sample.dim());
        let weight = sample.weight.unwrap_or(1.0);
        let mut removed = 0.0;
        let at = if self.slots.len() < self.capacity {
            match self.spare.pop() {
                Some(slot) => self.slots.push(slot),
                None => self.slots.push(Slot {
                    sample: Sample {
                        indices: Vec::with_capacity(sample.indices.len()),
                        values: Vec::with_capacity(sample.values.len()),
                        label: 0.0,
                        weight: None,
                    },
                    sq_norm: 0.0,
                }),
            }
            self.alphas.push(alpha);
            self.slots.len() - 1
        } else {
            let at = self.advance_head();
            removed = weight_of(&self.slots[at].sample);
            self.alphas[at] = alpha;
            at
        };
        let slot = &mut self.slots[at];
        slot.sample.indices.clear();
        slot.sample.indices.extend_from_slice(sample.indices);
        slot.sample.values.clear();
        slot.sample.values.extend_from_slice(sample.values);
        slot.sample.label = sample.label;
        slot.sample.weight = sample.weight;
        slot.sq_norm = sq_norm(sample.values);
        self.account(weight, removed);
        at
    }

    /// The storage indices the next `pushes` pushes will overwrite, in the order they will (the oldest
    /// first): the samples they evict. Empty while `pushes` only fill free slots.
    pub fn evicted_by(&self, pushes: usize) -> impl Iterator<Item = usize> + '_ {
        let free = self.capacity - self.slots.len();
        let head = if self.is_full() { self.head } else { 0 };
        (0..pushes.saturating_sub(free).min(self.slots.len()))
            .map(move |i| (head + i) % self.capacity)
    }

    /// Exchanges the duals with `alphas`, then sizes the window's to its samples (new entries 0): how
    /// learners sharing one window's samples each lend it their own duals
    /// (`learner::auto::shared`). A vector of the right length is not touched.
    pub fn swap_alphas(&mut self, alphas: &mut Vec<f64>) {
        std::mem::swap(&mut self.alphas, alphas);
        self.alphas.resize(self.slots.len(), 0.0);
    }

    /// An owned copy of the contents, oldest first, each with its dual in `alphas` (storage order,
    /// one per sample): the checkpoint payload of a learner whose duals are not the window's own.
    pub fn to_pairs_with(&self, alphas: &[f64]) -> Vec<(Sample, f64)> {
        let n = self.slots.len();
        (0..n)
            .map(|k| {
                let i = (self.head + k) % n.max(1);
                (
                    self.slots[i].sample.clone(),
                    alphas.get(i).copied().unwrap_or(0.0),
                )
            })
            .collect()
    }

    /// The storage index of the oldest sample, which the caller overwrites; the next one becomes oldest.
    fn advance_head(&mut self) -> usize {
        let at = self.head;
        self.head = (self.head + 1) % self.capacity;
        at
    }

    /// Empties the window (capacity and the feature bound `dim` stay; the slots are kept for reuse).
    pub fn clear(&mut self) {
        self.spare.append(&mut self.slots);
        self.alphas.clear();
        self.head = 0;
        self.mass = 0.0;
        self.pushes_since_refresh = 0;
    }

    /// The storage index of the `k`-th oldest sample (`k = 0` is the oldest, `len - 1` the newest).
    #[inline]
    pub fn storage_index(&self, k: usize) -> usize {
        (self.head + k) % self.slots.len().max(1)
    }

    /// A hash of the stored duals (their bits), the mass and the length: with the count of samples ever
    /// pushed, what a caller compares to tell that nothing in the window moved since it last looked
    /// (one pass over the duals: ~0.1 ms for 100k samples, against a pass over the rows).
    pub fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.slots.len().hash(&mut h);
        self.mass.to_bits().hash(&mut h);
        for a in &self.alphas {
            a.to_bits().hash(&mut h);
        }
        h.finish()
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

/// A stored sample's weight `c_i` (absent: 1).
fn weight_of(sample: &Sample) -> f64 {
    sample.weight.unwrap_or(1.0)
}

/// `||x||^2` of a row's values, as the block steps cache it.
fn sq_norm(values: &[f64]) -> f64 {
    values.iter().map(|v| v * v).sum()
}

impl DualRows for Window {
    fn alphas(&self) -> &[f64] {
        &self.alphas
    }
    fn alphas_mut(&mut self) -> &mut [f64] {
        &mut self.alphas
    }
    #[inline]
    fn sq_norm(&self, i: usize) -> f64 {
        self.slots[i].sq_norm
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
    #[inline(always)]
    fn prefetch_meta(&self, i: usize) {
        crate::sparse::prefetch(&self.slots, i);
        crate::sparse::prefetch(&self.alphas, i);
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn mass(&self) -> f64 {
        self.mass
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

    /// `evicted_by` names the slots the next pushes overwrite, and `swap_alphas` lends a window
    /// another set of duals, sized to its samples.
    #[test]
    fn evicted_by_names_the_slots_the_next_pushes_overwrite() {
        let mut w = Window::new(4);
        w.push(s(0, 0.0), 0.0);
        w.push(s(1, 1.0), 1.0);
        assert_eq!(w.evicted_by(2).count(), 0);
        assert_eq!(w.evicted_by(3).collect::<Vec<_>>(), [0]);
        assert_eq!(w.evicted_by(9).collect::<Vec<_>>(), [0, 1]);
        for i in 2..7 {
            w.push(s(i, i as f64), i as f64);
        }
        // Full, the oldest (label 3) at the head.
        let predicted: Vec<usize> = w.evicted_by(3).collect();
        let mut overwritten = Vec::new();
        for i in 7..10 {
            assert!(w.oldest_if_full().is_some());
            let sample = s(i, i as f64);
            overwritten.push(w.push_ref(sample.view(), 0.0));
        }
        assert_eq!(predicted, overwritten);
        let mut other = vec![5.0, 6.0];
        w.swap_alphas(&mut other);
        assert_eq!(w.alphas(), [5.0, 6.0, 0.0, 0.0]);
        assert_eq!(other.len(), 4);
        let pairs = w.to_pairs_with(&other);
        assert_eq!(pairs, w.to_pairs_with(&other));
        w.swap_alphas(&mut other);
        assert_eq!(contents(&w).len(), 4);
        assert_eq!(
            pairs.iter().map(|(s, a)| (s.label, *a)).collect::<Vec<_>>(),
            w.iter_oldest_first()
                .map(|(s, a)| (s.label, a))
                .collect::<Vec<_>>()
        );
    }

    fn contents(w: &Window) -> Vec<(Sample, u64)> {
        w.iter_oldest_first()
            .map(|(s, a)| (s.clone(), a.to_bits()))
            .collect()
    }

    /// Streaming rows into a full window reuses the slots' vectors (same buffers, no allocation) and
    /// leaves exactly what a window built from owned samples holds; the peeked oldest sample is the
    /// one the push replaces.
    #[test]
    fn full_window_overwrites_slots_in_place() {
        let data = crate::synth::sparse_stream(40, 50, 3, 6, 0.1, false, 9);
        let mut samples = data.samples;
        samples[3].weight = Some(2.5);
        // A row wider than any before it: its slot must grow once.
        samples[12] = Sample::new((0..20).collect(), vec![0.5; 20], 1.0, None).unwrap();
        let mut w = Window::new(8);
        let mut reference = Window::new(8);
        for (i, s) in samples[..8].iter().enumerate() {
            assert!(w.oldest_if_full().is_none());
            w.push_ref(s.view(), i as f64);
            reference.push(s.clone(), i as f64);
        }
        assert!(w.is_full());
        let buffers = |w: &Window| -> Vec<(*const u32, usize, *const f64, usize)> {
            (0..w.len())
                .map(|i| {
                    let s = &w.slot(i).sample;
                    (
                        s.indices.as_ptr(),
                        s.indices.capacity(),
                        s.values.as_ptr(),
                        s.values.capacity(),
                    )
                })
                .collect()
        };
        // Rows differ in width, so first let every slot grow to the widest row it will hold (a slot
        // takes every 8th sample); from then on nothing may reallocate.
        let widest: Vec<usize> = (0..8)
            .map(|slot| {
                samples[slot..]
                    .iter()
                    .step_by(8)
                    .map(|s| s.indices.len())
                    .max()
                    .unwrap()
            })
            .collect();
        for (slot, &n) in widest.iter().enumerate() {
            let s = &mut w.slots[slot].sample;
            s.indices.reserve(n);
            s.values.reserve(n);
        }
        let before = buffers(&w);
        for (i, s) in samples[8..].iter().enumerate() {
            let alpha = 10.0 + i as f64;
            let (old, old_alpha) = w.oldest_if_full().unwrap();
            let (expected, expected_alpha) = reference.push(s.clone(), alpha).unwrap();
            assert_eq!(old.indices, &expected.indices[..]);
            assert_eq!(old.values, &expected.values[..]);
            assert_eq!((old.label, old_alpha), (expected.label, expected_alpha));
            assert_eq!(old.weight, expected.weight.unwrap_or(1.0));
            let at = w.push_ref(s.view(), alpha);
            assert_eq!(w.slot(at).sample, *s);
            assert_eq!(w.alphas()[at], alpha);
        }
        assert_eq!(buffers(&w), before, "no slot reallocated");
        assert_eq!(contents(&w), contents(&reference));
        assert_eq!(w.dim(), reference.dim());
        for i in 0..w.len() {
            assert_eq!(w.slot(i), reference.slot(i));
        }
        // After a clear the slots come back from the spare list, buffers and all.
        let mut kept: Vec<_> = before.clone();
        w.clear();
        assert!(w.is_empty() && w.oldest_if_full().is_none());
        for (i, s) in samples[..8].iter().enumerate() {
            w.push_ref(s.view(), i as f64);
        }
        let mut after = buffers(&w);
        kept.sort();
        after.sort();
        assert_eq!(after, kept, "a cleared window refills its old slots");
        assert_eq!(
            contents(&w),
            contents(&Window::from_oldest_first(
                8,
                samples[..8].iter().cloned().zip((0..8).map(f64::from))
            ))
        );
    }
}
