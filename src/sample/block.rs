//! [`SampleBlock`]: a batch of samples stored by column — labels, weights, row offsets, and one index and
//! one value array for all rows — the daemon's unit from request parsing to the learners.
//!
//! Why columns: a `Vec<Sample>` costs two heap allocations per sample when it is built and two frees
//! when it is dropped; under full HTTP ingest that malloc/free traffic was ~8.5% of the daemon's CPU. A
//! block of any size is five vectors, reused as it grows, and a learner copies rows out of it into its
//! window's reused slots ([`crate::ring::Window::push_ref`]), so a steady stream allocates nothing per
//! sample. [`Sample`] stays the owned type of the offline code and the checkpoints.
//!
//! Every row satisfies [`Sample::new`]'s invariants (strictly increasing indices, finite values, finite
//! label, weight finite and > 0): rows enter only through validated samples or, in the crate, through a
//! parser that guarantees them ([`SampleBlock::push_with`]).

use super::{Row, Sample, SampleRef, SampleSet};

/// Samples stored by column. Row `i` owns `indices[offsets[i]..offsets[i + 1]]` and the same range of
/// `values`.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleBlock {
    labels: Vec<f64>,
    /// Per-row weights as given (`None` = 1); empty while every row's weight is `None` (the common case:
    /// LIBSVM has no weights), so such a block keeps no weight column at all.
    weights: Vec<Option<f64>>,
    /// `len() + 1` offsets into `indices`/`values`, starting at 0.
    offsets: Vec<usize>,
    indices: Vec<u32>,
    values: Vec<f64>,
    /// One past the largest feature index of any row.
    dim: usize,
    /// Late labels (`ingest::labels`): the score each learner served for each row when it was
    /// predicted, `served_width` per row in learner order (NaN: that learner served none). Empty (width
    /// 0) for samples that arrived with their label.
    served: Vec<f64>,
    served_width: usize,
}

impl Default for SampleBlock {
    fn default() -> SampleBlock {
        SampleBlock::new()
    }
}

impl SampleBlock {
    pub fn new() -> SampleBlock {
        SampleBlock::with_capacity(0, 0)
    }

    /// An empty block with room for `rows` rows and `nnz` stored features.
    pub fn with_capacity(rows: usize, nnz: usize) -> SampleBlock {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        SampleBlock {
            labels: Vec::with_capacity(rows),
            weights: Vec::new(),
            offsets,
            indices: Vec::with_capacity(nnz),
            values: Vec::with_capacity(nnz),
            dim: 0,
            served: Vec::new(),
            served_width: 0,
        }
    }

    /// Room for `rows` more rows and `nnz` more stored features.
    pub fn reserve(&mut self, rows: usize, nnz: usize) {
        self.labels.reserve(rows);
        self.offsets.reserve(rows);
        self.indices.reserve(nnz);
        self.values.reserve(nnz);
    }

    /// A block holding `samples` in order.
    pub fn from_samples(samples: &[Sample]) -> SampleBlock {
        let nnz = samples.iter().map(|s| s.indices.len()).sum();
        let mut block = SampleBlock::with_capacity(samples.len(), nnz);
        for s in samples {
            block.push(s);
        }
        block
    }

    /// The rows as owned samples (bit for bit what went in).
    pub fn to_samples(&self) -> Vec<Sample> {
        self.iter().map(|s| s.to_sample()).collect()
    }

    /// The labels, to rewrite in place (a one-vs-rest learner's `±1` relabelling of a class batch).
    pub fn labels_mut(&mut self) -> &mut [f64] {
        &mut self.labels
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Stored features over all rows.
    pub fn nnz(&self) -> usize {
        self.indices.len()
    }

    /// One past the largest feature index of any row (0 for a block without features).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Row `i` with its weight as given.
    #[inline]
    pub fn get(&self, i: usize) -> SampleRef<'_> {
        let range = self.offsets[i]..self.offsets[i + 1];
        SampleRef {
            indices: &self.indices[range.clone()],
            values: &self.values[range],
            label: self.labels[i],
            weight: self.weight(i),
        }
    }

    /// Row `i` as the solvers see it (weight `None` read as 1).
    #[inline]
    pub fn row(&self, i: usize) -> Row<'_> {
        self.get(i).row()
    }

    /// The weight row `i` was given.
    #[inline]
    pub fn weight(&self, i: usize) -> Option<f64> {
        self.weights.get(i).copied().flatten()
    }

    /// Sets the scores the learners served for the rows (late labels): `width` per row, in learner
    /// order, NaN where a learner served none. `scores` must hold `len() * width` numbers.
    pub fn set_served(&mut self, width: usize, scores: Vec<f64>) {
        assert_eq!(
            scores.len(),
            self.len() * width,
            "one score per row and learner"
        );
        self.served = scores;
        self.served_width = if self.served.is_empty() { 0 } else { width };
    }

    /// The score the learner at `slot` (its place among the configured learners) served for row `i`
    /// before its label was known, if it served one.
    #[inline]
    pub fn served(&self, i: usize, slot: usize) -> Option<f64> {
        if slot >= self.served_width {
            return None;
        }
        Some(self.served[i * self.served_width + slot]).filter(|u| !u.is_nan())
    }

    /// Scores per row in [`SampleBlock::served`] (0: the rows carry none).
    pub fn served_width(&self) -> usize {
        self.served_width
    }

    /// The rows in order, each with its weight as given.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = SampleRef<'_>> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// The rows in order, as the solvers see them.
    pub fn rows(&self) -> impl ExactSizeIterator<Item = Row<'_>> + '_ {
        (0..self.len()).map(|i| self.row(i))
    }

    /// Appends a copy of a validated sample.
    pub fn push(&mut self, sample: &Sample) {
        self.push_ref(sample.view());
    }

    /// Appends a copy of a row of another block or of a window (valid by construction).
    pub fn push_ref(&mut self, sample: SampleRef<'_>) {
        self.indices.extend_from_slice(sample.indices);
        self.values.extend_from_slice(sample.values);
        self.close_row(sample.label, sample.weight);
    }

    /// Appends every row of `other`, in order.
    pub fn extend_from_block(&mut self, other: &SampleBlock) {
        if !other.weights.is_empty() || !self.weights.is_empty() {
            self.fill_weights();
            self.weights
                .extend((0..other.len()).map(|i| other.weight(i)));
        }
        let base = self.indices.len();
        self.indices.extend_from_slice(&other.indices);
        self.values.extend_from_slice(&other.values);
        self.offsets
            .extend(other.offsets[1..].iter().map(|&end| base + end));
        let rows = self.labels.len();
        self.labels.extend_from_slice(&other.labels);
        self.dim = self.dim.max(other.dim);
        let width = self.served_width.max(other.served_width);
        if width > 0 {
            let mut served = vec![f64::NAN; self.len() * width];
            for i in 0..self.len() {
                for slot in 0..width {
                    let score = if i < rows {
                        self.served(i, slot)
                    } else {
                        other.served(i - rows, slot)
                    };
                    served[i * width + slot] = score.unwrap_or(f64::NAN);
                }
            }
            (self.served, self.served_width) = (served, width);
        }
    }

    /// Appends a row whose features `fill` writes straight into the block's index and value columns,
    /// returning its label and weight: how a parser fills a block without a vector per sample. On an
    /// error the columns are cut back to where they were and the block is unchanged.
    ///
    /// `fill` must only append, and what it appends must satisfy [`Sample::new`]'s invariants with the
    /// label it returns (the crate's parsers guarantee this; checked in debug builds).
    pub(crate) fn push_with<E>(
        &mut self,
        fill: impl FnOnce(&mut Vec<u32>, &mut Vec<f64>) -> Result<(f64, Option<f64>), E>,
    ) -> Result<(), E> {
        let start = self.indices.len();
        match fill(&mut self.indices, &mut self.values) {
            Ok((label, weight)) => {
                debug_assert!(
                    Sample::new(
                        self.indices[start..].to_vec(),
                        self.values[start..].to_vec(),
                        label,
                        weight
                    )
                    .is_ok(),
                    "push_with: the filled row breaks a sample invariant"
                );
                self.close_row(label, weight);
                Ok(())
            }
            Err(e) => {
                self.indices.truncate(start);
                self.values.truncate(start);
                Err(e)
            }
        }
    }

    /// Keeps the first `rows` rows (all of them if there are fewer), exactly as they were before any
    /// later row was pushed.
    pub fn truncate(&mut self, rows: usize) {
        if rows >= self.len() {
            return;
        }
        let nnz = self.offsets[rows];
        self.labels.truncate(rows);
        self.offsets.truncate(rows + 1);
        self.indices.truncate(nnz);
        self.values.truncate(nnz);
        self.weights.truncate(rows);
        self.served.truncate(rows * self.served_width);
        if self.weights.iter().all(Option::is_none) {
            self.weights.clear();
        }
        self.dim = (0..rows)
            .filter_map(|i| self.get(i).indices.last().map(|&j| j as usize + 1))
            .max()
            .unwrap_or(0);
    }

    /// Rewrites every feature index `j >= base` to `map[j - base]` (indices that are provisional until
    /// their names get their final ones, `ingest::dictionary`), keeping each row's indices strictly
    /// increasing. `map` must cover every such index and be one-to-one, and no mapped index may equal
    /// another index of the same row.
    pub fn remap_from(&mut self, base: u32, map: &[u32]) {
        let mut pairs: Vec<(u32, f64)> = Vec::new();
        for i in 0..self.len() {
            let range = self.offsets[i]..self.offsets[i + 1];
            if !self.indices[range.clone()].iter().any(|&j| j >= base) {
                continue;
            }
            pairs.clear();
            pairs.extend(
                self.indices[range.clone()]
                    .iter()
                    .zip(&self.values[range.clone()])
                    .map(|(&j, &v)| match j.checked_sub(base) {
                        Some(k) => (map[k as usize], v),
                        None => (j, v),
                    }),
            );
            pairs.sort_unstable_by_key(|p| p.0);
            for ((j, v), (&nj, &nv)) in self.indices[range.clone()]
                .iter_mut()
                .zip(&mut self.values[range])
                .zip(pairs.iter().map(|(a, b)| (a, b)))
            {
                (*j, *v) = (nj, nv);
            }
        }
        self.dim = self
            .indices
            .iter()
            .map(|&j| j as usize + 1)
            .max()
            .unwrap_or(0);
    }

    /// Empties the block, keeping its allocations.
    pub fn clear(&mut self) {
        self.labels.clear();
        self.weights.clear();
        self.offsets.truncate(1);
        self.indices.clear();
        self.values.clear();
        self.dim = 0;
        self.served.clear();
        self.served_width = 0;
    }

    /// Ends the row whose features are the columns' tail since the last row.
    fn close_row(&mut self, label: f64, weight: Option<f64>) {
        let start = *self.offsets.last().expect("offsets start with 0");
        if let Some(&last) = self.indices[start..].last() {
            self.dim = self.dim.max(last as usize + 1);
        }
        if weight.is_some() || !self.weights.is_empty() {
            self.fill_weights();
            self.weights.push(weight);
        }
        self.labels.push(label);
        self.offsets.push(self.indices.len());
        // A row pushed after the served scores were set served none.
        self.served
            .resize(self.labels.len() * self.served_width, f64::NAN);
    }

    /// Materialises the weight column (`None` for every row so far) before a row that needs it.
    fn fill_weights(&mut self) {
        if self.weights.len() < self.labels.len() {
            self.weights.resize(self.labels.len(), None);
        }
    }
}

impl SampleSet for SampleBlock {
    fn len(&self) -> usize {
        SampleBlock::len(self)
    }
    #[inline]
    fn row(&self, i: usize) -> Row<'_> {
        SampleBlock::row(self, i)
    }
    fn dim(&self) -> usize {
        self.dim
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(s: &Sample) -> (Vec<u32>, Vec<u64>, u64, Option<u64>) {
        (
            s.indices.clone(),
            s.values.iter().map(|v| v.to_bits()).collect(),
            s.label.to_bits(),
            s.weight.map(f64::to_bits),
        )
    }

    fn samples() -> Vec<Sample> {
        vec![
            Sample::new(vec![0, 5], vec![1.5, -2.0], 1.0, None).unwrap(),
            Sample::new(vec![], vec![], -1.0, None).unwrap(),
            Sample::new(vec![7], vec![0.1], 0.25, Some(2.0)).unwrap(),
            Sample::new(vec![1, 2, 3], vec![-0.0, 3.0, 1e-300], -0.0, Some(1.0)).unwrap(),
            Sample::new(vec![4_000_000_000], vec![f64::MIN_POSITIVE], 2.0, None).unwrap(),
        ]
    }

    #[test]
    fn round_trips_samples_exactly() {
        let s = samples();
        let block = SampleBlock::from_samples(&s);
        assert_eq!(block.len(), s.len());
        assert_eq!(block.nnz(), 7);
        assert_eq!(block.dim(), 4_000_000_001);
        let back = block.to_samples();
        assert_eq!(
            back.iter().map(bits).collect::<Vec<_>>(),
            s.iter().map(bits).collect::<Vec<_>>()
        );
        for (i, (r, x)) in block.rows().zip(&s).enumerate() {
            assert_eq!(r.indices, &x.indices[..], "row {i}");
            assert_eq!(r.values, &x.values[..]);
            assert_eq!(r.label.to_bits(), x.label.to_bits());
            assert_eq!(r.weight, x.weight.unwrap_or(1.0));
            assert_eq!(SampleSet::row(&block, i).indices, r.indices);
        }
        // Without any weight the block keeps no weight column, and reads None.
        let plain = SampleBlock::from_samples(&s[..2]);
        assert!(plain.weights.is_empty());
        assert_eq!(plain.weight(1), None);
        assert_eq!(plain.to_samples(), s[..2]);
    }

    #[test]
    fn extends_clears_and_fills_in_place() {
        let s = samples();
        let mut block = SampleBlock::from_samples(&s[..2]);
        block.extend_from_block(&SampleBlock::from_samples(&s[2..]));
        assert_eq!(block.to_samples(), s);
        assert_eq!(block, SampleBlock::from_samples(&s));
        let mut tail = SampleBlock::from_samples(&s[2..4]);
        tail.extend_from_block(&SampleBlock::from_samples(&s[4..]));
        assert_eq!(tail.to_samples(), s[2..]);

        let mut b = SampleBlock::new();
        b.push(&s[0]);
        let err = b.push_with(|i, v| {
            i.push(9);
            v.push(1.0);
            Err::<(f64, Option<f64>), &str>("bad line")
        });
        assert_eq!(err, Err("bad line"));
        assert_eq!(
            b,
            SampleBlock::from_samples(&s[..1]),
            "an error leaves no trace"
        );
        b.push_with(|i, v| {
            i.push(7);
            v.push(0.1);
            Ok::<_, ()>((0.25, Some(2.0)))
        })
        .unwrap();
        assert_eq!(b.to_samples(), vec![s[0].clone(), s[2].clone()]);
        let mut cut = SampleBlock::from_samples(&s);
        cut.truncate(2);
        assert_eq!(
            cut,
            SampleBlock::from_samples(&s[..2]),
            "dim and weights too"
        );
        cut.truncate(5);
        assert_eq!(cut.len(), 2);
        b.clear();
        assert!(b.is_empty() && b.dim() == 0 && b.nnz() == 0);
        assert_eq!(b, SampleBlock::new());
    }
}
