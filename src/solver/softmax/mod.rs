//! Multinomial logistic (softmax) SDIHT with one k-row support shared by all classes: the problem,
//! the iterate and its block step. The derivation, the dual and the proof of weak duality are in
//! `docs/multiclass.md`; in short, with `C` classes, labels `y_i in 0..C`, weights `c_i` (mean 1),
//!
//! ```text
//! P(W, b) = (1/N) sum_i c_i phi(W^T x_i + b, y_i) + (lambda/2) ||W||_F^2,   at most k nonzero rows of W (d x C)
//! phi(u, y) = ln sum_c e^(u_c) - u_y,   phi*(p - e_y) = sum_c p_c ln p_c  for p on the simplex
//! D(p) = -(1/N) sum_i c_i sum_c p_ic ln p_ic - (lambda/2) ||H_k(W~)||_F^2,   W~ = -Z / (lambda N),
//! Z = sum_i c_i x_i (p_i - e_(y_i))^T
//! ```
//!
//! where `H_k` keeps the `k` rows of largest Euclidean norm, and with an intercept the duals also
//! satisfy `sum_i c_i (p_i - e_(y_i)) = 0` (one constraint per class). Each sample's dual is `p_i` on
//! the simplex (its dual vector is `alpha_i = c_i (p_i - e_(y_i))`); the model is `W = H_k(W~)`.
//!
//! **Block step.** As in the binary coordinate rule ([`super::sdiht`]): with the support `S` fixed,
//! moving sample `i`'s `p_i` to `p` moves `W~` by `-c_i x_i (p - p_i)^T / (lambda N)`, so up to terms
//! free of `p`, `N D = c_i [-sum p ln p + (p - p_i).u_i - (q_i / 2) ||p - p_i||^2]` with
//! `u_i = W^T x_i + b` and `q_i = c_i ||x_i||^2 / (lambda N)` (charged on all of `x_i`, a lower bound
//! of the support's share). Its maximiser over the simplex is [`simplex::maximise`]. Rows of a block
//! are visited in turn, each seeing the earlier ones' changes on the support; then `H_k` is taken
//! again and the block's change is accepted when `D` did not decrease, halved up to
//! [`MAX_BACKTRACK`] - 1 times, else dropped. The change of `D` is computed exactly from its parts
//! (the block's conjugates and the rows of `Z` the block touched), not as a difference of two sums.
//!
//! **Blocks.** Re-thresholding costs `O(d)`; a row's update `O(nnz_i C)`. A block holds enough rows
//! that their updates cost about one threshold ([`default_block`]): on dense rows (gene expression)
//! that is one row per block, the exact SDCA of the shared-support dual; on sparse text many rows.
//!
//! **Intercept.** As the binary SDIHT does: with `b` fixed the steps ascend the dual of the problem
//! with `b` fixed (no constraint); after each epoch `b` is set to its optimum for the current `W`
//! ([`certificate::refit_intercept`]), and the certificate evaluates `D` at duals projected onto
//! the constraint ([`certificate::project`]).
//!
//! Nothing in the step allocates: the state owns every buffer it reuses.

pub mod certificate;
pub mod driver;
pub mod polish;
pub mod simplex;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use thiserror::Error;

use crate::sample::SampleSet;
use crate::sparse::{top_k_indices, ThresholdScratch};

/// Halvings of a block's change tried before it is dropped.
pub const MAX_BACKTRACK: usize = 12;

/// The shared-support softmax problem on a set of samples whose labels are class indices `0..C`.
#[derive(Debug, Clone, Copy)]
pub struct SoftmaxProblem<'a, S: SampleSet> {
    pub data: &'a S,
    pub classes: usize,
    pub lambda: f64,
    /// At most `k` nonzero rows (features) in `W`.
    pub k: usize,
    /// Fit an unpenalised intercept per class.
    pub intercept: bool,
}

#[derive(Debug, Error, PartialEq)]
pub enum SoftmaxError {
    #[error("lambda must be finite and > 0, got {0}")]
    BadLambda(f64),
    #[error("k must be >= 1")]
    ZeroK,
    #[error("the data set is empty")]
    NoSamples,
    #[error("a softmax model needs 2 or more classes, got {0}")]
    Classes(usize),
    #[error("sample {index}: label {label} is not a class index in 0..{classes}")]
    Label {
        index: usize,
        label: f64,
        classes: usize,
    },
}

impl<'a, S: SampleSet> SoftmaxProblem<'a, S> {
    /// Validates the parameters and every label (an integer in `0..classes`).
    pub fn new(
        data: &'a S,
        classes: usize,
        lambda: f64,
        k: usize,
        intercept: bool,
    ) -> Result<Self, SoftmaxError> {
        if !(lambda.is_finite() && lambda > 0.0) {
            return Err(SoftmaxError::BadLambda(lambda));
        }
        if k == 0 {
            return Err(SoftmaxError::ZeroK);
        }
        if data.is_empty() {
            return Err(SoftmaxError::NoSamples);
        }
        if classes < 2 {
            return Err(SoftmaxError::Classes(classes));
        }
        for index in 0..data.len() {
            let label = data.row(index).label;
            if !(label >= 0.0 && label.fract() == 0.0 && label < classes as f64) {
                return Err(SoftmaxError::Label {
                    index,
                    label,
                    classes,
                });
            }
        }
        Ok(SoftmaxProblem {
            data,
            classes,
            lambda,
            k,
            intercept,
        })
    }

    pub fn n(&self) -> f64 {
        self.data.len() as f64
    }

    /// Row `i`'s class index.
    pub fn class_of(&self, i: usize) -> usize {
        self.data.row(i).label as usize
    }

    /// `-1 / (lambda N)`: `W~ = scale * Z`.
    pub fn scale(&self) -> f64 {
        -1.0 / (self.lambda * self.n())
    }
}

/// Rows per block: enough that their updates (`nnz C` each) cost about one threshold (`d`), at least
/// one and at most all (module docs, "Blocks").
pub fn default_block(nnz: usize, rows: usize, dim: usize, classes: usize) -> usize {
    let per_row = (nnz as f64 / rows.max(1) as f64) * classes as f64;
    ((dim as f64 / per_row.max(1.0)).ceil() as usize).clamp(1, rows.max(1))
}

/// The iterate: every sample's dual probabilities, `Z`, its rows' squared norms, the support and the
/// intercepts, with the scratch the block step reuses.
#[derive(Debug, Clone)]
pub struct SoftmaxState {
    classes: usize,
    /// `p_i`, row-major `N x C`.
    pub p: Vec<f64>,
    /// `c_i sum_c p_ic ln p_ic` of every row.
    conj: Vec<f64>,
    /// `Z = sum_i c_i x_i (p_i - e_(y_i))^T`, row-major `d x C`.
    z: Vec<f64>,
    /// `||Z_j||^2` of every row `j`.
    row_sq: Vec<f64>,
    /// The rows kept, ascending (the `k` largest `row_sq`, nonzero only).
    support: Vec<u32>,
    in_support: Vec<bool>,
    /// The per-class intercepts (zero without one).
    pub b: Vec<f64>,
    /// Rows per block.
    block: usize,
    order: Vec<usize>,
    rng: ChaCha8Rng,
    threshold: ThresholdScratch,
    trial: Vec<u32>,
    // Scratch of one block: the rows' old and full-step duals and conjugates, the touched rows of
    // `Z` with their old squared norms, and one row's scores.
    old_p: Vec<f64>,
    new_p: Vec<f64>,
    old_conj: Vec<f64>,
    new_conj: Vec<f64>,
    touched: Vec<(u32, f64)>,
    stamp: Vec<u32>,
    stamp_now: u32,
    u: Vec<f64>,
    mix: Vec<f64>,
    log_p: Vec<f64>,
    /// Block changes dropped because `D` would decrease at every tried scale or a value was not finite.
    pub dropped_blocks: usize,
}

impl SoftmaxState {
    /// The start `p_i = e_(y_i)` (every dual zero, `W = 0`, `D = 0`), with blocks of `block` rows
    /// drawn in an order shuffled by `seed` each epoch.
    pub fn new<S: SampleSet>(problem: &SoftmaxProblem<S>, block: usize, seed: u64) -> Self {
        let (n, c, d) = (problem.data.len(), problem.classes, problem.data.dim());
        let mut p = vec![0.0; n * c];
        for i in 0..n {
            p[i * c + problem.class_of(i)] = 1.0;
        }
        let block = block.clamp(1, n.max(1));
        SoftmaxState {
            classes: c,
            p,
            conj: vec![0.0; n],
            z: vec![0.0; d * c],
            row_sq: vec![0.0; d],
            support: Vec::new(),
            in_support: vec![false; d],
            b: vec![0.0; c],
            block,
            order: (0..n).collect(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            threshold: ThresholdScratch::default(),
            trial: Vec::new(),
            old_p: vec![0.0; block * c],
            new_p: vec![0.0; block * c],
            old_conj: vec![0.0; block],
            new_conj: vec![0.0; block],
            touched: Vec::new(),
            stamp: vec![0; d],
            stamp_now: 0,
            u: vec![0.0; c],
            mix: vec![0.0; c],
            log_p: vec![0.0; c],
            dropped_blocks: 0,
        }
    }

    pub fn classes(&self) -> usize {
        self.classes
    }

    /// The support rows, ascending.
    pub fn support(&self) -> &[u32] {
        &self.support
    }

    /// `W`'s rows on the support, row-major `|S| x C` parallel to [`Self::support`].
    pub fn weights<S: SampleSet>(&self, problem: &SoftmaxProblem<S>) -> Vec<f64> {
        let (c, scale) = (self.classes, problem.scale());
        let mut w = Vec::with_capacity(self.support.len() * c);
        for &j in &self.support {
            let j = j as usize;
            w.extend(self.z[j * c..(j + 1) * c].iter().map(|v| scale * v));
        }
        w
    }

    /// One epoch: every row once, in blocks, in a freshly shuffled order; then the intercept's refit.
    pub fn epoch<S: SampleSet>(&mut self, problem: &SoftmaxProblem<S>) {
        let mut order = std::mem::take(&mut self.order);
        order.shuffle(&mut self.rng);
        for rows in order.chunks(self.block) {
            self.block_step(problem, rows);
        }
        self.order = order;
        if problem.intercept {
            certificate::refit_intercept(problem, &self.support, &self.z, &mut self.b);
        }
    }

    /// `u = W^T x_i + b` on the current support.
    fn scores<S: SampleSet>(&mut self, problem: &SoftmaxProblem<S>, i: usize) {
        let (c, scale) = (self.classes, problem.scale());
        self.u.copy_from_slice(&self.b);
        let row = problem.data.row(i);
        for (&j, &x) in row.indices.iter().zip(row.values) {
            let j = j as usize;
            if self.in_support[j] {
                let zj = &self.z[j * c..(j + 1) * c];
                for (uc, &zc) in self.u.iter_mut().zip(zj) {
                    *uc += scale * x * zc;
                }
            }
        }
    }

    /// Moves row `i`'s dual from its current value to `target`, updating `Z` and the touched rows'
    /// norms (noting each row's norm before the block's first change).
    fn move_row<S: SampleSet>(&mut self, problem: &SoftmaxProblem<S>, i: usize, target: &[f64]) {
        let c = self.classes;
        let row = problem.data.row(i);
        for (&j, &x) in row.indices.iter().zip(row.values) {
            let ju = j as usize;
            if self.stamp[ju] != self.stamp_now {
                self.stamp[ju] = self.stamp_now;
                self.touched.push((j, self.row_sq[ju]));
            }
            let zj = &mut self.z[ju * c..(ju + 1) * c];
            let mut sq = 0.0;
            for ((zc, &t), &pc) in zj.iter_mut().zip(target).zip(&self.p[i * c..(i + 1) * c]) {
                *zc += row.weight * x * (t - pc);
                sq += *zc * *zc;
            }
            self.row_sq[ju] = sq;
        }
        self.p[i * c..(i + 1) * c].copy_from_slice(target);
    }

    /// One block step (module docs): the full step of each row in turn, then `H_k`, the acceptance
    /// test and the backtracking.
    fn block_step<S: SampleSet>(&mut self, problem: &SoftmaxProblem<S>, rows: &[usize]) {
        let c = self.classes;
        let n = problem.n();
        self.stamp_now = self.stamp_now.wrapping_add(1);
        if self.stamp_now == 0 {
            self.stamp.iter_mut().for_each(|s| *s = 0);
            self.stamp_now = 1;
        }
        self.touched.clear();
        let mut finite = true;
        let mut target = std::mem::take(&mut self.new_p);
        for (pos, &i) in rows.iter().enumerate() {
            let row = problem.data.row(i);
            self.old_p[pos * c..(pos + 1) * c].copy_from_slice(&self.p[i * c..(i + 1) * c]);
            self.old_conj[pos] = self.conj[i];
            self.scores(problem, i);
            let sq: f64 = row.values.iter().map(|v| v * v).sum();
            let q = row.weight * sq / (problem.lambda * n);
            let new = &mut target[pos * c..(pos + 1) * c];
            let ent = simplex::maximise(
                &self.u,
                &self.old_p[pos * c..(pos + 1) * c],
                q,
                new,
                &mut self.log_p,
            );
            if !(ent.is_finite() && new.iter().all(|v| v.is_finite())) {
                new.copy_from_slice(&self.old_p[pos * c..(pos + 1) * c]);
                finite = false;
            }
            self.new_conj[pos] = row.weight * ent;
            self.move_row(problem, i, &target[pos * c..(pos + 1) * c]);
            self.conj[i] = self.new_conj[pos];
        }
        let mut t = 1.0;
        let mut accepted = false;
        for attempt in 0..MAX_BACKTRACK {
            if attempt > 0 {
                t *= 0.5;
                for (pos, &i) in rows.iter().enumerate() {
                    let mut mix = std::mem::take(&mut self.mix);
                    for (cl, m) in mix.iter_mut().enumerate() {
                        let before = self.old_p[pos * c + cl];
                        *m = before + t * (target[pos * c + cl] - before);
                    }
                    self.move_row(problem, i, &mix);
                    self.conj[i] = problem.data.row(i).weight * simplex::neg_entropy(&mix);
                    self.mix = mix;
                }
            }
            let change = self.dual_change(problem, rows);
            if change.is_finite() && change >= 0.0 {
                accepted = true;
                break;
            }
        }
        if !accepted || !finite {
            self.dropped_blocks += 1;
        }
        if !accepted {
            let mut mix = std::mem::take(&mut self.mix);
            for (pos, &i) in rows.iter().enumerate() {
                mix.copy_from_slice(&self.old_p[pos * c..(pos + 1) * c]);
                self.move_row(problem, i, &mix);
                self.conj[i] = self.old_conj[pos];
            }
            self.mix = mix;
            self.dual_change(problem, rows);
        }
        self.new_p = target;
        // Adopt the trial support `dual_change` left.
        for &j in &self.support {
            self.in_support[j as usize] = false;
        }
        std::mem::swap(&mut self.support, &mut self.trial);
        for &j in &self.support {
            self.in_support[j as usize] = true;
        }
    }

    /// `D(now) - D(block start)` with `H_k` taken again (left in `trial`), from its parts: the block's
    /// conjugates and the rows of `Z` it touched, over the two supports only.
    fn dual_change<S: SampleSet>(&mut self, problem: &SoftmaxProblem<S>, rows: &[usize]) -> f64 {
        let n = problem.n();
        let c = self.classes;
        // With the intercept held fixed the steps ascend `D_b = D + b.sum_i alpha_i / N` (module
        // docs), whose change has the term `b.(alpha_new - alpha_old) / N` as well.
        let (mut conj_change, mut linear) = (0.0, 0.0);
        for (pos, &i) in rows.iter().enumerate() {
            conj_change += self.conj[i] - self.old_conj[pos];
            if problem.intercept {
                let weight = problem.data.row(i).weight;
                for cl in 0..c {
                    linear += weight * self.b[cl] * (self.p[i * c + cl] - self.old_p[pos * c + cl]);
                }
            }
        }
        let new = top_k_indices(&self.row_sq, problem.k, &mut self.threshold);
        self.trial.clear();
        self.trial.extend_from_slice(new);
        // sum_{S'} rs' - sum_S rs = (sum_{S' \ S} rs' - sum_{S \ S'} rs') + sum_{S, touched} (rs' - rs).
        let mut norm_change = 0.0;
        let (old, new) = (&self.support, &self.trial);
        let (mut a, mut b) = (0, 0);
        while a < old.len() || b < new.len() {
            match (old.get(a), new.get(b)) {
                (Some(&x), Some(&y)) if x == y => {
                    a += 1;
                    b += 1;
                }
                (Some(&x), Some(&y)) if x < y => {
                    norm_change -= self.row_sq[x as usize];
                    a += 1;
                }
                (Some(&x), None) => {
                    norm_change -= self.row_sq[x as usize];
                    a += 1;
                }
                (_, Some(&y)) => {
                    norm_change += self.row_sq[y as usize];
                    b += 1;
                }
                (None, None) => break,
            }
        }
        for &(j, before) in &self.touched {
            if self.in_support[j as usize] {
                norm_change += self.row_sq[j as usize] - before;
            }
        }
        let scale = problem.scale();
        (linear - conj_change) / n - 0.5 * problem.lambda * scale * scale * norm_change
    }

    /// `Z` (row-major `d x C`).
    pub fn z(&self) -> &[f64] {
        &self.z
    }
}

#[cfg(test)]
mod tests;
