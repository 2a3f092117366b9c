//! The checks every section reader applies to a key of the layered configuration: it is set, an integer
//! in its range, a finite positive number, a path, a name. Each failure is a [`ConfigError`] naming the
//! key and the value.

use std::path::PathBuf;
use std::time::Duration;

use super::error::ConfigError;

/// The error for `key` = `value`, out of range for `reason`.
pub(super) fn range(key: &str, value: &str, reason: &str) -> ConfigError {
    ConfigError::Range {
        key: key.into(),
        value: value.into(),
        reason: reason.into(),
    }
}

/// The value of `key`, which every layered config has (the defaults set it).
pub(super) fn need<T: Clone>(value: &Option<T>, key: &str) -> Result<T, ConfigError> {
    value
        .clone()
        .ok_or_else(|| ConfigError::Missing(key.into()))
}

/// An integer in `lo ..= hi`.
pub(super) fn int(value: &Option<i64>, key: &str, lo: i64, hi: i64) -> Result<i64, ConfigError> {
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
pub(super) fn positive(value: &Option<f64>, key: &str) -> Result<f64, ConfigError> {
    let v = need(value, key)?;
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(range(key, &v.to_string(), "must be finite and > 0"))
    }
}

/// A path key: `""` is unset.
pub(super) fn path_key(value: &Option<String>, key: &str) -> Result<Option<PathBuf>, ConfigError> {
    let text = need(value, key)?;
    Ok((!text.is_empty()).then(|| PathBuf::from(text)))
}

/// A name as learners, NATS streams, consumers and nodes take it: `[A-Za-z0-9_-]+`.
pub(super) fn is_name(text: &str) -> bool {
    !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// An integer in `lo ..= hi` (`lo >= 0`) as a count.
pub(super) fn count(
    value: &Option<i64>,
    key: &str,
    lo: i64,
    hi: i64,
) -> Result<usize, ConfigError> {
    Ok(int(value, key, lo, hi)? as usize)
}

/// An integer in `lo ..= hi` (`lo >= 0`) of the time unit `unit` makes a duration of, e.g.
/// [`Duration::from_secs`].
pub(super) fn duration(
    value: &Option<i64>,
    key: &str,
    (lo, hi): (i64, i64),
    unit: fn(u64) -> Duration,
) -> Result<Duration, ConfigError> {
    Ok(unit(int(value, key, lo, hi)? as u64))
}
