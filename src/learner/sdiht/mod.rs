//! SDIHT on a sliding window (`solver = "sdiht"`): the streaming adapter of [`crate::solver::sdiht`].
//!
//! State as in the offline SDIHT: duals `alpha_i` stored next to their samples in the window, the
//! unscaled sum `z = sum_i alpha_i x_i` over the window, and `w = H_k(-z / (lambda N))` (dual-iht.md
//! eq. 4.4 and S2.2) with `N` the current window size — keeping `z` unscaled makes a change of `N` free
//! ([`DualIterate`]). A new sample enters with the warm-start dual `alpha_i = P_F(l'(w.x_i + b))` (Thm 1(b):
//! the optimal dual for the current primal); a batch of them is scaled by the largest `t` in
//! `1, 1/2, ...` that does not lower `D` (`warm.rs` says why); an evicted sample's
//! `alpha_i x_i` is subtracted from `z`. Every `recompute_every` steps `z` and `sum_i l_i*(alpha_i)` are
//! rebuilt from the window so rounding cannot drift. A step is the offline solver's block step
//! ([`DualIterate::block_step`], the same code, with the configured step rule) on a random one of
//! `blocks` contiguous blocks of the window. Idling follows [`LearnerCore::idle`].
//!
//! **Intercept** (`intercept = true`, the default for the classification losses): `b` is unpenalised,
//! never thresholded, and added to every margin. Its dual constraint `sum alpha = 0` is broken by warm
//! starts and evictions; the iterate tracks `sum alpha`, and every block step shifts its block's duals
//! so the window's sum returns to 0 (the coordinate rule of [`crate::solver::sdiht`]); `b` is set to
//! its optimum for the current `w` over the window at every certificate. The certificate is `P(w, b)` against `D` at the window's duals projected
//! exactly onto `sum alpha = 0` and at the dual point of `(w, b)` (also projected): both feasible.

mod member;
pub use member::Scratch;
mod warm;

use super::global::{replace_remote, CutProgress, PartialSums, RemoteSums};
use super::{LearnerCore, LearnerSnapshot, LearnerState, StepOutcome, StreamingLearner};
use crate::learner::params::LearnerConfig;
use crate::model::Model;
use crate::sample::{Row, SampleBlock, SampleRef, SampleSet};
use crate::solver::driver::SparseModel;
use crate::solver::objective::{
    conjugate_sum_of_rows, fused_certificate_with_intercept, masked_margins_into,
    project_rows_with_sum, CertificateScratch,
};
use crate::solver::sdiht::intercept::newton_intercept;
use crate::solver::sdiht::{prefetch_row, theory_step, BlockStep, DualIterate};
use crate::solver::{Certificate, ModelView, StepRule};
use crate::sparse::{grow_dense, masked_dot, prefetch, sparse_axpy, zero_dense};

/// How many rows ahead an insert prefetches the samples leaving the window (their targets in `z`;
/// twice that, the rows themselves).
const EVICT_PREFETCH_ROWS_AHEAD: usize = 4;
/// How many rows ahead a cut's part fetches its rows' targets in `cut_z`, and (twice that) the rows.
const CUT_PREFETCH_ROWS_AHEAD: usize = 4;

/// SDIHT over a sliding window (see the module docs).
#[derive(Debug)]
pub struct StreamSdiht {
    core: LearnerCore,
    /// `z`, `sum l*`, `D`, `w` and its support: the offline solver's iterate, over the window.
    it: DualIterate,
    steps_since_recompute: usize,
    certificate_scratch: CertificateScratch,
    /// The window rows of the current block step.
    block: Vec<usize>,
    new_positions: Vec<usize>,
    new_alpha: Vec<f64>,
    /// The new samples' `sum alpha_i x_i` while a warm start collects it; all zero between inserts.
    dz: Vec<f64>,
    /// The coordinates a batch touches, each once, so the warm start costs O(batch), not O(d), per trial.
    batch_coords: Vec<u32>,
    /// `z` and `dz` on `batch_coords` (parallel), contiguous for the backtracking trials.
    z_on_batch: Vec<f64>,
    dz_on_batch: Vec<f64>,
    /// The top k of `z` outside `batch_coords`, `(index, z_j)`.
    top_outside: Vec<(u32, f64)>,
    /// A trial's candidates for `H_k(z + t dz)`: `top_outside` and the entries of C that can compete.
    candidates: Vec<(u32, f64)>,
    /// A trial's `H_k(z + t dz)`: support and unscaled values, parallel.
    trial_support: Vec<u32>,
    trial_values: Vec<f64>,
    /// The certificate's dual points with an intercept (projected copies).
    projected: Vec<f64>,
    /// Block steps since `b` was last refitted (it is, once per pass over the window's blocks).
    steps_since_intercept: usize,
    /// In a cluster's global model: CoCoA's `sigma'` (the nodes stepping at once; 1 alone) and the
    /// model of the latest complete cut, which is what this learner publishes
    /// ([`crate::learner::global`]).
    sigma: f64,
    global: Option<Model>,
    /// `b` is the cluster's (the last cut's proposer's), not refitted here ([`RemoteSums::intercept`]).
    follows_intercept: bool,
    /// A cut's dense `w` and `sum alpha_i x_i` while this node's partial sums are taken; all zero
    /// between cuts.
    cut_w: Vec<f64>,
    cut_z: Vec<f64>,
    /// The cut model's support within `cut_w` (the indices this node has seen).
    cut_support: Vec<u32>,
    /// `(label, weight)` of every window row while a part is taken.
    cut_rows: Vec<(f64, f64)>,
    /// A member of a grid sharing one window ([`member`]): its duals while another member holds the
    /// window; empty otherwise.
    parked: Vec<f64>,
    /// A parked member's `w` on its support (the dense `w` is lent with the window; [`member`]).
    parked_w: Vec<f64>,
    /// A parked member's `z` or `N` changed since `w` was thresholded ([`member`]).
    rethreshold_due: bool,
    /// The change count (`stats.mutations`) when a cut's remote part was last installed: a cut that
    /// brings the same remote part with no change here since leaves `z` as it is, and the pass over
    /// the window that rebuilds it is skipped (an idle cluster keeps cutting).
    remote_installed_at: Option<u64>,
    /// Passes over the window that installing a remote part took (tests).
    remote_recomputes: u64,
    /// Whether the cluster's cuts still improve its certificate: a changed remote part sets the
    /// learner stepping again only while they do or when it brings new data ([`CutProgress`]).
    cut_progress: CutProgress,
}

impl StreamSdiht {
    /// [`StreamingLearner::insert_batches`] over any sequence of `total` rows (each with the score
    /// this learner served for it, for late labels) whose features lie below `dim`: a shared grid
    /// ([`crate::learner::auto::shared`]) inserts the rows of its batches that are not held out
    /// without copying them.
    pub(crate) fn insert_rows<'a>(
        &mut self,
        total: usize,
        dim: usize,
        rows: impl Iterator<Item = (SampleRef<'a>, Option<f64>)>,
    ) {
        if total == 0 {
            return;
        }
        let loss = self.core.config.loss;
        let capacity = self.core.window.capacity();
        self.it.ensure_dim(dim);
        // Only the newest `capacity` samples of this call can still be in the window afterwards; the
        // others would enter and leave within the call, touching nothing but the progressive loss. So
        // they are only predicted, and when the whole window turns over, `z` and `sum l*` restart
        // from zero instead of subtracting every old sample (exact, and cheaper under a backlog).
        let passing = total.saturating_sub(capacity);
        if total >= capacity {
            self.core.window.clear();
            zero_dense(&mut self.it.z);
            self.it.conj_sum = 0.0;
            self.it.alpha_sum = 0.0;
        }
        let b = self.intercept();
        // Every sample is predicted with the model as it was before this call. `w` has at most k
        // nonzeros spread over d coordinates, so the dot product tests a bit mask of the support (d/8
        // bytes, cache resident) before reading `w` (8d bytes, random access).
        for &j in &self.it.support {
            self.it.coord_mask[j as usize / 64] |= 1 << (j % 64);
        }
        self.new_positions.clear();
        self.new_alpha.clear();
        for (seq, (sample, served)) in rows.take(total).enumerate() {
            let r = sample.row();
            let l = loss.sample(r.label, r.weight);
            let u = masked_dot(r.indices, r.values, &self.it.w, &self.it.coord_mask) + b;
            let (value, alpha) = l.value_and_dual_of_margin(u);
            self.core
                .predicted_served(r.label, r.weight, u, value, served);
            if seq < passing {
                continue;
            }
            // The oldest sample leaves before its slot takes the new row's features. The samples
            // leaving next are prefetched (their rows, then their targets in `z`), as the block steps
            // do: the oldest slots are cold, each in its own allocation.
            if let Some(r) = self.core.window.oldest_ahead(2 * EVICT_PREFETCH_ROWS_AHEAD) {
                prefetch_row(r);
            }
            if let Some(r) = self.core.window.oldest_ahead(EVICT_PREFETCH_ROWS_AHEAD) {
                for &j in r.indices {
                    prefetch(&self.it.z, j as usize);
                }
            }
            if let Some((old, old_alpha)) = self.core.window.oldest_if_full() {
                remove_contribution(&loss, old, old_alpha, &mut self.it);
            }
            let at = self.core.window.push_ref(sample, alpha);
            self.new_positions.push(at);
            self.new_alpha.push(alpha);
        }
        for &j in &self.it.support {
            self.it.coord_mask[j as usize / 64] = 0;
        }
        self.enter_warm_starts();
        self.core.inserted();
    }

    /// A learner with an empty window, or resumed from `state`.
    pub fn new(
        config: LearnerConfig,
        capacity: usize,
        mut state: Option<LearnerState>,
    ) -> StreamSdiht {
        let core = LearnerCore::new(config, capacity, state.as_mut());
        let mut learner = StreamSdiht {
            core,
            it: DualIterate::new(0),
            steps_since_recompute: 0,
            certificate_scratch: CertificateScratch::default(),
            block: Vec::new(),
            new_positions: Vec::new(),
            new_alpha: Vec::new(),
            dz: Vec::new(),
            batch_coords: Vec::new(),
            z_on_batch: Vec::new(),
            dz_on_batch: Vec::new(),
            top_outside: Vec::new(),
            candidates: Vec::new(),
            trial_support: Vec::new(),
            trial_values: Vec::new(),
            projected: Vec::new(),
            steps_since_intercept: 0,
            sigma: 1.0,
            global: None,
            follows_intercept: false,
            remote_installed_at: None,
            cut_progress: CutProgress::default(),
            remote_recomputes: 0,
            cut_w: Vec::new(),
            cut_z: Vec::new(),
            cut_support: Vec::new(),
            cut_rows: Vec::new(),
            parked: Vec::new(),
            parked_w: Vec::new(),
            rethreshold_due: false,
        };
        if let Some(state) = state {
            learner.it.scale = state.scale;
            if learner.core.config.intercept && state.intercept.is_finite() {
                learner.it.intercept = state.intercept;
            }
            learner.recompute();
        }
        learner
    }

    /// The current primal weights (dense).
    pub fn weights(&self) -> &[f64] {
        &self.it.w
    }

    /// The model's intercept: 0 unless the config asks for one.
    pub fn intercept(&self) -> f64 {
        if self.core.config.intercept {
            self.it.intercept
        } else {
            0.0
        }
    }

    /// Sets `b` to its optimum for the current `w` over the window (the primal half of the
    /// alternation in [`crate::solver::sdiht`]'s module docs), when the config asks for an intercept;
    /// `true` when it did, leaving `w.x_i` of every window row in `projected`.
    fn refit_intercept(&mut self) -> bool {
        self.steps_since_intercept = 0;
        if !self.core.config.intercept || self.core.window.is_empty() || self.follows_intercept {
            return false;
        }
        let (window, it) = (&self.core.window, &mut self.it);
        masked_margins_into(
            window,
            &it.w,
            &it.support,
            &mut it.coord_mask,
            &mut self.projected,
        );
        let b = newton_intercept(&self.core.config.loss, &self.projected, it.intercept, |i| {
            let r = window.row(i);
            (r.label, r.weight)
        });
        if b.is_finite() {
            it.intercept = b;
        }
        true
    }

    /// Block updates rejected for a non-finite value (see [`DualIterate::numeric_faults`]).
    pub fn numeric_faults(&self) -> u64 {
        self.it.numeric_faults
    }

    fn lambda_n(&self) -> f64 {
        self.core.config.lambda * self.it.mass_total(self.core.window.mass())
    }

    /// Rebuilds `z` and the conjugate sum from the window (drift control), then `w` and `D`.
    fn recompute(&mut self) {
        let c = &self.core.config;
        self.it.recompute(&self.core.window, &c.loss, c.lambda, c.k);
        self.steps_since_recompute = 0;
    }
}

/// Takes a sample leaving the window out of `z = sum_i alpha_i x_i` and `sum_i l_i*(alpha_i)`.
fn remove_contribution(loss: &crate::loss::Loss, r: Row<'_>, alpha: f64, it: &mut DualIterate) {
    sparse_axpy(-alpha, r.indices, r.values, &mut it.z);
    it.conj_sum -= loss.sample(r.label, r.weight).conjugate(alpha);
    it.alpha_sum -= alpha;
}

impl StreamingLearner for StreamSdiht {
    fn core(&self) -> &LearnerCore {
        &self.core
    }

    fn insert_batches(&mut self, batches: &[&SampleBlock]) {
        let total: usize = batches.iter().map(|b| b.len()).sum();
        let dim = batches.iter().map(|b| b.dim()).max().unwrap_or(0);
        let slot = self.core.config.slot;
        let rows = batches
            .iter()
            .flat_map(|b| (0..b.len()).map(move |i| (b.get(i), b.served(i, slot))));
        self.insert_rows(total, dim, rows);
    }

    fn evict(&mut self, sample: Row<'_>, alpha: f64) {
        remove_contribution(&self.core.config.loss, sample, alpha, &mut self.it);
    }

    fn step(&mut self) -> StepOutcome {
        if let Some(idle) = self.core.begin_step(&mut self.block) {
            return StepOutcome::Idle(idle);
        }
        let c = &self.core.config;
        let step = BlockStep {
            loss: c.loss,
            lambda: c.lambda,
            k: c.k,
            step: c.step,
            intercept: c.intercept,
            theory_step: match c.step {
                StepRule::Theory => {
                    theory_step(&c.loss, self.core.blocks(), self.core.stats.steps as usize)
                }
                _ => 0.0,
            },
            sigma: self.sigma,
        };
        self.it
            .block_step(&mut self.core.window, &self.block, &step);
        self.core.stepped();
        self.steps_since_recompute += 1;
        if self.steps_since_recompute >= self.core.config.recompute_every {
            self.recompute();
        }
        self.steps_since_intercept += 1;
        if self.steps_since_intercept >= self.core.blocks() {
            self.refit_intercept();
        }
        StepOutcome::Stepped
    }

    /// `P(w)` against the larger of two feasible lower bounds, `D` at the dual iterate and `D` at the dual
    /// point of `w` itself, all three over the window from scratch (not from `z` or `conj_sum`), by
    /// [`fused_certificate_with_intercept`].
    fn certify(&mut self) -> LearnerSnapshot {
        if let Some(model) = &self.global {
            // The cut's certificate is over the union of the nodes' windows: this node's own would
            // certify the global `w` on its shard alone (and `b` is refitted by the steps).
            let model = model.clone();
            return self.core.certified(model);
        }
        let fresh_margins = self.refit_intercept();
        let (c, window) = (&self.core.config, &self.core.window);
        let b = self.intercept();
        let certificate = if window.is_empty() {
            Certificate::new(0.0, 0.0, 0)
        } else {
            // With an intercept both dual points are projected exactly onto `sum alpha = 0` (the
            // iterate's sum is 0 only after the block steps restored it, and to rounding).
            fused_certificate_with_intercept(
                window,
                &c.loss,
                c.lambda,
                c.k,
                (&self.it.w, &self.it.support, c.intercept.then_some(b)),
                Some(window.alphas()),
                fresh_margins.then_some(&self.projected[..]),
                &mut self.certificate_scratch,
            )
            .certificate(window.len())
        };
        let view = ModelView {
            weights: &self.it.w,
            support: &self.it.support,
            intercept: b,
        };
        let model = super::model_of(c, &SparseModel::from_view(view), certificate);
        let model = self.core.polished(model);
        self.core.certified_best(model)
    }

    fn state(&self) -> LearnerState {
        LearnerState {
            intercept: self.intercept(),
            ..self.core.state(self.it.scale, None)
        }
    }

    fn current_model(&mut self) -> Option<SparseModel> {
        self.cut_model()
    }

    fn cut_model(&self) -> Option<SparseModel> {
        Some(SparseModel::from_view(ModelView {
            weights: &self.it.w,
            support: &self.it.support,
            intercept: self.intercept(),
        }))
    }

    /// One pass over the window: margins at the cut's model for the loss sum, the duals (projected
    /// onto `sum alpha = 0` over this shard with an intercept, so the union of the shards' duals is
    /// feasible too) for `sum l*` and `z_n`.
    fn partial_sums(&mut self, at: &SparseModel) -> Option<PartialSums> {
        // The mass summed from the slots: the cut's `M` is the exact sum of the nodes' weights.
        self.core.window.refresh_mass();
        let (c, window) = (&self.core.config, &self.core.window);
        let d = window.dim().max(self.it.z.len());
        grow_dense(&mut self.cut_w, d);
        grow_dense(&mut self.cut_z, d);
        // Features this node never saw cannot reach a margin here.
        self.cut_support.clear();
        for (&j, &v) in at.support.iter().zip(&at.weights) {
            if let Some(w) = self.cut_w.get_mut(j as usize) {
                *w = v;
                self.cut_support.push(j);
            }
        }
        // `cut_w` is zero off `cut_support`: each margin tests the support's bit mask (d/8 bytes)
        // before reading `cut_w` (8d bytes), the same sums as the dense walk, bit for bit.
        masked_margins_into(
            window,
            &self.cut_w,
            &self.cut_support,
            &mut self.it.coord_mask,
            &mut self.projected,
        );
        // Each row's label and weight, read from its slot once for the passes below (the
        // projection's Newton passes read them again and again).
        self.cut_rows.clear();
        self.cut_rows.extend((0..window.len()).map(|i| {
            let r = window.row(i);
            (r.label, r.weight)
        }));
        let rows = &self.cut_rows;
        let loss_sum: f64 = self
            .projected
            .iter()
            .zip(rows)
            .map(|(&u, &(y, weight))| c.loss.sample(y, weight).value(u + at.intercept))
            .sum();
        for &j in &at.support {
            if let Some(w) = self.cut_w.get_mut(j as usize) {
                *w = 0.0;
            }
        }
        self.projected.clear();
        self.projected.extend_from_slice(window.alphas());
        if c.intercept {
            project_rows_with_sum(&c.loss, &mut self.projected, 0.0, |i| rows[i]);
        }
        let conj_sum = conjugate_sum_of_rows(&c.loss, &self.projected, |i| rows[i]);
        // Rows and their targets in `cut_z` (8 MiB at d = 2^20) fetched ahead, as the block steps
        // do: each slot is its own allocation, and each target a miss waited for in turn otherwise.
        let n = self.projected.len();
        for (i, &alpha) in self.projected.iter().enumerate() {
            if i + 2 * CUT_PREFETCH_ROWS_AHEAD < n {
                prefetch_row(window.row(i + 2 * CUT_PREFETCH_ROWS_AHEAD));
            }
            if i + CUT_PREFETCH_ROWS_AHEAD < n {
                for &j in window.row(i + CUT_PREFETCH_ROWS_AHEAD).indices {
                    prefetch(&self.cut_z, j as usize);
                }
            }
            let r = window.row(i);
            sparse_axpy(alpha, r.indices, r.values, &mut self.cut_z);
        }
        let mut z = Vec::new();
        for (j, v) in self.cut_z.iter_mut().enumerate() {
            if *v != 0.0 {
                z.push((j as u32, *v));
                *v = 0.0;
            }
        }
        Some(PartialSums {
            samples: window.len(),
            mass: window.mass(),
            loss_sum,
            conj_sum,
            z,
            seen: Some(self.core.stats.samples_seen),
        })
    }

    fn set_remote(&mut self, remote: &RemoteSums) {
        let sigma = remote.nodes.max(1) as f64;
        let intercept = match (remote.intercept, self.core.config.intercept) {
            (Some(b), true) => b,
            _ => self.it.intercept,
        };
        let context_same = sigma == self.sigma
            && remote.intercept.is_some() == self.follows_intercept
            && intercept.to_bits() == self.it.intercept.to_bits();
        self.sigma = sigma;
        self.follows_intercept = remote.intercept.is_some();
        self.it.intercept = intercept;
        let changed = replace_remote(&mut self.it, &remote.z, remote.mass, remote.conj_sum);
        let here = (self.core.stats.samples_seen, self.core.window.len());
        let data = remote.seen.map(|seen| ((seen, remote.samples), here));
        let step_on = self.cut_progress.record(data, remote.certificate);
        if !changed && context_same && self.remote_installed_at == Some(self.core.stats.mutations) {
            // The same remote part, and no step or insert since the last one was installed: `z` is
            // what the pass below would rebuild, bit for bit.
            return;
        }
        // A new local subproblem: the adaptive rule's step scale, learned against the previous one,
        // starts again at 1 (left as it was, it collapsed towards 0 on the other nodes' first changes
        // and every node stalled with its duals far from the fixed point).
        self.it.scale = 1.0;
        // `z` from the true duals: the damped steps since the last exchange moved it `sigma` times
        // their change (`BlockStep::sigma`); this is the next local subproblem's reference point.
        self.recompute();
        self.remote_recomputes += 1;
        self.remote_installed_at = Some(self.core.stats.mutations);
        if changed && step_on {
            // The local optimum moved with the other nodes' part: step again, while the cuts improve
            // or bring new data (`cut_progress`).
            self.core.inserted_since_certificate = true;
            self.core.steps_since_insert = 0;
        }
    }

    fn set_global(&mut self, model: Model) {
        // A cut that certifies the same model with the same certificate is not a new publication (an
        // idle cluster keeps cutting): the served one stays, with its cut number.
        let same = |old: &Model| {
            let strip = |m: &Model| Model {
                cluster: m.cluster.as_ref().map(|c| crate::model::ClusterCut {
                    cut: 0,
                    ..c.clone()
                }),
                ..m.clone()
            };
            strip(old) == strip(&model)
        };
        if self.global.as_ref().is_some_and(same) {
            return;
        }
        self.global = Some(model);
        // A new model to publish.
        self.core.stats.mutations += 1;
    }
}

#[cfg(test)]
mod tests;
