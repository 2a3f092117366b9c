//! [`Resumable`]: the checkpoint interface of the per-sample primal states (export the exact state,
//! restore it, rewind the step schedule), which [`super::engine::PrimalEngine`] writes into a
//! checkpoint's [`crate::learner::PrimalState`]; implemented by the mirror and SMIDAS states over their
//! exact export and restore (`coordinates`, `resume`).

use crate::solver::mirror::state::MirrorState;
use crate::solver::mirror::StepClock;
use crate::solver::smidas::SmidasState;

/// A per-sample primal state whose exact state can be exported and restored, so a resumed one
/// continues bit for bit like the one that never stopped.
pub trait Resumable {
    /// `(j, w_j, theta_j)` for every nonzero weight (`theta = grad psi(w)` on the support), in the
    /// order [`Resumable::resume`] needs to continue bit for bit.
    fn coordinates(&self) -> Vec<(u32, f64, f64)>;
    /// Where the step schedule stands (steps taken, running row curvature).
    fn clock(&self) -> StepClock;
    /// Sizes the state for features `0..dim` (or more: one past the largest index the checkpoint
    /// names) and restores what [`Resumable::coordinates`] and [`Resumable::clock`] exported,
    /// dropping the model it held; zero or non-finite entries are skipped.
    fn resume(&mut self, dim: usize, coordinates: &[(u32, f64, f64)], clock: StepClock);
    /// Rewinds the step schedule to at most one horizon (`t <- min(t, H)`), so the automatic step is
    /// back to at least half its initial size. A streaming learner calls it when new samples arrive:
    /// passes over an unchanged window decay the step (and converge on it), new data makes it move again.
    fn rewind_schedule(&mut self);
}

impl Resumable for MirrorState {
    fn coordinates(&self) -> Vec<(u32, f64, f64)> {
        MirrorState::coordinates(self)
    }
    fn clock(&self) -> StepClock {
        MirrorState::clock(self)
    }
    fn resume(&mut self, dim: usize, coordinates: &[(u32, f64, f64)], clock: StepClock) {
        MirrorState::resume(self, dim, coordinates, clock);
    }
    fn rewind_schedule(&mut self) {
        MirrorState::rewind_schedule(self);
    }
}

impl Resumable for SmidasState {
    fn coordinates(&self) -> Vec<(u32, f64, f64)> {
        SmidasState::coordinates(self)
    }
    fn clock(&self) -> StepClock {
        SmidasState::clock(self)
    }
    fn resume(&mut self, dim: usize, coordinates: &[(u32, f64, f64)], clock: StepClock) {
        SmidasState::resume(self, dim, coordinates, clock);
    }
    fn rewind_schedule(&mut self) {
        SmidasState::rewind_schedule(self);
    }
}

#[cfg(test)]
mod tests;
