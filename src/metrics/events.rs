//! The metrics of the events a learner's stream raises beside its models: models the publish gate
//! withheld (`publish.max_relative_gap`), drift alarms and the samples they dropped (`[drift]`).

use prometheus::IntCounterVec;

use super::{Registrar, LEARNER};

/// Events per learner.
pub(super) struct EventFamily {
    pub(super) models_withheld: IntCounterVec,
    pub(super) drift_alarms: IntCounterVec,
    pub(super) drift_dropped: IntCounterVec,
}

pub(super) fn event_family(r: &Registrar) -> EventFamily {
    EventFamily {
        models_withheld: r.counter(
            "thresher_models_withheld_total",
            "Certified models not served: their relative gap was above publish.max_relative_gap",
            LEARNER,
        ),
        drift_alarms: r.counter(
            "thresher_drift_alarms_total",
            "Rises of the progressive loss the drift test signalled (drift.action alarm or shrink)",
            LEARNER,
        ),
        drift_dropped: r.counter(
            "thresher_drift_dropped_samples_total",
            "Window samples older than a detected change dropped by drift.action = shrink",
            LEARNER,
        ),
    }
}
