//! The structural fast path for LIBSVM lines: where every separator is found first, by a byte-parallel
//! scan, and every `index:value` pair is then read from its own known boundaries.
//!
//! Why this shape: a one-pass reader finds each token's start from the previous token's digit count
//! (load, classify, count, add, load again, three times a pair), a serial dependency chain that leaves
//! the core waiting on latency. Here a line is scanned 64 bytes at a time for its
//! separators (`' '` and `':'`, compared 16 bytes at a time with SSE2 on x86_64), their offsets are
//! written to a small buffer (the simdjson "structural index"), and pair `k` is read from
//! `(space, colon, next space)`: no pair waits for the one before it, so the out-of-order core
//! overlaps them. The buffer holds one window of a few blocks at a time, so a line of any length
//! is read with a fixed amount of stack and no allocation.
//!
//! It accepts only the exact shape a writer produces: a plain label, then `index:value` pairs each
//! after exactly one space, with at most one trailing space. Every byte of the line is checked: the
//! separators by the scan and the byte checks, everything between them by the digit checks of the
//! token readers. Tabs, double spaces, comments, `qid`, `+` signs, exponents and the rest make it
//! return `None`, and the caller then runs the general parser (`super::parse_libsvm_general`): this
//! is LIBSVM's one fast path, and that its one general path. Tokens of the usual sizes (indices up
//! to 7 digits, values `[-]d{1,7}[.d{1,8}]`) are read with one 8-byte load per digit run; longer or
//! odder ones within this shape by the token readers here (`plain_index`, `plain_decimal`), whose
//! values are `from_str`'s bits.
//!
//! On x86_64 CPUs with AVX2 (detected at run time) the same loop runs compiled for AVX2, with the
//! separators found 32 bytes per compare and each pair's index and value digits converted together
//! in one 16-byte register (`simd::avx2::libsvm_pair`); pairs outside its shape fall back to the
//! scalar token readers, and the tests check both readers against each other and the general parser.
//! The two pair readers are one path (one loop, one set of lines taken, the same bits): AVX2 where
//! the CPU has it, the scalar one elsewhere (on the load generator's body the scalar reader costs
//! 1.16-1.38x the AVX2 one; `docs/benchmarks/json.md`).

use crate::ingest::simd::digits::{
    first_digits_value, leading_digits, leading_digits_value, load_eight, read_digits, signed,
    with_sign, EXACT_POWERS_OF_TEN, MAX_EXACT_INTEGER, POWERS_OF_TEN_U64,
};
use crate::ingest::simd::{two_byte_mask, zero_padded_block, SEPARATOR_BLOCK};

/// Bytes scanned per separator mask (one bit per byte).
const BLOCK: usize = SEPARATOR_BLOCK;

/// Bytes whose separators are gathered before the pairs among them are read: small enough that the
/// offset buffer is cheap to set up on every line, large enough that the per-window loop exits
/// (one mispredicted branch each) are rare.
const WINDOW: usize = 4 * BLOCK;

/// The offset buffer, set up on every line, so no larger than a line of the plain shape needs: its
/// separators are at least two bytes apart (`1:1 2:1`), so a window holds at most `WINDOW / 2`, plus
/// the two carried over from the window before and the slack of [`gather`]'s unconditional writes.
/// A denser line (runs of spaces or colons) overflows it, and [`gather`] gives up on it: such a line
/// is not of the plain shape anyway.
const CAPACITY: usize = WINDOW / 2 + 2 + 32;

/// Reads a whole line of the plain shape, appending its pairs to `indices`/`values` and returning the
/// label; `None` (possibly with pairs already appended: the caller truncates) for any other line.
///
/// On x86_64 CPUs with AVX2 (checked at run time) the line is read by [`avx2::structural_pairs_avx2`],
/// the same loop with the pairs' digits converted in vector registers; elsewhere by the scalar
/// readers below. Both give the same pairs, the same bits, and refuse the same lines.
#[inline(always)]
pub(super) fn structural_pairs(
    line: &[u8],
    indices: &mut Vec<u32>,
    values: &mut Vec<f64>,
) -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    if avx2::available() {
        // SAFETY: `available` has just checked that this CPU has the features the function enables.
        return unsafe { avx2::structural_pairs_avx2(line, indices, values) };
    }
    structural_pairs_with(ScalarReader, line, indices, values)
}

/// How one pair and one block's separators are read: by scalar SWAR code ([`ScalarReader`]) or with
/// SIMD (`avx2::Avx2Reader`). The loop of [`structural_pairs_with`] is the same for both.
trait PairReader: Copy {
    /// Bit `i` set iff `line[at + i]` is a space or a colon (see [`separator_mask`]).
    fn separator_mask(self, line: &[u8], at: usize) -> u64;

    /// The pair between the separators at `space` and `colon` that ends at `end` (the next separator
    /// or the end of the line), exactly as [`pair_index`] and [`pair_value`] read it; `None` where
    /// they refuse it.
    fn pair(self, line: &[u8], space: usize, colon: usize, end: usize) -> Option<Pair>;
}

/// A pair as read: `(index, ±mantissa, fraction digits)`.
type Pair = (u32, f64, usize);

/// The portable reader: 8-byte SWAR loads per digit run.
#[derive(Clone, Copy)]
struct ScalarReader;

impl PairReader for ScalarReader {
    #[inline(always)]
    fn separator_mask(self, line: &[u8], at: usize) -> u64 {
        separator_mask(line, at)
    }

    #[inline(always)]
    fn pair(self, line: &[u8], space: usize, colon: usize, end: usize) -> Option<Pair> {
        let index = pair_index(line, space + 1, colon)?;
        let (signed_mantissa, fraction_digits) = pair_value(line, colon + 1, end)?;
        Some((index, signed_mantissa, fraction_digits))
    }
}

/// [`structural_pairs`] with the scalar reader whatever the CPU (the tests compare the two).
#[cfg(test)]
fn structural_pairs_scalar(
    line: &[u8],
    indices: &mut Vec<u32>,
    values: &mut Vec<f64>,
) -> Option<f64> {
    structural_pairs_with(ScalarReader, line, indices, values)
}

/// The body of [`structural_pairs`] for one reader.
#[inline(always)]
fn structural_pairs_with<R: PairReader>(
    reader: R,
    line: &[u8],
    indices: &mut Vec<u32>,
    values: &mut Vec<f64>,
) -> Option<f64> {
    // The label is one token, read once per line by the serial reader: it ends at whitespace or at
    // the end of the line, and only a single space may follow it here.
    let (label, label_end) = plain_decimal(line, 0)?;
    let len = line.len();
    if label_end == len {
        return Some(label);
    }
    // Offsets are kept as `u32` to keep the buffer small; a line of 4 GiB is not this path's business.
    if line[label_end] != b' ' || len > (u32::MAX as usize) - WINDOW {
        return None;
    }
    let mut pairs = Pairs::new(indices.len());
    let mut separators = [0u32; CAPACITY];
    // The label's space is the first separator found: every pair then starts at an even slot.
    let (mut held, mut scan) = (0, label_end);
    loop {
        let window_end = len.min(scan + WINDOW);
        while scan < window_end {
            held = gather(
                reader.separator_mask(line, scan),
                scan as u32,
                &mut separators,
                held,
            )?;
            scan += BLOCK;
        }
        // Pair `k` spans separators `2k` (a space), `2k + 1` (its colon) and `2k + 2` (the next space):
        // read every pair whose end is known, independently of each other.
        let mut k = 0;
        while k + 2 < held {
            let (space, colon, end) = (separators[k], separators[k + 1], separators[k + 2]);
            pairs.stage(reader, line, space as usize, colon as usize, end as usize)?;
            k += 2;
        }
        if scan >= len {
            match held - k {
                2 => {
                    let (space, colon) = (separators[k], separators[k + 1]);
                    pairs.stage(reader, line, space as usize, colon as usize, len)?;
                }
                // A trailing space (checked to be a space as the previous pair's end).
                1 if separators[k] as usize == len - 1 => {}
                _ => return None,
            }
            pairs.finish(indices, values);
            return Some(label);
        }
        pairs.flush(indices, values);
        separators.copy_within(k..held, 0);
        held -= k;
    }
}

/// The most pairs of the plain shape one window can end: each spans at least four bytes (`1:1 `).
/// A line with more goes back to the caller (`Pairs::stage` refuses it).
const WINDOW_PAIRS: usize = WINDOW / 4 + 2;

/// The pairs of one line: staged a window at a time in fixed arrays (plain stores, where pushing onto
/// the columns one by one reloads and checks their length and capacity for every pair), then
/// appended to the columns, with the order check and the deferred division.
struct Pairs {
    /// Where this line's values start in the columns.
    first: usize,
    /// The smallest index the next pair may have (indices strictly increase).
    next_index: u64,
    /// Values are read as signed mantissas `m` with `f` fraction digits and become `m / 10^f` in
    /// loops over whole arrays that the compiler vectorizes, not one division per pair: on lines that
    /// mix precisions (writers that drop trailing zeros), scalar divisions one after another were
    /// the reader's bottleneck. A line of one precision (the usual writer) divides once at its end;
    /// once a line mixes them (`mixed`), each window is divided by its own divisors when it is
    /// appended, and what the columns already held of the line (one precision) by that one.
    shared_fraction_digits: Option<usize>,
    mixed: bool,
    /// The values of this line already in the columns are divided.
    columns_divided: bool,
    staged: usize,
    indices: [u32; WINDOW_PAIRS],
    mantissas: [f64; WINDOW_PAIRS],
    divisors: [f64; WINDOW_PAIRS],
}

impl Pairs {
    fn new(first: usize) -> Pairs {
        Pairs {
            first,
            next_index: 0,
            shared_fraction_digits: None,
            mixed: false,
            columns_divided: false,
            staged: 0,
            indices: [0; WINDOW_PAIRS],
            mantissas: [0.0; WINDOW_PAIRS],
            divisors: [1.0; WINDOW_PAIRS],
        }
    }

    /// Reads and stages the pair between the separators at `space` and `colon` that ends at `end`
    /// (the next separator, or the end of the line); `None` if that is not a plain pair, or its index
    /// is not above the one before.
    #[inline(always)]
    fn stage<R: PairReader>(
        &mut self,
        reader: R,
        line: &[u8],
        space: usize,
        colon: usize,
        end: usize,
    ) -> Option<()> {
        // The scan only says "space or colon": the kinds must alternate. (`space` was checked as the
        // previous pair's `end`, or is the label's.)
        if line[colon] != b':' || line.get(end).is_some_and(|&b| b != b' ') {
            return None;
        }
        let (index, signed_mantissa, fraction_digits) = reader.pair(line, space, colon, end)?;
        if u64::from(index) < self.next_index {
            return None;
        }
        self.next_index = u64::from(index) + 1;
        let shared = *self.shared_fraction_digits.get_or_insert(fraction_digits);
        self.mixed |= fraction_digits != shared;
        let slot = self.staged;
        *self.indices.get_mut(slot)? = index;
        *self.mantissas.get_mut(slot)? = signed_mantissa;
        *self.divisors.get_mut(slot)? = *EXACT_POWERS_OF_TEN.get(fraction_digits)?;
        self.staged = slot + 1;
        Some(())
    }

    /// Appends the staged pairs to the columns.
    fn flush(&mut self, indices: &mut Vec<u32>, values: &mut Vec<f64>) {
        let staged = self.staged;
        indices.extend_from_slice(&self.indices[..staged]);
        if self.mixed {
            if !self.columns_divided {
                let shared = self.shared_fraction_digits.unwrap_or(0);
                divide_by_power_of_ten(&mut values[self.first..], shared);
                self.columns_divided = true;
            }
            for (m, d) in self.mantissas[..staged]
                .iter_mut()
                .zip(&self.divisors[..staged])
            {
                *m /= *d;
            }
        }
        values.extend_from_slice(&self.mantissas[..staged]);
        self.staged = 0;
    }

    /// The last window's pairs, and the deferred division of a line whose values share one precision.
    fn finish(&mut self, indices: &mut Vec<u32>, values: &mut Vec<f64>) {
        self.flush(indices, values);
        if let (Some(f), false) = (self.shared_fraction_digits, self.mixed) {
            divide_by_power_of_ten(&mut values[self.first..], f);
        }
    }
}

/// The index in `line[start..colon]`: up to 7 digits from one load, checked to be digits up to the
/// colon; anything else by [`plain_index`], which must stop exactly at the colon.
#[inline(always)]
fn pair_index(line: &[u8], start: usize, colon: usize) -> Option<u32> {
    let digits = colon - start;
    match load_eight(line, start) {
        // At most 7 digits: below 10^7 < 2^32.
        Some(word) if (1..8).contains(&digits) && leading_digits(word) == digits => {
            Some(first_digits_value(word, digits) as u32)
        }
        _ => match plain_index(line, start)? {
            (index, stop) if stop == colon => Some(index),
            _ => None,
        },
    }
}

/// The value in `line[start..end]` as `(±mantissa, fraction digits)`, exactly as
/// `plain_decimal_parts` gives it. A value of at most nine bytes after its sign (`-0.846699`,
/// `0.0809336`, `1`) is read from one load and a byte: the point is squeezed out, leaving at most 8
/// digits to check and convert at once, the same instructions whatever the width (writers that trim
/// trailing zeros mix widths 7 to 9 at random, which branches on the width would mispredict). Up to 7 + 8 digits take one load per digit run; both stay below
/// 10^15 < 2^53, so the mantissa is exact. Anything else goes to `plain_decimal_parts`, which must
/// stop exactly at `end`.
#[inline(always)]
fn pair_value(line: &[u8], start: usize, end: usize) -> Option<(f64, usize)> {
    // `start <= end`, and `end` is a space or the end of the line, so a '-' here is inside the token.
    let negative = line.get(start) == Some(&b'-');
    let digits_start = start + usize::from(negative);
    let width = end - digits_start;
    if let Some(word) = load_eight(line, digits_start) {
        let integer_digits = leading_digits(word);
        if (1..8).contains(&integer_digits) {
            if integer_digits == width {
                return Some((signed(first_digits_value(word, width), negative), 0));
            }
            let after_integer = (word >> (8 * integer_digits)) as u8;
            if width <= 9 && after_integer == b'.' && integer_digits + 1 < width {
                // The bytes above the point move down one place over it, the ninth byte (if the
                // value has one) into the top.
                let ninth = u64::from(line.get(digits_start + 8).copied().unwrap_or(0));
                let below_point = (1u64 << (8 * integer_digits)) - 1;
                let digits = (word & below_point) | (((word >> 8) | (ninth << 56)) & !below_point);
                let total = width - 1;
                if leading_digits(digits) >= total {
                    let mantissa = first_digits_value(digits, total);
                    return Some((signed(mantissa, negative), total - integer_digits));
                }
            } else if after_integer == b'.' && (1..=8).contains(&(width - integer_digits - 1)) {
                let fraction_digits = width - integer_digits - 1;
                if let Some(fraction) = load_eight(line, digits_start + integer_digits + 1) {
                    if leading_digits(fraction) >= fraction_digits {
                        let mantissa = first_digits_value(word, integer_digits)
                            * POWERS_OF_TEN_U64[fraction_digits]
                            + first_digits_value(fraction, fraction_digits);
                        return Some((signed(mantissa, negative), fraction_digits));
                    }
                }
            }
        }
    }
    match plain_decimal_parts(line, start)? {
        (signed_mantissa, fraction_digits, stop) if stop == end => {
            Some((signed_mantissa, fraction_digits))
        }
        _ => None,
    }
}

/// A bare-digit index at `b[at..]` (1 to 10 digits, below 2^32) and the offset just past it; `None` for
/// anything else, including what `u32::from_str` would still accept (`+7`, long runs of leading zeros).
/// Up to seven digits followed by at least one more byte (every index but a line's last, in practice)
/// are read in one go by [`leading_digits`], without a branch per digit to mispredict.
#[inline(always)]
fn plain_index(b: &[u8], at: usize) -> Option<(u32, usize)> {
    if let Some(word) = load_eight(b, at) {
        let n = leading_digits(word);
        if n == 0 {
            return None;
        }
        if n < 8 {
            // At most 7 digits: below 10^7 < 2^32.
            return Some((leading_digits_value(word, n) as u32, at + n));
        }
    }
    let mut acc: u64 = 0;
    let mut i = at;
    while let Some(&c) = b.get(i) {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        if i - at == 10 {
            return None;
        }
        acc = acc * 10 + u64::from(d);
        i += 1;
    }
    if i == at || acc > u64::from(u32::MAX) {
        return None;
    }
    Some((acc as u32, i))
}

/// A plain decimal `[+-]digits[.digits]` at `b[at..]` ending at whitespace or the end of the line, and
/// the offset just past it, converted by Clinger's fast path: when the digits read as an integer `m`
/// are at most 2^53 and there are at most 22 fraction digits `f`, both `m` and `10^f` are exact in
/// `f64`, so the single correctly rounded division `m / 10^f` is the correctly rounded value, bit for
/// bit what `f64::from_str` gives. `None` for anything else (exponents, `inf`, `m > 2^53`, more than
/// 22 fraction digits, a token that goes on with other bytes).
#[inline(always)]
fn plain_decimal(b: &[u8], at: usize) -> Option<(f64, usize)> {
    let (signed_mantissa, fraction_digits, end) = plain_decimal_parts(b, at)?;
    Some((signed_mantissa / EXACT_POWERS_OF_TEN[fraction_digits], end))
}

/// [`plain_decimal`] before its division: `±m` (exact in `f64`), the fraction digit count `f` (at most
/// 22) and the end offset. Dividing the signed mantissa is the same as signing the quotient: IEEE
/// division rounds `-m / p` to exactly `-(m / p)`, and `-0.0 / p` is `-0.0`.
#[inline(always)]
fn plain_decimal_parts(b: &[u8], at: usize) -> Option<(f64, usize, usize)> {
    // The sign of feature values is a coin flip, so it is read without a branch to mispredict.
    let first = b.get(at).copied().unwrap_or(0);
    let negative = first == b'-';
    let mut i = at + usize::from(negative || first == b'+');
    // Leading zeros (`0.000123`) leave the mantissa small, so only its overflow ends the fast path.
    let mut mantissa: u64 = 0;
    // One integer digit before the point (`0.123456`, `-1.5`) is the usual shape: read it directly.
    let integer_digits = match (b.get(i), b.get(i + 1)) {
        (Some(&d @ b'0'..=b'9'), Some(&b'.')) => {
            mantissa = u64::from(d - b'0');
            i += 1;
            1
        }
        _ => read_digits(b, &mut i, &mut mantissa, 0)?,
    };
    let mut fraction_digits = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        fraction_digits = read_digits(b, &mut i, &mut mantissa, integer_digits)?;
    }
    if integer_digits + fraction_digits == 0
        || mantissa > MAX_EXACT_INTEGER
        || fraction_digits >= EXACT_POWERS_OF_TEN.len()
    {
        return None;
    }
    if b.get(i).is_some_and(|c| !c.is_ascii_whitespace()) {
        return None;
    }
    Some((with_sign(mantissa as f64, negative), fraction_digits, i))
}

/// `v <- v / 10^f` for every value (exact mantissas, so each is the correctly rounded decimal).
#[inline(always)]
fn divide_by_power_of_ten(values: &mut [f64], f: usize) {
    let power = EXACT_POWERS_OF_TEN[f];
    for v in values {
        *v /= power;
    }
}

/// Appends the offsets of the set bits of `mask` (separators of the block at `base`) to
/// `separators[held..]` and returns the new count. Sixteen slots are written whatever the count (the
/// usual block holds about eight separators), so the usual block costs no data-dependent branch;
/// slots past the count hold junk that is never read. `None` if the buffer is too small, which
/// [`CAPACITY`] rules out for lines of the plain shape.
#[inline(always)]
fn gather(
    mut mask: u64,
    base: u32,
    separators: &mut [u32; CAPACITY],
    held: usize,
) -> Option<usize> {
    let end = held + mask.count_ones() as usize;
    let mut at = held;
    loop {
        for slot in separators.get_mut(at..at + 16)? {
            *slot = base + mask.trailing_zeros();
            mask &= mask.wrapping_sub(1);
        }
        at += 16;
        if at >= end {
            return Some(end);
        }
    }
}

/// Bit `i` set iff `line[at + i]` is a space or a colon, for the 64 bytes from `at` (fewer at the end
/// of the line: the bits past it are clear).
#[inline(always)]
fn separator_mask(line: &[u8], at: usize) -> u64 {
    match line.get(at..).and_then(<[u8]>::first_chunk::<BLOCK>) {
        Some(block) => block_separators(block),
        None => block_separators(&zero_padded_block(line.get(at..).unwrap_or(&[]))),
    }
}

/// The separator mask of one block: its spaces and colons.
#[inline(always)]
fn block_separators(block: &[u8; BLOCK]) -> u64 {
    two_byte_mask(block, b' ', b':')
}

/// The AVX2 reader: the loop of [`structural_pairs_with`] compiled for AVX2, with the separators found
/// 32 bytes per compare and each pair's index and value digits converted together in one 16-byte
/// register ([`libsvm_pair`], simdjson's multiply-add digit trick) instead of two scalar SWAR
/// conversions and the value's point squeezed out by shifts.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{structural_pairs_with, Pair, PairReader, ScalarReader, BLOCK};
    use crate::ingest::simd::avx2::{libsvm_pair, two_byte_mask};
    use crate::ingest::simd::zero_padded_block;

    /// Does this CPU have what [`structural_pairs_avx2`] enables?
    pub(super) use crate::ingest::simd::avx2::available;

    /// [`super::structural_pairs`] compiled for AVX2 (and BMI1/2 and POPCNT: the variable shifts, bit
    /// scans and separator counts of the loop; without POPCNT, LLVM took the masks apart bit by bit
    /// to count them), with the [`Avx2Reader`].
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
    pub(super) fn structural_pairs_avx2(
        line: &[u8],
        indices: &mut Vec<u32>,
        values: &mut Vec<f64>,
    ) -> Option<f64> {
        structural_pairs_with(Avx2Reader(()), line, indices, values)
    }

    /// Made only inside [`structural_pairs_avx2`] (the field is private), so holding one proves
    /// the CPU has the features its methods' callees enable.
    #[derive(Clone, Copy)]
    pub(super) struct Avx2Reader(());

    impl PairReader for Avx2Reader {
        #[inline(always)]
        fn separator_mask(self, line: &[u8], at: usize) -> u64 {
            // SAFETY: an `Avx2Reader` exists only on a CPU with these features (see the type).
            unsafe { separator_mask_avx2(line, at) }
        }

        #[inline(always)]
        fn pair(self, line: &[u8], space: usize, colon: usize, end: usize) -> Option<Pair> {
            // SAFETY: as in `separator_mask`.
            match unsafe { libsvm_pair(line, space, colon, end) } {
                Some(pair) => Some(pair),
                None => ScalarReader.pair(line, space, colon, end),
            }
        }
    }

    /// `super::separator_mask` with two 32-byte compares per block.
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
    #[inline]
    fn separator_mask_avx2(line: &[u8], at: usize) -> u64 {
        match line.get(at..).and_then(<[u8]>::first_chunk::<BLOCK>) {
            Some(block) => two_byte_mask(block, b' ', b':'),
            None => two_byte_mask(
                &zero_padded_block(line.get(at..).unwrap_or(&[])),
                b' ',
                b':',
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::ingest::libsvm::tests::{libsvm_outcome, near_plain_line};
    use crate::ingest::libsvm::{parse_libsvm_general, parse_libsvm_line};
    use crate::sample::Sample;

    /// The structural reader alone, appending after a sentinel pair: what it appends (`None` if it
    /// refuses the line), and proof that it never touches what the columns held before.
    /// On CPUs with AVX2 that is the SIMD reader, checked here against the scalar one: the same
    /// pairs, bits and refusals.
    fn structural_sample(line: &[u8]) -> Option<Sample> {
        let sample = structural_sample_with(structural_pairs, line);
        let scalar = structural_sample_with(structural_pairs_scalar, line);
        assert_eq!(
            sample.clone().map(|s| libsvm_outcome(Ok(s))),
            scalar.map(|s| libsvm_outcome(Ok(s))),
            "{line:?}"
        );
        sample
    }

    /// A line reader appending to the columns and returning the label.
    type Reader = fn(&[u8], &mut Vec<u32>, &mut Vec<f64>) -> Option<f64>;

    fn structural_sample_with(reader: Reader, line: &[u8]) -> Option<Sample> {
        let (mut indices, mut values) = (vec![u32::MAX], vec![-7.5]);
        let label = reader(line, &mut indices, &mut values);
        assert_eq!((indices[0], values[0]), (u32::MAX, -7.5), "{line:?}");
        assert_eq!(indices.len(), values.len(), "{line:?}");
        Some(Sample {
            indices: indices[1..].to_vec(),
            values: values[1..].to_vec(),
            label: label?,
            weight: None,
        })
    }

    /// On every line the structural reader takes, it gives exactly the general parser's sample (same
    /// bits); every line goes through `parse_libsvm_line` to the general parser's outcome; and the
    /// reader does take the plain shape, trailing space included.
    #[test]
    fn structural_reader_matches_the_general_parser() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(23);
        let (lines, mut taken) = (20_000, 0);
        for _ in 0..lines {
            let line = near_plain_line(&mut rng);
            let general = libsvm_outcome(parse_libsvm_general(&line));
            assert_eq!(
                libsvm_outcome(parse_libsvm_line(&line)),
                general,
                "{line:?}"
            );
            if let Some(sample) = structural_sample(line.as_bytes()) {
                assert_eq!(libsvm_outcome(Ok(sample)), general, "{line:?}");
                taken += 1;
            }
        }
        assert!(
            taken > lines / 3,
            "the structural reader took only {taken} of {lines} lines"
        );
        for line in [
            "1",
            "-1 ",
            "1 7:0.5",
            "1 7:0.5 ",
            "1 0:-0 3:12 9:-0.846699 10:1234567.12345678 4294967295:1",
            // The SIMD reader's edges: 8-digit indices and values, the point first and last, zeros.
            "1 12345678:12345678 23456789:-1234567. 34567890:.1234567 99999999:-.9999999 \
             100000000:0.000000 100000001:-00.00001 100000002:7 100000003:-0",
            "-1 1:1.5 22:-22.25 333:333.125 4444:-4444.0625 55555:0.0000001 666666:9999999 \
             7777777:-9.9 88888888:5. 88888889:-5. 88888890:.5 88888891:+1 88888892:+0.25",
            "0.25 21491:0.240142 11144999:-0.1 123456789:0.0000000000000000001",
        ] {
            let sample = structural_sample(line.as_bytes()).expect(line);
            assert_eq!(
                libsvm_outcome(Ok(sample)),
                libsvm_outcome(parse_libsvm_general(line)),
                "{line}"
            );
        }
        for line in [
            "",
            " 1 7:1",
            "1  7:1",
            "1 7:1  ",
            "1\t7:1",
            "1 7:1\t",
            "1 7:1 # c",
            "1 7:1:2",
            "1 7 8:1",
            "1 7: 8:1",
            "1 :1",
            "1 7:1 7:2",
            "1 4294967296:1",
            "1 +7:1",
            "1 7:1e3",
            "1:2",
            "1 7:-",
            "1 7:.",
            "1 7:-.",
            "1 7:1.2.3 8:1",
            "1 7:1..2 8:1",
            "1 7:--1 8:1",
            "1 7:-+1 8:1",
            "1 7:1-1 8:1",
            "1 7:1.-1 8:1",
            "1 7a:1 8:1",
            "1 a7:1 8:1",
            "1 7:0.5/ 8:1",
            "1 7:0.5\u{7f} 8:1",
            "1 7:0.5\u{0} 8:1",
        ] {
            assert!(structural_sample(line.as_bytes()).is_none(), "{line:?}");
        }
    }

    /// Random bytes, mostly the line alphabet: the structural reader never panics, and whatever it
    /// takes the general parser reads the same way.
    #[test]
    fn structural_reader_survives_random_bytes() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(29);
        for _ in 0..20_000 {
            let len = rng.gen_range(0..200);
            let bytes: Vec<u8> = (0..len)
                .map(|_| match rng.gen_range(0..20) {
                    0 => rng.gen(),
                    1..=3 => b' ',
                    4 | 5 => b':',
                    6 => b'.',
                    7 => b'-',
                    _ => b'0' + rng.gen_range(0..10),
                })
                .collect();
            let sample = structural_sample(&bytes);
            if let (Some(sample), Ok(line)) = (sample, std::str::from_utf8(&bytes)) {
                assert_eq!(
                    libsvm_outcome(Ok(sample)),
                    libsvm_outcome(parse_libsvm_general(line)),
                    "{line:?}"
                );
            }
        }
    }

    /// Every pair the AVX2 pair reader takes (index and value of every width around its limits,
    /// the point anywhere, signs, junk bytes, the line ending right after the pair or going on) it
    /// reads exactly as the scalar reader does; and it does take the pairs of its shape.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_pairs_match_the_scalar_reader() {
        if !avx2::available() {
            return;
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(41);
        let (mut taken, tries) = (0, 200_000);
        for _ in 0..tries {
            let token = |rng: &mut rand_chacha::ChaCha8Rng, alphabet: &[u8], len: usize| {
                (0..len)
                    .map(|_| {
                        if rng.gen_range(0..30) == 0 {
                            alphabet[rng.gen_range(0..alphabet.len())] as char
                        } else {
                            (b'0' + rng.gen_range(0..10)) as char
                        }
                    })
                    .collect::<String>()
            };
            let index_len = rng.gen_range(0..11);
            let index = token(&mut rng, b"+-.ax/", index_len);
            let sign = ["", "", "-", "+"][rng.gen_range(0..4)];
            let digits_len = rng.gen_range(0..11);
            let mut digits = token(&mut rng, b"+-.ex/\x7f", digits_len);
            if !digits.is_empty() && rng.gen_range(0..3) > 0 {
                let point = rng.gen_range(0..=digits.len());
                digits.insert(point, '.');
            }
            let value = format!("{sign}{digits}");
            let rest = ["", " 9:1", " 123456789:0.5 7:1"][rng.gen_range(0..3)];
            let line = format!("1 {index}:{value}{rest}");
            let (space, colon) = (1, 2 + index.len());
            let end = colon + 1 + value.len();
            let simd =
                crate::ingest::simd::avx2::libsvm_pair_checked(line.as_bytes(), space, colon, end);
            if let Some((i, m, f)) = simd {
                let scalar = ScalarReader.pair(line.as_bytes(), space, colon, end);
                assert_eq!(
                    Some((i, m.to_bits(), f)),
                    scalar.map(|(i, m, f)| (i, m.to_bits(), f)),
                    "{line:?}"
                );
                taken += 1;
            }
        }
        assert!(
            taken > tries / 10,
            "the AVX2 reader took only {taken} of {tries}"
        );
    }

    #[test]
    fn separator_masks_agree_with_the_portable_scan() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        for _ in 0..2000 {
            let mut block = [0u8; BLOCK];
            for b in &mut block {
                *b = [b' ', b':', b'1', b'.', b'\t', 0xff, 0x80 | b' '][rng.gen_range(0..7)];
            }
            assert_eq!(
                block_separators(&block),
                crate::ingest::simd::two_byte_mask_portable(&block, b' ', b':')
            );
        }
        #[cfg(target_arch = "x86_64")]
        if avx2::available() {
            for _ in 0..2000 {
                let mut block = [0u8; BLOCK];
                for b in &mut block {
                    *b = [b' ', b':', b'1', b'.', b'\t', 0xff, 0x80 | b' '][rng.gen_range(0..7)];
                }
                // SAFETY: the CPU has the features, checked just above.
                let simd = unsafe { crate::ingest::simd::avx2::two_byte_mask(&block, b' ', b':') };
                assert_eq!(
                    simd,
                    crate::ingest::simd::two_byte_mask_portable(&block, b' ', b':')
                );
            }
        }
        let line = b"1 2:3 4:5";
        assert_eq!(separator_mask(line, 0), 0b1010_1010);
        assert_eq!(separator_mask(line, 3), 0b1_0101);
    }
}
