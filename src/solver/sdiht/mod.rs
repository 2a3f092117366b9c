//! DIHT and SDIHT: dual ascent with primal hard thresholding (dual-iht.md, Algorithm 1 and
//! Algorithm 2) — the one block step that both `thresher fit` ([`offline::Sdiht`]) and the daemon's
//! streaming learner (`learner::sdiht`) run. This file holds the block step and its iterate; the
//! offline solver is [`offline`], the intercept's Newton refit [`intercept`], the norms and the scaled
//! threshold the step's acceptance rule uses [`norms`].
//!
//! State ([`DualIterate`]): the duals `alpha` (kept by the row source, [`DualRows`]: a data set's dual
//! vector, or the window's duals stored beside its samples), the *unscaled* accumulation
//! `z = sum_i alpha_i x_i` (so `w~ = -z / (lambda M)`, eq. 4.4 with the mass `M = sum_i c_i` in place
//! of `N`, [`crate::solver::objective`]'s module docs; a change of `M` costs nothing), the
//! primal `w = H_k(w~)` (S2.2) and the intercept `b`. One block step updates the duals of one block,
//! then `z += sum (delta_j) x_j` and re-thresholds. `blocks = 1` is DIHT; an epoch of [`offline::Sdiht`] is `m`
//! block steps.
//!
//! # The coordinate rule (default): SDCA on the block
//!
//! As in stochastic dual coordinate ascent (Shalev-Shwartz & Zhang, 2013), each dual of the block in
//! turn maximises `D(alpha) = -(1/M) sum_i l_i*(alpha_i) - (lambda/2) ||H_k(w~)||^2` (Lemma 1 over the
//! mass `M = sum_i c_i`; `l_i*(a) = c_i l*(a / c_i)`) along its own axis. With the support fixed,
//! `H_k(w~)` is `w~` on it, and moving `alpha_i` to `a` moves `w~` by `-(a - a_i) x_i / (lambda M)`, so
//! up to terms free of `a`
//!
//! ```text
//! M D(a) = -l_i*(a) + (a - a_i) u_i - (q_i / 2) (a - a_i)^2,   u_i = x_i.w + b,   q_i = ||x_i||^2 / (lambda M)
//! ```
//!
//! (`u_i = x_i.w + b` because `(lambda/2) ||w - d x_i/(lambda M)||^2 = (lambda/2)||w||^2 - d x_i.w / M +
//! d^2 ||x_i||^2 / (2 lambda M^2)`, with `q_i` charged on all of `x_i`, not only its support part: a
//! coordinate that enters the support costs at most that). Its derivative
//! `f(a) = u_i - l_i*'(a) - q_i (a - a_i)` decreases in `a`, so the maximiser over `F` is the root of
//! `f` clipped to `F`: each loss's closed form (squared, Huber, hinge) or safeguarded Newton
//! (logistic) is its [`crate::loss::SampleLoss::coordinate_maximiser`] ([`crate::loss::dual`]).
//!
//! **Weights.** In the weight-free dual `beta_i = a / c_i in F` the same line reads
//! `M D = -c_i l*(beta) + c_i (beta - beta_i) u_i - (c_i^2 q_i / 2) (beta - beta_i)^2`: row `i`'s conjugate
//! term is scaled by `c_i` and its step moves `w~` by `-(c_i / (lambda M)) (beta - beta_i) x_i`, SDCA's
//! weighted step. Dividing by `c_i`, its maximiser is the root of
//! `u_i - l*'(beta) - (c_i ||x_i||^2 / (lambda M)) (beta - beta_i)`: the unweighted closed forms with the
//! curvature `c_i ||x_i||^2 / (lambda M)`, which is what [`crate::loss::SampleLoss`]'s `l_c*' (a) =
//! l*'(a / c)` and `l_c*'' = l*'' / c` give in `a` (tested in [`crate::loss::dual`]). A sample of integer
//! weight `c` is then exactly `c` copies of it whose duals move together: each copy has
//! `beta`, their `sum alpha x` is `c beta x`, their `sum l*` is `c l*(beta)`, and `M` counts them `c`
//! times.
//!
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
//! the current `w` ([`intercept::newton_intercept`]): after every epoch offline, at every certificate in
//! streaming. The certificate needs `sum alpha = 0`: it evaluates `D` at the duals projected onto
//! that constraint ([`crate::solver::objective::project_with_sum`]) and at the projected dual point of `(w, b)`, both feasible.
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

pub mod intercept;
pub mod norms;
pub mod offline;

use super::objective::{conjugate_sum, project_rows_with_sum};
use super::StepRule;
use crate::loss::Loss;
use crate::sample::{DualRows, Row};
use crate::sparse::{
    grow_dense, masked_dot, prefetch, prefetch_all, sparse_axpy, zero_dense, ThresholdScratch,
};
use norms::{sq_norm_change, support_sq_norm, threshold_scaled};

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
    /// their part (`learner::global::replace_remote`). Each node then ascends its local subproblem
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
    /// `w = H_k(-z / (lambda M))`, dense, zero outside `support`.
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
    /// partial sums: their samples' mass counts in `M`, their `sum l*` in `D`, and their
    /// `sum alpha_i x_i` is added into `z` (and kept in `remote_z` on `remote_support`, so the next
    /// partials can replace it). All zero alone.
    pub remote_mass: f64,
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
    /// A block step's trial `w` (dense, zero outside `trial_support`), swapped with `w` when taken.
    pub(crate) trial_w: Vec<f64>,
    pub(crate) trial_support: Vec<u32>,
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

    /// `M`, the objective's divisor: the `local` rows' mass ([`crate::sample::SampleSet::mass`]) and
    /// the other nodes' ([`DualIterate::remote_mass`]); 1 when both are 0.
    pub fn mass_total(&self, local: f64) -> f64 {
        crate::solver::objective::normaliser(local + self.remote_mass)
    }

    /// `w = H_k(-z / (lambda M))` and `D` from the running sums, `M` counting the local rows' mass
    /// `local_mass`.
    pub fn rethreshold(&mut self, local_mass: f64, lambda: f64, k: usize) {
        let n = self.mass_total(local_mass);
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
        self.rethreshold(rows.mass(), lambda, k);
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
        let lambda_n = p.lambda * self.mass_total(data.mass());
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
            // Two stages: where the row is (and its label, weight and dual), then the row itself.
            if let Some(&ahead) = block.get(pos + 2 * PREFETCH_ROWS_AHEAD) {
                data.prefetch_meta(ahead);
                prefetch(&self.fresh, ahead);
            }
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
            let a = l.coordinate_maximiser(u, a0, start, q);
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
        let n = self.mass_total(data.mass());
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
        let n = self.mass_total(data.mass());
        let mut conj_delta = 0.0;
        let mut finite = self.trial_alpha.iter().all(|a| a.is_finite());
        // Only a trial scattered into `z` has a change there to undo.
        let scattered = finite;
        if finite {
            for (pos, &i) in block.iter().enumerate() {
                // Three stages: where the row is, the row, then (its indices cached) its targets in
                // `z` (8 MiB at d = 2^20), so the cache misses overlap instead of queueing.
                if let Some(&ahead) = block.get(pos + 3 * PREFETCH_ROWS_AHEAD) {
                    data.prefetch_meta(ahead);
                }
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
        for (pos, &i) in block.iter().enumerate().filter(|_| scattered) {
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

/// The theory rule's step at block step `t` (Thm 4/5 with `sigma_min = 0`, Remark 3): the paper's
/// `eta_t = m N / (mu (t + 1))` in the units of `alpha += step * (N g)`, for a `1/mu`-smooth loss.
pub fn theory_step(loss: &Loss, blocks: usize, t: usize) -> f64 {
    let mu = 1.0 / loss.smoothness();
    blocks as f64 / (mu * (t + 1) as f64)
}
