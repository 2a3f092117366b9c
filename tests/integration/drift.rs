//! The drift alarm (`[drift]`) on the real binary: a stream whose labels flip sign half-way raises the
//! alarm (the metric, an event in `/v1/history`, the model JSON's record, the status page), and with
//! `shrink` the window drops the samples of the old regime, so the progressive loss recovers in fewer
//! samples than with `alarm`, which keeps them until the window evicts them.

use serde_json::Value;
use thresher::sample::Sample;
use thresher::synth::{self, to_libsvm};

use crate::common::{samples_seen, test_config, Daemon};

/// Samples per request.
const BATCH: usize = 100;
/// Samples before the flip, and after it (`window.capacity` in the test config is 2000).
const BEFORE: usize = 2000;
const AFTER: usize = 2000;

/// A sparse regression stream whose labels change sign after `BEFORE` samples.
fn flipping_stream() -> Vec<Sample> {
    let problem = synth::sparse_stream(BEFORE + AFTER, 40, 3, 8, 0.05, false, 21);
    problem
        .samples
        .into_iter()
        .enumerate()
        .map(|(i, mut s)| {
            if i >= BEFORE {
                s.label = -s.label;
            }
            s
        })
        .collect()
}

/// What one run shows: each batch's mean progressive loss, the settled model and the daemon.
struct Run {
    losses: Vec<f64>,
    model: Value,
    daemon: Daemon,
}

/// Feeds the stream batch by batch to a daemon with `drift.action = action`, letting the learner
/// settle after each batch (so both runs learn the same way between batches), and reads each batch's
/// progressive loss from the published counters.
fn run(dir: &std::path::Path, action: &str) -> Run {
    std::fs::create_dir_all(dir).unwrap();
    let config = test_config(dir, "k = 5", &format!("[drift]\naction = \"{action}\""));
    let d = Daemon::start(&["--config", config.to_str().unwrap()]);
    let (mut losses, mut total) = (Vec::new(), 0.0);
    let mut model = Value::Null;
    for (i, chunk) in flipping_stream().chunks(BATCH).enumerate() {
        assert_eq!(d.post("/v1/samples", "text/plain", to_libsvm(chunk)).0, 202);
        let seen = ((i + 1) * BATCH) as u64;
        d.wait_for("the batch learned", |d| {
            samples_seen(d).filter(|&n| n == seen)
        });
        model = d.wait_until_settled();
        let sum = model["progressive_loss"].as_f64().unwrap() * seen as f64;
        losses.push((sum - total) / BATCH as f64);
        total = sum;
    }
    Run {
        losses,
        model,
        daemon: d,
    }
}

/// Samples after the flip until a batch's progressive loss is within 10% of the mean before it
/// (`None`: never).
fn recovery(losses: &[f64]) -> Option<usize> {
    let flip = BEFORE / BATCH;
    let before = &losses[flip / 2..flip];
    let level = before.iter().sum::<f64>() / before.len() as f64;
    losses[flip..]
        .iter()
        .position(|&l| l <= 1.1 * level)
        .map(|b| (b + 1) * BATCH)
}

fn history_events(d: &Daemon) -> Vec<Value> {
    let (_, body) = d.get("/v1/history");
    let h: Value = serde_json::from_str(&body).unwrap();
    h["points"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p.get("drift").cloned())
        .collect()
}

#[test]
fn a_label_flip_raises_the_alarm_and_shrink_recovers_sooner() {
    let dir = tempfile::tempdir().unwrap();
    let alarm = run(&dir.path().join("alarm"), "alarm");
    let shrink = run(&dir.path().join("shrink"), "shrink");
    let (ra, rs) = (recovery(&alarm.losses), recovery(&shrink.losses));
    eprintln!("recovery in samples: alarm {ra:?}, shrink {rs:?}");
    for (r, dropped) in [(&alarm, false), (&shrink, true)] {
        let d = &r.daemon;
        assert!(d.metric("thresher_drift_alarms_total{learner=\"primary\"}") >= 1.0);
        let record = &r.model["drift"];
        assert!(record["alarms"].as_u64().unwrap() >= 1, "{record}");
        let events = history_events(d);
        let first = events
            .first()
            .unwrap_or_else(|| panic!("no drift event in the history"));
        let at = first["at_sample"].as_u64().unwrap();
        assert!(
            (BEFORE as u64..=(BEFORE + 5 * BATCH) as u64).contains(&at),
            "{first}"
        );
        let dropped_samples = d.metric("thresher_drift_dropped_samples_total{learner=\"primary\"}");
        assert_eq!(dropped_samples > 0.0, dropped, "{first}");
        assert!(d.log().contains("drift: the progressive loss rose"));
    }
    // The status page shows the alarms.
    let dom = crate::status_page::browse(&format!("{}/", shrink.daemon.base), &["--dump-dom"]);
    assert!(
        dom.contains("data-drift=") && !dom.contains(r#"data-drift="0""#),
        "{dom}"
    );
    let first = &history_events(&shrink.daemon)[0];
    assert!(
        first["window_samples"].as_u64().unwrap() < 2 * BATCH as u64,
        "{first}"
    );
    let rs = rs.expect("shrink recovers within the stream");
    assert!(ra.is_none_or(|ra| rs < ra), "shrink {rs} vs alarm {ra:?}");
}
