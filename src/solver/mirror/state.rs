//! [`MirrorState`]: the state of stochastic sparse mirror descent (the module docs of [`super`]) and its
//! step, advanced one sample ([`MirrorState::step_sample`]) or mini-batch ([`MirrorState::step_batch`])
//! at a time, growing with the feature space; with its exact export and restore
//! ([`MirrorState::coordinates`], [`MirrorState::resume`]). The offline solver
//! ([`super::MirrorDescent`]) and the streaming learner (`learner::mirror`) both drive it.

use super::greedy;
use super::pending::PendingGradient;
use super::{Constraint, Memory, MirrorConfig, MirrorError, MirrorMap, StepClock, DEFAULT_HORIZON};
use crate::loss::Loss;
use crate::sample::Row;
use crate::solver::ModelView;
use crate::sparse::{grow_dense, masked_dot, sparse_dot, sparse_sq_norm, zero_dense};

/// The dimension a state resumed from `coordinates` (`(j, w_j, theta_j)`) is sized for: `dim`, or one
/// past the largest index the checkpoint names if that is larger (entries later skipped as zero or
/// non-finite count too), so a checkpoint taken over a wider window than the restarted one still fits.
pub(crate) fn checkpoint_dim(dim: usize, coordinates: &[(u32, f64, f64)]) -> usize {
    let last = coordinates.iter().map(|c| c.0 as usize + 1).max();
    dim.max(last.unwrap_or(0))
}

/// The state of stochastic sparse mirror descent, advanced one sample or mini-batch at a time.
#[derive(Debug, Clone)]
pub struct MirrorState {
    config: MirrorConfig,
    loss: Loss,
    lambda: f64,
    k: usize,
    fit_intercept: bool,
    /// Dense weights, nonzero only on `support`.
    w: Vec<f64>,
    /// `grad psi(w)` on `support` (kept so the next step never inverts the map); off the support 0
    /// ([`Memory::Support`]) or the coordinate's accumulated mirror-space value as of `stamp[j]`
    /// ([`Memory::Dense`]).
    theta: Vec<f64>,
    /// [`Memory::Dense`]: `decay_log` when `theta[j]` was last brought up to date (empty otherwise).
    /// Meaningful only where `theta[j] != 0`: every write of a nonzero `theta[j]` writes its stamp, so
    /// new room is left zero and unwritten ([`grow_dense`]) like `w` and `theta`.
    stamp: Vec<f64>,
    /// [`Memory::Dense`]: `sum_s ln(1 - eta_s s_psi lambda)` over the steps taken: the ridge's shrink of
    /// an off-support coordinate between two touches is `exp(decay_log - stamp[j])`.
    decay_log: f64,
    /// Steps rejected because they produced a non-finite weight, mirror-space value or intercept (the
    /// state is left as before the step).
    numeric_faults: u64,
    support: Vec<u32>,
    intercept: f64,
    /// Steps taken and the running `max_i c_i ||x_i||^2` over the rows seen.
    clock: StepClock,
    /// `L_B` when the data set is known (overrides `clock.row_sq_max`).
    batch_curvature: Option<f64>,
    /// Samples accumulated into `grad` since the last step, and their summed intercept gradient.
    pending: usize,
    pending_intercept_grad: f64,
    /// Bit `j % 64` of word `j / 64` is set exactly for `j` in `support` (where `w` is nonzero): a
    /// margin reads a row's weight only where the mask (d/8 bytes, cache resident) says it is nonzero,
    /// instead of reading `w` (8d bytes) at 40-odd random places per sample ([`masked_dot`]).
    support_mask: Vec<u64>,
    /// The summed `l'(w.x_i + b) x_i` of the pending samples per coordinate; during a step, the
    /// candidates' mirror-space points.
    grad: PendingGradient,
    // Scratch, reused so that steps never allocate once the feature space stops growing.
    selected: Vec<u32>,
    keys: Vec<(std::cmp::Reverse<u64>, u32)>,
    sub_theta: Vec<f64>,
    sub_x: Vec<f64>,
}

impl MirrorState {
    /// A learner at `w = 0` for features `0..dim` (it grows when a row uses a larger index).
    pub fn new(
        config: MirrorConfig,
        loss: Loss,
        lambda: f64,
        k: usize,
        fit_intercept: bool,
        dim: usize,
    ) -> Result<MirrorState, MirrorError> {
        config.validate()?;
        Ok(MirrorState {
            config,
            loss,
            lambda,
            k,
            fit_intercept,
            w: vec![0.0; dim],
            theta: vec![0.0; dim],
            stamp: if config.memory == Memory::Dense {
                vec![0.0; dim]
            } else {
                Vec::new()
            },
            decay_log: 0.0,
            numeric_faults: 0,
            support: Vec::with_capacity(k),
            intercept: 0.0,
            clock: StepClock::default(),
            batch_curvature: None,
            pending: 0,
            pending_intercept_grad: 0.0,
            support_mask: vec![0; dim.div_ceil(64)],
            grad: PendingGradient::default(),
            selected: Vec::new(),
            keys: Vec::new(),
            sub_theta: Vec::with_capacity(k),
            sub_x: Vec::with_capacity(k),
        })
    }

    pub fn config(&self) -> &MirrorConfig {
        &self.config
    }

    /// Sets the `Auto` step's horizon (steps; at least 1). A streaming learner sets it to one pass over
    /// its window as the window grows.
    pub fn set_horizon(&mut self, steps: u64) {
        self.config.horizon = steps.max(1);
    }

    /// The smoothness `L = l''_max L_B + lambda` of a mini-batch gradient, which the `Auto` step uses.
    pub fn smoothness(&self) -> f64 {
        self.loss.smoothness() * self.batch_curvature.unwrap_or(self.clock.row_sq_max) + self.lambda
    }

    /// Fixes `L_B`, the curvature of a mini-batch of `X^T C X / |B|` (see the module docs); without it
    /// the learner uses the largest `c_i ||x_i||^2` seen, which is safe for any batch.
    pub fn set_batch_curvature(&mut self, curvature: f64) {
        if curvature.is_finite() && curvature > 0.0 {
            self.batch_curvature = Some(curvature);
        }
    }

    /// Tells the learner the largest `c_i ||x_i||^2` it will see (offline: the data set's), so that the
    /// first `Auto` steps are already safe; streaming learners discover it row by row instead.
    pub fn observe_row_bound(&mut self, sq_norm: f64) {
        self.clock.observe(sq_norm);
    }

    /// The `s_psi` the `Auto` step divides by: [`MirrorMap::dual_scale`] at the sparsity `k`; with
    /// [`Memory::Dense`] and the hyperbolic entropy, its local gain at the current weights,
    /// `max_j d(beta sinh theta_j)/d theta_j = sqrt(beta^2 + ||w||_inf^2)`: a mirror step `eta` moves
    /// `w_j` like a Euclidean step `eta sqrt(beta^2 + w_j^2)`, so once weights outgrow `beta` the
    /// fixed `beta` makes the largest weights take steps far above `1/L` (measured on trump_tweets, k = 100,
    /// beta = 1: relative gap stuck at ~0.14 after 20 s; with the local gain it falls like Euclidean's).
    fn gain(&self) -> f64 {
        match self.config.map {
            MirrorMap::HypEntropy { beta } if self.config.memory == Memory::Dense => {
                let w_max = self
                    .support
                    .iter()
                    .fold(0.0f64, |m, &j| m.max(self.w[j as usize].abs()));
                beta.hypot(w_max)
            }
            map => map.dual_scale(self.k),
        }
    }

    /// `eta_t` of the next step (mirror-space units).
    pub fn step_size(&self) -> f64 {
        self.config.step.at(
            self.clock.steps,
            self.gain(),
            self.smoothness(),
            self.lambda,
            self.horizon(),
        )
    }

    /// The `Auto` step's horizon `H` in steps: the configured one, or [`DEFAULT_HORIZON`] for 0.
    fn horizon(&self) -> u64 {
        if self.config.horizon == 0 {
            DEFAULT_HORIZON
        } else {
            self.config.horizon
        }
    }

    pub fn model(&self) -> ModelView<'_> {
        ModelView {
            weights: &self.w,
            support: &self.support,
            intercept: self.intercept,
        }
    }

    /// `w.x + b` for one row: through the support mask ([`masked_dot`], the same sum bit for bit) when
    /// the mask covers the row, else (a row past the state's dimension) the dense walk, which reads
    /// the missing weights as zero.
    pub fn score(&self, row: Row<'_>) -> f64 {
        let covered = row
            .indices
            .last()
            .is_none_or(|&j| (j as usize / 64) < self.support_mask.len());
        let dot = if covered {
            masked_dot(row.indices, row.values, &self.w, &self.support_mask)
        } else {
            sparse_dot(row.indices, row.values, &self.w)
        };
        dot + self.intercept
    }

    pub fn set_intercept(&mut self, b: f64) {
        self.intercept = b;
    }

    fn ensure_dim(&mut self, dim: usize) {
        if dim > self.w.len() {
            // Lazily zeroed room (`grow_dense`): a large feature index costs no resident memory.
            grow_dense(&mut self.w, dim);
            grow_dense(&mut self.theta, dim);
            if self.config.memory == Memory::Dense {
                // Not `resize(dim, decay_log)`: writing the new room made one sample with a large
                // feature index (`1 16777215:1`) cost 134 MB of resident stamps per learner.
                grow_dense(&mut self.stamp, dim);
            }
            self.support_mask.resize(dim.div_ceil(64), 0);
        }
    }

    /// Sets (`on`) or clears the mask bits of the current support.
    fn mark_support(&mut self, on: bool) {
        for &j in &self.support {
            let bit = 1u64 << (j % 64);
            let word = &mut self.support_mask[j as usize / 64];
            *word = if on { *word | bit } else { *word & !bit };
        }
    }

    fn on_support(&self, j: usize) -> bool {
        self.support_mask[j / 64] >> (j % 64) & 1 == 1
    }

    /// Steps rejected for a non-finite value (see [`MirrorState::step_batch`]).
    pub fn numeric_faults(&self) -> u64 {
        self.numeric_faults
    }

    /// [`Memory::Dense`]: the off-support `theta_j` with the ridge shrink of the steps since it was
    /// last brought up to date, in primal units (`w~_j <- rho w~_j`, mapped back through the link).
    fn decayed_theta(&self, j: usize) -> f64 {
        let theta = self.theta[j];
        if theta == 0.0 || self.w[j] != 0.0 {
            return theta;
        }
        let keep = (self.decay_log - self.stamp[j]).exp();
        if keep >= 1.0 {
            return theta;
        }
        match self.config.map {
            MirrorMap::Euclidean | MirrorMap::PNorm { .. } => keep * theta,
            MirrorMap::HypEntropy { .. } => (keep * theta.sinh()).asinh(),
        }
    }

    /// Feeds one sample: its gradient (at the current weights) joins the pending mini-batch, and the
    /// step is taken once `config.batch` samples are pending — so a stream driven sample by sample gets
    /// the same iterates as [`MirrorState::step_batch`] on consecutive chunks. With `batch = 1` every
    /// call is one stochastic step.
    pub fn step_sample(&mut self, row: Row<'_>) {
        self.accumulate(row);
        if self.pending >= self.config.batch {
            self.apply();
        }
    }

    /// One step on a mini-batch (the gradient is the mean over `rows` and any samples still pending
    /// from [`MirrorState::step_sample`]). An empty batch does nothing.
    pub fn step_batch<'r>(&mut self, rows: impl IntoIterator<Item = Row<'r>>) {
        for row in rows {
            self.accumulate(row);
        }
        self.apply();
    }

    /// Takes the step for the samples pending from [`MirrorState::step_sample`], if any.
    pub fn flush(&mut self) {
        self.apply();
    }

    /// Samples fed but not yet stepped on.
    pub fn pending(&self) -> usize {
        self.pending
    }

    /// Adds `l'(w.x + b) x` of one row to the pending gradient.
    fn accumulate(&mut self, row: Row<'_>) {
        if let Some(&last) = row.indices.last() {
            self.ensure_dim(last as usize + 1);
        }
        self.clock.observe(row.weight * sparse_sq_norm(row.values));
        let margin =
            masked_dot(row.indices, row.values, &self.w, &self.support_mask) + self.intercept;
        let dl = self.loss.sample(row.label, row.weight).derivative(margin);
        for (&j, &v) in row.indices.iter().zip(row.values) {
            self.grad.add(j, dl * v);
        }
        self.pending_intercept_grad += dl;
        self.pending += 1;
    }

    /// The step (1)-(4) of the module docs on the pending gradient. A step whose new weights,
    /// mirror-space values or intercept are not all finite is rejected: the state stays as it was and
    /// [`MirrorState::numeric_faults`] counts it.
    fn apply(&mut self) {
        if self.pending == 0 {
            return;
        }
        let count = self.pending;
        let intercept_grad = self.pending_intercept_grad;
        self.pending = 0;
        self.pending_intercept_grad = 0.0;
        let eta = self.step_size();
        let gain = self.gain();
        let count = count as f64;
        let dense = self.config.memory == Memory::Dense;
        for &j in &self.support {
            self.grad.touch(j);
        }
        // grad now holds the mirror-space point theta_j - eta g_j of every candidate coordinate. With
        // `Memory::Support`, `w` and `theta` are 0 off the support, which the mask tells without
        // reading them.
        for pos in 0..self.grad.len() {
            let j = self.grad.coords[pos] as usize;
            let (theta, w) = if dense {
                (self.decayed_theta(j), self.w[j])
            } else if self.on_support(j) {
                (self.theta[j], self.w[j])
            } else {
                (0.0, 0.0)
            };
            let g = self.grad.sums[pos];
            self.grad.sums[pos] = theta - eta * (g / count + self.lambda * w);
        }
        greedy::top_k_of_pairs(
            self.grad
                .coords
                .iter()
                .copied()
                .zip(self.grad.sums.iter().copied()),
            self.k,
            &mut self.keys,
            &mut self.selected,
        );

        self.sub_theta.clear();
        self.sub_theta
            .extend(self.selected.iter().map(|&j| self.grad.get(j)));
        self.sub_x.clear();
        self.sub_x.resize(self.selected.len(), 0.0);
        let map = self.config.map;
        let constraint = self.config.constraint;
        map.solve_restricted(constraint, &self.sub_theta, &mut self.sub_x);
        if constraint != Constraint::None {
            // The next step starts from grad psi of the feasible point (the prox form of Alg. 3.1).
            map.grad_psi(&self.sub_x, &mut self.sub_theta);
        }
        let intercept = if self.fit_intercept {
            self.intercept - eta * gain * intercept_grad / count
        } else {
            self.intercept
        };
        let finite = intercept.is_finite()
            && self.sub_x.iter().all(|v| v.is_finite())
            && self.sub_theta.iter().all(|v| v.is_finite())
            && (!dense || self.grad.sums.iter().all(|v| v.is_finite()));
        if !finite {
            self.numeric_faults += 1;
            self.grad.clear();
            return;
        }
        let decay_after = self.decay_log + (1.0 - eta * gain * self.lambda).clamp(1e-12, 1.0).ln();
        if dense {
            // Every candidate keeps its new mirror-space value, selected or not. A support coordinate
            // took this step's ridge in its gradient (`lambda w_j`), an off-support one (`w_j = 0`)
            // takes it as the lazy shrink: its stamp is set before this step's factor.
            for (&j, &theta) in self.grad.coords.iter().zip(&self.grad.sums) {
                let j = j as usize;
                self.theta[j] = theta;
                self.stamp[j] = if self.w[j] != 0.0 {
                    decay_after
                } else {
                    self.decay_log
                };
            }
        }
        self.mark_support(false);
        for &j in &self.support {
            self.w[j as usize] = 0.0;
            if !dense {
                self.theta[j as usize] = 0.0;
            }
        }
        self.support.clear();
        for (pos, &j) in self.selected.iter().enumerate() {
            if self.sub_x[pos] != 0.0 {
                self.w[j as usize] = self.sub_x[pos];
                self.theta[j as usize] = self.sub_theta[pos];
                self.support.push(j);
            }
        }
        self.mark_support(true);
        self.intercept = intercept;
        if dense {
            self.decay_log = decay_after;
        }
        self.grad.clear();
        self.clock.steps += 1;
    }
}

/// The exact export and restore of the state: what a checkpoint of a streaming learner is made of, so
/// a restored state continues bit for bit like the one that never stopped.
impl MirrorState {
    /// `(j, w_j, theta_j)` for every nonzero weight (`theta = grad psi(w)` on the support), ascending
    /// `j`, in the order [`MirrorState::resume`] needs to continue bit for bit; with [`Memory::Dense`]
    /// the off-support mirror-space values follow as `(j, 0, theta_j)` (ridge shrink applied up to
    /// now), so a resumed state keeps the evidence it accumulated.
    pub fn coordinates(&self) -> Vec<(u32, f64, f64)> {
        let mut support = self.support.clone();
        support.sort_unstable();
        let mut out: Vec<(u32, f64, f64)> = support
            .iter()
            .map(|&j| (j, self.w[j as usize], self.theta[j as usize]))
            .collect();
        if self.config.memory == Memory::Dense {
            for j in 0..self.theta.len() {
                if self.w[j] == 0.0 && self.theta[j] != 0.0 {
                    let theta = self.decayed_theta(j);
                    if theta != 0.0 && theta.is_finite() {
                        out.push((j as u32, 0.0, theta));
                    }
                }
            }
        }
        out
    }

    /// Where the step schedule stands (steps taken, running row curvature).
    pub fn clock(&self) -> StepClock {
        self.clock
    }

    /// Sizes the state for features `0..dim` (or more: one past the largest index `coordinates`
    /// names) and restores what [`MirrorState::coordinates`] and [`MirrorState::clock`] exported, dropping the model it held; zero or non-finite entries are
    /// skipped. Restores both `w` and `theta` (with [`Memory::Dense`] also the off-support `theta`, bit
    /// for bit as exported: a dense state resumes up to the rounding of its lazy ridge shrink).
    pub fn resume(&mut self, dim: usize, coordinates: &[(u32, f64, f64)], clock: StepClock) {
        // Only the entries that are not zero are written: untouched room stays unbacked (`zero_dense`).
        zero_dense(&mut self.w);
        zero_dense(&mut self.theta);
        self.mark_support(false);
        self.support.clear();
        self.ensure_dim(checkpoint_dim(dim, coordinates));
        let dense = self.config.memory == Memory::Dense;
        for &(j, w, theta) in coordinates {
            if dense && w == 0.0 && theta != 0.0 && theta.is_finite() {
                self.theta[j as usize] = theta;
                // A restored value is up to date now (only a nonzero `theta_j` reads its stamp).
                self.stamp[j as usize] = self.decay_log;
            }
            if w != 0.0 && w.is_finite() && theta.is_finite() {
                self.w[j as usize] = w;
                self.theta[j as usize] = theta;
                self.support.push(j);
            }
        }
        self.support.sort_unstable();
        self.support.dedup();
        self.mark_support(true);
        self.clock = clock;
    }

    /// Rewinds the step schedule to at most one horizon (`t <- min(t, H)`), so the automatic step is
    /// back to at least half its initial size. A streaming learner calls it when new samples arrive:
    /// passes over an unchanged window decay the step (and converge on it), new data makes it move
    /// again.
    pub fn rewind_schedule(&mut self) {
        self.clock.steps = self.clock.steps.min(self.horizon());
    }
}

#[cfg(test)]
mod tests;
