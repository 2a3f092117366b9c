//! The metrics of late labels (`[labels]`, `ingest::labels`): the store of predicted samples waiting
//! for their label, what leaves it unlabelled, and what each label found.

use prometheus::{IntCounterVec, IntGauge};

use super::Registrar;

/// `reason` labels of `thresher_label_store_dropped_total`.
pub mod dropped {
    /// The oldest sample left to make room (`labels.capacity` or `labels.max_bytes`).
    pub const CAPACITY: &str = "capacity";
    /// A sample older than `labels.ttl_seconds` left unlabelled.
    pub const EXPIRED: &str = "expired";
    /// A prediction with an id already stored replaced the stored sample.
    pub const REPLACED: &str = "replaced";
    pub const ALL: [&str; 3] = [CAPACITY, EXPIRED, REPLACED];
}

/// `outcome` labels of `thresher_labels_total`: the per-item statuses of `POST /v1/labels`.
pub mod outcome {
    /// Joined to its stored sample and learned.
    pub const JOINED: &str = "joined";
    /// No stored sample has this id (never predicted with it, or already labelled).
    pub const UNKNOWN: &str = "unknown";
    /// The stored sample outlived `labels.ttl_seconds` before its label came.
    pub const EXPIRED: &str = "expired";
    /// The stored sample left to make room before its label came.
    pub const EVICTED: &str = "evicted";
    /// The same id earlier in the same request.
    pub const DUPLICATE: &str = "duplicate";
    pub const ALL: [&str; 5] = [JOINED, UNKNOWN, EXPIRED, EVICTED, DUPLICATE];
}

/// The label store's metrics (cheap to clone).
#[derive(Clone)]
pub struct LabelMetrics {
    /// `thresher_label_store_samples`: samples waiting for their label.
    pub stored: IntGauge,
    /// `thresher_label_store_bytes`: the bytes they hold (bounded by `labels.max_bytes`).
    pub bytes: IntGauge,
    /// `thresher_label_store_dropped_total{reason}`: samples that left the store unlabelled.
    pub dropped: IntCounterVec,
    /// `thresher_labels_total{outcome}`: labels received, by what they found.
    pub outcomes: IntCounterVec,
}

pub(super) fn label_metrics(r: &Registrar) -> LabelMetrics {
    let m = LabelMetrics {
        stored: r.int_gauge(
            "thresher_label_store_samples",
            "Predicted samples with an id waiting for their label (labels.capacity)",
        ),
        bytes: r.int_gauge(
            "thresher_label_store_bytes",
            "Bytes of the predicted samples waiting for their label (labels.max_bytes)",
        ),
        dropped: r.counter(
            "thresher_label_store_dropped_total",
            "Predicted samples that left the label store unlabelled: capacity, expired, replaced",
            &["reason"],
        ),
        outcomes: r.counter(
            "thresher_labels_total",
            "Labels received by outcome: joined, unknown, expired, evicted, duplicate",
            &["outcome"],
        ),
    };
    for reason in dropped::ALL {
        m.dropped.with_label_values(&[reason]);
    }
    for o in outcome::ALL {
        m.outcomes.with_label_values(&[o]);
    }
    m
}
