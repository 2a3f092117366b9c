//! Ingest: every source of samples and every input format, up to the one door to the learners.
//!
//! ```text
//!  sources                 formats                      validated batches          the door
//!  source::http  (bodies) ─┐
//!  source::nats  (JetStream)├─▶ libsvm, json ─▶ batch: all or nothing, ─▶ Admission: budget and
//!  stdin         (--stdin) ─┘   (lines)         names → FeatureDictionary   queue, counted
//!  file (fit, predict) ──────▶ libsvm, json ─▶ samples, or a Dataset's columns
//! ```
//!
//! - Sources: [`source::http`] reads a request body frame by frame and parses it on the blocking pool;
//!   [`source::nats`] pulls batches from a JetStream consumer and acknowledges them once a checkpoint
//!   holds them; [`file`](mod@file) reads whole files for `thresher fit` and `predict`.
//! - Formats: [`libsvm`] and [`json`], each a fast reader for the shape writers produce and a general
//!   reader that decides everything else and every error, held to each other by property tests. Lines
//!   are split by [`lines`] (a body that arrived in chunks: [`segments`]); the byte-level kernels of
//!   the fast readers live in `simd`.
//! - [`batch`]: a body → a validated [`crate::sample::SampleBlock`], all or nothing: a malformed line
//!   is an error naming its line, and no line is ever skipped silently (only blank lines and `#`
//!   comments are). Feature indices are kept exactly as written.
//! - [`dictionary`]: the named-feature dictionary (bounded, append-only, each name stored once), the
//!   kind of features a daemon takes (numeric indices or names, never both), and valid names.
//! - [`hashed`]: hashed feature names instead of the dictionary (`ingest.feature_names = "hashed"`)
//!   and the bounded memory of the names last seen, for the published supports.
//! - [`admission`]: [`Admission`], the one door from a parsed batch to the learners, with the memory
//!   bound of [`crate::ring::budget`].
//! - [`inflight`]: the bound on request memory in flight: body bytes before they are read, samples as
//!   a body is parsed, and the parse's stop when its client goes.
//! - [`wal`]: the write-ahead log of acknowledged samples, appended by [`Admission`] before a batch is
//!   acknowledged, truncated by checkpoints, replayed at start.
//! - [`labels`]: late labels, the bounded store of predicted samples waiting for their label, and the
//!   bodies that carry ids and labels.
//! - Every error type is in one place (`error`, re-exported here).

pub mod admission;
pub mod batch;
pub mod dictionary;
mod error;
pub mod file;
#[doc(hidden)]
pub mod fuzzing;
pub mod hashed;
pub mod inflight;
pub mod json;
pub mod labels;
pub mod libsvm;
pub mod lines;
pub mod segments;
mod simd;
pub mod source;
pub mod wal;

pub use admission::{Admission, Source};
pub use error::{
    AdmitError, BatchError, BodyError, HttpIngestError, LineError, NatsError, ReadError,
};
pub use file::{guess_format, read_dataset, read_file, Format};
pub use lines::is_skippable;
