//! Sparse linear-algebra kernels: the inner loops every solver spends its time in.
//!
//! All kernels are plain `f64` loops over borrowed slices; none allocates. A sample row is a pair of
//! parallel slices (`indices`, `values`) with strictly increasing indices; weight vectors are dense
//! `&[f64]` of length `d` (the largest feature index seen plus one).
//!
//! `hard_threshold` is the operator `H_k` of the DIHT paper (dual-iht.md, Sec. 2, "w(alpha) = H_k(w~)"):
//! keep the `k` entries largest in magnitude, zero the rest.

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
    magnitudes: Vec<f64>,
}

/// `H_k`: writes into `out` the `k` entries of `dense` largest in magnitude (all others zero) and
/// into `support` their indices in ascending order.
///
/// Expected O(d) time: the magnitudes of the nonzeros are copied into one contiguous buffer, the k-th
/// largest is found there by quickselect (`select_nth_unstable_by`, cache-friendly: no indirection
/// through an index array), and one scan in index order keeps every entry above it and, of the entries
/// equal to it, the lowest-indexed ones — so ties are broken deterministically, lower index first, and
/// the support comes out sorted. Exact zeros are never selected, so the support can be smaller than `k`
/// when `dense` has fewer than `k` nonzeros. NaN entries are treated as zero.
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
    if k == 0 {
        return;
    }
    let magnitudes = &mut scratch.magnitudes;
    magnitudes.clear();
    magnitudes.extend(dense.iter().map(|v| v.abs()).filter(|m| *m > 0.0));
    // NaN fails `> 0.0`, so it is never a candidate.
    let (threshold, mut ties_to_keep) = if magnitudes.len() <= k {
        (0.0, usize::MAX)
    } else {
        let descending = |a: &f64, b: &f64| b.partial_cmp(a).unwrap_or(std::cmp::Ordering::Equal);
        let (above, kth, _) = magnitudes.select_nth_unstable_by(k - 1, descending);
        let kth = *kth;
        let strictly_above = above.iter().filter(|m| **m > kth).count();
        (kth, k - strictly_above)
    };
    for (j, &v) in dense.iter().enumerate() {
        let m = v.abs();
        let keep = if m > threshold {
            true
        } else if m == threshold && m > 0.0 && ties_to_keep > 0 {
            ties_to_keep -= 1;
            true
        } else {
            false
        };
        if keep {
            out[j] = v;
            support.push(j as u32);
        }
    }
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

    fn ht(dense: &[f64], k: usize) -> (Vec<f64>, Vec<u32>) {
        let (mut out, mut sup, mut s) = (Vec::new(), Vec::new(), ThresholdScratch::default());
        hard_threshold(dense, k, &mut out, &mut sup, &mut s);
        (out, sup)
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
}
