//! SMIDAS — Stochastic MIrror Descent Made Sparse (Shalev-Shwartz & Tewari 2011; sparse-mirror-descent.md
//! Alg. 4.1): the l1 prior art of sparse mirror descent, on `P(w, b) + l1 ||w||_1`.
//!
//! State is the mirror-space vector `theta`; the weights are `w = grad psi*(theta)` with the p-norm link
//! `psi* = (1/2)||theta||_p^2`, `p = max(2, 2 ln d)`, i.e. `w_j = sign(theta_j) |theta_j|^{p-1} / ||theta||_p^{p-2}`.
//! One step on sample `i`:
//! 1. `theta <- theta - eta_t (l'(w.x_i + b) x_i + lambda w)` (gradient step in the mirror space);
//! 2. `theta_j <- sign(theta_j) max(0, |theta_j| - eta_t l1)` for every `j` (soft-thresholding in the
//!    mirror space: the l1 step, which is what makes `theta`, hence `w`, sparse);
//! 3. the intercept takes a plain SGD step.
//!
//! Only `supp(theta) ∪ supp(x_i)` changes, so a step costs `O(|supp theta| + nnz(x_i))`: the norm
//! and the weights take a power per active coordinate. The weights are kept from the last step
//! (`live`), so a margin costs no power. The streaming learner takes the steps in batches with the
//! weights held for a batch ([`SmidasState::step_batch`]), which spreads the O(|supp theta|) part over
//! the batch; `fit` steps sample by sample.
//!
//! The model is sparse but **not k-sparse**: its support size is whatever `l1` produces. It is certified
//! like every primal solver (`alpha_i = l'(w.x_i + b)` projected, `D(alpha)`, gap on `P` without the l1
//! term), with the dual's `H_k` taken at `k' = max(k, |supp w|)`: weak duality holds for `k'`-sparse models,
//! so the gap stays a valid bound for the sparsity SMIDAS actually uses.
//!
//! Step: the shared [`MirrorStep`] schedule (default `Auto`, as for p-norm mirror descent, with the
//! link's gain taken at the problem's `k`: the support size the l1 strength is meant to produce).
//!
//! [`SmidasState`] is the state advanced sample by sample, with its exact export and restore (what a
//! streaming learner's checkpoint holds); [`Smidas`] drives it as a [`Solver`].

use super::mirror::maps::{lp_norm, soft};
use super::mirror::pending::PendingGradient;
use super::mirror::state::checkpoint_dim;
use super::mirror::{MirrorError, MirrorMap, MirrorStep, PrimalPass, StepClock, DEFAULT_HORIZON};
use super::{Certificate, ModelView, Problem, Solver};
use crate::loss::Loss;
use crate::sample::{Row, SampleSet};
use crate::sparse::{grow_dense, sparse_sq_norm};

/// The streaming learner's default samples per step ([`SmidasState::step_batch`], config key
/// `batch = 0`): measured on the W3-like stream (`docs/benchmarks/learners.md`).
pub const STREAM_BATCH: usize = 256;

/// The SMIDAS state, advanced one sample at a time.
#[derive(Debug, Clone)]
pub struct SmidasState {
    p: f64,
    l1: f64,
    step: MirrorStep,
    loss: Loss,
    lambda: f64,
    fit_intercept: bool,
    theta: Vec<f64>,
    /// Indices `j` with `theta_j != 0` (unordered).
    active: Vec<u32>,
    is_active: Vec<bool>,
    /// `||theta||_p`.
    norm: f64,
    intercept: f64,
    /// Steps taken and the running `max_i c_i ||x_i||^2` over the rows seen.
    clock: StepClock,
    horizon: u64,
    /// The link's gain the `Auto` step divides by (see [`SmidasState::set_sparsity_hint`]).
    gain: f64,
    /// `grad psi*(theta)` materialised for [`SmidasState::model`]; refreshed by [`SmidasState::sync`].
    w: Vec<f64>,
    /// `grad psi*(theta)` as of the last step: `weight(theta_j)` on `active`, 0 elsewhere. The margins
    /// and the ridge term read it instead of taking a power per coordinate (the same values, bit for
    /// bit: one `powf` per active weight per step, not one per nonzero of every row as well).
    live: Vec<f64>,
    /// Samples per step of [`SmidasState::step_batch`] (1: Alg. 4.1 sample by sample).
    batch: usize,
    /// The mini-batch's summed `l'(u_i) x_i` ([`SmidasState::step_batch`]).
    grad: PendingGradient,
    support: Vec<u32>,
    active_values: Vec<f64>,
    /// Samples whose step would have written a non-finite value (rejected, state unchanged).
    numeric_faults: u64,
}

impl SmidasState {
    /// A state at `theta = 0` for features `0..dim`, with `p = max(2, 2 ln dim)`.
    pub fn new(
        l1: f64,
        step: MirrorStep,
        loss: Loss,
        lambda: f64,
        fit_intercept: bool,
        dim: usize,
    ) -> Result<SmidasState, MirrorError> {
        if !(l1.is_finite() && l1 > 0.0) {
            return Err(MirrorError::BadL1(l1));
        }
        let MirrorMap::PNorm { p } = MirrorMap::pnorm_for_dim(dim) else {
            unreachable!()
        };
        let state = SmidasState {
            p,
            l1,
            step,
            loss,
            lambda,
            fit_intercept,
            theta: vec![0.0; dim],
            active: Vec::new(),
            is_active: vec![false; dim],
            norm: 0.0,
            intercept: 0.0,
            clock: StepClock::default(),
            horizon: DEFAULT_HORIZON,
            gain: p - 1.0,
            w: vec![0.0; dim],
            live: vec![0.0; dim],
            batch: 1,
            grad: PendingGradient::default(),
            support: Vec::new(),
            active_values: Vec::new(),
            numeric_faults: 0,
        };
        crate::solver::mirror::MirrorConfig {
            step,
            ..crate::solver::mirror::MirrorConfig::new(MirrorMap::PNorm { p })
        }
        .validate()?;
        Ok(state)
    }

    pub fn p(&self) -> f64 {
        self.p
    }

    /// Number of nonzero weights.
    pub fn support_size(&self) -> usize {
        self.active.len()
    }

    pub fn observe_row_bound(&mut self, sq_norm: f64) {
        self.clock.observe(sq_norm);
    }

    /// `eta_t` of the next step: the p-norm mirror state's schedule.
    pub fn step_size(&self) -> f64 {
        self.step_at(&self.clock)
    }

    /// `eta_t` at `clock`: a step takes its own rows into the running row bound before its size is
    /// set, so a stream's first step is not sized by `lambda` alone (at `row_sq_max = 0` the bound
    /// `1 / lambda` sent the daemon's first mini-batch to weights of 10^4 and the model never came
    /// back).
    fn step_at(&self, clock: &StepClock) -> f64 {
        let smoothness = self.loss.smoothness() * clock.row_sq_max + self.lambda;
        self.step.at(
            clock.steps,
            self.gain,
            smoothness,
            self.lambda,
            self.horizon,
        )
    }

    /// Scales the `Auto` step to the p-norm link's gain at `k` nonzero weights
    /// ([`MirrorMap::dual_scale`]); without a hint the state assumes the worst case `k = 1` (gain `p - 1`).
    pub fn set_sparsity_hint(&mut self, k: usize) {
        self.gain = MirrorMap::PNorm { p: self.p }.dual_scale(k);
    }

    /// Steps after which the `Auto` step has halved (default [`DEFAULT_HORIZON`]).
    pub fn set_horizon(&mut self, steps: u64) {
        self.horizon = steps.max(1);
    }

    /// `w_j` from `theta_j` under the current norm.
    #[inline]
    fn weight(&self, t: f64) -> f64 {
        if t == 0.0 {
            0.0
        } else {
            t.signum() * self.norm * (t.abs() / self.norm).powf(self.p - 1.0)
        }
    }

    /// `w.x + b` for one row.
    pub fn score(&self, row: Row<'_>) -> f64 {
        let mut acc = self.intercept;
        for (&j, &v) in row.indices.iter().zip(row.values) {
            if let Some(&w) = self.live.get(j as usize) {
                acc += v * w;
            }
        }
        acc
    }

    /// Samples per step of [`SmidasState::step_batch`].
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Sets the samples per step of [`SmidasState::step_batch`] (at least 1).
    pub fn set_batch(&mut self, batch: usize) {
        self.batch = batch.max(1);
    }

    /// `||theta||_p` over `active`, and `live` on `active` from it (coordinates that left `active`
    /// were zeroed as they left).
    fn refresh_live(&mut self) {
        self.active_values.clear();
        self.active_values
            .extend(self.active.iter().map(|&j| self.theta[j as usize]));
        self.norm = lp_norm(&self.active_values, self.p);
        for pos in 0..self.active.len() {
            let j = self.active[pos] as usize;
            self.live[j] = self.weight(self.theta[j]);
        }
    }

    fn ensure_dim(&mut self, dim: usize) {
        if dim > self.theta.len() {
            // Lazily zeroed room (`grow_dense`): a large feature index costs no resident memory.
            grow_dense(&mut self.theta, dim);
            self.is_active.resize(dim, false);
            grow_dense(&mut self.w, dim);
            grow_dense(&mut self.live, dim);
        }
    }

    /// Samples whose step was rejected for a non-finite value.
    pub fn numeric_faults(&self) -> u64 {
        self.numeric_faults
    }

    /// One step of Alg. 4.1 on one sample. A sample whose step would write a non-finite mirror-space
    /// value or intercept is rejected before anything changes and counted in
    /// [`SmidasState::numeric_faults`].
    pub fn step_sample(&mut self, row: Row<'_>) {
        if let Some(&last) = row.indices.last() {
            self.ensure_dim(last as usize + 1);
        }
        let row_sq = row.weight * sparse_sq_norm(row.values);
        let margin = self.score(row);
        let dl = self.loss.sample(row.label, row.weight).derivative(margin);
        let mut clock = self.clock;
        clock.observe(row_sq);
        let eta = self.step_at(&clock);
        let finite = row_sq.is_finite()
            && (eta * dl).is_finite()
            && (!self.fit_intercept || (self.intercept - eta * dl).is_finite())
            && row.indices.iter().zip(row.values).all(|(&j, &v)| {
                let j = j as usize;
                (self.theta[j] - eta * self.lambda * self.live[j] - eta * dl * v).is_finite()
            })
            && self.active.iter().all(|&j| {
                let j = j as usize;
                (self.theta[j] - eta * self.lambda * self.live[j]).is_finite()
            });
        if !finite {
            self.numeric_faults += 1;
            return;
        }
        self.clock = clock;
        // Ridge part of the gradient, against the weights before this step.
        self.ridge(eta * self.lambda);
        if dl != 0.0 {
            for (&j, &v) in row.indices.iter().zip(row.values) {
                self.theta[j as usize] -= eta * dl * v;
                self.activate(j);
            }
        }
        self.soft_threshold(eta * self.l1);
        self.refresh_live();
        if self.fit_intercept {
            self.intercept -= eta * dl;
        }
        self.clock.steps += 1;
    }

    /// The ridge part of the gradient on every active coordinate, `scale * w_j` (`scale` = the step
    /// times `lambda`), against the weights before the step.
    fn ridge(&mut self, scale: f64) {
        if self.lambda > 0.0 {
            for pos in 0..self.active.len() {
                let j = self.active[pos] as usize;
                self.theta[j] -= scale * self.live[j];
            }
        }
    }

    fn activate(&mut self, j: u32) {
        if !self.is_active[j as usize] {
            self.is_active[j as usize] = true;
            self.active.push(j);
        }
    }

    /// Step 2 of the module docs on every active coordinate; a coordinate that reaches 0 leaves
    /// `active` (and its live weight becomes 0).
    fn soft_threshold(&mut self, threshold: f64) {
        let mut pos = 0;
        while pos < self.active.len() {
            let j = self.active[pos] as usize;
            self.theta[j] = soft(self.theta[j], threshold);
            if self.theta[j] == 0.0 {
                self.is_active[j] = false;
                self.live[j] = 0.0;
                self.active.swap_remove(pos);
            } else {
                pos += 1;
            }
        }
    }

    /// Alg. 4.1's steps on a mini-batch of `B` samples with the weights held for the batch (delayed
    /// updates): every row's margin against the weights before the step, then
    /// `theta <- theta - eta (sum_i l'(u_i) x_i + B lambda w)`, the soft threshold by `B eta l1` and the
    /// intercept's step on `sum_i l'(u_i)`; the schedule counts `B` steps. With `B = 1` these are the
    /// per-sample step's operations ([`SmidasState::step_sample`], which the offline solver keeps). A
    /// row with a non-finite margin, loss derivative or norm is rejected and counted in
    /// [`SmidasState::numeric_faults`]; a step that would write a non-finite value is rejected whole
    /// (every row of it counted), the state unchanged.
    ///
    /// Why: a step costs O(|active|) powers (the norm and the weights) whatever its batch, and on the
    /// W3-like stream at the daemon's default `l1` some 10 000 weights are active, so sample by sample
    /// the streaming learner learned a few hundred samples per 5 ms step and served a chance model.
    /// The sum, not the mean: a batch then moves `theta` as far as its samples would one by one, and
    /// one pass over a window learns as much (`docs/benchmarks/learners.md`).
    pub fn step_batch<'r>(&mut self, rows: impl IntoIterator<Item = Row<'r>>) {
        let mut clock = self.clock;
        self.grad.clear();
        let (mut count, mut dl_sum) = (0usize, 0.0);
        for row in rows {
            if let Some(&last) = row.indices.last() {
                self.ensure_dim(last as usize + 1);
            }
            let row_sq = row.weight * sparse_sq_norm(row.values);
            let dl = self
                .loss
                .sample(row.label, row.weight)
                .derivative(self.score(row));
            if !(row_sq.is_finite() && dl.is_finite()) {
                self.numeric_faults += 1;
                continue;
            }
            clock.observe(row_sq);
            if dl != 0.0 {
                for (&j, &v) in row.indices.iter().zip(row.values) {
                    self.grad.add(j, dl * v);
                }
            }
            dl_sum += dl;
            count += 1;
        }
        if count == 0 {
            return;
        }
        let eta = self.step_at(&clock);
        let ridge = eta * self.lambda * count as f64;
        // Every new value, checked before anything is written: the touched coordinates' into the
        // batch's sums (from `theta` before the ridge step, which they include), the others' ridge.
        let mut finite = !self.fit_intercept || (self.intercept - eta * dl_sum).is_finite();
        for p in 0..self.grad.len() {
            let j = self.grad.coords[p] as usize;
            let new = self.theta[j] - ridge * self.live[j] - eta * self.grad.sums[p];
            finite &= new.is_finite();
            self.grad.sums[p] = new;
        }
        finite &= self
            .active
            .iter()
            .all(|&j| (self.theta[j as usize] - ridge * self.live[j as usize]).is_finite());
        if !finite {
            self.numeric_faults += count as u64;
            self.grad.clear();
            return;
        }
        self.clock = clock;
        self.ridge(ridge);
        for p in 0..self.grad.len() {
            let j = self.grad.coords[p];
            self.theta[j as usize] = self.grad.sums[p];
            self.activate(j);
        }
        self.grad.clear();
        self.soft_threshold(eta * self.l1 * count as f64);
        self.refresh_live();
        if self.fit_intercept {
            self.intercept -= eta * dl_sum;
        }
        self.clock.steps += count as u64;
    }

    /// Materialises `w = grad psi*(theta)` and its support for [`SmidasState::model`].
    pub fn sync(&mut self) {
        for &j in &self.support {
            self.w[j as usize] = 0.0;
        }
        self.support.clear();
        self.support.extend_from_slice(&self.active);
        self.support.sort_unstable();
        for pos in 0..self.support.len() {
            let j = self.support[pos] as usize;
            self.w[j] = self.live[j];
        }
    }

    /// The model as of the last [`SmidasState::sync`].
    pub fn model(&self) -> ModelView<'_> {
        ModelView {
            weights: &self.w,
            support: &self.support,
            intercept: self.intercept,
        }
    }

    pub fn set_intercept(&mut self, b: f64) {
        self.intercept = b;
    }
}

impl SmidasState {
    /// The state with the p-norm link exponent `p >= 2` given explicitly (it replaces the `p` that
    /// [`SmidasState::new`] derived from `dim`).
    pub fn with_p(mut self, p: f64) -> Result<SmidasState, MirrorError> {
        if !(p.is_finite() && p >= 2.0) {
            return Err(MirrorError::BadP(p));
        }
        self.p = p;
        // The worst-case gain of this `p` until a sparsity hint (it kept the gain of the `p` derived
        // from `dim` before).
        self.gain = p - 1.0;
        Ok(self)
    }
}

/// The exact export and restore of the state, in the format of the mirror state
/// ([`crate::solver::mirror::state::MirrorState::coordinates`]), sized by the same rule
/// (`checkpoint_dim`): what a checkpoint of a streaming learner is made of.
impl SmidasState {
    /// `(j, w_j, theta_j)` for every nonzero weight, in the state's internal order: `||theta||_p` is a
    /// sum over that order, so keeping it makes a resumed state identical to the last bit.
    pub fn coordinates(&self) -> Vec<(u32, f64, f64)> {
        self.active
            .iter()
            .map(|&j| (j, self.live[j as usize], self.theta[j as usize]))
            .collect()
    }

    /// Where the step schedule stands (steps taken, running row curvature).
    pub fn clock(&self) -> StepClock {
        self.clock
    }

    /// Sizes the state for features `0..dim` (or more: one past the largest index `coordinates`
    /// names) and restores `theta` from the coordinates (weights are recomputed from it), dropping the
    /// model it held; zero or non-finite entries are skipped.
    pub fn resume(&mut self, dim: usize, coordinates: &[(u32, f64, f64)], clock: StepClock) {
        for &j in &self.active {
            self.theta[j as usize] = 0.0;
            self.live[j as usize] = 0.0;
            self.is_active[j as usize] = false;
        }
        self.active.clear();
        self.ensure_dim(checkpoint_dim(dim, coordinates));
        for &(j, _, theta) in coordinates {
            if theta != 0.0 && theta.is_finite() && !self.is_active[j as usize] {
                self.theta[j as usize] = theta;
                self.is_active[j as usize] = true;
                self.active.push(j);
            }
        }
        self.refresh_live();
        self.clock = clock;
        self.sync();
    }

    /// Rewinds the step schedule to at most one horizon (`t <- min(t, H)`), as
    /// [`crate::solver::mirror::state::MirrorState::rewind_schedule`].
    pub fn rewind_schedule(&mut self) {
        self.clock.steps = self.clock.steps.min(self.horizon);
    }
}

/// SMIDAS as a [`Solver`]: one epoch is one pass in a seeded random order.
#[derive(Debug, Clone)]
pub struct Smidas {
    state: SmidasState,
    pass: PrimalPass,
}

impl Smidas {
    pub fn new<S: SampleSet>(
        problem: &Problem<S>,
        l1: f64,
        step: MirrorStep,
        seed: u64,
    ) -> Result<Smidas, MirrorError> {
        let mut state = SmidasState::new(
            l1,
            step,
            problem.loss,
            problem.lambda,
            problem.intercept,
            problem.data.dim(),
        )?;
        let scale = super::mirror::mean_one_scale(problem.data);
        for i in 0..problem.data.len() {
            let r = problem.data.row(i).scaled(scale);
            state.observe_row_bound(r.weight * sparse_sq_norm(r.values));
        }
        state.set_horizon(problem.data.len() as u64);
        state.set_sparsity_hint(problem.k);
        Ok(Smidas {
            state,
            pass: PrimalPass::new(problem.data.len(), seed),
        })
    }

    pub fn state(&self) -> &SmidasState {
        &self.state
    }
}

impl<S: SampleSet> Solver<S> for Smidas {
    fn name(&self) -> &'static str {
        "smidas"
    }

    fn epoch(&mut self, p: &Problem<S>) {
        let scale = super::mirror::mean_one_scale(p.data);
        for &i in self.pass.shuffled() {
            self.state.step_sample(p.data.row(i).scaled(scale));
        }
        self.state.sync();
        if p.intercept {
            self.state.intercept = self.pass.best_intercept(p, &self.state.w);
        }
    }

    fn model(&self) -> ModelView<'_> {
        self.state.model()
    }

    /// Certified at `k' = max(k, |supp w|)` (see the module docs).
    fn certificate(&mut self, p: &Problem<S>) -> Certificate {
        let k = p.k.max(self.state.support.len());
        self.pass.certify(p, k, self.state.model())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loss::LossKind;
    use crate::sample::Dataset;
    use crate::solver::tests::{gap_trace, row};
    use crate::synth;

    #[test]
    fn smidas_is_sparse_certified_and_finds_the_truth() {
        let problem = synth::sparse_stream(1500, 200, 8, 16, 0.05, false, 21);
        let truth = problem.true_support();
        let data = Dataset::from_samples(&problem.samples, 200);
        let loss = Loss::new(LossKind::Squared, 0.0).unwrap();
        let p = Problem::new(&data, loss, 1e-3, truth.len(), false).unwrap();
        let mut solver = Smidas::new(&p, 0.5, MirrorStep::Auto, 3).unwrap();
        let trace = gap_trace(&p, &mut solver, 15);
        let support = Solver::<Dataset>::model(&solver).support.to_vec();
        assert!(
            trace[trace.len() - 1].0 < 0.5 * trace[0].0,
            "gap {:?}",
            trace
        );
        assert!(
            truth.iter().all(|j| support.contains(j)),
            "truth {truth:?} not in {support:?}"
        );
        assert!(
            support.len() < 200 / 2,
            "SMIDAS support {} is not sparse",
            support.len()
        );
        assert!(Smidas::new(&p, 0.0, MirrorStep::Auto, 0).is_err());
    }

    /// A sample whose step would write a non-finite value is rejected with the state unchanged, and
    /// counted.
    #[test]
    fn a_non_finite_sample_is_rejected_and_counted() {
        let loss = Loss::new(LossKind::Squared, 0.25).unwrap();
        let mut s = SmidasState::new(1e-3, MirrorStep::Constant(1.0), loss, 0.01, true, 4).unwrap();
        s.step_sample(row(&[0], &[1.0], 1.0));
        let before = (s.coordinates(), s.clock().steps);
        s.step_sample(row(&[2], &[1e300], 1e300));
        assert_eq!(s.numeric_faults(), 1);
        assert_eq!((s.coordinates(), s.clock().steps), before);
    }
}
