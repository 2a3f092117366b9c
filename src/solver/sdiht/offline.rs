//! DIHT (`blocks = 1`) and SDIHT (`blocks = m`) as an offline [`Solver`] on an in-memory data set: the
//! seeded partition into blocks, the epoch (each block once in a random order with the coordinate
//! rule, `m` random blocks with the paper's rules), the intercept refit after each epoch, the
//! certificate and the warm starts — around [`super`]'s block step.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::intercept::newton_intercept;
use super::{theory_step, BlockStep, DualIterate};
use crate::sample::{DualRows, Row, SampleSet};
use crate::solver::objective::{
    fused_certificate_with_intercept, masked_margins_into, CertificateScratch,
};
use crate::solver::{Certificate, ModelView, Problem, ProblemError, Solver, StepRule, WarmStart};
use crate::sparse::sparse_sq_norm;

/// Recompute `z` and the conjugate sum from scratch this often (in epochs) so rounding cannot drift.
const REFRESH_EPOCHS: usize = 16;

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
    #[inline(always)]
    fn prefetch_meta(&self, i: usize) {
        self.data.prefetch_meta(i);
        crate::sparse::prefetch(self.alpha, i);
    }
    fn dim(&self) -> usize {
        self.data.dim()
    }
    fn mass(&self) -> f64 {
        self.data.mass()
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

/// The fewest rows a block of [`coordinate_blocks`] holds.
pub const MIN_BLOCK_ROWS: usize = 16;

/// The coordinate rule's block count for `rows` rows holding `nnz` nonzeros over `dim` columns:
/// blocks of `dim / (nnz / rows)` rows, between [`MIN_BLOCK_ROWS`] and [`DEFAULT_BLOCK_SAMPLES`], and
/// at least 2 blocks (one block is DIHT) but no more than `rows`.
///
/// Why `d / nnz` rows: such a block touches about `d` column slots, so a column is, on average, hit
/// by about one of its rows — the case in which the coordinate rule is nearly exact (each row's step
/// assumes the others leave its columns alone; off the support they do not see each other at all).
/// Larger blocks pile unseen changes into `z` until `H_k` swaps the support and the acceptance rule
/// drops the block's work whole: one block of a whole text file (DIHT) stalled at `w = 0` on 6,460
/// tweets (d = 22,510, 27 nonzeros a row) at lambda 1e-6, where blocks of 833 rows reach primal 0.34
/// (`docs/benchmarks/quality.md`). And the once-per-block `H_k` over `d` then costs about as much as
/// the block's own rows, so an epoch costs at most about twice its data pass.
pub fn coordinate_blocks(rows: usize, nnz: usize, dim: usize) -> usize {
    if rows == 0 {
        return 1;
    }
    let per_row = (nnz as f64 / rows as f64).max(1.0);
    let block = (dim as f64 / per_row).clamp(MIN_BLOCK_ROWS as f64, DEFAULT_BLOCK_SAMPLES as f64);
    (rows as f64 / block).ceil().max(2.0).min(rows as f64) as usize
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
    certificate_scratch: CertificateScratch,
    /// `w.x_i` of every row at the end of the last epoch (the intercept's refit needs them).
    margins: Vec<f64>,
    /// `margins` are those of the current `w`: the certificate reads them instead of a walk of
    /// dot products.
    margins_fresh: bool,
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
        iterate.rethreshold(problem.data.mass(), problem.lambda, problem.k);
        Ok(Sdiht {
            blocks,
            step,
            rng,
            order,
            bounds,
            block_order: Vec::new(),
            alpha: {
                let alpha = vec![0.0; n];
                crate::sparse::advise(&alpha);
                alpha
            },
            iterate,
            steps: 0,
            epochs: 0,
            certificate_scratch: CertificateScratch::default(),
            margins: Vec::new(),
            margins_fresh: false,
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
        self.margins_fresh = false;
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

impl<S: SampleSet> Solver<S> for Sdiht {
    fn spread_certificate(&mut self, spread: std::sync::Arc<dyn crate::solver::spread::Spread>) {
        self.certificate_scratch.spread = Some(spread);
    }

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
        self.margins_fresh = false;
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
            let it = &mut self.iterate;
            masked_margins_into(
                p.data,
                &it.w,
                &it.support,
                &mut it.coord_mask,
                &mut self.margins,
            );
            self.margins_fresh = true;
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
        self.margins_fresh = false;
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
    /// hold `alpha_i = 0`, which is feasible. One fused walk without an intercept, two with one (both
    /// dual points projected exactly onto `sum alpha = 0`: the iterate's sum is 0 only to the rounding
    /// of its shifts), by [`fused_certificate_with_intercept`].
    fn certificate(&mut self, p: &Problem<S>) -> Certificate {
        let it = &self.iterate;
        fused_certificate_with_intercept(
            p.data,
            &p.loss,
            p.lambda,
            p.k,
            (&it.w, &it.support, p.intercept.then_some(it.intercept)),
            Some(&self.alpha),
            self.margins_fresh.then_some(&self.margins[..]),
            &mut self.certificate_scratch,
        )
        .certificate(p.data.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loss::{Loss, LossKind};
    use crate::sample::{Dataset, Sample};
    use crate::solver::objective::{dual_value, primal_value, DualScratch};
    use crate::synth::sparse_stream;

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
            for kind in LossKind::ALL {
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

    /// Blocks of about `d / nnz` rows, clamped, never fewer than 2 nor more than the rows.
    #[test]
    fn coordinate_blocks_hold_about_d_over_nnz_rows() {
        // 6,460 tweets, 27 nonzeros a row, d = 22,510: blocks of 833 rows.
        assert_eq!(coordinate_blocks(6460, 6460 * 27, 22_510), 8);
        // d = 2^20, 40 nonzeros a row: the 4096-row ceiling.
        assert_eq!(coordinate_blocks(1_000_000, 40_000_000, 1 << 20), 245);
        // Long documents, d / nnz = 31: the 31-row blocks of a small file.
        assert_eq!(coordinate_blocks(142, 142 * 603, 18_536), 5);
        // Dense rows: the 16-row floor; tiny files: 2 blocks, at most one per row.
        assert_eq!(coordinate_blocks(400, 400 * 40, 40), 25);
        assert_eq!(coordinate_blocks(10, 100, 10_000), 2);
        assert_eq!(coordinate_blocks(1, 3, 10), 1);
        assert_eq!(coordinate_blocks(0, 0, 10), 1);
    }

    /// A trial that produces a non-finite value is dropped and counted; the state is unchanged, with
    /// the large row in a block of its own (two blocks) and beside a finite row (one block). Regression
    /// for the second: such a trial is never scattered into `z`, so its undo must not subtract the
    /// finite row's change either (it did, leaving `z` off by it while the duals stayed).
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
        for blocks in [2, 1] {
            let mut s = Sdiht::new(&p, blocks, StepRule::Coordinate, 0).unwrap();
            let before = (s.alpha.clone(), s.iterate.z.clone(), s.iterate.dual);
            // The block that holds row 1, the large one.
            let big = if blocks == 1 || s.order[0] == 1 { 0 } else { 1 };
            s.block_step(&p, big);
            assert_eq!(s.iterate.numeric_faults, 1, "{blocks} blocks");
            assert_eq!(
                (s.alpha.clone(), s.iterate.z.clone(), s.iterate.dual),
                before,
                "{blocks} blocks"
            );
            assert!(s.iterate.w.iter().all(|v| v.is_finite()));
        }
    }
}
