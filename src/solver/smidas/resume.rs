//! Checkpoint support for [`SmidasLearner`]: an explicit `p` (a streaming learner knows `ingest.max_dim`,
//! not its data set's dimension), and export / restore of its exact state (`theta`, schedule position),
//! in the checkpoint format of the mirror learner (sized by the same rule, `mirror::checkpoint_dim`).

use super::SmidasLearner;
use crate::loss::Loss;
use crate::solver::mirror::maps::lp_norm;
use crate::solver::mirror::{checkpoint_dim, MirrorError, MirrorStep};

impl SmidasLearner {
    /// A learner at `theta = 0` with the p-norm link exponent `p >= 2` given explicitly.
    pub fn with_p(
        p: f64,
        l1: f64,
        step: MirrorStep,
        loss: Loss,
        lambda: f64,
        fit_intercept: bool,
    ) -> Result<SmidasLearner, MirrorError> {
        if !(p.is_finite() && p >= 2.0) {
            return Err(MirrorError::BadP(p));
        }
        let mut learner = SmidasLearner::new(l1, step, loss, lambda, fit_intercept, 0)?;
        learner.p = p;
        Ok(learner)
    }

    /// `(j, w_j, theta_j)` for every nonzero weight, in the learner's internal order: `||theta||_p` is a
    /// sum over that order, so keeping it makes a resumed learner identical to the last bit.
    pub fn coordinates(&self) -> Vec<(u32, f64, f64)> {
        self.active
            .iter()
            .map(|&j| {
                let t = self.theta[j as usize];
                (j, self.weight(t), t)
            })
            .collect()
    }

    pub fn row_sq_max(&self) -> f64 {
        self.row_sq_max
    }

    /// Sizes the learner for features `0..dim` and restores an exported state: `theta` from the coordinates (weights are recomputed from it).
    pub fn resume(
        &mut self,
        dim: usize,
        coordinates: &[(u32, f64, f64)],
        steps: u64,
        row_sq_max: f64,
    ) {
        for &j in &self.active {
            self.theta[j as usize] = 0.0;
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
        self.active_values.clear();
        self.active_values
            .extend(self.active.iter().map(|&j| self.theta[j as usize]));
        self.norm = lp_norm(&self.active_values, self.p);
        self.steps = steps;
        self.row_sq_max = row_sq_max;
        self.sync();
    }

    /// Rewinds the step schedule to at most one horizon (see `MirrorLearner::rewind_schedule`).
    pub fn rewind_schedule(&mut self) {
        self.steps = self.steps.min(self.horizon);
    }
}
