//! JSON sample objects: `{"label": y, "indices": [...], "values": [...], "weight": c}`, as one line of
//! a JSON-lines file ([`JsonSample`], [`parse_json_line`]) or one sample of a request body
//! (`WireSample`, which may also name its features: `{"label": y, "features": {"name": value}}`).
//! `serde_json` reads both and decides every error; `plain` is the one-pass reader that takes the
//! plain shape of a body's samples faster, to the same bits. `items` reads a JSON array body item by
//! item under the parse's row watch. A `"features"` object is read by `FeatureMap`, which refuses a
//! repeated name (as the LIBSVM reader refuses a repeated index) where a map would keep the last value
//! silently.

mod items;
pub(crate) mod plain;

pub(crate) use items::read_items_watched;

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
    pub(super) label: Option<f64>,
    pub(super) indices: Option<Vec<u32>>,
    pub(super) values: Option<Vec<f64>>,
    pub(super) features: Option<FeatureMap>,
    pub(super) weight: Option<f64>,
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

/// The repeated keys of one JSON array item, found by reading it again from the body's text: a
/// `serde_json::Value` keeps only the last of repeated keys, so the array path (which reads items
/// as values first, to name the failing item) would accept what the line path refuses. `Some` holds
/// the message: a repeated key of the sample object, or a repeated name in its `"features"`.
#[derive(Debug, Default)]
pub(super) struct RepeatedKeys(pub(super) Option<String>);

impl<'de> Deserialize<'de> for RepeatedKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<RepeatedKeys, D::Error> {
        deserializer.deserialize_any(RepeatScan { features: false })
    }
}

/// [`RepeatedKeys`]' visitor: accepts any JSON value; looks at the keys of an object (the item's,
/// or with `features`, its `"features"` object's).
struct RepeatScan {
    features: bool,
}

impl<'de> Visitor<'de> for RepeatScan {
    type Value = RepeatedKeys;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<RepeatedKeys, E> {
        Ok(RepeatedKeys(None))
    }
    fn visit_i64<E>(self, _: i64) -> Result<RepeatedKeys, E> {
        Ok(RepeatedKeys(None))
    }
    fn visit_u64<E>(self, _: u64) -> Result<RepeatedKeys, E> {
        Ok(RepeatedKeys(None))
    }
    fn visit_f64<E>(self, _: f64) -> Result<RepeatedKeys, E> {
        Ok(RepeatedKeys(None))
    }
    fn visit_str<E>(self, _: &str) -> Result<RepeatedKeys, E> {
        Ok(RepeatedKeys(None))
    }
    fn visit_unit<E>(self) -> Result<RepeatedKeys, E> {
        Ok(RepeatedKeys(None))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<RepeatedKeys, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(RepeatedKeys(None))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RepeatedKeys, A::Error> {
        let mut keys: Vec<String> = Vec::new();
        let mut found: Option<String> = None;
        while let Some(key) = map.next_key::<String>()? {
            if !self.features && key == "features" {
                let inner: RepeatedKeys = map.next_value_seed(RepeatSeed)?;
                found = found.or(inner.0);
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
            if found.is_none() && keys.contains(&key) {
                found = Some(if self.features {
                    format!("duplicate feature name {key:?} in \"features\"")
                } else {
                    format!("duplicate field {key:?}")
                });
            }
            keys.push(key);
        }
        Ok(RepeatedKeys(found))
    }
}

/// Reads a `"features"` value with [`RepeatScan`] in its features mode.
struct RepeatSeed;

impl<'de> serde::de::DeserializeSeed<'de> for RepeatSeed {
    type Value = RepeatedKeys;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<RepeatedKeys, D::Error> {
        deserializer.deserialize_any(RepeatScan { features: true })
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
