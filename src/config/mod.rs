//! The daemon's configuration, loaded in phases into the typed [`Config`] that `thresher serve` runs on:
//!
//! 1. the embedded defaults ([`raw::DEFAULT_TOML`], `config/thresher.toml` byte for byte),
//! 2. the TOML file of `--config FILE`,
//! 3. the `THRESHER_<SECTION>_<KEY>` environment variables ([`env`](mod@env)),
//! 4. the flags `--listen`, `--data-dir`, `--auth-tokens-file` ([`Overrides`]),
//!
//! each a [`raw::RawConfig`] overlaid on the one before (later wins), then
//! 5. [`raw::RawConfig::validate`], which checks every key's range and builds the [`Config`].
//!
//! `config/thresher.toml` is the key table: every key with its default, unit and range. Any problem is
//! a [`ConfigError`] naming the key (and the file) or the environment variable and what is wrong, so a
//! typo never silently falls back to a default: an unknown key or variable, a wrong type, or a value
//! out of range (``config key `window.capacity` = 0: must be between 1 and 100000000``).
//!
//! | file | owns |
//! | --- | --- |
//! | `mod.rs` | [`Config`] and its parts, [`Config::load`] |
//! | `error.rs` | [`ConfigError`] |
//! | `raw.rs` | the raw layers: their tables (`layer!`), reading one from TOML, the overlay |
//! | `env.rs` | `THRESHER_*` variables: which key each sets, and its text parsed as the key's type |
//! | `validate.rs`, `check.rs` | phase two and the range checks its readers share |
//! | `server.rs`, `nats.rs`, `learner.rs`, `solvers.rs` | the readers of `[server]`, `[nats]`, `[[learner]]` and the solver-specific learner keys, with the types they read into |
//!
//! Adding or removing a key: one field in its `layer!` table in `raw.rs`, one line in its section's
//! reader, and its documented line in `config/thresher.toml` (unit tests check that the file sets or
//! documents every key the code knows).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod check;
pub mod durability;
pub mod env;
mod error;
pub mod labels;
pub mod learner;
mod names;
mod nats;
pub mod raw;
mod server;
pub mod solvers;
mod validate;

use crate::learner::params::LearnerConfig;
pub use durability::{DurabilityConfig, WalMode};
pub use error::ConfigError;
pub use labels::LabelsConfig;
pub use names::FeatureNames;
pub use nats::NatsConfig;
use raw::RawConfig;

/// The validated configuration `thresher serve` runs on.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub listen: SocketAddr,
    pub body_limit_bytes: usize,
    /// Request bytes in flight at most (bodies being read or parsed), `server.inflight_bytes`.
    pub inflight_bytes: usize,
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
    /// Most bytes of all names the dictionary holds together.
    pub max_named_feature_bytes: usize,
    /// Longest accepted feature name, bytes.
    pub max_feature_name_bytes: usize,
    /// Most names one request may add to the dictionary.
    pub max_new_names_per_request: usize,
    /// `ingest.feature_names` (with the hash's bits, seed and remembered names).
    pub feature_names: FeatureNames,
    /// Largest accepted magnitude of a label, value or weight.
    pub max_abs_value: f64,
    pub drain: bool,
    pub window_capacity: usize,
    /// `window.half_life_samples`: a sample's weight halves every this many newer samples
    /// (`learner::forget`); `None` (0 in the file) = no forgetting.
    pub half_life_samples: Option<u64>,
    pub snapshot_interval: Duration,
    /// Points of each learner's history ring (`GET /v1/history`).
    pub history_points: usize,
    /// Most points one `GET /v1/history` response holds (`snapshot.history_page_points`).
    pub history_page_points: usize,
    /// `publish.max_relative_gap`: a model whose certificate's relative gap `(P - D) / max(1, |P|)` is
    /// above it is not served (`None`: every model is).
    pub max_relative_gap: Option<f64>,
    /// `[drift]`: the change test on each learner's progressive loss and what a change does.
    pub drift: crate::learner::drift::DriftConfig,
    pub data_dir: Option<PathBuf>,
    pub checkpoint_interval: Duration,
    /// `[durability]`: the write-ahead log of acknowledged samples (with a data directory).
    pub durability: DurabilityConfig,
    /// `[labels]`: the store of predicted samples waiting for a late label.
    pub labels: LabelsConfig,
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
    /// Longest a response may wait for its reader to take more bytes before the connection is closed.
    pub write_timeout: Duration,
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

    /// The number of classes when the learners are multi-class (`classes = C`; then every learner is,
    /// with the same `C`, and the stream's labels are class indices); `None` otherwise.
    pub fn classes(&self) -> Option<usize> {
        self.learners[0].class.as_ref().map(|c| c.classes)
    }

    /// The classes' names, when the multi-class learners' config gives them (`classes = [...]`).
    pub fn class_names(&self) -> Option<std::sync::Arc<[String]>> {
        self.learners[0].class.as_ref()?.names.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loss::LossKind;

    /// Loads `text` as the `--config` file, with the environment `env`.
    pub(super) fn load_text(text: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, text).unwrap();
        let env = env.iter().map(|(a, b)| (a.to_string(), b.to_string()));
        Config::load(Some(&path), env, &Overrides::default())
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
    fn a_multiclass_table_runs_as_one_learner_per_class() {
        let c = load_text(
            "[[learner]]\nname = \"topic\"\nloss = \"logistic\"\nclasses = 3\n",
            &[],
        )
        .unwrap();
        let names: Vec<&str> = c.learners.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["topic-0", "topic-1", "topic-2"]);
        for (i, l) in c.learners.iter().enumerate() {
            let of = l.class.as_ref().unwrap();
            assert_eq!(
                (of.group.as_str(), of.class, of.classes, l.slot),
                ("topic", i, 3, i)
            );
        }
        assert_eq!(c.classes(), Some(3));
        let c = load_text(
            "[[learner]]\nloss = \"hinge\"\n",
            &[("THRESHER_LEARNER_CLASSES", "5")],
        );
        assert_eq!(c.unwrap().classes(), Some(5), "from the environment");
        let named = load_text(
            "[[learner]]\nloss = \"logistic\"\nclasses = [\"a\", \"b\", \"c\"]\n",
            &[],
        )
        .unwrap();
        assert_eq!(named.classes(), Some(3));
        assert_eq!(named.class_names().unwrap().as_ref(), ["a", "b", "c"]);
        let env = load_text(
            "[[learner]]\nloss = \"logistic\"\n",
            &[("THRESHER_LEARNER_CLASSES", "x, y, z")],
        );
        assert_eq!(
            env.unwrap().class_names().unwrap().as_ref(),
            ["x", "y", "z"]
        );
        for bad in [
            "[\"a\", \"b\", \"a\"]",
            "[\"a\", \"b\", \"7\"]",
            "[\"a\", \"\", \"c\"]",
            "[\"a\", \"b\"]",
        ] {
            let e = load_text(
                &format!("[[learner]]\nloss = \"logistic\"\nclasses = {bad}\n"),
                &[],
            )
            .unwrap_err()
            .to_string();
            assert!(e.contains("`learner[0].classes`"), "{bad}: {e}");
        }
        let msg = |t: &str| load_text(t, &[]).unwrap_err().to_string();
        let e = msg("[[learner]]\nloss = \"squared\"\nclasses = 3\n");
        assert!(
            e.contains("`learner[0].classes` = 3") && e.contains("classification"),
            "{e}"
        );
        assert!(msg("[[learner]]\nloss = \"logistic\"\nclasses = 2\n")
            .contains("`learner[0].classes` = 2"));
        let mixed = "[[learner]]\nname = \"a\"\nloss = \"logistic\"\nclasses = 3\n\
                     [[learner]]\nname = \"b\"\nloss = \"logistic\"\n";
        assert!(
            msg(mixed).contains("`learner[1].classes` = unset"),
            "{}",
            msg(mixed)
        );
        let clash = "[[learner]]\nname = \"a\"\nloss = \"logistic\"\nclasses = 3\n\
                     [[learner]]\nname = \"a-1\"\nloss = \"logistic\"\nclasses = 3\n";
        assert!(msg(clash).contains("unique"));
        let global = load_text(
            "[checkpoint]\ndata_dir = \"/tmp/d\"\n[[learner]]\nloss = \"logistic\"\nclasses = 3\n",
            &[
                ("THRESHER_NATS_URL", "nats://127.0.0.1:4222"),
                ("THRESHER_NATS_NODE", "a"),
            ],
        );
        assert!(global
            .unwrap_err()
            .to_string()
            .contains("nats.global_model = false"));
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
}
