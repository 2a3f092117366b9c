//! The AVX2 kernels of the fast readers, for x86_64 CPUs with AVX2, BMI1/2 and POPCNT: every function
//! here is compiled for those features, and its callers have checked the CPU for them at run time
//! ([`available`]; each reader dispatches once per line or list). Separators are found 32 bytes per
//! compare, and two numbers of up to eight digits are converted at once in one 16-byte register
//! (simdjson's multiply-add digit trick). Each kernel takes exactly what the scalar code it stands in
//! for takes, to the same bits, and refuses the rest; the readers' tests hold the two to each other.
//!
//! - shared by both readers: [`available`], [`two_byte_mask`], [`two_eight_digit_numbers`] and the
//!   index digit shuffles;
//! - LIBSVM: [`libsvm_pair`], one `index:value` pair's two numbers converted together;
//! - JSON lists: [`json_plain_indices`] and [`json_plain_values`], the plain runs of `json::plain`'s
//!   `"indices"` and `"values"` lists two items at a time, from [`list_separators_at`].

use core::arch::x86_64::{
    __m128d, __m128i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_or_si256,
    _mm256_set1_epi8, _mm_castsi128_pd, _mm_cvtepi32_pd, _mm_cvtsd_f64, _mm_cvtsi128_si32,
    _mm_cvtsi128_si64, _mm_cvtsi64_si128, _mm_div_pd, _mm_madd_epi16, _mm_maddubs_epi16, _mm_or_pd,
    _mm_packus_epi32, _mm_set1_epi16, _mm_set1_epi32, _mm_set1_epi8, _mm_set1_pd, _mm_set_epi64x,
    _mm_setr_epi8, _mm_shuffle_epi8, _mm_srli_epi64, _mm_storeu_pd, _mm_sub_epi8, _mm_subs_epu8,
    _mm_testz_si128,
};

use super::digits::{leading_digits, load_eight};
use super::{zero_padded_block, SEPARATOR_BLOCK as BLOCK};

/// Does this CPU have what the AVX2 readers enable (`avx2,bmi1,bmi2,popcnt`)? (`std` caches the
/// answer.)
#[inline(always)]
pub(crate) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("bmi1")
        && std::arch::is_x86_feature_detected!("bmi2")
        && std::arch::is_x86_feature_detected!("popcnt")
}

/// Bit `i` set where `block[i]` is `first` or `second` (a reader's two separators), 32 bytes per
/// compare.
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
#[inline]
pub(crate) fn two_byte_mask(block: &[u8; BLOCK], first: u8, second: u8) -> u64 {
    let (first, second) = (
        _mm256_set1_epi8(first as i8),
        _mm256_set1_epi8(second as i8),
    );
    let (low, high) = block.split_at(32);
    // SAFETY: unaligned loads of the 32 bytes of each half of the 64-byte block.
    let (low, high) = unsafe {
        (
            _mm256_loadu_si256(low.as_ptr().cast()),
            _mm256_loadu_si256(high.as_ptr().cast()),
        )
    };
    let low = _mm256_or_si256(
        _mm256_cmpeq_epi8(low, first),
        _mm256_cmpeq_epi8(low, second),
    );
    let high = _mm256_or_si256(
        _mm256_cmpeq_epi8(high, first),
        _mm256_cmpeq_epi8(high, second),
    );
    let mask = u64::from(_mm256_movemask_epi8(low) as u32)
        | (u64::from(_mm256_movemask_epi8(high) as u32) << 32);
    // Hidden from the optimizer, which otherwise reads the mask as 64 booleans and rebuilds it bit by
    // bit (about a hundred instructions a block) for the readers' bit scans.
    std::hint::black_box(mask)
}

/// `pshufb` control bytes moving the `n` (1 to 8) digits at the start of the 8 bytes from `offset`
/// (0 or 8) to the top of those 8 bytes, zeros (0x80 clears a byte) below: the same number in 8
/// digits.
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

/// [`index_shuffle`] for every digit count (0 to 8), for the low 8 bytes of a register ...
const INDEX_SHUFFLE_LOW: [u64; 9] = index_shuffles(0);
/// ... and for the high 8.
const INDEX_SHUFFLE_HIGH: [u64; 9] = index_shuffles(8);

const fn index_shuffles(offset: u64) -> [u64; 9] {
    let mut table = [0; 9];
    let mut n = 0;
    while n < 9 {
        table[n] = index_shuffle(n, offset);
        n += 1;
    }
    table
}

/// The two 8-digit numbers of `aligned` (digit values, most significant first in each half):
/// neighbours to 2-digit numbers, then 4-digit ones (32-bit lanes), narrowed to 16 bits and paired
/// into 8-digit ones: the low half's in 32-bit lane 0, the high half's in lane 1.
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
#[inline]
pub(crate) fn two_eight_digit_numbers(aligned: __m128i) -> __m128i {
    let two = _mm_maddubs_epi16(aligned, _mm_set1_epi16(0x010A));
    let four = _mm_madd_epi16(two, _mm_set1_epi32(0x0001_0064));
    let narrowed = _mm_packus_epi32(four, four);
    _mm_madd_epi16(narrowed, _mm_set1_epi32(0x0001_2710))
}

/// `pshufb` controls for the high 8 bytes, entry `9 * width + point`: the value's `width` (1 to 8)
/// bytes there, with a point at byte `point` (or none, `point == width`), become its digits
/// without the point, moved to the top of those 8 bytes with zeros below.
const VALUE_SHUFFLE: [u64; 81] = {
    let mut table = [0x8080_8080_8080_8080u64; 81];
    let mut width = 1;
    while width <= 8 {
        let mut point = 0;
        while point <= width {
            let digits = if point < width { width - 1 } else { width };
            let mut word = 0x8080_8080_8080_8080u64;
            let (mut digit, mut source) = (0, 0);
            while source < width {
                if source != point {
                    let slot = 8 - digits + digit;
                    word = (word & !(0xFF << (8 * slot))) | (((8 + source) as u64) << (8 * slot));
                    digit += 1;
                }
                source += 1;
            }
            table[9 * width + point] = word;
            point += 1;
        }
        width += 1;
    }
    table
};

/// The pair between `space`, `colon` and `end` when its index has 1 to 8 digits and its value
/// is `[-]` then at most 8 bytes of digits with at most one point among them (at least one
/// digit, and 8 more bytes of the line from the value's first digit to load): both numbers are
/// below 10^8, so exact in `u32` and `f64`. The index bytes go to the low half of a register and
/// the value bytes to the high half; one shuffle aligns both digit runs to the right of their
/// halves (the point dropped), one compare checks that every byte taken is a digit, and three
/// multiply-adds make 2-, 4- and 8-digit numbers of both at once. Exactly what `libsvm::structural`'s
/// `pair_index` and `pair_value` give on these pairs; `None` (the scalar reader decides) for any other.
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
#[inline]
pub(crate) fn libsvm_pair(
    line: &[u8],
    space: usize,
    colon: usize,
    end: usize,
) -> Option<(u32, f64, usize)> {
    let index_digits = colon - space - 1;
    let negative = line.get(colon + 1) == Some(&b'-');
    let start = colon + 1 + usize::from(negative);
    // A '-' is not a separator, so `end` is past it.
    let width = end - start;
    let value_word = load_eight(line, start)?;
    let index_word = load_eight(line, space + 1)?;
    if !(1..=8).contains(&index_digits) || !(1..=8).contains(&width) {
        return None;
    }
    let point = leading_digits(value_word);
    let (key, fraction_digits) = if point >= width {
        (9 * width + width, 0)
    } else {
        // The first non-digit must be the point, and a digit must be left besides it.
        if (value_word >> (8 * point)) as u8 != b'.' || width == 1 {
            return None;
        }
        (9 * width + point, width - 1 - point)
    };
    let raw = _mm_set_epi64x(value_word as i64, index_word as i64);
    let digits = _mm_sub_epi8(raw, _mm_set1_epi8(b'0' as i8));
    let shuffle = _mm_set_epi64x(
        VALUE_SHUFFLE[key] as i64,
        INDEX_SHUFFLE_LOW[index_digits] as i64,
    );
    let aligned = _mm_shuffle_epi8(digits, shuffle);
    // Bytes that were not digits are above 9 (those below '0' wrap around); the zeros are fine.
    let above_nine = _mm_subs_epu8(aligned, _mm_set1_epi8(9));
    if _mm_testz_si128(above_nine, above_nine) == 0 {
        return None;
    }
    // Lane 0 the index, lane 1 the value's mantissa.
    let eight = two_eight_digit_numbers(aligned);
    // The mantissa (below 10^8 < 2^31) converted in place, exactly, and signed by its sign bit
    // (exactly IEEE negation, `-0` included): no trip through a general register.
    let magnitude = _mm_cvtepi32_pd(_mm_srli_epi64::<32>(eight));
    let sign = _mm_castsi128_pd(_mm_cvtsi64_si128(i64::from(negative) << 63));
    let signed_mantissa = _mm_cvtsd_f64(_mm_or_pd(magnitude, sign));
    Some((
        _mm_cvtsi128_si32(eight) as u32,
        signed_mantissa,
        fraction_digits,
    ))
}

/// [`libsvm_pair`] for the tests, on a CPU that has the features (`None` elsewhere).
#[cfg(test)]
pub(crate) fn libsvm_pair_checked(
    line: &[u8],
    space: usize,
    colon: usize,
    end: usize,
) -> Option<(u32, f64, usize)> {
    if !available() {
        return None;
    }
    // SAFETY: the CPU has the features, checked just above.
    unsafe { libsvm_pair(line, space, colon, end) }
}

/// The bits of `,` and `]` (where the items of a JSON number list end) in the 64 bytes from `at`, as
/// `json::plain`'s `separators_at` gives them, with two 32-byte compares per block.
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
#[inline]
pub(crate) fn list_separators_at(bytes: &[u8], at: usize) -> Option<u64> {
    let rest = bytes.get(at..).filter(|rest| !rest.is_empty())?;
    Some(match rest.first_chunk::<BLOCK>() {
        Some(block) => list_block_separators(block),
        // The last, partial block: the text's last 64 bytes, their bits shifted down so that
        // bit 0 is `at` (`0 < shift < 64`), the bits past the end clear; no copy.
        None => match bytes.last_chunk::<BLOCK>() {
            Some(last) => list_block_separators(last) >> (BLOCK - rest.len()),
            None => list_block_separators(&zero_padded_block(rest)),
        },
    })
}

/// Bit `i` set where `block[i]` is `,` or `]`.
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
#[inline]
fn list_block_separators(block: &[u8; BLOCK]) -> u64 {
    two_byte_mask(block, b',', b']')
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

/// `json::plain`'s `Cursor::plain_indices_scalar` two items at a time (see there); `at` as
/// `Cursor::at`.
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
pub(crate) fn json_plain_indices(bytes: &[u8], at: &mut usize, indices: &mut Vec<u32>) -> bool {
    let mut start = *at;
    while let Some(mut separators) = list_separators_at(bytes, start) {
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

/// `json::plain`'s `Cursor::plain_values_scalar` two items at a time (see there); `at` as
/// `Cursor::at`.
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
pub(crate) fn json_plain_values(
    bytes: &[u8],
    at: &mut usize,
    values: &mut Vec<f64>,
    divisors: &mut Vec<f64>,
) -> bool {
    let mut start = *at;
    while let Some(mut separators) = list_separators_at(bytes, start) {
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
