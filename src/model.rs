//! The model file, `thresher-model/1`: what `thresher fit` writes and the daemon serves.
//!
//! ```json
//! {"format": "thresher-model/1", "loss": "squared", "solver": "diht", "k": 100, "lambda": 0.01,
//!  "intercept": 0.0, "support": [0, 3, 17], "weights": [1.02, -0.5, 0.33],
//!  "certificate": {"primal": 0.51, "dual": 0.50, "gap": 0.01, "samples": 150}}
//! ```
//! `support` holds ascending feature indices exactly as in the input; `weights` is parallel to it.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::loss::LossKind;
use crate::sample::Row;
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

    fn validate(&self) -> Result<(), ModelError> {
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

    fn model() -> Model {
        Model {
            format: FORMAT.into(),
            loss: LossKind::Squared,
            gamma: None,
            solver: "diht".into(),
            k: 2,
            lambda: 0.1,
            intercept: 0.5,
            support: vec![1, 4],
            weights: vec![2.0, -1.0],
            certificate: Certificate::new(1.0, 0.9, 3),
            lambda0: None,
            lambda1: None,
            lambda2: None,
            lambda_auto: None,
            cluster: None,
        }
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

    #[test]
    fn scores_sparse_rows() {
        let m = model();
        let s = Sample::new(vec![0, 1, 4, 9], vec![5.0, 1.0, 2.0, 7.0], 0.0, None).unwrap();
        assert_eq!(m.score(s.row()), 0.5 + 2.0 - 2.0);
    }
}
