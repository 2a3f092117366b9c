//! The environment layer: `THRESHER_<SECTION>_<KEY>` variables (section and key in any case), e.g.
//! `THRESHER_WINDOW_CAPACITY`, each setting one key of a [`RawConfig`], its text parsed as the key's type
//! (`FromEnv`); `THRESHER_LEARNER_<KEY>` sets a key of the primary (first) learner, solver-specific
//! keys included. A `THRESHER_*` variable that matches no key stops the start naming it
//! (`THRESHER_LEARNER_KK=1`), unless it is one of [`ENV_NOT_CONFIG`], the variables read elsewhere.

use super::error::{secret_hint, ConfigError};
use super::raw::{
    CheckpointLayer, ClassesValue, DriftLayer, DurabilityLayer, FromEnv, IngestLayer, LabelsLayer,
    LambdaValue, LearnerLayer, NatsLayer, PublishLayer, RawConfig, ServerLayer, SnapshotLayer,
    WindowLayer,
};

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
    // The `thresher` binary the Python client's estimators run (`clients/python`): set beside a
    // daemon's own variables, it must not stop the daemon's start.
    "THRESHER_BIN",
    // The Python client's example (`clients/python/examples`): where it caches its data set, and its
    // number of cross-validation folds.
    "THRESHER_EXAMPLE_CACHE",
    "THRESHER_EXAMPLE_FOLDS",
];

/// The sections an environment variable can name, `THRESHER_<SECTION>_<KEY>`.
const ENV_SECTIONS: &[(&str, &[&str])] = &[
    ("server", ServerLayer::KEYS),
    ("ingest", IngestLayer::KEYS),
    ("window", WindowLayer::KEYS),
    ("snapshot", SnapshotLayer::KEYS),
    ("publish", PublishLayer::KEYS),
    ("drift", DriftLayer::KEYS),
    ("checkpoint", CheckpointLayer::KEYS),
    ("durability", DurabilityLayer::KEYS),
    ("labels", LabelsLayer::KEYS),
    ("nats", NatsLayer::KEYS),
    ("learner", LearnerLayer::KEYS),
];

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

impl FromEnv for LambdaValue {
    fn from_env(_: &str, text: &str) -> Result<Self, ConfigError> {
        Ok(match text.trim().parse::<f64>() {
            Ok(v) => LambdaValue::Number(v),
            Err(_) => LambdaValue::Text(text.trim().to_string()),
        })
    }
}

/// A number, or comma-separated class names (`THRESHER_LEARNER_CLASSES=spam,ham,promo`).
impl FromEnv for ClassesValue {
    fn from_env(_: &str, text: &str) -> Result<Self, ConfigError> {
        Ok(match text.trim().parse::<i64>() {
            Ok(v) => ClassesValue::Count(v),
            Err(_) => ClassesValue::Names(text.split(',').map(|n| n.trim().to_string()).collect()),
        })
    }
}

impl RawConfig {
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
                "publish" => self.publish.set_env(key, &var, &text)?,
                "drift" => self.drift.set_env(key, &var, &text)?,
                "checkpoint" => self.checkpoint.set_env(key, &var, &text)?,
                "durability" => self.durability.set_env(key, &var, &text)?,
                "labels" => self.labels.set_env(key, &var, &text)?,
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

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::config::tests::load_text;
    use crate::config::{Config, Overrides};
    use crate::learner::params::SolverOptions;
    use crate::loss::LossKind;
    use crate::solver::StepRule;

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
}
