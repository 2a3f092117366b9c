//! A one-pass reader for the one JSON sample shape the daemon sees almost always:
//! `{"label": y, "indices": [...], "values": [...], "weight": c}` (keys in any order, any of them
//! absent, JSON whitespace anywhere), as one NDJSON line or as the items of a JSON array body.
//!
//! It never decides anything on its own: it either reads exactly what `serde_json` would read into the
//! wire struct (same numbers, bit for bit) or says `None`, and the caller then runs the `serde_json`
//! path, which produces the value or the error message. Everything outside the plain shape goes that
//! way: `"features"`, unknown or duplicate keys, escapes in keys, `null`, exponents, significands
//! beyond `u64`, more than 22 fraction digits, malformed JSON.
//!
//! Numbers are converted the way `serde_json` (without its `float_roundtrip` feature) converts them, so
//! the two paths agree to the last bit: the digits as an integer `m` (exact while it fits `u64`),
//! then `m as f64 / 10^f` for `f` fraction digits (`f <= 22`, so `10^f` is exact), or `m as
//! f64` for an integer. That is correctly rounded when `m <= 2^53` and within one ulp beyond.

use super::{read_digits, with_sign};

/// The fields of one sample object, as the `serde` wire struct would hold them.
#[derive(Debug, Default)]
pub(crate) struct PlainJsonSample {
    pub label: Option<f64>,
    pub indices: Option<Vec<u32>>,
    pub values: Option<Vec<f64>>,
    pub weight: Option<f64>,
}

/// The scalar fields of one sample object; its `"indices"` and `"values"` lists (if present) are left
/// in the [`Scratch`] it was read with.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PlainFields {
    pub label: Option<f64>,
    pub weight: Option<f64>,
    pub has_indices: bool,
    pub has_values: bool,
}

/// Buffers reused across the samples of one body, so each sample's vectors are allocated once at their
/// exact length instead of grown by doubling (or not at all, for a caller that copies from here).
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    indices: Vec<u32>,
    values: Vec<f64>,
    /// Each value's divisor while a `"values"` list is read (see [`Cursor::values`]).
    divisors: Vec<f64>,
}

impl Scratch {
    /// The last object's `"indices"` (empty if it had none).
    pub fn indices(&self) -> &[u32] {
        &self.indices
    }

    /// The last object's `"values"` (empty if it had none).
    pub fn values(&self) -> &[f64] {
        &self.values
    }
}

/// One NDJSON line holding one plain sample object (and only JSON whitespace around it), as the wire
/// struct (the tests compare it with `serde_json`'s; the daemon copies [`parse_line_fields`] instead).
#[cfg(test)]
pub(crate) fn parse_line(line: &str, scratch: &mut Scratch) -> Option<PlainJsonSample> {
    let fields = parse_line_fields(line, scratch)?;
    Some(fields.to_sample(scratch))
}

/// [`parse_line`] leaving the lists in `scratch`, for a caller that copies them straight into a batch.
pub(crate) fn parse_line_fields(line: &str, scratch: &mut Scratch) -> Option<PlainFields> {
    let mut c = Cursor::new(line.as_bytes());
    c.skip_whitespace();
    let fields = c.object_fields(scratch)?;
    c.skip_whitespace();
    c.at_end().then_some(fields)
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

/// A whole `application/json` body: one array of plain sample objects.
pub(crate) fn parse_array(body: &str, scratch: &mut Scratch) -> Option<Vec<PlainJsonSample>> {
    let mut c = Cursor::new(body.as_bytes());
    c.skip_whitespace();
    c.expect(b'[')?;
    c.skip_whitespace();
    let mut items = Vec::new();
    if !c.eat(b']') {
        loop {
            items.push(c.object(scratch)?);
            c.skip_whitespace();
            if c.eat(b']') {
                break;
            }
            c.expect(b',')?;
            c.skip_whitespace();
        }
    }
    c.skip_whitespace();
    c.at_end().then_some(items)
}

/// Powers of ten exactly representable as `f64` (the first entries of `serde_json`'s table).
const EXACT_POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

enum Field {
    Label,
    Indices,
    Values,
    Weight,
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor { bytes, at: 0 }
    }

    #[inline(always)]
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn at_end(&self) -> bool {
        self.at == self.bytes.len()
    }

    /// JSON whitespace only (not form feed and the like, which `serde_json` refuses).
    #[inline(always)]
    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    #[inline(always)]
    fn eat(&mut self, byte: u8) -> bool {
        let hit = self.peek() == Some(byte);
        self.at += usize::from(hit);
        hit
    }

    #[inline(always)]
    fn expect(&mut self, byte: u8) -> Option<()> {
        self.eat(byte).then_some(())
    }

    fn object(&mut self, scratch: &mut Scratch) -> Option<PlainJsonSample> {
        let fields = self.object_fields(scratch)?;
        Some(fields.to_sample(scratch))
    }

    /// One sample object: its scalar fields, with the lists read into `scratch` (cleared first, so a
    /// list the object lacks reads as empty).
    fn object_fields(&mut self, scratch: &mut Scratch) -> Option<PlainFields> {
        self.expect(b'{')?;
        self.skip_whitespace();
        scratch.indices.clear();
        scratch.values.clear();
        let mut fields = PlainFields::default();
        if self.eat(b'}') {
            return Some(fields);
        }
        loop {
            let field = self.key()?;
            self.skip_whitespace();
            self.expect(b':')?;
            self.skip_whitespace();
            // A repeated key is a `serde` error ("duplicate field"): leave it to that path.
            match field {
                Field::Label if fields.label.is_none() => fields.label = Some(self.number()?),
                Field::Weight if fields.weight.is_none() => fields.weight = Some(self.number()?),
                Field::Indices if !fields.has_indices => {
                    self.list(&mut scratch.indices, Self::index)?;
                    fields.has_indices = true;
                }
                Field::Values if !fields.has_values => {
                    self.values(scratch)?;
                    fields.has_values = true;
                }
                _ => return None,
            }
            self.skip_whitespace();
            if self.eat(b'}') {
                return Some(fields);
            }
            self.expect(b',')?;
            self.skip_whitespace();
        }
    }

    /// A key without escapes, one of the four plain fields.
    fn key(&mut self) -> Option<Field> {
        self.expect(b'"')?;
        let rest = &self.bytes[self.at..];
        let len = rest.iter().position(|&c| c == b'"' || c == b'\\')?;
        let field = match &rest[..len] {
            b"label" => Field::Label,
            b"indices" => Field::Indices,
            b"values" => Field::Values,
            b"weight" => Field::Weight,
            _ => return None,
        };
        self.at += len;
        self.expect(b'"')?;
        Some(field)
    }

    /// `[item, item, ...]`, collected in `buffer` (cleared first).
    #[inline(always)]
    fn list<T: Copy>(
        &mut self,
        buffer: &mut Vec<T>,
        mut item: impl FnMut(&mut Self) -> Option<T>,
    ) -> Option<()> {
        self.expect(b'[')?;
        self.skip_whitespace();
        buffer.clear();
        if !self.eat(b']') {
            loop {
                buffer.push(item(self)?);
                self.skip_whitespace();
                if self.eat(b']') {
                    break;
                }
                self.expect(b',')?;
                self.skip_whitespace();
            }
        }
        Some(())
    }

    /// The `"values"` list into `scratch.values`. Each number is read as a numerator and a divisor
    /// ([`Cursor::number_parts`]) and all the divisions are done at the end in one loop the compiler
    /// vectorizes, instead of one per number whose latency stalls the digit reading.
    fn values(&mut self, scratch: &mut Scratch) -> Option<()> {
        scratch.divisors.clear();
        let Scratch {
            values, divisors, ..
        } = scratch;
        self.list(values, |c| {
            let (numerator, divisor) = c.number_parts()?;
            divisors.push(divisor);
            Some(numerator)
        })?;
        for (v, d) in values.iter_mut().zip(divisors.iter()) {
            *v /= *d;
        }
        Some(())
    }

    /// Decimal digits onto `acc`, which holds `held` digits; how many were read, `None` if `acc` would
    /// overflow `u64` (where `serde_json` switches method).
    #[inline(always)]
    fn digits(&mut self, acc: &mut u64, held: usize) -> Option<usize> {
        read_digits(self.bytes, &mut self.at, acc, held)
    }

    /// A feature index: `0` or a digit run without a leading zero, below 2^32 (what `serde_json`
    /// reads as a `u32`; a sign, fraction or exponent is left to it).
    #[inline(always)]
    fn index(&mut self) -> Option<u32> {
        let first = self.peek()?;
        let mut acc = 0;
        let digits = self.digits(&mut acc, 0)?;
        if digits == 0 || digits > 10 || (first == b'0' && digits > 1) {
            return None;
        }
        u32::try_from(acc).ok()
    }

    /// A JSON number without exponent, with a significand that fits `u64` and at most 22 fraction
    /// digits, as `serde_json` makes it an `f64` (see the module notes).
    #[inline(always)]
    fn number(&mut self) -> Option<f64> {
        let (numerator, divisor) = self.number_parts()?;
        Some(numerator / divisor)
    }

    /// [`Cursor::number`] as `numerator / divisor`, the quotient left to the caller: `(±m, 10^f)` for a
    /// fraction (IEEE division rounds `-m / p` to exactly `-(m / p)`), `(the value, 1)` otherwise.
    #[inline(always)]
    fn number_parts(&mut self) -> Option<(f64, f64)> {
        let negative = self.eat(b'-');
        let first = self.peek()?;
        let mut significand = 0;
        let integer_digits = self.digits(&mut significand, 0)?;
        if integer_digits == 0 || (first == b'0' && integer_digits > 1) {
            return None;
        }
        let mut fraction_digits = 0;
        if self.eat(b'.') {
            fraction_digits = self.digits(&mut significand, integer_digits)?;
            if fraction_digits == 0 {
                return None;
            }
        }
        let mut exponent = -(fraction_digits as i64);
        if matches!(self.peek(), Some(b'e' | b'E')) {
            exponent += self.exponent()?;
        }
        // serde_json: an integer becomes `u64`/`i64` then `as f64`; otherwise `m as f64` times or over
        // `10^|e|`. Negation commutes with these roundings, and `-0` is `-0.0` either way.
        let power = EXACT_POWERS_OF_TEN.get(exponent.unsigned_abs() as usize)?;
        Some(if exponent >= 0 {
            (with_sign(significand as f64 * power, negative), 1.0)
        } else {
            (with_sign(significand as f64, negative), *power)
        })
    }

    /// `e` or `E`, an optional sign, 1+ digits: the signed exponent, `None` beyond the range where
    /// [`Cursor::number`] can use an exact power anyway.
    fn exponent(&mut self) -> Option<i64> {
        self.at += 1;
        let negative = self.eat(b'-');
        if !negative {
            self.eat(b'+');
        }
        let mut value = 0;
        let digits = self.digits(&mut value, 0)?;
        if digits == 0 || value > 1000 {
            return None;
        }
        Some(if negative {
            -(value as i64)
        } else {
            value as i64
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::ingest::batch::WireSample;

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
        fingerprint(w.label, &w.indices, &w.values, w.weight)
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
                "features" => "{\"a\": 1}".into(),
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
    /// exponent form and long-mantissa cases where serde's conversion is not correctly rounded.
    #[test]
    fn takes_the_common_shapes() {
        let mut scratch = Scratch::default();
        for line in [
            r#"{"label":-1,"indices":[1431, 27773],"values":[-0.8444218515250481, -5.2858625144693133e-5]}"#,
            r#" { "values" : [ 1 , -0 ] , "label" : 0.5 , "indices" : [ 0 , 4294967295 ] , "weight" : 2 } "#,
            r#"{"label":1,"indices":[],"values":[]}"#,
            r#"{"label":1,"values":[9007199254740993, 0.30000000000000004, 12345678901234567890]}"#,
            r#"{}"#,
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
        ] {
            assert!(parse_line(line, &mut scratch).is_none(), "{line}");
        }
    }
}
