//! Checkpoint support for the per-sample primal learners: the [`Resumable`] interface they share
//! (export the exact state, restore it, rewind the step schedule), with the sizing rule of a restored
//! checkpoint, [`checkpoint_dim`]; and its implementation for [`MirrorLearner`] (weights, mirror-space
//! point, step-schedule position), so a daemon restart resumes the same model. SMIDAS implements it in
//! `crate::solver::smidas`.

use super::{Memory, MirrorLearner};
use crate::sparse::zero_dense;

/// The dimension a learner resumed from `coordinates` (`(j, w_j, theta_j)`) is sized for: `dim`, or one
/// past the largest index the checkpoint names if that is larger (entries later skipped as zero or
/// non-finite count too), so a checkpoint taken over a wider window than the restarted one still fits.
pub(crate) fn checkpoint_dim(dim: usize, coordinates: &[(u32, f64, f64)]) -> usize {
    let last = coordinates.iter().map(|c| c.0 as usize + 1).max();
    dim.max(last.unwrap_or(0))
}

/// A per-sample primal learner whose exact state can be exported and restored, so a resumed learner
/// continues bit for bit like the one that never stopped.
pub trait Resumable {
    /// `(j, w_j, theta_j)` for every nonzero weight (`theta = grad psi(w)` on the support), in the
    /// order [`Resumable::resume`] needs to continue bit for bit.
    fn coordinates(&self) -> Vec<(u32, f64, f64)>;
    /// Steps taken (the `t` of the step schedule).
    fn steps(&self) -> u64;
    /// The running `max_i c_i ||x_i||^2` over the rows seen.
    fn row_sq_max(&self) -> f64;
    /// Sizes the learner for features `0..dim` (or more: one past the largest index the checkpoint
    /// names) and restores what
    /// [`Resumable::coordinates`], [`Resumable::steps`] and [`Resumable::row_sq_max`] exported,
    /// dropping the model it held; zero or non-finite entries are skipped.
    fn resume(&mut self, dim: usize, coordinates: &[(u32, f64, f64)], steps: u64, row_sq_max: f64);
    /// Rewinds the step schedule to at most one horizon (`t <- min(t, H)`), so the automatic step is
    /// back to at least half its initial size. A streaming learner calls it when new samples arrive:
    /// passes over an unchanged window decay the step (and converge on it), new data makes it move again.
    fn rewind_schedule(&mut self);
}

impl Resumable for MirrorLearner {
    /// Ascending `j`; with [`Memory::Dense`] the off-support mirror-space values follow as `(j, 0, theta_j)`
    /// (ridge shrink applied up to now), so a resumed learner keeps the evidence it accumulated.
    fn coordinates(&self) -> Vec<(u32, f64, f64)> {
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

    fn steps(&self) -> u64 {
        self.steps
    }

    fn row_sq_max(&self) -> f64 {
        self.row_sq_max
    }

    /// Restores both `w` and `theta` (with [`Memory::Dense`] also the off-support `theta`, bit for
    /// bit as exported: a dense learner resumes up to the rounding of its lazy ridge shrink).
    fn resume(&mut self, dim: usize, coordinates: &[(u32, f64, f64)], steps: u64, row_sq_max: f64) {
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
        self.steps = steps;
        self.row_sq_max = row_sq_max;
    }

    fn rewind_schedule(&mut self) {
        let horizon = if self.config.horizon == 0 {
            super::DEFAULT_HORIZON
        } else {
            self.config.horizon
        };
        self.steps = self.steps.min(horizon);
    }
}
