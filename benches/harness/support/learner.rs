//! The learner the CPU-cost examples measure (`learner_insert`, `cluster_cost`; each includes this
//! file with `#[path]`): the load generator's daemon learner — logistic loss, k = 100, lambda = 1e-4 —
//! with the given solver, so their figures describe the learner the daemon suite (`benches/run daemon`) runs.

use thresher::config::Config;

use thresher::learner::params::{LearnerConfig, StreamSolverKind};
use thresher::loss::{Loss, LossKind};

pub fn loadgen_learner(solver: StreamSolverKind) -> LearnerConfig {
    let mut config = Config::defaults().learners.remove(0);
    config.solver = solver;
    config.loss = Loss::new(LossKind::Logistic, 0.25).expect("gamma > 0");
    config.k = 100;
    config.lambda = 1e-4;
    config
}
