//! Entry points for the `cargo fuzz` targets in `fuzz/`: the private fast readers, so a target can
//! hold them to the general readers they stand in for, and the one comparison of parse outcomes the
//! targets and the body tests share. Hidden from the documentation; not an API.

use super::batch::{BodyFormat, FeatureDictionary, Rules};
use super::BatchError;
use crate::sample::SampleBlock;

/// The LIBSVM fast path alone: `Some((label, indices, values))` where it accepts the line, `None`
/// where it leaves the line to [`super::libsvm::parse_libsvm_general`].
pub fn libsvm_fast(line: &str) -> Option<(f64, Vec<u32>, Vec<f64>)> {
    let (mut indices, mut values) = (Vec::new(), Vec::new());
    let label = super::libsvm::parse_libsvm_plain_into(line.as_bytes(), &mut indices, &mut values)?;
    Some((label, indices, values))
}

/// A parse outcome as text, values and labels bit for bit, errors in full: two readers agree when
/// their outcomes are equal.
pub fn outcome(r: &Result<SampleBlock, BatchError>) -> String {
    match r {
        Ok(samples) => samples
            .to_samples()
            .iter()
            .map(|s| {
                let bits: Vec<u64> = s.values.iter().map(|v| v.to_bits()).collect();
                format!(
                    "{:x} {:?} {bits:x?} {:?};",
                    s.label.to_bits(),
                    s.indices,
                    s.weight.map(f64::to_bits)
                )
            })
            .collect(),
        Err(e) => format!("{e:?}"),
    }
}

/// A whole body through the reference readers only (no fast LIBSVM or JSON reader).
pub fn parse_body_reference(
    format: BodyFormat,
    segments: &[&[u8]],
    rules: &Rules,
    dict: &FeatureDictionary,
) -> Result<SampleBlock, BatchError> {
    super::batch::parse_segments_with(format, segments, rules, dict, false)
}
