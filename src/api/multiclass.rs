//! Multi-class learners over HTTP: a `[[learner]]` table with `classes = C` runs as `C` binary
//! learners (`NAME-0` .. `NAME-{C-1}`, each its class against the rest), and this module serves them
//! as the one model they make: `GET /v1/models/NAME` (and `/v1/model` when it is the first table) and
//! `POST /v1/predict?learner=NAME`, which answers each sample's class with every class's score.
//!
//! The group's model is the `thresher-multiclass/1` file `fit --multiclass ovr` writes (what
//! `thresher predict --model` reads), made of the classes' latest published models. Its certificate is
//! the sum of theirs: the one-vs-rest objective is the sum of the classes' objectives, which share no
//! variable, so the summed gap bounds the whole model's suboptimality (and each class's).

use std::sync::Arc;

use serde_json::{json, Value};

use axum::response::{IntoResponse, Response};
use axum::Json;

use super::{find_cell, model_response, node_of, snapshot_json, ApiError, AppState};
use crate::config::Config;
use crate::learner::publish::{ModelCell, Snapshot};
use crate::model::multiclass::MulticlassModel;
use crate::sample::SampleBlock;

/// One multi-class learner: its name, its classes' cells in class order, and their names if the
/// config gives them.
pub struct Group {
    pub name: String,
    pub cells: Vec<Arc<ModelCell>>,
    pub names: Option<Arc<[String]>>,
}

impl Group {
    /// The classes as the API shows them: their names, or their indices `0..C`.
    fn classes(&self) -> Value {
        match &self.names {
            Some(names) => json!(names.as_ref()),
            None => json!((0..self.cells.len()).collect::<Vec<_>>()),
        }
    }

    /// Class `c` as the API shows it: its name, or its index.
    fn class(&self, c: usize) -> Value {
        match &self.names {
            Some(names) => json!(names[c]),
            None => json!(c),
        }
    }
}

/// The multi-class learners of `config`, over the learners' `cells` (in configuration order).
pub fn groups(config: &Config, cells: &[Arc<ModelCell>]) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for (learner, cell) in config.learners.iter().zip(cells) {
        let Some(of) = &learner.class else { continue };
        match groups.last_mut() {
            Some(g) if g.name == of.group => g.cells.push(cell.clone()),
            _ => groups.push(Group {
                name: of.group.clone(),
                cells: vec![cell.clone()],
                names: of.names.clone(),
            }),
        }
    }
    groups
}

/// What a request names: one learner, or a multi-class learner (its classes' learners). Unnamed,
/// the first table's: the first learner, or the multi-class learner it is a class of.
pub(super) enum Target<'a> {
    Cell(&'a Arc<ModelCell>),
    Group(&'a Group),
}

pub(super) fn find_target<'a>(
    state: &'a AppState,
    name: Option<&str>,
) -> Result<Target<'a>, ApiError> {
    let group = match name {
        None => state
            .groups
            .first()
            .filter(|g| Arc::ptr_eq(&g.cells[0], &state.cells[0])),
        Some(n) => state.groups.iter().find(|g| g.name == n),
    };
    match group {
        Some(g) => Ok(Target::Group(g)),
        None => find_cell(state, name).map(Target::Cell),
    }
}

/// A learner's model, or a multi-class learner's ([`group_json`]).
pub(super) fn target_response(state: &AppState, target: Target<'_>) -> Result<Response, ApiError> {
    match target {
        Target::Cell(cell) => model_response(state, cell),
        Target::Group(g) => Ok(Json(group_json(state, g)?).into_response()),
    }
}

/// The group's entry in `GET /v1/models`: its name and its classes' learners, in class order.
pub fn entry(group: &Group) -> Value {
    let members: Vec<&str> = group.cells.iter().map(|c| c.name.as_str()).collect();
    json!({"learner": group.name, "classes": group.classes(), "members": members})
}

/// The group's classes' latest snapshots, or 503 until every class has published.
pub fn snapshots(group: &Group) -> Result<Vec<Arc<Snapshot>>, ApiError> {
    group
        .cells
        .iter()
        .map(|c| c.get().ok_or(ApiError::NoModel))
        .collect()
}

/// The one-vs-rest model the classes' snapshots make.
pub fn model_of(snapshots: &[Arc<Snapshot>]) -> MulticlassModel {
    let classes = (0..snapshots.len()).map(|c| c as f64).collect();
    let models = snapshots.iter().map(|s| s.model.clone()).collect();
    MulticlassModel::one_vs_rest(classes, models)
        .expect("the classes' published models are one loss, finite and ascending")
}

/// `GET /v1/models/NAME` of a multi-class learner: the model file, the summed certificate, and each
/// class's learner with its version, counters, events and support names.
pub fn group_json(state: &AppState, group: &Group) -> Result<Value, ApiError> {
    let snaps = snapshots(group)?;
    let model = model_of(&snaps);
    let (primal, dual) = snaps.iter().fold((0.0, 0.0), |(p, d), s| {
        (p + s.model.certificate.primal, d + s.model.certificate.dual)
    });
    let gap: f64 = snaps.iter().map(|s| s.model.certificate.gap).sum();
    let members: Vec<Value> = snaps
        .iter()
        .zip(&group.cells)
        .map(|(s, cell)| {
            let mut v = snapshot_json(s, &state.ingest.dictionary, node_of(state), cell);
            let o = v.as_object_mut().expect("a model is an object");
            // The class's weights are in `model`; the rest of its view (its support beside the
            // support's names) stays here.
            for key in ["weights", "intercept", "format"] {
                o.remove(key);
            }
            v
        })
        .collect();
    Ok(json!({
        "learner": group.name,
        "strategy": model.strategy,
        "classes": group.classes(),
        "certificate": {
            "primal": primal,
            "dual": dual,
            "gap": gap,
            "relative_gap": gap / primal.abs().max(1.0),
        },
        "samples_seen": snaps.iter().map(|s| s.samples_seen).min(),
        "versions": snaps.iter().map(|s| s.version).collect::<Vec<_>>(),
        "model": model,
        "members": members,
    }))
}

/// The answer of `POST /v1/predict` for a multi-class learner: each sample's class and every class's
/// score `w_c.x + b_c` (the class is the highest score's, the first on a tie).
pub fn predict_json(group: &Group, snaps: &[Arc<Snapshot>], samples: &SampleBlock) -> Value {
    let model = model_of(snaps);
    let scores: Vec<Vec<f64>> = samples.rows().map(|x| model.scores(x)).collect();
    // The model's labels are the indices `0..C`: shown as the API shows a class.
    let predictions: Vec<Value> = samples
        .rows()
        .map(|x| group.class(model.predict(x) as usize))
        .collect();
    json!({
        "predictions": predictions,
        "scores": scores,
        "classes": group.classes(),
        "learner": group.name,
        "model_versions": snaps.iter().map(|s| s.version).collect::<Vec<_>>(),
    })
}
