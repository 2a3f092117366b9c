//! The metrics of the events a learner's stream raises beside its models: models the publish gate
//! withheld (`publish.max_relative_gap`).

use prometheus::IntCounterVec;

use super::{Registrar, LEARNER};

/// Events per learner.
pub(super) struct EventFamily {
    pub(super) models_withheld: IntCounterVec,
}

pub(super) fn event_family(r: &Registrar) -> EventFamily {
    EventFamily {
        models_withheld: r.counter(
            "thresher_models_withheld_total",
            "Certified models not served: their relative gap was above publish.max_relative_gap",
            LEARNER,
        ),
    }
}
