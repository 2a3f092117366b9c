//! The multi-class model file (`thresher-multiclass/1`): one k-sparse binary model per class, each
//! fitted to tell its class (`+1`) from all the others (`-1`), one-vs-rest as liblinear and Vowpal
//! Wabbit's `--oaa` do. A sample's class is the one whose model scores it highest (ties: the first
//! class listed). Every binary model is a whole [`Model`] with its own certificate, so each class's
//! distance from its optimum is proved as for a binary fit.

use serde::{Deserialize, Serialize};

use super::shared::{SharedModel, SHARED_FORMAT};
use super::{Model, ModelError};
use crate::loss::LossKind;
use crate::sample::Row;

/// The format tag of a multi-class model file.
pub const MULTICLASS_FORMAT: &str = "thresher-multiclass/1";

/// How the per-class models were fitted.
pub const ONE_VS_REST: &str = "one-vs-rest";

pub use super::shared::MAX_CLASSES;

/// A one-vs-rest model: `models[i]` separates `classes[i]` from the rest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MulticlassModel {
    pub format: String,
    pub strategy: String,
    /// The class labels as the training file wrote them (integers), ascending.
    pub classes: Vec<f64>,
    /// One binary model per class, parallel to `classes`.
    pub models: Vec<Model>,
}

impl MulticlassModel {
    /// A one-vs-rest model from its classes and their binary models.
    pub fn one_vs_rest(classes: Vec<f64>, models: Vec<Model>) -> Result<Self, ModelError> {
        let m = MulticlassModel {
            format: MULTICLASS_FORMAT.into(),
            strategy: ONE_VS_REST.into(),
            classes,
            models,
        };
        m.validate()?;
        Ok(m)
    }

    pub fn from_json(text: &str) -> Result<Self, ModelError> {
        let m: MulticlassModel = serde_json::from_str(text)?;
        m.validate()?;
        Ok(m)
    }

    fn validate(&self) -> Result<(), ModelError> {
        if self.format != MULTICLASS_FORMAT {
            return Err(ModelError::Format {
                found: self.format.clone(),
            });
        }
        if self.strategy != ONE_VS_REST {
            return Err(ModelError::Inconsistent(
                "unknown multi-class strategy (this build reads \"one-vs-rest\")",
            ));
        }
        if self.classes.len() < 2 || self.classes.len() > MAX_CLASSES {
            return Err(ModelError::Inconsistent(
                "a multi-class model holds 2 to 1000 classes",
            ));
        }
        if self.classes.len() != self.models.len() {
            return Err(ModelError::Inconsistent(
                "classes and models differ in length",
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
        for m in &self.models {
            m.validate()?;
            if m.loss == LossKind::Squared {
                return Err(ModelError::Inconsistent(
                    "a class model has the squared loss (classification losses only)",
                ));
            }
        }
        Ok(())
    }

    /// Every class's score `w_c.x + b_c`, parallel to `classes`.
    pub fn scores(&self, row: Row<'_>) -> Vec<f64> {
        self.models.iter().map(|m| m.score(row)).collect()
    }

    /// The class whose model scores `row` highest (the first such class on a tie).
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

/// What `thresher predict` reads: a binary or regression model, or a multi-class one (one-vs-rest,
/// or one support shared by all the classes).
#[derive(Debug, Clone)]
pub enum AnyModel {
    Single(Box<Model>),
    Multiclass(MulticlassModel),
    Shared(Box<SharedModel>),
}

impl AnyModel {
    /// Reads a model file of any of the formats (told apart by its `format` tag).
    pub fn load(path: &std::path::Path) -> Result<AnyModel, ModelError> {
        let text = std::fs::read_to_string(path)?;
        #[derive(Deserialize)]
        struct Tag {
            format: String,
        }
        match serde_json::from_str::<Tag>(&text) {
            Ok(tag) if tag.format == MULTICLASS_FORMAT => {
                Ok(AnyModel::Multiclass(MulticlassModel::from_json(&text)?))
            }
            Ok(tag) if tag.format == SHARED_FORMAT => {
                Ok(AnyModel::Shared(Box::new(SharedModel::from_json(&text)?)))
            }
            _ => Ok(AnyModel::Single(Box::new(Model::from_json(&text)?))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::Sample;

    fn binary(weight: f64, intercept: f64) -> Model {
        let mut m: Model = serde_json::from_value(serde_json::json!({
            "format": "thresher-model/1", "loss": "logistic", "solver": "diht", "k": 1,
            "lambda": 0.1, "intercept": intercept, "support": [0], "weights": [weight],
            "certificate": {"primal": 0.5, "dual": 0.4, "gap": 0.1, "samples": 3}
        }))
        .unwrap();
        m.validate().unwrap();
        m.intercept = intercept;
        m
    }

    #[test]
    fn the_highest_score_wins_and_ties_go_to_the_first_class() {
        let m = MulticlassModel::one_vs_rest(
            vec![0.0, 1.0, 2.0],
            vec![binary(-1.0, 0.0), binary(1.0, 0.0), binary(0.0, 0.5)],
        )
        .unwrap();
        let x = |v: f64| Sample::new(vec![0], vec![v], 0.0, None).unwrap();
        assert_eq!(m.predict(x(2.0).row()), 1.0);
        assert_eq!(m.predict(x(-2.0).row()), 0.0);
        assert_eq!(m.predict(x(0.1).row()), 2.0);
        assert_eq!(m.scores(x(0.5).row()), vec![-0.5, 0.5, 0.5]);
        assert_eq!(m.predict(x(0.5).row()), 1.0, "a tie goes to the first");
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(MulticlassModel::from_json(&text).unwrap(), m);
    }

    #[test]
    fn inconsistent_files_are_refused() {
        let ok = |classes: Vec<f64>, n: usize| {
            MulticlassModel::one_vs_rest(classes, vec![binary(1.0, 0.0); n]).is_ok()
        };
        assert!(ok(vec![0.0, 3.0], 2));
        assert!(!ok(vec![0.0], 1), "one class");
        assert!(!ok(vec![0.0, 1.0], 3), "lengths differ");
        assert!(!ok(vec![1.0, 0.0], 2), "not ascending");
        assert!(!ok(vec![0.0, 0.5], 2), "not integers");
        let mut m =
            MulticlassModel::one_vs_rest(vec![0.0, 1.0], vec![binary(1.0, 0.0); 2]).unwrap();
        m.strategy = "shared".into();
        assert!(MulticlassModel::from_json(&serde_json::to_string(&m).unwrap()).is_err());
    }
}
