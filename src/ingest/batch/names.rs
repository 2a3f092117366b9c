//! The feature-kind rule and the second phase of a body's parse: named features → dictionary indices.
//!
//! Numeric indices and names never share one index space ([`FeatureKind`]): [`check_kind`] refuses a
//! body that mixes them or brings the kind the daemon does not take. [`resolve_names`] then gives each
//! named sample its indices through the bounded [`FeatureDictionary`], all or nothing.

use super::{fail, FeatureDictionary, FeatureKind, NamedSlot, Parsed, Rules};
use crate::ingest::BatchError;
use crate::sample::{Sample, SampleBlock};

/// Numeric indices and names never share the index space ([`FeatureKind`]): a body with both is
/// refused at the first line of the kind that comes second; a body of the kind the daemon does not
/// take, at its first such line. `Ok(true)`: a training body with numeric features, which claims
/// the numeric kind if it is still open (the caller's last step). Named bodies are checked again,
/// and claim their kind, under the dictionary's lock in [`resolve_names`].
pub(super) fn check_kind(
    parsed: &Parsed,
    rules: &Rules,
    dict: &FeatureDictionary,
) -> Result<bool, BatchError> {
    let total = parsed.rows();
    let numeric = (parsed.base..parsed.samples.len())
        .zip(&parsed.lines)
        .find(|(i, _)| !parsed.samples.get(*i).indices.is_empty())
        .map(|(_, &line)| line);
    let named = parsed
        .named
        .iter()
        .find(|s| !s.features.is_empty())
        .map(|s| parsed.lines[s.slot - parsed.base]);
    match (numeric, named) {
        (Some(n), Some(m)) => Err(fail(
            n.max(m),
            format!(
                "numeric feature indices (line {n}) and named features (line {m}) in one body: \
                 they would share one index space, so a daemon takes one kind only"
            ),
            total,
        )),
        (Some(line), None) => match dict.kind() {
            FeatureKind::Names => Err(fail(line, kind_refusal(FeatureKind::Names), total)),
            _ => Ok(!rules.predict),
        },
        (None, Some(line)) => match dict.kind() {
            FeatureKind::Indices => Err(fail(line, kind_refusal(FeatureKind::Indices), total)),
            _ => Ok(false),
        },
        (None, None) => Ok(false),
    }
}

/// Why a body of the other kind than `taken` is refused.
pub(super) fn kind_refusal(taken: FeatureKind) -> String {
    let (refused, taken_what) = match taken {
        FeatureKind::Names => ("numeric feature indices", "named features"),
        _ => ("named features", "numeric feature indices"),
    };
    format!(
        "{refused} are refused: this daemon takes {taken_what} (its first training sample with \
         features had them), and the two would share one index space"
    )
}

/// Second phase: named features → indices. Training bodies register new names (all or nothing, under
/// the write lock so concurrent requests cannot hand out the same index); prediction bodies drop names
/// the dictionary does not know (their weight is 0 anyway).
pub(super) fn resolve_names(
    parsed: &mut Parsed,
    rules: &Rules,
    dict: &FeatureDictionary,
) -> Result<(), BatchError> {
    if parsed.named.is_empty() {
        return Ok(());
    }
    let Parsed {
        samples: placeholders,
        base,
        lines,
        named,
    } = parsed;
    let (base, total) = (*base, placeholders.len() - *base);
    // This body's rows, rebuilt with the named ones resolved, replace its placeholder rows at the end.
    let mut out = SampleBlock::with_capacity(total, placeholders.nnz());
    let mut inner = dict.write();
    let first_line = named.first().map_or(0, |s| lines[s.slot - base]);
    let has_names = named.iter().any(|s| !s.features.is_empty());
    if dict.kind() == FeatureKind::Indices && has_names {
        return Err(fail(first_line, kind_refusal(FeatureKind::Indices), total));
    }
    let mut added = 0usize;
    let mut result: Result<(), BatchError> = Ok(());
    for NamedSlot {
        slot,
        features,
        weight,
    } in named.drain(..)
    {
        // The rows before this one are complete as they are.
        for i in base + out.len()..slot {
            out.push_ref(placeholders.get(i));
        }
        let (line, label) = (lines[slot - base], placeholders.get(slot).label);
        let mut pairs: Vec<(u32, f64)> = Vec::with_capacity(features.len());
        for (name, value) in features {
            let index = match inner.index_of(&name) {
                Some(j) => j,
                None if rules.predict => continue,
                None => {
                    let j = inner.len() as u32;
                    if added >= rules.max_new_names {
                        dict.count_refusal();
                        result = Err(BatchError {
                            line: Some(line),
                            message: format!(
                                "request adds more than ingest.max_new_names_per_request ({}) new feature names",
                                rules.max_new_names
                            ),
                            samples: total,
                        });
                        break;
                    }
                    if inner.len() >= dict.capacity() || j as usize >= rules.max_dim {
                        dict.count_refusal();
                        result = Err(BatchError {
                            line: Some(line),
                            message: format!(
                                "feature dictionary is full ({} names, ingest.max_named_features); cannot add {name:?}",
                                dict.capacity()
                            ),
                            samples: total,
                        });
                        break;
                    }
                    if inner.bytes() + name.len() > dict.byte_capacity() {
                        dict.count_refusal();
                        result = Err(BatchError {
                            line: Some(line),
                            message: format!(
                                "feature dictionary is full ({} bytes of names, ingest.max_named_feature_bytes); cannot add {name:?}",
                                dict.byte_capacity()
                            ),
                            samples: total,
                        });
                        break;
                    }
                    added += 1;
                    inner.push(&name)
                }
            };
            pairs.push((index, value));
        }
        if result.is_err() {
            break;
        }
        pairs.sort_unstable_by_key(|p| p.0);
        let (indices, values) = pairs.into_iter().unzip();
        match Sample::new(indices, values, label, weight) {
            Ok(s) => out.push(&s),
            Err(e) => {
                result = Err(BatchError {
                    line: Some(line),
                    message: e.to_string(),
                    samples: total,
                });
                break;
            }
        }
    }
    if let Err(e) = result {
        // All or nothing: forget the names this body added (they are the last ones).
        let keep = inner.len() - added;
        inner.truncate(keep);
        return Err(e);
    }
    if !rules.predict && has_names {
        dict.set_names_kind(&inner);
    }
    for i in base + out.len()..placeholders.len() {
        out.push_ref(placeholders.get(i));
    }
    placeholders.truncate(base);
    placeholders.extend_from_block(&out);
    Ok(())
}
