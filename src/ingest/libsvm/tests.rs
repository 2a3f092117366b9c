//! The LIBSVM readers' tests: every error kind named, appending, and the property test holding the
//! fast path to the general parser on random lines (whose generators the body and structural tests use
//! too).

use super::*;
use crate::sample::SampleError;

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
    // Tabs and other ASCII whitespace separate tokens; `#` cuts the line even inside a token.
    let s = parse_libsvm_line("1\t2:0.5\x0c3:1#4:1 5:1").unwrap();
    assert_eq!((s.indices, s.values), (vec![2, 3], vec![0.5, 1.0]));
}

/// SVMlight's `cost:c` token is the sample's weight, anywhere after the label; at most one; `c > 0`.
#[test]
fn a_cost_token_is_the_weight() {
    let s = parse_libsvm_line("1 cost:2 3:0.5 7:1").unwrap();
    assert_eq!((s.label, s.weight, s.indices), (1.0, Some(2.0), vec![3, 7]));
    let s = parse_libsvm_line("-1 3:0.5 qid:9 cost:0.25 # note").unwrap();
    assert_eq!((s.weight, s.values), (Some(0.25), vec![0.5]));
    assert_eq!(parse_libsvm_line("1 3:0.5").unwrap().weight, None);
    assert_eq!(libsvm_err("1 cost:2 cost:3 4:1"), LineError::RepeatedCost);
    assert_eq!(libsvm_err("1 cost:x 4:1"), LineError::BadCost("x".into()));
    for bad in [
        "1 cost:0 4:1",
        "1 cost:-1 4:1",
        "1 cost:inf 4:1",
        "1 cost:nan",
    ] {
        assert!(
            matches!(libsvm_err(bad), LineError::Sample(_)),
            "{bad}: a weight must be finite and > 0"
        );
    }
    // The label comes first: a line that starts with `cost:` has none.
    assert_eq!(libsvm_err("cost:2 1"), LineError::MissingLabel);
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

/// The general parser reads labels and values as `f64::from_str` and indices as `u32::from_str`
/// do, bit for bit, on well-formed and malformed tokens alike.
#[test]
fn general_parser_numbers_are_from_str() {
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
    // A token that holds a separator, a comment or a colon is not one token of a line.
    let single = |t: &&String| {
        !t.is_empty() && !t.contains(|c: char| c.is_ascii_whitespace() || c == '#' || c == ':')
    };
    for t in tokens.iter().filter(single) {
        let label = parse_libsvm_general(&format!("{t} 7:1"));
        let value = parse_libsvm_general(&format!("1 7:{t}"));
        match t.parse::<f64>() {
            Ok(v) if v.is_finite() => {
                assert_eq!(label.unwrap().label.to_bits(), v.to_bits(), "{t:?}");
                assert_eq!(value.unwrap().values[0].to_bits(), v.to_bits(), "{t:?}");
            }
            Ok(_) => {
                assert!(matches!(label, Err(LineError::Sample(_))), "{t:?}");
                assert!(matches!(value, Err(LineError::Sample(_))), "{t:?}");
            }
            Err(_) => {
                assert_eq!(label.unwrap_err(), LineError::BadLabel(t.clone()));
                assert_eq!(value.unwrap_err(), LineError::BadValue(t.clone()));
            }
        }
        let index = parse_libsvm_general(&format!("1 {t}:1"));
        match t.parse::<u32>() {
            Ok(i) => assert_eq!(index.unwrap().indices, [i], "{t:?}"),
            Err(_) => assert_eq!(index.unwrap_err(), LineError::BadIndex(t.clone())),
        }
    }
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
            3 => ["1e-320", "-4.9e-324", "1.7976931348623157e308", "1e400"][rng.gen_range(0..4)]
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
        Ok((1.0, None))
    );
    assert_eq!(
        parse_libsvm_append("-1 qid:4 3:2e-1 # general path", &mut indices, &mut values),
        Ok((-1.0, None))
    );
    assert_eq!(
        parse_libsvm_append("-1 cost:2.5 4:1", &mut indices, &mut values),
        Ok((-1.0, Some(2.5)))
    );
    for bad in ["1 4:0.5 2:1", "1 4:0.5 5:x", "x 1:1", "1 4:0.5 5"] {
        assert!(
            parse_libsvm_append(bad, &mut indices, &mut values).is_err(),
            "{bad}"
        );
    }
    assert_eq!(indices, [2, 9, 3, 4]);
    assert_eq!(values, [0.5, -1.0, 0.2, 1.0]);
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
            1 => ["4294967295", "4294967296", "04294967295", "0", "00", ""][rng.gen_range(0..6)]
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
        let junk = ["\0", "\x0b", "\x7f", "é", "x", "#", ":", ".", "-", "\r"][rng.gen_range(0..10)];
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
