//! Best subset (`solver = "subset"`) as a streaming learner: the dynamic incremental solver of
//! [`crate::solver::subset`] re-solved on the window.
//!
//! - `insert`: each sample is predicted with the published weights (progressive loss) and enters the
//!   window; nothing else — the solver is batch;
//! - `step`: one outer step of Alg. 2 (screening, inclusion, the inner Alg. 1) on the solver built from
//!   the window; in the daemon the outer steps run on a thread of the learner's own ([`away`]) and
//!   `step` publishes each one as it ends, so the learner thread goes on absorbing samples meanwhile.
//!   The solver is rebuilt from the window when new samples arrived and at least
//!   `resolve_interval_ms` passed since the last rebuild, **warm-started** from the previous solution
//!   and active set ([`SubsetSolver::warm_start`]); a solve ends (the learner idles until the next
//!   rebuild) when its gap is below `xi`, its gap changed by less than `zeta` over two outer steps, or
//!   after `max_outer` outer steps — the offline stopping rules;
//! - `snapshot`: the model and the certificate of the last outer step.
//!
//! **Units.** The certificate is the subset solver's own: `P = sum_i l(w.x_i, y_i) + lambda0
//! ||b||_0 + lambda1 ||b||_1 + lambda2 ||b||^2` on unit-norm columns (a SUM over the window, not the mean
//! the other learners use), so its gap is not comparable in size with theirs; the model carries
//! `lambda0`, `lambda1`, `lambda2`. **Freshness.** The certificate is exact over the window the solver
//! was last built on (its `samples` field says how many); samples that arrived since enter at the next
//! rebuild, at most `resolve_interval_ms` later.
//!
//! Gauges: `thresher_active_set_size` (`|A|`) and `thresher_screened_features` (features gap-safe
//! screening removed in the current solve). A checkpoint keeps the model, the active set and the
//! certificate; a restored learner idles until new samples arrive (its screened count reads 0 until
//! that next solve: screening decisions belong to a window and a penalty, so they are not saved).

pub mod away;

use std::time::{Duration, Instant};

use away::{Away, Outcome};

use super::{
    Idle, LearnerCore, LearnerSnapshot, LearnerState, PrimalState, SolverGauges, StepOutcome,
    StreamingLearner,
};
use crate::learner::params::{LearnerConfig, SolverOptions};
use crate::loss::LossKind;
use crate::model::Model;
use crate::sample::{Row, SampleBlock, SampleSet};
use crate::solver::driver::SparseModel;
use crate::solver::subset::{Penalty, SubsetLoss, SubsetParams, SubsetSolver};
use crate::solver::{Certificate, ModelView};
use crate::sparse::{grow_dense, masked_dot};

/// Best subset re-solved on a sliding window (see the module docs).
pub struct StreamSubset {
    /// `last_certificate` is the certificate of the last outer step (not of `certify`, which only
    /// reads it).
    core: LearnerCore,
    params: SubsetParams,
    resolve_interval: Duration,
    solver: Option<SubsetSolver>,
    /// Samples arrived since the solver was built.
    window_changed: bool,
    last_build: Option<Instant>,
    /// The current solve met a stopping rule.
    solved: bool,
    /// Gaps of the current solve's outer steps on the learner's thread: its stopping rules read them
    /// ([`away::finished`]; a solve on its own thread keeps its own).
    gaps: Vec<f64>,
    /// The published model: dense weights in the caller's scale, support, active set.
    weights: Vec<f64>,
    support: Vec<u32>,
    /// Bit `j % 64` of word `j / 64` is set exactly for `j` in `support`: each sample's prediction
    /// reads `weights` (up to 8d bytes) only where the mask (d/8 bytes, cache resident) says the
    /// weight is nonzero ([`masked_dot`]), as SDIHT's and mirror's intake do.
    support_mask: Vec<u64>,
    active: Vec<u32>,
    gauges: SolverGauges,
    /// The thread the outer steps run on ([`StreamSubset::on_own_thread`]); `None`: on the learner's.
    away: Option<Away>,
}

impl StreamSubset {
    /// A learner with an empty window, or resumed from `state`.
    pub fn new(
        config: LearnerConfig,
        capacity: usize,
        mut state: Option<LearnerState>,
    ) -> StreamSubset {
        let (mut params, resolve_interval) = match &config.options {
            SolverOptions::Subset {
                params,
                resolve_interval,
            } => (*params, *resolve_interval),
            _ => (
                SubsetParams::new(Penalty::new(1.0, 0.0, 1e-3).expect("valid penalty")),
                Duration::from_secs(1),
            ),
        };
        params.loss = match config.loss.kind() {
            LossKind::Logistic => SubsetLoss::Logistic,
            _ => SubsetLoss::Squared,
        };
        let mut learner = StreamSubset {
            core: LearnerCore::new(config, capacity, state.as_mut()),
            params,
            resolve_interval,
            solver: None,
            window_changed: false,
            last_build: None,
            solved: false,
            gaps: Vec::new(),
            weights: Vec::new(),
            support: Vec::new(),
            support_mask: Vec::new(),
            active: Vec::new(),
            gauges: SolverGauges::default(),
            away: None,
        };
        if let Some(state) = state {
            if let Some(primal) = state.primal {
                for &(j, w, _) in &primal.coordinates {
                    if w != 0.0 && w.is_finite() {
                        learner.set_weight(j, w);
                    }
                }
                learner.support.sort_unstable();
                learner.active = primal.active;
                learner.gauges.active_set_size = learner.active.len();
            }
            // A restored solve is finished: the learner idles until new samples arrive, then re-solves
            // warm-started from the restored model and active set.
            learner.solved = learner.core.last_certificate.is_some();
            learner.window_changed = !learner.solved && !learner.core.window.is_empty();
        }
        learner
    }

    /// Runs the outer steps on a thread of their own (the daemon's learners), so the learner's lock
    /// is held only to build each solver and to publish each outer step. Without one (a thread that
    /// cannot be started) the steps stay on the learner's thread.
    pub fn on_own_thread(mut self) -> StreamSubset {
        match Away::start(&self.core.config.name) {
            Ok(away) => self.away = Some(away),
            Err(e) => {
                let name = &self.core.config.name;
                tracing::warn!(learner = %name, error = %e, "subset: no solve thread; solving on the learner's");
            }
        }
        self
    }

    fn set_weight(&mut self, j: u32, w: f64) {
        grow_dense(&mut self.weights, j as usize + 1);
        self.weights[j as usize] = w;
        self.support.push(j);
        self.cover(j as usize + 1);
        self.support_mask[j as usize / 64] |= 1 << (j % 64);
    }

    /// Grows `support_mask` to cover the indices below `dim`.
    fn cover(&mut self, dim: usize) {
        if self.support_mask.len() < dim.div_ceil(64) {
            self.support_mask.resize(dim.div_ceil(64), 0);
        }
    }

    /// Builds the solver on the current window, warm-started from the published model.
    fn rebuild(&mut self) {
        let previous: Vec<(u32, f64)> = self
            .support
            .iter()
            .map(|&j| (j, self.weights[j as usize]))
            .collect();
        match SubsetSolver::new(&self.core.window, self.params) {
            Ok(mut solver) => {
                solver.warm_start(&previous, &self.active);
                match self.away.as_mut() {
                    Some(away) => away.send(solver, self.params),
                    None => self.solver = Some(solver),
                }
            }
            // An empty window fails (`step` never rebuilds on one), and for the logistic loss a window
            // holding a weighted sample or a label other than +-1: the learner then keeps its last model.
            Err(e) => {
                tracing::warn!(learner = %self.core.config.name, error = %e, "subset: cannot solve this window");
                self.solver = None;
            }
        }
        self.window_changed = false;
        self.last_build = Some(Instant::now());
        // A window the solver rejects is "solved" (idle) until it changes, not retried every step.
        self.solved = self.solver.is_none() && !self.away.as_ref().is_some_and(|a| a.running);
        self.gaps.clear();
    }

    fn due_for_rebuild(&self) -> bool {
        if let Some(away) = &self.away {
            // A solve on its own thread is superseded only once it published an outer step: on a
            // window where one outer step outlasts `resolve_interval`, each rebuild would otherwise
            // abandon the last before it published anything.
            let idle = !away.running && self.solved;
            return (!away.running && !self.solved)
                || (self.window_changed
                    && (idle || away.received > 0)
                    && self
                        .last_build
                        .is_none_or(|t| t.elapsed() >= self.resolve_interval));
        }
        (self.solver.is_none() && !self.solved)
            || (self.window_changed
                && self
                    .last_build
                    .is_none_or(|t| t.elapsed() >= self.resolve_interval))
    }

    /// One outer step on the learner's thread; publishes its model, certificate and gauges.
    fn outer_step(&mut self) {
        let Some(solver) = self.solver.as_mut() else {
            return;
        };
        let outcome = Outcome::step(solver, 0, &mut self.gaps, &self.params);
        self.adopt(outcome);
    }

    /// Publishes an outer step's model, certificate and gauges (from either thread).
    fn adopt(&mut self, o: Outcome) {
        for &j in &self.support {
            self.weights[j as usize] = 0.0;
            self.support_mask[j as usize / 64] = 0;
        }
        self.support.clear();
        for &(j, w) in &o.weights {
            self.set_weight(j, w);
        }
        self.active = o.active;
        self.core.last_certificate = Some(o.certificate);
        self.gauges = SolverGauges {
            active_set_size: o.active_set_size,
            screened_features: o.screened,
            unlearned_samples: 0,
        };
        if o.finished {
            self.solved = true;
        }
    }

    /// `step` with the outer steps on their own thread: publishes the outer steps that ended, starts a
    /// solve on the window when one is due, and otherwise waits ([`Idle::Solving`] while one runs).
    fn step_away(&mut self) -> StepOutcome {
        // One step counted per outer step published, as on the learner's thread (the steps counted
        // do not depend on how the two threads interleave).
        let mut worked = false;
        while let Some(o) = self.away.as_mut().and_then(Away::try_next) {
            self.adopt(o);
            self.core.stepped();
            worked = true;
        }
        if self.due_for_rebuild() {
            self.rebuild();
            worked = true;
        }
        if worked {
            return StepOutcome::Stepped;
        }
        if self.away.as_ref().is_some_and(|a| a.running) {
            return StepOutcome::Idle(Idle::Solving);
        }
        StepOutcome::Idle(self.finished_idle())
    }

    /// Why a finished solve idles: its gap met `tol`, or not.
    fn finished_idle(&self) -> Idle {
        let c = self
            .core
            .last_certificate
            .unwrap_or(Certificate::new(0.0, 0.0, 0));
        if c.relative_gap() <= self.core.config.tol {
            Idle::Converged {
                relative_gap: c.relative_gap(),
            }
        } else {
            Idle::Stalled
        }
    }
}

impl StreamingLearner for StreamSubset {
    fn core(&self) -> &LearnerCore {
        &self.core
    }

    fn insert_batches(&mut self, batches: &[&SampleBlock]) {
        if batches.iter().all(|b| b.is_empty()) {
            return;
        }
        for batch in batches {
            self.store_batch(batch);
        }
        self.window_changed = true;
        self.core.inserted();
    }

    /// Nothing to undo: the solver is rebuilt from the window.
    fn evict(&mut self, _sample: Row<'_>, _alpha: f64) {}

    fn step(&mut self) -> StepOutcome {
        if self.core.window.is_empty() {
            return StepOutcome::Idle(Idle::EmptyWindow);
        }
        if self.away.is_some() {
            return self.step_away();
        }
        if self.due_for_rebuild() {
            self.rebuild();
        } else if self.solved {
            return StepOutcome::Idle(self.finished_idle());
        }
        self.outer_step();
        self.core.stepped();
        StepOutcome::Stepped
    }

    fn certify(&mut self) -> LearnerSnapshot {
        if self.core.last_certificate.is_none() && !self.core.window.is_empty() {
            // Nothing solved yet: one outer step gives the first certified model (on the solve's
            // thread: the first outer step of the solve running, or of one started now).
            if !self.away.as_ref().is_some_and(|a| a.running) {
                self.rebuild();
            }
            match self.away.as_mut().map(Away::wait_next) {
                Some(Some(o)) => self.adopt(o),
                Some(None) => {}
                None => self.outer_step(),
            }
        }
        let certificate = self
            .core
            .last_certificate
            .unwrap_or(Certificate::new(0.0, 0.0, 0));
        let penalty = self.params.penalty;
        let view = ModelView {
            weights: &self.weights,
            support: &self.support,
            intercept: 0.0,
        };
        let mut model = Model::from_sparse(
            &SparseModel::from_view(view),
            self.core.config.loss.kind(),
            None,
            "subset",
            self.support.len(),
            penalty.lambda2,
            certificate,
        );
        model.lambda0 = Some(penalty.lambda0);
        model.lambda1 = Some(penalty.lambda1);
        model.lambda2 = Some(penalty.lambda2);
        self.core.view(model)
    }

    fn state(&self) -> LearnerState {
        self.core.state(
            1.0,
            Some(PrimalState {
                coordinates: self
                    .support
                    .iter()
                    .map(|&j| (j, self.weights[j as usize], 0.0))
                    .collect(),
                solver_steps: self.core.stats.steps,
                row_sq_max: 0.0,
                active: self.active.clone(),
                intercept: 0.0,
            }),
        )
    }

    fn gauges(&self) -> SolverGauges {
        self.gauges
    }
}

impl StreamSubset {
    /// Predicts each sample with the published weights and stores it in the window.
    fn store_batch(&mut self, batch: &SampleBlock) {
        let loss = self.core.config.loss;
        let slot = self.core.config.slot;
        self.cover(batch.dim());
        for (i, sample) in batch.iter().enumerate() {
            let r = sample.row();
            let l = loss.sample(r.label, r.weight);
            let u = masked_dot(r.indices, r.values, &self.weights, &self.support_mask);
            let (value, alpha) = l.value_and_dual_of_margin(u);
            let served = batch.served(i, slot);
            self.core
                .predicted_served(r.label, r.weight, u, value, served);
            self.core.window.push_ref(sample, alpha);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::learner::params::StreamSolverKind;
    use crate::loss::Loss;
    use crate::synth::sparse_stream;

    fn config(lambda0: f64) -> LearnerConfig {
        let mut c = Config::defaults().learners.remove(0);
        c.solver = StreamSolverKind::Subset;
        c.loss = Loss::new(LossKind::Squared, 0.25).unwrap();
        let penalty = Penalty::new(lambda0, 0.0, 1e-3).unwrap();
        c.options = SolverOptions::Subset {
            params: SubsetParams::new(penalty),
            resolve_interval: Duration::ZERO,
        };
        c
    }

    fn run_to_idle(l: &mut StreamSubset) -> usize {
        let mut steps = 0;
        loop {
            match l.step() {
                StepOutcome::Stepped => steps += 1,
                // The solve's thread has not ended an outer step yet: wait for it.
                StepOutcome::Idle(Idle::Solving) => {
                    let o = l.away.as_mut().and_then(Away::wait_next);
                    if let Some(o) = o {
                        // What `step` does with an outer step it finds ended.
                        l.adopt(o);
                        l.core.stepped();
                        steps += 1;
                    }
                }
                StepOutcome::Idle(_) => return steps,
            }
            assert!(steps < 10_000, "never idles");
        }
    }

    #[test]
    fn outer_steps_on_their_own_thread_reach_the_same_model() {
        let data = sparse_stream(1500, 200, 5, 20, 0.01, false, 8);
        let mut here = StreamSubset::new(config(1.0), 1000, None);
        let mut away = StreamSubset::new(config(1.0), 1000, None).on_own_thread();
        assert!(away.away.is_some());
        for l in [&mut here, &mut away] {
            l.insert_samples(&data.samples[..1000]);
            run_to_idle(l);
        }
        assert_eq!(away.certify().model, here.certify().model);
        assert_eq!(away.certify().model.support, data.true_support());
        // A new window: the warm-started re-solve runs on the thread too.
        for l in [&mut here, &mut away] {
            l.insert_samples(&data.samples[1000..1500]);
            run_to_idle(l);
        }
        assert_eq!(away.certify().model, here.certify().model);
        assert_eq!(away.state(), here.state());
    }

    /// The intake's prediction reads `weights` only where `support_mask` is set: the mask must mark
    /// exactly the published support after every outer step, including one that drops coordinates.
    #[test]
    fn the_support_mask_marks_exactly_the_published_support() {
        let marked = |l: &StreamSubset| -> Vec<u32> {
            let mut bits = Vec::new();
            for (w, &word) in l.support_mask.iter().enumerate() {
                for b in 0..64 {
                    if word >> b & 1 == 1 {
                        bits.push((w * 64 + b) as u32);
                    }
                }
            }
            bits
        };
        let first = sparse_stream(1000, 200, 5, 20, 0.01, false, 8);
        // Another stream's true support: the next solve drops most of the first one's.
        let second = sparse_stream(1000, 300, 5, 20, 0.01, false, 21);
        assert_ne!(first.true_support(), second.true_support());
        let mut l = StreamSubset::new(config(1.0), 1000, None);
        for data in [&first, &second] {
            l.insert_samples(&data.samples);
            run_to_idle(&mut l);
            let mut support = l.support.clone();
            support.sort_unstable();
            assert_eq!(support, data.true_support());
            assert_eq!(marked(&l), support);
            // The masked prediction is the dense one.
            for s in &data.samples[..50] {
                let (i, v) = (&s.indices, &s.values);
                let dense = crate::sparse::sparse_dot(i, v, &l.weights);
                assert_eq!(masked_dot(i, v, &l.weights, &l.support_mask), dense);
            }
        }
    }

    #[test]
    fn a_first_certificate_waits_for_the_solve_thread() {
        let data = sparse_stream(600, 100, 4, 10, 0.01, false, 12);
        let mut l = StreamSubset::new(config(1.0), 500, None).on_own_thread();
        l.insert_samples(&data.samples[..500]);
        let first = l.certify();
        assert!(first.model.certificate.samples == 500 && first.model.certificate.gap >= 0.0);
        assert!(!first.model.support.is_empty());
    }

    #[test]
    fn recovers_the_support_with_a_small_gap_and_warm_starts() {
        let data = sparse_stream(3000, 200, 5, 20, 0.01, false, 7);
        let mut l = StreamSubset::new(config(1.0), 1000, None);
        l.insert_samples(&data.samples[..1000]);
        let cold = run_to_idle(&mut l);
        let snap = l.certify();
        let c = snap.model.certificate;
        assert!(c.gap >= 0.0 && c.gap < 1e-3 * c.primal.max(1.0), "{c:?}");
        assert_eq!(snap.model.support, data.true_support(), "{c:?}");
        assert!(l.gauges().active_set_size >= 5);
        // The next window, warm-started, converges in no more outer steps than the cold start.
        l.insert_samples(&data.samples[1000..1500]);
        let warm = run_to_idle(&mut l);
        assert!(warm <= cold, "warm {warm} vs cold {cold}");
        let snap = l.certify();
        assert_eq!(snap.model.support, data.true_support());
        assert_eq!(snap.model.certificate.samples, 1000);
        assert_eq!(snap.model.lambda0, Some(1.0));
    }

    #[test]
    fn logistic_learner_recovers_the_support_and_idles_on_bad_labels() {
        let data = sparse_stream(1500, 100, 4, 10, 0.0, true, 5);
        let mut c = config(1.0);
        c.loss = Loss::new(LossKind::Logistic, 0.25).unwrap();
        c.options = SolverOptions::Subset {
            params: SubsetParams::new(Penalty::new(2.0, 0.1, 0.05).unwrap()),
            resolve_interval: Duration::ZERO,
        };
        let mut l = StreamSubset::new(c.clone(), 1000, None);
        l.insert_samples(&data.samples[..1000]);
        assert!(run_to_idle(&mut l) > 0);
        let snap = l.certify();
        let cert = snap.model.certificate;
        assert_eq!(snap.model.loss, LossKind::Logistic);
        assert!(cert.gap >= 0.0 && cert.gap < 1e-3 * cert.primal, "{cert:?}");
        assert_eq!(snap.model.support, data.true_support(), "{cert:?}");
        // A 0/1 label: the solver refuses the window, the learner keeps its model and idles.
        let mut bad = data.samples[1000].clone();
        bad.label = 0.0;
        l.insert_samples(&[bad]);
        assert!(run_to_idle(&mut l) <= 1);
        assert_eq!(l.certify().model.support, data.true_support());
    }

    #[test]
    fn restored_state_resumes_the_same_model() {
        let data = sparse_stream(800, 100, 4, 10, 0.01, false, 11);
        let mut l = StreamSubset::new(config(1.0), 500, None);
        l.insert_samples(&data.samples);
        run_to_idle(&mut l);
        let snap = l.certify();
        let mut back = StreamSubset::new(config(1.0), 500, Some(l.state()));
        assert_eq!(back.stats(), l.stats());
        assert_eq!(back.certify().model, snap.model);
        assert_eq!(back.gauges().active_set_size, l.gauges().active_set_size);
        assert_eq!(run_to_idle(&mut back), 0, "a finished solve resumes idle");
        // New data: a warm-started re-solve on the moved window keeps the support.
        back.insert_samples(&data.samples[..100]);
        assert!(run_to_idle(&mut back) > 0);
        assert_eq!(back.certify().model.support, snap.model.support);
        assert_eq!(back.certify().model.certificate.samples, 500);
    }
}
