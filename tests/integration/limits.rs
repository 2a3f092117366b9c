//! Resource and number limits through the real daemon: finite numbers only (stdin and files, extreme
//! finite values through a restart) and checkpoint safety (window trimming, the data directory). The
//! limits added for a fixed bug are tested in `regression`.

use crate::common::{
    assert_failed_with, assert_finite_model, samples_seen, serve_args, test_config, thresher,
    Daemon, FitFiles,
};

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
