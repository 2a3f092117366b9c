//! A request body as the segments it arrived in (the HTTP chunks hyper read), walked line by line
//! without joining them into one buffer first.
//!
//! Why: joining a 1 000-sample LIBSVM body (~700 KB) and then checking it is UTF-8 were a copy and a
//! pass over every byte before the parse even started — ~3% of the daemon's CPU at full ingest
//! (`perf`, `examples/loadgen`). Here the lines that lie wholly inside a segment are read where they
//! are; only a line cut by a segment boundary is copied, into a small carry buffer. Each run of
//! whole lines is checked for UTF-8 once, in place: a boundary after a `\n` never falls inside a
//! multi-byte character, so the pieces are valid exactly when the whole body is.
//!
//! The lines are exactly `ingest::lines::lines` of the joined body (which are `str::lines`), numbered
//! from 1 in the same way, so a parse over segments names the same line as a parse of the joined
//! text.

use super::lines::lines;
use super::BatchError;

/// Calls `on_line(number, line)` for every line of the concatenation of `segments`, in order, with
/// `number` 1-based (blank and comment lines included, as in `str::lines().enumerate()`). Stops at the
/// first error `on_line` returns. A line that is not UTF-8 is an error naming its line and the byte
/// column at fault.
pub fn for_each_line<S: AsRef<[u8]>>(
    segments: &[S],
    mut on_line: impl FnMut(usize, &str) -> Result<(), BatchError>,
) -> Result<(), BatchError> {
    // Lines seen so far: the next line's number is `seen + 1`.
    let mut seen = 0usize;
    // The start of a line cut by a segment boundary, waiting for the rest.
    let mut carry: Vec<u8> = Vec::new();
    // Whole lines, the first being line `seen + 1`: handed out up to the first that is not UTF-8,
    // which is then the error (so an earlier line's error still comes first).
    let mut run_lines = |text: &[u8], seen: &mut usize| -> Result<(), BatchError> {
        let (valid, bad_byte) = match std::str::from_utf8(text) {
            Ok(all) => (all, None),
            Err(e) => {
                let bad = e.valid_up_to();
                let line_start = memchr::memrchr(b'\n', &text[..bad]).map_or(0, |at| at + 1);
                let before = std::str::from_utf8(&text[..line_start]).unwrap_or_default();
                (before, Some(bad - line_start + 1))
            }
        };
        for line in lines(valid) {
            *seen += 1;
            on_line(*seen, line)?;
        }
        match bad_byte {
            None => Ok(()),
            Some(column) => Err(BatchError {
                line: Some(*seen + 1),
                message: format!("the line is not UTF-8 (byte {column} of the line)"),
                samples: 0,
            }),
        }
    };
    for segment in segments {
        let mut rest = segment.as_ref();
        if !carry.is_empty() {
            match memchr::memchr(b'\n', rest) {
                None => {
                    carry.extend_from_slice(rest);
                    continue;
                }
                Some(end) => {
                    // The cut line, with its `\n`: `lines` then yields it alone, `\r` handled.
                    carry.extend_from_slice(&rest[..=end]);
                    run_lines(&carry, &mut seen)?;
                    carry.clear();
                    rest = &rest[end + 1..];
                }
            }
        }
        let whole = memchr::memrchr(b'\n', rest).map_or(0, |last| last + 1);
        run_lines(&rest[..whole], &mut seen)?;
        carry.extend_from_slice(&rest[whole..]);
    }
    if !carry.is_empty() {
        run_lines(&carry, &mut seen)?;
    }
    Ok(())
}

/// How many lines of the joined `segments` are neither blank nor comments (the samples a valid body
/// holds), for a rejection's counter: `lines::count_content_lines` of the joined body, counted where
/// the segments lie. Why not joined: this runs on bodies refused under load (a full queue, a spent
/// sample budget), and a copy of each — 32 MiB for a 32 MiB body, on every parser thread at once — was
/// memory outside every in-flight bound (`docs/benchmarks/inflight.md`).
pub fn count_content_lines<S: AsRef<[u8]>>(segments: &[S]) -> usize {
    let mut count = 0;
    // The first non-whitespace byte of the line being read, once seen.
    let mut first: Option<u8> = None;
    for segment in segments {
        let mut rest = segment.as_ref();
        loop {
            let end = memchr::memchr(b'\n', rest);
            let piece = &rest[..end.unwrap_or(rest.len())];
            if first.is_none() {
                first = piece.iter().copied().find(|b| !b.is_ascii_whitespace());
            }
            let Some(end) = end else { break };
            count += usize::from(first.is_some_and(|b| b != b'#'));
            first = None;
            rest = &rest[end + 1..];
        }
    }
    count + usize::from(first.is_some_and(|b| b != b'#'))
}

/// The segments as one buffer (for the formats that need the whole text: a JSON array).
pub fn join<S: AsRef<[u8]>>(segments: &[S]) -> Vec<u8> {
    let mut joined = Vec::with_capacity(segments.iter().map(|s| s.as_ref().len()).sum());
    for s in segments {
        joined.extend_from_slice(s.as_ref());
    }
    joined
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn collected(segments: &[&[u8]]) -> Result<Vec<(usize, String)>, BatchError> {
        let mut out = Vec::new();
        for_each_line(segments, |n, line| {
            out.push((n, line.to_string()));
            Ok(())
        })?;
        Ok(out)
    }

    /// Every way of cutting a body into three segments gives `str::lines` of the whole body.
    #[test]
    fn lines_across_every_cut_are_str_lines() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let pieces = [
            "1 2:3",
            "\n",
            "\r\n",
            "\r",
            "# c",
            "",
            " ",
            "é",
            "{\"a\":1}",
            "\n\n",
        ];
        for _ in 0..200 {
            let body: String = (0..rng.gen_range(0..8))
                .map(|_| pieces[rng.gen_range(0..pieces.len())])
                .collect();
            let want: Vec<(usize, String)> = body
                .lines()
                .enumerate()
                .map(|(n, l)| (n + 1, l.to_string()))
                .collect();
            let b = body.as_bytes();
            for i in 0..=b.len() {
                for j in i..=b.len() {
                    let got = collected(&[&b[..i], &b[i..j], &b[j..]]).unwrap();
                    assert_eq!(got, want, "body {body:?} cut at {i}, {j}");
                }
            }
        }
    }

    #[test]
    fn a_bad_byte_names_its_line_and_column_wherever_the_cut_is() {
        let body: &[u8] = b"1 1:1\n\n-1 2:\xff1\n1 3:1\n";
        for cut in 0..=body.len() {
            let err = collected(&[&body[..cut], &body[cut..]]).unwrap_err();
            assert_eq!(err.line, Some(3), "cut at {cut}");
            assert_eq!(
                err.message, "the line is not UTF-8 (byte 6 of the line)",
                "cut at {cut}"
            );
        }
        // A character cut in two by a segment boundary is still one valid character.
        let body = "1 1:1 # é\n".as_bytes();
        let at = body.len() - 2;
        let got = collected(&[&body[..at], &body[at..]]).unwrap();
        assert_eq!(got, vec![(1, "1 1:1 # é".to_string())]);
    }

    #[test]
    fn lines_before_an_error_are_handed_out_first_and_the_error_stops_the_walk() {
        let mut seen = Vec::new();
        // `c` is not UTF-8: the error at `b` still comes first.
        let err = for_each_line(&[&b"a\nb\nc\xff\n"[..]], |n, line| {
            seen.push(line.to_string());
            if line == "b" {
                return Err(BatchError {
                    line: Some(n),
                    message: "bad".into(),
                    samples: 0,
                });
            }
            Ok(())
        })
        .unwrap_err();
        assert_eq!(err.line, Some(2));
        assert_eq!(seen, ["a", "b"]);
    }

    #[test]
    fn content_lines_over_segments() {
        assert_eq!(count_content_lines::<&[u8]>(&[]), 0);
        assert_eq!(count_content_lines(&[&b"1 1:1\n# c\n"[..], b"\n-1 2:1"]), 2);
        // Every cut of a body into three segments counts what the joined body counts.
        let body: &[u8] = b"1 1:2\n\n  # c\n-1 3:4\r\n\t\n #x\n0 2:1\n \n2";
        for i in 0..=body.len() {
            for j in i..=body.len() {
                let cut = [&body[..i], &body[i..j], &body[j..]];
                assert_eq!(count_content_lines(&cut), 4, "cut at {i}, {j}");
            }
        }
        assert_eq!(crate::ingest::lines::count_content_lines(body), 4);
        assert_eq!(join(&[&b"ab"[..], b"c"]), b"abc");
    }
}
