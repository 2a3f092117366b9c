//! [`ConfigError`]: every way loading the configuration fails, each naming the key (and the file) or the
//! environment variable at fault; and the hint an error adds when the name looks like a secret.

use std::path::PathBuf;

use thiserror::Error;

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
    /// A key no layer set (only possible when a [`RawConfig`](super::raw::RawConfig) is validated
    /// without the defaults).
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

/// A hint for an unknown key or variable that looks like it holds a secret: tokens live in their own
/// file, never in the configuration (which is often world-readable, committed or shown in `ps`).
pub(super) fn secret_hint(name: &str) -> &'static str {
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
