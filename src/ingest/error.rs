//! Every error type of `ingest`, by where it arises: one line ([`LineError`]), a body refused as a
//! whole ([`BatchError`]), a file ([`ReadError`]), a batch the door does not let in ([`AdmitError`]),
//! an HTTP body ([`BodyError`], [`HttpIngestError`]) and the NATS source's set-up ([`NatsError`]). Each says what is wrong and where; what a caller makes
//! of it (an HTTP status, an exit, a log line) is the caller's.

use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

use crate::sample::SampleError;

/// What is wrong with one line.
#[derive(Debug, Error, PartialEq, Clone)]
pub enum LineError {
    #[error("missing label")]
    MissingLabel,
    #[error("bad label {0:?}: not a number")]
    BadLabel(String),
    #[error("bad feature {0:?}: expected index:value")]
    BadPair(String),
    #[error("bad feature index {0:?}: expected a non-negative integer below 2^32")]
    BadIndex(String),
    #[error("bad feature value {0:?}: not a number")]
    BadValue(String),
    #[error("bad cost {0:?}: the sample's weight must be a number > 0")]
    BadCost(String),
    #[error("cost given twice: a line holds at most one cost:c token (the sample's weight)")]
    RepeatedCost,
    #[error("invalid JSON sample: {0}")]
    Json(String),
    /// A label that is neither a number nor one of the classes' names.
    #[error("{0}")]
    Label(String),
    #[error("line is not UTF-8 (byte {byte} of the line)")]
    NotUtf8 { byte: usize },
    #[error("{what} {value:e} is larger in magnitude than ingest.max_abs_value ({limit:e})")]
    TooLarge {
        what: String,
        value: f64,
        limit: f64,
    },
    #[error(transparent)]
    Sample(#[from] SampleError),
}

/// Why a body was refused: the message and the 1-based line (or array position) at fault, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchError {
    pub line: Option<usize>,
    pub message: String,
    /// How many samples the body held (as far as it could be read), for the rejection counter.
    pub samples: usize,
}

/// A line error with where it happened.
#[derive(Debug, Error)]
pub enum ReadError {
    #[error("{}:{line}: {source}", path.display())]
    Line {
        path: PathBuf,
        line: usize,
        #[source]
        source: LineError,
    },
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Why a batch was not admitted.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum AdmitError {
    /// The sample budget or the queue is full: retry later.
    #[error("ingest queue is full; retry later")]
    QueueFull,
    /// Ingest is closed: the daemon is stopping.
    #[error("shutting down")]
    ShuttingDown,
    /// The write-ahead log is at `durability.wal_max_bytes`: retry once a checkpoint truncated it.
    #[error("the write-ahead log is full (durability.wal_max_bytes); retry later")]
    LogFull,
    /// The write-ahead log cannot be written (logged): the batch is refused, not acknowledged.
    #[error("cannot write the write-ahead log; retry later")]
    LogFailed,
    /// The body no longer fits the feature dictionary when admitted: another body took the other
    /// feature kind, or the dictionary's room, between its parse and its admission.
    #[error("{}", .0.message)]
    Invalid(BatchError),
}

/// Why an HTTP request body was not read (`ingest::source::http`).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum BodyError {
    /// The `Content-Type` (its value; empty without one) names none of the three body formats.
    #[error(
        "unsupported content type {0:?}: use text/plain (LIBSVM), application/x-ndjson or \
         application/json"
    )]
    UnsupportedMediaType(String),
    /// The body is, or says it is, longer than `server.body_limit_bytes`; the rest is not read.
    #[error("request body is over the limit of {limit} bytes (server.body_limit_bytes)")]
    TooLarge { limit: usize },
    /// The body names a `Content-Encoding` (its value) the daemon does not decode.
    #[error(
        "unsupported content encoding {0:?}: send the body uncompressed (no Content-Encoding, or \
         identity)"
    )]
    UnsupportedEncoding(String),
    /// The in-flight budget `key` has no room for this request now: retry later.
    #[error("the daemon has as many request {what} in flight as {key} allows; retry later")]
    Busy {
        what: &'static str,
        key: &'static str,
    },
    /// This request alone holds more `what` than the whole in-flight budget `key`.
    #[error("the request holds more {what} than {key} allows in flight ({limit})")]
    OverBudget {
        what: &'static str,
        key: &'static str,
        limit: usize,
    },
    /// The client closed the connection before its request was answered.
    #[error("the client went away")]
    ClientGone,
    /// Nothing arrived for `server.body_idle_timeout_s`; the rest is not read.
    #[error("the request body stalled for {}s (server.body_idle_timeout_s)", .0.as_secs())]
    Stalled(Duration),
    /// The connection failed while the body was read.
    #[error("cannot read the body: {0}")]
    Unreadable(String),
}

/// Why the samples of a `POST /v1/samples` body did not enter, all or nothing.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum HttpIngestError {
    #[error(transparent)]
    Body(#[from] BodyError),
    /// A sample, or the body as a whole, is not valid.
    #[error("{}", .0.message)]
    Invalid(BatchError),
    #[error(transparent)]
    Refused(#[from] AdmitError),
}

/// Why the NATS source could not start or set up its stream.
#[derive(Debug, Error)]
pub enum NatsError {
    #[error("cannot read NATS credentials file {}: {source}", path.display())]
    Credentials {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot connect to NATS: {0}")]
    Connect(#[from] async_nats::ConnectError),
    #[error("cannot create or read JetStream stream {stream:?}: {reason}")]
    Stream { stream: String, reason: String },
    #[error("cannot create or read JetStream consumer {consumer:?}: {reason}")]
    Consumer { consumer: String, reason: String },
}
