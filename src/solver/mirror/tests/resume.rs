//! Checkpoint round trips of the two per-sample learners (mirror descent and SMIDAS): a learner resumed
//! from an export, over a learner that already holds a different model and with junk entries in the
//! checkpoint, continues bit for bit like the one that never stopped, and sizes itself for every index
//! the checkpoint names.

use super::*;
use crate::sample::Sample;
use crate::solver::smidas::SmidasLearner;

type Coordinates = Vec<(u32, f64, f64)>;

/// `(j, w_j, theta_j)` as bits, so `assert_eq!` compares exactly (and NaN-safely).
fn bits(coordinates: &[(u32, f64, f64)]) -> Vec<(u32, u64, u64)> {
    coordinates
        .iter()
        .map(|&(j, w, t)| (j, w.to_bits(), t.to_bits()))
        .collect()
}

/// The exported coordinates plus entries every learner must skip: a zero and a non-finite one, at
/// indices beyond both the data (d = 60) and the `dim` passed to `resume` (50).
fn with_junk(mut coordinates: Coordinates) -> Coordinates {
    coordinates.push((80, 0.0, 0.0));
    coordinates.push((81, f64::NAN, f64::NAN));
    coordinates
}

/// The dimension `resume` must size for: one past the largest index the checkpoint names.
const RESUMED_DIM: usize = 82;

fn stream(seed: u64) -> Vec<Sample> {
    synth::sparse_stream(400, 60, 4, 8, 0.01, false, seed).samples
}

fn squared() -> Loss {
    Loss::new(LossKind::Squared, 0.25).unwrap()
}

fn mirror_learner() -> MirrorLearner {
    let config = MirrorConfig {
        batch: 10,
        ..MirrorConfig::new(MirrorMap::HypEntropy { beta: 0.5 })
    };
    MirrorLearner::new(config, squared(), 0.01, 5, false, 0).unwrap()
}

fn mirror_learn(learner: &mut MirrorLearner, samples: &[Sample]) {
    for chunk in samples.chunks(10) {
        learner.step_batch(chunk.iter().map(Sample::row));
    }
}

#[test]
fn mirror_learner_resumes_bit_for_bit() {
    let data = stream(21);
    let mut original = mirror_learner();
    mirror_learn(&mut original, &data[..300]);
    let exported = original.coordinates();
    assert!(exported.len() >= 3, "{exported:?}");
    // A learner holding another model: resume must clear it.
    let mut resumed = mirror_learner();
    mirror_learn(&mut resumed, &stream(22)[..100]);
    resumed.resume(
        50,
        &with_junk(exported.clone()),
        original.steps(),
        original.row_sq_max(),
    );
    assert_eq!(bits(&resumed.coordinates()), bits(&exported));
    assert_eq!(resumed.model().weights.len(), RESUMED_DIM);
    assert_eq!(resumed.model().support, original.model().support);
    assert_eq!(resumed.steps(), original.steps());
    assert_eq!(
        resumed.row_sq_max().to_bits(),
        original.row_sq_max().to_bits()
    );
    mirror_learn(&mut original, &data[300..]);
    mirror_learn(&mut resumed, &data[300..]);
    assert_eq!(bits(&resumed.coordinates()), bits(&original.coordinates()));
    assert_eq!(resumed.steps(), original.steps());
}

fn smidas_learner() -> SmidasLearner {
    SmidasLearner::with_p(
        2.0 * 60f64.ln(),
        1e-3,
        MirrorStep::Auto,
        squared(),
        0.01,
        false,
    )
    .unwrap()
}

fn smidas_learn(learner: &mut SmidasLearner, samples: &[Sample]) {
    for sample in samples {
        learner.step_sample(sample.row());
    }
    learner.sync();
}

#[test]
fn smidas_learner_resumes_bit_for_bit() {
    let data = stream(31);
    let mut original = smidas_learner();
    smidas_learn(&mut original, &data[..300]);
    let exported = original.coordinates();
    assert!(exported.len() >= 3, "{exported:?}");
    let mut resumed = smidas_learner();
    smidas_learn(&mut resumed, &stream(32)[..100]);
    resumed.resume(
        50,
        &with_junk(exported.clone()),
        original.steps(),
        original.row_sq_max(),
    );
    // SMIDAS keeps its internal order (the `||theta||_p` sum runs over it) and recomputes `w` from theta.
    assert_eq!(bits(&resumed.coordinates()), bits(&exported));
    assert_eq!(resumed.model().weights.len(), RESUMED_DIM);
    assert_eq!(resumed.model().support, original.model().support);
    assert_eq!(resumed.steps(), original.steps());
    smidas_learn(&mut original, &data[300..]);
    smidas_learn(&mut resumed, &data[300..]);
    assert_eq!(bits(&resumed.coordinates()), bits(&original.coordinates()));
    let (a, b) = (original.model(), resumed.model());
    assert_eq!(a.support, b.support);
    for &j in a.support {
        assert_eq!(
            a.weights[j as usize].to_bits(),
            b.weights[j as usize].to_bits()
        );
    }
}
