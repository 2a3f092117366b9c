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
//! and each item is checked and converted from its known bounds with the SWAR digit routines the
//! LIBSVM reader uses too (`simd::digits`). On CPUs with AVX2 (detected at run time) the runs go
//! through `simd::avx2` instead, which converts two items at once in one SSE register, as the LIBSVM
//! reader's AVX2 path does with a pair.
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

#[cfg(target_arch = "x86_64")]
use crate::ingest::simd::avx2;
use crate::ingest::simd::digits::{
    eight_digits, is_eight_digits, leading_digits, leading_digits_value, load_eight, read_digits,
    with_sign, EXACT_POWERS_OF_TEN, MAX_EXACT_INTEGER,
};
use crate::ingest::simd::{two_byte_mask, zero_padded_block, SEPARATOR_BLOCK};

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

/// One NDJSON line holding one plain sample object (and only JSON whitespace around it): its scalar
/// fields, with its lists left in `scratch` for a caller that copies them straight into a batch.
pub(crate) fn parse_line_fields(line: &str, scratch: &mut Scratch) -> Option<PlainFields> {
    let mut c = Cursor::new(line.as_bytes());
    c.skip_whitespace();
    let fields = c.object_fields(scratch)?;
    c.skip_whitespace();
    c.at_end().then_some(fields)
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
        if avx2::available() {
            // SAFETY: the CPU has the features `avx2::json_plain_indices` enables, checked just above.
            return unsafe { avx2::json_plain_indices(self.bytes, &mut self.at, indices) };
        }
        self.plain_indices_scalar(indices)
    }

    /// [`Cursor::plain_indices`] one item at a time with the SWAR routines: the path of CPUs without
    /// AVX2, and the reference the tests hold the SIMD run to.
    #[inline(always)]
    fn plain_indices_scalar(&mut self, indices: &mut Vec<u32>) -> bool {
        let bytes = self.bytes;
        self.plain_run(|first, end| {
            let Some(word) = load_eight(bytes, first) else {
                return false;
            };
            let digits = leading_digits(word);
            if digits != end - first
                || digits == 0
                || digits > 7
                || (digits > 1 && word as u8 == b'0')
            {
                return false;
            }
            // At most 7 digits: below 10^7 < 2^32.
            indices.push(leading_digits_value(word, digits) as u32);
            true
        })
    }

    /// The loop of the scalar runs: every item from `self.at` (the start of an item) on, its end found
    /// in the separator bits of its block, handed to `take(first, end)` (the item is
    /// `bytes[first..end]`: a leading space belongs to the separator before it), which stores a plain
    /// item and says true, or says false. True if the run reached the list's `]` (consumed); false
    /// with `self.at` on the start of the first item not taken.
    #[inline(always)]
    fn plain_run(&mut self, mut take: impl FnMut(usize, usize) -> bool) -> bool {
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
                // `start <= end < bytes.len()` (separator bits are only set on bytes that exist).
                let first = start + usize::from(bytes[start] == b' ');
                if !take(first, end) {
                    self.at = start;
                    return false;
                }
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
        if avx2::available() {
            // SAFETY: the CPU has the features `avx2::json_plain_values` enables, checked just above.
            return unsafe { avx2::json_plain_values(self.bytes, &mut self.at, values, divisors) };
        }
        self.plain_values_scalar(values, divisors)
    }

    /// [`Cursor::plain_values`] one item at a time with the SWAR routines (see
    /// [`Cursor::plain_indices_scalar`]).
    #[inline(always)]
    fn plain_values_scalar(&mut self, values: &mut Vec<f64>, divisors: &mut Vec<f64>) -> bool {
        let bytes = self.bytes;
        self.plain_run(|first, end| {
            let negative = bytes[first] == b'-';
            // The item's last eight bytes, `d.dddddd` if it is plain (then `end >= first + 8`).
            let word = match end.checked_sub(8) {
                Some(at) if end - first == 8 + usize::from(negative) => load_eight(bytes, at),
                _ => None,
            };
            // With the point replaced by a `0`, a plain item is eight digits reading `d0dddddd`.
            let zeroed = word.map(|w| (w & !0xFF00) | 0x3000);
            let (Some(word), Some(zeroed)) = (word, zeroed) else {
                return false;
            };
            if (word >> 8) as u8 != b'.' || !is_eight_digits(zeroed) {
                return false;
            }
            // `d0dddddd` is `d * 10^7 + f`; the mantissa of `d.dddddd` is `d * 10^6 + f`.
            let mantissa = eight_digits(zeroed) - 9_000_000 * (word & 0x0F);
            // Below 10^7: exact as `i64`, whose conversion is one instruction (`u64`'s is several).
            values.push(with_sign(mantissa as i64 as f64, negative));
            divisors.push(1e6);
            true
        })
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
    return avx2::available();
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

/// Bit `i` set where `block[i]` is `,` or `]`: where the items of a number list end.
#[inline(always)]
fn separator_mask(block: &[u8; SEPARATOR_BLOCK]) -> u64 {
    two_byte_mask(block, b',', b']')
}

#[cfg(test)]
pub(crate) mod tests;
