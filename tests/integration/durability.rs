//! Durability of the real daemon: acknowledged samples survive kill -9 (the write-ahead log), one
//! owner per data directory, SIGHUP as a graceful stop with a final checkpoint, and a failing
//! checkpoint reported by `/readyz` and a metric with its temporary file removed.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// `rows` LIBSVM lines, label ±1 on feature 0, a few features each.
fn body(rows: usize, offset: usize) -> String {
    (0..rows)
        .map(|i| {
            let r = i + offset;
            let y = if r.is_multiple_of(2) { 1 } else { -1 };
            format!(
                "{y} 1:{} {}:0.5 {}:0.25\n",
                y as f64 * 0.8,
                2 + r % 7,
                10 + r % 5
            )
        })
        .collect()
}

/// Posts `batches` bodies of `rows` samples; each must be acknowledged with 202. Returns the samples
/// acknowledged.
fn post_acknowledged(d: &Daemon, batches: usize, rows: usize, offset: usize) -> u64 {
    for b in 0..batches {
        let (status, answer, _) =
            d.post("/v1/samples", "text/plain", body(rows, offset + b * rows));
        assert_eq!(status, 202, "{answer}");
    }
    (batches * rows) as u64
}

/// kill -9, then waits for the process to be gone.
fn kill9(d: Daemon) {
    let pid = d.pid().to_string();
    Command::new("kill").args(["-KILL", &pid]).status().unwrap();
    let (status, _) = d.wait_exit("exit on SIGKILL");
    assert!(!status.success());
}

/// Waits until the restored primary has seen `n` samples, then until it settles, and returns its
/// `samples_seen` then.
fn seen_after_settling(d: &Daemon, n: u64) -> u64 {
    d.wait_for(&format!("samples_seen >= {n}"), |d| {
        samples_seen(d).filter(|&s| s >= n)
    });
    d.wait_until_settled()["samples_seen"].as_u64().unwrap()
}

fn config(dir: &Path, extra: &str) -> std::path::PathBuf {
    test_config(dir, "k = 3\nlambda = 0.01", extra)
}

/// Regression: a 202 only meant "queued", so a kill -9 lost every sample accepted since the last
/// checkpoint. With the default `durability.wal = "batch"`, every acknowledged sample is restored
/// after kill -9, none twice: with no checkpoint yet, after one covering part of them, and after a
/// restart that itself replayed the log.
#[test]
fn kill9_after_202_restores_every_acknowledged_sample_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cfg = config(dir.path(), "[checkpoint]\ninterval_s = 3600");
    let args = serve_args(&cfg, &data);
    let d = Daemon::start(&args);
    let mut acked = post_acknowledged(&d, 20, 50, 0);
    kill9(d);
    let d = Daemon::start(&args);
    assert_eq!(
        seen_after_settling(&d, acked),
        acked,
        "restored exactly once"
    );
    assert!(d.metric("thresher_wal_replayed_records_total") >= 20.0);
    // More samples after the replay; kill -9 again: the replayed and the new batches both come back.
    acked += post_acknowledged(&d, 10, 50, 1000);
    kill9(d);
    let d = Daemon::start(&args);
    assert_eq!(seen_after_settling(&d, acked), acked);
    kill9(d);

    // With checkpoints every second: some batches are in a checkpoint, some only in the log.
    let cfg = config(dir.path(), "[checkpoint]\ninterval_s = 1");
    let data2 = dir.path().join("data2");
    let args = serve_args(&cfg, &data2);
    let d = Daemon::start(&args);
    let mut acked = post_acknowledged(&d, 10, 50, 0);
    d.wait_for("a checkpoint written", |d| {
        (d.metric("thresher_checkpoints_total{outcome=\"written\"}") >= 1.0).then_some(())
    });
    acked += post_acknowledged(&d, 10, 50, 500);
    kill9(d);
    let d = Daemon::start(&args);
    assert_eq!(
        seen_after_settling(&d, acked),
        acked,
        "checkpoint + log, none twice"
    );
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
}

/// The log is bounded on disk: at `durability.wal_max_bytes` a batch is refused with 503 and counted,
/// not acknowledged.
#[test]
fn a_full_log_answers_503_and_counts_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cfg = config(
        dir.path(),
        "[checkpoint]\ninterval_s = 3600\n[durability]\nwal_max_bytes = 1048576\n[ingest]\nqueue_samples = 1000000",
    );
    let d = Daemon::start(&serve_args(&cfg, &data));
    let refused = (0..100).find_map(|i| {
        let (status, answer, headers) = d.post("/v1/samples", "text/plain", body(5000, i * 5000));
        (status == 503 && answer["error"].as_str()?.contains("write-ahead log"))
            .then_some((answer, headers))
    });
    let (answer, headers) = refused.expect("the log filled up");
    assert!(headers.contains_key("retry-after"), "{answer}");
    assert!(d.metric("thresher_samples_rejected_total{reason=\"wal_full\"}") >= 5000.0);
    assert!(d.metric("thresher_wal_bytes") <= 1_048_576.0);
}

/// Regression: two daemons started on one data directory and overwrote each other's checkpoint. The
/// second is refused at start, naming the first one's pid.
#[test]
fn a_second_daemon_on_the_same_data_dir_is_refused_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cfg = config(dir.path(), "");
    let args = serve_args(&cfg, &data);
    let first = Daemon::start(&args);
    let mut second = Command::new(env!("CARGO_BIN_EXE_thresher"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = second.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > WAIT {
            let _ = second.kill();
            panic!("the second daemon on the same data directory was not refused");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut second.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success());
    assert!(
        err.contains("in use by another thresher") && err.contains(&format!("pid {}", first.pid())),
        "{err}"
    );
    // The first is untouched and still serves.
    assert_eq!(first.get("/healthz").0, 200);
    let (status, log) = first.terminate();
    assert!(status.success(), "{log}");
    // Once it has stopped, the directory can be used again.
    let third = Daemon::start(&args);
    third.terminate();
}

/// Regression: SIGHUP ended the daemon at once (exit 129, no final checkpoint). It is now a graceful
/// stop: exit 0, the final checkpoint written, and a restart restores the samples.
#[test]
fn sighup_is_a_graceful_stop_with_a_final_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cfg = config(
        dir.path(),
        "[checkpoint]\ninterval_s = 3600\n[durability]\nwal = \"off\"",
    );
    let args = serve_args(&cfg, &data);
    let d = Daemon::start(&args);
    let acked = post_acknowledged(&d, 5, 40, 0);
    d.wait_for("the samples learned", |d| {
        samples_seen(d).filter(|&s| s >= acked)
    });
    let pid = d.pid().to_string();
    Command::new("kill").args(["-HUP", &pid]).status().unwrap();
    let (status, log) = d.wait_exit("stop on SIGHUP");
    assert!(status.success(), "{status:?}\n{log}");
    assert!(
        log.contains("SIGHUP") && log.contains("final checkpoint written"),
        "{log}"
    );
    assert!(data.join("thresher.ckpt").is_file());
    let d = Daemon::start(&args);
    assert_eq!(
        samples_seen(&d),
        Some(acked),
        "restored from the final checkpoint"
    );
}

/// Regression: a failing checkpoint left `/readyz` at 200 and its temporary file behind. Replacing the
/// checkpoint by a directory makes every write fail at the rename: `/readyz` turns 503 naming the
/// reason, `thresher_checkpoints_total{outcome="failed"}` counts it, no temporary file is left; once
/// writes succeed again the daemon is ready again.
#[test]
fn a_failing_checkpoint_is_not_ready_and_leaves_no_temporary() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cfg = config(dir.path(), "[checkpoint]\ninterval_s = 1");
    let d = Daemon::start(&serve_args(&cfg, &data));
    post_acknowledged(&d, 2, 50, 0);
    d.wait_for("ready", |d| (d.get("/readyz").0 == 200).then_some(()));
    let ckpt = data.join("thresher.ckpt");
    // Taken by a directory (the checkpoint thread may write the file meanwhile: try again).
    d.wait_for("the checkpoint path replaced by a directory", |_| {
        let _ = std::fs::remove_file(&ckpt);
        std::fs::create_dir(&ckpt).ok()
    });
    let mut offset = 100;
    let reason = d.wait_for("/readyz to fail", |d| {
        // Changes to checkpoint (an unchanged state is not rewritten).
        post_acknowledged(d, 1, 10, offset);
        offset += 10;
        let (status, text) = d.get("/readyz");
        (status == 503 && text.contains("checkpoint")).then_some(text)
    });
    assert!(reason.contains("thresher.ckpt"), "{reason}");
    assert!(d.metric("thresher_checkpoints_total{outcome=\"failed\"}") >= 1.0);
    std::fs::remove_dir(&ckpt).unwrap();
    d.wait_for("/readyz to recover", |d| {
        post_acknowledged(d, 1, 10, offset);
        offset += 10;
        (d.get("/readyz").0 == 200).then_some(())
    });
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
    // Every failed write removed its temporary file (each had a name of its own).
    let leftovers: Vec<String> = std::fs::read_dir(&data)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
