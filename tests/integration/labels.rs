//! Late labels through the real daemon: `POST /v1/predict` with ids keeps the samples and the scores
//! served, `POST /v1/labels` joins labels to them and learns them, each with the progressive loss of
//! the score that was served; the store's bounds, expiry and refusals, and its survival of restarts.

use serde_json::{json, Value};

use crate::common::*;

/// A sample's features as a JSON object (`indices`, `values`) for sample `r`: label +-1 carried by
/// feature 0 and noise features.
fn features(r: usize) -> (f64, Value) {
    let y = if r.is_multiple_of(2) { 1.0 } else { -1.0 };
    let x0 = y * (0.3 + (r % 7) as f64 * 0.1) * if r.is_multiple_of(9) { -1.0 } else { 1.0 };
    (
        y,
        json!({"indices": [0, 1 + (r % 5) as u32, 10 + (r % 11) as u32], "values": [x0, 0.5, -0.25]}),
    )
}

fn labelled(r: usize) -> Value {
    let (y, mut f) = features(r);
    f["label"] = json!(y);
    f
}

/// Predicts samples `rows` with ids `p{r}`; returns the served scores.
fn predict_with_ids(d: &Daemon, rows: std::ops::Range<usize>) -> Vec<f64> {
    let body: Vec<Value> = rows
        .clone()
        .map(|r| {
            let (_, mut f) = features(r);
            f["id"] = json!(format!("p{r}"));
            f
        })
        .collect();
    let (status, answer) = post_json(d, "/v1/predict", &json!(body));
    assert_eq!(status, 200, "{answer}");
    let ids = answer["ids"].as_array().unwrap();
    assert_eq!(ids.len(), rows.len());
    assert_eq!(ids[0], json!(format!("p{}", rows.start)));
    answer["scores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_f64().unwrap())
        .collect()
}

#[test]
fn labels_join_predictions_and_are_learned_with_the_served_loss() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = test_config(
        dir.path(),
        "k = 3\nlambda = 0.01\nloss = \"logistic\"",
        "[labels]\ncapacity = 1000\nttl_seconds = 3600.0",
    );
    let d = Daemon::start(&["--config", cfg.to_str().unwrap()]);
    let warm: Vec<Value> = (0..200).map(labelled).collect();
    assert_eq!(post_json(&d, "/v1/samples", &json!(warm)).0, 202);
    d.wait_for("200 samples seen", |d| {
        samples_seen(d).filter(|&n| n >= 200)
    });
    let before = d.wait_until_settled();
    let (loss_before, seen_before) = (
        before["progressive_loss"].as_f64().unwrap(),
        before["samples_seen"].as_u64().unwrap(),
    );
    let scores = predict_with_ids(&d, 1000..1100);
    assert_eq!(d.metric("thresher_label_store_samples"), 100.0);

    // A malformed item refuses the request whole, naming the item, and changes nothing.
    let bad = json!([{"id": "p1000", "label": 1}, {"id": "p1001", "label": 0.5}]);
    let (status, answer) = post_json(&d, "/v1/labels", &bad);
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["line"], json!(2), "{answer}");
    assert_eq!(d.metric("thresher_label_store_samples"), 100.0);

    // Labels for the first 60 (shuffled), an unknown id, and a repeated one.
    let mut items: Vec<Value> = (1000..1060)
        .rev()
        .map(|r| json!({"id": format!("p{r}"), "label": features(r).0}))
        .collect();
    items.push(json!({"id": "nope", "label": 1}));
    items.push(json!({"id": "p1000", "label": 1}));
    let (status, answer) = post_json(&d, "/v1/labels", &json!(items));
    assert_eq!(status, 202, "{answer}");
    assert_eq!(answer["joined"], json!(60));
    let results = answer["results"].as_array().unwrap();
    assert_eq!(results[60], json!({"id": "nope", "status": "unknown"}));
    assert_eq!(results[61], json!({"id": "p1000", "status": "duplicate"}));
    // Labelled already: unknown now.
    let (_, answer) = post_json(&d, "/v1/labels", &json!([{"id": "p1001", "label": -1}]));
    assert_eq!(answer["results"][0]["status"], json!("unknown"));
    assert_eq!(d.metric("thresher_labels_total{outcome=\"joined\"}"), 60.0);
    assert_eq!(d.metric("thresher_labels_total{outcome=\"unknown\"}"), 2.0);
    assert_eq!(
        d.metric("thresher_labels_total{outcome=\"duplicate\"}"),
        1.0
    );
    assert_eq!(d.metric("thresher_label_store_samples"), 40.0);
    // GET /v1/models and the status page show the store.
    let models: Value = serde_json::from_str(&d.get("/v1/models").1).unwrap();
    assert_eq!(models["labels"]["samples"], json!(40), "{models}");
    assert_eq!(models["labels"]["labels"]["joined"], json!(60), "{models}");
    let dom = crate::status_page::browse(&format!("{}/", d.base), &["--dump-dom"]);
    assert!(
        dom.contains(r#"data-waiting="40""#) && dom.contains("joined 60"),
        "{dom}"
    );
    assert_eq!(
        d.metric("thresher_samples_ingested_total{source=\"labels\"}"),
        60.0
    );

    d.wait_for("the labelled samples seen", |d| {
        samples_seen(d).filter(|&n| n >= seen_before + 60)
    });
    let after = d.wait_until_settled();
    assert_eq!(after["samples_seen"].as_u64().unwrap(), seen_before + 60);
    // The progressive loss adds the losses of the served scores, not the current model's.
    let served: f64 = (1000..1060)
        .map(|r| logistic_loss(features(r).0, scores[r - 1000]))
        .sum();
    let expected = (loss_before * seen_before as f64 + served) / (seen_before + 60) as f64;
    let got = after["progressive_loss"].as_f64().unwrap();
    assert!(
        (got - expected).abs() <= 1e-9 * expected.max(1.0),
        "progressive loss {got}, replay {expected}"
    );
}
