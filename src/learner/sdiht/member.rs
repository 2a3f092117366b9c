//! An SDIHT learner as one member of a grid that shares one window's samples
//! ([`crate::learner::auto::shared`]): the window is lent to one member at a time with that member's
//! own duals ([`StreamSdiht::lend`], [`StreamSdiht::park`]), and an insert is split in two so the
//! samples are stored once for every member: [`StreamSdiht::predict_and_evict`] (each member, before
//! the window changes) and [`StreamSdiht::enter_new_duals`] (each member, after the new rows are
//! stored). The arithmetic is the single learner's insert in the same order per member; only the
//! storage of the rows is shared.

use super::{remove_contribution, StreamSdiht};
use crate::ring::Window;
use crate::sample::{SampleBlock, SampleSet};
use crate::sparse::{masked_dot, zero_dense};

impl StreamSdiht {
    /// Takes the grid's window, lending it this member's duals (parked here meanwhile), and refits
    /// nothing: the member's `z`, `w` and sums are over exactly these samples with these duals.
    pub fn lend(&mut self, window: &mut Window) {
        std::mem::swap(&mut self.core.window, window);
        self.core.window.swap_alphas(&mut self.parked);
    }

    /// Gives the grid's window back into `window`, keeping this member's duals parked here.
    pub fn park(&mut self, window: &mut Window) {
        self.core.window.swap_alphas(&mut self.parked);
        std::mem::swap(&mut self.core.window, window);
    }

    /// This member's duals while the window is lent to another (storage order of the window).
    pub fn parked(&self) -> &[f64] {
        &self.parked
    }

    /// The first half of an insert of `batches` (the window lent, not yet changed): every sample
    /// predicted by the model before the call (its progressive loss) and its warm-start dual kept for
    /// [`StreamSdiht::enter_new_duals`] (only the newest `capacity`, as in the single learner); the
    /// samples at `evicted` (the slots the window's pushes will overwrite, oldest first) taken out
    /// of `z` and the sums, or everything reset when the whole window turns over.
    pub fn predict_and_evict(&mut self, batches: &[&SampleBlock], evicted: &[usize]) {
        let total: usize = batches.iter().map(|b| b.len()).sum();
        self.new_alpha.clear();
        if total == 0 {
            return;
        }
        let loss = self.core.config.loss;
        let capacity = self.core.window.capacity();
        let dim = batches.iter().map(|b| b.dim()).max().unwrap_or(0);
        self.it.ensure_dim(dim);
        let passing = total.saturating_sub(capacity);
        if total >= capacity {
            zero_dense(&mut self.it.z);
            self.it.conj_sum = 0.0;
            self.it.alpha_sum = 0.0;
        } else {
            for &at in evicted {
                let (row, alpha) = (self.core.window.row(at), self.core.window.alphas()[at]);
                remove_contribution(&loss, row, alpha, &mut self.it);
            }
        }
        let b = self.intercept();
        for &j in &self.it.support {
            self.it.coord_mask[j as usize / 64] |= 1 << (j % 64);
        }
        for (seq, sample) in batches.iter().flat_map(|b| b.iter()).enumerate() {
            let r = sample.row();
            let l = loss.sample(r.label, r.weight);
            let u = masked_dot(r.indices, r.values, &self.it.w, &self.it.coord_mask) + b;
            let (value, alpha) = l.value_and_dual_of_margin(u);
            self.core.predicted(value);
            if seq >= passing {
                self.new_alpha.push(alpha);
            }
        }
        for &j in &self.it.support {
            self.it.coord_mask[j as usize / 64] = 0;
        }
    }

    /// The second half (the window lent, the new rows stored at `positions`, in arrival order): their
    /// duals set to the ones [`StreamSdiht::predict_and_evict`] kept and entered into `z` by the warm
    /// start, as the single learner's insert does.
    pub fn enter_new_duals(&mut self, positions: &[usize]) {
        if self.new_alpha.is_empty() {
            return;
        }
        debug_assert_eq!(positions.len(), self.new_alpha.len());
        self.new_positions.clear();
        self.new_positions.extend_from_slice(positions);
        let alphas = self.core.window.alphas_mut();
        for (&at, &alpha) in positions.iter().zip(&self.new_alpha) {
            alphas[at] = alpha;
        }
        self.enter_warm_starts();
        self.core.inserted();
    }

    /// Sets this member's duals (the window lent) to `alphas` (storage order), each projected onto
    /// its domain, and rebuilds `z`, `w` and the sums from them: how a grid member starts from
    /// another member's state (scaled to its lambda).
    pub fn restart_from(&mut self, alphas: impl Iterator<Item = f64>) {
        let loss = self.core.config.loss;
        let window = &mut self.core.window;
        for (i, alpha) in alphas.enumerate().take(window.len()) {
            let r = window.row(i);
            let projected = loss.sample(r.label, r.weight).project(alpha);
            window.alphas_mut()[i] = if projected.is_finite() { projected } else { 0.0 };
        }
        self.recompute();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learner::params::LearnerConfig;
    use crate::learner::StreamingLearner;
    use crate::loss::{Loss, LossKind};

    fn config(lambda: f64) -> LearnerConfig {
        let mut c = crate::Config::defaults().learners.remove(0);
        c.loss = Loss::new(LossKind::Logistic, 0.25).unwrap();
        (c.k, c.lambda, c.blocks, c.intercept) = (4, lambda, 3, true);
        c
    }

    /// Two members sharing one window, fed by the split insert, hold exactly the duals, `z` and model
    /// of two single learners fed the same batches, step for step.
    #[test]
    fn a_member_on_a_shared_window_matches_a_single_learner_bit_for_bit() {
        let data = crate::synth::sparse_stream(700, 60, 4, 8, 0.1, true, 5);
        let capacity = 150;
        let lambdas = [1e-2, 1e-3];
        let mut singles: Vec<StreamSdiht> = lambdas
            .iter()
            .map(|&l| StreamSdiht::new(config(l), capacity, None))
            .collect();
        let mut members: Vec<StreamSdiht> = lambdas
            .iter()
            .map(|&l| StreamSdiht::new(config(l), capacity, None))
            .collect();
        let mut shared = Window::new(capacity);
        // Batches of 40, then one larger than the window (it turns over within the call).
        let mut chunks: Vec<&[crate::sample::Sample]> = data.samples[..400].chunks(40).collect();
        chunks.push(&data.samples[400..]);
        for (round, chunk) in chunks.into_iter().enumerate() {
            let block = SampleBlock::from_samples(chunk);
            for s in &mut singles {
                s.insert(&block);
            }
            let total = block.len();
            let pushes = total.min(capacity);
            let evicted: Vec<usize> = shared.evicted_by(pushes).collect();
            for m in &mut members {
                m.lend(&mut shared);
                m.predict_and_evict(&[&block], &evicted);
                m.park(&mut shared);
            }
            if total >= capacity {
                shared.clear();
            }
            let positions: Vec<usize> = block
                .iter()
                .skip(total - pushes)
                .map(|s| shared.push_ref(s, 0.0))
                .collect();
            for m in &mut members {
                m.lend(&mut shared);
                m.enter_new_duals(&positions);
                m.park(&mut shared);
            }
            for (s, m) in singles.iter_mut().zip(&mut members) {
                for _ in 0..(round % 3 + 1) {
                    s.step();
                    m.lend(&mut shared);
                    m.step();
                    m.park(&mut shared);
                }
                m.lend(&mut shared);
                assert_eq!(s.core.window.alphas(), m.core.window.alphas());
                assert_eq!(s.it.z, m.it.z, "round {round}");
                assert_eq!(s.weights(), m.weights());
                let (a, b) = (s.certify(), m.certify());
                assert_eq!(a.model, b.model);
                assert_eq!(a.stats, b.stats);
                m.park(&mut shared);
            }
        }
    }
}
