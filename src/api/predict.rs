//! `POST /v1/predict`: a learner's predictions for a body of samples, or a multi-class learner's
//! classes and scores ([`super::multiclass`]); with ids, the samples are kept for a late label
//! ([`super::labels`]).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::{Extension, Json};
use serde_json::{json, Value};

use super::{labels, multiclass, ApiError, AppState, BodyLimit};
use crate::ingest::source::http::HttpSource;

#[derive(serde::Deserialize)]
pub(super) struct PredictQuery {
    learner: Option<String>,
    /// Keep every sample for a late label, making an id for each without one.
    #[serde(default)]
    remember: bool,
}

/// Predictions of a learner's current model, or a multi-class learner's classes. Its OpenAPI
/// description is [`super::openapi`]'s `predict_doc` (the document names this module's route, this
/// module does not name the document: no file cycle).
pub(super) async fn predict(
    State(state): State<Arc<AppState>>,
    Query(q): Query<PredictQuery>,
    Extension(BodyLimit(limit)): Extension<BodyLimit>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let format = HttpSource::format(&headers)?;
    let mut body = state.ingest.read(&headers, body, limit, format).await?;
    let target = multiclass::find_target(&state, q.learner.as_deref())?;
    let ids = labels::ids_of(&state, format, &mut body, q.remember)?;
    // The rows hold their reservation of the in-flight sample budget until the answer is built.
    let (samples, _claim, _reserved) = state.ingest.parse(format, body, true).await?;
    let (s, mut out) = match target {
        multiclass::Target::Cell(cell) => {
            let s = cell.get().ok_or(ApiError::NoModel)?;
            let predictions: Vec<f64> = samples.rows().map(|x| s.model.predict(x)).collect();
            let out = json!({"predictions": predictions, "model_version": s.version, "learner": s.learner});
            (s, out)
        }
        multiclass::Target::Group(g) => {
            let snaps = multiclass::snapshots(g)?;
            let out = multiclass::predict_json(g, &snaps, &samples);
            (snaps[0].clone(), out)
        }
    };
    if let Some(ids) = ids {
        // The store keeps every learner's served score (each class's, for a multi-class learner);
        // the answer's `scores` stay the ones it was given.
        let scores = out.get("scores").cloned();
        labels::remember(&state, &samples, ids, q.remember, &s, &mut out)?;
        if let Some(scores) = scores {
            out["scores"] = scores;
        }
    }
    Ok(Json(out))
}
