//! In-process tests of the HTTP API: the router over a hand-built [`AppState`] (model cells, an
//! [`Admission`] whose queue receiver the test holds), driven with `tower::ServiceExt::oneshot`. They
//! pin every [`ApiError`]'s status and body, and that a rejected body leaves the queue and the budget
//! exactly as they were.

use std::sync::Arc;

use axum::body::{to_bytes, Body, Bytes};
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use crossbeam_channel::Receiver;
use serde_json::{json, Value};
use tower::ServiceExt;

use super::{router, AppState, RETRY_AFTER_SECONDS};
use crate::config::Config;
use crate::ingest::batch::{FeatureDictionary, Rules};
use crate::ingest::budget::SampleBudget;
use crate::ingest::{Admission, Batch};
use crate::learner::build;
use crate::learner::publish::{ModelCell, Snapshot};
use crate::metrics::Metrics;
use crate::sample::SampleBlock;
use crate::sys::WorkerScheduling;

/// The body limit of the test router, bytes.
const LIMIT: usize = 1024;

/// A router over a hand-built state, with the ingest queue's receiving end.
struct Api {
    app: Router,
    state: Arc<AppState>,
    rx: Receiver<Batch>,
}

/// `cells`, a queue of `queue` batches and a budget of `budget` samples; the primary learner's rules.
fn api(cells: Vec<Arc<ModelCell>>, queue: usize, budget: usize) -> Api {
    let config = Config::defaults();
    let metrics = Metrics::new();
    for c in &cells {
        metrics.register_learner(&c.name, config.window_capacity);
    }
    let (tx, rx) = crossbeam_channel::bounded(queue);
    let admission = Arc::new(Admission::new(
        tx,
        SampleBudget::new(budget),
        metrics.clone(),
    ));
    let rules = |predict| Rules::new(vec![config.learners[0].loss], config.max_dim, predict);
    let state = Arc::new(AppState {
        cells,
        dictionary: Arc::new(FeatureDictionary::new(config.max_named_features)),
        metrics,
        ingest_rules: rules(false),
        predict_rules: rules(true),
        admission,
        // The kernel's defaults: the test's blocking-pool threads keep their scheduling.
        worker_scheduling: WorkerScheduling {
            slice_ns: 0,
            yield_interval: std::time::Duration::ZERO,
        },
        snapshot_interval: config.snapshot_interval,
        cluster: None,
    });
    Api {
        app: router(state.clone(), LIMIT, false),
        state,
        rx,
    }
}

/// A snapshot of the default learner after a few samples and steps, certified.
fn snapshot(learner: &str, version: u64) -> Snapshot {
    let config = Config::defaults();
    let mut l = build(&config.learners[0], 100, None);
    let data = crate::synth::sparse_stream(40, 12, 3, 4, 0.1, false, 7);
    l.insert_samples(&data.samples);
    for _ in 0..20 {
        l.step();
    }
    let s = l.certify();
    Snapshot {
        learner: learner.into(),
        version,
        samples_seen: s.stats.samples_seen,
        window_samples: s.window_samples,
        updated_at: 1_795_000_000.0,
        progressive_loss: s.stats.progressive_loss(),
        steps: s.stats.steps,
        mutations: s.stats.mutations,
        support_changes_total: 0,
        model: s.model,
    }
}

/// A primary learner with a published snapshot (version 3) and a second one with none yet.
fn published() -> Api {
    api(
        vec![
            Arc::new(ModelCell::new("primary", Some(snapshot("primary", 3)))),
            Arc::new(ModelCell::new("second", None)),
        ],
        8,
        1000,
    )
}

/// No learner has published yet.
fn unpublished() -> Api {
    api(vec![Arc::new(ModelCell::new("primary", None))], 8, 1000)
}

fn get(uri: &str) -> Request<Body> {
    Request::get(uri).body(Body::empty()).unwrap()
}

fn post(uri: &str, content_type: &str, body: impl Into<Body>) -> Request<Body> {
    Request::builder()
        .method(Method::POST)
        .uri(uri)
        .header(header::CONTENT_TYPE, content_type)
        .body(body.into())
        .unwrap()
}

fn libsvm(uri: &str, body: &str) -> Request<Body> {
    post(uri, "text/plain", body.to_string())
}

/// `n` good LIBSVM lines.
fn good_lines(n: usize) -> String {
    (0..n)
        .map(|i| format!("{i}.5 1:1 {}:0.5\n", i + 2))
        .collect()
}

impl Api {
    /// Sends `req`; returns the status, the headers and the body.
    async fn send(&self, req: Request<Body>) -> (StatusCode, axum::http::HeaderMap, Bytes) {
        let response = self.app.clone().oneshot(req).await.unwrap();
        let (parts, body) = response.into_parts();
        (
            parts.status,
            parts.headers,
            to_bytes(body, 1 << 20).await.unwrap(),
        )
    }

    /// Sends `req`; returns the status and the JSON body.
    async fn json(&self, req: Request<Body>) -> (StatusCode, Value) {
        let (status, headers, body) = self.send(req).await;
        assert_eq!(
            headers.get(header::CONTENT_TYPE).unwrap(),
            "application/json",
            "{status}"
        );
        let value = serde_json::from_slice(&body)
            .unwrap_or_else(|e| panic!("{status}: not JSON ({e}): {body:?}"));
        (status, value)
    }

    /// The `/metrics` sample `name` (with its labels), which must be there.
    async fn metric(&self, name: &str) -> f64 {
        let (status, _, body) = self.send(get("/metrics")).await;
        assert_eq!(status, StatusCode::OK);
        let text = String::from_utf8(body.to_vec()).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
            .parse()
            .unwrap()
    }

    /// Takes every queued batch off the queue; returns how many samples each held, oldest first.
    fn drain(&self) -> Vec<usize> {
        self.rx.try_iter().map(|b| b.samples().len()).collect()
    }
}

/// `served` is `want` up to the last bit or so (serde_json's default float parsing is not exact).
fn assert_close(served: &Value, want: &[f64]) {
    let served: Vec<f64> = serde_json::from_value(served.clone()).unwrap();
    assert_eq!(served.len(), want.len(), "{served:?} {want:?}");
    for (s, w) in served.iter().zip(want) {
        assert!(
            (s - w).abs() <= 1e-12 * w.abs().max(1.0),
            "{served:?} {want:?}"
        );
    }
}

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
#[tokio::test]
async fn a_rejected_body_leaves_the_queue_and_the_budget_untouched() {
    let api = api(vec![Arc::new(ModelCell::new("primary", None))], 8, 4);
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
    // 1 + 3 fits the budget of 4 only if the rejected body took none of it.
    let (status, body) = api.json(libsvm("/v1/samples", &good_lines(3))).await;
    assert_eq!(
        (status, body),
        (StatusCode::ACCEPTED, json!({"accepted": 3}))
    );
    assert_eq!(api.drain(), [1, 3]);
    let rejected = api
        .metric("thresher_samples_rejected_total{reason=\"invalid\"}")
        .await;
    assert_eq!(rejected, 4.0, "every sample of the rejected body");
    assert_eq!(
        api.metric("thresher_samples_ingested_total{source=\"http\"}")
            .await,
        4.0
    );
}

#[tokio::test]
async fn a_closed_admission_is_503_shutting_down() {
    let api = published();
    api.state.admission.close();
    let (status, headers, body) = api.send(libsvm("/v1/samples", &good_lines(2))).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(!headers.contains_key(header::RETRY_AFTER));
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap(),
        json!({"error": "shutting down"})
    );
    assert!(api.rx.is_empty());
}

#[tokio::test]
async fn without_a_model_model_and_readyz_are_503() {
    let api = unpublished();
    let no_model = json!({"error": "no model published yet"});
    let expected = [
        (
            get("/v1/model"),
            StatusCode::SERVICE_UNAVAILABLE,
            no_model.clone(),
        ),
        (
            get("/readyz"),
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "waiting for a first model"}),
        ),
        (
            libsvm("/v1/predict", "1:1\n"),
            StatusCode::SERVICE_UNAVAILABLE,
            no_model,
        ),
        (
            get("/v1/models"),
            StatusCode::OK,
            json!({"models": [{"learner": "primary", "version": 0}]}),
        ),
    ];
    for (request, status, body) in expected {
        assert_eq!(api.json(request).await, (status, body));
    }
    // Alive all the same.
    let (status, body) = api.json(get("/healthz")).await;
    assert_eq!((status, body), (StatusCode::OK, json!({"status": "ok"})));
}

#[tokio::test]
async fn an_unknown_learner_is_404() {
    let api = published();
    let unknown = json!({"error": "no learner named \"nope\""});
    let (status, body) = api.json(get("/v1/models/nope")).await;
    assert_eq!((status, &body), (StatusCode::NOT_FOUND, &unknown));
    let (status, body) = api.json(libsvm("/v1/predict?learner=nope", "1:1\n")).await;
    assert_eq!((status, &body), (StatusCode::NOT_FOUND, &unknown));
    // A known learner without a model yet is 503, not 404.
    let (status, body) = api.json(get("/v1/models/second")).await;
    assert_eq!(
        (status, body),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"error": "no model published yet"})
        )
    );
    let (status, _) = api
        .json(libsvm("/v1/predict?learner=second", "1:1\n"))
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
}

#[tokio::test]
async fn a_published_model_is_served_everywhere() {
    let api = published();
    let expected = snapshot("primary", 3);
    let (status, model) = api.json(get("/v1/model")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(model["learner"], json!("primary"));
    assert_eq!(model["version"], json!(3));
    assert_eq!(model["samples_seen"], json!(expected.samples_seen));
    assert_eq!(model["updated_at"], json!("2026-11-18T11:06:40.000Z"));
    assert_eq!(model["support"], json!(expected.model.support));
    assert_close(&model["weights"], &expected.model.weights);
    assert!(!expected.model.support.is_empty());
    assert!(model.get("feature_names").is_none(), "no named features");
    let (status, named) = api.json(get("/v1/models/primary")).await;
    assert_eq!((status, &named), (StatusCode::OK, &model));
    let (status, all) = api.json(get("/v1/models")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        all,
        json!({"models": [model, {"learner": "second", "version": 0}]})
    );
    let (status, body) = api.json(get("/readyz")).await;
    assert_eq!((status, body), (StatusCode::OK, json!({"status": "ready"})));
    let (status, body) = api.json(get("/healthz")).await;
    assert_eq!((status, body), (StatusCode::OK, json!({"status": "ok"})));
}

#[tokio::test]
async fn predict_answers_with_the_models_predictions() {
    let api = published();
    let expected = snapshot("primary", 3);
    let data = crate::synth::sparse_stream(4, 12, 3, 4, 0.1, false, 99);
    let block = SampleBlock::from_samples(&data.samples);
    let want: Vec<f64> = block.rows().map(|x| expected.model.predict(x)).collect();
    assert!(want.iter().any(|&p| p != 0.0), "{want:?}");
    // Labels are optional in a prediction body.
    let body: String = data
        .samples
        .iter()
        .map(|s| {
            let line = crate::synth::to_libsvm(std::slice::from_ref(s));
            line.split_once(' ').unwrap().1.to_string()
        })
        .collect();
    for uri in ["/v1/predict", "/v1/predict?learner=primary"] {
        let (status, mut answer) = api.json(libsvm(uri, &body)).await;
        assert_eq!(status, StatusCode::OK);
        assert_close(&answer["predictions"], &want);
        answer.as_object_mut().unwrap().remove("predictions");
        assert_eq!(answer, json!({"model_version": 3, "learner": "primary"}));
    }
    assert!(api.rx.is_empty(), "predictions are not learned from");
}

#[tokio::test]
async fn metrics_are_prometheus_text_with_the_learner_gauges() {
    let api = published();
    api.send(get("/healthz")).await;
    let (status, headers, body) = api.send(get("/metrics")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        headers.get(header::CONTENT_TYPE).unwrap(),
        "text/plain; version=0.0.4"
    );
    let text = String::from_utf8(body.to_vec()).unwrap();
    assert!(
        text.contains("# TYPE thresher_model_version gauge"),
        "{text}"
    );
    assert_eq!(
        api.metric("thresher_model_version{learner=\"primary\"}")
            .await,
        3.0
    );
    let support = snapshot("primary", 3).model.support.len() as f64;
    assert_eq!(
        api.metric("thresher_support_size{learner=\"primary\"}")
            .await,
        support
    );
    // The request before was timed under its route.
    assert!(
        text.lines().any(
            |l| l.starts_with("thresher_http_request_duration_seconds_count")
                && l.contains("route=\"/healthz\"")
                && l.ends_with(" 1")
        ),
        "{text}"
    );
}

#[tokio::test]
async fn an_unknown_route_is_404() {
    let api = published();
    // A regression test: unknown routes answered 404 with an empty body.
    let (status, body) = api.json(get("/v2/model")).await;
    assert_eq!(
        (status, body),
        (
            StatusCode::NOT_FOUND,
            json!({"error": "no route for GET /v2/model; see the API in the README"})
        )
    );
    let (status, _, _) = api.send(get("/v1/samples")).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
}

mod openapi;

#[tokio::test]
async fn the_history_serves_one_point_per_publication_and_drops_the_oldest() {
    let config = Config::defaults();
    let metrics = Metrics::new();
    let cell = Arc::new(ModelCell::new("primary", None).with_history(3, 100, &metrics));
    let api = api(vec![cell.clone()], 8, 1000);
    let (status, body) = api.json(get("/v1/history")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["learner"], "primary");
    assert_eq!(body["capacity"], 3);
    assert_eq!(body["points"], json!([]), "nothing published yet");
    assert_eq!(
        body["interval_ms"],
        config.snapshot_interval.as_millis() as u64
    );

    let learner: crate::learner::publish::SharedLearner = Arc::new(parking_lot::Mutex::new(build(
        &config.learners[0],
        100,
        None,
    )));
    let data = crate::synth::sparse_stream(50, 12, 3, 4, 0.1, false, 7);
    for chunk in data.samples.chunks(10) {
        learner.lock().insert_samples(chunk);
        learner.lock().step();
        assert!(crate::learner::publish::publish(
            &learner,
            &cell,
            &api.state.metrics
        ));
    }
    let (_, body) = api.json(get("/v1/history?learner=primary")).await;
    let points = body["points"].as_array().unwrap();
    let versions: Vec<u64> = points
        .iter()
        .map(|p| p["version"].as_u64().unwrap())
        .collect();
    assert_eq!(versions, [3, 4, 5], "the ring keeps the newest 3 of 5");
    let last = cell.get().unwrap();
    let p = &points[2];
    let c = last.model.certificate;
    assert_close(
        &json!([p["primal"], p["dual"], p["gap"]]),
        &[c.primal, c.dual, c.gap],
    );
    assert_eq!(p["support_size"], last.model.support.len());
    assert_eq!(p["samples_seen"], 50);
    assert_eq!(p["window_capacity"], 100);
    assert_eq!(
        api.metric("thresher_history_points_dropped_total{learner=\"primary\"}")
            .await,
        2.0
    );
    let (_, body) = api.json(get("/v1/history?since=4")).await;
    assert_eq!(body["points"].as_array().unwrap().len(), 1);
    assert_eq!(body["points"][0]["version"], 5);
}

#[tokio::test]
async fn the_history_of_an_unknown_learner_is_404_and_a_bad_since_400() {
    let api = published();
    let (status, body) = api.json(get("/v1/history?learner=nobody")).await;
    assert_eq!(
        (status, body),
        (
            StatusCode::NOT_FOUND,
            json!({"error": "no learner named \"nobody\""})
        )
    );
    for (query, message) in [
        ("since=-1", "since must be a model version"),
        ("since=abc", "query string"),
        ("since=1.5", "query string"),
        // Above the documented int64 range.
        ("since=9223372036854775808", "query string"),
    ] {
        let (status, body) = api.json(get(&format!("/v1/history?{query}"))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert!(
            body["error"].as_str().unwrap().contains(message),
            "{query}: {body}"
        );
    }
}

#[tokio::test]
async fn the_status_page_is_html_that_loads_nothing_from_elsewhere() {
    let api = unpublished();
    let (status, headers, body) = api.send(get("/")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        headers.get(header::CONTENT_TYPE).unwrap(),
        "text/html; charset=utf-8"
    );
    let csp = headers
        .get(header::CONTENT_SECURITY_POLICY)
        .unwrap()
        .to_str()
        .unwrap();
    assert!(csp.contains("default-src 'none'") && csp.contains("connect-src 'self'"));
    assert!(csp.contains("form-action 'none'"), "{csp}");
    let page = String::from_utf8(body.to_vec()).unwrap();
    assert!(page.starts_with("<!doctype html>"));
    assert!(page.contains("/v1/history?learner=") && page.contains("Authorization"));
}
