//! The HTTP source's request bodies through the API's router (the harness of `api::tests`): each
//! format accepted and queued, every refusal with its status, body and counter (415, 413, 400, 503
//! before and after the parse), a refused body leaving the queue and the budget as they were; and a
//! body that stops arriving refused as stalled after the idle time.

use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, Request, StatusCode};
use serde_json::{json, Value};

use super::HttpSource;
use crate::api::tests::{api, good_lines, libsvm, post, published, LIMIT};
use crate::api::RETRY_AFTER_SECONDS;
use crate::ingest::BodyError;
use crate::learner::publish::ModelCell;

const UNSUPPORTED: &str = "use text/plain (LIBSVM), application/x-ndjson or application/json";

#[tokio::test]
async fn accepted_bodies_answer_202_with_the_count_and_reach_the_queue() {
    let api = published();
    let (status, body) = api.json(libsvm("/v1/samples", &good_lines(3))).await;
    assert_eq!(
        (status, body),
        (StatusCode::ACCEPTED, json!({"accepted": 3}))
    );
    let ndjson = "{\"label\": 1, \"indices\": [1, 4], \"values\": [0.5, 2]}\n\
                  {\"label\": -1, \"indices\": [2], \"values\": [1]}\n";
    let (status, body) = api
        .json(post("/v1/samples", "application/x-ndjson", ndjson))
        .await;
    assert_eq!(
        (status, body),
        (StatusCode::ACCEPTED, json!({"accepted": 2}))
    );
    let array = "[{\"label\": 2, \"indices\": [3], \"values\": [1]}]";
    let (status, body) = api
        .json(post(
            "/v1/samples",
            "application/json; charset=utf-8",
            array,
        ))
        .await;
    assert_eq!(
        (status, body),
        (StatusCode::ACCEPTED, json!({"accepted": 1}))
    );
    assert_eq!(api.drain(), [3, 2, 1]);
    assert_eq!(
        api.metric("thresher_samples_ingested_total{source=\"http\"}")
            .await,
        6.0
    );
}

#[tokio::test]
async fn a_bad_line_is_400_naming_it() {
    let api = published();
    let (status, body) = api.json(libsvm("/v1/samples", "1 1:1\n1 x:2\n")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["line"], json!(2), "{body}");
    assert_eq!(
        body,
        json!({
            "error": "bad feature index \"x\": expected a non-negative integer below 2^32",
            "line": 2
        })
    );
    // The same for predictions.
    let (status, body) = api.json(libsvm("/v1/predict", "1:1\n\n1:x\n")).await;
    assert_eq!(
        (status, body),
        (
            StatusCode::BAD_REQUEST,
            json!({"error": "bad feature value \"x\": not a number", "line": 3})
        )
    );
}

#[tokio::test]
async fn an_unsupported_content_type_is_415_and_counted() {
    let api = published();
    let (status, body) = api
        .json(post("/v1/samples", "application/xml", "1 1:1\n"))
        .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(
        body,
        json!({
            "error": format!("unsupported content type \"application/xml\": {UNSUPPORTED}"),
            "line": null
        })
    );
    let no_type = Request::post("/v1/samples")
        .body(Body::from("1 1:1\n"))
        .unwrap();
    let (status, body) = api.json(no_type).await;
    assert_eq!(
        (status, body),
        (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            json!({"error": format!("unsupported content type \"\": {UNSUPPORTED}"), "line": null})
        )
    );
    let (status, _) = api.json(post("/v1/predict", "image/png", "1:1\n")).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(api.rx.is_empty());
    assert_eq!(
        api.metric("thresher_samples_rejected_total{reason=\"unsupported_media_type\"}")
            .await,
        2.0
    );
}

#[tokio::test]
async fn a_body_over_the_limit_is_413_by_content_length_or_by_size() {
    let api = published();
    let too_large = json!({
        "error": format!("request body is over the limit of {LIMIT} bytes (server.body_limit_bytes)"),
        "line": null
    });
    // Declared over the limit: refused before reading (the short body itself would be accepted).
    let mut declared = libsvm("/v1/samples", "1 1:1\n");
    declared
        .headers_mut()
        .insert(header::CONTENT_LENGTH, (LIMIT + 1).into());
    let (status, body) = api.json(declared).await;
    assert_eq!((status, &body), (StatusCode::PAYLOAD_TOO_LARGE, &too_large));
    // No length declared, more bytes than the limit arrive.
    let long = good_lines(150);
    assert!(long.len() > LIMIT);
    let (status, body) = api.json(libsvm("/v1/samples", &long)).await;
    assert_eq!((status, &body), (StatusCode::PAYLOAD_TOO_LARGE, &too_large));
    let (status, body) = api.json(libsvm("/v1/predict", &long)).await;
    assert_eq!((status, &body), (StatusCode::PAYLOAD_TOO_LARGE, &too_large));
    // Exactly at the limit is fine.
    let mut at_limit = good_lines(10);
    at_limit.push_str(&"#".repeat(LIMIT - at_limit.len()));
    let (status, _) = api.json(libsvm("/v1/samples", &at_limit)).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(api.rx.len(), 1);
}

#[tokio::test]
async fn an_unreadable_body_is_400() {
    let api = published();
    let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
        Ok(Bytes::from("1 1:1\n")),
        Err(std::io::Error::other("connection reset")),
    ];
    let body = Body::from_stream(futures_util::stream::iter(chunks));
    let (status, body) = api.json(post("/v1/samples", "text/plain", body)).await;
    assert_eq!(
        (status, body),
        (
            StatusCode::BAD_REQUEST,
            json!({"error": "cannot read the body: connection reset", "line": null})
        )
    );
    assert!(api.rx.is_empty());
}

#[tokio::test]
async fn a_full_queue_is_503_with_retry_after_and_refuses_the_whole_batch() {
    let api = api(vec![Arc::new(ModelCell::new("primary", None))], 2, 1000);
    for n in [2, 3] {
        let (status, body) = api.json(libsvm("/v1/samples", &good_lines(n))).await;
        assert_eq!(
            (status, body),
            (StatusCode::ACCEPTED, json!({"accepted": n}))
        );
    }
    // A line body finds the queue full before it is parsed; a JSON array only after.
    let array = "[{\"label\": 1, \"indices\": [1], \"values\": [1]}]";
    for req in [
        libsvm("/v1/samples", &good_lines(4)),
        post("/v1/samples", "application/json", array),
    ] {
        let (status, headers, body) = api.send(req).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            headers.get(header::RETRY_AFTER).unwrap(),
            &RETRY_AFTER_SECONDS.to_string()
        );
        assert_eq!(
            serde_json::from_slice::<Value>(&body).unwrap(),
            json!({"error": "ingest queue is full; retry later", "line": null})
        );
    }
    assert_eq!(api.rx.len(), 2, "the queue keeps exactly what it had");
    assert_eq!(
        api.metric("thresher_samples_rejected_total{reason=\"queue_full\"}")
            .await,
        5.0
    );
    assert_eq!(api.metric("thresher_ingest_queue_batches").await, 2.0);
    // Room again once the learners took a batch.
    drop(api.rx.try_recv().unwrap());
    let (status, _) = api.json(libsvm("/v1/samples", &good_lines(1))).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(api.drain(), [3, 1]);
}

#[tokio::test]
async fn a_full_budget_is_503_until_the_learners_absorb_a_batch() {
    let api = api(vec![Arc::new(ModelCell::new("primary", None))], 8, 5);
    let (status, _) = api.json(libsvm("/v1/samples", &good_lines(3))).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, headers, _) = api.send(libsvm("/v1/samples", &good_lines(3))).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(headers.contains_key(header::RETRY_AFTER));
    assert_eq!(api.rx.len(), 1);
    assert_eq!(api.metric("thresher_ingest_samples_in_flight").await, 3.0);
    // The last learner dropping the batch gives its samples back.
    drop(api.rx.try_recv().unwrap());
    assert_eq!(api.metric("thresher_ingest_samples_in_flight").await, 0.0);
    let (status, _) = api.json(libsvm("/v1/samples", &good_lines(5))).await;
    assert_eq!(status, StatusCode::ACCEPTED);
}

/// 3 good lines and a bad 4th: 400 naming line 4, nothing queued, no budget taken, counted as rejected.
/// (The budget has room for the whole body: a parse reserves its rows as it goes, so one that would
/// pass the budget is refused with 503 at the first row over it.)
#[tokio::test]
async fn a_rejected_body_leaves_the_queue_and_the_budget_untouched() {
    let api = api(vec![Arc::new(ModelCell::new("primary", None))], 8, 5);
    let (status, _) = api.json(libsvm("/v1/samples", &good_lines(1))).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let bad = format!("{}1 1:1 2:nope\n", good_lines(3));
    let (status, body) = api.json(libsvm("/v1/samples", &bad)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body,
        json!({"error": "bad feature value \"nope\": not a number", "line": 4})
    );
    assert_eq!(api.rx.len(), 1, "nothing of the rejected body entered");
    assert_eq!(api.metric("thresher_ingest_samples_in_flight").await, 1.0);
    // 1 + 4 fits the budget of 5 only if the rejected body took none of it.
    let (status, body) = api.json(libsvm("/v1/samples", &good_lines(4))).await;
    assert_eq!(
        (status, body),
        (StatusCode::ACCEPTED, json!({"accepted": 4}))
    );
    assert_eq!(api.drain(), [1, 4]);
    let rejected = api
        .metric("thresher_samples_rejected_total{reason=\"invalid\"}")
        .await;
    assert_eq!(rejected, 4.0, "every sample of the rejected body");
    assert_eq!(
        api.metric("thresher_samples_ingested_total{source=\"http\"}")
            .await,
        5.0
    );
}

#[tokio::test]
async fn a_closed_admission_is_503_shutting_down() {
    let api = published();
    api.state.ingest.admission.close();
    let (status, headers, body) = api.send(libsvm("/v1/samples", &good_lines(2))).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(!headers.contains_key(header::RETRY_AFTER));
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap(),
        json!({"error": "shutting down"})
    );
    assert!(api.rx.is_empty());
}

/// A body whose frames keep coming, however slowly, is read on; one that stops is refused as stalled
/// once nothing has arrived for the idle time, and any other read error is not taken for a stall.
/// Paused time: the sender's frames and the idle timer run on the runtime's clock, so a loaded
/// machine cannot stretch a gap between frames past the idle time.
#[tokio::test(start_paused = true)]
async fn a_body_that_stops_sending_is_stalled_after_the_idle_time() {
    let idle = Duration::from_millis(300);
    let source = Arc::new(HttpSource {
        body_idle: idle,
        ..clone_of(&published().state.ingest)
    });
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    let stream = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
    let last_frame = Arc::new(parking_lot::Mutex::new(Instant::now()));
    let sender = {
        let last_frame = last_frame.clone();
        tokio::spawn(async move {
            // Steady frames keep it alive well past one idle period; then nothing, the sender open.
            for _ in 0..6 {
                tokio::time::sleep(idle / 3).await;
                tx.send(Ok(Bytes::from_static(b"1 1:1\n"))).await.unwrap();
                *last_frame.lock() = Instant::now();
            }
            tx
        })
    };
    let start = Instant::now();
    let read = source
        .read(
            &HeaderMap::new(),
            Body::from_stream(stream),
            1 << 20,
            crate::ingest::batch::BodyFormat::Libsvm,
        )
        .await;
    assert_eq!(read.err(), Some(BodyError::Stalled(idle)));
    assert!(start.elapsed() >= 2 * idle, "{:?}", start.elapsed());
    assert!(
        last_frame.lock().elapsed() >= idle,
        "{:?}",
        last_frame.lock().elapsed()
    );
    drop(sender.await.unwrap());
}

/// A copy of the harness's source, to change one field of.
fn clone_of(source: &HttpSource) -> HttpSource {
    HttpSource {
        admission: source.admission.clone(),
        dictionary: source.dictionary.clone(),
        rules: source.rules.clone(),
        predict_rules: source.predict_rules.clone(),
        metrics: source.metrics.clone(),
        worker_scheduling: source.worker_scheduling,
        body_idle: source.body_idle,
        inflight: source.inflight.clone(),
    }
}
