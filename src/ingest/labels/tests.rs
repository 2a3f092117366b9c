//! The label store's bounds, expiry, replacement, put-back and journal.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::journal::Journal;
use super::wire::{parse_labels, take_ids};
use super::*;
use crate::config::WalMode;
use crate::ingest::batch::BodyFormat;
use crate::metrics::Metrics;

fn config(capacity: usize, ttl_ms: u64) -> LabelsConfig {
    LabelsConfig {
        capacity,
        max_bytes: 1 << 20,
        ttl: Duration::from_millis(ttl_ms),
        id_max_bytes: 16,
    }
}

fn sample(id: &str, j: u32) -> Stored {
    Stored {
        id: id.into(),
        at_ms: 0,
        indices: vec![j],
        values: vec![1.0],
        served: vec![0.5, f64::NAN],
    }
}

struct Clock(Arc<AtomicU64>);

impl Clock {
    fn new() -> Clock {
        Clock(Arc::new(AtomicU64::new(1_000)))
    }
    fn f(&self) -> Arc<dyn Fn() -> u64 + Send + Sync> {
        let t = self.0.clone();
        Arc::new(move || t.load(Ordering::SeqCst))
    }
    fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

fn store(capacity: usize, ttl_ms: u64, clock: &Clock) -> (LabelStore, Metrics) {
    let m = Metrics::new();
    let names = vec!["a".to_string(), "b".to_string()];
    let s =
        LabelStore::new(config(capacity, ttl_ms), names, m.labels.clone()).with_clock(clock.f());
    (s, m)
}

fn dropped(m: &Metrics, reason: &str) -> u64 {
    m.labels.dropped.with_label_values(&[reason]).get()
}

/// Class names for labels given as text: none (every such label is refused).
fn no_names(name: &str) -> Result<f64, String> {
    Err(format!("label {name:?} is text"))
}

#[test]
fn the_oldest_leaves_past_the_capacity_and_is_answered_evicted() {
    let clock = Clock::new();
    let (s, m) = store(3, 60_000, &clock);
    s.remember((0..5).map(|i| sample(&format!("x{i}"), i)).collect())
        .unwrap();
    assert_eq!(s.fill().0, 3);
    assert_eq!(dropped(&m, dropped::CAPACITY), 2);
    let got = s.take(&["x0", "x1", "x2", "x4", "nope", "x4"]);
    assert_eq!(got[0], Err(Missing::Evicted));
    assert_eq!(got[1], Err(Missing::Evicted));
    assert_eq!(got[2].as_ref().unwrap().indices, vec![2]);
    assert!(got[3].is_ok());
    assert_eq!(got[4], Err(Missing::Unknown));
    assert_eq!(got[5], Err(Missing::Duplicate));
    assert_eq!(s.fill().0, 1);
    // Taken is gone: a second label is unknown.
    assert_eq!(s.take(&["x2"])[0], Err(Missing::Unknown));
}

#[test]
fn a_sample_past_the_ttl_is_expired_by_the_clock() {
    let clock = Clock::new();
    let (s, m) = store(10, 500, &clock);
    s.remember(vec![sample("old", 1)]).unwrap();
    clock.advance(400);
    s.remember(vec![sample("young", 2)]).unwrap();
    clock.advance(100);
    // "old" is 500 ms old: expired when met; "young" 100 ms: joined.
    let got = s.take(&["old", "young"]);
    assert_eq!(got[0], Err(Missing::Expired));
    assert!(got[1].is_ok());
    assert_eq!(dropped(&m, dropped::EXPIRED), 1);
    // Expiry at the front when samples are added.
    s.remember(vec![sample("c", 3)]).unwrap();
    clock.advance(600);
    s.remember(vec![sample("d", 4)]).unwrap();
    assert_eq!(s.fill().0, 1);
    assert_eq!(s.take(&["c"])[0], Err(Missing::Expired));
    assert_eq!(dropped(&m, dropped::EXPIRED), 2);
}

#[test]
fn a_repeated_id_replaces_and_a_refused_take_is_put_back() {
    let clock = Clock::new();
    let (s, m) = store(10, 60_000, &clock);
    s.remember(vec![sample("a", 1)]).unwrap();
    s.remember(vec![sample("a", 7)]).unwrap();
    assert_eq!(dropped(&m, dropped::REPLACED), 1);
    assert_eq!(s.fill().0, 1);
    let taken: Vec<Stored> = s.take(&["a"]).into_iter().map(Result::unwrap).collect();
    assert_eq!(taken[0].indices, vec![7]);
    assert_eq!(s.fill(), (0, 0));
    s.put_back(taken);
    assert_eq!(s.fill().0, 1);
    assert_eq!(s.take(&["a"])[0].as_ref().unwrap().indices, vec![7]);
}

#[test]
fn the_byte_bound_holds() {
    let clock = Clock::new();
    let m = Metrics::new();
    let mut c = config(1000, 60_000);
    c.max_bytes = 10 * sample("x000", 0).bytes();
    let s =
        LabelStore::new(c, vec!["a".into(), "b".into()], m.labels.clone()).with_clock(clock.f());
    s.remember((0..50).map(|i| sample(&format!("x{i:03}"), i)).collect())
        .unwrap();
    let (n, bytes) = s.fill();
    assert_eq!(n, 10);
    assert!(bytes <= c.max_bytes);
    assert_eq!(m.labels.stored.get(), 10);
}

#[test]
fn the_journal_gives_back_the_store_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new();
    let open = |names: Vec<String>| {
        let m = Metrics::new();
        let j = Journal::new(dir.path(), WalMode::Batch, Duration::from_secs(1));
        LabelStore::new(config(100, 60_000), names, m.labels.clone())
            .with_clock(clock.f())
            .with_journal(j)
            .unwrap()
    };
    let s = open(vec!["a".into(), "b".into()]);
    s.remember((0..5).map(|i| sample(&format!("x{i}"), i)).collect())
        .unwrap();
    let taken: Vec<String> = s
        .take(&["x1", "x3"])
        .into_iter()
        .map(|t| t.unwrap().id)
        .collect();
    s.confirm(taken).unwrap();
    drop(s);
    // The learners swapped places: the scores follow their names.
    let s = open(vec!["b".into(), "a".into()]);
    assert_eq!(s.fill().0, 3);
    let got = s.take(&["x0", "x1", "x4"]);
    let x0 = got[0].as_ref().unwrap();
    assert!(x0.served[0].is_nan() && x0.served[1] == 0.5);
    assert_eq!(got[1], Err(Missing::Unknown));
    assert!(got[2].is_ok());
    // A torn tail is dropped, the rest read.
    drop(s);
    let path = dir.path().join(journal::FILE_NAME);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&[9, 0, 0, 0, 1, 2]);
    std::fs::write(&path, &bytes).unwrap();
    let s = open(vec!["a".into(), "b".into()]);
    assert_eq!(
        s.fill().0,
        3,
        "taken samples were not confirmed: still stored"
    );
}

#[test]
fn ids_are_taken_out_of_prediction_bodies() {
    let body =
        br#"[{"id": "a", "indices": [1], "values": [0.5]}, {"indices": [2], "values": [1e-3]}]"#;
    let (rest, ids) = take_ids(BodyFormat::JsonArray, body, 16).unwrap().unwrap();
    assert_eq!(ids, vec![Some("a".to_string()), None]);
    let v: serde_json::Value = serde_json::from_slice(&rest).unwrap();
    assert!(v[0].get("id").is_none() && v[1]["values"][0] == 1e-3);
    let lines = b"{\"id\": \"a\", \"indices\": [1], \"values\": [0.5]}\n\n# c\n{\"id\": \"b\"}\n";
    let (rest, ids) = take_ids(BodyFormat::Ndjson, lines, 16).unwrap().unwrap();
    assert_eq!(ids.len(), 2);
    assert_eq!(String::from_utf8(rest).unwrap().lines().count(), 5);
    assert!(take_ids(BodyFormat::JsonArray, b"[{\"indices\": []}]", 16)
        .unwrap()
        .is_none());
    let e = take_ids(BodyFormat::JsonArray, br#"[{}, {"id": 3}]"#, 16).unwrap_err();
    assert_eq!(e.line, Some(2));
    let e = take_ids(
        BodyFormat::JsonArray,
        br#"[{"id": "0123456789abcdefg"}]"#,
        16,
    )
    .unwrap_err();
    assert!(e.message.contains("labels.id_max_bytes"), "{}", e.message);
}

#[test]
fn a_malformed_label_names_its_item() {
    let ok = |_: f64, _: Option<f64>| Ok(());
    let items = parse_labels(
        BodyFormat::JsonArray,
        br#"[{"id": "a", "label": 1}, {"id": "b", "label": -1, "weight": 2.5}]"#,
        16,
        no_names,
        ok,
    )
    .unwrap();
    assert_eq!(items[1].weight, Some(2.5));
    for (body, item, says) in [
        (
            &br#"[{"id": "a", "label": 1}, {"label": 1}]"#[..],
            2,
            "missing \"id\"",
        ),
        (br#"[{"id": "a", "label": "x"}]"#, 1, "label \"x\" is text"),
        (
            br#"[{"id": "a", "label": true}]"#,
            1,
            "label must be a number",
        ),
        (br#"[{"id": "a", "label": 1, "weight": 0}]"#, 1, "weight 0"),
        (
            br#"[{"id": "a", "label": 1, "lable": 1}]"#,
            1,
            "unknown key",
        ),
        (br#"[1]"#, 1, "a label is an object"),
    ] {
        let e = parse_labels(BodyFormat::JsonArray, body, 16, no_names, ok).unwrap_err();
        assert_eq!(e.line, Some(item), "{}", e.message);
        assert!(e.message.contains(says), "{}", e.message);
    }
    let e = parse_labels(
        BodyFormat::JsonArray,
        br#"[{"id": "a", "label": 2}]"#,
        16,
        no_names,
        |l, _| {
            if l == 2.0 {
                Err("label 2 is not -1 or +1".into())
            } else {
                Ok(())
            }
        },
    )
    .unwrap_err();
    assert_eq!(e.line, Some(1));
    assert!(parse_labels(BodyFormat::JsonArray, b"[]", 16, no_names, ok).is_err());
}
