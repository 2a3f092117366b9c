//! JSON sample objects: `{"label": y, "indices": [...], "values": [...], "weight": c}`, as one line of
//! a JSON-lines file ([`JsonSample`], [`parse_json_line`]) or one sample of a request body
//! (`WireSample`, which may also name its features: `{"label": y, "features": {"name": value}}`).
//! `serde_json` reads both and decides every error; `plain` is the one-pass reader that takes the
//! plain shape of a body's samples faster, to the same bits. `items` reads a JSON array body item by
//! item under the parse's row watch.

mod items;
pub(crate) mod plain;

pub(crate) use items::read_items_watched;

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::ingest::LineError;
use crate::sample::Sample;

/// The JSON form of a sample (one line of a JSON-lines file).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonSample {
    pub label: Option<f64>,
    #[serde(default)]
    pub indices: Vec<u32>,
    #[serde(default)]
    pub values: Vec<f64>,
    pub weight: Option<f64>,
}

impl JsonSample {
    /// Validates into a [`Sample`]; a missing label is an error unless `label_optional` (prediction),
    /// where it becomes NaN-free 0.
    pub fn into_sample(self, label_optional: bool) -> Result<Sample, LineError> {
        let label = match self.label {
            Some(l) => l,
            None if label_optional => 0.0,
            None => return Err(LineError::MissingLabel),
        };
        Ok(Sample::new(self.indices, self.values, label, self.weight)?)
    }
}

/// Parses one JSON line: `{"label": 1.0, "indices": [3, 17], "values": [0.5, 1.0]}`.
pub fn parse_json_line(line: &str) -> Result<Sample, LineError> {
    let js: JsonSample = serde_json::from_str(line).map_err(|e| LineError::Json(e.to_string()))?;
    js.into_sample(false)
}

/// One sample object as `serde` reads it (the reference for the fast reader in [`plain`]).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WireSample {
    pub(super) label: Option<f64>,
    pub(super) indices: Option<Vec<u32>>,
    pub(super) values: Option<Vec<f64>>,
    pub(super) features: Option<BTreeMap<String, f64>>,
    pub(super) weight: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_json_lines_and_rejects_bad_ones() {
        let s =
            parse_json_line(r#"{"label": 1.0, "indices": [3, 17], "values": [0.5, 1.0]}"#).unwrap();
        assert_eq!(s.indices, vec![3, 17]);
        assert!(matches!(
            parse_json_line(r#"{"indices": [1], "values": [1]}"#),
            Err(LineError::MissingLabel)
        ));
        assert!(matches!(
            parse_json_line("{not json"),
            Err(LineError::Json(_))
        ));
        assert!(matches!(
            parse_json_line(r#"{"label": 1, "indices": [1, 2], "values": [1]}"#),
            Err(LineError::Sample(_))
        ));
        assert!(matches!(
            parse_json_line(r#"{"label": 1, "indices": [-1], "values": [1]}"#),
            Err(LineError::Json(_))
        ));
        assert!(matches!(
            parse_json_line(r#"{"label": 1, "extra": 2}"#),
            Err(LineError::Json(_))
        ));
    }
}
