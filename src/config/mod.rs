//! The daemon's configuration: embedded defaults, a TOML file, `THRESHER_*` environment overrides and
//! command-line flags, validated once into the typed [`Config`] that `thresher serve` runs on.
//!
//! Two phases (raw → validated). Each layer is a [`RawConfig`]: serde structs whose every key is an
//! `Option` (a layer sets only some keys) and that refuse unknown keys (`deny_unknown_fields`). The
//! layers are overlaid in order — defaults ([`DEFAULT_TOML`], identical to `config/thresher.toml`) ←
//! `--config FILE` ← environment ← flags — and [`RawConfig::validate`] then checks every key's range
//! and builds the [`Config`]. Any problem is a [`ConfigError`] naming the key (and the file) or the
//! environment variable and what is wrong, so a typo never silently falls back to a default:
//!
//! - an unknown key in the file (`[server] listn = ...`): ``config file F: `server.listn`: unknown key,
//!   expected one of `listen`, ... (line 2)``; a wrong type names the key, the expected type and the line;
//! - a `THRESHER_*` variable that matches no key (`THRESHER_LEARNER_KK=1`) stops the start naming the
//!   variable, unless it is one of [`ENV_NOT_CONFIG`] (variables read elsewhere: `THRESHER_LOG`,
//!   `THRESHER_FAULT_INJECT`);
//! - a value out of range: ``config key `window.capacity` = 0: must be between 1 and 100000000``.
//!
//! Why hand-written layering and not `figment` (tried: 0.10 with `toml` + `env`): its messages are
//! less clear than these. An environment error names ``"WINDOW.CAPACITY" in `THRESHER_` environment
//! variable(s)`` instead of `THRESHER_WINDOW_CAPACITY=zero`; key paths carry a `default.` profile
//! prefix; the file is named relative to the working directory; and `THRESHER_LEARNER_K` cannot reach
//! the first `[[learner]]` table (an environment key cannot index an array: "found map, expected a
//! sequence"). Its `Env` provider would also need a custom key map (keys contain `_`) and an ignore
//! list, so little of it would be left to reuse. The layering here is an `overlay` per struct,
//! generated with the struct by the `layer!` macro; serde does the parsing and `serde_path_to_error`
//! names the key of a file error.
//!
//! Environment variables are `THRESHER_<SECTION>_<KEY>` (section and key in any case), e.g.
//! `THRESHER_WINDOW_CAPACITY`; the text is parsed as the key's type. `THRESHER_LEARNER_<KEY>` sets a key
//! of the primary (first) learner, solver-specific keys included.
//!
//! | key | default | unit | range | environment |
//! | --- | --- | --- | --- | --- |
//! | `server.listen` | `127.0.0.1:8080` | IP:port | port 0 = any free port | `THRESHER_SERVER_LISTEN` |
//! | `server.body_limit_bytes` | 33554432 | bytes | 1 ..= 2^32 | `THRESHER_SERVER_BODY_LIMIT_BYTES` |
//! | `server.worker_slice_us` | 1000 | µs (0 = kernel default) | 0 ..= 100000 | `THRESHER_SERVER_WORKER_SLICE_US` |
//! | `server.yield_interval_us` | 1000 | µs (0 = never yield) | 0 ..= 100000 | `THRESHER_SERVER_YIELD_INTERVAL_US` |
//! | `server.auth_tokens_file` | `""` (no authentication) | path of `SCOPE TOKEN` lines | readable, well-formed | `THRESHER_SERVER_AUTH_TOKENS_FILE` |
//! | `server.metrics_auth` | `read` | who may `GET /metrics` with tokens on | `open`, `read` | `THRESHER_SERVER_METRICS_AUTH` |
//! | `server.tls_cert_file` | `""` (plain HTTP) | PEM certificate chain | with `tls_key_file` | `THRESHER_SERVER_TLS_CERT_FILE` |
//! | `server.tls_key_file` | `""` | PEM private key | with `tls_cert_file` | `THRESHER_SERVER_TLS_KEY_FILE` |
//! | `server.header_read_timeout_s` | 10 | s from a request's first byte to its complete head | 1 ..= 3600 | `THRESHER_SERVER_HEADER_READ_TIMEOUT_S` |
//! | `server.body_idle_timeout_s` | 30 | s a request body may stall (then 408) | 1 ..= 3600 | `THRESHER_SERVER_BODY_IDLE_TIMEOUT_S` |
//! | `server.keepalive_timeout_s` | 60 | s a connection may wait with no request | 1 ..= 86400 | `THRESHER_SERVER_KEEPALIVE_TIMEOUT_S` |
//! | `server.max_connections` | 768 | open connections (lowered to fit the fd limit) | 1 ..= 10^6 | `THRESHER_SERVER_MAX_CONNECTIONS` |
//! | `ingest.queue_capacity` | 1024 | batches (each learner's channel holds as many again) | 1 ..= 10^6 | `THRESHER_INGEST_QUEUE_CAPACITY` |
//! | `ingest.queue_samples` | 640000 | samples accepted and not yet learned (the memory bound) | 1 ..= 10^9 | `THRESHER_INGEST_QUEUE_SAMPLES` |
//! | `ingest.max_dim` | 16777216 | features | 1 ..= 2^30 | `THRESHER_INGEST_MAX_DIM` |
//! | `ingest.max_named_features` | 1048576 | names (capped at `max_dim`) | 0 ..= 2^32 | `THRESHER_INGEST_MAX_NAMED_FEATURES` |
//! | `ingest.max_feature_name_bytes` | 256 | bytes | 1 ..= 65536 | `THRESHER_INGEST_MAX_FEATURE_NAME_BYTES` |
//! | `ingest.max_new_names_per_request` | 10000 | names | 1 ..= 2^30 | `THRESHER_INGEST_MAX_NEW_NAMES_PER_REQUEST` |
//! | `ingest.max_abs_value` | 1e6 | magnitude of a label, value or weight | finite, > 0 | `THRESHER_INGEST_MAX_ABS_VALUE` |
//! | `ingest.drain` | true | bool | | `THRESHER_INGEST_DRAIN` |
//! | `window.capacity` | 100000 | samples | 1 ..= 10^8 | `THRESHER_WINDOW_CAPACITY` |
//! | `snapshot.interval_ms` | 500 | ms | 1 ..= 3600000 | `THRESHER_SNAPSHOT_INTERVAL_MS` |
//! | `snapshot.history_points` | 1000 | snapshots each learner's `GET /v1/history` ring keeps (oldest dropped) | 1 ..= 100000 | `THRESHER_SNAPSHOT_HISTORY_POINTS` |
//! | `checkpoint.data_dir` | `""` (off) | path | | `THRESHER_CHECKPOINT_DATA_DIR` |
//! | `checkpoint.interval_s` | 60 | s | 1 ..= 86400 | `THRESHER_CHECKPOINT_INTERVAL_S` |
//! | `nats.url` | `""` (off) | NATS servers, comma-separated | `nats://host:port` or `host:port` each | `THRESHER_NATS_URL` |
//! | `nats.stream` | `thresher` | JetStream stream (work-queue retention; created if missing) | `[A-Za-z0-9_-]+` | `THRESHER_NATS_STREAM` |
//! | `nats.subject` | `thresher.samples` | the stream's subject | NATS subject, no wildcards | `THRESHER_NATS_SUBJECT` |
//! | `nats.consumer` | `thresher` | durable pull consumer shared by every node | `[A-Za-z0-9_-]+` | `THRESHER_NATS_CONSUMER` |
//! | `nats.node` | `""` | this node's name (required with `url`) | `[A-Za-z0-9_-]+` | `THRESHER_NATS_NODE` |
//! | `nats.credentials_file` | `""` (none) | NATS `.creds` file | readable | `THRESHER_NATS_CREDENTIALS_FILE` |
//! | `nats.replicas` | 1 | stream replicas when the stream is created | 1 ..= 5 | `THRESHER_NATS_REPLICAS` |
//! | `nats.duplicate_window_s` | 120 | s the stream drops a repeated `Nats-Msg-Id` | 1 ..= 86400 | `THRESHER_NATS_DUPLICATE_WINDOW_S` |
//! | `nats.ack_wait_s` | 30 | s before an unacknowledged batch is redelivered | 1 ..= 3600 | `THRESHER_NATS_ACK_WAIT_S` |
//! | `nats.ack_interval_ms` | 1000 | ms at most a learned batch waits for the checkpoint that acks it | 1 ..= 3600000 | `THRESHER_NATS_ACK_INTERVAL_MS` |
//! | `nats.max_pending_batches` | 64 | batches fetched and not yet acknowledged | 1 ..= 10000 | `THRESHER_NATS_MAX_PENDING_BATCHES` |
//! | `nats.member_ttl_s` | 10 | s a node stays listed in `GET /v1/cluster` after its last announcement | 1 ..= 3600 | `THRESHER_NATS_MEMBER_TTL_S` |
//! | `nats.global_model` | true | SDIHT learners (fixed lambda) learn one exact model over all the nodes' windows | bool | `THRESHER_NATS_GLOBAL_MODEL` |
//! | `learner.name` | `primary` | | `[A-Za-z0-9_-]+`, unique | `THRESHER_LEARNER_NAME` |
//! | `learner.solver` | `sdiht` | | `sdiht`, `diht`, `mirror`, `smidas`, `subset` | `THRESHER_LEARNER_SOLVER` |
//! | `learner.loss` | `squared` | | squared, huber, hinge, logistic | `THRESHER_LEARNER_LOSS` |
//! | `learner.gamma` | 0.25 | | > 0 | `THRESHER_LEARNER_GAMMA` |
//! | `learner.k` | 10 | features | 1 ..= max_dim | `THRESHER_LEARNER_K` |
//! | `learner.lambda` | 0.01 | | > 0, or `"auto"` | `THRESHER_LEARNER_LAMBDA` |
//! | `learner.lambda_grid` | 5 | lambdas run side by side (`lambda = "auto"`) | 2 ..= 16 | `THRESHER_LEARNER_LAMBDA_GRID` |
//! | `learner.lambda_max` | 0.1 | largest lambda of the grid | > 0 | `THRESHER_LEARNER_LAMBDA_MAX` |
//! | `learner.lambda_min` | 1e-5 | smallest lambda of the grid | > 0, < lambda_max | `THRESHER_LEARNER_LAMBDA_MIN` |
//! | `learner.lambda_margin` | 0.01 | relative loss lead a challenger needs to be served | 0 ..= 1 (excl.) | `THRESHER_LEARNER_LAMBDA_MARGIN` |
//! | `learner.lambda_half_life` | 2000 | samples (progressive-loss half-life; least samples between switches) | >= 1 | `THRESHER_LEARNER_LAMBDA_HALF_LIFE` |
//! | `learner.lambda_criterion` | `holdout` | what ranks the grid (`lambda = "auto"`, `learner::auto`) | `holdout`, `progressive` | `THRESHER_LEARNER_LAMBDA_CRITERION` |
//! | `learner.blocks` | 8 | blocks | 1 ..= 10^6 | `THRESHER_LEARNER_BLOCKS` |
//! | `learner.step` | `coordinate` for sdiht with logistic, hinge or Huber; `adaptive` otherwise | | `coordinate`, `adaptive` or eta > 0 | `THRESHER_LEARNER_STEP` |
//! | `learner.recompute_every` | 1024 | steps | >= 1 | `THRESHER_LEARNER_RECOMPUTE_EVERY` |
//! | `learner.tol` | 1e-9 | relative gap | >= 0 | `THRESHER_LEARNER_TOL` |
//! | `learner.seed` | 1 | | u64 | `THRESHER_LEARNER_SEED` |
//! | `learner.intercept` | `true` for logistic, hinge and Huber, `false` for squared (subset: `false`) | | bool | `THRESHER_LEARNER_INTERCEPT` |
//!
//! `[[learner]]` tables may repeat (the first is the primary); a key missing from a learner table takes
//! the default above, and the file's `[[learner]]` tables replace the default one. The keys of the
//! `mirror`, `smidas` and `subset` solvers (`mirror`, `beta`, `p`, `constraint`, `batch`, `horizon`, `l1`,
//! `lambda0`, `lambda1`, `lambda2`, `resolve_interval_ms`, `xi`, `zeta`, `c`) are listed in [`solvers`];
//! setting one (in the file or the environment) for a learner whose solver does not read it is an error.
//!
//! Adding or removing a key: one field in its `layer!` struct below, one line in
//! [`RawConfig::validate`] (or [`solvers::read`]), and its row in the table above and in
//! `config/thresher.toml`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use thiserror::Error;

pub use crate::ingest::source::nats::NatsConfig;
use crate::loss::{Loss, LossKind};
use crate::solver::StepRule;

pub mod solvers;
pub use solvers::SolverOptions;

/// The embedded defaults: `config/thresher.toml`, byte for byte.
pub const DEFAULT_TOML: &str = include_str!("../../config/thresher.toml");

/// Prefix of every environment override.
pub const ENV_PREFIX: &str = "THRESHER_";

/// `THRESHER_*` variables that are not config keys but are read elsewhere in the code. Any other
/// `THRESHER_*` variable must name a config key, or loading fails naming it. (A unit test scans `src/`,
/// `tests/`, `examples/`, `benches/` and `.ci/` for `THRESHER_*` names that are neither.)
pub const ENV_NOT_CONFIG: &[&str] = &[
    // The log filter (`cli::serve`; tracing's `EnvFilter` syntax, e.g. `debug`).
    "THRESHER_LOG",
    // Test-only fault injection (`daemon::fault`).
    "THRESHER_FAULT_INJECT",
];

/// A configuration problem, naming the key (and the file) or the environment variable at fault.
#[derive(Debug, Error, PartialEq)]
pub enum ConfigError {
    #[error("cannot read config file {}: {reason}", path.display())]
    Io { path: PathBuf, reason: String },
    #[error("config file {}: {reason}", path.display())]
    Syntax { path: PathBuf, reason: String },
    /// An unknown key or a value of the wrong type in the file.
    #[error("config file {}: `{key}`: {reason}", path.display())]
    File {
        path: PathBuf,
        key: String,
        reason: String,
    },
    /// A key no layer set (only possible when a [`RawConfig`] is validated without the defaults).
    #[error("config key `{0}` is not set")]
    Missing(String),
    #[error("config key `{key}` = {value}: {reason}")]
    Range {
        key: String,
        value: String,
        reason: String,
    },
    #[error("environment variable {var}={value}: expected {expected}")]
    Env {
        var: String,
        value: String,
        expected: &'static str,
    },
    #[error("environment variable {var} matches no config key ({hint})")]
    UnknownEnv { var: String, hint: String },
}

/// Which streaming solver a learner runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamSolverKind {
    /// Stochastic DIHT over the window (`blocks = 1` is DIHT).
    Sdiht,
    /// Stochastic sparse mirror descent (options in [`LearnerConfig::options`]).
    Mirror,
    /// SMIDAS, the l1 prior art (not k-sparse).
    Smidas,
    /// Best subset (l0 + l1 + l2), re-solved on the window every `resolve_interval_ms`.
    Subset,
}

impl StreamSolverKind {
    pub fn name(self, blocks: usize) -> &'static str {
        match self {
            StreamSolverKind::Sdiht if blocks == 1 => "diht",
            StreamSolverKind::Sdiht => "sdiht",
            StreamSolverKind::Mirror => "mirror",
            StreamSolverKind::Smidas => "smidas",
            StreamSolverKind::Subset => "subset",
        }
    }
}

/// One `[[learner]]` table, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct LearnerConfig {
    pub name: String,
    pub solver: StreamSolverKind,
    pub loss: Loss,
    pub k: usize,
    pub lambda: f64,
    pub blocks: usize,
    pub step: StepRule,
    pub recompute_every: usize,
    pub tol: f64,
    pub seed: u64,
    /// Fit an unpenalised, never-thresholded intercept `b` (the model scores `w.x + b`).
    pub intercept: bool,
    /// The solver-specific keys ([`solvers`]).
    pub options: SolverOptions,
    /// `lambda = "auto"`: the grid and switching rule (`lambda` is then the grid member served first).
    pub lambda_auto: Option<AutoLambda>,
}

/// `lambda = "auto"`, validated: the grid of lambdas the learner runs side by side and the rule that
/// picks the one it serves ([`crate::learner::auto`]).
#[derive(Debug, Clone, PartialEq)]
pub struct AutoLambda {
    /// Log-spaced from `lambda_max` down to `lambda_min`, largest first.
    pub grid: Vec<f64>,
    /// A challenger replaces the served member only when its progressive loss is below
    /// `(1 - margin)` times the served member's. Why 1% by default: the members are scored on the same
    /// samples, so the noise of their difference is far below that of either loss; on the text sets
    /// (`docs/benchmarks/learners.md`) the better lambda led by 1.5-1.7% and 2% kept the worse one.
    pub margin: f64,
    /// Samples over which a member's progressive loss halves its weight; also the fewest samples a
    /// served member keeps the place before another may replace it (`criterion = progressive`).
    pub half_life: u64,
    /// What ranks the members ([`crate::learner::auto`]).
    pub criterion: Criterion,
}

/// What ranks the members of `lambda = "auto"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Criterion {
    /// Each member's current model scored on held-out samples (one in
    /// [`crate::learner::auto::HOLDOUT_EVERY`], learned only by the served learner), re-scored at every
    /// certificate: it ranks the members as they are now, converged or not.
    Holdout,
    /// Each member's exponentially weighted progressive-validation loss over every sample: the loss
    /// of each sample when it arrived, by the model of that moment.
    Progressive,
}

impl Criterion {
    pub fn name(self) -> &'static str {
        match self {
            Criterion::Holdout => "holdout",
            Criterion::Progressive => "progressive",
        }
    }
}

/// The keys that only `lambda = "auto"` reads.
pub const LAMBDA_AUTO_KEYS: &[&str] = &[
    "lambda_grid",
    "lambda_min",
    "lambda_max",
    "lambda_margin",
    "lambda_half_life",
    "lambda_criterion",
];

/// `n` lambdas log-spaced from `max` down to `min` (both included, exactly), largest first.
pub fn log_grid(max: f64, min: f64, n: usize) -> Vec<f64> {
    if n <= 1 {
        return vec![max];
    }
    let ratio = min / max;
    (0..n)
        .map(|i| match i {
            0 => max,
            i if i == n - 1 => min,
            i => max * ratio.powf(i as f64 / (n - 1) as f64),
        })
        .collect()
}

/// The validated configuration `thresher serve` runs on.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub listen: SocketAddr,
    pub body_limit_bytes: usize,
    /// The scheduler time slice the body parser and learner threads ask for, nanoseconds; 0 leaves the
    /// kernel's default.
    pub worker_slice_ns: u64,
    /// How often the parser and learner threads yield their core between rows or blocks
    /// ([`crate::sys::yield_point`]); zero = never.
    pub yield_interval: Duration,
    pub queue_capacity: usize,
    pub queue_samples: usize,
    pub max_dim: usize,
    pub max_named_features: usize,
    /// Longest accepted feature name, bytes.
    pub max_feature_name_bytes: usize,
    /// Most names one request may add to the dictionary.
    pub max_new_names_per_request: usize,
    /// Largest accepted magnitude of a label, value or weight.
    pub max_abs_value: f64,
    pub drain: bool,
    pub window_capacity: usize,
    pub snapshot_interval: Duration,
    /// Points of each learner's history ring (`GET /v1/history`).
    pub history_points: usize,
    pub data_dir: Option<PathBuf>,
    pub checkpoint_interval: Duration,
    /// At least one; the first is the primary.
    pub learners: Vec<LearnerConfig>,
    /// Who may call what (`server.auth_tokens_file`, `server.metrics_auth`).
    pub auth: AuthConfig,
    /// `server.tls_cert_file` and `server.tls_key_file`, both or neither.
    pub tls: Option<TlsFiles>,
    /// Connection timeouts and the connection cap.
    pub limits: ConnectionLimits,
    /// The `[nats]` source, when `nats.url` is set.
    pub nats: Option<NatsConfig>,
}

/// Authentication settings; the tokens themselves are read from the file at start (`api::auth`).
#[derive(Debug, Clone, PartialEq)]
pub struct AuthConfig {
    /// `None`: no authentication (every route open).
    pub tokens_file: Option<PathBuf>,
    pub metrics: MetricsAuth,
}

/// Who may `GET /metrics` when tokens are configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsAuth {
    /// Anyone (a scraper without a token).
    Open,
    /// A token with the `read` scope, like the model routes.
    Read,
}

/// The PEM files TLS is served with.
#[derive(Debug, Clone, PartialEq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Per-connection limits of the HTTP front (`daemon::http`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConnectionLimits {
    /// From the first byte of a request (or of the TLS handshake) to its complete head.
    pub header_read: Duration,
    /// Longest pause in a request body before the request is aborted (408).
    pub body_idle: Duration,
    /// Longest wait for a request on an open connection (no byte of one arrived).
    pub keepalive: Duration,
    /// Open connections at most (the daemon may lower it to fit the file-descriptor limit).
    pub max_connections: usize,
}

/// Command-line values that override the file and the environment.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub listen: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub auth_tokens_file: Option<PathBuf>,
}

/// A value of a key as an environment variable gives it (text parsed as the key's type).
trait FromEnv: Sized {
    fn from_env(var: &str, text: &str) -> Result<Self, ConfigError>;
}

fn env_error(var: &str, text: &str, expected: &'static str) -> ConfigError {
    ConfigError::Env {
        var: var.into(),
        value: text.into(),
        expected,
    }
}

impl FromEnv for String {
    fn from_env(_: &str, text: &str) -> Result<Self, ConfigError> {
        Ok(text.to_string())
    }
}

impl FromEnv for i64 {
    fn from_env(var: &str, text: &str) -> Result<Self, ConfigError> {
        text.trim()
            .parse()
            .map_err(|_| env_error(var, text, "an integer"))
    }
}

impl FromEnv for f64 {
    fn from_env(var: &str, text: &str) -> Result<Self, ConfigError> {
        text.trim()
            .parse()
            .map_err(|_| env_error(var, text, "a number"))
    }
}

impl FromEnv for bool {
    fn from_env(var: &str, text: &str) -> Result<Self, ConfigError> {
        text.trim()
            .parse()
            .map_err(|_| env_error(var, text, "true or false"))
    }
}

/// `learner.lambda` as a layer gives it: a number, or text (only `"auto"` validates).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged, expecting = "a number > 0 or \"auto\"")]
pub enum LambdaValue {
    Number(f64),
    Text(String),
}

impl FromEnv for LambdaValue {
    fn from_env(_: &str, text: &str) -> Result<Self, ConfigError> {
        Ok(match text.trim().parse::<f64>() {
            Ok(v) => LambdaValue::Number(v),
            Err(_) => LambdaValue::Text(text.trim().to_string()),
        })
    }
}

/// Declares one table of a layer: a serde struct whose every key is an `Option` (unset = not given by
/// this layer) and that refuses unknown keys, with `KEYS`, `overlay` (the keys another layer sets
/// replace these) and `set_env` (one key from environment text).
macro_rules! layer {
    ($(#[$meta:meta])* $name:ident, $expecting:literal { $($(#[$fmeta:meta])* $field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq, Deserialize)]
        #[serde(deny_unknown_fields, expecting = $expecting)]
        pub struct $name {
            $($(#[$fmeta])* pub $field: Option<$ty>,)*
        }

        impl $name {
            /// Every key of this table.
            pub const KEYS: &'static [&'static str] = &[$(stringify!($field)),*];

            /// The keys `over` sets replace these.
            pub fn overlay(&mut self, over: $name) {
                $(if over.$field.is_some() {
                    self.$field = over.$field;
                })*
            }

            /// The keys this layer sets.
            pub fn given(&self) -> Vec<&'static str> {
                let mut keys = Vec::new();
                $(if self.$field.is_some() {
                    keys.push(stringify!($field));
                })*
                keys
            }

            /// Sets `key` from the text of environment variable `var`; `Ok(false)` if there is no such
            /// key.
            fn set_env(&mut self, key: &str, var: &str, text: &str) -> Result<bool, ConfigError> {
                match key {
                    $(stringify!($field) => self.$field = Some(FromEnv::from_env(var, text)?),)*
                    _ => return Ok(false),
                }
                Ok(true)
            }
        }
    };
}

layer! {
    /// `[server]`.
    ServerLayer, "the [server] table" {
        listen: String,
        body_limit_bytes: i64,
        worker_slice_us: i64,
        yield_interval_us: i64,
        auth_tokens_file: String,
        metrics_auth: String,
        tls_cert_file: String,
        tls_key_file: String,
        header_read_timeout_s: i64,
        body_idle_timeout_s: i64,
        keepalive_timeout_s: i64,
        max_connections: i64,
    }
}

layer! {
    /// `[ingest]`.
    IngestLayer, "the [ingest] table" {
        queue_capacity: i64,
        queue_samples: i64,
        max_dim: i64,
        max_named_features: i64,
        max_feature_name_bytes: i64,
        max_new_names_per_request: i64,
        max_abs_value: f64,
        drain: bool,
    }
}

layer! {
    /// `[window]`.
    WindowLayer, "the [window] table" {
        capacity: i64,
    }
}

layer! {
    /// `[snapshot]`.
    SnapshotLayer, "the [snapshot] table" {
        interval_ms: i64,
        history_points: i64,
    }
}

layer! {
    /// `[checkpoint]`.
    CheckpointLayer, "the [checkpoint] table" {
        data_dir: String,
        interval_s: i64,
    }
}

layer! {
    /// `[nats]`.
    NatsLayer, "the [nats] table" {
        url: String,
        stream: String,
        subject: String,
        consumer: String,
        node: String,
        credentials_file: String,
        replicas: i64,
        duplicate_window_s: i64,
        ack_wait_s: i64,
        ack_interval_ms: i64,
        max_pending_batches: i64,
        member_ttl_s: i64,
        global_model: bool,
    }
}

layer! {
    /// One `[[learner]]` table: the shared keys, then the solver-specific ones ([`solvers`]; one flat
    /// struct, since serde's `flatten` does not combine with `deny_unknown_fields`).
    LearnerLayer, "a [[learner]] table" {
        name: String,
        solver: String,
        loss: String,
        gamma: f64,
        k: i64,
        lambda: LambdaValue,
        lambda_grid: i64,
        lambda_min: f64,
        lambda_max: f64,
        lambda_margin: f64,
        lambda_half_life: i64,
        lambda_criterion: String,
        blocks: i64,
        step: String,
        recompute_every: i64,
        tol: f64,
        seed: i64,
        intercept: bool,
        mirror: String,
        beta: f64,
        p: f64,
        constraint: String,
        batch: i64,
        horizon: i64,
        memory: String,
        l1: f64,
        lambda0: f64,
        lambda1: f64,
        lambda2: f64,
        resolve_interval_ms: i64,
        xi: f64,
        zeta: f64,
        c: f64,
    }
}

/// One layer of the configuration (or several overlaid): what a TOML file, the environment or the flags
/// set. [`RawConfig::validate`] turns it into a [`Config`].
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    #[serde(default)]
    pub server: ServerLayer,
    #[serde(default)]
    pub ingest: IngestLayer,
    #[serde(default)]
    pub window: WindowLayer,
    #[serde(default)]
    pub snapshot: SnapshotLayer,
    #[serde(default)]
    pub checkpoint: CheckpointLayer,
    #[serde(default)]
    pub nats: NatsLayer,
    /// The `[[learner]]` tables, each holding only the keys given; a layer that has them replaces the
    /// list below it, and [`RawConfig::validate`] fills each from the default learner.
    pub learner: Option<Vec<LearnerLayer>>,
}

/// The sections an environment variable can name, `THRESHER_<SECTION>_<KEY>`.
const ENV_SECTIONS: &[(&str, &[&str])] = &[
    ("server", ServerLayer::KEYS),
    ("ingest", IngestLayer::KEYS),
    ("window", WindowLayer::KEYS),
    ("snapshot", SnapshotLayer::KEYS),
    ("checkpoint", CheckpointLayer::KEYS),
    ("nats", NatsLayer::KEYS),
    ("learner", LearnerLayer::KEYS),
];

impl RawConfig {
    /// The embedded defaults ([`DEFAULT_TOML`]).
    pub fn defaults() -> RawConfig {
        toml::from_str(DEFAULT_TOML).expect("config/thresher.toml parses into the config layer")
    }

    /// Parses the TOML file at `path`; an unknown key or a wrong type is an error naming the key and
    /// the file.
    pub fn from_file(path: &Path) -> Result<RawConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Io {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        RawConfig::from_toml(&text, path)
    }

    /// Parses TOML `text`, naming `path` in errors.
    pub fn from_toml(text: &str, path: &Path) -> Result<RawConfig, ConfigError> {
        serde_path_to_error::deserialize(toml::Deserializer::new(text)).map_err(|e| {
            let key = e.path().to_string();
            let inner = e.into_inner();
            if key == "." {
                return ConfigError::Syntax {
                    path: path.to_path_buf(),
                    reason: inner.to_string().trim().replace('\n', " "),
                };
            }
            let line = inner
                .span()
                .map(|s| format!(" (line {})", text[..s.start].matches('\n').count() + 1))
                .unwrap_or_default();
            let hint = secret_hint(&key);
            ConfigError::File {
                path: path.to_path_buf(),
                reason: format!("{}{line}{hint}", plain_serde_message(inner.message())),
                key,
            }
        })
    }

    /// Overlays `over`: the keys it sets replace these; its `[[learner]]` list, if any, replaces this one.
    pub fn overlay(&mut self, over: RawConfig) {
        self.server.overlay(over.server);
        self.ingest.overlay(over.ingest);
        self.window.overlay(over.window);
        self.snapshot.overlay(over.snapshot);
        self.checkpoint.overlay(over.checkpoint);
        self.nats.overlay(over.nats);
        if over.learner.is_some() {
            self.learner = over.learner;
        }
    }

    /// Applies the `THRESHER_*` pairs of `env` (other variables are skipped): `THRESHER_<SECTION>_<KEY>`
    /// sets that key, `THRESHER_LEARNER_<KEY>` a key of the primary learner. A `THRESHER_*` variable that
    /// names no key and is not in [`ENV_NOT_CONFIG`] is an error naming it.
    pub fn apply_env(
        &mut self,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<(), ConfigError> {
        for (var, text) in env {
            let Some(rest) = var.strip_prefix(ENV_PREFIX) else {
                continue;
            };
            if ENV_NOT_CONFIG.contains(&var.as_str()) {
                continue;
            }
            let rest = rest.to_ascii_lowercase();
            let (section, key) = rest.split_once('_').unwrap_or((rest.as_str(), ""));
            let known = match section {
                "server" => self.server.set_env(key, &var, &text)?,
                "ingest" => self.ingest.set_env(key, &var, &text)?,
                "window" => self.window.set_env(key, &var, &text)?,
                "snapshot" => self.snapshot.set_env(key, &var, &text)?,
                "checkpoint" => self.checkpoint.set_env(key, &var, &text)?,
                "nats" => self.nats.set_env(key, &var, &text)?,
                "learner" => {
                    let mut scratch = LearnerLayer::default();
                    let primary = match self.learner.as_mut().and_then(|l| l.first_mut()) {
                        Some(first) => first,
                        // No learner to set (validation will say so); still check the variable.
                        None => &mut scratch,
                    };
                    primary.set_env(key, &var, &text)?
                }
                _ => false,
            };
            if !known {
                return Err(unknown_env(var, section));
            }
        }
        Ok(())
    }

    /// Applies the command-line flags.
    pub fn apply_flags(&mut self, flags: &Overrides) {
        if let Some(listen) = &flags.listen {
            self.server.listen = Some(listen.clone());
        }
        if let Some(dir) = &flags.data_dir {
            self.checkpoint.data_dir = Some(dir.display().to_string());
        }
        if let Some(file) = &flags.auth_tokens_file {
            self.server.auth_tokens_file = Some(file.display().to_string());
        }
    }

    /// Phase two: checks every key's range and builds the [`Config`].
    pub fn validate(self) -> Result<Config, ConfigError> {
        let (server, ingest) = (&self.server, &self.ingest);
        let listen_text = need(&server.listen, "server.listen")?;
        let listen: SocketAddr = listen_text.parse().map_err(|_| {
            range(
                "server.listen",
                &format!("{listen_text:?}"),
                "expected IP:port, e.g. 127.0.0.1:8080",
            )
        })?;
        let max_dim = int(&ingest.max_dim, "ingest.max_dim", 1, 1 << 30)? as usize;
        let data_dir = need(&self.checkpoint.data_dir, "checkpoint.data_dir")?;
        let learner_layers = match &self.learner {
            Some(l) if !l.is_empty() => l,
            Some(_) => {
                return Err(range(
                    "learner",
                    "[]",
                    "at least one [[learner]] table is needed",
                ))
            }
            None => return Err(ConfigError::Missing("learner".into())),
        };
        let mut learners = Vec::new();
        for (i, given) in learner_layers.iter().enumerate() {
            let learner = read_learner(given, i, max_dim)?;
            if learners
                .iter()
                .any(|l: &LearnerConfig| l.name == learner.name)
            {
                return Err(range(
                    &format!("learner[{i}].name"),
                    &learner.name,
                    "learner names must be unique",
                ));
            }
            learners.push(learner);
        }
        let data_dir = (!data_dir.is_empty()).then(|| PathBuf::from(data_dir));
        let nats = read_nats(&self.nats, data_dir.is_some())?;
        Ok(Config {
            listen,
            body_limit_bytes: int(
                &server.body_limit_bytes,
                "server.body_limit_bytes",
                1,
                1 << 32,
            )? as usize,
            worker_slice_ns: int(
                &server.worker_slice_us,
                "server.worker_slice_us",
                0,
                100_000,
            )? as u64
                * 1000,
            yield_interval: Duration::from_micros(int(
                &server.yield_interval_us,
                "server.yield_interval_us",
                0,
                100_000,
            )? as u64),
            queue_capacity: int(
                &ingest.queue_capacity,
                "ingest.queue_capacity",
                1,
                1_000_000,
            )? as usize,
            queue_samples: int(
                &ingest.queue_samples,
                "ingest.queue_samples",
                1,
                1_000_000_000,
            )? as usize,
            max_dim,
            // Capped at `max_dim` (a name needs an index below it), so lowering `max_dim` alone is
            // a valid configuration.
            max_named_features: (int(
                &ingest.max_named_features,
                "ingest.max_named_features",
                0,
                1 << 32,
            )? as usize)
                .min(max_dim),
            max_feature_name_bytes: int(
                &ingest.max_feature_name_bytes,
                "ingest.max_feature_name_bytes",
                1,
                1 << 16,
            )? as usize,
            max_new_names_per_request: int(
                &ingest.max_new_names_per_request,
                "ingest.max_new_names_per_request",
                1,
                1 << 30,
            )? as usize,
            max_abs_value: positive(&ingest.max_abs_value, "ingest.max_abs_value")?,
            drain: need(&ingest.drain, "ingest.drain")?,
            window_capacity: int(&self.window.capacity, "window.capacity", 1, 100_000_000)?
                as usize,
            snapshot_interval: Duration::from_millis(int(
                &self.snapshot.interval_ms,
                "snapshot.interval_ms",
                1,
                3_600_000,
            )? as u64),
            history_points: int(
                &self.snapshot.history_points,
                "snapshot.history_points",
                1,
                100_000,
            )? as usize,
            data_dir,
            checkpoint_interval: Duration::from_secs(int(
                &self.checkpoint.interval_s,
                "checkpoint.interval_s",
                1,
                86_400,
            )? as u64),
            learners,
            auth: read_auth(server)?,
            tls: read_tls(server)?,
            limits: read_limits(server)?,
            nats,
        })
    }
}

/// `[nats]`: off while `url` is empty. A node acknowledges a batch only once a checkpoint holds it,
/// so the source needs `checkpoint.data_dir`.
fn read_nats(nats: &NatsLayer, has_data_dir: bool) -> Result<Option<NatsConfig>, ConfigError> {
    let url = need(&nats.url, "nats.url")?;
    let name = |key: &str, value: &Option<String>| -> Result<String, ConfigError> {
        let v = need(value, key)?;
        if v.is_empty()
            || !v
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(range(key, &format!("{v:?}"), "expected [A-Za-z0-9_-]+"));
        }
        Ok(v)
    };
    let servers: Vec<String> = url
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if servers.is_empty() {
        return Ok(None);
    }
    for server in &servers {
        if server.parse::<async_nats::ServerAddr>().is_err() {
            return Err(range(
                "nats.url",
                &format!("{url:?}"),
                &format!("{server:?} is not a NATS server address (nats://host:port)"),
            ));
        }
    }
    if !has_data_dir {
        return Err(range(
            "checkpoint.data_dir",
            "\"\"",
            "the NATS source (nats.url is set) acknowledges a batch only once a checkpoint holds it: \
             set a data directory",
        ));
    }
    let subject = need(&nats.subject, "nats.subject")?;
    if subject.is_empty()
        || subject.contains(['*', '>', ' '])
        || subject.split('.').any(str::is_empty)
    {
        return Err(range(
            "nats.subject",
            &format!("{subject:?}"),
            "expected a NATS subject without wildcards, e.g. thresher.samples",
        ));
    }
    Ok(Some(NatsConfig {
        servers,
        stream: name("nats.stream", &nats.stream)?,
        subject,
        consumer: name("nats.consumer", &nats.consumer)?,
        node: name("nats.node", &nats.node)?,
        credentials_file: path_key(&nats.credentials_file, "nats.credentials_file")?,
        replicas: int(&nats.replicas, "nats.replicas", 1, 5)? as usize,
        duplicate_window: Duration::from_secs(int(
            &nats.duplicate_window_s,
            "nats.duplicate_window_s",
            1,
            86_400,
        )? as u64),
        ack_wait: Duration::from_secs(int(&nats.ack_wait_s, "nats.ack_wait_s", 1, 3600)? as u64),
        ack_interval: Duration::from_millis(int(
            &nats.ack_interval_ms,
            "nats.ack_interval_ms",
            1,
            3_600_000,
        )? as u64),
        max_pending_batches: int(
            &nats.max_pending_batches,
            "nats.max_pending_batches",
            1,
            10_000,
        )? as usize,
        member_ttl: Duration::from_secs(
            int(&nats.member_ttl_s, "nats.member_ttl_s", 1, 3600)? as u64
        ),
        global_model: need(&nats.global_model, "nats.global_model")?,
    }))
}

/// A path key: `""` is unset.
fn path_key(value: &Option<String>, key: &str) -> Result<Option<PathBuf>, ConfigError> {
    let text = need(value, key)?;
    Ok((!text.is_empty()).then(|| PathBuf::from(text)))
}

fn read_auth(server: &ServerLayer) -> Result<AuthConfig, ConfigError> {
    let metrics = match need(&server.metrics_auth, "server.metrics_auth")?.as_str() {
        "open" => MetricsAuth::Open,
        "read" => MetricsAuth::Read,
        other => {
            return Err(range(
                "server.metrics_auth",
                &format!("{other:?}"),
                "expected \"open\" or \"read\"",
            ))
        }
    };
    Ok(AuthConfig {
        tokens_file: path_key(&server.auth_tokens_file, "server.auth_tokens_file")?,
        metrics,
    })
}

fn read_tls(server: &ServerLayer) -> Result<Option<TlsFiles>, ConfigError> {
    let cert = path_key(&server.tls_cert_file, "server.tls_cert_file")?;
    let key = path_key(&server.tls_key_file, "server.tls_key_file")?;
    match (cert, key) {
        (Some(cert), Some(key)) => Ok(Some(TlsFiles { cert, key })),
        (None, None) => Ok(None),
        (Some(cert), None) => Err(range(
            "server.tls_key_file",
            "\"\"",
            &format!(
                "server.tls_cert_file is set ({}): TLS needs both files",
                cert.display()
            ),
        )),
        (None, Some(key)) => Err(range(
            "server.tls_cert_file",
            "\"\"",
            &format!(
                "server.tls_key_file is set ({}): TLS needs both files",
                key.display()
            ),
        )),
    }
}

fn read_limits(server: &ServerLayer) -> Result<ConnectionLimits, ConfigError> {
    let secs = |v: &Option<i64>, key: &str, hi: i64| -> Result<Duration, ConfigError> {
        Ok(Duration::from_secs(int(v, key, 1, hi)? as u64))
    };
    Ok(ConnectionLimits {
        header_read: secs(
            &server.header_read_timeout_s,
            "server.header_read_timeout_s",
            3600,
        )?,
        body_idle: secs(
            &server.body_idle_timeout_s,
            "server.body_idle_timeout_s",
            3600,
        )?,
        keepalive: secs(
            &server.keepalive_timeout_s,
            "server.keepalive_timeout_s",
            86_400,
        )?,
        max_connections: int(
            &server.max_connections,
            "server.max_connections",
            1,
            1_000_000,
        )? as usize,
    })
}

/// A hint for an unknown key or variable that looks like it holds a secret: tokens live in their own
/// file, never in the configuration (which is often world-readable, committed or shown in `ps`).
fn secret_hint(name: &str) -> &'static str {
    let lower = name.to_ascii_lowercase();
    if ["token", "secret", "password", "bearer"]
        .iter()
        .any(|w| lower.contains(w))
    {
        "; tokens are never set in the configuration: list them in the file named by \
         `server.auth_tokens_file` (`SCOPE TOKEN` lines)"
    } else {
        ""
    }
}

impl Config {
    /// The embedded defaults.
    pub fn defaults() -> Config {
        RawConfig::defaults()
            .validate()
            .expect("the embedded defaults are valid")
    }

    /// Loads the layers in order: defaults ← `file` ← `env` (`THRESHER_*` pairs; others are skipped) ←
    /// `flags`, then validates.
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
        flags: &Overrides,
    ) -> Result<Config, ConfigError> {
        let mut raw = RawConfig::defaults();
        if let Some(path) = file {
            raw.overlay(RawConfig::from_file(path)?);
        }
        raw.apply_env(env)?;
        raw.apply_flags(flags);
        raw.validate()
    }

    /// Loads with the process environment.
    pub fn load_from_process(
        file: Option<&Path>,
        flags: &Overrides,
    ) -> Result<Config, ConfigError> {
        Config::load(file, std::env::vars(), flags)
    }

    /// The primary learner (the first `[[learner]]`).
    pub fn primary(&self) -> &LearnerConfig {
        &self.learners[0]
    }
}

/// The error for a `THRESHER_*` variable that matches no key; `section` is what followed the prefix.
fn unknown_env(var: String, section: &str) -> ConfigError {
    let hint = match ENV_SECTIONS.iter().find(|(s, _)| *s == section) {
        Some((s, keys)) => format!(
            "the [{s}] keys are: {}; e.g. {ENV_PREFIX}{}_{}",
            keys.join(", "),
            s.to_ascii_uppercase(),
            keys[0].to_ascii_uppercase()
        ),
        None => format!(
            "config variables are {ENV_PREFIX}<SECTION>_<KEY> with SECTION one of {}; \
             other {ENV_PREFIX}* variables allowed: {}",
            ENV_SECTIONS
                .iter()
                .map(|(s, _)| s.to_ascii_uppercase())
                .collect::<Vec<_>>()
                .join(", "),
            ENV_NOT_CONFIG.join(", ")
        ),
    };
    let hint = format!("{hint}{}", secret_hint(&var));
    ConfigError::UnknownEnv { var, hint }
}

/// serde's wording in config terms: "unknown field" is an unknown key, "i64" an integer, "f64" a number.
fn plain_serde_message(message: &str) -> String {
    message
        .replace("unknown field", "unknown key")
        .replace("expected i64", "expected an integer")
        .replace("expected f64", "expected a number")
        .replace("expected a boolean", "expected true or false")
        .replace('\n', " ")
}

/// The default learner: every learner key with its default (the shared keys from [`DEFAULT_TOML`], the
/// solver-specific ones from [`solvers::SOLVER_KEYS_TOML`]).
fn default_learner() -> LearnerLayer {
    let mut learner = solvers::defaults();
    let shipped = RawConfig::defaults()
        .learner
        .and_then(|mut l| (!l.is_empty()).then(|| l.remove(0)))
        .expect("config/thresher.toml has a [[learner]] table");
    learner.overlay(shipped);
    learner
}

fn read_learner(
    given: &LearnerLayer,
    i: usize,
    max_dim: usize,
) -> Result<LearnerConfig, ConfigError> {
    let key = |k: &str| format!("learner[{i}].{k}");
    let mut t = default_learner();
    t.overlay(given.clone());
    let name = need(&t.name, &key("name"))?;
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(range(
            &key("name"),
            &name,
            "use letters, digits, '_' and '-'",
        ));
    }
    let solver_name = need(&t.solver, &key("solver"))?;
    let solver = match solver_name.as_str() {
        "sdiht" | "diht" => StreamSolverKind::Sdiht,
        "mirror" => StreamSolverKind::Mirror,
        "smidas" => StreamSolverKind::Smidas,
        "subset" => StreamSolverKind::Subset,
        other => {
            return Err(range(
                &key("solver"),
                other,
                "the streaming solvers are: sdiht, diht, mirror, smidas, subset",
            ))
        }
    };
    solvers::check_applicable(i, &solver_name, &given.given())?;
    let loss_name = need(&t.loss, &key("loss"))?;
    let kind = match loss_name.as_str() {
        "squared" => LossKind::Squared,
        "huber" => LossKind::Huber,
        "hinge" => LossKind::Hinge,
        "logistic" => LossKind::Logistic,
        other => {
            return Err(range(
                &key("loss"),
                other,
                "expected squared, huber, hinge or logistic",
            ))
        }
    };
    if solver == StreamSolverKind::Subset && !matches!(kind, LossKind::Squared | LossKind::Logistic)
    {
        return Err(range(
            &key("loss"),
            &loss_name,
            "solver = \"subset\" supports loss = \"squared\" or \"logistic\" only",
        ));
    }
    let gamma = need(&t.gamma, &key("gamma"))?;
    let loss = Loss::new(kind, gamma)
        .map_err(|e| range(&key("gamma"), &gamma.to_string(), &e.to_string()))?;
    let k = int(&t.k, &key("k"), 1, max_dim as i64)? as usize;
    let (lambda, lambda_auto) = read_lambda(&t, given, i, solver)?;
    let mut blocks = int(&t.blocks, &key("blocks"), 1, 1_000_000)? as usize;
    if solver_name == "diht" {
        blocks = 1;
    }
    // Unset, SDIHT with a classification loss steps by coordinates: on the text sets the adaptive
    // rule's block-wide Jacobi step idled at a relative gap of 0.18 where the coordinate rule reached
    // 0.006 (`docs/benchmarks/quality.md`), and the duals' bounded domain keeps the coordinate rule
    // stable in a sliding window; squared loss keeps `adaptive` (`learner::sdiht::small_lambda_stream`).
    let step_text = match &t.step {
        Some(text) => text.clone(),
        None if solver == StreamSolverKind::Sdiht && kind != LossKind::Squared => {
            "coordinate".into()
        }
        None => "adaptive".into(),
    };
    let step = match step_text.as_str() {
        "coordinate" => StepRule::Coordinate,
        "adaptive" => StepRule::Adaptive,
        other => match other.parse::<f64>() {
            Ok(eta) if eta.is_finite() && eta > 0.0 => StepRule::Constant(eta),
            _ => {
                return Err(range(
                    &key("step"),
                    other,
                    "expected \"coordinate\", \"adaptive\" or a constant eta > 0",
                ))
            }
        },
    };
    let tol = need(&t.tol, &key("tol"))?;
    if !(tol.is_finite() && tol >= 0.0) {
        return Err(range(
            &key("tol"),
            &tol.to_string(),
            "must be finite and >= 0",
        ));
    }
    let options = solvers::read(&t, i, &solver_name, step, max_dim)?;
    // Unset, the classification losses (logistic, hinge, Huber = smoothed hinge) get an intercept (an
    // unbalanced stream otherwise costs its prior); squared does not, nor does subset (its dual has no
    // intercept).
    let intercept = match t.intercept {
        Some(true) if solver == StreamSolverKind::Subset => {
            return Err(range(
                &key("intercept"),
                "true",
                "solver = \"subset\" does not fit an intercept",
            ))
        }
        Some(given) => given,
        None => solver != StreamSolverKind::Subset && loss.is_classification(),
    };
    Ok(LearnerConfig {
        intercept,
        options,
        name,
        solver,
        loss,
        k,
        lambda,
        lambda_auto,
        blocks,
        step,
        recompute_every: int(&t.recompute_every, &key("recompute_every"), 1, i64::MAX)? as usize,
        tol,
        seed: int(&t.seed, &key("seed"), 0, i64::MAX)? as u64,
    })
}

/// `learner.lambda`: a number > 0, or `"auto"` with the grid keys; the grid keys set with a numeric
/// lambda are an error naming the key.
fn read_lambda(
    t: &LearnerLayer,
    given: &LearnerLayer,
    i: usize,
    solver: StreamSolverKind,
) -> Result<(f64, Option<AutoLambda>), ConfigError> {
    let key = |k: &str| format!("learner[{i}].{k}");
    match need(&t.lambda, &key("lambda"))? {
        LambdaValue::Number(lambda) => {
            if !(lambda.is_finite() && lambda > 0.0) {
                return Err(range(
                    &key("lambda"),
                    &lambda.to_string(),
                    "must be finite and > 0, or \"auto\"",
                ));
            }
            if let Some(k) = given
                .given()
                .into_iter()
                .find(|k| LAMBDA_AUTO_KEYS.contains(k))
            {
                return Err(range(
                    &key(k),
                    &format!("(set with lambda = {lambda})"),
                    "this key applies to lambda = \"auto\" only",
                ));
            }
            Ok((lambda, None))
        }
        LambdaValue::Text(text) if text == "auto" => {
            if solver == StreamSolverKind::Subset {
                return Err(range(
                    &key("lambda"),
                    "\"auto\"",
                    "solver = \"subset\" is set by lambda0, lambda1, lambda2, not lambda",
                ));
            }
            let positive = |k: &str, v: &Option<f64>| -> Result<f64, ConfigError> {
                let v = need(v, &key(k))?;
                if v.is_finite() && v > 0.0 {
                    Ok(v)
                } else {
                    Err(range(&key(k), &v.to_string(), "must be finite and > 0"))
                }
            };
            let (max, min) = (
                positive("lambda_max", &t.lambda_max)?,
                positive("lambda_min", &t.lambda_min)?,
            );
            if min >= max {
                return Err(range(
                    &key("lambda_min"),
                    &min.to_string(),
                    &format!("must be below lambda_max = {max}"),
                ));
            }
            let n = int(&t.lambda_grid, &key("lambda_grid"), 2, 16)? as usize;
            let margin = need(&t.lambda_margin, &key("lambda_margin"))?;
            if !(0.0..1.0).contains(&margin) {
                return Err(range(
                    &key("lambda_margin"),
                    &margin.to_string(),
                    "must be in [0, 1)",
                ));
            }
            let half_life = int(
                &t.lambda_half_life,
                &key("lambda_half_life"),
                1,
                1_000_000_000,
            )? as u64;
            let criterion = match need(&t.lambda_criterion, &key("lambda_criterion"))?.as_str() {
                "holdout" => Criterion::Holdout,
                "progressive" => Criterion::Progressive,
                other => {
                    return Err(range(
                        &key("lambda_criterion"),
                        &format!("{other:?}"),
                        "expected \"holdout\" or \"progressive\"",
                    ))
                }
            };
            let grid = log_grid(max, min, n);
            Ok((
                grid[n / 2],
                Some(AutoLambda {
                    grid,
                    margin,
                    half_life,
                    criterion,
                }),
            ))
        }
        LambdaValue::Text(text) => Err(range(
            &key("lambda"),
            &format!("{text:?}"),
            "expected a number > 0 or \"auto\"",
        )),
    }
}

fn range(key: &str, value: &str, reason: &str) -> ConfigError {
    ConfigError::Range {
        key: key.into(),
        value: value.into(),
        reason: reason.into(),
    }
}

/// The value of `key`, which every layered config has (the defaults set it).
fn need<T: Clone>(value: &Option<T>, key: &str) -> Result<T, ConfigError> {
    value
        .clone()
        .ok_or_else(|| ConfigError::Missing(key.into()))
}

/// An integer in `lo ..= hi`.
fn int(value: &Option<i64>, key: &str, lo: i64, hi: i64) -> Result<i64, ConfigError> {
    let v = need(value, key)?;
    if (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err(range(
            key,
            &v.to_string(),
            &format!("must be between {lo} and {hi}"),
        ))
    }
}

/// A finite number above zero.
fn positive(value: &Option<f64>, key: &str) -> Result<f64, ConfigError> {
    let v = need(value, key)?;
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(range(key, &v.to_string(), "must be finite and > 0"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_text(text: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, text).unwrap();
        let env = env.iter().map(|(a, b)| (a.to_string(), b.to_string()));
        Config::load(Some(&path), env, &Overrides::default())
    }

    #[test]
    fn embedded_defaults_are_the_shipped_file() {
        let shipped =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/thresher.toml"))
                .unwrap();
        assert_eq!(shipped, DEFAULT_TOML);
        let c = Config::defaults();
        assert_eq!(c.listen, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(c.learners.len(), 1);
        assert_eq!(c.primary().name, "primary");
        assert_eq!(c.primary().loss.kind(), LossKind::Squared);
        assert_eq!(c.data_dir, None);
    }

    #[test]
    fn layers_apply_in_order() {
        let c = load_text(
            "[window]\ncapacity = 500\n[[learner]]\nname = \"a\"\nk = 3\n[[learner]]\nname = \"b\"\nloss = \"hinge\"\n",
            &[("THRESHER_WINDOW_CAPACITY", "700"), ("THRESHER_LEARNER_K", "4"), ("THRESHER_LOG", "x")],
        )
        .unwrap();
        assert_eq!(c.window_capacity, 700);
        assert_eq!(c.learners.len(), 2);
        assert_eq!((c.learners[0].name.as_str(), c.learners[0].k), ("a", 4));
        assert_eq!((c.learners[1].name.as_str(), c.learners[1].k), ("b", 10));
        assert_eq!(c.learners[1].loss.kind(), LossKind::Hinge);
        let flags = Overrides {
            listen: Some("127.0.0.1:0".into()),
            data_dir: Some("/tmp/x".into()),
            ..Overrides::default()
        };
        let c = Config::load(
            None,
            vec![("THRESHER_SERVER_LISTEN".into(), "127.0.0.1:9".into())],
            &flags,
        )
        .unwrap();
        assert_eq!(c.listen.port(), 0);
        assert_eq!(c.data_dir, Some(PathBuf::from("/tmp/x")));
    }

    #[test]
    fn errors_name_the_key() {
        let msg = |t: &str| load_text(t, &[]).unwrap_err().to_string();
        assert!(msg("[window]\ncapacty = 5\n").contains("`window.capacty`"));
        assert!(msg("[window]\ncapacity = 0\n").contains("`window.capacity` = 0"));
        let e = msg("[window]\ncapacity = \"big\"\n");
        assert!(
            e.contains("`window.capacity`: invalid type: string \"big\", expected an integer"),
            "{e}"
        );
        assert!(msg("[[learner]]\nlambda = -1.0\n").contains("`learner[0].lambda`"));
        assert!(msg("[[learner]]\nloss = \"l1\"\n").contains("`learner[0].loss`"));
        assert!(msg("[[learner]]\nname = \"a\"\n[[learner]]\nname = \"a\"\n").contains("unique"));
        assert!(msg("[server]\nlisten = \"nowhere\"\n").contains("`server.listen`"));
        assert!(msg("[server\n").contains("c.toml"));
        let e = load_text("", &[("THRESHER_LEARNER_K", "many")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("THRESHER_LEARNER_K=many"), "{e}");
    }

    /// `[nats]`: off by default; file and environment; each key validated; a data directory needed;
    /// unknown keys refused.
    #[test]
    fn the_nats_table_is_read_and_validated() {
        assert_eq!(Config::defaults().nats, None);
        let c = load_text(
            "[checkpoint]\ndata_dir = \"/tmp/d\"\n[nats]\nurl = \"nats://127.0.0.1:4222, 127.0.0.1:4223\"\n",
            &[
                ("THRESHER_NATS_NODE", "n-1"),
                ("THRESHER_NATS_ACK_WAIT_S", "7"),
                ("THRESHER_NATS_CREDENTIALS_FILE", "/etc/n.creds"),
            ],
        )
        .unwrap();
        let n = c.nats.unwrap();
        assert_eq!(n.servers, ["nats://127.0.0.1:4222", "127.0.0.1:4223"]);
        assert_eq!(
            (n.stream.as_str(), n.subject.as_str(), n.consumer.as_str()),
            ("thresher", "thresher.samples", "thresher")
        );
        assert_eq!(
            (n.node.as_str(), n.ack_wait),
            ("n-1", Duration::from_secs(7))
        );
        assert_eq!(n.credentials_file, Some(PathBuf::from("/etc/n.creds")));
        assert_eq!((n.replicas, n.max_pending_batches), (1, 64));
        let err = |text: &str, env: &[(&str, &str)]| load_text(text, env).unwrap_err().to_string();
        let on =
            "[checkpoint]\ndata_dir = \"/tmp/d\"\n[nats]\nurl = \"127.0.0.1:4222\"\nnode = \"a\"\n";
        assert!(err("[nats]\nurl = \"127.0.0.1:4222\"\nnode = \"a\"\n", &[])
            .contains("checkpoint.data_dir"));
        assert!(err(on, &[("THRESHER_NATS_NODE", "")]).contains("`nats.node`"));
        assert!(err(on, &[("THRESHER_NATS_NODE", "a.b")]).contains("`nats.node`"));
        assert!(err(on, &[("THRESHER_NATS_SUBJECT", "a.*")]).contains("`nats.subject`"));
        assert!(err(on, &[("THRESHER_NATS_URL", "nats://[x")]).contains("`nats.url`"));
        assert!(err(on, &[("THRESHER_NATS_REPLICAS", "6")]).contains("`nats.replicas`"));
        assert!(err(on, &[("THRESHER_NATS_ACK_WAIT_S", "0")]).contains("`nats.ack_wait_s`"));
        assert!(err(&format!("{on}servers = 3\n"), &[]).contains("`nats.servers`"));
        assert!(err(on, &[("THRESHER_NATS_SERVERS", "x")]).contains("THRESHER_NATS_SERVERS"));
    }

    /// The ingest limits: defaults, file and environment, and their ranges (finite, positive).
    #[test]
    fn ingest_limits_are_read_and_validated() {
        let c = Config::defaults();
        assert_eq!(
            (
                c.max_abs_value,
                c.max_feature_name_bytes,
                c.max_new_names_per_request
            ),
            (1e6, 256, 10_000)
        );
        let c = load_text(
            "[ingest]\nmax_abs_value = 2.5\nmax_feature_name_bytes = 8\n",
            &[("THRESHER_INGEST_MAX_NEW_NAMES_PER_REQUEST", "3")],
        )
        .unwrap();
        assert_eq!(
            (
                c.max_abs_value,
                c.max_feature_name_bytes,
                c.max_new_names_per_request
            ),
            (2.5, 8, 3)
        );
        let c = load_text("", &[("THRESHER_INGEST_MAX_ABS_VALUE", "1e300")]).unwrap();
        assert_eq!(c.max_abs_value, 1e300);
        for bad in ["0", "-1", "inf", "nan", "1e309"] {
            let e = load_text("", &[("THRESHER_INGEST_MAX_ABS_VALUE", bad)])
                .unwrap_err()
                .to_string();
            assert!(e.contains("ingest.max_abs_value"), "{bad}: {e}");
        }
        for key in ["max_feature_name_bytes", "max_new_names_per_request"] {
            let e = load_text(&format!("[ingest]\n{key} = 0\n"), &[])
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("`ingest.{key}` = 0")), "{e}");
        }
    }

    #[test]
    fn unknown_file_key_is_refused_naming_key_and_file() {
        let e = load_text("[server]\nlistn = \"127.0.0.1:1\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`server.listn`: unknown key"), "{e}");
        assert!(e.contains("c.toml"), "{e}");
        assert!(e.contains("`listen`"), "{e}");
        let e = load_text(
            "[[learner]]\nname = \"a\"\n[[learner]]\nname = \"b\"\nkk = 3\n",
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("`learner[1].kk`: unknown key") && e.contains("line 5"),
            "{e}"
        );
        let e = load_text("[sever]\nlisten = \"x\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`sever`: unknown key"), "{e}");
        let e = load_text("server = 5\n", &[]).unwrap_err().to_string();
        assert!(
            e.contains("`server`") && e.contains("the [server] table"),
            "{e}"
        );
    }

    #[test]
    fn unknown_env_var_is_refused_naming_it() {
        let env = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect::<Vec<_>>()
        };
        let flags = Overrides::default();
        let e = Config::load(None, env(&[("THRESHER_LEARNER_KK", "1")]), &flags)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("THRESHER_LEARNER_KK matches no config key"),
            "{e}"
        );
        assert!(e.contains("recompute_every"), "{e}");
        for var in [
            "THRESHER_WINDOW_CAPACIT",
            "THRESHER_NOPE",
            "THRESHER_SERVER",
            "THRESHER_",
        ] {
            let e = Config::load(None, env(&[(var, "1")]), &flags).unwrap_err();
            assert!(
                matches!(&e, ConfigError::UnknownEnv { var: v, .. } if v == var),
                "{var}: {e}"
            );
        }
        // Not config keys, read elsewhere: allowed. Other prefixes are not ours.
        let c = Config::load(
            None,
            env(&[
                ("THRESHER_LOG", "debug"),
                ("THRESHER_FAULT_INJECT", "learner_panic:x"),
                ("PATH", "/bin"),
                ("THRESHERX_Y", "1"),
            ]),
            &flags,
        )
        .unwrap();
        assert_eq!(c, Config::defaults());
    }

    #[test]
    fn env_overrides_apply_with_their_types() {
        let env = [
            ("THRESHER_SERVER_LISTEN", "127.0.0.1:9000"),
            ("THRESHER_INGEST_DRAIN", "false"),
            ("THRESHER_LEARNER_LAMBDA", "0.5"),
            ("thresher_window_capacity", "300"),
            ("THRESHER_CHECKPOINT_DATA_DIR", "/tmp/d"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()));
        let c = Config::load(None, env, &Overrides::default()).unwrap();
        assert_eq!(c.listen, "127.0.0.1:9000".parse().unwrap());
        assert!(!c.drain);
        assert_eq!(c.learners[0].lambda, 0.5);
        assert_eq!(
            c.window_capacity, 100_000,
            "only THRESHER_ (upper case) is ours"
        );
        assert_eq!(c.data_dir, Some(PathBuf::from("/tmp/d")));
        let e = load_text("", &[("THRESHER_INGEST_DRAIN", "yes")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("THRESHER_INGEST_DRAIN=yes: expected true or false"),
            "{e}"
        );
    }

    #[test]
    fn learner_env_overrides_reach_the_primary_learner() {
        let c = load_text(
            "[[learner]]\nname = \"a\"\nsolver = \"mirror\"\n[[learner]]\nname = \"b\"\n",
            &[
                ("THRESHER_LEARNER_K", "3"),
                ("THRESHER_LEARNER_Loss", "huber"),
                ("THRESHER_LEARNER_STEP", "0.5"),
                ("THRESHER_LEARNER_BATCH", "4"),
            ],
        )
        .unwrap();
        let (a, b) = (&c.learners[0], &c.learners[1]);
        assert_eq!(
            (a.name.as_str(), a.k, a.loss.kind()),
            ("a", 3, LossKind::Huber)
        );
        assert_eq!(a.step, StepRule::Constant(0.5));
        assert!(matches!(&a.options, SolverOptions::Mirror(m) if m.batch == 4));
        assert_eq!(
            (b.name.as_str(), b.k, b.loss.kind()),
            ("b", 10, LossKind::Squared)
        );
        // A solver-specific key the primary's solver does not read is refused, from the environment too.
        let e = load_text("", &[("THRESHER_LEARNER_HORIZON", "5")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`learner[0].horizon`") && e.contains("mirror, smidas only"),
            "{e}"
        );
    }

    #[test]
    fn every_layer_key_is_in_the_defaults_and_the_docs() {
        let raw = RawConfig::defaults();
        let sections: [(&str, Vec<&str>); 5] = [
            ("server", raw.server.given()),
            ("ingest", raw.ingest.given()),
            ("window", raw.window.given()),
            ("snapshot", raw.snapshot.given()),
            ("checkpoint", raw.checkpoint.given()),
        ];
        let docs = include_str!("mod.rs");
        for (section, given) in sections {
            let keys = ENV_SECTIONS.iter().find(|(s, _)| *s == section).unwrap().1;
            assert_eq!(
                given, keys,
                "config/thresher.toml sets every [{section}] key"
            );
            for key in keys {
                let row = format!("//! | `{section}.{key}` |");
                assert!(docs.contains(&row), "{row} missing from the key table");
                let var = format!(
                    "`THRESHER_{}_{}` |",
                    section.to_uppercase(),
                    key.to_uppercase()
                );
                assert!(docs.contains(&var), "{var} missing from the key table");
            }
        }
        let learner = default_learner();
        // `intercept`'s and `step`'s defaults depend on the loss, so they are the keys left unset.
        let defaulted: Vec<&str> = LearnerLayer::KEYS
            .iter()
            .copied()
            .filter(|&k| k != "intercept" && k != "step")
            .collect();
        assert_eq!(
            learner.given(),
            defaulted,
            "every learner key has a default"
        );
        let shared = raw.learner.unwrap().remove(0).given();
        for key in shared {
            assert!(
                docs.contains(&format!("//! | `learner.{key}` |")),
                "learner.{key}"
            );
        }
    }

    #[test]
    fn server_security_keys_are_validated() {
        let c = Config::defaults();
        assert_eq!(c.auth.tokens_file, None);
        assert_eq!(c.auth.metrics, MetricsAuth::Read);
        assert_eq!(c.tls, None);
        assert_eq!(
            c.limits,
            ConnectionLimits {
                header_read: Duration::from_secs(10),
                body_idle: Duration::from_secs(30),
                keepalive: Duration::from_secs(60),
                max_connections: 768,
            }
        );
        let c = load_text(
            "[server]\nauth_tokens_file = \"/etc/t\"\nmetrics_auth = \"open\"\ntls_cert_file = \"c.pem\"\ntls_key_file = \"k.pem\"\nmax_connections = 5\n",
            &[("THRESHER_SERVER_HEADER_READ_TIMEOUT_S", "2")],
        )
        .unwrap();
        assert_eq!(c.auth.tokens_file, Some(PathBuf::from("/etc/t")));
        assert_eq!(c.auth.metrics, MetricsAuth::Open);
        assert_eq!(
            c.tls,
            Some(TlsFiles {
                cert: "c.pem".into(),
                key: "k.pem".into()
            })
        );
        assert_eq!(c.limits.header_read, Duration::from_secs(2));
        assert_eq!(c.limits.max_connections, 5);
        let flags = Overrides {
            auth_tokens_file: Some("/run/t".into()),
            ..Overrides::default()
        };
        let c = Config::load(None, Vec::new(), &flags).unwrap();
        assert_eq!(c.auth.tokens_file, Some(PathBuf::from("/run/t")));

        let msg = |t: &str| load_text(t, &[]).unwrap_err().to_string();
        assert!(msg("[server]\nmetrics_auth = \"write\"\n").contains("`server.metrics_auth`"));
        assert!(msg("[server]\ntls_cert_file = \"c.pem\"\n").contains("TLS needs both files"));
        assert!(msg("[server]\ntls_key_file = \"k.pem\"\n").contains("`server.tls_cert_file`"));
        assert!(msg("[server]\nmax_connections = 0\n").contains("`server.max_connections` = 0"));
        assert!(msg("[server]\nheader_read_timeout_s = 0\n").contains("header_read_timeout_s"));
        assert!(msg("[server]\nbody_idle_timeout_s = 0\n").contains("body_idle_timeout_s"));
        assert!(msg("[server]\nkeepalive_timeout_s = -1\n").contains("keepalive_timeout_s"));
        // A token-looking key is refused with a pointer to the tokens file, in the file and the
        // environment; an ordinary unknown key gets no such hint.
        let e = msg("[server]\ntoken = \"abc\"\n");
        assert!(
            e.contains("`server.token`: unknown key") && e.contains("server.auth_tokens_file"),
            "{e}"
        );
        assert!(!msg("[server]\nlistn = \"x\"\n").contains("never set in the configuration"));
        let e = load_text("", &[("THRESHER_SERVER_AUTH_TOKEN", "abc")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("never set in the configuration"), "{e}");
    }

    #[test]
    fn log_grid_is_log_spaced_largest_first_with_exact_ends() {
        let g = log_grid(0.1, 1e-5, 5);
        assert_eq!((g.len(), g[0], g[4]), (5, 0.1, 1e-5));
        for (a, b) in g.iter().zip([0.1, 1e-2, 1e-3, 1e-4, 1e-5]) {
            assert!((a / b - 1.0).abs() < 1e-12, "{g:?}");
        }
        let g = log_grid(1.0, 1e-2, 3);
        assert!((g[1] - 0.1).abs() < 1e-15, "{g:?}");
        assert_eq!(log_grid(2.0, 1.0, 2), [2.0, 1.0]);
    }

    #[test]
    fn the_step_rule_defaults_by_solver_and_loss() {
        let step_of = |table: &str| {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("c.toml");
            std::fs::write(&path, format!("[[learner]]\n{table}")).unwrap();
            Config::load(Some(&path), std::iter::empty(), &Default::default())
                .unwrap()
                .learners[0]
                .step
        };
        assert_eq!(step_of("loss = \"logistic\"\n"), StepRule::Coordinate);
        assert_eq!(step_of("loss = \"hinge\"\n"), StepRule::Coordinate);
        assert_eq!(step_of("loss = \"squared\"\n"), StepRule::Adaptive);
        assert_eq!(
            step_of("solver = \"mirror\"\nloss = \"logistic\"\n"),
            StepRule::Adaptive
        );
        assert_eq!(
            step_of("loss = \"logistic\"\nstep = \"adaptive\"\n"),
            StepRule::Adaptive
        );
    }

    #[test]
    fn lambda_auto_parses_from_the_file_and_the_environment() {
        let c = load_text("[[learner]]\nlambda = \"auto\"\nlambda_grid = 3\nlambda_max = 1.0\nlambda_min = 0.01\n", &[])
            .unwrap();
        let a = c.learners[0].lambda_auto.as_ref().expect("auto");
        assert_eq!(a.grid.len(), 3);
        assert_eq!((a.grid[0], a.grid[2]), (1.0, 0.01));
        assert_eq!((a.margin, a.half_life), (0.01, 2000));
        assert_eq!(
            c.learners[0].lambda, a.grid[1],
            "the middle member is served first"
        );
        let c = load_text(
            "",
            &[
                ("THRESHER_LEARNER_LAMBDA", "auto"),
                ("THRESHER_LEARNER_LAMBDA_MARGIN", "0.1"),
                ("THRESHER_LEARNER_LAMBDA_HALF_LIFE", "50"),
            ],
        )
        .unwrap();
        let a = c.learners[0].lambda_auto.as_ref().expect("auto");
        assert_eq!(a.grid, log_grid(0.1, 1e-5, 5));
        assert_eq!((a.margin, a.half_life), (0.1, 50));
        // Numbers keep working, as TOML integers, floats and environment text.
        let c = load_text("[[learner]]\nlambda = 1\n", &[]).unwrap();
        assert_eq!(
            (c.learners[0].lambda, &c.learners[0].lambda_auto),
            (1.0, &None)
        );
        let c = load_text("", &[("THRESHER_LEARNER_LAMBDA", "0.003")]).unwrap();
        assert_eq!(c.learners[0].lambda, 0.003);
        assert_eq!(Config::defaults().learners[0].lambda_auto, None);
    }

    #[test]
    fn bad_lambda_auto_values_are_refused_naming_the_key() {
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);
        let cases: &[Case] = &[
            (
                "[[learner]]\nlambda = \"automatic\"\n",
                &[],
                "`learner[0].lambda` = \"automatic\"",
            ),
            ("[[learner]]\nlambda = 0\n", &[], "`learner[0].lambda` = 0"),
            (
                "",
                &[("THRESHER_LEARNER_LAMBDA", "nan")],
                "`learner[0].lambda` = NaN",
            ),
            (
                "",
                &[("THRESHER_LEARNER_LAMBDA", "Auto")],
                "`learner[0].lambda` = \"Auto\"",
            ),
            (
                "[[learner]]\nlambda = true\n",
                &[],
                "a number > 0 or \"auto\"",
            ),
            (
                "[[learner]]\nlambda = \"auto\"\nlambda_grid = 1\n",
                &[],
                "`learner[0].lambda_grid` = 1",
            ),
            (
                "[[learner]]\nlambda = \"auto\"\nlambda_grid = 17\n",
                &[],
                "`learner[0].lambda_grid` = 17",
            ),
            (
                "[[learner]]\nlambda = \"auto\"\nlambda_min = 0.5\n",
                &[],
                "must be below lambda_max",
            ),
            (
                "[[learner]]\nlambda = \"auto\"\nlambda_max = -1\n",
                &[],
                "`learner[0].lambda_max` = -1",
            ),
            (
                "[[learner]]\nlambda = \"auto\"\nlambda_margin = 1.0\n",
                &[],
                "`learner[0].lambda_margin` = 1",
            ),
            (
                "[[learner]]\nlambda = \"auto\"\nlambda_half_life = 0\n",
                &[],
                "`learner[0].lambda_half_life` = 0",
            ),
            (
                "[[learner]]\nlambda_grid = 3\n",
                &[],
                "`learner[0].lambda_grid`",
            ),
            (
                "",
                &[("THRESHER_LEARNER_LAMBDA_MIN", "0.001")],
                "applies to lambda = \"auto\" only",
            ),
            (
                "[[learner]]\nsolver = \"subset\"\nlambda = \"auto\"\n",
                &[],
                "lambda0, lambda1, lambda2",
            ),
        ];
        for (text, env, expected) in cases {
            let e = load_text(text, env).unwrap_err().to_string();
            assert!(e.contains(expected), "{text} {env:?}: {e}");
        }
    }

    /// Every `THRESHER_*` name the code, tests, examples, benches and CI mention is a config key or on
    /// [`ENV_NOT_CONFIG`] (names ending in `_` are prefixes, e.g. `THRESHER_LEARNER_<KEY>`).
    #[test]
    fn every_thresher_variable_in_the_tree_is_a_key_or_allowed() {
        // Named on purpose as wrong variables by tests.
        const DELIBERATELY_UNKNOWN: &[&str] =
            &["THRESHER_LEARNER_KK", "THRESHER_SERVER_AUTH_TOKEN"];
        fn scan(dir: &Path, found: &mut Vec<(PathBuf, String)>) {
            let Ok(entries) = std::fs::read_dir(dir) else {
                return;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    scan(&path, found);
                } else if let Ok(text) = std::fs::read_to_string(&path) {
                    for (at, _) in text.match_indices(ENV_PREFIX) {
                        let name: String = text[at..]
                            .chars()
                            .take_while(|c| {
                                c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_'
                            })
                            .collect();
                        if !name.ends_with('_') {
                            found.push((path.clone(), name));
                        }
                    }
                }
            }
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut found = Vec::new();
        for dir in ["src", "tests", "examples", "benches", ".ci"] {
            scan(&root.join(dir), &mut found);
        }
        let own = root.join("src/config");
        found.retain(|(path, _)| !path.starts_with(&own));
        assert!(
            found.iter().any(|(_, n)| n == "THRESHER_LOG"),
            "the scan sees src/"
        );
        for (path, name) in found {
            if DELIBERATELY_UNKNOWN.contains(&name.as_str()) {
                continue;
            }
            let mut raw = RawConfig::defaults();
            let result = raw.apply_env([(name.clone(), String::new())]);
            assert!(
                !matches!(result, Err(ConfigError::UnknownEnv { .. })),
                "{name} in {} is neither a config key nor in ENV_NOT_CONFIG",
                path.display()
            );
        }
    }

    /// Regression: lowering `ingest.max_dim` alone was refused, since the dictionary's default limit
    /// (2^20 names) exceeded it; the limit is now capped at `max_dim`.
    #[test]
    fn a_smaller_max_dim_alone_is_a_valid_configuration() {
        let c = load_text("[ingest]\nmax_dim = 1000\n", &[]).unwrap();
        assert_eq!((c.max_dim, c.max_named_features), (1000, 1000));
        let c = load_text("[ingest]\nmax_dim = 1000\nmax_named_features = 10\n", &[]).unwrap();
        assert_eq!(c.max_named_features, 10);
    }
}
