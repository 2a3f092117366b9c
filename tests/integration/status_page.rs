//! The status page (`GET /`) in a real browser: headless Chromium loads it from a daemon fed a seeded
//! stream, and the test reads the DOM the page's script built — the gap chart holds one point per
//! published snapshot (as `/v1/history` lists them) and the top-weights table names the true
//! features — then saves a screenshot under `target/`. With tokens configured the page asks for one,
//! keeps it for the tab and sends it in a header only.
//!
//! Two ways to drive Chromium, no driver crate: a page that only has to be read runs as `chromium
//! --headless --dump-dom --virtual-time-budget=MS` (virtual time does not advance while a request is
//! pending, so the dump is taken after the page's requests to the daemon were answered and drawn, with
//! no sleeps); the token test has to type, so it speaks the DevTools protocol over
//! `--remote-debugging-pipe` ([`Devtools`]). Chromium missing is a failure (`.ci/run` installs Debian's
//! `chromium`), not a skip.

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
pub(crate) fn browse(url: &str, args: &[&str]) -> String {
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
    // Read while it runs: a page's DOM can be larger than the pipe's buffer, and a full pipe would
    // stop Chromium before it exits.
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut text);
            }
            text
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > BROWSER_WAIT {
            let _ = child.kill();
            panic!("chromium did not finish within {BROWSER_WAIT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    assert!(
        status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&stderr)
    );
    String::from_utf8(stdout).unwrap()
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
    let mut listed: BTreeSet<String> = table
        .descendants()
        .filter(|n| n.attribute("class") == Some("feature"))
        .filter_map(|n| n.text().map(str::to_string))
        .collect();
    // Squared loss fits an intercept by default: it has its own row, after the weights.
    assert_eq!(
        listed.remove("(intercept)"),
        settled["intercept"].as_f64().is_some_and(|b| b != 0.0),
        "{dom}"
    );
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

/// A headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: it
/// reads commands on fd 3 and writes replies on fd 4, each a JSON message ending in a NUL byte). `sh`
/// moves the child's stdin and stdout onto those descriptors, so no driver crate and no `unsafe` are
/// needed. One page, attached in flat mode; killed on drop.
struct Devtools {
    child: std::process::Child,
    commands: std::process::ChildStdin,
    replies: std::sync::mpsc::Receiver<Value>,
    next_id: u64,
    /// The DevTools id of the page target this client is attached to (empty before attaching).
    attached: String,
    _profile: tempfile::TempDir,
}

impl Devtools {
    fn open(url: &str) -> Devtools {
        let profile = tempfile::tempdir().unwrap();
        let mut child = Command::new("sh")
            .args([
                "-c",
                r#"exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null"#,
                chromium(),
            ])
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--remote-debugging-pipe",
                &format!("--user-data-dir={}", profile.path().display()),
                "about:blank",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromium");
        let commands = child.stdin.take().unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let (tx, replies) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            let mut message = Vec::new();
            while out.read_until(0, &mut message).is_ok_and(|n| n > 0) {
                message.pop();
                if let Ok(v) = serde_json::from_slice::<Value>(&message) {
                    if tx.send(v).is_err() {
                        return;
                    }
                }
                message.clear();
            }
        });
        let mut browser = Devtools {
            child,
            commands,
            replies,
            next_id: 0,
            attached: String::new(),
            _profile: profile,
        };
        let target = browser.call("Target.createTarget", json!({"url": url}));
        let attached = browser.call(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        );
        browser.attached = attached["sessionId"].as_str().unwrap().to_string();
        browser
    }

    /// Sends one command (to the page once attached) and returns its result.
    fn call(&mut self, method: &str, params: Value) -> Value {
        use std::io::Write;
        self.next_id += 1;
        let id = self.next_id;
        let mut command = json!({"id": id, "method": method, "params": params});
        if !self.attached.is_empty() {
            command["sessionId"] = json!(self.attached);
        }
        let mut bytes = serde_json::to_vec(&command).unwrap();
        bytes.push(0);
        self.commands.write_all(&bytes).unwrap();
        self.commands.flush().unwrap();
        let deadline = Instant::now() + BROWSER_WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let reply = self
                .replies
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no reply to {method}: {e}"));
            if reply["id"] == id {
                assert!(reply.get("error").is_none(), "{method}: {reply}");
                return reply["result"].clone();
            }
        }
    }

    /// The value of a JavaScript expression in the page.
    fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(r.get("exceptionDetails").is_none(), "{expression}: {r}");
        r["result"]["value"].clone()
    }

    /// Waits (real time, bounded) until `expression` is true in the page (an exception, e.g. while
    /// the page is still loading, counts as not yet).
    fn wait_until(&mut self, expression: &str) {
        let start = Instant::now();
        let guarded =
            format!("(() => {{ try {{ return {expression}; }} catch (e) {{ return false; }} }})()");
        while self.eval(&guarded) != json!(true) {
            assert!(
                start.elapsed() < BROWSER_WAIT,
                "timed out waiting for {expression}; the page: {}",
                self.eval("document.body.innerText")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Devtools {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn with_tokens_the_page_asks_for_a_read_token_and_sends_it_in_a_header_only() {
    const TOKEN: &str = "status-page-read-token-0123";
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(dir.path(), "k = 2", "");
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("read {TOKEN}\n")).unwrap();
    let d = Daemon::start(&[
        "--config",
        config.to_str().unwrap(),
        "--auth-tokens-file",
        tokens.to_str().unwrap(),
    ]);
    let refused = |d: &Daemon| {
        let text = d
            .client
            .get(format!("{}/metrics", d.base))
            .bearer_auth(TOKEN)
            .send()
            .unwrap()
            .text()
            .unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("thresher_http_auth_refused_total{status=\"401\"} "))
            .unwrap()
            .parse::<f64>()
            .unwrap()
    };
    let before = refused(&d);

    // Served without a token; its data calls are refused, so it asks for one and draws nothing.
    let mut page = Devtools::open(&format!("{}/", d.base));
    page.wait_until("!document.getElementById('auth').hidden");
    assert_eq!(
        page.eval("document.getElementById('status').textContent"),
        "a read token is needed"
    );
    assert_eq!(
        page.eval("document.querySelectorAll('section.learner').length"),
        0
    );
    assert!(
        refused(&d) > before,
        "the page asked for data and was refused"
    );

    // A wrong token is refused and forgotten; the right one is kept for the tab and the data shows.
    page.eval(
        "document.getElementById('token').value = 'not-a-configured-token-0000';\
         document.getElementById('auth').requestSubmit(); true",
    );
    page.wait_until("document.getElementById('auth-message').textContent.includes('refused')");
    assert_eq!(
        page.eval("sessionStorage.getItem('thresher.read_token')"),
        Value::Null
    );
    page.eval(&format!(
        "document.getElementById('token').value = '{TOKEN}';\
         document.getElementById('auth').requestSubmit(); true"
    ));
    page.wait_until("document.body.getAttribute('data-ready') === '1'");
    assert_eq!(page.eval("document.getElementById('auth').hidden"), true);
    assert_eq!(
        page.eval("document.querySelector('section.learner').getAttribute('data-learner')"),
        "primary"
    );
    assert_eq!(
        page.eval("sessionStorage.getItem('thresher.read_token')"),
        TOKEN
    );
    assert_eq!(page.eval("localStorage.length"), 0);
    // Every URL the page loaded or fetched, and its own: none carries the token.
    let urls =
        page.eval("[location.href, ...performance.getEntriesByType('resource').map(e => e.name)]");
    let urls = urls.as_array().unwrap();
    assert!(urls
        .iter()
        .any(|u| u.as_str().unwrap().contains("/v1/history?learner=primary")));
    assert!(
        urls.iter().all(|u| !u.as_str().unwrap().contains(TOKEN)),
        "{urls:?}"
    );
}
