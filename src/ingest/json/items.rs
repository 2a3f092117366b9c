//! A JSON array body read by serde item by item, with the parse's row watch asked before each item
//! is kept: a body of millions of small items (`[{},{},…]`) stops at the in-flight sample budget
//! instead of being held whole as `serde_json::Value`s first. Each item is read into the `Value` serde
//! would build, noting on the way the first repeated key of the item object or of its `"features"`
//! object (a `Value` keeps only the last of repeated keys, where the line formats refuse them).

use std::fmt;

use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::Deserializer;
use serde_json::{Map, Number, Value};

use crate::ingest::batch::Watch;
use crate::ingest::BatchError;

/// One item of a JSON array body: its value as serde reads it, and `Some(message)` if it repeats a
/// key of the item object (`duplicate field "k"`) or a name of its `"features"` object (`duplicate
/// feature name "n" in "features"`), the first one found.
#[derive(Debug)]
pub(crate) struct Item {
    pub(crate) value: Value,
    pub(crate) repeated: Option<String>,
}

/// The items of the JSON array `body`, each asked of `watch` (with its 1-based position) before it
/// is kept. A body that is not a JSON array is the error `invalid JSON array: …`; a watch error is
/// returned as the watch gave it.
pub(crate) fn read_items_watched(
    body: &str,
    watch: &mut Watch<'_>,
) -> Result<Vec<Item>, BatchError> {
    let mut stopped = None;
    let mut de = serde_json::Deserializer::from_str(body);
    let read = Items {
        watch,
        stopped: &mut stopped,
    }
    .deserialize(&mut de)
    .and_then(|items| de.end().map(|()| items));
    match (read, stopped) {
        (_, Some(e)) => Err(e),
        (Ok(items), None) => Ok(items),
        (Err(e), None) => Err(BatchError {
            line: None,
            message: format!("invalid JSON array: {e}"),
            samples: 0,
        }),
    }
}

struct Items<'w, 'a> {
    watch: &'w mut Watch<'a>,
    stopped: &'w mut Option<BatchError>,
}

impl<'de> DeserializeSeed<'de> for Items<'_, '_> {
    type Value = Vec<Item>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Item>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Items<'_, '_> {
    type Value = Vec<Item>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a sequence")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Item>, A::Error> {
        let mut items = Vec::new();
        while let Some((value, repeated)) = seq.next_element_seed(Scan { features: false })? {
            if let Err(e) = (self.watch)(items.len() + 1) {
                *self.stopped = Some(e);
                return Err(serde::de::Error::custom("stopped"));
            }
            items.push(Item { value, repeated });
        }
        Ok(items)
    }
}

/// Reads a value as `Value`'s own visitor does, and the first repeated key of an object: the item's
/// (`features` false), whose `"features"` value is read in the features mode, or of that `"features"`
/// object. Nested values are read as plain `Value`s.
#[derive(Clone, Copy)]
struct Scan {
    features: bool,
}

impl<'de> DeserializeSeed<'de> for Scan {
    type Value = (Value, Option<String>);

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Scan {
    type Value = (Value, Option<String>);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
        Ok((Value::Bool(b), None))
    }
    fn visit_i64<E>(self, i: i64) -> Result<Self::Value, E> {
        Ok((Value::Number(i.into()), None))
    }
    fn visit_u64<E>(self, u: u64) -> Result<Self::Value, E> {
        Ok((Value::Number(u.into()), None))
    }
    fn visit_f64<E>(self, f: f64) -> Result<Self::Value, E> {
        Ok((Number::from_f64(f).map_or(Value::Null, Value::Number), None))
    }
    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok((Value::String(s.to_owned()), None))
    }
    fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
        Ok((Value::String(s), None))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok((Value::Null, None))
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok((Value::Null, None))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut values = Vec::new();
        while let Some(value) = seq.next_element::<Value>()? {
            values.push(value);
        }
        Ok((Value::Array(values), None))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut object = Map::new();
        let mut found: Option<String> = None;
        while let Some(key) = map.next_key::<String>()? {
            let value = if !self.features && key == "features" {
                let (value, inner) = map.next_value_seed(Scan { features: true })?;
                found = found.or(inner);
                value
            } else {
                map.next_value::<Value>()?
            };
            if found.is_none() && object.contains_key(&key) {
                found = Some(if self.features {
                    format!("duplicate feature name {key:?} in \"features\"")
                } else {
                    format!("duplicate field {key:?}")
                });
            }
            // A repeated key keeps its last value, as in `Value`.
            object.insert(key, value);
        }
        Ok((Value::Object(object), found))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same items and errors as `serde_json::from_str::<Vec<Value>>`, and the watch's error as it
    /// gave it, at the item it refused.
    #[test]
    fn reads_like_serde_and_stops_where_the_watch_says() {
        let mut none = |_| Ok(());
        let items = read_items_watched(r#"[{"a":1}, 2, []]"#, &mut none).unwrap();
        assert_eq!(items.len(), 3);
        let bad = read_items_watched(r#"{"a":1}"#, &mut none).unwrap_err();
        let serde = serde_json::from_str::<Vec<Value>>(r#"{"a":1}"#).unwrap_err();
        assert_eq!(bad.message, format!("invalid JSON array: {serde}"));
        assert!(read_items_watched("[1] x", &mut none).is_err());
        let mut seen = 0;
        let mut two = |n: usize| {
            seen = n;
            if n > 2 {
                Err(BatchError {
                    line: None,
                    message: "full".into(),
                    samples: n,
                })
            } else {
                Ok(())
            }
        };
        let e = read_items_watched("[{},{},{},{}]", &mut two).unwrap_err();
        assert_eq!((e.message.as_str(), seen), ("full", 3));
    }

    /// Each item's value is the one serde builds (a repeated key keeps its last value), and the first
    /// repeated key of the item object, or of its `"features"` object, is named; nested objects are
    /// not looked into.
    #[test]
    fn values_are_serdes_and_the_first_repeated_key_is_named() {
        let mut none = |_| Ok(());
        let cases = [
            (
                r#"[1, "s", null, true, [1, {"a": 1, "a": 2}], 1.5, -3, 1e300, 18446744073709551615]"#,
                vec![None; 9],
            ),
            (
                r#"[{"a": 1, "a": 2}, {"b": {"c": 1, "c": 2}}]"#,
                vec![Some(r#"duplicate field "a""#), None],
            ),
            (
                r#"[{"features": {"x": 1, "y": 2, "x": 3}, "label": 1}]"#,
                vec![Some(r#"duplicate feature name "x" in "features""#)],
            ),
            (
                r#"[{"features": {"x": 1}, "features": {"y": 1, "\u0079": 2}}]"#,
                vec![Some(r#"duplicate feature name "y" in "features""#)],
            ),
            (
                r#"[{"features": {"x": 1}, "features": {"y": 1}}]"#,
                vec![Some(r#"duplicate field "features""#)],
            ),
            (
                r#"[{"features": [1, 1], "label": 1, "weight": 2, "label": 3}]"#,
                vec![Some(r#"duplicate field "label""#)],
            ),
        ];
        for (body, repeated) in cases {
            let items = read_items_watched(body, &mut none).unwrap();
            let values: Vec<Value> = items.iter().map(|i| i.value.clone()).collect();
            assert_eq!(
                values,
                serde_json::from_str::<Vec<Value>>(body).unwrap(),
                "{body}"
            );
            let found: Vec<Option<&str>> = items.iter().map(|i| i.repeated.as_deref()).collect();
            assert_eq!(found, repeated, "{body}");
        }
    }
}
