//! The daemon's configuration: embedded defaults, a TOML file, `THRESHER_*` environment overrides and
//! command-line flags, validated once into the typed [`Config`] that `thresher serve` runs on.
//!
//! Two phases (raw → validated): the layers are merged as TOML tables — defaults
//! ([`DEFAULT_TOML`], identical to `config/thresher.toml`) ← `--config FILE` ← environment ← flags — and
//! then every key is read with its type and range checked ([`Config::from_table`]). Any problem is a
//! [`ConfigError`] naming the key (or the environment variable) and what is wrong; an unknown key is an
//! error too, so a typo never silently falls back to a default.
//!
//! | key | default | unit | range | environment |
//! | --- | --- | --- | --- | --- |
//! | `server.listen` | `127.0.0.1:8080` | IP:port | port 0 = any free port | `THRESHER_SERVER_LISTEN` |
//! | `server.body_limit_bytes` | 33554432 | bytes | 1 ..= 2^32 | `THRESHER_SERVER_BODY_LIMIT_BYTES` |
//! | `server.realtime_http` | false | bool | | `THRESHER_SERVER_REALTIME_HTTP` |
//! | `server.http_slice_us` | 100 | µs (0 = kernel default) | 0 ..= 100000 | `THRESHER_SERVER_HTTP_SLICE_US` |
//! | `server.worker_slice_us` | 1000 | µs (0 = kernel default) | 0 ..= 100000 | `THRESHER_SERVER_WORKER_SLICE_US` |
//! | `server.yield_interval_us` | 200 | µs (0 = never yield) | 0 ..= 100000 | `THRESHER_SERVER_YIELD_INTERVAL_US` |
//! | `server.recv_buffer_kib` | 0 | KiB per connection (0 = the kernel's autotuning) | 0 ..= 65536 | `THRESHER_SERVER_RECV_BUFFER_KIB` |
//! | `ingest.queue_capacity` | 1024 | batches (each learner's channel holds as many again) | 1 ..= 10^6 | `THRESHER_INGEST_QUEUE_CAPACITY` |
//! | `ingest.queue_samples` | 640000 | samples accepted and not yet learned (the memory bound) | 1 ..= 10^9 | `THRESHER_INGEST_QUEUE_SAMPLES` |
//! | `ingest.max_dim` | 16777216 | features | 1 ..= 2^30 | `THRESHER_INGEST_MAX_DIM` |
//! | `ingest.max_named_features` | 1048576 | names | 0 ..= max_dim | `THRESHER_INGEST_MAX_NAMED_FEATURES` |
//! | `ingest.drain` | true | bool | | `THRESHER_INGEST_DRAIN` |
//! | `ingest.busy_step_share` | 0.25 | share of a learner's busy time spent stepping while bodies are being parsed | (0, 1] | `THRESHER_INGEST_BUSY_STEP_SHARE` |
//! | `window.capacity` | 100000 | samples | 1 ..= 10^8 | `THRESHER_WINDOW_CAPACITY` |
//! | `snapshot.interval_ms` | 500 | ms | 1 ..= 3600000 | `THRESHER_SNAPSHOT_INTERVAL_MS` |
//! | `checkpoint.data_dir` | `""` (off) | path | | `THRESHER_CHECKPOINT_DATA_DIR` |
//! | `checkpoint.interval_s` | 60 | s | 1 ..= 86400 | `THRESHER_CHECKPOINT_INTERVAL_S` |
//! | `learner.name` | `primary` | | `[A-Za-z0-9_-]+`, unique | `THRESHER_LEARNER_NAME` |
//! | `learner.solver` | `sdiht` | | `sdiht`, `diht`, `mirror`, `smidas`, `subset` | `THRESHER_LEARNER_SOLVER` |
//! | `learner.loss` | `squared` | | squared, huber, hinge, logistic | `THRESHER_LEARNER_LOSS` |
//! | `learner.gamma` | 0.25 | | > 0 | `THRESHER_LEARNER_GAMMA` |
//! | `learner.k` | 10 | features | 1 ..= max_dim | `THRESHER_LEARNER_K` |
//! | `learner.lambda` | 0.01 | | > 0 | `THRESHER_LEARNER_LAMBDA` |
//! | `learner.blocks` | 8 | blocks | 1 ..= 10^6 | `THRESHER_LEARNER_BLOCKS` |
//! | `learner.step` | `adaptive` | | `adaptive` or eta > 0 | `THRESHER_LEARNER_STEP` |
//! | `learner.recompute_every` | 1024 | steps | >= 1 | `THRESHER_LEARNER_RECOMPUTE_EVERY` |
//! | `learner.tol` | 1e-9 | relative gap | >= 0 | `THRESHER_LEARNER_TOL` |
//! | `learner.seed` | 1 | | u64 | `THRESHER_LEARNER_SEED` |
//!
//! `[[learner]]` tables may repeat (the first is the primary); a key missing from a learner table takes
//! the default above. Learner environment overrides apply to the primary learner. The keys of the
//! `mirror`, `smidas` and `subset` solvers (`mirror`, `beta`, `p`, `constraint`, `batch`, `horizon`, `l1`,
//! `lambda0`, `lambda1`, `lambda2`, `resolve_interval_ms`, `xi`, `zeta`, `c`) are listed in [`solvers`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use thiserror::Error;
use toml::{Table, Value};

use crate::loss::{Loss, LossKind};
use crate::solver::StepRule;

pub mod solvers;
pub use solvers::SolverOptions;

/// The embedded defaults: `config/thresher.toml`, byte for byte.
pub const DEFAULT_TOML: &str = include_str!("../../config/thresher.toml");

/// Prefix of every environment override.
pub const ENV_PREFIX: &str = "THRESHER_";

/// A configuration problem, naming the key or environment variable at fault.
#[derive(Debug, Error, PartialEq)]
pub enum ConfigError {
    #[error("cannot read config file {}: {reason}", path.display())]
    Io { path: PathBuf, reason: String },
    #[error("config file {}: {reason}", path.display())]
    Syntax { path: PathBuf, reason: String },
    #[error("unknown config key `{0}`")]
    UnknownKey(String),
    #[error("config key `{key}`: expected {expected}, got {got}")]
    Type {
        key: String,
        expected: &'static str,
        got: String,
    },
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
    /// The solver-specific keys ([`solvers`]).
    pub options: SolverOptions,
}

/// The validated configuration `thresher serve` runs on.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub listen: SocketAddr,
    pub body_limit_bytes: usize,
    /// Run the HTTP worker threads under SCHED_FIFO (best effort; see `cli::serve`).
    pub realtime_http: bool,
    /// The scheduler time slice each HTTP worker asks for, nanoseconds; 0 leaves the kernel's default.
    pub http_slice_ns: u64,
    /// The scheduler time slice the body parser and learner threads ask for, nanoseconds; 0 leaves the
    /// kernel's default.
    pub worker_slice_ns: u64,
    /// How often the parser and learner threads yield their core at a yield point ([`crate::courtesy`]);
    /// zero = never.
    pub yield_interval: Duration,
    /// `SO_RCVBUF` of the listening socket, inherited by every connection, bytes; 0 leaves the kernel's
    /// autotuning (which grows a busy loopback connection's buffer to tens of MiB).
    pub recv_buffer_bytes: usize,
    pub queue_capacity: usize,
    pub queue_samples: usize,
    pub max_dim: usize,
    pub max_named_features: usize,
    pub drain: bool,
    /// While request bodies are being parsed, the most of a learner's busy time its solver steps may
    /// take (`daemon::pace`); 1 = no limit.
    pub busy_step_share: f64,
    pub window_capacity: usize,
    pub snapshot_interval: Duration,
    pub data_dir: Option<PathBuf>,
    pub checkpoint_interval: Duration,
    /// At least one; the first is the primary.
    pub learners: Vec<LearnerConfig>,
}

/// Command-line values that override the file and the environment.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub listen: Option<String>,
    pub data_dir: Option<PathBuf>,
}

impl Config {
    /// The embedded defaults.
    pub fn defaults() -> Config {
        Config::from_table(default_table()).expect("the embedded defaults are valid")
    }

    /// Loads the layers in order: defaults ← `file` ← `env` (`THRESHER_*` pairs) ← `flags`, then validates.
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
        flags: &Overrides,
    ) -> Result<Config, ConfigError> {
        let mut table = default_table();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Io {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })?;
            let user: Table = text
                .parse()
                .map_err(|e: toml::de::Error| ConfigError::Syntax {
                    path: path.to_path_buf(),
                    reason: e.to_string().trim().replace('\n', " "),
                })?;
            merge_file(&mut table, user)?;
        }
        apply_env(&mut table, env)?;
        if let Some(listen) = &flags.listen {
            set(
                &mut table,
                "server",
                "listen",
                Value::String(listen.clone()),
            );
        }
        if let Some(dir) = &flags.data_dir {
            set(
                &mut table,
                "checkpoint",
                "data_dir",
                Value::String(dir.display().to_string()),
            );
        }
        Config::from_table(table)
    }

    /// Loads with the process environment.
    pub fn load_from_process(
        file: Option<&Path>,
        flags: &Overrides,
    ) -> Result<Config, ConfigError> {
        Config::load(file, std::env::vars(), flags)
    }

    /// Phase two: reads every key with its type and checks its range.
    pub fn from_table(table: Table) -> Result<Config, ConfigError> {
        let r = Reader { table: &table };
        let listen_text = r.string("server", "listen")?;
        let listen: SocketAddr = listen_text.parse().map_err(|_| ConfigError::Range {
            key: "server.listen".into(),
            value: format!("{listen_text:?}"),
            reason: "expected IP:port, e.g. 127.0.0.1:8080".into(),
        })?;
        let max_dim = r.int("ingest", "max_dim", 1, 1 << 30)? as usize;
        let data_dir = r.string("checkpoint", "data_dir")?;
        let learner_tables = match table.get("learner") {
            Some(Value::Array(a)) if !a.is_empty() => a.clone(),
            Some(Value::Array(_)) => {
                return Err(range(
                    "learner",
                    "[]",
                    "at least one [[learner]] table is needed",
                ))
            }
            _ => {
                return Err(ConfigError::Type {
                    key: "learner".into(),
                    expected: "an array of tables",
                    got: "something else".into(),
                })
            }
        };
        let mut learners = Vec::new();
        for (i, lt) in learner_tables.iter().enumerate() {
            let Value::Table(lt) = lt else {
                return Err(ConfigError::Type {
                    key: format!("learner[{i}]"),
                    expected: "a table",
                    got: lt.type_str().into(),
                });
            };
            let learner = read_learner(lt, i, max_dim)?;
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
        Ok(Config {
            listen,
            body_limit_bytes: r.int("server", "body_limit_bytes", 1, 1 << 32)? as usize,
            realtime_http: r.bool("server", "realtime_http")?,
            http_slice_ns: r.int("server", "http_slice_us", 0, 100_000)? as u64 * 1000,
            worker_slice_ns: r.int("server", "worker_slice_us", 0, 100_000)? as u64 * 1000,
            yield_interval: Duration::from_micros(r.int(
                "server",
                "yield_interval_us",
                0,
                100_000,
            )? as u64),
            recv_buffer_bytes: r.int("server", "recv_buffer_kib", 0, 65_536)? as usize * 1024,
            queue_capacity: r.int("ingest", "queue_capacity", 1, 1_000_000)? as usize,
            queue_samples: r.int("ingest", "queue_samples", 1, 1_000_000_000)? as usize,
            max_dim,
            max_named_features: r.int("ingest", "max_named_features", 0, max_dim as i64)? as usize,
            drain: r.bool("ingest", "drain")?,
            busy_step_share: r.share("ingest", "busy_step_share")?,
            window_capacity: r.int("window", "capacity", 1, 100_000_000)? as usize,
            snapshot_interval: Duration::from_millis(r.int(
                "snapshot",
                "interval_ms",
                1,
                3_600_000,
            )? as u64),
            data_dir: (!data_dir.is_empty()).then(|| PathBuf::from(data_dir)),
            checkpoint_interval: Duration::from_secs(
                r.int("checkpoint", "interval_s", 1, 86_400)? as u64
            ),
            learners,
        })
    }

    /// The primary learner (the first `[[learner]]`).
    pub fn primary(&self) -> &LearnerConfig {
        &self.learners[0]
    }
}

fn read_learner(t: &Table, i: usize, max_dim: usize) -> Result<LearnerConfig, ConfigError> {
    let key = |k: &str| format!("learner[{i}].{k}");
    let r = LearnerReader { table: t, index: i };
    let name = r.string("name")?;
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
    let solver = match r.string("solver")?.as_str() {
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
    let loss_name = r.string("loss")?;
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
    let gamma = r.float("gamma")?;
    let loss = Loss::new(kind, gamma)
        .map_err(|e| range(&key("gamma"), &gamma.to_string(), &e.to_string()))?;
    let k = r.int("k", 1, max_dim as i64)? as usize;
    let lambda = r.float("lambda")?;
    if !(lambda.is_finite() && lambda > 0.0) {
        return Err(range(
            &key("lambda"),
            &lambda.to_string(),
            "must be finite and > 0",
        ));
    }
    let mut blocks = r.int("blocks", 1, 1_000_000)? as usize;
    if r.string("solver")? == "diht" {
        blocks = 1;
    }
    let step_text = r.string("step")?;
    let step = match step_text.as_str() {
        "adaptive" => StepRule::Adaptive,
        other => match other.parse::<f64>() {
            Ok(eta) if eta.is_finite() && eta > 0.0 => StepRule::Constant(eta),
            _ => {
                return Err(range(
                    &key("step"),
                    other,
                    "expected \"adaptive\" or a constant eta > 0",
                ))
            }
        },
    };
    let tol = r.float("tol")?;
    if !(tol.is_finite() && tol >= 0.0) {
        return Err(range(
            &key("tol"),
            &tol.to_string(),
            "must be finite and >= 0",
        ));
    }
    let options = solvers::read(t, i, &r.string("solver")?, step, max_dim)?;
    Ok(LearnerConfig {
        options,
        name,
        solver,
        loss,
        k,
        lambda,
        blocks,
        step,
        recompute_every: r.int("recompute_every", 1, i64::MAX)? as usize,
        tol,
        seed: r.int("seed", 0, i64::MAX)? as u64,
    })
}

fn range(key: &str, value: &str, reason: &str) -> ConfigError {
    ConfigError::Range {
        key: key.into(),
        value: value.into(),
        reason: reason.into(),
    }
}

fn default_table() -> Table {
    DEFAULT_TOML.parse().expect("config/thresher.toml parses")
}

/// The default learner table (every learner key with its default).
fn default_learner() -> Table {
    match default_table().remove("learner") {
        Some(Value::Array(mut a)) => match a.remove(0) {
            Value::Table(mut t) => {
                t.extend(solvers::defaults());
                t
            }
            _ => unreachable!("config/thresher.toml has a [[learner]] table"),
        },
        _ => unreachable!("config/thresher.toml has a [[learner]] table"),
    }
}

fn set(table: &mut Table, section: &str, key: &str, value: Value) {
    if let Some(Value::Table(s)) = table.get_mut(section) {
        s.insert(key.to_string(), value);
    }
}

/// Overlays a user file on the defaults; every key must be a known one. `[[learner]]` tables replace the
/// default list, each filled up with the default learner keys.
fn merge_file(base: &mut Table, user: Table) -> Result<(), ConfigError> {
    for (section, value) in user {
        if section == "learner" {
            let Value::Array(items) = value else {
                return Err(ConfigError::Type {
                    key: "learner".into(),
                    expected: "[[learner]] tables",
                    got: value.type_str().into(),
                });
            };
            let defaults = default_learner();
            let mut learners = Vec::new();
            for (i, item) in items.into_iter().enumerate() {
                let Value::Table(t) = item else {
                    return Err(ConfigError::Type {
                        key: format!("learner[{i}]"),
                        expected: "a table",
                        got: item.type_str().into(),
                    });
                };
                let mut full = defaults.clone();
                let mut given = Vec::new();
                for (k, v) in t {
                    if !full.contains_key(&k) {
                        return Err(ConfigError::UnknownKey(format!("learner[{i}].{k}")));
                    }
                    given.push(k.clone());
                    full.insert(k, v);
                }
                if let Some(Value::String(solver)) = full.get("solver") {
                    solvers::check_applicable(i, solver, &given)?;
                }
                learners.push(Value::Table(full));
            }
            base.insert("learner".into(), Value::Array(learners));
            continue;
        }
        let Some(Value::Table(base_section)) = base.get_mut(&section) else {
            return Err(ConfigError::UnknownKey(section));
        };
        let Value::Table(user_section) = value else {
            return Err(ConfigError::Type {
                key: section,
                expected: "a table",
                got: value.type_str().into(),
            });
        };
        for (k, v) in user_section {
            if !base_section.contains_key(&k) {
                return Err(ConfigError::UnknownKey(format!("{section}.{k}")));
            }
            base_section.insert(k, v);
        }
    }
    Ok(())
}

/// Applies `THRESHER_<SECTION>_<KEY>` (and `THRESHER_LEARNER_<KEY>` for the primary learner), parsing
/// the text as the type the default has. Unknown `THRESHER_*` variables are ignored (they may belong to
/// the environment, e.g. `THRESHER_LOG`).
fn apply_env(
    table: &mut Table,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<(), ConfigError> {
    let defaults = default_table();
    let learner_defaults = default_learner();
    for (var, text) in env {
        let Some(rest) = var.strip_prefix(ENV_PREFIX) else {
            continue;
        };
        let rest = rest.to_ascii_lowercase();
        if let Some(key) = rest.strip_prefix("learner_") {
            let Some(template) = learner_defaults.get(key) else {
                continue;
            };
            let value = parse_env_value(&var, &text, template)?;
            if let Some(Value::Array(a)) = table.get_mut("learner") {
                if let Some(Value::Table(first)) = a.first_mut() {
                    first.insert(key.to_string(), value);
                }
            }
            continue;
        }
        for (section, body) in &defaults {
            let Value::Table(body) = body else { continue };
            let Some(key) = rest.strip_prefix(&format!("{section}_")) else {
                continue;
            };
            let Some(template) = body.get(key) else {
                continue;
            };
            let value = parse_env_value(&var, &text, template)?;
            set(table, section, key, value);
        }
    }
    Ok(())
}

fn parse_env_value(var: &str, text: &str, template: &Value) -> Result<Value, ConfigError> {
    let err = |expected| ConfigError::Env {
        var: var.into(),
        value: text.into(),
        expected,
    };
    Ok(match template {
        Value::Integer(_) => Value::Integer(text.trim().parse().map_err(|_| err("an integer"))?),
        Value::Float(_) => Value::Float(text.trim().parse().map_err(|_| err("a number"))?),
        Value::Boolean(_) => Value::Boolean(text.trim().parse().map_err(|_| err("true or false"))?),
        _ => Value::String(text.to_string()),
    })
}

/// Typed access to `section.key` of the merged table.
struct Reader<'a> {
    table: &'a Table,
}

impl Reader<'_> {
    fn get(&self, section: &str, key: &str) -> Result<&Value, ConfigError> {
        self.table
            .get(section)
            .and_then(|s| s.get(key))
            .ok_or_else(|| ConfigError::UnknownKey(format!("{section}.{key}")))
    }
    fn string(&self, section: &str, key: &str) -> Result<String, ConfigError> {
        as_string(self.get(section, key)?, &format!("{section}.{key}"))
    }
    fn int(&self, section: &str, key: &str, lo: i64, hi: i64) -> Result<i64, ConfigError> {
        as_int(self.get(section, key)?, &format!("{section}.{key}"), lo, hi)
    }
    /// A number in `(0, 1]`.
    fn share(&self, section: &str, key: &str) -> Result<f64, ConfigError> {
        let name = format!("{section}.{key}");
        let value = match self.get(section, key)? {
            Value::Float(f) => *f,
            Value::Integer(i) => *i as f64,
            v => return Err(type_err(&name, "a number", v)),
        };
        if !(value > 0.0 && value <= 1.0) {
            return Err(range(&name, &value.to_string(), "must be in (0, 1]"));
        }
        Ok(value)
    }
    fn bool(&self, section: &str, key: &str) -> Result<bool, ConfigError> {
        match self.get(section, key)? {
            Value::Boolean(b) => Ok(*b),
            v => Err(type_err(&format!("{section}.{key}"), "true or false", v)),
        }
    }
}

struct LearnerReader<'a> {
    table: &'a Table,
    index: usize,
}

impl LearnerReader<'_> {
    fn key(&self, k: &str) -> String {
        format!("learner[{}].{k}", self.index)
    }
    fn get(&self, k: &str) -> Result<&Value, ConfigError> {
        self.table
            .get(k)
            .ok_or_else(|| ConfigError::UnknownKey(self.key(k)))
    }
    fn string(&self, k: &str) -> Result<String, ConfigError> {
        as_string(self.get(k)?, &self.key(k))
    }
    fn int(&self, k: &str, lo: i64, hi: i64) -> Result<i64, ConfigError> {
        as_int(self.get(k)?, &self.key(k), lo, hi)
    }
    fn float(&self, k: &str) -> Result<f64, ConfigError> {
        match self.get(k)? {
            Value::Float(f) => Ok(*f),
            Value::Integer(i) => Ok(*i as f64),
            v => Err(type_err(&self.key(k), "a number", v)),
        }
    }
}

fn type_err(key: &str, expected: &'static str, got: &Value) -> ConfigError {
    ConfigError::Type {
        key: key.into(),
        expected,
        got: got.to_string(),
    }
}

fn as_string(v: &Value, key: &str) -> Result<String, ConfigError> {
    match v {
        Value::String(s) => Ok(s.clone()),
        v => Err(type_err(key, "a string", v)),
    }
}

fn as_int(v: &Value, key: &str, lo: i64, hi: i64) -> Result<i64, ConfigError> {
    match v {
        Value::Integer(i) if (lo..=hi).contains(i) => Ok(*i),
        Value::Integer(i) => Err(range(
            key,
            &i.to_string(),
            &format!("must be between {lo} and {hi}"),
        )),
        v => Err(type_err(key, "an integer", v)),
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
        assert!(msg("[window]\ncapacity = \"big\"\n")
            .contains("`window.capacity`: expected an integer"));
        assert!(msg("[[learner]]\nlambda = -1.0\n").contains("`learner[0].lambda`"));
        assert!(msg("[[learner]]\nloss = \"l1\"\n").contains("`learner[0].loss`"));
        assert!(msg("[[learner]]\nname = \"a\"\n[[learner]]\nname = \"a\"\n").contains("unique"));
        assert!(msg("[server]\nlisten = \"nowhere\"\n").contains("`server.listen`"));
        assert!(msg("[server\n").contains("c.toml"));
        for bad in ["0", "1.5", "-0.1", "nan"] {
            let e = msg(&format!("[ingest]\nbusy_step_share = {bad}\n"));
            assert!(e.contains("`ingest.busy_step_share`"), "{bad}: {e}");
        }
        let share = load_text("", &[("THRESHER_INGEST_BUSY_STEP_SHARE", "1")]).unwrap();
        assert_eq!(share.busy_step_share, 1.0);
        let e = load_text("", &[("THRESHER_LEARNER_K", "many")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("THRESHER_LEARNER_K=many"), "{e}");
    }
}
