//! The status page (`GET /`) in a real browser: headless Chromium loads it from a daemon fed a seeded
//! stream, and the test reads the DOM the page's script built — the gap chart holds one point per
//! published snapshot (as `/v1/history` lists them) and the top-weights table names the true
//! features — then saves a screenshot under `target/`. With tokens configured the page asks for one.
//!
//! The browser runs as `chromium --headless --dump-dom --virtual-time-budget=MS`: virtual time does not
//! advance while a request is pending, so the dump is taken after the page's requests to the daemon
//! have been answered and drawn, with no sleeps in the test and no driver crate. Chromium missing is a
//! failure (`.ci/run` installs Debian's `chromium`), not a skip.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use thresher::synth;

use crate::common::{test_config, Daemon};

/// Virtual milliseconds the page runs before the DOM is dumped: many refreshes at 100 ms.
const BUDGET_MS: &str = "2000";
/// Wall-clock bound on one browser run.
const BROWSER_WAIT: Duration = Duration::from_secs(90);

/// The Chromium executable: the first of the usual names that runs.
fn chromium() -> &'static str {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|name| {
            Command::new(name)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .expect(
            "Chromium is needed for the status page test: apt-get install chromium (.ci/run does)",
        )
}

/// Runs headless Chromium on `url` with `args` added; returns its stdout.
fn browse(url: &str, args: &[&str]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            // The test runs as root in CI, where Chromium's sandbox cannot start.
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
            &format!("--user-data-dir={}", profile.path().display()),
            &format!("--virtual-time-budget={BUDGET_MS}"),
        ])
        .args(args)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > BROWSER_WAIT {
            let _ = child.kill();
            panic!("chromium did not finish within {BROWSER_WAIT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The element of `dom` that starts with `open` (up to its first `>`), through its `</tag>`, parsed as
/// XML (what Chromium serialises of an SVG or a table is well-formed).
fn element(dom: &str, open: &str, tag: &str) -> String {
    let start = dom
        .find(open)
        .unwrap_or_else(|| panic!("no {open} in the page:\n{dom}"));
    let end = dom[start..].find(&format!("</{tag}>")).unwrap() + start + tag.len() + 3;
    dom[start..end].to_string()
}

/// Samples of `problem` with named features (`f3` for index 3), as a JSON array body.
fn named(samples: &[thresher::sample::Sample]) -> String {
    let objects: Vec<Value> = samples
        .iter()
        .map(|s| {
            let features: serde_json::Map<String, Value> = s
                .indices
                .iter()
                .zip(&s.values)
                .map(|(j, v)| (format!("f{j}"), json!(v)))
                .collect();
            json!({"label": s.label, "features": features})
        })
        .collect();
    serde_json::to_string(&objects).unwrap()
}

#[test]
fn the_status_page_draws_every_published_snapshot_and_the_true_features() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(dir.path(), "k = 5\nlambda = 0.01", "");
    let d = Daemon::start(&["--config", config.to_str().unwrap()]);
    let problem = synth::sparse_stream(1500, 40, 5, 8, 0.05, false, 21);
    for chunk in problem.samples.chunks(500) {
        let (status, body, _) = d.post("/v1/samples", "application/json", named(chunk));
        assert_eq!(status, 202, "{body}");
        std::thread::sleep(Duration::from_millis(150));
    }
    let settled = d.wait_until_settled();
    let version = settled["version"].as_u64().unwrap();
    assert!(version >= 3, "a few publications: {settled}");

    let url = format!("{}/", d.base);
    let dom = browse(&url, &["--dump-dom"]);
    assert!(
        dom.contains("data-ready=\"1\""),
        "the page never drew:\n{dom}"
    );

    // The gap chart: one point per published snapshot, oldest first, up to the version it shows.
    let chart = element(&dom, "<svg class=\"chart\" data-chart=\"objective\"", "svg");
    let chart = roxmltree::Document::parse(&chart).expect("the chart is well-formed");
    let shown: u64 = chart
        .root_element()
        .attribute("data-version")
        .unwrap()
        .parse()
        .unwrap();
    let gap = chart
        .descendants()
        .find(|n| n.attribute("data-series") == Some("gap"))
        .expect("a gap series");
    let drawn = gap.attribute("points").unwrap().split_whitespace().count();
    assert_eq!(
        gap.attribute("data-points"),
        Some(drawn.to_string().as_str())
    );
    let (status, history) = d.get("/v1/history?learner=primary");
    assert_eq!(status, 200);
    let history: Value = serde_json::from_str(&history).unwrap();
    let versions: Vec<u64> = history["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["version"].as_u64().unwrap())
        .filter(|v| *v <= shown)
        .collect();
    assert_eq!(shown, version, "the page shows the settled version");
    assert_eq!(
        versions,
        (1..=version).collect::<Vec<_>>(),
        "every publication"
    );
    assert_eq!(
        drawn,
        versions.len(),
        "one gap point per published snapshot"
    );
    for series in ["primal", "dual"] {
        assert!(chart
            .descendants()
            .any(|n| n.attribute("data-series") == Some(series)
                && n.attribute("data-points") == Some(drawn.to_string().as_str())));
    }

    // The top weights, by name: the planted support.
    let table = element(
        &dom,
        "<table class=\"weights\" data-learner=\"primary\"",
        "table",
    );
    let table = roxmltree::Document::parse(&table).expect("the table is well-formed");
    let listed: BTreeSet<String> = table
        .descendants()
        .filter(|n| n.attribute("class") == Some("feature"))
        .filter_map(|n| n.text().map(str::to_string))
        .collect();
    let truth: BTreeSet<String> = problem
        .true_support()
        .iter()
        .map(|j| format!("f{j}"))
        .collect();
    assert_eq!(listed, truth, "{dom}");
    assert!(dom.contains(&format!("version <b>{version}</b>")), "{dom}");

    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("status-page.png");
    let _ = std::fs::remove_file(&shot);
    browse(
        &url,
        &[
            "--window-size=1280,1000",
            &format!("--screenshot={}", shot.display()),
        ],
    );
    let png = std::fs::read(&shot).expect("the screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
}

#[test]
fn with_tokens_the_page_loads_without_one_and_asks_for_a_read_token() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(dir.path(), "k = 2", "");
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "read status-page-read-token-0123\n").unwrap();
    let d = Daemon::start(&[
        "--config",
        config.to_str().unwrap(),
        "--auth-tokens-file",
        tokens.to_str().unwrap(),
    ]);
    let refused = |d: &Daemon| {
        let r = d
            .client
            .get(format!("{}/metrics", d.base))
            .bearer_auth("status-page-read-token-0123")
            .send()
            .unwrap()
            .text()
            .unwrap();
        r.lines()
            .find_map(|l| l.strip_prefix("thresher_http_auth_refused_total{status=\"401\"} "))
            .unwrap()
            .parse::<f64>()
            .unwrap()
    };
    let before = refused(&d);
    let dom = browse(&format!("{}/", d.base), &["--dump-dom"]);
    let form = element(&dom, "<form id=\"auth\"", "form");
    assert!(!form.contains("hidden"), "the token form shows: {form}");
    let status = element(&dom, "<span id=\"status\"", "span");
    assert!(status.contains(">a read token is needed<"), "{status}");
    // (The script's own text names the attribute: look for it set on the body.)
    assert!(!dom.contains("data-ready=\"1\""), "no data without a token");
    assert!(
        !dom.contains("<section class=\"learner\""),
        "no learner drawn"
    );
    assert!(
        refused(&d) > before,
        "the page asked for data and was refused"
    );
}
