//! Checks of the mirror state's step against independent references (a hand-written stochastic IHT,
//! mini-batches fed sample by sample), its support mask, its growth with the feature space, the dense
//! memory's ridge shrink, the rejection of non-finite steps and the `Auto` step.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::loss::LossKind;
use crate::sample::{Dataset, SampleSet};
use crate::solver::mirror::MirrorStep;
use crate::solver::tests::row;
use crate::sparse::{hard_threshold, sparse_axpy, ThresholdScratch};
use crate::synth;

/// The reference: stochastic IHT, `w <- H_k(w - eta (l'(w.x_i) x_i + lambda w))`, written densely.
#[test]
fn euclidean_mirror_descent_is_stochastic_iht() {
    let problem = synth::sparse_stream(150, 60, 5, 12, 0.2, true, 5);
    let data = Dataset::from_samples(&problem.samples, 0);
    for kind in [LossKind::Squared, LossKind::Logistic, LossKind::Huber] {
        let loss = Loss::new(kind, 0.25).unwrap();
        let (lambda, k) = (0.01, 6);
        let mut learner = MirrorState::new(
            MirrorConfig::new(MirrorMap::Euclidean),
            loss,
            lambda,
            k,
            false,
            60,
        )
        .unwrap();
        let mut w = vec![0.0; 60];
        let (mut g, mut trial, mut support) = (vec![0.0; 60], vec![0.0; 60], Vec::new());
        let mut scratch = ThresholdScratch::default();
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        for _ in 0..3 * data.len() {
            let r = data.row(rng.gen_range(0..data.len()));
            // Ask the learner for its schedule first: the Auto step depends on the rows seen so far.
            learner.observe_row_bound(sparse_sq_norm(r.values));
            let eta = learner.step_size();
            let dl = loss
                .sample(r.label, r.weight)
                .derivative(sparse_dot(r.indices, r.values, &w));
            g.iter_mut().for_each(|v| *v = 0.0);
            sparse_axpy(dl, r.indices, r.values, &mut g);
            for j in 0..60 {
                trial[j] = w[j] - eta * (g[j] + lambda * w[j]);
            }
            hard_threshold(&trial, k, &mut w, &mut support, &mut scratch);
            learner.step_sample(r);
            assert_eq!(
                learner.model().weights,
                &w[..],
                "{kind}: iterates differ at step {}",
                learner.clock().steps
            );
            assert_eq!(learner.model().support, &support[..]);
        }
        assert!(
            support.len() == k,
            "{kind}: the run must exercise the thresholding"
        );
    }
}

/// The margin's mask marks exactly the support after every step, as the feature space grows.
#[test]
fn the_support_mask_marks_exactly_the_support() {
    let loss = Loss::new(LossKind::Logistic, 0.0).unwrap();
    let mut learner = MirrorState::new(
        MirrorConfig::new(MirrorMap::Euclidean),
        loss,
        0.01,
        3,
        true,
        0,
    )
    .unwrap();
    for (i, sample) in crate::synth::sparse_stream(300, 200, 5, 8, 0.1, false, 3)
        .samples
        .iter()
        .enumerate()
    {
        let mut s = sample.clone();
        s.label = if s.label >= 0.0 { 1.0 } else { -1.0 };
        learner.step_sample(s.row());
        let marked: Vec<u32> = (0..learner.support_mask.len() as u32 * 64)
            .filter(|&j| learner.support_mask[j as usize / 64] & (1 << (j % 64)) != 0)
            .collect();
        let mut support = learner.support.clone();
        support.sort_unstable();
        assert_eq!(marked, support, "after sample {i}");
        // The intake's score reads `w` through the mask: the dense sum, bit for bit.
        let dense =
            crate::sparse::sparse_dot(&s.indices, &s.values, &learner.w) + learner.intercept;
        assert_eq!(
            learner.score(s.row()).to_bits(),
            dense.to_bits(),
            "after sample {i}"
        );
    }
    // A row past the state's dimension (and its mask) is scored on the weights it has.
    let far = crate::sample::Sample::new(vec![1, 1 << 20], vec![1.0, 1.0], 1.0, None).unwrap();
    let dense =
        crate::sparse::sparse_dot(&far.indices, &far.values, &learner.w) + learner.intercept;
    assert_eq!(learner.score(far.row()).to_bits(), dense.to_bits());
}

#[test]
fn learner_grows_with_the_feature_space_and_steps_cost_no_more_than_the_candidates() {
    let loss = Loss::new(LossKind::Logistic, 0.0).unwrap();
    let mut learner = MirrorState::new(
        MirrorConfig::new(MirrorMap::HypEntropy { beta: 1.0 }),
        loss,
        0.01,
        2,
        true,
        0,
    )
    .unwrap();
    let a = crate::sample::Sample::new(vec![3, 70], vec![1.0, -0.5], 1.0, None).unwrap();
    let b = crate::sample::Sample::new(vec![1_000], vec![2.0], -1.0, None).unwrap();
    for _ in 0..20 {
        learner.step_sample(a.row());
        learner.step_sample(b.row());
    }
    assert!(learner.model().weights.len() >= 1_001);
    assert!(learner.model().support.len() <= 2);
    assert!(learner.score(a.row()) > 0.0 && learner.score(b.row()) < 0.0);
}

#[test]
fn samples_fed_one_by_one_step_like_consecutive_mini_batches() {
    let problem = synth::sparse_stream(300, 80, 5, 10, 0.1, true, 8);
    let data = Dataset::from_samples(&problem.samples, 0);
    let loss = Loss::new(LossKind::Logistic, 0.0).unwrap();
    for map in [
        MirrorMap::Euclidean,
        MirrorMap::pnorm_for_dim(80),
        MirrorMap::HypEntropy { beta: 0.5 },
    ] {
        let config = MirrorConfig {
            batch: 7,
            ..MirrorConfig::new(map)
        };
        let mut fed = MirrorState::new(config, loss, 0.01, 6, true, 0).unwrap();
        let mut batched = MirrorState::new(config, loss, 0.01, 6, true, 0).unwrap();
        let rows: Vec<_> = (0..data.len()).map(|i| data.row(i)).collect();
        for chunk in rows.chunks(7) {
            for &row in chunk {
                fed.step_sample(row);
            }
            batched.step_batch(chunk.iter().copied());
        }
        assert_eq!(fed.pending(), 300 % 7);
        fed.flush();
        assert_eq!(fed.pending(), 0);
        assert_eq!(fed.clock().steps, batched.clock().steps);
        assert_eq!(fed.model().weights, batched.model().weights, "{map:?}");
        assert_eq!(fed.model().intercept, batched.model().intercept, "{map:?}");
        assert!(!fed.model().support.is_empty());
    }
}

/// `Memory::Dense`: a coordinate that leaves the support keeps its mirror-space value, shrunk by the
/// ridge factor `1 - eta lambda` of every step it spends off the support (exactly once per step), and
/// comes back on fresh evidence from where it was; `Memory::Support` forgets it.
#[test]
fn dense_memory_keeps_off_support_evidence_and_shrinks_it_by_the_ridge() {
    let (eta, lambda) = (0.5, 0.1);
    let loss = Loss::new(LossKind::Squared, 0.25).unwrap();
    let config = |memory| MirrorConfig {
        step: MirrorStep::Constant(eta),
        memory,
        ..MirrorConfig::new(MirrorMap::Euclidean)
    };
    let mut dense = MirrorState::new(config(Memory::Dense), loss, lambda, 1, false, 3).unwrap();
    let mut sparse = MirrorState::new(config(Memory::Support), loss, lambda, 1, false, 3).unwrap();
    for l in [&mut dense, &mut sparse] {
        l.step_sample(row(&[0], &[1.0], 1.0));
        // theta_1 = -eta l'(0; 2), twice theta_0: it displaces coordinate 0.
        l.step_sample(row(&[1], &[1.0], 2.0));
        assert_eq!(l.model().support, &[1]);
    }
    // Coordinate 0 took the ridge of step 2 in its gradient while on the support.
    let dl = |label: f64| loss.sample(label, 1.0).derivative(0.0);
    let kept = -eta * dl(1.0) * (1.0 - eta * lambda);
    assert_eq!(dense.coordinates()[1], (0, 0.0, kept));
    assert_eq!(sparse.coordinates().len(), 1);
    // One step off the support (a row with a zero gradient): one shrink factor.
    dense.step_sample(row(&[2], &[1.0], 0.0));
    let shrunk = dense.coordinates()[1];
    assert_eq!((shrunk.0, shrunk.1), (0, 0.0));
    let expected = kept * (1.0 - eta * lambda);
    assert!(
        (shrunk.2 - expected).abs() <= 1e-15 * expected,
        "{shrunk:?}"
    );
    // Fresh evidence for coordinate 0: the dense learner adds it to what it kept and swaps it back.
    let w1 = dense.model().weights[1];
    dense.step_sample(row(&[0], &[1.0], 2.0 * w1));
    assert_eq!(dense.model().support, &[0]);
    let w0 = dense.model().weights[0];
    assert!(
        (w0 - (expected - eta * dl(2.0 * w1))).abs() <= 1e-12,
        "{w0}"
    );
    assert_eq!(dense.numeric_faults(), 0);
}

/// A step that would write a non-finite value is rejected with the state unchanged, and counted.
#[test]
fn a_non_finite_step_is_rejected_and_counted() {
    let loss = Loss::new(LossKind::Squared, 0.25).unwrap();
    for memory in [Memory::Dense, Memory::Support] {
        for map in [MirrorMap::Euclidean, MirrorMap::HypEntropy { beta: 1.0 }] {
            let config = MirrorConfig {
                memory,
                step: MirrorStep::Constant(1.0),
                ..MirrorConfig::new(map)
            };
            let mut l = MirrorState::new(config, loss, 0.01, 2, true, 4).unwrap();
            l.step_sample(row(&[0, 1], &[1.0, -0.5], 1.0));
            let before = (l.coordinates(), l.model().intercept, l.clock().steps);
            // (1e300 - 0)^2 gradients overflow.
            l.step_sample(row(&[2], &[1e300], 1e300));
            assert_eq!(l.numeric_faults(), 1, "{map:?} {memory:?}");
            assert_eq!(
                (l.coordinates(), l.model().intercept, l.clock().steps),
                before
            );
            l.step_sample(row(&[0], &[1.0], 1.0));
            assert_eq!(l.clock().steps, 2);
            assert!(l.model().weights.iter().all(|w| w.is_finite()));
        }
    }
}

/// The `Auto` step: `1/(s L)` at `t = 0`, non-increasing in `t`, half of it at `t = H` without a ridge;
/// with the hyperbolic entropy and `Memory::Dense` its scale is the link's gain at the current weights,
/// `sqrt(beta^2 + ||w||_inf^2)`, at least `beta`.
#[test]
fn the_auto_step_starts_at_one_over_l_and_decays_to_half_at_the_horizon() {
    let step = MirrorStep::Auto;
    let (s, l, h) = (2.0, 3.0, 100);
    assert_eq!(step.at(0, s, l, 0.0, h), 1.0 / (s * l));
    assert!((step.at(h, s, l, 0.0, h) - 0.5 / (s * l)).abs() < 1e-15);
    let mut last = f64::INFINITY;
    for t in 0..1000 {
        let eta = step.at(t, s, l, 1e-3, h);
        assert!(eta <= last && eta > 0.0);
        last = eta;
    }
    let loss = Loss::new(LossKind::Logistic, 0.25).unwrap();
    let beta = 0.5;
    let config = MirrorConfig {
        memory: Memory::Dense,
        ..MirrorConfig::new(MirrorMap::HypEntropy { beta })
    };
    let mut learner = MirrorState::new(config, loss, 1e-3, 3, false, 4).unwrap();
    assert_eq!(learner.gain(), beta);
    for _ in 0..50 {
        learner.step_sample(row(&[0, 2], &[1.0, 2.0], 1.0));
    }
    let w_max = learner
        .model()
        .weights
        .iter()
        .fold(0.0f64, |m, w| m.max(w.abs()));
    assert!(w_max > beta);
    assert_eq!(learner.gain(), beta.hypot(w_max));
}
