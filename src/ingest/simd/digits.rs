//! SWAR digit kernels ("SIMD within a register"): a run of ASCII digits checked and converted eight
//! bytes at a time in one 64-bit word, so a number costs a few multiplies instead of a branch and a
//! multiply-add per digit; with the tables and the sign trick the fast readers build exact values from.
//! Shared by the LIBSVM and JSON fast paths, whose long fractions (`{:?}` of an `f64` writes 17
//! significant digits) made the serial one-digit loop their main cost.

/// The eight bytes at `b[at..]` as a little-endian word (first byte lowest), if there are eight.
#[inline(always)]
pub(crate) fn load_eight(b: &[u8], at: usize) -> Option<u64> {
    let chunk: [u8; 8] = b.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_le_bytes(chunk))
}

/// How many of the bytes of a little-endian `word` are ASCII digits before the first that is not
/// (0 to 8). Each byte's top bit after `+ 0x46` says "above `'9'`" and after `- 0x30` "below `'0'`"
/// (or above 0xBA); carries and borrows only run upward, out of non-digits, so the lowest flagged
/// byte is exactly the first non-digit.
#[inline(always)]
pub(crate) fn leading_digits(word: u64) -> usize {
    let above = word.wrapping_add(0x4646_4646_4646_4646);
    let below = word.wrapping_sub(0x3030_3030_3030_3030);
    ((above | below) & 0x8080_8080_8080_8080).trailing_zeros() as usize / 8
}

/// The value of the first `n` (1 to 8) bytes of `word`, all ASCII digits: they are moved to the top of
/// the word and the bytes below filled with `'0'`, which reads as the same number in eight digits.
#[inline(always)]
pub(crate) fn leading_digits_value(word: u64, n: usize) -> u64 {
    let shift = 8 * (8 - n);
    let zeros_below = 0x3030_3030_3030_3030 & !(u64::MAX << shift);
    eight_digits((word << shift) | zeros_below)
}

/// `10^n` for the digit counts a run of up to 19 digits can have.
pub(crate) const POWERS_OF_TEN_U64: [u64; 20] = {
    let mut powers = [1u64; 20];
    let mut n = 1;
    while n < 20 {
        powers[n] = powers[n - 1] * 10;
        n += 1;
    }
    powers
};

/// Reads the decimal digits at `bytes[*at..]` onto `acc` (`acc = 10 acc + d` each), advancing `*at`;
/// returns how many were read, or `None` once `acc` would overflow `u64`. `held` is how many digits
/// `acc` already holds (so `acc < 10^held`): up to 19 digits cannot overflow, so those take the cheap
/// path, eight at a time where the bytes allow, and only later digits pay for checked arithmetic.
/// Shared by the LIBSVM and JSON fast paths, whose long fractions (`{:?}` of an `f64` writes 17
/// significant digits) made the serial one-digit loop their main cost.
#[inline(always)]
pub(crate) fn read_digits(
    bytes: &[u8],
    at: &mut usize,
    acc: &mut u64,
    held: usize,
) -> Option<usize> {
    // The usual run (a label, an integer part, six fraction digits) is shorter than eight digits and
    // followed by more bytes: read at once, without a branch per digit.
    if held + 8 <= 19 {
        if let Some(word) = load_eight(bytes, *at) {
            let n = leading_digits(word);
            if n < 8 {
                if n > 0 {
                    *acc = *acc * POWERS_OF_TEN_U64[n] + leading_digits_value(word, n);
                    *at += n;
                }
                return Some(n);
            }
        }
    }
    let start = *at;
    let mut i = *at;
    let mut value = *acc;
    let mut held = held;
    while held + 8 <= 19 {
        let Some(chunk) = bytes.get(i..i + 8) else {
            break;
        };
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
        if !is_eight_digits(word) {
            break;
        }
        value = value * 100_000_000 + eight_digits(word);
        i += 8;
        held += 8;
    }
    while let Some(&c) = bytes.get(i) {
        let d = u64::from(c.wrapping_sub(b'0'));
        if d > 9 {
            break;
        }
        value = if held < 19 {
            value * 10 + d
        } else {
            value.checked_mul(10)?.checked_add(d)?
        };
        i += 1;
        held += 1;
    }
    *at = i;
    *acc = value;
    Some(i - start)
}

/// Are all eight bytes of `word` ASCII digits? (Each byte plus 0x46 stays below 0x80 only if it is at
/// most `'9'`, and minus 0x30 does not borrow only if it is at least `'0'`.)
#[inline]
pub(crate) fn is_eight_digits(word: u64) -> bool {
    let above = word.wrapping_add(0x4646_4646_4646_4646);
    let below = word.wrapping_sub(0x3030_3030_3030_3030);
    (above | below) & 0x8080_8080_8080_8080 == 0
}

/// The value of eight ASCII digits loaded little-endian (first digit in the low byte): their digit
/// values, as [`eight_digit_values`] reads them.
#[inline]
pub(crate) fn eight_digits(word: u64) -> u64 {
    eight_digit_values(word - 0x3030_3030_3030_3030)
}

/// `2^53`: every integer up to it is exact in `f64`.
pub(crate) const MAX_EXACT_INTEGER: u64 = 1 << 53;

/// `-magnitude` if `negative`, else `magnitude`, for a `magnitude >= +0.0` (not NaN), without a branch:
/// setting the sign bit is exactly IEEE negation there.
#[inline(always)]
pub(crate) fn with_sign(magnitude: f64, negative: bool) -> f64 {
    f64::from_bits(magnitude.to_bits() | (u64::from(negative) << 63))
}

/// Powers of ten exactly representable as `f64`.
pub(crate) const EXACT_POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// `±mantissa` for a mantissa below 2^52 (the fast paths' are below 10^15), exactly. Not `as f64`:
/// the unsigned conversion takes several instructions on x86_64 without AVX-512, and the signed one
/// (`cvtsi2sd`) only writes the low half of its register, so every conversion waited for whatever
/// last wrote that register, in practice the previous pair's division on lines that mix
/// precisions: one serial chain of divisions. Setting the mantissa into the significand of 2^52
/// and subtracting 2^52 is exact (both are exact in `f64`) and depends on nothing else.
#[inline(always)]
pub(crate) fn signed(mantissa: u64, negative: bool) -> f64 {
    const TWO_POW_52: f64 = 4_503_599_627_370_496.0;
    debug_assert!(mantissa < 1 << 52);
    with_sign(
        f64::from_bits(TWO_POW_52.to_bits() | mantissa) - TWO_POW_52,
        negative,
    )
}

/// The value of the first `n` (1 to 8) bytes of a little-endian `word`, all ASCII digits. Shifting
/// the digit values (bytes minus `'0'`) to the top of the word fills the bytes below with zero
/// digits, which read as the same number in eight digits; subtracting first cannot borrow into the
/// digits, as borrows run upward and every byte below a digit is a digit.
#[inline(always)]
pub(crate) fn first_digits_value(word: u64, n: usize) -> u64 {
    eight_digit_values(word.wrapping_sub(0x3030_3030_3030_3030) << (8 * (8 - n)))
}

/// The number eight digit values (0 to 9, first in the low byte) spell: neighbours paired into
/// 2-digit, then 4-digit, then 8-digit numbers in three multiplies (the SWAR method of fast_float /
/// simdjson).
#[inline(always)]
pub(crate) fn eight_digit_values(v: u64) -> u64 {
    const MASK: u64 = 0x0000_00FF_0000_00FF;
    const MUL1: u64 = 0x000F_4240_0000_0064; // 100 + (1_000_000 << 32)
    const MUL2: u64 = 0x0000_2710_0000_0001; // 1 + (10_000 << 32)
    let v = v.wrapping_mul(10).wrapping_add(v >> 8);
    let v1 = (v & MASK).wrapping_mul(MUL1);
    let v2 = ((v >> 16) & MASK).wrapping_mul(MUL2);
    u64::from((v1.wrapping_add(v2) >> 32) as u32)
}
