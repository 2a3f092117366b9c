//! # thresher
//!
//! A streaming learner of k-sparse linear models that proves how good its model is while it learns.
//!
//! ## Architecture and data flow
//!
//! ```text
//!  text (LIBSVM / JSON lines) ──ingest──▶ Sample ──▶ Dataset (offline) / window (daemon)
//!                                                        │ SampleSet
//!                                                        ▼
//!                              solver::{dual::Sdiht, primal::{Iht, Htp}}  (one epoch = one step)
//!                                                        │ driven by solver::driver::run
//!                                                        ▼
//!                              model::Model + objective::Certificate (primal, dual, gap)
//! ```
//!
//! - [`sample`] — the sparse sample type and the in-memory CSR data set (`sprs`).
//! - [`ingest`] — LIBSVM and JSON-lines readers; every bad line is an error naming its line.
//! - [`loss`] — losses as types with their convex conjugates, in the DIHT paper's conventions.
//! - [`sparse`] — allocation-free kernels: sparse dot, axpy, the hard-thresholding operator `H_k`.
//! - [`solver`] — DIHT/SDIHT and the IHT/HTP baselines behind one `Solver` trait, the certificate, and
//!   the driver loop with its stopping rules.
//!   [`solver::subset`] is best subset with l0 + l1 + l2 penalties (its own conventions and outer loop).
//! - [`model`] — the `thresher-model/1` JSON file written by `fit` and served by the daemon.
//! - [`cli`] — the `fit`, `predict` and `serve` commands (the binary's `main` only parses and dispatches).
//!
//! The daemon (`thresher serve`), ingest → ring → learners → snapshot → API/metrics:
//!
//! - [`config`] — embedded defaults, TOML file, `THRESHER_*` environment, flags → one validated `Config`.
//! - [`ingest::batch`] — request bodies to validated batches, all or nothing; the named-feature dictionary.
//! - [`ingest::budget`] — the ingest memory bound in samples: a batch holds its reservation until the
//!   last learner drops it.
//! - [`ring`] — the bounded window of the last samples with their duals (a `SampleSet`).
//! - [`solver::stream`] — the `StreamingLearner` trait and streaming SDIHT on the window.
//! - [`snapshot`] — immutable published snapshots, their cells and the snapshot loop.
//! - [`daemon`] — threads, queues, checkpoints and the ordered shutdown; [`daemon::http`], the HTTP
//!   front: a read thread for GET connections, the runtime for connections that post bodies.
//! - [`sys`] — every OS-specific call (thread priorities, yield points, allocator arenas, huge pages):
//!   the only module with `libc` or `unsafe` system calls; numerical kernels make no scheduling calls.
//! - [`api`] — the axum routes and the one mapping of errors to HTTP statuses.
//! - [`metrics`] — the Prometheus registry and every metric name.

pub mod api;
pub mod cli;
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
