//! The byte-level kernels of the fast readers (`libsvm::structural`, `json::plain`): separator masks
//! over 64-byte blocks, and digit runs checked and converted without a branch per byte. Kernels only:
//! bytes in, bits or numbers out; no allocation of their own, no scheduling, no reader state. Every
//! reader that uses them keeps a general path that decides whatever they refuse.
//!
//! - here: the separator masks of 64-byte blocks (SSE2, part of x86_64 itself, or byte by byte
//!   elsewhere), the zero-padded last block, and a vectorised byte count;
//! - [`digits`]: SWAR digit routines (eight ASCII digits checked and converted in one 64-bit word,
//!   the method of fast_float and simdjson), the exact powers of ten and the branch-free sign;
//! - `avx2`: the same jobs with AVX2 for CPUs that have it (checked at run time by each reader), and
//!   the readers' AVX2 number conversions: a LIBSVM pair, two JSON list items at a time.

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2;
pub(crate) mod digits;

/// Bytes per separator block of the SIMD readers (`libsvm::structural`, `json::plain`): one 64-bit mask.
pub(crate) const SEPARATOR_BLOCK: usize = 64;

/// `rest` (a line's last bytes, fewer than a block) at the start of a block padded with zeros, which
/// no reader takes for a separator: the readers' last, partial block.
#[inline(always)]
pub(crate) fn zero_padded_block(rest: &[u8]) -> [u8; SEPARATOR_BLOCK] {
    let mut block = [0; SEPARATOR_BLOCK];
    let n = rest.len().min(SEPARATOR_BLOCK);
    block[..n].copy_from_slice(&rest[..n]);
    block
}

/// How many times `needle` occurs in `haystack`. Counted per 255-byte chunk in a `u8` so the loop
/// vectorizes to byte compares and adds (a plain `filter().count()` widens every byte to 64 bits).
pub(crate) fn count_byte(haystack: &[u8], needle: u8) -> usize {
    haystack
        .chunks(255)
        .map(|chunk| {
            chunk
                .iter()
                .fold(0u8, |n, &c| n.wrapping_add(u8::from(c == needle))) as usize
        })
        .sum()
}

/// Bit `i` set where `block[i]` is `first` or `second` (a reader's two separators), 16 bytes per SSE2
/// compare (SSE2 is part of x86_64 itself, so no feature detection) instead of a branch per byte.
/// Inlined into each reader with its two bytes as constants.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn two_byte_mask(block: &[u8; SEPARATOR_BLOCK], first: u8, second: u8) -> u64 {
    use core::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    let mut mask = 0u64;
    for (n, chunk) in block.chunks_exact(16).enumerate() {
        // SAFETY: SSE2 is enabled on every x86_64 target, so these intrinsics are available; the
        // unaligned load reads the 16 bytes of `chunk`, which `chunks_exact(16)` guarantees exist.
        let bits = unsafe {
            let bytes = _mm_loadu_si128(chunk.as_ptr().cast());
            let firsts = _mm_cmpeq_epi8(bytes, _mm_set1_epi8(first as i8));
            let seconds = _mm_cmpeq_epi8(bytes, _mm_set1_epi8(second as i8));
            _mm_movemask_epi8(_mm_or_si128(firsts, seconds))
        };
        mask |= u64::from(bits as u16) << (16 * n);
    }
    mask
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub(crate) fn two_byte_mask(block: &[u8; SEPARATOR_BLOCK], first: u8, second: u8) -> u64 {
    two_byte_mask_portable(block, first, second)
}

/// [`two_byte_mask`] one byte at a time (the compiler vectorizes what it can): the other targets'
/// version, and the reference in the tests.
#[cfg(any(test, not(target_arch = "x86_64")))]
pub(crate) fn two_byte_mask_portable(block: &[u8; SEPARATOR_BLOCK], first: u8, second: u8) -> u64 {
    block.iter().enumerate().fold(0, |mask, (i, &b)| {
        mask | (u64::from(b == first || b == second) << i)
    })
}
