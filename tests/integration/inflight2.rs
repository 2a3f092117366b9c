//! What a refused request costs and changes, on the real binary: a refused body is counted where it
//! lies (no copy of it), and a refusal leaves the daemon's state as it was.

use crate::common::{test_config, Daemon};

/// A daemon on a small config: `extra` as in [`test_config`].
fn daemon(extra: &str) -> (tempfile::TempDir, Daemon) {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(dir.path(), "k = 2", extra);
    let d = Daemon::start(&["--config", config.to_str().unwrap()]);
    (dir, d)
}

/// The daemon's peak resident memory so far (`VmHWM`), KiB.
fn peak_rss_kib(d: &Daemon) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", d.pid())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM in {status}"))
}

/// A 32 MiB body refused at its first line (not UTF-8) has its samples counted for the rejection
/// counter over the chunks it arrived in: the daemon's peak memory grows by about the body (its
/// chunks, held by `server.inflight_bytes`), not by the body and a joined copy of it. (Under parallel
/// 32 MiB uploads that copy was made on every parser thread at once, for every body refused by a full
/// sample budget, and passed the documented in-flight bound by ~95 MiB.)
#[test]
fn a_refused_body_is_counted_without_a_copy() {
    const BODY: usize = 32 << 20;
    const LINE: &[u8] = b"1 1:0.5 2:0.25 3:0.125 4:0.0625 5:0.03125 6:0.015625 7:0.0078125\n";
    let (_dir, d) = daemon("");
    let mut body = Vec::with_capacity(BODY);
    body.extend_from_slice(b"\xff\n");
    let mut lines = 1;
    while body.len() + LINE.len() <= BODY {
        body.extend_from_slice(LINE);
        lines += 1;
    }
    let before = peak_rss_kib(&d);
    // A 32 MiB upload may take longer than the shared client's timeout on a debug build.
    let client = reqwest::blocking::Client::builder()
        .timeout(crate::common::WAIT)
        .build()
        .unwrap();
    let r = client
        .post(format!("{}/v1/samples", d.base))
        .header("content-type", "text/plain")
        .body(body)
        .send()
        .unwrap();
    let status = r.status().as_u16();
    let answer = r.text().unwrap();
    assert_eq!(status, 400, "{answer}");
    assert!(answer.contains("\"line\":1"), "{answer}");
    // Every line of the body is a sample refused (none is blank or a comment).
    let rejected = d.metric("thresher_samples_rejected_total{reason=\"invalid\"}");
    assert_eq!(rejected, lines as f64);
    let grew_mib = (peak_rss_kib(&d).saturating_sub(before)) as f64 / 1024.0;
    assert!(
        grew_mib < 48.0,
        "peak RSS grew by {grew_mib:.0} MiB for a 32 MiB body: a copy of the body was made"
    );
}
