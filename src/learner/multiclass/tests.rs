//! One-vs-rest on a stream: the relabelling each class's learner applies, and a planted three-class
//! stream learned by three class learners, with each class's certificate valid and the class of the
//! highest score right on held-out samples.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::config::Config;
use crate::learner::params::LearnerConfig;
use crate::learner::{build, StepOutcome, StreamingLearner};
use crate::loss::{Loss, LossKind};
use crate::model::multiclass::MulticlassModel;
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

/// Steps `l` until it idles (bounded), then certifies it.
fn run_to_idle(l: &mut Box<dyn StreamingLearner>) -> crate::learner::LearnerSnapshot {
    for _ in 0..1_000_000 {
        if l.step() != StepOutcome::Stepped {
            break;
        }
    }
    l.certify()
}

#[test]
fn relabelling_marks_the_class_plus_one_and_every_other_minus_one() {
    let batch = SampleBlock::from_samples(&stream(30, 3));
    let mut out = SampleBlock::new();
    for class in 0..CLASSES {
        relabel_into(&mut out, &batch, class);
        assert_eq!(out.len(), batch.len());
        for (s, r) in batch.iter().zip(out.iter()) {
            let expected = if s.label == class as f64 { 1.0 } else { -1.0 };
            assert_eq!(r.label, expected);
            assert_eq!((r.indices, r.values), (s.indices, s.values));
        }
    }
}

#[test]
fn class_learners_on_relabelled_batches_learn_a_planted_three_class_stream() {
    let samples = stream(1500, 1);
    let mut learners: Vec<Box<dyn StreamingLearner>> =
        (0..CLASSES).map(|_| build(&config(), 1000, None)).collect();
    let mut relabelled = SampleBlock::new();
    for chunk in samples.chunks(100) {
        let batch = SampleBlock::from_samples(chunk);
        for (class, l) in learners.iter_mut().enumerate() {
            relabel_into(&mut relabelled, &batch, class);
            l.insert(&relabelled);
        }
    }
    let mut models = Vec::new();
    for (class, l) in learners.iter_mut().enumerate() {
        let snap = run_to_idle(l);
        let c = snap.model.certificate;
        assert!(c.primal >= c.dual - 1e-9, "class {class}: P < D in {c:?}");
        // Hard thresholding may settle on a planted feature of another class (a negative weight):
        // every class's support is planted, and holds one of its own features.
        let support = &snap.model.support;
        assert!(
            support.iter().all(|&j| j < 2 * CLASSES as u32),
            "{support:?}"
        );
        assert!(
            support.iter().any(|&j| j as usize / 2 == class),
            "{support:?}"
        );
        assert_eq!(snap.window_samples, 1000);
        models.push(snap.model);
    }
    let model =
        MulticlassModel::one_vs_rest((0..CLASSES).map(|c| c as f64).collect(), models).unwrap();
    let held_out = stream(600, 2);
    let right = held_out
        .iter()
        .filter(|s| model.predict(s.row()) == s.label)
        .count();
    assert!(right > 500, "{right} of 600 right (chance is 200)");
}
