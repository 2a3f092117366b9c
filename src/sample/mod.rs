//! The sparse sample type used everywhere, and the in-memory data set the offline solvers train on.
//!
//! A [`Sample`] is one sparse feature vector with a label and an optional weight. Feature indices are
//! kept exactly as the input gave them (0- or 1-based alike), strictly increasing, so the model reports
//! the same indices the data used. A [`Dataset`] stores many samples as one CSR matrix (`sprs`), and
//! solvers read rows through the [`SampleSet`] trait, which the daemon's ring-buffer window implements
//! too, so the same solver code runs offline and live. The daemon moves samples in batches stored by
//! column, [`SampleBlock`]s (one allocation per column, not two per sample), and hands single rows
//! around as borrowed [`SampleRef`]s. [`ColumnScales`] rescales a data set's columns (`fit --standardize`).
//! [`ByteReader`] reads the little-endian binary files that hold samples (checkpoint, write-ahead log).

mod block;
mod bytes;
mod scale;

pub use block::SampleBlock;
pub use bytes::ByteReader;
pub use scale::ColumnScales;

use sprs::CsMatI;
use thiserror::Error;

/// One training example: `label` and a sparse feature vector `(indices, values)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Strictly increasing feature indices, as given by the input.
    pub indices: Vec<u32>,
    /// Finite feature values, parallel to `indices`.
    pub values: Vec<f64>,
    pub label: f64,
    /// Importance weight `c > 0` (the loss is scaled by it); `None` means 1.
    pub weight: Option<f64>,
}

/// Why a sample is not acceptable. The readers wrap this with the file and line it came from.
#[derive(Debug, Error, PartialEq, Clone)]
pub enum SampleError {
    #[error("feature indices must be strictly increasing: {prev} is followed by {next}")]
    UnsortedIndex { prev: u32, next: u32 },
    #[error("duplicate feature index {0}")]
    DuplicateIndex(u32),
    #[error("feature {index} has non-finite value {value}")]
    NonFiniteValue { index: u32, value: f64 },
    #[error("label is not finite: {0}")]
    NonFiniteLabel(f64),
    #[error("weight must be finite and > 0, got {0}")]
    BadWeight(f64),
    #[error("{indices} indices but {values} values")]
    LengthMismatch { indices: usize, values: usize },
}

impl Sample {
    /// Builds a sample, checking every invariant the solvers rely on.
    pub fn new(
        indices: Vec<u32>,
        values: Vec<f64>,
        label: f64,
        weight: Option<f64>,
    ) -> Result<Sample, SampleError> {
        Sample::check(&indices, &values, label, weight)?;
        Ok(Sample {
            indices,
            values,
            label,
            weight,
        })
    }

    /// The invariants [`Sample::new`] enforces, on borrowed parts (for a row about to be copied into a
    /// batch): the first one broken, in a fixed order (lengths, label, weight, index order, values).
    pub fn check(
        indices: &[u32],
        values: &[f64],
        label: f64,
        weight: Option<f64>,
    ) -> Result<(), SampleError> {
        if indices.len() != values.len() {
            return Err(SampleError::LengthMismatch {
                indices: indices.len(),
                values: values.len(),
            });
        }
        if !label.is_finite() {
            return Err(SampleError::NonFiniteLabel(label));
        }
        if let Some(c) = weight {
            if !(c.is_finite() && c > 0.0) {
                return Err(SampleError::BadWeight(c));
            }
        }
        for w in indices.windows(2) {
            if w[0] == w[1] {
                return Err(SampleError::DuplicateIndex(w[0]));
            }
            if w[0] > w[1] {
                return Err(SampleError::UnsortedIndex {
                    prev: w[0],
                    next: w[1],
                });
            }
        }
        for (&index, &value) in indices.iter().zip(values) {
            if !value.is_finite() {
                return Err(SampleError::NonFiniteValue { index, value });
            }
        }
        Ok(())
    }

    pub fn row(&self) -> Row<'_> {
        Row {
            indices: &self.indices,
            values: &self.values,
            label: self.label,
            weight: self.weight.unwrap_or(1.0),
        }
    }

    /// One past the largest feature index (0 for an empty sample).
    pub fn dim(&self) -> usize {
        self.indices.last().map_or(0, |&j| j as usize + 1)
    }

    /// A borrowed view keeping the weight as given.
    pub fn view(&self) -> SampleRef<'_> {
        SampleRef {
            indices: &self.indices,
            values: &self.values,
            label: self.label,
            weight: self.weight,
        }
    }
}

/// A borrowed sample with its weight as given (`None` means 1): a row of a [`SampleBlock`] on its way
/// into a window, where the exact weight must survive to the checkpoint. It upholds [`Sample`]'s
/// invariants (it only ever borrows from a `Sample` or a block).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampleRef<'a> {
    pub indices: &'a [u32],
    pub values: &'a [f64],
    pub label: f64,
    pub weight: Option<f64>,
}

impl<'a> SampleRef<'a> {
    /// As the solvers see it (weight `None` read as 1).
    #[inline]
    pub fn row(&self) -> Row<'a> {
        Row {
            indices: self.indices,
            values: self.values,
            label: self.label,
            weight: self.weight.unwrap_or(1.0),
        }
    }

    /// An owned copy written over `out`, whose buffers are reused (a ring of held-out samples
    /// replaces its oldest without allocating).
    pub fn copy_into(&self, out: &mut Sample) {
        out.indices.clear();
        out.indices.extend_from_slice(self.indices);
        out.values.clear();
        out.values.extend_from_slice(self.values);
        out.label = self.label;
        out.weight = self.weight;
    }

    /// An owned copy.
    pub fn to_sample(&self) -> Sample {
        Sample {
            indices: self.indices.to_vec(),
            values: self.values.to_vec(),
            label: self.label,
            weight: self.weight,
        }
    }

    /// One past the largest feature index (0 for an empty sample).
    pub fn dim(&self) -> usize {
        self.indices.last().map_or(0, |&j| j as usize + 1)
    }
}

/// A borrowed view of one sample, as the solvers see it.
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    pub indices: &'a [u32],
    pub values: &'a [f64],
    pub label: f64,
    pub weight: f64,
}

/// Anything the solvers can train on: a fixed set of rows addressed `0..len()`.
pub trait SampleSet: Sync {
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn row(&self, i: usize) -> Row<'_>;
    /// Asks the CPU to bring what [`SampleSet::row`] reads before the row's pairs (where they are, the
    /// label, the weight) into cache: a hint for a row read a few rows from now, in an order the
    /// hardware prefetcher cannot follow. Nothing by default.
    #[inline(always)]
    fn prefetch_meta(&self, i: usize) {
        let _ = i;
    }
    /// One past the largest feature index any row may use.
    fn dim(&self) -> usize;
    /// The mass `M = sum_i c_i`: the rows' total weight, the normaliser of the weighted-mean objective
    /// (`M = N` when every weight is 1). Summed over the rows here; [`Dataset`] and the daemon's
    /// window keep it instead.
    fn mass(&self) -> f64 {
        (0..self.len()).map(|i| self.row(i).weight).sum()
    }
    /// The divisor of the objective: [`SampleSet::mass`], or 1 for a set without rows (whose sums
    /// are 0), as `max(N, 1)` was for counts.
    fn normaliser(&self) -> f64 {
        let mass = self.mass();
        if mass > 0.0 {
            mass
        } else {
            1.0
        }
    }
}

impl<'a> Row<'a> {
    /// The row with its weight multiplied by `scale` (a stochastic primal step on the weighted mean
    /// takes `c_i N / M`, whose mean over the rows is 1).
    #[inline]
    pub fn scaled(self, scale: f64) -> Row<'a> {
        Row {
            weight: self.weight * scale,
            ..self
        }
    }
}

/// Samples with a dual variable each: what SDIHT's block step reads and updates. An in-memory data set
/// with its dual vector (`solver::sdiht::offline::Sdiht`) and the daemon's window (which stores each sample's
/// dual beside it) both implement it, so offline and streaming SDIHT run the same step.
pub trait DualRows: SampleSet {
    /// `alpha_i`, parallel to [`SampleSet::row`].
    fn alphas(&self) -> &[f64];
    fn alphas_mut(&mut self) -> &mut [f64];
    /// `||x_i||^2` (cached by the implementor: the adaptive step reads it every block step).
    fn sq_norm(&self, i: usize) -> f64;
}

/// Weights rescaled to mean 1 (`c_i N / sum_j c_j`; an absent weight is 1), all left as they are when
/// every weight is 1: for a solver whose objective divides by `N` (the shared-support softmax model,
/// `solver::softmax`), which then minimises the weighted mean `sum_i c_i l_i / sum_i c_i`.
pub fn mean_weight_one(samples: &mut [Sample]) {
    if samples.iter().all(|s| s.weight.unwrap_or(1.0) == 1.0) {
        return;
    }
    let total: f64 = samples.iter().map(|s| s.weight.unwrap_or(1.0)).sum();
    let factor = samples.len() as f64 / total;
    for s in samples.iter_mut() {
        s.weight = Some(s.weight.unwrap_or(1.0) * factor);
    }
}

/// An in-memory data set: samples as the rows of a CSR matrix, with labels and weights.
#[derive(Debug, Clone)]
pub struct Dataset {
    features: CsMatI<f64, u32, usize>,
    labels: Vec<f64>,
    weights: Vec<f64>,
    /// `sum_i c_i`, in row order.
    mass: f64,
    /// Stored values that are not zero ([`Dataset::nonzero_values`]), counted once when the set is
    /// built: `fit` reads it twice before its first step, and each count was a pass over every value.
    nonzero: usize,
}

/// `sum_i c_i` in row order: the mass of a set of weights.
fn total(weights: &[f64]) -> f64 {
    weights.iter().sum()
}

/// Values that are not zero.
fn nonzero(values: &[f64]) -> usize {
    values.iter().filter(|v| **v != 0.0).count()
}

impl Dataset {
    /// Builds a data set from validated samples; `min_dim` lets a caller fix the dimension (e.g. to a
    /// model's) when it is larger than the largest index present.
    pub fn from_samples(samples: &[Sample], min_dim: usize) -> Dataset {
        let dim = samples
            .iter()
            .map(Sample::dim)
            .max()
            .unwrap_or(0)
            .max(min_dim);
        let nnz = samples.iter().map(|s| s.indices.len()).sum();
        let mut indptr = Vec::with_capacity(samples.len() + 1);
        let mut indices = Vec::with_capacity(nnz);
        let mut data = Vec::with_capacity(nnz);
        indptr.push(0usize);
        for s in samples {
            indices.extend_from_slice(&s.indices);
            data.extend_from_slice(&s.values);
            indptr.push(indices.len());
        }
        // Sample::new guarantees sorted, in-range indices, so this cannot fail.
        let features = CsMatI::new((samples.len(), dim), indptr, indices, data);
        let weights: Vec<f64> = samples.iter().map(|s| s.weight.unwrap_or(1.0)).collect();
        Dataset {
            nonzero: nonzero(features.data()),
            features,
            labels: samples.iter().map(|s| s.label).collect(),
            mass: total(&weights),
            weights,
        }
    }

    /// Builds a data set from compressed-row columns whose rows hold the sample invariants (sorted,
    /// distinct indices; finite values), as the file reader produces them. `dim` is one past the
    /// largest index, and `nonzero` the count of values that are not zero: the reader counts both
    /// line by line as it parses, where each would otherwise be a pass over every stored value
    /// (checked in debug builds).
    pub fn from_parts(
        (indptr, indices, values): (Vec<usize>, Vec<u32>, Vec<f64>),
        labels: Vec<f64>,
        weights: Vec<f64>,
        (dim, nonzero_values): (usize, usize),
    ) -> Dataset {
        debug_assert_eq!(
            dim,
            indices.iter().max().map_or(0, |&j| j as usize + 1),
            "the reader's dimension"
        );
        debug_assert_eq!(nonzero_values, nonzero(&values), "the reader's count");
        let rows = labels.len();
        Dataset {
            features: CsMatI::new((rows, dim), indptr, indices, values),
            labels,
            mass: total(&weights),
            weights,
            nonzero: nonzero_values,
        }
    }

    /// The rows `rows` of this set, in that order, as a set of their own whose dimension is one past
    /// the largest index they use: the same set, bit for bit, as [`Dataset::from_samples`] of those
    /// rows read as samples, without an allocation per row (`fit --lambda auto` builds its folds
    /// this way).
    pub fn select_rows(&self, rows: &[usize]) -> Dataset {
        let nnz = rows.iter().map(|&i| self.row(i).indices.len()).sum();
        let mut indptr = Vec::with_capacity(rows.len() + 1);
        let mut indices = Vec::with_capacity(nnz);
        let mut values = Vec::with_capacity(nnz);
        indptr.push(0usize);
        let mut dim = 0;
        for &i in rows {
            let r = self.row(i);
            indices.extend_from_slice(r.indices);
            values.extend_from_slice(r.values);
            indptr.push(indices.len());
            dim = r.indices.last().map_or(dim, |&j| dim.max(j as usize + 1));
        }
        let weights: Vec<f64> = rows.iter().map(|&i| self.weights[i]).collect();
        Dataset {
            nonzero: nonzero(&values),
            features: CsMatI::new((rows.len(), dim), indptr, indices, values),
            labels: rows.iter().map(|&i| self.labels[i]).collect(),
            mass: total(&weights),
            weights,
        }
    }

    pub fn labels(&self) -> &[f64] {
        &self.labels
    }

    /// The CSR feature matrix (rows are samples).
    pub fn features(&self) -> &CsMatI<f64, u32, usize> {
        &self.features
    }

    /// Total stored nonzeros.
    pub fn nnz(&self) -> usize {
        self.features.nnz()
    }

    /// Stored values that are not zero (an explicit `j:0` in a file is stored, and not counted here).
    pub fn nonzero_values(&self) -> usize {
        self.nonzero
    }

    /// Rewrites every label as `f(label)` (one class against the rest, for a one-vs-rest fit).
    pub fn map_labels(&mut self, f: impl Fn(f64) -> f64) {
        for y in &mut self.labels {
            *y = f(*y);
        }
    }

    /// A data set with the same rows but at least `dim` columns.
    pub fn with_min_dim(self, dim: usize) -> Dataset {
        if dim <= self.dim() {
            return self;
        }
        let (indptr, indices, data) = self.features.into_raw_storage();
        let rows = indptr.len() - 1;
        Dataset {
            features: CsMatI::new((rows, dim), indptr, indices, data),
            labels: self.labels,
            weights: self.weights,
            mass: self.mass,
            nonzero: self.nonzero,
        }
    }
}

impl SampleSet for Dataset {
    fn len(&self) -> usize {
        self.labels.len()
    }
    #[inline]
    fn row(&self, i: usize) -> Row<'_> {
        let ptr = self.features.indptr();
        let range = ptr.outer_inds_sz(i);
        Row {
            indices: &self.features.indices()[range.clone()],
            values: &self.features.data()[range],
            label: self.labels[i],
            weight: self.weights[i],
        }
    }
    #[inline(always)]
    fn prefetch_meta(&self, i: usize) {
        crate::sparse::prefetch(self.features.indptr().raw_storage(), i);
        crate::sparse::prefetch(&self.labels, i);
        crate::sparse::prefetch(&self.weights, i);
    }
    fn dim(&self) -> usize {
        self.features.cols()
    }
    fn mass(&self) -> f64 {
        self.mass
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_invariants() {
        assert!(Sample::new(vec![1, 3], vec![1.0, 2.0], 1.0, None).is_ok());
        assert_eq!(
            Sample::new(vec![3, 1], vec![1.0, 2.0], 1.0, None),
            Err(SampleError::UnsortedIndex { prev: 3, next: 1 })
        );
        assert_eq!(
            Sample::new(vec![2, 2], vec![1.0, 2.0], 1.0, None),
            Err(SampleError::DuplicateIndex(2))
        );
        assert!(matches!(
            Sample::new(vec![2], vec![f64::NAN], 1.0, None),
            Err(SampleError::NonFiniteValue { index: 2, .. })
        ));
        assert!(Sample::new(vec![], vec![], f64::INFINITY, None).is_err());
        assert!(Sample::new(vec![], vec![], 1.0, Some(0.0)).is_err());
        assert!(Sample::new(vec![1], vec![], 1.0, None).is_err());
    }

    #[test]
    fn dataset_rows_round_trip() {
        let s = vec![
            Sample::new(vec![0, 5], vec![1.0, 2.0], 1.0, None).unwrap(),
            Sample::new(vec![], vec![], -1.0, Some(2.0)).unwrap(),
            Sample::new(vec![2], vec![3.0], 0.5, None).unwrap(),
        ];
        let ds = Dataset::from_samples(&s, 0);
        assert_eq!(ds.len(), 3);
        assert_eq!(ds.dim(), 6);
        assert_eq!(ds.row(0).indices, &[0, 5]);
        assert_eq!(ds.row(1).indices.len(), 0);
        assert_eq!(ds.row(1).weight, 2.0);
        assert_eq!(ds.row(2).values, &[3.0]);
        assert_eq!(ds.clone().with_min_dim(10).dim(), 10);
    }

    #[test]
    fn selected_rows_equal_the_samples_read_again() {
        let s = vec![
            Sample::new(vec![0, 5], vec![1.0, 2.0], 1.0, None).unwrap(),
            Sample::new(vec![], vec![], -1.0, Some(2.0)).unwrap(),
            Sample::new(vec![2, 9], vec![3.0, -1.5], 1.0, Some(0.5)).unwrap(),
            Sample::new(vec![3], vec![4.0], -1.0, None).unwrap(),
        ];
        let all = Dataset::from_samples(&s, 0);
        for rows in [vec![3, 1, 0], vec![1], vec![], vec![2, 2, 0, 3, 1]] {
            let picked: Vec<Sample> = rows.iter().map(|&i| s[i].clone()).collect();
            let (a, b) = (all.select_rows(&rows), Dataset::from_samples(&picked, 0));
            assert_eq!(a.features, b.features, "rows {rows:?}");
            assert_eq!((a.labels(), a.dim()), (b.labels(), b.dim()));
            assert_eq!(a.weights, b.weights);
            assert_eq!(a.mass().to_bits(), b.mass().to_bits());
        }
    }
}
