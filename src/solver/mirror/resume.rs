//! Checkpoint support for [`MirrorLearner`]: export and restore its exact state (weights, mirror-space
//! point, step-schedule position), so a daemon restart resumes the same model; and the sizing rule of a
//! restored checkpoint, [`checkpoint_dim`], shared with SMIDAS (`crate::solver::smidas`).

use super::MirrorLearner;

/// The dimension a learner resumed from `coordinates` (`(j, w_j, theta_j)`) is sized for: `dim`, or one
/// past the largest index the checkpoint names if that is larger (entries later skipped as zero or
/// non-finite count too), so a checkpoint taken over a wider window than the restarted one still fits.
pub(crate) fn checkpoint_dim(dim: usize, coordinates: &[(u32, f64, f64)]) -> usize {
    let last = coordinates.iter().map(|c| c.0 as usize + 1).max();
    dim.max(last.unwrap_or(0))
}

impl MirrorLearner {
    /// `(j, w_j, theta_j)` for every nonzero weight, ascending `j` (`theta = grad psi(w)` on the support).
    pub fn coordinates(&self) -> Vec<(u32, f64, f64)> {
        let mut support = self.support.clone();
        support.sort_unstable();
        support
            .iter()
            .map(|&j| (j, self.w[j as usize], self.theta[j as usize]))
            .collect()
    }

    /// The running `max_i c_i ||x_i||^2` over the rows seen.
    pub fn row_sq_max(&self) -> f64 {
        self.row_sq_max
    }

    /// Sizes the learner for features `0..dim` and restores what [`MirrorLearner::coordinates`], [`MirrorLearner::steps`] and
    /// [`MirrorLearner::row_sq_max`] exported; zero or non-finite weights are skipped.
    pub fn resume(
        &mut self,
        dim: usize,
        coordinates: &[(u32, f64, f64)],
        steps: u64,
        row_sq_max: f64,
    ) {
        for &j in &self.support {
            self.w[j as usize] = 0.0;
            self.theta[j as usize] = 0.0;
        }
        self.support.clear();
        self.ensure_dim(checkpoint_dim(dim, coordinates));
        for &(j, w, theta) in coordinates {
            if w != 0.0 && w.is_finite() && theta.is_finite() {
                self.w[j as usize] = w;
                self.theta[j as usize] = theta;
                self.support.push(j);
            }
        }
        self.support.sort_unstable();
        self.support.dedup();
        self.steps = steps;
        self.row_sq_max = row_sq_max;
    }

    /// Rewinds the step schedule to at most one horizon (`t <- min(t, H)`), so the automatic step is
    /// back to at least half its initial size. A streaming learner calls it when new samples arrive:
    /// passes over an unchanged window decay the step (and converge on it), new data makes it move again.
    pub fn rewind_schedule(&mut self) {
        let horizon = if self.config.horizon == 0 {
            super::DEFAULT_HORIZON
        } else {
            self.config.horizon
        };
        self.steps = self.steps.min(horizon);
    }
}
