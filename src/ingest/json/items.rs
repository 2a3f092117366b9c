//! A JSON array body read by serde item by item, with the parse's row watch asked before each item
//! is kept: a body of millions of small items (`[{},{},…]`) stops at the in-flight sample budget
//! instead of being held whole as `serde_json::Value`s first.

use std::fmt;

use serde::de::{DeserializeSeed, SeqAccess, Visitor};
use serde_json::Value;

use crate::ingest::batch::Watch;
use crate::ingest::BatchError;

/// The items of the JSON array `body`, each asked of `watch` (with its 1-based position) before it
/// is kept. A body that is not a JSON array is the error `invalid JSON array: …`; a watch error is
/// returned as the watch gave it.
pub(crate) fn read_items_watched(
    body: &str,
    watch: &mut Watch<'_>,
) -> Result<Vec<Value>, BatchError> {
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
    type Value = Vec<Value>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Vec<Value>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Items<'_, '_> {
    type Value = Vec<Value>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a sequence")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Value>, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Value>()? {
            if let Err(e) = (self.watch)(items.len() + 1) {
                *self.stopped = Some(e);
                return Err(serde::de::Error::custom("stopped"));
            }
            items.push(item);
        }
        Ok(items)
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
}
