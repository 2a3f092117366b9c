//! Seeded synthetic problems shared by the tests, examples and benchmarks.
//!
//! - [`paper_ridge`]: the sparse ridge regression problem of the DIHT paper's Sec. 5.1;
//! - [`sparse_stream`]: a sparse linear problem with a known k-sparse truth, for streams and throughput.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use crate::ingest::batch::BodyFormat;
use crate::sample::Sample;

/// A generated problem and the truth behind it.
#[derive(Debug, Clone)]
pub struct Synthetic {
    pub samples: Vec<Sample>,
    /// The true weights (dense, length `d`).
    pub truth: Vec<f64>,
}

impl Synthetic {
    /// Ascending indices of the true support.
    pub fn true_support(&self) -> Vec<u32> {
        (0..self.truth.len())
            .filter(|&j| self.truth[j] != 0.0)
            .map(|j| j as u32)
            .collect()
    }
}

fn normal(rng: &mut ChaCha8Rng) -> f64 {
    StandardNormal.sample(rng)
}

/// DIHT paper Sec. 5.1: `wbar` = ones on the first `kbar` coordinates; the first `kbar` features are
/// `N(mu1, Sigma)` with `Sigma_ii = 1`, `Sigma_ij = 0.25`; the rest `N(mu2, I)`; `mu1, mu2 ~ N(0, I)` (drawn
/// once per problem); `y = wbar.x + N(0, 1)`. Rows are dense (stored as sparse rows with every index).
pub fn paper_ridge(n: usize, d: usize, kbar: usize, seed: u64) -> Synthetic {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mu: Vec<f64> = (0..d).map(|_| normal(&mut rng)).collect();
    let truth: Vec<f64> = (0..d).map(|j| if j < kbar { 1.0 } else { 0.0 }).collect();
    let samples = (0..n)
        .map(|_| {
            // Equicorrelated block: x = mu + sqrt(0.75) z_j + sqrt(0.25) z_0.
            let shared = normal(&mut rng);
            let values: Vec<f64> = (0..d)
                .map(|j| {
                    if j < kbar {
                        mu[j] + 0.75f64.sqrt() * normal(&mut rng) + 0.5 * shared
                    } else {
                        mu[j] + normal(&mut rng)
                    }
                })
                .collect();
            let label = values[..kbar].iter().sum::<f64>() + normal(&mut rng);
            Sample::new((0..d as u32).collect(), values, label, None)
                .expect("finite by construction")
        })
        .collect();
    Synthetic { samples, truth }
}

/// A sparse stream: `d` features, a true support of `k_true` features with weights of magnitude in
/// `[1, 2]` and random sign, rows with `nnz` nonzeros of which about a quarter hit the true support, so
/// every true feature is seen often. Labels are `w.x + noise * N(0,1)`, or their sign when `classify`.
pub fn sparse_stream(
    n: usize,
    d: usize,
    k_true: usize,
    nnz: usize,
    noise: f64,
    classify: bool,
    seed: u64,
) -> Synthetic {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut truth = vec![0.0; d];
    let mut support: Vec<usize> = Vec::with_capacity(k_true);
    while support.len() < k_true.min(d) {
        let j = rng.gen_range(0..d);
        if truth[j] == 0.0 {
            let sign = if rng.gen_bool(0.5) { 1.0 } else { -1.0 };
            truth[j] = sign * rng.gen_range(1.0..2.0);
            support.push(j);
        }
    }
    let samples = (0..n)
        .map(|_| {
            let mut idx: Vec<u32> = Vec::with_capacity(nnz);
            let from_truth = (nnz / 4).min(support.len());
            while idx.len() < from_truth {
                let j = support[rng.gen_range(0..support.len())] as u32;
                if !idx.contains(&j) {
                    idx.push(j);
                }
            }
            while idx.len() < nnz.min(d) {
                let j = rng.gen_range(0..d) as u32;
                if !idx.contains(&j) {
                    idx.push(j);
                }
            }
            idx.sort_unstable();
            let values: Vec<f64> = idx.iter().map(|_| normal(&mut rng)).collect();
            let clean: f64 = idx
                .iter()
                .zip(&values)
                .map(|(&j, v)| truth[j as usize] * v)
                .sum();
            let noisy = clean + noise * normal(&mut rng);
            let label = if classify {
                if noisy >= 0.0 {
                    1.0
                } else {
                    -1.0
                }
            } else {
                noisy
            };
            Sample::new(idx, values, label, None).expect("finite by construction")
        })
        .collect();
    Synthetic { samples, truth }
}

/// Appends one sample as the load generator and the ingest benchmark send it (no newline): a LIBSVM
/// line, or a JSON sample object `{"label", "indices", "values"}`. Both carry the same numbers, values
/// written to 6 decimals, so the two formats are one stream and their rates compare (JSON used to get
/// the shortest round-trip form, 17 digits for these random values: 60% more bytes per sample).
pub fn write_wire_sample(out: &mut String, s: &Sample, json: bool) {
    use std::fmt::Write;
    if json {
        let _ = write!(
            out,
            "{{\"label\":{},\"indices\":{:?},\"values\":[",
            s.label, s.indices
        );
        for (n, v) in s.values.iter().enumerate() {
            let _ = write!(out, "{}{v:.6}", if n == 0 { "" } else { "," });
        }
        out.push_str("]}");
    } else {
        let _ = write!(out, "{}", s.label);
        for (j, v) in s.indices.iter().zip(&s.values) {
            let _ = write!(out, " {j}:{v:.6}");
        }
    }
}

/// A whole request body of `samples` in `format` (one [`write_wire_sample`] per line; a JSON array for
/// `application/json`), as the load generator, the ingest benchmark and `examples/ingest_cpu` send it.
pub fn wire_body(samples: &[Sample], format: BodyFormat) -> String {
    let json = format != BodyFormat::Libsvm;
    let mut out = String::with_capacity(samples.len() * 40 * 24);
    if format == BodyFormat::JsonArray {
        out.push('[');
    }
    for (n, s) in samples.iter().enumerate() {
        if format == BodyFormat::JsonArray && n > 0 {
            out.push(',');
        }
        write_wire_sample(&mut out, s, json);
        out.push('\n');
    }
    if format == BodyFormat::JsonArray {
        out.push(']');
    }
    out
}

/// Writes samples as LIBSVM text.
pub fn to_libsvm(samples: &[Sample]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for s in samples {
        let _ = write!(out, "{}", s.label);
        for (j, v) in s.indices.iter().zip(&s.values) {
            let _ = write!(out, " {j}:{v}");
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::batch::{parse_body, BodyFormat, FeatureDictionary, Rules};
    use crate::loss::{Loss, LossKind};

    /// The load generator's LIBSVM and JSON bodies are one stream: both parse to the same samples, bit
    /// for bit, and those are the generated ones with values rounded to 6 decimals.
    #[test]
    fn wire_formats_carry_the_same_samples() {
        let data = sparse_stream(200, 1 << 20, 10, 40, 0.0, true, 3);
        let rules = Rules::new(
            vec![Loss::new(LossKind::Logistic, 0.25).unwrap()],
            1 << 24,
            false,
        );
        let dict = FeatureDictionary::new(0);
        let parsed = |json: bool, format: BodyFormat| {
            let mut body = String::new();
            for s in &data.samples {
                write_wire_sample(&mut body, s, json);
                body.push('\n');
            }
            parse_body(format, &body, &rules, &dict)
                .unwrap()
                .to_samples()
        };
        let libsvm = parsed(false, BodyFormat::Libsvm);
        let json = parsed(true, BodyFormat::Ndjson);
        assert_eq!(libsvm.len(), data.samples.len());
        for ((a, b), s) in libsvm.iter().zip(&json).zip(&data.samples) {
            assert_eq!((a.label, &a.indices), (b.label, &b.indices));
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&a.values), bits(&b.values));
            let rounded: Vec<f64> = s
                .values
                .iter()
                .map(|v| format!("{v:.6}").parse().unwrap())
                .collect();
            assert_eq!(bits(&a.values), bits(&rounded));
        }
    }
}
