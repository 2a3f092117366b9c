//! Alg. 1 of Ren & Qian: the primal-dual inner solver on an active set `A`, one loop for both losses
//! ([`SubsetLoss`] dispatches the few loss-specific operations to [`super::dual`] for squared loss and to
//! [`super::logistic`]).
//!
//! One iteration `t`:
//! 1. super-gradient of `D_A` (8): `g_i = x_i . beta^{t-1} - l*'(alpha_i)` (Remark E.2; for squared loss
//!    `X beta - y - alpha`);
//! 2. dual ascent `alpha += omega g`, projected onto the feasible set `F` of `l*`: the identity for
//!    squared loss (`F = R`, [`dual::squared_ascent_step`](super::dual::squared_ascent_step)), clipping
//!    to `y a in [-1, 0]` for logistic ([`logistic::ascent_step`](super::logistic::ascent_step));
//! 3. the link `beta' = B(eta(alpha))` on `A` (6);
//! 4. PrimDual only: one sweep of primal coordinate descent over `A`: T (13) for squared loss
//!    ([`dual::squared_coordinate_sweep`](super::dual::squared_coordinate_sweep)), its majorised form for
//!    logistic ([`logistic::coordinate_sweep`](super::logistic::coordinate_sweep)). DualAst, the paper's
//!    ablation, skips it and keeps `beta = beta'`;
//! 5. the sub-problem gap `P_A(beta) - D_A(alpha)`.
//!
//! Choices where the paper is silent, each of which only makes a certificate tighter:
//! - PrimDual takes the linked point `beta'` only when it does not increase `P_A` (otherwise CD continues
//!   from the previous iterate): `P_A` is then monotone and Alg. 1 inherits the convergence of CD. Without
//!   this guard a small `omega` keeps resetting `beta` to the link of a stale `alpha`.
//! - Both the ascent iterate `alpha` and the dual point of the primal iterate, `l'(X beta)` (Remark E.3;
//!   `X beta - y` for squared loss), are scored by `D_A`; the better one is kept. The gap reported is best
//!   primal minus best dual, so it never increases, and "the gap stops decreasing" means it fell by
//!   `<= zeta` over [`PATIENCE`] iterations in a row (DualAst's iterates are not monotone, so one flat
//!   iteration proves nothing).
//! - By default the dual step uses the exact super-gradient of `D` at `alpha`, `X B(eta(alpha)) -
//!   l*'(alpha)` (Remark E.2; the link's residual from the previous iteration), instead of `X beta^{t-1} -
//!   l*'(alpha)` with the CD-improved `beta^{t-1}` as Alg. 1 prints it: the latter only drags `alpha`
//!   towards the primal's own dual point, which is scored anyway, while the former is a genuine ascent on
//!   `D` and roughly halves the final gap on the Sec. 5.1 data at the same primal value.
//! - `omega` defaults to `1 / (mu + 1.1 sigma_max(X_A)^2 / (2 lambda2))`, the inverse curvature of `D_A`
//!   on a fixed support, with `mu` the minimum of `l*''` on `F` (the `gamma` of the gap ball: 1 for squared
//!   loss, 4 for logistic, where near the boundary of `F` the dual is stiffer, which the projection and
//!   keeping the best dual point make harmless) and `sigma_max` by power iteration (an estimate from
//!   below, hence the 10% margin); the paper's constant 0.0005 is available.

use super::columns::Columns;
use super::dual::Penalty;
use super::SubsetLoss;

/// Iterations without a gap decrease of more than `zeta` before Alg. 1 stops.
pub const PATIENCE: usize = 10;

/// Which inner solver: the paper's PrimDual (Alg. 1) or its DualAst ablation (no primal CD).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    PrimDual,
    DualAst,
}

/// Knobs of one inner solve.
#[derive(Debug, Clone, Copy)]
pub struct InnerOptions {
    pub variant: Variant,
    /// Dual step; `None` = `1 / (mu + 1.1 sigma_max(X_A)^2 / (2 lambda2))` (module docs).
    pub omega: Option<f64>,
    /// Stop when the sub-problem gap is below this.
    pub xi: f64,
    /// Stop when one iteration decreases the sub-problem gap by at most this.
    pub zeta: f64,
    pub max_iterations: usize,
    /// Take the super-gradient at the link of the current dual point, `X B(eta(alpha)) - l*'(alpha)`
    /// (Remark E.2, what DualAst does), instead of at the CD-improved primal iterate as Alg. 1 writes it.
    pub exact_supergradient: bool,
}

/// The primal-dual state shared by the inner and outer loops (normalised scale).
#[derive(Debug, Clone)]
pub struct State {
    /// `beta` over all `p` features; zero outside the active set.
    pub beta: Vec<f64>,
    /// `y - X beta`.
    pub resid: Vec<f64>,
    /// The dual point handed between solves (the best one found so far).
    pub alpha: Vec<f64>,
}

impl State {
    pub fn zero(n: usize, p: usize, y: &[f64]) -> State {
        State {
            beta: vec![0.0; p],
            resid: y.to_vec(),
            alpha: vec![0.0; n],
        }
    }

    /// Recomputes the residual from `beta` (used after warm starts).
    pub fn refresh_residual(&mut self, cols: &Columns) {
        self.resid.clear();
        self.resid.extend_from_slice(cols.y());
        for j in 0..self.beta.len() {
            if self.beta[j] != 0.0 {
                cols.axpy(j, -self.beta[j], &mut self.resid);
            }
        }
    }
}

/// Buffers reused across inner solves (no allocation inside the iteration loop).
#[derive(Debug, Default, Clone)]
pub struct Scratch {
    linked: Vec<f64>,
    linked_resid: Vec<f64>,
    link_resid: Vec<f64>,
    ascent: Vec<f64>,
    point: Vec<f64>,
    best_alpha: Vec<f64>,
    best_beta: Vec<f64>,
    best_resid: Vec<f64>,
    power: Vec<f64>,
    power_n: Vec<f64>,
}

/// What one inner solve achieved on its sub-problem.
#[derive(Debug, Clone, Copy)]
pub struct InnerOutcome {
    pub iterations: usize,
    pub primal: f64,
    pub dual: f64,
}

/// `P_A(beta) = sum_i l(u_i, y_i) + sum_{j in A} g(beta_j)` (beta is zero off `A`, `u = y - resid`).
pub fn sub_primal(
    cols: &Columns,
    loss: SubsetLoss,
    penalty: &Penalty,
    active: &[usize],
    beta: &[f64],
    resid: &[f64],
) -> f64 {
    loss.loss_of_residual(cols.y(), resid)
        + active.iter().map(|&j| penalty.value(beta[j])).sum::<f64>()
}

/// `D_A(alpha) = -sum_i l*(alpha_i) + sum_{j in A} Psi(eta_j(alpha))` ((8) restricted to `A`).
pub fn sub_dual(
    cols: &Columns,
    loss: SubsetLoss,
    penalty: &Penalty,
    active: &[usize],
    alpha: &[f64],
) -> f64 {
    -loss.conjugate_sum(cols.y(), alpha)
        + active
            .iter()
            .map(|&j| penalty.psi(penalty.eta(cols.dot(j, alpha))))
            .sum::<f64>()
}

/// `sigma_max(X_A)^2` by power iteration on `X_A^T X_A` (12 rounds; an estimate from below, so the
/// default step gets a 10% margin).
pub(super) fn sigma_max_sq(cols: &Columns, active: &[usize], scratch: &mut Scratch) -> f64 {
    let k = active.len();
    if k == 0 {
        return 0.0;
    }
    scratch.power.clear();
    scratch.power.resize(k, 1.0 / (k as f64).sqrt());
    let mut estimate = 1.0;
    for _ in 0..12 {
        scratch.power_n.clear();
        scratch.power_n.resize(cols.n(), 0.0);
        for (a, &j) in active.iter().enumerate() {
            cols.axpy(j, scratch.power[a], &mut scratch.power_n);
        }
        for (a, &j) in active.iter().enumerate() {
            scratch.power[a] = cols.dot(j, &scratch.power_n);
        }
        let norm = scratch.power.iter().map(|v| v * v).sum::<f64>().sqrt();
        if norm == 0.0 {
            return 0.0;
        }
        estimate = norm;
        scratch.power.iter_mut().for_each(|v| *v /= norm);
    }
    estimate
}

/// The sub-problem Alg. 1 solves: `loss` and `penalty` on the columns `active`.
#[derive(Clone, Copy)]
struct SubProblem<'a> {
    cols: &'a Columns,
    loss: SubsetLoss,
    penalty: &'a Penalty,
    active: &'a [usize],
}

impl SubProblem<'_> {
    /// [`sub_primal`] at `state`'s primal iterate.
    fn primal(&self, state: &State) -> f64 {
        sub_primal(
            self.cols,
            self.loss,
            self.penalty,
            self.active,
            &state.beta,
            &state.resid,
        )
    }

    /// [`sub_dual`] at `alpha`.
    fn dual(&self, alpha: &[f64]) -> f64 {
        sub_dual(self.cols, self.loss, self.penalty, self.active, alpha)
    }
}

/// The best sub-problem primal and dual values found so far (their points are in [`Scratch`]).
struct Best {
    primal: f64,
    dual: f64,
}

/// Runs Alg. 1 for `loss` on `active` from `state`; leaves the best primal in `state.beta`/`state.resid`
/// and the best sub-problem dual point in `state.alpha`.
pub fn solve(
    cols: &Columns,
    loss: SubsetLoss,
    penalty: &Penalty,
    active: &[usize],
    options: &InnerOptions,
    state: &mut State,
    scratch: &mut Scratch,
) -> InnerOutcome {
    let sub = SubProblem {
        cols,
        loss,
        penalty,
        active,
    };
    let omega = options.omega.unwrap_or_else(|| {
        1.0 / (loss.gamma() + 1.1 * sigma_max_sq(cols, active, scratch) / (2.0 * penalty.lambda2))
    });
    let mut best = begin(&sub, state, scratch);
    let mut previous_gap = best.primal - best.dual;
    let mut iterations = 0;
    let mut stale = 0;
    while iterations < options.max_iterations {
        iterations += 1;
        ascend_and_link(&sub, options, omega, state, scratch, &mut best);
        // 4. Primal coordinate descent.
        if options.variant == Variant::PrimDual {
            loss.coordinate_sweep(cols, penalty, active, &mut state.beta, &mut state.resid);
        }
        keep_best(&sub, state, scratch, &mut best);
        let gap = best.primal - best.dual;
        if gap <= options.xi {
            break;
        }
        if previous_gap - gap > options.zeta {
            previous_gap = gap;
            stale = 0;
        } else {
            stale += 1;
            if stale >= PATIENCE {
                break;
            }
        }
    }
    for (a, &j) in active.iter().enumerate() {
        state.beta[j] = scratch.best_beta[a];
    }
    state.resid.copy_from_slice(&scratch.best_resid);
    state.alpha.copy_from_slice(&scratch.best_alpha);
    InnerOutcome {
        iterations,
        primal: best.primal,
        dual: best.dual,
    }
}

/// The values at the start (`state`), which is the best point so far, and the scratch set up from it.
fn begin(sub: &SubProblem, state: &State, scratch: &mut Scratch) -> Best {
    let (cols, active) = (sub.cols, sub.active);
    let best = Best {
        primal: sub.primal(state),
        dual: sub.dual(&state.alpha),
    };
    scratch.best_alpha.clear();
    scratch.best_alpha.extend_from_slice(&state.alpha);
    scratch.best_beta.clear();
    scratch
        .best_beta
        .extend(active.iter().map(|&j| state.beta[j]));
    scratch.best_resid.clear();
    scratch.best_resid.extend_from_slice(&state.resid);
    scratch.ascent.clear();
    scratch.ascent.extend_from_slice(&state.alpha);
    scratch.point.resize(cols.n(), 0.0);
    scratch.linked.resize(active.len(), 0.0);
    scratch.link_resid.clear();
    scratch.link_resid.extend_from_slice(&state.resid);
    best
}

/// Steps 1-3 of an iteration (module docs): the projected super-gradient ascent, the link `beta'` and
/// `D_A` of the ascent iterate (kept if best); then `beta'` replaces the primal iterate (always for
/// DualAst, when it does not increase `P_A` for PrimDual).
fn ascend_and_link(
    sub: &SubProblem,
    options: &InnerOptions,
    omega: f64,
    state: &mut State,
    scratch: &mut Scratch,
    best: &mut Best,
) {
    let (cols, loss, penalty, active) = (sub.cols, sub.loss, sub.penalty, sub.active);
    let y = cols.y();
    // 1-2. Projected super-gradient ascent, at the link's residual or at the CD iterate's.
    let toward: &[f64] = if options.exact_supergradient {
        &scratch.link_resid
    } else {
        &state.resid
    };
    loss.ascend(y, toward, omega, &mut scratch.ascent);
    // 3. The link, and D_A of the ascent iterate from the same products x_j . alpha.
    let mut psi_sum = 0.0;
    for (a, &j) in active.iter().enumerate() {
        let eta = penalty.eta(cols.dot(j, &scratch.ascent));
        scratch.linked[a] = penalty.link(eta);
        psi_sum += penalty.psi(eta);
    }
    let ascent_dual = -loss.conjugate_sum(y, &scratch.ascent) + psi_sum;
    if ascent_dual > best.dual {
        best.dual = ascent_dual;
        scratch.best_alpha.copy_from_slice(&scratch.ascent);
    }
    scratch.linked_resid.clear();
    scratch.linked_resid.extend_from_slice(y);
    for (a, &j) in active.iter().enumerate() {
        if scratch.linked[a] != 0.0 {
            cols.axpy(j, -scratch.linked[a], &mut scratch.linked_resid);
        }
    }
    scratch.link_resid.copy_from_slice(&scratch.linked_resid);
    let linked_primal = loss.loss_of_residual(y, &scratch.linked_resid)
        + scratch
            .linked
            .iter()
            .map(|&b| penalty.value(b))
            .sum::<f64>();
    let current_primal = sub.primal(state);
    let take_link = match options.variant {
        Variant::DualAst => true,
        Variant::PrimDual => linked_primal < current_primal,
    };
    if take_link {
        for (a, &j) in active.iter().enumerate() {
            state.beta[j] = scratch.linked[a];
        }
        std::mem::swap(&mut state.resid, &mut scratch.linked_resid);
    }
}

/// Step 5 (module docs): scores the primal iterate and its dual point `l'(X beta)` (Remark E.3), keeping
/// each if best.
fn keep_best(sub: &SubProblem, state: &State, scratch: &mut Scratch, best: &mut Best) {
    let (cols, loss, active) = (sub.cols, sub.loss, sub.active);
    let primal = sub.primal(state);
    if primal < best.primal {
        best.primal = primal;
        for (a, &j) in active.iter().enumerate() {
            scratch.best_beta[a] = state.beta[j];
        }
        scratch.best_resid.copy_from_slice(&state.resid);
    }
    loss.dual_point(cols.y(), &state.resid, &mut scratch.point);
    let primal_point_dual = sub.dual(&scratch.point);
    if primal_point_dual > best.dual {
        best.dual = primal_point_dual;
        scratch.best_alpha.copy_from_slice(&scratch.point);
    }
}
