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
pub fn parse_libsvm_line(line: &str) -> Result<Sample, LineError> {
    let content = line.split('#').next().unwrap_or("");
    let mut tokens = content.split_ascii_whitespace();
    let label_tok = tokens.next().ok_or(LineError::MissingLabel)?;
    if label_tok.contains(':') {
        return Err(LineError::MissingLabel);
    }
    let label: f64 = label_tok
        .parse()
        .map_err(|_| LineError::BadLabel(label_tok.to_string()))?;
    let mut indices = Vec::new();
    let mut values = Vec::new();
    for tok in tokens {
        let (i, v) = tok
            .split_once(':')
            .ok_or_else(|| LineError::BadPair(tok.to_string()))?;
        if i == "qid" {
            continue;
        }
        let index: u32 = i.parse().map_err(|_| LineError::BadIndex(i.to_string()))?;
        let value: f64 = v.parse().map_err(|_| LineError::BadValue(v.to_string()))?;
        indices.push(index);
        values.push(value);
    }
    Ok(Sample::new(indices, values, label, None)?)
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
