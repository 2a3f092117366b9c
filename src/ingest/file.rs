//! Whole files for `thresher fit` and `predict`: read at once, cut at line boundaries into one piece
//! per core, each piece parsed on its own thread straight into compressed-row columns, and the columns
//! joined into one [`Dataset`].
//!
//! Why not [`super::read_samples`]: a line at a time into a `String`, then a [`crate::sample::Sample`]
//! with two vectors of its own, then a copy into the data set is three allocations per row and one
//! core. On a million 40-feature rows that cost more than one pass of the solver. The rules are the
//! same (the same line parsers, the same [`DEFAULT_MAX_ABS_VALUE`] bound, the first bad line stops
//! the read naming its 1-based line), and so is the result, row for row and bit for bit (tested).

use std::path::Path;

use super::batch::check_magnitudes;
use super::{
    is_skippable, lines, parse_json_line, parse_libsvm_append, Format, LineError, ReadError,
    DEFAULT_MAX_ABS_VALUE,
};
use crate::sample::Dataset;

/// Pieces smaller than this are not worth a thread.
const MIN_PIECE_BYTES: usize = 1 << 20;
/// At most this many parsing threads.
const MAX_PIECES: usize = 8;

/// One piece's rows in compressed-row form, as [`Dataset::from_parts`] takes them.
#[derive(Debug, Default)]
struct Columns {
    labels: Vec<f64>,
    weights: Vec<f64>,
    /// Row ends into `indices`/`values` (the starts are the previous row's end, or 0).
    ends: Vec<usize>,
    indices: Vec<u32>,
    values: Vec<f64>,
    /// Lines in the piece (content or not), so a later piece can number its lines.
    lines: usize,
    /// The first bad line: its 1-based number within the piece, and why.
    error: Option<(usize, LineError)>,
}

/// Reads the whole file at `path` into a data set (see the module docs).
pub fn read_dataset(path: &Path, format: Format) -> Result<Dataset, ReadError> {
    let bytes = std::fs::read(path).map_err(|source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_PIECES)
        .min(bytes.len() / MIN_PIECE_BYTES)
        .max(1);
    let pieces = cut_at_lines(&bytes, threads);
    let mut parsed: Vec<Columns> = std::thread::scope(|scope| {
        let handles: Vec<_> = pieces[1..]
            .iter()
            .map(|piece| scope.spawn(move || parse_piece(piece, format)))
            .collect();
        let mut parsed = vec![parse_piece(pieces[0], format)];
        // A parser thread only runs the line parsers, which do not panic; if one did, the read fails
        // as if that piece could not be read rather than taking the process down.
        parsed.extend(handles.into_iter().map(|h| {
            h.join().unwrap_or_else(|_| Columns {
                error: Some((1, LineError::Json("the parser failed".into()))),
                ..Columns::default()
            })
        }));
        parsed
    });
    let mut lines_before = 0;
    for columns in &mut parsed {
        if let Some((line, source)) = columns.error.take() {
            return Err(ReadError::Line {
                path: path.to_path_buf(),
                line: lines_before + line,
                source,
            });
        }
        lines_before += columns.lines;
    }
    drop(bytes);
    Ok(join(parsed))
}

/// `bytes` cut into at most `pieces` runs of whole lines (each but the last ending with `\n`).
fn cut_at_lines(bytes: &[u8], pieces: usize) -> Vec<&[u8]> {
    let mut out = Vec::with_capacity(pieces);
    let mut start = 0;
    for p in 1..pieces {
        let target = (bytes.len() * p / pieces).max(start);
        let end = match memchr::memchr(b'\n', &bytes[target..]) {
            Some(at) => target + at + 1,
            None => break,
        };
        out.push(&bytes[start..end]);
        start = end;
    }
    out.push(&bytes[start..]);
    out
}

/// Parses one piece; stops at its first bad line.
fn parse_piece(piece: &[u8], format: Format) -> Columns {
    match std::str::from_utf8(piece) {
        Ok(text) => parse_text(text, format),
        Err(e) => {
            // Parse the valid prefix's whole lines (an earlier bad line must win), then name the line
            // that holds the first invalid byte.
            let valid = &piece[..e.valid_up_to()];
            let whole = valid
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |at| at + 1);
            let prefix = std::str::from_utf8(&valid[..whole]).unwrap_or_default();
            let mut c = parse_text(prefix, format);
            if c.error.is_none() {
                c.error = Some((
                    c.lines + 1,
                    LineError::NotUtf8 {
                        byte: e.valid_up_to() - whole + 1,
                    },
                ));
            }
            c
        }
    }
}

fn parse_text(text: &str, format: Format) -> Columns {
    let mut c = Columns::default();
    let pairs = memchr::memchr_iter(b':', text.as_bytes()).count();
    c.indices.reserve(pairs);
    c.values.reserve(pairs);
    for line in lines(text) {
        c.lines += 1;
        if is_skippable(line) {
            continue;
        }
        let start = c.indices.len();
        let row = match format {
            Format::Libsvm => {
                parse_libsvm_append(line, &mut c.indices, &mut c.values).map(|label| (label, None))
            }
            Format::Jsonl => parse_json_line(line).map(|s| {
                c.indices.extend_from_slice(&s.indices);
                c.values.extend_from_slice(&s.values);
                (s.label, s.weight)
            }),
        };
        let checked = row.and_then(|(label, weight)| {
            check_magnitudes(
                Some(label),
                weight,
                &c.indices[start..],
                &c.values[start..],
                DEFAULT_MAX_ABS_VALUE,
            )?;
            Ok((label, weight))
        });
        match checked {
            Ok((label, weight)) => {
                c.labels.push(label);
                c.weights.push(weight.unwrap_or(1.0));
                c.ends.push(c.indices.len());
            }
            Err(e) => {
                c.indices.truncate(start);
                c.values.truncate(start);
                c.error = Some((c.lines, e));
                break;
            }
        }
    }
    c
}

/// The pieces' columns end to end: one data set, rows in file order.
fn join(parsed: Vec<Columns>) -> Dataset {
    if parsed.len() == 1 {
        let c = parsed.into_iter().next().expect("one piece");
        let indptr = std::iter::once(0).chain(c.ends).collect();
        return Dataset::from_parts(indptr, c.indices, c.values, c.labels, c.weights, 0);
    }
    let rows: usize = parsed.iter().map(|c| c.labels.len()).sum();
    let nnz: usize = parsed.iter().map(|c| c.indices.len()).sum();
    let mut indptr = Vec::with_capacity(rows + 1);
    indptr.push(0);
    let (mut indices, mut values) = (Vec::with_capacity(nnz), Vec::with_capacity(nnz));
    let (mut labels, mut weights) = (Vec::with_capacity(rows), Vec::with_capacity(rows));
    for c in parsed {
        let base = indices.len();
        indptr.extend(c.ends.iter().map(|&end| base + end));
        indices.extend_from_slice(&c.indices);
        values.extend_from_slice(&c.values);
        labels.extend_from_slice(&c.labels);
        weights.extend_from_slice(&c.weights);
    }
    Dataset::from_parts(indptr, indices, values, labels, weights, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::read_file;
    use crate::sample::SampleSet;

    fn same(a: &Dataset, b: &Dataset) {
        assert_eq!(a.len(), b.len());
        assert_eq!(a.dim(), b.dim());
        for i in 0..a.len() {
            let (x, y) = (a.row(i), b.row(i));
            assert_eq!(x.indices, y.indices, "row {i}");
            assert_eq!(
                x.values.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                y.values.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "row {i}"
            );
            assert_eq!(x.label.to_bits(), y.label.to_bits(), "row {i}");
            assert_eq!(x.weight.to_bits(), y.weight.to_bits(), "row {i}");
        }
    }

    fn write(name: &str, text: &[u8]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("thresher-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Several pieces (a file over 2 MiB), comments, blank lines, CRLF, the general path: the same
    /// rows, bit for bit, as the line reader.
    #[test]
    fn pieces_join_to_what_the_line_reader_reads() {
        let mut text = String::new();
        let mut at = 0u64;
        while text.len() < 3 * MIN_PIECE_BYTES {
            at += 1;
            let label = if at.is_multiple_of(3) { "-1" } else { "1" };
            match at % 7 {
                0 => text.push_str("# a comment: 1:2\n\n"),
                1 => text.push_str(&format!("{label}  5:1e-3 {}:0.25\r\n", 6 + at % 50)),
                _ => text.push_str(&format!("{label} 1:{at} {}:0.{}\n", 2 + at % 100, at % 9)),
            }
        }
        let path = write("pieces.svm", text.as_bytes());
        let fast = read_dataset(&path, Format::Libsvm).unwrap();
        let slow = Dataset::from_samples(&read_file(&path, Format::Libsvm).unwrap(), 0);
        same(&fast, &slow);
        assert!(cut_at_lines(text.as_bytes(), 3).len() == 3);

        let json = "{\"label\": 1, \"indices\": [2], \"values\": [0.5], \"weight\": 2}\n\n{\"label\": -1}\n";
        let path = write("rows.jsonl", json.as_bytes());
        let fast = read_dataset(&path, Format::Jsonl).unwrap();
        same(
            &fast,
            &Dataset::from_samples(&read_file(&path, Format::Jsonl).unwrap(), 0),
        );
    }

    /// The first bad line of the file is named, whichever piece holds it, and a byte that is not
    /// UTF-8 names its line.
    #[test]
    fn the_first_bad_line_is_named_across_pieces() {
        let good = "1 1:1 2:2\n".repeat(MIN_PIECE_BYTES / 5);
        let lines = good.lines().count();
        for (bad, what) in [
            (&b"1 3:x\n"[..], "bad feature value"),
            (&b"1 1:1e300\n"[..], "ingest.max_abs_value"),
            (&b"1 1:\xff\n"[..], "not UTF-8"),
        ] {
            let mut text = good.clone().into_bytes();
            text.extend_from_slice(bad);
            text.extend_from_slice(good.as_bytes());
            text.extend_from_slice(b"1 x:1\n");
            let path = write("bad.svm", &text);
            let err = read_dataset(&path, Format::Libsvm).unwrap_err().to_string();
            assert!(err.contains(&format!(":{}: ", lines + 1)), "{err}");
            assert!(err.contains(what), "{err}");
        }
    }
}
