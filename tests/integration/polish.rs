//! `thresher fit` polishes its model on the support by default and says so in the model file; `fit
//! --standardize` certifies a badly scaled problem that the raw columns leave vacuous; the daemon's SDIHT
//! learner polishes the models it publishes (`learner.polish`) and says so in the served model.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;
use thresher::sample::Sample;
use thresher::synth::{self, to_libsvm};

use crate::common::{
    assert_succeeded, certificate, relative_gap, samples_seen, stderr, test_config, thresher,
    write, Daemon, FitFiles,
};

fn model_json(path: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn fit(files: &FitFiles, loss: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "fit",
        &files.data,
        "--loss",
        loss,
        "-k",
        "5",
        "--lambda",
        "0.01",
        "--solver",
        "sdiht",
        "--intercept",
        "--epochs",
        "3",
        "--out",
        &files.model,
    ];
    args.extend_from_slice(extra);
    assert_succeeded(&thresher(&args), loss);
    model_json(&files.model)
}

/// A short search leaves room on its support: the default fit polishes it, keeps the lower primal,
/// and records both primals; the gap is no wider than without polishing. `--no-polish` records
/// `off`; hinge records that it has no curvature to polish with.
#[test]
fn fit_polishes_the_support_by_default_and_records_it() {
    let problem = synth::sparse_stream(400, 40, 4, 8, 0.3, true, 11);
    let files = FitFiles::new(&problem.samples);
    let polished = fit(&files, "logistic", &[]);
    let record = &polished["polish"];
    assert_eq!(record["outcome"], "kept", "{polished}");
    let search = record["primal_search"].as_f64().unwrap();
    let primal = polished["certificate"]["primal"].as_f64().unwrap();
    assert_eq!(record["primal_polished"].as_f64().unwrap(), primal);
    assert!(primal < search, "{record}");
    assert!(record["iterations"].as_u64().unwrap() >= 1);

    let plain = fit(&files, "logistic", &["--no-polish"]);
    assert_eq!(plain["polish"]["outcome"], "off", "{plain}");
    assert!(plain["polish"].get("primal_polished").is_none());
    assert_eq!(plain["certificate"]["primal"].as_f64().unwrap(), search);
    assert_eq!(plain["support"], polished["support"]);
    let gap = |m: &Value| m["certificate"]["gap"].as_f64().unwrap();
    assert!(gap(&polished) <= gap(&plain), "{polished} {plain}");
    assert!(gap(&polished) >= 0.0);

    let hinge = fit(&files, "hinge", &[]);
    assert_eq!(hinge["polish"]["outcome"], "non_smooth_loss", "{hinge}");
    assert!(polished.get("standardize").is_none());
}

/// Columns of magnitude 1e6, 1 and 1e-6 (a third each), informative features among all three,
/// labels the sign of the score on the unit-scale values plus noise.
fn badly_scaled(n: usize, seed: u64) -> Vec<Sample> {
    const D: usize = 30;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let truth: Vec<f64> = (0..D)
        .map(|j| if j < 6 { [1.5, -1.2, 1.0][j % 3] } else { 0.0 })
        .collect();
    (0..n)
        .map(|_| {
            let mut cols: Vec<u32> = Vec::new();
            while cols.len() < 10 {
                let j = rng.gen_range(0..D as u32);
                if !cols.contains(&j) {
                    cols.push(j);
                }
            }
            cols.sort_unstable();
            let z: Vec<f64> = cols.iter().map(|_| rng.gen_range(-1.0..1.0)).collect();
            let score: f64 = cols
                .iter()
                .zip(&z)
                .map(|(&j, z)| truth[j as usize] * z)
                .sum();
            let label = if score + 0.2 * rng.gen_range(-1.0..1.0) >= 0.0 {
                1.0
            } else {
                -1.0
            };
            let values = cols
                .iter()
                .zip(&z)
                .map(|(&j, z)| z * [1e6, 1.0, 1e-6][j as usize % 3])
                .collect();
            Sample::new(cols, values, label, None).unwrap()
        })
        .collect()
}

/// `thresher predict` accuracy of `model` on `test`.
fn accuracy(model: &str, test: &str) -> f64 {
    let out = thresher(&["predict", "--model", model, test]);
    let stderr = assert_succeeded(&out, "predict");
    stderr
        .trim()
        .rsplit("accuracy=")
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// On columns of magnitudes 1e6 next to 1e-6 the raw problem's certificate is vacuous (the default
/// step rules diverge or stall with a dual near 0), while `--standardize` solves the
/// scaled problem to a small relative gap and a clearly better held-out accuracy. Its model file
/// says so (`standardize`: rms, certified scaled, one scale per support feature) and its weights are
/// in raw units: `thresher predict` on the raw test file gets that accuracy, and the certificate's
/// primal is the scaled problem's, recomputed here from the file as
/// `(1/N) sum_i l(x_i.w + b) + (lambda/2) sum_j (s_j w_j)^2`.
#[test]
fn standardize_makes_a_badly_scaled_problem_certifiable() {
    let train = badly_scaled(3000, 3);
    let test_samples = badly_scaled(1000, 4);
    let files = FitFiles::new(&train);
    let test = write(files.dir.path(), "test.svm", &to_libsvm(&test_samples));
    let base = [
        "fit",
        files.data.as_str(),
        "--loss",
        "logistic",
        "-k",
        "10",
        "--lambda",
        "0.001",
        "--solver",
        "sdiht",
        "--intercept",
        "--out",
        files.model.as_str(),
    ];

    // On the raw columns each step rule either diverges (an error, no model) or stalls with a vacuous
    // certificate; the best accuracy of the models it did produce.
    let mut raw_accuracy: f64 = 0.0;
    for step in ["coordinate", "adaptive"] {
        let mut args = base.to_vec();
        args.extend(["--step", step]);
        let out = thresher(&args);
        // The columns span 12 decades: fit suggests --standardize.
        assert!(stderr(&out).contains("decades"), "{}", stderr(&out));
        assert!(stderr(&out).contains("consider --standardize"));
        if out.status.success() {
            let raw = model_json(&files.model);
            assert!(relative_gap(&raw) > 0.5, "{step}: {raw}");
            raw_accuracy = raw_accuracy.max(accuracy(&files.model, &test));
        } else {
            assert!(
                stderr(&out).contains("diverged"),
                "{step}: {}",
                stderr(&out)
            );
        }
    }

    let mut scaled_args = base.to_vec();
    scaled_args.push("--standardize");
    assert_succeeded(&thresher(&scaled_args), "--standardize");
    let scaled = model_json(&files.model);
    let scaled_accuracy = accuracy(&files.model, &test);
    assert!(relative_gap(&scaled) < 0.1, "{scaled}");
    assert!(
        scaled_accuracy > raw_accuracy + 0.1 && scaled_accuracy > 0.85,
        "standardized {scaled_accuracy} raw {raw_accuracy}"
    );

    let record = &scaled["standardize"];
    assert_eq!(record["scaling"], "rms");
    assert_eq!(record["certified"], "scaled");
    let support: Vec<usize> = scaled["support"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j.as_u64().unwrap() as usize)
        .collect();
    let weights: Vec<f64> = scaled["weights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_f64().unwrap())
        .collect();
    let scales: Vec<f64> = record["scales"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_f64().unwrap())
        .collect();
    assert_eq!(scales.len(), support.len());
    // The scales are the columns' magnitudes (uniform on [-1, 1] has RMS 1/sqrt(3), a third of the
    // rows hold a given column).
    for (&j, &s) in support.iter().zip(&scales) {
        let magnitude = [1e6, 1.0, 1e-6][j % 3];
        let ratio = s / magnitude;
        assert!((0.2..0.5).contains(&ratio), "column {j}: scale {s}");
    }
    let b = scaled["intercept"].as_f64().unwrap();
    let lambda = scaled["lambda"].as_f64().unwrap();
    let loss_sum: f64 = train
        .iter()
        .map(|s| {
            let u: f64 = s
                .indices
                .iter()
                .zip(&s.values)
                .filter_map(|(&j, v)| {
                    support
                        .iter()
                        .position(|&k| k == j as usize)
                        .map(|at| weights[at] * v)
                })
                .sum::<f64>()
                + b;
            (-s.label * u).exp().ln_1p()
        })
        .sum();
    let penalty: f64 = weights
        .iter()
        .zip(&scales)
        .map(|(w, s)| (w * s) * (w * s))
        .sum();
    let primal = loss_sum / train.len() as f64 + 0.5 * lambda * penalty;
    let certified = scaled["certificate"]["primal"].as_f64().unwrap();
    assert!(
        (primal - certified).abs() < 1e-6 * certified.max(1.0),
        "recomputed {primal} certified {certified}"
    );
}

/// The daemon on a small logistic stream: a served model carries a `polish` record; when it was
/// kept, the model's primal is the polished one, below the search's, and the gap stays non-negative.
/// With `THRESHER_LEARNER_POLISH=false` no model is polished.
#[test]
fn the_daemon_polishes_the_models_it_publishes_unless_told_not_to() {
    let mut data = synth::sparse_stream(1500, 60, 5, 10, 0.3, true, 11);
    for s in &mut data.samples {
        s.label = if s.label >= 0.0 { 1.0 } else { -1.0 };
    }
    let body = to_libsvm(&data.samples);
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(dir.path(), "loss = \"logistic\"\nk = 5\nlambda = 0.001", "");
    for polish in ["true", "false"] {
        let d = Daemon::start_with_env(
            &["--config", config.to_str().unwrap()],
            &[("THRESHER_LEARNER_POLISH", polish)],
        );
        assert_eq!(d.post("/v1/samples", "text/plain", body.clone()).0, 202);
        d.wait_for("1500 samples", |d| samples_seen(d).filter(|&n| n == 1500));
        if polish == "false" {
            let model = d.wait_until_settled();
            assert!(model.get("polish").is_none(), "{model}");
            continue;
        }
        // The budget may skip a publication's polish; one of the models served carries it.
        let model = d.wait_for("a polished model", |d| {
            d.model().filter(|m| m["polish"].is_object())
        });
        let (primal, dual, gap) = certificate(&model);
        assert!(gap >= 0.0 && primal >= dual, "{model}");
        let record = &model["polish"];
        let outcome = record["outcome"]
            .as_str()
            .unwrap_or_else(|| panic!("{model}"));
        assert!(outcome == "kept" || outcome == "not_lower", "{model}");
        let search = record["primal_search"].as_f64().unwrap();
        let polished = record["primal_polished"].as_f64().unwrap();
        if outcome == "kept" {
            assert_eq!(primal, polished, "{model}");
            assert!(polished < search, "{model}");
        } else {
            assert!(primal <= search, "{model}");
        }
    }
}
