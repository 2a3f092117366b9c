//! The streaming SDIHT learner's intercept through the real daemon: a stream whose classes are far from
//! balanced needs `b`, which the learner fits by default for a classification loss and checkpoints.

use serde_json::Value;
use thresher::sample::{Dataset, Sample, SampleSet};
use thresher::sparse::sparse_dot;
use thresher::synth::{sparse_stream, to_libsvm};

use crate::common::{serve_args, test_config, Daemon};

/// `sign(w.x + 2.5 + noise)`: about 85% positive, so a model without an intercept must tilt `w`.
fn offset_stream(n: usize, seed: u64) -> Vec<Sample> {
    let mut samples = sparse_stream(n, 200, 5, 10, 0.3, false, seed).samples;
    for s in &mut samples {
        s.label = if s.label + 2.5 >= 0.0 { 1.0 } else { -1.0 };
    }
    samples
}

/// A published model: dense weights over `d` features and the intercept.
struct Published {
    w: Vec<f64>,
    intercept: f64,
    gap: f64,
}

impl Published {
    fn new(model: &Value, d: usize) -> Published {
        let mut w = vec![0.0; d];
        let weights = model["weights"].as_array().unwrap();
        for (j, v) in model["support"].as_array().unwrap().iter().zip(weights) {
            w[j.as_u64().unwrap() as usize] = v.as_f64().unwrap();
        }
        Published {
            w,
            intercept: model["intercept"].as_f64().unwrap(),
            gap: model["certificate"]["gap"].as_f64().unwrap(),
        }
    }

    fn accuracy(&self, test: &Dataset) -> f64 {
        let right = (0..test.len())
            .filter(|&i| {
                let r = test.row(i);
                (sparse_dot(r.indices, r.values, &self.w) + self.intercept >= 0.0)
                    == (r.label > 0.0)
            })
            .count();
        right as f64 / test.len() as f64
    }
}

fn learn(extra: &str, train: &[Sample]) -> (Published, Published) {
    let dir = tempfile::tempdir().unwrap();
    let learner = format!("loss = \"logistic\"\nk = 5\nlambda = 0.001\ntol = 1e-4\n{extra}");
    let config = test_config(dir.path(), &learner, "");
    let data_dir = dir.path().join("data");
    let args = serve_args(&config, &data_dir);
    let d = Daemon::start(&args);
    for chunk in train.chunks(500) {
        assert_eq!(d.post("/v1/samples", "text/plain", to_libsvm(chunk)).0, 202);
    }
    let model = Published::new(&d.wait_until_settled(), 200);
    d.terminate();
    // The checkpoint written at shutdown carries `b`: a restarted daemon serves the same intercept.
    let d = Daemon::start(&args);
    let back = d.wait_for("the restored model", |d| d.model());
    d.terminate();
    (model, Published::new(&back, 200))
}

#[test]
fn the_streaming_intercept_fits_an_offset_stream_and_survives_a_restart() {
    let samples = offset_stream(5000, 17);
    let positives = samples.iter().filter(|s| s.label > 0.0).count() as f64 / 5000.0;
    assert!((0.75..0.95).contains(&positives), "{positives}");
    let test = Dataset::from_samples(&samples[4000..], 200);
    let (with, restored) = learn("", &samples[..4000]);
    let (without, _) = learn("intercept = \"false\"", &samples[..4000]);
    assert!(with.intercept > 1.0, "b = {}", with.intercept);
    assert_eq!(without.intercept, 0.0);
    let (acc_with, acc_without) = (with.accuracy(&test), without.accuracy(&test));
    assert!(acc_with > 0.93, "with intercept {acc_with}");
    assert!(acc_with > acc_without + 0.02, "{acc_with} vs {acc_without}");
    assert!(with.gap >= 0.0 && with.gap.is_finite(), "{}", with.gap);
    assert_eq!(restored.intercept.to_bits(), with.intercept.to_bits());
}
