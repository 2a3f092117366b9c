//! The HTTP API (axum): routes, handlers and the one place errors become statuses ([`ApiError`]).
//!
//! | route | |
//! | --- | --- |
//! | `POST /v1/samples` | LIBSVM (`text/plain`), JSON lines (`application/x-ndjson`) or a JSON array (`application/json`) → `202 {"accepted": n}` |
//! | `GET /v1/model` | the primary learner's snapshot |
//! | `GET /v1/models`, `GET /v1/models/{name}` | every learner's snapshot / one, or a multi-class learner's ([`multiclass`]) |
//! | `POST /v1/predict[?learner=name]` | same bodies, label optional → `{"predictions": [...], "model_version": v}`, or classes and scores (`predict.rs`) |
//! | `GET /metrics` | Prometheus text format |
//! | `GET /healthz`, `GET /readyz` | alive / ready once a model is published (and passed the publish gate) or restored and while checkpoints succeed |
//! | `GET /openapi.json` | the OpenAPI 3.1 document of all of these ([`openapi`]) |
//! | `GET /` | the status page ([`status`]): one self-contained HTML document, charts drawn in the browser |
//! | `GET /v1/history[?learner=name][&since=version]` | the scalars of a learner's last published snapshots (its history ring) |
//!
//! With tokens configured, every route but the health checks, this document and the status page (which
//! holds no data: its own requests carry the token) needs a bearer token ([`auth`]).
//!
//! The API knows learners only through their published snapshots, and samples only through ingest's
//! HTTP source ([`crate::ingest::source::http`]), which reads, parses and admits request bodies; it
//! never touches solver state. What this module adds is the route and the status: a stalled body is
//! 408, one over the limit 413, a full queue 503 with `Retry-After`, each error mapped once, in
//! [`ApiError`].

use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::rejection::QueryRejection;
use axum::extract::{DefaultBodyLimit, MatchedPath, Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Extension;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::config::Config;
use crate::ingest::batch::{FeatureDictionary, FeatureKind};
use crate::ingest::labels::LabelStore;
use crate::ingest::source::http::HttpSource;
use crate::ingest::{AdmitError, BatchError, BodyError, HttpIngestError};
use crate::learner::publish::{rfc3339, set_gauges, ModelCell, Snapshot};
use crate::metrics::Metrics;

pub mod auth;
mod labels;
pub mod multiclass;
mod predict;
pub mod status;

/// Seconds a client should wait after a 503 for a full queue.
pub const RETRY_AFTER_SECONDS: u64 = 1;

/// Everything the handlers share.
pub struct AppState {
    pub cells: Vec<Arc<ModelCell>>,
    pub metrics: Metrics,
    /// Request bodies: read, parsed and admitted by ingest's HTTP source (which also holds the
    /// feature dictionary and the door to the learners).
    pub ingest: Arc<HttpSource>,
    /// `snapshot.interval_ms`: how often the status page asks for new points.
    pub snapshot_interval: std::time::Duration,
    /// `snapshot.history_page_points`: most points one `GET /v1/history` response holds.
    pub history_page_points: usize,
    /// The cluster membership, when the NATS source is on (`GET /v1/cluster`).
    pub cluster: Option<Arc<crate::cluster::ClusterView>>,
    /// Predicted samples waiting for a late label (`POST /v1/predict` with ids, `POST /v1/labels`).
    pub labels: Arc<LabelStore>,
    /// The multi-class learners (`classes = C`), each over its classes' cells ([`multiclass`]).
    pub groups: Vec<multiclass::Group>,
}

impl AppState {
    /// The state of the HTTP front: the learners' `cells`, request bodies read by `ingest`, the
    /// status page's cadence and the history page's size from `config`, no cluster view, and a label
    /// store in memory.
    pub fn new(
        config: &Config,
        cells: Vec<Arc<ModelCell>>,
        metrics: Metrics,
        ingest: HttpSource,
    ) -> AppState {
        let names = cells.iter().map(|c| c.name.clone()).collect();
        let labels = LabelStore::new(config.labels, names, metrics.labels.clone());
        AppState {
            groups: multiclass::groups(config, &cells),
            labels: Arc::new(labels),
            cells,
            metrics,
            ingest: Arc::new(ingest),
            snapshot_interval: config.snapshot_interval,
            history_page_points: config.history_page_points,
            cluster: None,
        }
    }
}

/// Errors a handler returns; each maps to one status here and nowhere else.
#[derive(Debug)]
pub enum ApiError {
    Invalid(BatchError),
    /// A request body not read: 415, 413, 408 (stalled) or 400.
    Body(BodyError),
    QueueFull,
    /// The write-ahead log refused the batch (full or failing): 503 with `Retry-After`.
    NotLogged(AdmitError),
    ShuttingDown,
    NoModel,
    UnknownLearner(String),
    BadRequest(String),
    /// No route has this path (method and path).
    NoRoute(String),
    /// No bearer token (`presented: false`) or one that is not configured.
    Unauthorized {
        presented: bool,
    },
    /// A configured token without the scope the route needs.
    Forbidden(auth::Scope),
    /// `GET /v1/cluster` on a daemon without the NATS source.
    NoCluster,
    /// The label store's journal could not be written: 503.
    LabelStore(String),
    /// The membership bucket is not open yet or cannot be read.
    ClusterUnavailable(String),
}

/// The `WWW-Authenticate` challenge of a 401 (RFC 6750).
pub const AUTH_CHALLENGE: &str = "Bearer realm=\"thresher\"";

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, body) = match self {
            ApiError::Invalid(e) => (
                StatusCode::BAD_REQUEST,
                json!({"error": e.message, "line": e.line}),
            ),
            ApiError::Body(e @ BodyError::Stalled(_)) => {
                // The rest of the body will not be read: the connection cannot carry another request.
                return with_header(
                    StatusCode::REQUEST_TIMEOUT,
                    e.to_string(),
                    header::CONNECTION,
                    "close",
                );
            }
            ApiError::Body(e @ BodyError::Busy { .. }) => {
                return with_header(
                    StatusCode::SERVICE_UNAVAILABLE,
                    e.to_string(),
                    header::RETRY_AFTER,
                    &RETRY_AFTER_SECONDS.to_string(),
                );
            }
            ApiError::Body(e) => {
                let status = match e {
                    BodyError::UnsupportedMediaType(_) | BodyError::UnsupportedEncoding(_) => {
                        StatusCode::UNSUPPORTED_MEDIA_TYPE
                    }
                    BodyError::TooLarge { .. } | BodyError::OverBudget { .. } => {
                        StatusCode::PAYLOAD_TOO_LARGE
                    }
                    BodyError::Busy { .. } => StatusCode::SERVICE_UNAVAILABLE,
                    BodyError::Stalled(_) | BodyError::Unreadable(_) | BodyError::ClientGone => {
                        StatusCode::BAD_REQUEST
                    }
                };
                (status, json!({"error": e.to_string(), "line": null}))
            }
            ApiError::QueueFull | ApiError::NotLogged(_) => {
                let message = match &self {
                    ApiError::NotLogged(e) => e.to_string(),
                    _ => "ingest queue is full; retry later".to_string(),
                };
                let mut r = (
                    StatusCode::SERVICE_UNAVAILABLE,
                    Json(json!({"error": message, "line": null})),
                )
                    .into_response();
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
                return r;
            }
            ApiError::ShuttingDown => (
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"error": "shutting down"}),
            ),
            ApiError::NoModel => (
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"error": "no model published yet"}),
            ),
            ApiError::UnknownLearner(n) => (
                StatusCode::NOT_FOUND,
                json!({"error": format!("no learner named {n:?}")}),
            ),
            ApiError::BadRequest(m) => (StatusCode::BAD_REQUEST, json!({"error": m, "line": null})),
            ApiError::LabelStore(m) => (
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"error": format!("the prediction was not kept for late labels: {m}"), "line": null}),
            ),
            ApiError::NoCluster => (
                StatusCode::NOT_FOUND,
                json!({"error": "this daemon runs alone: nats.url is not set", "line": null}),
            ),
            ApiError::ClusterUnavailable(m) => (
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"error": format!("cluster membership unavailable: {m}"), "line": null}),
            ),
            ApiError::NoRoute(r) => (
                StatusCode::NOT_FOUND,
                json!({"error": format!("no route for {r}; see the API in the README")}),
            ),
            ApiError::Unauthorized { presented } => {
                let (message, challenge) = if presented {
                    (
                        "the bearer token is not valid",
                        format!("{AUTH_CHALLENGE}, error=\"invalid_token\""),
                    )
                } else {
                    (
                        "authentication required: send Authorization: Bearer TOKEN",
                        AUTH_CHALLENGE.to_string(),
                    )
                };
                return with_header(
                    StatusCode::UNAUTHORIZED,
                    message.to_string(),
                    header::WWW_AUTHENTICATE,
                    &challenge,
                );
            }
            ApiError::Forbidden(scope) => {
                return with_header(
                    StatusCode::FORBIDDEN,
                    format!(
                        "this token lacks the {} scope this route needs",
                        scope.name()
                    ),
                    header::WWW_AUTHENTICATE,
                    &format!(
                        "{AUTH_CHALLENGE}, error=\"insufficient_scope\", scope=\"{}\"",
                        scope.name()
                    ),
                );
            }
        };
        (status, Json(body)).into_response()
    }
}

/// An error body (`{"error", "line": null}`) with one response header (a header value that is not
/// valid text is left out rather than failing the response).
fn with_header(
    status: StatusCode,
    message: String,
    name: header::HeaderName,
    value: &str,
) -> Response {
    let mut r = (status, Json(json!({"error": message, "line": null}))).into_response();
    if let Ok(value) = HeaderValue::from_str(value) {
        r.headers_mut().insert(name, value);
    }
    r
}

impl From<BodyError> for ApiError {
    fn from(e: BodyError) -> ApiError {
        ApiError::Body(e)
    }
}

impl From<AdmitError> for ApiError {
    fn from(e: AdmitError) -> ApiError {
        match e {
            AdmitError::QueueFull => ApiError::QueueFull,
            AdmitError::ShuttingDown => ApiError::ShuttingDown,
            AdmitError::LogFull | AdmitError::LogFailed => ApiError::NotLogged(e),
            AdmitError::Invalid(e) => ApiError::Invalid(e),
        }
    }
}

impl From<HttpIngestError> for ApiError {
    fn from(e: HttpIngestError) -> ApiError {
        match e {
            HttpIngestError::Body(e) => e.into(),
            HttpIngestError::Invalid(e) => ApiError::Invalid(e),
            HttpIngestError::Refused(e) => e.into(),
        }
    }
}

/// The router over `state`, with the body limit and the per-route latency histogram.
pub fn router(state: Arc<AppState>, body_limit: usize, authenticated: bool) -> Router {
    // Without tokens ([`auth::protect`] adds no layer) the document lists "no credentials" beside
    // `bearer`, so a client generated from it works against either daemon.
    let openapi_doc = OpenApiJson(Bytes::from(
        serde_json::to_vec(&openapi::document(&state.ingest.rules, authenticated))
            .expect("the document serialises"),
    ));
    let routes = Router::new()
        .route("/v1/samples", post(post_samples))
        .route("/v1/model", get(get_model))
        .route("/v1/models", get(get_models))
        .route("/v1/models/:name", get(get_named_model))
        .route("/v1/cluster", get(get_cluster))
        .route("/v1/predict", post(predict::predict))
        .route("/v1/labels", post(labels::post_labels))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/openapi.json", get(openapi_json))
        .route("/readyz", get(readyz))
        .route("/", get(status::page))
        .route("/v1/history", get(history))
        .fallback(
            |method: axum::http::Method, uri: axum::http::Uri| async move {
                ApiError::NoRoute(format!("{method} {}", uri.path()))
            },
        )
        .layer(middleware::from_fn_with_state(state.clone(), time_requests))
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(Extension(BodyLimit(body_limit)))
        .layer(Extension(openapi_doc))
        .with_state(state);
    // Outside the routes, so the 405 it rewrites already carries the `Allow` header axum adds.
    Router::new()
        .fallback_service(routes)
        .layer(middleware::from_fn(method_not_allowed_body))
}

/// axum answers a known path asked with another method with an empty 405 and its `Allow` header:
/// this gives that answer the JSON error body every other error has, naming the allowed methods.
async fn method_not_allowed_body(req: Request, next: Next) -> Response {
    let (method, path) = (req.method().clone(), req.uri().path().to_string());
    let response = next.run(req).await;
    if response.status() != StatusCode::METHOD_NOT_ALLOWED {
        return response;
    }
    let allow = response.headers().get(header::ALLOW).cloned();
    let allowed = allow
        .as_ref()
        .and_then(|a| a.to_str().ok())
        .unwrap_or("")
        .to_string();
    let message = format!("{method} is not allowed on {path}; allowed: {allowed}");
    let mut r = (
        StatusCode::METHOD_NOT_ALLOWED,
        Json(json!({"error": message, "line": null})),
    )
        .into_response();
    if let Some(allow) = allow {
        r.headers_mut().insert(header::ALLOW, allow);
    }
    r
}

async fn time_requests(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |p| p.as_str())
        .to_string();
    let method = req.method().to_string();
    let start = Instant::now();
    let response = next.run(req).await;
    state
        .metrics
        .request_duration
        .with_label_values(&[&route, &method])
        .observe(start.elapsed().as_secs_f64());
    response
}

/// `server.body_limit_bytes`, for the handlers that read their bodies themselves ([`HttpSource::read`]).
#[derive(Debug, Clone, Copy)]
struct BodyLimit(usize);

/// Ingests a batch, all or nothing.
#[utoipa::path(post, path = "/v1/samples", tag = "ingest",
    request_body(description = "Samples to learn from, all valid or none kept", content(
        (openapi::Libsvm = "text/plain"),
        (Vec<openapi::SampleObject> = "application/json"),
        (Vec<openapi::SampleObject> = "application/x-ndjson"),
    )),
    responses(
        (status = 202, description = "Every sample entered the ingest queue", body = openapi::Accepted),
        (status = 400, description = "An invalid sample (its `line`) or an unreadable body; nothing from the body is kept", body = openapi::ErrorBody),
        (status = 413, description = "Body over `server.body_limit_bytes`", body = openapi::ErrorBody),
        (status = 415, description = "Content-Type not one of the three formats", body = openapi::ErrorBody),
        openapi::WriteAuth,
        (status = 503, description = "The ingest queue is full (retry after `Retry-After` seconds) or the daemon is shutting down; nothing kept", body = openapi::ErrorBody,
            headers(("Retry-After" = u64, description = "seconds, when the queue is full"))),
    ),
    security(("bearer" = ["write"])),
)]
async fn post_samples(
    State(state): State<Arc<AppState>>,
    Extension(BodyLimit(limit)): Extension<BodyLimit>,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let n = state.ingest.ingest(&headers, body, limit).await?;
    Ok((StatusCode::ACCEPTED, Json(json!({"accepted": n}))))
}

/// A snapshot as served: the model JSON plus learner, version, counters and (with named features) names.
///
/// In a cluster (`node` set) the body names the node and the model's scope: `"global"` for a cut of
/// the global model (certified over the union of the listed nodes' windows, the same on every node),
/// `"node"` for a model learned on this node's shard alone (`docs/cluster.md`).
///
/// With a publish gate, `publish` holds `max_relative_gap` and the latest candidate the gate
/// withheld since this model was served (`null` if none): the served model is the last one that passed.
pub fn snapshot_json(
    s: &Snapshot,
    dictionary: &FeatureDictionary,
    node: Option<&str>,
    cell: &ModelCell,
) -> Value {
    let mut v = serde_json::to_value(&s.model).expect("a model serialises");
    let o = v.as_object_mut().expect("a model is an object");
    events_json(o, cell);
    o.insert("learner".into(), json!(s.learner));
    o.insert("version".into(), json!(s.version));
    o.insert("samples_seen".into(), json!(s.samples_seen));
    o.insert("window_samples".into(), json!(s.window_samples));
    o.insert("updated_at".into(), json!(rfc3339(s.updated_at)));
    o.insert("progressive_loss".into(), json!(s.progressive_loss));
    if !dictionary.is_empty() {
        o.insert(
            "feature_names".into(),
            json!(dictionary.names_of(&s.model.support)),
        );
    }
    // Hashed names: the name last seen at each support index, once the daemon takes names.
    if let Some(h) = dictionary
        .hashed()
        .filter(|_| dictionary.kind() == FeatureKind::Names)
    {
        o.insert("feature_names".into(), json!(h.names_of(&s.model.support)));
        o.insert(
            "feature_names_collided".into(),
            json!(h.collided_of(&s.model.support)),
        );
        o.insert("feature_hashing".into(), json!(h.hashing()));
    }
    if let Some(node) = node {
        o.insert("node".into(), json!(node));
        let scope = if s.model.cluster.is_some() {
            "global"
        } else {
            "node"
        };
        o.insert("scope".into(), json!(scope));
    }
    v
}

/// The cell's publish gate (`publish`), drift alarms (`drift`) and forgetting (`forgetting`), when it
/// has them.
fn events_json(o: &mut serde_json::Map<String, Value>, cell: &ModelCell) {
    if let Some(g) = cell.gate() {
        o.insert("publish".into(), json!(g));
    }
    if let Some(d) = cell.drift() {
        o.insert("drift".into(), json!(d));
    }
    if let Some(h) = cell.half_life_samples() {
        o.insert("forgetting".into(), json!({ "half_life_samples": h }));
    }
}

/// This node's name in a cluster.
fn node_of(state: &AppState) -> Option<&str> {
    state.cluster.as_ref().map(|c| c.node.as_str())
}

fn find_cell<'a>(state: &'a AppState, name: Option<&str>) -> Result<&'a Arc<ModelCell>, ApiError> {
    match name {
        None => Ok(&state.cells[0]),
        Some(n) => state
            .cells
            .iter()
            .find(|c| c.name == n)
            .ok_or_else(|| ApiError::UnknownLearner(n.into())),
    }
}

/// A cell's served body: rendered once per published snapshot, then cloned (a reference count).
fn model_response(state: &AppState, cell: &ModelCell) -> Result<Response, ApiError> {
    let body = cell
        .body(|s| {
            let json = snapshot_json(s, &state.ingest.dictionary, node_of(state), cell);
            serde_json::to_vec(&json)
                .expect("a snapshot serialises")
                .into()
        })
        .ok_or(ApiError::NoModel)?;
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// The primary (first configured) learner's model.
#[utoipa::path(get, path = "/v1/model", tag = "models",
    responses(
        (status = 200, description = "The latest published model", body = openapi::ModelSnapshotDoc),
        openapi::ReadAuth,
        (status = 503, description = "No model published yet", body = openapi::ErrorBody),
    ),
    security(("bearer" = ["read"])),
)]
async fn get_model(State(state): State<Arc<AppState>>) -> Result<Response, ApiError> {
    multiclass::target_response(&state, multiclass::find_target(&state, None)?)
}

/// One learner's model.
#[utoipa::path(get, path = "/v1/models/{name}", tag = "models",
    params(("name" = String, Path, description = "a learner's name (`learner.name`)", example = "primary")),
    responses(
        (status = 200, description = "The learner's latest published model", body = openapi::ModelSnapshotDoc),
        (status = 400, description = "The path segment is not valid UTF-8", body = openapi::ErrorBody),
        openapi::ReadAuth,
        (status = 404, description = "No learner has this name", body = openapi::ErrorBody),
        (status = 503, description = "The learner has not published yet", body = openapi::ErrorBody),
    ),
    security(("bearer" = ["read"])),
)]
async fn get_named_model(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    multiclass::target_response(&state, multiclass::find_target(&state, Some(&name))?)
}

/// The nodes sharing this daemon's NATS stream: each live member's learners (published version,
/// samples seen, window samples), build and the age of its last announcement (`crate::cluster`); and,
/// per learner of the global model, the latest part of its partial sums this node received from each
/// node, with its cut, window size and age.
#[utoipa::path(get, path = "/v1/cluster", tag = "cluster",
    responses(
        (status = 200, description = "The live members, by node name", body = openapi::Cluster),
        openapi::ReadAuth,
        (status = 404, description = "The daemon runs alone (`nats.url` is not set)", body = openapi::ErrorBody),
        (status = 503, description = "The membership bucket is not reachable yet", body = openapi::ErrorBody),
    ),
    security(("bearer" = ["read"])),
)]
async fn get_cluster(State(state): State<Arc<AppState>>) -> Result<Json<Value>, ApiError> {
    let view = state.cluster.as_ref().ok_or(ApiError::NoCluster)?;
    let membership = view
        .joined()
        .ok_or_else(|| ApiError::ClusterUnavailable("not connected to NATS yet".into()))?;
    let members = tokio::time::timeout(std::time::Duration::from_secs(5), membership.members())
        .await
        .map_err(|_| ApiError::ClusterUnavailable("NATS did not answer within 5 s".into()))?
        .map_err(|e| ApiError::ClusterUnavailable(e.to_string()))?;
    Ok(Json(json!({
        "node": membership.node,
        "ttl_s": membership.ttl.as_secs(),
        "nodes": members,
        "partials": view.partials(),
    })))
}

/// Every learner's model (version 0 and no model for one that has not published).
#[utoipa::path(get, path = "/v1/models", tag = "models",
    responses(
        (status = 200, description = "Every learner, in configuration order", body = openapi::Models),
        openapi::ReadAuth,
    ),
    security(("bearer" = ["read"])),
)]
async fn get_models(State(state): State<Arc<AppState>>) -> Json<Value> {
    let models: Vec<Value> = state
        .cells
        .iter()
        .map(|c| match c.get() {
            Some(s) => snapshot_json(&s, &state.ingest.dictionary, node_of(&state), c),
            None => {
                let mut v = json!({"learner": c.name, "version": 0});
                events_json(v.as_object_mut().expect("an object"), c);
                v
            }
        })
        .collect();
    let mut out = json!({"models": models});
    if state.labels.config().capacity > 0 {
        out["labels"] = state.labels.summary();
    }
    if !state.groups.is_empty() {
        out["multiclass"] = state.groups.iter().map(multiclass::entry).collect();
    }
    Json(out)
}

#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct HistoryQuery {
    /// A learner's name; the primary learner if absent.
    learner: Option<String>,
    /// Only points of snapshots with a version above this one. (`i64`: the document's integers are
    /// `int64`, so a larger number is refused as it is documented.)
    #[param(minimum = 0)]
    since: Option<i64>,
}

/// The scalars of a learner's last published snapshots, oldest first: the history ring of
/// `snapshot.history_points` points (a full ring drops its oldest), empty before the first model. One
/// response holds at most `snapshot.history_page_points` points, the oldest after `since`; `more`
/// says later ones are left.
#[utoipa::path(get, path = "/v1/history", tag = "models",
    params(HistoryQuery),
    responses(
        (status = 200, description = "The learner's history ring, oldest first", body = openapi::History),
        (status = 400, description = "A query parameter is not valid", body = openapi::ErrorBody),
        openapi::ReadAuth,
        (status = 404, description = "No learner has this name", body = openapi::ErrorBody),
    ),
    security(("bearer" = ["read"])),
)]
async fn history(
    State(state): State<Arc<AppState>>,
    query: Result<Query<HistoryQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let since = u64::try_from(q.since.unwrap_or(0)).map_err(|_| {
        ApiError::BadRequest("since must be a model version, 0 or more".to_string())
    })?;
    let cell = find_cell(&state, q.learner.as_deref())?.clone();
    let (page, interval_ms) = (
        state.history_page_points,
        state.snapshot_interval.as_millis() as u64,
    );
    // A page is copied and serialised on the blocking pool, not on the read thread that serves the
    // health checks and models.
    let body = tokio::task::spawn_blocking(move || {
        let (points, more) = cell.history_page(since, page);
        serde_json::to_vec(&json!({
            "learner": cell.name,
            "capacity": cell.history_capacity(),
            "interval_ms": interval_ms,
            "now": crate::learner::publish::unix_now(),
            "points": points,
            "more": more,
        }))
        .expect("a history page serialises")
    })
    .await
    .map_err(|e| ApiError::BadRequest(format!("the history could not be built: {e}")))?;
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// Prometheus metrics.
#[utoipa::path(get, path = "/metrics", tag = "status",
    responses(
        (status = 200, description = "Prometheus text exposition format 0.0.4", body = openapi::PrometheusText, content_type = "text/plain"),
        openapi::ReadAuth,
    ),
    security(("bearer" = ["read"])),
)]
async fn metrics(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    for cell in &state.cells {
        set_gauges(cell, &state.metrics);
    }
    state.ingest.admission.set_gauges();
    state.ingest.set_gauges();
    let dictionary = &state.ingest.dictionary;
    state
        .metrics
        .set_feature_names(dictionary.len(), dictionary.refused());
    if let Some(h) = dictionary.hashed() {
        state
            .metrics
            .set_hashed_names(h.collisions(), h.evictions());
    }
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
}

/// Liveness: answers while the process runs.
#[utoipa::path(get, path = "/healthz", tag = "status",
    responses((status = 200, description = "Alive", body = openapi::Status)),
    security(()),
)]
async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// This document.
#[utoipa::path(get, path = "/openapi.json", tag = "status",
    responses((status = 200, description = "The OpenAPI 3.1 document of this API", content_type = "application/json")),
    security(()),
)]
async fn openapi_json(Extension(doc): Extension<OpenApiJson>) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], doc.0).into_response()
}

/// The served document, rendered once when the router is built.
#[derive(Clone)]
struct OpenApiJson(Bytes);

/// Readiness: a model is published or restored, and checkpoints succeed.
#[utoipa::path(get, path = "/readyz", tag = "status",
    responses(
        (status = 200, description = "A model is published", body = openapi::Status),
        (status = 503, description = "No learner has published yet, or checkpoints fail (the reason is given)", body = openapi::Status),
    ),
    security(()),
)]
async fn readyz(State(state): State<Arc<AppState>>) -> (StatusCode, Json<Value>) {
    if let Some(reason) = state.ingest.admission.persistence_failure() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": format!("not ready: checkpoints are failing: {reason}")})),
        )
    } else if state.cells.iter().any(|c| c.get().is_some()) {
        (StatusCode::OK, Json(json!({"status": "ready"})))
    } else if let Some((name, g, w)) = state.cells.iter().find_map(|c| {
        let g = c.gate()?;
        let w = g.candidate.clone()?;
        Some((&c.name, g, w))
    }) {
        let status = format!(
            "not ready: no model has passed the publish gate yet (learner {name}: latest relative gap {:.3e} > publish.max_relative_gap = {:e}, {} withheld)",
            w.relative_gap, g.max_relative_gap, w.withheld_total
        );
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": status})),
        )
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "waiting for a first model"})),
        )
    }
}

pub mod openapi;

#[cfg(test)]
pub(crate) mod tests;
