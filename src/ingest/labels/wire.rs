//! The bodies of late labels: the `id` of each sample of a `POST /v1/predict` JSON body
//! ([`take_ids`]), and the items of a `POST /v1/labels` body ([`parse_labels`]). Every error names its
//! item (1-based: the array's element, or the line of a JSON-lines body) and refuses the whole body.

use serde_json::{Map, Value};

use crate::ingest::batch::BodyFormat;
use crate::ingest::is_skippable;
use crate::ingest::BatchError;

/// One label of a `POST /v1/labels` body.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelItem {
    pub id: String,
    pub label: f64,
    pub weight: Option<f64>,
}

fn fail(item: usize, message: String, samples: usize) -> BatchError {
    BatchError {
        line: Some(item),
        message,
        samples,
    }
}

/// An id as given: a string of 1 to `max_bytes` bytes.
fn read_id(v: Value, item: usize, max_bytes: usize, samples: usize) -> Result<String, BatchError> {
    match v {
        Value::String(s) if !s.is_empty() && s.len() <= max_bytes => Ok(s),
        Value::String(s) => Err(fail(
            item,
            format!(
                "id of {} bytes: an id has 1 to {max_bytes} bytes (labels.id_max_bytes)",
                s.len()
            ),
            samples,
        )),
        other => Err(fail(
            item,
            format!("id must be a string, not {other}"),
            samples,
        )),
    }
}

/// One item of a body: its number (from 1), its JSON value (`None` for a blank or `#` line of a
/// JSON-lines body) and, for JSON lines, the line's bytes as they were.
type Item<'a> = (usize, Option<Value>, &'a [u8]);

/// The body's JSON values, each with its item number: the array's elements, or the lines of a
/// JSON-lines body (blank and `#` lines kept as `None`, to be written back as they were).
fn items(format: BodyFormat, body: &[u8]) -> Option<Vec<Item<'_>>> {
    match format {
        BodyFormat::JsonArray => {
            let values: Vec<Value> = serde_json::from_slice(body).ok()?;
            Some(
                values
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| (i + 1, Some(v), &b""[..]))
                    .collect(),
            )
        }
        BodyFormat::Ndjson => body
            .split(|&b| b == b'\n')
            .enumerate()
            .map(|(i, line)| {
                let text = std::str::from_utf8(line).ok()?;
                if is_skippable(text) {
                    Some((i + 1, None, line))
                } else {
                    Some((i + 1, Some(serde_json::from_str(text).ok()?), line))
                }
            })
            .collect(),
        BodyFormat::Libsvm => None,
    }
}

/// Takes the `id` key out of each sample of a JSON prediction body: the body without them (to be
/// parsed as any prediction body) and each sample's id in order, or `None` when no sample has one
/// (the body is then left as it is). A body that is not valid JSON is left to the parser, which names
/// its error. `max_bytes` bounds an id (`labels.id_max_bytes`).
#[allow(clippy::type_complexity)]
pub fn take_ids(
    format: BodyFormat,
    body: &[u8],
    max_bytes: usize,
) -> Result<Option<(Vec<u8>, Vec<Option<String>>)>, BatchError> {
    if format == BodyFormat::Libsvm || !body.windows(4).any(|w| w == b"\"id\"") {
        return Ok(None);
    }
    let Some(items) = items(format, body) else {
        return Ok(None);
    };
    let samples = items.iter().filter(|(_, v, _)| v.is_some()).count();
    let (mut ids, mut values) = (Vec::with_capacity(samples), Vec::with_capacity(samples));
    for (item, value, _) in &items {
        let Some(value) = value else { continue };
        let mut value = value.clone();
        let id = match value.as_object_mut().and_then(|o| o.remove("id")) {
            Some(id) => Some(read_id(id, *item, max_bytes, samples)?),
            None => None,
        };
        ids.push(id);
        values.push(value);
    }
    if ids.iter().all(Option::is_none) {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(body.len());
    match format {
        BodyFormat::JsonArray => {
            serde_json::to_writer(&mut out, &values).expect("JSON values serialise");
        }
        _ => {
            let mut values = values.into_iter();
            for (_, value, line) in &items {
                match value {
                    Some(_) => serde_json::to_writer(&mut out, &values.next())
                        .expect("JSON values serialise"),
                    None => out.extend_from_slice(line),
                }
                out.push(b'\n');
            }
        }
    }
    Ok(Some((out, ids)))
}

/// The items of a `POST /v1/labels` body (a JSON array or JSON lines of `{"id", "label", "weight"?}`),
/// all valid or an error naming the first bad item. A label given as text is a class's name (`class`
/// gives its index, or why it is none). A label or weight is checked as any sample's
/// (`check` says what is wrong with a label and weight, e.g. for the learners' losses).
pub fn parse_labels(
    format: BodyFormat,
    body: &[u8],
    max_id_bytes: usize,
    class: impl Fn(&str) -> Result<f64, String>,
    check: impl Fn(f64, Option<f64>) -> Result<(), String>,
) -> Result<Vec<LabelItem>, BatchError> {
    let whole = |message: String| BatchError {
        line: None,
        message,
        samples: 0,
    };
    if format == BodyFormat::Libsvm {
        return Err(whole(
            "labels are a JSON array (application/json) or JSON lines (application/x-ndjson) of {\"id\", \"label\", \"weight\"?}".into(),
        ));
    }
    let values: Vec<(usize, Value)> = match format {
        BodyFormat::JsonArray => serde_json::from_slice::<Vec<Value>>(body)
            .map_err(|e| whole(format!("not a JSON array of labels: {e}")))?
            .into_iter()
            .enumerate()
            .map(|(i, v)| (i + 1, v))
            .collect(),
        _ => {
            let mut out = Vec::new();
            for (i, line) in body.split(|&b| b == b'\n').enumerate() {
                let text =
                    std::str::from_utf8(line).map_err(|_| fail(i + 1, "not UTF-8".into(), 0))?;
                if is_skippable(text) {
                    continue;
                }
                let v = serde_json::from_str(text)
                    .map_err(|e| fail(i + 1, format!("not JSON: {e}"), 0))?;
                out.push((i + 1, v));
            }
            out
        }
    };
    if values.is_empty() {
        return Err(whole("empty body: no labels".into()));
    }
    let n = values.len();
    values
        .into_iter()
        .map(|(item, v)| {
            let Value::Object(o) = v else {
                return Err(fail(item, format!("a label is an object, not {v}"), n));
            };
            read_item(o, item, max_id_bytes, n, &class, &check)
        })
        .collect()
}

fn read_item(
    mut o: Map<String, Value>,
    item: usize,
    max_id_bytes: usize,
    n: usize,
    class: &impl Fn(&str) -> Result<f64, String>,
    check: &impl Fn(f64, Option<f64>) -> Result<(), String>,
) -> Result<LabelItem, BatchError> {
    let id = o
        .remove("id")
        .ok_or_else(|| fail(item, "missing \"id\"".into(), n))?;
    let id = read_id(id, item, max_id_bytes, n)?;
    let number = |key: &str, v: Value| {
        v.as_f64()
            .ok_or_else(|| fail(item, format!("{key} must be a number, not {v}"), n))
    };
    let label = o
        .remove("label")
        .ok_or_else(|| fail(item, "missing \"label\"".into(), n))?;
    let label = match label {
        Value::String(name) => class(&name).map_err(|e| fail(item, e, n))?,
        v => number("label", v)?,
    };
    let weight = o
        .remove("weight")
        .map(|w| number("weight", w))
        .transpose()?;
    if let Some(key) = o.keys().next() {
        return Err(fail(
            item,
            format!("unknown key {key:?}: a label has \"id\", \"label\" and \"weight\""),
            n,
        ));
    }
    if let Some(w) = weight {
        if !(w.is_finite() && w > 0.0) {
            return Err(fail(item, format!("weight {w} must be finite and > 0"), n));
        }
    }
    check(label, weight).map_err(|e| fail(item, e, n))?;
    Ok(LabelItem { id, label, weight })
}
