//! An SDIHT learner as one member of a grid that shares one window's samples
//! ([`crate::learner::auto::shared`]): the window is lent to one member at a time with that member's
//! own duals ([`StreamSdiht::lend`], [`StreamSdiht::park`]). The member holding it (the served one)
//! inserts as a single learner does, bit for bit; the others, before that insert, take the samples it
//! will evict out of their `z` ([`StreamSdiht::evict_parked`]) and after it admit the new rows with dual
//! 0 ([`StreamSdiht::admit_parked`]), left to their block steps: no prediction and no warm start per
//! member, so an insert costs one learner's work plus the evictions.
//!
//! **Memory.** A parked member keeps its duals, its dense `z` and its `w` sparse (the values on its
//! support); the dense `w`, the block step's trial `w` and the other d-long buffers travel with the
//! window in one [`Scratch`] for the grid, so a grid of m members holds m + 3 dense vectors of d
//! entries (each member's `z`; `w`, trial `w`, the warm start's `dz`), not 3m + 1.

use super::{remove_contribution, StreamSdiht, EVICT_PREFETCH_ROWS_AHEAD};
use crate::ring::Window;
use crate::sample::SampleSet;
use crate::solver::objective::CertificateScratch;
use crate::sparse::{grow_dense, prefetch, zero_dense};

/// The buffers a grid's members pass along with the window: one set for the grid, not one per member
/// (the dense ones are d long). The dense `w` and the block step's trial `w` are all zero here: the
/// member that holds them keeps its model in them, a parked member keeps its `w` sparse (its values
/// on its support), so a grid holds two dense `w`s, not two per member.
#[derive(Debug, Default)]
pub struct Scratch {
    dz: Vec<f64>,
    certificate: CertificateScratch,
    projected: Vec<f64>,
    w: Vec<f64>,
    trial_w: Vec<f64>,
}

impl StreamSdiht {
    /// Takes the grid's window, lending it this member's duals (parked here meanwhile), and refits
    /// nothing: the member's `z`, `w` and sums are over exactly these samples with these duals.
    pub fn lend(&mut self, window: &mut Window, scratch: &mut Scratch) {
        std::mem::swap(&mut self.core.window, window);
        self.core.window.swap_alphas(&mut self.parked);
        self.swap_scratch(scratch);
        self.unpark_w();
    }

    /// Gives the grid's window back into `window`, keeping this member's duals parked here.
    pub fn park(&mut self, window: &mut Window, scratch: &mut Scratch) {
        self.park_w();
        self.core.window.swap_alphas(&mut self.parked);
        std::mem::swap(&mut self.core.window, window);
        self.swap_scratch(scratch);
    }

    /// Keeps `w` sparse while parked: its values on the support into `parked_w`, and the dense `w`
    /// and trial `w` zeroed (O(k): each is zero outside its support) for [`Scratch`] to take. The
    /// trial support stays: it only speeds the next threshold up, and the zeroed trial `w` is zero
    /// outside it.
    fn park_w(&mut self) {
        let it = &mut self.it;
        self.parked_w.clear();
        for &j in &it.support {
            self.parked_w
                .push(std::mem::replace(&mut it.w[j as usize], 0.0));
        }
        for &j in &it.trial_support {
            if let Some(v) = it.trial_w.get_mut(j as usize) {
                *v = 0.0;
            }
        }
    }

    /// The dense `w` back from `parked_w` into the lent buffers, grown to `z`'s length (as
    /// `DualIterate::ensure_dim` grows them): the same values, bit for bit.
    fn unpark_w(&mut self) {
        let it = &mut self.it;
        let d = it.z.len();
        grow_dense(&mut it.w, d);
        grow_dense(&mut it.trial_w, d);
        for (&j, &v) in it.support.iter().zip(&self.parked_w) {
            it.w[j as usize] = v;
        }
    }

    /// Exchanges the buffers only a running learner uses (the warm start's dense `dz`, zero between
    /// inserts; the certificate's scratch; the projected duals) with `scratch`.
    fn swap_scratch(&mut self, scratch: &mut Scratch) {
        std::mem::swap(&mut self.dz, &mut scratch.dz);
        std::mem::swap(&mut self.certificate_scratch, &mut scratch.certificate);
        std::mem::swap(&mut self.projected, &mut scratch.projected);
        std::mem::swap(&mut self.it.w, &mut scratch.w);
        std::mem::swap(&mut self.it.trial_w, &mut scratch.trial_w);
    }

    /// This member's duals while the window is lent to another (storage order of the window).
    pub fn parked(&self) -> &[f64] {
        &self.parked
    }

    /// A member that does not hold the window, before the holder's insert overwrites the slots
    /// `evicted` (oldest first) with rows of up to `dim` features: their contributions leave `z` and
    /// the sums (a slot whose parked dual is 0 contributes nothing), or everything restarts at 0 when
    /// the insert turns the whole window over (`turnover`).
    pub fn evict_parked(&mut self, window: &Window, evicted: &[usize], turnover: bool, dim: usize) {
        // `z` and the mask only: the dense `w`s are the grid's, grown when lent (`unpark_w`).
        let d = dim.max(window.dim());
        grow_dense(&mut self.it.z, d);
        if self.it.coord_mask.len() < d.div_ceil(64) {
            self.it.coord_mask.resize(d.div_ceil(64), 0);
        }
        let loss = self.core.config.loss;
        if turnover {
            zero_dense(&mut self.it.z);
            self.it.conj_sum = 0.0;
            self.it.alpha_sum = 0.0;
            self.parked.iter_mut().for_each(|a| *a = 0.0);
        } else {
            for (n, &at) in evicted.iter().enumerate() {
                // The targets in `z` of a slot a few ahead, as the holder's insert prefetches its
                // own: each row's are random in a d-long vector.
                if let Some(&ahead) = evicted.get(n + EVICT_PREFETCH_ROWS_AHEAD) {
                    if self.parked[ahead] != 0.0 {
                        for &j in window.row(ahead).indices {
                            prefetch(&self.it.z, j as usize);
                        }
                    }
                }
                let alpha = std::mem::replace(&mut self.parked[at], 0.0);
                if alpha != 0.0 {
                    remove_contribution(&loss, window.row(at), alpha, &mut self.it);
                }
            }
        }
        self.rethreshold_due = true;
    }

    /// After the holder's insert stored its rows at `positions` of a window of `len` samples: they
    /// enter this member with dual 0 (feasible for every loss, nothing added to `z`), for its block
    /// steps to raise; the model is re-thresholded (`N` changed) when the member next runs.
    pub fn admit_parked(&mut self, len: usize, positions: &[usize]) {
        self.parked.resize(len, 0.0);
        for &at in positions {
            self.parked[at] = 0.0;
        }
        self.rethreshold_due = true;
        self.core.inserted();
    }

    /// `w` and `D` from `z` over the lent window, if an insert changed them while the window was
    /// elsewhere.
    pub fn settle_model(&mut self) {
        if std::mem::take(&mut self.rethreshold_due) {
            let c = &self.core.config;
            self.it.rethreshold(self.core.window.mass(), c.lambda, c.k);
        }
    }

    /// Where the last insert of this learner stored its rows, in arrival order.
    pub fn last_positions(&self) -> &[usize] {
        &self.new_positions
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
            window.alphas_mut()[i] = if projected.is_finite() {
                projected
            } else {
                0.0
            };
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
        // The defaults' squared loss fits an intercept; this test was written without one.
        c.intercept = false;
        c.loss = Loss::new(LossKind::Logistic, 0.25).unwrap();
        (c.k, c.lambda, c.blocks, c.intercept) = (4, lambda, 3, true);
        c
    }

    /// A parked member follows the holder's inserts: after evictions and admissions its `z` and sums
    /// are those its duals give over the window (a recompute changes them only by rounding), the new
    /// rows' duals are 0, and its steps keep weak duality.
    #[test]
    fn a_parked_member_follows_the_holders_inserts() {
        let data = crate::synth::sparse_stream(900, 60, 4, 8, 0.1, true, 5);
        let capacity = 150;
        let mut holder = StreamSdiht::new(config(1e-2), capacity, None);
        let mut member = StreamSdiht::new(config(1e-3), capacity, None);
        let mut shared = Window::new(capacity);
        let mut scratch = Scratch::default();
        holder.lend(&mut shared, &mut scratch);
        let mut chunks: Vec<&[crate::sample::Sample]> = data.samples[..600].chunks(40).collect();
        chunks.push(&data.samples[600..]);
        for chunk in chunks {
            let block = crate::sample::SampleBlock::from_samples(chunk);
            let pushes = block.len().min(capacity);
            let evicted: Vec<usize> = holder.window().evicted_by(pushes).collect();
            member.evict_parked(
                holder.window(),
                &evicted,
                block.len() >= capacity,
                block.dim(),
            );
            holder.insert(&block);
            let positions = holder.last_positions().to_vec();
            member.admit_parked(holder.window().len(), &positions);
            assert!(positions.iter().all(|&at| member.parked()[at] == 0.0));
            for _ in 0..4 {
                holder.step();
                holder.park(&mut shared, &mut scratch);
                member.lend(&mut shared, &mut scratch);
                member.settle_model();
                member.step();
                let (z, conj) = (member.it.z.clone(), member.it.conj_sum);
                member.recompute();
                for (a, b) in z.iter().zip(&member.it.z) {
                    assert!((a - b).abs() <= 1e-9 * (1.0 + b.abs()), "{a} vs {b}");
                }
                assert!((conj - member.it.conj_sum).abs() <= 1e-9 * (1.0 + conj.abs()));
                let c = member.certify().model.certificate;
                assert!(
                    c.dual <= c.primal + 1e-12 * c.primal.abs().max(1.0),
                    "{c:?}"
                );
                member.park(&mut shared, &mut scratch);
                holder.lend(&mut shared, &mut scratch);
            }
        }
    }
}
