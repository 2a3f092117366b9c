//! The mirror, smidas and subset learners in the real daemon: `config/two-learners.toml` (SDIHT and
//! mirror side by side on one stream, sized down for a test), a best-subset learner with its metrics,
//! and restart/restore of a primal learner.

use std::path::Path;

use thresher::synth::{sparse_stream, to_libsvm};

use crate::common::{relative_gap, serve_args, support, write, Daemon};

/// `config/two-learners.toml` with test sizes (small window, fast snapshots, k = 5).
fn two_learner_config(dir: &Path, extra_learner: &str) -> String {
    let shipped = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/two-learners.toml"
    ))
    .unwrap();
    let text = shipped
        .replace("capacity = 100000", "capacity = 2000")
        .replace("interval_ms = 500", "interval_ms = 50")
        .replace("k = 10", "k = 5");
    assert_ne!(
        text, shipped,
        "the shipped file changed shape; update this test"
    );
    write(dir, "two.toml", &format!("{text}\n{extra_learner}"))
}

/// `P(0) - D(alpha(0))` over `samples` (squared loss).
fn zero_model_gap(samples: &[thresher::sample::Sample], k: usize, lambda: f64) -> f64 {
    use thresher::loss::{Loss, LossKind};
    use thresher::solver::objective::{dual_of_primal, dual_value, primal_value, DualScratch};
    let data = thresher::sample::Dataset::from_samples(samples, 0);
    let loss = Loss::new(LossKind::Squared, 0.25).unwrap();
    let w = vec![0.0; 500];
    let mut alpha = Vec::new();
    dual_of_primal(&data, &loss, &w, 0.0, false, &mut alpha);
    let dual = dual_value(&data, &loss, lambda, k, &alpha, &mut DualScratch::default());
    primal_value(&data, &loss, lambda, &w, 0.0) - dual
}

#[test]
fn sdiht_and_mirror_side_by_side_and_mirror_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = two_learner_config(dir.path(), "");
    let data_dir = dir.path().join("data");
    let args = serve_args(&config, &data_dir);
    let data = sparse_stream(3000, 500, 5, 20, 0.01, false, 42);
    let truth = data.true_support();
    let d = Daemon::start(&args);
    // A first window of 500 samples (with fewer samples than features, 200, a k-sparse stochastic step
    // can lock into a wrong support: see learner::mirror, "Known limit").
    let (status, _, _) = d.post("/v1/samples", "text/plain", to_libsvm(&data.samples[..500]));
    assert_eq!(status, 202);
    d.wait_for("a first mirror model", |d| d.learner_model("mirror"));
    for chunk in data.samples[500..].chunks(500) {
        assert_eq!(d.post("/v1/samples", "text/plain", to_libsvm(chunk)).0, 202);
    }
    // The mirror learner's support reaches the truth; once it idles its gap is below the first published
    // one (which already had a few passes: the first snapshot comes up to 50 ms after the insert).
    let mirror = d.wait_for("mirror: the true support on the full window", |d| {
        let m = d.learner_model("mirror")?;
        (m["samples_seen"] == 3000 && support(&m) == truth).then_some(m)
    });
    assert_eq!(mirror["solver"], "mirror-hypentropy");
    assert_eq!(mirror["window_samples"], 2000);
    let c = &mirror["certificate"];
    assert!(c["gap"].as_f64().unwrap() >= 0.0, "{mirror}");
    // The gap the learner settles at depends on how the posts met its steps: with both cores loaded it
    // idled at 2.4e-6 and held 1.3e-5 for a while (a 1e-6 bound failed one run in four under load).
    let sdiht = d.wait_for("sdiht: the true support", |d| {
        let m = d.learner_model("sdiht")?;
        (m["samples_seen"] == 3000 && support(&m) == truth && relative_gap(&m) < 1e-4).then_some(m)
    });
    assert_eq!(sdiht["solver"], "sdiht");
    // Both gaps are exported under one metric name, one series per learner.
    for name in ["sdiht", "mirror"] {
        let gap = d.metric(&format!("thresher_duality_gap{{learner=\"{name}\"}}"));
        assert!(gap >= 0.0 && gap.is_finite(), "{name}: {gap}");
        assert_eq!(
            d.metric(&format!("thresher_active_set_size{{learner=\"{name}\"}}")),
            0.0
        );
    }
    let before = d.wait_until_learner_settled("mirror");
    assert_eq!(support(&before), truth);
    // The gap the learner started from: w = 0 on the final window (samples 1000..3000), by the same
    // certificate functions the daemon uses.
    let start_gap = zero_model_gap(&data.samples[1000..], 5, 0.01);
    let last_gap = before["certificate"]["gap"].as_f64().unwrap();
    assert!(
        (0.0..1e-3).contains(&last_gap) && last_gap < 1e-5 * start_gap,
        "the mirror gap did not fall: {start_gap} at w = 0 -> {last_gap}"
    );
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");

    let d = Daemon::start(&args);
    let after = d
        .learner_model("mirror")
        .expect("the mirror model is restored at once");
    for field in ["version", "support", "weights", "samples_seen", "solver"] {
        assert_eq!(after[field], before[field], "{field}");
    }
    // The restored learner resumes exactly where it stopped: idle, the same model.
    let again = d.wait_until_learner_settled("mirror");
    assert_eq!(again["version"], before["version"]);
    // And it keeps learning on new data.
    assert_eq!(
        d.post("/v1/samples", "text/plain", to_libsvm(&data.samples[..100]))
            .0,
        202
    );
    let moved = d.wait_for("mirror learns after the restart", |d| {
        let m = d.learner_model("mirror")?;
        (m["samples_seen"] == 3100).then_some(m)
    });
    assert_eq!(support(&moved), truth);
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
}

#[test]
fn subset_and_smidas_learners_recover_the_support_and_export_their_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let config = two_learner_config(
        dir.path(),
        concat!(
            "[[learner]]\nname = \"best\"\nsolver = \"subset\"\nlambda0 = 1.0\nlambda2 = 0.001\n",
            "resolve_interval_ms = 100\n",
            "[[learner]]\nname = \"l1\"\nsolver = \"smidas\"\nl1 = 0.001\nk = 5\n",
        ),
    );
    let data_dir = dir.path().join("data");
    let args = serve_args(&config, &data_dir);
    let d = Daemon::start(&args);
    let data = sparse_stream(3000, 500, 5, 20, 0.01, false, 7);
    let truth = data.true_support();
    for chunk in data.samples.chunks(1000) {
        assert_eq!(d.post("/v1/samples", "text/plain", to_libsvm(chunk)).0, 202);
    }
    let best = d.wait_for("subset: the true support with a small gap", |d| {
        let m = d.learner_model("best")?;
        let c = &m["certificate"];
        let (gap, primal) = (c["gap"].as_f64()?, c["primal"].as_f64()?);
        (m["samples_seen"] == 3000
            && c["samples"] == 2000
            && support(&m) == truth
            && (0.0..1e-3 * primal.max(1.0)).contains(&gap))
        .then_some(m)
    });
    assert_eq!(best["solver"], "subset");
    assert_eq!(best["lambda0"], 1.0);
    let active = d.metric("thresher_active_set_size{learner=\"best\"}");
    assert!(active >= truth.len() as f64, "active set {active}");
    let screened = d.metric("thresher_screened_features{learner=\"best\"}");
    assert!((0.0..=500.0).contains(&screened), "{screened}");
    // SMIDAS: not k-sparse; certified at k' = max(k, support size), so weak duality holds.
    let l1 = d.wait_for("smidas: every true feature in its support", |d| {
        let m = d.learner_model("l1")?;
        let s = support(&m);
        (m["samples_seen"] == 3000 && truth.iter().all(|j| s.contains(j))).then_some(m)
    });
    assert_eq!(l1["solver"], "smidas");
    assert!(l1["certificate"]["gap"].as_f64().unwrap() >= 0.0, "{l1}");
    assert_eq!(
        l1["k"].as_u64().unwrap() as usize,
        support(&l1).len().max(5)
    );
    // A restart restores the subset learner's model and resumes it idle.
    let before = d.wait_until_learner_settled("best");
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
    let d = Daemon::start(&args);
    let after = d
        .learner_model("best")
        .expect("the subset model is restored at once");
    for field in ["version", "support", "weights", "certificate"] {
        assert_eq!(after[field], before[field], "{field}");
    }
    assert_eq!(
        d.wait_until_learner_settled("best")["version"],
        before["version"]
    );
    assert!(d.metric("thresher_active_set_size{learner=\"best\"}") >= truth.len() as f64);
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
}

/// A logistic stream with a strong offset (`y = sign(2 x.1_{j<3} + 0.8 + noise)`, ~90% positive): the mirror
/// learner's default intercept learns it (positive bias, held-out accuracy above the majority rate) and
/// `/v1/predict` uses it; the same learner with `intercept = false` cannot.
#[test]
fn mirror_learns_a_strong_offset_with_its_default_intercept() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(17);
    let rows: Vec<thresher::sample::Sample> = (0..3000)
        .map(|_| {
            let mut indices: Vec<u32> = (0..3).map(|_| rng.gen_range(0..30)).collect();
            indices.sort_unstable();
            indices.dedup();
            let values: Vec<f64> = indices.iter().map(|_| rng.gen_range(-1.0..1.0)).collect();
            let score: f64 = indices
                .iter()
                .zip(&values)
                .map(|(&j, &v)| if j < 3 { 2.0 * v } else { 0.0 })
                .sum::<f64>()
                + 0.8
                + rng.gen_range(-0.5..0.5);
            thresher::sample::Sample::new(indices, values, score.signum(), None).unwrap()
        })
        .collect();
    let (train, test) = rows.split_at(2500);
    let dir = tempfile::tempdir().unwrap();
    let learner =
        "name = \"bias\"\nsolver = \"mirror\"\nloss = \"logistic\"\nk = 3\nlambda = 0.001\n";
    let config = crate::common::test_config(
        dir.path(),
        &format!(
            "{learner}[[learner]]\n{}intercept = false\n",
            learner.replace("bias", "flat")
        ),
        "",
    );
    let d = Daemon::start(&["--config", config.to_str().unwrap()]);
    assert_eq!(d.post("/v1/samples", "text/plain", to_libsvm(train)).0, 202);
    let score = |m: &serde_json::Value, s: &thresher::sample::Sample, with_b: bool| {
        let w: Vec<(u32, f64)> = support(m)
            .into_iter()
            .zip(
                m["weights"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_f64().unwrap()),
            )
            .collect();
        let b = if with_b {
            m["intercept"].as_f64().unwrap()
        } else {
            0.0
        };
        s.indices
            .iter()
            .zip(&s.values)
            .map(|(j, v)| w.iter().find(|(k, _)| k == j).map_or(0.0, |(_, wj)| wj * v))
            .sum::<f64>()
            + b
    };
    let accuracy = |m: &serde_json::Value| {
        let right = test
            .iter()
            .filter(|s| (score(m, s, true) > 0.0) == (s.label > 0.0))
            .count();
        right as f64 / test.len() as f64
    };
    let majority = test.iter().filter(|s| s.label > 0.0).count() as f64 / test.len() as f64;
    let bias = d.wait_for("the intercept learner's model on every sample", |d| {
        let m = d.learner_model("bias")?;
        (m["samples_seen"] == 2500).then_some(m)
    });
    let flat = d.wait_for("the flat learner's model on every sample", |d| {
        let m = d.learner_model("flat")?;
        (m["samples_seen"] == 2500).then_some(m)
    });
    let b = bias["intercept"].as_f64().unwrap();
    assert!(b > 0.5, "intercept {b}: {bias}");
    assert_eq!(flat["intercept"], 0.0);
    let (with, without) = (accuracy(&bias), accuracy(&flat));
    assert!(
        with > majority && with > without + 0.05,
        "{with} vs {without}, majority {majority}"
    );
    let c = &bias["certificate"];
    assert!(c["gap"].as_f64().unwrap() >= 0.0, "{bias}");
    // /v1/predict classifies with the intercept: rows whose class it flips get the intercept's class.
    let flipped: Vec<&thresher::sample::Sample> = test
        .iter()
        .filter(|s| (score(&bias, s, true) >= 0.0) != (score(&bias, s, false) >= 0.0))
        .collect();
    assert!(!flipped.is_empty());
    let body: Vec<serde_json::Value> = flipped
        .iter()
        .map(|s| serde_json::json!({"indices": s.indices, "values": s.values}))
        .collect();
    let (status, predicted, _) = d.post(
        "/v1/predict?learner=bias",
        "application/json",
        serde_json::to_string(&body).unwrap(),
    );
    assert_eq!(status, 200, "{predicted}");
    for (s, p) in flipped
        .iter()
        .zip(predicted["predictions"].as_array().unwrap())
    {
        let expected = if score(&bias, s, true) >= 0.0 {
            1.0
        } else {
            -1.0
        };
        assert_eq!(p.as_f64().unwrap(), expected, "{predicted}");
    }
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
}
