//! Checkpoint round trips of the two per-sample learners (mirror descent and SMIDAS): a learner resumed
//! from an export, over a learner that already holds a different model and with junk entries in the
//! checkpoint, continues bit for bit like the one that never stopped, and sizes itself for every index
//! the checkpoint names.

use super::*;
use crate::loss::{Loss, LossKind};
use crate::sample::Sample;
use crate::solver::mirror::{MirrorConfig, MirrorMap, MirrorStep};
use crate::solver::ModelView;
use crate::synth;

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

/// What the round trip needs of a learner besides [`Resumable`], so one check serves both.
trait Checkpointed: Resumable + Sized {
    /// A fresh learner (same settings every call).
    fn fresh() -> Self;
    /// Learns the samples in order and makes the model current.
    fn learn(&mut self, samples: &[Sample]);
    fn model(&self) -> ModelView<'_>;
}

impl Checkpointed for MirrorState {
    fn fresh() -> Self {
        let config = MirrorConfig {
            batch: 10,
            ..MirrorConfig::new(MirrorMap::HypEntropy { beta: 0.5 })
        };
        MirrorState::new(config, squared(), 0.01, 5, false, 0).unwrap()
    }
    fn learn(&mut self, samples: &[Sample]) {
        for chunk in samples.chunks(10) {
            self.step_batch(chunk.iter().map(Sample::row));
        }
    }
    fn model(&self) -> ModelView<'_> {
        MirrorState::model(self)
    }
}

impl Checkpointed for SmidasState {
    fn fresh() -> Self {
        SmidasState::new(1e-3, MirrorStep::Auto, squared(), 0.01, false, 0)
            .and_then(|learner| learner.with_p(2.0 * 60f64.ln()))
            .unwrap()
    }
    fn learn(&mut self, samples: &[Sample]) {
        for sample in samples {
            self.step_sample(sample.row());
        }
        self.sync();
    }
    fn model(&self) -> ModelView<'_> {
        SmidasState::model(self)
    }
}

/// Learns `stream(seed)[..300]`, resumes a learner that learnt another stream from the export (plus
/// junk), then both learn the last 100 samples: every exported bit, the support and the weights on it
/// must agree at both points. (SMIDAS keeps its internal order, over which `||theta||_p` sums, and
/// recomputes `w` from `theta`; mirror descent restores both.)
fn check_round_trip<L: Checkpointed>(seed: u64) {
    let data = stream(seed);
    let mut original = L::fresh();
    original.learn(&data[..300]);
    let exported = original.coordinates();
    assert!(exported.len() >= 3, "{exported:?}");
    // A learner holding another model: resume must clear it.
    let mut resumed = L::fresh();
    resumed.learn(&stream(seed + 1)[..100]);
    let clock = original.clock();
    resumed.resume(50, &with_junk(exported.clone()), clock);
    assert_eq!(bits(&resumed.coordinates()), bits(&exported));
    assert_eq!(resumed.model().weights.len(), RESUMED_DIM);
    assert_eq!(resumed.clock().steps, clock.steps);
    assert_eq!(
        resumed.clock().row_sq_max.to_bits(),
        clock.row_sq_max.to_bits()
    );
    for at in ["resumed", "continued"] {
        if at == "continued" {
            original.learn(&data[300..]);
            resumed.learn(&data[300..]);
        }
        assert_eq!(
            bits(&resumed.coordinates()),
            bits(&original.coordinates()),
            "{at}"
        );
        assert_eq!(resumed.clock().steps, original.clock().steps, "{at}");
        let (a, b) = (original.model(), resumed.model());
        assert_eq!(a.support, b.support, "{at}");
        for &j in a.support {
            let (wa, wb) = (a.weights[j as usize], b.weights[j as usize]);
            assert_eq!(wa.to_bits(), wb.to_bits(), "{at}: w_{j}");
        }
    }
}

#[test]
fn mirror_learner_resumes_bit_for_bit() {
    check_round_trip::<MirrorState>(21);
}

#[test]
fn smidas_learner_resumes_bit_for_bit() {
    check_round_trip::<SmidasState>(31);
}
