//! Request bodies → validated batches, all or nothing, with named features resolved through a bounded
//! [`FeatureDictionary`].
//!
//! A body is LIBSVM lines (`text/plain`), JSON lines (`application/x-ndjson`) or one JSON array of
//! sample objects (`application/json`). A sample object is `{"label": y, "indices": [...], "values":
//! [...]}` or `{"label": y, "features": {"name": value}}` (optionally `"weight"`). The first invalid
//! sample fails the whole body with its line (for a JSON array: its 1-based position), so a rejected
//! request leaves no trace in the learners. Labels are checked against every learner's loss, indices
//! against `ingest.max_dim`. Named features get dense indices `0, 1, 2, ...` in order of first sight
//! (alphabetical within one object), in a second phase (`names.rs`); a stream should use either
//! numeric indices or names, not both.
//!
//! A parse changes no state: what a training body asks of the dictionary (its feature kind, its new
//! names) is noted in a [`Claim`], granted when the body is admitted
//! ([`FeatureDictionary::grant`]), so a body refused after its parse leaves nothing. [`parse_body`]
//! and [`parse_segments`] grant at once (the offline tools and tests); the daemon's sources use
//! [`parse_body_into`] and [`parse_segments_watched`], which hand the claim on.

use std::borrow::Cow;

pub use super::dictionary::{check_name, Claim, FeatureDictionary, FeatureKind, GrantError};
use super::json::{plain, Item, WireLabel, WireSample};
use super::libsvm::{parse_libsvm_append, parse_libsvm_general, parse_libsvm_line};
use super::lines::is_skippable;
use super::simd::count_byte;
use super::{segments, BatchError, LineError};
use crate::loss::Loss;
use crate::sample::{Sample, SampleBlock, SampleRef};
use names::{check_kind, resolve_names};

/// The body formats `POST /v1/samples` and `POST /v1/predict` take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFormat {
    Libsvm,
    Ndjson,
    JsonArray,
}

impl BodyFormat {
    /// From a `Content-Type` header value (parameters such as `charset` are ignored).
    pub fn from_content_type(value: &str) -> Option<BodyFormat> {
        let mime = value
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match mime.as_str() {
            "text/plain" => Some(BodyFormat::Libsvm),
            "application/x-ndjson" | "application/jsonl" => Some(BodyFormat::Ndjson),
            "application/json" => Some(BodyFormat::JsonArray),
            _ => None,
        }
    }
}

/// What the parser checks besides the sample invariants.
#[derive(Debug, Clone)]
pub struct Rules {
    /// Every learner's loss: a label must suit all of them (unless labels are optional).
    pub losses: Vec<Loss>,
    pub max_dim: usize,
    /// Prediction bodies: labels may be missing, and unknown feature names are ignored.
    pub predict: bool,
    /// `ingest.max_abs_value`: the largest magnitude of a label, value or weight.
    pub max_abs_value: f64,
    /// `ingest.max_feature_name_bytes`.
    pub max_name_bytes: usize,
    /// `ingest.max_new_names_per_request`.
    pub max_new_names: usize,
    /// Multi-class learners (`classes = C`): a label is a class index `0..C`, which replaces the
    /// losses' `+-1` rule.
    pub classes: Option<usize>,
    /// The classes' names, when the config gives them: a JSON label may be one (read as its index).
    pub class_names: Option<std::sync::Arc<[String]>>,
}

impl Rules {
    /// The rules with the default limits ([`DEFAULT_MAX_ABS_VALUE`] and the name limits).
    pub fn new(losses: Vec<Loss>, max_dim: usize, predict: bool) -> Rules {
        Rules {
            losses,
            max_dim,
            predict,
            max_abs_value: DEFAULT_MAX_ABS_VALUE,
            max_name_bytes: DEFAULT_MAX_NAME_BYTES,
            max_new_names: DEFAULT_MAX_NEW_NAMES,
            classes: None,
            class_names: None,
        }
    }

    /// The index of the class named `name` (a JSON label given as text), or why it is none.
    pub fn class_index(&self, name: &str) -> Result<f64, String> {
        let Some(names) = &self.class_names else {
            return Err(format!(
                "label {name:?} is text: a label is a number here (class names need classes = [...] in the config)"
            ));
        };
        names
            .iter()
            .position(|n| n == name)
            .map(|c| c as f64)
            .ok_or_else(|| {
                let shown: Vec<&str> = names.iter().take(10).map(String::as_str).collect();
                format!(
                    "label {name:?} is not a class name (the classes: {}{})",
                    shown.join(", "),
                    if names.len() > 10 { ", ..." } else { "" }
                )
            })
    }

    /// Whether `label` suits every learner: a class index with multi-class learners, else a label
    /// each learner's loss takes.
    pub fn check_label(&self, label: f64) -> Result<(), String> {
        if let Some(classes) = self.classes {
            return match label.fract() == 0.0 && (0.0..classes as f64).contains(&label) {
                true => Ok(()),
                false => Err(format!(
                    "label {label} is not a class: the learners are multi-class and take the class \
                     indices 0 ..= {}",
                    classes - 1
                )),
            };
        }
        self.losses
            .iter()
            .try_for_each(|loss| loss.check_label(label).map_err(|e| e.to_string()))
    }
}

/// `ingest.max_abs_value`'s default: the largest magnitude of a label, feature value or weight accepted
/// by the daemon, `fit` and `predict`.
pub const DEFAULT_MAX_ABS_VALUE: f64 = 1e6;

/// `ingest.max_feature_name_bytes`'s default.
pub const DEFAULT_MAX_NAME_BYTES: usize = 256;
/// `ingest.max_new_names_per_request`'s default.
pub const DEFAULT_MAX_NEW_NAMES: usize = 10_000;

/// A sample whose named features are not resolved yet.
enum Pending {
    Ready(Sample),
    Named {
        features: Vec<(String, f64)>,
        label: f64,
        weight: Option<f64>,
    },
}

/// The samples of a body in order, each with its line, appended to a [`SampleBlock`] after its first
/// `base` rows (which belong to the caller). A named-feature sample sits in the block as a placeholder
/// (its label, no features) until [`resolve_names`] builds it, so a body without names stays where it
/// was parsed: no second copy of every sample.
struct Parsed {
    samples: SampleBlock,
    base: usize,
    /// The line of each row from `base` on.
    lines: Vec<usize>,
    named: Vec<NamedSlot>,
}

/// Named features waiting for indices, for row `slot` of the block (counted from the block's start).
struct NamedSlot {
    slot: usize,
    features: Vec<(String, f64)>,
    weight: Option<f64>,
}

impl Parsed {
    /// Parsing onto the end of `samples`, with room for `capacity` more rows of `nnz` features.
    fn on(mut samples: SampleBlock, capacity: usize, nnz: usize) -> Parsed {
        samples.reserve(capacity, nnz);
        Parsed {
            base: samples.len(),
            samples,
            lines: Vec::with_capacity(capacity),
            named: Vec::new(),
        }
    }

    /// The rows of this body.
    fn rows(&self) -> usize {
        self.samples.len() - self.base
    }

    fn push(&mut self, line: usize, pending: Pending) {
        match pending {
            Pending::Ready(sample) => self.samples.push(&sample),
            Pending::Named {
                features,
                label,
                weight,
            } => {
                self.named.push(NamedSlot {
                    slot: self.samples.len(),
                    features,
                    weight,
                });
                // Never handed out: replaced by the resolved sample or dropped with the error.
                self.samples.push_ref(SampleRef {
                    indices: &[],
                    values: &[],
                    label,
                    weight: None,
                });
            }
        }
        self.lines.push(line);
    }

    /// One plain JSON object (read by [`plain::parse_line_fields`]) copied from the scratch lists
    /// into the block's columns, with the checks and errors of the wire path ([`wire_to_pending`] with
    /// `"indices"`/`"values"`), but no vectors of its own.
    fn push_plain_json(
        &mut self,
        line_number: usize,
        fields: plain::PlainFields,
        scratch: &plain::Scratch,
        predict: bool,
    ) -> Result<(), LineError> {
        let label = match fields.label {
            Some(l) => l,
            None if predict => 0.0,
            None => return Err(LineError::MissingLabel),
        };
        let (indices, values) = (scratch.indices(), scratch.values());
        Sample::check(indices, values, label, fields.weight)?;
        self.samples.push_ref(SampleRef {
            indices,
            values,
            label,
            weight: fields.weight,
        });
        self.lines.push(line_number);
        Ok(())
    }

    /// One LIBSVM line straight into the block's columns (no vectors of its own).
    fn push_libsvm(&mut self, line_number: usize, line: &str) -> Result<(), LineError> {
        self.samples
            .push_with(|indices, values| parse_libsvm_append(line, indices, values))?;
        self.lines.push(line_number);
        Ok(())
    }
}

/// Parses and validates a whole body and grants its [`Claim`] at once. On success every sample is
/// valid and new feature names are registered; on failure nothing is registered.
pub fn parse_body(
    format: BodyFormat,
    body: &str,
    rules: &Rules,
    dict: &FeatureDictionary,
) -> Result<SampleBlock, BatchError> {
    parse_segments(format, &[body.as_bytes()], rules, dict)
}

/// [`parse_body`] of the concatenation of `segments` (a request body as the HTTP chunks it arrived
/// in), which are not joined for the line formats ([`super::segments`]). A body that is not UTF-8 is
/// refused naming the line (for a JSON array, the byte).
pub fn parse_segments(
    format: BodyFormat,
    segments: &[&[u8]],
    rules: &Rules,
    dict: &FeatureDictionary,
) -> Result<SampleBlock, BatchError> {
    parse_segments_with(format, segments, rules, dict, true)
}

/// [`parse_segments`] with the one-pass readers switched on (`fast`) or off ([`parse_body_with`]).
pub(crate) fn parse_segments_with(
    format: BodyFormat,
    segments: &[&[u8]],
    rules: &Rules,
    dict: &FeatureDictionary,
    fast: bool,
) -> Result<SampleBlock, BatchError> {
    let mut block = SampleBlock::new();
    let mut claim = Claim::default();
    parse_body_with(
        format, segments, rules, dict, fast, &mut block, &mut claim, None,
    )?;
    grant_now(dict, &claim, &mut block)?;
    Ok(block)
}

/// Grants `claim` for `block` with nothing to commit besides (no log).
pub fn grant_now(
    dict: &FeatureDictionary,
    claim: &Claim,
    block: &mut SampleBlock,
) -> Result<(), BatchError> {
    dict.grant(claim, block, |_, _, _| {
        Ok::<(), std::convert::Infallible>(())
    })
    .map_err(|e| match e {
        GrantError::Refused(e) => e,
        GrantError::Commit(never) => match never {},
    })
}

/// Parses a body onto `out` (the stdin reader's growing batch) and returns how many samples there
/// were, noting what the body asks of the dictionary in `claim` (the batch's, granted when it is
/// admitted); on failure `out` and `claim` are left as they were. The dictionary is only read.
pub fn parse_body_into(
    format: BodyFormat,
    body: &str,
    rules: &Rules,
    dict: &FeatureDictionary,
    out: &mut SampleBlock,
    claim: &mut Claim,
) -> Result<usize, BatchError> {
    parse_body_with(
        format,
        &[body.as_bytes()],
        rules,
        dict,
        true,
        out,
        claim,
        None,
    )
}

/// A row watch: called with the 1-based number of a row before it is kept; an error ends the parse
/// with it (the HTTP source's in-flight bounds and cancellation, `ingest::inflight`).
pub type Watch<'a> = dyn FnMut(usize) -> Result<(), BatchError> + 'a;

/// The parse of a daemon's source: [`parse_body_into`] of `segments` into a new block, under a row
/// [`Watch`]. The claim is not granted: admission does it.
pub fn parse_segments_watched(
    format: BodyFormat,
    segments: &[&[u8]],
    rules: &Rules,
    dict: &FeatureDictionary,
    watch: &mut Watch<'_>,
) -> Result<(SampleBlock, Claim), BatchError> {
    let mut block = SampleBlock::new();
    let mut claim = Claim::default();
    parse_body_with(
        format,
        segments,
        rules,
        dict,
        true,
        &mut block,
        &mut claim,
        Some(watch),
    )?;
    Ok((block, claim))
}

/// [`parse_body_into`] of `segments` under a row [`Watch`] (`None`: every row is kept), with the one-pass readers for plain
/// lines and objects switched on (`fast`) or off: off is the general path alone, kept callable so the
/// tests can check the readers change nothing. What the body asks of the dictionary goes into
/// `claim` (left as it was on failure).
#[allow(clippy::too_many_arguments)]
pub(crate) fn parse_body_with(
    format: BodyFormat,
    segments: &[&[u8]],
    rules: &Rules,
    dict: &FeatureDictionary,
    fast: bool,
    out: &mut SampleBlock,
    claim: &mut Claim,
    watch: Option<&mut Watch<'_>>,
) -> Result<usize, BatchError> {
    let mut keep_every_row = |_| Ok(());
    let watch: &mut Watch<'_> = match watch {
        Some(watch) => watch,
        None => &mut keep_every_row,
    };
    // One slot per line is at most a few percent too many (blank and comment lines), and one feature
    // per ':' is exact for LIBSVM lines (up to colons in comments): this saves the regrowth copies of
    // the columns that hold every sample of the body, without holding much more memory than the body
    // needs while it waits in the queues. A plain JSON object with n features has 2n - 1 commas
    // without a label and 2n or 2n + 1 with one (and a weight), so half of commas plus objects is at
    // most one feature per object too many; in an array, the comma after each item but the last
    // stands for the line. (Growing the columns instead cost a third of the JSON parse time, in page
    // faults.)
    let count = |byte: u8| -> usize { segments.iter().map(|s| count_byte(s, byte)).sum() };
    let lines = || count(b'\n') + 1;
    let taken = std::mem::take(out);
    let mut parsed = match format {
        BodyFormat::Libsvm => Parsed::on(taken, lines(), count(b':')),
        BodyFormat::Ndjson => {
            let lines = lines();
            Parsed::on(taken, lines, (count(b',') + lines) / 2)
        }
        BodyFormat::JsonArray => Parsed::on(taken, 0, count(b',').div_ceil(2)),
    };
    // Every sample onto `parsed`, stopping at the first invalid one.
    let outcome = match format {
        BodyFormat::Libsvm | BodyFormat::Ndjson => {
            read_lines(format, segments, rules, fast, &mut parsed, watch)
        }
        BodyFormat::JsonArray => {
            // An array is one text: its segments are joined.
            let bytes = match segments {
                [one] => Cow::Borrowed(*one),
                _ => Cow::Owned(segments::join(segments)),
            };
            std::str::from_utf8(&bytes)
                .map_err(|e| BatchError {
                    line: None,
                    message: format!("body is not UTF-8: {e}"),
                    samples: 0,
                })
                .and_then(|body| read_array(body, rules, fast, &mut parsed, watch))
        }
    }
    .and_then(|()| {
        let mark = claim.mark();
        finish(&mut parsed, rules, dict, claim).inspect_err(|_| claim.rewind(mark))
    });
    let rows = parsed.rows();
    *out = parsed.samples;
    match outcome {
        Ok(()) => Ok(rows),
        Err(e) => {
            // All or nothing: the caller's rows stay, this body's go.
            out.truncate(parsed.base);
            Err(e)
        }
    }
}

/// A body refused at its 1-based `line` (or array position), holding `samples` samples.
fn fail(line: usize, message: String, samples: usize) -> BatchError {
    BatchError {
        line: Some(line),
        message,
        samples,
    }
}

/// The samples of a line body (LIBSVM or NDJSON), read line by line where the segments hold them.
fn read_lines(
    format: BodyFormat,
    segments: &[&[u8]],
    rules: &Rules,
    fast: bool,
    parsed: &mut Parsed,
    watch: &mut Watch<'_>,
) -> Result<(), BatchError> {
    let mut scratch = plain::Scratch::default();
    // The sample count is only needed for a rejection: counted then, not on every body.
    let total = || {
        let mut content = 0;
        let _ = segments::for_each_line(segments, |_, line| {
            content += usize::from(!is_skippable(line));
            Ok(())
        });
        content
    };
    // The body-parsing loop: between rows, a scheduling point for the daemon's parser threads
    // (`sys::yield_point`; a no-op elsewhere). The line readers themselves never yield.
    segments::for_each_line(segments, |number, line| {
        crate::sys::yield_point_every(number, crate::sys::ROWS_BETWEEN_YIELD_POINTS);
        if is_skippable(line) {
            return Ok(());
        }
        watch(parsed.rows() + 1)?;
        read_line(format, number, line, rules, fast, parsed, &mut scratch)
            .map_err(|e| fail(number, e.to_string(), total()))
    })
    .map_err(|mut e| {
        // A line that is not UTF-8 is refused by the walk itself, which reads no further:
        // the samples are then counted by their lines' bytes.
        if e.samples == 0 {
            e.samples = segments::count_content_lines(segments);
        }
        e
    })
}

/// One content line of a line body onto `parsed`: by the one-pass readers when `fast` and the line
/// has their shape, else by the general readers, which decide every error.
#[inline(always)]
fn read_line(
    format: BodyFormat,
    number: usize,
    line: &str,
    rules: &Rules,
    fast: bool,
    parsed: &mut Parsed,
    scratch: &mut plain::Scratch,
) -> Result<(), LineError> {
    if format == BodyFormat::Libsvm && fast && !(rules.predict && first_has_colon(line)) {
        return parsed.push_libsvm(number, line);
    }
    if format == BodyFormat::Ndjson && fast {
        if let Some(fields) = plain::parse_line_fields(line, scratch) {
            return parsed.push_plain_json(number, fields, scratch, rules.predict);
        }
    }
    let pending = if format == BodyFormat::Libsvm {
        parse_libsvm_for(line, rules.predict, fast).map(Pending::Ready)
    } else {
        // The plain shape was read above (when `fast`); anything else, and every error, by serde.
        serde_json::from_str::<WireSample>(line)
            .map_err(|e| LineError::Json(e.to_string()))
            .and_then(|w| wire_to_pending(w, rules))
    };
    parsed.push(number, pending?);
    Ok(())
}

/// The samples of a JSON array body. An array of plain objects is read directly into the block: such
/// items are valid for serde too, so only the sample checks can fail, exactly as on the serde path.
/// But serde reads the whole array before checking any item, so the first failed check counts only
/// if the rest of the body reads plainly as well; otherwise serde decides everything.
fn read_array(
    body: &str,
    rules: &Rules,
    fast: bool,
    parsed: &mut Parsed,
    watch: &mut Watch<'_>,
) -> Result<(), BatchError> {
    if fast {
        let mut scratch = plain::Scratch::default();
        let mut first_error = None;
        let read = plain::parse_array_fields(body, &mut scratch, |n, fields, scratch| {
            if first_error.is_none() {
                first_error = match watch(parsed.rows() + 1) {
                    Err(e) => Some((n + 1, e.message)),
                    Ok(()) => parsed
                        .push_plain_json(n + 1, fields, scratch, rules.predict)
                        .err()
                        .map(|e| (n + 1, e.to_string())),
                };
            }
        });
        match (read, first_error) {
            (Some(total), Some((line, message))) => return Err(fail(line, message, total)),
            (Some(_), None) => return Ok(()),
            (None, _) => {
                parsed.samples.truncate(parsed.base);
                parsed.lines.clear();
            }
        }
    }
    let items = super::json::read_items_watched(body, watch)?;
    let total = items.len();
    for (n, Item { value, repeated }) in items.into_iter().enumerate() {
        if let Some(message) = repeated {
            return Err(fail(n + 1, LineError::Json(message).to_string(), total));
        }
        let p = serde_json::from_value::<WireSample>(value)
            .map_err(|e| LineError::Json(e.to_string()))
            .and_then(|w| wire_to_pending(w, rules))
            .map_err(|e| fail(n + 1, e.to_string(), total))?;
        parsed.push(n + 1, p);
    }
    Ok(())
}

/// The checks that need the whole body, then name resolution (noting what the body asks of the
/// dictionary in `claim`).
fn finish(
    parsed: &mut Parsed,
    rules: &Rules,
    dict: &FeatureDictionary,
    claim: &mut Claim,
) -> Result<(), BatchError> {
    if parsed.rows() == 0 {
        return Err(BatchError {
            line: None,
            message: "empty body: no samples".into(),
            samples: 0,
        });
    }
    let total = parsed.rows();
    // Check everything that does not need the dictionary before touching it (a named sample's
    // placeholder has its label and no indices yet).
    let body = parsed.base..parsed.samples.len();
    for (i, line) in body.zip(&parsed.lines) {
        let sample = parsed.samples.get(i);
        let (label, indices) = (sample.label, sample.indices);
        if !rules.predict {
            rules
                .check_label(label)
                .map_err(|e| fail(*line, e, total))?;
        }
        if let Some(&j) = indices.last() {
            if j as usize >= rules.max_dim {
                return Err(fail(
                    *line,
                    format!(
                        "feature index {j} is not below ingest.max_dim ({})",
                        rules.max_dim
                    ),
                    total,
                ));
            }
        }
        let label = (!rules.predict).then_some(label);
        check_magnitudes(
            label,
            sample.weight,
            indices,
            sample.values,
            rules.max_abs_value,
        )
        .map_err(|e| fail(*line, e.to_string(), total))?;
    }
    for slot in &parsed.named {
        let line = parsed.lines[slot.slot - parsed.base];
        for (name, value) in &slot.features {
            if name.len() > rules.max_name_bytes {
                dict.count_refusal();
                return Err(fail(
                    line,
                    format!(
                        "feature name of {} bytes is longer than ingest.max_feature_name_bytes ({})",
                        name.len(),
                        rules.max_name_bytes
                    ),
                    total,
                ));
            }
            check_name(name).map_err(|reason| fail(line, reason, total))?;
            check_magnitude(
                &format!("value of feature {name:?}"),
                *value,
                rules.max_abs_value,
            )
            .map_err(|e| fail(line, e.to_string(), total))?;
        }
        check_magnitudes(None, slot.weight, &[], &[], rules.max_abs_value)
            .map_err(|e| fail(line, e.to_string(), total))?;
    }
    check_kind(parsed, rules, dict, claim)?;
    match dict.hashed() {
        Some(hashed) => hashed_names::resolve_hashed(parsed, rules, hashed),
        None => resolve_names(parsed, rules, dict, claim),
    }
}

/// `value` if its magnitude is at most `limit` (`what` names it in the error).
fn check_magnitude(what: &str, value: f64, limit: f64) -> Result<(), LineError> {
    if value.abs() <= limit {
        Ok(())
    } else {
        Err(LineError::TooLarge {
            what: what.to_string(),
            value,
            limit,
        })
    }
}

/// Every number of a sample (the label when given, the weight, each value) has magnitude at most
/// `limit` (`ingest.max_abs_value`). Why a bound below f64's range: squares, margins and losses of
/// numbers near 1e300 overflow to infinity, which no learner can recover from.
pub fn check_magnitudes(
    label: Option<f64>,
    weight: Option<f64>,
    indices: &[u32],
    values: &[f64],
    limit: f64,
) -> Result<(), LineError> {
    if let Some(label) = label {
        check_magnitude("label", label, limit)?;
    }
    if let Some(weight) = weight {
        check_magnitude("weight", weight, limit)?;
    }
    // One branch-free pass for the common case; the offender is named only on failure.
    let largest = values.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if largest > limit {
        for (&j, &v) in indices.iter().zip(values) {
            check_magnitude(&format!("value of feature {j}"), v, limit)?;
        }
    }
    Ok(())
}

fn parse_libsvm_for(line: &str, predict: bool, fast: bool) -> Result<Sample, LineError> {
    let parse = if fast {
        parse_libsvm_line
    } else {
        parse_libsvm_general
    };
    if predict && first_has_colon(line) {
        // No label: predict bodies may leave it out.
        return parse(&format!("0 {line}"));
    }
    parse(line)
}

/// Does the line's first token hold a ':' (a feature, not a label)?
fn first_has_colon(line: &str) -> bool {
    let first = line.split_ascii_whitespace().next().unwrap_or("");
    first.contains(':')
}

fn wire_to_pending(w: WireSample, rules: &Rules) -> Result<Pending, LineError> {
    let label = match w.label {
        Some(WireLabel::Number(l)) => l,
        // A class name; in a prediction body a label is not used, so any text is taken.
        Some(WireLabel::Name(_)) if rules.predict => 0.0,
        Some(WireLabel::Name(name)) => rules.class_index(&name).map_err(LineError::Label)?,
        None if rules.predict => 0.0,
        None => return Err(LineError::MissingLabel),
    };
    match w.features {
        Some(features) => {
            if w.indices.is_some() || w.values.is_some() {
                return Err(LineError::Json(
                    "give either \"features\" or \"indices\"/\"values\", not both".into(),
                ));
            }
            if !label.is_finite() {
                return Err(crate::sample::SampleError::NonFiniteLabel(label).into());
            }
            Ok(Pending::Named {
                features: features.0,
                label,
                weight: w.weight,
            })
        }
        None => Ok(Pending::Ready(Sample::new(
            w.indices.unwrap_or_default(),
            w.values.unwrap_or_default(),
            label,
            w.weight,
        )?)),
    }
}

mod hashed_names;
pub(crate) mod names;
mod wal_names;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loss::LossKind;

    fn rules(kind: LossKind) -> Rules {
        Rules::new(vec![Loss::new(kind, 0.25).unwrap()], 100, false)
    }

    /// `e` refuses its body at `line` with a message that holds `words`.
    fn assert_refused(e: &BatchError, line: usize, words: &str) {
        assert_eq!(e.line, Some(line), "{}", e.message);
        assert!(e.message.contains(words), "{}", e.message);
    }

    #[test]
    fn all_formats_parse_and_errors_name_the_line() {
        let d = FeatureDictionary::new(10);
        let r = rules(LossKind::Squared);
        let s = parse_body(BodyFormat::Libsvm, "# c\n1 1:2\n\n2 3:1\n", &r, &d).unwrap();
        assert_eq!(s.len(), 2);
        let e = parse_body(BodyFormat::Libsvm, "1 1:2\n2 3:1 2:1\n", &r, &d).unwrap_err();
        assert_eq!(e.line, Some(2));
        assert_eq!(e.samples, 2);
        let e = parse_body(BodyFormat::Libsvm, "1 100:1\n", &r, &d).unwrap_err();
        assert!(e.message.contains("max_dim"), "{}", e.message);
        assert_eq!(d.kind(), FeatureKind::Indices);
        // Numeric and named features never share one index space: refused in one body, and on a
        // dictionary that took the other kind.
        let nd = "{\"label\": 1, \"indices\": [1], \"values\": [2]}\n{\"label\": 1, \"features\": {\"b\": 1, \"a\": 2}}\n";
        let e = parse_body(BodyFormat::Ndjson, nd, &r, &FeatureDictionary::new(10)).unwrap_err();
        assert_refused(&e, 2, "in one body");
        let nd = "{\"label\": 1}\n{\"label\": 1, \"features\": {\"b\": 1, \"a\": 2}}\n";
        let e = parse_body(BodyFormat::Ndjson, nd, &r, &d).unwrap_err();
        assert_refused(&e, 2, "named features are refused");
        let d = FeatureDictionary::new(10);
        let s = parse_body(BodyFormat::Ndjson, nd, &r, &d).unwrap();
        assert_eq!(d.kind(), FeatureKind::Names);
        let e = parse_body(BodyFormat::Libsvm, "1\n1 1:2\n", &r, &d).unwrap_err();
        assert_refused(&e, 2, "numeric feature indices are refused");
        assert_eq!(s.get(1).indices, &[0, 1]);
        assert_eq!(
            s.get(1).values,
            &[2.0, 1.0],
            "within an object, names are taken alphabetically"
        );
        assert_eq!(d.names(), vec!["a".to_string(), "b".to_string()]);
        let arr = "[{\"label\": 1, \"features\": {\"c\": 1}}, {\"label\": 1, \"indices\": [2, 1], \"values\": [1, 1]}]";
        let e = parse_body(BodyFormat::JsonArray, arr, &r, &d).unwrap_err();
        assert_eq!(e.line, Some(2));
        assert_eq!(d.len(), 2, "nothing of a rejected body is registered");
        // Read plainly, the first failed sample check names its item, counted among all items; but
        // an array that is not valid JSON after it is refused as such, as serde refuses it.
        let unsorted = "{\"label\": 1, \"indices\": [2, 1], \"values\": [1, 1]}";
        let arr = format!("[{{\"label\": 1}}, {unsorted}, {{\"indices\": []}}]");
        let e = parse_body(BodyFormat::JsonArray, &arr, &r, &d).unwrap_err();
        assert_eq!((e.line, e.samples), (Some(2), 3), "{}", e.message);
        assert!(e.message.contains("increasing"), "{}", e.message);
        let arr = format!("[{unsorted}, {{\"label\": ]");
        let e = parse_body(BodyFormat::JsonArray, &arr, &r, &d).unwrap_err();
        assert_eq!((e.line, e.samples), (None, 0), "{}", e.message);
        assert!(e.message.starts_with("invalid JSON array"), "{}", e.message);
        assert_eq!(
            parse_body(BodyFormat::Libsvm, "\n# only a comment\n", &r, &d)
                .unwrap_err()
                .line,
            None
        );
    }

    #[test]
    fn classification_labels_and_dictionary_bound() {
        let d = FeatureDictionary::new(1);
        let e = parse_body(
            BodyFormat::Libsvm,
            "1 1:1\n3 1:1\n",
            &rules(LossKind::Hinge),
            &d,
        )
        .unwrap_err();
        assert_refused(&e, 2, "-1 or +1");
        let r = rules(LossKind::Squared);
        let e = parse_body(
            BodyFormat::Ndjson,
            "{\"label\": 1, \"features\": {\"a\": 1, \"b\": 1}}",
            &r,
            &d,
        )
        .unwrap_err();
        assert!(e.message.contains("dictionary is full"), "{}", e.message);
        assert!(d.is_empty());
        let p = Rules { predict: true, ..r };
        let s = parse_body(BodyFormat::Libsvm, "1:1 5:2\n", &p, &d).unwrap();
        assert_eq!(s.get(0).indices, &[1, 5]);
        let s = parse_body(BodyFormat::Ndjson, "{\"features\": {\"zz\": 1}}", &p, &d).unwrap();
        assert!(
            s.get(0).indices.is_empty() && d.is_empty(),
            "predict never registers names"
        );
        assert_eq!(
            BodyFormat::from_content_type("text/plain; charset=utf-8"),
            Some(BodyFormat::Libsvm)
        );
        assert_eq!(BodyFormat::from_content_type("text/csv"), None);
    }

    /// A label, value or weight above `max_abs_value` in magnitude is refused naming its line, in every
    /// format and on both LIBSVM paths; at the limit it is accepted.
    #[test]
    fn magnitudes_above_the_limit_name_the_line() {
        let d = FeatureDictionary::new(10);
        let r = rules(LossKind::Squared);
        let bodies = [
            (BodyFormat::Libsvm, "1 1:2\n1e300 1:1e300\n", 2, "label"),
            (BodyFormat::Libsvm, "1 1:2\n\n1 1:1 2:-2e6\n", 3, "value of feature 2"),
            (BodyFormat::Libsvm, "1 1:2\n2 3:1e7\n", 2, "value of feature 3"),
            (
                BodyFormat::Ndjson,
                "{\"label\": 1, \"indices\": [1], \"values\": [1]}\n{\"label\": 1, \"indices\": [1], \"values\": [1], \"weight\": 1e9}\n",
                2,
                "weight",
            ),
            (
                BodyFormat::JsonArray,
                "[{\"label\": 1, \"indices\": [1], \"values\": [1]}, {\"label\": -5e6, \"indices\": [1], \"values\": [1]}]",
                2,
                "label",
            ),
            (
                BodyFormat::Ndjson,
                "{\"label\": 1, \"features\": {\"a\": 1}}\n{\"label\": 1, \"features\": {\"b\": 1e301}}\n",
                2,
                "value of feature \"b\"",
            ),
        ];
        for (format, body, line, what) in bodies {
            for fast in [true, false] {
                let (segments, mut out) = ([body.as_bytes()], SampleBlock::new());
                let e = parse_body_with(
                    format,
                    &segments,
                    &r,
                    &d,
                    fast,
                    &mut out,
                    &mut Claim::default(),
                    None,
                )
                .unwrap_err();
                assert_eq!(e.line, Some(line), "{body}: {}", e.message);
                assert!(e.message.starts_with(what), "{body}: {}", e.message);
                assert!(e.message.contains("ingest.max_abs_value"), "{}", e.message);
                assert!(out.is_empty() && d.is_empty(), "nothing enters");
            }
        }
        assert!(parse_body(BodyFormat::Libsvm, "-1e6 1:1e6 2:-1e6\n", &r, &d).is_ok());
        let tight = Rules {
            max_abs_value: 2.0,
            ..r.clone()
        };
        assert!(parse_body(BodyFormat::Libsvm, "2 1:-2\n", &tight, &d).is_ok());
        let e = parse_body(BodyFormat::Libsvm, "2 1:-2.5\n", &tight, &d).unwrap_err();
        assert_eq!(e.line, Some(1));
        // A prediction body's missing label is not checked, its values are.
        let p = Rules {
            predict: true,
            ..tight
        };
        assert!(parse_body(BodyFormat::Libsvm, "1:2\n", &p, &d).is_ok());
        assert!(parse_body(BodyFormat::Libsvm, "1:3\n", &p, &d).is_err());
    }

    /// A name longer than `max_name_bytes`, or more new names in one body than `max_new_names`, is
    /// refused naming the line, registers nothing (not even the earlier lines' names) and is counted.
    #[test]
    fn name_limits_refuse_the_whole_body() {
        let d = FeatureDictionary::new(100);
        let r = Rules {
            max_name_bytes: 8,
            max_new_names: 3,
            ..rules(LossKind::Squared)
        };
        let long = format!(
            "{{\"label\": 1, \"features\": {{\"a\": 1}}}}\n{{\"label\": 1, \"features\": {{\"{}\": 1}}}}\n",
            "x".repeat(9)
        );
        let e = parse_body(BodyFormat::Ndjson, &long, &r, &d).unwrap_err();
        assert_refused(&e, 2, "max_feature_name_bytes");
        assert!(d.is_empty());
        assert_eq!(d.refused(), 1);
        let ok = "{\"label\": 1, \"features\": {\"a\": 1, \"b\": 2}}\n{\"label\": 1, \"features\": {\"a\": 1, \"xxxxxxxx\": 1}}\n";
        parse_body(BodyFormat::Ndjson, ok, &r, &d).unwrap();
        assert_eq!(
            d.len(),
            3,
            "a, b and an 8-byte name: 3 new names at most per body"
        );
        let many = "{\"label\": 1, \"features\": {\"d\": 1}}\n{\"label\": 1, \"features\": {\"e\": 1, \"f\": 1, \"g\": 1}}\n";
        let e = parse_body(BodyFormat::Ndjson, many, &r, &d).unwrap_err();
        assert_refused(&e, 2, "max_new_names_per_request");
        assert_eq!(d.len(), 3, "the body registered none of its new names");
        assert_eq!(d.refused(), 2);
        let full = FeatureDictionary::new(1);
        let e = parse_body(BodyFormat::Ndjson, many, &r, &full).unwrap_err();
        assert!(e.message.contains("dictionary is full"), "{}", e.message);
        assert_eq!((full.len(), full.refused()), (0, 1));
    }

    /// A repeated name in one `"features"` object, or a name that is empty or holds a control or
    /// bidi character, is refused naming the line, in every JSON format and on both paths, for
    /// training and prediction; nothing is registered.
    #[test]
    fn repeated_and_unprintable_names_name_the_line() {
        let good = "{\"label\": 1, \"features\": {\"ok\": 1}}";
        let bad = [
            (
                "{\"label\": 1, \"features\": {\"a\": 1, \"a\": 2}}",
                "duplicate feature name \"a\"",
            ),
            (
                "{\"label\": 1, \"features\": {\"a\": 1, \"\\u0061\": 2}}",
                "duplicate feature name",
            ),
            (
                "{\"label\": 1, \"features\": {\"\": 1}}",
                "feature name is empty",
            ),
            (
                "{\"label\": 1, \"features\": {\"  \": 1}}",
                "only whitespace",
            ),
            (
                "{\"label\": 1, \"features\": {\"a\\u0000\": 1}}",
                "U+0000 at byte 1",
            ),
            (
                "{\"label\": 1, \"features\": {\"evil\\u202e\": 1}}",
                "U+202E",
            ),
            ("{\"label\": 1, \"features\": {\"x\\u2066y\": 1}}", "U+2066"),
            ("{\"label\": 1, \"features\": {\"a\\nb\": 1}}", "U+000A"),
            ("{\"label\": 1, \"features\": {\"\\u0085\": 1}}", "U+0085"),
        ];
        for predict in [false, true] {
            let r = Rules {
                predict,
                ..rules(LossKind::Squared)
            };
            for (object, message) in bad {
                let d = FeatureDictionary::new(10);
                for (format, body) in [
                    (BodyFormat::Ndjson, format!("{good}\n{object}\n")),
                    (BodyFormat::JsonArray, format!("[{good}, {object}]")),
                ] {
                    for fast in [true, false] {
                        let (segments, mut out) = ([body.as_bytes()], SampleBlock::new());
                        let e = parse_body_with(
                            format,
                            &segments,
                            &r,
                            &d,
                            fast,
                            &mut out,
                            &mut Claim::default(),
                            None,
                        )
                        .expect_err(&format!("{predict} {fast} {body}"));
                        assert_eq!(e.line, Some(2), "{body}: {}", e.message);
                        assert!(e.message.contains(message), "{body}: {}", e.message);
                        assert!(out.is_empty() && d.is_empty(), "nothing enters");
                    }
                }
            }
        }
        for name in ["a b", "naïve", "日本", "x-1_2.3", "emoji \u{1F600}"] {
            assert_eq!(check_name(name), Ok(()), "{name}");
        }
    }

    /// Whole bodies give the same result with the one-pass readers as without them: the same samples
    /// bit for bit, or the same error (line, message and sample count), for every format, training
    /// and prediction rules, label and `max_dim` checks, named features included.
    #[test]
    fn fast_readers_change_no_body_outcome() {
        use rand::{Rng, SeedableRng};

        use crate::ingest::json::plain::tests::random_object;
        use crate::ingest::libsvm::tests::random_line;

        // The fuzz targets' comparison: values and labels bit for bit, errors in full.
        let outcome = |r: Result<SampleBlock, BatchError>| crate::ingest::fuzzing::outcome(&r);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(17);
        let mut fast_ok = 0;
        for round in 0..3000 {
            let format = [
                BodyFormat::Libsvm,
                BodyFormat::Ndjson,
                BodyFormat::JsonArray,
            ][round % 3];
            let items: Vec<String> = (0..rng.gen_range(0..5))
                .map(|_| match format {
                    BodyFormat::Libsvm => random_line(&mut rng),
                    _ => random_object(&mut rng),
                })
                .collect();
            let body = match format {
                BodyFormat::JsonArray => format!("[{}]", items.join(",")),
                _ => items.join(["\n", "\r\n", "\n\n# c\n"][rng.gen_range(0..3)]),
            };
            let kind = [LossKind::Squared, LossKind::Hinge][rng.gen_range(0..2)];
            let max_dim = [100_000, 1 << 30][rng.gen_range(0..2)];
            let rules = Rules {
                // The random numbers reach 1e308: a quarter of the bodies meet the default bound.
                max_abs_value: [1e6, f64::MAX, f64::MAX, f64::MAX][rng.gen_range(0..4)],
                ..Rules::new(
                    vec![Loss::new(kind, 0.25).unwrap()],
                    max_dim,
                    rng.gen_range(0..4) == 0,
                )
            };
            let (fast_dict, general_dict) = (FeatureDictionary::new(2), FeatureDictionary::new(2));
            // Half the bodies are parsed onto a batch that already holds rows (the stdin reader's
            // case): those must stay as they were, and a refused body must leave nothing behind.
            let prefix = match round % 2 {
                0 => SampleBlock::new(),
                _ => SampleBlock::from_samples(&[
                    Sample::new(vec![3, 9], vec![0.5, -1.0], 1.0, None).unwrap(),
                    Sample::new(vec![], vec![], -1.0, Some(2.0)).unwrap(),
                ]),
            };
            let run = |dict: &FeatureDictionary, fast: bool| {
                let mut block = prefix.clone();
                let segments = [body.as_bytes()];
                let result = parse_body_with(
                    format,
                    &segments,
                    &rules,
                    dict,
                    fast,
                    &mut block,
                    &mut Claim::default(),
                    None,
                );
                let mut own = SampleBlock::new();
                match &result {
                    Ok(n) => {
                        assert_eq!(block.len(), prefix.len() + n);
                        let mut head = block.clone();
                        head.truncate(prefix.len());
                        assert_eq!(head, prefix);
                        for i in prefix.len()..block.len() {
                            own.push_ref(block.get(i));
                        }
                    }
                    Err(_) => assert_eq!(block, prefix, "a refused body leaves no row"),
                }
                outcome(result.map(|_| own))
            };
            let fast = run(&fast_dict, true);
            let general = run(&general_dict, false);
            assert_eq!(fast, general, "{format:?} {rules:?}\n{body}");
            assert_eq!(
                fast,
                outcome(parse_body(
                    format,
                    &body,
                    &rules,
                    &FeatureDictionary::new(2)
                )),
                "appending gives what parsing alone gives"
            );
            // The same body as the chunks of an HTTP request, cut anywhere (inside a line, a
            // number, a `\r\n`, a character).
            let b = body.as_bytes();
            let mut cuts: Vec<usize> = (0..rng.gen_range(1..4))
                .map(|_| rng.gen_range(0..=b.len()))
                .collect();
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut from = 0;
            for &cut in cuts.iter().chain([b.len()].iter()) {
                chunks.push(&b[from..cut]);
                from = cut;
            }
            assert_eq!(
                fast,
                outcome(parse_segments(
                    format,
                    &chunks,
                    &rules,
                    &FeatureDictionary::new(2)
                )),
                "a body in chunks parses as the joined body, cuts {cuts:?}"
            );
            assert_eq!(fast_dict.names(), general_dict.names());
            fast_ok += usize::from(!fast.starts_with("BatchError"));
        }
        assert!(fast_ok > 200, "only {fast_ok} bodies were accepted");
    }
}
