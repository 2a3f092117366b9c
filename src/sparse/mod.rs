//! Sparse linear-algebra kernels: the inner loops every solver spends its time in.
//!
//! All kernels are plain `f64` loops over borrowed slices; none allocates. A sample row is a pair of
//! parallel slices (`indices`, `values`) with strictly increasing indices; weight vectors are dense
//! `&[f64]` of length `d` (the largest feature index seen plus one).
//!
//! `hard_threshold` is the operator `H_k` of the DIHT paper (dual-iht.md, Sec. 2, "w(alpha) = H_k(w~)"):
//! keep the `k` entries largest in magnitude, zero the rest.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// `x . w` for a sparse row `x` and a dense `w`.
///
/// Indices beyond `w.len()` contribute zero: a feature the model has never seen has weight 0.
#[inline]
pub fn sparse_dot(indices: &[u32], values: &[f64], w: &[f64]) -> f64 {
    let mut acc = 0.0;
    for (&j, &v) in indices.iter().zip(values) {
        if let Some(&wj) = w.get(j as usize) {
            acc += v * wj;
        }
    }
    acc
}

/// `w . x` for a sparse row `x` and a `w` that is zero outside the bits set in `mask` (bit `j % 64` of
/// word `j / 64`; `mask` must cover every index of the row): the same sum as [`sparse_dot`], bit for
/// bit, with `w` read only where its bit is set, so the 8d-byte `w` is only read on the support and
/// the d/8-byte mask stays in cache.
///
/// Branch-free: a term off the mask adds `v * 0.0 = ±0.0`, which leaves the accumulator unchanged
/// (it starts at `+0.0` and can never become `-0.0`), exactly as skipping it (or adding
/// `v * w_j = ±0.0`, as `sparse_dot` does) would. Whether a nonzero hits the support is a coin flip
/// the branch predictor loses; the select costs nothing.
#[inline]
pub fn masked_dot(indices: &[u32], values: &[f64], w: &[f64], mask: &[u64]) -> f64 {
    let mut acc = 0.0;
    for (&j, &v) in indices.iter().zip(values) {
        let j = j as usize;
        // All ones on the mask, else zero: off the mask, `w[0]` (cached) is read instead of `w[j]`
        // and its bits are cleared to `+0.0` (integer masking, which the compiler cannot turn back
        // into a branch).
        let keep = 0u64.wrapping_sub((mask[j / 64] >> (j % 64)) & 1);
        let w_j = w.get(j & keep as usize).map_or(0, |x| x.to_bits()) & keep;
        acc += v * f64::from_bits(w_j);
    }
    acc
}

/// Asks the CPU to bring `v[j]` into cache ahead of a read-modify-write (a hint: no effect on any
/// value; nothing on other targets or out of bounds). For scatters into d-vectors far larger than the
/// cache, where each update is otherwise a miss waited for in turn.
#[inline(always)]
pub fn prefetch(v: &[f64], j: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(x) = v.get(j) {
        // SAFETY: a prefetch never faults and changes no memory; the address is an element of `v`.
        unsafe {
            std::arch::x86_64::_mm_prefetch(
                (x as *const f64).cast::<i8>(),
                std::arch::x86_64::_MM_HINT_T0,
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (v, j);
}

/// `y += a x` for a sparse row `x` and a dense `y` (indices must be `< y.len()`).
#[inline]
pub fn sparse_axpy(a: f64, indices: &[u32], values: &[f64], y: &mut [f64]) {
    for (&j, &v) in indices.iter().zip(values) {
        y[j as usize] += a * v;
    }
}

/// Squared Euclidean norm of a sparse row.
#[inline]
pub fn sparse_sq_norm(values: &[f64]) -> f64 {
    values.iter().map(|v| v * v).sum()
}

/// Reusable buffers for [`hard_threshold`], so the hot loop never allocates.
#[derive(Debug, Default, Clone)]
pub struct ThresholdScratch {
    order: Vec<u32>,
    /// Nonzero magnitudes, contiguous, for the quickselect path.
    magnitudes: Vec<f64>,
    /// The `k` best entries seen so far, worst on top: `Reverse((|v| bits, Reverse(index)))`.
    heap: BinaryHeap<Reverse<(u64, Reverse<u32>)>>,
    /// [`top_k_of_pairs`]'s heap (the same order, carrying each value's bits) and its result.
    pair_heap: BinaryHeap<Reverse<(u64, Reverse<u32>, u64)>>,
    pairs: Vec<(u32, f64)>,
}

/// Up to this `k / d` ratio one pass with a `k`-element heap beats quickselect over all nonzeros.
const HEAP_MAX_K_FRACTION: usize = 16;

/// `H_k`: writes into `out` the `k` entries of `dense` largest in magnitude (all others zero) and
/// into `support` their indices in ascending order.
///
/// Ties are broken deterministically: among equal magnitudes the lower index wins. Exact zeros are
/// never selected, so the support can be smaller than `k` when `dense` has fewer than `k` nonzeros.
/// NaN entries are treated as zero. For `k <= d / 16` one pass keeps the `k` best entries in a heap
/// (O(d + k log k), and almost every entry costs one comparison with the current k-th magnitude);
/// otherwise expected O(d) by quickselect (`select_nth_unstable_by`). Both give the same result.
pub fn hard_threshold(
    dense: &[f64],
    k: usize,
    out: &mut Vec<f64>,
    support: &mut Vec<u32>,
    scratch: &mut ThresholdScratch,
) {
    out.clear();
    out.resize(dense.len(), 0.0);
    support.clear();
    select_top_k(dense, k, scratch);
    for &j in scratch.order.iter() {
        out[j as usize] = dense[j as usize];
    }
    support.extend_from_slice(&scratch.order);
}

/// [`hard_threshold`] for a caller that keeps `out` paired with `support` from call to call (as this
/// function leaves them: `out` zero outside `support`). Only the previous support is cleared, O(k)
/// instead of O(d) — the streaming learner thresholds a d = 2^20 vector several times per step.
/// If `out.len() != dense.len()` it is rebuilt from scratch.
pub fn hard_threshold_paired(
    dense: &[f64],
    k: usize,
    out: &mut Vec<f64>,
    support: &mut Vec<u32>,
    scratch: &mut ThresholdScratch,
) {
    if out.len() == dense.len() {
        for &j in support.iter() {
            out[j as usize] = 0.0;
        }
    } else {
        out.clear();
        out.resize(dense.len(), 0.0);
    }
    support.clear();
    select_top_k(dense, k, scratch);
    for &j in scratch.order.iter() {
        out[j as usize] = dense[j as usize];
    }
    support.extend_from_slice(&scratch.order);
}

/// The indices (ascending) of the `k` entries of `dense` largest in magnitude: the support
/// [`hard_threshold`] picks (nonzero, not NaN, ties → lower index).
pub fn top_k_indices<'a>(dense: &[f64], k: usize, scratch: &'a mut ThresholdScratch) -> &'a [u32] {
    select_top_k(dense, k, scratch);
    &scratch.order
}

/// [`top_k_indices`] over `(index, value)` pairs with distinct indices in any order, by the same total
/// order (magnitude, then lower index); the kept pairs come back ascending by index. Why: `H_k` of a
/// vector that differs from a known one on a set `C` of coordinates is the top k of (the top k of the
/// coordinates outside `C`) ∪ `C`, so a caller that tries several values on `C` pays one dense pass,
/// then O(|C|) per try.
pub fn top_k_of_pairs(
    pairs: impl Iterator<Item = (u32, f64)>,
    k: usize,
    scratch: &mut ThresholdScratch,
) -> &[(u32, f64)] {
    let (heap, kept) = (&mut scratch.pair_heap, &mut scratch.pairs);
    heap.clear();
    kept.clear();
    if k == 0 {
        return kept;
    }
    for (j, v) in pairs {
        let m = v.abs();
        #[allow(clippy::neg_cmp_op_on_partial_ord)]
        if !(m > 0.0) {
            continue;
        }
        // The value rides along; it never decides a comparison, indices being distinct.
        let entry = Reverse((m.to_bits(), Reverse(j), v.to_bits()));
        if heap.len() < k {
            heap.push(entry);
        } else if let Some(mut worst) = heap.peek_mut() {
            // `Reverse` flips the order: a better entry compares *less* than the worst kept one.
            if entry < *worst {
                *worst = entry;
            }
        }
    }
    kept.extend(
        heap.drain()
            .map(|Reverse((_, Reverse(j), v))| (j, f64::from_bits(v))),
    );
    kept.sort_unstable_by_key(|&(j, _)| j);
    kept
}

/// Leaves in `scratch.order` the indices of the `k` entries of `dense` largest in magnitude (nonzero,
/// not NaN; ties → lower index), ascending.
fn select_top_k(dense: &[f64], k: usize, scratch: &mut ThresholdScratch) {
    let order = &mut scratch.order;
    order.clear();
    if k == 0 {
        return;
    }
    if k.saturating_mul(HEAP_MAX_K_FRACTION) <= dense.len() {
        let heap = &mut scratch.heap;
        heap.clear();
        // Magnitude bits of the worst kept entry; an entry must beat it strictly, since every later
        // entry has a higher index and loses ties.
        let mut worst = 0u64;
        for (c, chunk) in dense.chunks(SCAN_CHUNK).enumerate() {
            // Once the heap is full almost no entry beats the k-th magnitude: a chunk whose largest
            // magnitude does not is skipped after a branch-free max the compiler vectorizes.
            if heap.len() == k && largest_magnitude(chunk) <= f64::from_bits(worst) {
                continue;
            }
            for (o, v) in chunk.iter().enumerate() {
                let j = c * SCAN_CHUNK + o;
                let m = v.abs();
                // `!(m > 0)` skips zeros and NaN; for non-negative floats the bit pattern orders as the
                // value.
                #[allow(clippy::neg_cmp_op_on_partial_ord)]
                if !(m > 0.0) {
                    continue;
                }
                let bits = m.to_bits();
                if heap.len() < k {
                    heap.push(Reverse((bits, Reverse(j as u32))));
                    if heap.len() == k {
                        worst = heap.peek().map_or(0, |e| e.0 .0);
                    }
                } else if bits > worst {
                    if let Some(mut top) = heap.peek_mut() {
                        *top = Reverse((bits, Reverse(j as u32)));
                    }
                    worst = heap.peek().map_or(0, |e| e.0 .0);
                }
            }
        }
        order.extend(heap.drain().map(|Reverse((_, Reverse(j)))| j));
        order.sort_unstable();
    } else {
        // Quickselect the k-th magnitude on a contiguous copy (no indirection through an index array),
        // then one scan in index order keeps everything above it and the lowest-indexed ties.
        let magnitudes = &mut scratch.magnitudes;
        magnitudes.clear();
        // `> 0.0` drops zeros and NaN.
        magnitudes.extend(dense.iter().map(|v| v.abs()).filter(|m| *m > 0.0));
        let (threshold, mut ties_to_keep) = if magnitudes.len() <= k {
            (0.0, usize::MAX)
        } else {
            let descending =
                |a: &f64, b: &f64| b.partial_cmp(a).unwrap_or(std::cmp::Ordering::Equal);
            let (above, kth, _) = magnitudes.select_nth_unstable_by(k - 1, descending);
            let kth = *kth;
            (kth, k - above.iter().filter(|m| **m > kth).count())
        };
        for (j, v) in dense.iter().enumerate() {
            let m = v.abs();
            if m > threshold {
                order.push(j as u32);
            } else if m == threshold && m > 0.0 && ties_to_keep > 0 {
                ties_to_keep -= 1;
                order.push(j as u32);
            }
        }
        // The scan leaves `order` ascending.
    }
}

/// Entries per chunk of [`select_top_k`]'s skip test (512 bytes).
const SCAN_CHUNK: usize = 64;

/// The largest `|v|` in `chunk`, NaN ignored (so a chunk of NaN and zeros gives 0 and is skipped, as
/// its entries would be). Eight running maxima, so the loop has no dependency chain and vectorizes.
#[inline]
fn largest_magnitude(chunk: &[f64]) -> f64 {
    let mut lanes = [0.0f64; 8];
    let mut eights = chunk.chunks_exact(8);
    for eight in &mut eights {
        for (lane, v) in lanes.iter_mut().zip(eight) {
            let m = v.abs();
            // `>` is false for NaN, which therefore never wins.
            *lane = if m > *lane { m } else { *lane };
        }
    }
    for v in eights.remainder() {
        let m = v.abs();
        lanes[0] = if m > lanes[0] { m } else { lanes[0] };
    }
    lanes.iter().fold(0.0, |a, &b| if b > a { b } else { a })
}

/// Number of positions where two ascending supports differ (size of the symmetric difference).
pub fn support_changes(old: &[u32], new: &[u32]) -> usize {
    let (mut i, mut j, mut common) = (0, 0, 0);
    while i < old.len() && j < new.len() {
        match old[i].cmp(&new[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
        }
    }
    old.len() + new.len() - 2 * common
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The branch-free masked dot equals the dense `sparse_dot` bit for bit when `w` is zero off the
    /// mask, on rows mixing hits and misses, with signed zeros in `w`, and an empty `w`.
    #[test]
    fn masked_dot_equals_sparse_dot_bit_for_bit() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
        let d = 300;
        for trial in 0..200 {
            let mut w = vec![0.0; d];
            let mut mask = vec![0u64; d.div_ceil(64)];
            for _ in 0..rng.gen_range(0..20) {
                let j = rng.gen_range(0..d);
                w[j] = match trial % 3 {
                    0 => -0.0,
                    _ => rng.gen_range(-2.0..2.0),
                };
                mask[j / 64] |= 1 << (j % 64);
            }
            let mut indices: Vec<u32> = (0..d as u32).filter(|_| rng.gen_bool(0.2)).collect();
            indices.dedup();
            let values: Vec<f64> = indices.iter().map(|_| rng.gen_range(-3.0..3.0)).collect();
            let (masked, dense) = (
                masked_dot(&indices, &values, &w, &mask),
                sparse_dot(&indices, &values, &w),
            );
            assert_eq!(masked.to_bits(), dense.to_bits(), "trial {trial}");
            assert_eq!(masked_dot(&indices, &values, &[], &mask).to_bits(), 0);
        }
    }

    fn ht(dense: &[f64], k: usize) -> (Vec<f64>, Vec<u32>) {
        let (mut out, mut sup, mut s) = (Vec::new(), Vec::new(), ThresholdScratch::default());
        hard_threshold(dense, k, &mut out, &mut sup, &mut s);
        (out, sup)
    }

    /// The top k of (top k outside C) ∪ C is the dense top k, ties and zeros included.
    #[test]
    fn top_k_of_pairs_matches_the_dense_selection_split_anywhere() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let mut scratch = ThresholdScratch::default();
        for round in 0..200 {
            let d = rng.gen_range(1..300);
            // Few distinct magnitudes, so ties are common; some zeros.
            let dense: Vec<f64> = (0..d)
                .map(|_| rng.gen_range(-4i32..=4) as f64 * 0.5)
                .collect();
            let k = rng.gen_range(0..=d + 2);
            let want = top_k_indices(&dense, k, &mut scratch).to_vec();
            let changed: Vec<bool> = (0..d).map(|_| rng.gen_bool(0.3)).collect();
            let outside: Vec<f64> = dense
                .iter()
                .zip(&changed)
                .map(|(&v, &c)| if c { 0.0 } else { v })
                .collect();
            let top_outside = top_k_indices(&outside, k, &mut scratch).to_vec();
            let mut pairs: Vec<(u32, f64)> = (0..d)
                .filter(|&j| changed[j])
                .map(|j| (j as u32, dense[j]))
                .chain(top_outside.iter().map(|&j| (j, dense[j as usize])))
                .collect();
            // Any order.
            pairs.reverse();
            let got = top_k_of_pairs(pairs.into_iter(), k, &mut scratch).to_vec();
            let got_indices: Vec<u32> = got.iter().map(|&(j, _)| j).collect();
            assert_eq!(got_indices, want, "round {round}");
            for (j, v) in got {
                assert_eq!(v.to_bits(), dense[j as usize].to_bits());
            }
        }
    }

    #[test]
    fn keeps_largest_magnitudes() {
        let (out, sup) = ht(&[0.5, -3.0, 2.0, 0.1, -2.5], 2);
        assert_eq!(sup, vec![1, 4]);
        assert_eq!(out, vec![0.0, -3.0, 0.0, 0.0, -2.5]);
    }

    #[test]
    fn ties_lower_index_wins() {
        let (_, sup) = ht(&[1.0, -1.0, 1.0, 1.0], 2);
        assert_eq!(sup, vec![0, 1]);
        let (_, sup) = ht(&[0.0, 2.0, -2.0, 2.0], 1);
        assert_eq!(sup, vec![1]);
    }

    #[test]
    fn never_selects_zeros_and_handles_k_edge_cases() {
        let (_, sup) = ht(&[0.0, 1.0, 0.0], 3);
        assert_eq!(sup, vec![1]);
        let (out, sup) = ht(&[1.0, 2.0], 0);
        assert!(sup.is_empty() && out.iter().all(|v| *v == 0.0));
        let (_, sup) = ht(&[f64::NAN, 1.0], 2);
        assert_eq!(sup, vec![1]);
    }

    #[test]
    fn matches_sort_reference_on_random_vectors() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for _ in 0..200 {
            let d = rng.gen_range(1..60);
            let k = rng.gen_range(0..=d);
            // Few distinct values so ties are common.
            let v: Vec<f64> = (0..d).map(|_| rng.gen_range(-3i32..=3) as f64).collect();
            let (out, sup) = ht(&v, k);
            let mut idx: Vec<usize> = (0..d).filter(|&j| v[j] != 0.0).collect();
            idx.sort_by(|&a, &b| v[b].abs().partial_cmp(&v[a].abs()).unwrap().then(a.cmp(&b)));
            idx.truncate(k);
            idx.sort();
            assert_eq!(sup, idx.iter().map(|&j| j as u32).collect::<Vec<_>>());
            assert!(sup.len() <= k);
            for j in 0..d {
                let expect = if idx.contains(&j) { v[j] } else { 0.0 };
                assert_eq!(out[j], expect);
            }
        }
    }

    #[test]
    fn dot_axpy_and_support_changes() {
        let w = [1.0, 2.0, 3.0];
        assert_eq!(sparse_dot(&[0, 2, 9], &[1.0, 0.5, 100.0], &w), 2.5);
        let mut y = vec![0.0; 3];
        sparse_axpy(2.0, &[1, 2], &[1.0, -1.0], &mut y);
        assert_eq!(y, vec![0.0, 2.0, -2.0]);
        assert_eq!(support_changes(&[1, 2, 3], &[2, 3, 4]), 2);
        assert_eq!(support_changes(&[], &[5]), 1);
    }

    /// The heap path (small k), the quickselect path (large k) and the paired variant (reusing the
    /// previous call's `out`/`support`, same and other `d`) all equal a sort-based reference, with ties.
    #[test]
    fn heap_quickselect_and_paired_agree_with_a_sort_reference() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let (mut out, mut sup) = (Vec::new(), Vec::new());
        let mut scratch = ThresholdScratch::default();
        for round in 0..40 {
            let d = rng.gen_range(1..3000);
            let k = if round % 2 == 0 {
                rng.gen_range(0..=d / 16 + 1)
            } else {
                rng.gen_range(0..=d)
            };
            for _ in 0..2 {
                let v: Vec<f64> = (0..d)
                    .map(|_| match rng.gen_range(0..10) {
                        0..=3 => 0.0,
                        4 => f64::NAN,
                        5..=7 => rng.gen_range(-4i32..=4) as f64,
                        _ => rng.gen_range(-1.0..1.0),
                    })
                    .collect();
                let mut idx: Vec<usize> =
                    (0..d).filter(|&j| v[j] != 0.0 && !v[j].is_nan()).collect();
                idx.sort_by(|&a, &b| v[b].abs().partial_cmp(&v[a].abs()).unwrap().then(a.cmp(&b)));
                idx.truncate(k);
                idx.sort();
                let want: Vec<u32> = idx.iter().map(|&j| j as u32).collect();
                let (dense_out, dense_sup) = ht(&v, k);
                assert_eq!(dense_sup, want, "d={d} k={k}");
                hard_threshold_paired(&v, k, &mut out, &mut sup, &mut scratch);
                assert_eq!(sup, want, "paired d={d} k={k}");
                assert_eq!(out.len(), d);
                for j in 0..d {
                    assert_eq!(out[j].to_bits(), dense_out[j].to_bits(), "paired out[{j}]");
                }
            }
        }
    }
}
