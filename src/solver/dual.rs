//! DIHT and SDIHT: dual projected super-gradient ascent with primal hard thresholding
//! (dual-iht.md, Algorithm 1 and Algorithm 2).
//!
//! State: the dual vector `alpha` (one entry per sample), the *unscaled* accumulation
//! `z = sum_i alpha_i x_i` (so `w~ = -z / (lambda N)`, eq. 4.4, and a change of `N` costs nothing), and the
//! primal `w = H_k(w~)` (S2.2). One block step (eq. 4.3) updates the duals of one block:
//! `alpha_j <- P_F(alpha_j + eta_j g_j)`, `g_j = (x_j.w - l*'(alpha_j)) / N`, then `z += sum (delta_j) x_j`
//! and re-thresholds. `blocks = 1` is DIHT; an epoch is `m` block steps with blocks drawn uniformly at
//! random from a fixed, seeded partition.
//!
//! Step sizes: see [`StepRule`]. The default (`Adaptive`) scales each coordinate by its Newton step and
//! backtracks on `D(alpha)`, which costs one extra `H_k` per rejected try but needs no tuning.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::objective::{
    best_intercept, conjugate_sum, dual_of_primal, dual_value, margins_into, primal_value,
    project_rows_with_sum, sq_norm, DualScratch,
};
use super::{Certificate, ModelView, Problem, ProblemError, Solver, StepRule};
use crate::sample::SampleSet;
use crate::sparse::{hard_threshold, sparse_axpy, sparse_dot, sparse_sq_norm, ThresholdScratch};

/// Backtracking halvings tried before a block step is taken anyway (the dual is concave but not smooth,
/// so at a kink no step may increase it; the gap stays valid for any feasible `alpha`).
const MAX_BACKTRACK: usize = 12;
/// Recompute `z` and the conjugate sum from scratch this often (in epochs) so rounding cannot drift.
const REFRESH_EPOCHS: usize = 16;

/// DIHT (`blocks = 1`) / SDIHT (`blocks = m`).
#[derive(Debug, Clone)]
pub struct Sdiht {
    blocks: usize,
    step: StepRule,
    rng: ChaCha8Rng,
    /// Sample order; block `b` is `order[bounds[b]..bounds[b+1]]`.
    order: Vec<usize>,
    bounds: Vec<usize>,
    alpha: Vec<f64>,
    /// `z = sum_i alpha_i x_i`, unscaled.
    z: Vec<f64>,
    /// `sum_i l_i*(alpha_i)`, kept in step with `alpha`.
    conj_sum: f64,
    /// Current `D(alpha)`.
    dual: f64,
    w: Vec<f64>,
    support: Vec<u32>,
    intercept: f64,
    /// Backtracking scale `s` of the adaptive rule.
    scale: f64,
    /// Block steps taken (the paper's `t`).
    steps: usize,
    epochs: usize,
    /// `||x_i||^2` per sample.
    sq_norms: Vec<f64>,
    // Scratch, reused so block steps never allocate.
    old_alpha: Vec<f64>,
    new_alpha: Vec<f64>,
    trial_w: Vec<f64>,
    trial_support: Vec<u32>,
    threshold: ThresholdScratch,
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
        let d = problem.data.dim();
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
            z: vec![0.0; d],
            conj_sum: 0.0,
            dual: 0.0,
            w: vec![0.0; d],
            support: Vec::new(),
            intercept: 0.0,
            scale: 1.0,
            steps: 0,
            epochs: 0,
            sq_norms,
            old_alpha: Vec::new(),
            new_alpha: Vec::new(),
            trial_w: Vec::new(),
            trial_support: Vec::new(),
            threshold: ThresholdScratch::default(),
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
        self.z.iter_mut().for_each(|v| *v = 0.0);
        for i in 0..p.data.len() {
            let r = p.data.row(i);
            sparse_axpy(self.alpha[i], r.indices, r.values, &mut self.z);
        }
        self.conj_sum = conjugate_sum(p.data, &p.loss, &self.alpha);
        let scale = -1.0 / (p.lambda * p.n());
        threshold_scaled(
            &self.z,
            scale,
            p.k,
            &mut self.w,
            &mut self.support,
            &mut self.threshold,
        );
        self.dual = -self.conj_sum / p.n() - 0.5 * p.lambda * sq_norm(&self.w);
    }

    /// Eq. (4.3)-(4.4) and S2.2 on block `b`.
    fn block_step<S: SampleSet>(&mut self, p: &Problem<S>, b: usize) {
        let rows = &self.order[self.bounds[b]..self.bounds[b + 1]];
        let n = p.n();
        let lambda_n = p.lambda * n;
        self.old_alpha.clear();
        self.old_alpha.extend(rows.iter().map(|&i| self.alpha[i]));
        // N * g_j for each row, against the current w (computed once; the tries only rescale it).
        self.margins.clear();
        self.margins.extend(rows.iter().map(|&i| {
            let r = p.data.row(i);
            sparse_dot(r.indices, r.values, &self.w) + self.intercept
        }));
        let tries = if self.step == StepRule::Adaptive {
            MAX_BACKTRACK
        } else {
            1
        };
        for attempt in 0..tries {
            self.new_alpha.clear();
            for (pos, &i) in rows.iter().enumerate() {
                let r = p.data.row(i);
                let loss = p.loss.sample(r.label, r.weight);
                let a = self.old_alpha[pos];
                let ng = self.margins[pos] - loss.conjugate_derivative(a);
                let step = match self.step {
                    StepRule::Adaptive => {
                        let curvature = loss.conjugate_curvature(a) + self.sq_norms[i] / lambda_n;
                        self.scale / curvature.max(1e-300)
                    }
                    StepRule::Theory => {
                        let mu = smoothness_mu(p);
                        self.blocks as f64 / (mu * (self.steps + 1) as f64)
                    }
                    StepRule::Constant(eta) => eta / n,
                };
                let moved = if ng == 0.0 {
                    a
                } else {
                    loss.project(a + step * ng)
                };
                self.new_alpha.push(moved);
            }
            if p.intercept {
                // Keep sum(alpha) = 0: the block's sum is preserved, so the global one is too.
                let target: f64 = self.old_alpha.iter().sum();
                project_rows_with_sum(&p.loss, &mut self.new_alpha, target, |pos| {
                    let r = p.data.row(rows[pos]);
                    (r.label, r.weight)
                });
            }
            let mut conj_delta = 0.0;
            for (pos, &i) in rows.iter().enumerate() {
                let r = p.data.row(i);
                let loss = p.loss.sample(r.label, r.weight);
                let delta = self.new_alpha[pos] - self.old_alpha[pos];
                if delta != 0.0 {
                    sparse_axpy(delta, r.indices, r.values, &mut self.z);
                    conj_delta +=
                        loss.conjugate(self.new_alpha[pos]) - loss.conjugate(self.old_alpha[pos]);
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
            // The change of D, summed as differences so that its sign is exact near the optimum (a
            // difference of two large sums would accept rounding-level decreases and oscillate).
            let norm_change: f64 = self
                .trial_w
                .iter()
                .zip(&self.w)
                .map(|(t, w)| (t - w) * (t + w))
                .sum();
            let dual_change = -conj_delta / n - 0.5 * p.lambda * norm_change;
            let last = attempt + 1 == tries;
            if dual_change >= 0.0 || last {
                let trial_dual = self.dual + dual_change;
                for (pos, &i) in rows.iter().enumerate() {
                    self.alpha[i] = self.new_alpha[pos];
                }
                self.conj_sum += conj_delta;
                self.dual = trial_dual;
                std::mem::swap(&mut self.w, &mut self.trial_w);
                std::mem::swap(&mut self.support, &mut self.trial_support);
                if attempt == 0 && self.step == StepRule::Adaptive {
                    self.scale = (self.scale * 2.0).min(1.0);
                }
                break;
            }
            // Reject: undo the change to z and try a smaller step.
            for (pos, &i) in rows.iter().enumerate() {
                let r = p.data.row(i);
                let delta = self.new_alpha[pos] - self.old_alpha[pos];
                if delta != 0.0 {
                    sparse_axpy(-delta, r.indices, r.values, &mut self.z);
                }
            }
            self.scale *= 0.5;
        }
        self.steps += 1;
    }
}

/// `mu` of a `1/mu`-smooth loss, for the theory step.
fn smoothness_mu<S: SampleSet>(p: &Problem<S>) -> f64 {
    1.0 / p.loss.smoothness()
}

/// `out = H_k(scale * z)` without materialising `scale * z` (`H_k` commutes with a uniform scaling).
fn threshold_scaled(
    z: &[f64],
    scale: f64,
    k: usize,
    out: &mut Vec<f64>,
    support: &mut Vec<u32>,
    scratch: &mut ThresholdScratch,
) {
    hard_threshold(z, k, out, support, scratch);
    for &j in support.iter() {
        out[j as usize] *= scale;
    }
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
            margins_into(p.data, &self.w, &mut self.margins);
            self.intercept = best_intercept(p.data, &p.loss, &self.margins);
        }
    }

    fn model(&self) -> ModelView<'_> {
        ModelView {
            weights: &self.w,
            support: &self.support,
            intercept: self.intercept,
        }
    }

    /// `P(w, b)` against the larger of two valid lower bounds: `D` at the dual iterate and `D` at the
    /// dual point of `w` itself (Thm 1(b)); both are feasible, so either certifies.
    fn certificate(&mut self, p: &Problem<S>) -> Certificate {
        let primal = primal_value(p.data, &p.loss, p.lambda, &self.w, self.intercept);
        let at_iterate = dual_value(
            p.data,
            &p.loss,
            p.lambda,
            p.k,
            &self.alpha,
            &mut self.dual_scratch,
        );
        dual_of_primal(
            p.data,
            &p.loss,
            &self.w,
            self.intercept,
            p.intercept,
            &mut self.alpha_from_primal,
        );
        let at_primal = dual_value(
            p.data,
            &p.loss,
            p.lambda,
            p.k,
            &self.alpha_from_primal,
            &mut self.dual_scratch,
        );
        Certificate::new(primal, at_iterate.max(at_primal), p.data.len())
    }
}
