//! `thresher fit --multiclass softmax` and `thresher predict` on its model, through the real binary:
//! a planted problem whose classes all depend on the same three of 30 features is fitted with
//! `-k 3`, the shared support is those three, the certificate is valid, `predict` gives the class
//! and `--probabilities` one probability per class; bad labels and flags are refused.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use crate::common::{assert_failed_with, assert_succeeded, thresher, write};

/// Four classes (labels 10, 20, 30, 40) decided by features 4, 11 and 25 of 30 noisy ones: the class
/// scores are a fixed 4 x 3 matrix times those three features.
fn shared_support(rows: usize, seed: u64) -> String {
    const W: [[f64; 3]; 4] = [
        [3.0, 0.0, -1.0],
        [-3.0, 2.0, 0.0],
        [0.0, -2.5, 2.0],
        [0.5, 0.5, -2.5],
    ];
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut text = String::new();
    for _ in 0..rows {
        let x: Vec<f64> = (0..30).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let scores: Vec<f64> = W
            .iter()
            .map(|w| w[0] * x[4] + w[1] * x[11] + w[2] * x[25] + rng.gen_range(-0.3..0.3))
            .collect();
        let class = (0..4)
            .max_by(|&a, &b| scores[a].total_cmp(&scores[b]))
            .unwrap();
        text.push_str(&format!("{}", 10 * (class + 1)));
        for (j, v) in x.iter().enumerate() {
            text.push_str(&format!(" {j}:{v:.4}"));
        }
        text.push('\n');
    }
    text
}

#[test]
fn softmax_recovers_the_shared_support_and_predicts_classes_and_probabilities() {
    let dir = tempfile::tempdir().unwrap();
    let train = write(dir.path(), "train.svm", &shared_support(400, 1));
    let test = write(dir.path(), "test.svm", &shared_support(200, 2));
    let out = dir.path().join("model.json");
    let out = out.to_str().unwrap();
    let fit = thresher(&[
        "fit",
        &train,
        "-k",
        "3",
        "--lambda",
        "auto",
        "--multiclass",
        "softmax",
        "--out",
        out,
    ]);
    assert_succeeded(&fit, "fit --multiclass softmax");
    let model: Value = serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    assert_eq!(model["format"], "thresher-multiclass/2");
    assert_eq!(model["strategy"], "softmax");
    assert_eq!(
        model["classes"],
        serde_json::json!([10.0, 20.0, 30.0, 40.0])
    );
    assert_eq!(model["support"], serde_json::json!([4, 11, 25]), "{model}");
    let weights = model["weights"].as_array().unwrap();
    assert!(weights.iter().all(|r| r.as_array().unwrap().len() == 4));
    assert_eq!(model["intercepts"].as_array().unwrap().len(), 4);
    let cert = &model["certificate"];
    let (primal, dual) = (
        cert["primal"].as_f64().unwrap(),
        cert["dual"].as_f64().unwrap(),
    );
    assert!(
        dual <= primal && dual > 0.0,
        "a valid, informative certificate: {cert}"
    );
    let record = &model["lambda_auto"];
    assert_eq!(record["validation"], "cv");
    assert_eq!(
        model["lambda"],
        record["grid"][record["live"].as_u64().unwrap() as usize]
    );

    let predict = thresher(&["predict", "--model", out, &test]);
    let stderr = assert_succeeded(&predict, "predict");
    let predicted: Vec<f64> = String::from_utf8_lossy(&predict.stdout)
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(predicted.len(), 200);
    assert!(predicted
        .iter()
        .all(|c| [10.0, 20.0, 30.0, 40.0].contains(c)));
    let accuracy: f64 = stderr
        .split("accuracy=")
        .nth(1)
        .and_then(|s| s.trim().parse().ok())
        .expect("predict reports accuracy on labelled data");
    assert!(accuracy >= 0.85, "held-out accuracy {accuracy}");

    let probs = thresher(&["predict", "--model", out, "--probabilities", &test]);
    assert_succeeded(&probs, "predict --probabilities");
    let text = String::from_utf8_lossy(&probs.stdout);
    for (line, class) in text.lines().zip(&predicted) {
        let p: Vec<f64> = line.split(' ').map(|v| v.parse().unwrap()).collect();
        assert_eq!(p.len(), 4);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        let top = (0..4).max_by(|&a, &b| p[a].total_cmp(&p[b])).unwrap();
        assert_eq!(
            10.0 * (top + 1) as f64,
            *class,
            "the class is the most probable"
        );
    }
}

#[test]
fn softmax_refuses_labels_that_are_not_classes_and_a_second_loss() {
    let dir = tempfile::tempdir().unwrap();
    let half = write(dir.path(), "half.svm", "0 1:1\n1.5 2:1\n2 1:2\n");
    let one = write(dir.path(), "one.svm", "3 1:1\n3 2:1\n");
    let fine = write(dir.path(), "fine.svm", "0 1:1\n1 2:1\n2 1:2\n");
    let fit = |data: &str, extra: &[&str]| {
        let mut args = vec![
            "fit",
            data,
            "-k",
            "2",
            "--lambda",
            "0.1",
            "--multiclass",
            "softmax",
        ];
        args.extend_from_slice(extra);
        thresher(&args)
    };
    assert_failed_with(&fit(&half, &[]), "sample 2 has label 1.5");
    assert_failed_with(&fit(&one, &[]), "at least 2 classes");
    assert_failed_with(&fit(&fine, &["--loss", "hinge"]), "multinomial logistic");
    let out = dir.path().join("m.json");
    let ovr = thresher(&[
        "fit",
        &fine,
        "--loss",
        "logistic",
        "-k",
        "1",
        "--lambda",
        "0.1",
        "--multiclass",
        "ovr",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_succeeded(&ovr, "fit --multiclass ovr");
    let probs = thresher(&[
        "predict",
        "--model",
        out.to_str().unwrap(),
        "--probabilities",
        &fine,
    ]);
    assert_failed_with(&probs, "--probabilities needs a shared-support model");
}
