//! The raw layers of the configuration: [`RawConfig`], what one layer (the embedded defaults, a TOML
//! file, the environment, the flags) sets, before any range is checked; its tables, declared with the
//! `layer!` macro; reading a layer from TOML; and the overlay of one layer on another. The environment's
//! names and text are read in [`super::env`]; ranges are checked in [`RawConfig::validate`].
//!
//! Every key of a layer is an `Option` (a layer sets only some keys), and every table refuses unknown
//! keys (`deny_unknown_fields`), so a typo is an error naming the key, its line and the file instead of
//! a silent default: ``config file F: `server.listn`: unknown key, expected one of `listen`, ...
//! (line 2)``; a wrong type names the key, the expected type and the line.
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

use std::path::Path;

use serde::Deserialize;

use super::error::{secret_hint, ConfigError};
use super::Overrides;

/// The embedded defaults: `config/thresher.toml`, byte for byte.
pub const DEFAULT_TOML: &str = include_str!("../../config/thresher.toml");

/// A key's value read from the text of the environment variable that sets it (the rules per type are
/// in [`super::env`]).
pub(super) trait FromEnv: Sized {
    fn from_env(var: &str, text: &str) -> Result<Self, ConfigError>;
}

/// `learner.lambda` as a layer gives it: a number, or text (only `"auto"` validates).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged, expecting = "a number > 0 or \"auto\"")]
pub enum LambdaValue {
    Number(f64),
    Text(String),
}

/// `learner.classes` as a layer gives it: the number of classes, or their names (JSON labels may then
/// be the names).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(
    untagged,
    expecting = "a number of classes (3 ..= 1000) or a list of class names"
)]
pub enum ClassesValue {
    Count(i64),
    Names(Vec<String>),
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
            pub(super) fn set_env(&mut self, key: &str, var: &str, text: &str) -> Result<bool, ConfigError> {
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
        inflight_bytes: i64,
        worker_slice_us: i64,
        yield_interval_us: i64,
        auth_tokens_file: String,
        metrics_auth: String,
        tls_cert_file: String,
        tls_key_file: String,
        header_read_timeout_s: i64,
        body_idle_timeout_s: i64,
        keepalive_timeout_s: i64,
        write_timeout_s: i64,
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
        max_named_feature_bytes: i64,
        max_feature_name_bytes: i64,
        max_new_names_per_request: i64,
        feature_names: String,
        hash_bits: i64,
        hash_seed: i64,
        hash_names_kept: i64,
        max_abs_value: f64,
        drain: bool,
    }
}

layer! {
    /// `[window]`.
    WindowLayer, "the [window] table" {
        capacity: i64,
        half_life_samples: i64,
    }
}

layer! {
    /// `[snapshot]`.
    SnapshotLayer, "the [snapshot] table" {
        interval_ms: i64,
        history_points: i64,
        history_page_points: i64,
    }
}

layer! {
    /// `[publish]`.
    PublishLayer, "the [publish] table" {
        max_relative_gap: f64,
    }
}

layer! {
    /// `[drift]`.
    DriftLayer, "the [drift] table" {
        action: String,
        delta: f64,
        threshold: f64,
        min_samples: i64,
        alpha: f64,
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
    /// `[durability]`.
    DurabilityLayer, "the [durability] table" {
        wal: String,
        wal_max_bytes: i64,
        wal_fsync_interval_ms: i64,
    }
}

layer! {
    /// `[labels]`.
    LabelsLayer, "the [labels] table" {
        capacity: i64,
        max_bytes: i64,
        ttl_seconds: f64,
        id_max_bytes: i64,
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
    /// One `[[learner]]` table: the shared keys, then the solver-specific ones ([`super::solvers`]; one
    /// flat struct, since serde's `flatten` does not combine with `deny_unknown_fields`).
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
        classes: ClassesValue,
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
        polish: bool,
    }
}

impl LearnerLayer {
    /// How errors name key `k` of the `i`-th `[[learner]]` table: `learner[i].k`.
    pub(super) fn key(i: usize, k: &str) -> String {
        format!("learner[{i}].{k}")
    }
}

/// One layer of the configuration (or several overlaid): what a TOML file, the environment or the flags
/// set. [`RawConfig::validate`] turns it into a [`Config`](super::Config).
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
    pub publish: PublishLayer,
    #[serde(default)]
    pub drift: DriftLayer,
    #[serde(default)]
    pub checkpoint: CheckpointLayer,
    #[serde(default)]
    pub durability: DurabilityLayer,
    #[serde(default)]
    pub labels: LabelsLayer,
    #[serde(default)]
    pub nats: NatsLayer,
    /// The `[[learner]]` tables, each holding only the keys given; a layer that has them replaces the
    /// list below it, and [`RawConfig::validate`] fills each from the default learner.
    pub learner: Option<Vec<LearnerLayer>>,
}

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
        self.publish.overlay(over.publish);
        self.drift.overlay(over.drift);
        self.checkpoint.overlay(over.checkpoint);
        self.durability.overlay(over.durability);
        self.labels.overlay(over.labels);
        self.nats.overlay(over.nats);
        if over.learner.is_some() {
            self.learner = over.learner;
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::load_text;
    use crate::config::Config;
    use crate::loss::LossKind;

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

    /// `config/thresher.toml` sets every key of every section but `[[learner]]` (whose keys
    /// `learner::tests` checks), each with its comment: the file is the key table.
    #[test]
    fn every_layer_key_is_in_the_defaults_and_the_docs() {
        let raw = RawConfig::defaults();
        let sections: [(&str, Vec<&str>, &[&str]); 10] = [
            ("server", raw.server.given(), ServerLayer::KEYS),
            ("ingest", raw.ingest.given(), IngestLayer::KEYS),
            ("window", raw.window.given(), WindowLayer::KEYS),
            ("snapshot", raw.snapshot.given(), SnapshotLayer::KEYS),
            ("publish", raw.publish.given(), PublishLayer::KEYS),
            ("drift", raw.drift.given(), DriftLayer::KEYS),
            ("checkpoint", raw.checkpoint.given(), CheckpointLayer::KEYS),
            ("durability", raw.durability.given(), DurabilityLayer::KEYS),
            ("labels", raw.labels.given(), LabelsLayer::KEYS),
            ("nats", raw.nats.given(), NatsLayer::KEYS),
        ];
        for (section, given, keys) in sections {
            assert_eq!(
                given, keys,
                "config/thresher.toml sets every [{section}] key"
            );
        }
        // Each run of `key = value` lines follows a comment that documents it.
        let mut previous = "";
        for line in DEFAULT_TOML.lines() {
            let is_key = line.starts_with(|c: char| c.is_ascii_lowercase());
            if is_key {
                assert!(
                    previous.starts_with('#'),
                    "config/thresher.toml: `{line}` has no comment above it"
                );
            } else {
                previous = line;
            }
        }
    }
}
