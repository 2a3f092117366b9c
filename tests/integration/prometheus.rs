//! A real Prometheus (Debian package `prometheus`) scrapes `thresher serve` on loopback; every PromQL
//! expression of the shipped Grafana dashboard must return data.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use thresher::synth::{sparse_stream, to_libsvm};

use crate::common::{poll, test_config, Daemon};

/// Bound on each query's wait for data (scrapes every 200 ms; rate() needs two of them).
const PROMETHEUS_WAIT: Duration = Duration::from_secs(30);

struct Prometheus {
    child: Child,
    base: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_prometheus(dir: &std::path::Path, target: &str) -> Prometheus {
    let binary = ["/usr/bin/prometheus", "prometheus"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("Prometheus is not installed: apt-get install -y prometheus (.ci/run does this)");
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 200ms\n  evaluation_interval: 200ms\nscrape_configs:\n  - job_name: thresher\n    \
             scrape_timeout: 200ms\n    static_configs:\n      - targets: [\"{target}\"]\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let child = Command::new(binary)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus");
    Prometheus {
        child,
        base: format!("http://127.0.0.1:{port}"),
    }
}

/// Runs an instant query until it returns at least one series (bounded wait); returns the result.
fn query_until_data(
    client: &reqwest::blocking::Client,
    prom: &Prometheus,
    expr: &str,
) -> Vec<Value> {
    let last = std::cell::RefCell::new(String::new());
    poll(
        &format!("data for {expr:?}"),
        PROMETHEUS_WAIT,
        Duration::from_millis(100),
        || {
            let r = client
                .get(format!("{}/api/v1/query", prom.base))
                .query(&[("query", expr)])
                .send()
                .ok()?;
            let text = r.text().unwrap_or_default();
            let v = serde_json::from_str::<Value>(&text);
            *last.borrow_mut() = text;
            let v = v.ok()?;
            assert_ne!(v["status"], "error", "Prometheus rejects {expr:?}: {v}");
            let result = v["data"]["result"].as_array().filter(|r| !r.is_empty())?;
            Some(result.clone())
        },
        || format!("last answer: {}", last.borrow()),
    )
}

/// Every `expr` in the dashboard's panels.
fn dashboard_expressions() -> Vec<String> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/grafana-dashboard.json"
    ))
    .unwrap();
    let dash: Value = serde_json::from_str(&text).unwrap();
    let mut out = Vec::new();
    for panel in dash["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            out.push(target["expr"].as_str().unwrap().to_string());
        }
    }
    out
}

#[test]
fn prometheus_scrapes_the_daemon_and_every_dashboard_query_has_data() {
    let exprs = dashboard_expressions();
    assert!(exprs.len() >= 12, "the dashboard lost panels: {exprs:?}");
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(dir.path(), "k = 5", "");
    let d = Daemon::start(&["--config", config.to_str().unwrap()]);
    let prom = start_prometheus(dir.path(), d.base.trim_start_matches("http://"));
    let data = sparse_stream(1000, 200, 5, 20, 0.01, false, 3);
    assert_eq!(
        d.post("/v1/samples", "text/plain", to_libsvm(&data.samples))
            .0,
        202
    );
    // A rejected request too, so the reject-rate panel has a nonzero series to show.
    assert_eq!(d.post("/v1/samples", "text/plain", "1 2:x\n").0, 400);
    d.wait_for("a model", |d| d.model());
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let gap = query_until_data(&client, &prom, "thresher_duality_gap");
    assert_eq!(gap[0]["metric"]["learner"], "primary", "{gap:?}");
    for expr in &exprs {
        query_until_data(&client, &prom, expr);
    }
    // Scraped values agree with the daemon: the version Prometheus saw is one the daemon published.
    let version = query_until_data(&client, &prom, "max_over_time(thresher_model_version[1m])");
    let seen: f64 = version[0]["value"][1].as_str().unwrap().parse().unwrap();
    assert!(
        seen >= 1.0 && seen <= d.model().unwrap()["version"].as_f64().unwrap(),
        "{seen}"
    );
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
}
