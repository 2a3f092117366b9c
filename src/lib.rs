//! # thresher
//!
//! A streaming learner of k-sparse linear models that proves how good its model is while it learns.
//!
//! ## Architecture and data flow
//!
//! ```text
//!  HTTP / stdin / NATS ─ingest─▶ Admission ──▶ window ──▶ learner ──▶ publish ──▶ API / metrics
//!  (LIBSVM, JSON)    parse,      budget +     (ring)     (worker     (Arc<Snapshot>
//!                    validate    queue                    threads)    in a ModelCell)
//!
//!  thresher fit: file ──ingest──▶ Dataset ──▶ solver step, driven by solver::driver ──▶ model file
//! ```
//!
//! Each module has one owner of one concern, and dependencies point one way (down this list, roughly):
//!
//! - [`sys`] — all OS-specific tuning: the only module with `libc` or `unsafe` system calls; numerical
//!   kernels make no scheduling calls.
//! - [`sample`] — the sparse sample type, the in-memory CSR data set, the [`sample::SampleSet`] /
//!   [`sample::DualRows`] views solvers read, and [`sample::ByteReader`], which reads the binary files
//!   that hold samples (checkpoint, write-ahead log).
//! - [`sparse`] — allocation-free kernels: sparse dot, axpy, the hard-thresholding operator `H_k`.
//! - [`loss`] — losses as types with their convex conjugates and each loss's dual coordinate maximiser,
//!   in the DIHT paper's conventions.
//! - [`ring`] — the bounded window of the last samples with their duals (drop-oldest), and the queued
//!   batch that crosses from `ingest` to the learners with its share of the sample budget.
//! - [`solver`] — pure solver steps (SDIHT's block step, IHT/HTP, the per-sample states of sparse mirror
//!   descent and SMIDAS, best subset), the offline solvers around them, the certificate, and the
//!   offline driver loop: no threads, no config, no file formats.
//! - [`model`] — the `thresher-model/1` JSON file written by `fit` and served by the daemon (and `fit --multiclass`'s `thresher-multiclass/1`, one-vs-rest, and `/2`, one support shared by all classes).
//! - [`config`] — embedded defaults, TOML file, `THRESHER_*` environment, flags → one validated
//!   [`Config`].
//! - [`metrics`] — the Prometheus registry and every metric name.
//! - [`ingest`] — every source (HTTP request bodies, NATS, stdin, files) and format (LIBSVM and JSON
//!   readers, every bad line an error naming its line), validated batches, and
//!   [`ingest::Admission`], the one door from a parsed body to the learners.
//! - [`learner`] — streaming learners on the window: the [`StreamingLearner`] trait and its shared
//!   core, the parameters a learner runs by ([`learner::params`]), one adapter per solver family
//!   (with the streaming state and its checkpoint export), `lambda = "auto"`, the mathematics of a cluster's global model ([`learner::global`]), the worker
//!   threads (router, learners, panic guard, publish cadence), publishing and its gate
//!   ([`learner::publish`]), and the drift alarm on the progressive loss ([`learner::drift`]).
//! - [`cluster`] — membership of the nodes sharing a NATS stream (a key-value bucket with a TTL), and the
//!   exchange of partial sums by which their SDIHT learners learn one exact global model
//!   ([`cluster::global`]; the mathematics in [`learner::global`]).
//! - [`api`] — the axum routes and the one mapping of errors to HTTP statuses (request bodies are
//!   read by `ingest`).
//! - [`daemon`] — `thresher serve`: [`daemon::run`] wires ingest, learners, checkpoints and the HTTP
//!   front, and stops them in order when its shutdown future resolves.
//! - [`cli`] — the `fit`, `predict` and `serve` commands (the binary's `main` only parses and
//!   dispatches).
//! - [`synth`] — seeded synthetic data for tests, examples and benchmarks.

pub mod api;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod daemon;
pub mod ingest;
pub mod learner;
pub mod loss;
pub mod metrics;
pub mod model;
pub mod ring;
pub mod sample;
pub mod solver;
pub mod sparse;
pub mod synth;
pub mod sys;

pub use config::Config;
pub use daemon::{run, RunOptions};
pub use learner::params::LearnerConfig;
pub use learner::publish::{ModelCell, Snapshot};
pub use learner::StreamingLearner;
pub use loss::Loss;
pub use model::Model;
pub use sample::{Dataset, Sample};
pub use solver::{Certificate, Problem, Solver};
