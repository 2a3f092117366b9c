//! The warm start of an insert ([`super`]'s module docs): the new samples' duals `alpha_i =
//! P_F(l'(w.x_i + b))` enter `z` scaled by the largest `t` in `1, 1/2, ...` that does not lower `D`,
//! each trial `t` costing O(batch) instead of O(d) (the batch's coordinates gathered once, `H_k(z + t
//! dz)` from the top k outside them and the entries of the batch that can compete).

use super::StreamSdiht;
use crate::sample::SampleSet;
use crate::solver::sdiht::MAX_BACKTRACK;
use crate::sparse::{
    extend_with_top_k_candidates, grow_dense, prefetch, top_k_indices, top_k_of_pairs,
};

/// How many rows ahead the warm start's `dz` scatter prefetches its targets: far enough for the misses to
/// arrive in time, near enough that they are still cached when used.
const PREFETCH_ROWS_AHEAD: usize = 2;

/// How many coordinates ahead the warm start's gather of `z` and `dz` over the batch's coordinates
/// prefetches.
const GATHER_PREFETCH_AHEAD: usize = 16;

/// What every trial `t` of one warm start shares: `N`, `lambda`, `lambda N`, `k`, and the smallest
/// `|z_j|` of the top k outside the batch's coordinates (0 with fewer than k there).
#[derive(Clone, Copy)]
struct Trials {
    n: f64,
    lambda: f64,
    lambda_n: f64,
    k: usize,
    floor: f64,
}

impl StreamSdiht {
    /// Adds the new samples' warm-start duals `t alpha_i` to `z`, with `t` the largest of `1, 1/2, ...`
    /// that does not make `D` worse than `t = 0` (all of `0`, `alpha_i` are in `F`, so `t alpha_i` is).
    ///
    /// Why the safeguard: `alpha_i = l'(w.x_i)` is optimal for the *current* `w`, but adding a batch that
    /// is large next to the window moves `w~` by `-sum alpha_i x_i / (lambda N)`; with a poor model and a
    /// small `lambda` that Picard-like step overshoots and compounds from batch to batch. Backtracking on
    /// `D` (as the block steps do) keeps every insertion an ascent step.
    pub(super) fn enter_warm_starts(&mut self) {
        let n = self.it.mass_total(self.core.window.mass());
        let lambda_n = self.lambda_n();
        let (k, lambda) = (self.core.config.k, self.core.config.lambda);
        self.scatter_new_duals();
        self.gather_batch_coords();
        let floor = self.top_outside_batch(k);
        let trials = Trials {
            n,
            lambda,
            lambda_n,
            k,
            floor,
        };
        let (floor, _) = self.warm_dual_at(&trials, 0.0);
        let mut t = 1.0;
        let mut accepted = None;
        for _ in 0..MAX_BACKTRACK {
            let trial = self.warm_dual_at(&trials, t);
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
                self.warm_dual_at(&trials, 0.0)
            }
        };
        self.adopt_warm_start(t, dual, conj_new, lambda_n);
    }

    /// `dz = sum_new alpha_i x_i`, marking the batch's coordinates C in the mask. Each row's 40-odd
    /// targets are random in an 8 MiB vector: the entries of the row two ahead are prefetched, so
    /// their cache misses overlap this row's instead of each stalling in turn (intake 1.35-1.5x
    /// faster at 100k-300k samples per call, `examples/learner_insert.rs`).
    fn scatter_new_duals(&mut self) {
        let d = self.it.z.len();
        grow_dense(&mut self.dz, d);
        for (n, (&at, &alpha)) in self.new_positions.iter().zip(&self.new_alpha).enumerate() {
            if let Some(&ahead) = self.new_positions.get(n + PREFETCH_ROWS_AHEAD) {
                for &j in self.core.window.row(ahead).indices {
                    prefetch(&self.dz, j as usize);
                }
            }
            let r = self.core.window.row(at);
            for (&j, &v) in r.indices.iter().zip(r.values) {
                self.it.coord_mask[j as usize / 64] |= 1 << (j % 64);
                self.dz[j as usize] += alpha * v;
            }
        }
    }

    /// C in ascending order, read off the mask (d/64 words), and contiguous copies of `z` and `dz` on
    /// it; `z`, `dz` and the mask are cleared on C. The loops over C then sweep `z` and `dz` front to
    /// back, which the hardware prefetches, instead of jumping at random — a large batch touches most
    /// of the d coordinates.
    fn gather_batch_coords(&mut self) {
        self.batch_coords.clear();
        for (word_index, &word) in self.it.coord_mask.iter().enumerate() {
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
                prefetch(&self.it.z, ahead as usize);
                prefetch(&self.dz, ahead as usize);
            }
            let j = j as usize;
            self.z_on_batch.push(self.it.z[j]);
            self.dz_on_batch.push(self.dz[j]);
            self.it.z[j] = 0.0;
            self.dz[j] = 0.0;
            self.it.coord_mask[j / 64] = 0;
        }
    }

    /// The top k of `z` outside C into `self.top_outside`, and the floor below which no entry of C can
    /// be kept. Every trial keeps k of (top_outside ∪ C): with k entries outside, none of C below the
    /// smallest of them can be kept (it loses to each of the k), nor below the k-th largest of C's
    /// chunk maxima, so only C's entries reaching both are handed to the heap — a few hundred of a
    /// large batch's |C| (`sparse::extend_with_top_k_candidates`). The kept set is the same, ties
    /// included.
    fn top_outside_batch(&mut self, k: usize) -> f64 {
        let outside = top_k_indices(&self.it.z, k, &mut self.it.threshold);
        self.top_outside.clear();
        self.top_outside
            .extend(outside.iter().map(|&j| (j, self.it.z[j as usize])));
        if self.top_outside.len() == k {
            self.top_outside
                .iter()
                .map(|&(_, v)| v.abs())
                .fold(f64::INFINITY, f64::min)
        } else {
            0.0
        }
    }

    /// `sum l*(t alpha_i)` over the new samples.
    fn warm_conjugate_at(&self, t: f64) -> f64 {
        let loss = self.core.config.loss;
        self.new_positions
            .iter()
            .zip(&self.new_alpha)
            .map(|(&at, &a)| {
                let r = self.core.window.row(at);
                loss.sample(r.label, r.weight).conjugate(t * a)
            })
            .sum::<f64>()
    }

    /// D at `alpha + t alpha_new`, with that `sum l*(t alpha_i)`; leaves `H_k(z + t dz)` in
    /// `self.trial_support` / `self.trial_values` (unscaled, ascending index order).
    fn warm_dual_at(&mut self, trials: &Trials, t: f64) -> (f64, f64) {
        let Trials {
            n,
            lambda,
            lambda_n,
            k,
            floor,
        } = *trials;
        self.candidates.clear();
        self.candidates.extend_from_slice(&self.top_outside);
        extend_with_top_k_candidates(
            &self.batch_coords,
            &self.z_on_batch,
            &self.dz_on_batch,
            t,
            k,
            floor,
            &mut self.candidates,
            &mut self.it.threshold,
        );
        let candidates = self.candidates.iter().copied();
        let kept = top_k_of_pairs(candidates, k, &mut self.it.threshold);
        self.trial_support.clear();
        self.trial_values.clear();
        let mut sq_norm = 0.0;
        for &(j, v) in kept {
            self.trial_support.push(j);
            self.trial_values.push(v);
            let w = v * (-1.0 / lambda_n);
            sq_norm += w * w;
        }
        let conj_new = self.warm_conjugate_at(t);
        (
            -(self.it.conj_sum + self.it.remote_conj + conj_new) / n - 0.5 * lambda * sq_norm,
            conj_new,
        )
    }

    /// Adopts `t`: the duals, `z + t dz` on C, and the last trial's threshold as `w`, with its `D`.
    fn adopt_warm_start(&mut self, t: f64, dual: f64, conj_new: f64, lambda_n: f64) {
        for (&at, &a) in self.new_positions.iter().zip(&self.new_alpha) {
            self.core.window.alphas_mut()[at] = t * a;
            self.it.alpha_sum += t * a;
        }
        self.it.conj_sum += conj_new;
        for (m, &j) in self.batch_coords.iter().enumerate() {
            self.it.z[j as usize] = self.z_on_batch[m] + t * self.dz_on_batch[m];
        }
        for &j in &self.it.support {
            self.it.w[j as usize] = 0.0;
        }
        let scale = -1.0 / lambda_n;
        for (&j, &v) in self.trial_support.iter().zip(&self.trial_values) {
            self.it.w[j as usize] = v * scale;
        }
        std::mem::swap(&mut self.it.support, &mut self.trial_support);
        self.it.dual = dual;
    }
}
