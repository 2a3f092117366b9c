//! Solvers for the k-sparse problem, each a *step* (one epoch of its algorithm) kept apart from the loop
//! that drives it ([`driver`]), in the style of argmin.
//!
//! - [`sdiht::offline::Sdiht`] — DIHT (Alg. 1, `blocks = 1`) and SDIHT (Alg. 2, `m` random blocks) of
//!   the DIHT paper, around the block step ([`sdiht`]) the streaming learner runs too;
//! - [`primal::Iht`], [`primal::Htp`] — the primal baselines the paper compares against;
//! - [`mirror::MirrorDescent`] — stochastic sparse mirror descent (Guha 2022, Ch. 5) with a choice of
//!   mirror map and convex set; [`smidas::Smidas`] — its l1 prior art (Alg. 4.1), not k-sparse; both
//!   over a per-sample state ([`mirror::state::MirrorState`], [`smidas::SmidasState`]) that the
//!   streaming learners drive too;
//! - [`subset::SubsetSolver`] — best subset with l0 + l1 + l2 penalties (Ren & Qian), its own problem and
//!   conventions, driven by its own outer loop;
//! - [`softmax`] — multinomial logistic SDIHT with one k-row support shared by all classes, its own
//!   problem, certificate and offline loop (`docs/multiclass.md`);
//! - [`polish`] — not a search but its last step: Newton on the support a search chose, kept when its
//!   primal is lower (`fit` runs it on the model it returns);
//! - [`spread`] — a walk over many rows cut into chunks by the row count alone, walked by whoever the
//!   caller names (`fit`: its cores, for the polish and the final certificates; the daemon: in turn);
//!
//! Every solver is certified the same way ([`objective`]): the primal value of its current model, a dual
//! value and the gap. Solvers see samples only through [`SampleSet`], so they run unchanged on an
//! in-memory [`crate::sample::Dataset`] and on the daemon's window. They know nothing of threads or I/O.

pub mod driver;
pub mod mirror;
pub mod objective;
pub mod polish;
pub mod primal;
pub mod sdiht;
pub mod smidas;
pub mod softmax;
pub mod spread;
pub mod subset;

use thiserror::Error;

use crate::loss::Loss;
use crate::sample::SampleSet;
pub use objective::Certificate;
use objective::{dual_of_primal, dual_value, DualScratch};

/// The k-sparse problem (1.1) on a set of samples, the weighted mean: `min_{||w||_0 <= k} P(w, b)`.
#[derive(Debug, Clone, Copy)]
pub struct Problem<'a, S: SampleSet> {
    pub data: &'a S,
    pub loss: Loss,
    /// Ridge strength `lambda > 0`.
    pub lambda: f64,
    /// Sparsity level: at most `k` nonzero weights.
    pub k: usize,
    /// Fit an unpenalised, never-thresholded intercept.
    pub intercept: bool,
}

#[derive(Debug, Error, PartialEq)]
pub enum ProblemError {
    #[error("lambda must be finite and > 0, got {0}")]
    BadLambda(f64),
    #[error("k must be >= 1")]
    ZeroK,
    #[error("the data set is empty")]
    NoSamples,
    #[error("sample {index}: {source}")]
    Label {
        index: usize,
        #[source]
        source: crate::loss::LossError,
    },
    #[error("the theory step size needs a smooth loss (squared, huber, logistic), not hinge")]
    TheoryStepNeedsSmoothLoss,
    #[error("blocks must be between 1 and the number of samples ({samples}), got {blocks}")]
    BadBlocks { blocks: usize, samples: usize },
    #[error("step size must be finite and > 0, got {0}")]
    BadStep(f64),
}

impl<'a, S: SampleSet> Problem<'a, S> {
    /// Validates the parameters and every label against the loss.
    pub fn new(
        data: &'a S,
        loss: Loss,
        lambda: f64,
        k: usize,
        intercept: bool,
    ) -> Result<Self, ProblemError> {
        if !(lambda.is_finite() && lambda > 0.0) {
            return Err(ProblemError::BadLambda(lambda));
        }
        if k == 0 {
            return Err(ProblemError::ZeroK);
        }
        if data.is_empty() {
            return Err(ProblemError::NoSamples);
        }
        for i in 0..data.len() {
            loss.check_label(data.row(i).label)
                .map_err(|source| ProblemError::Label { index: i, source })?;
        }
        Ok(Problem {
            data,
            loss,
            lambda,
            k,
            intercept,
        })
    }

    /// The objective's divisor: the mass `M = sum_i c_i` of the rows (`N` when every weight is 1;
    /// [`objective`]'s module docs).
    pub fn mass(&self) -> f64 {
        self.data.normaliser()
    }

    /// `D` with `H_k` at sparsity `k`, at the dual point of the model `(w, b)`: `alpha_i = l'(w.x_i + b)`
    /// projected onto `F` (Thm 1(b)), written to `alpha`. Feasible, so it certifies any model; the lower
    /// bound of every primal solver's certificate.
    pub fn dual_of_model(
        &self,
        k: usize,
        w: &[f64],
        b: f64,
        alpha: &mut Vec<f64>,
        scratch: &mut DualScratch,
    ) -> f64 {
        dual_of_primal(self.data, &self.loss, w, b, self.intercept, alpha);
        dual_value(self.data, &self.loss, self.lambda, k, alpha, scratch)
    }
}

/// How the dual solvers choose their step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StepRule {
    /// Default. Stochastic dual coordinate ascent on the block: each dual maximises `D` along its own
    /// axis in turn (closed form for squared, Huber and hinge, safeguarded Newton for logistic), a row
    /// never visited starting from `P_F(l'(w.x_i + b))`; the block's change is halved until `D` does
    /// not decrease (see [`sdiht`]'s module docs for the derivation).
    Coordinate,
    /// Each dual coordinate moves by a fraction `s` of its Newton step
    /// `(x_i.w + b - l*'(alpha_i)) / (l*''(alpha_i) + ||x_i||^2 / (lambda N))` (exact coordinate ascent for
    /// quadratic conjugates), and `s` is found by backtracking on `D`: halved until the block update does
    /// not decrease the dual, doubled (up to 1) after a first-try success.
    Adaptive,
    /// The paper's schedule (Thm 4/5 with `sigma_min = 0`, Remark 3): `eta_t = m N / (mu (t+1))` for a
    /// `1/mu`-smooth loss.
    Theory,
    /// A fixed `eta` in the paper's units (`alpha += eta g`, `g = (x.w - l*'(alpha)) / N`).
    Constant(f64),
}

/// The model part of a solver's state.
#[derive(Debug, Clone, Copy)]
pub struct ModelView<'a> {
    /// Dense weights of length `d`, with at most `k` nonzeros.
    pub weights: &'a [f64],
    /// Ascending indices of the nonzero weights.
    pub support: &'a [u32],
    pub intercept: f64,
}

/// A dual starting point carried from one fit to the next: continuation along a lambda grid, or a
/// refit on more rows. The duals keep their meaning across lambdas (`alpha_i` estimates `l'(u_i)`,
/// Thm 1(b)), so the next fit starts near its optimum instead of at zero.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WarmStart {
    /// One dual per row of the problem it is given to.
    pub alpha: Vec<f64>,
    /// Rows whose dual starts from the model's margin when first visited (rows the previous fit did
    /// not have); empty means none.
    pub fresh: Vec<bool>,
    pub intercept: f64,
}

/// One algorithm, advanced one epoch at a time by [`driver::run`].
pub trait Solver<S: SampleSet> {
    /// The name reported in traces and model files (`diht`, `sdiht`, `iht`, `htp`, ...).
    fn name(&self) -> &'static str;
    /// One epoch: one pass of the algorithm's main loop (for SDIHT, `m` block updates).
    fn epoch(&mut self, problem: &Problem<S>);
    /// The current model.
    fn model(&self) -> ModelView<'_>;
    /// `P(model)`, the best dual value the solver can show, and the gap (computed from scratch).
    fn certificate(&mut self, problem: &Problem<S>) -> Certificate;
    /// The solver's dual state to start another fit from (`None`: it keeps no duals).
    fn warm_state(&self) -> Option<WarmStart> {
        None
    }
    /// Starts from `start`, whose `alpha` has one entry per row of `problem`; `false` (and no change)
    /// when the solver keeps no duals or `start` does not fit the problem.
    fn warm_start(&mut self, _problem: &Problem<S>, _start: &WarmStart) -> bool {
        false
    }
    /// Has `spread` walk the chunks of the solver's certificate (`objective::CertificateScratch::spread`);
    /// a solver without a chunked certificate ignores it.
    fn spread_certificate(&mut self, _spread: std::sync::Arc<dyn spread::Spread>) {}
}

#[cfg(test)]
mod tests;
