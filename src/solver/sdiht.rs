//! DIHT and SDIHT: dual projected super-gradient ascent with primal hard thresholding
//! (dual-iht.md, Algorithm 1 and Algorithm 2) — the one block step that both `thresher fit` ([`Sdiht`])
//! and the daemon's streaming learner (`learner::sdiht`) run.
//!
//! State ([`DualIterate`]): the duals `alpha` (kept by the row source, [`DualRows`]: a data set's dual
//! vector, or the window's duals stored beside its samples), the *unscaled* accumulation
//! `z = sum_i alpha_i x_i` (so `w~ = -z / (lambda N)`, eq. 4.4, and a change of `N` costs nothing), and
//! the primal `w = H_k(w~)` (S2.2). One block step (eq. 4.3) updates the duals of one block:
//! `alpha_j <- P_F(alpha_j + eta_j g_j)`, `g_j = (x_j.w + b - l*'(alpha_j)) / N`, then
//! `z += sum (delta_j) x_j` and re-thresholds. `blocks = 1` is DIHT; an epoch of [`Sdiht`] is `m` block
//! steps with blocks drawn uniformly at random from a fixed, seeded partition.
//!
//! Step sizes: see [`StepRule`]. The default (`Adaptive`) scales each coordinate by its Newton step and
//! backtracks on `D(alpha)`, which costs one extra `H_k` per rejected try but needs no tuning.
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
//! support-only form is both right and cheap.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::objective::{
    best_intercept, conjugate_sum, dual_value, margins_into, primal_value, project_rows_with_sum,
    DualScratch,
};
use super::{Certificate, ModelView, Problem, ProblemError, Solver, StepRule};
use crate::loss::Loss;
use crate::sample::{DualRows, Row, SampleSet};
use crate::sparse::{
    grow_dense, hard_threshold_paired, masked_dot, prefetch, prefetch_all, sparse_axpy,
    sparse_sq_norm, zero_dense, ThresholdScratch,
};

/// Backtracking halvings tried before a block step is taken anyway (the dual is concave but not smooth,
/// so at a kink no step may increase it; the gap stays valid for any feasible `alpha`).
pub const MAX_BACKTRACK: usize = 12;
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
    /// `Some(b)`: the model has the intercept `b`, added to every margin, and the step keeps
    /// `sum alpha = 0` (the dual constraint of an unpenalised intercept). `None`: no intercept.
    pub intercept: Option<f64>,
    /// The theory rule's step `m / (mu (t + 1))` for this step `t` (unused by the other rules).
    pub theory_step: f64,
}

/// SDIHT's iterate apart from the duals (which the row source keeps): `z`, `sum l*`, `D`, `w`, its
/// support and the adaptive step scale, with the scratch a block step reuses so it never allocates.
#[derive(Debug, Clone, Default)]
pub struct DualIterate {
    /// `z = sum_i alpha_i x_i`, unscaled.
    pub z: Vec<f64>,
    /// `sum_i l_i*(alpha_i)`, kept in step with `alpha`.
    pub conj_sum: f64,
    /// `D(alpha)` for the current `alpha`, `w`.
    pub dual: f64,
    /// `w = H_k(-z / (lambda N))`, dense, zero outside `support`.
    pub w: Vec<f64>,
    /// Ascending indices of `w`'s nonzeros.
    pub support: Vec<u32>,
    /// Backtracking scale `s` of the adaptive rule, in `(0, 1]`.
    pub scale: f64,
    /// Bit set over features, all zero between calls: the support while margins are taken.
    pub coord_mask: Vec<u64>,
    pub threshold: ThresholdScratch,
    old_alpha: Vec<f64>,
    new_alpha: Vec<f64>,
    margins: Vec<f64>,
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

    /// `w = H_k(-z / (lambda n))` and `D` from the running sums.
    pub fn rethreshold(&mut self, n: usize, lambda: f64, k: usize) {
        let n = n.max(1) as f64;
        threshold_scaled(
            &self.z,
            -1.0 / (lambda * n),
            k,
            &mut self.w,
            &mut self.support,
            &mut self.threshold,
        );
        self.dual = -self.conj_sum / n - 0.5 * lambda * support_sq_norm(&self.w, &self.support);
    }

    /// Rebuilds `z` and the conjugate sum from the rows' duals (drift control), then `w` and `D`.
    pub fn recompute<R: DualRows>(&mut self, rows: &R, loss: &Loss, lambda: f64, k: usize) {
        self.ensure_dim(rows.dim());
        zero_dense(&mut self.z);
        let alphas = rows.alphas();
        for (i, &alpha) in alphas.iter().enumerate() {
            let r = rows.row(i);
            sparse_axpy(alpha, r.indices, r.values, &mut self.z);
        }
        self.conj_sum = conjugate_sum(rows, loss, alphas);
        self.rethreshold(rows.len(), lambda, k);
    }

    /// Eq. (4.3)-(4.4) and S2.2 on the rows `block` of `data` (indices into `data`), with the acceptance
    /// rule of the module docs. `N = data.len()`.
    pub fn block_step<R: DualRows>(&mut self, data: &mut R, block: &[usize], p: &BlockStep) {
        let n = data.len() as f64;
        let lambda_n = p.lambda * n;
        let b = p.intercept.unwrap_or(0.0);
        self.old_alpha.clear();
        self.old_alpha
            .extend(block.iter().map(|&i| data.alphas()[i]));
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
            self.new_alpha.clear();
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
                };
                self.new_alpha.push(if ng == 0.0 {
                    a
                } else {
                    l.project(a + step * ng)
                });
            }
            if p.intercept.is_some() {
                // Keep sum(alpha) = 0: the block's sum is preserved, so the global one is too.
                let target: f64 = self.old_alpha.iter().sum();
                project_rows_with_sum(&p.loss, &mut self.new_alpha, target, |pos| {
                    let r = data.row(block[pos]);
                    (r.label, r.weight)
                });
            }
            let mut conj_delta = 0.0;
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
                let delta = self.new_alpha[pos] - self.old_alpha[pos];
                if delta != 0.0 {
                    let r = data.row(i);
                    let l = p.loss.sample(r.label, r.weight);
                    sparse_axpy(delta, r.indices, r.values, &mut self.z);
                    conj_delta +=
                        l.conjugate(self.new_alpha[pos]) - l.conjugate(self.old_alpha[pos]);
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
            let norm_change =
                sq_norm_change(&self.w, &self.support, &self.trial_w, &self.trial_support);
            let dual_change = -conj_delta / n - 0.5 * p.lambda * norm_change;
            if dual_change >= 0.0 || attempt + 1 == tries {
                let alphas = data.alphas_mut();
                for (pos, &i) in block.iter().enumerate() {
                    alphas[i] = self.new_alpha[pos];
                }
                self.conj_sum += conj_delta;
                self.dual += dual_change;
                std::mem::swap(&mut self.w, &mut self.trial_w);
                std::mem::swap(&mut self.support, &mut self.trial_support);
                if attempt == 0 && p.step == StepRule::Adaptive {
                    self.scale = (self.scale * 2.0).min(1.0);
                }
                return;
            }
            // Reject: undo the change to z and try a smaller step.
            for (pos, &i) in block.iter().enumerate() {
                let delta = self.new_alpha[pos] - self.old_alpha[pos];
                if delta != 0.0 {
                    let r = data.row(i);
                    sparse_axpy(-delta, r.indices, r.values, &mut self.z);
                }
            }
            self.scale *= 0.5;
        }
    }
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

/// A data set with a dual vector and cached row norms: the offline row source of the block step.
struct DataDuals<'a, S: SampleSet> {
    data: &'a S,
    alpha: &'a mut [f64],
    sq_norms: &'a [f64],
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
    fn sq_norm(&self, i: usize) -> f64 {
        self.sq_norms[i]
    }
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
    alpha: Vec<f64>,
    iterate: DualIterate,
    intercept: f64,
    /// Block steps taken (the paper's `t`).
    steps: usize,
    epochs: usize,
    /// `||x_i||^2` per sample.
    sq_norms: Vec<f64>,
    dual_scratch: DualScratch,
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
        let sq_norms = (0..n)
            .map(|i| sparse_sq_norm(problem.data.row(i).values))
            .collect();
        let mut solver = Sdiht {
            blocks,
            step,
            rng,
            order,
            bounds,
            alpha: vec![0.0; n],
            iterate: DualIterate::new(problem.data.dim()),
            intercept: 0.0,
            steps: 0,
            epochs: 0,
            sq_norms,
            dual_scratch: DualScratch::default(),
            margins: Vec::new(),
            alpha_from_primal: Vec::new(),
        };
        solver.refresh(problem);
        Ok(solver)
    }

    /// The dual iterate.
    pub fn alpha(&self) -> &[f64] {
        &self.alpha
    }

    /// Rebuilds `z`, the conjugate sum, `w` and `D` from `alpha` (drift control).
    fn refresh<S: SampleSet>(&mut self, p: &Problem<S>) {
        let rows = DataDuals {
            data: p.data,
            alpha: &mut self.alpha,
            sq_norms: &self.sq_norms,
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
            intercept: p.intercept.then_some(self.intercept),
            theory_step: match self.step {
                StepRule::Theory => theory_step(&p.loss, self.blocks, self.steps),
                _ => 0.0,
            },
        };
        let mut rows = DataDuals {
            data: p.data,
            alpha: &mut self.alpha,
            sq_norms: &self.sq_norms,
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

    fn epoch(&mut self, p: &Problem<S>) {
        for _ in 0..self.blocks {
            let b = if self.blocks == 1 {
                0
            } else {
                self.rng.gen_range(0..self.blocks)
            };
            self.block_step(p, b);
        }
        self.epochs += 1;
        if self.epochs.is_multiple_of(REFRESH_EPOCHS) {
            self.refresh(p);
        }
        if p.intercept {
            margins_into(p.data, &self.iterate.w, &mut self.margins);
            self.intercept = best_intercept(p.data, &p.loss, &self.margins);
        }
    }

    fn model(&self) -> ModelView<'_> {
        ModelView {
            weights: &self.iterate.w,
            support: &self.iterate.support,
            intercept: self.intercept,
        }
    }

    /// `P(w, b)` against the larger of two valid lower bounds: `D` at the dual iterate and `D` at the
    /// dual point of `w` itself (Thm 1(b)); both are feasible, so either certifies.
    fn certificate(&mut self, p: &Problem<S>) -> Certificate {
        let w = &self.iterate.w;
        let primal = primal_value(p.data, &p.loss, p.lambda, w, self.intercept);
        let at_iterate = dual_value(
            p.data,
            &p.loss,
            p.lambda,
            p.k,
            &self.alpha,
            &mut self.dual_scratch,
        );
        let at_primal = p.dual_of_model(
            p.k,
            w,
            self.intercept,
            &mut self.alpha_from_primal,
            &mut self.dual_scratch,
        );
        Certificate::new(primal, at_iterate.max(at_primal), p.data.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
