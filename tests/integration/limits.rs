//! Resource and number limits through the real daemon: memory for large feature indices and names,
//! the dictionary's bound, finite numbers only (ingest limit, numeric faults, checkpoints), and
//! checkpoint safety (learner mismatch, window trimming, the data directory, idle rewrites).

use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::common::{assert_failed_with, serve_args, test_config, thresher, Daemon, FitFiles};

/// Asserts every number a model JSON serves is present and finite (a non-finite f64 serialises as
/// `null`).
fn assert_finite_model(m: &Value) {
    let number = |v: &Value, what: &str| {
        let x = v
            .as_f64()
            .unwrap_or_else(|| panic!("{what} is not a number: {m}"));
        assert!(x.is_finite(), "{what} = {x}: {m}");
    };
    for key in ["primal", "dual", "gap"] {
        number(&m["certificate"][key], key);
    }
    number(&m["intercept"], "intercept");
    number(&m["progressive_loss"], "progressive_loss");
    for w in m["weights"].as_array().unwrap() {
        number(w, "a weight");
    }
}

/// The number of samples a daemon reports learned by the primary.
fn samples_seen(d: &Daemon) -> Option<u64> {
    d.model().and_then(|m| m["samples_seen"].as_u64())
}

/// A regression test: the 14-byte request `1 16777215:1` took the daemon from 6 MB to ~800 MB
/// resident, because every dense per-feature vector (z, w, the certificate's w~) was written over
/// its whole length, the largest index seen. Now the room is lazily zeroed and stays unbacked.
/// And a second one: the mirror learner's decay stamps were filled over the new room (+150 MB for one
/// mirror learner, +900 MB for a `lambda = "auto"` mirror learner's grid); they are lazily zeroed too.
#[test]
fn a_large_feature_index_costs_little_resident_memory() {
    let learners = [
        "",
        "k = 2\nsolver = \"mirror\"",
        "k = 2\nsolver = \"mirror\"\nloss = \"logistic\"\nlambda = \"auto\"",
        "k = 2\nsolver = \"smidas\"\nl1 = 0.001",
    ];
    for learner in learners {
        let dir = tempfile::tempdir().unwrap();
        let (config, data_dir) = (
            test_config(dir.path(), learner, ""),
            dir.path().join("data"),
        );
        let args: Vec<&str> = if learner.is_empty() {
            Vec::new() // the embedded defaults
        } else {
            serve_args(&config, &data_dir).to_vec()
        };
        let d = Daemon::start(&args);
        let before = d.rss_kib();
        let (status, body, _) = d.post("/v1/samples", "text/plain", "1 16777215:1");
        assert_eq!(status, 202, "{learner}: {body}");
        d.wait_for("the sample learned", |d| {
            samples_seen(d).filter(|&n| n == 1)
        });
        if learner.is_empty() {
            // SDIHT goes idle on an unchanged window; its settled model holds the sample's feature.
            let m = d.wait_until_settled();
            assert_eq!(m["support"], serde_json::json!([16777215]), "{m}");
        } else {
            // A published model that has seen the sample was certified after the insert, so every
            // vector is already sized. The per-sample learners may keep stepping and publishing over a
            // one-sample window (they never settle); a second of it (20 snapshots at 50 ms) lets any
            // growth of their steps show before the measurement.
            std::thread::sleep(Duration::from_secs(1));
        }
        assert_eq!(
            d.post("/v1/predict", "text/plain", "16777215:1").0,
            200,
            "{learner}: predict at the largest index"
        );
        let grown = d.rss_kib().saturating_sub(before);
        assert!(
            grown < 50 * 1024,
            "{learner}: resident memory grew by {grown} KiB (before {before} KiB)"
        );
    }
}

/// A regression test: `1e300 1:1e300` was accepted; from then on the certificate and the progressive
/// loss were null/inf, the weights reached 1e288, and the next restart failed reading the checkpoint.
/// Now every format refuses a magnitude above `ingest.max_abs_value` naming the line, and nothing
/// enters.
#[test]
fn magnitudes_above_the_limit_get_400_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let config = test_config(dir.path(), "k = 2", "");
    let args = serve_args(&config, &data_dir);
    let d = Daemon::start(&args);
    assert_eq!(d.post("/v1/samples", "text/plain", "1 1:1\n2 2:1").0, 202);
    d.wait_for("two samples", |d| samples_seen(d).filter(|&n| n == 2));
    let before = d.wait_until_settled();
    let bodies = [
        ("text/plain", "1 1:1\n1e300 1:1e300\n".to_string(), 2),
        ("text/plain", "1 1:1\n# c\n1 1:1 3:-2e6\n".to_string(), 3),
        ("text/plain", "1e7 1:1\n".to_string(), 1),
        (
            "application/x-ndjson",
            "{\"label\": 1, \"indices\": [1], \"values\": [1e300]}\n".to_string(),
            1,
        ),
        (
            "application/json",
            "[{\"label\": 1, \"indices\": [1], \"values\": [1]}, {\"label\": 1, \"indices\": [1], \"values\": [1], \"weight\": 1e12}]".to_string(),
            2,
        ),
        (
            "application/x-ndjson",
            "{\"label\": 1, \"features\": {\"a\": 1}}\n{\"label\": 1, \"features\": {\"b\": -1e9}}\n"
                .to_string(),
            2,
        ),
    ];
    for (content_type, body, line) in bodies {
        let (status, reply, _) = d.post("/v1/samples", content_type, body.clone());
        assert_eq!(status, 400, "{body}: {reply}");
        assert_eq!(reply["line"], line, "{body}: {reply}");
        let message = reply["error"].as_str().unwrap();
        assert!(message.contains("ingest.max_abs_value"), "{message}");
    }
    let (status, reply, _) = d.post("/v1/predict", "text/plain", "1:1e300");
    assert_eq!(status, 400, "{reply}");
    assert_eq!(reply["line"], 1);
    assert_eq!(
        d.metric("thresher_samples_ingested_total{source=\"http\"}"),
        2.0
    );
    assert_eq!(d.metric("thresher_feature_names"), 0.0, "no name entered");
    let after = d.model().unwrap();
    assert_eq!(after["version"], before["version"], "state unchanged");
    assert_eq!(after["samples_seen"], 2);
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
    let d = Daemon::start(&args);
    assert_eq!(d.model().unwrap()["version"], before["version"], "restores");
}

/// stdin and `fit`/`predict` files hold their input to the same bound and name the line.
#[test]
fn stdin_and_files_refuse_magnitudes_above_the_limit() {
    let d = Daemon::start_with_stdin(&["--stdin"], "1 1:1\n1e300 1:1e300\n2 2:1\n");
    d.wait_for("the two good lines", |d| {
        samples_seen(d).filter(|&n| n == 2)
    });
    d.wait_for("the bad line logged", |d| {
        d.log().contains("line=2").then_some(())
    });
    assert!(d.log().contains("ingest.max_abs_value"), "{}", d.log());
    assert_eq!(
        d.metric("thresher_samples_rejected_total{reason=\"invalid\"}"),
        1.0
    );

    let files = FitFiles::with_data("big.svm", "1 1:1\n-1 2:1\n3 1:2e6\n");
    let out = thresher(&[
        "fit",
        &files.data,
        "--loss",
        "squared",
        "-k",
        "1",
        "--lambda",
        "0.1",
    ]);
    assert_failed_with(&out, "big.svm:3");
    assert_failed_with(&out, "ingest.max_abs_value");
}

/// A regression test for the learners themselves: with the ingest bound raised to let `1e300 1:1e300`
/// in, its squares overflow inside the learner. The fault is counted, the non-finite model is never
/// published (the previous one stays), the learner drops the sample and goes on, and the checkpoint
/// restores. On the old code the model served `null` and the checkpoint could not be read back.
#[test]
fn a_numeric_fault_in_a_learner_is_caught_and_never_published() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let config = test_config(dir.path(), "k = 2", "[ingest]\nmax_abs_value = 1e300\n");
    let args = serve_args(&config, &data_dir);
    let d = Daemon::start(&args);
    let good: String = (0..50)
        .map(|i| format!("{} 1:{} 2:1\n", 2 * (i % 5), i % 5))
        .collect();
    assert_eq!(d.post("/v1/samples", "text/plain", good.clone()).0, 202);
    d.wait_for("50 samples", |d| samples_seen(d).filter(|&n| n == 50));
    let before = d.wait_until_settled();
    let (status, body, _) = d.post("/v1/samples", "text/plain", "1e300 1:1e300");
    assert_eq!(status, 202, "{body}");
    d.wait_for("the fault counted", |d| {
        (d.metric("thresher_numeric_faults_total{learner=\"primary\"}") >= 1.0).then_some(())
    });
    assert!(d.log().contains("non-finite"), "{}", d.log());
    assert_eq!(d.post("/v1/samples", "text/plain", good).0, 202);
    d.wait_for("101 samples", |d| samples_seen(d).filter(|&n| n == 101));
    let after = d.wait_until_settled();
    assert_finite_model(&after);
    assert!(after["version"].as_u64() > before["version"].as_u64());
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
    let d = Daemon::start(&args);
    let restored = d.model().unwrap();
    assert_eq!(
        restored["version"], after["version"],
        "the checkpoint restores"
    );
    assert_finite_model(&restored);
}

/// Extreme but finite values — at the limit, tiny, and many large-magnitude samples — keep the
/// published model finite, and the checkpoint restores after a restart.
#[test]
fn extreme_finite_values_keep_the_model_finite_and_restore() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    for (loss, labels) in [("squared", [1e6, -1e6]), ("logistic", [1.0, -1.0])] {
        let config = test_config(dir.path(), &format!("k = 3\nloss = \"{loss}\""), "");
        let args = serve_args(&config, &data_dir);
        let mut body = String::new();
        for i in 0..400u32 {
            let y = labels[(i % 2) as usize];
            let big = if i % 3 == 0 { 1e6 } else { -999_999.5 };
            body.push_str(&format!(
                "{y} 1:{big} 2:1e-300 {}:{} 9:4.9e-324\n",
                3 + i % 5,
                f64::from(i) * 2500.0
            ));
        }
        let fresh = [&args[..], &["--fresh"]].concat();
        let d = Daemon::start(&fresh);
        let (status, reply, _) = d.post("/v1/samples", "text/plain", body);
        assert_eq!(status, 202, "{reply}");
        d.wait_for("400 samples", |d| samples_seen(d).filter(|&n| n == 400));
        let m = d.wait_until_settled();
        assert_finite_model(&m);
        assert_eq!(
            d.metric("thresher_numeric_faults_total{learner=\"primary\"}"),
            0.0
        );
        let (status, log) = d.terminate();
        assert!(status.success(), "{loss}: {log}");
        let d = Daemon::start(&args);
        let restored = d.model().expect("restored");
        assert_eq!(restored["version"], m["version"], "{loss}");
        assert_finite_model(&restored);
        let (status, log) = d.terminate();
        assert!(status.success(), "{loss}: {log}");
    }
}

/// A regression test: a 20 MB feature name was accepted (and each such request held ~48 MB for
/// good), one request could register any number of names, and the dictionary never said it was
/// full. Now each limit is a 400 naming the line, nothing from the request is registered, and the
/// dictionary's size and refusals are metrics.
#[test]
fn feature_name_limits_are_enforced_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(
        dir.path(),
        "k = 2",
        "[ingest]\nmax_named_features = 5\nmax_feature_name_bytes = 16\nmax_new_names_per_request = 3\n",
    );
    let d = Daemon::start(&["--config", config.to_str().unwrap()]);
    let sample = |names: &[&str]| {
        let features: serde_json::Map<String, Value> = names
            .iter()
            .map(|n| (n.to_string(), Value::from(1.0)))
            .collect();
        format!(
            "{}\n",
            serde_json::json!({"label": 1, "features": features})
        )
    };
    let long = "x".repeat(20 << 20);
    let (status, reply, _) = d.post(
        "/v1/samples",
        "application/x-ndjson",
        sample(&["a"]) + &sample(&[&long]),
    );
    assert_eq!(status, 400);
    assert_eq!(reply["line"], 2, "{}", reply["error"]);
    assert!(reply["error"]
        .as_str()
        .unwrap()
        .contains("max_feature_name_bytes"));
    let (status, reply, _) = d.post(
        "/v1/samples",
        "application/x-ndjson",
        sample(&["a", "b"]) + &sample(&["c", "d"]),
    );
    assert_eq!(status, 400);
    assert_eq!(reply["line"], 2);
    assert!(reply["error"]
        .as_str()
        .unwrap()
        .contains("max_new_names_per_request"));
    assert_eq!(
        d.metric("thresher_feature_names"),
        0.0,
        "nothing registered"
    );
    assert_eq!(
        d.post(
            "/v1/samples",
            "application/x-ndjson",
            sample(&["a", "b", "c"])
        )
        .0,
        202
    );
    assert_eq!(
        d.post("/v1/samples", "application/x-ndjson", sample(&["d", "e"]))
            .0,
        202
    );
    let (status, reply, _) = d.post("/v1/samples", "application/x-ndjson", sample(&["a", "f"]));
    assert_eq!(status, 400);
    assert!(
        reply["error"]
            .as_str()
            .unwrap()
            .contains("dictionary is full"),
        "{reply}"
    );
    // Known names still go in when the dictionary is full.
    assert_eq!(
        d.post("/v1/samples", "application/x-ndjson", sample(&["a", "e"]))
            .0,
        202
    );
    assert_eq!(d.metric("thresher_feature_names"), 5.0);
    assert_eq!(d.metric("thresher_feature_names_refused_total"), 3.0);
}

/// A regression test: after a learner was renamed in the config, the daemon started fresh without a
/// word, and its shutdown checkpoint replaced the old one. Now the start is refused naming the
/// learners of both, and the checkpoint is left as it was, unless `--drop-learner` or `--fresh`.
#[test]
fn a_checkpoint_with_other_learners_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let config = test_config(dir.path(), "k = 2", "");
    let args = serve_args(&config, &data_dir);
    let d = Daemon::start(&args);
    assert_eq!(d.post("/v1/samples", "text/plain", "1 1:1\n2 2:1\n").0, 202);
    d.wait_for("two samples", |d| samples_seen(d).filter(|&n| n == 2));
    d.wait_until_settled();
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
    let file = data_dir.join("thresher.ckpt");
    let saved = std::fs::read(&file).unwrap();

    let renamed = test_config(dir.path(), "name = \"main\"\nk = 2", "");
    let renamed_args = serve_args(&renamed, &data_dir);
    let out = thresher(&[&["serve", "--listen", "127.0.0.1:0"][..], &renamed_args].concat());
    assert_failed_with(&out, "[\"primary\"]");
    assert_failed_with(&out, "[\"main\"]");
    assert_failed_with(&out, "--drop-learner");
    assert_eq!(
        std::fs::read(&file).unwrap(),
        saved,
        "the checkpoint is untouched"
    );

    let out = thresher(
        &[
            &["serve", "--listen", "127.0.0.1:0"][..],
            &renamed_args,
            &["--drop-learner", "other"],
        ]
        .concat(),
    );
    assert_failed_with(&out, "would be lost");

    let dropping = [&renamed_args[..], &["--drop-learner", "primary"]].concat();
    let d = Daemon::start(&dropping);
    assert!(d.log().contains("discarded"), "{}", d.log());
    assert_eq!(d.get("/v1/model").0, 503, "main starts empty");
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
    // The dropped learner is gone from the checkpoint: the renamed config now starts as it is.
    let d = Daemon::start(&renamed_args);
    assert_eq!(d.get("/healthz").0, 200);
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
}

/// Restoring a checkpoint of a larger window keeps its newest `window.capacity` samples, logged.
#[test]
fn a_larger_checkpointed_window_is_trimmed() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let config = test_config(dir.path(), "k = 2", "");
    let args = serve_args(&config, &data_dir);
    let d = Daemon::start(&args);
    let body: String = (0..300)
        .map(|i| format!("{} {}:1\n", i % 3, 1 + i % 7))
        .collect();
    assert_eq!(d.post("/v1/samples", "text/plain", body).0, 202);
    d.wait_for("300 samples", |d| samples_seen(d).filter(|&n| n == 300));
    d.wait_until_settled();
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");

    let small = dir.path().join("small.toml");
    std::fs::write(
        &small,
        "[snapshot]\ninterval_ms = 50\n[window]\ncapacity = 100\n[[learner]]\nk = 2\n",
    )
    .unwrap();
    let d = Daemon::start(&serve_args(&small, &data_dir));
    let log = d.log();
    assert!(log.contains("oldest samples dropped"), "{log}");
    assert!(log.contains("dropped=200"), "{log}");
    d.wait_for("the trimmed window published", |d| {
        (d.metric("thresher_window_samples{learner=\"primary\"}") == 100.0).then_some(())
    });
}

/// The data directory is created (parents included) and test-written before the port is bound: one
/// that cannot be written stops the start with its name even when the port is taken too.
#[test]
fn the_data_dir_is_created_and_checked_before_listening() {
    let dir = tempfile::tempdir().unwrap();
    let nested = dir.path().join("a/b/c");
    let d = Daemon::start(&["--data-dir", nested.to_str().unwrap()]);
    assert!(nested.is_dir());
    drop(d);

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "not a directory").unwrap();
    let under_a_file = blocker.join("data");
    let out = thresher(&[
        "serve",
        "--listen",
        &addr,
        "--data-dir",
        under_a_file.to_str().unwrap(),
    ]);
    assert_failed_with(&out, under_a_file.to_str().unwrap());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("cannot listen"));
}

/// A regression test: an idle daemon rewrote the same checkpoint every `checkpoint.interval_s`. Now
/// an unchanged state is not rewritten (the file's mtime stays; `thresher_checkpoints_total` counts
/// `unchanged`), and a restart that changes nothing does not rewrite it either.
#[test]
fn an_idle_daemon_does_not_rewrite_its_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let config = test_config(dir.path(), "k = 2", "[checkpoint]\ninterval_s = 1\n");
    let args = serve_args(&config, &data_dir);
    let d = Daemon::start(&args);
    assert_eq!(d.post("/v1/samples", "text/plain", "1 1:1\n2 2:1\n").0, 202);
    d.wait_for("two samples", |d| samples_seen(d).filter(|&n| n == 2));
    d.wait_until_settled();
    let written = |d: &Daemon| d.metric("thresher_checkpoints_total{outcome=\"written\"}");
    let unchanged = |d: &Daemon| d.metric("thresher_checkpoints_total{outcome=\"unchanged\"}");
    d.wait_for("a checkpoint of the settled state", |d| {
        (written(d) >= 1.0 && unchanged(d) >= 1.0).then_some(())
    });
    let file = data_dir.join("thresher.ckpt");
    let mtime =
        |f: &std::path::Path| -> SystemTime { std::fs::metadata(f).unwrap().modified().unwrap() };
    let (count, at) = (written(&d), mtime(&file));
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(written(&d), count, "idle: nothing written");
    assert!(unchanged(&d) >= 3.0);
    assert_eq!(mtime(&file), at);
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
    assert!(log.contains("nothing changed"), "{log}");
    assert_eq!(mtime(&file), at, "nor at shutdown");

    let d = Daemon::start(&args);
    d.wait_until_settled();
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
    assert_eq!(mtime(&file), at, "nor after a restart that changed nothing");
}
