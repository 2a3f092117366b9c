//! DIHT and SDIHT: dual ascent with primal hard thresholding (dual-iht.md, Algorithm 1 and
//! Algorithm 2) — the one block step that both `thresher fit` ([`Sdiht`]) and the daemon's streaming
//! learner (`learner::sdiht`) run.
//!
//! State ([`DualIterate`]): the duals `alpha` (kept by the row source, [`DualRows`]: a data set's dual
//! vector, or the window's duals stored beside its samples), the *unscaled* accumulation
//! `z = sum_i alpha_i x_i` (so `w~ = -z / (lambda N)`, eq. 4.4, and a change of `N` costs nothing), the
//! primal `w = H_k(w~)` (S2.2) and the intercept `b`. One block step updates the duals of one block,
//! then `z += sum (delta_j) x_j` and re-thresholds. `blocks = 1` is DIHT; an epoch of [`Sdiht`] is `m`
//! block steps.
//!
//! # The coordinate rule (default): SDCA on the block
//!
//! As in stochastic dual coordinate ascent (Shalev-Shwartz & Zhang, 2013), each dual of the block in
//! turn maximises `D(alpha) = -(1/N) sum_i l_i*(alpha_i) - (lambda/2) ||H_k(w~)||^2` (Lemma 1) along its
//! own axis. With the support fixed, `H_k(w~)` is `w~` on it, and moving `alpha_i` to `a` moves
//! `w~` by `-(a - a_i) x_i / (lambda N)`, so up to terms free of `a`
//!
//! ```text
//! N D(a) = -l_i*(a) + (a - a_i) u_i - (q_i / 2) (a - a_i)^2,   u_i = x_i.w + b,   q_i = ||x_i||^2 / (lambda N)
//! ```
//!
//! (`u_i = x_i.w + b` because `(lambda/2) ||w - d x_i/(lambda N)||^2 = (lambda/2)||w||^2 - d x_i.w / N +
//! d^2 ||x_i||^2 / (2 lambda N^2)`, with `q_i` charged on all of `x_i`, not only its support part: a
//! coordinate that enters the support costs at most that). Its derivative
//! `f(a) = u_i - l_i*'(a) - q_i (a - a_i)` decreases in `a`, so the maximiser over `F` is the root of
//! `f` clipped to `F` ([`coordinate_maximiser`]):
//!
//! - squared (`l*(a) = a^2/4 + y a`): `a = (u_i - y + q_i a_i) / (1/2 + q_i)`, one Newton step;
//! - Huber (`l*(a) = y a + (gamma/2) a^2` on `y a in [-1, 0]`):
//!   `a = P_F(a_i + (u_i - y - gamma a_i) / (gamma + q_i))`;
//! - hinge (`l*(a) = y a` on `y a in [-1, 0]`): `a = P_F(a_i + (u_i - y) / q_i)`;
//! - logistic (`l*'(a) = -y ln(b / (1 - b))`, `b = -y a`, `l*'' = 1 / (b (1 - b))`): Newton on `f`,
//!   bracketed and bisected when a step leaves the bracket (a few iterations from a warm start).
//!
//! (Per-sample weights `c` scale `l*` as `c l*(a / c)`; the formulas hold with `l_c*'` and `l_c*''`.)
//! The rows of a block are visited in turn and `w` on the support follows each change
//! (`w_j -= (a - a_i) x_ij / (lambda N)`), so later rows see earlier ones, as in SDCA; the support
//! and `H_k` are refreshed once per block. A row never visited (`alpha_i = 0`, offline) starts its
//! Newton from `P_F(l'(u_i))`, the optimal dual for the current model (Thm 1(b)), the warm start the
//! streaming learner gives every new sample.
//!
//! The step is sized by the block's own curvature `l*'' + q_i`, not by a global rate that shrinks with
//! `N`, so one pass already learns: each row's dual lands near its optimum for the model so far.
//!
//! **Intercept.** With an unpenalised `b` the dual gains the constraint `sum alpha = 0`. The coordinate
//! rule alternates: with `b` held fixed, `l(u + b)` has the conjugate `l*(a) - b a`, and the block
//! steps above (margins `u_i = x_i.w + b`) ascend that problem's dual `D_b = D + b sum(alpha) / N`
//! (the acceptance rule tests `D_b`'s change), with no constraint; then `b` is set to its optimum for
//! the current `w` ([`newton_intercept`]): after every epoch offline, at every certificate in
//! streaming. The certificate needs `sum alpha = 0`: it evaluates `D` at the duals projected onto
//! that constraint ([`project_with_sum`]) and at the projected dual point of `(w, b)`, both feasible.
//! The paper's rules keep the block's sum instead ([`project_rows_with_sum`]).
//!
//! # The paper's rules
//!
//! [`StepRule::Theory`], [`StepRule::Constant`] and [`StepRule::Adaptive`] take
//! `alpha_j <- P_F(alpha_j + eta_j g_j)`, `g_j = (x_j.w + b - l*'(alpha_j)) / N` (eq. 4.3) from the
//! margins at the block's start, from `alpha = 0`, with blocks drawn uniformly at random (with
//! replacement) from a fixed, seeded partition, as Algorithm 2 does. The adaptive rule scales each
//! coordinate by its Newton step and backtracks a global scale on `D`.
//!
//! # Acceptance rule
//!
//! A trial block update is accepted when it does not decrease `D`, tested on the *change*
//! `D(new) - D(old) = -(sum_block [l*(new) - l*(old)]) / N - (lambda / 2) sum_j (w'_j - w_j)(w'_j + w_j)`,
//! each term a difference of two nearby numbers and the second summed over the union of the two
//! supports only (O(k)), with no tolerance: `>= 0`. Why this rule: near the optimum the change is a
//! few ulps of `D`, and the difference of two large sums (the streaming copy's former test,
//! `D(new) >= D(old) - 1e-12 |D|`) accepted rounding-level *decreases* and let the iterate oscillate,
//! while the offline copy's exact form summed over all `d` coordinates (O(d) per try). The exact,
//! support-only form is both right and cheap. The coordinate rule halves the block's change up to
//! [`MAX_BACKTRACK`] - 1 times on a first visit, [`COORDINATE_TRIES`] - 1 times on a revisit, and drops
//! it if `D` still decreases, so `D` never decreases while
//! `sum alpha = 0` holds (a step that restores that constraint is taken whole); the adaptive
//! rule takes its last try anyway. A trial with a non-finite dual, weight or change of `D` is
//! dropped and counted ([`DualIterate::numeric_faults`]).

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::objective::{
    conjugate_sum, dual_value, fused_certificate, margins_into, primal_value,
    project_rows_with_sum, project_with_sum, CertificateScratch, DualScratch,
};
use super::{Certificate, ModelView, Problem, ProblemError, Solver, StepRule, WarmStart};
use crate::loss::{Loss, LossKind, SampleLoss};
use crate::sample::{DualRows, Row, SampleSet};
use crate::sparse::{
    grow_dense, hard_threshold_paired, masked_dot, prefetch, prefetch_all, sparse_axpy,
    sparse_sq_norm, zero_dense, ThresholdScratch,
};

/// Backtracking halvings tried before a block step is taken anyway (the dual is concave but not smooth,
/// so at a kink no step may increase it; the gap stays valid for any feasible `alpha`).
pub const MAX_BACKTRACK: usize = 12;
/// Tries of the coordinate rule's block change (`1, 1/2, 1/4`) before it is dropped, on a block whose
/// rows have all been visited before. A revisit refines duals already near their optimum; a change of
/// which only a tiny fraction keeps `D` from decreasing is one whose support swap costs more than the
/// rows gain, so dropping it early is cheap (each try re-thresholds `z`). On the text sets this halved
/// `fit`'s time with held-out accuracy unchanged or better (`docs/benchmarks/quality.md`). A block with
/// first visits keeps [`MAX_BACKTRACK`] tries: those rows carry new information, which one pass needs.
pub const COORDINATE_TRIES: usize = 3;
/// Newton iterations of the logistic coordinate maximiser at most (it stops when a step moves less
/// than [`NEWTON_TOL`] of `F`'s width; from a warm start that takes 3-6).
const MAX_NEWTON: usize = 50;
const NEWTON_TOL: f64 = 1e-12;
/// Recompute `z` and the conjugate sum from scratch this often (in epochs) so rounding cannot drift.
const REFRESH_EPOCHS: usize = 16;
/// How many rows ahead a block step prefetches its rows' targets in `z`, and (twice that) the rows
/// themselves: rows live in their own allocations, which the hardware prefetcher cannot follow.
const PREFETCH_ROWS_AHEAD: usize = 4;

/// Asks the CPU to bring a row's indices and values into cache (a hint; no effect on any value).
#[inline(always)]
pub fn prefetch_row(r: Row<'_>) {
    prefetch_all(r.indices);
    prefetch_all(r.values);
}

/// What one block step needs besides the rows: the problem's constants and the step rule.
#[derive(Debug, Clone, Copy)]
pub struct BlockStep {
    pub loss: Loss,
    pub lambda: f64,
    pub k: usize,
    pub step: StepRule,
    /// The model has an unpenalised intercept ([`DualIterate::intercept`]), added to every margin, and
    /// the step keeps `sum alpha = 0` (its dual constraint; see the module docs).
    pub intercept: bool,
    /// The theory rule's step `m / (mu (t + 1))` for this step `t` (unused by the other rules).
    pub theory_step: f64,
    /// CoCoA's `sigma'` (Ma et al., 2015, "adding" aggregation): 1 alone; the number of nodes `K`
    /// when the other nodes step on their shards at the same time, against this node's stale view of
    /// their part ([`DualIterate::set_remote`]). Each node then ascends its local subproblem
    /// `Phi(d) = -(1/N) sum_own l*(alpha + d) - (1/K) (lambda/2) ||H_k(w~ - K A d / (lambda N))||^2`:
    /// its own changes move `z` (and `w` within a block) `K` times, the coordinate rule's curvature
    /// `q_i` is `K` times larger, and the acceptance rule weighs the norm's change by `1/K`. Why
    /// that keeps the nodes' simultaneous steps an ascent of the global dual: `v -> (lambda/2)
    /// ||H_k(v)||^2` is convex (a maximum of convex quadratics), so at `w~ - sum_k A_k d_k / (lambda N)`,
    /// the mean of the `K` points `w~ - K A_k d_k / (lambda N)`, it is at most the mean of its values
    /// there, and `D(alpha + sum_k d_k) - D(alpha) >= sum_k (Phi_k(d_k) - Phi_k(0))` (Jensen). The
    /// gradient rules divide their step by `sigma`. The caller rebuilds `z` from the true duals at
    /// each exchange.
    pub sigma: f64,
}

/// SDIHT's iterate apart from the duals (which the row source keeps): `z`, `sum l*`, `D`, `w`, its
/// support, the intercept and the adaptive step scale, with the scratch a block step reuses so it
/// never allocates.
#[derive(Debug, Clone, Default)]
pub struct DualIterate {
    /// `z = sum_i alpha_i x_i`, unscaled.
    pub z: Vec<f64>,
    /// `sum_i l_i*(alpha_i)`, kept in step with `alpha`.
    pub conj_sum: f64,
    /// `sum_i alpha_i`, kept in step with `alpha`: 0 when the intercept's dual constraint holds.
    pub alpha_sum: f64,
    /// `D(alpha)` for the current `alpha`, `w`.
    pub dual: f64,
    /// `w = H_k(-z / (lambda N))`, dense, zero outside `support`.
    pub w: Vec<f64>,
    /// Ascending indices of `w`'s nonzeros.
    pub support: Vec<u32>,
    /// The intercept `b` (0 without one): a primal variable, moved by the coordinate rule's block
    /// steps (the multiplier of `sum alpha = 0`).
    pub intercept: f64,
    /// Backtracking scale `s` of the adaptive rule, in `(0, 1]`.
    pub scale: f64,
    /// Trial block updates rejected because a dual, `z`, a weight or the change of `D` was not
    /// finite; the state is left as it was before each of them.
    pub numeric_faults: u64,
    /// Per row: not yet visited, so its dual (0) is replaced by the warm start
    /// `P_F(l'(w.x_i + b))` before its first coordinate step. Empty: every row has been visited
    /// (the streaming learner warm-starts rows as they enter the window).
    pub fresh: Vec<bool>,
    /// The other nodes' part of a cluster's global problem (`learner::sdiht`), as of their last
    /// partial sums: their samples count in `N`, their `sum l*` in `D`, and their `sum alpha_i x_i`
    /// is added into `z` (and kept in `remote_z` on `remote_support`, so the next partials can replace
    /// it). All zero alone.
    pub remote_n: usize,
    pub remote_conj: f64,
    pub remote_z: Vec<f64>,
    pub remote_support: Vec<u32>,
    /// Bit set over features, all zero between calls: the support while margins are taken.
    pub coord_mask: Vec<u64>,
    pub threshold: ThresholdScratch,
    old_alpha: Vec<f64>,
    new_alpha: Vec<f64>,
    margins: Vec<f64>,
    trial_alpha: Vec<f64>,
    saved_w: Vec<f64>,
    trial_w: Vec<f64>,
    trial_support: Vec<u32>,
}

impl DualIterate {
    /// An iterate at `alpha = 0` over `d` features.
    pub fn new(d: usize) -> DualIterate {
        let mut it = DualIterate {
            scale: 1.0,
            ..DualIterate::default()
        };
        it.ensure_dim(d);
        it
    }

    /// Grows the dense vectors to `d` features (new coordinates are zero).
    pub fn ensure_dim(&mut self, d: usize) {
        if self.z.len() < d {
            grow_dense(&mut self.z, d);
            grow_dense(&mut self.w, d);
            self.coord_mask.resize(d.div_ceil(64), 0);
        }
    }

    /// `N`: the `local` rows' count and the other nodes' ([`DualIterate::remote_n`]).
    pub fn n_total(&self, local: usize) -> f64 {
        (local + self.remote_n).max(1) as f64
    }

    /// `w = H_k(-z / (lambda N))` and `D` from the running sums, `N` counting the `n` local rows.
    pub fn rethreshold(&mut self, n: usize, lambda: f64, k: usize) {
        let n = self.n_total(n);
        threshold_scaled(
            &self.z,
            -1.0 / (lambda * n),
            k,
            &mut self.w,
            &mut self.support,
            &mut self.threshold,
        );
        self.dual = -(self.conj_sum + self.remote_conj) / n
            - 0.5 * lambda * support_sq_norm(&self.w, &self.support);
    }

    /// Replaces the other nodes' part: `z` loses the previous `sum alpha_i x_i` of theirs and gains
    /// `z_remote` (sparse, ascending indices), which count `n` samples with `sum l* = conj`. `w` and `D`
    /// follow at the next [`DualIterate::rethreshold`]. Returns whether anything changed (the local
    /// optimum moved: the caller should step again).
    pub fn set_remote(&mut self, z_remote: &[(u32, f64)], n: usize, conj: f64) -> bool {
        let d = z_remote.last().map_or(0, |&(j, _)| j as usize + 1);
        self.ensure_dim(d);
        grow_dense(&mut self.remote_z, self.z.len());
        let mut changed = n != self.remote_n || conj.to_bits() != self.remote_conj.to_bits();
        changed |= z_remote.len() != self.remote_support.len()
            || z_remote
                .iter()
                .zip(&self.remote_support)
                .any(|(&(j, v), &old)| {
                    j != old || v.to_bits() != self.remote_z[j as usize].to_bits()
                });
        if !changed {
            return false;
        }
        for &j in &self.remote_support {
            let j = j as usize;
            self.z[j] -= self.remote_z[j];
            self.remote_z[j] = 0.0;
        }
        self.remote_support.clear();
        for &(j, v) in z_remote {
            self.z[j as usize] += v;
            self.remote_z[j as usize] = v;
            self.remote_support.push(j);
        }
        self.remote_n = n;
        self.remote_conj = conj;
        true
    }

    /// Rebuilds `z`, the conjugate sum and `sum alpha` from the rows' duals (drift control), then `w`
    /// and `D`.
    pub fn recompute<R: DualRows>(&mut self, rows: &R, loss: &Loss, lambda: f64, k: usize) {
        self.ensure_dim(rows.dim());
        zero_dense(&mut self.z);
        let alphas = rows.alphas();
        for (i, &alpha) in alphas.iter().enumerate() {
            let r = rows.row(i);
            sparse_axpy(alpha, r.indices, r.values, &mut self.z);
        }
        for &j in &self.remote_support {
            self.z[j as usize] += self.remote_z[j as usize];
        }
        self.conj_sum = conjugate_sum(rows, loss, alphas);
        self.alpha_sum = alphas.iter().sum();
        self.rethreshold(rows.len(), lambda, k);
    }

    /// One block step (eq. 4.3-4.4 and S2.2) on the rows `block` of `data` (indices into `data`),
    /// `N = data.len()` (plus the other nodes' samples in a cluster): trial duals by the step rule, then
    /// the acceptance rule of the module docs.
    pub fn block_step<R: DualRows>(&mut self, data: &mut R, block: &[usize], p: &BlockStep) {
        let b = if p.intercept { self.intercept } else { 0.0 };
        self.old_alpha.clear();
        self.old_alpha
            .extend(block.iter().map(|&i| data.alphas()[i]));
        match p.step {
            StepRule::Coordinate => self.coordinate_step(data, block, p, b),
            _ => self.gradient_step(data, block, p, b),
        }
    }

    /// The coordinate rule: each dual of the block maximises `D` along its own axis in turn (the
    /// closed forms / safeguarded Newton of the module docs), the margins of the later rows seeing the
    /// earlier rows' changes on the current support; then the whole block's change is accepted at the
    /// largest of `1, 1/2, ...` that does not decrease `D`, or dropped.
    fn coordinate_step<R: DualRows>(
        &mut self,
        data: &mut R,
        block: &[usize],
        p: &BlockStep,
        b: f64,
    ) {
        let lambda_n = p.lambda * self.n_total(data.len());
        for &j in &self.support {
            self.coord_mask[j as usize / 64] |= 1 << (j % 64);
        }
        // `w` on the support moves with each row's change (restored below): the sequential update
        // of SDCA restricted to the support, where `w = w~` while the support stays.
        self.saved_w.clear();
        self.saved_w
            .extend(self.support.iter().map(|&j| self.w[j as usize]));
        self.new_alpha.clear();
        let mut fresh_visits = false;
        for (pos, &i) in block.iter().enumerate() {
            if let Some(&ahead) = block.get(pos + PREFETCH_ROWS_AHEAD) {
                prefetch_row(data.row(ahead));
            }
            let r = data.row(i);
            let l = p.loss.sample(r.label, r.weight);
            let u = masked_dot(r.indices, r.values, &self.w, &self.coord_mask) + b;
            let a0 = self.old_alpha[pos];
            let fresh = self.fresh.get(i).copied().unwrap_or(false);
            fresh_visits |= fresh;
            let start = if fresh { l.dual_of_margin(u) } else { a0 };
            let q = p.sigma * data.sq_norm(i) / lambda_n;
            let a = coordinate_maximiser(&l, u, a0, start, q);
            self.new_alpha.push(a);

            let delta = a - a0;
            if delta != 0.0 && !self.support.is_empty() {
                let scale = -p.sigma * delta / lambda_n;
                for (&j, &v) in r.indices.iter().zip(r.values) {
                    if self.coord_mask[j as usize / 64] & (1 << (j % 64)) != 0 {
                        self.w[j as usize] += scale * v;
                    }
                }
            }
        }
        for (&j, &v) in self.support.iter().zip(&self.saved_w) {
            self.w[j as usize] = v;
            self.coord_mask[j as usize / 64] = 0;
        }
        let mut t = 1.0;
        let tries = if fresh_visits {
            MAX_BACKTRACK
        } else {
            COORDINATE_TRIES
        };
        for _ in 0..tries {
            self.trial_alpha.clear();
            self.trial_alpha
                .extend(self.old_alpha.iter().zip(&self.new_alpha).map(|(&a0, &a)| {
                    if t == 1.0 {
                        a
                    } else {
                        a0 + t * (a - a0)
                    }
                }));
            match self.try_commit(data, block, p, lambda_n, false) {
                Trial::Accepted => {
                    if fresh_visits {
                        for &i in block {
                            self.fresh[i] = false;
                        }
                    }
                    return;
                }
                Trial::Fault => return,
                Trial::Decreased => t *= 0.5,
            }
        }
    }

    /// The paper's rules (theory, constant) and the adaptive one: `alpha_j <- P_F(alpha_j + eta_j g_j)`
    /// with `g_j = (x_j.w + b - l*'(alpha_j)) / N` from the margins at the block's start.
    fn gradient_step<R: DualRows>(&mut self, data: &mut R, block: &[usize], p: &BlockStep, b: f64) {
        let n = self.n_total(data.len());
        let lambda_n = p.lambda * n;
        // `w` is zero off its support, so the margins test the support's bit mask (cache resident)
        // before reading `w` (8d bytes): the same sums as `sparse_dot`, bit for bit.
        for &j in &self.support {
            self.coord_mask[j as usize / 64] |= 1 << (j % 64);
        }
        self.margins.clear();
        for (pos, &i) in block.iter().enumerate() {
            if let Some(&ahead) = block.get(pos + PREFETCH_ROWS_AHEAD) {
                prefetch_row(data.row(ahead));
            }
            let r = data.row(i);
            self.margins
                .push(masked_dot(r.indices, r.values, &self.w, &self.coord_mask) + b);
        }
        for &j in &self.support {
            self.coord_mask[j as usize / 64] = 0;
        }
        let tries = if p.step == StepRule::Adaptive {
            MAX_BACKTRACK
        } else {
            1
        };
        for attempt in 0..tries {
            self.trial_alpha.clear();
            for (pos, &i) in block.iter().enumerate() {
                let r = data.row(i);
                let l = p.loss.sample(r.label, r.weight);
                let a = self.old_alpha[pos];
                // N g_j = x_j.w + b - l*'(alpha_j).
                let ng = self.margins[pos] - l.conjugate_derivative(a);
                let step = match p.step {
                    StepRule::Adaptive => {
                        let curvature = l.conjugate_curvature(a) + data.sq_norm(i) / lambda_n;
                        self.scale / curvature.max(1e-300)
                    }
                    StepRule::Theory => p.theory_step,
                    StepRule::Constant(eta) => eta / n,
                    StepRule::Coordinate => unreachable!("coordinate_step"),
                } / p.sigma;
                self.trial_alpha.push(if ng == 0.0 {
                    a
                } else {
                    l.project(a + step * ng)
                });
            }
            if p.intercept {
                // Keep sum(alpha) = 0: the block's sum is preserved, so the global one is too.
                let target: f64 = self.old_alpha.iter().sum();
                project_rows_with_sum(&p.loss, &mut self.trial_alpha, target, |pos| {
                    let r = data.row(block[pos]);
                    (r.label, r.weight)
                });
            }
            // At a kink no step may increase the dual; the last try is taken anyway (the gap stays
            // valid for any feasible `alpha`).
            let last = attempt + 1 == tries;
            match self.try_commit(data, block, p, lambda_n, last) {
                Trial::Accepted => {
                    if attempt == 0 && p.step == StepRule::Adaptive {
                        self.scale = (self.scale * 2.0).min(1.0);
                    }
                    return;
                }
                Trial::Fault => return,
                Trial::Decreased => self.scale *= 0.5,
            }
        }
    }

    /// Applies `trial_alpha` (the block's trial duals) to `z`, re-thresholds, and keeps the change when
    /// `D` does not decrease (exact change, module docs); otherwise undoes it. A non-finite dual, `z`,
    /// weight or change of `D` undoes it as well and counts a numeric fault. `force` keeps a finite
    /// change even when `D` decreased.
    fn try_commit<R: DualRows>(
        &mut self,
        data: &mut R,
        block: &[usize],
        p: &BlockStep,
        lambda_n: f64,
        force: bool,
    ) -> Trial {
        let n = self.n_total(data.len());
        let mut conj_delta = 0.0;
        let mut finite = self.trial_alpha.iter().all(|a| a.is_finite());
        if finite {
            for (pos, &i) in block.iter().enumerate() {
                // Two stages: the row, then (its indices cached) its targets in `z` (8 MiB at
                // d = 2^20), so the cache misses overlap instead of queueing.
                if let Some(&ahead) = block.get(pos + 2 * PREFETCH_ROWS_AHEAD) {
                    prefetch_row(data.row(ahead));
                }
                if let Some(&ahead) = block.get(pos + PREFETCH_ROWS_AHEAD) {
                    for &j in data.row(ahead).indices {
                        prefetch(&self.z, j as usize);
                    }
                }
                let delta = self.trial_alpha[pos] - self.old_alpha[pos];
                if delta != 0.0 {
                    let r = data.row(i);
                    let l = p.loss.sample(r.label, r.weight);
                    sparse_axpy(p.sigma * delta, r.indices, r.values, &mut self.z);
                    conj_delta +=
                        l.conjugate(self.trial_alpha[pos]) - l.conjugate(self.old_alpha[pos]);
                }
            }
            threshold_scaled(
                &self.z,
                -1.0 / lambda_n,
                p.k,
                &mut self.trial_w,
                &mut self.trial_support,
                &mut self.threshold,
            );
        }
        let norm_change = if finite {
            sq_norm_change(&self.w, &self.support, &self.trial_w, &self.trial_support)
        } else {
            f64::NAN
        };
        // With `sigma > 1`, `z` moved by `sigma` times the block's change and the norm's change counts
        // `1 / sigma` of it: CoCoA's local subproblem (`BlockStep::sigma`).
        let dual_change = -conj_delta / n - 0.5 * p.lambda * norm_change / p.sigma;
        let mut ascent = dual_change;
        if p.intercept && p.step == StepRule::Coordinate {
            // The coordinate rule ascends `D_b`, the dual of the problem with `b` held fixed:
            // `l(u + b)` has the conjugate `l*(a) - b a`, so `D_b = D + b sum(alpha) / N`.
            let sum_delta: f64 = self
                .trial_alpha
                .iter()
                .zip(&self.old_alpha)
                .map(|(a, a0)| a - a0)
                .sum();
            ascent += self.intercept * sum_delta / n;
        }
        // A non-finite z_j or weight on the new support shows in the norm; one off it in `z` is caught
        // by the drift-control recompute (and cannot enter `w` without showing here first).
        finite &= ascent.is_finite() && (self.dual + dual_change).is_finite();
        if finite && (ascent >= 0.0 || force) {
            self.adopt(data, block, conj_delta, dual_change);
            return Trial::Accepted;
        }
        // Undo the change to z.
        for (pos, &i) in block.iter().enumerate() {
            let delta = self.trial_alpha[pos] - self.old_alpha[pos];
            if delta != 0.0 && delta.is_finite() {
                let r = data.row(i);
                sparse_axpy(-p.sigma * delta, r.indices, r.values, &mut self.z);
            }
        }
        if finite {
            Trial::Decreased
        } else {
            self.numeric_faults += 1;
            Trial::Fault
        }
    }

    /// Takes the trial: the block's duals, the running sums, `D`, and the trial `w` (its buffers swap
    /// with the old ones, which stay paired for the next O(k) clear).
    fn adopt<R: DualRows>(
        &mut self,
        data: &mut R,
        block: &[usize],
        conj_delta: f64,
        dual_change: f64,
    ) {
        let alphas = data.alphas_mut();
        let mut sum_delta = 0.0;
        for (pos, &i) in block.iter().enumerate() {
            sum_delta += self.trial_alpha[pos] - self.old_alpha[pos];
            alphas[i] = self.trial_alpha[pos];
        }
        self.alpha_sum += sum_delta;
        self.conj_sum += conj_delta;
        self.dual += dual_change;
        std::mem::swap(&mut self.w, &mut self.trial_w);
        std::mem::swap(&mut self.support, &mut self.trial_support);
    }
}

/// What became of a trial block update.
enum Trial {
    Accepted,
    /// `D` would decrease; the state is unchanged.
    Decreased,
    /// A non-finite value; the state is unchanged and the fault counted.
    Fault,
}

/// The maximiser over `a in F` of the dual along one row's axis, `N D` up to a constant:
/// `phi(a) = -l*(a) + (a - a0) u - (q / 2) (a - a0)^2` (module docs), from the guess `start`.
/// Its derivative `f(a) = u - l*'(a) - q (a - a0)` decreases in `a`, so the maximiser is the root of
/// `f` clipped to `F`.
///
/// - `l*` quadratic on `F` (squared, Huber, hinge: `l*'' = kappa` constant): one Newton step from any
///   point is the unconstrained maximiser, `a = start + f(start) / (kappa + q)`, and the clip to `F`
///   is the constrained one (a concave quadratic on an interval). With `kappa + q = 0` (hinge, empty
///   row) `phi` is linear: the end of `F` its slope points to.
/// - logistic (`l*'' > 0` unbounded at the ends of `F`): Newton on `f`, safeguarded by a bracket that
///   every evaluation narrows and bisection when a Newton step leaves it; a few iterations from a warm
///   start.
pub fn coordinate_maximiser(l: &SampleLoss, u: f64, a0: f64, start: f64, q: f64) -> f64 {
    let (lo, hi) = (l.project(f64::NEG_INFINITY), l.project(f64::INFINITY));
    let f = |a: f64| u - l.conjugate_derivative(a) - q * (a - a0);
    if l.kind() != LossKind::Logistic {
        let curvature = l.conjugate_curvature(start) + q;
        let slope = f(start);
        return if curvature > 0.0 {
            l.project(start + slope / curvature)
        } else if slope > 0.0 {
            hi
        } else if slope < 0.0 {
            lo
        } else {
            start
        };
    }
    let width = hi - lo;
    let (mut low, mut high) = (lo, hi);
    let mut a = start;
    if !(a > lo && a < hi) {
        a = 0.5 * (lo + hi);
    }
    for _ in 0..MAX_NEWTON {
        let slope = f(a);
        if slope > 0.0 {
            low = a;
        } else if slope < 0.0 {
            high = a;
        } else {
            return a;
        }
        let mut next = a + slope / (l.conjugate_curvature(a) + q);
        if !(next > low && next < high) {
            next = 0.5 * (low + high);
        }
        let moved = (next - a).abs();
        a = next;
        if moved <= NEWTON_TOL * width {
            break;
        }
    }
    a
}

/// The intercept minimising `sum_i c_i l(u_i + b)` for margins `u_i = x_i.w` (the primal side of the
/// dual constraint `sum alpha = 0`), as [`super::objective::best_intercept`] but by Newton on the
/// increasing `g(b) = sum_i c_i l'(u_i + b)` from `b0`, bracketed and bisected, so a warm start costs a
/// few passes instead of a hundred: closed form for squared loss; hinge (a step-function `g`)
/// bisects. A problem with one class only (no finite minimiser) ends at the bracket's edge,
/// `b0 +- (max |u_i| + |b0| + 2)`.
pub fn newton_intercept(
    loss: &Loss,
    margins: &[f64],
    b0: f64,
    label_weight: impl Fn(usize) -> (f64, f64),
) -> f64 {
    if margins.is_empty() {
        return b0;
    }
    if !loss.is_classification() {
        let (mut num, mut den) = (0.0, 0.0);
        for (pos, &u) in margins.iter().enumerate() {
            let (y, c) = label_weight(pos);
            num += c * (y - u);
            den += c;
        }
        return if den > 0.0 { num / den } else { b0 };
    }
    let g = |b: f64| -> (f64, f64) {
        let (mut slope, mut curvature) = (0.0, 0.0);
        for (pos, &u) in margins.iter().enumerate() {
            let (y, c) = label_weight(pos);
            let m = u + b;
            match loss {
                Loss::Logistic(_) => {
                    // l' = -y s, l'' = s (1 - s), s = sigmoid(-y m).
                    let s = 1.0 / (1.0 + (y * m).exp());
                    slope -= c * y * s;
                    curvature += c * s * (1.0 - s);
                }
                Loss::Huber(h) => {
                    slope += c * loss.derivative(m, y);
                    let ym = y * m;
                    if ym < 1.0 && ym >= 1.0 - h.gamma {
                        curvature += c / h.gamma;
                    }
                }
                _ => slope += c * loss.derivative(m, y),
            }
        }
        (slope, curvature)
    };
    let b0 = if b0.is_finite() { b0 } else { 0.0 };
    let reach = margins.iter().fold(0.0f64, |m, u| m.max(u.abs())) + b0.abs() + 2.0;
    let (mut lo, mut hi) = (b0 - reach, b0 + reach);
    if g(lo).0 >= 0.0 {
        return lo;
    }
    if g(hi).0 <= 0.0 {
        return hi;
    }
    let mut b = b0;
    for _ in 0..100 {
        let (slope, curvature) = g(b);
        if slope > 0.0 {
            hi = b;
        } else if slope < 0.0 {
            lo = b;
        } else {
            return b;
        }
        let newton = b - slope / curvature;
        let next = if curvature > 0.0 && newton > lo && newton < hi {
            newton
        } else {
            0.5 * (lo + hi)
        };
        if (next - b).abs() <= 1e-12 * (1.0 + b.abs()) {
            return next;
        }
        b = next;
    }
    b
}

/// `||w'||^2 - ||w||^2` for two vectors each zero outside its ascending support, summed as
/// `(w'_j - w_j)(w'_j + w_j)` over the union of the supports (a merge, O(k)): each term is exact in
/// sign where `w'` and `w` are close, which the difference of the two norms is not.
pub fn sq_norm_change(w: &[f64], support: &[u32], trial: &[f64], trial_support: &[u32]) -> f64 {
    let (mut a, mut b) = (0, 0);
    let mut sum = 0.0;
    while a < support.len() || b < trial_support.len() {
        let j = match (support.get(a), trial_support.get(b)) {
            (Some(&x), Some(&y)) => x.min(y),
            (Some(&x), None) => x,
            (None, Some(&y)) => y,
            (None, None) => unreachable!("the loop condition"),
        };
        if support.get(a) == Some(&j) {
            a += 1;
        }
        if trial_support.get(b) == Some(&j) {
            b += 1;
        }
        let (old, new) = (w[j as usize], trial[j as usize]);
        sum += (new - old) * (new + old);
    }
    sum
}

/// `||w||^2` of a vector that is zero outside the ascending `support` (the same sum, in the same order,
/// as a dense pass, without its O(d) cost).
pub fn support_sq_norm(w: &[f64], support: &[u32]) -> f64 {
    support.iter().map(|&j| w[j as usize] * w[j as usize]).sum()
}

/// `out = H_k(scale * z)` without materialising `scale * z` (`H_k` commutes with uniform scaling).
/// `out` stays paired with `support` (zero elsewhere), so clearing it is O(k).
pub fn threshold_scaled(
    z: &[f64],
    scale: f64,
    k: usize,
    out: &mut Vec<f64>,
    support: &mut Vec<u32>,
    scratch: &mut ThresholdScratch,
) {
    hard_threshold_paired(z, k, out, support, scratch);
    for &j in support.iter() {
        out[j as usize] *= scale;
    }
}

/// A data set with a dual vector: the offline row source of the block step. Row norms are taken when
/// a row is visited (a row has tens of nonzeros), so nothing walks the data before the first step.
struct DataDuals<'a, S: SampleSet> {
    data: &'a S,
    alpha: &'a mut [f64],
}

impl<S: SampleSet> SampleSet for DataDuals<'_, S> {
    fn len(&self) -> usize {
        self.data.len()
    }
    #[inline]
    fn row(&self, i: usize) -> Row<'_> {
        self.data.row(i)
    }
    fn dim(&self) -> usize {
        self.data.dim()
    }
}

impl<S: SampleSet> DualRows for DataDuals<'_, S> {
    fn alphas(&self) -> &[f64] {
        self.alpha
    }
    fn alphas_mut(&mut self) -> &mut [f64] {
        self.alpha
    }
    #[inline]
    fn sq_norm(&self, i: usize) -> f64 {
        sparse_sq_norm(self.data.row(i).values)
    }
}

/// Samples per block of [`default_blocks`]: small enough that one pass refreshes the support a few
/// hundred times on a million samples, large enough that `H_k` over `d` (once per block) stays a small
/// share of a block's work at `d = 2^20`.
pub const DEFAULT_BLOCK_SAMPLES: usize = 4096;

/// The block count `fit` uses when none is given: `ceil(N / DEFAULT_BLOCK_SAMPLES)`.
pub fn default_blocks(samples: usize) -> usize {
    samples.div_ceil(DEFAULT_BLOCK_SAMPLES).max(1)
}

/// DIHT (`blocks = 1`) / SDIHT (`blocks = m`) on an in-memory data set.
#[derive(Debug, Clone)]
pub struct Sdiht {
    blocks: usize,
    step: StepRule,
    rng: ChaCha8Rng,
    /// Sample order; block `b` is `order[bounds[b]..bounds[b+1]]`.
    order: Vec<usize>,
    bounds: Vec<usize>,
    /// The coordinate rule's block order within an epoch (each block once).
    block_order: Vec<usize>,
    alpha: Vec<f64>,
    iterate: DualIterate,
    /// Block steps taken (the paper's `t`).
    steps: usize,
    epochs: usize,
    dual_scratch: DualScratch,
    certificate_scratch: CertificateScratch,
    margins: Vec<f64>,
    alpha_from_primal: Vec<f64>,
}

impl Sdiht {
    /// A solver for `problem` with `blocks` blocks (1 = DIHT), seeded for the partition and block order.
    pub fn new<S: SampleSet>(
        problem: &Problem<S>,
        blocks: usize,
        step: StepRule,
        seed: u64,
    ) -> Result<Sdiht, ProblemError> {
        let n = problem.data.len();
        if blocks == 0 || blocks > n {
            return Err(ProblemError::BadBlocks { blocks, samples: n });
        }
        match step {
            StepRule::Theory if problem.loss.kind() == crate::loss::LossKind::Hinge => {
                return Err(ProblemError::TheoryStepNeedsSmoothLoss)
            }
            StepRule::Constant(eta) if !(eta.is_finite() && eta > 0.0) => {
                return Err(ProblemError::BadStep(eta))
            }
            _ => {}
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut order: Vec<usize> = (0..n).collect();
        if blocks > 1 {
            order.shuffle(&mut rng);
        }
        let bounds = (0..=blocks).map(|b| b * n / blocks).collect();
        let mut iterate = DualIterate::new(problem.data.dim());
        if step == StepRule::Coordinate {
            iterate.fresh = vec![true; n];
        }
        // At `alpha = 0`: `z = 0`, `sum l*(0) = 0` for every loss, so `w = 0` and `D = 0` with no pass
        // over the data.
        iterate.rethreshold(n, problem.lambda, problem.k);
        Ok(Sdiht {
            blocks,
            step,
            rng,
            order,
            bounds,
            block_order: Vec::new(),
            alpha: vec![0.0; n],
            iterate,
            steps: 0,
            epochs: 0,
            dual_scratch: DualScratch::default(),
            certificate_scratch: CertificateScratch::default(),
            margins: Vec::new(),
            alpha_from_primal: Vec::new(),
        })
    }

    /// The dual iterate.
    pub fn alpha(&self) -> &[f64] {
        &self.alpha
    }

    /// The iterate (`z`, `w`, `D`, the intercept, the numeric-fault count).
    pub fn iterate(&self) -> &DualIterate {
        &self.iterate
    }

    /// Rebuilds `z`, the conjugate sum, `w` and `D` from `alpha` (drift control).
    fn refresh<S: SampleSet>(&mut self, p: &Problem<S>) {
        let rows = DataDuals {
            data: p.data,
            alpha: &mut self.alpha,
        };
        self.iterate.recompute(&rows, &p.loss, p.lambda, p.k);
    }

    /// One block step on block `b` of the partition.
    fn block_step<S: SampleSet>(&mut self, p: &Problem<S>, b: usize) {
        let step = BlockStep {
            loss: p.loss,
            lambda: p.lambda,
            k: p.k,
            step: self.step,
            intercept: p.intercept,
            theory_step: match self.step {
                StepRule::Theory => theory_step(&p.loss, self.blocks, self.steps),
                _ => 0.0,
            },
            sigma: 1.0,
        };
        let mut rows = DataDuals {
            data: p.data,
            alpha: &mut self.alpha,
        };
        let block = &self.order[self.bounds[b]..self.bounds[b + 1]];
        self.iterate.block_step(&mut rows, block, &step);
        self.steps += 1;
    }
}

/// The theory rule's step at block step `t` (Thm 4/5 with `sigma_min = 0`, Remark 3): the paper's
/// `eta_t = m N / (mu (t + 1))` in the units of `alpha += step * (N g)`, for a `1/mu`-smooth loss.
pub fn theory_step(loss: &Loss, blocks: usize, t: usize) -> f64 {
    let mu = 1.0 / loss.smoothness();
    blocks as f64 / (mu * (t + 1) as f64)
}

impl<S: SampleSet> Solver<S> for Sdiht {
    fn name(&self) -> &'static str {
        if self.blocks == 1 {
            "diht"
        } else {
            "sdiht"
        }
    }

    /// `m` block steps: with the coordinate rule each block once, in a random order (so one epoch
    /// visits every row); with the paper's rules `m` blocks drawn uniformly at random (Alg. 2).
    fn epoch(&mut self, p: &Problem<S>) {
        if self.step == StepRule::Coordinate {
            self.block_order.clear();
            self.block_order.extend(0..self.blocks);
            self.block_order.shuffle(&mut self.rng);
            for at in 0..self.blocks {
                self.block_step(p, self.block_order[at]);
            }
        } else {
            for _ in 0..self.blocks {
                let b = if self.blocks == 1 {
                    0
                } else {
                    self.rng.gen_range(0..self.blocks)
                };
                self.block_step(p, b);
            }
        }
        self.epochs += 1;
        if self.epochs.is_multiple_of(REFRESH_EPOCHS) {
            self.refresh(p);
        }
        if p.intercept {
            margins_into(p.data, &self.iterate.w, &mut self.margins);
            let b = newton_intercept(&p.loss, &self.margins, self.iterate.intercept, |i| {
                let r = p.data.row(i);
                (r.label, r.weight)
            });
            if b.is_finite() {
                self.iterate.intercept = b;
            }
        }
    }

    fn warm_state(&self) -> Option<WarmStart> {
        Some(WarmStart {
            alpha: self.alpha.clone(),
            fresh: self.iterate.fresh.clone(),
            intercept: self.iterate.intercept,
        })
    }

    /// Takes the duals (feasible for the same rows under the same loss, whatever lambda made them),
    /// rebuilds `z`, `w` and `D` from them, and marks the `fresh` rows for the margin start of the
    /// coordinate rule.
    fn warm_start(&mut self, p: &Problem<S>, start: &WarmStart) -> bool {
        let n = p.data.len();
        let fits = start.alpha.len() == n
            && (start.fresh.is_empty() || start.fresh.len() == n)
            && start.alpha.iter().all(|a| a.is_finite())
            && start.intercept.is_finite();
        if !fits {
            return false;
        }
        self.alpha.copy_from_slice(&start.alpha);
        if self.step == StepRule::Coordinate {
            self.iterate.fresh.clear();
            match start.fresh.is_empty() {
                true => self.iterate.fresh.resize(n, false),
                false => self.iterate.fresh.extend_from_slice(&start.fresh),
            }
        }
        self.iterate.intercept = if p.intercept { start.intercept } else { 0.0 };
        self.refresh(p);
        true
    }

    fn model(&self) -> ModelView<'_> {
        ModelView {
            weights: &self.iterate.w,
            support: &self.iterate.support,
            intercept: self.iterate.intercept,
        }
    }

    /// `P(w, b)` against the larger of two valid lower bounds: `D` at the dual iterate and `D` at the
    /// dual point of `w` itself (Thm 1(b)); both are feasible, so either certifies. Rows never visited
    /// hold `alpha_i = 0`, which is feasible. Without an intercept, one fused walk
    /// ([`fused_certificate`]).
    fn certificate(&mut self, p: &Problem<S>) -> Certificate {
        let w = &self.iterate.w;
        if !p.intercept {
            return fused_certificate(
                p.data,
                &p.loss,
                p.lambda,
                p.k,
                w,
                &self.iterate.support,
                Some(&self.alpha),
                &mut self.certificate_scratch,
            )
            .certificate(p.data.len());
        }
        let b = self.iterate.intercept;
        let primal = primal_value(p.data, &p.loss, p.lambda, w, b);
        // The iterate's sum is 0 up to rounding of the shifts; a copy projected exactly is feasible.
        self.margins.clear();
        self.margins.extend_from_slice(&self.alpha);
        project_with_sum(p.data, &p.loss, &mut self.margins, 0.0);
        let at_iterate = dual_value(
            p.data,
            &p.loss,
            p.lambda,
            p.k,
            &self.margins,
            &mut self.dual_scratch,
        );
        let at_primal = p.dual_of_model(
            p.k,
            w,
            b,
            &mut self.alpha_from_primal,
            &mut self.dual_scratch,
        );
        Certificate::new(primal, at_iterate.max(at_primal), p.data.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::{Dataset, Sample};
    use crate::synth::sparse_stream;

    fn sample_loss(kind: LossKind, y: f64, c: f64) -> SampleLoss {
        Loss::new(kind, 0.25).unwrap().sample(y, c)
    }

    /// `phi(a) = -l*(a) + (a - a0) u - (q/2)(a - a0)^2`, the 1-D objective of the coordinate rule.
    fn phi(l: &SampleLoss, u: f64, a0: f64, q: f64, a: f64) -> f64 {
        -l.conjugate(a) + (a - a0) * u - 0.5 * q * (a - a0) * (a - a0)
    }

    /// The 1-D maximiser by golden-section search on `F` (the reference the closed forms meet).
    fn golden_max(l: &SampleLoss, u: f64, a0: f64, q: f64) -> f64 {
        let (mut lo, mut hi) = (l.project(-1e6), l.project(1e6));
        let g = 0.5 * (5f64.sqrt() - 1.0);
        for _ in 0..200 {
            let (x1, x2) = (hi - g * (hi - lo), lo + g * (hi - lo));
            if phi(l, u, a0, q, x1) < phi(l, u, a0, q, x2) {
                lo = x1;
            } else {
                hi = x2;
            }
        }
        0.5 * (lo + hi)
    }

    #[test]
    fn squared_coordinate_step_is_the_exact_maximiser() {
        let l = sample_loss(LossKind::Squared, 1.5, 1.0);
        let (u, a0, q) = (0.3, -0.7, 0.8);
        let a = coordinate_maximiser(&l, u, a0, a0, q);
        // a = (u - y + q a0) / (1/2 + q).
        let closed = (u - 1.5 + q * a0) / (0.5 + q);
        assert!((a - closed).abs() < 1e-15, "{a} vs {closed}");
        // From any start, one step lands on it.
        assert!((coordinate_maximiser(&l, u, a0, 40.0, q) - closed).abs() < 1e-12);
        // Weighted (c = 2): l_c*(a) = a^2 / 8 + y a, so a = (u - y + q a0) / (1/4 + q).
        let lc = sample_loss(LossKind::Squared, 1.5, 2.0);
        let closed = (u - 1.5 + q * a0) / (0.25 + q);
        assert!((coordinate_maximiser(&lc, u, a0, 0.0, q) - closed).abs() < 1e-14);
    }

    #[test]
    fn logistic_newton_converges_to_the_maximiser() {
        for (y, c) in [(1.0, 1.0), (-1.0, 1.0), (1.0, 3.0), (-1.0, 0.5)] {
            let l = sample_loss(LossKind::Logistic, y, c);
            for (u, q) in [
                (0.0, 0.1),
                (2.0, 0.01),
                (-8.0, 1.0),
                (30.0, 1e-4),
                (-0.5, 50.0),
            ] {
                for a0 in [0.0, -y * 0.5 * c, -y * c, -y * 0.999 * c] {
                    for start in [a0, l.dual_of_margin(u)] {
                        let a = coordinate_maximiser(&l, u, a0, start, q);
                        let reference = golden_max(&l, u, a0, q);
                        assert!((l.project(a) - a).abs() <= 1e-15 * c, "{a} not in F");
                        // (Near `b = 0` or `1`, `l*'` is clipped at `b = 1e-12`: the root is found to
                        // that resolution.)
                        assert!(
                            phi(&l, u, a0, q, a) >= phi(&l, u, a0, q, reference) - 1e-10,
                            "y {y} c {c} u {u} q {q} a0 {a0}: {a} vs {reference}"
                        );
                        assert!((a - reference).abs() < 1e-6 * c, "{a} vs {reference}");
                    }
                }
            }
        }
    }

    #[test]
    fn hinge_and_huber_steps_are_clipped_closed_forms() {
        let l = sample_loss(LossKind::Hinge, 1.0, 1.0);
        // Inside: a = a0 + (u - y) / q.
        assert_eq!(
            coordinate_maximiser(&l, 0.8, -0.5, -0.5, 2.0),
            -0.5 + (0.8 - 1.0) / 2.0
        );
        // Clipped at both ends of F = [-1, 0].
        assert_eq!(coordinate_maximiser(&l, -5.0, -0.5, -0.5, 1.0), -1.0);
        assert_eq!(coordinate_maximiser(&l, 5.0, -0.5, -0.5, 1.0), 0.0);
        // An empty row (q = 0): the end the slope points to.
        assert_eq!(coordinate_maximiser(&l, 0.2, -0.5, -0.5, 0.0), -1.0);
        let l = sample_loss(LossKind::Huber, -1.0, 1.0);
        for (u, a0, q) in [(0.3, 0.2, 0.5), (-3.0, 0.9, 0.1), (4.0, 0.0, 2.0)] {
            let a = coordinate_maximiser(&l, u, a0, a0, q);
            let reference = golden_max(&l, u, a0, q);
            assert!((a - reference).abs() < 1e-7, "{a} vs {reference}");
        }
    }

    fn classify(samples: &mut [Sample]) {
        for s in samples {
            s.label = if s.label >= 0.0 { 1.0 } else { -1.0 };
        }
    }

    /// Weak duality (`P >= D` from scratch, `D` at the duals projected onto `sum alpha = 0` with an
    /// intercept) and a monotone `D` after every block step (`b = 0` here, so `D_b = D`), for every
    /// loss, with and without an intercept, on random problems.
    #[test]
    fn coordinate_steps_keep_weak_duality_and_a_monotone_dual() {
        for seed in 0..3u64 {
            for kind in [
                LossKind::Squared,
                LossKind::Huber,
                LossKind::Hinge,
                LossKind::Logistic,
            ] {
                let mut raw = sparse_stream(300, 80, 5, 10, 0.3, false, seed).samples;
                if kind != LossKind::Squared {
                    classify(&mut raw);
                }
                let data = Dataset::from_samples(&raw, 0);
                let loss = Loss::new(kind, 0.25).unwrap();
                for intercept in [false, true] {
                    let p = Problem::new(&data, loss, 0.02, 5, intercept).unwrap();
                    let mut s = Sdiht::new(&p, 6, StepRule::Coordinate, seed).unwrap();
                    let mut last = s.iterate.dual;
                    for step in 0..40 {
                        s.block_step(&p, step % 6);
                        let d = s.iterate.dual;
                        assert!(d >= last, "{kind:?} {intercept} step {step}: {d} < {last}");
                        last = d;
                        let c = s.certificate(&p);
                        assert!(c.gap >= -1e-9, "{kind:?} {intercept} step {step}: {c:?}");
                    }
                    // The running D is D(alpha) from scratch.
                    let scratch = dual_value(
                        p.data,
                        &p.loss,
                        p.lambda,
                        p.k,
                        &s.alpha,
                        &mut DualScratch::default(),
                    );
                    assert!(
                        (scratch - last).abs() < 1e-9,
                        "{kind:?}: {scratch} vs {last}"
                    );
                    assert_eq!(s.iterate.numeric_faults, 0);
                }
            }
        }
    }

    /// Held-out accuracy of a model on `test`.
    fn accuracy(w: &[f64], b: f64, test: &Dataset) -> f64 {
        let right = (0..test.len())
            .filter(|&i| {
                let r = test.row(i);
                let u = crate::sparse::sparse_dot(r.indices, r.values, w) + b;
                (u >= 0.0) == (r.label > 0.0)
            })
            .count();
        right as f64 / test.len() as f64
    }

    /// One pass (one epoch) of the coordinate rule learns a logistic stream; the adaptive rule,
    /// started from `alpha = 0`, barely leaves `w = 0` (`P` near `ln 2`).
    #[test]
    fn one_pass_of_the_coordinate_rule_beats_the_adaptive_rule() {
        let mut raw = sparse_stream(24_000, 20_000, 20, 20, 0.1, false, 9).samples;
        classify(&mut raw);
        let train = Dataset::from_samples(&raw[..20_000], 20_000);
        let test = Dataset::from_samples(&raw[20_000..], 20_000);
        let loss = Loss::new(LossKind::Logistic, 0.0).unwrap();
        let p = Problem::new(&train, loss, 1e-5, 20, false).unwrap();
        let fit = |step: StepRule, blocks: usize| {
            let mut s = Sdiht::new(&p, blocks, step, 1).unwrap();
            s.epoch(&p);
            let primal = primal_value(p.data, &p.loss, p.lambda, &s.iterate.w, 0.0);
            (accuracy(&s.iterate.w, 0.0, &test), primal)
        };
        let (coordinate, p_coordinate) = fit(StepRule::Coordinate, default_blocks(20_000));
        let (adaptive, p_adaptive) = fit(StepRule::Adaptive, 10);
        assert!(coordinate > 0.95, "coordinate {coordinate}");
        assert!(coordinate > adaptive, "{coordinate} vs {adaptive}");
        assert!(
            p_coordinate < 0.5 * p_adaptive,
            "{p_coordinate} vs {p_adaptive}"
        );
    }

    /// A trial that produces a non-finite value is dropped and counted; the state is unchanged.
    #[test]
    fn a_non_finite_trial_is_rejected_and_counted() {
        let s1 = Sample::new(vec![0, 1], vec![1.0, 2.0], 1.0, None).unwrap();
        let s2 = Sample::new(vec![0], vec![1e300], 1e300, None).unwrap();
        let data = Dataset::from_samples(&[s1, s2], 0);
        let p = Problem::new(
            &data,
            Loss::new(LossKind::Squared, 0.0).unwrap(),
            1e-3,
            1,
            false,
        )
        .unwrap();
        let mut s = Sdiht::new(&p, 2, StepRule::Coordinate, 0).unwrap();
        let before = (s.alpha.clone(), s.iterate.z.clone(), s.iterate.dual);
        let big = if s.order[0] == 1 { 0 } else { 1 };
        s.block_step(&p, big);
        assert_eq!(s.iterate.numeric_faults, 1);
        assert_eq!(
            (s.alpha.clone(), s.iterate.z.clone(), s.iterate.dual),
            before
        );
        assert!(s.iterate.w.iter().all(|v| v.is_finite()));
    }

    #[test]
    fn sq_norm_change_sums_over_the_union_of_the_supports() {
        let w = [0.0, 2.0, 0.0, -1.0, 0.0];
        let trial = [3.0, 2.5, 0.0, 0.0, 0.0];
        // ||trial||^2 - ||w||^2 = (9 + 6.25) - (4 + 1).
        let change = sq_norm_change(&w, &[1, 3], &trial, &[0, 1]);
        assert_eq!(change, 15.25 - 5.0);
        assert_eq!(sq_norm_change(&w, &[1, 3], &w, &[1, 3]), 0.0);
        assert_eq!(sq_norm_change(&w, &[], &w, &[]), 0.0);
    }
}
