//! The objective, its dual and the primal-dual gap certificate shared by every solver.
//!
//! Problem (1.1) of the DIHT paper with sample weights `c_i > 0`, the weighted mean:
//! `P(w, b) = (1/M) sum_i c_i l(w.x_i + b, y_i) + (lambda/2) ||w||^2` over `||w||_0 <= k`, with the
//! *mass* `M = sum_i c_i` ([`SampleSet::mass`]; `M = N` when every weight is 1, the paper's problem),
//! so that a sample of integer weight `c` counts exactly as `c` copies of it (`b` is the optional
//! unpenalised intercept, 0 when off).
//!
//! Dual (Lemma 1 with `l_i = c_i l(., y_i)` and `1/N` replaced by `1/M`):
//! `D(alpha) = -(1/M) sum_i l_i*(alpha_i) - (lambda/2) ||H_k(w~(alpha))||^2` with
//! `w~(alpha) = -(1/(lambda M)) sum_i alpha_i x_i`, `l_i*(a) = c_i l*(a / c_i, y_i)` on
//! `F_i = c_i F`. The derivation is the paper's line by line with `N` replaced by any constant
//! `M > 0`: writing `l_i(u) = sup_a {a u - l_i*(a)}`,
//! `P(w) = sup_alpha (1/M) sum_i (alpha_i w.x_i - l_i*(alpha_i)) + (lambda/2)||w||^2 = sup_alpha L(w, alpha)`,
//! and `min_{||w||_0 <= k} L(w, alpha)` is attained at `H_k(w~(alpha))` and equals `D(alpha)`; so
//! `P(w) >= L(w, alpha) >= D(alpha)` for every k-sparse `w` and feasible `alpha` (weak duality, Thm 1),
//! and `P - D` certifies how far a model is from optimal for the weighted mean. In the weight-free
//! dual `beta_i = alpha_i / c_i in F`, row `i`'s conjugate term is `c_i l*(beta_i)` (scaled by `c_i`)
//! and it moves `w~` by `-(c_i / (lambda M)) beta_i x_i`: the SDCA step of row `i` uses `c_i / (lambda M)`.
//!
//! **Intercept.** `b` is free and unpenalised, so the Lagrangian's `inf_b (1/N) b sum_i alpha_i` is
//! `-inf` unless `sum_i alpha_i = 0`: the intercept enters the dual as the equality constraint
//! `sum_i alpha_i = 0`, with `D` unchanged on it. Dual points are therefore projected onto
//! `F^N ∩ {sum alpha = 0}` ([`project_with_sum`]) and `b` itself is recovered by minimising `P` over `b`
//! for the current `w` ([`best_intercept`]).
//!
//! **Fused certificate.** A streaming learner publishes `P(w)`, `D` at its dual iterate and `D` at the
//! dual point of `w`; as calls of the functions below that is six walks over the samples.
//! [`fused_certificate`] gives the same values, bit for bit, from one, and
//! [`fused_certificate_with_intercept`] from two when the model has an intercept (both dual points are
//! projected onto `sum alpha = 0` between the walks).

use crate::loss::Loss;
use crate::sample::SampleSet;
use crate::solver::spread::{map, own, Spread};
use crate::sparse::{
    hard_threshold, masked_dot, prefetch, prefetch_all, sparse_axpy, sparse_dot, top_k_indices,
    top_k_indices_of_two_lanes, zeroed_dense, ThresholdScratch,
};

/// A primal value, a dual value and their gap, over the same samples.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Certificate {
    pub primal: f64,
    pub dual: f64,
    pub gap: f64,
    /// Number of samples the objective was evaluated on.
    pub samples: usize,
}

/// The objective's divisor for a mass `M`: `M`, or 1 when nothing was summed (`M = 0`).
pub fn normaliser(mass: f64) -> f64 {
    if mass > 0.0 {
        mass
    } else {
        1.0
    }
}

/// How far a dual value may exceed the primal, relative to `max(1, |P|)`, and still be rounding: the
/// two are sums over the same samples in different orders, so at the optimum they can cross by a few
/// ulps (a gap of -1.1e-15 was published on logistic data).
pub const ROUNDING_CROSSING: f64 = 1e-12;

impl Certificate {
    /// `P`, `D` and `gap = P - D`. Weak duality makes the gap non-negative; a dual above the primal by
    /// no more than rounding ([`ROUNDING_CROSSING`]) is reported as `D = P`, gap 0, so no negative gap
    /// is published. A larger crossing is kept as it is: it would be a bug, not rounding.
    pub fn new(primal: f64, dual: f64, samples: usize) -> Certificate {
        let crossing = dual - primal;
        let dual = if crossing > 0.0 && crossing <= ROUNDING_CROSSING * primal.abs().max(1.0) {
            primal
        } else {
            dual
        };
        Certificate {
            primal,
            dual,
            gap: primal - dual,
            samples,
        }
    }

    /// `(P - D) / max(1, |P|)`: the stopping measure.
    pub fn relative_gap(&self) -> f64 {
        self.gap / self.primal.abs().max(1.0)
    }
}

/// `P(w, b)`.
pub fn primal_value<S: SampleSet>(data: &S, loss: &Loss, lambda: f64, w: &[f64], b: f64) -> f64 {
    let n = data.normaliser();
    let mut sum = 0.0;
    for i in 0..data.len() {
        let r = data.row(i);
        sum += loss
            .sample(r.label, r.weight)
            .value(sparse_dot(r.indices, r.values, w) + b);
    }
    sum / n + 0.5 * lambda * sq_norm(w)
}

pub fn sq_norm(w: &[f64]) -> f64 {
    w.iter().map(|v| v * v).sum()
}

/// `sum_i c_i l*(alpha_i / c_i)` (the unnormalised conjugate sum).
pub fn conjugate_sum<S: SampleSet>(data: &S, loss: &Loss, alpha: &[f64]) -> f64 {
    conjugate_sum_of_rows(loss, &alpha[..data.len()], |i| {
        let r = data.row(i);
        (r.label, r.weight)
    })
}

/// [`conjugate_sum`] over any rows described by `(label, weight)` of row `i`, in row order.
pub fn conjugate_sum_of_rows(
    loss: &Loss,
    alpha: &[f64],
    label_weight: impl Fn(usize) -> (f64, f64),
) -> f64 {
    alpha
        .iter()
        .enumerate()
        .map(|(i, &a)| {
            let (y, c) = label_weight(i);
            loss.sample(y, c).conjugate(a)
        })
        .sum()
}

/// Reusable buffers for evaluating `D(alpha)`.
#[derive(Debug, Default, Clone)]
pub struct DualScratch {
    pub w_tilde: Vec<f64>,
    pub w: Vec<f64>,
    pub support: Vec<u32>,
    pub threshold: ThresholdScratch,
}

/// `D(alpha)` from scratch (O(nnz + d)). `alpha` must be feasible (and sum to 0 with an intercept).
pub fn dual_value<S: SampleSet>(
    data: &S,
    loss: &Loss,
    lambda: f64,
    k: usize,
    alpha: &[f64],
    scratch: &mut DualScratch,
) -> f64 {
    let n = data.normaliser();
    zeroed_dense(&mut scratch.w_tilde, data.dim());
    for (i, &a) in alpha.iter().enumerate().take(data.len()) {
        let r = data.row(i);
        sparse_axpy(-a / (lambda * n), r.indices, r.values, &mut scratch.w_tilde);
    }
    hard_threshold(
        &scratch.w_tilde,
        k,
        &mut scratch.w,
        &mut scratch.support,
        &mut scratch.threshold,
    );
    -conjugate_sum(data, loss, alpha) / n - 0.5 * lambda * sq_norm(&scratch.w)
}

/// The dual point of a primal iterate (Thm 1(b)): `alpha_i = l'(w.x_i + b)` projected onto `F`, and with
/// an intercept onto `{sum alpha = 0}` as well.
pub fn dual_of_primal<S: SampleSet>(
    data: &S,
    loss: &Loss,
    w: &[f64],
    b: f64,
    intercept: bool,
    alpha: &mut Vec<f64>,
) {
    alpha.clear();
    for i in 0..data.len() {
        let r = data.row(i);
        let u = sparse_dot(r.indices, r.values, w) + b;
        alpha.push(loss.sample(r.label, r.weight).dual_of_margin(u));
    }
    if intercept {
        project_with_sum(data, loss, alpha, 0.0);
    }
}

/// The values of a certificate over a set of samples, as [`fused_certificate`] computes them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CertificateValues {
    /// `P(w)` (no intercept).
    pub primal: f64,
    /// `D` at the caller's dual iterate, when one was given.
    pub dual_at_iterate: Option<f64>,
    /// `D` at the dual point of `w`, `a_i = P_F(l_i'(w.x_i))` (Thm 1(b)).
    pub dual_at_primal: f64,
}

impl CertificateValues {
    /// `P` against the larger of the dual values (each is a lower bound on the optimum).
    pub fn certificate(&self, samples: usize) -> Certificate {
        let dual = match self.dual_at_iterate {
            Some(at_iterate) => at_iterate.max(self.dual_at_primal),
            None => self.dual_at_primal,
        };
        Certificate::new(self.primal, dual, samples)
    }
}

/// Reusable buffers for [`fused_certificate`]; once grown, it allocates nothing.
#[derive(Debug, Default, Clone)]
pub struct CertificateScratch {
    /// `a_i = P_F(l_i'(w.x_i))` of every row, in row order: the dual point of the model (projected
    /// onto `sum a = 0` with an intercept).
    pub alpha_from_primal: Vec<f64>,
    /// With an intercept, the caller's iterate projected onto `sum alpha = 0`.
    projected_iterate: Vec<f64>,
    /// `w~` of the dual points, interleaved: `w~(a)_j` at `[LANES j]`, `w~(alpha)_j` at `[LANES j + 1]`
    /// (`LANES` = 2 with an iterate, 1 without).
    w_tilde: Vec<f64>,
    /// The second chunk's `w~` when the walk is cut in chunks ([`CertificateScratch::spread`]).
    w_tilde_chunk: Vec<f64>,
    /// Bit set of the model's support (bit `j % 64` of word `j / 64`).
    support_mask: Vec<u64>,
    /// `H_k` scratch of each lane.
    threshold: [ThresholdScratch; 2],
    /// Who walks the rows: `None`, this thread in one walk; `Some`, a walk over more than
    /// [`crate::solver::spread::MIN_CHUNK_ROWS`] rows is cut in two chunks that it walks (`fit`, on its
    /// cores; `objective/chunks.rs`). The chunks depend on the row count alone, so a caller that always
    /// sets it gets the same certificate on every machine.
    pub spread: Option<std::sync::Arc<dyn Spread>>,
}

/// How many rows ahead [`fused_certificate`]'s scatter prefetches its targets (as the intake's warm
/// start does), and twice that, the rows themselves: the misses of the next rows then overlap this
/// row's work. Measured 2/4, 4/8, 4/12, 6/12, 8/16: 4/8 among the best, within noise of each other;
/// without the targets' prefetch the one walk takes 1.8x the old three walks.
const CERTIFICATE_PREFETCH_ROWS_AHEAD: usize = 4;

/// The certificate of a model `w` (zero outside `support`, no intercept) over `data`, equal bit for bit
/// to the sequence of calls it replaces, from scratch over `data` (never from a solver's running sums):
///
/// - `primal` = [`primal_value`]`(data, loss, lambda, w, 0.0)`:
///   `P(w) = (1/M) sum_i l_i(u_i) + (lambda/2) ||w||^2`, `u_i = w.x_i` (problem (1.1), dual-iht.md,
///   over the mass `M`, module docs);
/// - `dual_at_primal` = [`dual_of_primal`]`(data, loss, w, 0.0, false, a)`, then [`dual_value`] at `a`:
///   `a_i = P_F(l_i'(u_i))`, the optimal dual for this `w` (Thm 1(b)), so any primal model is
///   certified, and `D(a)`;
/// - `dual_at_iterate` = [`dual_value`] at `iterate`, when given (a dual solver's own `alpha`):
///   `D(alpha) = -(1/M) sum_i l_i*(alpha_i) - (lambda/2) ||H_k(w~(alpha))||^2` with
///   `w~(alpha) = -(1/(lambda M)) sum_i alpha_i x_i` (Lemma 1).
///
/// One walk over the rows instead of six: per row, `u_i` by [`masked_dot`] against a bit mask of the
/// support (the 8d-byte `w` is read only where it can be nonzero), `l_i(u_i)` and `a_i` (sharing their
/// `exp`), `l_i*(a_i)`, `l_i*(alpha_i)`, then both scatters `w~ += -a_i / (lambda N) x_i` and
/// `-alpha_i / (lambda N) x_i` into one interleaved vector, so each coordinate costs one cache miss for
/// both duals, with the targets of the rows `CERTIFICATE_PREFETCH_ROWS_AHEAD` ahead prefetched so the
/// misses overlap instead of stalling in turn. Then one sweep picks `H_k`'s top k of each lane
/// ([`top_k_indices_of_two_lanes`]) and `||H_k(w~)||^2` is summed over the k kept entries alone, in
/// ascending index order as the dense norm does (its other terms are zeros).
///
/// An earlier version with three walks (the scalars, then one scatter per dual point, unprefetched)
/// measured faster than one unprefetched walk: the scatter's misses then queued behind the `exp`/`log`
/// chains. Prefetching the rows ahead removes that. Measured on a 100k x 40 window at d = 2^20
/// (`examples/snapshot_cost.rs`, thread CPU, old and new builds alternated): SDIHT's certificate
/// 0.75-0.85x the three walks on a quiet machine (in-process alternation), 0.45x on a loaded one;
/// with one dual point (mirror, smidas) 0.6x.
///
/// Bit-for-bit: every sum accumulates the same terms in row (or index) order from the same starting
/// value as the function it replaces (each lane of the interleaved scatter is `dual_value`'s own
/// scatter), and the top-k is the support [`hard_threshold`] picks.
/// `k` is the `H_k` of the duals; `a` is left in `scratch.alpha_from_primal`. No intercept: its dual
/// constraint `sum alpha = 0` ([`project_with_sum`]) needs every `a_i` before the sums, so the model
/// with an intercept takes two walks ([`fused_certificate_with_intercept`]).
#[allow(clippy::too_many_arguments)]
pub fn fused_certificate<S: SampleSet>(
    data: &S,
    loss: &Loss,
    lambda: f64,
    k: usize,
    w: &[f64],
    support: &[u32],
    iterate: Option<&[f64]>,
    scratch: &mut CertificateScratch,
) -> CertificateValues {
    let model = (w, support, None);
    fused_certificate_with_intercept(data, loss, lambda, k, model, iterate, None, scratch)
}

/// [`fused_certificate`] of the model `(w, support, intercept)`: with `Some(b)`, equal bit for bit to
/// the calls an intercept's certificate makes — [`primal_value`]`(.., w, b)`; [`dual_value`] at
/// `iterate` projected onto `sum alpha = 0` ([`project_with_sum`]); [`dual_of_primal`]`(.., w, b,
/// true, a)`, then [`dual_value`] at `a` — in two walks over the rows: the margins `w.x_i + b` give
/// the loss sum and `a` (both projections need every dual first), then one interleaved scatter of
/// both projected dual points. `None` is [`fused_certificate`]'s single walk.
///
/// `margins`, when given, are `w.x_i` of every row (no intercept) as [`margins_into`] or
/// [`masked_margins_into`] computed them for this `w` (an intercept's refit needs them first), bit
/// for bit what the walk would compute: the walk then reads them instead of the rows' dot products.
#[allow(clippy::too_many_arguments)]
pub fn fused_certificate_with_intercept<S: SampleSet>(
    data: &S,
    loss: &Loss,
    lambda: f64,
    k: usize,
    model: (&[f64], &[u32], Option<f64>),
    iterate: Option<&[f64]>,
    margins: Option<&[f64]>,
    scratch: &mut CertificateScratch,
) -> CertificateValues {
    let problem = (loss, lambda, k);
    let margins = margins.filter(|m| m.len() == data.len());
    match iterate {
        Some(iterate) => fused_walk::<2, S>(data, problem, model, iterate, margins, scratch),
        None => fused_walk::<1, S>(data, problem, model, &[], margins, scratch),
    }
}

/// [`fused_certificate_with_intercept`] with `LANES` dual points scattered: the model's (lane 0) and,
/// when `LANES == 2`, `iterate` (lane 1). `problem` is `(loss, lambda, k)`, `model` is
/// `(w, support, intercept)`.
fn fused_walk<const LANES: usize, S: SampleSet>(
    data: &S,
    (loss, lambda, k): (&Loss, f64, usize),
    (w, support, intercept): (&[f64], &[u32], Option<f64>),
    iterate: &[f64],
    margins: Option<&[f64]>,
    scratch: &mut CertificateScratch,
) -> CertificateValues {
    let rows = data.len();
    let n = data.normaliser();
    let dim = data.dim();
    // The mask covers every row index (< dim) and every support index (< w.len()).
    let mask = &mut scratch.support_mask;
    mask.clear();
    mask.resize(dim.max(w.len()).div_ceil(64), 0);
    for &j in support {
        mask[j as usize / 64] |= 1 << (j % 64);
    }
    let w_tilde = &mut scratch.w_tilde;
    // Reset without writing the pages no row touches (`zeroed_dense`): a large feature index then
    // costs no resident memory here.
    zeroed_dense(w_tilde, LANES * dim);
    // `dual_value` scales each row by `-alpha_i / (lambda * n)`: the same divisor, once.
    let lambda_n = lambda * n;
    let walk = Walk {
        data,
        loss,
        lambda_n,
        w,
        mask: &scratch.support_mask,
        intercept,
        iterate,
        margins,
    };
    let (loss_sum, conjugates) = match scratch.spread.as_deref() {
        Some(spread) if chunks::certificate_chunks(rows) > 1 => walk.in_chunks::<LANES>(
            spread,
            (
                &mut scratch.alpha_from_primal,
                &mut scratch.projected_iterate,
                w_tilde,
                &mut scratch.w_tilde_chunk,
            ),
        ),
        _ => walk.in_turn::<LANES>(
            &mut scratch.alpha_from_primal,
            &mut scratch.projected_iterate,
            w_tilde,
        ),
    };
    let w_tilde = &scratch.w_tilde;
    let mask = &scratch.support_mask;
    let [conjugate_at_primal, conjugate_at_iterate] = conjugates;
    let primal = loss_sum / n + 0.5 * lambda * mask_sq_norm(w, mask);
    let on_support = |kept: &[u32], lane: usize| -> f64 {
        let sum: f64 = kept
            .iter()
            .map(|&j| w_tilde[LANES * j as usize + lane] * w_tilde[LANES * j as usize + lane])
            .sum();
        // `D = -(1/M) sum_i l_i*(alpha_i) - (lambda/2) ||H_k(w~)||^2`
        0.5 * lambda * as_dense_sum(sum, dim)
    };
    if LANES == 2 {
        let (at_primal, at_iterate) =
            top_k_indices_of_two_lanes(w_tilde, k, &mut scratch.threshold);
        CertificateValues {
            primal,
            dual_at_iterate: Some(-conjugate_at_iterate / n - on_support(at_iterate, 1)),
            dual_at_primal: -conjugate_at_primal / n - on_support(at_primal, 0),
        }
    } else {
        let kept = top_k_indices(w_tilde, k, &mut scratch.threshold[0]);
        CertificateValues {
            primal,
            dual_at_iterate: None,
            dual_at_primal: -conjugate_at_primal / n - on_support(kept, 0),
        }
    }
}

/// The starting value of a conjugate sum, as in the function the walks replace: `conjugate_sum` is an
/// `Iterator::sum`, whose neutral element (`-0.0` for f64) is taken from the library itself.
fn neutral() -> f64 {
    std::iter::empty::<f64>().sum()
}

/// What a certificate's walk over the rows reads: the rows, the loss, `lambda N`, the model (`w`, its
/// support's bit mask, the intercept), the iterate (empty with one lane) and, when given, the margins.
struct Walk<'a, S: SampleSet> {
    data: &'a S,
    loss: &'a Loss,
    lambda_n: f64,
    w: &'a [f64],
    mask: &'a [u64],
    intercept: Option<f64>,
    iterate: &'a [f64],
    margins: Option<&'a [f64]>,
}

impl<S: SampleSet> Walk<'_, S> {
    /// The walk over every row in order, into `alpha_from_primal`, `projected` (with an intercept) and
    /// `w_tilde`: the loss sum and each lane's conjugate sum.
    fn in_turn<const LANES: usize>(
        &self,
        alpha_from_primal: &mut Vec<f64>,
        projected: &mut Vec<f64>,
        w_tilde: &mut [f64],
    ) -> (f64, [f64; 2]) {
        let rows = self.data.len();
        alpha_from_primal.clear();
        alpha_from_primal.resize(rows, 0.0);
        let mut conjugates = [neutral(); 2];
        let loss_sum =
            self.first_walk::<LANES>(0..rows, alpha_from_primal, w_tilde, &mut conjugates);
        if self.intercept.is_some() {
            self.project(alpha_from_primal, projected, &crate::solver::spread::InTurn);
            let duals = (&alpha_from_primal[..], &projected[..]);
            self.scatter_walk::<LANES>(0..rows, duals, w_tilde, &mut conjugates);
        }
        (loss_sum, conjugates)
    }

    /// The first walk over `rows`: each row's dual point `a_i` into `alpha` (indexed from
    /// `rows.start`), and the loss sum, from `0.0` as `primal_value` sums. Without an intercept each
    /// row is scattered into `w_tilde` and `conjugates` as soon as its dual is known; with one, the
    /// dual points are projected onto `sum alpha = 0` first, so the scatter is a second walk.
    fn first_walk<const LANES: usize>(
        &self,
        rows: std::ops::Range<usize>,
        alpha: &mut [f64],
        w_tilde: &mut [f64],
        conjugates: &mut [f64; 2],
    ) -> f64 {
        let one_walk = self.intercept.is_none();
        // Given the margins, a walk that does not scatter reads no row's entries: fetching them
        // ahead would only stream the whole data set through the cache.
        let reads_rows = one_walk || self.margins.is_none();
        let mut loss_sum = 0.0;
        for (at, i) in rows.enumerate() {
            if reads_rows {
                prefetch_ahead::<LANES, S>(self.data, i, one_walk.then_some(&*w_tilde));
            }
            let (r, l, a, value) = self.dual_of_row(i);
            loss_sum += value;
            alpha[at] = a;
            if one_walk {
                // `iterate` is empty with one lane.
                let at_iterate = if LANES == 2 { self.iterate[i] } else { 0.0 };
                scatter_row::<LANES>(r, &l, [a, at_iterate], self.lambda_n, w_tilde, conjugates);
            }
        }
        loss_sum
    }

    /// The model's dual points `alpha` and the iterate (copied into `projected`) projected onto
    /// `sum alpha = 0`: the intercept's dual constraint, between the two walks. The two projections
    /// share nothing, so `spread` may run them side by side; each is the same sum either way.
    fn project(&self, alpha: &mut [f64], projected: &mut Vec<f64>, spread: &dyn Spread) {
        projected.clear();
        projected.extend_from_slice(self.iterate);
        let jobs = [
            std::sync::Mutex::new(alpha),
            std::sync::Mutex::new(&mut projected[..]),
        ];
        map(spread, jobs.len(), |c| {
            project_with_sum(self.data, self.loss, &mut own(&jobs[c]), 0.0);
        });
    }

    /// The second walk over `rows` (with an intercept): the projected dual points `alpha` and
    /// `projected`, indexed by row, scattered into `w_tilde` and `conjugates`.
    fn scatter_walk<const LANES: usize>(
        &self,
        rows: std::ops::Range<usize>,
        (alpha, projected): (&[f64], &[f64]),
        w_tilde: &mut [f64],
        conjugates: &mut [f64; 2],
    ) {
        for i in rows {
            prefetch_ahead::<LANES, S>(self.data, i, Some(&*w_tilde));
            let r = self.data.row(i);
            let l = self.loss.sample(r.label, r.weight);
            let at_iterate = if LANES == 2 { projected[i] } else { 0.0 };
            let duals = [alpha[i], at_iterate];
            scatter_row::<LANES>(r, &l, duals, self.lambda_n, w_tilde, conjugates);
        }
    }

    /// Row `i`, its loss, the model's dual point `a_i` and the loss at its margin `u_i = w.x_i + b`.
    #[inline(always)]
    fn dual_of_row(&self, i: usize) -> (crate::sample::Row<'_>, crate::loss::SampleLoss, f64, f64) {
        let r = self.data.row(i);
        let l = self.loss.sample(r.label, r.weight);
        let mut u = match self.margins {
            Some(margins) => margins[i],
            None => masked_dot(r.indices, r.values, self.w, self.mask),
        };
        if let Some(b) = self.intercept {
            u += b;
        }
        let (value, a) = l.value_and_dual_of_margin(u);
        (r, l, a, value)
    }
}

/// A walk's prefetches at row `i`, in two stages: the row `2 * ahead` on (its own allocations, which
/// the hardware prefetcher cannot follow), then, once its indices are cached, the targets in `w~` of
/// the row `ahead` on, when the walk scatters (`w_tilde`).
#[inline(always)]
fn prefetch_ahead<const LANES: usize, S: SampleSet>(data: &S, i: usize, w_tilde: Option<&[f64]>) {
    let (ahead, rows) = (CERTIFICATE_PREFETCH_ROWS_AHEAD, data.len());
    if i + 2 * ahead < rows {
        let r = data.row(i + 2 * ahead);
        prefetch_all(r.indices);
        prefetch_all(r.values);
    }
    if let Some(w_tilde) = w_tilde.filter(|_| i + ahead < rows) {
        for &j in data.row(i + ahead).indices {
            prefetch(w_tilde, LANES * j as usize);
        }
    }
}

/// One row's share of the dual values: `l*` of each lane's dual added to that lane's conjugate sum,
/// and `w~ += -dual / (lambda N) x_i` into the interleaved lanes.
#[inline(always)]
fn scatter_row<const LANES: usize>(
    r: crate::sample::Row<'_>,
    l: &crate::loss::SampleLoss,
    duals: [f64; 2],
    lambda_n: f64,
    w_tilde: &mut [f64],
    conjugates: &mut [f64; 2],
) {
    let mut scale = [0.0; LANES];
    for lane in 0..LANES {
        conjugates[lane] += l.conjugate(duals[lane]);
        scale[lane] = -duals[lane] / lambda_n;
    }
    for (&j, &v) in r.indices.iter().zip(r.values) {
        let at = LANES * j as usize;
        for (target, scale) in w_tilde[at..at + LANES].iter_mut().zip(scale) {
            *target += scale * v;
        }
    }
}

/// [`sq_norm`] of a `w` that is zero outside the bits set in `mask`, bit for bit: the squares on the
/// mask in ascending index order, without the O(d) pass over `w`.
fn mask_sq_norm(w: &[f64], mask: &[u64]) -> f64 {
    let mut on_mask: f64 = std::iter::empty::<f64>().sum();
    for (word_at, &word) in mask.iter().enumerate() {
        let mut bits = word;
        while bits != 0 {
            let j = word_at * 64 + bits.trailing_zeros() as usize;
            on_mask += w[j] * w[j];
            bits &= bits - 1;
        }
    }
    as_dense_sum(on_mask, w.len())
}

/// A sum of squares over the nonzeros of a vector of length `len`, turned into the dense [`sq_norm`]'s
/// bits: the dense sum adds `+0.0` terms as well, and `-0.0 + 0.0 = +0.0` turns the neutral element of
/// an empty f64 sum (`-0.0`) into `+0.0` unless the vector itself is empty. Adding `+0.0` changes no
/// other value.
fn as_dense_sum(sum_of_nonzero_squares: f64, len: usize) -> f64 {
    if len == 0 {
        sum_of_nonzero_squares
    } else {
        sum_of_nonzero_squares + 0.0
    }
}

/// Projects `alpha` onto `F^N ∩ {sum alpha = target}` by shifting: `alpha_i <- P_F(alpha_i - tau)` with
/// `tau` the root of the piecewise-linear, monotone sum (safeguarded Newton). For squared loss `tau` is
/// the mean excess.
/// When the target is out of reach (e.g. one class only) the closest reachable sum is used.
pub fn project_with_sum<S: SampleSet>(data: &S, loss: &Loss, alpha: &mut [f64], target: f64) {
    project_rows_with_sum(loss, alpha, target, |i| {
        let r = data.row(i);
        (r.label, r.weight)
    });
}

/// [`project_with_sum`] over any rows described by `(label, weight)` of slot `i`.
pub fn project_rows_with_sum(
    loss: &Loss,
    alpha: &mut [f64],
    target: f64,
    label_weight: impl Fn(usize) -> (f64, f64),
) {
    if alpha.is_empty() {
        return;
    }
    if !loss.is_classification() {
        let tau = (alpha.iter().sum::<f64>() - target) / alpha.len() as f64;
        alpha.iter_mut().for_each(|a| *a -= tau);
        return;
    }
    // `(sum_i P_F(alpha_i - tau), how many of them are not clipped)`: the sum is piecewise linear and
    // non-increasing in `tau`, with slope minus that count.
    let shifted_sum = |alpha: &[f64], tau: f64| -> (f64, usize) {
        let mut free = 0;
        let sum = alpha
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                let (y, c) = label_weight(i);
                let shifted = a - tau;
                let projected = loss.sample(y, c).project(shifted);
                free += usize::from(projected == shifted);
                projected
            })
            .sum();
        (sum, free)
    };
    // Every feasible alpha_i lies in [-c_i, c_i], so shifts beyond the widest box are saturated.
    let width = (0..alpha.len())
        .map(|i| label_weight(i).1)
        .fold(0.0, f64::max)
        * 2.0
        + 1.0;
    // Newton on the piecewise-linear sum, safeguarded by a bracket that every evaluation narrows and
    // bisection when a step leaves it: once `tau` is on the right linear piece one step lands on the
    // root, so a handful of passes replace the ~60 of plain bisection.
    let (mut lo, mut hi) = (-width, width);
    let mut tau = 0.0;
    for _ in 0..100 {
        let (sum, free) = shifted_sum(alpha, tau);
        if sum == target {
            break;
        }
        if sum > target {
            lo = tau;
        } else {
            hi = tau;
        }
        let newton = tau + (sum - target) / free as f64;
        let next = if free > 0 && newton > lo && newton < hi {
            newton
        } else {
            0.5 * (lo + hi)
        };
        if next == tau || hi - lo <= f64::EPSILON * width {
            break;
        }
        tau = next;
    }
    for (i, a) in alpha.iter_mut().enumerate() {
        let (y, c) = label_weight(i);
        *a = loss.sample(y, c).project(*a - tau);
    }
}

/// Beyond this margin `y u` the logistic loss `log(1 + e^-40) = 4.2e-18` is below f64's resolution of
/// any loss near 1: the intercept's bracket reaches this far past the largest margin.
pub const LOGISTIC_MARGIN_BOUND: f64 = 40.0;

/// The half-width of the bracket `[-r, r]` in which a classification loss's intercept is sought for
/// margins `u_i = w.x_i`: `r = max_i |u_i| + M`, with `M` = [`LOGISTIC_MARGIN_BOUND`] for logistic
/// and 1 for hinge and Huber (a margin of 1 costs them nothing). It holds every finite minimiser while
/// both classes are present (at `b = r` every positive row is past `M` and every negative row's slope
/// pulls back; likewise at `-r`; for logistic while the class weights differ by less than `e^38`); on a
/// window of one class, where logistic has no finite minimiser, `b` stops at the edge, so the
/// unpenalised intercept stays within `M` of the margins, which `ingest.max_abs_value` and the ridge
/// term bound, instead of growing without bound (every refit from a warm start would go further).
pub fn intercept_reach(loss: &Loss, margins: &[f64]) -> f64 {
    let bound = match loss {
        Loss::Logistic(_) => LOGISTIC_MARGIN_BOUND,
        _ => 1.0,
    };
    margins.iter().fold(0.0f64, |m, u| m.max(u.abs())) + bound
}

/// The intercept minimising `P(w, b)` over `b` for fixed `w`: the root of `sum_i c_i l'(u_i + b)`,
/// closed form for squared loss, bisection otherwise within [`intercept_reach`]. `margins` holds
/// `u_i = w.x_i`.
pub fn best_intercept<S: SampleSet>(data: &S, loss: &Loss, margins: &[f64]) -> f64 {
    if data.is_empty() {
        return 0.0;
    }
    if !loss.is_classification() {
        let (mut num, mut den) = (0.0, 0.0);
        for (i, &u) in margins.iter().enumerate() {
            let r = data.row(i);
            num += r.weight * (r.label - u);
            den += r.weight;
        }
        return num / den;
    }
    let slope = |b: f64| -> f64 {
        margins
            .iter()
            .enumerate()
            .map(|(i, &u)| {
                let r = data.row(i);
                loss.sample(r.label, r.weight).derivative(u + b)
            })
            .sum()
    };
    let reach = intercept_reach(loss, margins);
    let (mut lo, mut hi) = (-reach, reach);
    // A single-class problem may have no finite minimiser; stop at the bracket's edge.
    if slope(lo) >= 0.0 {
        return lo;
    }
    if slope(hi) <= 0.0 {
        return hi;
    }
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if slope(mid) < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Margins `u_i = w.x_i` of every sample (no intercept).
pub fn margins_into<S: SampleSet>(data: &S, w: &[f64], out: &mut Vec<f64>) {
    out.clear();
    out.extend((0..data.len()).map(|i| {
        let r = data.row(i);
        sparse_dot(r.indices, r.values, w)
    }));
}

/// [`margins_into`] of a `w` that is zero outside `support`, bit for bit: each `w.x_i` by
/// [`masked_dot`] against a bit mask of the support (left all zero in `mask` afterwards), so the
/// d-long `w` is read only where it can be nonzero — at d = 2^20 a 128 KiB mask instead of an 8 MiB
/// vector read at random.
pub fn masked_margins_into<S: SampleSet>(
    data: &S,
    w: &[f64],
    support: &[u32],
    mask: &mut Vec<u64>,
    out: &mut Vec<f64>,
) {
    // The mask covers every row index (< dim) and every support index (< w.len()).
    let words = data.dim().max(w.len()).div_ceil(64);
    if mask.len() < words {
        mask.resize(words, 0);
    }
    for &j in support {
        mask[j as usize / 64] |= 1 << (j % 64);
    }
    out.clear();
    out.extend((0..data.len()).map(|i| {
        let r = data.row(i);
        masked_dot(r.indices, r.values, w, mask)
    }));
    for &j in support {
        mask[j as usize / 64] = 0;
    }
}

/// [`fused_certificate`]'s values by the separate offline calls: [`primal_value`], [`dual_value`] at
/// the iterate (if one is given), [`dual_of_primal`] into `alpha`, then [`dual_value`] at it — six
/// passes over the window. The reference the fused kernel is tested and benchmarked against.
#[allow(clippy::too_many_arguments)]
pub fn separate_certificate<S: SampleSet>(
    data: &S,
    loss: &Loss,
    lambda: f64,
    k: usize,
    w: &[f64],
    iterate: Option<&[f64]>,
    alpha: &mut Vec<f64>,
    scratch: &mut DualScratch,
) -> CertificateValues {
    let primal = primal_value(data, loss, lambda, w, 0.0);
    let dual_at_iterate = iterate.map(|alphas| dual_value(data, loss, lambda, k, alphas, scratch));
    dual_of_primal(data, loss, w, 0.0, false, alpha);
    let dual_at_primal = dual_value(data, loss, lambda, k, alpha, scratch);
    CertificateValues {
        primal,
        dual_at_iterate,
        dual_at_primal,
    }
}

mod chunks;
#[cfg(test)]
mod tests;
