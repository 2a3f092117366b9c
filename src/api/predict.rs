//! `POST /v1/predict`: a learner's predictions for a body of samples, or a multi-class learner's
//! classes and scores ([`super::multiclass`]); with ids, the samples are kept for a late label
//! ([`super::labels`]).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::{Extension, Json};
use serde_json::{json, Value};

use super::{labels, multiclass, openapi, ApiError, AppState, BodyLimit};
use crate::ingest::source::http::HttpSource;

#[derive(serde::Deserialize)]
pub(super) struct PredictQuery {
    learner: Option<String>,
    /// Keep every sample for a late label, making an id for each without one.
    #[serde(default)]
    remember: bool,
}

/// Predictions of a learner's current model; labels are optional and unknown feature names are ignored.
#[utoipa::path(post, path = "/v1/predict", tag = "models",
    params(("learner" = Option<String>, Query, description = "a learner's name; the primary learner if absent"),
           ("remember" = Option<bool>, Query, description = "keep every sample for a late label, making an id for each without one")),
    request_body(description = "Samples to predict, labels optional", content(
        (String = "text/plain"),
        (Vec<openapi::SampleObject> = "application/json"),
        (Vec<openapi::SampleObject> = "application/x-ndjson"),
    )),
    responses(
        (status = 200, description = "One prediction per sample, in order", body = openapi::Predictions),
        (status = 400, description = "An invalid sample (its `line`) or an unreadable body; nothing from the body is kept", body = openapi::ErrorBody),
        (status = 413, description = "Body over `server.body_limit_bytes`", body = openapi::ErrorBody),
        (status = 415, description = "Content-Type not one of the three formats", body = openapi::ErrorBody),
        openapi::ReadAuth,
        (status = 404, description = "No learner has this name", body = openapi::ErrorBody),
        (status = 503, description = "The learner has not published yet", body = openapi::ErrorBody),
    ),
    security(("bearer" = ["read"])),
)]
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
