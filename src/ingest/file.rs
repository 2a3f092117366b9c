//! Whole files for `thresher fit` and `predict`, in either [`Format`] (the format from the extension:
//! [`guess_format`]). [`read_file`] reads a file line by line into samples; [`read_dataset`] cuts it
//! at line boundaries into one piece per core, each piece parsed on its own thread straight into its
//! own stretch of the data set's compressed-row columns, which are then the [`Dataset`]'s own.
//!
//! Why [`read_dataset`] and not [`read_samples`]: a line at a time into a `String`, then a
//! [`Sample`] with two vectors of its own, then a copy into the data set is three allocations per row
//! and one core. On a million 40-feature rows that cost more than one pass of the solver. The rules are the
//! same (the same line parsers, the same [`DEFAULT_MAX_ABS_VALUE`] bound, the first bad line stops
//! the read naming its 1-based line), and so is the result, row for row and bit for bit (tested).
//!
//! Why each thread reads its own piece, and why the pairs go straight to their place: a one-pass `fit`
//! is over in a few seconds, and reading a 660 MB file into one buffer on one thread, then copying
//! every piece's columns (480 MB for a million 40-feature rows) into the joined data set, took a third
//! of the time before the first solver step. A piece's pairs are fewer than its separators (a LIBSVM
//! pair holds a `:`; a JSON line's index array holds at most one more entry than the line has commas),
//! so that count, taken once the piece is read, reserves its stretch of the joined columns in advance;
//! the stretches are closed up afterwards only if a piece used less than it reserved (comments, JSON).
//!
//! Why the file is mapped (`memmap2`), not read: reading copies every byte from the page cache into
//! fresh heap pages that the kernel must first zero: 660 MB of the W3-like stream's text, and its
//! loading took 1.2-2.3 s against 0.7-1.0 s mapped (`docs/benchmarks/fit_speed.md`). The mapped
//! bytes are the page cache's own. The caveat every mapping reader shares (ripgrep's `--mmap`): a
//! file truncated by another process while it is parsed ends the process with `SIGBUS`. A file the
//! system cannot map is read in pieces, one thread each (`read_pieces`), and a pipe in one piece.
//!
//! The joined columns are advised onto huge pages (`sparse::advise`): an epoch reads the rows in a
//! shuffled order, and with 4 KiB pages nearly every row was a TLB miss as well as a cache miss.

use std::fs::File;
use std::io::{BufRead, Read, Seek, SeekFrom};
use std::path::Path;

use serde::Deserialize;

use super::batch::{check_magnitudes, DEFAULT_MAX_ABS_VALUE};
use super::json::parse_json_line;
use super::libsvm::{parse_libsvm_append, parse_libsvm_line};
use super::lines::{is_skippable, lines};
use super::{LineError, ReadError};
use crate::sample::{Dataset, Sample};

/// Pieces smaller than this are not worth a thread.
const MIN_PIECE_BYTES: usize = 1 << 20;
/// At most this many parsing threads.
const MAX_PIECES: usize = 8;
/// Bytes read at a time while looking for the end of the line a cut falls in.
const CUT_PROBE_BYTES: usize = 64 << 10;

/// One piece's rows apart from their pairs (which go to its stretch of the joined columns).
#[derive(Debug, Default)]
struct Columns {
    labels: Vec<f64>,
    weights: Vec<f64>,
    /// Row ends into the piece's pairs (the starts are the previous row's end, or 0).
    ends: Vec<usize>,
    /// Pairs written to the piece's stretch.
    pairs: usize,
    /// Lines in the piece (content or not), so a later piece can number its lines.
    lines: usize,
    /// One past the largest index of the piece's rows (0 for none), and its values that are not zero:
    /// the data set's dimension and count, taken while each line is in cache ([`Dataset::from_parts`]).
    dim: usize,
    nonzero: usize,
    /// The first bad line: its 1-based number within the piece, and why.
    error: Option<(usize, LineError)>,
}

/// A piece's stretch of the joined columns, filled from the front.
struct Stretch<'a> {
    indices: &'a mut [u32],
    values: &'a mut [f64],
}

/// Reads the whole file at `path` into a data set (see the module docs).
pub fn read_dataset(path: &Path, format: Format) -> Result<Dataset, ReadError> {
    let io = |source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        // A pipe, a terminal or a socket (`/dev/stdin`, `<(...)`) cannot be cut by seeking: read once
        // into one piece.
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io)?;
        return parse_pieces(path, format, vec![with_bound(bytes, format)]);
    }
    let len = meta.len();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_PIECES)
        .min(usize::try_from(len).unwrap_or(usize::MAX) / MIN_PIECE_BYTES)
        .max(1);
    if len > 0 {
        // SAFETY: the map is only read, and dropped before this function returns; what the OS does if
        // another process truncates the file meanwhile (`SIGBUS`) is the module docs' caveat.
        if let Ok(map) = unsafe { memmap2::Mmap::map(&file) } {
            return parse_mapped(path, format, &map, threads);
        }
    }
    // A file the system cannot map (some special and network file systems): read in pieces.
    let starts = cut_points(&mut file, len, threads).map_err(io)?;
    read_pieces(path, format, &starts)
}

/// [`read_dataset`] of a mapped file: cut at line boundaries in memory ([`cut_in_memory`]), each
/// piece's pairs bounded and then parsed on its own thread.
fn parse_mapped(
    path: &Path,
    format: Format,
    bytes: &[u8],
    pieces: usize,
) -> Result<Dataset, ReadError> {
    let starts = cut_in_memory(bytes, pieces);
    let slices: Vec<&[u8]> = (0..starts.len())
        .map(|p| &bytes[starts[p]..starts.get(p + 1).copied().unwrap_or(bytes.len())])
        .collect();
    let bounds: Vec<usize> = std::thread::scope(|scope| {
        let handles: Vec<_> = slices[1..]
            .iter()
            .map(|&piece| scope.spawn(move || pair_bound(piece, format)))
            .collect();
        let mut bounds = vec![pair_bound(slices[0], format)];
        // Counting separators does not panic; a count that did would only lose the bound's room.
        bounds.extend(handles.into_iter().map(|h| h.join().unwrap_or(0)));
        bounds
    });
    parse_pieces(path, format, slices.into_iter().zip(bounds).collect())
}

/// Where `bytes` is cut into at most `pieces` pieces: offset 0, then each even cut moved just past the
/// first `\n` at or after it (and after the previous start); none when that `\n` is the last byte or
/// there is none.
fn cut_in_memory(bytes: &[u8], pieces: usize) -> Vec<usize> {
    let mut starts = vec![0];
    for p in 1..pieces {
        let target = (bytes.len() * p / pieces).max(*starts.last().unwrap_or(&0));
        match memchr::memchr(b'\n', &bytes[target..]) {
            Some(at) if target + at + 1 < bytes.len() => starts.push(target + at + 1),
            _ => break,
        }
    }
    starts
}

/// [`read_dataset`] with the pieces starting at `starts` (ascending line starts, the first 0), each on
/// its own thread.
fn read_pieces(path: &Path, format: Format, starts: &[u64]) -> Result<Dataset, ReadError> {
    let io = |source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    // Each piece read on its own thread, with the bound on its pairs.
    let read: Vec<std::io::Result<(Vec<u8>, usize)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (1..starts.len())
            .map(|p| {
                let range = (starts[p], starts.get(p + 1).copied());
                scope.spawn(move || read_piece(path, range, format))
            })
            .collect();
        let mut read = vec![read_piece(
            path,
            (starts[0], starts.get(1).copied()),
            format,
        )];
        read.extend(handles.into_iter().map(|h| {
            h.join()
                .unwrap_or_else(|_| Err(std::io::Error::other("the reader failed")))
        }));
        read
    });
    let read = read
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(io)?;
    parse_pieces(path, format, read)
}

/// Parses the pieces `read` (each piece's bytes and the bound on its pairs, in file order), each on
/// its own thread, into one data set; the first bad line stops it, numbered from the file's start.
fn parse_pieces<B: AsRef<[u8]> + Send>(
    path: &Path,
    format: Format,
    read: Vec<(B, usize)>,
) -> Result<Dataset, ReadError> {
    let reserved: Vec<usize> = read.iter().map(|&(_, bound)| bound).collect();
    // Zeroed by the allocator (`calloc`): pages no pair reaches are never touched.
    let mut indices = vec![0u32; reserved.iter().sum()];
    let mut values = vec![0.0f64; indices.len()];
    // An epoch reads the rows in a shuffled order: huge pages spare it a TLB miss per row.
    crate::sparse::advise(&indices);
    crate::sparse::advise(&values);
    let mut parsed: Vec<Columns> = {
        let mut stretches = Vec::with_capacity(read.len());
        let (mut rest_i, mut rest_v) = (&mut indices[..], &mut values[..]);
        for &bound in &reserved {
            let (i, tail_i) = rest_i.split_at_mut(bound);
            let (v, tail_v) = rest_v.split_at_mut(bound);
            stretches.push(Stretch {
                indices: i,
                values: v,
            });
            (rest_i, rest_v) = (tail_i, tail_v);
        }
        std::thread::scope(|scope| {
            let mut jobs = read.into_iter().zip(stretches);
            let first = jobs.next();
            let handles: Vec<_> = jobs
                .map(|((bytes, _), mut out)| {
                    scope.spawn(move || parse_piece(bytes.as_ref(), format, &mut out))
                })
                .collect();
            let mut parsed = Vec::with_capacity(handles.len() + 1);
            if let Some(((bytes, _), mut out)) = first {
                parsed.push(parse_piece(bytes.as_ref(), format, &mut out));
            }
            // A parser thread only runs the line parsers, which do not panic; if one did, the read
            // fails as if that piece could not be read rather than taking the process down.
            parsed.extend(handles.into_iter().map(|h| {
                h.join().unwrap_or_else(|_| Columns {
                    error: Some((1, LineError::Json("the parser failed".into()))),
                    ..Columns::default()
                })
            }));
            parsed
        })
    };
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
    Ok(join(parsed, &reserved, indices, values))
}

/// Where the pieces start: offset 0, then for each of the `pieces - 1` even cuts of the `len` bytes,
/// just past the first `\n` at or after it (and after the previous start); fewer when a cut finds no
/// `\n` before the end. The same pieces as cutting the whole file in memory.
fn cut_points(file: &mut File, len: u64, pieces: usize) -> std::io::Result<Vec<u64>> {
    let mut starts = vec![0];
    let mut probe = vec![0u8; CUT_PROBE_BYTES];
    for p in 1..pieces as u64 {
        let mut at = (len * p / pieces as u64).max(*starts.last().unwrap_or(&0));
        file.seek(SeekFrom::Start(at))?;
        let found = loop {
            let got = match file.read(&mut probe) {
                Ok(got) => got,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if got == 0 {
                break None;
            }
            if let Some(end) = memchr::memchr(b'\n', &probe[..got]) {
                break Some(at + end as u64 + 1);
            }
            at += got as u64;
        };
        match found {
            // A `\n` that is the file's last byte starts no piece.
            Some(start) if start < len => starts.push(start),
            _ => break,
        }
    }
    Ok(starts)
}

/// Reads the bytes from `start` to `end` (to the end of the file for the last piece) and bounds the
/// pairs they can hold (module docs).
fn read_piece(
    path: &Path,
    (start, end): (u64, Option<u64>),
    format: Format,
) -> std::io::Result<(Vec<u8>, usize)> {
    let mut file = File::open(path)?;
    file.seek(SeekFrom::Start(start))?;
    let bytes = match end {
        Some(end) => {
            let mut bytes = vec![0u8; usize::try_from(end - start).map_err(std::io::Error::other)?];
            file.read_exact(&mut bytes)?;
            bytes
        }
        None => {
            // Room for the rest of the file as it is now, so the read does not grow the buffer by
            // copies; a file that grew meanwhile is still read to its end.
            let rest = file.metadata()?.len().saturating_sub(start);
            let mut bytes = Vec::with_capacity(usize::try_from(rest).unwrap_or(0));
            file.read_to_end(&mut bytes)?;
            bytes
        }
    };
    Ok(with_bound(bytes, format))
}

/// A piece's bytes with the bound on the pairs they can hold (module docs).
fn with_bound(bytes: Vec<u8>, format: Format) -> (Vec<u8>, usize) {
    let bound = pair_bound(&bytes, format);
    (bytes, bound)
}

/// The bound on the pairs `bytes` can hold (module docs).
fn pair_bound(bytes: &[u8], format: Format) -> usize {
    match format {
        Format::Libsvm => memchr::memchr_iter(b':', bytes).count(),
        Format::Jsonl => {
            memchr::memchr_iter(b',', bytes).count() + memchr::memchr_iter(b'\n', bytes).count() + 1
        }
    }
}

/// Parses one piece into `out`; stops at its first bad line.
fn parse_piece(piece: &[u8], format: Format, out: &mut Stretch<'_>) -> Columns {
    match std::str::from_utf8(piece) {
        Ok(text) => parse_text(text, format, out),
        Err(e) => {
            // Parse the valid prefix's whole lines (an earlier bad line must win), then name the line
            // that holds the first invalid byte.
            let valid = &piece[..e.valid_up_to()];
            let whole = valid
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |at| at + 1);
            let prefix = std::str::from_utf8(&valid[..whole]).unwrap_or_default();
            let mut c = parse_text(prefix, format, out);
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

fn parse_text(text: &str, format: Format, out: &mut Stretch<'_>) -> Columns {
    let mut c = Columns::default();
    // One line's pairs, then copied to their place: a line's worth stays in the first-level cache.
    let (mut indices, mut values) = (Vec::new(), Vec::new());
    for line in lines(text) {
        c.lines += 1;
        if is_skippable(line) {
            continue;
        }
        indices.clear();
        values.clear();
        let row = match format {
            Format::Libsvm => parse_libsvm_append(line, &mut indices, &mut values),
            Format::Jsonl => parse_json_line(line).map(|s| {
                indices.extend_from_slice(&s.indices);
                values.extend_from_slice(&s.values);
                (s.label, s.weight)
            }),
        };
        let checked = row.and_then(|(label, weight)| {
            check_magnitudes(
                Some(label),
                weight,
                &indices,
                &values,
                DEFAULT_MAX_ABS_VALUE,
            )?;
            Ok((label, weight))
        });
        let end = c.pairs + indices.len();
        let placed = checked.and_then(|row| {
            match (
                out.indices.get_mut(c.pairs..end),
                out.values.get_mut(c.pairs..end),
            ) {
                (Some(i), Some(v)) => {
                    i.copy_from_slice(&indices);
                    v.copy_from_slice(&values);
                    Ok(row)
                }
                // Cannot happen (the bound counts separators every pair needs); an error, not a panic.
                _ => Err(LineError::Json(
                    "more pairs than the file's separators allow".into(),
                )),
            }
        });
        match placed {
            Ok((label, weight)) => {
                c.labels.push(label);
                c.weights.push(weight.unwrap_or(1.0));
                c.pairs = end;
                c.ends.push(end);
                // The indices ascend: the last is the row's largest.
                c.dim = indices.last().map_or(c.dim, |&j| c.dim.max(j as usize + 1));
                c.nonzero += values.iter().filter(|v| **v != 0.0).count();
            }
            Err(e) => {
                c.error = Some((c.lines, e));
                break;
            }
        }
    }
    c
}

/// The pieces end to end: one data set, rows in file order, each piece's pairs moved down to close
/// the room its stretch (`reserved[p]` pairs long) had left unused before it.
fn join(
    parsed: Vec<Columns>,
    reserved: &[usize],
    mut indices: Vec<u32>,
    mut values: Vec<f64>,
) -> Dataset {
    let rows: usize = parsed.iter().map(|c| c.labels.len()).sum();
    let mut indptr = Vec::with_capacity(rows + 1);
    indptr.push(0);
    let (mut labels, mut weights) = (Vec::with_capacity(rows), Vec::with_capacity(rows));
    let (mut stretch, mut at) = (0, 0);
    let (mut dim, mut nonzero) = (0, 0);
    for (c, &room) in parsed.into_iter().zip(reserved) {
        dim = dim.max(c.dim);
        nonzero += c.nonzero;
        if stretch != at {
            indices.copy_within(stretch..stretch + c.pairs, at);
            values.copy_within(stretch..stretch + c.pairs, at);
        }
        indptr.extend(c.ends.iter().map(|&end| at + end));
        labels.extend_from_slice(&c.labels);
        weights.extend_from_slice(&c.weights);
        stretch += room;
        at += c.pairs;
    }
    indices.truncate(at);
    values.truncate(at);
    Dataset::from_parts((indptr, indices, values), labels, weights, (dim, nonzero))
}

/// Input text formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// `label idx:val idx:val ...` (SVMlight); `#` starts a comment.
    Libsvm,
    /// One JSON object per line: `{"label": y, "indices": [...], "values": [...], "weight": c}`.
    Jsonl,
}

/// Guesses the format of a file from its extension: `.jsonl`, `.ndjson`, `.json` are JSON lines,
/// anything else is LIBSVM.
pub fn guess_format(path: &Path) -> Format {
    match path.extension().and_then(|e| e.to_str()) {
        Some("jsonl" | "ndjson" | "json") => Format::Jsonl,
        _ => Format::Libsvm,
    }
}

/// Parses one line in `format`.
pub fn parse_line(format: Format, line: &str) -> Result<Sample, LineError> {
    match format {
        Format::Libsvm => parse_libsvm_line(line),
        Format::Jsonl => parse_json_line(line),
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
                check_magnitudes(label, s.weight, &s.indices, &s.values, limit)?;
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
mod tests {
    use super::*;
    use crate::sample::SampleSet;

    fn same(a: &Dataset, b: &Dataset) {
        assert_eq!(a.len(), b.len());
        assert_eq!(a.dim(), b.dim());
        // The reader's own count against the line reader's pass over the values.
        assert_eq!(a.nonzero_values(), b.nonzero_values());
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
        // More pieces than cores; the comments' colons leave room in each stretch to close up.
        for pieces in [1, 3, 7] {
            let starts = cut_points(&mut File::open(&path).unwrap(), text.len() as u64, pieces);
            let starts = starts.unwrap();
            assert_eq!(starts.len(), pieces);
            same(&read_pieces(&path, Format::Libsvm, &starts).unwrap(), &slow);
            let mapped = parse_mapped(&path, Format::Libsvm, text.as_bytes(), pieces);
            same(&mapped.unwrap(), &slow);
        }

        let json = "{\"label\": 1, \"indices\": [2], \"values\": [0.5], \"weight\": 2}\n\n{\"label\": -1}\n";
        let path = write("rows.jsonl", json.as_bytes());
        let fast = read_dataset(&path, Format::Jsonl).unwrap();
        same(
            &fast,
            &Dataset::from_samples(&read_file(&path, Format::Jsonl).unwrap(), 0),
        );

        // JSON in several pieces: each stretch reserved by its commas is closed up.
        let mut json = String::new();
        for at in 0..20_000u32 {
            json.push_str(&format!(
                "{{\"label\": {}, \"indices\": [{}, {}, {}], \"values\": [0.5, {at}, -2]}}\n",
                if at % 3 == 0 { -1 } else { 1 },
                at % 7,
                10 + at % 11,
                100 + at
            ));
        }
        let path = write("pieces.jsonl", json.as_bytes());
        let slow = Dataset::from_samples(&read_file(&path, Format::Jsonl).unwrap(), 0);
        same(&read_dataset(&path, Format::Jsonl).unwrap(), &slow);
        let starts = cut_points(&mut File::open(&path).unwrap(), json.len() as u64, 4).unwrap();
        assert_eq!(starts.len(), 4);
        same(&read_pieces(&path, Format::Jsonl, &starts).unwrap(), &slow);
    }

    /// The pieces are those of cutting the bytes in memory: each cut moved just past the next `\n`,
    /// none when that is the last byte or there is none, a line longer than the probe crossed.
    #[test]
    fn cut_points_are_the_in_memory_cuts() {
        fn in_memory(bytes: &[u8], pieces: usize) -> Vec<u64> {
            cut_in_memory(bytes, pieces)
                .into_iter()
                .map(|at| at as u64)
                .collect()
        }
        // A line three probes long.
        let pairs: String = (1..3 * CUT_PROBE_BYTES / 6)
            .map(|j| format!("{j}:0.5 "))
            .collect();
        let long = format!("1 {pairs}\n");
        for text in [
            "1 1:1\n2 2:2\n3 3:3\n".to_string(),
            "1 1:1\n2 2:2\n3 3:3".to_string(),
            "1 1:1 2:2 3:3".to_string(),
            format!("{long}1 1:1\n{long}{long}"),
            "\n\n\n\n".to_string(),
        ] {
            let path = write("cuts.svm", text.as_bytes());
            for pieces in 1..=6 {
                let mut file = File::open(&path).unwrap();
                let starts = cut_points(&mut file, text.len() as u64, pieces).unwrap();
                assert_eq!(
                    starts,
                    in_memory(text.as_bytes(), pieces),
                    "{pieces} pieces"
                );
                let slow = Dataset::from_samples(&read_file(&path, Format::Libsvm).unwrap(), 0);
                same(&read_pieces(&path, Format::Libsvm, &starts).unwrap(), &slow);
            }
        }
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
            // Whichever piece the bad line falls in, and with bad lines in later pieces too.
            for pieces in [3, 5] {
                let mut file = File::open(&path).unwrap();
                let starts = cut_points(&mut file, text.len() as u64, pieces).unwrap();
                let err = read_pieces(&path, Format::Libsvm, &starts)
                    .unwrap_err()
                    .to_string();
                assert!(err.contains(&format!(":{}: ", lines + 1)), "{err}");
                assert!(err.contains(what), "{err}");
                let err = parse_mapped(&path, Format::Libsvm, &text, pieces)
                    .unwrap_err()
                    .to_string();
                assert!(err.contains(&format!(":{}: ", lines + 1)), "{err}");
                assert!(err.contains(what), "{err}");
            }
        }
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
