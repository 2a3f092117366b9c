//! Criterion micro-benchmarks of the hot kernels and of one solver epoch.
//!
//! - `sparse/dot`, `sparse/axpy`: one sparse row (100 nonzeros at random positions) against a dense
//!   vector of d = 10^6 (cache-unfriendly, as with a large vocabulary);
//! - `hard_threshold/*`: `H_k` (exact top-k, quickselect) at d = 10^6 for k = 1000 and k = 100000, and at
//!   d = 34000 (the epoch benchmarks' dimension: the price of one SDIHT block step's thresholding);
//! - `epoch/*`: one SDIHT epoch (10 blocks), one DIHT epoch and one IHT epoch, in samples/s, next to
//!   `epoch/bare_dot_axpy`, the floor any dual or primal method pays: one sparse dot and one sparse axpy
//!   per sample over the same data. The ratio bare / SDIHT is the overhead of the algorithm (dual
//!   bookkeeping, the `H_k` per block, the adaptive step's backtracking).
//!
//! - `limit/{text,w3}/*`: where each learner stands against the machine's floor, on two shapes (text-like:
//!   12,800 x 25 nonzeros, d = 34,000; W3-like: 100,000 x 40 nonzeros, d = 2^20), logistic, k = 100,
//!   lambda 1e-4: `bare_dot_axpy` and one steady-state epoch of `fit`'s default SDIHT (coordinate step,
//!   blocks of `d / nnz` rows), SDIHT with the adaptive step (10 blocks), DIHT (adaptive), mirror
//!   descent (Euclidean, batch 128); `docs/benchmarks/kernels.md` gives each as a fraction of the
//!   floor's samples/s. SMIDAS is left out: its epoch walks all `d` weights per sample (31.6 s per
//!   text epoch against the floor's 2.8 ms), which criterion's 55 epochs per benchmark cannot afford.
//!
//! - `certificate/*`: a streaming SDIHT learner's certificate over its window (100k samples x 40
//!   nonzeros, d = 2^20, logistic loss, k = 100): `multi_pass`, the sequence of `objective` calls
//!   (`primal_value`, `dual_value` at the window's duals, `dual_of_primal`, `dual_value` at its point),
//!   against `fused`, `objective::fused_certificate` (the same values, bit for bit).
//!
//! Small sample sizes and measurement times keep `cargo bench --bench kernels` to a couple of minutes;
//! the numbers are for ratios on one machine, never for assertions.

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BatchSize, BenchmarkGroup, Criterion, Throughput,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use thresher::loss::{Loss, LossKind};
use thresher::ring::Window;
use thresher::sample::{Dataset, SampleSet};
use thresher::solver::mirror::{MirrorConfig, MirrorDescent, MirrorMap};
use thresher::solver::objective::{
    fused_certificate, separate_certificate, CertificateScratch, DualScratch,
};
use thresher::solver::primal::Iht;
use thresher::solver::sdiht::offline::{coordinate_blocks, Sdiht};
use thresher::solver::{Problem, Solver, StepRule};
use thresher::sparse::{hard_threshold, sparse_axpy, sparse_dot, ThresholdScratch};
use thresher::synth::sparse_stream;

const BIG_D: usize = 1_000_000;
const TEXT_D: usize = 34_000;

/// A sorted random row of `nnz` indices below `d`, with normal values.
fn random_row(rng: &mut ChaCha8Rng, nnz: usize, d: usize) -> (Vec<u32>, Vec<f64>) {
    let mut indices: Vec<u32> = Vec::with_capacity(nnz);
    while indices.len() < nnz {
        let j = rng.gen_range(0..d as u32);
        if !indices.contains(&j) {
            indices.push(j);
        }
    }
    indices.sort_unstable();
    let values = (0..nnz).map(|_| StandardNormal.sample(rng)).collect();
    (indices, values)
}

fn sparse_kernels(c: &mut Criterion) {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let (indices, values) = random_row(&mut rng, 100, BIG_D);
    let dense: Vec<f64> = (0..BIG_D)
        .map(|_| StandardNormal.sample(&mut rng))
        .collect();
    let mut group = c.benchmark_group("sparse");
    group.throughput(Throughput::Elements(indices.len() as u64));
    group.bench_function("dot/nnz=100,d=1e6", |b| {
        b.iter(|| sparse_dot(black_box(&indices), black_box(&values), black_box(&dense)))
    });
    let mut y = dense.clone();
    group.bench_function("axpy/nnz=100,d=1e6", |b| {
        b.iter(|| {
            sparse_axpy(
                black_box(1e-9),
                black_box(&indices),
                black_box(&values),
                black_box(&mut y),
            )
        })
    });
    group.finish();
}

fn threshold(c: &mut Criterion) {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let (mut out, mut support, mut scratch) = (Vec::new(), Vec::new(), ThresholdScratch::default());
    let mut group = c.benchmark_group("hard_threshold");
    // d = 34000 is the text-like data set of the epoch benchmarks: what one SDIHT block step pays.
    for (d, k, label) in [
        (BIG_D, 1000, "d=1e6,k=1000"),
        (BIG_D, 100_000, "d=1e6,k=1e5"),
        (TEXT_D, 1000, "d=34000,k=1000"),
    ] {
        let dense: Vec<f64> = (0..d).map(|_| StandardNormal.sample(&mut rng)).collect();
        group.throughput(Throughput::Elements(d as u64));
        group.bench_function(label, |b| {
            b.iter(|| hard_threshold(black_box(&dense), k, &mut out, &mut support, &mut scratch))
        });
    }
    group.finish();
}

/// Text-like data: N = 12800 rows, d = 34000, 25 nonzeros per row (about rotten_tomatoes' shape).
fn text_like() -> Dataset {
    let problem = sparse_stream(12_800, TEXT_D, 200, 25, 0.5, true, 3);
    Dataset::from_samples(&problem.samples, 0)
}

/// `bare_dot_axpy`: the floor any dual or primal method pays, one sparse dot and one sparse axpy per
/// sample of `data` (`w` fixed, `z` accumulates; the coefficient depends on the dot so neither is dead
/// code).
fn bench_floor(group: &mut BenchmarkGroup<'_, WallTime>, data: &Dataset) {
    let w: Vec<f64> = (0..data.dim())
        .map(|j| if j % 37 == 0 { 0.1 } else { 0.0 })
        .collect();
    let mut z = vec![0.0; data.dim()];
    group.bench_function("bare_dot_axpy", |b| {
        b.iter(|| {
            for i in 0..data.len() {
                let r = data.row(i);
                let u = sparse_dot(r.indices, r.values, &w);
                sparse_axpy(1e-6 * (r.label - u), r.indices, r.values, &mut z);
            }
            black_box(&z);
        })
    });
}

fn epochs(c: &mut Criterion) {
    let data = text_like();
    let loss = Loss::new(LossKind::Huber, 0.25).expect("valid gamma");
    let problem = Problem::new(&data, loss, 2e-3, 1000, false).expect("valid problem");
    let mut group = c.benchmark_group("epoch");
    group.throughput(Throughput::Elements(data.len() as u64));

    bench_floor(&mut group, &data);

    // Solvers are warmed up by a few epochs so the benchmark sees steady state, not the first epoch.
    let mut sdiht = Sdiht::new(&problem, 10, StepRule::Adaptive, 0).expect("valid solver");
    let mut diht = Sdiht::new(&problem, 1, StepRule::Adaptive, 0).expect("valid solver");
    let mut iht = Iht::new(&problem);
    for _ in 0..3 {
        sdiht.epoch(&problem);
        diht.epoch(&problem);
        iht.epoch(&problem);
    }
    group.bench_function("sdiht_10_blocks", |b| b.iter(|| sdiht.epoch(&problem)));
    group.bench_function("diht", |b| b.iter(|| diht.epoch(&problem)));
    group.bench_function("iht", |b| b.iter(|| iht.epoch(&problem)));
    // A fresh SDIHT's first epoch (a cold start: larger steps, more backtracking).
    group.bench_function("sdiht_10_blocks_first_epoch", |b| {
        b.iter_batched(
            || Sdiht::new(&problem, 10, StepRule::Adaptive, 0).expect("valid solver"),
            |mut s| s.epoch(&problem),
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

fn certificate(c: &mut Criterion) {
    const N: usize = 100_000;
    const K: usize = 100;
    let data = sparse_stream(N, 1 << 20, K, 40, 0.0, true, 7);
    let loss = Loss::new(LossKind::Logistic, 0.25).expect("valid gamma");
    let lambda = 1e-4;
    // A k-sparse model near the truth, and the window's duals at a perturbed model's dual point (a
    // feasible iterate that is not the model's own).
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let support = data.true_support();
    let mut w = vec![0.0; data.truth.len()];
    for &j in &support {
        w[j as usize] = data.truth[j as usize] * rng.gen_range(0.5..1.0);
    }
    let mut window = Window::new(N);
    for s in &data.samples {
        let r = s.row();
        let u = sparse_dot(r.indices, r.values, &w) * rng.gen_range(0.0..2.0);
        window.push(s.clone(), loss.sample(r.label, r.weight).dual_of_margin(u));
    }
    let mut group = c.benchmark_group("certificate");
    group.throughput(Throughput::Elements(N as u64));
    let (mut alpha, mut dual_scratch) = (Vec::new(), DualScratch::default());
    group.bench_function("multi_pass", |b| {
        b.iter(|| {
            black_box(separate_certificate(
                &window,
                &loss,
                lambda,
                K,
                &w,
                Some(window.alphas()),
                &mut alpha,
                &mut dual_scratch,
            ))
        })
    });
    let mut scratch = CertificateScratch::default();
    group.bench_function("fused", |b| {
        b.iter(|| {
            let iterate = Some(window.alphas());
            fused_certificate(
                &window,
                &loss,
                lambda,
                K,
                &w,
                &support,
                iterate,
                &mut scratch,
            )
        })
    });
    group.finish();
}

/// One epoch of each learner against the dot-plus-axpy floor on `data` (module docs, `limit/*`).
fn limit_on(c: &mut Criterion, name: &str, data: &Dataset) {
    let loss = Loss::new(LossKind::Logistic, 0.0).expect("valid loss");
    let problem = Problem::new(data, loss, 1e-4, 100, false).expect("valid problem");
    let mut group = c.benchmark_group(format!("limit/{name}"));
    group.throughput(Throughput::Elements(data.len() as u64));
    bench_floor(&mut group, data);
    let blocks = coordinate_blocks(data.len(), data.nonzero_values(), data.dim());
    let mut solvers: Vec<(&str, Box<dyn Solver<Dataset>>)> = vec![
        (
            "sdiht_coordinate",
            Box::new(Sdiht::new(&problem, blocks, StepRule::Coordinate, 0).expect("valid")),
        ),
        (
            "sdiht_adaptive_10_blocks",
            Box::new(Sdiht::new(&problem, 10, StepRule::Adaptive, 0).expect("valid")),
        ),
        (
            "diht_adaptive",
            Box::new(Sdiht::new(&problem, 1, StepRule::Adaptive, 0).expect("valid")),
        ),
        (
            "mirror",
            Box::new(
                MirrorDescent::new(&problem, MirrorConfig::new(MirrorMap::Euclidean), 0)
                    .expect("valid"),
            ),
        ),
    ];
    for (label, solver) in &mut solvers {
        for _ in 0..3 {
            solver.epoch(&problem);
        }
        group.bench_function(*label, |b| b.iter(|| solver.epoch(&problem)));
    }
    group.finish();
}

fn limit(c: &mut Criterion) {
    let text = sparse_stream(12_800, TEXT_D, 200, 25, 0.5, true, 3).samples;
    let w3 = sparse_stream(100_000, 1 << 20, 100, 40, 0.5, true, 7).samples;
    limit_on(c, "text", &Dataset::from_samples(&text, 0));
    limit_on(c, "w3", &Dataset::from_samples(&w3, 0));
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = kernels;
    config = config();
    targets = sparse_kernels, threshold, epochs, limit, certificate
}
criterion_main!(kernels);
