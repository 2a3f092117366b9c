//! Support selection for the sparse Bregman step (5.15):
//! `argmin_{x in C ∩ S_k} <x, g> + B_psi(x, w_t) / eta`, i.e. `argmin Phi_theta(x)` over `C ∩ S_k` with
//! `theta = grad psi(w_t) - eta g` (see [`super::maps`]).
//!
//! - [`greedy_support`] is the thesis's greedy support selection (Sec. 5.2, the forward greedy of
//!   Das & Kempe / Elenberg et al.): grow `S` one coordinate at a time, each time adding the coordinate
//!   whose inclusion most decreases `f(S) = min_{x in C, supp x ⊆ S} Phi_theta(x)`. It costs
//!   `O(k d)` restricted solves, each `O(k)` (times a bisection for the constrained cases).
//! - [`top_k_by_magnitude`] keeps the `k` coordinates with the largest `|theta_j|`: `O(d)`.
//!
//! **They select the same support here, and both are exact.** Every map in [`super::maps`] is even in
//! each coordinate and invariant under permutations of coordinates, and so are the three sets `C`.
//! Exchange argument: let `x` be optimal on `S`, `b in S`, `a notin S`, `|theta_a| >= |theta_b|`; moving
//! `|x_b|` to coordinate `a` with the sign of `theta_a` leaves `psi(x)` and `x in C` unchanged and does
//! not decrease `<theta, x>` (at an optimum `sign x_b = sign theta_b`), so `f(S - b + a) <= f(S)`. Hence
//! the best support of any size is a top-|theta| set, and at every greedy round the best coordinate to
//! add is the largest remaining `|theta_j|`. In particular greedy has approximation factor `1 + phi = 1`
//! for the p-norm map too (non-separable `psi`, but symmetric): the tests check greedy == brute force
//! == top-k on random instances for every map and constraint. Greedy stops being exact for maps or sets
//! without this symmetry (per-coordinate `beta`, weighted norms, asymmetric boxes), which this crate does
//! not offer; the solver therefore uses the `O(d)` form.

use super::maps::{Constraint, MirrorMap};

/// `f(S) = min_{x in C, supp x ⊆ S} Phi_theta(x)` and its minimiser (dense, length `theta.len()`).
pub fn support_value(
    map: MirrorMap,
    constraint: Constraint,
    theta: &[f64],
    support: &[usize],
    x: &mut Vec<f64>,
) -> f64 {
    let sub_theta: Vec<f64> = support.iter().map(|&j| theta[j]).collect();
    let mut sub_x = vec![0.0; support.len()];
    map.solve_restricted(constraint, &sub_theta, &mut sub_x);
    x.clear();
    x.resize(theta.len(), 0.0);
    for (&j, &v) in support.iter().zip(&sub_x) {
        x[j] = v;
    }
    map.step_objective(&sub_theta, &sub_x)
}

/// Greedy support selection (Sec. 5.2): at most `k` rounds, each adding the coordinate with the largest
/// decrease of `f`; stops early when no coordinate decreases it. Ties go to the lower index. Returns the
/// support (ascending) and `f` at it.
pub fn greedy_support(
    map: MirrorMap,
    constraint: Constraint,
    theta: &[f64],
    k: usize,
) -> (Vec<usize>, f64) {
    let mut support: Vec<usize> = Vec::with_capacity(k);
    let mut value = 0.0;
    let mut x = Vec::new();
    let mut trial: Vec<usize> = Vec::with_capacity(k);
    for _ in 0..k.min(theta.len()) {
        let mut best: Option<(usize, f64)> = None;
        for j in 0..theta.len() {
            if support.contains(&j) {
                continue;
            }
            trial.clear();
            trial.extend_from_slice(&support);
            trial.push(j);
            let v = support_value(map, constraint, theta, &trial, &mut x);
            if best.is_none_or(|(_, b)| v < b) {
                best = Some((j, v));
            }
        }
        match best {
            Some((j, v)) if v < value => {
                support.push(j);
                value = v;
            }
            _ => break,
        }
    }
    support.sort_unstable();
    (support, value)
}

/// The `k` candidates with the largest `|theta|` (exact zeros never selected; ties to the lower index),
/// left in `candidates`, ascending. Returns how many were kept.
///
/// `candidates` holds feature indices and `theta_of` maps one to its mirror coordinate. This is the
/// comparator of [`crate::sparse::hard_threshold`], so with the Euclidean map the step is exactly IHT's.
/// `keys` is scratch: each candidate's magnitude is read once into it (as its bits, whose order is
/// the order of non-negative floats) beside its index, so the selection compares contiguous pairs
/// instead of reading `theta` twice per comparison at scattered places.
pub fn top_k_by_magnitude(
    candidates: &mut Vec<u32>,
    k: usize,
    theta_of: impl Fn(u32) -> f64,
    keys: &mut Vec<(std::cmp::Reverse<u64>, u32)>,
) -> usize {
    keys.clear();
    keys.extend(
        candidates
            .iter()
            .filter_map(|&j| magnitude_key(j, theta_of(j))),
    );
    keep_top_k(keys, k, candidates)
}

/// [`top_k_by_magnitude`] over `(index, theta)` pairs, for a caller that holds the values beside the
/// indices: the kept indices go to `out` (cleared first), ascending.
pub fn top_k_of_pairs(
    pairs: impl Iterator<Item = (u32, f64)>,
    k: usize,
    keys: &mut Vec<(std::cmp::Reverse<u64>, u32)>,
    out: &mut Vec<u32>,
) -> usize {
    keys.clear();
    keys.extend(pairs.filter_map(|(j, t)| magnitude_key(j, t)));
    keep_top_k(keys, k, out)
}

/// A candidate's sort key (none for an exact zero or a NaN).
fn magnitude_key(j: u32, theta: f64) -> Option<(std::cmp::Reverse<u64>, u32)> {
    (theta != 0.0 && !theta.is_nan()).then_some((std::cmp::Reverse(theta.abs().to_bits()), j))
}

/// Leaves the indices of the `k` smallest `keys` in `out`, ascending.
fn keep_top_k(
    keys: &mut Vec<(std::cmp::Reverse<u64>, u32)>,
    k: usize,
    out: &mut Vec<u32>,
) -> usize {
    // Largest magnitude first, then the lower index: a total order, so the kept set is unique.
    if keys.len() > k {
        if k == 0 {
            keys.clear();
        } else {
            keys.select_nth_unstable(k - 1);
            keys.truncate(k);
        }
    }
    out.clear();
    out.extend(keys.iter().map(|&(_, j)| j));
    out.sort_unstable();
    out.len()
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::solver::mirror::tests::{dot, make_feasible, maps, CONSTRAINTS};
    use crate::solver::mirror::MirrorMap;
    use crate::solver::tests::all_supports;

    /// The step objective of (5.15) in its original form, `<x, g> + B_psi(x, w) / eta`.
    fn original_objective(map: MirrorMap, g: &[f64], w: &[f64], eta: f64, x: &[f64]) -> f64 {
        dot(x, g) + map.bregman(x, w) / eta
    }

    #[test]
    fn greedy_support_selection_equals_brute_force_and_top_k() {
        let (d, k) = (10, 3);
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let supports = all_supports(d, k);
        assert_eq!(supports.len(), 120);
        let mut worst_pnorm_ratio: f64 = 1.0;
        for map in maps(d) {
            for constraint in CONSTRAINTS {
                for _ in 0..25 {
                    // A k-sparse feasible current iterate w_t, a gradient and a step.
                    let mut w = vec![0.0; d];
                    for j in rand::seq::index::sample(&mut rng, d, k) {
                        w[j] = rng.gen_range(-1.0..1.0);
                    }
                    make_feasible(constraint, &mut w);
                    let g: Vec<f64> = (0..d).map(|_| rng.gen_range(-2.0..2.0)).collect();
                    let eta = rng.gen_range(0.05..0.5);
                    let mut theta = vec![0.0; d];
                    map.grad_psi(&w, &mut theta);
                    theta.iter_mut().zip(&g).for_each(|(t, gj)| *t -= eta * gj);

                    let mut x = Vec::new();
                    let zero = original_objective(map, &g, &w, eta, &vec![0.0; d]);
                    let (mut brute_value, mut brute_support) = (f64::INFINITY, Vec::new());
                    for s in &supports {
                        support_value(map, constraint, &theta, s, &mut x);
                        let v = original_objective(map, &g, &w, eta, &x);
                        if v < brute_value {
                            (brute_value, brute_support) = (v, s.clone());
                        }
                    }
                    let (greedy, _) = greedy_support(map, constraint, &theta, k);
                    support_value(map, constraint, &theta, &greedy, &mut x);
                    let greedy_value = original_objective(map, &g, &w, eta, &x);
                    let mut top: Vec<u32> = (0..d as u32).collect();
                    top_k_by_magnitude(&mut top, k, |j| theta[j as usize], &mut Vec::new());
                    let top: Vec<usize> = top.iter().map(|&j| j as usize).collect();
                    let mut x_top = Vec::new();
                    support_value(map, constraint, &theta, &top, &mut x_top);
                    let mut x_brute = Vec::new();
                    support_value(map, constraint, &theta, &brute_support, &mut x_brute);

                    // Decrease of the step objective achieved, greedy over optimal (1 = exact).
                    let ratio = (zero - greedy_value) / (zero - brute_value);
                    let tol = 1e-9 * (1.0 + brute_value.abs());
                    assert!(
                        greedy_value <= brute_value + tol,
                        "{map:?} {constraint:?}: greedy {greedy:?} = {greedy_value}, brute {brute_support:?} = {brute_value}"
                    );
                    // Greedy may stop early when a further coordinate would be 0 at the optimum (l1 ball):
                    // it must then be a prefix of the top-k set, and all three must give the same step.
                    assert!(
                        greedy.iter().all(|j| top.contains(j)),
                        "{map:?} {constraint:?}: {greedy:?} vs top {top:?}"
                    );
                    for j in 0..d {
                        assert!(
                            (x[j] - x_top[j]).abs() <= 1e-9,
                            "{map:?} {constraint:?}: greedy and top-k steps differ"
                        );
                        if map.is_separable() {
                            assert!(
                                (x[j] - x_brute[j]).abs() <= 1e-9,
                                "{map:?} {constraint:?}: greedy {x:?} brute {x_brute:?}"
                            );
                        }
                    }
                    if !map.is_separable() {
                        worst_pnorm_ratio = worst_pnorm_ratio.min(ratio);
                    }
                }
            }
        }
        eprintln!("p-norm greedy / brute-force decrease of the step objective, worst over 150 instances: {worst_pnorm_ratio:.12}");
        assert!(
            worst_pnorm_ratio > 1.0 - 1e-9,
            "p-norm greedy ratio {worst_pnorm_ratio}"
        );
    }

    /// The selection on precomputed keys keeps the set the comparator on `theta` kept (the order it
    /// replaced, written out here): largest magnitude, ties to the lower index, zeros (of either sign)
    /// and NaN never, for every `k`.
    #[test]
    fn top_k_by_magnitude_on_keys_is_the_comparator_selection() {
        fn by_comparator(candidates: &[u32], k: usize, theta: &[f64]) -> Vec<u32> {
            let mut kept: Vec<u32> = candidates
                .iter()
                .copied()
                .filter(|&j| theta[j as usize] != 0.0 && !theta[j as usize].is_nan())
                .collect();
            kept.sort_by(|a, b| {
                let (ma, mb) = (theta[*a as usize].abs(), theta[*b as usize].abs());
                mb.partial_cmp(&ma).unwrap().then(a.cmp(b))
            });
            kept.truncate(k);
            kept.sort_unstable();
            kept
        }
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let mut keys = Vec::new();
        for round in 0..200 {
            let d = 1 + round % 60;
            // Few distinct magnitudes, so ties are common; some zeros, negative zeros and NaN.
            let theta: Vec<f64> = (0..d)
                .map(|_| match rng.gen_range(0..10) {
                    0 => 0.0,
                    1 => -0.0,
                    2 => f64::NAN,
                    m => (m as f64 - 6.0) * 0.25,
                })
                .collect();
            let candidates: Vec<u32> = (0..d as u32).filter(|_| rng.gen_bool(0.7)).collect();
            for k in 0..=d + 1 {
                let mut top = candidates.clone();
                let kept = top_k_by_magnitude(&mut top, k, |j| theta[j as usize], &mut keys);
                assert_eq!(
                    top,
                    by_comparator(&candidates, k, &theta),
                    "round {round}, k {k}"
                );
                assert_eq!(kept, top.len());
            }
        }
    }
}
