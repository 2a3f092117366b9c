//! Late labels over HTTP: the ids of `POST /v1/predict` (kept in the label store with the scores the
//! learners served) and `POST /v1/labels`, which joins labels to them and admits the samples like any
//! ingested batch ([`crate::ingest::labels`] has the store and the bodies).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::{Extension, Json};
use serde_json::{json, Value};

use super::{ApiError, AppState, BodyLimit};
use crate::ingest::batch::{check_magnitudes, BodyFormat, Claim};
use crate::ingest::labels::wire::{parse_labels, take_ids};
use crate::ingest::labels::{unix_ms, Missing, Stored};
use crate::ingest::source::http::{HttpSource, ReadBody};
use crate::ingest::{AdmitError, BodyError, Source};
use crate::learner::publish::Snapshot;
use crate::sample::{Sample, SampleBlock};

/// Numbers the ids this daemon makes (`POST /v1/predict?remember=true`).
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// An id for a sample predicted without one: the time in milliseconds and a counter of this process.
fn make_id() -> String {
    format!("t{}-{}", unix_ms(), NEXT_ID.fetch_add(1, Ordering::Relaxed))
}

/// Takes the ids out of a prediction body (rewriting it without them): `None` when no sample has one
/// and `remember` is off. Refused when the daemon keeps no store (`labels.capacity = 0`).
pub(super) fn ids_of(
    state: &AppState,
    format: BodyFormat,
    body: &mut ReadBody,
    remember: bool,
) -> Result<Option<Vec<Option<String>>>, ApiError> {
    let max = state.labels.config().id_max_bytes;
    let ids = match format {
        BodyFormat::Libsvm => None,
        _ => match take_ids(format, &body.joined(), max).map_err(ApiError::Invalid)? {
            Some((rest, ids)) => {
                body.replace(rest);
                Some(ids)
            }
            None => None,
        },
    };
    if (ids.is_some() || remember) && state.labels.config().capacity == 0 {
        return Err(ApiError::BadRequest(
            "labels.capacity is 0: this daemon keeps no predictions for late labels, so a sample may not carry an id".into(),
        ));
    }
    Ok(ids.or_else(|| remember.then(Vec::new)))
}

/// Keeps the samples with an id (made for those without one when `remember`) in the label store with
/// the score each learner serves for them now (`served` for the learner that answered), and adds `ids`
/// and `scores` (the answering learner's) to the response `out`.
pub(super) fn remember(
    state: &AppState,
    samples: &SampleBlock,
    mut ids: Vec<Option<String>>,
    remember: bool,
    served: &Snapshot,
    out: &mut Value,
) -> Result<(), ApiError> {
    ids.resize(samples.len(), None);
    if remember {
        for id in ids.iter_mut().filter(|id| id.is_none()) {
            *id = Some(make_id());
        }
    }
    let snapshots: Vec<Option<Arc<Snapshot>>> = state
        .cells
        .iter()
        .map(|c| (c.name != served.learner).then(|| c.get()).flatten())
        .collect();
    let mut stored = Vec::new();
    let mut scores = Vec::with_capacity(samples.len());
    for (i, id) in ids.iter().enumerate() {
        let row = samples.row(i);
        scores.push(served.model.score(row));
        let Some(id) = id else { continue };
        let served_all = state
            .cells
            .iter()
            .zip(&snapshots)
            .map(|(c, s)| match s {
                _ if c.name == served.learner => served.model.score(row),
                Some(s) => s.model.score(row),
                None => f64::NAN,
            })
            .collect();
        stored.push(Stored {
            id: id.clone(),
            at_ms: 0,
            indices: row.indices.to_vec(),
            values: row.values.to_vec(),
            served: served_all,
        });
    }
    state
        .labels
        .remember(stored)
        .map_err(|e| ApiError::LabelStore(e.to_string()))?;
    let o = out.as_object_mut().expect("a predictions object");
    o.insert("ids".into(), json!(ids));
    o.insert("scores".into(), json!(scores));
    Ok(())
}

/// Joins labels to the samples predicted with their ids, and learns them.
///
/// Each stored sample is learned through the same door as `POST /v1/samples` (the write-ahead log,
/// the bounded queue), with its label and weight, and its progressive loss is the loss of the score
/// each learner served before the label was known. Every item gets a `status`: `joined`, or why not
/// (`unknown`, `expired`, `evicted`, `duplicate`). A malformed item refuses the whole request (400,
/// naming it) and changes nothing; a refused admission (503, 413) puts the samples back. Its OpenAPI
/// description is [`super::openapi`]'s `labels_doc` (the document names this module's route, this
/// module does not name the document: no file cycle).
pub(super) async fn post_labels(
    State(state): State<Arc<AppState>>,
    Extension(BodyLimit(limit)): Extension<BodyLimit>,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let format = HttpSource::format(&headers)?;
    let body = state.ingest.read(&headers, body, limit, format).await?;
    let rules = &state.ingest.rules;
    let check = |label: f64, weight: Option<f64>| {
        rules.check_label(label)?;
        check_magnitudes(Some(label), weight, &[], &[], rules.max_abs_value)
            .map_err(|e| e.to_string())
    };
    let items = parse_labels(
        format,
        &body.joined(),
        state.labels.config().id_max_bytes,
        |name| rules.class_index(name),
        check,
    )
    .map_err(ApiError::Invalid)?;
    drop(body);
    let ids: Vec<&str> = items.iter().map(|i| i.id.as_str()).collect();
    let found = state.labels.take(&ids);
    let width = state.labels.learners().len();
    let mut block = SampleBlock::new();
    let mut served = Vec::new();
    let mut taken = Vec::new();
    let mut outcomes = Vec::with_capacity(items.len());
    for (item, found) in items.iter().zip(found) {
        match found {
            Ok(s) => {
                let sample =
                    Sample::new(s.indices.clone(), s.values.clone(), item.label, item.weight)
                        .expect("a stored sample and a checked label make a valid sample");
                block.push(&sample);
                served.extend_from_slice(&s.served);
                taken.push(s);
                outcomes.push(None);
            }
            Err(missing) => outcomes.push(Some(missing)),
        }
    }
    block.set_served(width, served);
    let joined = block.len();
    if joined > 0 {
        if let Err(e) = admit(&state, block).await {
            state.labels.put_back(taken);
            return Err(e);
        }
        let ids = taken.into_iter().map(|s| s.id).collect();
        if let Err(e) = state.labels.confirm(ids) {
            // Admitted and acknowledged: a restart before the next checkpoint may offer these ids again.
            tracing::error!(error = %e, "cannot journal labelled samples");
        }
    }
    state.labels.count(&outcomes);
    let results: Vec<Value> = items
        .iter()
        .zip(&outcomes)
        .map(|(i, o)| json!({"id": i.id, "status": o.map_or("joined", Missing::name)}))
        .collect();
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"joined": joined, "results": results})),
    ))
}

/// Admits the joined samples as one batch (refused whole: more than the sample budget is 413).
async fn admit(state: &Arc<AppState>, block: SampleBlock) -> Result<usize, ApiError> {
    let admission = state.ingest.admission.clone();
    let (_, budget) = admission.parse_ticket();
    if block.len() > budget {
        return Err(ApiError::Body(BodyError::OverBudget {
            what: "samples",
            key: "ingest.queue_samples",
            limit: budget,
        }));
    }
    let admitted = if admission.waits_for_fsync() {
        tokio::task::spawn_blocking(move || {
            admission.admit(block, Claim::default(), Source::Labels)
        })
        .await
        .unwrap_or(Err(AdmitError::ShuttingDown))
    } else {
        admission.admit(block, Claim::default(), Source::Labels)
    };
    Ok(admitted?)
}
