//! The plain JSON reader against `serde_json`: whatever it takes it reads to the same wire struct, bit
//! for bit, on random, load-generator and bent objects and arrays; its list runs (AVX2 or scalar)
//! against each other from every offset; and the generators of sample objects the body tests use.

use rand::{Rng, SeedableRng};

use super::*;
use crate::ingest::json::WireSample;

/// The fields of one sample object, as the `serde` wire struct would hold them (for the tests).
#[derive(Debug, Default)]
struct PlainJsonSample {
    label: Option<f64>,
    indices: Option<Vec<u32>>,
    values: Option<Vec<f64>>,
    weight: Option<f64>,
}

/// One NDJSON line holding one plain sample object (and only JSON whitespace around it), as the wire
/// struct (compared with `serde_json`'s; the daemon copies [`parse_line_fields`] instead).
fn parse_line(line: &str, scratch: &mut Scratch) -> Option<PlainJsonSample> {
    let fields = parse_line_fields(line, scratch)?;
    Some(fields.to_sample(scratch))
}

impl PlainFields {
    /// The wire-struct form, with the lists copied out of `scratch` at their exact length.
    fn to_sample(self, scratch: &Scratch) -> PlainJsonSample {
        PlainJsonSample {
            label: self.label,
            indices: self.has_indices.then(|| scratch.indices.to_vec()),
            values: self.has_values.then(|| scratch.values.to_vec()),
            weight: self.weight,
        }
    }
}

/// [`parse_array_fields`] collecting the items as wire structs, for the tests' comparison with serde.
fn parse_array(body: &str, scratch: &mut Scratch) -> Option<Vec<PlainJsonSample>> {
    let mut items = Vec::new();
    parse_array_fields(body, scratch, |n, fields, scratch| {
        assert_eq!(n, items.len());
        items.push(fields.to_sample(scratch));
    })?;
    Some(items)
}

/// Bits, not `==`: `-0.0` and the last ulp count.
fn fingerprint(
    label: Option<f64>,
    indices: &Option<Vec<u32>>,
    values: &Option<Vec<f64>>,
    weight: Option<f64>,
) -> String {
    let values = values
        .as_ref()
        .map(|v| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    format!(
        "{:?} {indices:?} {values:x?} {:?}",
        label.map(f64::to_bits),
        weight.map(f64::to_bits)
    )
}

fn of_plain(p: &PlainJsonSample) -> String {
    fingerprint(p.label, &p.indices, &p.values, p.weight)
}

fn of_wire(w: &WireSample) -> String {
    assert!(w.features.is_none());
    let label = w.label.as_ref().map(|l| match l {
        crate::ingest::json::WireLabel::Number(y) => *y,
        crate::ingest::json::WireLabel::Name(name) => panic!("a text label {name:?}"),
    });
    fingerprint(label, &w.indices, &w.values, w.weight)
}

fn number(rng: &mut impl Rng) -> String {
    let x: f64 = rng.gen_range(-1e3..1e3) * 10f64.powi(rng.gen_range(-9..9));
    match rng.gen_range(0..40) {
        0 => format!("{x:e}"),
        1 => format!("{x:E}"),
        2 => format!("{:.30}", x),
        3 => format!("{}", rng.gen::<u64>()),
        4 => format!("{}", rng.gen::<i64>()),
        5 => format!("{}0", rng.gen::<u64>()),
        6 => [
            "-0", "0", "-0.0", "0.0", "1e400", "-1e-400", "1e22", "1e23", "1e-22",
        ][rng.gen_range(0..9)]
        .into(),
        7 => [
            "01", "1.", ".5", "+1", "NaN", "null", "true", "\"1\"", "1e", "1e+", "--1", "-",
        ][rng.gen_range(0..12)]
        .into(),
        8 => format!("{}e{}", rng.gen_range(-99..99), rng.gen_range(-30..30)),
        9 => format!("{x:.0}"),
        10 => format!("0.{}{}", "0".repeat(rng.gen_range(0..25)), rng.gen::<u32>()),
        11..=14 => format!("{}", rng.gen_range(-3i32..4)),
        _ => format!("{x:?}"),
    }
}

fn index(rng: &mut impl Rng, at: &mut u64) -> String {
    *at += rng.gen_range(1..100_000);
    match rng.gen_range(0..60) {
        0 => format!("-{at}"),
        1 => format!("{at}.0"),
        2 => format!("0{at}"),
        3 => format!("{}", *at + (1 << 32)),
        4 => format!("{at}e0"),
        5 => "4294967295".into(),
        _ => at.to_string(),
    }
}

fn space(rng: &mut impl Rng) -> &'static str {
    match rng.gen_range(0..40) {
        0 => " ",
        1 => "\t",
        2 => "\n",
        3 => "\r",
        4 => "  ",
        5 => "\x0c",
        _ => "",
    }
}

/// A random sample object: mostly the plain shape, salted with whatever must go to serde.
pub(in crate::ingest) fn random_object(rng: &mut impl Rng) -> String {
    if rng.gen_range(0..5) == 0 {
        return random_wire_object(rng);
    }
    let n = rng.gen_range(0..8);
    let mut keys = vec!["label", "indices", "values", "weight"];
    keys.truncate(rng.gen_range(1..5));
    if rng.gen_range(0..30) == 0 {
        keys.push(["features", "extra", "label", "lab\\u0065l", "values"][rng.gen_range(0..5)]);
    }
    for i in (1..keys.len()).rev() {
        keys.swap(i, rng.gen_range(0..=i));
    }
    let mut out = format!("{{{}", space(rng));
    for (k, key) in keys.iter().enumerate() {
        if k > 0 {
            out.push_str(&format!("{},{}", space(rng), space(rng)));
        }
        let mut at = 0;
        let value = match *key {
            "indices" => {
                let items: Vec<String> = (0..n).map(|_| index(rng, &mut at)).collect();
                format!("[{}]", items.join(", "))
            }
            "values" => {
                let items: Vec<String> = (0..n).map(|_| number(rng)).collect();
                format!("[{}]", items.join(", "))
            }
            // Names the readers must refuse alike: repeated (also through an escape), empty,
            // holding a control or a bidi character.
            "features" => [
                "{\"a\": 1}",
                "{\"a\": 1, \"b\": 2, \"a\": 3}",
                "{\"b\": 1, \"\\u0062\": 2}",
                "{\"\": 1}",
                "{\"x\\u0000\": 1}",
                "{\"\\u202e\": 1}",
            ][rng.gen_range(0..6)]
            .into(),
            _ => number(rng),
        };
        out.push_str(&format!("\"{key}\"{}:{}{value}", space(rng), space(rng)));
    }
    if rng.gen_range(0..50) == 0 {
        out.push(',');
    }
    out.push_str(&format!("{}}}", space(rng)));
    out
}

/// A load-generator-like object (up to 60 features, `{:.6}` values, `", "` between indices, lists
/// longer than the 64-byte blocks of the plain runs), on half the lines with some items or
/// separators bent into what those runs must leave to the general reader (or to serde).
pub(in crate::ingest) fn random_wire_object(rng: &mut impl Rng) -> String {
    let n = rng.gen_range(0..60);
    // How often an item or separator is bent: never on half the lines, so whole lists go plain.
    let odd_in = [u32::MAX, 8, 30][rng.gen_range(0..3)];
    let index_separator = [", ", ","][rng.gen_range(0..2)];
    let value_separator = [",", ", "][rng.gen_range(0..2)];
    let big_values = rng.gen_range(0..6) == 0;
    let mut at: u64 = rng.gen_range(0..3);
    let mut indices = String::from("[");
    let mut values = String::from("[");
    for i in 0..n {
        let digits = rng.gen_range(1..7);
        at += rng.gen_range(1..10u64.pow(digits));
        let odd = rng.gen_range(0..odd_in) == 0;
        if i > 0 {
            indices.push_str(if odd && rng.gen_range(0..3) == 0 {
                [" ,", ",\n", ",  ", ", \t", ",\r"][rng.gen_range(0..5)]
            } else {
                index_separator
            });
        }
        indices.push_str(&if odd {
            match rng.gen_range(0..12) {
                0 => format!("0{at}"),
                1 => format!("{at}.0"),
                2 => format!("-{at}"),
                3 => format!("{at}e0"),
                4 => "4294967296".into(),
                5 => "4294967295".into(),
                6 => format!("{at} "),
                7 => format!("\t{at}"),
                8 => format!("  {at}"),
                9 => String::new(),
                10 => "0".into(),
                _ => format!("{}", at * 1000),
            }
        } else {
            at.to_string()
        });
        let scale = if big_values { 100.0 } else { 9.999 };
        let x: f64 = rng.gen_range(-scale..scale);
        let odd = rng.gen_range(0..odd_in) == 0;
        if i > 0 {
            values.push_str(if odd && rng.gen_range(0..3) == 0 {
                [" ,", ",\t", ",\n ", ",,"][rng.gen_range(0..4)]
            } else {
                value_separator
            });
        }
        values.push_str(&if odd {
            match rng.gen_range(0..22) {
                0 => "-0.000000".into(),
                1 => "0.000000".into(),
                2 => "-0".into(),
                3 => format!("{x:.5}"),
                4 => format!("{x:.7}"),
                5 => format!("{x:e}"),
                6 => "1.000000e5".into(),
                7 => "-.500000".into(),
                8 => "+1.000000".into(),
                9 => "01.000000".into(),
                10 => "1.00000a".into(),
                11 => "12345678901234567890123".into(),
                12 => "0.12345678901234567890123".into(),
                13 => format!(" {x:.6}"),
                14 => format!("{x:.6} "),
                15 => "--1.000000".into(),
                16 => "1..000000".into(),
                17 => "1.000000E-2".into(),
                18 => format!("{:.6}", x * 1e-3),
                19 => "9.999999".into(),
                20 => "-9.000000".into(),
                _ => format!("{x:?}"),
            }
        } else {
            format!("{x:.6}")
        });
    }
    // A length mismatch now and then, for the sample check after a plain read.
    if n > 0 && rng.gen_range(0..40) == 0 {
        values.push_str(",0.500000");
    }
    indices.push(']');
    values.push(']');
    let label = ["1", "-1", "0.5", "1.000000"][rng.gen_range(0..4)];
    let mut fields = vec![
        format!("\"label\":{label}"),
        format!("\"indices\":{indices}"),
        format!("\"values\":{values}"),
    ];
    match rng.gen_range(0..40) {
        0 => fields.push("\"weight\":2".into()),
        1 => fields.push("\"extra\":1".into()),
        2 => fields[2] = format!("\"val\\u0075es\":{values}"),
        3 => fields[1] = format!("\"indices\" : {indices}"),
        4 => fields.push(format!("\"values\":{values}")),
        _ => {}
    }
    if rng.gen_range(0..4) == 0 {
        for i in (1..fields.len()).rev() {
            fields.swap(i, rng.gen_range(0..=i));
        }
    }
    let pad = " ".repeat(rng.gen_range(0..3) * rng.gen_range(0..40));
    format!("{pad}{{{}}}", fields.join(","))
}

/// One item stands for all: bytes the fast reader accepted read the same under serde.
fn assert_agrees(line: &str, scratch: &mut Scratch) -> bool {
    let Some(plain) = parse_line(line, scratch) else {
        return false;
    };
    let wire: WireSample = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("fast accepted what serde refuses ({e}): {line:?}"));
    assert_eq!(of_plain(&plain), of_wire(&wire), "{line:?}");
    true
}

/// The load generator's lines, plain and bent: the fast reader (plain runs included) agrees with
/// serde on whatever it takes, and it takes nearly every unbent line.
#[test]
fn plain_runs_agree_with_serde_on_wire_lines() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(29);
    let mut scratch = Scratch::default();
    let (mut taken, lines) = (0, 6000);
    for _ in 0..lines {
        let line = random_wire_object(&mut rng);
        taken += usize::from(assert_agrees(&line, &mut scratch));
    }
    assert!(taken > lines / 3, "fast path took only {taken} of {lines}");
}

/// Every truncation of a wire line (so lists end within a block and right at the end of the
/// text), every single byte replaced by a byte the plain runs look at, and a space inserted
/// everywhere: the fast reader refuses or agrees with serde.
#[test]
fn bent_wire_lines_are_refused_or_agree() {
    let data = crate::synth::sparse_stream(2, 1 << 20, 10, 40, 0.0, true, 5);
    let mut scratch = Scratch::default();
    for sample in &data.samples {
        let mut line = String::new();
        crate::synth::write_wire_sample(&mut line, sample, true);
        assert!(assert_agrees(&line, &mut scratch), "{line}");
        let mut taken = 0;
        for cut in 0..line.len() {
            taken += usize::from(assert_agrees(&line[..cut], &mut scratch));
        }
        assert_eq!(taken, 0, "a cut line is never a whole object");
        for at in 0..line.len() {
            for byte in [
                " ", ",", "]", "[", "-", ".", "0", "9", "e", "\"", "}", "\n", "+", "a",
            ] {
                let mut bent = line.clone();
                bent.replace_range(at..at + 1, byte);
                assert_agrees(&bent, &mut scratch);
                let mut spaced = line.clone();
                spaced.insert(at, ' ');
                assert_agrees(&spaced, &mut scratch);
            }
        }
    }
}

/// The runs themselves: a plain list goes through in one run to its `]` (also a list that ends the
/// text, in less than a block), and a run stops exactly on the first item it does not take,
/// having taken the ones before it.
#[test]
fn plain_runs_stop_on_the_first_item_they_do_not_take() {
    let items: Vec<String> = (0..30).map(|i| format!("{}", 1000 + 37 * i)).collect();
    // An index is read as eight bytes from its start, so the last one needs what follows the list.
    let list = format!("{}],\"values\":[]}}", items.join(", "));
    let mut c = Cursor::new(list.as_bytes());
    let mut indices = Vec::new();
    assert!(c.plain_indices(&mut indices));
    assert_eq!(&list[c.at..], ",\"values\":[]}");
    assert_eq!(indices.len(), 30);
    let bent = list.replace("1370", "1370.0");
    let mut c = Cursor::new(bent.as_bytes());
    indices.clear();
    assert!(!c.plain_indices(&mut indices));
    assert_eq!(&bent[c.at..c.at + 7], " 1370.0");
    assert_eq!(indices.len(), 10);

    let items: Vec<String> = (0..30)
        .map(|i| format!("{:.6}", i as f64 * 0.6 - 9.0))
        .collect();
    let list = format!("{}]", items.join(","));
    let mut c = Cursor::new(list.as_bytes());
    let (mut values, mut divisors) = (Vec::new(), Vec::new());
    assert!(c.plain_values(&mut values, &mut divisors));
    assert_eq!(c.at, list.len());
    let read: Vec<f64> = values.iter().zip(&divisors).map(|(v, d)| v / d).collect();
    let want: Vec<f64> = items.iter().map(|s| s.parse().unwrap()).collect();
    assert_eq!(read, want);
    let bent = list.replace("-3.000000", "-3.0");
    let mut c = Cursor::new(bent.as_bytes());
    values.clear();
    assert!(!c.plain_values(&mut values, &mut divisors));
    assert_eq!(&bent[c.at..c.at + 5], "-3.0,");
    assert_eq!(values.len(), 10);
}

/// The runs (AVX2 on CPUs that have it) against the scalar ones, started at every byte of
/// load-generator lines, plain and bent: the same answer, the same stopping point, the same items
/// appended (bit for bit) after what the vectors held.
#[test]
fn plain_runs_match_the_scalar_runs_from_every_offset() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(43);
    let mut runs_to_the_end = 0;
    for _ in 0..300 {
        let mut line = random_wire_object(&mut rng);
        if rng.gen_range(0..3) == 0 {
            // Cut anywhere, so lists and items end right at the end of the text too.
            let cut = rng.gen_range(0..=line.len());
            line.truncate(cut);
        }
        let bytes = line.as_bytes();
        for at in 0..bytes.len() {
            let (mut fast, mut slow) = (Cursor::new(bytes), Cursor::new(bytes));
            (fast.at, slow.at) = (at, at);
            let (mut fast_indices, mut slow_indices) = (vec![7u32], vec![7u32]);
            let taken = fast.plain_indices(&mut fast_indices);
            assert_eq!(
                taken,
                slow.plain_indices_scalar(&mut slow_indices),
                "{at} {line}"
            );
            assert_eq!(
                (fast.at, &fast_indices),
                (slow.at, &slow_indices),
                "{at} {line}"
            );
            runs_to_the_end += usize::from(taken && fast_indices.len() > 20);

            (fast.at, slow.at) = (at, at);
            let (mut fast_values, mut slow_values) = (vec![-0.5], vec![-0.5]);
            let (mut fast_divisors, mut slow_divisors) = (vec![1.0], vec![1.0]);
            let taken = fast.plain_values(&mut fast_values, &mut fast_divisors);
            assert_eq!(
                taken,
                slow.plain_values_scalar(&mut slow_values, &mut slow_divisors),
                "{at} {line}"
            );
            // The AVX2 run divides at once, the scalar one leaves it to `Cursor::values`.
            let quotients = |v: &[f64], d: &[f64]| {
                assert_eq!(v.len(), d.len());
                let q = v.iter().zip(d).map(|(v, d)| (v / d).to_bits());
                q.collect::<Vec<_>>()
            };
            assert_eq!(
                (fast.at, quotients(&fast_values, &fast_divisors)),
                (slow.at, quotients(&slow_values, &slow_divisors)),
                "{at} {line}"
            );
            runs_to_the_end += usize::from(taken && fast_values.len() > 20);
        }
    }
    assert!(runs_to_the_end > 100, "only {runs_to_the_end} long runs");
}

/// The AVX2 separator bits from every offset of texts of every length up to three blocks (the
/// last block of a long text is read as the text's last 64 bytes, shifted) are the portable ones.
#[cfg(target_arch = "x86_64")]
#[test]
fn simd_separators_at_every_offset_match_the_portable_ones() {
    if !avx2::available() {
        return;
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(47);
    for len in 0..200 {
        let text: Vec<u8> = (0..len).map(|_| b"0,] 1.-"[rng.gen_range(0..7)]).collect();
        for at in 0..=len + 1 {
            let want = text.get(at..).filter(|rest| !rest.is_empty()).map(|rest| {
                let mut block = [0; 64];
                let n = rest.len().min(64);
                block[..n].copy_from_slice(&rest[..n]);
                crate::ingest::simd::two_byte_mask_portable(&block, b',', b']')
            });
            // SAFETY: the CPU has the features, checked above.
            let got = unsafe { avx2::list_separators_at(&text, at) };
            assert_eq!(got, want, "{len} {at}");
        }
    }
}

/// The SSE2 separator mask is the byte-by-byte one, on blocks dense in the bytes it looks for.
#[test]
fn separator_mask_matches_the_portable_one() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(41);
    for _ in 0..2000 {
        let mut block = [0u8; 64];
        for b in &mut block {
            *b = match rng.gen_range(0..6) {
                0 => b',',
                1 => b']',
                2 => rng.gen(),
                _ => b"0123456789 .-,]\xac\xdd\x2b\x5c"[rng.gen_range(0..19)],
            };
        }
        assert_eq!(
            separator_mask(&block),
            crate::ingest::simd::two_byte_mask_portable(&block, b',', b']')
        );
    }
}

/// Whatever the fast reader accepts, serde reads into the same wire struct, bit for bit; and it
/// does accept most plain objects, so the comparison is not vacuous.
#[test]
fn fast_reader_agrees_with_serde() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    let mut scratch = Scratch::default();
    let (mut fast, lines) = (0, 20_000);
    for _ in 0..lines {
        let mut line = random_object(&mut rng);
        if rng.gen_range(0..50) == 0 {
            line.push_str([" x", "}", " \t", "\r"][rng.gen_range(0..4)]);
        }
        if let Some(plain) = parse_line(&line, &mut scratch) {
            let wire: WireSample = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("fast accepted what serde refuses ({e}): {line}"));
            assert_eq!(of_plain(&plain), of_wire(&wire), "{line}");
            fast += 1;
        }
    }
    assert!(fast > lines / 4, "fast path took only {fast} of {lines}");
    let mut arrays_fast = 0;
    for _ in 0..500 {
        let items: Vec<String> = (0..rng.gen_range(0..6))
            .map(|_| random_object(&mut rng))
            .collect();
        let body = format!(
            "{}[{}]{}",
            space(&mut rng),
            items.join(","),
            space(&mut rng)
        );
        if let Some(plain) = parse_array(&body, &mut scratch) {
            let values: Vec<serde_json::Value> = serde_json::from_str(&body).unwrap();
            assert_eq!(plain.len(), values.len(), "{body}");
            for (p, v) in plain.iter().zip(values) {
                let wire: WireSample = serde_json::from_value(v).unwrap();
                assert_eq!(of_plain(p), of_wire(&wire), "{body}");
            }
            arrays_fast += 1;
        }
    }
    assert!(arrays_fast > 50, "fast path took only {arrays_fast} arrays");
}

/// Exactly the `{:?}` floats the load generator writes, including 17-digit ones, small ones in
/// exponent form and long-mantissa cases where converting the significand, then scaling, would round twice.
#[test]
fn takes_the_common_shapes() {
    let mut scratch = Scratch::default();
    for line in [
        r#"{"label":-1,"indices":[1431, 27773],"values":[-0.8444218515250481, -5.2858625144693133e-5]}"#,
        r#" { "values" : [ 1 , -0 ] , "label" : 0.5 , "indices" : [ 0 , 4294967295 ] , "weight" : 2 } "#,
        r#"{"label":1,"indices":[],"values":[]}"#,
        r#"{"label":1,"values":[9007199254740993, 0.30000000000000004, 12345678901234567890]}"#,
        r#"{}"#,
        r#"{"weight":2,"values":[0.5],"label":0,"indices":[3]}"#,
    ] {
        let plain = parse_line(line, &mut scratch).expect(line);
        let wire: WireSample = serde_json::from_str(line).unwrap();
        assert_eq!(of_plain(&plain), of_wire(&wire), "{line}");
    }
    for line in [
        r#"{"label":1,"label":1}"#,
        r#"{"label":null}"#,
        r#"{"label":1,"features":{"a":1}}"#,
        r#"{"label":1e23}"#,
        r#"{"label":1,}"#,
        r#"{"label":1} x"#,
        r#"{"indices":[01]}"#,
        r#"{"values":[1,]}"#,
        // Near misses of the eight-byte key compare, and keys cut at the end of the text.
        r#"{"labels":1}"#,
        r#"{"labe":1}"#,
        r#"{"indicesx":[1]}"#,
        r#"{"indice":[1]}"#,
        r#"{"value":[1]}"#,
        r#"{"weights":2}"#,
        r#"{"weight"#,
        r#"{"label":1,"values""#,
    ] {
        assert!(parse_line(line, &mut scratch).is_none(), "{line}");
    }
}
