//! The model file, `thresher-model/1`: what `thresher fit` writes and the daemon serves.
//!
//! ```json
//! {"format": "thresher-model/1", "loss": "squared", "solver": "diht", "k": 100, "lambda": 0.01,
//!  "intercept": 0.0, "support": [0, 3, 17], "weights": [1.02, -0.5, 0.33],
//!  "certificate": {"primal": 0.51, "dual": 0.50, "gap": 0.01, "samples": 150}}
//! ```
//! `support` holds ascending feature indices exactly as in the input; `weights` is parallel to it.
//!
//! `convergence` (additive: absent in files written before it) says whether the model met its
//! tolerance and, if not, why it stopped ([`Convergence`]): `fit` writes it, the daemon publishes it.
//!
//! [`multiclass`] holds `thresher-multiclass/1`: one such model per class (`fit --multiclass ovr`).

pub mod multiclass;
pub mod shared;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::loss::LossKind;
use crate::sample::Row;
use crate::solver::polish::PolishRecord;
use crate::solver::Certificate;

pub const FORMAT: &str = "thresher-model/1";

/// A k-sparse linear model with the certificate it was published with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Model {
    pub format: String,
    pub loss: LossKind,
    /// Huber smoothing, for `loss = "huber"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gamma: Option<f64>,
    pub solver: String,
    pub k: usize,
    pub lambda: f64,
    pub intercept: f64,
    pub support: Vec<u32>,
    pub weights: Vec<f64>,
    pub certificate: Certificate,
    /// Best-subset models (`solver = "subset"`): the l0, l1, l2 strengths in the paper's conventions
    /// (sum of 1/2-squared losses, `lambda2` without 1/2, on unit-norm columns). Absent for k-sparse models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lambda0: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lambda1: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lambda2: Option<f64>,
    /// How `lambda` was chosen when it was `"auto"`: the grid, the member in use, and each member's
    /// loss by which it was chosen. Absent for a lambda the user set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lambda_auto: Option<LambdaAuto>,
    /// A cluster's global model (`nats.global_model`): the cut whose certificate this is, over the
    /// union of the listed nodes' windows. Absent for a node's own model and for `fit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterCut>,
    /// Whether the certificate met the tolerance, and if not why the run stopped (or the learner
    /// idles). Absent in model files written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub convergence: Option<Convergence>,
    /// `fit`: what polishing the search's model on its support did ([`crate::solver::polish`]).
    /// Absent for the daemon's models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub polish: Option<PolishRecord>,
    /// `fit --standardize`: the problem was solved on scaled columns. Absent when it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standardize: Option<Standardized>,
}

/// How a model solved on scaled columns relates to its file (`fit --standardize`).
///
/// Each column `j` was divided by its scale `s_j` (its root mean square over the training rows; never
/// centred, so zeros stay zeros) and the problem solved on the scaled columns. `weights` are in the
/// original units (`w_j = w'_j / s_j`), so `score` and `thresher predict` read raw features. The
/// `certificate` is of the problem that was solved, written in original units
/// `P(w, b) = (1/N) sum_i c_i l(x_i.w + b, y_i) + (lambda/2) sum_j (s_j w_j)^2`: a ridge penalty
/// weighted by the scales, with `lambda` as the file gives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Standardized {
    /// How the scales were computed: `"rms"`.
    pub scaling: String,
    /// The problem the certificate is of: `"scaled"` (the penalty above).
    pub certified: String,
    /// `s_j` of each support feature, parallel to `support`.
    pub scales: Vec<f64>,
}

/// Whether a model converged: its relative gap `(P - D) / max(1, |P|)` is at most `tol` (`fit --tol`,
/// default 1e-6; the daemon's `[[learner]] tol`). The k-sparse problem is not convex, so its gap need
/// not close: a model that did not converge is still the best certified one, and `relative_gap` says
/// how far from the optimum it can be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Convergence {
    /// `relative_gap <= tol`.
    pub converged: bool,
    /// Why the run stopped: `converged`, `stalled` (neither the primal nor the gap improved for
    /// `patience` certified points; the daemon: an idle learner after its idle epochs), `max_epochs`,
    /// `time_budget`, `diverged`; the daemon also `running` (the learner is still stepping or
    /// samples arrive).
    pub reason: String,
    pub relative_gap: f64,
    pub tol: f64,
    /// The best certified iterate's objective was above the empty model's, so the model served is
    /// `w = 0` (with its intercept's best value for `w = 0` in the daemon), certified against the same
    /// dual.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub empty_model: bool,
}

impl Convergence {
    /// The record of a model with `certificate`, stopped for `reason`, against `tol`.
    pub fn new(
        certificate: &Certificate,
        reason: &str,
        tol: f64,
        empty_model: bool,
    ) -> Convergence {
        let relative_gap = certificate.relative_gap();
        let converged = relative_gap <= tol;
        Convergence {
            converged,
            reason: if converged { "converged" } else { reason }.to_string(),
            relative_gap,
            tol,
            empty_model,
        }
    }
}

/// The cut a global model was certified on (`docs/cluster.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterCut {
    /// The cut's number: the proposer's clock in milliseconds since the Unix epoch when it proposed.
    pub cut: u64,
    /// The node whose model `(w, b)` the cut certifies.
    pub proposer: String,
    /// The nodes whose windows the certificate covers, in name order.
    pub nodes: Vec<String>,
    /// Samples in each of those windows at the cut (parallel to `nodes`).
    pub samples: Vec<usize>,
}

/// The record of an automatic lambda (`lambda = "auto"` in the daemon, `fit --lambda auto`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LambdaAuto {
    /// The lambdas tried, largest first.
    pub grid: Vec<f64>,
    /// Index in `grid` of the lambda in use (`lambda` is `grid[live]`).
    pub live: usize,
    /// Times the daemon changed the member it serves (0 for `fit`).
    pub switches: u64,
    /// Each member's loss by `criterion`, parallel to `grid`: `"holdout"` (mean loss of the member's
    /// current model on held-out samples: `fit`, and the daemon by default) or `"progressive"` (the
    /// daemon's exponentially weighted progressive-validation loss).
    pub losses: Vec<f64>,
    pub criterion: String,
    /// The daemon: each member's exponentially weighted progressive-validation loss, whatever ranks
    /// them (empty for `fit`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub progressive: Vec<f64>,
    /// Criterion `"holdout"`: the held-out samples `losses` were measured on: `fit`'s held-out part, or
    /// the daemon's held-out ring at this certificate (at most a fifth of the window; the members are
    /// scored once it holds 50).
    #[serde(default)]
    pub held_out: u64,
    /// The daemon, criterion `"holdout"`: held-out samples dropped from its full ring (the oldest
    /// first) since it started; 0 for `fit`.
    #[serde(default)]
    pub held_out_dropped: u64,
    /// `fit`: how the grid was ranked, `"holdout"` (one held-out part) or `"cv"` (`folds`-fold
    /// cross-validation, every sample held out once); absent in the daemon's record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<String>,
    /// `fit`, `validation = "cv"`: the number of folds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folds: Option<u64>,
    /// The lambdas tried past the configured grid's ends because its best lambda lay at one (they
    /// are in `grid` too); empty when the grid as configured held its minimum.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extended: Vec<f64>,
    /// `fit`: which start the final refit on all the data kept — the chosen member's duals or zero
    /// duals — and both runs' primal after the polish (the lower is kept); absent in the daemon's record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refit: Option<RefitRecord>,
}

/// Where `fit --lambda auto`'s refit started from: the grid member's duals (`warm`) or zero (`cold`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RefitStart {
    Warm,
    Cold,
}

impl RefitStart {
    pub fn as_str(self) -> &'static str {
        match self {
            RefitStart::Warm => "warm",
            RefitStart::Cold => "cold",
        }
    }
}

/// The two refits of `fit --lambda auto` and the one kept ([`LambdaAuto::refit`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RefitRecord {
    pub kept: RefitStart,
    /// `P` of the refit from the chosen member's duals, after the polish.
    pub warm_primal: f64,
    /// `P` of the refit from zero duals, after the polish.
    pub cold_primal: f64,
}

#[derive(Debug, Error)]
pub enum ModelError {
    #[error("not a thresher model: {0}")]
    Parse(#[from] serde_json::Error),
    #[error("unsupported model format {found:?} (this build reads {FORMAT:?})")]
    Format { found: String },
    #[error("model is inconsistent: {0}")]
    Inconsistent(&'static str),
    #[error("cannot access model file: {0}")]
    Io(#[from] std::io::Error),
}

impl Model {
    /// Builds the model file from a sparse model: a run's best one, or a solver's current one
    /// ([`crate::solver::driver::SparseModel::from_view`]).
    pub fn from_sparse(
        model: &crate::solver::driver::SparseModel,
        loss: LossKind,
        gamma: Option<f64>,
        solver: &str,
        k: usize,
        lambda: f64,
        certificate: Certificate,
    ) -> Model {
        Model {
            format: FORMAT.to_string(),
            loss,
            gamma,
            solver: solver.to_string(),
            k,
            lambda,
            intercept: model.intercept,
            support: model.support.clone(),
            weights: model.weights.clone(),
            certificate,
            lambda0: None,
            lambda1: None,
            lambda2: None,
            lambda_auto: None,
            cluster: None,
            convergence: None,
            polish: None,
            standardize: None,
        }
    }

    pub fn from_json(text: &str) -> Result<Model, ModelError> {
        let model: Model = serde_json::from_str(text)?;
        model.validate()?;
        Ok(model)
    }

    pub fn load(path: &std::path::Path) -> Result<Model, ModelError> {
        Model::from_json(&std::fs::read_to_string(path)?)
    }

    pub(crate) fn validate(&self) -> Result<(), ModelError> {
        if self.format != FORMAT {
            return Err(ModelError::Format {
                found: self.format.clone(),
            });
        }
        if self.support.len() != self.weights.len() {
            return Err(ModelError::Inconsistent(
                "support and weights differ in length",
            ));
        }
        if self.support.windows(2).any(|w| w[0] >= w[1]) {
            return Err(ModelError::Inconsistent(
                "support is not strictly ascending",
            ));
        }
        if !self.weights.iter().all(|w| w.is_finite()) || !self.intercept.is_finite() {
            return Err(ModelError::Inconsistent("non-finite weight"));
        }
        if let Some(c) = &self.convergence {
            if !(c.relative_gap.is_finite() && c.tol.is_finite()) {
                return Err(ModelError::Inconsistent(
                    "convergence: non-finite relative gap or tolerance",
                ));
            }
        }
        if let Some(s) = &self.standardize {
            if s.scales.len() != self.support.len()
                || !s.scales.iter().all(|s| s.is_finite() && *s > 0.0)
            {
                return Err(ModelError::Inconsistent(
                    "standardize: scales must be finite, > 0 and parallel to support",
                ));
            }
        }
        if let Some(a) = &self.lambda_auto {
            if a.live >= a.grid.len() || a.losses.len() != a.grid.len() {
                return Err(ModelError::Inconsistent(
                    "lambda_auto: live or losses do not match the grid",
                ));
            }
        }
        Ok(())
    }

    /// The raw score `w.x + b` (sparse-sparse merge of two ascending index lists).
    pub fn score(&self, row: Row<'_>) -> f64 {
        crate::sparse::merge_dot(
            self.intercept,
            row.indices,
            row.values,
            &self.support,
            &self.weights,
        )
    }

    /// The prediction: the score for squared loss, the class (`-1` or `+1`) for classification losses.
    pub fn predict(&self, row: Row<'_>) -> f64 {
        let s = self.score(row);
        match self.loss {
            LossKind::Squared => s,
            _ => {
                if s >= 0.0 {
                    1.0
                } else {
                    -1.0
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::Sample;
    use crate::solver::driver::SparseModel;

    fn model() -> Model {
        let sparse = SparseModel {
            support: vec![1, 4],
            weights: vec![2.0, -1.0],
            intercept: 0.5,
        };
        let certificate = Certificate::new(1.0, 0.9, 3);
        Model::from_sparse(
            &sparse,
            LossKind::Squared,
            None,
            "diht",
            2,
            0.1,
            certificate,
        )
    }

    #[test]
    fn json_round_trip_and_schema() {
        let m = model();
        let text = serde_json::to_string(&m).unwrap();
        for key in [
            "\"format\":\"thresher-model/1\"",
            "\"support\":[1,4]",
            "\"certificate\":{",
            "\"gap\":",
        ] {
            assert!(text.contains(key), "{text}");
        }
        assert_eq!(Model::from_json(&text).unwrap(), m);
        let bad = text.replace("thresher-model/1", "thresher-model/9");
        assert!(matches!(
            Model::from_json(&bad),
            Err(ModelError::Format { .. })
        ));
        assert!(Model::from_json("{}").is_err());
    }

    /// A regression test: without serde_json's `float_roundtrip`, `7.771561172376097e-16` (a cluster
    /// cut's gap) read back one unit in the last place higher, so a node served the same cut twice
    /// with two certificates. Every number of a model now reads back bit for bit.
    #[test]
    fn every_number_reads_back_bit_for_bit() {
        let mut m = model();
        m.weights = vec![7.771561172376097e-16, -0.5736690596732982];
        m.certificate = Certificate::new(0.573669059673299, 0.5736690596732982, 1400);
        m.certificate.gap = 7.771561172376097e-16;
        m.intercept = 0.1 + 0.2;
        let back = Model::from_json(&serde_json::to_string(&m).unwrap()).unwrap();
        let bits = |m: &Model| {
            let c = m.certificate;
            let mut v: Vec<u64> = m.weights.iter().map(|w| w.to_bits()).collect();
            v.extend([c.primal, c.dual, c.gap, m.intercept].map(f64::to_bits));
            v
        };
        assert_eq!(bits(&back), bits(&m));
    }

    /// `convergence` is additive: a file without it reads as `None`; with it, it round-trips, `reason`
    /// says `converged` exactly when the relative gap meets `tol`, and `empty_model` shows only when set.
    #[test]
    fn convergence_is_additive_and_says_why() {
        let mut m = model();
        let text = serde_json::to_string(&m).unwrap();
        assert!(!text.contains("convergence"), "{text}");
        assert_eq!(Model::from_json(&text).unwrap().convergence, None);
        let c = Convergence::new(&m.certificate, "stalled", 1e-6, false);
        assert_eq!((c.converged, c.reason.as_str()), (false, "stalled"));
        assert!((c.relative_gap - 0.1).abs() < 1e-12);
        assert!(Convergence::new(&m.certificate, "stalled", 0.2, false).converged);
        assert_eq!(
            Convergence::new(&m.certificate, "stalled", 0.2, false).reason,
            "converged"
        );
        m.convergence = Some(c);
        let text = serde_json::to_string(&m).unwrap();
        assert!(text.contains("\"reason\":\"stalled\"") && !text.contains("empty_model"));
        assert_eq!(Model::from_json(&text).unwrap(), m);
        m.convergence.as_mut().unwrap().empty_model = true;
        let text = serde_json::to_string(&m).unwrap();
        assert!(text.contains("\"empty_model\":true"), "{text}");
        assert_eq!(Model::from_json(&text).unwrap(), m);
    }

    #[test]
    fn scores_sparse_rows() {
        let m = model();
        let s = Sample::new(vec![0, 1, 4, 9], vec![5.0, 1.0, 2.0, 7.0], 0.0, None).unwrap();
        assert_eq!(m.score(s.row()), 0.5 + 2.0 - 2.0);
    }
}
