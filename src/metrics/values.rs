//! The fixed label values of the daemon's labelled counters (outcomes and reasons): each metric's
//! whole set is registered at start, so a series exists at 0 before its first event.

/// `outcome` labels of `thresher_nats_batches_total`.
pub mod nats_outcome {
    pub const ACKED: &str = "acked";
    pub const INVALID: &str = "invalid";
    pub const EMPTY: &str = "empty";
    pub const ALL: [&str; 3] = [ACKED, INVALID, EMPTY];
}

/// Checkpoint outcomes, exported as the `outcome` label of `thresher_checkpoints_total`.
pub mod checkpoint_outcome {
    pub const WRITTEN: &str = "written";
    pub const UNCHANGED: &str = "unchanged";
    pub const REFUSED: &str = "refused";
    pub const FAILED: &str = "failed";
    pub const ALL: [&str; 4] = [WRITTEN, UNCHANGED, REFUSED, FAILED];
}

/// `reason` labels of `thresher_http_connections_closed_total`.
pub mod closed {
    pub const LIMIT_EVICTED: &str = "limit_evicted";
    pub const LIMIT_REFUSED: &str = "limit_refused";
    pub const HEADER_TIMEOUT: &str = "header_timeout";
    pub const IDLE_TIMEOUT: &str = "idle_timeout";
    pub const TLS_HANDSHAKE: &str = "tls_handshake";
    pub const WRITE_TIMEOUT: &str = "write_timeout";
    pub const ALL: [&str; 6] = [
        LIMIT_EVICTED,
        LIMIT_REFUSED,
        HEADER_TIMEOUT,
        IDLE_TIMEOUT,
        TLS_HANDSHAKE,
        WRITE_TIMEOUT,
    ];
}

/// `reason` labels of `thresher_inflight_refused_total`.
pub mod inflight_refused {
    pub const BYTES_BUSY: &str = "bytes_busy";
    pub const BYTES_TOO_LARGE: &str = "bytes_too_large";
    pub const SAMPLES_BUSY: &str = "samples_busy";
    pub const SAMPLES_TOO_LARGE: &str = "samples_too_large";
    pub const CLIENT_GONE: &str = "client_gone";
    pub const ALL: [&str; 5] = [
        BYTES_BUSY,
        BYTES_TOO_LARGE,
        SAMPLES_BUSY,
        SAMPLES_TOO_LARGE,
        CLIENT_GONE,
    ];
}

/// Rejection reasons, exported as the `reason` label of `thresher_samples_rejected_total`.
pub mod reason {
    pub const INVALID: &str = "invalid";
    pub const QUEUE_FULL: &str = "queue_full";
    pub const TOO_LARGE: &str = "too_large";
    pub const UNSUPPORTED_MEDIA_TYPE: &str = "unsupported_media_type";
    /// The write-ahead log is at `durability.wal_max_bytes` (or cannot be written).
    pub const WAL_FULL: &str = "wal_full";
    pub const ALL: [&str; 5] = [
        INVALID,
        QUEUE_FULL,
        TOO_LARGE,
        UNSUPPORTED_MEDIA_TYPE,
        WAL_FULL,
    ];
}
