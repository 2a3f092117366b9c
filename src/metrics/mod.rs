//! The daemon's Prometheus metrics: one registry, typed handles, the text exposition for `GET /metrics`.
//!
//! | metric | type | labels | meaning |
//! | --- | --- | --- | --- |
//! | `thresher_duality_gap` | gauge | learner | `P - D` of the published model over its window |
//! | `thresher_primal_objective` | gauge | learner | `P(w)` over the window |
//! | `thresher_dual_objective` | gauge | learner | `D(alpha)` over the window |
//! | `thresher_support_size` | gauge | learner | nonzero weights of the published model |
//! | `thresher_support_changes_total` | counter | learner | features entering or leaving the support between snapshots |
//! | `thresher_model_version` | gauge | learner | version of the published snapshot |
//! | `thresher_progressive_loss` | gauge | learner | average loss of each sample predicted before it was learned |
//! | `thresher_snapshot_age_seconds` | gauge | learner | seconds since the published snapshot was taken (at scrape) |
//! | `thresher_model_converged` | gauge | learner | 1 when the published model's relative gap is at most the learner's `tol`, else 0 (its `convergence.reason` in the model JSON says why) |
//! | `thresher_model_empty_fallback` | gauge | learner | 1 when the learner's best model was worse than the empty one and `w = 0` is served instead |
//! | `thresher_solver_steps_total` | counter | learner | solver steps (block updates) |
//! | `thresher_models_withheld_total` | counter | learner | certified models the publish gate did not serve (relative gap above `publish.max_relative_gap`) |
//! | `thresher_drift_alarms_total`, `thresher_drift_dropped_samples_total` | counter | learner | rises of the progressive loss the drift test signalled; window samples `drift.action = "shrink"` dropped for them |
//! | `thresher_history_points_dropped_total` | counter | learner | points the `GET /v1/history` ring dropped, oldest first, to stay at `snapshot.history_points` |
//! | `thresher_window_samples` | gauge | learner | samples in the window |
//! | `thresher_window_capacity` | gauge | learner | `window.capacity` (fill = samples / capacity) |
//! | `thresher_active_set_size` | gauge | learner | the subset solver's active set size (0 for the other solvers) |
//! | `thresher_screened_features` | gauge | learner | features the subset solver's gap-safe screening removed (0 for the others) |
//! | `thresher_lambda_live` | gauge | learner | `lambda = "auto"`: the lambda of the served grid member |
//! | `thresher_lambda_progressive_loss` | gauge | learner, lambda | `lambda = "auto"`: each grid member's exponentially weighted progressive loss |
//! | `thresher_lambda_holdout_loss` | gauge | learner, lambda | `lambda = "auto"` with `lambda_criterion = "holdout"`: each grid member's mean loss on the held-out samples at the latest certificate |
//! | `thresher_lambda_switches_total` | counter | learner | `lambda = "auto"`: changes of the served grid member |
//! | `thresher_lambda_holdout_samples` | gauge | learner | `lambda = "auto"`, criterion `holdout`: held-out samples in the ring (at most a fifth of the window) |
//! | `thresher_lambda_holdout_dropped_total` | counter | learner | `lambda = "auto"`, criterion `holdout`: held-out samples dropped from the full ring, oldest first |
//! | `thresher_samples_ingested_total` | counter | source (`http`, `stdin`, `nats`, `labels`) | samples accepted (`labels`: predicted samples joined to their late label) |
//! | `thresher_samples_rejected_total` | counter | reason | samples refused: `invalid`, `queue_full`, `wal_full` (the write-ahead log is at its bound or cannot be written; all samples of the request); `too_large`, `unsupported_media_type` (one per request: the body is not read) |
//! | `thresher_inflight_refused_total` | counter | reason | requests refused by the in-flight bounds (`ingest::inflight`): `bytes_busy` (503: `server.inflight_bytes` has no room for the body), `bytes_too_large` (413: larger than the whole budget), `samples_busy` (503: `ingest.queue_samples` spent while the body was parsed), `samples_too_large` (413: more samples than the whole budget), `client_gone` (the client closed the connection during the parse, which stopped) |
//! | `thresher_inflight_bytes` | gauge | | request body bytes reserved in flight, bounded by `server.inflight_bytes` (at scrape) |
//! | `thresher_ingest_queue_batches` | gauge | | batches waiting in the ingest queue (at scrape) |
//! | `thresher_ingest_samples_in_flight` | gauge | | samples accepted and not yet absorbed by every learner, bounded by `ingest.queue_samples` (at scrape) |
//! | `thresher_http_request_duration_seconds` | histogram | route, method | request latency per route |
//! | `thresher_http_connections` | gauge | | open HTTP connections, bounded by `server.max_connections` |
//! | `thresher_http_connections_closed_total` | counter | reason | connections the daemon closed: `limit_evicted` (the longest-idle one, to admit a new one at the limit), `limit_refused` (a new one, every connection busy), `header_timeout`, `idle_timeout`, `tls_handshake` (failed or timed out), `write_timeout` (its client read nothing of a response for `server.write_timeout_s`) |
//! | `thresher_http_accept_errors_total` | counter | | failed `accept` calls (e.g. out of file descriptors); each is followed by a short pause |
//! | `thresher_http_auth_refused_total` | counter | status (`401`, `403`) | requests refused by authentication |
//! | `thresher_samples_unlearned_total` | counter | learner | samples the window evicted before any step learned from them (mirror and SMIDAS, whose steps learn from the window's new samples as fast as the core allows; 0 while they keep up) |
//! | `thresher_numeric_faults_total` | counter | learner | non-finite numbers caught in a learner (a progressive loss, left out of the average; a certified model, not published, the learner rebuilt from its window) |
//! | `thresher_feature_names` | gauge | | names in the named-feature dictionary (at scrape; at most `ingest.max_named_features`) |
//! | `thresher_feature_names_refused_total` | counter | | requests refused by the dictionary's limits: full (names or bytes of names), a name too long, too many new names |
//! | `thresher_hashed_name_collisions_total` | counter | | hashed names (`ingest.feature_names = "hashed"`): names seen at an index remembered with another name (at scrape) |
//! | `thresher_hashed_names_evicted_total` | counter | | hashed names: remembered names replaced by another index's in their slot of `ingest.hash_names_kept` (at scrape) |
//! | `thresher_checkpoints_total` | counter | outcome (`written`, `unchanged`, `refused`, `failed`) | checkpoint attempts: `unchanged` = skipped, nothing changed since the last one; `refused` = a non-finite state, the previous file kept |
//! | `thresher_wal_appended_bytes_total` | counter | | bytes appended to the write-ahead log (`durability.wal`) |
//! | `thresher_wal_appended_records_total` | counter | | batches appended to the write-ahead log |
//! | `thresher_wal_fsyncs_total` | counter | | fsyncs of the write-ahead log (`always`: one per group of concurrent requests; `batch`: one per interval with writes) |
//! | `thresher_wal_replayed_records_total` | counter | | batches replayed from the write-ahead log at start (those the checkpoint did not hold) |
//! | `thresher_wal_bytes` | gauge | | bytes the write-ahead log holds on disk, bounded by `durability.wal_max_bytes` |
//! | `thresher_nats_batches_total` | counter | outcome (`acked`, `invalid`, `empty`) | NATS batches acknowledged once a checkpoint held them; terminated (`AckTerm`) as invalid; acknowledged holding no sample |
//! | `thresher_cluster_nodes` | gauge | | live members of the cluster (this node included) at its last announcement |
//! | `thresher_nats_pending_batches` | gauge | | NATS batches fetched and not yet acknowledged, bounded by `nats.max_pending_batches` |
//! | `thresher_cluster_cuts_total` | counter | learner, outcome (`complete`, `abandoned`, `invalid`) | cuts of the global model: complete (every listed node's part arrived), abandoned (a newer proposal came first), invalid (a malformed part or proposal, dropped) |
//! | `thresher_cluster_partial_bytes_total` | counter | direction (`sent`, `received`) | payload bytes of the cuts' parts (to the proposer) and sums (from it) |
//! | `thresher_cluster_partial_seconds_total` | counter | learner | seconds computing this node's parts (under its learner lock) |
//! | `thresher_cluster_merge_seconds_total` | counter | learner | seconds summing a complete cut's parts into its certificate (the proposer) and installing the sum less this node's part as its remote part |
//! | `thresher_cluster_merges_total` | counter | learner | complete cuts merged |
//! | `thresher_cluster_cut_seconds` | histogram | learner | as the proposer, seconds from a cut's proposal to its sum sent: every listed node's part computed and received, summed and certified (each node, the proposer too, then installs the sum) |
//! | `thresher_cluster_parts_reused_total` | counter | learner | cuts this node answered with its previous part, the learner unchanged since and the cut's model the same (no pass over the window) |
//! | `thresher_cluster_references_total` | counter | learner, kind | parts (`kind="part"`) and, as the proposer, sums (`kind="sum"`) sent as a reference to the same one of an earlier cut, which the receiver holds, instead of their pairs |
//! | `thresher_label_store_samples`, `thresher_label_store_bytes` | gauge | | late labels: predicted samples with an id waiting for their label, and their bytes (`[labels]`) |
//! | `thresher_label_store_dropped_total` | counter | reason (`capacity`, `expired`, `replaced`) | stored samples that left unlabelled: the oldest, for room; past `labels.ttl_seconds`; replaced by a prediction with the same id |
//! | `thresher_labels_total` | counter | outcome (`joined`, `unknown`, `expired`, `evicted`, `duplicate`) | labels of `POST /v1/labels` by what they found ([`labels::outcome`]) |
//!
//! Learner metrics are set by each learner's thread when it publishes; ingest counters by the sources
//! and handlers. [`Metrics::new`] registers them family by family (one function per family below).

mod events;
pub mod labels;
mod values;

use prometheus::core::Collector;
use prometheus::{
    CounterVec, Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounter, IntCounterVec,
    IntGauge, Opts, Registry, TextEncoder,
};

/// Typed handles on every metric (cheap to clone: the vectors are reference counted inside).
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    pub duality_gap: GaugeVec,
    pub primal_objective: GaugeVec,
    pub dual_objective: GaugeVec,
    pub support_size: GaugeVec,
    pub support_changes: IntCounterVec,
    pub model_version: GaugeVec,
    pub progressive_loss: GaugeVec,
    pub snapshot_age: GaugeVec,
    pub model_converged: GaugeVec,
    pub model_empty_fallback: GaugeVec,
    pub solver_steps: IntCounterVec,
    pub history_dropped: IntCounterVec,
    pub models_withheld: IntCounterVec,
    pub drift_alarms: IntCounterVec,
    pub drift_dropped: IntCounterVec,
    pub window_samples: GaugeVec,
    pub window_capacity: GaugeVec,
    pub active_set_size: GaugeVec,
    pub screened_features: GaugeVec,
    pub lambda_live: GaugeVec,
    pub lambda_progressive_loss: GaugeVec,
    pub lambda_holdout_loss: GaugeVec,
    pub lambda_switches: IntCounterVec,
    pub lambda_holdout_samples: GaugeVec,
    pub lambda_holdout_dropped: IntCounterVec,
    pub ingested: IntCounterVec,
    pub rejected: IntCounterVec,
    pub inflight_refused: IntCounterVec,
    pub inflight_bytes: IntGauge,
    pub queue_batches: IntGauge,
    pub samples_in_flight: IntGauge,
    pub request_duration: HistogramVec,
    pub http_connections: IntGauge,
    pub http_connections_closed: IntCounterVec,
    pub http_accept_errors: IntCounter,
    pub auth_refused: IntCounterVec,
    pub numeric_faults: IntCounterVec,
    pub unlearned_samples: IntCounterVec,
    pub feature_names: IntGauge,
    pub feature_names_refused: IntCounter,
    pub hashed_name_collisions: IntCounter,
    pub hashed_names_evicted: IntCounter,
    pub checkpoints: IntCounterVec,
    pub nats_batches: IntCounterVec,
    pub nats_pending: IntGauge,
    pub wal_appended_bytes: IntCounter,
    pub wal_appended_records: IntCounter,
    pub wal_fsyncs: IntCounter,
    pub wal_replayed_records: IntCounter,
    pub wal_bytes: IntGauge,
    pub cluster_nodes: IntGauge,
    pub cluster_cuts: IntCounterVec,
    pub cluster_partial_bytes: IntCounterVec,
    pub cluster_partial_seconds: CounterVec,
    pub cluster_merge_seconds: CounterVec,
    pub cluster_merges: IntCounterVec,
    pub cluster_cut_seconds: HistogramVec,
    pub cluster_parts_reused: IntCounterVec,
    pub cluster_references: IntCounterVec,
    /// Late labels: the label store and what labels found ([`labels`]).
    pub labels: labels::LabelMetrics,
}

pub use values::{checkpoint_outcome, closed, inflight_refused, nats_outcome, reason};

/// Registers metrics with one registry and returns their handles (a handle's clone in the registry
/// shares its values).
struct Registrar {
    registry: Registry,
}

impl Registrar {
    fn registered<M: Collector + Clone + 'static>(&self, metric: M) -> M {
        self.registry
            .register(Box::new(metric.clone()))
            .expect("unique metric");
        metric
    }

    fn gauge(&self, name: &str, help: &str, labels: &[&str]) -> GaugeVec {
        self.registered(GaugeVec::new(Opts::new(name, help), labels).expect("valid metric"))
    }

    fn counter(&self, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
        self.registered(IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric"))
    }

    /// A per-learner counter of seconds.
    fn seconds(&self, name: &str, help: &str) -> CounterVec {
        self.registered(CounterVec::new(Opts::new(name, help), LEARNER).expect("valid metric"))
    }

    fn int_gauge(&self, name: &str, help: &str) -> IntGauge {
        self.registered(IntGauge::new(name, help).expect("valid metric"))
    }

    fn int_counter(&self, name: &str, help: &str) -> IntCounter {
        self.registered(IntCounter::new(name, help).expect("valid metric"))
    }
}

/// The label of every per-learner series.
const LEARNER: &[&str] = &["learner"];

/// The published model of each learner, set at each publication.
struct ModelFamily {
    duality_gap: GaugeVec,
    primal_objective: GaugeVec,
    dual_objective: GaugeVec,
    support_size: GaugeVec,
    support_changes: IntCounterVec,
    model_version: GaugeVec,
    progressive_loss: GaugeVec,
    snapshot_age: GaugeVec,
    history_dropped: IntCounterVec,
}

fn model_family(r: &Registrar) -> ModelFamily {
    ModelFamily {
        duality_gap: r.gauge(
            "thresher_duality_gap",
            "P - D of the published model over its window",
            LEARNER,
        ),
        primal_objective: r.gauge(
            "thresher_primal_objective",
            "Primal objective P(w) over the window",
            LEARNER,
        ),
        dual_objective: r.gauge(
            "thresher_dual_objective",
            "Dual objective D(alpha) over the window",
            LEARNER,
        ),
        support_size: r.gauge(
            "thresher_support_size",
            "Nonzero weights of the published model",
            LEARNER,
        ),
        support_changes: r.counter(
            "thresher_support_changes_total",
            "Features entering or leaving the support between snapshots",
            LEARNER,
        ),
        model_version: r.gauge(
            "thresher_model_version",
            "Version of the published snapshot",
            LEARNER,
        ),
        progressive_loss: r.gauge(
            "thresher_progressive_loss",
            "Average loss of each sample predicted before it was learned",
            LEARNER,
        ),
        snapshot_age: r.gauge(
            "thresher_snapshot_age_seconds",
            "Seconds since the published snapshot",
            LEARNER,
        ),
        history_dropped: r.counter(
            "thresher_history_points_dropped_total",
            "Points the history ring dropped (oldest first) to stay at snapshot.history_points",
            LEARNER,
        ),
    }
}

/// Whether each learner's published model converged, and whether it is the empty fallback.
struct ConvergenceFamily {
    model_converged: GaugeVec,
    model_empty_fallback: GaugeVec,
}

fn convergence_family(r: &Registrar) -> ConvergenceFamily {
    ConvergenceFamily {
        model_converged: r.gauge(
            "thresher_model_converged",
            "1 when the published model's relative gap is at most the learner's tol, else 0",
            LEARNER,
        ),
        model_empty_fallback: r.gauge(
            "thresher_model_empty_fallback",
            "1 when the learner's best model was worse than the empty model and w = 0 is served",
            LEARNER,
        ),
    }
}

/// Each learner's solver and window.
struct SolverFamily {
    solver_steps: IntCounterVec,
    window_samples: GaugeVec,
    window_capacity: GaugeVec,
    active_set_size: GaugeVec,
    screened_features: GaugeVec,
    numeric_faults: IntCounterVec,
    unlearned_samples: IntCounterVec,
}

fn solver_family(r: &Registrar) -> SolverFamily {
    SolverFamily {
        solver_steps: r.counter(
            "thresher_solver_steps_total",
            "Solver steps (block updates)",
            LEARNER,
        ),
        window_samples: r.gauge("thresher_window_samples", "Samples in the window", LEARNER),
        window_capacity: r.gauge(
            "thresher_window_capacity",
            "Window capacity (samples)",
            LEARNER,
        ),
        active_set_size: r.gauge(
            "thresher_active_set_size",
            "Active set size of the subset solver (0 for other solvers)",
            LEARNER,
        ),
        screened_features: r.gauge(
            "thresher_screened_features",
            "Features removed by gap-safe screening in the subset solver (0 for other solvers)",
            LEARNER,
        ),
        unlearned_samples: r.counter(
            "thresher_samples_unlearned_total",
            "Samples the window evicted before any step learned from them (mirror, SMIDAS)",
            LEARNER,
        ),
        numeric_faults: r.counter(
            "thresher_numeric_faults_total",
            "Non-finite numbers caught in a learner (not published; the learner is rebuilt)",
            LEARNER,
        ),
    }
}

/// The grid of a `lambda = "auto"` learner.
struct LambdaFamily {
    lambda_live: GaugeVec,
    lambda_progressive_loss: GaugeVec,
    lambda_holdout_loss: GaugeVec,
    lambda_switches: IntCounterVec,
    lambda_holdout_samples: GaugeVec,
    lambda_holdout_dropped: IntCounterVec,
}

fn lambda_family(r: &Registrar) -> LambdaFamily {
    LambdaFamily {
        lambda_live: r.gauge(
            "thresher_lambda_live",
            "lambda = auto: the lambda of the served grid member",
            LEARNER,
        ),
        lambda_progressive_loss: r.gauge(
            "thresher_lambda_progressive_loss",
            "lambda = auto: each grid member's exponentially weighted progressive loss",
            &["learner", "lambda"],
        ),
        lambda_holdout_loss: r.gauge(
            "thresher_lambda_holdout_loss",
            "lambda = auto, criterion holdout: each grid member's mean loss on the held-out samples",
            &["learner", "lambda"],
        ),
        lambda_switches: r.counter(
            "thresher_lambda_switches_total",
            "lambda = auto: changes of the served grid member",
            LEARNER,
        ),
        lambda_holdout_samples: r.gauge(
            "thresher_lambda_holdout_samples",
            "lambda = auto, criterion holdout: held-out samples in the ring",
            LEARNER,
        ),
        lambda_holdout_dropped: r.counter(
            "thresher_lambda_holdout_dropped_total",
            "lambda = auto, criterion holdout: held-out samples dropped from the full ring, oldest first",
            LEARNER,
        ),
    }
}

/// Ingest: admission, the queue and the named-feature dictionary.
struct IngestFamily {
    ingested: IntCounterVec,
    rejected: IntCounterVec,
    inflight_refused: IntCounterVec,
    inflight_bytes: IntGauge,
    queue_batches: IntGauge,
    samples_in_flight: IntGauge,
    feature_names: IntGauge,
    feature_names_refused: IntCounter,
    hashed_name_collisions: IntCounter,
    hashed_names_evicted: IntCounter,
}

fn ingest_family(r: &Registrar) -> IngestFamily {
    IngestFamily {
        ingested: r.counter(
            "thresher_samples_ingested_total",
            "Samples accepted",
            &["source"],
        ),
        rejected: r.counter(
            "thresher_samples_rejected_total",
            "Samples refused",
            &["reason"],
        ),
        inflight_refused: r.counter(
            "thresher_inflight_refused_total",
            "Requests refused by the in-flight bounds, by reason",
            &["reason"],
        ),
        inflight_bytes: r.int_gauge(
            "thresher_inflight_bytes",
            "Request body bytes reserved in flight",
        ),
        queue_batches: r.int_gauge(
            "thresher_ingest_queue_batches",
            "Batches waiting in the ingest queue",
        ),
        samples_in_flight: r.int_gauge(
            "thresher_ingest_samples_in_flight",
            "Samples accepted and not yet absorbed by every learner",
        ),
        feature_names: r.int_gauge(
            "thresher_feature_names",
            "Names in the named-feature dictionary",
        ),
        feature_names_refused: r.int_counter(
            "thresher_feature_names_refused_total",
            "Requests refused by the feature dictionary's limits",
        ),
        hashed_name_collisions: r.int_counter(
            "thresher_hashed_name_collisions_total",
            "Hashed feature names seen at an index remembered with another name",
        ),
        hashed_names_evicted: r.int_counter(
            "thresher_hashed_names_evicted_total",
            "Remembered hashed feature names replaced by another index's in their slot",
        ),
    }
}

/// The HTTP front: requests, connections and authentication.
struct HttpFamily {
    request_duration: HistogramVec,
    http_connections: IntGauge,
    http_connections_closed: IntCounterVec,
    http_accept_errors: IntCounter,
    auth_refused: IntCounterVec,
}

fn http_family(r: &Registrar) -> HttpFamily {
    let request_duration = HistogramVec::new(
        HistogramOpts::new(
            "thresher_http_request_duration_seconds",
            "HTTP request latency per route",
        )
        .buckets(vec![
            0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
            2.5, 5.0,
        ]),
        &["route", "method"],
    )
    .expect("valid metric");
    HttpFamily {
        request_duration: r.registered(request_duration),
        http_connections: r.int_gauge("thresher_http_connections", "Open HTTP connections"),
        http_connections_closed: r.counter(
            "thresher_http_connections_closed_total",
            "HTTP connections the daemon closed, by reason",
            &["reason"],
        ),
        http_accept_errors: r.int_counter(
            "thresher_http_accept_errors_total",
            "Failed accept calls on the HTTP listener",
        ),
        auth_refused: r.counter(
            "thresher_http_auth_refused_total",
            "Requests refused by authentication, by status",
            &["status"],
        ),
    }
}

/// Checkpoints and the NATS batches they let the daemon acknowledge.
struct DurabilityFamily {
    checkpoints: IntCounterVec,
    nats_batches: IntCounterVec,
    nats_pending: IntGauge,
    wal_appended_bytes: IntCounter,
    wal_appended_records: IntCounter,
    wal_fsyncs: IntCounter,
    wal_replayed_records: IntCounter,
    wal_bytes: IntGauge,
}

fn durability_family(r: &Registrar) -> DurabilityFamily {
    DurabilityFamily {
        checkpoints: r.counter(
            "thresher_checkpoints_total",
            "Checkpoint attempts by outcome",
            &["outcome"],
        ),
        nats_batches: r.counter(
            "thresher_nats_batches_total",
            "NATS batches by outcome: acked (a checkpoint held them), invalid (terminated), empty",
            &["outcome"],
        ),
        nats_pending: r.int_gauge(
            "thresher_nats_pending_batches",
            "NATS batches fetched and not yet acknowledged",
        ),
        wal_appended_bytes: r.int_counter(
            "thresher_wal_appended_bytes_total",
            "Bytes appended to the write-ahead log",
        ),
        wal_appended_records: r.int_counter(
            "thresher_wal_appended_records_total",
            "Batches appended to the write-ahead log",
        ),
        wal_fsyncs: r.int_counter("thresher_wal_fsyncs_total", "Fsyncs of the write-ahead log"),
        wal_replayed_records: r.int_counter(
            "thresher_wal_replayed_records_total",
            "Batches replayed from the write-ahead log at start",
        ),
        wal_bytes: r.int_gauge(
            "thresher_wal_bytes",
            "Bytes the write-ahead log holds on disk, bounded by durability.wal_max_bytes",
        ),
    }
}

/// The cluster: membership and the global model's cuts.
struct ClusterFamily {
    cluster_nodes: IntGauge,
    cluster_cuts: IntCounterVec,
    cluster_partial_bytes: IntCounterVec,
    cluster_partial_seconds: CounterVec,
    cluster_merge_seconds: CounterVec,
    cluster_merges: IntCounterVec,
    cluster_cut_seconds: HistogramVec,
    cluster_parts_reused: IntCounterVec,
    cluster_references: IntCounterVec,
}

fn cluster_family(r: &Registrar) -> ClusterFamily {
    ClusterFamily {
        cluster_nodes: r.int_gauge(
            "thresher_cluster_nodes",
            "Live cluster members at this node's last announcement",
        ),
        cluster_cuts: r.counter(
            "thresher_cluster_cuts_total",
            "Cuts of the global model by outcome: complete, abandoned, invalid",
            &["learner", "outcome"],
        ),
        cluster_partial_bytes: r.counter(
            "thresher_cluster_partial_bytes_total",
            "Payload bytes of the cuts' parts and sums sent and received",
            &["direction"],
        ),
        cluster_partial_seconds: r.seconds(
            "thresher_cluster_partial_seconds_total",
            "Seconds computing this node's partial sums for cuts",
        ),
        cluster_merge_seconds: r.seconds(
            "thresher_cluster_merge_seconds_total",
            "Seconds summing complete cuts into their certificate and installing the remote part",
        ),
        cluster_merges: r.counter(
            "thresher_cluster_merges_total",
            "Complete cuts merged",
            LEARNER,
        ),
        cluster_cut_seconds: r.registered(
            HistogramVec::new(
                HistogramOpts::new(
                    "thresher_cluster_cut_seconds",
                    "As the proposer, seconds from a cut's proposal to its sum sent",
                )
                .buckets(vec![
                    0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0, 10.0,
                ]),
                LEARNER,
            )
            .expect("valid metric"),
        ),
        cluster_parts_reused: r.counter(
            "thresher_cluster_parts_reused_total",
            "Cuts answered with this node's previous part (learner and cut model unchanged: no window pass)",
            LEARNER,
        ),
        cluster_references: r.counter(
            "thresher_cluster_references_total",
            "Parts and sums sent as a reference to the same one of an earlier cut, held by the receiver",
            &["learner", "kind"],
        ),
    }
}

impl Metrics {
    /// Every metric registered, family by family, with the series that exist from the start.
    pub fn new() -> Metrics {
        let r = Registrar {
            registry: Registry::new(),
        };
        let (model, solver, lambda) = (model_family(&r), solver_family(&r), lambda_family(&r));
        let (ingest, http) = (ingest_family(&r), http_family(&r));
        let (durability, cluster) = (durability_family(&r), cluster_family(&r));
        let (convergence, events) = (convergence_family(&r), events::event_family(&r));
        let late_labels = labels::label_metrics(&r);
        let m = Metrics {
            registry: r.registry,
            duality_gap: model.duality_gap,
            primal_objective: model.primal_objective,
            dual_objective: model.dual_objective,
            support_size: model.support_size,
            support_changes: model.support_changes,
            model_version: model.model_version,
            progressive_loss: model.progressive_loss,
            snapshot_age: model.snapshot_age,
            model_converged: convergence.model_converged,
            model_empty_fallback: convergence.model_empty_fallback,
            solver_steps: solver.solver_steps,
            history_dropped: model.history_dropped,
            models_withheld: events.models_withheld,
            drift_alarms: events.drift_alarms,
            drift_dropped: events.drift_dropped,
            window_samples: solver.window_samples,
            window_capacity: solver.window_capacity,
            active_set_size: solver.active_set_size,
            screened_features: solver.screened_features,
            lambda_live: lambda.lambda_live,
            lambda_progressive_loss: lambda.lambda_progressive_loss,
            lambda_holdout_loss: lambda.lambda_holdout_loss,
            lambda_switches: lambda.lambda_switches,
            lambda_holdout_samples: lambda.lambda_holdout_samples,
            lambda_holdout_dropped: lambda.lambda_holdout_dropped,
            ingested: ingest.ingested,
            rejected: ingest.rejected,
            inflight_refused: ingest.inflight_refused,
            inflight_bytes: ingest.inflight_bytes,
            queue_batches: ingest.queue_batches,
            samples_in_flight: ingest.samples_in_flight,
            request_duration: http.request_duration,
            http_connections: http.http_connections,
            http_connections_closed: http.http_connections_closed,
            http_accept_errors: http.http_accept_errors,
            auth_refused: http.auth_refused,
            numeric_faults: solver.numeric_faults,
            unlearned_samples: solver.unlearned_samples,
            feature_names: ingest.feature_names,
            feature_names_refused: ingest.feature_names_refused,
            hashed_name_collisions: ingest.hashed_name_collisions,
            hashed_names_evicted: ingest.hashed_names_evicted,
            checkpoints: durability.checkpoints,
            nats_batches: durability.nats_batches,
            nats_pending: durability.nats_pending,
            wal_appended_bytes: durability.wal_appended_bytes,
            wal_appended_records: durability.wal_appended_records,
            wal_fsyncs: durability.wal_fsyncs,
            wal_replayed_records: durability.wal_replayed_records,
            wal_bytes: durability.wal_bytes,
            cluster_nodes: cluster.cluster_nodes,
            cluster_cuts: cluster.cluster_cuts,
            cluster_partial_bytes: cluster.cluster_partial_bytes,
            cluster_partial_seconds: cluster.cluster_partial_seconds,
            cluster_merge_seconds: cluster.cluster_merge_seconds,
            cluster_merges: cluster.cluster_merges,
            cluster_cut_seconds: cluster.cluster_cut_seconds,
            cluster_parts_reused: cluster.cluster_parts_reused,
            cluster_references: cluster.cluster_references,
            labels: late_labels,
        };
        m.create_initial_series();
        m
    }

    /// Series that exist from the start, so dashboards and rate() have data before the first event.
    fn create_initial_series(&self) {
        for source in ["http", "stdin", "labels"] {
            self.ingested.with_label_values(&[source]);
        }
        for r in reason::ALL {
            self.rejected.with_label_values(&[r]);
        }
        for r in inflight_refused::ALL {
            self.inflight_refused.with_label_values(&[r]);
        }
        for r in closed::ALL {
            self.http_connections_closed.with_label_values(&[r]);
        }
        for status in ["401", "403"] {
            self.auth_refused.with_label_values(&[status]);
        }
        for o in checkpoint_outcome::ALL {
            self.checkpoints.with_label_values(&[o]);
        }
    }

    /// Samples accepted so far, every source (`thresher_samples_ingested_total`).
    pub fn samples_ingested_total(&self) -> u64 {
        ["http", "stdin", "labels"]
            .iter()
            .map(|s| self.ingested.with_label_values(&[s]).get())
            .sum()
    }

    /// Samples refused so far, every reason (`thresher_samples_rejected_total`).
    pub fn samples_rejected_total(&self) -> u64 {
        reason::ALL
            .iter()
            .map(|r| self.rejected.with_label_values(&[r]).get())
            .sum()
    }

    /// Sets the dictionary's gauge and brings its refusal counter up to `refused` (both at scrape).
    pub fn set_feature_names(&self, names: usize, refused: u64) {
        self.feature_names.set(names as i64);
        let counted = self.feature_names_refused.get();
        self.feature_names_refused
            .inc_by(refused.saturating_sub(counted));
    }

    /// Brings the hashed names' counters up to `collisions` and `evictions` (at scrape).
    pub fn set_hashed_names(&self, collisions: u64, evictions: u64) {
        for (c, total) in [
            (&self.hashed_name_collisions, collisions),
            (&self.hashed_names_evicted, evictions),
        ] {
            c.inc_by(total.saturating_sub(c.get()));
        }
    }

    /// Creates every per-learner series (zeros until the first snapshot).
    pub fn register_learner(&self, name: &str, capacity: usize) {
        for g in [
            &self.duality_gap,
            &self.primal_objective,
            &self.dual_objective,
            &self.support_size,
            &self.model_version,
            &self.progressive_loss,
            &self.snapshot_age,
            &self.window_samples,
            &self.active_set_size,
            &self.screened_features,
        ] {
            g.with_label_values(&[name]);
        }
        self.window_capacity
            .with_label_values(&[name])
            .set(capacity as f64);
        self.support_changes.with_label_values(&[name]);
        self.solver_steps.with_label_values(&[name]);
        self.history_dropped.with_label_values(&[name]);
        self.models_withheld.with_label_values(&[name]);
        self.drift_alarms.with_label_values(&[name]);
        self.drift_dropped.with_label_values(&[name]);
        self.numeric_faults.with_label_values(&[name]);
        self.unlearned_samples.with_label_values(&[name]);
        self.cluster_parts_reused.with_label_values(&[name]);
        for kind in ["part", "sum"] {
            self.cluster_references.with_label_values(&[name, kind]);
        }
    }

    /// Creates the series of a `lambda = "auto"` learner: one progressive-loss gauge per grid lambda,
    /// and one held-out-loss gauge with `holdout`.
    pub fn register_lambda_grid(&self, name: &str, grid: &[f64], holdout: bool) {
        self.lambda_live.with_label_values(&[name]);
        self.lambda_switches.with_label_values(&[name]);
        if holdout {
            self.lambda_holdout_samples.with_label_values(&[name]);
            self.lambda_holdout_dropped.with_label_values(&[name]);
        }
        for &lambda in grid {
            self.lambda_progressive_loss
                .with_label_values(&[name, &lambda_label(lambda)]);
            if holdout {
                self.lambda_holdout_loss
                    .with_label_values(&[name, &lambda_label(lambda)]);
            }
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .expect("text encoding cannot fail");
        String::from_utf8(buf).expect("the text format is UTF-8")
    }
}

/// The `lambda` label of a grid member: the shortest decimal that reads back as the same number.
pub fn lambda_label(lambda: f64) -> String {
    format!("{lambda:e}")
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposes_every_named_metric() {
        let m = Metrics::new();
        m.register_learner("primary", 10);
        m.register_lambda_grid("primary", &[0.1, 1e-5], true);
        m.request_duration
            .with_label_values(&["/v1/model", "GET"])
            .observe(0.001);
        let text = m.render();
        for name in [
            "thresher_duality_gap{learner=\"primary\"}",
            "thresher_primal_objective",
            "thresher_dual_objective",
            "thresher_support_size",
            "thresher_support_changes_total",
            "thresher_model_version",
            "thresher_progressive_loss",
            "thresher_snapshot_age_seconds",
            "thresher_solver_steps_total",
            "thresher_window_samples",
            "thresher_window_capacity{learner=\"primary\"} 10",
            "thresher_active_set_size{learner=\"primary\"} 0",
            "thresher_screened_features{learner=\"primary\"} 0",
            "thresher_lambda_live{learner=\"primary\"} 0",
            "thresher_lambda_switches_total{learner=\"primary\"} 0",
            "thresher_lambda_holdout_samples{learner=\"primary\"} 0",
            "thresher_lambda_holdout_dropped_total{learner=\"primary\"} 0",
            "thresher_lambda_progressive_loss{lambda=\"1e-1\",learner=\"primary\"} 0",
            "thresher_lambda_holdout_loss{lambda=\"1e-5\",learner=\"primary\"} 0",
            "thresher_lambda_progressive_loss{lambda=\"1e-5\",learner=\"primary\"} 0",
            "thresher_samples_ingested_total{source=\"http\"} 0",
            "thresher_samples_rejected_total{reason=\"queue_full\"} 0",
            "thresher_http_request_duration_seconds_bucket{method=\"GET\",route=\"/v1/model\"",
            "thresher_http_connections 0",
            "thresher_http_connections_closed_total{reason=\"limit_evicted\"} 0",
            "thresher_http_accept_errors_total 0",
            "thresher_http_auth_refused_total{status=\"401\"} 0",
            "thresher_numeric_faults_total{learner=\"primary\"} 0",
            "thresher_samples_unlearned_total{learner=\"primary\"} 0",
            "thresher_feature_names 0",
            "thresher_feature_names_refused_total 0",
            "thresher_checkpoints_total{outcome=\"unchanged\"} 0",
        ] {
            assert!(text.contains(name), "{name} missing from\n{text}");
        }
    }
}
