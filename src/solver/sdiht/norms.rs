//! The norms and the scaled threshold of SDIHT's block step ([`super`]): `||w||^2` and its change over
//! the union of two supports (the acceptance rule's O(k) terms), and `H_k` of a scaled vector.

use crate::sparse::{hard_threshold_paired, ThresholdScratch};

/// `||w'||^2 - ||w||^2` for two vectors each zero outside its ascending support, summed as
/// `(w'_j - w_j)(w'_j + w_j)` over the union of the supports (a merge, O(k)): each term is exact in
/// sign where `w'` and `w` are close, which the difference of the two norms is not.
pub fn sq_norm_change(w: &[f64], support: &[u32], trial: &[f64], trial_support: &[u32]) -> f64 {
    let (mut a, mut b) = (0, 0);
    let mut sum = 0.0;
    while a < support.len() || b < trial_support.len() {
        let j = match (support.get(a), trial_support.get(b)) {
            (Some(&x), Some(&y)) => x.min(y),
            (Some(&x), None) => x,
            (None, Some(&y)) => y,
            (None, None) => unreachable!("the loop condition"),
        };
        if support.get(a) == Some(&j) {
            a += 1;
        }
        if trial_support.get(b) == Some(&j) {
            b += 1;
        }
        let (old, new) = (w[j as usize], trial[j as usize]);
        sum += (new - old) * (new + old);
    }
    sum
}

/// `||w||^2` of a vector that is zero outside the ascending `support` (the same sum, in the same order,
/// as a dense pass, without its O(d) cost).
pub fn support_sq_norm(w: &[f64], support: &[u32]) -> f64 {
    support.iter().map(|&j| w[j as usize] * w[j as usize]).sum()
}

/// `out = H_k(scale * z)` without materialising `scale * z` (`H_k` commutes with uniform scaling).
/// `out` stays paired with `support` (zero elsewhere), so clearing it is O(k).
pub fn threshold_scaled(
    z: &[f64],
    scale: f64,
    k: usize,
    out: &mut Vec<f64>,
    support: &mut Vec<u32>,
    scratch: &mut ThresholdScratch,
) {
    hard_threshold_paired(z, k, out, support, scratch);
    for &j in support.iter() {
        out[j as usize] *= scale;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sq_norm_change_sums_over_the_union_of_the_supports() {
        let w = [0.0, 2.0, 0.0, -1.0, 0.0];
        let trial = [3.0, 2.5, 0.0, 0.0, 0.0];
        // ||trial||^2 - ||w||^2 = (9 + 6.25) - (4 + 1).
        let change = sq_norm_change(&w, &[1, 3], &trial, &[0, 1]);
        assert_eq!(change, 15.25 - 5.0);
        assert_eq!(sq_norm_change(&w, &[1, 3], &w, &[1, 3]), 0.0);
        assert_eq!(sq_norm_change(&w, &[], &w, &[]), 0.0);
    }
}
