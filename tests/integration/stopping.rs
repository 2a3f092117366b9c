//! When a run stops and what it says about it, on the real binary: `fit` writes whether its model
//! converged (and why not) and warns on stderr; the daemon's learners cannot run away: a one-class
//! window keeps the intercept bounded, one runaway prediction does not poison the progressive loss, and
//! a learner stalled above the empty model serves `w = 0` and says so (model JSON, metric, log).

use serde_json::Value;
use thresher::synth;

use crate::common::{
    assert_finite_model, assert_succeeded, samples_seen, serve_args, stderr, test_config, thresher,
    Daemon, FitFiles,
};

/// The served model's `convergence` record.
fn convergence(model: &Value) -> &Value {
    let c = &model["convergence"];
    assert!(c.is_object(), "no convergence record: {model}");
    c
}

/// A fit that cannot reach `--tol` within its epochs says so: `converged: false` with the reason
/// and the relative gap in the model file, and a warning on stderr; a fit that meets its tolerance
/// says `converged` and warns of nothing. Before, the model file had no such record and `fit` was
/// silent about a 20% gap.
#[test]
fn fit_reports_whether_it_converged_and_warns_when_not() {
    let problem = synth::sparse_stream(3000, 200, 5, 15, 0.3, true, 11);
    let files = FitFiles::new(&problem.samples);
    let fit = |extra: &[&str]| {
        let mut args = vec![
            "fit",
            &files.data,
            "--loss",
            "logistic",
            "-k",
            "3",
            "--lambda",
            "1e-4",
            "--out",
            &files.model,
        ];
        args.extend_from_slice(extra);
        let out = thresher(&args);
        let err = assert_succeeded(&out, "fit");
        (err, serde_json::to_value(files.load_model()).unwrap())
    };
    let (err, model) = fit(&["--epochs", "3"]);
    let c = convergence(&model);
    assert_eq!(c["converged"], false, "{model}");
    assert_eq!(c["reason"], "max_epochs", "{model}");
    assert!(c["relative_gap"].as_f64().unwrap() > c["tol"].as_f64().unwrap());
    assert!(
        err.contains("warning: the model did not converge: stop=max_epochs"),
        "{err}"
    );
    // A loose tolerance is met: converged, no warning.
    let (err, model) = fit(&["--tol", "10"]);
    let c = convergence(&model);
    assert_eq!(
        (&c["converged"], &c["reason"]),
        (&Value::Bool(true), &Value::from("converged"))
    );
    assert!(!err.contains("warning"), "{err}");
}

/// `fit` fits the intercept by default for a classification loss, as the daemon does (before, only
/// with `--intercept`), and for squared loss (the labels' mean, 0.8, is the intercept's, not a
/// weight's); `--no-intercept` turns it off.
#[test]
fn fit_has_an_intercept_by_default_for_classification() {
    // 9 in 10 labels positive whatever the features: the intercept carries the prior.
    let text: String = (0..2000)
        .map(|i| {
            let y = if i % 10 == 0 { -1 } else { 1 };
            format!("{y} {}:1 {}:0.5\n", 1 + i % 7, 8 + i % 5)
        })
        .collect();
    let files = FitFiles::with_data("train.svm", &text);
    let intercept = |loss: &str, extra: &[&str]| {
        let mut args = vec![
            "fit",
            &files.data,
            "--loss",
            loss,
            "-k",
            "2",
            "--lambda",
            "0.01",
            "--out",
            &files.model,
        ];
        args.extend_from_slice(extra);
        assert_succeeded(&thresher(&args), "fit");
        files.load_model().intercept
    };
    let b = intercept("logistic", &[]);
    assert!(b > 1.0, "default logistic intercept {b}");
    assert_eq!(intercept("logistic", &["--no-intercept"]), 0.0);
    assert!(intercept("hinge", &["--intercept"]) > 0.0);
    let b = intercept("squared", &[]);
    assert!(b > 0.5, "default squared intercept {b}");
    assert_eq!(intercept("squared", &["--no-intercept"]), 0.0);
    let out = thresher(&[
        "fit",
        &files.data,
        "--loss",
        "logistic",
        "-k",
        "2",
        "--lambda",
        "0.01",
        "--intercept",
        "--no-intercept",
    ]);
    assert!(!out.status.success(), "{}", stderr(&out));
}

/// Logistic with its default intercept on a window holding one class (5000 rows labelled 1, the start
/// of a label-sorted file) published `intercept 9.27e60`, weights ~1e-60 and a gap of 3.8e-120, and the
/// next sample of the other class made `progressive_loss` 2.28e60. Now the intercept stops where every
/// margin is past 40 (the logistic loss below 4.3e-18), and a wrong prediction costs at most the loss
/// at score 50.
#[test]
fn a_one_class_window_sent_the_intercept_to_9e60() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(dir.path(), "loss = \"logistic\"\nk = 2", "");
    let d = Daemon::start(&["--config", config.to_str().unwrap()]);
    let ones: String = (0..5000)
        .map(|i| format!("1 {}:1 {}:0.5\n", 1 + i % 3, 4 + i % 2))
        .collect();
    assert_eq!(d.post("/v1/samples", "text/plain", ones).0, 202);
    d.wait_for("5000 samples", |d| samples_seen(d).filter(|&n| n == 5000));
    let model = d.wait_until_settled();
    assert_finite_model(&model);
    let b = model["intercept"].as_f64().unwrap();
    assert!(b > 0.0 && b < 100.0, "intercept {b}: {model}");
    let c = convergence(&model);
    assert!(c["relative_gap"].as_f64().unwrap() >= 0.0, "{model}");
    let sum_before = 5000.0 * model["progressive_loss"].as_f64().unwrap();
    let minus: String = (0..10).map(|i| format!("-1 {}:1\n", 1 + i % 3)).collect();
    assert_eq!(d.post("/v1/samples", "text/plain", minus).0, 202);
    d.wait_for("5010 samples", |d| samples_seen(d).filter(|&n| n == 5010));
    let after = d.wait_until_settled();
    assert_finite_model(&after);
    // Ten wrong predictions cost at most the loss at score 50 (50 + 2e-22) each.
    let added = 5010.0 * after["progressive_loss"].as_f64().unwrap() - sum_before;
    assert!(added <= 10.0 * 50.001, "{added}: {after}");
}

/// One prediction with a runaway score (a feature value of 1e6, inside `ingest.max_abs_value`, on a
/// weight learned at scale 1) added its loss of ~1e6 to the progressive average, which no number of
/// later samples brought back, checkpoint and restart included. Now each sample's progressive loss is
/// taken at a score bounded by 50 (classification), and the average recovers as samples follow.
#[test]
fn one_runaway_prediction_poisoned_the_progressive_loss_for_good() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let config = test_config(
        dir.path(),
        "loss = \"logistic\"\nk = 1\nintercept = false",
        "",
    );
    let args = serve_args(&config, &data_dir);
    let d = Daemon::start(&args);
    let good = |n: usize| -> String {
        (0..n)
            .map(|i| if i % 2 == 0 { "1 1:1\n" } else { "-1 1:-1\n" })
            .collect()
    };
    assert_eq!(d.post("/v1/samples", "text/plain", good(1000)).0, 202);
    d.wait_for("1000 samples", |d| samples_seen(d).filter(|&n| n == 1000));
    let before = d.wait_until_settled();
    let w = before["weights"][0].as_f64().unwrap();
    assert!(w > 0.5, "{before}");
    assert_eq!(d.post("/v1/samples", "text/plain", "-1 1:1e6\n").0, 202);
    d.wait_for("1001 samples", |d| samples_seen(d).filter(|&n| n == 1001));
    let bad = d.wait_until_settled();
    // Its loss at score w 1e6 was ~w 1e6; it is charged at score 50.
    let added = 1001.0 * bad["progressive_loss"].as_f64().unwrap()
        - 1000.0 * before["progressive_loss"].as_f64().unwrap();
    assert!(added <= 50.001, "added {added}: {bad}");
    // The bad sample leaves the 2000-sample window; the average recovers as samples follow.
    for n in 1..=12 {
        assert_eq!(d.post("/v1/samples", "text/plain", good(500)).0, 202);
        let seen = 1001 + 500 * n;
        d.wait_for("the body learned", |d| {
            samples_seen(d).filter(|&s| s == seen)
        });
        d.wait_until_settled();
    }
    let after = d.wait_until_settled();
    assert_finite_model(&after);
    let progressive = after["progressive_loss"].as_f64().unwrap();
    assert!(progressive < 0.5, "progressive loss {progressive}: {after}");
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
    let d = Daemon::start(&args);
    let restored = d.model().unwrap();
    let progressive = restored["progressive_loss"].as_f64().unwrap();
    assert!(progressive < 0.5, "restored progressive loss {progressive}");
}

/// Labels of +-1e6 and values of +-1e6 next to 1e-6 (inside `ingest.max_abs_value`): the learner idled
/// after its 200 epochs at a primal several times the empty model's and served that model as ready,
/// with nothing to show the stall. Now a learner whose model is worse than `w = 0` over its window
/// serves `w = 0`, certified against the same dual, and says so in the model JSON
/// (`convergence.empty_model`), a metric and the log.
#[test]
fn a_learner_stalled_above_the_empty_model_and_served_it_as_ready() {
    let dir = tempfile::tempdir().unwrap();
    // Without the polish at publication, which re-solves this search's model on its support to a
    // primal just under the empty model's: the search's own stall is what is tested here.
    let config = test_config(dir.path(), "k = 2\npolish = false", "");
    let d = Daemon::start(&["--config", config.to_str().unwrap()]);
    // Labels +-1e6 unrelated to the features, which are +-1e6, +-1e-6, spread over +-1e6, and 1e-6 or
    // 2e-6, from a fixed 64-bit LCG: `w = 0` has P = 1e12; the learner stalled near 2.5e12.
    let mut state: u64 = 1;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        state >> 33
    };
    let text: String = (0..2000)
        .map(|_| {
            let mut sign = |v: f64| if next() % 2 == 0 { v } else { -v };
            let (y, big, tiny) = (sign(1e6), sign(1e6), sign(1e-6));
            let spread = (next() % 2_000_001) as f64 - 1e6;
            let small = if next() % 2 == 0 { 1e-6 } else { 2e-6 };
            format!("{y} 1:{big} 2:{tiny} 3:{spread} 4:{small}\n")
        })
        .collect();
    for body in text.lines().collect::<Vec<_>>().chunks(500) {
        assert_eq!(d.post("/v1/samples", "text/plain", body.join("\n")).0, 202);
    }
    d.wait_for("2000 samples", |d| samples_seen(d).filter(|&n| n == 2000));
    let model = d.wait_until_settled();
    assert_finite_model(&model);
    let c = convergence(&model);
    assert_eq!(c["empty_model"], true, "{model}");
    assert!(model["support"].as_array().unwrap().is_empty(), "{model}");
    assert_eq!(c["converged"], false, "{model}");
    assert_eq!(
        d.metric("thresher_model_empty_fallback{learner=\"primary\"}"),
        1.0
    );
    assert_eq!(
        d.metric("thresher_model_converged{learner=\"primary\"}"),
        0.0
    );
    assert!(d.log().contains("serving w = 0"), "{}", d.log());
}
