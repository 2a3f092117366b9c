//! The daemon's failure paths made testable end to end: a fault-injection hook that makes one named
//! learner panic in the real binary, and the panic payload's text for the log line that reports it.
//!
//! `THRESHER_FAULT_INJECT=learner_panic:NAME` makes learner `NAME` panic the first time it absorbs samples.
//! The variable is read once per learner, when the daemon builds it; unset (the normal case), the learner
//! is not wrapped and nothing is checked again. It exists so the tests can prove a panicking learner stops
//! the daemon cleanly (`tests/integration/daemon.rs`); it is not a knob for users. A value of another
//! form is logged and ignored.

use crate::learner::{
    LearnerCore, LearnerSnapshot, LearnerState, SolverGauges, StepOutcome, StreamingLearner,
};
use crate::sample::{Row, SampleBlock};

/// The environment variable that arms the hook.
pub const FAULT_INJECT_ENV: &str = "THRESHER_FAULT_INJECT";
/// `learner_panic:NAME`: learner NAME panics on its first insert.
const LEARNER_PANIC: &str = "learner_panic:";

/// Wraps `learner` so it panics on its first insert if [`FAULT_INJECT_ENV`] names it; otherwise returns
/// it as it is.
pub fn arm(learner: Box<dyn StreamingLearner>) -> Box<dyn StreamingLearner> {
    match std::env::var(FAULT_INJECT_ENV) {
        Ok(spec) => arm_with(learner, &spec),
        Err(_) => learner,
    }
}

fn arm_with(learner: Box<dyn StreamingLearner>, spec: &str) -> Box<dyn StreamingLearner> {
    match spec.strip_prefix(LEARNER_PANIC) {
        Some(name) if name == learner.config().name => {
            tracing::warn!(learner = %name, "{FAULT_INJECT_ENV}: this learner will panic on its first insert");
            Box::new(PanicOnInsert { inner: learner })
        }
        Some(_) => learner,
        None => {
            tracing::warn!(value = %spec, "{FAULT_INJECT_ENV} not understood (expected {LEARNER_PANIC}NAME); ignored");
            learner
        }
    }
}

/// The text of a panic payload (`panic!` with a literal or a formatted message; else a placeholder).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(a panic without a message)")
}

/// A learner that panics as soon as samples reach it; everything else goes to the real learner.
struct PanicOnInsert {
    inner: Box<dyn StreamingLearner>,
}

impl StreamingLearner for PanicOnInsert {
    fn core(&self) -> &LearnerCore {
        self.inner.core()
    }
    fn insert_batches(&mut self, batches: &[&SampleBlock]) {
        if batches.iter().any(|b| !b.is_empty()) {
            panic!(
                "injected fault ({FAULT_INJECT_ENV}): learner {:?} panics on its first insert",
                self.inner.config().name
            );
        }
        self.inner.insert_batches(batches);
    }
    fn evict(&mut self, sample: Row<'_>, alpha: f64) {
        self.inner.evict(sample, alpha);
    }
    fn step(&mut self) -> StepOutcome {
        self.inner.step()
    }
    fn certify(&mut self) -> LearnerSnapshot {
        self.inner.certify()
    }
    fn state(&self) -> LearnerState {
        self.inner.state()
    }
    fn gauges(&self) -> SolverGauges {
        self.inner.gauges()
    }
    fn lambda_auto(&self) -> Option<crate::model::LambdaAuto> {
        self.inner.lambda_auto()
    }
    fn config(&self) -> &crate::learner::params::LearnerConfig {
        self.inner.config()
    }
    fn stats(&self) -> crate::learner::LearnerStats {
        self.inner.stats()
    }
    fn current_model(&mut self) -> Option<crate::solver::driver::SparseModel> {
        self.inner.current_model()
    }
    fn cut_model(&self) -> Option<crate::solver::driver::SparseModel> {
        self.inner.cut_model()
    }
    fn partial_sums(
        &mut self,
        at: &crate::solver::driver::SparseModel,
    ) -> Option<crate::learner::global::PartialSums> {
        self.inner.partial_sums(at)
    }
    fn set_remote(&mut self, remote: &crate::learner::global::RemoteSums) {
        self.inner.set_remote(remote);
    }
    fn set_global(&mut self, model: crate::model::Model) {
        self.inner.set_global(model);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::learner::build;
    use crate::sample::Sample;
    use crate::sample::SampleSet;

    fn learner(name: &str) -> Box<dyn StreamingLearner> {
        let mut config = Config::defaults().learners.remove(0);
        // The defaults' squared loss fits an intercept; this test was written without one.
        config.intercept = false;
        config.name = name.into();
        build(&config, 8, None)
    }

    fn sample() -> Sample {
        Sample::new(vec![1], vec![1.0], 1.0, None).unwrap()
    }

    #[test]
    fn only_the_named_learner_panics_and_only_once_samples_arrive() {
        let mut other = arm_with(learner("other"), "learner_panic:bad");
        other.insert_samples(&[sample()]);
        assert_eq!(other.window().len(), 1);
        let mut malformed = arm_with(learner("bad"), "panic:bad");
        malformed.insert_samples(&[sample()]);
        assert_eq!(malformed.window().len(), 1);

        let mut bad = arm_with(learner("bad"), "learner_panic:bad");
        bad.insert_samples(&[]);
        let payload = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            bad.insert_samples(&[sample()]);
        }))
        .expect_err("the armed learner panics");
        assert_eq!(
            panic_message(payload.as_ref()),
            "injected fault (THRESHER_FAULT_INJECT): learner \"bad\" panics on its first insert"
        );
        assert_eq!(panic_message(&"literal"), "literal");
        assert_eq!(panic_message(&7_u8), "(a panic without a message)");
    }
}
