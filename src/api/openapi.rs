//! The OpenAPI 3.1 document of the HTTP API, served at `GET /openapi.json`.
//!
//! Generated from the code: each handler in `api/mod.rs` carries a `#[utoipa::path]` with its statuses,
//! and the bodies it writes are described by the `ToSchema` types below. The request bodies depend on
//! the running configuration (the largest feature index, the labels the losses take), so
//! [`document`] patches those constraints in from [`Rules`] once, when the router is built; what JSON
//! Schema cannot say (indices strictly increasing, as many values as indices) is in the descriptions.
//!
//! Security: a `bearer` scheme is declared with scopes `read` (models, predict, status) and `write`
//! (samples); `/healthz`, `/readyz`, this document and the status page `/` are open. With `auth = false` every requirement
//! also lists the empty alternative (no credentials), which is what a daemon without tokens enforces.

use serde_json::{json, Value};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{IntoResponses, Modify, OpenApi, ToSchema};

use crate::ingest::batch::Rules;

/// Every error body: a message, and for a rejected sample its 1-based line (array position for a
/// JSON array). `line` is `null` when the error is not about one line.
#[derive(ToSchema)]
#[allow(dead_code)] // a schema, built by the derive only
pub struct ErrorBody {
    /// What was wrong, for a person.
    error: String,
    /// The line of the first invalid sample.
    #[schema(nullable, minimum = 1)]
    line: Option<u64>,
}

/// What a route behind a `read` token answers before it runs: no or an unknown token (401), a token
/// of another scope (403). Listed in each route's `responses` where the codes fall in order.
#[derive(IntoResponses)]
#[allow(dead_code)] // responses, built by the derive only
pub enum ReadAuth {
    #[response(status = 401, description = "Missing or unknown bearer token",
        headers(("WWW-Authenticate" = String, description = "`Bearer`")))]
    Unauthenticated(ErrorBody),
    #[response(status = 403, description = "The token's scope is not `read`")]
    Forbidden(ErrorBody),
}

/// [`ReadAuth`] for the one route behind a `write` token (`POST /v1/samples`).
#[derive(IntoResponses)]
#[allow(dead_code)] // responses, built by the derive only
pub enum WriteAuth {
    #[response(status = 401, description = "Missing or unknown bearer token",
        headers(("WWW-Authenticate" = String, description = "`Bearer`")))]
    Unauthenticated(ErrorBody),
    #[response(status = 403, description = "The token's scope is not `write`")]
    Forbidden(ErrorBody),
}

/// `202` from `POST /v1/samples`: the whole body entered the ingest queue.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct Accepted {
    /// Samples accepted: every sample of the body.
    #[schema(minimum = 1)]
    accepted: u64,
}

/// The primal-dual gap certificate of a model.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct CertificateDoc {
    primal: f64,
    dual: f64,
    /// `primal - dual`, never negative.
    #[schema(minimum = 0)]
    gap: f64,
    /// Samples the objective was evaluated on.
    #[schema(minimum = 0)]
    samples: u64,
}

/// One learner's published model with its certificate and counters.
#[derive(ToSchema)]
#[schema(as = ModelSnapshot)]
#[allow(dead_code)]
pub struct ModelSnapshotDoc {
    learner: String,
    /// Increases with every publication; survives restarts through the checkpoint.
    #[schema(minimum = 1)]
    version: u64,
    format: String,
    #[schema(pattern = "^(squared|huber|hinge|logistic)$")]
    loss: String,
    gamma: Option<f64>,
    solver: String,
    #[schema(minimum = 1)]
    k: u64,
    lambda: f64,
    intercept: f64,
    /// Feature indices of the support, increasing.
    support: Vec<u32>,
    /// The weight of each support index.
    weights: Vec<f64>,
    certificate: CertificateDoc,
    lambda0: Option<f64>,
    lambda1: Option<f64>,
    lambda2: Option<f64>,
    #[schema(minimum = 0)]
    samples_seen: u64,
    #[schema(minimum = 0)]
    window_samples: u64,
    /// RFC 3339, UTC.
    updated_at: String,
    /// Mean loss of each sample before the model learned from it; `null` before any sample.
    #[schema(nullable)]
    progressive_loss: Option<f64>,
    /// The name of each support index (named-feature streams only; `null` for an unnamed index).
    /// With hashed names: the name last seen at the index (`null` until seen since a restart).
    feature_names: Option<Vec<Option<String>>>,
    /// Hashed names: the support indices seen with two different names (colliding names).
    feature_names_collided: Option<Vec<u32>>,
    /// Hashed names: the hash's `bits` and `seed` (`ingest.hash_bits`, `ingest.hash_seed`).
    feature_hashing: Option<FeatureHashingDoc>,
    /// With the NATS source on: this node's name (`nats.node`).
    node: Option<String>,
    /// With the NATS source on: `"global"`, the model of a cut of the cluster's global SDIHT model,
    /// certified over the union of the listed nodes' windows and the same on every node; `"node"`, the
    /// model and certificate are this node's own, over the batches it was delivered.
    #[schema(pattern = "^(global|node)$")]
    scope: Option<String>,
    /// With `scope = "global"`: the cut.
    cluster: Option<ClusterCutDoc>,
    /// With `lambda = "auto"`: the grid, the lambda served, and how the members rank.
    lambda_auto: Option<LambdaAutoDoc>,
    /// Whether the model converged, and if not why.
    convergence: Option<ConvergenceDoc>,
    /// SDIHT: what the polish at publication did (the search's model re-solved on its support over
    /// the window, within a time budget); absent when none ran for this model.
    polish: Option<PolishDoc>,
    /// With a publish gate (`publish.max_relative_gap`): the gate, and the latest model it withheld
    /// since this one was served (this model is the last one that passed).
    publish: Option<crate::learner::publish::GateView>,
    /// With a drift test (`drift.action` not `"off"`): the action, the alarms so far and the latest.
    drift: Option<crate::learner::drift::DriftRecord>,
    /// With forgetting (`window.half_life_samples`): the samples over which a sample's weight halves;
    /// the certificate is the weighted objective's.
    forgetting: Option<ForgettingDoc>,
}

/// Forgetting: a sample's weight halves with every `half_life_samples` newer samples.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ForgettingDoc {
    #[schema(minimum = 1)]
    half_life_samples: u64,
}

/// How hashed feature names get their indices: the low `bits` bits of XXH3-64 of the name with `seed`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct FeatureHashingDoc {
    #[schema(minimum = 1, maximum = 30)]
    bits: u32,
    #[schema(minimum = 0)]
    seed: u64,
}

/// What polishing a model on its own support did: `kept` (its primal was lower and it is the one
/// served, certified against the search's dual), `not_lower`, `too_many_coordinates`,
/// `nothing_to_solve`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct PolishDoc {
    #[schema(
        pattern = "^(kept|not_lower|non_smooth_loss|too_many_coordinates|nothing_to_solve|off)$"
    )]
    outcome: String,
    /// The search's primal (before polishing).
    primal_search: f64,
    /// The polished model's primal, when one was computed.
    primal_polished: Option<f64>,
    #[schema(minimum = 0)]
    iterations: u64,
}

/// Whether a model's relative gap `(P - D) / max(1, |P|)` met the learner's `tol`, and if not why.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ConvergenceDoc {
    /// `relative_gap <= tol`.
    converged: bool,
    /// `converged`; `running` (the learner is still stepping); `stalled` (it idles, its idle
    /// epochs spent without meeting `tol`).
    #[schema(pattern = "^(converged|running|stalled|max_epochs|time_budget|diverged|max_outer)$")]
    reason: String,
    #[schema(minimum = 0)]
    relative_gap: f64,
    #[schema(minimum = 0)]
    tol: f64,
    /// The learner's own model was worse than the empty one over its window: `w = 0` (with the best
    /// intercept for it) is served, certified against the same dual.
    empty_model: Option<bool>,
}

/// The record of an automatic lambda (`lambda = "auto"`).
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct LambdaAutoDoc {
    /// The lambdas tried, largest first.
    grid: Vec<f64>,
    /// Index in `grid` of the lambda served (the model's `lambda`).
    #[schema(minimum = 0)]
    live: u64,
    /// Times the served member changed.
    #[schema(minimum = 0)]
    switches: u64,
    /// Each member's loss by `criterion`, parallel to `grid`.
    losses: Vec<f64>,
    /// `"holdout"`: mean loss of each member's current model on held-out samples; `"progressive"`:
    /// each member's exponentially weighted progressive-validation loss.
    #[schema(pattern = "^(holdout|holdout_error|progressive)$")]
    criterion: String,
    /// Each member's exponentially weighted progressive-validation loss, parallel to `grid`.
    progressive: Option<Vec<f64>>,
    /// Criterion `holdout`: held-out samples in the ring at this certificate.
    #[schema(minimum = 0)]
    held_out: u64,
    /// Criterion `holdout`: held-out samples dropped from the full ring, oldest first.
    #[schema(minimum = 0)]
    held_out_dropped: u64,
}

/// The cut a global model was certified on.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ClusterCutDoc {
    /// The proposer's clock at the proposal, ms since the Unix epoch.
    #[schema(minimum = 0)]
    cut: u64,
    /// The node whose model the cut certifies.
    proposer: String,
    /// The nodes whose windows the certificate covers, in name order.
    nodes: Vec<String>,
    /// Samples in each node's window at the cut, parallel to `nodes`.
    samples: Vec<u64>,
}

/// A learner that has not published yet.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct Unpublished {
    learner: String,
    #[schema(minimum = 0, maximum = 0)]
    version: u64,
    /// With a publish gate: the gate and the latest model it withheld (none has passed yet).
    publish: Option<crate::learner::publish::GateView>,
    /// With a drift test (`drift.action` not `"off"`): the action, the alarms so far and the latest.
    drift: Option<crate::learner::drift::DriftRecord>,
    /// With forgetting (`window.half_life_samples`): the samples over which a sample's weight halves;
    /// the certificate is the weighted objective's.
    forgetting: Option<ForgettingDoc>,
}

/// `GET /v1/models`: every learner, in configuration order.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct Models {
    /// Each a `ModelSnapshot` or, before the learner's first model, an `Unpublished` entry
    /// (`ModelEntry`, set by [`document`]).
    #[schema(value_type = Vec<Object>)]
    models: Vec<()>,
    /// With `labels.capacity` > 0: the late-label store (`capacity`, `ttl_seconds`, the `samples` and
    /// `bytes` waiting, and `labels` received by outcome since the process started).
    #[schema(value_type = Option<Object>)]
    labels: Option<()>,
    /// With multi-class learners (`classes = C`): each one's name, `classes` (their names, or the
    /// indices `0 .. C-1`) and `members` (its classes' learners, `NAME-0` .. `NAME-{C-1}`, listed in
    /// `models`).
    #[schema(value_type = Option<Vec<Object>>)]
    multiclass: Option<()>,
}

/// `POST /v1/predict`: one prediction per sample, in order, and the model that made them.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct Predictions {
    predictions: Vec<f64>,
    #[schema(minimum = 1)]
    model_version: u64,
    learner: String,
    /// With ids (or `remember=true`): each sample's id (`null`: not kept), to send its label to
    /// `POST /v1/labels`.
    ids: Option<Vec<Option<String>>>,
    /// With ids (or `remember=true`): the score `w.x + b` each prediction came from, the one a late
    /// label's progressive loss is charged for.
    scores: Option<Vec<f64>>,
}

/// `POST /v1/predict` of a multi-class learner (`classes = C`): each sample's class, every class's
/// score, and the version of each class's model that scored it.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct MulticlassPredictions {
    /// Each sample's class (its name when the config names the classes, else its index): the one
    /// whose model scores it highest (the first on a tie).
    predictions: Vec<Value>,
    /// Each sample's scores `w_c.x + b_c`, one per class in class order.
    scores: Vec<Vec<f64>>,
    /// The classes: their names (`classes = ["a", ...]`), or the indices `0 .. C-1`.
    classes: Vec<Value>,
    /// The multi-class learner's name.
    learner: String,
    /// The published version of each class's model.
    model_versions: Vec<u64>,
    /// With ids (or `remember=true`): each sample's id (`null`: not kept).
    ids: Option<Vec<Option<String>>>,
}

/// `GET /v1/models/NAME` of a multi-class learner (`classes = C`): its classes' models as one
/// one-vs-rest model, with the sum of their certificates.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct MulticlassModelDoc {
    learner: String,
    #[schema(pattern = "^one-vs-rest$")]
    strategy: String,
    /// The classes: their names (`classes = ["a", ...]`), or the indices `0 .. C-1`.
    classes: Vec<Value>,
    /// The sums of the classes' primals, duals and gaps (the one-vs-rest objective is their sum, so
    /// the summed gap bounds the model's suboptimality), and the summed gap over `max(1, |P|)`.
    certificate: MulticlassCertificateDoc,
    /// The fewest samples any class's learner has learned.
    samples_seen: u64,
    /// The published version of each class's model.
    versions: Vec<u64>,
    /// The `thresher-multiclass/1` model file (`thresher predict --model` reads it): `classes`, and one
    /// binary model per class in `models`.
    #[schema(value_type = Object)]
    model: Value,
    /// Each class's learner (`NAME-c`) as `GET /v1/models/NAME-c` shows it, without its weights and
    /// intercept (they are in `model`).
    #[schema(value_type = Vec<Object>)]
    members: Vec<Value>,
}

/// The summed certificate of a multi-class learner.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct MulticlassCertificateDoc {
    primal: f64,
    dual: f64,
    #[schema(minimum = 0)]
    gap: f64,
    #[schema(minimum = 0)]
    relative_gap: f64,
}

/// One item of `POST /v1/labels`: the label of a sample predicted with `id`.
#[derive(ToSchema)]
#[allow(dead_code)]
#[schema(example = json!({"id": "order-17", "label": 1}))]
pub struct LabelObject {
    /// The id the sample was predicted with (1 to `labels.id_max_bytes` bytes).
    id: String,
    /// Its label, as a sample's (`-1`/`+1` for the classification losses, a class index for
    /// multi-class learners).
    label: f64,
    /// Its weight (finite, > 0; 1 if absent).
    weight: Option<f64>,
}

/// What one label found.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct LabelResult {
    id: String,
    /// `joined` (learned), `unknown` (no such id stored, or labelled already), `expired` (older than
    /// `labels.ttl_seconds`), `evicted` (left the full store), `duplicate` (earlier in this request).
    #[schema(pattern = "^(joined|unknown|expired|evicted|duplicate)$")]
    status: String,
}

/// `POST /v1/labels`: the samples joined and each item's status, in order.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct LabelsAccepted {
    /// Samples learned (entered the ingest queue).
    joined: u64,
    results: Vec<LabelResult>,
}

/// `GET /v1/history`: a learner's history ring, oldest first.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct History {
    learner: String,
    /// Points the ring keeps (`snapshot.history_points`).
    #[schema(minimum = 1)]
    capacity: u64,
    /// `snapshot.interval_ms`: how often a new point may appear.
    #[schema(minimum = 1)]
    interval_ms: u64,
    /// The daemon's clock, Unix seconds (snapshot ages without trusting the client's clock).
    now: f64,
    /// One per published snapshot with a version above `since`, oldest first, at most
    /// `snapshot.history_page_points` of them.
    points: Vec<crate::learner::publish::HistoryPoint>,
    /// The ring holds later points than this page's: ask again with `since` = the last point's version.
    more: bool,
}

/// `GET /v1/cluster`: this node, the membership TTL, and each live member (`node`, `thresher`,
/// `learners` with `name`, `version`, `samples_seen`, `window_samples`, `updated_ms`, `age_s`).
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct Cluster {
    node: String,
    ttl_s: u64,
    #[schema(value_type = Vec<Object>)]
    nodes: Vec<()>,
    /// Per learner of the global model: each node's latest part received here,
    /// `[{"node", "cut", "samples", "age_s"}]`.
    #[schema(value_type = Object)]
    partials: (),
}

/// `GET /healthz`, `GET /readyz`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct Status {
    status: String,
}

/// A sample object (`application/json` array items, `application/x-ndjson` lines), with numeric
/// indices or with named features. Its exact schema is set by [`document`] from the configuration.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct SampleObject {
    label: f64,
}

/// A LIBSVM body (`text/plain`); its pattern is set by [`document`].
#[derive(ToSchema)]
#[schema(value_type = String)]
#[allow(dead_code)]
pub struct Libsvm(String);

/// A `text/plain` Prometheus exposition.
#[derive(ToSchema)]
#[schema(value_type = String)]
#[allow(dead_code)]
pub struct PrometheusText(String);

/// The name of the security scheme, as handlers' `security(...)` give it.
pub const BEARER: &str = "bearer";

struct SecurityAddon;

impl Modify for SecurityAddon {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "`Authorization: Bearer TOKEN`; a token has scope `read` (models, predict, \
                         status) or `write` (samples). 401 with `WWW-Authenticate` for a missing or \
                         unknown token, 403 for a token of the wrong scope.",
                    ))
                    .build(),
            ),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "thresher",
        description = "Streaming learner of k-sparse linear models; each published model carries a \
                       primal-dual gap certificate. Every error body is JSON `{\"error\", \"line\"}`; \
                       a path no route serves answers 404 with such a body.",
    ),
    paths(
        super::post_samples,
        super::get_model,
        super::get_models,
        super::get_named_model,
        super::get_cluster,
        predict_doc,
        labels_doc,
        super::metrics,
        super::healthz,
        super::readyz,
        super::openapi_json,
        super::status::page,
        super::history,
    ),
    components(schemas(ErrorBody, Accepted, ModelSnapshotDoc, MulticlassModelDoc, MulticlassCertificateDoc, MulticlassPredictions, Unpublished, Models, Cluster, Predictions, LabelObject, LabelResult, LabelsAccepted, Status, SampleObject, History, crate::learner::publish::GateView, crate::learner::publish::Withheld, crate::learner::drift::DriftRecord, crate::learner::drift::DriftEvent)),
    modifiers(&SecurityAddon),
)]
struct ApiDoc;

/// Predictions of a learner's current model, or a multi-class learner's classes and scores; labels
/// are optional and unknown feature names are ignored.
#[utoipa::path(post, path = "/v1/predict", tag = "models",
    params(("learner" = Option<String>, Query, description = "a learner's or a multi-class learner's name; the first table's if absent"),
           ("remember" = Option<bool>, Query, description = "keep every sample for a late label, making an id for each without one")),
    request_body(description = "Samples to predict, labels optional", content(
        (String = "text/plain"),
        (Vec<SampleObject> = "application/json"),
        (Vec<SampleObject> = "application/x-ndjson"),
    )),
    responses(
        (status = 200, description = "One prediction per sample, in order", body = Predictions),
        (status = 400, description = "An invalid sample (its `line`) or an unreadable body; nothing from the body is kept", body = ErrorBody),
        (status = 413, description = "Body over `server.body_limit_bytes`", body = ErrorBody),
        (status = 415, description = "Content-Type not one of the three formats", body = ErrorBody),
        ReadAuth,
        (status = 404, description = "No learner has this name", body = ErrorBody),
        (status = 503, description = "The learner has not published yet", body = ErrorBody),
    ),
    security(("bearer" = ["read"])),
)]
#[allow(dead_code)]
fn predict_doc() {}

/// `POST /v1/labels`'s description (the handler is `super::labels`' `post_labels`).
#[utoipa::path(post, path = "/v1/labels", tag = "ingest",
    request_body(description = "Labels for samples predicted with an `id`, all valid or none used", content(
        (Vec<LabelObject> = "application/json"),
        (Vec<LabelObject> = "application/x-ndjson"),
    )),
    responses(
        (status = 202, description = "Every joined sample entered the ingest queue; each item's status in order", body = LabelsAccepted),
        (status = 400, description = "A malformed item (its number in `line`) or an unreadable body; nothing changed", body = ErrorBody),
        (status = 413, description = "Body over `server.body_limit_bytes`, or more joined samples than `ingest.queue_samples`", body = ErrorBody),
        (status = 415, description = "Content-Type not JSON or JSON lines", body = ErrorBody),
        WriteAuth,
        (status = 503, description = "The ingest queue or the write-ahead log is full (retry after `Retry-After` seconds), or the daemon is shutting down; nothing changed", body = ErrorBody,
            headers(("Retry-After" = u64, description = "seconds, when the queue is full"))),
    ),
    security(("bearer" = ["write"])),
)]
#[allow(dead_code)]
fn labels_doc() {}

/// The largest number of decimal digits `d` with every `d`-digit index below `max_dim`, at least 1.
fn index_digits(max_dim: usize) -> usize {
    let mut d = 1;
    while d < 10 && 10usize.pow(d as u32 + 1) <= max_dim {
        d += 1;
    }
    d
}

/// Integer digits a LIBSVM number may have so that it stays below `max_abs` (every number under
/// `10^d` is when `10^d <= max_abs`); at least 1, capped at 9 (the pattern's own limit).
fn integer_digits(max_abs: f64) -> usize {
    let mut d = 1;
    while d < 9 && 10f64.powi(d as i32 + 1) <= max_abs {
        d += 1;
    }
    d
}

/// The document as served: the generated paths with the request-body schemas of `rules` (ingest rules;
/// prediction bodies only differ in an optional label), as JSON bytes.
pub fn document(rules: &Rules, auth: bool) -> Value {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).expect("the document serialises");
    let classification = rules.losses.iter().any(|l| l.is_classification());
    let patterns = LibsvmPatterns::of(rules, classification);
    let sample = sample_schema(rules, classification);
    let schemas = &mut doc["components"]["schemas"];
    // A published snapshot has version >= 1, an unpublished entry version 0: exactly one matches.
    schemas["ModelEntry"] = json!({"oneOf": [
        {"$ref": "#/components/schemas/ModelSnapshot"},
        {"$ref": "#/components/schemas/Unpublished"},
    ]});
    schemas["Models"]["properties"]["models"]["items"] =
        json!({"$ref": "#/components/schemas/ModelEntry"});
    if rules.classes.is_some() {
        multiclass_responses(&mut doc);
    }
    let schemas = &mut doc["components"]["schemas"];
    schemas["SampleObject"] = sample.clone();
    schemas["Libsvm"] = libsvm_schema(rules, &patterns, classification);
    schemas["PredictSampleObject"] = predict_sample_schema(sample);
    predict_bodies(&mut doc, &patterns);
    // A body needs at least one sample.
    for path in ["/v1/samples", "/v1/predict", "/v1/labels"] {
        let content = &mut doc["paths"][path]["post"]["requestBody"]["content"];
        for media in ["application/json", "application/x-ndjson"] {
            content[media]["schema"]["minItems"] = json!(1);
        }
    }
    if !auth {
        allow_no_credentials(&mut doc);
    }
    doc
}

/// The regular expressions of a LIBSVM line under the ingest rules.
struct LibsvmPatterns {
    /// A feature value (and a regression label).
    number: String,
    label: String,
    /// A feature index below `max_dim`.
    index: String,
}

impl LibsvmPatterns {
    fn of(rules: &Rules, classification: bool) -> LibsvmPatterns {
        // At most as many integer digits as `ingest.max_abs_value` allows, and only negative exponents:
        // every number the pattern matches is within the bound (a larger one is refused with a 400).
        let digits = integer_digits(rules.max_abs_value);
        let number = format!(
            r"[+-]?([0-9]{{1,{digits}}}(\.[0-9]{{0,9}})?|\.[0-9]{{1,9}})([eE]-[0-9]{{1,2}})?"
        );
        let label = match rules.classes {
            // The class indices, each once (an exact pattern: no other label is taken).
            Some(c) => format!(
                r"({})(\.0{{0,3}})?",
                (0..c).map(|i| i.to_string()).collect::<Vec<_>>().join("|")
            ),
            None if classification => r"[+-]?1(\.0{0,3})?".to_string(),
            None => number.to_string(),
        };
        let index = format!(r"\+?[0-9]{{1,{}}}", index_digits(rules.max_dim));
        LibsvmPatterns {
            number,
            label,
            index,
        }
    }

    /// One `index:value` pair.
    fn pair(&self) -> String {
        format!("{}:{}", self.index, self.number)
    }
}

/// `Libsvm`: a `text/plain` sample body.
fn libsvm_schema(rules: &Rules, patterns: &LibsvmPatterns, classification: bool) -> Value {
    let line = format!("{}( {})*", patterns.label, patterns.pair());
    // At least one sample: a body without one is refused ("empty body").
    json!({
        "type": "string",
        "description": format!(
            "LIBSVM lines `label index:value ...` (blank lines and `#` comments are skipped; \
             `qid:N` is ignored; a `cost:c` token is the sample's weight, c > 0). Indices strictly increasing within a line and below {}; values \
             and labels at most {:e} in magnitude (ingest.max_abs_value).{}",
            rules.max_dim,
            rules.max_abs_value,
            match rules.classes {
                Some(c) => format!(" Labels the class indices 0 to {}.", c - 1),
                None if classification => " Labels -1 or +1.".into(),
                None => String::new(),
            }
        ),
        "pattern": format!("^\n*{line}(\n+{line})*\n*$"),
        "example": "1 3:0.5 17:1\n-2.5 4:1\n",
    })
}

/// `SampleObject`: one JSON sample, with numeric features (indices and values) or named ones.
fn sample_schema(rules: &Rules, classification: bool) -> Value {
    let bound = rules.max_abs_value;
    let bounded = json!({"type": "number", "minimum": -bound, "maximum": bound});
    let label_schema = match (rules.classes, &rules.class_names) {
        (Some(c), Some(names)) => json!({"anyOf": [
            {"type": "integer", "minimum": 0, "maximum": c - 1},
            {"type": "string", "enum": names.as_ref()},
        ], "description": "the class: its index or its name (multi-class learners)"}),
        (Some(c), None) => json!({"type": "integer", "minimum": 0, "maximum": c - 1,
                          "description": "the class index (multi-class learners)"}),
        (None, _) if classification => json!({"type": "number", "enum": [-1, 1]}),
        (None, _) => bounded.clone(),
    };
    // `null` is the same as an absent field.
    let weight = json!({"anyOf": [{"type": "number", "exclusiveMinimum": 0, "maximum": bound}, {"type": "null"}],
                        "description": "sample weight (default 1)"});
    let null_type = json!({"type": "null"});
    let indexed = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["label"],
        "description": "Numeric features: as many values as indices, indices strictly increasing and \
                        written as JSON integers (`8758`, not `8758.0`).",
        "properties": {
            "label": label_schema,
            "indices": {"type": ["array", "null"], "uniqueItems": true,
                        "items": {"type": "integer", "minimum": 0, "maximum": rules.max_dim - 1}},
            "values": {"type": ["array", "null"], "items": bounded},
            "features": null_type,
            "weight": weight,
        },
    });
    let named = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["label", "features"],
        "description": "Named features: each new name gets the next free index (ingest.max_named_features, ingest.max_named_feature_bytes), or with ingest.feature_names = \"hashed\" the index its hash gives (ingest.hash_bits). Names are non-empty and printable (no control or bidi characters), once per object; a daemon takes numeric indices or names, never both.",
        "properties": {
            "label": label_schema,
            "features": {"type": "object", "additionalProperties": bounded},
            "indices": null_type,
            "values": null_type,
            "weight": weight,
        },
    });
    json!({"oneOf": [indexed, named], "example": {"label": 1, "indices": [3, 17], "values": [0.5, 1.0]}})
}

/// `PredictSampleObject`: a sample as `SampleObject`, its label optional.
fn predict_sample_schema(sample: Value) -> Value {
    let mut predict_sample = sample;
    for form in predict_sample["oneOf"].as_array_mut().expect("oneOf") {
        let required = form["required"].as_array_mut().expect("required");
        required.retain(|r| r != "label");
        // A prediction body's label is optional and not read (no loss, no bound applies to it).
        form["properties"]["label"] = json!({"type": ["number", "null"],
                                             "description": "optional; ignored by predict"});
        form["properties"]["id"] = json!({"type": "string", "minLength": 1,
            "description": "optional: keep the sample and the served scores for a late label (POST /v1/labels); at most labels.id_max_bytes bytes"});
    }
    predict_sample
}

/// `POST /v1/predict`'s bodies: JSON items are `PredictSampleObject`s, LIBSVM lines may omit the label.
fn predict_bodies(doc: &mut Value, patterns: &LibsvmPatterns) {
    let predict_body = &mut doc["paths"]["/v1/predict"]["post"]["requestBody"]["content"];
    for media in ["application/json", "application/x-ndjson"] {
        predict_body[media]["schema"]["items"] =
            json!({"$ref": "#/components/schemas/PredictSampleObject"});
    }
    let pair = patterns.pair();
    let predict_line = format!("({}( {pair})*|{pair}( {pair})*)", patterns.label);
    predict_body["text/plain"]["schema"] = json!({
        "type": "string",
        "description": "LIBSVM lines as for POST /v1/samples; a line may omit its label (`index:value ...`).",
        "pattern": format!("^\n*{predict_line}(\n+{predict_line})*\n*$"),
    });
}

/// A daemon with multi-class learners: `/v1/model`, `/v1/models/{name}` and `/v1/predict` answer a
/// multi-class learner's model or classes, or (for a class's own learner) a binary one's.
fn multiclass_responses(doc: &mut Value) {
    let either = |one: &str, other: &str| {
        json!({"oneOf": [
            {"$ref": format!("#/components/schemas/{one}")},
            {"$ref": format!("#/components/schemas/{other}")},
        ]})
    };
    for (path, method, one, other) in [
        ("/v1/model", "get", "ModelSnapshot", "MulticlassModelDoc"),
        (
            "/v1/models/{name}",
            "get",
            "ModelSnapshot",
            "MulticlassModelDoc",
        ),
        (
            "/v1/predict",
            "post",
            "Predictions",
            "MulticlassPredictions",
        ),
    ] {
        doc["paths"][path][method]["responses"]["200"]["content"]["application/json"]["schema"] =
            either(one, other);
    }
}

/// A daemon without tokens: every security requirement also lists the empty one (no credentials).
fn allow_no_credentials(doc: &mut Value) {
    for item in doc["paths"].as_object_mut().expect("paths").values_mut() {
        for op in item.as_object_mut().expect("path item").values_mut() {
            if let Some(reqs) = op.get_mut("security").and_then(Value::as_array_mut) {
                if !reqs
                    .iter()
                    .any(|r| r.as_object().is_some_and(|o| o.is_empty()))
                {
                    reqs.push(json!({}));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{index_digits, integer_digits};

    #[test]
    fn index_digits_stay_below_max_dim() {
        assert_eq!(index_digits(1), 1);
        assert_eq!(index_digits(99), 1);
        assert_eq!(index_digits(100), 2);
        assert_eq!(index_digits(16_777_216), 7);
        assert_eq!(index_digits(1 << 30), 9);
        assert_eq!(integer_digits(1e6), 6);
        assert_eq!(integer_digits(999_999.0), 5);
        assert_eq!(integer_digits(1e300), 9);
    }
}
