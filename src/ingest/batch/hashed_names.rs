//! The second phase of a body's parse when names are hashed (`ingest.feature_names = "hashed"`):
//! each named feature's index is its name's hash ([`crate::ingest::hashed::Hashing`]), so nothing is
//! registered and no name is refused for the dictionary's limits. Names that hash to one index in
//! one sample add their values. The feature-kind rule is the dictionary's ([`super::names`]): the
//! body's kind is noted in its claim by `check_kind` and taken at admission, as for registered names.
//! The names a training body carries are remembered for the supports' names when it is parsed, so a
//! body refused after its parse (a full queue or log) may leave its names in that bounded memory
//! (display only: never an index, never a model).

use super::{fail, Parsed, Rules};
use crate::ingest::hashed::HashedNames;
use crate::ingest::BatchError;
use crate::sample::{Sample, SampleBlock};

/// Named features → hashed indices, all or nothing. A valid training body's names are remembered
/// for the models' supports.
pub(super) fn resolve_hashed(
    parsed: &mut Parsed,
    rules: &Rules,
    hashed: &HashedNames,
) -> Result<(), BatchError> {
    let Parsed {
        samples: placeholders,
        base,
        lines,
        named,
    } = parsed;
    let (base, total) = (*base, placeholders.len() - *base);
    let has_names = named.iter().any(|s| !s.features.is_empty());
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

#[cfg(test)]
mod tests {
    use crate::ingest::batch::{parse_body, BodyFormat, FeatureDictionary, FeatureKind, Rules};
    use crate::ingest::hashed::{HashedNames, Hashing};
    use crate::loss::{Loss, LossKind};

    fn hashed(bits: u32) -> FeatureDictionary {
        FeatureDictionary::new(2)
            .with_hashing(Some(HashedNames::new(Hashing { bits, seed: 0 }, 64)))
    }

    fn rules(predict: bool) -> Rules {
        let loss = Loss::new(LossKind::Squared, 0.25).unwrap();
        Rules::new(vec![loss], 1 << 20, predict)
    }

    /// Names past the dictionary's capacity are hashed, not refused; names colliding in one sample
    /// add their values; prediction bodies record no name; the kind rule holds; a bad body records
    /// nothing.
    #[test]
    fn names_hash_merge_and_keep_the_kind_rule() {
        let d = hashed(1);
        let h = d.hashed().unwrap().hashing();
        let (a, b) = (h.index("a"), h.index("b"));
        // At one bit, two of three names collide; find such a pair.
        let c = ["c", "d", "e", "f"]
            .into_iter()
            .find(|n| h.index(n) == a)
            .unwrap();
        let body = format!("{{\"label\": 1, \"features\": {{\"a\": 1, \"{c}\": 2, \"b\": 4}}}}\n");
        let p = parse_body(BodyFormat::Ndjson, &body, &rules(true), &d).unwrap();
        assert_eq!(d.kind(), FeatureKind::Open, "a prediction claims no kind");
        assert_eq!(d.names_of(&[a]), vec![None], "a prediction records no name");
        let s = parse_body(BodyFormat::Ndjson, &body, &rules(false), &d).unwrap();
        assert_eq!(p, s);
        let row = s.get(0);
        if a == b {
            assert_eq!((row.indices, row.values), (&[a][..], &[7.0][..]));
        } else {
            assert_eq!(row.indices.len(), 2);
            assert_eq!(
                row.values[row.indices.iter().position(|&j| j == a).unwrap()],
                3.0
            );
        }
        assert_eq!(d.kind(), FeatureKind::Names);
        assert!(d.names_of(&[a])[0].is_some());
        assert_eq!(d.len(), 0, "nothing registered");
        let many: String = (0..50)
            .map(|i| format!("{{\"label\": 1, \"features\": {{\"n{i}\": 1}}}}\n"))
            .collect();
        let d = hashed(20);
        assert_eq!(
            parse_body(BodyFormat::Ndjson, &many, &rules(false), &d)
                .unwrap()
                .len(),
            50
        );
        let e = parse_body(BodyFormat::Libsvm, "1 3:1\n", &rules(false), &d).unwrap_err();
        assert!(
            e.message.contains("numeric feature indices are refused"),
            "{}",
            e.message
        );
        let d = hashed(20);
        let bad = "{\"label\": 1, \"features\": {\"kept\": 1}}\n{\"label\": 1, \"features\": {\"x\": 1}, \"weight\": -1}\n";
        assert!(parse_body(BodyFormat::Ndjson, bad, &rules(false), &d).is_err());
        let kept = d.hashed().unwrap().index("kept");
        assert_eq!(
            d.names_of(&[kept]),
            vec![None],
            "a refused body records no name"
        );
        assert_eq!(d.kind(), FeatureKind::Open);
    }
}
