//! AVX2 building blocks shared by the LIBSVM reader (`structural.rs`) and the JSON reader
//! (`json_plain.rs`). x86_64 only; every caller has checked the CPU's features at run time (the
//! readers' `is_x86_feature_detected!` dispatch) and is itself compiled for them.

use core::arch::x86_64::{
    _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_or_si256, _mm256_set1_epi8,
};

use super::SEPARATOR_BLOCK as BLOCK;

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
