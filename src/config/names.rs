//! `ingest.feature_names`: how named features get their indices ([`FeatureNames`]): the bounded
//! dictionary, or a seeded hash of `ingest.hash_bits` bits (with `ingest.hash_seed` and
//! `ingest.hash_names_kept`).

use super::check::{count, int, need, range};
use super::error::ConfigError;
use super::raw::IngestLayer;

/// How named features get their indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeatureNames {
    /// Each new name takes the next free index in the bounded dictionary (`ingest.max_named_features`).
    Dictionary,
    /// A name's index is its seeded hash's low `bits` bits; `kept` slots remember names for the
    /// models' supports.
    Hashed { bits: u32, seed: u64, kept: usize },
}

impl FeatureNames {
    /// `"dictionary"` or `"hashed"`.
    pub fn name(self) -> &'static str {
        match self {
            FeatureNames::Dictionary => "dictionary",
            FeatureNames::Hashed { .. } => "hashed",
        }
    }
}

/// Reads `ingest.feature_names` and, for `"hashed"`, its bits (`2^bits <= ingest.max_dim`: the
/// learners' vectors hold every hashed index), seed and remembered names.
pub(super) fn read_feature_names(
    ingest: &IngestLayer,
    max_dim: usize,
) -> Result<FeatureNames, ConfigError> {
    let mode = need(&ingest.feature_names, "ingest.feature_names")?;
    let bits = int(&ingest.hash_bits, "ingest.hash_bits", 1, 30)? as u32;
    let seed = int(&ingest.hash_seed, "ingest.hash_seed", 0, i64::MAX)? as u64;
    let kept = count(
        &ingest.hash_names_kept,
        "ingest.hash_names_kept",
        1,
        1 << 24,
    )?;
    match mode.as_str() {
        "dictionary" => Ok(FeatureNames::Dictionary),
        "hashed" if (1usize << bits) > max_dim => Err(range(
            "ingest.hash_bits",
            &bits.to_string(),
            &format!(
                "2^{bits} hashed indices do not fit ingest.max_dim ({max_dim}): lower the bits or \
                 raise ingest.max_dim to at least {}",
                1usize << bits
            ),
        )),
        "hashed" => Ok(FeatureNames::Hashed { bits, seed, kept }),
        other => Err(range(
            "ingest.feature_names",
            &format!("{other:?}"),
            "expected \"dictionary\" or \"hashed\"",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::FeatureNames;
    use crate::config::tests::load_text;
    use crate::config::Config;

    #[test]
    fn feature_names_are_read_and_validated() {
        assert_eq!(Config::defaults().feature_names, FeatureNames::Dictionary);
        let c = load_text(
            "[ingest]\nfeature_names = \"hashed\"\nhash_bits = 12\n",
            &[("THRESHER_INGEST_HASH_SEED", "7")],
        )
        .unwrap();
        assert_eq!(
            c.feature_names,
            FeatureNames::Hashed {
                bits: 12,
                seed: 7,
                kept: 65536
            }
        );
        for (text, key) in [
            ("feature_names = \"hash\"", "ingest.feature_names"),
            ("hash_bits = 0", "ingest.hash_bits"),
            ("hash_bits = 31", "ingest.hash_bits"),
            ("hash_seed = -1", "ingest.hash_seed"),
            ("hash_names_kept = 0", "ingest.hash_names_kept"),
            (
                "feature_names = \"hashed\"\nhash_bits = 20\nmax_dim = 1000",
                "ingest.hash_bits",
            ),
        ] {
            let e = load_text(&format!("[ingest]\n{text}\n"), &[])
                .unwrap_err()
                .to_string();
            assert!(e.contains(key), "{text}: {e}");
        }
    }
}
