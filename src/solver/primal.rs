//! The primal baselines of the DIHT paper's experiments, on the same objective `P(w, b)`:
//! - IHT (Blumensath & Davies 2009): `w <- H_k(w - eta grad P(w))`;
//! - HTP (Foucart 2011): the support of the IHT step, then `P` minimised over that support.
//!
//! `eta = 1 / L` with `L = l''_max sigma_max(X^T C X / M) + lambda` (power iteration), halved whenever a
//! step would increase `P` (hinge has no `l''`; the halving safeguards its subgradient steps). They are
//! certified like every solver: `alpha_i = l'(w.x_i + b)` projected onto `F` (Thm 1(b)), then `D(alpha)`.

use super::objective::{best_intercept, margins_into, primal_value, DualScratch};
use super::{Certificate, ModelView, Problem, Solver};
use crate::sample::SampleSet;
use crate::sparse::{hard_threshold, sparse_axpy, sparse_dot, ThresholdScratch};

const MAX_HALVINGS: usize = 30;
const POWER_ITERATIONS: usize = 30;
/// Up to this many sampled nonzeros (16 MiB of places; the mirror solver's 8192 rows at any `N`) the
/// power iteration keeps each row's places.
const GATHER_MAX_PAIRS: usize = 1 << 22;

/// Shared state of the two baselines: the iterate, its objective and the gradient machinery.
#[derive(Debug, Clone)]
struct PrimalState {
    w: Vec<f64>,
    support: Vec<u32>,
    intercept: f64,
    primal: f64,
    eta: f64,
    grad: Vec<f64>,
    trial: Vec<f64>,
    trial_w: Vec<f64>,
    trial_support: Vec<u32>,
    margins: Vec<f64>,
    threshold: ThresholdScratch,
    dual_scratch: DualScratch,
    alpha: Vec<f64>,
}

impl PrimalState {
    fn new<S: SampleSet>(p: &Problem<S>) -> PrimalState {
        let d = p.data.dim();
        let lipschitz = p.loss.smoothness() * sigma_max_sq(p) + p.lambda;
        let mut state = PrimalState {
            w: vec![0.0; d],
            support: Vec::new(),
            intercept: 0.0,
            primal: 0.0,
            eta: 1.0 / lipschitz,
            grad: vec![0.0; d],
            trial: vec![0.0; d],
            trial_w: Vec::new(),
            trial_support: Vec::new(),
            margins: Vec::new(),
            threshold: ThresholdScratch::default(),
            dual_scratch: DualScratch::default(),
            alpha: Vec::new(),
        };
        state.fit_intercept(p);
        state.primal = primal_value(p.data, &p.loss, p.lambda, &state.w, state.intercept);
        state
    }

    fn fit_intercept<S: SampleSet>(&mut self, p: &Problem<S>) {
        if p.intercept {
            margins_into(p.data, &self.w, &mut self.margins);
            self.intercept = best_intercept(p.data, &p.loss, &self.margins);
        }
    }

    /// `grad P(w) = (1/M) sum_i c_i l'(w.x_i + b) x_i + lambda w`, optionally restricted to `mask`.
    fn gradient<S: SampleSet>(&mut self, p: &Problem<S>) {
        let n = p.mass();
        for (g, w) in self.grad.iter_mut().zip(&self.w) {
            *g = p.lambda * w;
        }
        for i in 0..p.data.len() {
            let r = p.data.row(i);
            let u = sparse_dot(r.indices, r.values, &self.w) + self.intercept;
            let dl = p.loss.sample(r.label, r.weight).derivative(u);
            if dl != 0.0 {
                sparse_axpy(dl / n, r.indices, r.values, &mut self.grad);
            }
        }
    }

    /// One IHT step with backtracking on `eta`; returns the support of the accepted step.
    fn iht_step<S: SampleSet>(&mut self, p: &Problem<S>) {
        self.gradient(p);
        for attempt in 0..MAX_HALVINGS {
            for ((t, w), g) in self.trial.iter_mut().zip(&self.w).zip(&self.grad) {
                *t = w - self.eta * g;
            }
            hard_threshold(
                &self.trial,
                p.k,
                &mut self.trial_w,
                &mut self.trial_support,
                &mut self.threshold,
            );
            let value = primal_value(p.data, &p.loss, p.lambda, &self.trial_w, self.intercept);
            if value <= self.primal || attempt + 1 == MAX_HALVINGS {
                std::mem::swap(&mut self.w, &mut self.trial_w);
                std::mem::swap(&mut self.support, &mut self.trial_support);
                self.primal = value;
                break;
            }
            self.eta *= 0.5;
        }
        self.fit_intercept(p);
        self.primal = primal_value(p.data, &p.loss, p.lambda, &self.w, self.intercept);
    }

    fn certificate<S: SampleSet>(&mut self, p: &Problem<S>) -> Certificate {
        let dual = p.dual_of_model(
            p.k,
            &self.w,
            self.intercept,
            &mut self.alpha,
            &mut self.dual_scratch,
        );
        Certificate::new(self.primal, dual, p.data.len())
    }

    fn model(&self) -> ModelView<'_> {
        ModelView {
            weights: &self.w,
            support: &self.support,
            intercept: self.intercept,
        }
    }
}

/// Largest eigenvalue of `X^T C X / M` (`M = sum_i c_i`) by power iteration (an upper bound on it is all the step needs,
/// so the estimate is inflated by 1%).
pub(crate) fn sigma_max_sq<S: SampleSet>(p: &Problem<S>) -> f64 {
    sigma_max_sq_sampled(p, usize::MAX)
}

/// [`sigma_max_sq`] of `X_S^T C_S X_S / M_S` (`M_S` the rows' mass) over at most `max_rows` rows `S` spread evenly over the
/// data (every `ceil(N / max_rows)`-th row): a setup cost bounded independently of `N`. On a
/// subsample the top eigenvalue of the empirical second moment is biased upwards (its off-diagonal
/// noise adds to it), so the estimate errs on the safe side of a step `1/L`; the mirror solver also
/// caps it by the largest row norm.
///
/// The iteration runs on the features the rows use, numbered in ascending order (a bit set and the
/// running count of its words give each one its place), each row's places found once: every other
/// coordinate of the iterate is zero from the first product on and is never read. The same sums in the
/// same order as over all `d` coordinates, so the same estimate bit for bit (tested against the dense
/// iteration). Why: over all `d = 2^20` coordinates every product read and wrote two 8 MiB vectors at
/// random places, 30 times over.
pub(crate) fn sigma_max_sq_sampled<S: SampleSet>(p: &Problem<S>, max_rows: usize) -> f64 {
    power_iteration(p, max_rows, GATHER_MAX_PAIRS)
}

/// [`sigma_max_sq_sampled`], each row's places kept when the sampled rows hold at most `gather_max`
/// nonzeros (else found again at each iteration).
pub(crate) fn power_iteration<S: SampleSet>(
    p: &Problem<S>,
    max_rows: usize,
    gather_max: usize,
) -> f64 {
    let d = p.data.dim();
    let n = p.data.len();
    if d == 0 || n == 0 {
        return 0.0;
    }
    let stride = n.div_ceil(max_rows.max(1));
    // `X_S^T C_S X_S / M_S`: the sampled rows' mass, so the estimate is of the weighted mean's
    // curvature whatever the weights' scale (the sampled rows' count when every weight is 1).
    let rows: f64 = (0..n).step_by(stride).map(|i| p.data.row(i).weight).sum();
    let mut used = vec![0u64; d.div_ceil(64)];
    let mut pairs = 0;
    for i in (0..n).step_by(stride) {
        let indices = p.data.row(i).indices;
        pairs += indices.len();
        for &j in indices {
            used[j as usize / 64] |= 1 << (j % 64);
        }
    }
    let mut before = Vec::with_capacity(used.len());
    let mut count = 0usize;
    for word in &used {
        before.push(count);
        count += word.count_ones() as usize;
    }
    let place = |j: u32| {
        let (word, bit) = (j as usize / 64, j % 64);
        (before[word] + (used[word] & ((1u64 << bit) - 1)).count_ones() as usize) as u32
    };
    let gathered = (pairs <= gather_max).then(|| {
        let (mut places, mut ends) = (Vec::with_capacity(pairs), vec![0]);
        for i in (0..n).step_by(stride) {
            places.extend(p.data.row(i).indices.iter().map(|&j| place(j)));
            ends.push(places.len());
        }
        (places, ends)
    });
    let mut row_places = Vec::new();
    let mut v = vec![1.0 / (d as f64).sqrt(); count];
    let mut next = vec![0.0; count];
    let mut estimate = 0.0;
    for _ in 0..POWER_ITERATIONS {
        next.iter_mut().for_each(|x| *x = 0.0);
        for (at, i) in (0..n).step_by(stride).enumerate() {
            let r = p.data.row(i);
            let places = match &gathered {
                Some((places, ends)) => &places[ends[at]..ends[at + 1]],
                None => {
                    row_places.clear();
                    row_places.extend(r.indices.iter().map(|&j| place(j)));
                    &row_places[..]
                }
            };
            // `sparse_dot` and `sparse_axpy` on the compact numbering.
            let mut u = 0.0;
            for (&j, &x) in places.iter().zip(r.values) {
                u += x * v[j as usize];
            }
            let a = r.weight * u / rows;
            for (&j, &x) in places.iter().zip(r.values) {
                next[j as usize] += a * x;
            }
        }
        // Over all `d` the other terms are `+0.0`, which change no sum of squares but an empty one
        // (`-0.0`); its root compares equal to 0 either way.
        let Some(norm) = normalise_into(&next, &mut v) else {
            return 0.0;
        };
        estimate = norm;
    }
    estimate * 1.01
}

/// One power iteration's normalisation: `v = next / ||next||`, returning `||next||`; `None` (and `v`
/// unchanged) when `next` is zero.
fn normalise_into(next: &[f64], v: &mut [f64]) -> Option<f64> {
    let norm = next.iter().map(|x| x * x).sum::<f64>().sqrt();
    if norm == 0.0 {
        return None;
    }
    for (a, b) in v.iter_mut().zip(next) {
        *a = b / norm;
    }
    Some(norm)
}

/// Iterative hard thresholding.
#[derive(Debug, Clone)]
pub struct Iht {
    state: PrimalState,
}

impl Iht {
    pub fn new<S: SampleSet>(p: &Problem<S>) -> Iht {
        Iht {
            state: PrimalState::new(p),
        }
    }
}

impl<S: SampleSet> Solver<S> for Iht {
    fn name(&self) -> &'static str {
        "iht"
    }
    fn epoch(&mut self, p: &Problem<S>) {
        self.state.iht_step(p);
    }
    fn model(&self) -> ModelView<'_> {
        self.state.model()
    }
    fn certificate(&mut self, p: &Problem<S>) -> Certificate {
        self.state.certificate(p)
    }
}

/// Hard thresholding pursuit.
#[derive(Debug, Clone)]
pub struct Htp {
    state: PrimalState,
    /// Dense feature -> position-in-support map for the restricted solve (`u32::MAX` = not in support).
    position: Vec<u32>,
}

/// Inner iterations of the restricted minimisation (non-squared losses, or with an intercept).
const HTP_INNER: usize = 100;

impl Htp {
    pub fn new<S: SampleSet>(p: &Problem<S>) -> Htp {
        Htp {
            state: PrimalState::new(p),
            position: vec![u32::MAX; p.data.dim()],
        }
    }

    /// `min P` over `supp(w) ⊆ support`: a ridge solve for squared loss without intercept, else projected
    /// gradient descent with backtracking on the support.
    fn minimise_on_support<S: SampleSet>(&mut self, p: &Problem<S>) {
        let s = &mut self.state;
        if !p.loss.is_classification() && !p.intercept && !s.support.is_empty() {
            if let Some(solution) = ridge_on_support(p, &s.support, &mut self.position) {
                s.w.iter_mut().for_each(|v| *v = 0.0);
                for (&j, &v) in s.support.iter().zip(&solution) {
                    s.w[j as usize] = v;
                }
                s.primal = primal_value(p.data, &p.loss, p.lambda, &s.w, s.intercept);
                return;
            }
        }
        for _ in 0..HTP_INNER {
            s.gradient(p);
            let before = s.primal;
            let mut accepted = false;
            for _ in 0..MAX_HALVINGS {
                s.trial_w.clone_from(&s.w);
                for &j in &s.support {
                    s.trial_w[j as usize] -= s.eta * s.grad[j as usize];
                }
                let value = primal_value(p.data, &p.loss, p.lambda, &s.trial_w, s.intercept);
                if value <= s.primal {
                    std::mem::swap(&mut s.w, &mut s.trial_w);
                    s.primal = value;
                    accepted = true;
                    break;
                }
                s.eta *= 0.5;
            }
            s.fit_intercept(p);
            s.primal = primal_value(p.data, &p.loss, p.lambda, &s.w, s.intercept);
            if !accepted || (before - s.primal) <= 1e-12 * before.abs().max(1e-300) {
                break;
            }
        }
    }
}

/// Solves `(2/M X_S^T C X_S + lambda I) w_S = (2/M) X_S^T C y` by Cholesky; `None` if not positive definite.
fn ridge_on_support<S: SampleSet>(
    p: &Problem<S>,
    support: &[u32],
    position: &mut [u32],
) -> Option<Vec<f64>> {
    let k = support.len();
    for (pos, &j) in support.iter().enumerate() {
        position[j as usize] = pos as u32;
    }
    let mut gram = vec![0.0; k * k];
    let mut rhs = vec![0.0; k];
    let scale = 2.0 / p.mass();
    let mut local: Vec<(usize, f64)> = Vec::with_capacity(k);
    for i in 0..p.data.len() {
        let r = p.data.row(i);
        local.clear();
        for (&j, &v) in r.indices.iter().zip(r.values) {
            if let Some(&pos) = position.get(j as usize) {
                if pos != u32::MAX {
                    local.push((pos as usize, v));
                }
            }
        }
        let c = r.weight * scale;
        for &(a, va) in &local {
            rhs[a] += c * va * r.label;
            for &(b, vb) in &local {
                gram[a * k + b] += c * va * vb;
            }
        }
    }
    for &j in support {
        position[j as usize] = u32::MAX;
    }
    for a in 0..k {
        gram[a * k + a] += p.lambda;
    }
    cholesky_solve(&mut gram, &mut rhs, k).then_some(rhs)
}

/// In-place Cholesky factorisation and solve of a dense SPD system; false if not positive definite.
pub(crate) fn cholesky_solve(a: &mut [f64], b: &mut [f64], n: usize) -> bool {
    for j in 0..n {
        let mut diag = a[j * n + j];
        for m in 0..j {
            diag -= a[j * n + m] * a[j * n + m];
        }
        if diag <= 0.0 || !diag.is_finite() {
            return false;
        }
        let diag = diag.sqrt();
        a[j * n + j] = diag;
        for i in j + 1..n {
            let mut v = a[i * n + j];
            for m in 0..j {
                v -= a[i * n + m] * a[j * n + m];
            }
            a[i * n + j] = v / diag;
        }
    }
    for i in 0..n {
        let mut v = b[i];
        for m in 0..i {
            v -= a[i * n + m] * b[m];
        }
        b[i] = v / a[i * n + i];
    }
    for i in (0..n).rev() {
        let mut v = b[i];
        for m in i + 1..n {
            v -= a[m * n + i] * b[m];
        }
        b[i] = v / a[i * n + i];
    }
    true
}

impl<S: SampleSet> Solver<S> for Htp {
    fn name(&self) -> &'static str {
        "htp"
    }
    fn epoch(&mut self, p: &Problem<S>) {
        self.state.iht_step(p);
        self.minimise_on_support(p);
    }
    fn model(&self) -> ModelView<'_> {
        self.state.model()
    }
    fn certificate(&mut self, p: &Problem<S>) -> Certificate {
        self.state.certificate(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loss::{Loss, LossKind};
    use crate::sample::{Dataset, Sample};
    use crate::sparse::sparse_axpy;
    use crate::synth;

    /// The power iteration over the features the sampled rows use is the one over all `d` features, bit
    /// for bit: the dense iteration it replaced, written out here, on full and sampled rows, with unused
    /// features at either end, with weights, and with no features at all.
    #[test]
    fn the_compact_power_iteration_is_the_dense_one() {
        fn dense(p: &Problem<Dataset>, max_rows: usize) -> f64 {
            let (d, n) = (p.data.dim(), p.data.len());
            if d == 0 || n == 0 {
                return 0.0;
            }
            let stride = n.div_ceil(max_rows.max(1));
            let rows: f64 = (0..n).step_by(stride).map(|i| p.data.row(i).weight).sum();
            let mut v = vec![1.0 / (d as f64).sqrt(); d];
            let mut next = vec![0.0; d];
            let mut estimate = 0.0;
            for _ in 0..30 {
                next.iter_mut().for_each(|x| *x = 0.0);
                for i in (0..n).step_by(stride) {
                    let r = p.data.row(i);
                    let u = crate::sparse::sparse_dot(r.indices, r.values, &v);
                    sparse_axpy(r.weight * u / rows, r.indices, r.values, &mut next);
                }
                let Some(norm) = normalise_into(&next, &mut v) else {
                    return 0.0;
                };
                estimate = norm;
            }
            estimate * 1.01
        }
        let loss = Loss::new(LossKind::Logistic, 0.25).unwrap();
        let mut weighted = synth::sparse_stream(900, 5000, 10, 7, 0.1, true, 8).samples;
        for (i, s) in weighted.iter_mut().enumerate() {
            s.weight = Some(0.5 + (i % 5) as f64);
        }
        let sets = [
            Dataset::from_samples(
                &synth::sparse_stream(3000, 400, 10, 12, 0.1, true, 2).samples,
                0,
            ),
            Dataset::from_samples(
                &synth::sparse_stream(700, 300, 5, 9, 0.1, true, 3).samples,
                9000,
            ),
            Dataset::from_samples(&weighted, 0),
            Dataset::from_samples(
                &vec![Sample::new(vec![], vec![], 1.0, None).unwrap(); 3],
                50,
            ),
        ];
        for (at, set) in sets.iter().enumerate() {
            let p = Problem::new(set, loss, 0.01, 5, false).unwrap();
            for max_rows in [usize::MAX, 1000, 64, 1] {
                let reference = dense(&p, max_rows);
                let compact = crate::solver::primal::sigma_max_sq_sampled(&p, max_rows);
                assert_eq!(
                    compact.to_bits(),
                    reference.to_bits(),
                    "set {at}, {max_rows} rows"
                );
                // Places found again at each iteration.
                let again = crate::solver::primal::power_iteration(&p, max_rows, 0);
                assert_eq!(
                    again.to_bits(),
                    reference.to_bits(),
                    "set {at}, {max_rows} rows"
                );
            }
        }
    }
}
