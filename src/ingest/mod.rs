//! Readers that turn text into validated [`Sample`]s: LIBSVM/SVMlight lines and JSON lines.
//!
//! Both readers work line by line so the daemon can parse a request body and the offline tools a whole
//! file with the same code. A malformed line is an error naming the line number and what is wrong; no
//! line is ever skipped silently (only blank lines and `#` comments are). Feature indices are kept
//! exactly as written.

pub mod batch;

use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;

use crate::sample::{Sample, SampleError};

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
    #[error(transparent)]
    Sample(#[from] SampleError),
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

/// Parses one LIBSVM line (not blank, not a comment). A trailing `# comment` is allowed.
/// `qid:N` tokens (SVMlight ranking groups) are accepted and ignored.
///
/// This is the daemon's ingest hot path, so it is one hand-written pass over the bytes: tokens split on
/// ASCII whitespace up to the first `#`, indices parsed by `parse_index` (the grammar of
/// `u32::from_str`) and values by [`parse_f64`] (plain decimals exactly, everything else through
/// `f64::from_str`); the same values and the same errors as the obvious `split`/`parse` version.
pub fn parse_libsvm_line(line: &str) -> Result<Sample, LineError> {
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

/// Reads every sample from `reader`; the first malformed line stops the read with its line number.
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
        let sample = parse_line(format, &line).map_err(|source| ReadError::Line {
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
mod tests {
    use super::*;

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
