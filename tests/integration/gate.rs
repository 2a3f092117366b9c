//! The publish gate (`publish.max_relative_gap`) on the real binary: a tight gate keeps an unconverged
//! model from being served (503 on the model routes, `/readyz` not ready with the reason, the withheld
//! models counted and the candidate's gap shown, in the JSON and on the status page), and a loose one
//! serves the learner's model.

use serde_json::Value;
use thresher::synth::{self, to_libsvm};

use crate::common::{relative_gap, test_config, Daemon};

/// A squared-loss learner on a noisy stream with a true support of 5, k = 3: the k-sparse problem is
/// not convex there and its certificate's gap does not close (the learner stalls near a relative gap
/// of 0.26); with k = 10 it closes to about 1e-3.
const HARD: &str = "k = 3";
const EASY: &str = "k = 10";

/// A daemon whose `learner` is gated at `gate`, fed 3000 samples.
fn gated(dir: &std::path::Path, learner: &str, gate: &str) -> Daemon {
    let extra = format!("[publish]\nmax_relative_gap = {gate}");
    let config = test_config(dir, learner, &extra);
    let d = Daemon::start(&["--config", config.to_str().unwrap()]);
    let problem = synth::sparse_stream(3000, 200, 5, 15, 0.3, false, 11);
    for chunk in problem.samples.chunks(500) {
        assert_eq!(d.post("/v1/samples", "text/plain", to_libsvm(chunk)).0, 202);
    }
    d
}

/// The primary learner's entry of `GET /v1/models`.
fn entry(d: &Daemon) -> Value {
    let (status, body) = d.get("/v1/models");
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    v["models"][0].clone()
}

fn withheld(d: &Daemon) -> f64 {
    d.metric("thresher_models_withheld_total{learner=\"primary\"}")
}

#[test]
fn a_tight_gate_keeps_an_unconverged_model_from_being_served() {
    let dir = tempfile::tempdir().unwrap();
    let d = gated(dir.path(), HARD, "1e-9");
    // Wait for a candidate certified on the whole stream.
    let candidate = d.wait_for("a withheld candidate over all 3000 samples", |d| {
        let c = entry(d)["publish"]["candidate"].clone();
        (c["samples_seen"] == 3000).then_some(c)
    });
    assert!(
        candidate["relative_gap"].as_f64().unwrap() > 1e-9,
        "{candidate}"
    );
    assert!(withheld(&d) >= 1.0);
    // Nothing was served: the model routes answer 503, /readyz says why.
    let e = entry(&d);
    assert_eq!(e["version"], 0, "{e}");
    assert_eq!(e["publish"]["max_relative_gap"], 1e-9, "{e}");
    assert_eq!(d.get("/v1/model").0, 503);
    let (status, body) = d.get("/readyz");
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("no model has passed the publish gate")
            && body.contains("publish.max_relative_gap"),
        "{body}"
    );
    assert!(
        d.log().contains("withheld by the publish gate"),
        "{}",
        d.log()
    );
    // The learner keeps learning: its later models are judged (and withheld) too.
    let first = withheld(&d);
    d.post("/v1/samples", "text/plain", "1 1:1 2:-1\n");
    d.wait_for("another withheld model", |d| {
        (withheld(d) > first).then_some(())
    });
    assert_eq!(d.get("/v1/model").0, 503);
}

#[test]
fn a_loose_gate_serves_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let d = gated(dir.path(), EASY, "0.1");
    let model = d.wait_for("a served model over all 3000 samples", |d| {
        d.model().filter(|m| m["samples_seen"] == 3000)
    });
    assert!(relative_gap(&model) <= 0.1, "{model}");
    assert_eq!(model["publish"]["max_relative_gap"], 0.1, "{model}");
    let (status, body) = d.get("/readyz");
    assert_eq!((status, body.as_str()), (200, r#"{"status":"ready"}"#));
}

/// Without the key (the default, `inf`) there is no gate: nothing withheld, no `publish` record.
#[test]
fn no_gate_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(dir.path(), EASY, "");
    let d = Daemon::start(&["--config", config.to_str().unwrap()]);
    let problem = synth::sparse_stream(500, 200, 5, 15, 0.3, false, 11);
    assert_eq!(
        d.post("/v1/samples", "text/plain", to_libsvm(&problem.samples))
            .0,
        202
    );
    let model = d.wait_for("a model", |d| d.model());
    assert!(model.get("publish").is_none(), "{model}");
    assert_eq!(withheld(&d), 0.0);
}
