//! One-vs-rest on a stream: a planted three-class stream learned with each class's certificate valid
//! and the summed gap published, labels outside the classes refused with no state changed, the
//! checkpoint round trip, and the configs it refuses.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::config::Config;
use crate::loss::{Loss, LossKind};
use crate::sample::Sample;

const CLASSES: usize = 3;

fn config() -> LearnerConfig {
    let mut c = Config::defaults().learners.remove(0);
    c.loss = Loss::new(LossKind::Logistic, 0.25).unwrap();
    c.lambda_auto = None;
    c.k = 2;
    c.lambda = 0.01;
    c.tol = 1e-6;
    c
}

/// Class `y` raises features `2y` and `2y + 1` (the planted support, six features in all); every
/// sample also holds four noise features from 6..40.
fn stream(n: usize, seed: u64) -> Vec<Sample> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let y = rng.gen_range(0..CLASSES);
            let mut features: Vec<(u32, f64)> = (0..2 * CLASSES as u32)
                .map(|j| {
                    let mean = if j / 2 == y as u32 { 2.0 } else { 0.0 };
                    (j, mean + rng.gen_range(-1.0..1.0))
                })
                .collect();
            while features.len() < 2 * CLASSES + 4 {
                let j = rng.gen_range(2 * CLASSES as u32..40);
                if features.iter().all(|&(i, _)| i != j) {
                    features.push((j, rng.gen_range(-1.0..1.0)));
                }
            }
            features.sort_by_key(|&(j, _)| j);
            Sample {
                indices: features.iter().map(|&(j, _)| j).collect(),
                values: features.iter().map(|&(_, v)| v).collect(),
                label: y as f64,
                weight: None,
            }
        })
        .collect()
}

fn run_to_idle(l: &mut OneVsRest) -> MulticlassSnapshot {
    for _ in 0..100 {
        let mut steps = 0;
        while l.step() == StepOutcome::Stepped && steps < 100_000 {
            steps += 1;
        }
        let snap = l.certify().unwrap();
        if l.step() != StepOutcome::Stepped {
            return snap;
        }
    }
    l.certify().unwrap()
}

fn learned(samples: &[Sample]) -> OneVsRest {
    let mut l = OneVsRest::new(&config(), CLASSES, 1000, None).unwrap();
    for chunk in samples.chunks(100) {
        l.insert(&SampleBlock::from_samples(chunk)).unwrap();
    }
    l
}

#[test]
fn learns_a_planted_three_class_stream_with_every_certificate_valid() {
    let mut l = learned(&stream(1500, 1));
    let snap = run_to_idle(&mut l);
    assert!(snap.is_finite());
    let mut sum = 0.0;
    for (class, member) in snap.members.iter().enumerate() {
        let c = member.model.certificate;
        assert!(c.primal >= c.dual - 1e-9, "class {class}: P < D in {c:?}");
        assert!(
            c.gap >= -1e-9 && (c.gap - (c.primal - c.dual)).abs() < 1e-9,
            "{c:?}"
        );
        sum += c.gap;
        // Hard thresholding may settle on a planted feature of another class (a negative weight):
        // every class's support is planted, and holds one of its own features.
        let support = &member.model.support;
        assert!(
            support.iter().all(|&j| j < 2 * CLASSES as u32),
            "{support:?}"
        );
        assert!(
            support.iter().any(|&j| j as usize / 2 == class),
            "{support:?}"
        );
        assert_eq!(member.window_samples, 1000);
    }
    assert_eq!(snap.gap, sum);
    let held_out = stream(600, 2);
    let right = held_out
        .iter()
        .filter(|s| snap.model.predict(s.row()) == s.label)
        .count();
    assert!(right > 500, "{right} of 600 right (chance is 200)");
}

#[test]
fn a_label_outside_the_classes_is_refused_and_changes_nothing() {
    let samples = stream(300, 3);
    let mut l = learned(&samples);
    let before = l.state();
    for bad in [3.0, -1.0, 1.5, f64::NAN] {
        let mut batch = samples[..5].to_vec();
        batch[4].label = bad;
        match l.insert(&SampleBlock::from_samples(&batch)) {
            Err(MulticlassError::Label {
                row: 4, last: 2, ..
            }) => {}
            other => panic!("label {bad}: {other:?}"),
        }
    }
    assert_eq!(l.state(), before);
}

#[test]
fn resumes_from_its_checkpoint_with_the_same_model() {
    let mut l = learned(&stream(800, 4));
    let snap = run_to_idle(&mut l);
    let mut resumed = OneVsRest::new(&config(), CLASSES, 1000, Some(l.state())).unwrap();
    let again = resumed.certify().unwrap();
    // The same supports and weights; the intercept and the certificate are recomputed from the
    // window, equal up to rounding.
    for (a, b) in again.model.models.iter().zip(&snap.model.models) {
        assert_eq!(a.support, b.support);
        assert_eq!(a.weights, b.weights);
        assert!((a.intercept - b.intercept).abs() < 1e-9);
    }
    assert!((again.gap - snap.gap).abs() < 1e-9);
}

#[test]
fn refuses_two_classes_a_regression_loss_and_a_checkpoint_of_another_size() {
    assert_eq!(
        OneVsRest::new(&config(), 2, 10, None).err(),
        Some(MulticlassError::Classes(2))
    );
    let mut squared = config();
    squared.loss = Loss::new(LossKind::Squared, 0.25).unwrap();
    assert_eq!(
        OneVsRest::new(&squared, 3, 10, None).err(),
        Some(MulticlassError::Loss)
    );
    let states = learned(&stream(50, 5)).state();
    assert!(matches!(
        OneVsRest::new(&config(), 4, 10, Some(states)).err(),
        Some(MulticlassError::State {
            found: 3,
            classes: 4
        })
    ));
}
