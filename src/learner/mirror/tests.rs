//! The streaming mirror and SMIDAS learners on seeded streams: weak duality and the offline certificate
//! bit for bit, support recovery, checkpoints that resume the same model, the intercept, idling.

use super::*;
use crate::config::Config;
use crate::learner::params::{SolverOptions, StreamSolverKind};
use crate::learner::{Idle, IDLE_EPOCHS};
use crate::loss::{Loss, LossKind};
use crate::sample::Sample;
use crate::solver::mirror::{Constraint, MirrorConfig, MirrorMap, MirrorStep};
use crate::solver::objective::{primal_value, separate_certificate, DualScratch};
use crate::synth::sparse_stream;

fn config(solver: StreamSolverKind, options: SolverOptions, k: usize) -> LearnerConfig {
    let mut c = Config::defaults().learners.remove(0);
    // The defaults' squared loss fits an intercept; this test was written without one.
    c.intercept = false;
    c.solver = solver;
    c.options = options;
    c.loss = Loss::new(LossKind::Squared, 0.25).unwrap();
    c.k = k;
    c.lambda = 0.01;
    c.blocks = 4;
    c.tol = 1e-8;
    c
}

fn mirror(map: MirrorMap) -> LearnerConfig {
    let m = MirrorConfig {
        constraint: Constraint::None,
        horizon: 10_000,
        ..MirrorConfig::new(map)
    };
    config(StreamSolverKind::Mirror, SolverOptions::Mirror(m), 5)
}

fn smidas() -> LearnerConfig {
    let options = SolverOptions::Smidas {
        l1: 1e-3,
        p: 2.0 * (200f64).ln(),
        step: MirrorStep::Auto,
        horizon: 10_000,
        batch: 1,
    };
    config(StreamSolverKind::Smidas, options, 5)
}

/// Steps until every inserted sample was learned from (the intake only stores them).
fn learn_inserted<E: PrimalEngine>(l: &mut StreamPrimal<E>) {
    while l.unlearned > 0 {
        assert_eq!(l.step(), StepOutcome::Stepped);
    }
}

fn feed(l: &mut dyn StreamingLearner, samples: &[Sample], steps_per_chunk: usize) {
    for chunk in samples.chunks(100) {
        l.insert_samples(chunk);
        for _ in 0..steps_per_chunk {
            l.step();
        }
    }
}

/// Weak duality over the window at every snapshot, and the certificate is the one computed from
/// scratch by the offline functions, bit for bit (as are the duals written back to the window).
fn check_weak_duality(l: &mut dyn StreamingLearner) -> Certificate {
    let snap = l.certify();
    let c = snap.model.certificate;
    assert!(c.gap >= -1e-12 * c.primal.abs().max(1.0), "{c:?}");
    assert_eq!(c.samples, l.window().len());
    let (window, config) = (l.window(), l.config());
    let mut w = vec![0.0; window.dim()];
    for (&j, &v) in snap.model.support.iter().zip(&snap.model.weights) {
        w[j as usize] = v;
    }
    let (loss, lambda) = (&config.loss, config.lambda);
    let mut alpha = Vec::new();
    let reference = separate_certificate(
        window,
        loss,
        lambda,
        snap.model.k,
        &w,
        None,
        &mut alpha,
        &mut DualScratch::default(),
    );
    let (primal, dual) = (reference.primal, reference.dual_at_primal);
    assert_eq!(c, Certificate::new(primal, dual, window.len()));
    assert_eq!(window.alphas(), &alpha[..]);
    c
}

#[test]
fn mirror_recovers_the_support_with_a_falling_gap_and_weak_duality() {
    let data = sparse_stream(3000, 200, 5, 20, 0.01, false, 7);
    // (`pnorm` is far slower on this stream — its relative gap is still ~170 after the same run —
    // so it is left out here; the offline tests cover it.)
    for map in [MirrorMap::HypEntropy { beta: 1.0 }, MirrorMap::Euclidean] {
        let mut l = StreamMirror::new(mirror(map), 1000, None);
        l.insert_samples(&data.samples[..200]);
        let early = check_weak_duality(&mut l);
        feed(&mut l, &data.samples[200..], 10);
        for _ in 0..800 {
            if l.step() != StepOutcome::Stepped {
                break;
            }
        }
        let late = check_weak_duality(&mut l);
        assert!(
            late.relative_gap() < 0.1 * early.relative_gap(),
            "{map:?}: {early:?} -> {late:?}"
        );
        assert_eq!(
            l.certify().model.support,
            data.true_support(),
            "{map:?} {late:?}"
        );
        assert!(l.window().len() == 1000 && l.stats().samples_seen == 3000);
    }
}

#[test]
fn smidas_learns_and_certifies_at_its_support_size() {
    let data = sparse_stream(3000, 200, 5, 20, 0.01, false, 9);
    let mut l = StreamSmidas::new(smidas(), 1000, None);
    l.insert_samples(&data.samples[..200]);
    learn_inserted(&mut l);
    let early = check_weak_duality(&mut l);
    feed(&mut l, &data.samples[200..], 10);
    let late = check_weak_duality(&mut l);
    let snap = l.certify();
    assert_eq!(snap.model.k, snap.model.support.len().max(5));
    assert!(late.primal < early.primal, "{early:?} -> {late:?}");
    for j in data.true_support() {
        assert!(snap.model.support.contains(&j), "{j} missing: {snap:?}");
    }
}

#[test]
fn restored_state_resumes_the_same_model() {
    let data = sparse_stream(800, 100, 4, 10, 0.01, false, 11);
    let learners: Vec<(Box<dyn StreamingLearner>, LearnerConfig)> = vec![
        (
            Box::new(StreamMirror::new(
                mirror(MirrorMap::HypEntropy { beta: 0.5 }),
                500,
                None,
            )),
            mirror(MirrorMap::HypEntropy { beta: 0.5 }),
        ),
        (Box::new(StreamSmidas::new(smidas(), 500, None)), smidas()),
    ];
    for (mut l, config) in learners {
        feed(l.as_mut(), &data.samples, 3);
        let snap = l.certify();
        let state = l.state();
        let mut back: Box<dyn StreamingLearner> = match config.solver {
            StreamSolverKind::Mirror => Box::new(StreamMirror::new(config, 500, Some(state))),
            _ => Box::new(StreamSmidas::new(config, 500, Some(state))),
        };
        assert_eq!(back.stats(), l.stats());
        let again = back.certify();
        assert_eq!(again.model.support, snap.model.support);
        assert_eq!(again.model.weights, snap.model.weights, "the same weights");
        // The restored window is stored oldest first, so the certificate's sums run in another
        // order: equal to rounding.
        let (a, b) = (again.model.certificate, snap.model.certificate);
        assert!((a.primal - b.primal).abs() <= 1e-12 * b.primal.abs().max(1.0));
        assert!((a.dual - b.dual).abs() <= 1e-12 * b.dual.abs().max(1.0));
        // Both continue identically on the same new data and steps.
        l.insert_samples(&data.samples[..50]);
        back.insert_samples(&data.samples[..50]);
        assert_eq!(back.certify().model.weights, l.certify().model.weights);
        // Every stored dual is feasible (the certificate's dual point).
        for i in 0..back.window().len() {
            let r = back.window().row(i);
            let a = back.window().alphas()[i];
            assert_eq!(back.config().loss.sample(r.label, r.weight).project(a), a);
        }
    }
}

/// Samples `y = sign(x.w* + offset + noise)` over `d` features, 3 per row (seeded).
fn offset_stream(n: usize, d: usize, offset: f64, seed: u64) -> Vec<Sample> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let mut indices: Vec<u32> = (0..3).map(|_| rng.gen_range(0..d as u32)).collect();
            indices.sort_unstable();
            indices.dedup();
            let values: Vec<f64> = indices.iter().map(|_| rng.gen_range(-1.0..1.0)).collect();
            let score: f64 = indices
                .iter()
                .zip(&values)
                .map(|(&j, &v)| if j < 3 { 2.0 * v } else { 0.0 })
                .sum::<f64>()
                + offset
                + rng.gen_range(-0.5..0.5);
            Sample::new(indices, values, score.signum(), None).unwrap()
        })
        .collect()
}

/// With an intercept the certificate's dual point sums to zero and is feasible, `D` stays below `P`
/// at the model and at random other k-sparse models with any intercept (weak duality of the problem
/// with an unpenalised `b`), the intercept learns the stream's offset, and a checkpoint carries it.
#[test]
fn intercept_certificate_keeps_weak_duality_and_the_checkpoint_carries_it() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    for (trial, solver) in [StreamSolverKind::Mirror, StreamSolverKind::Smidas]
        .into_iter()
        .cycle()
        .take(6)
        .enumerate()
    {
        let offset = if trial % 4 < 2 { 1.5 } else { -1.5 };
        let data = offset_stream(600, 30, offset, trial as u64);
        let mut config = match solver {
            StreamSolverKind::Mirror => mirror(MirrorMap::Euclidean),
            _ => smidas(),
        };
        if let SolverOptions::Mirror(m) = &mut config.options {
            m.memory = crate::solver::mirror::Memory::Dense;
        }
        config.loss = Loss::new(LossKind::Logistic, 0.25).unwrap();
        config.intercept = true;
        config.k = 3;
        let mut l: Box<dyn StreamingLearner> = match solver {
            StreamSolverKind::Mirror => Box::new(StreamMirror::new(config.clone(), 400, None)),
            _ => Box::new(StreamSmidas::new(config.clone(), 400, None)),
        };
        feed(l.as_mut(), &data, 2);
        let snap = l.certify();
        let c = snap.model.certificate;
        assert!(c.primal >= c.dual && c.gap >= 0.0, "{solver:?}: {c:?}");
        let b = snap.model.intercept;
        assert!(
            b * offset > 0.0,
            "{solver:?}: intercept {b} for offset {offset}"
        );
        let (window, loss) = (l.window(), config.loss);
        let sum: f64 = window.alphas().iter().sum();
        assert!(sum.abs() <= 1e-9 * window.len() as f64, "sum alpha = {sum}");
        for i in 0..window.len() {
            let r = window.row(i);
            let a = window.alphas()[i];
            assert_eq!(loss.sample(r.label, r.weight).project(a), a);
        }
        let k_cert = snap.model.k;
        for _ in 0..20 {
            let mut w = vec![0.0; window.dim()];
            for _ in 0..k_cert {
                w[rng.gen_range(0..window.dim())] = rng.gen_range(-3.0..3.0);
            }
            let b = rng.gen_range(-3.0..3.0);
            let p = primal_value(window, &loss, config.lambda, &w, b);
            assert!(p >= c.dual, "{solver:?}: P(w', b') = {p} < D = {}", c.dual);
        }
        let state = l.state();
        assert_eq!(state.primal.as_ref().unwrap().intercept, b);
        let mut back: Box<dyn StreamingLearner> = match solver {
            StreamSolverKind::Mirror => Box::new(StreamMirror::new(config, 400, Some(state))),
            _ => Box::new(StreamSmidas::new(config, 400, Some(state))),
        };
        // The restored window is stored oldest first, so the certificate's intercept refit sums in
        // another order: equal to rounding.
        let restored = back.certify().model.intercept;
        assert!(
            (restored - b).abs() <= 1e-12 * b.abs().max(1.0),
            "{restored} vs {b}"
        );
    }
}

#[test]
fn idles_after_idle_epochs_without_data() {
    let data = sparse_stream(300, 50, 3, 8, 0.01, false, 3);
    let mut l = StreamMirror::new(mirror(MirrorMap::Euclidean), 300, None);
    assert_eq!(l.step(), StepOutcome::Idle(Idle::EmptyWindow));
    l.insert_samples(&data.samples);
    let mut steps = 0;
    while l.step() == StepOutcome::Stepped {
        steps += 1;
    }
    // Four steps learn the inserted samples (a block's worth each), then IDLE_EPOCHS epochs of four
    // blocks over the unchanged window.
    assert_eq!(steps, 4 + IDLE_EPOCHS * 4);
    l.insert_samples(&data.samples[..1]);
    assert_eq!(l.step(), StepOutcome::Stepped);
}

#[test]
fn inserted_samples_are_learned_once_in_arrival_order_by_the_steps() {
    let data = sparse_stream(300, 50, 3, 8, 0.01, false, 5);
    let config = mirror(MirrorMap::Euclidean);
    let mut l = StreamMirror::new(config.clone(), 1000, None);
    l.insert_samples(&data.samples);
    assert_eq!(l.unlearned, 300, "the intake only stores");
    assert!(l.engine().model().support.is_empty());
    learn_inserted(&mut l);
    // The same mini-batches, in the same order, straight into the solver's state.
    let mut reference = MirrorState::from_config(&config);
    reference.rewind_schedule();
    let batch = reference.batch();
    for chunk in data.samples.chunks(batch) {
        reference.learn(chunk.iter().map(|s| s.row()));
    }
    assert_eq!(l.engine().model().weights, reference.model().weights);
    assert_eq!(l.gauges().unlearned_samples, 0);
}

#[test]
fn samples_the_window_evicts_before_a_step_learned_them_are_counted() {
    let data = sparse_stream(250, 50, 3, 8, 0.01, false, 6);
    let mut l = StreamMirror::new(mirror(MirrorMap::Euclidean), 100, None);
    l.insert_samples(&data.samples);
    assert_eq!((l.unlearned, l.gauges().unlearned_samples), (100, 150));
    learn_inserted(&mut l);
    l.insert_samples(&data.samples[..30]);
    assert_eq!((l.unlearned, l.gauges().unlearned_samples), (30, 150));
}

/// SMIDAS with the daemon's defaults (mini-batches of [`crate::solver::smidas::STREAM_BATCH`]
/// samples, the automatic step at the learner's k) on a logistic stream: the first insert's steps
/// already give a model better than `w = 0` (the first step was once sized before its rows entered the
/// row bound, `1 / lambda`, and sent the weights to 10^4), and the stream's true features are found.
#[test]
fn smidas_in_mini_batches_learns_from_the_first_insert() {
    let data = sparse_stream(6000, 200, 5, 20, 0.05, true, 17);
    let options = SolverOptions::Smidas {
        l1: 1e-3,
        p: 2.0 * (200f64).ln(),
        step: MirrorStep::Auto,
        horizon: 0,
        batch: crate::solver::smidas::STREAM_BATCH,
    };
    let mut c = config(StreamSolverKind::Smidas, options, 5);
    c.loss = Loss::new(LossKind::Logistic, 0.25).unwrap();
    c.lambda = 1e-4;
    let mut l = StreamSmidas::new(c, 2000, None);
    assert_eq!(l.engine.batch(), crate::solver::smidas::STREAM_BATCH);
    l.insert_samples(&data.samples[..1000]);
    learn_inserted(&mut l);
    let first = l.certify().model.certificate;
    assert!(first.primal < std::f64::consts::LN_2, "{first:?}");
    for chunk in data.samples[1000..].chunks(500) {
        l.insert_samples(chunk);
        learn_inserted(&mut l);
        l.step();
    }
    let snap = l.certify();
    assert!(snap.model.certificate.primal < first.primal, "{snap:?}");
    for j in data.true_support() {
        assert!(snap.model.support.contains(&j), "{j} missing: {snap:?}");
    }
}

/// The streaming SMIDAS sizes its automatic step at its `k`, as `fit` does, not at the worst case of
/// one nonzero weight (a step 72 times smaller at `p = 2 ln 2^20`, `k = 100`).
#[test]
fn the_smidas_learner_sizes_its_automatic_step_at_its_k() {
    use crate::solver::smidas::SmidasState;
    let p = 2.0 * (2f64.powi(20)).ln();
    let options = SolverOptions::Smidas {
        l1: 1e-3,
        p,
        step: MirrorStep::Auto,
        horizon: 0,
        batch: 1,
    };
    let c = config(StreamSolverKind::Smidas, options, 100);
    let mut engine = <SmidasState as engine::PrimalEngine>::from_config(&c);
    let fresh = || {
        SmidasState::new(1e-3, MirrorStep::Auto, c.loss, c.lambda, c.intercept, 0)
            .and_then(|s| s.with_p(p))
            .unwrap()
    };
    let (mut at_k, mut no_hint) = (fresh(), fresh());
    at_k.set_sparsity_hint(100);
    for s in [&mut engine, &mut at_k, &mut no_hint] {
        s.observe_row_bound(1.0);
    }
    assert_eq!(engine.step_size(), at_k.step_size());
    let ratio = engine.step_size() / no_hint.step_size();
    assert!(ratio > 50.0, "{ratio}");
}
