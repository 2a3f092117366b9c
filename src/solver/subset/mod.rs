//! Best subset selection with l0 + l1 + l2 penalties: the dynamic incremental primal-dual solver of
//! Ren & Qian, *Dynamic Incremental Optimization for Best Subset Selection*
//! (`shared/papers/best-subset-dynamic-incremental.txt`, crib sheet §3).
//!
//! ## The problem, in the paper's conventions (not the rest of the crate's)
//!
//! `P(beta) = sum_i l(beta.x_i, y_i) + lambda0 ||beta||_0 + lambda1 ||beta||_1 + lambda2 ||beta||_2^2`
//!
//! - a SUM over samples (no `1/N`), and for squared loss `l = (1/2)(y - u)^2` (logistic: below);
//! - `lambda2` without a 1/2. [`crate::solver::Problem`] (DIHT) uses `(1/N) sum (y - u)^2 + (lambda/2)||w||^2`
//!   instead; the two are deliberately kept apart: this module reads no [`crate::loss::Loss`] setting (the
//!   logistic kernels are borrowed from it because their conventions coincide).
//! - columns are normalised to `||x_j|| = 1` internally ([`columns`]) and the penalties apply to the
//!   coefficients of the normalised design (as in the paper); the model reports `w_j = beta_j / ||x_j||`
//!   in the caller's scale. Sample weights scale the loss (`c_i/2 (y_i - u_i)^2`). No intercept.
//!
//! ## The pieces
//!
//! - [`logistic`]: the logistic loss's conjugate, dual point, ascent step and coordinate step;
//! - [`dual`]: `eta(alpha)`, `eta0`, the link `B` (6), `Psi` (7), `D(alpha)` (8), the coordinate step T (13),
//!   and the squared loss's conjugate, ascent step and coordinate sweep;
//! - [`inner`]: Alg. 1 (PrimDual) and its ablation DualAst, on an active set, one loop for both losses
//!   ([`SubsetLoss`] dispatches the loss-specific steps);
//! - [`screening`]: the gap ball (15), gap-safe screening (16), feature inclusion (Alg. 3);
//! - [`SubsetSolver`]: Alg. 2, one outer step per [`SubsetSolver::step`], driven by [`SubsetSolver::solve`];
//!   warm-startable ([`SubsetSolver::warm_start`], [`SubsetSolver::set_penalty`]) for regularisation paths
//!   ([`SubsetSolver::path`]) and for a daemon re-solving a moving window.
//!
//! ## Logistic loss ([`logistic`], `SubsetParams::loss = SubsetLoss::Logistic`)
//!
//! With `l(u, y) = ln(1 + exp(-y u))`, `y in {-1, +1}` (unweighted samples; anything else is
//! [`SubsetError::LogisticLabel`]), the Lagrangian (4) `sum_i (alpha_i x_i.beta - l*(alpha_i)) + sum_j
//! g(beta_j)` and therefore `eta`, `B`, `Psi` and the screening threshold are unchanged: only `l*`
//! differs. `alpha_i = l'(u_i)` as for squared loss (where `l'(u) = u - y`, i.e. `alpha = X beta - y`).
//! `l*(a) = b ln b + (1 - b) ln(1 - b)` with `b = -y a`, the convention of [`crate::loss`] (whose logistic
//! kernels are reused: no scaling differs), feasible set `F = {y a in [-1, 0]}` (projection = clipping),
//! `l*'(a) = -y ln(b/(1-b))`, so the super-gradient is `g_i = x_i.beta + y_i ln(b_i / (1 - b_i))`.
//! `l*''(a) = 1/(b(1-b)) >= 4` on `F` (`l` is 1/4-smooth), so `l*` is `mu = 4`-strongly convex and the gap
//! ball uses `gamma = 4`: `r = sqrt(2 (P - D) / 4)`. The dual point of a primal iterate is `alpha_i =
//! l'(u_i) = -y_i / (1 + exp(y_i u_i))` (Remark E.3), strictly inside `F`. At `beta = 0`, `l'(0) = -y/2`,
//! so the initial active set ranks `|x_j . y|` as for squared loss and [`SubsetSolver::lambda0_max`] uses
//! `m = max_j |x_j . y| / 2`. T (13) has no closed form; with the curvature bound `l'' <= 1/4` the
//! majorised coordinate step is T applied to `b~ = beta_j - 4 x_j . l'(X beta)` with `lambda0, lambda1,
//! lambda2` scaled by 4 (the minimiser of `(1/8)(b - b~)^2 + g(b)`), which never increases `P`. The dual
//! step's default `omega` replaces the squared loss's `l*'' = 1` by the minimum 4.

pub mod columns;
pub mod dual;
pub mod inner;
pub mod logistic;
pub mod screening;

use std::time::Instant;

use thiserror::Error;

use crate::sample::SampleSet;
use crate::solver::driver::TraceRow;
use crate::solver::{Certificate, ModelView};
use crate::sparse::support_changes;
use columns::Columns;
pub use dual::{Penalty, PenaltyError};
pub use inner::Variant;
use inner::{InnerOptions, Scratch, State};
use screening::{
    ball_radius, correlations, inclusion_size, screens_out, select_inclusion, SQUARED_GAMMA,
};

/// The loss `l(u, y)` of the subset problem (the paper's conventions, summed over samples).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SubsetLoss {
    /// `(1/2)(y - u)^2` (the paper's case).
    #[default]
    Squared,
    /// `ln(1 + exp(-y u))`, labels +-1, unweighted samples.
    Logistic,
}

impl SubsetLoss {
    /// `sum_i l(u_i, y_i)` from the residual `y - X beta`.
    fn loss_of_residual(self, y: &[f64], resid: &[f64]) -> f64 {
        match self {
            SubsetLoss::Squared => dual::squared_loss_of_residual(resid),
            SubsetLoss::Logistic => logistic::loss_of_residual(y, resid),
        }
    }

    /// `sum_i l*(alpha_i)`.
    fn conjugate_sum(self, y: &[f64], alpha: &[f64]) -> f64 {
        match self {
            SubsetLoss::Squared => dual::squared_conjugate_sum(y, alpha),
            SubsetLoss::Logistic => logistic::conjugate_sum(y, alpha),
        }
    }

    /// The dual point of a primal iterate, `alpha_i = l'(u_i)` (Remark E.3).
    fn dual_point(self, y: &[f64], resid: &[f64], alpha: &mut [f64]) {
        match self {
            SubsetLoss::Squared => {
                for (a, &r) in alpha.iter_mut().zip(resid) {
                    *a = -r;
                }
            }
            SubsetLoss::Logistic => logistic::dual_point(y, resid, alpha),
        }
    }

    /// `gamma = mu`, the strong convexity of `l*` (the gap ball (15)); also the minimum of `l*''` on `F`
    /// in Alg. 1's default dual step.
    fn gamma(self) -> f64 {
        match self {
            SubsetLoss::Squared => SQUARED_GAMMA,
            SubsetLoss::Logistic => logistic::LOGISTIC_GAMMA,
        }
    }

    /// One step of Alg. 1's projected super-gradient ascent on the dual (8), `alpha_i += omega (u_i -
    /// l*'(alpha_i))` with `u = y - resid` (Remark E.2), then onto `F`.
    fn ascend(self, y: &[f64], resid: &[f64], omega: f64, alpha: &mut [f64]) {
        match self {
            SubsetLoss::Squared => dual::squared_ascent_step(resid, omega, alpha),
            SubsetLoss::Logistic => logistic::ascent_step(y, resid, omega, alpha),
        }
    }

    /// One sweep of Alg. 1's primal coordinate descent over `active`: T (13) for squared loss, the
    /// majorised step of [`logistic`] for logistic.
    fn coordinate_sweep(
        self,
        cols: &Columns,
        penalty: &Penalty,
        active: &[usize],
        beta: &mut [f64],
        resid: &mut [f64],
    ) {
        match self {
            SubsetLoss::Squared => {
                dual::squared_coordinate_sweep(cols, penalty, active, beta, resid)
            }
            SubsetLoss::Logistic => logistic::coordinate_sweep(cols, penalty, active, beta, resid),
        }
    }

    /// `|l'(0, y)| / |y|`: 1 for squared, 1/2 for logistic (`l'(0) = -y/2`).
    fn slope_at_zero(self) -> f64 {
        match self {
            SubsetLoss::Squared => 1.0,
            SubsetLoss::Logistic => 0.5,
        }
    }
}

/// Everything Alg. 2 needs besides the data.
#[derive(Debug, Clone, Copy)]
pub struct SubsetParams {
    pub penalty: Penalty,
    pub loss: SubsetLoss,
    pub variant: Variant,
    /// Stop when the full gap is below this (the paper's `xi`, 1e-6).
    pub xi: f64,
    /// Stop when the gap changed by less than this over two outer steps (the paper's `zeta`, 1e-6); also
    /// the inner solver's "gap stopped decreasing" tolerance (per iteration).
    pub zeta: f64,
    /// Feature inclusion adds `h = ceil(c ln p)` features per outer step (paper: 4).
    pub c: f64,
    /// Dual step of Alg. 1; `None` = inverse curvature of the sub-problem dual (see [`inner`]).
    pub omega: Option<f64>,
    pub max_outer: usize,
    pub max_inner: usize,
    /// Gap-safe screening (16); off only for tests and ablations.
    pub screening: bool,
    /// Alg. 1's dual step at the exact super-gradient of `D` (default; see [`inner::InnerOptions`]). On the
    /// Sec. 5.1 data it halves the final gap at the same primal; `false` is Alg. 1 as printed.
    pub exact_supergradient: bool,
}

impl SubsetParams {
    /// The paper's defaults (`xi = zeta = 1e-6`, `c = 4`) with PrimDual.
    pub fn new(penalty: Penalty) -> SubsetParams {
        SubsetParams {
            penalty,
            loss: SubsetLoss::Squared,
            variant: Variant::PrimDual,
            xi: 1e-6,
            zeta: 1e-6,
            c: 4.0,
            omega: None,
            max_outer: 1000,
            max_inner: 10_000,
            screening: true,
            exact_supergradient: true,
        }
    }

    fn validate(&self) -> Result<(), SubsetError> {
        Penalty::new(
            self.penalty.lambda0,
            self.penalty.lambda1,
            self.penalty.lambda2,
        )?;
        let nonneg = |name: &'static str, v: f64| {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                Err(SubsetError::Parameter { name, value: v })
            }
        };
        nonneg("xi", self.xi)?;
        nonneg("zeta", self.zeta)?;
        if !(self.c.is_finite() && self.c > 0.0) {
            return Err(SubsetError::Parameter {
                name: "c",
                value: self.c,
            });
        }
        if let Some(omega) = self.omega {
            if !(omega.is_finite() && omega > 0.0) {
                return Err(SubsetError::Parameter {
                    name: "omega",
                    value: omega,
                });
            }
        }
        Ok(())
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum SubsetError {
    #[error(transparent)]
    Penalty(#[from] PenaltyError),
    #[error("{name} must be finite and > 0 (>= 0 for xi, zeta), got {value}")]
    Parameter { name: &'static str, value: f64 },
    #[error("the data set is empty")]
    NoSamples,
    #[error("the logistic loss needs labels -1 or +1 and unweighted samples; sample {index} (0-based) has label*sqrt(weight) = {label}")]
    LogisticLabel { index: usize, label: f64 },
}

/// Why [`SubsetSolver::solve`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SubsetStop {
    /// Full gap below `xi`.
    Converged,
    /// The gap changed by less than `zeta` over two outer steps.
    Stalled,
    MaxOuter,
}

impl std::fmt::Display for SubsetStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SubsetStop::Converged => "converged",
            SubsetStop::Stalled => "stalled",
            SubsetStop::MaxOuter => "max_outer",
        })
    }
}

/// One outer step of Alg. 2: the certified point after it, and what screening and inclusion did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OuterStep {
    /// The driver's row (`epoch` = outer step, `seconds` = cumulative solver time).
    pub row: TraceRow,
    /// `|A|` after screening and inclusion.
    pub active_set_size: usize,
    /// Features screened out so far (for the current penalty).
    pub screened: usize,
    pub newly_screened: usize,
    pub added: usize,
    pub inner_iterations: usize,
    /// Full-gap ball radius (15) used for screening.
    pub radius: f64,
}

impl OuterStep {
    /// [`TraceRow::CSV_HEADER`] plus the subset columns.
    pub const CSV_HEADER: &'static str =
        "epoch,seconds,primal,dual,gap,support_size,support_changes,active_set_size,screened";

    pub fn csv(&self) -> String {
        format!(
            "{},{},{}",
            self.row.csv(),
            self.active_set_size,
            self.screened
        )
    }
}

/// The outcome of [`SubsetSolver::solve`].
#[derive(Debug, Clone, Copy)]
pub struct SubsetReport {
    pub outer_steps: usize,
    pub seconds: f64,
    pub certificate: Certificate,
    pub stop: SubsetStop,
}

/// One point of a lambda0 path.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct PathPoint {
    pub lambda0: f64,
    pub support_size: usize,
    pub primal: f64,
    pub dual: f64,
    pub gap: f64,
    pub outer_steps: usize,
    pub seconds: f64,
    pub stop: SubsetStop,
}

/// Alg. 2 (dynamic incremental) over Alg. 1, with its warm-startable state.
#[derive(Debug, Clone)]
pub struct SubsetSolver {
    cols: Columns,
    params: SubsetParams,
    state: State,
    scratch: Scratch,
    active: Vec<usize>,
    in_active: Vec<bool>,
    screened: Vec<bool>,
    screened_count: usize,
    do_add: bool,
    gaps: Vec<f64>,
    outer: usize,
    seconds: f64,
    scores: Vec<f64>,
    alt_scores: Vec<f64>,
    alt_alpha: Vec<f64>,
    best_dual: f64,
    best_alpha: Vec<f64>,
    best_scores: Vec<f64>,
    candidates: Vec<usize>,
    weights: Vec<f64>,
    support: Vec<u32>,
    certificate: Certificate,
}

impl SubsetSolver {
    /// Normalises the columns and picks the initial active set: the `h` largest `|x_j . l'(0)| = |x_j . y|`.
    pub fn new<S: SampleSet>(data: &S, params: SubsetParams) -> Result<SubsetSolver, SubsetError> {
        params.validate()?;
        if data.is_empty() {
            return Err(SubsetError::NoSamples);
        }
        let cols = Columns::from_samples(data);
        if params.loss == SubsetLoss::Logistic {
            logistic::check_labels(cols.y())
                .map_err(|(index, label)| SubsetError::LogisticLabel { index, label })?;
        }
        let (n, p) = (cols.n(), cols.p());
        let state = State::zero(n, p, cols.y());
        let primal = params.loss.loss_of_residual(cols.y(), cols.y());
        let mut solver = SubsetSolver {
            params,
            state,
            scratch: Scratch::default(),
            active: Vec::new(),
            in_active: vec![false; p],
            screened: vec![false; p],
            screened_count: 0,
            do_add: true,
            gaps: Vec::new(),
            outer: 0,
            seconds: 0.0,
            scores: Vec::new(),
            alt_scores: Vec::new(),
            alt_alpha: vec![0.0; n],
            best_dual: f64::NEG_INFINITY,
            best_alpha: vec![0.0; n],
            best_scores: Vec::new(),
            candidates: Vec::new(),
            weights: vec![0.0; p],
            support: Vec::new(),
            certificate: Certificate::new(primal, f64::NEG_INFINITY, n),
            cols,
        };
        correlations(&solver.cols, solver.cols.y(), &mut solver.scores);
        solver.include(solver.h());
        Ok(solver)
    }

    fn h(&self) -> usize {
        let usable = (0..self.cols.p()).filter(|&j| self.cols.usable(j)).count();
        inclusion_size(self.params.c, usable)
    }

    /// Adds the `h` best remaining (usable, inactive, unscreened) features by `|scores_j|`; returns how many.
    fn include(&mut self, h: usize) -> usize {
        self.candidates.clear();
        self.candidates.extend(
            (0..self.cols.p())
                .filter(|&j| self.cols.usable(j) && !self.in_active[j] && !self.screened[j]),
        );
        let before = self.active.len();
        select_inclusion(&mut self.candidates, &self.scores, h, &mut self.active);
        for &j in &self.active[before..] {
            self.in_active[j] = true;
        }
        self.active[before..].sort_unstable();
        self.active.len() - before
    }

    pub fn params(&self) -> &SubsetParams {
        &self.params
    }

    /// The current active set (feature indices).
    pub fn active_set(&self) -> Vec<u32> {
        let mut a: Vec<u32> = self.active.iter().map(|&j| j as u32).collect();
        a.sort_unstable();
        a
    }

    /// Features screened out so far (for the current penalty), ascending.
    pub fn screened_features(&self) -> Vec<u32> {
        (0..self.cols.p())
            .filter(|&j| self.screened[j])
            .map(|j| j as u32)
            .collect()
    }

    /// The model in the caller's scale (no intercept).
    pub fn model(&self) -> ModelView<'_> {
        ModelView {
            weights: &self.weights,
            support: &self.support,
            intercept: 0.0,
        }
    }

    /// The certificate of the last outer step (dual `-inf` before the first).
    pub fn certificate(&self) -> Certificate {
        self.certificate
    }

    /// `P(beta)` in the normalised problem for weights given in the caller's scale (dense, length >= p is
    /// not required: missing entries are 0). For comparing any model (e.g. a peer's) on our objective.
    pub fn objective_of(&self, weights: &[f64]) -> f64 {
        let mut resid = self.cols.y().to_vec();
        let mut penalty = 0.0;
        for (j, &w) in weights.iter().enumerate().take(self.cols.p()) {
            if w != 0.0 && self.cols.usable(j) {
                let b = w * self.cols.scale(j);
                self.cols.axpy(j, -b, &mut resid);
                penalty += self.params.penalty.value(b);
            }
        }
        self.params.loss.loss_of_residual(self.cols.y(), &resid) + penalty
    }

    /// Restarts from a previous solution (weights in the caller's scale, by feature index) and active
    /// set, e.g. the last model a daemon published. Unknown or empty features are ignored.
    pub fn warm_start(&mut self, weights: &[(u32, f64)], active: &[u32]) {
        self.state.beta.iter_mut().for_each(|b| *b = 0.0);
        for &(j, w) in weights {
            let j = j as usize;
            if j < self.cols.p() && self.cols.usable(j) && w.is_finite() {
                self.state.beta[j] = w * self.cols.scale(j);
            }
        }
        self.state.refresh_residual(&self.cols);
        self.params
            .loss
            .dual_point(self.cols.y(), &self.state.resid, &mut self.state.alpha);
        self.screened.iter_mut().for_each(|s| *s = false);
        self.screened_count = 0;
        self.best_dual = f64::NEG_INFINITY;
        let wanted = active
            .iter()
            .map(|&j| j as usize)
            .chain((0..self.cols.p()).filter(|&j| self.state.beta[j] != 0.0))
            .filter(|&j| j < self.cols.p() && self.cols.usable(j));
        self.active.clear();
        self.in_active.iter_mut().for_each(|a| *a = false);
        for j in wanted {
            if !self.in_active[j] {
                self.in_active[j] = true;
                self.active.push(j);
            }
        }
        self.active.sort_unstable();
        if self.active.is_empty() {
            correlations(&self.cols, self.cols.y(), &mut self.scores);
            self.include(self.h());
        }
        self.do_add = true;
        self.gaps.clear();
        self.refresh_model();
    }

    /// Changes the penalty and keeps the current solution as the warm start. Screening decisions depend
    /// on the penalty, so they are forgotten; the active set restarts from the current support plus the
    /// `h` features most correlated with the current residual (Alg. 2's start, warm), so a path does not
    /// drag every feature it ever tried along.
    pub fn set_penalty(&mut self, penalty: Penalty) -> Result<(), SubsetError> {
        let mut params = self.params;
        params.penalty = penalty;
        params.validate()?;
        self.params = params;
        self.screened.iter_mut().for_each(|s| *s = false);
        self.screened_count = 0;
        self.best_dual = f64::NEG_INFINITY;
        let beta = &self.state.beta;
        let in_active = &mut self.in_active;
        self.active.retain(|&j| {
            in_active[j] = beta[j] != 0.0;
            beta[j] != 0.0
        });
        self.params
            .loss
            .dual_point(self.cols.y(), &self.state.resid, &mut self.alt_alpha);
        correlations(&self.cols, &self.alt_alpha, &mut self.scores);
        self.include(self.h());
        self.do_add = true;
        self.gaps.clear();
        Ok(())
    }

    /// `lambda0` above which `beta = 0` is optimal with zero gap: `((m - lambda1)_+ / 2)^2 / lambda2` with
    /// `m = max_j |x_j . l'(0)|` (`|x_j . y|` for squared loss, `|x_j . y| / 2` for logistic).
    pub fn lambda0_max(&self) -> f64 {
        let m = (0..self.cols.p())
            .filter(|&j| self.cols.usable(j))
            .map(|j| self.cols.dot(j, self.cols.y()).abs())
            .fold(0.0, f64::max)
            * self.params.loss.slope_at_zero();
        let excess = (m - self.params.penalty.lambda1).max(0.0) / 2.0;
        excess * excess / self.params.penalty.lambda2
    }

    fn refresh_model(&mut self) {
        self.support.clear();
        for j in 0..self.cols.p() {
            let b = self.state.beta[j];
            self.weights[j] = if b != 0.0 {
                b / self.cols.scale(j)
            } else {
                0.0
            };
            if b != 0.0 {
                self.support.push(j as u32);
            }
        }
    }

    /// `D(alpha)` over all features; leaves `x_j . alpha` in `scores`.
    fn full_dual(
        cols: &Columns,
        loss: SubsetLoss,
        penalty: &Penalty,
        alpha: &[f64],
        scores: &mut Vec<f64>,
    ) -> f64 {
        correlations(cols, alpha, scores);
        let psi: f64 = scores.iter().map(|&c| penalty.psi(penalty.eta(c))).sum();
        -loss.conjugate_sum(cols.y(), alpha) + psi
    }

    /// One outer step of Alg. 2: solve the sub-problem (Alg. 1), certify on the full problem, screen (16),
    /// include (Alg. 3).
    pub fn step(&mut self) -> OuterStep {
        let started = Instant::now();
        let previous_support = self.support.clone();
        let penalty = self.params.penalty;
        let options = InnerOptions {
            variant: self.params.variant,
            omega: self.params.omega,
            xi: self.params.xi,
            zeta: self.params.zeta,
            max_iterations: self.params.max_inner,
            exact_supergradient: self.params.exact_supergradient,
        };
        let loss = self.params.loss;
        let outcome = inner::solve(
            &self.cols,
            loss,
            &penalty,
            &self.active,
            &options,
            &mut self.state,
            &mut self.scratch,
        );
        let (primal, dual) = self.certify_full(&penalty);
        let gap = primal - dual;
        let radius = ball_radius(gap, loss.gamma());
        let newly_screened = self.screen(&penalty, radius);
        let added = self.include_until_passing(&penalty, radius);
        self.seconds += started.elapsed().as_secs_f64();
        self.outer += 1;
        self.gaps.push(gap);
        self.refresh_model();
        self.certificate = Certificate::new(primal, dual, self.cols.n());
        OuterStep {
            row: TraceRow {
                epoch: self.outer,
                seconds: self.seconds,
                primal,
                dual,
                gap,
                support_size: self.support.len(),
                support_changes: support_changes(&previous_support, &self.support),
            },
            active_set_size: self.active.len(),
            screened: self.screened_count,
            newly_screened,
            added,
            inner_iterations: outcome.iterations,
            radius,
        }
    }

    /// The full problem's certificate after a sub-problem solve: `P` at the primal iterate and the best
    /// full dual value so far, of the sub-problem's dual point, `l'(X beta)` and the best before; leaves
    /// that dual point in `state.alpha` and its `x_j . alpha` in `scores`.
    fn certify_full(&mut self, penalty: &Penalty) -> (f64, f64) {
        let loss = self.params.loss;
        // Full certificate: the better of the sub-problem's dual point and l'(X beta).
        let primal = loss.loss_of_residual(self.cols.y(), &self.state.resid)
            + self
                .active
                .iter()
                .map(|&j| penalty.value(self.state.beta[j]))
                .sum::<f64>();
        // The best full dual point so far (for this penalty): the sub-problem's, or X beta - y (Remark E.3).
        // Any feasible alpha certifies, so keeping the best makes the full gap monotone.
        let sub_dual = Self::full_dual(
            &self.cols,
            loss,
            penalty,
            &self.state.alpha,
            &mut self.alt_scores,
        );
        if sub_dual > self.best_dual {
            self.best_dual = sub_dual;
            self.best_alpha.copy_from_slice(&self.state.alpha);
            std::mem::swap(&mut self.best_scores, &mut self.alt_scores);
        }
        loss.dual_point(self.cols.y(), &self.state.resid, &mut self.alt_alpha);
        let primal_point_dual = Self::full_dual(
            &self.cols,
            loss,
            penalty,
            &self.alt_alpha,
            &mut self.alt_scores,
        );
        if primal_point_dual > self.best_dual {
            self.best_dual = primal_point_dual;
            self.best_alpha.copy_from_slice(&self.alt_alpha);
            std::mem::swap(&mut self.best_scores, &mut self.alt_scores);
        }
        let dual = self.best_dual;
        self.state.alpha.copy_from_slice(&self.best_alpha);
        self.scores.clone_from(&self.best_scores);
        (primal, dual)
    }

    /// Screening (16) with the gap ball of `radius`, never of a feature that is currently nonzero; the
    /// screened features leave the active set. Returns how many were newly screened.
    fn screen(&mut self, penalty: &Penalty, radius: f64) -> usize {
        let mut newly_screened = 0;
        if self.params.screening {
            for j in 0..self.cols.p() {
                if self.cols.usable(j)
                    && !self.screened[j]
                    && self.state.beta[j] == 0.0
                    && screens_out(penalty, self.scores[j], radius)
                {
                    self.screened[j] = true;
                    newly_screened += 1;
                }
            }
            if newly_screened > 0 {
                let screened = &self.screened;
                let in_active = &mut self.in_active;
                self.active.retain(|&j| {
                    if screened[j] {
                        in_active[j] = false;
                    }
                    !screened[j]
                });
                self.screened_count += newly_screened;
            }
        }
        newly_screened
    }

    /// Inclusion (Alg. 3) until every remaining feature passes the screening test with the gap ball of
    /// `radius`; returns how many features this step added.
    fn include_until_passing(&mut self, penalty: &Penalty, radius: f64) -> usize {
        let mut added = 0;
        if self.do_add {
            let all_pass = (0..self.cols.p())
                .filter(|&j| self.cols.usable(j) && !self.in_active[j] && !self.screened[j])
                .all(|j| screens_out(penalty, self.scores[j], radius));
            if all_pass {
                self.do_add = false;
            } else {
                added = self.include(self.h());
            }
        }
        added
    }

    /// The outer loop of Alg. 2: steps until the gap is below `xi`, or the gap changed by less than `zeta`
    /// over two steps (`|DGap^{s-2} - DGap^s|`, Sec. 5.1), or `max_outer`.
    pub fn solve(&mut self, observe: &mut dyn FnMut(&OuterStep)) -> SubsetReport {
        let first = self.outer;
        let stop = loop {
            let step = self.step();
            observe(&step);
            if step.row.gap < self.params.xi {
                break SubsetStop::Converged;
            }
            // The paper's zeta rule (Sec. 5.1) applies while features are still being added too: when the
            // l0 problem has no saddle point the gap has a positive floor, the ball never shrinks enough
            // for "every remaining feature passes (16)", and inclusion alone would grow A to all of p.
            let g = &self.gaps;
            if g.len() >= 3 {
                let change = (g[g.len() - 3] - g[g.len() - 1]).abs();
                if change < self.params.zeta {
                    break SubsetStop::Stalled;
                }
            }
            if self.outer - first >= self.params.max_outer {
                break SubsetStop::MaxOuter;
            }
        };
        SubsetReport {
            outer_steps: self.outer - first,
            seconds: self.seconds,
            certificate: self.certificate,
            stop,
        }
    }

    /// Solves for each `lambda0` in turn (decreasing, for a path), warm-started from the previous solution.
    pub fn path(
        &mut self,
        lambda0s: &[f64],
        observe: &mut dyn FnMut(f64, &OuterStep),
    ) -> Result<Vec<PathPoint>, SubsetError> {
        let mut points = Vec::with_capacity(lambda0s.len());
        for &lambda0 in lambda0s {
            let penalty = Penalty {
                lambda0,
                ..self.params.penalty
            };
            self.set_penalty(penalty)?;
            let started = self.seconds;
            let report = self.solve(&mut |s| observe(lambda0, s));
            points.push(PathPoint {
                lambda0,
                support_size: self.support.len(),
                primal: report.certificate.primal,
                dual: report.certificate.dual,
                gap: report.certificate.gap,
                outer_steps: report.outer_steps,
                seconds: report.seconds - started,
                stop: report.stop,
            });
        }
        Ok(points)
    }
}

/// `steps` values of lambda0 decreasing geometrically from `from` to `to` (both included).
pub fn geometric_path(from: f64, to: f64, steps: usize) -> Vec<f64> {
    match steps {
        0 => Vec::new(),
        1 => vec![to],
        _ => {
            let ratio = (to / from).powf(1.0 / (steps - 1) as f64);
            (0..steps)
                .map(|s| {
                    if s + 1 == steps {
                        to
                    } else {
                        from * ratio.powi(s as i32)
                    }
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests;
