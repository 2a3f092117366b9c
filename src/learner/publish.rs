//! Published models: immutable [`Snapshot`]s behind per-learner [`ModelCell`]s, refreshed every
//! `snapshot.interval_ms`.
//!
//! Readers (HTTP handlers) clone an `Arc<Snapshot>` (or its pre-rendered JSON body) out of a cell and
//! never wait on a solver. [`publish`] is called by each learner's own thread between steps, every
//! `snapshot.interval_ms`: it computes the model and its certificate exactly over the window
//! (`StreamingLearner::certify`), builds a new snapshot with the next version — only when the learner
//! changed since the last one, so an idle daemon keeps its version — swaps it into the cell and updates
//! the learner's metrics. Why on the learner's thread: the certificate is a few passes over the whole
//! window; computed by another thread it had to hold the learner's lock, stalling inserts and steps
//! while competing for the same two cores. A certified model holding a non-finite number is never
//! published: the previous snapshot stays, the fault is counted (`thresher_numeric_faults_total`) and
//! the learner is rebuilt from its own state made finite ([`super::recover_from_numeric_fault`]).
//! The daemon's checkpoint thread publishes the final snapshot once the learners have stopped.
//!
//! The publish gate (`publish.max_relative_gap`, [`ModelCell::with_gate`]) sits at the one place a
//! certified model becomes the served one: a model whose certificate's relative gap
//! `(P - D) / max(1, |P|)` is above the gate is withheld — the last model that passed stays in the
//! cell, the candidate's gap is kept beside it ([`Withheld`], shown with the served model) and counted
//! (`thresher_models_withheld_total`); the learner keeps learning, and its next certified model is
//! judged afresh.
//!
//! A cell with a drift test (`[drift]`) keeps its alarms ([`super::drift::DriftRecord`]): the model
//! JSON shows the count and the latest, and the next history point carries the latest alarm since the
//! point before.
//!
//! Each cell also keeps the scalars of its last `snapshot.history_points` snapshots ([`HistoryPoint`],
//! `GET /v1/history`, the status page): every publication appends one point, and a full ring drops its
//! oldest point, counted in `thresher_history_points_dropped_total`. The ring lives in memory only; a
//! restart begins it again with the restored snapshot.

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

use super::drift::{DriftAction, DriftEvent, DriftRecord};
use super::{recover_from_numeric_fault, SolverGauges, StreamingLearner};
use crate::metrics::Metrics;
use crate::model::Model;
use crate::sample::SampleSet;
use crate::sparse::support_changes;

/// One learner's published state. Immutable once built.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub learner: String,
    /// Increases by one with every published change (survives restarts through checkpoints).
    pub version: u64,
    pub samples_seen: u64,
    pub window_samples: usize,
    /// Unix time (seconds) the snapshot was taken.
    pub updated_at: f64,
    pub progressive_loss: f64,
    pub steps: u64,
    /// The learner's mutation counter this snapshot reflects.
    pub mutations: u64,
    pub support_changes_total: u64,
    pub model: Model,
}

impl Snapshot {
    /// Every number the snapshot holds is finite (what may be published or checkpointed).
    pub fn is_finite(&self) -> bool {
        let m = &self.model;
        let c = &m.certificate;
        self.progressive_loss.is_finite()
            && self.updated_at.is_finite()
            && m.intercept.is_finite()
            && m.lambda.is_finite()
            && m.weights.iter().all(|w| w.is_finite())
            && [c.primal, c.dual, c.gap].iter().all(|v| v.is_finite())
            && [m.gamma, m.lambda0, m.lambda1, m.lambda2]
                .iter()
                .flatten()
                .all(|v| v.is_finite())
    }

    /// Seconds since the snapshot was taken.
    pub fn age_seconds(&self) -> f64 {
        (unix_now() - self.updated_at).max(0.0)
    }
}

pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Unix seconds as RFC 3339 UTC with milliseconds (`2026-11-21T17:40:00.123Z`), rounded to the
/// millisecond. A time outside the years 0000–9999, which RFC 3339 cannot write, comes back as the
/// number of seconds itself.
pub fn rfc3339(unix: f64) -> String {
    use time::format_description::well_known::iso8601::{Config, EncodedConfig, TimePrecision};
    use time::format_description::well_known::Iso8601;
    const MILLIS: EncodedConfig = Config::DEFAULT
        .set_time_precision(TimePrecision::Second {
            decimal_digits: std::num::NonZeroU8::new(3),
        })
        .encode();
    let nanos = i128::from((unix * 1000.0).round() as i64) * 1_000_000;
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| t.format(&Iso8601::<MILLIS>).ok())
        .unwrap_or_else(|| unix.to_string())
}

/// Points a history ring keeps unless `snapshot.history_points` says otherwise.
pub const DEFAULT_HISTORY_POINTS: usize = 1000;

/// The scalars of one published snapshot, as `GET /v1/history` serves them.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct HistoryPoint {
    /// The snapshot's version.
    pub version: u64,
    /// Unix time (seconds) the snapshot was taken.
    pub updated_at: f64,
    /// `P(w)` over the window.
    pub primal: f64,
    /// `D(alpha)` over the window.
    pub dual: f64,
    /// `P - D`.
    pub gap: f64,
    /// Nonzero weights.
    pub support_size: usize,
    /// Features that entered or left the support since the previous snapshot.
    pub support_changes: u64,
    /// Mean loss of each sample before the model learned from it.
    pub progressive_loss: f64,
    /// Samples this learner has seen.
    pub samples_seen: u64,
    /// Samples in the window.
    pub window_samples: usize,
    /// `window.capacity`.
    pub window_capacity: usize,
    /// Solver steps so far.
    pub steps: u64,
    /// The served lambda (the live grid member's when `lambda_auto`).
    pub lambda: f64,
    /// Whether lambda is chosen from a grid (`lambda = "auto"`).
    pub lambda_auto: bool,
    /// Samples the daemon accepted so far, every source (`thresher_samples_ingested_total`).
    pub samples_ingested_total: u64,
    /// Samples the daemon refused so far, every reason (`thresher_samples_rejected_total`).
    pub samples_rejected_total: u64,
    /// Drift alarms of this learner so far (`[drift]`).
    pub drift_alarms: u64,
    /// The latest drift alarm since the previous point, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<DriftEvent>,
}

impl HistoryPoint {
    /// The point of `s`; `churn` is its support change since the previous point.
    pub fn of(s: &Snapshot, churn: u64, window_capacity: usize, metrics: &Metrics) -> HistoryPoint {
        let c = s.model.certificate;
        HistoryPoint {
            version: s.version,
            updated_at: s.updated_at,
            primal: c.primal,
            dual: c.dual,
            gap: c.gap,
            support_size: s.model.support.len(),
            support_changes: churn,
            progressive_loss: s.progressive_loss,
            samples_seen: s.samples_seen,
            window_samples: s.window_samples,
            window_capacity,
            steps: s.steps,
            lambda: s.model.lambda,
            lambda_auto: s.model.lambda_auto.is_some(),
            samples_ingested_total: metrics.samples_ingested_total(),
            samples_rejected_total: metrics.samples_rejected_total(),
            drift_alarms: 0,
            drift: None,
        }
    }
}

/// A bounded ring of [`HistoryPoint`]s, oldest first; full, it drops the oldest.
#[derive(Debug)]
struct History {
    capacity: usize,
    points: VecDeque<HistoryPoint>,
}

impl History {
    /// Appends `p`; returns whether the oldest point was dropped for it.
    fn push(&mut self, p: HistoryPoint) -> bool {
        let dropped = self.points.len() >= self.capacity;
        if dropped {
            self.points.pop_front();
        }
        self.points.push_back(p);
        dropped
    }
}

/// The latest certified model the publish gate withheld (newer than the served one).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Withheld {
    /// Its certificate's relative gap `(P - D) / max(1, |P|)`.
    pub relative_gap: f64,
    /// Samples the learner had seen when it was certified.
    pub samples_seen: u64,
    /// Unix time (seconds) it was certified.
    pub certified_at: f64,
    /// Models this learner's gate has withheld since the daemon started.
    pub withheld_total: u64,
    /// The learner's mutation counter it reflects (not served).
    #[serde(skip)]
    pub mutations: u64,
}

/// What the publish gate says of a cell, as the served model shows it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct GateView {
    /// `publish.max_relative_gap`.
    pub max_relative_gap: f64,
    /// The latest withheld candidate, if one is newer than the served model.
    pub candidate: Option<Withheld>,
}

/// A published snapshot with its served JSON body, rendered at most once per snapshot.
#[derive(Debug)]
struct Published {
    snapshot: Arc<Snapshot>,
    body: OnceLock<bytes::Bytes>,
}

/// The published snapshot of one learner.
#[derive(Debug)]
pub struct ModelCell {
    pub name: String,
    /// Why a lock: the publishing thread swaps the `Arc` while handlers clone it; both hold the lock for
    /// a pointer copy only, so readers never wait on a solver or on a certificate computation.
    current: RwLock<Option<Arc<Published>>>,
    /// Written once per publication, read by `GET /v1/history`; both copy a few points under it.
    history: Mutex<History>,
    /// `publish.max_relative_gap` (`None`: every certified model is served).
    max_relative_gap: Option<f64>,
    /// The latest model the gate withheld since the last one served.
    withheld: Mutex<Option<Withheld>>,
    /// Drift alarms (`None` without a drift test).
    drift: Option<Mutex<DriftRecord>>,
    /// `window.half_life_samples` (`None`: no forgetting), shown with the served model.
    half_life_samples: Option<u64>,
}

impl ModelCell {
    /// A cell holding `initial` (a restored snapshot), with a history ring of
    /// [`DEFAULT_HISTORY_POINTS`] ([`ModelCell::with_history`] sets another size).
    pub fn new(name: &str, initial: Option<Snapshot>) -> ModelCell {
        ModelCell {
            name: name.to_string(),
            current: RwLock::new(initial.map(Published::new)),
            history: Mutex::new(History {
                capacity: DEFAULT_HISTORY_POINTS,
                points: VecDeque::new(),
            }),
            max_relative_gap: None,
            withheld: Mutex::new(None),
            drift: None,
            half_life_samples: None,
        }
    }

    /// Shows the learner's forgetting (`window.half_life_samples`) with its model.
    pub fn with_forgetting(mut self, half_life_samples: Option<u64>) -> ModelCell {
        self.half_life_samples = half_life_samples;
        self
    }

    /// The samples over which a sample's weight halves (`None`: no forgetting).
    pub fn half_life_samples(&self) -> Option<u64> {
        self.half_life_samples
    }

    /// Keeps the drift alarms of a learner whose test runs with `action` (none with `Off`).
    pub fn with_drift(mut self, action: DriftAction) -> ModelCell {
        self.drift = (action != DriftAction::Off).then(|| {
            Mutex::new(DriftRecord {
                action: action.name().to_string(),
                ..DriftRecord::default()
            })
        });
        self
    }

    /// The drift alarms so far (`None` without a drift test).
    pub fn drift(&self) -> Option<DriftRecord> {
        self.drift.as_ref().map(|d| d.lock().clone())
    }

    /// Records an alarm, counts it and renders the served body again so that it shows it.
    pub fn note_drift(&self, event: DriftEvent, metrics: &Metrics) {
        let Some(record) = &self.drift else { return };
        {
            let mut r = record.lock();
            r.alarms += 1;
            r.last = Some(event.clone());
            r.pending = Some(event.clone());
        }
        let l = [self.name.as_str()];
        metrics.drift_alarms.with_label_values(&l).inc();
        metrics
            .drift_dropped
            .with_label_values(&l)
            .inc_by(event.dropped);
        self.rerender();
    }

    /// Drops the served body so that the next request renders it again (same snapshot).
    fn rerender(&self) {
        let mut current = self.current.write();
        if let Some(p) = current.as_ref() {
            *current = Some(Arc::new(Published {
                snapshot: p.snapshot.clone(),
                body: OnceLock::new(),
            }));
        }
    }

    /// Sets the publish gate: a certified model whose relative gap is above `max_relative_gap` is not
    /// served (`None`: no gate).
    pub fn with_gate(mut self, max_relative_gap: Option<f64>) -> ModelCell {
        self.max_relative_gap = max_relative_gap;
        self
    }

    /// The gate's view for the served model's JSON (`None` without a gate).
    pub fn gate(&self) -> Option<GateView> {
        Some(GateView {
            max_relative_gap: self.max_relative_gap?,
            candidate: self.withheld.lock().clone(),
        })
    }

    /// Records a withheld candidate, and renders the served body again so that it shows it.
    fn withhold(&self, w: Withheld) {
        *self.withheld.lock() = Some(w);
        self.rerender();
    }

    /// Sets the history ring to `capacity` points (at least 1), beginning it with the cell's current
    /// snapshot if it has one (daemon counters read from `metrics`).
    pub fn with_history(
        self,
        capacity: usize,
        window_capacity: usize,
        metrics: &Metrics,
    ) -> ModelCell {
        let mut points = VecDeque::new();
        if let Some(s) = self.get() {
            points.push_back(HistoryPoint::of(&s, 0, window_capacity, metrics));
        }
        *self.history.lock() = History {
            capacity: capacity.max(1),
            points,
        };
        self
    }

    /// The history ring's points with a version above `since`, oldest first.
    pub fn history_since(&self, since: u64) -> Vec<HistoryPoint> {
        let history = self.history.lock();
        // Versions increase along the ring: skip the older part by binary search.
        let start = history.points.partition_point(|p| p.version <= since);
        history.points.range(start..).cloned().collect()
    }

    /// At most `limit` of [`ModelCell::history_since`]'s points (the oldest), and whether later ones
    /// are left.
    pub fn history_page(&self, since: u64, limit: usize) -> (Vec<HistoryPoint>, bool) {
        let history = self.history.lock();
        let start = history.points.partition_point(|p| p.version <= since);
        let end = start.saturating_add(limit).min(history.points.len());
        let page = history.points.range(start..end).cloned().collect();
        (page, end < history.points.len())
    }

    /// How many points the history ring keeps.
    pub fn history_capacity(&self) -> usize {
        self.history.lock().capacity
    }

    pub fn get(&self) -> Option<Arc<Snapshot>> {
        self.current.read().as_ref().map(|p| p.snapshot.clone())
    }

    /// The served body of the current snapshot: rendered by `render` on the first request after a
    /// publication, then a reference-counted clone (no serialisation per request).
    pub fn body(&self, render: impl FnOnce(&Snapshot) -> bytes::Bytes) -> Option<bytes::Bytes> {
        let published = self.current.read().clone()?;
        Some(
            published
                .body
                .get_or_init(|| render(&published.snapshot))
                .clone(),
        )
    }

    fn set(&self, s: Snapshot) {
        *self.withheld.lock() = None;
        *self.current.write() = Some(Published::new(s));
    }
}

impl Published {
    fn new(s: Snapshot) -> Arc<Published> {
        Arc::new(Published {
            snapshot: Arc::new(s),
            body: OnceLock::new(),
        })
    }
}

/// A learner shared between its worker thread and the checkpoint thread and writer.
pub type SharedLearner = Arc<Mutex<Box<dyn StreamingLearner>>>;

/// Publishes a new snapshot of `learner` into `cell` if it changed; returns whether it did. Holds the
/// learner's lock while certifying: call it from the learner's own thread (or once it has stopped).
pub fn publish(learner: &SharedLearner, cell: &ModelCell, metrics: &Metrics) -> bool {
    let previous = cell.get();
    let (snap, capacity, gauges) = {
        let mut l = learner.lock();
        let stats = l.stats();
        // A withheld candidate is newer than the served model (serving one clears it).
        let unchanged = cell
            .withheld
            .lock()
            .as_ref()
            .map(|w| w.mutations)
            .or(previous.as_ref().map(|p| p.mutations))
            .is_some_and(|m| m == stats.mutations);
        if unchanged || l.window().is_empty() {
            return false;
        }
        let snap = l.certify();
        if !snap.is_finite() {
            // Never published: the previous snapshot stays, and the learner restarts from its own
            // state made finite (`recover_from_numeric_fault`).
            tracing::error!(
                learner = %cell.name,
                certificate = ?snap.model.certificate,
                "non-finite model certified; not published, learner rebuilt from its window"
            );
            recover_from_numeric_fault(&mut l);
            count_numeric_faults(metrics, &cell.name, l.stats().numeric_faults);
            return false;
        }
        count_numeric_faults(metrics, &cell.name, snap.stats.numeric_faults);
        (snap, l.window().capacity(), l.gauges())
    };
    if withhold(cell, &snap, metrics) {
        return false;
    }
    log_convergence_change(&cell.name, previous.as_deref(), &snap.model);
    let prev_support: &[u32] = previous.as_ref().map_or(&[], |p| &p.model.support);
    let churn = support_changes(prev_support, &snap.model.support) as u64;
    let prev_steps = previous.as_ref().map_or(0, |p| p.steps);
    let next = Snapshot {
        learner: cell.name.clone(),
        version: previous.as_ref().map_or(1, |p| p.version + 1),
        samples_seen: snap.stats.samples_seen,
        window_samples: snap.window_samples,
        updated_at: unix_now(),
        progressive_loss: snap.stats.progressive_loss(),
        steps: snap.stats.steps,
        mutations: snap.stats.mutations,
        support_changes_total: previous.as_ref().map_or(0, |p| p.support_changes_total) + churn,
        model: snap.model,
    };
    let l = [cell.name.as_str()];
    metrics.support_changes.with_label_values(&l).inc_by(churn);
    metrics
        .solver_steps
        .with_label_values(&l)
        .inc_by(next.steps.saturating_sub(prev_steps));
    metrics
        .window_capacity
        .with_label_values(&l)
        .set(capacity as f64);
    set_solver_gauges(metrics, &cell.name, gauges);
    if let Some(a) = &next.model.lambda_auto {
        let before = previous.as_ref().and_then(|p| p.model.lambda_auto.as_ref());
        metrics
            .lambda_switches
            .with_label_values(&l)
            .inc_by(a.switches.saturating_sub(before.map_or(0, |p| p.switches)));
        if a.criterion == "holdout" {
            metrics.lambda_holdout_dropped.with_label_values(&l).inc_by(
                a.held_out_dropped
                    .saturating_sub(before.map_or(0, |p| p.held_out_dropped)),
            );
        }
    }
    let mut point = HistoryPoint::of(&next, churn, capacity, metrics);
    if let Some(d) = &cell.drift {
        let mut d = d.lock();
        point.drift_alarms = d.alarms;
        point.drift = d.pending.take();
    }
    cell.set(next);
    if cell.history.lock().push(point) {
        metrics.history_dropped.with_label_values(&l).inc();
    }
    set_gauges(cell, metrics);
    true
}

/// The publish gate: whether `snap` is withheld (its relative gap above the cell's
/// `max_relative_gap`); a withheld model is recorded in the cell and counted.
fn withhold(cell: &ModelCell, snap: &super::LearnerSnapshot, metrics: &Metrics) -> bool {
    let Some(max) = cell.max_relative_gap else {
        return false;
    };
    let relative_gap = snap.model.certificate.relative_gap();
    if relative_gap <= max {
        return false;
    }
    let counter = metrics
        .models_withheld
        .with_label_values(&[cell.name.as_str()]);
    counter.inc();
    let first = cell.withheld.lock().is_none();
    if first {
        tracing::info!(
            learner = %cell.name,
            relative_gap,
            max_relative_gap = max,
            "model withheld by the publish gate (relative gap above publish.max_relative_gap); the last model that passed stays served"
        );
    }
    cell.withhold(Withheld {
        relative_gap,
        samples_seen: snap.stats.samples_seen,
        certified_at: unix_now(),
        withheld_total: counter.get(),
        mutations: snap.stats.mutations,
    });
    true
}

/// Logs when a learner starts or stops serving the empty model in place of its own
/// ([`super::LearnerCore::empty_fallback`]), and when it idles without having converged.
fn log_convergence_change(learner: &str, previous: Option<&Snapshot>, model: &Model) {
    let Some(now) = &model.convergence else {
        return;
    };
    let before = previous.and_then(|p| p.model.convergence.as_ref());
    let c = model.certificate;
    if now.empty_model && !before.is_some_and(|b| b.empty_model) {
        tracing::warn!(
            learner,
            primal = c.primal,
            dual = c.dual,
            "the learner's model is worse than the empty model over its window: serving w = 0"
        );
    } else if !now.empty_model && before.is_some_and(|b| b.empty_model) {
        tracing::info!(
            learner,
            primal = c.primal,
            "the learner's model beats the empty model again: serving it"
        );
    }
    if now.reason == "stalled" && before.is_none_or(|b| b.reason != "stalled") {
        tracing::warn!(
            learner,
            relative_gap = now.relative_gap,
            tol = now.tol,
            empty_model = now.empty_model,
            "the learner idles without having converged (relative gap above tol)"
        );
    }
}

/// Brings `thresher_numeric_faults_total{learner}` up to the learner's own count.
fn count_numeric_faults(metrics: &Metrics, learner: &str, faults: u64) {
    let counter = metrics.numeric_faults.with_label_values(&[learner]);
    counter.inc_by(faults.saturating_sub(counter.get()));
}

/// Sets a learner's solver-specific gauges (`thresher_active_set_size`, `thresher_screened_features`)
/// and raises `thresher_samples_unlearned_total` to its count.
pub fn set_solver_gauges(metrics: &Metrics, learner: &str, gauges: SolverGauges) {
    let l = [learner];
    let unlearned = metrics.unlearned_samples.with_label_values(&l);
    unlearned.inc_by(gauges.unlearned_samples.saturating_sub(unlearned.get()));
    metrics
        .active_set_size
        .with_label_values(&l)
        .set(gauges.active_set_size as f64);
    metrics
        .screened_features
        .with_label_values(&l)
        .set(gauges.screened_features as f64);
}

/// Sets the learner gauges from the published snapshot (also used after a restore).
pub fn set_gauges(cell: &ModelCell, metrics: &Metrics) {
    let Some(s) = cell.get() else { return };
    let l = [cell.name.as_str()];
    let c = s.model.certificate;
    metrics.duality_gap.with_label_values(&l).set(c.gap);
    metrics.primal_objective.with_label_values(&l).set(c.primal);
    metrics.dual_objective.with_label_values(&l).set(c.dual);
    metrics
        .support_size
        .with_label_values(&l)
        .set(s.model.support.len() as f64);
    metrics
        .model_version
        .with_label_values(&l)
        .set(s.version as f64);
    metrics
        .progressive_loss
        .with_label_values(&l)
        .set(s.progressive_loss);
    metrics
        .window_samples
        .with_label_values(&l)
        .set(s.window_samples as f64);
    if let Some(c) = &s.model.convergence {
        let flag = |b: bool| if b { 1.0 } else { 0.0 };
        metrics
            .model_converged
            .with_label_values(&l)
            .set(flag(c.converged));
        metrics
            .model_empty_fallback
            .with_label_values(&l)
            .set(flag(c.empty_model));
    }
    metrics
        .snapshot_age
        .with_label_values(&l)
        .set(s.age_seconds());
    if let Some(a) = &s.model.lambda_auto {
        metrics
            .lambda_live
            .with_label_values(&l)
            .set(s.model.lambda);
        for (i, &lambda) in a.grid.iter().enumerate() {
            let labels = [cell.name.as_str(), &crate::metrics::lambda_label(lambda)];
            if let Some(&loss) = a.progressive.get(i) {
                metrics
                    .lambda_progressive_loss
                    .with_label_values(&labels)
                    .set(loss);
            }
            if a.criterion == "holdout" {
                metrics
                    .lambda_holdout_loss
                    .with_label_values(&labels)
                    .set(a.losses[i]);
            }
        }
        if a.criterion == "holdout" {
            metrics
                .lambda_holdout_samples
                .with_label_values(&l)
                .set(a.held_out as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(version: u64) -> HistoryPoint {
        HistoryPoint {
            version,
            updated_at: version as f64,
            primal: 2.0,
            dual: 1.0,
            gap: 1.0,
            support_size: 3,
            support_changes: 0,
            progressive_loss: 0.5,
            samples_seen: 10 * version,
            window_samples: 10,
            window_capacity: 100,
            steps: version,
            lambda: 0.01,
            lambda_auto: false,
            samples_ingested_total: 10 * version,
            samples_rejected_total: 0,
            drift_alarms: 0,
            drift: None,
        }
    }

    #[test]
    fn the_history_ring_drops_its_oldest_point_when_full() {
        let cell = ModelCell::new("a", None).with_history(3, 100, &Metrics::new());
        assert_eq!(cell.history_capacity(), 3);
        assert!(cell.history_since(0).is_empty());
        let mut dropped = Vec::new();
        for v in 1..=5 {
            dropped.push(cell.history.lock().push(point(v)));
        }
        assert_eq!(dropped, [false, false, false, true, true]);
        let versions = |since| -> Vec<u64> {
            cell.history_since(since)
                .iter()
                .map(|p| p.version)
                .collect()
        };
        assert_eq!(versions(0), [3, 4, 5]);
        assert_eq!(versions(3), [4, 5]);
        assert_eq!(versions(5), Vec::<u64>::new());
        assert_eq!(versions(u64::MAX), Vec::<u64>::new());
    }

    /// The gate keeps the last model that passed: a learner certified after one step on a fresh batch
    /// (a large gap) is withheld and counted, and the cell still serves the earlier, converged model,
    /// showing the candidate beside it; serving a model clears the candidate.
    #[test]
    fn the_gate_withholds_a_model_above_it_and_keeps_the_last_that_passed() {
        let config = crate::Config::defaults();
        let metrics = Metrics::new();
        let cell = ModelCell::new("a", None).with_gate(Some(1e-2));
        let learner: SharedLearner = Arc::new(Mutex::new(crate::learner::build(
            &config.learners[0],
            1000,
            None,
        )));
        let data = crate::synth::sparse_stream(400, 30, 3, 6, 0.1, false, 3);
        let withheld = || metrics.models_withheld.with_label_values(&["a"]).get();
        let converge = |l: &SharedLearner| {
            for _ in 0..10_000 {
                if matches!(l.lock().step(), super::super::StepOutcome::Idle(_)) {
                    break;
                }
            }
        };
        learner.lock().insert_samples(&data.samples[..200]);
        assert!(!publish(&learner, &cell, &metrics), "an untrained model");
        assert!(cell.get().is_none() && withheld() == 1);
        assert!(
            !publish(&learner, &cell, &metrics),
            "unchanged: not judged again"
        );
        assert_eq!(withheld(), 1);
        converge(&learner);
        assert!(publish(&learner, &cell, &metrics));
        let served = cell.get().unwrap();
        assert!(served.model.certificate.relative_gap() <= 1e-2);
        assert_eq!(cell.gate().unwrap().candidate, None);
        // A shifted batch, not stepped on: its certificate's gap is far above the gate.
        let shifted: Vec<_> = data.samples[200..]
            .iter()
            .map(|s| {
                let mut s = s.clone();
                s.label *= -3.0;
                s
            })
            .collect();
        learner.lock().insert_samples(&shifted);
        assert!(!publish(&learner, &cell, &metrics));
        assert_eq!(withheld(), 2);
        assert_eq!(
            cell.get().unwrap().version,
            served.version,
            "the last that passed"
        );
        let candidate = cell.gate().unwrap().candidate.unwrap();
        assert!(candidate.relative_gap > 1e-2 && candidate.samples_seen == 400);
        assert_eq!(candidate.withheld_total, 2);
    }

    #[test]
    fn formats_rfc3339() {
        assert_eq!(rfc3339(0.0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400.5), "2000-02-29T00:00:00.500Z");
        assert_eq!(rfc3339(1_795_000_000.0), "2026-11-18T11:06:40.000Z");
    }
}
