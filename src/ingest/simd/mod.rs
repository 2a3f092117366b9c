//! The byte-level kernels of the fast readers (`libsvm::structural`, `json::plain`): separator masks
//! over 64-byte blocks, and digit runs checked and converted without a branch per byte. Kernels only:
//! bytes in, bits or numbers out; no allocation of their own, no scheduling, no reader state. Every
//! reader that uses them keeps a general path that decides whatever they refuse.
//!
//! - here: the block size of the separator masks, the zero-padded last block, and a vectorised byte
//!   count;
//! - [`digits`]: SWAR digit routines (eight ASCII digits checked and converted in one 64-bit word,
//!   the method of fast_float and simdjson), the exact powers of ten and the branch-free sign.

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2;
pub(crate) mod digits;

/// Bytes per separator block of the SIMD readers (`structural`, `json_plain`): one 64-bit mask.
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
