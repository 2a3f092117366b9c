//! Forgetting: the cut and the weights of an insert, the certificate of the decayed weighted mean
//! computed apart from the learner, and the progressive loss at the samples' own weights.

use super::*;
use crate::config::Config;
use crate::learner::params::LearnerConfig;
use crate::sample::{Sample, SampleBlock};
use crate::solver::objective::primal_value;

fn config(half_life: Option<u64>) -> LearnerConfig {
    let mut c = Config::defaults().learners.remove(0);
    c.intercept = false;
    c.k = 3;
    c.half_life_samples = half_life;
    c
}

#[test]
fn an_insert_is_cut_where_a_period_starts_and_each_row_weighed() {
    let decay = Decay::new(2, 10);
    assert_eq!((decay.period_lives, decay.period()), (32, 64));
    let samples: Vec<Sample> = (0..10)
        .map(|i| Sample {
            indices: vec![0],
            values: vec![1.0],
            label: 1.0,
            weight: (i == 5).then_some(3.0),
        })
        .collect();
    let block = SampleBlock::from_samples(&samples);
    let parts = decay.split(60, &[&block]);
    assert_eq!(parts.len(), 2);
    assert_eq!((parts[0].0, parts[0].1.len()), (false, 4));
    assert_eq!((parts[1].0, parts[1].1.len()), (true, 6));
    assert_eq!(parts[0].1.weight(0), Some(2f64.powi(30)));
    assert_eq!(parts[1].1.weight(0), Some(1.0));
    // Row 5 (sample 65) keeps its own weight 3 times its factor 2^{1/2}.
    assert_eq!(parts[1].1.weight(1), Some(3.0 * 0.5f64.exp2()));
    assert_eq!(decay.renormaliser(), 2f64.powi(-32));
}

/// A stream across three renormalisations: the window's weights are the decayed ones (each sample
/// `2^{1/h}` heavier than the one before, to rounding, across the periods' starts), and the published
/// certificate's primal is the decayed weighted mean of the model computed from scratch, with weights
/// normalised to the newest sample; P >= D.
#[test]
fn the_certificate_is_for_the_decayed_weighted_mean() {
    let h = 20;
    let capacity = 300;
    let c = config(Some(h));
    let mut learner = build(&c, capacity, None);
    let decay = learner.core().decay.expect("forgetting on");
    assert_eq!(decay.period(), 640);
    let data = crate::synth::sparse_stream(2200, 30, 3, 6, 0.05, false, 3);
    for chunk in data.samples.chunks(37) {
        let block = SampleBlock::from_samples(chunk);
        insert(&mut learner, &decay, &[&block]);
        for _ in 0..5 {
            learner.step();
        }
    }
    for _ in 0..4000 {
        learner.step();
    }
    let snapshot = learner.certify();
    let window = learner.state().samples;
    assert_eq!(window.len(), capacity);
    let step = (1.0 / h as f64).exp2();
    let weight = |i: usize| window[i].0.weight.unwrap_or(1.0);
    for i in 1..window.len() {
        let ratio = weight(i) / weight(i - 1);
        assert!((ratio - step).abs() <= 1e-12 * step, "row {i}: {ratio}");
    }
    // The same samples with the weights forgetting means: 2^{-age / h}.
    let newest = data.samples.len() - 1;
    let decayed: Vec<Sample> = data.samples[data.samples.len() - capacity..]
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let age = newest - (data.samples.len() - capacity + i);
            Sample {
                weight: Some((-(age as f64) / h as f64).exp2()),
                ..s.clone()
            }
        })
        .collect();
    let set = SampleBlock::from_samples(&decayed);
    let m = &snapshot.model;
    let mut w = vec![0.0; set.dim().max(30)];
    for (&j, &v) in m.support.iter().zip(&m.weights) {
        w[j as usize] = v;
    }
    let primal = primal_value(&set, &c.loss, c.lambda, &w, m.intercept);
    let cert = m.certificate;
    assert!(
        (primal - cert.primal).abs() <= 1e-9 * primal.abs().max(1.0),
        "published {cert:?}, recomputed {primal}"
    );
    assert!(cert.primal >= cert.dual - 1e-12, "{cert:?}");
    assert!(cert.gap.is_finite() && cert.gap >= 0.0, "{cert:?}");
}

/// The first insert is predicted by the empty model, so every sample's loss is the loss at score 0 at
/// its own weight: with or without forgetting, the same progressive loss.
#[test]
fn the_progressive_loss_is_at_the_samples_own_weights() {
    let data = crate::synth::sparse_stream(100, 20, 3, 5, 0.05, false, 9);
    let block = SampleBlock::from_samples(&data.samples);
    let mut plain = build(&config(None), 1000, None);
    plain.insert(&block);
    let mut forgetting = build(&config(Some(5)), 1000, None);
    let decay = forgetting.core().decay.unwrap();
    insert(&mut forgetting, &decay, &[&block]);
    let (a, b) = (plain.stats(), forgetting.stats());
    assert_eq!(a.samples_seen, b.samples_seen);
    assert!(
        (a.progressive_loss() - b.progressive_loss()).abs() <= 1e-12 * a.progressive_loss(),
        "{} vs {}",
        a.progressive_loss(),
        b.progressive_loss()
    );
}
