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
//! Numbers are correctly rounded, as `serde_json` with its `float_roundtrip` feature (which the crate
//! enables) rounds them, so the two paths agree to the last bit: the digits as an integer `m` (exact
//! while it fits `u64`), then `m as f64 / 10^f` for `f` fraction digits (`f <= 22`, so `10^f` is
//! exact), or `m as f64` for an integer: one rounding while `m <= 2^53`. Beyond (17-digit
//! significands, as shortest-round-trip printers write), the standard library's parser reads the
//! number's text.
//!
//! The two lists hold nearly all the bytes, so their common items have a faster reader of their own
//! (`Cursor::plain_indices`, `Cursor::plain_values`): item ends come from bitmasks of `,` and `]`
//! over 64 bytes at a time (SSE2 on x86_64, a byte loop elsewhere) instead of a digit-by-digit walk,
//! and each item is checked and converted from its known bounds with the SWAR digit routines of the
//! LIBSVM reader. On CPUs with AVX2 (detected at run time) the runs go through `simd` instead, which
//! converts two items at once in one SSE register, as the LIBSVM reader's AVX2 path does with a pair.
//! Those runs take only items that the general loop would read to the same number and hand everything
//! else to it, item by item, so they change speed only.
//!
//! Why a hand-written reader and not a JSON crate: measured against `sonic-rs` 0.5.10 (SIMD JSON,
//! serde), the crate is 3-4x slower on the daemon's bodies, far outside the 15% that would have
//! justified switching. `examples/ingest_cpu.rs` (thread CPU per sample, best of 60, the load
//! generator's 10 000-sample body, 40 nonzeros, hyper's 408 KiB chunks), 5 alternating rounds on
//! 2026-11-25 13:07-13:10 UTC at load average 8.8-10.7, build `4f2c278` plus the comparison rows:
//! NDJSON 504-673 ns/sample here against 1 956-2 209 with sonic-rs (a `DeserializeSeed` appending
//! the lists to reused buffers; ratio 3.28-3.88 per round), JSON array 568-684 against 1 960-2 260
//! (2.92-3.98). Neither `-C target-cpu=native` nor sonic-rs's own document parser closed the gap
//! (its number parsing is most of the cost). Figures, method and the sonic-rs variants:
//! `docs/benchmarks/json.md`.
//!
//! The two paths are held to each other by property tests: `tests::fast_reader_agrees_with_serde`
//! and `tests::plain_runs_agree_with_serde_on_wire_lines` per object, and `batch`'s
//! `fast_readers_change_no_body_outcome` per body (the same samples bit for bit, or the same error
//! with the same line).

use crate::ingest::simd::digits::{
    eight_digits, is_eight_digits, leading_digits, leading_digits_value, load_eight, read_digits,
    with_sign, EXACT_POWERS_OF_TEN, MAX_EXACT_INTEGER,
};
use crate::ingest::simd::{zero_padded_block, SEPARATOR_BLOCK};

/// The fields of one sample object, as the `serde` wire struct would hold them (for the tests).
#[cfg(test)]
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

/// One NDJSON line holding one plain sample object (and only JSON whitespace around it): its scalar
/// fields, with its lists left in `scratch` for a caller that copies them straight into a batch.
pub(crate) fn parse_line_fields(line: &str, scratch: &mut Scratch) -> Option<PlainFields> {
    let mut c = Cursor::new(line.as_bytes());
    c.skip_whitespace();
    let fields = c.object_fields(scratch)?;
    c.skip_whitespace();
    c.at_end().then_some(fields)
}

#[cfg(test)]
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

/// A whole `application/json` body, one array of plain sample objects, read item by item: `each`
/// gets every item's position (0-based), scalar fields and `scratch` (holding its lists) in order.
/// The item count if the whole body is such an array; `None` as soon as something is not (the
/// caller then discards whatever `each` did and lets `serde_json` read the body). No vectors per item:
/// the caller copies each item's lists where they go.
pub(crate) fn parse_array_fields(
    body: &str,
    scratch: &mut Scratch,
    mut each: impl FnMut(usize, PlainFields, &Scratch),
) -> Option<usize> {
    let mut c = Cursor::new(body.as_bytes());
    c.skip_whitespace();
    c.expect(b'[')?;
    c.skip_whitespace();
    let mut items = 0;
    if !c.eat(b']') {
        loop {
            let fields = c.object_fields(scratch)?;
            each(items, fields, scratch);
            items += 1;
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

/// [`parse_array_fields`] collecting the items as wire structs, for the tests' comparison with serde.
#[cfg(test)]
pub(crate) fn parse_array(body: &str, scratch: &mut Scratch) -> Option<Vec<PlainJsonSample>> {
    let mut items = Vec::new();
    parse_array_fields(body, scratch, |n, fields, scratch| {
        assert_eq!(n, items.len());
        items.push(fields.to_sample(scratch));
    })?;
    Some(items)
}

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
                    self.indices(&mut scratch.indices)?;
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
        // The usual key and its closing quote within the next eight bytes: one compare of the word
        // instead of a byte loop to the quote (what that loop would find, for these exact bytes).
        if let Some(word) = load_eight(self.bytes, self.at) {
            let (field, len) = match word {
                w if w == u64::from_le_bytes(*b"indices\"") => (Field::Indices, 8),
                w if w & 0x00FF_FFFF_FFFF_FFFF == u64::from_le_bytes(*b"values\"\0") => {
                    (Field::Values, 7)
                }
                w if w & 0x0000_FFFF_FFFF_FFFF == u64::from_le_bytes(*b"label\"\0\0") => {
                    (Field::Label, 6)
                }
                w if w & 0x00FF_FFFF_FFFF_FFFF == u64::from_le_bytes(*b"weight\"\0") => {
                    (Field::Weight, 7)
                }
                _ => return self.key_after_quote(),
            };
            self.at += len;
            return Some(field);
        }
        self.key_after_quote()
    }

    /// [`Cursor::key`] after its opening quote, byte by byte.
    fn key_after_quote(&mut self) -> Option<Field> {
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

    /// The `"indices"` list into `indices` (cleared first): runs of plain items by
    /// [`Cursor::plain_indices`], anything else one item at a time by [`Cursor::index`].
    fn indices(&mut self, indices: &mut Vec<u32>) -> Option<()> {
        self.expect(b'[')?;
        self.skip_whitespace();
        indices.clear();
        if self.eat(b']') {
            return Some(());
        }
        loop {
            if self.plain_indices(indices) {
                return Some(());
            }
            // On the start of an item the plain run does not take (possibly on the whitespace after
            // its comma): exactly where the general loop below would be.
            self.skip_whitespace();
            indices.push(self.index()?);
            if self.list_closes()? {
                return Some(());
            }
        }
    }

    /// The `"values"` list into `scratch.values`. Each number is read as a numerator and a divisor
    /// ([`Cursor::number_parts`]) and all the divisions are done at the end in one loop the compiler
    /// vectorizes, instead of one per number whose latency stalls the digit reading. Runs of plain
    /// items go through [`Cursor::plain_values`], anything else one item at a time.
    fn values(&mut self, scratch: &mut Scratch) -> Option<()> {
        let Scratch {
            values, divisors, ..
        } = scratch;
        self.expect(b'[')?;
        self.skip_whitespace();
        values.clear();
        divisors.clear();
        // The AVX2 runs store finished values (divided in the register, divisor 1): the loop of
        // divisions is needed only after scalar runs or general items.
        let mut divide = !simd_runs();
        if !self.eat(b']') {
            loop {
                if self.plain_values(values, divisors) {
                    break;
                }
                self.skip_whitespace();
                let (numerator, divisor) = self.number_parts()?;
                values.push(numerator);
                divisors.push(divisor);
                divide = true;
                if self.list_closes()? {
                    break;
                }
            }
        }
        if divide {
            for (v, d) in values.iter_mut().zip(divisors.iter()) {
                *v /= *d;
            }
        }
        Some(())
    }

    /// After a list item: `]` (true, consumed) or `,` and the whitespace after it (false); `None` for
    /// anything else.
    #[inline(always)]
    fn list_closes(&mut self) -> Option<bool> {
        self.skip_whitespace();
        if self.eat(b']') {
            return Some(true);
        }
        self.expect(b',')?;
        self.skip_whitespace();
        Some(false)
    }

    /// Reads the plain indices from `self.at` (the start of an item) on: each a bare run of 1 to 7
    /// digits without a leading zero, after at most one space, followed directly by `,` or `]`. True
    /// if the run reached the list's `]` (consumed); false with `self.at` on the start of the first
    /// item it does not take. It takes exactly what [`Cursor::index`] and [`Cursor::list_closes`]
    /// would, to the same values, so stopping anywhere is only slower, never different.
    ///
    /// Why not the general loop: there the end of one number (found digit by digit) is needed before
    /// the next can start, a chain of dependent steps per item. Here every item's end comes from the
    /// separator bits of a 64-byte block ([`separator_mask`]), so the items of a block are independent
    /// and the processor overlaps them; each is then one load and the SWAR digit routines.
    #[inline(always)]
    fn plain_indices(&mut self, indices: &mut Vec<u32>) -> bool {
        #[cfg(target_arch = "x86_64")]
        if simd::available() {
            // SAFETY: the CPU has the features `simd::plain_indices` enables, checked just above.
            return unsafe { simd::plain_indices(self.bytes, &mut self.at, indices) };
        }
        self.plain_indices_scalar(indices)
    }

    /// [`Cursor::plain_indices`] one item at a time with the SWAR routines: the path of CPUs without
    /// AVX2, and the reference the tests hold the SIMD run to.
    #[inline(always)]
    fn plain_indices_scalar(&mut self, indices: &mut Vec<u32>) -> bool {
        let bytes = self.bytes;
        let mut start = self.at;
        while let Some(mut separators) = separators_at(bytes, start) {
            let block_start = start;
            if separators == 0 {
                break;
            }
            while separators != 0 {
                let end = block_start + separators.trailing_zeros() as usize;
                separators &= separators - 1;
                // `start <= end < bytes.len()` (separator bits are only set on bytes that exist): the
                // item is `bytes[start..end]`, and a leading space belongs to the separator before it.
                let first = start + usize::from(bytes[start] == b' ');
                let Some(word) = load_eight(bytes, first) else {
                    self.at = start;
                    return false;
                };
                let digits = leading_digits(word);
                if digits != end - first
                    || digits == 0
                    || digits > 7
                    || (digits > 1 && word as u8 == b'0')
                {
                    self.at = start;
                    return false;
                }
                // At most 7 digits: below 10^7 < 2^32.
                indices.push(leading_digits_value(word, digits) as u32);
                if bytes[end] == b']' {
                    self.at = end + 1;
                    return true;
                }
                start = end + 1;
            }
        }
        self.at = start;
        false
    }

    /// [`Cursor::plain_indices`] for the `"values"` list: plain items are `d.dddddd` or `-d.dddddd`
    /// (one integer digit, six fraction digits: the load generator's `{:.6}`, the shape almost every
    /// value of a normalized feature has), after at most one space, followed directly by `,` or `]`.
    /// Each is stored as its signed mantissa with divisor `10^6`, exactly what
    /// [`Cursor::number_parts`] gives for it.
    #[inline(always)]
    fn plain_values(&mut self, values: &mut Vec<f64>, divisors: &mut Vec<f64>) -> bool {
        // The AVX2 run divides in the register and stores divisor 1 (see `Cursor::values`).
        #[cfg(target_arch = "x86_64")]
        if simd::available() {
            // SAFETY: the CPU has the features `simd::plain_values` enables, checked just above.
            return unsafe { simd::plain_values(self.bytes, &mut self.at, values, divisors) };
        }
        self.plain_values_scalar(values, divisors)
    }

    /// [`Cursor::plain_values`] one item at a time with the SWAR routines (see
    /// [`Cursor::plain_indices_scalar`]).
    #[inline(always)]
    fn plain_values_scalar(&mut self, values: &mut Vec<f64>, divisors: &mut Vec<f64>) -> bool {
        let bytes = self.bytes;
        let mut start = self.at;
        while let Some(mut separators) = separators_at(bytes, start) {
            let block_start = start;
            if separators == 0 {
                break;
            }
            while separators != 0 {
                let end = block_start + separators.trailing_zeros() as usize;
                separators &= separators - 1;
                let first = start + usize::from(bytes[start] == b' ');
                let negative = bytes[first] == b'-';
                // The item's last eight bytes, `d.dddddd` if it is plain (then `end >= first + 8`).
                let word = match end.checked_sub(8) {
                    Some(at) if end - first == 8 + usize::from(negative) => load_eight(bytes, at),
                    _ => None,
                };
                // With the point replaced by a `0`, a plain item is eight digits reading `d0dddddd`.
                let zeroed = word.map(|w| (w & !0xFF00) | 0x3000);
                let (Some(word), Some(zeroed)) = (word, zeroed) else {
                    self.at = start;
                    return false;
                };
                if (word >> 8) as u8 != b'.' || !is_eight_digits(zeroed) {
                    self.at = start;
                    return false;
                }
                // `d0dddddd` is `d * 10^7 + f`; the mantissa of `d.dddddd` is `d * 10^6 + f`.
                let mantissa = eight_digits(zeroed) - 9_000_000 * (word & 0x0F);
                // Below 10^7: exact as `i64`, whose conversion is one instruction (`u64`'s is several).
                values.push(with_sign(mantissa as i64 as f64, negative));
                divisors.push(1e6);
                if bytes[end] == b']' {
                    self.at = end + 1;
                    return true;
                }
                start = end + 1;
            }
        }
        self.at = start;
        false
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
        let start = self.at;
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
        // Up to 2^53 the significand is exact as an `f64`, and so is `10^|e|` (`|e| <= 22`): one IEEE
        // multiplication or division of exact operands is correctly rounded, as serde_json (with
        // `float_roundtrip`) rounds. Beyond, `m as f64` would round before the scaling does (two
        // roundings, up to one ulp off): the standard library's parser rounds once. An integer
        // becomes `u64` then `as f64` on both paths. Negation commutes with these roundings, and `-0`
        // is `-0.0` either way.
        if significand > MAX_EXACT_INTEGER && (exponent != 0 || fraction_digits != 0) {
            let text = std::str::from_utf8(&self.bytes[start..self.at]).ok()?;
            return Some((text.parse().ok()?, 1.0));
        }
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

/// Do [`Cursor::plain_indices`] and [`Cursor::plain_values`] take the AVX2 path on this CPU?
#[inline(always)]
fn simd_runs() -> bool {
    #[cfg(target_arch = "x86_64")]
    return simd::available();
    #[cfg(not(target_arch = "x86_64"))]
    return false;
}

/// The separator bits ([`separator_mask`]) of the 64 bytes from `at`; past the end of `bytes` (the
/// last block of a line) the bits are clear, so a list that ends its line runs plain to its `]` too.
/// `None` from the end of `bytes` on.
#[inline(always)]
fn separators_at(bytes: &[u8], at: usize) -> Option<u64> {
    let rest = bytes.get(at..).filter(|rest| !rest.is_empty())?;
    Some(match rest.first_chunk::<SEPARATOR_BLOCK>() {
        Some(block) => separator_mask(block),
        None => separator_mask(&zero_padded_block(rest)),
    })
}

/// Bit `i` set where `block[i]` is `,` or `]`: where the items of a number list end. Four 16-byte
/// compares with SSE2 (baseline on x86_64, so no feature detection), instead of a branch per byte.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn separator_mask(block: &[u8; 64]) -> u64 {
    use core::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    let mut mask = 0;
    for (k, chunk) in block.chunks_exact(16).enumerate() {
        // SAFETY: the intrinsics need SSE2, which every x86_64 processor has (it is in the target's
        // baseline); the load reads the 16 bytes of `chunk` (`chunks_exact(16)`), and `loadu` has no
        // alignment requirement.
        let hits = unsafe {
            let v = _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>());
            let comma = _mm_cmpeq_epi8(v, _mm_set1_epi8(b',' as i8));
            let close = _mm_cmpeq_epi8(v, _mm_set1_epi8(b']' as i8));
            _mm_movemask_epi8(_mm_or_si128(comma, close))
        };
        mask |= u64::from(hits as u16) << (16 * k);
    }
    mask
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn separator_mask(block: &[u8; 64]) -> u64 {
    separator_mask_portable(block)
}

/// [`separator_mask`] byte by byte: the other targets' version, and the reference in the tests.
#[cfg(any(test, not(target_arch = "x86_64")))]
fn separator_mask_portable(block: &[u8; 64]) -> u64 {
    block.iter().enumerate().fold(0, |mask, (i, &b)| {
        mask | (u64::from(b == b',' || b == b']') << i)
    })
}

/// The plain runs with AVX2 (runtime-detected, as the LIBSVM reader's `structural::simd`): separator
/// masks from two 32-byte compares per block, and two items converted at once in one SSE register, the
/// first item in the low 8 bytes and the next in the high 8. Each run takes exactly the items (and
/// stops exactly where) [`Cursor::plain_indices_scalar`] and [`Cursor::plain_values_scalar`] do.
#[cfg(target_arch = "x86_64")]
mod simd {
    use core::arch::x86_64::{
        __m128d, __m128i, _mm_castsi128_pd, _mm_cvtepi32_pd, _mm_cvtsi128_si64, _mm_div_pd,
        _mm_madd_epi16, _mm_maddubs_epi16, _mm_or_pd, _mm_packus_epi32, _mm_set1_epi16,
        _mm_set1_epi32, _mm_set1_epi8, _mm_set1_pd, _mm_set_epi64x, _mm_setr_epi8,
        _mm_shuffle_epi8, _mm_storeu_pd, _mm_sub_epi8, _mm_subs_epu8, _mm_testz_si128,
    };

    use super::{load_eight, zero_padded_block};
    use crate::ingest::simd::SEPARATOR_BLOCK as BLOCK;

    /// Does this CPU have what the functions here enable?
    pub(super) use crate::ingest::simd::avx2::available;

    /// `super::separators_at` with two 32-byte compares per block.
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
    #[inline]
    pub(super) fn separators_at(bytes: &[u8], at: usize) -> Option<u64> {
        let rest = bytes.get(at..).filter(|rest| !rest.is_empty())?;
        Some(match rest.first_chunk::<BLOCK>() {
            Some(block) => block_separators(block),
            // The last, partial block: the text's last 64 bytes, their bits shifted down so that
            // bit 0 is `at` (`0 < shift < 64`), the bits past the end clear; no copy.
            None => match bytes.last_chunk::<BLOCK>() {
                Some(last) => block_separators(last) >> (BLOCK - rest.len()),
                None => block_separators(&zero_padded_block(rest)),
            },
        })
    }

    /// Bit `i` set where `block[i]` is `,` or `]`.
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
    #[inline]
    pub(super) fn block_separators(block: &[u8; BLOCK]) -> u64 {
        crate::ingest::simd::avx2::two_byte_mask(block, b',', b']')
    }

    /// `pshufb` control bytes moving the `n` (1 to 7) digits at the start of the 8 bytes from
    /// `offset` (0 or 8) to the top of those 8 bytes, zeros (0x80) below: the same number in 8 digits.
    const fn index_shuffle(n: usize, offset: u64) -> u64 {
        let mut word = 0x8080_8080_8080_8080u64;
        let mut digit = 0;
        while digit < n {
            let slot = 8 - n + digit;
            word = (word & !(0xFF << (8 * slot))) | ((digit as u64 + offset) << (8 * slot));
            digit += 1;
        }
        word
    }

    const INDEX_SHUFFLE_LOW: [u64; 8] = {
        let mut table = [0; 8];
        let mut n = 0;
        while n < 8 {
            table[n] = index_shuffle(n, 0);
            n += 1;
        }
        table
    };

    const INDEX_SHUFFLE_HIGH: [u64; 8] = {
        let mut table = [0; 8];
        let mut n = 0;
        while n < 8 {
            table[n] = index_shuffle(n, 8);
            n += 1;
        }
        table
    };

    /// The two 8-digit numbers of `aligned` (digit values, most significant first in each half):
    /// neighbours to 2-digit numbers, then 4-digit ones (32-bit lanes), narrowed to 16 bits and paired
    /// into 8-digit ones: the low half's in 32-bit lane 0, the high half's in lane 1.
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
    #[inline]
    fn two_eight_digit_numbers(aligned: __m128i) -> __m128i {
        let two = _mm_maddubs_epi16(aligned, _mm_set1_epi16(0x010A));
        let four = _mm_madd_epi16(two, _mm_set1_epi32(0x0001_0064));
        let narrowed = _mm_packus_epi32(four, four);
        _mm_madd_epi16(narrowed, _mm_set1_epi32(0x0001_2710))
    }

    /// The plain index items `bytes[s0..e0]` and `bytes[s1..e1]` (ends on a separator): each 1 to 7
    /// digits, no leading zero, after at most one space, with 8 bytes to load from its first digit;
    /// both values (item 0 in the low 32 bits), `None` if either is not plain.
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
    #[inline]
    fn two_indices(bytes: &[u8], s0: usize, e0: usize, s1: usize, e1: usize) -> Option<u64> {
        // `s <= e < bytes.len()`, and a space is not a separator, so `first <= e`.
        let f0 = s0 + usize::from(bytes[s0] == b' ');
        let f1 = s1 + usize::from(bytes[s1] == b' ');
        let (n0, n1) = (e0 - f0, e1 - f1);
        let w0 = load_eight(bytes, f0)?;
        let w1 = load_eight(bytes, f1)?;
        if !(1..=7).contains(&n0)
            || !(1..=7).contains(&n1)
            || (n0 > 1 && w0 as u8 == b'0')
            || (n1 > 1 && w1 as u8 == b'0')
        {
            return None;
        }
        let digits = _mm_sub_epi8(
            _mm_set_epi64x(w1 as i64, w0 as i64),
            _mm_set1_epi8(b'0' as i8),
        );
        let shuffle = _mm_set_epi64x(INDEX_SHUFFLE_HIGH[n1] as i64, INDEX_SHUFFLE_LOW[n0] as i64);
        let aligned = _mm_shuffle_epi8(digits, shuffle);
        // Bytes that were not digits are above 9 (those below '0' wrap around); the zeros are fine.
        let above_nine = _mm_subs_epu8(aligned, _mm_set1_epi8(9));
        if _mm_testz_si128(above_nine, above_nine) == 0 {
            return None;
        }
        // At most 7 digits each: below 10^7, so the 32-bit lanes hold them exactly.
        Some(_mm_cvtsi128_si64(two_eight_digit_numbers(aligned)) as u64)
    }

    /// `Cursor::plain_indices_scalar` two items at a time (see there); `at` as `Cursor::at`.
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
    pub(super) fn plain_indices(bytes: &[u8], at: &mut usize, indices: &mut Vec<u32>) -> bool {
        let mut start = *at;
        while let Some(mut separators) = separators_at(bytes, start) {
            let block_start = start;
            if separators == 0 {
                break;
            }
            while separators != 0 {
                let end = block_start + separators.trailing_zeros() as usize;
                separators &= separators - 1;
                // The next item too, if it is in this block and this one does not close the list;
                // otherwise this one twice, one of them dropped.
                let pair = separators != 0 && bytes[end] == b',';
                let (next_start, next_end) = if pair {
                    (end + 1, block_start + separators.trailing_zeros() as usize)
                } else {
                    (start, end)
                };
                let last = match two_indices(bytes, start, end, next_start, next_end) {
                    Some(both) => {
                        indices.push(both as u32);
                        if pair {
                            indices.push((both >> 32) as u32);
                            separators &= separators - 1;
                        }
                        next_end
                    }
                    // The second may be the one not taken: the first alone, then stop on the second.
                    None => match two_indices(bytes, start, end, start, end) {
                        Some(one) if pair => {
                            indices.push(one as u32);
                            *at = end + 1;
                            return false;
                        }
                        _ => {
                            *at = start;
                            return false;
                        }
                    },
                };
                if bytes[last] == b']' {
                    *at = last + 1;
                    return true;
                }
                start = last + 1;
            }
        }
        *at = start;
        false
    }

    /// Subtracted from a `d.dddddd` item's bytes: digit values, and a zero where the point was.
    const VALUE_BASE: [u8; 16] = *b"0.0000000.000000";
    /// The largest each byte may be after [`VALUE_BASE`]: 9 for a digit, 0 for the point.
    const VALUE_LIMIT: [u8; 16] = [9, 0, 9, 9, 9, 9, 9, 9, 9, 0, 9, 9, 9, 9, 9, 9];

    /// The plain value items `bytes[s0..e0]` and `bytes[s1..e1]` (ends on a separator): each
    /// `[-]d.dddddd` after at most one space; their values (item 0 in the low lane): the signed
    /// mantissa (exact, below 10^7) over `10^6`, one correctly rounded division, exactly what
    /// `Cursor::values` makes of the scalar run's mantissa and divisor. `None` if either is not plain.
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
    #[inline]
    fn two_values(bytes: &[u8], s0: usize, e0: usize, s1: usize, e1: usize) -> Option<__m128d> {
        // `s <= e < bytes.len()`, and neither a space nor a '-' is a separator, so `first <= e`.
        let f0 = s0 + usize::from(bytes[s0] == b' ');
        let f1 = s1 + usize::from(bytes[s1] == b' ');
        let (negative0, negative1) = (bytes[f0] == b'-', bytes[f1] == b'-');
        if e0 - f0 != 8 + usize::from(negative0) || e1 - f1 != 8 + usize::from(negative1) {
            return None;
        }
        // The items' last eight bytes (`e >= f + 8`), `d.dddddd` if they are plain.
        let w0 = load_eight(bytes, e0 - 8)?;
        let w1 = load_eight(bytes, e1 - 8)?;
        // SAFETY: unaligned loads of the two 16-byte constants.
        let (base, limit) = unsafe {
            (
                core::ptr::read_unaligned(VALUE_BASE.as_ptr().cast::<__m128i>()),
                core::ptr::read_unaligned(VALUE_LIMIT.as_ptr().cast::<__m128i>()),
            )
        };
        let digits = _mm_sub_epi8(_mm_set_epi64x(w1 as i64, w0 as i64), base);
        let excess = _mm_subs_epu8(digits, limit);
        if _mm_testz_si128(excess, excess) == 0 {
            return None;
        }
        // The integer digit and the six fraction digits, moved to the top of each half.
        let aligned = _mm_shuffle_epi8(
            digits,
            _mm_setr_epi8(-128, 0, 2, 3, 4, 5, 6, 7, -128, 8, 10, 11, 12, 13, 14, 15),
        );
        // Converted in place, exactly, and signed by the sign bit (IEEE negation, `-0` included).
        let magnitudes = _mm_cvtepi32_pd(two_eight_digit_numbers(aligned));
        let signs = _mm_castsi128_pd(_mm_set_epi64x(
            (u64::from(negative1) << 63) as i64,
            (u64::from(negative0) << 63) as i64,
        ));
        // IEEE division rounds `-m / p` to exactly `-(m / p)`, so signing first changes nothing.
        Some(_mm_div_pd(_mm_or_pd(magnitudes, signs), _mm_set1_pd(1e6)))
    }

    /// Appends the low lane of `two` (and the high one if `both`) to `values`, and as many `1` to
    /// `divisors` (the values are finished); both have room for two more (reserved per block).
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
    #[inline]
    fn push_values(values: &mut Vec<f64>, divisors: &mut Vec<f64>, two: __m128d, both: bool) {
        let (values_len, divisors_len) = (values.len(), divisors.len());
        let added = 1 + usize::from(both);
        debug_assert!(values.capacity() >= values_len + 2);
        debug_assert!(divisors.capacity() >= divisors_len + 2);
        // SAFETY: both vectors have room for two more (reserved before each block, which has at most
        // `BLOCK` items, so `BLOCK + 2` covers them all); each store writes those two slots, and the
        // lengths grow over only the `added` ones written.
        unsafe {
            _mm_storeu_pd(values.as_mut_ptr().add(values_len), two);
            _mm_storeu_pd(divisors.as_mut_ptr().add(divisors_len), _mm_set1_pd(1.0));
            values.set_len(values_len + added);
            divisors.set_len(divisors_len + added);
        }
    }

    /// `Cursor::plain_values_scalar` two items at a time (see there); `at` as `Cursor::at`.
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
    pub(super) fn plain_values(
        bytes: &[u8],
        at: &mut usize,
        values: &mut Vec<f64>,
        divisors: &mut Vec<f64>,
    ) -> bool {
        let mut start = *at;
        while let Some(mut separators) = separators_at(bytes, start) {
            let block_start = start;
            if separators == 0 {
                break;
            }
            values.reserve(BLOCK + 2);
            divisors.reserve(BLOCK + 2);
            while separators != 0 {
                let end = block_start + separators.trailing_zeros() as usize;
                separators &= separators - 1;
                let pair = separators != 0 && bytes[end] == b',';
                let (next_start, next_end) = if pair {
                    (end + 1, block_start + separators.trailing_zeros() as usize)
                } else {
                    (start, end)
                };
                let last = match two_values(bytes, start, end, next_start, next_end) {
                    Some(two) => {
                        push_values(values, divisors, two, pair);
                        if pair {
                            separators &= separators - 1;
                        }
                        next_end
                    }
                    None => match two_values(bytes, start, end, start, end) {
                        Some(one) if pair => {
                            push_values(values, divisors, one, false);
                            *at = end + 1;
                            return false;
                        }
                        _ => {
                            *at = start;
                            return false;
                        }
                    },
                };
                if bytes[last] == b']' {
                    *at = last + 1;
                    return true;
                }
                start = last + 1;
            }
        }
        *at = start;
        false
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::ingest::json::WireSample;

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
        if !simd::available() {
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
                    separator_mask_portable(&block)
                });
                // SAFETY: the CPU has the features, checked above.
                let got = unsafe { simd::separators_at(&text, at) };
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
            assert_eq!(separator_mask(&block), separator_mask_portable(&block));
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
}
