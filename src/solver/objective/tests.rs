//! Tests of the objective, the dual and the certificate: the projection onto the intercept's
//! constraint, the rounding rule of the gap, the fused certificate against the separate calls, weak
//! duality on random weighted windows for every loss, and a weight-c row against c copies.

use super::*;

/// The safeguarded Newton shift lands where plain bisection does, on the constraint, inside `F`.
#[test]
fn projection_onto_the_sum_matches_bisection() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    for kind in [LossKind::Logistic, LossKind::Hinge, LossKind::Huber] {
        let loss = Loss::new(kind, 0.25).unwrap();
        for case in 0..50 {
            let n = rng.gen_range(1..300);
            let rows: Vec<(f64, f64)> = (0..n)
                .map(|_| {
                    let y = if rng.gen_bool(0.6) { 1.0 } else { -1.0 };
                    (y, rng.gen_range(0.5..2.0))
                })
                .collect();
            let start: Vec<f64> = rows.iter().map(|_| rng.gen_range(-2.5..2.5)).collect();
            let target = if case % 3 == 0 {
                0.0
            } else {
                rng.gen_range(-3.0..3.0)
            };
            let mut alpha = start.clone();
            project_rows_with_sum(&loss, &mut alpha, target, |i| rows[i]);
            let shift = |tau: f64| -> Vec<f64> {
                start
                    .iter()
                    .zip(&rows)
                    .map(|(&a, &(y, c))| loss.sample(y, c).project(a - tau))
                    .collect()
            };
            let (mut lo, mut hi) = (-10.0, 10.0);
            for _ in 0..200 {
                let mid = 0.5 * (lo + hi);
                if shift(mid).iter().sum::<f64>() > target {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            let reference = shift(0.5 * (lo + hi));
            let reachable = (reference.iter().sum::<f64>() - target).abs() < 1e-9;
            for (i, (&a, &r)) in alpha.iter().zip(&reference).enumerate() {
                let (y, c) = rows[i];
                assert_eq!(
                    loss.sample(y, c).project(a),
                    a,
                    "{kind:?} case {case}: outside F"
                );
                assert!(
                    (a - r).abs() < 1e-9,
                    "{kind:?} case {case} row {i}: {a} vs {r}"
                );
            }
            if reachable {
                let sum: f64 = alpha.iter().sum();
                assert!(
                    (sum - target).abs() < 1e-9,
                    "{kind:?} case {case}: {sum} vs {target}"
                );
            }
        }
    }
}

/// A regression test: a dual a few ulps above the primal was published as a negative gap.
#[test]
fn a_rounding_crossing_is_a_zero_gap_and_a_larger_one_is_kept() {
    let p = std::f64::consts::LN_2;
    let c = Certificate::new(p, p + 1.1e-15, 10);
    assert_eq!((c.dual, c.gap), (p, 0.0));
    let c = Certificate::new(p, p - 1e-3, 10);
    assert_eq!((c.dual, c.gap), (p - 1e-3, p - (p - 1e-3)));
    let c = Certificate::new(p, p + 1e-6, 10);
    assert!(c.gap < 0.0, "a crossing beyond rounding stays visible");
}
use crate::loss::LossKind;
use crate::ring::Window;
use crate::sample::Sample;
use crate::synth::sparse_stream;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A wrapped-around window of `sparse_stream` samples with random weights `c_i` and random feasible
/// duals, for `loss`.
fn window(loss: &Loss, d: usize, seed: u64) -> Window {
    let data = sparse_stream(450, d, 8, 12, 0.1, loss.is_classification(), seed);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut window = Window::new(300);
    for s in data.samples {
        let c = rng.gen_range(0.5..2.0);
        let s = Sample::new(s.indices, s.values, s.label, Some(c)).unwrap();
        let alpha = loss.sample(s.label, c).project(rng.gen_range(-3.0..3.0));
        window.push(s, alpha);
    }
    assert_eq!(window.len(), 300);
    window
}

/// A random `w` of length `len` with `nonzeros` nonzeros among the first `dim` coordinates, and its
/// support (unsorted, as a caller may hold it).
fn sparse_w(len: usize, dim: usize, nonzeros: usize, rng: &mut ChaCha8Rng) -> (Vec<f64>, Vec<u32>) {
    let mut w = vec![0.0; len];
    let mut support = Vec::new();
    while support.len() < nonzeros {
        let j = rng.gen_range(0..dim.min(len));
        if w[j] == 0.0 {
            w[j] = rng.gen_range(-1.0..1.0);
            support.push(j as u32);
        }
    }
    (w, support)
}

/// The fused kernel returns exactly (`==` on the bits) the values of the calls it replaces, for
/// every loss, with and without an iterate, for a heap-path and a quickselect-path `H_k`, an empty
/// model, and a `w` shorter or longer than the window's dimension.
#[test]
fn fused_certificate_equals_the_separate_calls_bit_for_bit() {
    let mut scratch = CertificateScratch::default();
    let mut dual_scratch = DualScratch::default();
    let mut alpha = Vec::new();
    for kind in [
        LossKind::Squared,
        LossKind::Huber,
        LossKind::Hinge,
        LossKind::Logistic,
    ] {
        let loss = Loss::new(kind, 0.25).unwrap();
        for seed in 0..4 {
            let d = [2000, 120][seed as usize % 2];
            let data = window(&loss, d, seed);
            let dim = data.dim();
            let mut rng = ChaCha8Rng::seed_from_u64(100 + seed);
            for (len, nonzeros, k) in [
                (dim, 6, 6),
                (dim, 6, 20),
                (dim + 70, 0, 5),
                (dim - 3, 10, 4),
            ] {
                let (w, support) = sparse_w(len, dim, nonzeros, &mut rng);
                let lambda = rng.gen_range(1e-3..1.0);
                let reference = separate_certificate(
                    &data,
                    &loss,
                    lambda,
                    k,
                    &w,
                    Some(data.alphas()),
                    &mut alpha,
                    &mut dual_scratch,
                );
                let (primal, at_primal) = (reference.primal, reference.dual_at_primal);
                let at_iterate = reference.dual_at_iterate.unwrap_or(f64::NAN);
                for iterate in [Some(data.alphas()), None] {
                    let fused = fused_certificate(
                        &data,
                        &loss,
                        lambda,
                        k,
                        &w,
                        &support,
                        iterate,
                        &mut scratch,
                    );
                    let case = format!("{kind:?} seed {seed} len {len} k {k}");
                    assert_eq!(fused.primal.to_bits(), primal.to_bits(), "{case}");
                    assert_eq!(
                        fused.dual_at_primal.to_bits(),
                        at_primal.to_bits(),
                        "{case}"
                    );
                    assert_eq!(
                        fused.dual_at_iterate.map(f64::to_bits),
                        iterate.map(|_| at_iterate.to_bits()),
                        "{case}"
                    );
                    assert_eq!(scratch.alpha_from_primal, alpha, "{case}");
                    let certificate = fused.certificate(data.len());
                    assert_eq!(certificate.primal, primal);
                    let dual = iterate.map_or(at_primal, |_| at_iterate.max(at_primal));
                    assert_eq!(certificate.dual, dual, "{case}");
                }
            }
        }
    }
}

/// [`fused_certificate_with_intercept`]'s values with an intercept `b`, by the separate calls:
/// [`primal_value`] at `(w, b)`, [`dual_value`] at the iterate projected onto `sum alpha = 0` (if one
/// is given), [`dual_of_primal`] at `(w, b)` projected into `alpha`, then [`dual_value`] at it. The
/// reference the fused kernel is tested against.
#[allow(clippy::too_many_arguments)]
fn separate_intercept_certificate<S: SampleSet>(
    data: &S,
    loss: &Loss,
    lambda: f64,
    k: usize,
    (w, b): (&[f64], f64),
    iterate: Option<&[f64]>,
    alpha: &mut Vec<f64>,
    scratch: &mut DualScratch,
) -> CertificateValues {
    let primal = primal_value(data, loss, lambda, w, b);
    let dual_at_iterate = iterate.map(|alphas| {
        alpha.clear();
        alpha.extend_from_slice(alphas);
        project_with_sum(data, loss, alpha, 0.0);
        dual_value(data, loss, lambda, k, alpha, scratch)
    });
    dual_of_primal(data, loss, w, b, true, alpha);
    let dual_at_primal = dual_value(data, loss, lambda, k, alpha, scratch);
    CertificateValues {
        primal,
        dual_at_iterate,
        dual_at_primal,
    }
}

/// With an intercept the fused kernel's two walks return exactly the values of the calls an
/// intercept's certificate makes (both dual points projected onto `sum alpha = 0`), for every loss,
/// with and without an iterate, intercepts of both signs and zero.
#[test]
fn fused_intercept_certificate_equals_the_separate_calls_bit_for_bit() {
    let mut scratch = CertificateScratch::default();
    let mut dual_scratch = DualScratch::default();
    let mut alpha = Vec::new();
    for kind in LossKind::ALL {
        let loss = Loss::new(kind, 0.25).unwrap();
        for seed in 0..4 {
            let d = [2000, 120][seed as usize % 2];
            let data = window(&loss, d, seed);
            let dim = data.dim();
            let mut rng = ChaCha8Rng::seed_from_u64(200 + seed);
            for (len, nonzeros, k, b) in [
                (dim, 6, 6, 0.4),
                (dim, 6, 20, -1.3),
                (dim + 70, 0, 5, 0.0),
                (dim - 3, 10, 4, 2.5),
            ] {
                let (w, support) = sparse_w(len, dim, nonzeros, &mut rng);
                let lambda = rng.gen_range(1e-3..1.0);
                // The margins as the intercept's refit computes them, both ways, bit for bit.
                let (mut dense, mut masked, mut mask) = (Vec::new(), Vec::new(), Vec::new());
                margins_into(&data, &w, &mut dense);
                masked_margins_into(&data, &w, &support, &mut mask, &mut masked);
                let bits = |m: &[f64]| m.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&dense), bits(&masked));
                assert!(mask.iter().all(|&word| word == 0));
                for (iterate, margins) in [
                    (Some(data.alphas()), None),
                    (None, None),
                    (Some(data.alphas()), Some(&masked[..])),
                    (None, Some(&dense[..])),
                ] {
                    let reference = separate_intercept_certificate(
                        &data,
                        &loss,
                        lambda,
                        k,
                        (&w, b),
                        iterate,
                        &mut alpha,
                        &mut dual_scratch,
                    );
                    let fused = fused_certificate_with_intercept(
                        &data,
                        &loss,
                        lambda,
                        k,
                        (&w, &support, Some(b)),
                        iterate,
                        margins,
                        &mut scratch,
                    );
                    let given = margins.is_some();
                    let case = format!("{kind:?} seed {seed} len {len} k {k} b {b} {given}");
                    let bits = |v: &CertificateValues| {
                        (
                            v.primal.to_bits(),
                            v.dual_at_primal.to_bits(),
                            v.dual_at_iterate.map(f64::to_bits),
                        )
                    };
                    assert_eq!(bits(&fused), bits(&reference), "{case}");
                    assert_eq!(scratch.alpha_from_primal, alpha, "{case}");
                }
            }
        }
    }
}

/// Weak duality on weighted windows: `P(w) >= D(alpha)` for random k-sparse `w` and random
/// feasible `alpha` (`alpha_i in c_i F`), every loss, weights spanning two orders of magnitude, and
/// the window's mass is the sum of its weights (through evictions).
#[test]
fn weak_duality_holds_on_random_weighted_states() {
    let mut rng = ChaCha8Rng::seed_from_u64(41);
    for kind in [
        LossKind::Squared,
        LossKind::Logistic,
        LossKind::Hinge,
        LossKind::Huber,
    ] {
        let loss = Loss::new(kind, 0.25).unwrap();
        for seed in 0..6 {
            let data = sparse_stream(400, 60, 6, 10, 0.1, loss.is_classification(), seed);
            let mut window = Window::new(250);
            for s in data.samples {
                let c = 10f64.powf(rng.gen_range(-1.0..1.0));
                let s = Sample::new(s.indices, s.values, s.label, Some(c)).unwrap();
                let alpha = loss
                    .sample(s.label, c)
                    .project(rng.gen_range(-4.0..4.0) * c);
                window.push(s, alpha);
            }
            let summed: f64 = (0..window.len()).map(|i| window.row(i).weight).sum();
            assert!((window.mass() - summed).abs() <= 1e-12 * summed);
            for k in [1, 3, 10] {
                for _ in 0..20 {
                    let (w, _) = sparse_w(60, 60, k, &mut rng);
                    let lambda = 10f64.powf(rng.gen_range(-3.0..0.0));
                    let p = primal_value(&window, &loss, lambda, &w, 0.0);
                    let d = dual_value(
                        &window,
                        &loss,
                        lambda,
                        k,
                        window.alphas(),
                        &mut DualScratch::default(),
                    );
                    assert!(p >= d, "{kind:?} seed {seed} k {k}: P {p} < D {d}");
                    // The dual point of `w` is feasible too, and closer.
                    let mut a = Vec::new();
                    dual_of_primal(&window, &loss, &w, 0.0, false, &mut a);
                    let at_w =
                        dual_value(&window, &loss, lambda, k, &a, &mut DualScratch::default());
                    assert!(p >= at_w, "{kind:?} seed {seed} k {k}: P {p} < D(w) {at_w}");
                }
            }
        }
    }
}

/// A row of integer weight `c` is `c` copies of it: `P` is the same, and `D` at the weighted
/// dual `alpha_i` equals `D` at the copies' duals `alpha_i / c` each (to rounding).
#[test]
fn an_integer_weight_is_that_many_copies_in_p_and_d() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for kind in [LossKind::Squared, LossKind::Logistic, LossKind::Hinge] {
        let loss = Loss::new(kind, 0.25).unwrap();
        let data = sparse_stream(60, 30, 5, 8, 0.1, loss.is_classification(), 3);
        let (mut weighted, mut copies) = (Vec::new(), Vec::new());
        let (mut alpha_w, mut alpha_c) = (Vec::new(), Vec::new());
        for s in data.samples {
            let c = rng.gen_range(1..=4u32);
            let beta = loss.sample(s.label, 1.0).project(rng.gen_range(-2.0..2.0));
            let one = Sample::new(s.indices.clone(), s.values.clone(), s.label, None).unwrap();
            for _ in 0..c {
                copies.push(one.clone());
                alpha_c.push(beta);
            }
            weighted.push(Sample::new(s.indices, s.values, s.label, Some(c as f64)).unwrap());
            alpha_w.push(beta * c as f64);
        }
        let (weighted, copies) = (
            crate::sample::Dataset::from_samples(&weighted, 30),
            crate::sample::Dataset::from_samples(&copies, 30),
        );
        assert_eq!(weighted.mass(), copies.len() as f64);
        let (w, _) = sparse_w(30, 30, 4, &mut rng);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(1.0);
        let (pw, pc) = (
            primal_value(&weighted, &loss, 0.05, &w, 0.0),
            primal_value(&copies, &loss, 0.05, &w, 0.0),
        );
        assert!(close(pw, pc), "{kind:?}: P {pw} vs {pc}");
        let mut scratch = DualScratch::default();
        let dw = dual_value(&weighted, &loss, 0.05, 4, &alpha_w, &mut scratch);
        let dc = dual_value(&copies, &loss, 0.05, 4, &alpha_c, &mut scratch);
        assert!(close(dw, dc), "{kind:?}: D {dw} vs {dc}");
    }
}

/// Chunks walked by two threads of their own, as `fit`'s cores do.
#[derive(Debug)]
struct TwoThreads;

impl crate::solver::spread::Spread for TwoThreads {
    fn run(&self, chunks: usize, job: &(dyn Fn(usize) + Sync)) {
        std::thread::scope(|scope| {
            for c in 0..chunks {
                scope.spawn(move || job(c));
            }
        });
    }
}

/// A certificate cut in chunks ([`CertificateScratch::spread`]) is the walk in turn's to rounding,
/// with and without an intercept and an iterate, and the same, bit for bit, whoever walks the chunks;
/// the model's dual point (projected, with an intercept) is the walk in turn's, bit for bit.
#[test]
fn a_certificate_in_chunks_is_the_walk_in_turn_and_the_same_on_any_threads() {
    use crate::solver::spread::{InTurn, MIN_CHUNK_ROWS};
    use std::sync::Arc;
    let samples = sparse_stream(MIN_CHUNK_ROWS + 5_000, 3_000, 8, 12, 0.1, true, 5).samples;
    let data = crate::sample::Dataset::from_samples(&samples, 0);
    assert_eq!(super::chunks::certificate_chunks(data.len()), 2);
    let loss = Loss::new(LossKind::Logistic, 0.0).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let (w, support) = sparse_w(data.dim(), data.dim(), 20, &mut rng);
    let iterate: Vec<f64> = (0..data.len())
        .map(|i| {
            loss.sample(data.row(i).label, 1.0)
                .project(rng.gen_range(-1.0..1.0))
        })
        .collect();
    for (b, at) in [
        (None, None),
        (Some(0.3), None),
        (None, Some(&iterate[..])),
        (Some(-0.2), Some(&iterate[..])),
    ] {
        let run = |spread: Option<Arc<dyn crate::solver::spread::Spread>>| {
            let mut scratch = CertificateScratch {
                spread,
                ..CertificateScratch::default()
            };
            let values = fused_certificate_with_intercept(
                &data,
                &loss,
                1e-3,
                20,
                (&w, &support, b),
                at,
                None,
                &mut scratch,
            );
            (values, scratch.alpha_from_primal)
        };
        let (in_turn, alpha) = run(None);
        let (chunked, chunked_alpha) = run(Some(Arc::new(InTurn)));
        let (threaded, threaded_alpha) = run(Some(Arc::new(TwoThreads)));
        let case = format!("intercept {b:?} iterate {}", at.is_some());
        let bits = |v: &CertificateValues| {
            (
                v.primal.to_bits(),
                v.dual_at_primal.to_bits(),
                v.dual_at_iterate.map(f64::to_bits),
            )
        };
        assert_eq!(bits(&chunked), bits(&threaded), "{case}");
        assert_eq!(chunked_alpha, threaded_alpha, "{case}");
        let close = |x: f64, y: f64| (x - y).abs() <= 1e-12 * x.abs().max(1.0);
        assert!(close(in_turn.primal, chunked.primal), "{case}");
        assert!(
            close(in_turn.dual_at_primal, chunked.dual_at_primal),
            "{case}"
        );
        match (in_turn.dual_at_iterate, chunked.dual_at_iterate) {
            (Some(x), Some(y)) => assert!(close(x, y), "{case}"),
            (x, y) => assert_eq!(x, y, "{case}"),
        }
        assert_eq!(alpha, chunked_alpha, "{case}");
        assert!(in_turn.primal >= in_turn.dual_at_primal, "{case}");
    }
}
