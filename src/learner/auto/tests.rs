//! The `lambda = "auto"` learner on seeded streams: each member's own progressive losses, the move to
//! the lambda a stream calls for and its checkpoint, `build`, a burst ranked by the held-out samples,
//! the bounded ring.

use super::*;
use crate::config::Config;
use crate::learner::params::AutoLambda;
use crate::loss::{Loss, LossKind};
use crate::sample::SampleSet;
use crate::synth::sparse_stream;

fn auto_config(loss: LossKind, half_life: u64, criterion: Criterion) -> LearnerConfig {
    let mut c = Config::defaults().learners.remove(0);
    // The defaults' squared loss fits an intercept; this test was written without one.
    c.intercept = false;
    c.loss = Loss::new(loss, 0.25).unwrap();
    c.k = 5;
    c.blocks = 4;
    c.lambda_auto = Some(AutoLambda {
        grid: vec![10.0, 0.1, 1e-3],
        margin: 0.02,
        half_life,
        criterion,
    });
    c.lambda = 0.1;
    c
}

/// Each member predicts every sample before learning it; the selector's averages are exactly the
/// decayed means of the members' own progressive-loss counters.
#[test]
fn progressive_losses_are_each_members_own_counters() {
    let data = sparse_stream(300, 50, 3, 8, 0.1, false, 5);
    let mut l = AutoLambdaLearner::new(
        auto_config(LossKind::Squared, 100, Criterion::Progressive),
        200,
        None,
    );
    let mut reference = AutoState::new(vec![10.0, 0.1, 1e-3], 1);
    for chunk in data.samples.chunks(60) {
        let before: Vec<LearnerStats> = l.members().iter().map(|m| m.stats()).collect();
        l.insert_samples(chunk);
        for _ in 0..5 {
            l.step();
        }
        let decay = 0.5f64.powf(60.0 / 100.0);
        for (i, m) in l.members().iter().enumerate() {
            let after = m.stats();
            assert_eq!(after.progressive_count - before[i].progressive_count, 60);
            let mean = (after.progressive_loss_sum - before[i].progressive_loss_sum) / 60.0;
            reference.loss[i] = decay * reference.loss[i] + (1.0 - decay) * mean;
            reference.weight[i] = decay * reference.weight[i] + (1.0 - decay);
            assert_eq!(l.selector().state.loss[i], reference.loss[i]);
            assert_eq!(l.selector().state.weight[i], reference.weight[i]);
        }
    }
    assert_eq!(l.stats().samples_seen, 300);
    assert_eq!(l.window().len(), 200);
    let snap = l.certify();
    let record = snap.model.lambda_auto.expect("the record is published");
    assert_eq!(snap.model.lambda, record.grid[record.live]);
    assert_eq!(record.live, l.live());
    assert_eq!(record.losses.len(), 3);
    assert_eq!(
        snap.stats.steps,
        l.members().iter().map(|m| m.stats().steps).sum::<u64>()
    );
}

/// Squared loss with unit true weights: lambda = 10 shrinks the model to almost nothing, so the
/// learner must leave the start member (0.1) for the smallest lambda's, and stay there.
#[test]
fn ends_on_the_small_lambda_a_stream_calls_for_and_checkpoints_it() {
    let data = sparse_stream(4000, 100, 5, 10, 0.05, false, 9);
    let config = auto_config(LossKind::Squared, 500, Criterion::Progressive);
    let mut l = AutoLambdaLearner::new(config.clone(), 2000, None);
    for chunk in data.samples.chunks(200) {
        l.insert_samples(chunk);
        for _ in 0..20 {
            l.step();
        }
    }
    assert_eq!(l.live(), 2, "{:?}", l.selector().state);
    let s = &l.selector().state;
    assert!(
        s.average(2) < s.average(1) && s.average(1) < s.average(0),
        "{s:?}"
    );
    // The checkpoint carries the selection; a restore serves the same member with the same model.
    let state = l.state();
    assert_eq!(state.auto.as_ref(), Some(&l.selector().state));
    let before = l.certify();
    let mut back = AutoLambdaLearner::new(config, 2000, Some(state));
    assert_eq!(back.live(), 2);
    assert_eq!(back.selector().state, l.selector().state);
    let after = back.certify();
    assert_eq!(after.model.support, before.model.support);
    assert_eq!(after.model.lambda, 1e-3);
    assert_eq!(
        back.members()[0].window().len(),
        2000,
        "challengers restart warm"
    );
}

#[test]
fn build_makes_an_auto_learner_for_lambda_auto() {
    let config = auto_config(LossKind::Logistic, 10, Criterion::Holdout);
    let l = super::super::build(&config, 16, None);
    let record = l.lambda_auto().expect("lambda = auto");
    assert_eq!(record.grid, [10.0, 0.1, 1e-3]);
    assert_eq!(record.live, 1);
    assert_eq!(l.config().lambda, 0.1);
    assert!(l.config().lambda_auto.is_some());
}

/// A whole data set inserted at once (a file POSTed in one body): every member predicts it with its
/// empty model, so the progressive losses tie and never move the served lambda, while the held-out
/// samples, scored after the members have converged, move it to the small lambda the data call for.
#[test]
fn a_burst_is_ranked_by_the_held_out_samples() {
    let data = sparse_stream(3000, 100, 5, 10, 0.05, false, 9);
    let run = |criterion| {
        let mut l =
            AutoLambdaLearner::new(auto_config(LossKind::Squared, 500, criterion), 4000, None);
        l.insert_samples(&data.samples);
        for _ in 0..50 {
            for _ in 0..40 {
                l.step();
            }
            l.certify();
        }
        l
    };
    let progressive = run(Criterion::Progressive);
    assert_eq!(progressive.live(), 1, "{:?}", progressive.selector());
    let l = run(Criterion::Holdout);
    assert_eq!(l.live(), 2, "{:?}", l.selector());
    let h = &l.selector().state.holdout;
    assert!(h[2] < h[1] && h[1] < h[0], "{h:?}");
    // The members learned 4 in 5 samples; the served learner all of them; the ring holds the rest.
    assert_eq!(l.held_out(), 600);
    assert!(l.members().iter().all(|m| m.window().len() == 2400));
    assert_eq!(l.window().len(), 3000);
    let snap = l.served().core().stats.samples_seen;
    assert_eq!(snap, 3000);
    let record = l.lambda_auto().expect("the record");
    assert_eq!(record.criterion, "holdout");
    assert_eq!(record.losses, *h);
    assert_eq!(record.progressive.len(), 3);
}

/// The ring keeps the newest fifth of a window's worth of samples, and a restore serves the same
/// lambda from the served learner's window (the ring refills from new samples).
#[test]
fn the_ring_is_bounded_and_a_restore_keeps_the_served_lambda() {
    let data = sparse_stream(3000, 100, 5, 10, 0.05, false, 9);
    let config = auto_config(LossKind::Squared, 500, Criterion::Holdout);
    let mut l = AutoLambdaLearner::new(config.clone(), 1000, None);
    for chunk in data.samples.chunks(250) {
        l.insert_samples(chunk);
        for _ in 0..20 {
            l.step();
        }
        l.certify();
    }
    assert_eq!(l.held_out(), 200);
    // 600 held out, the ring holds a fifth of the window: the oldest 400 dropped, and recorded.
    let record = l.record();
    assert_eq!((record.held_out, record.held_out_dropped), (200, 400));
    assert_eq!(l.window().len(), 1000);
    let state = l.state();
    let before = l.certify();
    let mut back = AutoLambdaLearner::new(config, 1000, Some(state));
    assert_eq!(back.live(), l.live());
    assert_eq!(back.held_out(), 0);
    let after = back.certify();
    assert_eq!(after.model.lambda, before.model.lambda);
    assert_eq!(back.window().len(), 1000);
}
