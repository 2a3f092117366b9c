//! The parameters a streaming learner runs by, validated: [`LearnerConfig`] (one `[[learner]]` table),
//! the solver family it drives ([`StreamSolverKind`]) with that family's options ([`SolverOptions`]),
//! and `lambda = "auto"`'s grid and ranking rule ([`AutoLambda`], [`Criterion`], [`log_grid`]). They are
//! the learner's domain types: `config` reads and checks the keys into them (the key table is
//! `config/thresher.toml`), and nothing here reads a file or the environment.

use std::time::Duration;

use crate::loss::Loss;
use crate::solver::mirror::{MirrorConfig, MirrorStep};
use crate::solver::subset::SubsetParams;
use crate::solver::StepRule;

/// Which streaming solver a learner runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamSolverKind {
    /// Stochastic DIHT over the window (`blocks = 1` is DIHT).
    Sdiht,
    /// Stochastic sparse mirror descent (options in [`LearnerConfig::options`]).
    Mirror,
    /// SMIDAS, the l1 prior art (not k-sparse).
    Smidas,
    /// Best subset (l0 + l1 + l2), re-solved on the window every `resolve_interval_ms`.
    Subset,
}

impl StreamSolverKind {
    pub fn name(self, blocks: usize) -> &'static str {
        match self {
            StreamSolverKind::Sdiht if blocks == 1 => "diht",
            StreamSolverKind::Sdiht => "sdiht",
            StreamSolverKind::Mirror => "mirror",
            StreamSolverKind::Smidas => "smidas",
            StreamSolverKind::Subset => "subset",
        }
    }
}

/// One `[[learner]]` table, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct LearnerConfig {
    pub name: String,
    /// The learner's place among the configured learners (0 = the primary): the column of the scores
    /// served before a late label it reads its progressive loss from ([`SampleBlock::served`]).
    ///
    /// [`SampleBlock::served`]: crate::sample::SampleBlock::served
    pub slot: usize,
    pub solver: StreamSolverKind,
    pub loss: Loss,
    pub k: usize,
    pub lambda: f64,
    pub blocks: usize,
    pub step: StepRule,
    pub recompute_every: usize,
    /// SDIHT: polish each published model on its support (`learner::polish`).
    pub polish: bool,
    pub tol: f64,
    pub seed: u64,
    /// Fit an unpenalised, never-thresholded intercept `b` (the model scores `w.x + b`).
    pub intercept: bool,
    /// The solver-specific keys (`config/thresher.toml`, the end of its `[[learner]]` table).
    pub options: SolverOptions,
    /// `lambda = "auto"`: the grid and switching rule (`lambda` is then the grid member served first).
    pub lambda_auto: Option<AutoLambda>,
    /// `window.half_life_samples` (`None`: no forgetting; [`super::forget`]).
    pub half_life_samples: Option<u64>,
    /// A member of a multi-class learner (`classes = C`): the binary learner of one class against the
    /// rest ([`super::multiclass`]); `None` for a binary or regression learner.
    pub class: Option<ClassOf>,
}

/// Which class of which multi-class learner a binary learner separates from the rest: a `[[learner]]`
/// table with `classes = C` runs as `C` such learners, named `NAME-0` .. `NAME-{C-1}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassOf {
    /// The multi-class learner's name (the table's `name`).
    pub group: String,
    /// This learner's class: the label it learns as `+1` (the others are `-1`).
    pub class: usize,
    /// The number of classes.
    pub classes: usize,
    /// The classes' names (`classes = ["a", "b", ...]`; JSON labels may be the names), or `None`
    /// when the classes are numbered only.
    pub names: Option<std::sync::Arc<[String]>>,
}

/// `lambda = "auto"`, validated: the grid of lambdas the learner runs side by side and the rule that
/// picks the one it serves ([`super::auto`]).
#[derive(Debug, Clone, PartialEq)]
pub struct AutoLambda {
    /// Log-spaced from `lambda_max` down to `lambda_min`, largest first.
    pub grid: Vec<f64>,
    /// A challenger replaces the served member only when its progressive loss is below
    /// `(1 - margin)` times the served member's. Why 1% by default: the members are scored on the same
    /// samples, so the noise of their difference is far below that of either loss; on the text sets
    /// (`docs/benchmarks/learners.md`) the better lambda led by 1.5-1.7% and 2% kept the worse one.
    pub margin: f64,
    /// Samples over which a member's progressive loss halves its weight; also the fewest samples a
    /// served member keeps the place before another may replace it (`criterion = progressive`).
    pub half_life: u64,
    /// What ranks the members ([`super::auto`]).
    pub criterion: Criterion,
}

/// What ranks the members of `lambda = "auto"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Criterion {
    /// Each member's current model scored on held-out samples (one in
    /// [`super::auto::HOLDOUT_EVERY`], learned only by the served learner), re-scored at every
    /// certificate: it ranks the members as they are now, converged or not.
    Holdout,
    /// Each member's exponentially weighted progressive-validation loss over every sample: the loss
    /// of each sample when it arrived, by the model of that moment.
    Progressive,
}

impl Criterion {
    pub fn name(self) -> &'static str {
        match self {
            Criterion::Holdout => "holdout",
            Criterion::Progressive => "progressive",
        }
    }
}

/// `n` lambdas log-spaced from `max` down to `min` (both included, exactly), largest first.
pub fn log_grid(max: f64, min: f64, n: usize) -> Vec<f64> {
    if n <= 1 {
        return vec![max];
    }
    let ratio = min / max;
    (0..n)
        .map(|i| match i {
            0 => max,
            i if i == n - 1 => min,
            i => max * ratio.powf(i as f64 / (n - 1) as f64),
        })
        .collect()
}
/// What a learner's solver needs beyond the shared keys.
#[derive(Debug, Clone)]
pub enum SolverOptions {
    /// SDIHT reads only the shared keys.
    Sdiht,
    Mirror(MirrorConfig),
    Smidas {
        l1: f64,
        /// The p-norm link's `p` (resolved from `ingest.max_dim` when the key is 0).
        p: f64,
        step: MirrorStep,
        horizon: u64,
        /// Samples per step (`crate::solver::smidas::SmidasState::step_batch`).
        batch: usize,
    },
    Subset {
        params: SubsetParams,
        resolve_interval: Duration,
    },
}

impl PartialEq for SolverOptions {
    /// `SubsetParams` is not `PartialEq`; compares the fields a config sets.
    fn eq(&self, other: &Self) -> bool {
        use SolverOptions::*;
        match (self, other) {
            (Sdiht, Sdiht) => true,
            (Mirror(a), Mirror(b)) => a == b,
            (
                Smidas {
                    l1,
                    p,
                    step,
                    horizon,
                    batch,
                },
                Smidas {
                    l1: l1b,
                    p: pb,
                    step: stepb,
                    horizon: hb,
                    batch: bb,
                },
            ) => (l1, p, step, horizon, batch) == (l1b, pb, stepb, hb, bb),
            (
                Subset {
                    params: a,
                    resolve_interval: ra,
                },
                Subset {
                    params: b,
                    resolve_interval: rb,
                },
            ) => {
                let key = |p: &SubsetParams| {
                    (
                        p.penalty.lambda0,
                        p.penalty.lambda1,
                        p.penalty.lambda2,
                        p.xi,
                        p.zeta,
                        p.c,
                    )
                };
                key(a) == key(b) && ra == rb
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_grid_is_log_spaced_largest_first_with_exact_ends() {
        let g = log_grid(0.1, 1e-5, 5);
        assert_eq!((g.len(), g[0], g[4]), (5, 0.1, 1e-5));
        for (a, b) in g.iter().zip([0.1, 1e-2, 1e-3, 1e-4, 1e-5]) {
            assert!((a / b - 1.0).abs() < 1e-12, "{g:?}");
        }
        let g = log_grid(1.0, 1e-2, 3);
        assert!((g[1] - 0.1).abs() < 1e-15, "{g:?}");
        assert_eq!(log_grid(2.0, 1.0, 2), [2.0, 1.0]);
    }
}
