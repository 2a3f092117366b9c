//! Readers that turn text into validated [`Sample`]s: LIBSVM/SVMlight lines and JSON lines.
//!
//! Both readers work line by line so the daemon can parse a request body and the offline tools a whole
//! file with the same code. A malformed line is an error naming the line number and what is wrong; no
//! line is ever skipped silently (only blank lines and `#` comments are). Feature indices are kept
//! exactly as written.

pub mod admission;
#[cfg(target_arch = "x86_64")]
mod avx2;
pub mod batch;
pub mod budget;
pub mod file;
mod json_plain;
pub mod nats;
pub mod segments;
pub mod stdin;
mod structural;

use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;

use crate::sample::{Sample, SampleError};

pub use admission::{Admission, AdmitError, Batch, Source};
pub use file::read_dataset;

/// `ingest.max_abs_value`'s default: the largest magnitude of a label, feature value or weight accepted
/// by the daemon, `fit` and `predict`.
pub const DEFAULT_MAX_ABS_VALUE: f64 = 1e6;

/// Input text formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// `label idx:val idx:val ...` (SVMlight); `#` starts a comment.
    Libsvm,
    /// One JSON object per line: `{"label": y, "indices": [...], "values": [...], "weight": c}`.
    Jsonl,
}

/// What is wrong with one line.
#[derive(Debug, Error, PartialEq, Clone)]
pub enum LineError {
    #[error("missing label")]
    MissingLabel,
    #[error("bad label {0:?}: not a number")]
    BadLabel(String),
    #[error("bad feature {0:?}: expected index:value")]
    BadPair(String),
    #[error("bad feature index {0:?}: expected a non-negative integer below 2^32")]
    BadIndex(String),
    #[error("bad feature value {0:?}: not a number")]
    BadValue(String),
    #[error("invalid JSON sample: {0}")]
    Json(String),
    #[error("line is not UTF-8 (byte {byte} of the line)")]
    NotUtf8 { byte: usize },
    #[error("{what} {value:e} is larger in magnitude than ingest.max_abs_value ({limit:e})")]
    TooLarge {
        what: String,
        value: f64,
        limit: f64,
    },
    #[error(transparent)]
    Sample(#[from] SampleError),
}

/// Why a body was refused: the message and the 1-based line (or array position) at fault, if any.
/// Kept at the root of `ingest` (and re-exported by [`batch`]) because both the body parser
/// ([`batch`]) and the line walk it uses ([`segments`]) return it: neither has to import the other's
/// types.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchError {
    pub line: Option<usize>,
    pub message: String,
    /// How many samples the body held (as far as it could be read), for the rejection counter.
    pub samples: usize,
}

/// A line error with where it happened.
#[derive(Debug, Error)]
pub enum ReadError {
    #[error("{}:{line}: {source}", path.display())]
    Line {
        path: PathBuf,
        line: usize,
        #[source]
        source: LineError,
    },
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Is this line content-free (blank or a `#` comment)?
pub fn is_skippable(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

/// The lines of a body exactly as `str::lines` gives them (split at `\n`, one `\r` before it dropped,
/// a last line without `\n` kept as it is, no empty line after a final `\n`), with the newline search
/// done by `memchr` (SIMD where the CPU has it) instead of core's word-at-a-time search: on a
/// 40-feature LIBSVM body that search cost about 7% of the parse.
pub(crate) fn lines(body: &str) -> impl Iterator<Item = &str> {
    let mut start = 0;
    let mut newlines = memchr::memchr_iter(b'\n', body.as_bytes());
    std::iter::from_fn(move || match newlines.next() {
        Some(end) => {
            // `start` and `end` sit next to ASCII newlines: both are char boundaries.
            let line = body.get(start..end).unwrap_or_default();
            start = end + 1;
            Some(line.strip_suffix('\r').unwrap_or(line))
        }
        None if start < body.len() => {
            let line = body.get(start..).unwrap_or_default();
            start = body.len();
            Some(line)
        }
        None => None,
    })
}

/// The samples a line-format body holds if it is valid: its lines that [`is_skippable`] lets through
/// (neither blank nor `#` comments), counted with a vectorised newline search instead of a parse — for
/// a body refused before parsing.
pub fn count_content_lines(body: &[u8]) -> usize {
    let mut start = 0;
    let mut count = 0;
    for end in memchr::memchr_iter(b'\n', body).chain(std::iter::once(body.len())) {
        let first = body[start..end].iter().find(|b| !b.is_ascii_whitespace());
        if first.is_some_and(|&b| b != b'#') {
            count += 1;
        }
        start = end + 1;
    }
    count
}

/// Parses one LIBSVM line (not blank, not a comment). A trailing `# comment` is allowed.
/// `qid:N` tokens (SVMlight ranking groups) are accepted and ignored.
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
/// built) and returning the label: no vectors of its own on the fast path. On an error the columns are
/// left as they were.
pub fn parse_libsvm_append(
    line: &str,
    indices: &mut Vec<u32>,
    values: &mut Vec<f64>,
) -> Result<f64, LineError> {
    if let Some(label) = parse_libsvm_plain_into(line.as_bytes(), indices, values) {
        return Ok(label);
    }
    let sample = parse_libsvm_general(line)?;
    indices.extend_from_slice(&sample.indices);
    values.extend_from_slice(&sample.values);
    Ok(sample.label)
}

/// The general LIBSVM parser behind [`parse_libsvm_line`]: tokens split on ASCII whitespace up to the
/// first `#`, indices parsed by `parse_index` (the grammar of `u32::from_str`) and values by
/// [`parse_f64`]; the same values and the same errors as the obvious `split`/`parse` version.
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
    let label = parse_f64(label_tok).ok_or_else(|| LineError::BadLabel(label_tok.to_string()))?;
    // Room for typical pairs at once (`12345:0.123456 ` is 15 bytes; the vectors grow if needed).
    let mut indices = Vec::with_capacity(line.len() / 8 + 1);
    let mut values = Vec::with_capacity(line.len() / 8 + 1);
    while let Some((tok, colon)) = next_token() {
        let colon = colon.ok_or_else(|| LineError::BadPair(tok.to_string()))?;
        let (i, v) = (&tok[..colon], &tok[colon + 1..]);
        let index = match parse_index(i) {
            Some(index) => index,
            None if i == "qid" => continue,
            None => return Err(LineError::BadIndex(i.to_string())),
        };
        let value = parse_f64(v).ok_or_else(|| LineError::BadValue(v.to_string()))?;
        indices.push(index);
        values.push(value);
    }
    Ok(Sample::new(indices, values, label, None)?)
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
fn parse_libsvm_plain_into(
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

/// `v <- v / 10^f` for every value (exact mantissas, so each is the correctly rounded decimal).
#[inline(always)]
fn divide_by_power_of_ten(values: &mut [f64], f: usize) {
    let power = EXACT_POWERS_OF_TEN[f];
    for v in values {
        *v /= power;
    }
}

/// How many times `needle` occurs in `haystack`. Counted per 255-byte chunk in a `u8` so the loop
/// vectorizes to byte compares and adds (a plain `filter().count()` widens every byte to 64 bits).
pub(crate) fn count_byte(haystack: &[u8], needle: u8) -> usize {
    haystack
        .chunks(255)
        .map(|chunk| {
            chunk
                .iter()
                .fold(0u8, |n, &c| n.wrapping_add(u8::from(c == needle))) as usize
        })
        .sum()
}

/// A bare-digit index at `b[at..]` (1 to 10 digits, below 2^32) and the offset just past it; `None` for
/// anything else, including what `u32::from_str` would still accept (`+7`, long runs of leading zeros).
/// Up to seven digits followed by at least one more byte (every index but a line's last, in practice)
/// are read in one go by [`leading_digits`], without a branch per digit to mispredict.
#[inline(always)]
fn plain_index(b: &[u8], at: usize) -> Option<(u32, usize)> {
    if let Some(word) = load_eight(b, at) {
        let n = leading_digits(word);
        if n == 0 {
            return None;
        }
        if n < 8 {
            // At most 7 digits: below 10^7 < 2^32.
            return Some((leading_digits_value(word, n) as u32, at + n));
        }
    }
    let mut acc: u64 = 0;
    let mut i = at;
    while let Some(&c) = b.get(i) {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        if i - at == 10 {
            return None;
        }
        acc = acc * 10 + u64::from(d);
        i += 1;
    }
    if i == at || acc > u64::from(u32::MAX) {
        return None;
    }
    Some((acc as u32, i))
}

/// Bytes per separator block of the SIMD readers (`structural`, `json_plain`): one 64-bit mask.
pub(crate) const SEPARATOR_BLOCK: usize = 64;

/// `rest` (a line's last bytes, fewer than a block) at the start of a block padded with zeros, which
/// no reader takes for a separator: the readers' last, partial block.
#[inline(always)]
pub(crate) fn zero_padded_block(rest: &[u8]) -> [u8; SEPARATOR_BLOCK] {
    let mut block = [0; SEPARATOR_BLOCK];
    let n = rest.len().min(SEPARATOR_BLOCK);
    block[..n].copy_from_slice(&rest[..n]);
    block
}

/// The eight bytes at `b[at..]` as a little-endian word (first byte lowest), if there are eight.
#[inline(always)]
pub(crate) fn load_eight(b: &[u8], at: usize) -> Option<u64> {
    let chunk: [u8; 8] = b.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_le_bytes(chunk))
}

/// How many of the bytes of a little-endian `word` are ASCII digits before the first that is not
/// (0 to 8). Each byte's top bit after `+ 0x46` says "above `'9'`" and after `- 0x30` "below `'0'`"
/// (or above 0xBA); carries and borrows only run upward, out of non-digits, so the lowest flagged
/// byte is exactly the first non-digit.
#[inline(always)]
pub(crate) fn leading_digits(word: u64) -> usize {
    let above = word.wrapping_add(0x4646_4646_4646_4646);
    let below = word.wrapping_sub(0x3030_3030_3030_3030);
    ((above | below) & 0x8080_8080_8080_8080).trailing_zeros() as usize / 8
}

/// The value of the first `n` (1 to 8) bytes of `word`, all ASCII digits: they are moved to the top of
/// the word and the bytes below filled with `'0'`, which reads as the same number in eight digits.
#[inline(always)]
pub(crate) fn leading_digits_value(word: u64, n: usize) -> u64 {
    let shift = 8 * (8 - n);
    let zeros_below = 0x3030_3030_3030_3030 & !(u64::MAX << shift);
    eight_digits((word << shift) | zeros_below)
}

/// `10^n` for the digit counts a run of up to 19 digits can have.
const POWERS_OF_TEN_U64: [u64; 20] = {
    let mut powers = [1u64; 20];
    let mut n = 1;
    while n < 20 {
        powers[n] = powers[n - 1] * 10;
        n += 1;
    }
    powers
};

/// Reads the decimal digits at `bytes[*at..]` onto `acc` (`acc = 10 acc + d` each), advancing `*at`;
/// returns how many were read, or `None` once `acc` would overflow `u64`. `held` is how many digits
/// `acc` already holds (so `acc < 10^held`): up to 19 digits cannot overflow, so those take the cheap
/// path, eight at a time where the bytes allow, and only later digits pay for checked arithmetic.
/// Shared by the LIBSVM and JSON fast paths, whose long fractions (`{:?}` of an `f64` writes 17
/// significant digits) made the serial one-digit loop their main cost.
#[inline(always)]
pub(crate) fn read_digits(
    bytes: &[u8],
    at: &mut usize,
    acc: &mut u64,
    held: usize,
) -> Option<usize> {
    // The usual run (a label, an integer part, six fraction digits) is shorter than eight digits and
    // followed by more bytes: read at once, without a branch per digit.
    if held + 8 <= 19 {
        if let Some(word) = load_eight(bytes, *at) {
            let n = leading_digits(word);
            if n < 8 {
                if n > 0 {
                    *acc = *acc * POWERS_OF_TEN_U64[n] + leading_digits_value(word, n);
                    *at += n;
                }
                return Some(n);
            }
        }
    }
    let start = *at;
    let mut i = *at;
    let mut value = *acc;
    let mut held = held;
    while held + 8 <= 19 {
        let Some(chunk) = bytes.get(i..i + 8) else {
            break;
        };
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
        if !is_eight_digits(word) {
            break;
        }
        value = value * 100_000_000 + eight_digits(word);
        i += 8;
        held += 8;
    }
    while let Some(&c) = bytes.get(i) {
        let d = u64::from(c.wrapping_sub(b'0'));
        if d > 9 {
            break;
        }
        value = if held < 19 {
            value * 10 + d
        } else {
            value.checked_mul(10)?.checked_add(d)?
        };
        i += 1;
        held += 1;
    }
    *at = i;
    *acc = value;
    Some(i - start)
}

/// Are all eight bytes of `word` ASCII digits? (Each byte plus 0x46 stays below 0x80 only if it is at
/// most `'9'`, and minus 0x30 does not borrow only if it is at least `'0'`.)
#[inline]
pub(crate) fn is_eight_digits(word: u64) -> bool {
    let above = word.wrapping_add(0x4646_4646_4646_4646);
    let below = word.wrapping_sub(0x3030_3030_3030_3030);
    (above | below) & 0x8080_8080_8080_8080 == 0
}

/// The value of eight ASCII digits loaded little-endian (first digit in the low byte), by pairing
/// neighbours into 2-digit, then 4-digit, then 8-digit numbers in three multiplies (the SWAR method of
/// fast_float / simdjson).
#[inline]
pub(crate) fn eight_digits(word: u64) -> u64 {
    const MASK: u64 = 0x0000_00FF_0000_00FF;
    const MUL1: u64 = 0x000F_4240_0000_0064; // 100 + (1_000_000 << 32)
    const MUL2: u64 = 0x0000_2710_0000_0001; // 1 + (10_000 << 32)
    let mut v = word - 0x3030_3030_3030_3030;
    v = v.wrapping_mul(10).wrapping_add(v >> 8);
    let v1 = (v & MASK).wrapping_mul(MUL1);
    let v2 = ((v >> 16) & MASK).wrapping_mul(MUL2);
    u64::from((v1.wrapping_add(v2) >> 32) as u32)
}

/// `2^53`: every integer up to it is exact in `f64`.
const MAX_EXACT_INTEGER: u64 = 1 << 53;

/// A plain decimal `[+-]digits[.digits]` at `b[at..]` ending at whitespace or the end of the line, and
/// the offset just past it, converted by Clinger's fast path: when the digits read as an integer `m`
/// are at most 2^53 and there are at most 22 fraction digits `f`, both `m` and `10^f` are exact in
/// `f64`, so the single correctly rounded division `m / 10^f` is the correctly rounded value, bit for
/// bit what `f64::from_str` gives. `None` for anything else (exponents, `inf`, `m > 2^53`, more than
/// 22 fraction digits, a token that goes on with other bytes).
#[inline(always)]
fn plain_decimal(b: &[u8], at: usize) -> Option<(f64, usize)> {
    let (signed_mantissa, fraction_digits, end) = plain_decimal_parts(b, at)?;
    Some((signed_mantissa / EXACT_POWERS_OF_TEN[fraction_digits], end))
}

/// [`plain_decimal`] before its division: `±m` (exact in `f64`), the fraction digit count `f` (at most
/// 22) and the end offset. Dividing the signed mantissa is the same as signing the quotient: IEEE
/// division rounds `-m / p` to exactly `-(m / p)`, and `-0.0 / p` is `-0.0`.
#[inline(always)]
fn plain_decimal_parts(b: &[u8], at: usize) -> Option<(f64, usize, usize)> {
    // The sign of feature values is a coin flip, so it is read without a branch to mispredict.
    let first = b.get(at).copied().unwrap_or(0);
    let negative = first == b'-';
    let mut i = at + usize::from(negative || first == b'+');
    // Leading zeros (`0.000123`) leave the mantissa small, so only its overflow ends the fast path.
    let mut mantissa: u64 = 0;
    // One integer digit before the point (`0.123456`, `-1.5`) is the usual shape: read it directly.
    let integer_digits = match (b.get(i), b.get(i + 1)) {
        (Some(&d @ b'0'..=b'9'), Some(&b'.')) => {
            mantissa = u64::from(d - b'0');
            i += 1;
            1
        }
        _ => read_digits(b, &mut i, &mut mantissa, 0)?,
    };
    let mut fraction_digits = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        fraction_digits = read_digits(b, &mut i, &mut mantissa, integer_digits)?;
    }
    if integer_digits + fraction_digits == 0
        || mantissa > MAX_EXACT_INTEGER
        || fraction_digits >= EXACT_POWERS_OF_TEN.len()
    {
        return None;
    }
    if b.get(i).is_some_and(|c| !c.is_ascii_whitespace()) {
        return None;
    }
    Some((with_sign(mantissa as f64, negative), fraction_digits, i))
}

/// `-magnitude` if `negative`, else `magnitude`, for a `magnitude >= +0.0` (not NaN), without a branch:
/// setting the sign bit is exactly IEEE negation there.
#[inline(always)]
pub(crate) fn with_sign(magnitude: f64, negative: bool) -> f64 {
    f64::from_bits(magnitude.to_bits() | (u64::from(negative) << 63))
}

/// `u32::from_str` without its generic overhead: an optional `+`, then 1+ decimal digits, below 2^32.
#[inline]
fn parse_index(s: &str) -> Option<u32> {
    let b = s.as_bytes();
    let digits = match b.first() {
        Some(b'+') => &b[1..],
        _ => b,
    };
    if digits.is_empty() {
        return None;
    }
    let mut acc: u64 = 0;
    for &c in digits {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        acc = acc * 10 + u64::from(d);
        if acc > u64::from(u32::MAX) {
            return None;
        }
    }
    Some(acc as u32)
}

/// Powers of ten exactly representable as `f64`.
const EXACT_POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// `f64::from_str`, with a fast path for plain decimals (`[+-]digits[.digits]`, at most 15 significant
/// digits written): the digits `m` and the power `10^f` are both exact in `f64`, so the single
/// correctly rounded division `m / 10^f` is the correctly rounded value, the same as `from_str` gives
/// (Clinger's fast path). Anything else (exponents, `inf`, long mantissas, junk) goes to `from_str`.
#[inline]
pub fn parse_f64(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let (negative, rest) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    let mut mantissa: u64 = 0;
    let mut digits = 0usize;
    let mut fraction_digits = 0usize;
    let mut seen_point = false;
    for &c in rest {
        match c {
            b'0'..=b'9' => {
                mantissa = mantissa * 10 + u64::from(c - b'0');
                digits += 1;
                if seen_point {
                    fraction_digits += 1;
                }
                if digits > 15 {
                    return s.parse().ok();
                }
            }
            b'.' if !seen_point => seen_point = true,
            _ => return s.parse().ok(),
        }
    }
    if digits == 0 {
        return s.parse().ok();
    }
    let magnitude = mantissa as f64 / EXACT_POWERS_OF_TEN[fraction_digits];
    Some(if negative { -magnitude } else { magnitude })
}

/// The JSON form of a sample (one line of a JSON-lines file).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonSample {
    pub label: Option<f64>,
    #[serde(default)]
    pub indices: Vec<u32>,
    #[serde(default)]
    pub values: Vec<f64>,
    pub weight: Option<f64>,
}

impl JsonSample {
    /// Validates into a [`Sample`]; a missing label is an error unless `label_optional` (prediction),
    /// where it becomes NaN-free 0.
    pub fn into_sample(self, label_optional: bool) -> Result<Sample, LineError> {
        let label = match self.label {
            Some(l) => l,
            None if label_optional => 0.0,
            None => return Err(LineError::MissingLabel),
        };
        Ok(Sample::new(self.indices, self.values, label, self.weight)?)
    }
}

/// Parses one JSON line: `{"label": 1.0, "indices": [3, 17], "values": [0.5, 1.0]}`.
pub fn parse_json_line(line: &str) -> Result<Sample, LineError> {
    let js: JsonSample = serde_json::from_str(line).map_err(|e| LineError::Json(e.to_string()))?;
    js.into_sample(false)
}

/// Parses one line in `format`.
pub fn parse_line(format: Format, line: &str) -> Result<Sample, LineError> {
    match format {
        Format::Libsvm => parse_libsvm_line(line),
        Format::Jsonl => parse_json_line(line),
    }
}

/// Guesses the format of a file from its extension: `.jsonl`, `.ndjson`, `.json` are JSON lines,
/// anything else is LIBSVM.
pub fn guess_format(path: &Path) -> Format {
    match path.extension().and_then(|e| e.to_str()) {
        Some("jsonl" | "ndjson" | "json") => Format::Jsonl,
        _ => Format::Libsvm,
    }
}

/// Reads every sample from `reader`; the first malformed line stops the read with its line number, as
/// does a label, value or weight larger in magnitude than [`DEFAULT_MAX_ABS_VALUE`] (the daemon's
/// `ingest.max_abs_value` default: `fit` and `predict` hold their input to the same bound).
pub fn read_samples<R: BufRead>(
    reader: R,
    format: Format,
    path: &Path,
) -> Result<Vec<Sample>, ReadError> {
    let mut samples = Vec::new();
    for (n, line) in reader.lines().enumerate() {
        let line = line.map_err(|source| ReadError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        if is_skippable(&line) {
            continue;
        }
        let sample = parse_line(format, &line)
            .and_then(|s| {
                let (label, limit) = (Some(s.label), DEFAULT_MAX_ABS_VALUE);
                batch::check_magnitudes(label, s.weight, &s.indices, &s.values, limit)?;
                Ok(s)
            })
            .map_err(|source| ReadError::Line {
                path: path.to_path_buf(),
                line: n + 1,
                source,
            })?;
        samples.push(sample);
    }
    Ok(samples)
}

/// Reads a whole file.
pub fn read_file(path: &Path, format: Format) -> Result<Vec<Sample>, ReadError> {
    let file = std::fs::File::open(path).map_err(|source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    read_samples(std::io::BufReader::new(file), format, path)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn content_lines_counts_what_the_parser_reads() {
        let body = "1 1:2\n\n  # comment\n-1 3:4\r\n\t\n0 2:1";
        assert_eq!(count_content_lines(body.as_bytes()), 3);
        assert_eq!(count_content_lines(b""), 0);
        assert_eq!(count_content_lines(b"\n\n"), 0);
        assert_eq!(count_content_lines(b"{\"label\":1}\n"), 1);
    }

    #[test]
    fn lines_are_str_lines() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(31);
        for _ in 0..5000 {
            let text: String = (0..rng.gen_range(0..40))
                .map(|_| ['a', '\r', '\n', 'é', ' '][rng.gen_range(0..5)])
                .collect();
            assert_eq!(
                lines(&text).collect::<Vec<_>>(),
                text.lines().collect::<Vec<_>>(),
                "{text:?}"
            );
        }
    }

    fn libsvm_err(line: &str) -> LineError {
        parse_libsvm_line(line).unwrap_err()
    }

    #[test]
    fn parses_libsvm_and_keeps_indices_as_given() {
        let s = parse_libsvm_line("-1 0:1.5 7:2e-1 # trailing").unwrap();
        assert_eq!(s.label, -1.0);
        assert_eq!(s.indices, vec![0, 7]);
        assert_eq!(s.values, vec![1.5, 0.2]);
        let s = parse_libsvm_line("+1 qid:3 1:1").unwrap();
        assert_eq!((s.label, s.indices), (1.0, vec![1]));
        assert!(parse_libsvm_line("2.5").unwrap().indices.is_empty());
    }

    #[test]
    fn every_malformed_libsvm_kind_is_named() {
        assert_eq!(libsvm_err(""), LineError::MissingLabel);
        assert_eq!(libsvm_err("1:2 3:4"), LineError::MissingLabel);
        assert_eq!(libsvm_err("abc 1:2"), LineError::BadLabel("abc".into()));
        assert_eq!(libsvm_err("1 12"), LineError::BadPair("12".into()));
        assert_eq!(libsvm_err("1 x:2"), LineError::BadIndex("x".into()));
        assert_eq!(libsvm_err("1 -3:2"), LineError::BadIndex("-3".into()));
        assert_eq!(libsvm_err("1 3:zz"), LineError::BadValue("zz".into()));
        assert_eq!(
            libsvm_err("1 3:1 2:1"),
            LineError::Sample(SampleError::UnsortedIndex { prev: 3, next: 2 })
        );
        assert_eq!(
            libsvm_err("1 3:1 3:1"),
            LineError::Sample(SampleError::DuplicateIndex(3))
        );
        assert!(matches!(
            libsvm_err("1 3:inf"),
            LineError::Sample(SampleError::NonFiniteValue { index: 3, .. })
        ));
        assert!(matches!(libsvm_err("1 3:NaN"), LineError::Sample(_)));
        assert!(matches!(
            libsvm_err("nan 3:1"),
            LineError::Sample(SampleError::NonFiniteLabel(_))
        ));
    }

    /// The hand-written number parsers give `from_str`'s result, bit for bit, on well-formed and
    /// malformed tokens alike (fast path and fallback).
    #[test]
    fn fast_number_parsers_agree_with_from_str() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let mut tokens: Vec<String> = [
            "0",
            "-0",
            "+0",
            "-0.000000",
            "1.",
            ".5",
            "+.5",
            "-.5",
            ".",
            "-",
            "+",
            "",
            "1.2.3",
            "1e5",
            "1E-3",
            "inf",
            "-inf",
            "NaN",
            "infinity",
            "0x10",
            "1_0",
            " 1",
            "1 ",
            "+-1",
            "--1",
            "123456789012345",
            "1234567890123456",
            "0.1234567890123456789",
            "9007199254740993",
            "4294967295",
            "4294967296",
            "+4294967295",
            "00000000001",
            "99999999999",
            "é",
            "1é",
            "1.7976931348623157e308",
            "2.2250738585072014e-308",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for _ in 0..20_000 {
            let digits = rng.gen_range(1..12);
            let int: u64 = rng.gen_range(0..10u64.pow(digits));
            let frac = rng.gen_range(0..10);
            let sign = ["", "-", "+"][rng.gen_range(0..3)];
            tokens.push(match rng.gen_range(0..3) {
                0 => format!("{sign}{int}"),
                1 => format!("{sign}{:.*}", frac, rng.gen::<f64>() * int as f64),
                _ => format!("{sign}{}", rng.gen_range(-1e3..1e3)),
            });
        }
        for t in &tokens {
            let want = t.parse::<f64>().ok().map(f64::to_bits);
            assert_eq!(parse_f64(t).map(f64::to_bits), want, "{t:?}");
            assert_eq!(parse_index(t), t.parse::<u32>().ok(), "{t:?}");
        }
        // Tabs and other ASCII whitespace separate tokens; `#` cuts the line even inside a token.
        let s = parse_libsvm_line("1\t2:0.5\x0c3:1#4:1 5:1").unwrap();
        assert_eq!((s.indices, s.values), (vec![2, 3], vec![0.5, 1.0]));
    }

    /// A random LIBSVM-ish line: mostly the plain shape the fast path takes, salted with everything
    /// it must hand to the general parser (exponents, long mantissas, subnormals, overflow, `inf`,
    /// `+`/`.5`/`5.` spellings, odd whitespace, CR, comments, `qid`, unsorted or huge indices, junk).
    pub(in crate::ingest) fn random_libsvm_line(rng: &mut impl rand::Rng) -> String {
        fn number(rng: &mut impl rand::Rng) -> String {
            let x: f64 = rng.gen_range(-1e3..1e3) * 10f64.powi(rng.gen_range(-8..8));
            match rng.gen_range(0..60) {
                0 => format!("{x:e}"),
                1 => format!("{x:?}"),
                2 => format!("{x:.25}"),
                3 => ["1e-320", "-4.9e-324", "1.7976931348623157e308", "1e400"]
                    [rng.gen_range(0..4)]
                .into(),
                4 => [
                    "inf", "-inf", "NaN", "infinity", "0x1", "1_0", "", "-", ".", "1.2.3", "é",
                ][rng.gen_range(0..11)]
                .into(),
                5 => format!("+{:.3}", x.abs()),
                6 => format!(".{}", rng.gen_range(0..100_000)),
                7 => format!("{}.", rng.gen::<i32>()),
                8 => format!("-.{}", rng.gen_range(0..1000)),
                9 => format!("{}", rng.gen::<i64>()),
                10 => format!("{}", rng.gen::<u64>()),
                11 => format!("{:.*}", rng.gen_range(15..23), x / 1e6),
                12 => format!("9007199254740{}", rng.gen_range(990..999)),
                13 => format!(
                    "0.{}{}",
                    "0".repeat(rng.gen_range(0..25)),
                    rng.gen_range(1..1000)
                ),
                _ => format!("{x:.*}", rng.gen_range(0..8)),
            }
        }
        fn separator(rng: &mut impl rand::Rng) -> &'static str {
            match rng.gen_range(0..30) {
                0 => "\t",
                1 => "  ",
                2 => "\x0c",
                3 => " \r ",
                _ => " ",
            }
        }
        let mut line = String::new();
        if rng.gen_range(0..20) == 0 {
            line.push(' ');
        }
        line.push_str(&match rng.gen_range(0..10) {
            0 => number(rng),
            1 => "+1".into(),
            2 => "-1".into(),
            3 => "1".into(),
            _ => format!("{}", rng.gen_range(-3..4)),
        });
        let mut index: u64 = rng.gen_range(0..5);
        for _ in 0..rng.gen_range(0..12) {
            line.push_str(separator(rng));
            index += rng.gen_range(1..1000);
            let shown = match rng.gen_range(0..60) {
                0 => "qid".to_string(),
                1 => format!("+{index}"),
                2 => format!("0{index}"),
                3 => format!("{}", index.saturating_sub(2000)),
                4 => format!("{}", index + (1u64 << 32)),
                5 => "-3".into(),
                6 => String::new(),
                _ => index.to_string(),
            };
            match rng.gen_range(0..80) {
                0 => line.push_str(&shown),
                1 => line.push_str(&format!("{shown}:{}:1", number(rng))),
                _ => line.push_str(&format!("{shown}:{}", number(rng))),
            }
        }
        match rng.gen_range(0..25) {
            0 => line.push_str(" # comment 7:1"),
            1 => line.push_str("#x"),
            2 => line.push('\r'),
            3 => line.push_str(" \t"),
            _ => {}
        }
        line
    }

    /// The fast path (the structural reader) alone, appending after a sentinel pair: what it appends, and proof that it never
    /// touches what the columns held before, nor leaves anything behind when it gives up.
    fn plain_sample(line: &str) -> Option<Sample> {
        let (mut indices, mut values) = (vec![u32::MAX], vec![-7.5]);
        let label = parse_libsvm_plain_into(line.as_bytes(), &mut indices, &mut values);
        assert_eq!((indices[0], values[0]), (u32::MAX, -7.5), "{line:?}");
        match label {
            None => {
                assert_eq!((indices.len(), values.len()), (1, 1), "{line:?}");
                None
            }
            Some(label) => Some(Sample {
                indices: indices[1..].to_vec(),
                values: values[1..].to_vec(),
                label,
                weight: None,
            }),
        }
    }

    /// Bits, not `==`: `-0.0`, NaN inside errors and the last ulp all count.
    pub(in crate::ingest) fn libsvm_outcome(parsed: Result<Sample, LineError>) -> String {
        match parsed {
            Ok(s) => format!(
                "ok {:x} {:?} {:x?} {:?}",
                s.label.to_bits(),
                s.indices,
                s.values.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                s.weight.map(f64::to_bits)
            ),
            Err(e) => format!("err {e:?} / {e}"),
        }
    }

    /// Appending: fast-path and general-path lines land after what the columns held, in order, and a
    /// bad line leaves them as they were (even when it fails half way through its pairs).
    #[test]
    fn libsvm_append_extends_the_columns_or_leaves_them_alone() {
        let (mut indices, mut values) = (Vec::new(), Vec::new());
        assert_eq!(
            parse_libsvm_append("1 2:0.5 9:-1", &mut indices, &mut values),
            Ok(1.0)
        );
        assert_eq!(
            parse_libsvm_append("-1 qid:4 3:2e-1 # general path", &mut indices, &mut values),
            Ok(-1.0)
        );
        for bad in ["1 4:0.5 2:1", "1 4:0.5 5:x", "x 1:1", "1 4:0.5 5"] {
            assert!(
                parse_libsvm_append(bad, &mut indices, &mut values).is_err(),
                "{bad}"
            );
        }
        assert_eq!(indices, [2, 9, 3]);
        assert_eq!(values, [0.5, -1.0, 0.2]);
    }

    /// A line of the shape the structural reader takes, salted with the near misses where such
    /// readers break: trailing and double spaces, tabs, 8- to 11-digit indices (past `u32` too),
    /// long and empty fraction runs, integer values, long integer parts, `-0`, leading zeros, `+`,
    /// exponents, a value with a second colon. Lengths from a few bytes to over a kilobyte put
    /// separators and line ends at every offset of a 64-byte block.
    pub(in crate::ingest) fn near_plain_line(rng: &mut impl rand::Rng) -> String {
        fn value(rng: &mut impl rand::Rng) -> String {
            let x: f64 = rng.gen_range(-1.0..1.0);
            match rng.gen_range(0..400) {
                0 => format!("{}", rng.gen_range(-99_999_999i64..99_999_999)),
                1 => format!("{:.*}", rng.gen_range(9..26), x),
                2 => format!(
                    "{:.*}",
                    rng.gen_range(0..9),
                    x * 10f64.powi(rng.gen_range(0..12))
                ),
                3 => ["-0", "-0.0", "0.000000", "00.5", "5.", ".5", "-.5", "-", ""]
                    [rng.gen_range(0..9)]
                .into(),
                4 => ["1e5", "+0.5", "inf", "0.5:1", "1.2.3", "-0.5e1"][rng.gen_range(0..6)].into(),
                5..=30 => format!("{}", rng.gen_range(0..10)),
                31..=60 => format!("{:.6}", x * 1e3),
                _ => format!("{x:.6}"),
            }
        }
        let mut line = match rng.gen_range(0..8) {
            0 => format!("{:.*}", rng.gen_range(0..20), rng.gen_range(-1e6..1e6)),
            1 => "-1".into(),
            2 => "0".into(),
            _ => "1".into(),
        };
        let mut index: u64 = rng.gen_range(0..3);
        for _ in 0..rng.gen_range(0..70) {
            line.push_str(match rng.gen_range(0..1000) {
                0 => "  ",
                1 => "\t",
                2 => " \t",
                _ => " ",
            });
            index += match rng.gen_range(0..1000) {
                0 => rng.gen_range(1..5_000_000_000),
                1..=30 => rng.gen_range(1..100_000_000),
                _ => rng.gen_range(1..2_000_000),
            };
            match rng.gen_range(0..1000) {
                0 => line.push_str(&format!("0{index}:{}", value(rng))),
                1 => line.push_str(&format!("+{index}:{}", value(rng))),
                2 => line.push_str(&format!("{index}")),
                3 => line.push_str(&format!("{}:{}", index.saturating_sub(3), value(rng))),
                _ => line.push_str(&format!("{index}:{}", value(rng))),
            }
        }
        line.push_str(match rng.gen_range(0..12) {
            0..=2 => " ",
            3 => "  ",
            4 => "\t",
            5 => " #",
            _ => "",
        });
        line
    }

    /// A line built at the edges of the LIBSVM grammar: index widths from 1 to 11 digits around
    /// 2^32 (leading zeros, `+`, `-`, empty), values with every sign spelling (`-`, `+`, none, doubled),
    /// 0 to 20 integer digits, 0 to 25 fraction digits with or without the point, exponents (`e`,
    /// `E`, signed, empty, out of range), a junk byte anywhere (control, non-ASCII, `\x0b`, which is
    /// not ASCII whitespace here), any separator, and line ends with `\r`, trailing whitespace or a
    /// comment; 0 to 90 pairs, so lines cross the structural reader's 64-byte blocks and 256-byte
    /// windows.
    pub(in crate::ingest) fn edge_line(rng: &mut impl rand::Rng) -> String {
        fn digits(rng: &mut impl rand::Rng, widths: std::ops::Range<usize>) -> String {
            (0..rng.gen_range(widths))
                .map(|_| char::from(b'0' + rng.gen_range(0..10)))
                .collect()
        }
        fn value(rng: &mut impl rand::Rng) -> String {
            let sign = ["", "", "", "-", "-", "+", "--", "+-"][rng.gen_range(0..8)];
            let int = match rng.gen_range(0..6) {
                0 => String::new(),
                1 => digits(rng, 8..21),
                _ => digits(rng, 1..4),
            };
            let fraction = match rng.gen_range(0..8) {
                0 => String::new(),
                1 => ".".into(),
                2 => format!(".{}", digits(rng, 9..26)),
                _ => format!(".{}", digits(rng, 1..9)),
            };
            let exponent = match rng.gen_range(0..12) {
                0 => format!("e{}", rng.gen_range(-30..30)),
                1 => format!("E+{}", rng.gen_range(0..400)),
                2 => ["e", "e-", "E400", "e-400"][rng.gen_range(0..4)].into(),
                _ => String::new(),
            };
            format!("{sign}{int}{fraction}{exponent}")
        }
        fn index(rng: &mut impl rand::Rng, at: &mut u64) -> String {
            *at += rng.gen_range(1..100_000);
            match rng.gen_range(0..40) {
                0 => digits(rng, 1..12),
                1 => ["4294967295", "4294967296", "04294967295", "0", "00", ""]
                    [rng.gen_range(0..6)]
                .into(),
                2 => format!("+{at}"),
                3 => format!("-{at}"),
                4 => format!("0{at}"),
                5 => at.saturating_sub(200_000).to_string(),
                _ => at.to_string(),
            }
        }
        fn separator(rng: &mut impl rand::Rng) -> &'static str {
            match rng.gen_range(0..40) {
                0 => "\t",
                1 => "  ",
                2 => "\x0c",
                3 => " \r ",
                _ => " ",
            }
        }
        let mut line = match rng.gen_range(0..10) {
            0 => value(rng),
            1 => String::new(),
            2 => "+1".into(),
            _ => ["1", "-1", "0", "2.5"][rng.gen_range(0..4)].into(),
        };
        let mut at = rng.gen_range(0..5);
        let pairs = [0, 1, 2, 5, 20, 40, 90][rng.gen_range(0..7)];
        for _ in 0..rng.gen_range(0..=pairs) {
            line.push_str(separator(rng));
            let index = index(rng, &mut at);
            let value = if rng.gen_range(0..3) == 0 {
                value(rng)
            } else {
                format!("{:.6}", rng.gen_range(-3.0..3.0))
            };
            match rng.gen_range(0..60) {
                0 => line.push_str(&index),
                1 => line.push_str(&format!("{index}:{value}:1")),
                2 => line.push_str(&format!("{index}:")),
                _ => line.push_str(&format!("{index}:{value}")),
            }
        }
        if rng.gen_range(0..8) == 0 && !line.is_empty() {
            // One junk byte (or character) anywhere.
            let junk =
                ["\0", "\x0b", "\x7f", "é", "x", "#", ":", ".", "-", "\r"][rng.gen_range(0..10)];
            let mut at = rng.gen_range(0..=line.len());
            while !line.is_char_boundary(at) {
                at -= 1;
            }
            line.insert_str(at, junk);
        }
        line.push_str(match rng.gen_range(0..16) {
            0 => "\r",
            1 => " ",
            2 => " \t",
            3 => " # comment 7:1",
            4 => "#",
            _ => "",
        });
        line
    }

    /// A random line for the LIBSVM property tests: one of the three generators above.
    pub(in crate::ingest) fn random_line(rng: &mut impl rand::Rng) -> String {
        match rng.gen_range(0..3) {
            0 => random_libsvm_line(rng),
            1 => near_plain_line(rng),
            _ => edge_line(rng),
        }
    }

    /// LIBSVM's two paths agree (property test, seeded): on every random line, valid or not,
    /// `parse_libsvm_line` (fast path, then general) gives exactly what the general parser alone gives
    /// (the same bits, or the same error kind and text), and wherever the fast path takes a line on
    /// its own it appends that same sample. The fast path does take most plain lines.
    #[test]
    fn libsvm_paths_agree_on_random_lines() {
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let (lines, mut fast, mut ok) = (60_000, 0, 0);
        for _ in 0..lines {
            let line = random_line(&mut rng);
            let general = libsvm_outcome(parse_libsvm_general(&line));
            assert_eq!(
                libsvm_outcome(parse_libsvm_line(&line)),
                general,
                "{line:?}"
            );
            if let Some(s) = plain_sample(&line) {
                assert_eq!(libsvm_outcome(Ok(s)), general, "{line:?}");
                fast += 1;
            }
            ok += usize::from(general.starts_with("ok"));
        }
        assert!(
            fast > lines / 5,
            "fast path took only {fast} of {lines} lines"
        );
        assert!(
            ok > lines / 3 && ok < lines * 9 / 10,
            "{ok} of {lines} lines were valid: the generator should make both kinds"
        );
        // Exactly the shapes the daemon sees most go the fast way, and edge values stay exact.
        for line in [
            "1 3:0.5 17:-1.25 1048575:123456.789012",
            "-1 0:1 1:2. 2:.5 3:-.5 4:+0.25",
            "+1 7:0.1 8:9007199254740992 9:0.000000000000000001",
            "0.3 5:-0.000000",
            "2 4294967295:1",
            "1 1:0.5 2:0.25 3:1 4:-0.125 5:0.3",
            "1 1:-0 2:-0.0 3:0.1 4:-0.7",
        ] {
            let s = plain_sample(line).expect(line);
            assert_eq!(
                libsvm_outcome(Ok(s)),
                libsvm_outcome(parse_libsvm_general(line))
            );
        }
        // And these are the general parser's alone.
        for line in [
            "1 3:1e-3",
            "1 9007199254740993:1",
            "1 3:9007199254740993",
            "1 3:0.00000000000000000000001",
            "1 +3:1",
            "1 qid:2 3:1",
            "1 3:1 # c",
            "1 3:1 3:2",
            "0.3\t5:-0.000000",
            "1  3:1",
        ] {
            assert!(plain_sample(line).is_none(), "{line}");
        }
    }

    #[test]
    fn parses_json_lines_and_rejects_bad_ones() {
        let s =
            parse_json_line(r#"{"label": 1.0, "indices": [3, 17], "values": [0.5, 1.0]}"#).unwrap();
        assert_eq!(s.indices, vec![3, 17]);
        assert!(matches!(
            parse_json_line(r#"{"indices": [1], "values": [1]}"#),
            Err(LineError::MissingLabel)
        ));
        assert!(matches!(
            parse_json_line("{not json"),
            Err(LineError::Json(_))
        ));
        assert!(matches!(
            parse_json_line(r#"{"label": 1, "indices": [1, 2], "values": [1]}"#),
            Err(LineError::Sample(_))
        ));
        assert!(matches!(
            parse_json_line(r#"{"label": 1, "indices": [-1], "values": [1]}"#),
            Err(LineError::Json(_))
        ));
        assert!(matches!(
            parse_json_line(r#"{"label": 1, "extra": 2}"#),
            Err(LineError::Json(_))
        ));
    }

    #[test]
    fn file_reader_names_file_and_line_and_skips_comments() {
        let text = "# header\n1 1:1\n\n-1 2:1\n1 2:1 1:1\n";
        let err = read_samples(text.as_bytes(), Format::Libsvm, Path::new("d.svm")).unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("d.svm:5: "), "{msg}");
        assert!(msg.contains("strictly increasing"), "{msg}");
        let ok = read_samples(
            "# c\n1 1:1\n\n-1 2:1\n".as_bytes(),
            Format::Libsvm,
            Path::new("x"),
        )
        .unwrap();
        assert_eq!(ok.len(), 2);
    }
}

/// Entry points for the `cargo fuzz` targets in `fuzz/`: the private fast readers, so a target can
/// hold them to the general readers they stand in for. Not an API.
#[doc(hidden)]
pub mod fuzzing {
    use super::batch::{BatchError, BodyFormat, FeatureDictionary, Rules};
    use crate::sample::SampleBlock;

    /// The LIBSVM fast path alone: `Some((label, indices, values))` where it accepts the line, `None`
    /// where it leaves the line to [`super::parse_libsvm_general`].
    pub fn libsvm_fast(line: &str) -> Option<(f64, Vec<u32>, Vec<f64>)> {
        let (mut indices, mut values) = (Vec::new(), Vec::new());
        let label = super::parse_libsvm_plain_into(line.as_bytes(), &mut indices, &mut values)?;
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
        let mut block = SampleBlock::new();
        super::batch::parse_body_with(format, segments, rules, dict, false, &mut block)?;
        Ok(block)
    }
}
