//! JSON sample objects: `{"label": y, "indices": [...], "values": [...], "weight": c}`, as one line of
//! a JSON-lines file ([`JsonSample`], [`parse_json_line`]) or one sample of a request body
//! (`WireSample`, which may also name its features: `{"label": y, "features": {"name": value}}`).
//! `serde_json` reads both and decides every error; `plain` is the one-pass reader that takes the
//! plain shape of a body's samples faster, to the same bits. `items` reads a JSON array body item by
//! item under the parse's row watch, with each item's repeated keys. A `"features"` object is read by `FeatureMap`, which refuses a
//! repeated name (as the LIBSVM reader refuses a repeated index) where a map would keep the last value
//! silently.

mod items;
pub(crate) mod plain;

pub(crate) use items::{read_items_watched, Item};

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

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
    pub(super) label: Option<WireLabel>,
    pub(super) indices: Option<Vec<u32>>,
    pub(super) values: Option<Vec<f64>>,
    pub(super) features: Option<FeatureMap>,
    pub(super) weight: Option<f64>,
}

/// A sample's label as a body gives it: a number, or the name of a class (multi-class learners whose
/// config names their classes).
#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "a number, or a class name")]
pub(crate) enum WireLabel {
    Number(f64),
    Name(String),
}

/// A `"features"` object's `(name, value)` pairs, sorted by name (the order in which a sample's new
/// names are registered). A name given twice is an error naming it, not "last one wins".
#[derive(Debug, Default, PartialEq)]
pub(super) struct FeatureMap(pub(super) Vec<(String, f64)>);

impl<'de> Deserialize<'de> for FeatureMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<FeatureMap, D::Error> {
        struct Pairs;
        impl<'de> Visitor<'de> for Pairs {
            type Value = FeatureMap;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of feature names and numbers")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FeatureMap, A::Error> {
                let mut pairs: Vec<(String, f64)> =
                    Vec::with_capacity(map.size_hint().unwrap_or(0).min(1024));
                while let Some((name, value)) = map.next_entry::<String, f64>()? {
                    pairs.push((name, value));
                }
                pairs.sort_by(|a, b| a.0.cmp(&b.0));
                if let Some(w) = pairs.windows(2).find(|w| w[0].0 == w[1].0) {
                    return Err(serde::de::Error::custom(format_args!(
                        "duplicate feature name {:?} in \"features\"",
                        w[0].0
                    )));
                }
                Ok(FeatureMap(pairs))
            }
        }
        deserializer.deserialize_map(Pairs)
    }
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

    #[test]
    fn a_repeated_feature_name_is_refused_naming_it() {
        let w: WireSample = serde_json::from_str(r#"{"features": {"b": 1, "a": 2}}"#).unwrap();
        assert_eq!(
            w.features.unwrap().0,
            vec![("a".to_string(), 2.0), ("b".to_string(), 1.0)]
        );
        let e = serde_json::from_str::<WireSample>(r#"{"features": {"a": 1, "b": 2, "a": 3}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("duplicate feature name \"a\""), "{e}");
        // The same name spelt with an escape is the same name.
        let e = serde_json::from_str::<WireSample>(r#"{"features": {"a": 1, "\u0061": 2}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("duplicate feature name"), "{e}");
    }
}
