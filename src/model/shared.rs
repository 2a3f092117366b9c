//! The shared-support multi-class model file (`thresher-multiclass/2`, strategy `"softmax"`): one
//! support of at most k features for all the classes, each support feature with one weight per
//! class, an intercept per class, and the certificate of the multinomial logistic (softmax) problem
//! it was fitted to (`fit --multiclass softmax`; `docs/multiclass.md`). A sample's class
//! probabilities are `softmax(W^T x + b)`; its class the most probable (ties: the first listed).
//! `thresher-multiclass/1` (one-vs-rest) is [`super::multiclass::MulticlassModel`].

use serde::{Deserialize, Serialize};

use super::{Convergence, LambdaAuto, ModelError};
use crate::sample::Row;
use crate::solver::Certificate;

/// The format tag of a shared-support model file.
pub const SHARED_FORMAT: &str = "thresher-multiclass/2";

/// The most classes a multi-class model (this one or one-vs-rest) may hold: more is a mistake (a
/// regression target read as classes) rather than a task, and one-vs-rest fits each class whole.
pub const MAX_CLASSES: usize = 1000;

/// The strategy of a shared-support model: multinomial logistic regression.
pub const SOFTMAX: &str = "softmax";

/// A shared-support softmax model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedModel {
    pub format: String,
    pub strategy: String,
    /// The class labels as the training file wrote them (integers), ascending.
    pub classes: Vec<f64>,
    /// The solver that fitted it (`softmax-sdiht`).
    pub solver: String,
    pub k: usize,
    pub lambda: f64,
    /// Ascending feature indices: the shared support (at most `k`).
    pub support: Vec<u32>,
    /// One row per support feature, each with one weight per class (parallel to `classes`).
    pub weights: Vec<Vec<f64>>,
    /// One intercept per class (all zero when fitted without one).
    pub intercepts: Vec<f64>,
    pub certificate: Certificate,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub convergence: Option<Convergence>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lambda_auto: Option<LambdaAuto>,
    /// What the polish did: `"improved"` (Newton on the support's weights and the intercepts lowered
    /// `P`; the certificate's primal is the polished model's), `"kept"` (it did not), `"skipped"`
    /// (`--no-polish`, or more variables than it takes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub polish: Option<String>,
}

impl SharedModel {
    pub fn from_json(text: &str) -> Result<Self, ModelError> {
        let m: SharedModel = serde_json::from_str(text)?;
        m.validate()?;
        Ok(m)
    }

    pub fn validate(&self) -> Result<(), ModelError> {
        if self.format != SHARED_FORMAT {
            return Err(ModelError::Format {
                found: self.format.clone(),
            });
        }
        if self.strategy != SOFTMAX {
            return Err(ModelError::Inconsistent(
                "unknown shared-support strategy (this build reads \"softmax\")",
            ));
        }
        let c = self.classes.len();
        if !(2..=MAX_CLASSES).contains(&c) {
            return Err(ModelError::Inconsistent(
                "a multi-class model holds 2 to 1000 classes",
            ));
        }
        if self
            .classes
            .windows(2)
            .any(|w| w[0].partial_cmp(&w[1]) != Some(std::cmp::Ordering::Less))
            || self
                .classes
                .iter()
                .any(|c| !c.is_finite() || c.fract() != 0.0)
        {
            return Err(ModelError::Inconsistent(
                "classes are not distinct ascending integers",
            ));
        }
        if self.support.len() > self.k || self.support.len() != self.weights.len() {
            return Err(ModelError::Inconsistent(
                "the support holds more than k features or differs from the weights in length",
            ));
        }
        if self.support.windows(2).any(|w| w[0] >= w[1]) {
            return Err(ModelError::Inconsistent("the support is not ascending"));
        }
        if self.weights.iter().any(|r| r.len() != c) || self.intercepts.len() != c {
            return Err(ModelError::Inconsistent(
                "a weight row or the intercepts do not have one entry per class",
            ));
        }
        if self
            .weights
            .iter()
            .flatten()
            .chain(&self.intercepts)
            .any(|v| !v.is_finite())
            || !(self.lambda.is_finite() && self.lambda > 0.0)
        {
            return Err(ModelError::Inconsistent(
                "a weight, intercept or lambda is not finite",
            ));
        }
        Ok(())
    }

    /// Every class's score `W_c.x + b_c`, parallel to `classes`.
    pub fn scores(&self, row: Row<'_>) -> Vec<f64> {
        let mut scores = self.intercepts.clone();
        let (mut a, mut b) = (0, 0);
        while a < row.indices.len() && b < self.support.len() {
            match row.indices[a].cmp(&self.support[b]) {
                std::cmp::Ordering::Less => a += 1,
                std::cmp::Ordering::Greater => b += 1,
                std::cmp::Ordering::Equal => {
                    for (s, w) in scores.iter_mut().zip(&self.weights[b]) {
                        *s += row.values[a] * w;
                    }
                    a += 1;
                    b += 1;
                }
            }
        }
        scores
    }

    /// The class probabilities `softmax(W^T x + b)`, parallel to `classes`.
    pub fn probabilities(&self, row: Row<'_>) -> Vec<f64> {
        let scores = self.scores(row);
        let top = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let exp: Vec<f64> = scores.iter().map(|s| (s - top).exp()).collect();
        let total: f64 = exp.iter().sum();
        exp.iter().map(|e| e / total).collect()
    }

    /// The most probable class (the first on a tie).
    pub fn predict(&self, row: Row<'_>) -> f64 {
        let mut best = (f64::NEG_INFINITY, self.classes[0]);
        for (class, score) in self.classes.iter().zip(self.scores(row)) {
            if score > best.0 {
                best = (score, *class);
            }
        }
        best.1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::Sample;

    fn model() -> SharedModel {
        SharedModel {
            format: SHARED_FORMAT.into(),
            strategy: SOFTMAX.into(),
            classes: vec![0.0, 1.0, 5.0],
            solver: "softmax-sdiht".into(),
            k: 2,
            lambda: 0.1,
            support: vec![1, 4],
            weights: vec![vec![1.0, -1.0, 0.0], vec![0.0, 0.0, 2.0]],
            intercepts: vec![0.0, 0.5, -0.5],
            certificate: Certificate::new(0.5, 0.4, 10),
            convergence: None,
            lambda_auto: None,
            polish: None,
        }
    }

    #[test]
    fn scores_probabilities_and_the_class() {
        let m = model();
        let x = Sample::new(vec![0, 1, 4], vec![9.0, 2.0, 1.0], 0.0, None).unwrap();
        assert_eq!(m.scores(x.row()), vec![2.0, -1.5, 1.5]);
        let p = m.probabilities(x.row());
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-15);
        assert!(p[0] > p[2] && p[2] > p[1]);
        assert_eq!(m.predict(x.row()), 0.0);
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(SharedModel::from_json(&text).unwrap(), m);
    }

    #[test]
    fn inconsistent_files_are_refused() {
        let bad = |f: &dyn Fn(&mut SharedModel)| {
            let mut m = model();
            f(&mut m);
            SharedModel::from_json(&serde_json::to_string(&m).unwrap()).is_err()
        };
        assert!(bad(&|m| m.support = vec![4, 1]));
        assert!(bad(&|m| m.k = 1));
        assert!(bad(&|m| m.weights[0].pop().map(|_| ()).unwrap_or(())));
        assert!(bad(&|m| m.intercepts.push(0.0)));
        assert!(bad(&|m| m.classes = vec![0.0, 2.0, 1.0]));
        assert!(bad(&|m| m.strategy = "one-vs-rest".into()));
        assert!(bad(&|m| m.format = "thresher-multiclass/1".into()));
    }
}
