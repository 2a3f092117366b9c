//! The second phase of a body's parse when names are hashed (`ingest.feature_names = "hashed"`):
//! each named feature's index is its name's hash ([`crate::ingest::hashed::Hashing`]), so nothing is
//! registered and no name is refused for the dictionary's limits. Names that hash to one index in
//! one sample add their values. The feature-kind rule is the dictionary's ([`super::names`]).

use super::names::kind_refusal;
use super::{fail, FeatureDictionary, FeatureKind, Parsed, Rules};
use crate::ingest::hashed::HashedNames;
use crate::ingest::BatchError;
use crate::sample::{Sample, SampleBlock};

/// Named features → hashed indices, all or nothing. An accepted training body's names are
/// remembered for the models' supports and claim the named kind.
pub(super) fn resolve_hashed(
    parsed: &mut Parsed,
    rules: &Rules,
    dict: &FeatureDictionary,
    hashed: &HashedNames,
) -> Result<(), BatchError> {
    let Parsed {
        samples: placeholders,
        base,
        lines,
        named,
    } = parsed;
    let (base, total) = (*base, placeholders.len() - *base);
    let first_line = named.first().map_or(0, |s| lines[s.slot - base]);
    let has_names = named.iter().any(|s| !s.features.is_empty());
    if has_names && dict.kind() == FeatureKind::Indices {
        return Err(fail(first_line, kind_refusal(FeatureKind::Indices), total));
    }
    let mut out = SampleBlock::with_capacity(total, placeholders.nnz());
    for slot in named.iter() {
        for i in base + out.len()..slot.slot {
            out.push_ref(placeholders.get(i));
        }
        let (line, label) = (lines[slot.slot - base], placeholders.get(slot.slot).label);
        let mut pairs: Vec<(u32, f64)> = slot
            .features
            .iter()
            .map(|(name, value)| (hashed.index(name), *value))
            .collect();
        pairs.sort_unstable_by_key(|p| p.0);
        pairs.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                kept.1 += later.1;
            }
            same
        });
        if let Some(&(j, _)) = pairs.last().filter(|p| p.0 as usize >= rules.max_dim) {
            return Err(fail(
                line,
                format!(
                    "hashed feature index {j} is not below ingest.max_dim ({})",
                    rules.max_dim
                ),
                total,
            ));
        }
        let (indices, values) = pairs.into_iter().unzip();
        let sample = Sample::new(indices, values, label, slot.weight)
            .map_err(|e| fail(line, e.to_string(), total))?;
        out.push(&sample);
    }
    if !rules.predict && has_names {
        if dict.kind() != FeatureKind::Names {
            // Decided under the dictionary's lock, as a numeric body claims its kind.
            let guard = dict.write();
            if dict.kind() == FeatureKind::Indices {
                return Err(fail(first_line, kind_refusal(FeatureKind::Indices), total));
            }
            dict.set_names_kind(&guard);
        }
        hashed.record(named.iter().flat_map(|s| {
            s.features
                .iter()
                .map(|(name, _)| (hashed.index(name), name.as_str()))
        }));
    }
    named.clear();
    for i in base + out.len()..placeholders.len() {
        out.push_ref(placeholders.get(i));
    }
    placeholders.truncate(base);
    placeholders.extend_from_block(&out);
    Ok(())
}
