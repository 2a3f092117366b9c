//! `thresher serve` end to end: the real binary on 127.0.0.1:0 with a temporary data dir, driven over
//! HTTP (support recovery, the bad-input matrix, a full queue, restart/restore, corrupt checkpoints).

use serde_json::Value;
use thresher::synth::{sparse_stream, to_libsvm};

use crate::common::{
    assert_failed_with, relative_gap, serve_args, support, test_config, thresher,
    thresher_with_env, Daemon,
};

#[test]
fn recovers_the_support_over_http_and_metrics_agree() {
    let dir = tempfile::tempdir().unwrap();
    let data = sparse_stream(3000, 500, 5, 20, 0.01, false, 42);
    let config = test_config(dir.path(), "k = 5\nlambda = 0.01\ntol = 1e-9", "");
    let d = Daemon::start(&serve_args(&config, &dir.path().join("data")));
    assert_eq!(d.get("/healthz").0, 200);
    assert_eq!(d.get("/readyz").0, 503, "not ready before a model");
    for chunk in data.samples.chunks(500) {
        let (status, body, _) = d.post("/v1/samples", "text/plain", to_libsvm(chunk));
        assert_eq!(
            (status, body["accepted"].as_u64()),
            (202, Some(chunk.len() as u64)),
            "{body}"
        );
    }
    let truth = data.true_support();
    // On a loaded machine the support can be found before the last POSTed batch is absorbed: wait for
    // a model over all 3000 samples. How close the idle learner gets depends on how the batches met
    // its steps (1.4e-6 once on a loaded machine): the gap bound is 1e-5.
    let model = d.wait_for("the true support with a small gap on all samples", |d| {
        let m = d.model()?;
        (m["samples_seen"] == 3000 && support(&m) == truth && relative_gap(&m) < 1e-5).then_some(m)
    });
    assert_eq!(model["window_samples"], 2000);
    assert_eq!(model["format"], "thresher-model/1");
    assert_eq!(d.get("/readyz").0, 200);
    let settled = d.wait_until_settled();
    assert_eq!(support(&settled), truth);
    let series = |name: &str| format!("{name}{{learner=\"primary\"}}");
    assert_eq!(
        d.metric(&series("thresher_model_version")),
        settled["version"].as_f64().unwrap()
    );
    // Same value; serde_json's float parsing may differ from Rust's by one ulp.
    let (from_metrics, from_model) = (
        d.metric(&series("thresher_duality_gap")),
        settled["certificate"]["gap"].as_f64().unwrap(),
    );
    assert!(
        (from_metrics - from_model).abs() <= 1e-12 * from_model.abs(),
        "{from_metrics} vs {from_model}"
    );
    assert_eq!(d.metric(&series("thresher_support_size")), 5.0);
    assert_eq!(d.metric(&series("thresher_window_samples")), 2000.0);
    assert_eq!(
        d.metric("thresher_samples_ingested_total{source=\"http\"}"),
        3000.0
    );
    assert!(d.metric(&series("thresher_solver_steps_total")) > 0.0);
    // Prediction with the same model version, in all three body formats.
    let (status, body, _) = d.post("/v1/predict", "text/plain", to_libsvm(&data.samples[..3]));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["model_version"], settled["version"]);
    let p = body["predictions"].as_array().unwrap();
    for (pred, s) in p.iter().zip(&data.samples) {
        assert!(
            (pred.as_f64().unwrap() - s.label).abs() < 0.5,
            "{pred} vs {}",
            s.label
        );
    }
    // A sample without features scores the intercept alone (squared loss fits one by default).
    let (status, body, _) = d.post(
        "/v1/predict?learner=primary",
        "application/json",
        "[{\"indices\": [], \"values\": []}]",
    );
    assert_eq!(
        (status, body["predictions"][0].as_f64()),
        (200, settled["intercept"].as_f64()),
        "{body}"
    );
    assert_eq!(
        d.post("/v1/predict?learner=nope", "application/json", "[]")
            .0,
        404
    );
    let (status, models) = d.get("/v1/models");
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&models).unwrap()["models"][0]["learner"],
        "primary"
    );
    assert_eq!(d.get("/v1/models/primary").0, 200);
    assert_eq!(d.get("/v1/models/other").0, 404);
    let (status, log) = d.terminate();
    assert!(status.success(), "exit {status:?}\n{log}");
    assert!(log.contains("final checkpoint written"), "{log}");
}

/// (what, content type, bad second line, status, line, message fragment).
type Case = (
    &'static str,
    &'static str,
    &'static str,
    u16,
    Option<u64>,
    &'static str,
);

#[test]
fn bad_input_matrix_lets_nothing_in() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(
        dir.path(),
        "loss = \"hinge\"\nk = 3",
        "[server]\nbody_limit_bytes = 4096",
    );
    let d = Daemon::start(&["--config", config.to_str().unwrap()]);
    let (status, body, _) = d.post("/v1/samples", "text/plain", "1 1:1 2:1\n-1 3:1\n");
    assert_eq!((status, &body["accepted"]), (202, &Value::from(2)));
    let good = "1 1:0.5\n";
    let cases: &[Case] = &[
        (
            "missing label",
            "text/plain",
            "1:2 3:4",
            400,
            Some(2),
            "missing label",
        ),
        (
            "bad label",
            "text/plain",
            "abc 1:2",
            400,
            Some(2),
            "bad label",
        ),
        (
            "bad pair",
            "text/plain",
            "1 12",
            400,
            Some(2),
            "expected index:value",
        ),
        (
            "bad index",
            "text/plain",
            "1 x:2",
            400,
            Some(2),
            "bad feature index",
        ),
        (
            "negative index",
            "text/plain",
            "1 -3:2",
            400,
            Some(2),
            "bad feature index",
        ),
        (
            "bad value",
            "text/plain",
            "1 3:zz",
            400,
            Some(2),
            "bad feature value",
        ),
        (
            "unsorted",
            "text/plain",
            "1 3:1 2:1",
            400,
            Some(2),
            "strictly increasing",
        ),
        (
            "duplicate",
            "text/plain",
            "1 3:1 3:1",
            400,
            Some(2),
            "duplicate feature index 3",
        ),
        (
            "infinite value",
            "text/plain",
            "1 3:inf",
            400,
            Some(2),
            "non-finite value",
        ),
        (
            "NaN value",
            "text/plain",
            "1 3:NaN",
            400,
            Some(2),
            "non-finite value",
        ),
        (
            "NaN label",
            "text/plain",
            "nan 3:1",
            400,
            Some(2),
            "label is not finite",
        ),
        (
            "label 3 for hinge",
            "text/plain",
            "3 1:1",
            400,
            Some(2),
            "-1 or +1",
        ),
        (
            "bad JSON line",
            "application/x-ndjson",
            "{\"label\": 1,",
            400,
            Some(2),
            "invalid JSON sample",
        ),
        (
            "unknown JSON field",
            "application/x-ndjson",
            "{\"label\": 1, \"colour\": 2}",
            400,
            Some(2),
            "unknown field",
        ),
        (
            "length mismatch",
            "application/x-ndjson",
            "{\"label\": 1, \"indices\": [1, 2], \"values\": [1]}",
            400,
            Some(2),
            "2 indices but 1 values",
        ),
        (
            "index beyond max_dim",
            "text/plain",
            "1 99999999:1",
            400,
            Some(2),
            "max_dim",
        ),
    ];
    let mut refused = 0.0;
    for (what, ct, bad, status, line, message) in cases {
        let first = if *ct == "text/plain" {
            good.to_string()
        } else {
            "{\"label\": 1, \"indices\": [1], \"values\": [1]}\n".into()
        };
        let (got, body, _) = d.post("/v1/samples", ct, format!("{first}{bad}\n"));
        assert_eq!(got, *status, "{what}: {body}");
        assert_eq!(body["line"].as_u64(), *line, "{what}: {body}");
        let err = body["error"].as_str().unwrap();
        assert!(
            err.contains(message),
            "{what}: {err:?} should mention {message:?}"
        );
        refused += 2.0;
    }
    // Bytes that are not UTF-8 name their line (and count both samples as invalid).
    let (got, body, _) = d.post(
        "/v1/samples",
        "text/plain",
        b"1 1:0.5\n-1 2:\xff\n".to_vec(),
    );
    assert_eq!((got, body["line"].as_u64()), (400, Some(2)), "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("not UTF-8"),
        "{body}"
    );
    refused += 2.0;
    // A JSON array names the position of the bad element.
    let (got, body, _) = d.post(
        "/v1/samples",
        "application/json",
        "[{\"label\": 1}, {\"label\": 2}]",
    );
    assert_eq!((got, body["line"].as_u64()), (400, Some(2)), "{body}");
    refused += 2.0;
    let (got, body, _) = d.post("/v1/samples", "application/json", "{\"label\": 1}");
    assert_eq!((got, &body["line"]), (400, &Value::Null), "{body}");
    let (got, body, _) = d.post("/v1/samples", "text/csv", good);
    assert_eq!(got, 415, "{body}");
    assert!(body["error"]
        .as_str()
        .unwrap()
        .contains("unsupported content type"));
    let (got, body, _) = d.post("/v1/samples", "text/plain", "");
    assert_eq!(
        (got, body["error"].as_str()),
        (400, Some("empty body: no samples"))
    );
    let (got, body, _) = d.post("/v1/samples", "text/plain", "# only a comment\n\n");
    assert_eq!(got, 400, "{body}");
    let (got, body, _) = d.post("/v1/samples", "text/plain", good.repeat(2000));
    assert_eq!(got, 413, "{body}");

    assert_eq!(
        d.metric("thresher_samples_ingested_total{source=\"http\"}"),
        2.0
    );
    assert_eq!(
        d.metric("thresher_samples_rejected_total{reason=\"invalid\"}"),
        refused
    );
    assert_eq!(
        d.metric("thresher_samples_rejected_total{reason=\"unsupported_media_type\"}"),
        1.0
    );
    assert_eq!(
        d.metric("thresher_samples_rejected_total{reason=\"too_large\"}"),
        1.0
    );
    let model = d.wait_until_settled();
    assert_eq!(
        (
            model["samples_seen"].as_u64(),
            model["window_samples"].as_u64()
        ),
        (Some(2), Some(2)),
        "{model}"
    );
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
}

#[test]
fn a_full_queue_gets_503_and_nothing_enters() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(
        dir.path(),
        "k = 2",
        "[ingest]\nqueue_capacity = 2\ndrain = false",
    );
    let data_dir = dir.path().join("data");
    let args = serve_args(&config, &data_dir);
    let d = Daemon::start(&args);
    for _ in 0..2 {
        assert_eq!(d.post("/v1/samples", "text/plain", "1 1:1\n2 2:1\n").0, 202);
    }
    let (status, body, headers) = d.post("/v1/samples", "text/plain", "1 1:1\n2 2:1\n3 3:1\n");
    assert_eq!(status, 503, "{body}");
    assert_eq!(headers.get("retry-after").unwrap(), "1");
    assert!(body["error"].as_str().unwrap().contains("queue is full"));
    assert_eq!(d.metric("thresher_ingest_queue_batches"), 2.0);
    only_the_accepted_entered(d, &args, 4, 3);
}

/// The counters show `accepted` ingested and `refused` refused as `queue_full`; shutdown drains the held
/// queue into the window, so after a restart the snapshot has exactly the `accepted` samples.
fn only_the_accepted_entered(d: Daemon, args: &[&str], accepted: u64, refused: u64) {
    assert_eq!(
        d.metric("thresher_samples_ingested_total{source=\"http\"}"),
        accepted as f64
    );
    assert_eq!(
        d.metric("thresher_samples_rejected_total{reason=\"queue_full\"}"),
        refused as f64
    );
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
    let d = Daemon::start(args);
    let m = d.model().expect("restored model");
    assert_eq!(
        (m["samples_seen"].as_u64(), m["window_samples"].as_u64()),
        (Some(accepted), Some(accepted)),
        "{m}"
    );
}

/// The sample budget (`ingest.queue_samples`) refuses what the batch-counted queue would still take: the
/// early refusal (before any parse) and the one after it both count every sample and let nothing in.
#[test]
fn the_sample_budget_gets_503_and_nothing_enters() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(
        dir.path(),
        "k = 2",
        "[ingest]\nqueue_capacity = 100\nqueue_samples = 5\ndrain = false",
    );
    let data_dir = dir.path().join("data");
    let args = serve_args(&config, &data_dir);
    let d = Daemon::start(&args);
    assert_eq!(
        d.post("/v1/samples", "text/plain", "1 1:1\n2 2:1\n3 3:1\n")
            .0,
        202
    );
    assert_eq!(d.metric("thresher_ingest_samples_in_flight"), 3.0);
    // 3 + 3 > 5: refused after the parse (the budget still had room when the request came).
    let (status, body, headers) = d.post("/v1/samples", "text/plain", "1 1:1\n# c\n2 2:1\n3 3:1\n");
    assert_eq!(status, 503, "{body}");
    assert_eq!(headers.get("retry-after").unwrap(), "1");
    // 3 + 2 = 5 fits; then the budget is spent and a body is refused before parsing, counted by lines.
    assert_eq!(d.post("/v1/samples", "text/plain", "1 1:1\n2 2:1\n").0, 202);
    let (status, _, _) = d.post(
        "/v1/samples",
        "application/x-ndjson",
        "{\"label\":1}\n\n{\"label\":2}\n",
    );
    assert_eq!(status, 503);
    assert_eq!(d.metric("thresher_ingest_samples_in_flight"), 5.0);
    only_the_accepted_entered(d, &args, 5, 5);
}

#[test]
fn restart_restores_the_model_and_bad_checkpoints_stop_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let config = test_config(dir.path(), "k = 4\ntol = 1e-7", "");
    let args = serve_args(&config, &data_dir);
    let data = sparse_stream(1500, 300, 4, 12, 0.01, false, 5);
    let d = Daemon::start(&args);
    let ndjson: String = data
        .samples
        .iter()
        .map(|s| {
            format!(
                "{}\n",
                serde_json::json!({"label": s.label, "indices": s.indices, "values": s.values})
            )
        })
        .collect();
    assert_eq!(d.post("/v1/samples", "application/x-ndjson", ndjson).0, 202);
    let before = d.wait_until_settled();
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");

    let d = Daemon::start(&args);
    assert_eq!(d.get("/readyz").0, 200, "ready at once from the checkpoint");
    let after = d.model().unwrap();
    assert_eq!(after["version"], before["version"]);
    assert_eq!(after["support"], before["support"]);
    assert_eq!(after["samples_seen"], 1500);
    assert_eq!(
        d.wait_until_settled()["version"],
        before["version"],
        "a converged learner stays idle"
    );
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");

    // A truncated checkpoint is a clear error, not a silent fresh start.
    let file = data_dir.join("thresher.ckpt");
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let out = thresher(&[&["serve", "--listen", "127.0.0.1:0"][..], &args].concat());
    assert_failed_with(&out, "is corrupt: truncated");
    assert_failed_with(&out, "--fresh");

    // --fresh starts empty (and overwrites the bad checkpoint at shutdown).
    let mut fresh = args.to_vec();
    fresh.push("--fresh");
    let d = Daemon::start(&fresh);
    assert_eq!(d.get("/readyz").0, 503);
    assert_eq!(d.get("/v1/model").0, 503);
    assert_eq!(d.metric("thresher_model_version{learner=\"primary\"}"), 0.0);
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
}

#[test]
fn named_features_are_reported_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(dir.path(), "k = 2\nlambda = 0.001", "");
    let d = Daemon::start(&["--config", config.to_str().unwrap()]);
    let rows: Vec<Value> = (0..200)
        .map(|i| {
            let (a, b, c) = ((i % 7) as f64 - 3.0, (i % 5) as f64 - 2.0, (i % 3) as f64 - 1.0);
            serde_json::json!({"label": 2.0 * a - b, "features": {"price": a, "size": b, "noise": 0.01 * c}})
        })
        .collect();
    let (status, body, _) = d.post(
        "/v1/samples",
        "application/json",
        Value::Array(rows).to_string(),
    );
    assert_eq!(status, 202, "{body}");
    // The first published model may precede any solver step (a warm start alone can leave w = 0), so
    // wait for the learned support rather than for any model.
    let names = serde_json::json!(["price", "size"]);
    d.wait_for("a model over price and size", |d| {
        d.model().filter(|m| m["feature_names"] == names)
    });
    let m = d.wait_until_settled();
    assert_eq!(m["feature_names"], names, "{m}");
    let (status, body, _) = d.post(
        "/v1/predict",
        "application/x-ndjson",
        "{\"features\": {\"price\": 1, \"unknown\": 5}}\n",
    );
    assert_eq!(status, 200, "{body}");
    assert!(
        (body["predictions"][0].as_f64().unwrap() - 2.0).abs() < 0.1,
        "{body}"
    );
}

#[test]
fn invalid_config_names_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(dir.path(), "lambda = -1.0", "");
    let out = thresher(&["serve", "--config", config.to_str().unwrap()]);
    assert_failed_with(&out, "`learner[0].lambda`");
    let out = thresher_with_env(
        &["serve", "--listen", "127.0.0.1:0"],
        &[("THRESHER_WINDOW_CAPACITY", "zero")],
    );
    assert_failed_with(&out, "THRESHER_WINDOW_CAPACITY=zero");
    let out = thresher_with_env(
        &["serve", "--listen", "127.0.0.1:0"],
        &[("THRESHER_LEARNER_KK", "1")],
    );
    assert_failed_with(&out, "THRESHER_LEARNER_KK matches no config key");
    let config = test_config(dir.path(), "k = 2", "[server]\nlistn = \"127.0.0.1:0\"");
    let out = thresher(&["serve", "--config", config.to_str().unwrap()]);
    assert_failed_with(&out, "`server.listn`: unknown key");
    assert_failed_with(&out, config.to_str().unwrap());
}

#[test]
fn stdin_skips_bad_lines_and_keeps_serving_after_eof() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(dir.path(), "k = 2", "");
    let input =
        "1 1:1\n2 2:x\n# comment\n{\"label\": 3, \"indices\": [2], \"values\": [1]}\n4 1:1 1:2\n";
    let d = Daemon::start_with_stdin(&["--config", config.to_str().unwrap(), "--stdin"], input);
    let m = d.wait_for("a model from stdin", |d| {
        d.model().filter(|m| m["samples_seen"] == 2)
    });
    assert_eq!(m["window_samples"], 2);
    assert_eq!(
        d.metric("thresher_samples_ingested_total{source=\"stdin\"}"),
        2.0
    );
    assert_eq!(
        d.metric("thresher_samples_rejected_total{reason=\"invalid\"}"),
        2.0
    );
    d.wait_for("the EOF log line", |d| {
        d.log().contains("end of input").then_some(())
    });
    let log = d.log();
    assert!(
        log.contains("line=2") && log.contains("line=5"),
        "bad lines are logged by number:\n{log}"
    );
    assert_eq!(d.get("/healthz").0, 200, "EOF leaves the daemon serving");
    assert_eq!(d.post("/v1/samples", "text/plain", "5 3:1\n").0, 202);
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
}

#[test]
fn several_learners_share_the_stream() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(
        dir.path(),
        "name = \"wide\"\nk = 5\n[[learner]]\nname = \"narrow\"\nk = 2\nblocks = 1",
        "",
    );
    let d = Daemon::start(&["--config", config.to_str().unwrap()]);
    let data = sparse_stream(800, 100, 5, 10, 0.01, false, 9);
    assert_eq!(
        d.post("/v1/samples", "text/plain", to_libsvm(&data.samples))
            .0,
        202
    );
    let narrow = d.wait_for("the second learner's model", |d| d.learner_model("narrow"));
    assert_eq!(
        (narrow["k"].as_u64(), narrow["solver"].as_str()),
        (Some(2), Some("diht"))
    );
    assert!(support(&narrow).len() <= 2);
    let primary = d.wait_for("the primary's model", |d| d.model());
    assert_eq!(
        (primary["learner"].as_str(), primary["k"].as_u64()),
        (Some("wide"), Some(5))
    );
    let (_, all) = d.get("/v1/models");
    let all: Value = serde_json::from_str(&all).unwrap();
    let names: Vec<&str> = all["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["learner"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["wide", "narrow"]);
    let (status, body, _) = d.post("/v1/predict?learner=narrow", "text/plain", "1:1\n");
    assert_eq!(
        (status, body["learner"].as_str()),
        (200, Some("narrow")),
        "{body}"
    );
    assert_eq!(
        d.metric("thresher_window_capacity{learner=\"narrow\"}"),
        2000.0
    );
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
}

#[test]
fn a_panicking_learner_stops_the_daemon_and_keeps_the_last_good_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    // No periodic checkpoint in this test: the only writer is the clean shutdown. No write-ahead log
    // either: what is kept after the panic is the checkpoint alone (the log's replay of acknowledged
    // samples is `durability.rs`'s).
    let config = test_config(
        dir.path(),
        "name = \"steady\"\nk = 3\n[[learner]]\nname = \"fragile\"\nk = 3\nblocks = 1",
        "[checkpoint]\ninterval_s = 86400\n[durability]\nwal = \"off\"",
    );
    let args = serve_args(&config, &data_dir);
    let data = sparse_stream(600, 60, 3, 8, 0.01, false, 11);
    // A good checkpoint from a clean run.
    let d = Daemon::start(&args);
    assert_eq!(
        d.post("/v1/samples", "text/plain", to_libsvm(&data.samples[..400]))
            .0,
        202
    );
    for name in ["steady", "fragile"] {
        d.wait_for("both learners' models", |d| {
            d.learner_model(name).filter(|m| m["samples_seen"] == 400)
        });
    }
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
    let checkpoint = data_dir.join("thresher.ckpt");
    let good = std::fs::read(&checkpoint).unwrap();

    // The same data dir with learner "fragile" armed to panic on its first insert.
    let d = Daemon::start_with_env(&args, &[("THRESHER_FAULT_INJECT", "learner_panic:fragile")]);
    let restored: Vec<Value> = ["steady", "fragile"]
        .iter()
        .map(|name| d.learner_model(name).expect("restored at once"))
        .collect();
    assert!(
        d.log()
            .contains("THRESHER_FAULT_INJECT: this learner will panic on its first insert"),
        "the armed hook is announced:\n{}",
        d.log()
    );
    assert_eq!(
        d.post("/v1/samples", "text/plain", to_libsvm(&data.samples[400..]))
            .0,
        202
    );
    let (base, client) = (d.base.clone(), d.client.clone());
    let (status, log) = d.wait_exit("the daemon to stop by itself after the panic");
    assert_eq!(
        status.code(),
        Some(1),
        "an orderly non-zero exit, not a crash by signal:\n{log}"
    );
    let line = |fragment: &str| {
        log.lines()
            .position(|l| l.contains(fragment))
            .unwrap_or_else(|| panic!("no log line with {fragment:?}:\n{log}"))
    };
    let reported = log
        .lines()
        .find(|l| l.contains("learner thread ended by panic"))
        .unwrap_or_else(|| panic!("the panic is not reported:\n{log}"));
    assert!(
        reported.contains("learner=fragile")
            && reported.contains("injected fault (THRESHER_FAULT_INJECT)"),
        "one line names the learner and the panic: {reported}"
    );
    // The ordered stop ran: flag raised, HTTP stopped, learners joined, final snapshot; then the error.
    let order = [
        line("learner thread panicked; stopping the daemon"),
        line("HTTP server stopped"),
        line("learner thread ended by panic"),
        line("final snapshot published"),
        line("Error: learner \"fragile\" panicked; the daemon stopped"),
    ];
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}\n{log}");
    assert!(!log.contains("final checkpoint written"), "{log}");
    assert!(!log.contains("thread 'main' panicked"), "{log}");
    let after = client.get(format!("{base}/healthz")).send();
    assert!(
        after.as_ref().is_err_and(|e| e.is_connect()),
        "the HTTP server is gone: {after:?}"
    );
    // The final checkpoint was skipped: the last good one is untouched, and nothing else was written.
    assert_eq!(std::fs::read(&checkpoint).unwrap(), good);
    let files: Vec<_> = std::fs::read_dir(&data_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.starts_with("thresher.ckpt"))
        .collect();
    assert_eq!(files, ["thresher.ckpt"]);

    // It restores: both learners exactly as checkpointed (the samples of the failed run are not in it).
    let d = Daemon::start(&args);
    for (name, before) in ["steady", "fragile"].iter().zip(&restored) {
        let after = d.learner_model(name).expect("restored at once");
        for field in ["version", "support", "weights", "samples_seen"] {
            assert_eq!(after[field], before[field], "{name} {field}");
        }
        assert_eq!(after["samples_seen"], 400);
    }
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
}
