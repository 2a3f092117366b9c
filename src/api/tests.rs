//! In-process tests of the HTTP API: the router over a hand-built [`AppState`] (model cells, an
//! [`Admission`] whose queue receiver the test holds), driven with `tower::ServiceExt::oneshot`. They
//! pin the routes' statuses and bodies, and (last section) hold the OpenAPI document to the router.
//! The harness here also drives the request-body tests of `ingest::source::http`.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::body::{to_bytes, Body, Bytes};
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use crossbeam_channel::Receiver;
use serde_json::{json, Value};
use tower::ServiceExt;

use super::{router, AppState};
use crate::config::Config;
use crate::ingest::batch::{FeatureDictionary, Rules};
use crate::ingest::inflight::InflightBytes;
use crate::ingest::source::http::HttpSource;
use crate::ingest::Admission;
use crate::learner::build;
use crate::learner::publish::{ModelCell, Snapshot};
use crate::metrics::Metrics;
use crate::ring::{Batch, SampleBudget};
use crate::sample::SampleBlock;
use crate::sys::WorkerScheduling;

/// The body limit of the test router, bytes.
pub(crate) const LIMIT: usize = 1024;

/// A router over a hand-built state, with the ingest queue's receiving end.
pub(crate) struct Api {
    pub(crate) app: Router,
    pub(crate) state: Arc<AppState>,
    pub(crate) rx: Receiver<Batch>,
}

/// `cells`, a queue of `queue` batches and a budget of `budget` samples; the primary learner's rules.
pub(crate) fn api(cells: Vec<Arc<ModelCell>>, queue: usize, budget: usize) -> Api {
    let config = Config::defaults();
    let metrics = Metrics::new();
    for c in &cells {
        metrics.register_learner(&c.name, config.window_capacity);
    }
    let (tx, rx) = crossbeam_channel::bounded(queue);
    let dictionary = Arc::new(FeatureDictionary::new(config.max_named_features));
    let admission = Arc::new(Admission::new(
        tx,
        SampleBudget::new(budget),
        metrics.clone(),
        dictionary.clone(),
    ));
    let rules = |predict| Rules::new(vec![config.learners[0].loss], config.max_dim, predict);
    let ingest = HttpSource {
        admission,
        dictionary,
        rules: rules(false),
        predict_rules: rules(true),
        metrics: metrics.clone(),
        // The kernel's defaults: the test's blocking-pool threads keep their scheduling.
        worker_scheduling: WorkerScheduling {
            slice_ns: 0,
            yield_interval: std::time::Duration::ZERO,
        },
        body_idle: config.limits.body_idle,
        inflight: InflightBytes::new(config.inflight_bytes, metrics.clone()),
    };
    let state = Arc::new(AppState::new(&config, cells, metrics, ingest));
    Api {
        app: router(state.clone(), LIMIT, false),
        state,
        rx,
    }
}

/// A snapshot of the default learner after a few samples and steps, certified.
pub(crate) fn snapshot(learner: &str, version: u64) -> Snapshot {
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
pub(crate) fn published() -> Api {
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
pub(crate) fn unpublished() -> Api {
    api(vec![Arc::new(ModelCell::new("primary", None))], 8, 1000)
}

pub(crate) fn get(uri: &str) -> Request<Body> {
    Request::get(uri).body(Body::empty()).unwrap()
}

pub(crate) fn post(uri: &str, content_type: &str, body: impl Into<Body>) -> Request<Body> {
    Request::builder()
        .method(Method::POST)
        .uri(uri)
        .header(header::CONTENT_TYPE, content_type)
        .body(body.into())
        .unwrap()
}

pub(crate) fn libsvm(uri: &str, body: &str) -> Request<Body> {
    post(uri, "text/plain", body.to_string())
}

/// `n` good LIBSVM lines.
pub(crate) fn good_lines(n: usize) -> String {
    (0..n)
        .map(|i| format!("{i}.5 1:1 {}:0.5\n", i + 2))
        .collect()
}

impl Api {
    /// Sends `req`; returns the status, the headers and the body.
    pub(crate) async fn send(
        &self,
        req: Request<Body>,
    ) -> (StatusCode, axum::http::HeaderMap, Bytes) {
        let response = self.app.clone().oneshot(req).await.unwrap();
        let (parts, body) = response.into_parts();
        (
            parts.status,
            parts.headers,
            to_bytes(body, 1 << 20).await.unwrap(),
        )
    }

    /// Sends `req`; returns the status and the JSON body.
    pub(crate) async fn json(&self, req: Request<Body>) -> (StatusCode, Value) {
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
    pub(crate) async fn metric(&self, name: &str) -> f64 {
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
    pub(crate) fn drain(&self) -> Vec<usize> {
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
            json!({"models": [{"learner": "primary", "version": 0}], "labels": {
                "capacity": 100000, "ttl_seconds": 86400.0, "samples": 0, "bytes": 0,
                "labels": {"joined": 0, "unknown": 0, "expired": 0, "evicted": 0, "duplicate": 0}}}),
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
        all["models"],
        json!([model, {"learner": "second", "version": 0}])
    );
    assert_eq!(
        all["labels"]["samples"],
        json!(0),
        "the late-label store: {all}"
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

// The OpenAPI document against the router: it parses as OpenAPI 3, every `$ref` resolves, every route
// `router()` registers is documented with the same methods, and every documented operation reaches a
// handler (not the 404 fallback).

/// `(METHOD, /path)` of every `.route(...)` in `api/mod.rs`, axum's `:param` written `{param}`.
fn routes_in_router_source() -> BTreeSet<(String, String)> {
    let source = include_str!("mod.rs");
    let mut routes = BTreeSet::new();
    for chunk in source.split(".route(\"").skip(1) {
        let (path, rest) = chunk.split_once('"').expect("a quoted path");
        let path: String = path
            .split('/')
            .map(|s| match s.strip_prefix(':') {
                Some(p) => format!("{{{p}}}"),
                None => s.to_string(),
            })
            .collect::<Vec<_>>()
            .join("/");
        let methods = rest.split_once(')').expect("route(...)").0;
        for m in ["get", "post", "put", "delete", "patch"] {
            if methods.contains(&format!("{m}(")) {
                routes.insert((m.to_uppercase(), path.clone()));
            }
        }
    }
    routes
}

async fn document() -> Value {
    let api = published();
    let (status, doc) = api.json(get("/openapi.json")).await;
    assert_eq!(status, StatusCode::OK);
    doc
}

fn documented(doc: &Value) -> BTreeSet<(String, String)> {
    let mut ops = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("a path item").keys() {
            ops.insert((method.to_uppercase(), path.clone()));
        }
    }
    ops
}

fn refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(r)) = o.get("$ref") {
                out.push(r.clone());
            }
            o.values().for_each(|x| refs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

#[tokio::test]
async fn the_document_is_openapi_3_and_its_refs_resolve() {
    let doc = document().await;
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."), "{doc}");
    let parsed: utoipa::openapi::OpenApi =
        serde_json::from_value(doc.clone()).expect("an OpenAPI 3 document");
    assert!(!parsed.paths.paths.is_empty());
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(!all.is_empty());
    for r in all {
        let pointer = r.strip_prefix('#').expect("a local $ref");
        assert!(doc.pointer(pointer).is_some(), "{r} does not resolve");
    }
    let schemes = &doc["components"]["securitySchemes"]["bearer"];
    assert_eq!(schemes["type"], "http");
    assert_eq!(schemes["scheme"], "bearer");
}

#[tokio::test]
async fn every_route_is_documented_and_every_operation_is_served() {
    let doc = document().await;
    let served = routes_in_router_source();
    assert!(served.len() >= 9, "{served:?}");
    assert_eq!(documented(&doc), served);
    let api = published();
    for (method, path) in documented(&doc) {
        let uri = path.replace("{name}", "primary");
        let req = Request::builder()
            .method(Method::from_bytes(method.as_bytes()).unwrap())
            .uri(&uri)
            .header(header::CONTENT_TYPE, "text/plain")
            .body(Body::from("1 1:1\n"))
            .unwrap();
        let (status, _, body) = api.send(req).await;
        let text = String::from_utf8_lossy(&body);
        assert!(
            !(status == StatusCode::NOT_FOUND && text.contains("no route")),
            "{method} {uri}: {status} {text}"
        );
    }
}

#[tokio::test]
async fn every_operation_documents_its_errors_and_security() {
    let doc = document().await;
    let op = |m: &str, p: &str| doc["paths"][p][m].clone();
    let statuses = |o: &Value| -> BTreeSet<String> {
        o["responses"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    let samples = op("post", "/v1/samples");
    for s in ["202", "400", "401", "403", "413", "415", "503"] {
        assert!(statuses(&samples).contains(s), "samples lacks {s}");
    }
    let content = samples["requestBody"]["content"].as_object().unwrap();
    let types: BTreeSet<&str> = content.keys().map(String::as_str).collect();
    assert_eq!(
        types,
        BTreeSet::from(["application/json", "application/x-ndjson", "text/plain"])
    );
    assert_eq!(samples["security"][0]["bearer"][0], "write");
    for s in ["200", "400", "404", "413", "415", "503"] {
        assert!(statuses(&op("post", "/v1/predict")).contains(s), "{s}");
    }
    for (m, p) in [
        ("get", "/v1/model"),
        ("get", "/v1/models"),
        ("post", "/v1/predict"),
    ] {
        assert_eq!(op(m, p)["security"][0]["bearer"][0], "read", "{p}");
        assert!(statuses(&op(m, p)).contains("401"), "{p}");
        assert!(statuses(&op(m, p)).contains("403"), "{p}");
    }
    for p in ["/healthz", "/readyz", "/openapi.json"] {
        assert_eq!(op("get", p)["security"], serde_json::json!([{}]), "{p}");
    }
    // No tokens configured: "no credentials" is a listed alternative.
    assert!(samples["security"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!({})));
}

#[tokio::test]
async fn the_libsvm_pattern_admits_what_the_daemon_accepts() {
    let doc = document().await;
    let schema = &doc["components"]["schemas"]["Libsvm"];
    let pattern = schema["pattern"].as_str().unwrap();
    // Default config: squared loss, max_dim 2^24 -> at most 7-digit indices.
    assert!(pattern.contains(r"\+?[0-9]{1,7}:"), "{pattern}");
    let max = doc["components"]["schemas"]["SampleObject"]["oneOf"][0]["properties"]["indices"]
        ["items"]["maximum"]
        .as_u64()
        .unwrap();
    assert_eq!(max, (1 << 24) - 1);
}

/// Cases the contract run (benches/schemathesis.sh) found where the document and the server disagreed:
/// the server is right in each, and the document now says so.
#[tokio::test]
async fn the_document_matches_the_server_on_empty_bodies_null_fields_and_model_entries() {
    let doc = document().await;
    let api = published();
    // `[]` and a body of blank lines are refused: the document asks for at least one sample.
    let (status, _) = api
        .json(post("/v1/samples", "application/json", "[]"))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = api
        .json(post("/v1/predict", "application/json", "[]"))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    for path in ["/v1/samples", "/v1/predict"] {
        let content = &doc["paths"][path]["post"]["requestBody"]["content"];
        assert_eq!(
            content["application/json"]["schema"]["minItems"], 1,
            "{path}"
        );
        assert_eq!(content["application/x-ndjson"]["schema"]["minItems"], 1);
        let pattern = content["text/plain"]["schema"]["pattern"]
            .as_str()
            .or_else(|| doc["components"]["schemas"]["Libsvm"]["pattern"].as_str())
            .unwrap();
        assert!(!pattern.ends_with(")?$"), "{pattern}");
    }
    // `"weight": null` is an absent weight: accepted, and the document allows null.
    let (status, _) = api
        .json(post(
            "/v1/samples",
            "application/x-ndjson",
            "{\"features\": {}, \"label\": 0.0, \"weight\": null}\n",
        ))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let named = &doc["components"]["schemas"]["SampleObject"]["oneOf"][1]["properties"];
    assert_eq!(named["weight"]["anyOf"][1]["type"], "null");
    // `/v1/models` entries are the snapshot itself, not wrapped in a variant name.
    let entry = &doc["components"]["schemas"]["ModelEntry"]["oneOf"];
    assert_eq!(entry[0]["$ref"], "#/components/schemas/ModelSnapshot");
    let (_, models) = api.json(get("/v1/models")).await;
    assert_eq!(models["models"][0]["learner"], "primary");
    assert_eq!(models["models"][1]["version"], 0);
}

/// Every field the server writes in a model, an automatic lambda's record and a cluster cut included,
/// is a property of its schema in the document (a field added to `Model` must be documented).
#[tokio::test]
async fn every_field_of_a_served_model_is_in_its_schema() {
    let doc = document().await;
    let mut snapshot = snapshot("primary", 3);
    snapshot.model.lambda_auto = Some(crate::model::LambdaAuto {
        grid: vec![1e-2, 1e-3],
        live: 1,
        switches: 2,
        losses: vec![0.4, 0.3],
        criterion: "holdout".into(),
        progressive: vec![0.5, 0.4],
        held_out: 120,
        held_out_dropped: 7,
        validation: None,
        folds: None,
        extended: Vec::new(),
        refit: None,
    });
    snapshot.model.cluster = Some(crate::model::ClusterCut {
        cut: 1,
        proposer: "n1".into(),
        nodes: vec!["n1".into()],
        samples: vec![10],
    });
    let mut convergence =
        crate::model::Convergence::new(&snapshot.model.certificate, "stalled", 1e-9, true);
    convergence.empty_model = true;
    snapshot.model.convergence = Some(convergence);
    let api = api(
        vec![Arc::new(crate::learner::publish::ModelCell::new(
            "primary",
            Some(snapshot),
        ))],
        8,
        1000,
    );
    let (status, model) = api.json(get("/v1/models/primary")).await;
    assert_eq!(status, StatusCode::OK);
    let schemas = &doc["components"]["schemas"];
    let resolve = |schema: &Value| -> Value {
        // An optional object is `oneOf [null, $ref]` (or a bare `$ref`).
        let mut found = schema.clone();
        for alternative in schema["oneOf"].as_array().into_iter().flatten() {
            if alternative.get("$ref").is_some() {
                found = alternative.clone();
            }
        }
        match found["$ref"].as_str() {
            Some(r) => schemas[r.trim_start_matches("#/components/schemas/")].clone(),
            None => found,
        }
    };
    let check = |body: &Value, schema: &Value, what: &str| {
        let properties = schema["properties"].as_object().expect(what);
        for key in body.as_object().expect(what).keys() {
            assert!(
                properties.contains_key(key),
                "{what}.{key} is not documented"
            );
        }
    };
    let snapshot_schema = &schemas["ModelSnapshot"];
    check(&model, snapshot_schema, "ModelSnapshot");
    for nested in ["lambda_auto", "cluster", "certificate", "convergence"] {
        assert!(model[nested].is_object(), "{nested}: {model}");
        let schema = resolve(&snapshot_schema["properties"][nested]);
        check(&model[nested], &schema, nested);
    }
    assert_eq!(model["lambda_auto"]["held_out_dropped"], 7);
}
