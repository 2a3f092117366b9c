//! Column scales (`fit --standardize`): each feature's root mean square, to divide its column by so
//! that every feature enters the problem on a comparable scale, and to turn a model solved on the scaled
//! columns back into original units.
//!
//! Scale only, never centre: a centred sparse column would fill in every zero. The scale of column `j`
//! is `s_j = sqrt((1/N) sum_i x_ij^2)` over all rows (zeros included; sample weights ignored), or 1
//! for a column with no nonzero (or one whose RMS is not a normal float), so such a column is left as
//! it is. Since `|x_ij| <= sqrt(N) s_j`, every scaled value is finite and at most `sqrt(N)` in magnitude.
//!
//! A model `(w', b)` solved on the scaled columns scores `x'.w' + b = x.w + b` with `w_j = w'_j / s_j`:
//! [`ColumnScales::to_original`] gives `w`, the weights of the model file.

use super::{Dataset, SampleSet};

/// One positive, finite scale per column.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnScales {
    scales: Vec<f64>,
    /// The smallest and largest RMS of the columns measured (those with a normal RMS), if any.
    range: Option<(f64, f64)>,
}

impl ColumnScales {
    /// The RMS of every column of `data` (see the module docs).
    pub fn rms<S: SampleSet>(data: &S) -> ColumnScales {
        let rows = (0..data.len()).map(|i| {
            let r = data.row(i);
            (r.indices, r.values)
        });
        ColumnScales::from_rows(data.dim(), data.len(), rows)
    }

    fn from_rows<'a>(
        dim: usize,
        n: usize,
        rows: impl Iterator<Item = (&'a [u32], &'a [f64])>,
    ) -> ColumnScales {
        let mut sums = vec![0.0; dim];
        // Squares of the largest |x| first would protect against overflow; values are finite and
        // at most `ingest.max_abs_value`-sized in practice, so a plain sum of squares is used, and a
        // column whose sum overflows keeps scale 1 below.
        for (indices, values) in rows {
            for (&j, &v) in indices.iter().zip(values) {
                sums[j as usize] += v * v;
            }
        }
        let n = n.max(1) as f64;
        let mut range: Option<(f64, f64)> = None;
        let scales = sums
            .into_iter()
            .map(|sum| {
                let rms = (sum / n).sqrt();
                if rms.is_normal() {
                    range = Some(range.map_or((rms, rms), |(lo, hi)| (lo.min(rms), hi.max(rms))));
                    rms
                } else {
                    1.0
                }
            })
            .collect();
        ColumnScales { scales, range }
    }

    /// `log10(largest / smallest)` RMS over the columns measured (0 with none): how many decades the
    /// columns' magnitudes span. The real sets of `docs/benchmarks/quality.md` span 1.1 to 2.8.
    pub fn decades(&self) -> f64 {
        self.range.map_or(0.0, |(lo, hi)| (hi / lo).log10())
    }

    /// `s_j` (1 past the columns measured).
    pub fn of(&self, j: u32) -> f64 {
        self.scales.get(j as usize).copied().unwrap_or(1.0)
    }

    /// Weights solved on the scaled columns, back in original units: `w_j = w'_j / s_j`.
    pub fn to_original(&self, support: &[u32], weights: &[f64]) -> Vec<f64> {
        support
            .iter()
            .zip(weights)
            .map(|(&j, &w)| w / self.of(j))
            .collect()
    }
}

impl Dataset {
    /// Divides every stored value by its column's scale.
    pub fn scale_columns(&mut self, scales: &ColumnScales) {
        let shape = (self.features.rows(), self.features.cols());
        let features = std::mem::replace(&mut self.features, sprs::CsMatI::zero((0, 0)));
        let (indptr, indices, mut values) = features.into_raw_storage();
        for (&j, v) in indices.iter().zip(values.iter_mut()) {
            *v /= scales.of(j);
        }
        // A value divided by a large scale can underflow to zero.
        self.nonzero = super::nonzero(&values);
        self.features = sprs::CsMatI::new(shape, indptr, indices, values);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::Sample;

    fn samples() -> Vec<Sample> {
        vec![
            Sample::new(vec![0, 2], vec![3e6, 1e-6], 1.0, None).unwrap(),
            Sample::new(vec![0], vec![-4e6], -1.0, None).unwrap(),
            Sample::new(vec![2, 3], vec![-3e-6, 0.0], 1.0, None).unwrap(),
        ]
    }

    /// RMS over all rows, zeros included; an empty or all-zero column keeps 1; the data set and the
    /// samples are scaled alike, zeros stay where they were, and the model maps back to raw units.
    #[test]
    fn rms_scales_keep_zeros_and_map_models_back() {
        let samples = samples();
        let mut data = Dataset::from_samples(&samples, 0);
        let scales = ColumnScales::rms(&data);
        assert!((scales.of(0) - (25e12f64 / 3.0).sqrt()).abs() < 1e-3);
        assert!((scales.of(2) - (10e-12f64 / 3.0).sqrt()).abs() < 1e-18);
        assert_eq!(scales.of(1), 1.0);
        assert_eq!(scales.of(3), 1.0);
        assert_eq!(scales.of(99), 1.0);
        assert!((scales.decades() - (scales.of(0) / scales.of(2)).log10()).abs() < 1e-12);
        assert!(scales.decades() > 11.0);
        data.scale_columns(&scales);
        let scaled: Vec<Sample> = (0..data.len())
            .map(|i| data.row(i))
            .map(|r| Sample::new(r.indices.to_vec(), r.values.to_vec(), r.label, None).unwrap())
            .collect();
        for (raw, s) in samples.iter().zip(&scaled) {
            assert_eq!(raw.indices, s.indices);
            for ((&j, &v), &x) in raw.indices.iter().zip(&raw.values).zip(&s.values) {
                assert_eq!(x, v / scales.of(j));
            }
            assert!(s.values.iter().all(|v| v.abs() <= 3f64.sqrt() + 1e-12));
        }
        assert_eq!(data.nnz(), 5);
        // A model on scaled columns scores the raw rows the same once mapped back.
        let (support, w_scaled) = (vec![0u32, 2], vec![0.7, -1.3]);
        let w = scales.to_original(&support, &w_scaled);
        for (raw, scaled) in samples.iter().zip(&scaled) {
            let score = |s: &Sample, w: &[f64]| -> f64 {
                s.indices
                    .iter()
                    .zip(&s.values)
                    .filter_map(|(j, v)| support.iter().position(|k| k == j).map(|at| w[at] * v))
                    .sum()
            };
            let (a, b) = (score(raw, &w), score(scaled, &w_scaled));
            assert!((a - b).abs() < 1e-12 * a.abs().max(1.0), "{a} {b}");
        }
    }
}
