//! The shared-window grid on seeded streams: one copy of the samples, weak duality for every member over
//! the shared window with its own duals, the move to the lambda a stream calls for, the checkpoint, and
//! the settled rule.

use super::*;
use crate::config::Config;
use crate::learner::params::{AutoLambda, Criterion};
use crate::loss::{Loss, LossKind};
use crate::sample::SampleSet;
use crate::synth::sparse_stream;

fn auto_config(loss: LossKind) -> LearnerConfig {
    config_with(loss, vec![10.0, 0.1, 1e-3])
}

fn config_with(loss: LossKind, grid: Vec<f64>) -> LearnerConfig {
    let mut c = Config::defaults().learners.remove(0);
    // The defaults' squared loss fits an intercept; this test was written without one.
    c.intercept = false;
    c.loss = Loss::new(loss, 0.25).unwrap();
    c.k = 5;
    c.blocks = 4;
    c.lambda_auto = Some(AutoLambda {
        grid,
        margin: 0.02,
        half_life: 500,
        criterion: Criterion::Holdout,
    });
    c.lambda = 0.1;
    c
}

/// `build` gives SDIHT with criterion holdout the shared grid, whose window is the one copy of the
/// samples: the served member holds it, the others an empty one and their own duals, one per slot.
#[test]
fn the_members_share_one_copy_of_the_samples() {
    let config = auto_config(LossKind::Logistic);
    let built = crate::learner::build(&config, 300, None);
    assert!(built.lambda_auto().is_some());
    let data = sparse_stream(1000, 80, 4, 8, 0.1, true, 3);
    let mut l = SharedGrid::new(config, 300, None);
    for chunk in data.samples.chunks(70) {
        l.insert_samples(chunk);
        for _ in 0..6 {
            l.step();
        }
    }
    // 1,000 arrived, 200 held out; the window holds the newest 300 of the 800 learned.
    assert_eq!(l.stats().samples_seen, 1000);
    assert_eq!(l.window().len(), 300);
    for (i, m) in l.members().iter().enumerate() {
        if i == l.live() {
            assert_eq!(m.window().len(), 300);
        } else {
            assert_eq!(m.window().len(), 0, "member {i} holds no samples");
            assert_eq!(m.parked().len(), 300);
        }
        // Only the served member predicts (the others admit the rows with dual 0).
        let seen = if i == l.live() { 800 } else { 0 };
        assert_eq!(m.stats().samples_seen, seen);
    }
}

/// Weak duality for every member: over the shared window with its own duals, `D <= P`; and each
/// member's certified model is its current one.
#[test]
fn every_member_certifies_a_valid_gap_on_the_shared_window() {
    for loss in [LossKind::Logistic, LossKind::Squared, LossKind::Hinge] {
        let classify = loss != LossKind::Squared;
        let data = sparse_stream(1500, 100, 5, 10, 0.1, classify, 11);
        let mut l = SharedGrid::new(auto_config(loss), 400, None);
        for chunk in data.samples.chunks(100) {
            l.insert_samples(chunk);
            for _ in 0..10 {
                l.step();
            }
            for i in 0..l.members().len() {
                let snap = l.with(i, |m| m.certify());
                let c = snap.model.certificate;
                assert!(
                    c.dual <= c.primal + 1e-9 * c.primal.abs().max(1.0),
                    "{loss:?} member {i}: {c:?}"
                );
                assert_eq!(snap.window_samples, 400.min(l.window().len()));
            }
        }
    }
}

/// Squared loss with unit true weights: lambda = 10 shrinks the model to almost nothing, so the
/// learner leaves the start member (0.1) for the smallest lambda's (1e-2; not 1e-3, where `lambda N`
/// is 2 and the member's held-out loss swings by a factor of 5 from step to step: never settled); a checkpoint resumes there, with
/// the window and the served duals, and the other members restart from them.
#[test]
fn serves_the_small_lambda_a_stream_calls_for_and_checkpoints_it() {
    let data = sparse_stream(4000, 100, 5, 10, 0.05, false, 9);
    let config = config_with(LossKind::Squared, vec![10.0, 0.1, 1e-2]);
    let mut l = SharedGrid::new(config.clone(), 2000, None);
    for chunk in data.samples.chunks(200) {
        l.insert_samples(chunk);
        for _ in 0..20 {
            l.step();
        }
        l.certify();
    }
    for _ in 0..200 {
        l.step();
        l.certify();
    }
    assert_eq!(l.live(), 2, "{:?}", l.record());
    let snap = l.certify();
    assert_eq!(snap.model.lambda, 1e-2);
    assert_eq!(snap.model.support, data.true_support());
    let state = l.state();
    assert_eq!(state.samples.len(), 2000);
    assert_eq!(state.stats.samples_seen, 4000);
    let resumed = SharedGrid::new(config, 2000, Some(state.clone()));
    assert_eq!(resumed.live(), 2);
    assert_eq!(resumed.window().len(), 2000);
    assert_eq!(resumed.stats().samples_seen, 4000);
    assert_eq!(resumed.window().to_pairs(), state.samples);
    for (i, m) in resumed.members().iter().enumerate() {
        if i != 2 {
            let ratio = m.config().lambda / 1e-2;
            let expected: Vec<f64> = state.samples.iter().map(|&(_, a)| a * ratio).collect();
            // Storage order is arrival order in a window rebuilt from a checkpoint.
            assert_eq!(m.parked(), &expected[..], "member {i}");
        }
    }
}

/// A member near its optimum that swings by a few percent between scorings but stays below the
/// served member's loss less the margin is eligible at every scoring (on fine_foods one swung 0.5187,
/// 0.5309, 0.5164 against the served 0.61 and waited seconds for two eligible scorings in a row);
/// one that rises to the bar or past it, by more than its lead, or has no earlier scoring, is not.
#[test]
fn a_member_that_swings_below_the_served_one_is_eligible() {
    let bar = 0.61 * 0.99;
    assert!(eligible(false, 0.5187, 0.5309, bar));
    assert!(eligible(false, 0.5309, 0.5164, bar));
    assert!(!eligible(false, 0.5187, 0.6050, bar));
    assert!(!eligible(false, 0.58, 0.6100, bar));
    assert!(!eligible(false, f64::NAN, 0.5, bar));
    assert!(eligible(true, f64::NAN, 0.7, bar));
    assert!(eligible(false, 0.7, 0.69, bar));
    // Below the bar at both scorings but rising by more than its lead: its swing, not its model, may
    // be what put it there (a member at `lambda N` near 2 swings by a factor of 5).
    assert!(!eligible(false, 0.2, 0.5, bar));
    assert!(eligible(false, 0.45, 0.5, bar));
}

#[test]
fn a_loss_is_settled_once_it_moves_less_than_one_percent() {
    assert!(!settled(f64::NAN, 1.0));
    assert!(settled(1.0, 1.005));
    assert!(!settled(1.0, 0.98));
    assert!(settled(0.0, 0.0));
}

/// A checkpoint's grid is taken when it is the configured one with at most `EXTEND` smaller lambdas
/// after it (a grid that extended itself), and refused otherwise.
#[test]
fn a_checkpointed_grid_may_extend_the_configured_one_below() {
    let configured = [0.1, 0.01, 1e-3];
    assert!(extends(&configured, &configured));
    assert!(extends(&[0.1, 0.01, 1e-3, 1e-4, 1e-5], &configured));
    assert!(!extends(&[0.1, 0.01, 1e-3, 1e-2], &configured));
    assert!(!extends(&[0.1, 0.01], &configured));
    assert!(!extends(&[1.0, 0.1, 0.01, 1e-3], &configured));
    let long: Vec<f64> = (0..3 + EXTEND + 1)
        .map(|i| 0.1f64.powi(i as i32 + 1))
        .collect();
    assert!(!extends(&long, &configured));
}

/// After an insert that replaces more of the window than the parked members' block steps follow,
/// only the served member steps; a small insert leaves the round as it was (every call steps the
/// served member and one other).
#[test]
fn under_a_window_turning_over_only_the_served_member_steps() {
    let data = sparse_stream(3000, 100, 5, 10, 0.1, true, 12);
    let mut l = SharedGrid::new(auto_config(LossKind::Logistic), 400, None);
    l.insert_samples(&data.samples[..400]);
    let steps =
        |l: &SharedGrid| -> Vec<u64> { l.members().iter().map(|m| m.stats().steps).collect() };
    let mut at = 400;
    for (rows, other_steps) in [(1, 4), (200, 0), (1, 4), (100, 0)] {
        l.insert_samples(&data.samples[at..at + rows]);
        at += rows;
        let (before, live) = (steps(&l), l.live());
        for _ in 0..4 {
            l.step();
        }
        let after = steps(&l);
        let taken: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
        let others: u64 = (0..taken.len())
            .filter(|&i| i != live)
            .map(|i| taken[i])
            .sum();
        assert_eq!(
            (taken[live], others),
            (4, other_steps),
            "{rows} rows: {taken:?}"
        );
    }
}
