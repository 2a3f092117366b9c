//! LIBSVM / SVMlight lines: `label idx:val idx:val ...`, a trailing `# comment` allowed, `qid:N`
//! tokens (ranking groups) accepted and ignored, a `cost:c` token (SVMlight's example-dependent cost
//! factor) read as the sample's weight, feature indices kept exactly as written.
//!
//! Two readers, one result. The fast path (`structural`) takes the shape writers produce (single
//! spaces, plain decimals, strictly increasing bare-digit indices) and reads it with the kernels of
//! `ingest::simd`; every line it does not fully accept goes to the general parser
//! ([`parse_libsvm_general`], its numbers read by the standard library), which decides the values
//! and every error. The two are held to each other by property tests
//! (`tests::libsvm_paths_agree_on_random_lines` per line, `batch`'s
//! `fast_readers_change_no_body_outcome` per body).

pub(crate) mod structural;
#[cfg(test)]
pub(crate) mod tests;

use crate::ingest::simd::count_byte;
use crate::ingest::LineError;
use crate::sample::Sample;

/// Parses one LIBSVM line (not blank, not a comment). A trailing `# comment` is allowed.
/// `qid:N` tokens (SVMlight ranking groups) are accepted and ignored; a `cost:c` token (anywhere after
/// the label, at most once: SVMlight's per-example cost factor) is the sample's weight `c > 0`.
///
/// This is the daemon's ingest hot path, and LIBSVM has exactly two readers: the **fast path**, the
/// structural reader of `structural.rs` (`parse_libsvm_plain_into`), takes the shape writers produce
/// (`label idx:val idx:val ...`, single spaces, plain decimals, strictly increasing indices); every
/// line it does not fully accept goes to the **general path**, [`parse_libsvm_general`], which
/// decides the values and every error. The two are held to each other by the property test
/// `libsvm_paths_agree_on_random_lines` (and whole bodies by `batch`'s
/// `fast_readers_change_no_body_outcome`).
pub fn parse_libsvm_line(line: &str) -> Result<Sample, LineError> {
    // Every pair holds exactly one ':', so on the lines the fast path accepts the count sizes both
    // vectors exactly: no regrowth while parsing, and no slack carried into the learners' windows.
    let pairs = count_byte(line.as_bytes(), b':');
    let (mut indices, mut values) = (Vec::with_capacity(pairs), Vec::with_capacity(pairs));
    match parse_libsvm_plain_into(line.as_bytes(), &mut indices, &mut values) {
        Some(label) => Ok(Sample {
            indices,
            values,
            label,
            weight: None,
        }),
        None => parse_libsvm_general(line),
    }
}

/// [`parse_libsvm_line`] appending the pairs to `indices` and `values` (the columns of a batch being
/// built) and returning the label and the weight (`None` without a `cost:` token): no vectors of its
/// own on the fast path. On an error the columns are left as they were.
pub fn parse_libsvm_append(
    line: &str,
    indices: &mut Vec<u32>,
    values: &mut Vec<f64>,
) -> Result<(f64, Option<f64>), LineError> {
    if let Some(label) = parse_libsvm_plain_into(line.as_bytes(), indices, values) {
        return Ok((label, None));
    }
    let sample = parse_libsvm_general(line)?;
    indices.extend_from_slice(&sample.indices);
    values.extend_from_slice(&sample.values);
    Ok((sample.label, sample.weight))
}

/// The general LIBSVM parser behind [`parse_libsvm_line`]: tokens split on ASCII whitespace up to the
/// first `#`, labels and values read by `f64::from_str` and indices by `u32::from_str`; the same values
/// and the same errors as the obvious `split`/`parse` version.
///
/// Why the standard library's number parsers: they are correctly rounded, and on the lines that reach
/// this parser a hand-written one was no faster overall. Measured 2026-11-28 (rustc 1.95, thread CPU
/// per token, best of 7 alternating rounds, 200 000 tokens): a fast path for plain decimals of up to
/// 15 digits read `{:.6}` values in 15-16 ns against `from_str`'s 19 (1.2x), but 17-digit values
/// (shortest round-trip output, which the structural reader leaves to this parser) in 47-49 ns against
/// 27-29 (0.6x); a hand-written `u32` reader took 6.5 ns per index against `from_str`'s 4.7.
pub fn parse_libsvm_general(line: &str) -> Result<Sample, LineError> {
    let bytes = line.as_bytes();
    let (mut at, mut comment) = (0, false);
    // The next whitespace-separated token before any `#`, with the offset of its first ':' if any.
    let mut next_token = || -> Option<(&str, Option<usize>)> {
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        if comment || at == bytes.len() || bytes[at] == b'#' {
            return None;
        }
        let start = at;
        let mut colon = None;
        while at < bytes.len() {
            match bytes[at] {
                c if c.is_ascii_whitespace() => break,
                b'#' => {
                    comment = true;
                    break;
                }
                b':' if colon.is_none() => colon = Some(at - start),
                _ => {}
            }
            at += 1;
        }
        Some((&line[start..at], colon))
    };
    let (label_tok, colon) = next_token().ok_or(LineError::MissingLabel)?;
    if colon.is_some() {
        return Err(LineError::MissingLabel);
    }
    let label: f64 = label_tok
        .parse()
        .map_err(|_| LineError::BadLabel(label_tok.to_string()))?;
    // Room for typical pairs at once (`12345:0.123456 ` is 15 bytes; the vectors grow if needed).
    let mut indices = Vec::with_capacity(line.len() / 8 + 1);
    let mut values = Vec::with_capacity(line.len() / 8 + 1);
    let mut weight = None;
    while let Some((tok, colon)) = next_token() {
        let colon = colon.ok_or_else(|| LineError::BadPair(tok.to_string()))?;
        let (i, v) = (&tok[..colon], &tok[colon + 1..]);
        let index: u32 = match i.parse() {
            Ok(index) => index,
            Err(_) if i == "qid" => continue,
            Err(_) if i == "cost" => {
                let c: f64 = v.parse().map_err(|_| LineError::BadCost(v.to_string()))?;
                if weight.replace(c).is_some() {
                    return Err(LineError::RepeatedCost);
                }
                continue;
            }
            Err(_) => return Err(LineError::BadIndex(i.to_string())),
        };
        let value: f64 = v.parse().map_err(|_| LineError::BadValue(v.to_string()))?;
        indices.push(index);
        values.push(value);
    }
    Ok(Sample::new(indices, values, label, weight)?)
}

/// The fast path of [`parse_libsvm_line`]: the structural reader (`structural::structural_pairs`:
/// tokens separated by single spaces, each pair read from boundaries found up front). Appends the
/// pairs to `indices`/`values` and returns the label, or `None` (with the columns truncated back)
/// unless the whole line is `label idx:val idx:val ...` with single spaces between tokens (one
/// trailing space allowed), a label and values that [`plain_decimal`] converts exactly, bare-digit
/// `u32` indices, strictly increasing. On such a line the general parser gives this same sample (the
/// values are `from_str`'s, bit for bit); on any other line (tabs, runs of spaces, comments, `qid`,
/// exponents, `inf`, long mantissas, `+` on an index, errors of any kind) it is the general parser
/// that decides, so this path never has to produce an error itself.
///
/// Until 2026-11 a second fast reader (a one-pass scalar loop taking any ASCII whitespace) sat
/// between this one and the general parser. It was removed to keep one fast path: on the load
/// generator's body it was 1.3-1.6x slower than this reader and never reached (every line is
/// single-spaced); lines with tabs or double spaces now cost the general parser's time
/// (`docs/benchmarks/json.md`, LIBSVM section).
pub(crate) fn parse_libsvm_plain_into(
    line: &[u8],
    indices: &mut Vec<u32>,
    values: &mut Vec<f64>,
) -> Option<f64> {
    let (start_indices, start_values) = (indices.len(), values.len());
    let parsed = structural::structural_pairs(line, indices, values);
    if parsed.is_none() {
        indices.truncate(start_indices);
        values.truncate(start_values);
    }
    parsed
}
