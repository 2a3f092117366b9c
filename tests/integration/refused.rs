//! A body refused after its parse changes no state: one refused for a full write-ahead log or a full
//! queue neither fixes the daemon's feature kind (numeric indices or names) nor leaves its new names
//! in the dictionary; the next body of either kind is taken as on a fresh daemon.

use crate::common::*;

/// `rows` NDJSON samples with named features (`prefix` + 0..3), about 40 bytes a line; 30 000 rows
/// make a log record larger than a 1 MiB `durability.wal_max_bytes` on their own.
fn named_body(rows: usize, prefix: &str) -> String {
    (0..rows)
        .map(|i| {
            format!(
                "{{\"label\":{},\"features\":{{\"{prefix}0\":1,\"{prefix}1\":{},\"{prefix}2\":0.5}}}}\n",
                i % 3,
                i % 5
            )
        })
        .collect()
}

/// `rows` LIBSVM samples with numeric features.
fn numeric_body(rows: usize) -> String {
    (0..rows)
        .map(|i| format!("{} 1:1 {}:0.5 {}:0.25\n", i % 3, 2 + i % 7, 10 + i % 5))
        .collect()
}

/// A daemon with a data directory whose write-ahead log holds at most 1 MiB. No intercept: the labels
/// do not depend on the varying feature, so only the constant ones (which an intercept would
/// replace) put names in the model's support.
fn small_log_daemon(dir: &tempfile::TempDir) -> Daemon {
    let config = test_config(
        dir.path(),
        "k = 2\nintercept = false",
        "[checkpoint]\ninterval_s = 3600\n[durability]\nwal_max_bytes = 1048576\n\
         [ingest]\nqueue_samples = 1000000",
    );
    let data = dir.path().join("data");
    Daemon::start(&serve_args(&config, &data))
}

fn assert_log_full(
    d: &Daemon,
    (status, answer, _): (u16, serde_json::Value, reqwest::header::HeaderMap),
) {
    assert_eq!(status, 503, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("write-ahead log"),
        "{answer}"
    );
    assert!(d.metric("thresher_samples_rejected_total{reason=\"wal_full\"}") >= 30_000.0);
}

/// Regression: a named body refused for a full log had already taken the names kind and put its names
/// in the dictionary, so a numeric body was then refused with 400 although no named sample had ever
/// been accepted.
#[test]
fn a_named_body_refused_for_a_full_log_leaves_no_kind_and_no_names() {
    let dir = tempfile::tempdir().unwrap();
    let d = small_log_daemon(&dir);
    assert_log_full(
        &d,
        d.post(
            "/v1/samples",
            "application/x-ndjson",
            named_body(30_000, "refused"),
        ),
    );
    assert_eq!(d.metric("thresher_feature_names"), 0.0);
    let (status, answer, _) = d.post("/v1/samples", "text/plain", "1 1:1\n");
    assert_eq!(status, 202, "{answer}");
    assert_eq!(d.metric("thresher_feature_names"), 0.0);
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
}

/// The converse: a numeric body refused for a full log does not take the numeric kind; a named body
/// is then accepted, and its names take the indices from 0 (as on a fresh daemon), also after a
/// restart that replays the log.
#[test]
fn a_numeric_body_refused_for_a_full_log_leaves_the_kind_open() {
    let dir = tempfile::tempdir().unwrap();
    let d = small_log_daemon(&dir);
    assert_log_full(
        &d,
        d.post("/v1/samples", "text/plain", numeric_body(30_000)),
    );
    let (status, answer, _) = d.post("/v1/samples", "application/x-ndjson", named_body(200, "f"));
    assert_eq!(status, 202, "{answer}");
    assert_eq!(d.metric("thresher_feature_names"), 3.0);
    // Refused for the log again, with new names: they stay out too.
    assert_log_full(
        &d,
        d.post(
            "/v1/samples",
            "application/x-ndjson",
            named_body(30_000, "g"),
        ),
    );
    assert_eq!(d.metric("thresher_feature_names"), 3.0);
    let model = d.wait_for("a model over the named features", |d| {
        d.model()
            .filter(|m| m["samples_seen"].as_u64() == Some(200) && !support(m).is_empty())
    });
    for (j, name) in support(&model)
        .iter()
        .zip(model["feature_names"].as_array().unwrap())
    {
        assert_eq!(name.as_str(), Some(format!("f{j}").as_str()), "{model}");
    }
    let pid = d.pid().to_string();
    std::process::Command::new("kill")
        .args(["-KILL", &pid])
        .status()
        .unwrap();
    let (status, _) = d.wait_exit("exit on SIGKILL");
    assert!(!status.success());
    let config = dir.path().join("thresher.toml");
    let data = dir.path().join("data");
    let d = Daemon::start(&serve_args(&config, &data));
    assert_eq!(
        d.metric("thresher_feature_names"),
        3.0,
        "replayed from the log"
    );
    let (status, answer, _) = d.post("/v1/samples", "application/x-ndjson", named_body(10, "f"));
    assert_eq!(status, 202, "{answer}");
    assert_eq!(d.metric("thresher_feature_names"), 3.0);
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
}

/// A body refused for a full queue after its parse (a JSON array is always parsed) leaves nothing
/// either: the queue is held full (`drain = false`) by featureless bodies, which take no kind.
#[test]
fn a_body_refused_for_a_full_queue_leaves_no_kind_and_no_names() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(
        dir.path(),
        "k = 2",
        "[ingest]\nqueue_capacity = 2\ndrain = false",
    );
    let data = dir.path().join("data");
    let args = serve_args(&config, &data);
    let d = Daemon::start(&args);
    for _ in 0..2 {
        assert_eq!(d.post("/v1/samples", "text/plain", "1\n-1\n").0, 202);
    }
    let named = r#"[{"label":1,"features":{"x":1,"y":2}}]"#;
    let (status, answer, _) = d.post("/v1/samples", "application/json", named);
    assert_eq!(status, 503, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("queue is full"),
        "{answer}"
    );
    assert_eq!(d.metric("thresher_feature_names"), 0.0);
    // A numeric body is not refused for its kind: it is parsed and, the queue being full, refused
    // for room (it was a 400 "numeric feature indices are refused").
    let numeric = r#"[{"label":1,"indices":[1],"values":[1]}]"#;
    let (status, answer, _) = d.post("/v1/samples", "application/json", numeric);
    assert_eq!(status, 503, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("queue is full"),
        "{answer}"
    );
    // Stopped (the held batches drain into the window and are checkpointed) and started again: the
    // kind is still open, so a numeric body is taken.
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
    let d = Daemon::start(&args);
    let (status, answer, _) = d.post("/v1/samples", "text/plain", "1 1:1\n");
    assert_eq!(status, 202, "{answer}");
    assert_eq!(d.metric("thresher_feature_names"), 0.0);
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
}
