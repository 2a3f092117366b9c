//! The design as the best-subset solver reads it: columns (CSC), each scaled to unit norm.
//!
//! The paper (Ren & Qian, Sec. 2-4) assumes `||x_j|| = 1`: the coordinate step (13) and the screening test
//! (16) are written for unit columns. [`Columns`] keeps `scale_j = ||x_j||` so weights can be reported in
//! the caller's original scale (`w_j = beta_j / scale_j`). Sample weights `c_i` are folded into the rows
//! first (`x_i, y_i <- sqrt(c_i) x_i, sqrt(c_i) y_i`), which turns `(1/2) sum_i c_i (y_i - u_i)^2` into the
//! unweighted squared loss, so nothing downstream knows about weights. All-zero columns are unusable:
//! they never enter the active set and their weight is 0.

use crate::sample::SampleSet;

/// Unit-norm columns of the (row-weighted) design, with the matching response.
#[derive(Debug, Clone)]
pub struct Columns {
    n: usize,
    ptr: Vec<usize>,
    rows: Vec<u32>,
    vals: Vec<f64>,
    scale: Vec<f64>,
    y: Vec<f64>,
}

impl Columns {
    /// Transposes a sample set into unit-norm columns (two passes over the rows, O(nnz)).
    pub fn from_samples<S: SampleSet>(data: &S) -> Columns {
        let n = data.len();
        let p = data.dim();
        let mut ptr = vec![0usize; p + 1];
        for i in 0..n {
            for &j in data.row(i).indices {
                ptr[j as usize + 1] += 1;
            }
        }
        for j in 0..p {
            ptr[j + 1] += ptr[j];
        }
        let nnz = ptr[p];
        let mut fill = ptr.clone();
        let mut rows = vec![0u32; nnz];
        let mut vals = vec![0.0; nnz];
        let mut y = Vec::with_capacity(n);
        for i in 0..n {
            let r = data.row(i);
            let root = r.weight.sqrt();
            y.push(r.label * root);
            for (&j, &v) in r.indices.iter().zip(r.values) {
                let at = fill[j as usize];
                rows[at] = i as u32;
                vals[at] = v * root;
                fill[j as usize] += 1;
            }
        }
        let mut scale = vec![0.0; p];
        for j in 0..p {
            let range = ptr[j]..ptr[j + 1];
            let norm = vals[range.clone()]
                .iter()
                .map(|v| v * v)
                .sum::<f64>()
                .sqrt();
            scale[j] = norm;
            if norm > 0.0 {
                vals[range].iter_mut().for_each(|v| *v /= norm);
            }
        }
        Columns {
            n,
            ptr,
            rows,
            vals,
            scale,
            y,
        }
    }

    /// Number of samples.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Number of columns (features), usable or not.
    pub fn p(&self) -> usize {
        self.scale.len()
    }

    /// The (row-weighted) response.
    pub fn y(&self) -> &[f64] {
        &self.y
    }

    /// `||x_j||` before normalisation (0 for an empty column).
    pub fn scale(&self, j: usize) -> f64 {
        self.scale[j]
    }

    /// A column with at least one nonzero.
    pub fn usable(&self, j: usize) -> bool {
        self.scale[j] > 0.0
    }

    /// `x_j . v` for the unit column `x_j`.
    #[inline]
    pub fn dot(&self, j: usize, v: &[f64]) -> f64 {
        let range = self.ptr[j]..self.ptr[j + 1];
        self.rows[range.clone()]
            .iter()
            .zip(&self.vals[range])
            .map(|(&i, &x)| x * v[i as usize])
            .sum()
    }

    /// `out += a x_j`.
    #[inline]
    pub fn axpy(&self, j: usize, a: f64, out: &mut [f64]) {
        let range = self.ptr[j]..self.ptr[j + 1];
        for (&i, &x) in self.rows[range.clone()].iter().zip(&self.vals[range]) {
            out[i as usize] += a * x;
        }
    }

    /// The rows and (unit-norm) values of column `j`.
    #[inline]
    pub fn column(&self, j: usize) -> (&[u32], &[f64]) {
        let range = self.ptr[j]..self.ptr[j + 1];
        (&self.rows[range.clone()], &self.vals[range])
    }

    /// Stored nonzeros of column `j`.
    pub fn nnz(&self, j: usize) -> usize {
        self.ptr[j + 1] - self.ptr[j]
    }
}
