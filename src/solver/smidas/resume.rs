//! Checkpoint support for [`SmidasLearner`]: an explicit `p` (a streaming learner knows `ingest.max_dim`,
//! not its data set's dimension), and [`Resumable`] — export / restore of its exact state (`theta`,
//! schedule position) in the checkpoint format of the mirror learner (sized by the same rule,
//! `mirror::checkpoint_dim`).

use super::SmidasLearner;
use crate::solver::mirror::maps::lp_norm;
use crate::solver::mirror::{checkpoint_dim, MirrorError, Resumable};

impl SmidasLearner {
    /// The learner with the p-norm link exponent `p >= 2` given explicitly (it replaces the `p` that
    /// [`SmidasLearner::new`] derived from `dim`).
    pub fn with_p(mut self, p: f64) -> Result<SmidasLearner, MirrorError> {
        if !(p.is_finite() && p >= 2.0) {
            return Err(MirrorError::BadP(p));
        }
        self.p = p;
        Ok(self)
    }
}

impl Resumable for SmidasLearner {
    /// In the learner's internal order: `||theta||_p` is a sum over that order, so keeping it makes a
    /// resumed learner identical to the last bit.
    fn coordinates(&self) -> Vec<(u32, f64, f64)> {
        self.active
            .iter()
            .map(|&j| {
                let t = self.theta[j as usize];
                (j, self.weight(t), t)
            })
            .collect()
    }

    fn steps(&self) -> u64 {
        self.steps
    }

    fn row_sq_max(&self) -> f64 {
        self.row_sq_max
    }

    /// Restores `theta` from the coordinates (weights are recomputed from it).
    fn resume(&mut self, dim: usize, coordinates: &[(u32, f64, f64)], steps: u64, row_sq_max: f64) {
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

    fn rewind_schedule(&mut self) {
        self.steps = self.steps.min(self.horizon);
    }
}
