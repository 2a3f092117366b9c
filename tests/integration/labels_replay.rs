//! Late labels checked against an offline replay of the same events: 10,000 predictions with ids, their
//! labels sent shuffled in delayed batches — before and after a graceful restart (SIGTERM), after a
//! kill -9, and 1,000 of them after their time to live — then the per-item counts, the progressive loss
//! and the model are compared with what the events imply.
//!
//! The replay: a second daemon, with no data directory, is sent the warm-up samples and then every joined
//! sample with its label, in the order the labels were joined, by plain `POST /v1/samples`. Its window
//! then holds the same samples, so both learners solve the same objective. The learners' trajectories
//! differ (their batches differ, and one of them restarted twice), so the comparison is the
//! certificate's: each dual value is a lower bound on the other's primal (weak duality holds across
//! them only when the objective is the same), the supports agree, and the weights differ by at most
//! what the two gaps allow (`||w - w*_S|| <= sqrt(2 gap / lambda)` on a shared support `S`, no
//! intercept). The progressive loss is compared exactly (to rounding) with the losses of the scores
//! the predictions served, the honest delayed evaluation.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::common::*;

/// Samples predicted, labelled, then expired.
const EXPIRING: usize = 1000;
/// Samples predicted and labelled in time.
const LIVE: usize = 9000;
/// Warm-up samples, sent with their labels before any prediction.
const WARM: usize = 500;
const LAMBDA: f64 = 0.01;
/// The wall-clock gap between the expiring predictions and the live ones: the last restart's time to
/// live falls in the middle of it.
const GAP: Duration = Duration::from_secs(3);

/// A small seeded generator (splitmix64), so the test needs no crate and replays exactly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Sample `r`: features 0, 1, 2 carry the label (planted weights 1.5, -1, 0.8), with five noise
/// features out of 40; the label is the sign of the planted score plus noise.
fn sample(r: usize) -> (f64, Vec<u32>, Vec<f64>) {
    let mut rng = Rng(0x5eed ^ (r as u64).wrapping_mul(0x1000_0001));
    let mut indices: Vec<u32> = vec![0, 1, 2];
    while indices.len() < 8 {
        let j = 3 + rng.below(37) as u32;
        if !indices.contains(&j) {
            indices.push(j);
        }
    }
    let values: Vec<f64> = indices.iter().map(|_| rng.unit() * 2.0 - 1.0).collect();
    let score = 1.5 * values[0] - values[1] + 0.8 * values[2] + 0.3 * (rng.unit() - 0.5);
    let label = if score >= 0.0 { 1.0 } else { -1.0 };
    let mut order: Vec<usize> = (0..indices.len()).collect();
    order.sort_by_key(|&i| indices[i]);
    let indices = order.iter().map(|&i| indices[i]).collect();
    let values = order.iter().map(|&i| values[i]).collect();
    (label, indices, values)
}

fn features(r: usize) -> Value {
    let (_, indices, values) = sample(r);
    json!({"indices": indices, "values": values})
}

fn labelled(r: usize) -> Value {
    let mut f = features(r);
    f["label"] = json!(sample(r).0);
    f
}

/// The id of sample `r`.
fn id(r: usize) -> String {
    format!("s{r}")
}

/// Predicts samples `rows` with their ids, in bodies of 1,000; returns the served scores in order.
fn predict(d: &Daemon, rows: std::ops::Range<usize>) -> Vec<f64> {
    let mut scores = Vec::new();
    let all: Vec<usize> = rows.collect();
    for chunk in all.chunks(1000) {
        let body: Vec<Value> = chunk
            .iter()
            .map(|&r| {
                let mut f = features(r);
                f["id"] = json!(id(r));
                f
            })
            .collect();
        let (status, answer) = post_json(d, "/v1/predict", &json!(body));
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["ids"][0], json!(id(chunk[0])), "{answer}");
        scores.extend(
            answer["scores"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_f64().unwrap()),
        );
    }
    scores
}

/// Sends the labels of `rows` (plus `extra` items) in bodies of 500; asserts each item's status is
/// `expect` (the extras' statuses are returned) and returns the statuses of the extras.
fn send_labels(d: &Daemon, rows: &[usize], expect: &str, extra: Vec<Value>) -> Vec<String> {
    let mut items: Vec<Value> = rows
        .iter()
        .map(|&r| json!({"id": id(r), "label": sample(r).0}))
        .collect();
    let n = items.len();
    items.extend(extra);
    let mut statuses = Vec::new();
    for chunk in items.chunks(500) {
        let (status, answer) = post_json(d, "/v1/labels", &json!(chunk));
        assert_eq!(status, 202, "{answer}");
        for r in answer["results"].as_array().unwrap() {
            statuses.push(r["status"].as_str().unwrap().to_string());
        }
    }
    assert!(
        statuses[..n].iter().all(|s| s == expect),
        "every label {expect}: {:?}",
        &statuses[..n.min(20)]
    );
    statuses.split_off(n)
}

fn unix_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn write_config(dir: &Path, ttl_seconds: f64) -> std::path::PathBuf {
    let text = format!(
        "[snapshot]\ninterval_ms = 50\n[window]\ncapacity = 20000\n[checkpoint]\ninterval_s = 3600\n\
         [labels]\ncapacity = 20000\nttl_seconds = {ttl_seconds:.3}\n\
         [[learner]]\nk = 3\nlambda = {LAMBDA}\nloss = \"logistic\"\nintercept = false\n"
    );
    let path = dir.join("thresher.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn wait_seen(d: &Daemon, n: u64) -> Value {
    d.wait_for(&format!("{n} samples seen"), |d| {
        samples_seen(d).filter(|&s| s >= n)
    });
    let m = d.wait_until_settled();
    assert_eq!(m["samples_seen"].as_u64().unwrap(), n, "{m}");
    m
}

#[test]
fn ten_thousand_late_labels_across_restarts_and_expiry_match_an_offline_replay() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cfg = write_config(dir.path(), 3600.0);
    let args = serve_args(&cfg, &data);
    let d = Daemon::start(&args);

    let warm: Vec<Value> = (0..WARM).map(labelled).collect();
    assert_eq!(post_json(&d, "/v1/samples", &json!(warm)).0, 202);
    let m = wait_seen(&d, WARM as u64);
    let warm_loss = m["progressive_loss"].as_f64().unwrap() * WARM as f64;

    // The expiring predictions first, then (GAP later by the wall clock, which the time to live reads)
    // the live ones.
    let (expiring, live) = (
        WARM..WARM + EXPIRING,
        WARM + EXPIRING..WARM + EXPIRING + LIVE,
    );
    let predicted_at = unix_seconds();
    let _ = predict(&d, expiring.clone());
    std::thread::sleep(GAP);
    let live_scores = predict(&d, live.clone());
    let served = |r: usize| live_scores[r - live.start];
    assert_eq!(
        d.metric("thresher_label_store_samples"),
        (EXPIRING + LIVE) as f64
    );

    // The live labels, shuffled, in three parts.
    let mut order: Vec<usize> = live.clone().collect();
    let mut rng = Rng(7);
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
    let (first, rest) = order.split_at(3000);
    let (second, third) = rest.split_at(3000);

    // Part 1, with an unknown id and a repeated one.
    let extras = send_labels(
        &d,
        first,
        "joined",
        vec![
            json!({"id": "never-predicted", "label": 1}),
            json!({"id": id(first[0]), "label": 1}),
        ],
    );
    assert_eq!(extras, ["unknown", "unknown"]);
    assert_eq!(
        d.metric("thresher_labels_total{outcome=\"joined\"}"),
        3000.0
    );
    assert_eq!(d.metric("thresher_labels_total{outcome=\"unknown\"}"), 2.0);

    // A graceful restart; part 2 after it.
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
    let d = Daemon::start(&args);
    assert_eq!(
        d.metric("thresher_label_store_samples"),
        (EXPIRING + LIVE - 3000) as f64,
        "the store survives a graceful restart"
    );
    send_labels(&d, second, "joined", vec![]);

    // kill -9 right after the last 202: every acknowledged label comes back (write-ahead log, journal).
    let pid = d.pid().to_string();
    Command::new("kill").args(["-KILL", &pid]).status().unwrap();
    let (status, _) = d.wait_exit("exit on SIGKILL");
    assert!(!status.success());
    let d = Daemon::start(&args);
    wait_seen(&d, (WARM + 6000) as u64);
    assert_eq!(
        d.metric("thresher_label_store_samples"),
        (EXPIRING + LIVE - 6000) as f64,
        "the store survives kill -9"
    );
    send_labels(&d, third, "joined", vec![]);
    wait_seen(&d, (WARM + LIVE) as u64);

    // A restart whose time to live falls between the two predictions' ages: the expiring samples have
    // outlived it, and their labels are answered `expired`.
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
    let age = unix_seconds() - predicted_at;
    let cfg = write_config(dir.path(), age - GAP.as_secs_f64() / 2.0);
    let args = serve_args(&cfg, &data);
    let d = Daemon::start(&args);
    let mut late: Vec<usize> = expiring.collect();
    late.reverse();
    let extras = send_labels(
        &d,
        &late,
        "expired",
        vec![json!({"id": id(third[0]), "label": 1})],
    );
    assert_eq!(
        extras,
        ["unknown"],
        "a label already joined is not joined twice"
    );
    assert_eq!(
        d.metric("thresher_labels_total{outcome=\"expired\"}"),
        EXPIRING as f64
    );
    assert_eq!(d.metric("thresher_labels_total{outcome=\"joined\"}"), 0.0);
    assert_eq!(d.metric("thresher_label_store_samples"), 0.0);
    let a = wait_seen(&d, (WARM + LIVE) as u64);

    // The progressive loss: the warm-up's, then each joined sample at the score served for it.
    let joined_loss: f64 = order
        .iter()
        .map(|&r| logistic_loss(sample(r).0, served(r)))
        .sum();
    let expected = (warm_loss + joined_loss) / (WARM + LIVE) as f64;
    let got = a["progressive_loss"].as_f64().unwrap();
    assert!(
        (got - expected).abs() <= 1e-9 * expected,
        "progressive loss {got}, replay of the served scores {expected}"
    );

    // The replay: the same samples in the order they were joined, by plain ingestion.
    let replay_dir = tempfile::tempdir().unwrap();
    let replay_cfg = write_config(replay_dir.path(), 3600.0);
    let b = Daemon::start(&["--config", replay_cfg.to_str().unwrap()]);
    let rows: Vec<usize> = (0..WARM).chain(order.iter().copied()).collect();
    for chunk in rows.chunks(1000) {
        let body: Vec<Value> = chunk.iter().map(|&r| labelled(r)).collect();
        assert_eq!(post_json(&b, "/v1/samples", &json!(body)).0, 202);
    }
    let b_model = wait_seen(&b, (WARM + LIVE) as u64);
    let ((pa, da, ga), (pb, db, gb)) = (certificate(&a), certificate(&b_model));
    let slack = 1e-9 * pa.abs().max(pb.abs());
    assert!(
        da <= pb + slack && db <= pa + slack,
        "weak duality across the two daemons (the same objective): A (P {pa}, D {da}), replay (P {pb}, D {db})"
    );
    assert_eq!(support(&a), support(&b_model), "A {a}\nreplay {b_model}");
    assert_eq!(support(&a), [0, 1, 2], "the planted support");
    let bound = (2.0 * ga / LAMBDA).sqrt() + (2.0 * gb / LAMBDA).sqrt() + 1e-9;
    let distance = model_weights(&a)
        .iter()
        .zip(model_weights(&b_model))
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f64>()
        .sqrt();
    assert!(
        distance <= bound,
        "||w_A - w_replay|| = {distance} > {bound} (gaps {ga}, {gb})"
    );
}
