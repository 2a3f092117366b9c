//! The feature-kind rule and the second phase of a body's parse: named features → dictionary indices.
//!
//! Numeric indices and names never share one index space ([`FeatureKind`]): [`check_kind`] refuses a
//! body that mixes them or brings a kind the daemon (or the claim it joins) does not take.
//! [`resolve_names`] then gives each named sample its indices, reading the [`FeatureDictionary`] and
//! noting new names in the body's [`Claim`], all or nothing. Neither changes the dictionary: the
//! claim is granted at admission.

use super::{fail, Claim, FeatureDictionary, FeatureKind, NamedSlot, Parsed, Rules};
use crate::ingest::dictionary::{full_by_bytes, full_by_count, kind_refusal};
use crate::ingest::BatchError;
use crate::sample::{Sample, SampleBlock};

/// Numeric indices and names never share the index space ([`FeatureKind`]): a body with both is
/// refused at the first line of the kind that comes second; a body of the kind the daemon (or
/// `claim`, a stdin batch's) does not take, at its first such line. A training body's kind is noted
/// in `claim`, which admission grants.
pub(super) fn check_kind(
    parsed: &Parsed,
    rules: &Rules,
    dict: &FeatureDictionary,
    claim: &mut Claim,
) -> Result<(), BatchError> {
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
    let (kind, line) = match (numeric, named) {
        (Some(n), Some(m)) => {
            return Err(fail(
                n.max(m),
                format!(
                    "numeric feature indices (line {n}) and named features (line {m}) in one body: \
                     they would share one index space, so a daemon takes one kind only"
                ),
                total,
            ))
        }
        (Some(line), None) => (FeatureKind::Indices, line),
        (None, Some(line)) => (FeatureKind::Names, line),
        (None, None) => return Ok(()),
    };
    for taken in [dict.kind(), claim.kind()] {
        if taken != FeatureKind::Open && taken != kind {
            return Err(fail(line, kind_refusal(taken), total));
        }
    }
    if !rules.predict {
        claim.note_kind(kind, line);
    }
    Ok(())
}

/// Second phase: named features → indices. A training body's new names are noted in `claim`
/// with provisional indices (all or nothing: the caller rewinds the claim on failure); a prediction
/// body drops names the dictionary does not know (their weight is 0 anyway). The dictionary is only
/// read.
pub(super) fn resolve_names(
    parsed: &mut Parsed,
    rules: &Rules,
    dict: &FeatureDictionary,
    claim: &mut Claim,
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
    let held = dict.read();
    claim.begin(&held, rules.max_dim);
    let mut added = 0usize;
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
        let refused = |message: String| {
            dict.count_refusal();
            Err(fail(line, message, total))
        };
        let mut pairs: Vec<(u32, f64)> = Vec::with_capacity(features.len());
        for (name, value) in features {
            let index = match claim.lookup(&held, &name) {
                Some(j) => j,
                None if rules.predict => continue,
                None => {
                    if added >= rules.max_new_names {
                        return refused(format!(
                            "request adds more than ingest.max_new_names_per_request ({}) new feature names",
                            rules.max_new_names
                        ));
                    }
                    if claim.names_after(&held) >= dict.capacity()
                        || claim.next_index() >= rules.max_dim
                    {
                        return refused(full_by_count(dict.capacity(), &name));
                    }
                    if claim.bytes_after(&held) + name.len() > dict.byte_capacity() {
                        return refused(full_by_bytes(dict.byte_capacity(), &name));
                    }
                    added += 1;
                    claim.add(&name, line)
                }
            };
            pairs.push((index, value));
        }
        pairs.sort_unstable_by_key(|p| p.0);
        let (indices, values) = pairs.into_iter().unzip();
        match Sample::new(indices, values, label, weight) {
            Ok(s) => out.push(&s),
            Err(e) => return Err(fail(line, e.to_string(), total)),
        }
    }
    drop(held);
    for i in base + out.len()..placeholders.len() {
        out.push_ref(placeholders.get(i));
    }
    placeholders.truncate(base);
    placeholders.extend_from_block(&out);
    Ok(())
}
