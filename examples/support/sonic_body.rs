//! The `sonic-rs` reading of a JSON sample body, for `ingest_cpu`'s comparison with the daemon's own
//! reader: each sample object deserialized by sonic-rs (serde, one `DeserializeSeed` that appends the
//! `"indices"`/`"values"` lists to buffers reused across the body, so no vector per sample), then the
//! checks the daemon makes (the sample invariants, every loss's label rule, `ingest.max_dim`) and the
//! copy into one [`SampleBlock`], all or nothing with the line (array position) at fault.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use thresher::ingest::batch::Rules;
use thresher::ingest::segments::{for_each_line, join};
use thresher::ingest::{is_skippable, BatchError};
use thresher::sample::{Sample, SampleBlock, SampleRef};

const FIELDS: &[&str] = &["label", "indices", "values", "features", "weight"];

enum Key {
    Label,
    Indices,
    Values,
    Features,
    Weight,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Key, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("field identifier")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(match v {
                    "label" => Key::Label,
                    "indices" => Key::Indices,
                    "values" => Key::Values,
                    "features" => Key::Features,
                    "weight" => Key::Weight,
                    _ => return Err(E::unknown_field(v, FIELDS)),
                })
            }
        }
        d.deserialize_identifier(KeyVisitor)
    }
}

/// The scalar fields of one object; its lists went to the [`Scratch`].
#[derive(Default)]
pub struct Fields {
    pub label: Option<f64>,
    pub weight: Option<f64>,
    pub features: Option<BTreeMap<String, f64>>,
    pub has_indices: bool,
    pub has_values: bool,
}

#[derive(Default)]
pub struct Scratch {
    pub indices: Vec<u32>,
    pub values: Vec<f64>,
}

/// A list (or `null`) appended to a vector: `true` if it was a list.
struct OptionalList<'a, T>(&'a mut Vec<T>);

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for OptionalList<'_, T> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for OptionalList<'_, T> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list or null")
    }
    fn visit_none<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_seq(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while let Some(x) = seq.next_element()? {
            self.0.push(x);
        }
        Ok(true)
    }
}

/// One sample object, its lists appended to the scratch buffers (cleared first).
pub struct Item<'a>(pub &'a mut Scratch);

impl<'de> DeserializeSeed<'de> for Item<'_> {
    type Value = Fields;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Fields, D::Error> {
        self.0.indices.clear();
        self.0.values.clear();
        d.deserialize_struct("WireSample", FIELDS, self)
    }
}

impl<'de> Visitor<'de> for Item<'_> {
    type Value = Fields;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("struct WireSample")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields, A::Error> {
        let mut out = Fields::default();
        let (mut seen_label, mut seen_indices, mut seen_values, mut seen_features, mut seen_weight) =
            (false, false, false, false, false);
        let dup = |seen: &mut bool, name: &'static str| -> Result<(), A::Error> {
            if std::mem::replace(seen, true) {
                return Err(de::Error::duplicate_field(name));
            }
            Ok(())
        };
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Label => {
                    dup(&mut seen_label, "label")?;
                    out.label = map.next_value()?;
                }
                Key::Weight => {
                    dup(&mut seen_weight, "weight")?;
                    out.weight = map.next_value()?;
                }
                Key::Features => {
                    dup(&mut seen_features, "features")?;
                    out.features = map.next_value()?;
                }
                Key::Indices => {
                    dup(&mut seen_indices, "indices")?;
                    out.has_indices = map.next_value_seed(OptionalList(&mut self.0.indices))?;
                }
                Key::Values => {
                    dup(&mut seen_values, "values")?;
                    out.has_values = map.next_value_seed(OptionalList(&mut self.0.values))?;
                }
            }
        }
        Ok(out)
    }
}

/// The checks of the daemon's path, then the copy into the block.
fn push(
    block: &mut SampleBlock,
    fields: &Fields,
    scratch: &Scratch,
    rules: &Rules,
) -> Result<(), String> {
    let label = match fields.label {
        Some(l) => l,
        None if rules.predict => 0.0,
        None => return Err("missing label".into()),
    };
    if fields.features.is_some() {
        return Err("named features are not part of this comparison".into());
    }
    let (indices, values) = (&scratch.indices[..], &scratch.values[..]);
    Sample::check(indices, values, label, fields.weight).map_err(|e| e.to_string())?;
    if !rules.predict {
        for loss in &rules.losses {
            loss.check_label(label).map_err(|e| e.to_string())?;
        }
    }
    if indices.last().is_some_and(|&j| j as usize >= rules.max_dim) {
        return Err("feature index is not below ingest.max_dim".into());
    }
    block.push_ref(SampleRef {
        indices,
        values,
        label,
        weight: fields.weight,
    });
    Ok(())
}

/// The rows' room, as the daemon sizes it (one row per line, half the commas in features).
fn sized(chunks: &[&[u8]]) -> SampleBlock {
    // Counted as `ingest::count_byte` counts: per 255-byte chunk in a `u8`, so the loop vectorizes.
    let count_in = |haystack: &[u8], needle: u8| -> usize {
        haystack
            .chunks(255)
            .map(|c| {
                c.iter()
                    .fold(0u8, |n, &x| n.wrapping_add(u8::from(x == needle)))
                    as usize
            })
            .sum()
    };
    let count = |b: u8| -> usize { chunks.iter().map(|c| count_in(c, b)).sum() };
    let lines = count(b'\n') + 1;
    SampleBlock::with_capacity(lines, (count(b',') + lines) / 2)
}

/// NDJSON over the body's chunks (the daemon's line walk, `ingest::segments`): one object per line
/// (blank and comment lines skipped), errors naming the 1-based line.
pub fn ndjson(chunks: &[&[u8]], rules: &Rules) -> Result<SampleBlock, BatchError> {
    let mut block = sized(chunks);
    let mut scratch = Scratch::default();
    let fail = |n: usize, message: String| BatchError {
        line: Some(n),
        message,
        samples: 0,
    };
    for_each_line(chunks, |n, line| {
        if is_skippable(line) {
            return Ok(());
        }
        let mut de = sonic_rs::Deserializer::from_str(line);
        let fields = Item(&mut scratch)
            .deserialize(&mut de)
            .and_then(|f| de.end().map(|()| f))
            .map_err(|e| fail(n, format!("invalid JSON sample: {e}")))?;
        push(&mut block, &fields, &scratch, rules).map_err(|e| fail(n, e))
    })?;
    Ok(block)
}

/// [`ndjson`] with serde's derived `Deserialize` (a vector per list per sample), for scale.
pub fn ndjson_derived(chunks: &[&[u8]], rules: &Rules) -> Result<SampleBlock, BatchError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Wire {
        label: Option<f64>,
        indices: Option<Vec<u32>>,
        values: Option<Vec<f64>>,
        features: Option<BTreeMap<String, f64>>,
        weight: Option<f64>,
    }
    let mut block = sized(chunks);
    let fail = |n: usize, message: String| BatchError {
        line: Some(n),
        message,
        samples: 0,
    };
    for_each_line(chunks, |n, line| {
        if is_skippable(line) {
            return Ok(());
        }
        let w: Wire =
            sonic_rs::from_str(line).map_err(|e| fail(n, format!("invalid JSON sample: {e}")))?;
        let scratch = Scratch {
            indices: w.indices.unwrap_or_default(),
            values: w.values.unwrap_or_default(),
        };
        let fields = Fields {
            label: w.label,
            weight: w.weight,
            features: w.features,
            has_indices: true,
            has_values: true,
        };
        push(&mut block, &fields, &scratch, rules).map_err(|e| fail(n, e))
    })?;
    Ok(block)
}

/// A JSON array of objects, in one pass: an item's error names its 1-based position.
pub fn array(chunks: &[&[u8]], rules: &Rules) -> Result<SampleBlock, BatchError> {
    struct Items<'a> {
        block: &'a mut SampleBlock,
        rules: &'a Rules,
        first_error: Option<(usize, String)>,
    }
    impl<'de> Visitor<'de> for &mut Items<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an array of samples")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            let mut scratch = Scratch::default();
            let mut n = 0;
            while let Some(fields) = seq.next_element_seed(Item(&mut scratch))? {
                n += 1;
                if self.first_error.is_none() {
                    if let Err(e) = push(self.block, &fields, &scratch, self.rules) {
                        self.first_error = Some((n, e));
                    }
                }
            }
            Ok(())
        }
    }
    let joined;
    let body = match chunks {
        [one] => *one,
        _ => {
            joined = join(chunks);
            &joined[..]
        }
    };
    let mut block = sized(chunks);
    let mut items = Items {
        block: &mut block,
        rules,
        first_error: None,
    };
    let mut de = sonic_rs::Deserializer::from_slice(body);
    de::Deserializer::deserialize_seq(&mut de, &mut items)
        .and_then(|()| de.end())
        .map_err(|e| BatchError {
            line: None,
            message: format!("invalid JSON array: {e}"),
            samples: 0,
        })?;
    match items.first_error {
        Some((n, message)) => Err(BatchError {
            line: Some(n),
            message,
            samples: 0,
        }),
        None => Ok(block),
    }
}

/// NDJSON through sonic-rs's own document parser (`sonic_rs::Value`, not serde), the fields then taken
/// from the document: a lower bound on what the crate costs, as it checks less than the other readers
/// (no unknown-key or duplicate-key errors, no named features).
pub fn ndjson_dom(chunks: &[&[u8]], rules: &Rules) -> Result<SampleBlock, BatchError> {
    use sonic_rs::{JsonContainerTrait, JsonValueTrait};
    let mut block = sized(chunks);
    let mut scratch = Scratch::default();
    let fail = |n: usize, message: String| BatchError {
        line: Some(n),
        message,
        samples: 0,
    };
    for_each_line(chunks, |n, line| {
        if is_skippable(line) {
            return Ok(());
        }
        let v: sonic_rs::Value =
            sonic_rs::from_str(line).map_err(|e| fail(n, format!("invalid JSON sample: {e}")))?;
        scratch.indices.clear();
        scratch.values.clear();
        let bad = || fail(n, "invalid JSON sample".into());
        if let Some(list) = v.get("indices").and_then(|l| l.as_array()) {
            for x in list.iter() {
                let j = x
                    .as_u64()
                    .filter(|&j| j <= u64::from(u32::MAX))
                    .ok_or_else(bad)?;
                scratch.indices.push(j as u32);
            }
        }
        if let Some(list) = v.get("values").and_then(|l| l.as_array()) {
            for x in list.iter() {
                scratch.values.push(x.as_f64().ok_or_else(bad)?);
            }
        }
        let fields = Fields {
            label: v.get("label").and_then(|l| l.as_f64()),
            weight: v.get("weight").and_then(|w| w.as_f64()),
            features: None,
            has_indices: true,
            has_values: true,
        };
        push(&mut block, &fields, &scratch, rules).map_err(|e| fail(n, e))
    })?;
    Ok(block)
}
