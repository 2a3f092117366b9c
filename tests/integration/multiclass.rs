//! `thresher fit --multiclass ovr` and `thresher predict` on its model: one k-sparse binary model per
//! class in a `thresher-multiclass/1` file, the class as the highest score, and the refusals (labels
//! that are not classes, a regression loss, one class).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use crate::common::{assert_failed_with, assert_succeeded, stderr, thresher, write};

/// Three classes (labels 0, 1, 2 as integers), each marked by its own two of 12 noisy features.
fn three_classes(rows: usize, seed: u64) -> String {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut text = String::new();
    for i in 0..rows {
        let class = i % 3;
        text.push_str(&class.to_string());
        for j in 0..12u32 {
            let signal = if j as usize / 2 == class { 2.0 } else { 0.0 };
            let v: f64 = signal + rng.gen_range(-0.8..0.8);
            text.push_str(&format!(" {j}:{v:.3}"));
        }
        text.push('\n');
    }
    text
}

#[test]
fn one_vs_rest_fits_one_sparse_model_per_class_and_predicts_the_class() {
    let dir = tempfile::tempdir().unwrap();
    let train = write(dir.path(), "train.svm", &three_classes(150, 1));
    let test = write(dir.path(), "test.svm", &three_classes(60, 2));
    let out = dir.path().join("model.json");
    let out = out.to_str().unwrap();
    let fit = thresher(&[
        "fit",
        &train,
        "--loss",
        "logistic",
        "-k",
        "2",
        "--lambda",
        "auto",
        "--multiclass",
        "ovr",
        "--out",
        out,
    ]);
    assert_succeeded(&fit, "fit --multiclass ovr");
    let model: Value = serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    assert_eq!(model["format"], "thresher-multiclass/1");
    assert_eq!(model["strategy"], "one-vs-rest");
    assert_eq!(model["classes"], serde_json::json!([0.0, 1.0, 2.0]));
    let models = model["models"].as_array().unwrap();
    assert_eq!(models.len(), 3);
    // `--lambda auto` picks one lambda for all the classes (their scores are compared), and each
    // class's record points at it in its own grid.
    for m in models {
        assert_eq!(m["lambda"], models[0]["lambda"], "one lambda");
        let record = &m["lambda_auto"];
        let live = record["live"].as_u64().unwrap() as usize;
        assert_eq!(record["grid"][live], m["lambda"]);
    }
    for (class, m) in models.iter().enumerate() {
        let support: Vec<u64> = m["support"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j.as_u64().unwrap())
            .collect();
        assert!(support.len() <= 2, "k = 2 per class: {support:?}");
        // Each class's model finds its own marker features.
        let own = [2 * class as u64, 2 * class as u64 + 1];
        assert!(
            support.iter().any(|j| own.contains(j)),
            "class {class}: {support:?}"
        );
        assert!(m["certificate"]["gap"].as_f64().unwrap().is_finite());
    }
    let predict = thresher(&["predict", "--model", out, &test]);
    assert_succeeded(&predict, "predict");
    let classes = String::from_utf8(predict.stdout.clone()).unwrap();
    let lines: Vec<&str> = classes.lines().collect();
    assert_eq!(lines.len(), 60);
    assert!(
        lines.iter().all(|c| ["0", "1", "2"].contains(c)),
        "{classes}"
    );
    let summary = stderr(&predict);
    let accuracy: f64 = summary
        .split("accuracy=")
        .nth(1)
        .and_then(|a| a.trim().parse().ok())
        .unwrap_or_else(|| panic!("{summary}"));
    assert!(accuracy >= 0.9, "{summary}");
    let scores = thresher(&["predict", "--scores", "--model", out, &test]);
    assert_succeeded(&scores, "predict --scores");
    let scores = String::from_utf8(scores.stdout).unwrap();
    for line in scores.lines() {
        let values: Vec<f64> = line.split(' ').map(|v| v.parse().unwrap()).collect();
        assert_eq!(values.len(), 3, "{line}");
    }
}

#[test]
fn multiclass_refuses_what_is_not_a_classification() {
    let dir = tempfile::tempdir().unwrap();
    let fit = |data: &str, loss: &str| {
        let path = write(dir.path(), "data.svm", data);
        thresher(&[
            "fit",
            &path,
            "--loss",
            loss,
            "-k",
            "1",
            "--lambda",
            "0.1",
            "--multiclass",
            "ovr",
        ])
    };
    let fractional = "0 1:1\n1.5 2:1\n2 3:1\n";
    assert_failed_with(&fit(fractional, "logistic"), "integer class labels");
    assert_failed_with(
        &fit(&three_classes(9, 3), "squared"),
        "classification --loss",
    );
    assert_failed_with(&fit("1 1:1\n1 2:1\n", "logistic"), "at least 2 classes");
    let path = write(dir.path(), "three.svm", &three_classes(9, 3));
    let subset = thresher(&[
        "fit",
        &path,
        "--loss",
        "logistic",
        "--solver",
        "subset",
        "--lambda0",
        "0.1",
        "--multiclass",
        "ovr",
    ]);
    assert_failed_with(&subset, "not subset");
}
