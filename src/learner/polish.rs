//! The daemon's polish at publication: SDIHT's certified model re-solved on its own support over the
//! window ([`crate::solver::polish`], as `fit` does), within a time budget.
//!
//! **Why.** The streaming search publishes the best model it visited; on a window that has stopped
//! changing it stalls where the support trades near-tied features, with weights that do not minimise
//! the objective on their own support. On trump_tweets the daemon's `lambda = "auto"` served the
//! lambda-1e-5 member at relative gap 0.127 (79.4% held out), where `fit`'s polish of the same search
//! moves the primal from 0.408 to 0.374 (`docs/benchmarks/quality.md`). The polished model is still
//! k-sparse, so its primal stands against the search's dual (weak duality) and the published gap only
//! shrinks.
//!
//! **The budget.** The polish runs on the learner's thread, between steps and inserts, so it is paid
//! for in ingest. It runs only on windows of at most [`MAX_NONZEROS`] stored values (a 10,000-row text
//! window holds 250,000; a 100,000-row W3-like window 4 million, whose polish took 0.6 s), and at most
//! [`SHARE`] of the thread's time: after a polish that took `t`, the next waits until `t / SHARE` has
//! passed. Between polishes the search's model is published as before (and on a window that did not
//! change, [`super::LearnerCore::certified_best`] keeps the polished one while its primal is lower).
//! The model's `polish` record says what the last publication's polish did; it is absent when none ran.
//! `polish = false` in the learner's table turns it off.

use std::time::{Duration, Instant};

use crate::learner::params::LearnerConfig;
use crate::model::Model;
use crate::ring::Window;
use crate::sample::SampleSet;
use crate::solver::driver::SparseModel;
use crate::solver::polish::{polish, PolishOutcome, PolishRecord};
use crate::solver::spread::InTurn;
use crate::solver::{Certificate, Problem};

/// The largest share of the learner thread's time the polish may take.
pub const SHARE: f64 = 0.1;
/// The most values stored in the window (the sum of its rows' nonzeros) for which the polish runs.
pub const MAX_NONZEROS: usize = 1_000_000;

/// When the last polish ran and what it cost: the budget's state.
#[derive(Debug, Clone, Default)]
pub struct PublishPolish {
    last: Option<(Instant, Duration)>,
}

impl PublishPolish {
    /// Whether the budget allows a polish now.
    fn due(&self) -> bool {
        self.last
            .is_none_or(|(at, cost)| at.elapsed().as_secs_f64() * SHARE >= cost.as_secs_f64())
    }

    /// `model` polished over `window` when the budget and the window's size allow it and the loss has
    /// curvature: its weights replaced by the polished ones when their primal is lower, its
    /// certificate `P(polished)` against the search's dual, and its `polish` record set.
    pub fn apply(&mut self, config: &LearnerConfig, window: &Window, mut model: Model) -> Model {
        // Hinge has no curvature (`solver::polish` would refuse it): skip before walking the window.
        let smooth = config.loss.second_derivative(0.0, 1.0).is_some();
        if !config.polish || !smooth || model.support.is_empty() || window.is_empty() || !self.due()
        {
            return model;
        }
        let nonzeros: usize = (0..window.len()).map(|i| window.row(i).indices.len()).sum();
        if nonzeros > MAX_NONZEROS {
            return model;
        }
        let Ok(problem) = Problem::new(
            window,
            config.loss,
            config.lambda,
            config.k,
            config.intercept,
        ) else {
            return model;
        };
        let started = Instant::now();
        let search = SparseModel {
            support: model.support.clone(),
            weights: model.weights.clone(),
            intercept: model.intercept,
        };
        let primal_search = model.certificate.primal;
        let result = polish(&problem, &search, &InTurn);
        self.last = Some((Instant::now(), started.elapsed()));
        let polished = match result {
            Ok(polished) => polished,
            Err(outcome) => {
                model.polish = Some(PolishRecord::not_run(outcome, primal_search));
                return model;
            }
        };
        let record = polished.judged(primal_search);
        model.polish = Some(record);
        if record.outcome == PolishOutcome::Kept {
            let c = model.certificate;
            model.support = polished.model.support;
            model.weights = polished.model.weights;
            model.intercept = polished.model.intercept;
            model.certificate = Certificate::new(polished.primal, c.dual, c.samples);
        }
        model
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loss::{Loss, LossKind};

    /// A window of a few hundred samples: the polished model's primal is lower, recomputed over the
    /// window it is what the certificate says, the dual is the search's, and the record says `kept`;
    /// the budget then holds the next polish back until `cost / SHARE` has passed.
    #[test]
    fn a_published_model_is_polished_within_the_budget() {
        let mut samples = crate::synth::sparse_stream(300, 40, 5, 8, 0.3, true, 4).samples;
        for s in &mut samples {
            s.label = if s.label >= 0.0 { 1.0 } else { -1.0 };
        }
        let mut window = Window::new(400);
        for s in &samples {
            window.push(s.clone(), 0.0);
        }
        let mut config = crate::config::Config::defaults().learners[0].clone();
        config.loss = Loss::new(LossKind::Logistic, 0.0).unwrap();
        config.lambda = 1e-2;
        config.k = 5;
        config.intercept = true;
        let search = SparseModel {
            support: vec![1, 3, 8, 13, 21],
            weights: vec![0.05; 5],
            intercept: 0.0,
        };
        let primal = crate::solver::objective::primal_value(
            &window,
            &config.loss,
            1e-2,
            &search.to_dense(64),
            0.0,
        );
        let model = crate::learner::model_of(
            &config,
            &search,
            Certificate::new(primal, primal - 0.5, 300),
        );
        let mut budget = PublishPolish::default();
        let polished = budget.apply(&config, &window, model.clone());
        let record = polished.polish.expect("polished");
        assert_eq!(record.outcome, PolishOutcome::Kept);
        assert!(polished.certificate.primal < primal);
        assert_eq!(polished.certificate.dual, primal - 0.5);
        let recomputed = crate::solver::objective::primal_value(
            &window,
            &config.loss,
            1e-2,
            &SparseModel {
                support: polished.support.clone(),
                weights: polished.weights.clone(),
                intercept: 0.0,
            }
            .to_dense(64),
            polished.intercept,
        );
        assert!((recomputed - polished.certificate.primal).abs() < 1e-12);
        // The budget: a polish just ran, so the next waits (its cost is more than zero).
        budget.last = Some((Instant::now(), Duration::from_secs(3600)));
        assert!(budget.apply(&config, &window, model).polish.is_none());
    }
}
