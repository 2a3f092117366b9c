//! Checkpoints: every learner's full state (published snapshot, window samples with their duals,
//! counters) and the feature dictionary's kind, in one file written atomically, with the dictionary's
//! names in their own file ([`super::names_file`], rewritten only when the dictionary has grown); and
//! when they are written.
//!
//! **Cadence.** The thread named `checkpoint` ([`CheckpointThread`]) wakes every
//! `snapshot.interval_ms` and writes a checkpoint every `checkpoint.interval_s` (and, while NATS
//! batches wait for one to be acknowledged, every `nats.ack_interval_ms`) through the
//! [`Checkpointer`], which skips a write when nothing changed. Once the learner threads have ended it
//! publishes every learner's final snapshot and ends; the shutdown then writes the final checkpoint
//! through the same [`Checkpointer`].
//!
//! File layout (`<data-dir>/thresher.ckpt`), little endian:
//! `b"THRCKPT\n"` | format version `u32` | body length `u64` | body | FNV-1a 64 checksum of the body `u64`.
//! The body is a small JSON header (learner configs, snapshots, counters, dictionary) followed by the
//! binary window of each learner. Writes go to a temporary file in the same directory, are fsynced,
//! renamed over the old checkpoint, and the directory is fsynced, so a crash leaves either the old or the
//! new checkpoint, never a torn one. Reading checks magic, version, length and checksum: a corrupt or
//! incompatible file is a [`CheckpointError`] that stops the start (use `--fresh` to start empty).
//!
//! A primal learner's model ([`PrimalState`]: mirror, smidas, subset) rides in the JSON header as the
//! optional `primal` field, its floats as IEEE-754 bit patterns so the round trip is exact; files
//! without it (written by SDIHT-only builds) read as `None`, so format version 1 still describes both.
//! A `lambda = "auto"` learner's selection state ([`AutoState`]) rides the same way as the optional
//! `auto` field, next to the served member's state (`learner::auto` explains what a restore rebuilds).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::ingest::batch::{FeatureDictionary, FeatureKind};
use crate::ingest::source::nats::AckLedger;
use crate::ingest::wal::{Persistence, Wal};
use crate::learner::auto::selector::AutoState;
use crate::learner::params::LearnerConfig;
use crate::learner::publish::{publish, ModelCell, SharedLearner, Snapshot};
use crate::learner::worker::Absorbed;
use crate::learner::{LearnerState, LearnerStats, PrimalState};
use crate::metrics::Metrics;
use crate::sample::Sample;
use crate::solver::Certificate;

pub const MAGIC: &[u8; 8] = b"THRCKPT\n";
pub const FORMAT_VERSION: u32 = 1;
pub const FILE_NAME: &str = "thresher.ckpt";

#[derive(Debug, Error)]
pub enum CheckpointError {
    #[error("cannot access checkpoint {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Writing failed; a full disk is named as "no space left on device".
    #[error("cannot write checkpoint {}: {reason}", path.display())]
    Write { path: PathBuf, reason: String },
    #[error("data directory {} is in use by another thresher (pid {holder}); stop it or choose another --data-dir", dir.display())]
    Locked { dir: PathBuf, holder: String },
    #[error(transparent)]
    Wal(#[from] crate::ingest::wal::WalError),
    #[error("checkpoint {} is corrupt: {reason} (move it away, or start with --fresh)", path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error("checkpoint {} is incompatible: {reason} (start with --fresh to discard it)", path.display())]
    Incompatible { path: PathBuf, reason: String },
    #[error("checkpoint {} not written: learner {learner:?} holds a non-finite number (the previous checkpoint is kept)", path.display())]
    NonFinite { path: PathBuf, learner: String },
}

/// What identifies a learner's problem: restoring into a different one would be wrong.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LearnerIdentity {
    pub name: String,
    pub loss: String,
    pub k: usize,
    pub lambda: f64,
}

/// One learner's checkpointed state.
#[derive(Debug, Clone, PartialEq)]
pub struct LearnerCheckpoint {
    pub identity: LearnerIdentity,
    pub snapshot: Option<Snapshot>,
    pub state: LearnerState,
}

/// The whole checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    pub learners: Vec<LearnerCheckpoint>,
    pub feature_names: Vec<String>,
    /// The kind of features the daemon takes ([`FeatureKind`]; `Names` whenever it holds a name).
    pub feature_kind: FeatureKind,
    /// `(count, digest)` of the names in the dictionary's own file ([`super::names_file`]), when they
    /// are there rather than in the checkpoint: written by the daemon; [`read`] loads and checks them
    /// into `feature_names`.
    pub feature_names_file: Option<(u64, u64)>,
    /// The acknowledgement subjects of the NATS deliveries this checkpoint holds that were not yet
    /// acknowledged when it was written: a node restarted from it acknowledges them first, so a
    /// batch it holds is not also redelivered to another node (`ingest::source::nats`).
    pub pending_acks: Vec<String>,
    /// The last write-ahead log batch every learner's state holds (`ingest::wal`): a restart replays
    /// only the batches after it. 0: none.
    pub wal_through: u64,
}

#[derive(Serialize, Deserialize)]
struct Header {
    feature_names: Vec<String>,
    /// `"indices"`, `"names"` or `"open"` ([`FeatureKind`]); absent in files written before it:
    /// `"names"` if there are names, else open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    feature_kind: Option<String>,
    /// The names are in `thresher.names`: their count and digest (absent: in `feature_names`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    feature_names_file: Option<(u64, u64)>,
    learners: Vec<LearnerHeader>,
    /// Absent in files written before the NATS source: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pending_acks: Vec<String>,
    /// Absent in files written before the write-ahead log: 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    wal_through: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Serialize, Deserialize)]
struct LearnerHeader {
    identity: LearnerIdentity,
    snapshot: Option<Snapshot>,
    samples_seen: u64,
    steps: u64,
    mutations: u64,
    progressive_loss_sum: f64,
    progressive_count: u64,
    #[serde(default)]
    numeric_faults: u64,
    last_certificate: Option<Certificate>,
    scale: f64,
    /// The intercept's bits (absent, so 0, in checkpoints written before it existed).
    #[serde(default)]
    intercept_bits: u64,
    steps_since_insert: u64,
    window_len: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    primal: Option<PrimalBits>,
    /// The state's floats above as bit patterns, which override them when present (files written
    /// before it have only the JSON numbers, which `serde_json` may parse an ulp off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exact: Option<ExactBits>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    auto: Option<AutoBits>,
}

/// The bit patterns of a learner state's header floats, so a resumed learner is the saved one bit
/// for bit.
#[derive(Serialize, Deserialize)]
struct ExactBits {
    /// `identity.lambda`, compared with the config's at restore.
    lambda: u64,
    progressive_loss_sum: u64,
    scale: u64,
    /// `(primal, dual, gap)` of `last_certificate`.
    certificate: Option<(u64, u64, u64)>,
}

/// [`AutoState`] (`lambda = "auto"`) with every float as its bit pattern.
#[derive(Serialize, Deserialize)]
struct AutoBits {
    grid: Vec<u64>,
    live: usize,
    switches: u64,
    since_switch: u64,
    loss: Vec<u64>,
    weight: Vec<u64>,
    /// Absent in checkpoints written before the `holdout` criterion.
    #[serde(default)]
    holdout: Vec<u64>,
}

impl AutoBits {
    fn from_state(a: &AutoState) -> AutoBits {
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect();
        AutoBits {
            grid: bits(&a.grid),
            live: a.live,
            switches: a.switches,
            since_switch: a.since_switch,
            loss: bits(&a.loss),
            weight: bits(&a.weight),
            holdout: bits(&a.holdout),
        }
    }

    fn into_state(self) -> AutoState {
        let floats = |v: Vec<u64>| v.into_iter().map(f64::from_bits).collect();
        AutoState {
            grid: floats(self.grid),
            live: self.live,
            switches: self.switches,
            since_switch: self.since_switch,
            loss: floats(self.loss),
            weight: floats(self.weight),
            holdout: floats(self.holdout),
        }
    }
}

/// [`PrimalState`] with every float as its bit pattern (JSON number parsing may be off by an ulp).
#[derive(Serialize, Deserialize)]
struct PrimalBits {
    /// `(j, w_j bits, theta_j bits)`.
    coordinates: Vec<(u32, u64, u64)>,
    solver_steps: u64,
    row_sq_max: u64,
    #[serde(default)]
    active: Vec<u32>,
    /// The intercept's bits (absent in checkpoints written before streaming intercepts: 0).
    #[serde(default)]
    intercept: u64,
}

impl PrimalBits {
    fn from_state(p: &PrimalState) -> PrimalBits {
        PrimalBits {
            coordinates: p
                .coordinates
                .iter()
                .map(|&(j, w, t)| (j, w.to_bits(), t.to_bits()))
                .collect(),
            solver_steps: p.solver_steps,
            row_sq_max: p.row_sq_max.to_bits(),
            active: p.active.clone(),
            intercept: p.intercept.to_bits(),
        }
    }

    fn into_state(self) -> PrimalState {
        PrimalState {
            coordinates: self
                .coordinates
                .into_iter()
                .map(|(j, w, t)| (j, f64::from_bits(w), f64::from_bits(t)))
                .collect(),
            solver_steps: self.solver_steps,
            row_sq_max: f64::from_bits(self.row_sq_max),
            active: self.active,
            intercept: f64::from_bits(self.intercept),
        }
    }
}

pub fn path_in(dir: &Path) -> PathBuf {
    dir.join(FILE_NAME)
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Serialises a checkpoint to bytes.
pub fn encode(ckpt: &Checkpoint) -> Vec<u8> {
    let header = Header {
        feature_names: ckpt.feature_names.clone(),
        feature_kind: Some(ckpt.feature_kind.name().to_string()),
        feature_names_file: ckpt.feature_names_file,
        pending_acks: ckpt.pending_acks.clone(),
        wal_through: ckpt.wal_through,
        learners: ckpt
            .learners
            .iter()
            .map(|l| LearnerHeader {
                identity: l.identity.clone(),
                snapshot: l.snapshot.clone(),
                samples_seen: l.state.stats.samples_seen,
                steps: l.state.stats.steps,
                mutations: l.state.stats.mutations,
                progressive_loss_sum: l.state.stats.progressive_loss_sum,
                progressive_count: l.state.stats.progressive_count,
                numeric_faults: l.state.stats.numeric_faults,
                last_certificate: l.state.last_certificate,
                scale: l.state.scale,
                intercept_bits: l.state.intercept.to_bits(),
                steps_since_insert: l.state.steps_since_insert,
                window_len: l.state.samples.len() as u64,
                primal: l.state.primal.as_ref().map(PrimalBits::from_state),
                exact: Some(ExactBits {
                    lambda: l.identity.lambda.to_bits(),
                    progressive_loss_sum: l.state.stats.progressive_loss_sum.to_bits(),
                    scale: l.state.scale.to_bits(),
                    certificate: l
                        .state
                        .last_certificate
                        .map(|c| (c.primal.to_bits(), c.dual.to_bits(), c.gap.to_bits())),
                }),
                auto: l.state.auto.as_ref().map(AutoBits::from_state),
            })
            .collect(),
    };
    let header = serde_json::to_vec(&header).expect("checkpoint header serialises");
    let mut body = Vec::new();
    body.extend_from_slice(&(header.len() as u64).to_le_bytes());
    body.extend_from_slice(&header);
    for l in &ckpt.learners {
        for (s, alpha) in &l.state.samples {
            body.extend_from_slice(&s.label.to_le_bytes());
            body.extend_from_slice(&s.weight.unwrap_or(f64::NAN).to_le_bytes());
            body.extend_from_slice(&alpha.to_le_bytes());
            body.extend_from_slice(&(s.indices.len() as u32).to_le_bytes());
            for j in &s.indices {
                body.extend_from_slice(&j.to_le_bytes());
            }
            for v in &s.values {
                body.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
    let mut out = Vec::with_capacity(body.len() + 28);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&body);
    out.extend_from_slice(&fnv1a(&body).to_le_bytes());
    out
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or("unexpected end of data")?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn f64(&mut self) -> Result<f64, String> {
        Ok(f64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
}

/// Parses checkpoint bytes; `path` only names the file in errors.
pub fn decode(bytes: &[u8], path: &Path) -> Result<Checkpoint, CheckpointError> {
    let corrupt = |reason: String| CheckpointError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    if bytes.len() < 20 || &bytes[..8] != MAGIC {
        return Err(corrupt(format!(
            "not a thresher checkpoint ({} bytes, bad magic)",
            bytes.len()
        )));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if version != FORMAT_VERSION {
        return Err(CheckpointError::Incompatible {
            path: path.to_path_buf(),
            reason: format!("format version {version}, this build reads {FORMAT_VERSION}"),
        });
    }
    let len = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes")) as usize;
    if bytes.len() != 20 + len + 8 {
        return Err(corrupt(format!(
            "truncated: {} bytes, expected {}",
            bytes.len(),
            20 + len + 8
        )));
    }
    let body = &bytes[20..20 + len];
    let stored = u64::from_le_bytes(bytes[20 + len..].try_into().expect("8 bytes"));
    if fnv1a(body) != stored {
        return Err(corrupt("checksum mismatch".into()));
    }
    let mut c = Cursor { bytes: body, at: 0 };
    let parse = |c: &mut Cursor| -> Result<Checkpoint, String> {
        let header_len = c.u64()? as usize;
        let header: Header =
            serde_json::from_slice(c.take(header_len)?).map_err(|e| e.to_string())?;
        let mut learners = Vec::new();
        for mut h in header.learners {
            if let Some(exact) = h.exact.take() {
                h.identity.lambda = f64::from_bits(exact.lambda);
                h.progressive_loss_sum = f64::from_bits(exact.progressive_loss_sum);
                h.scale = f64::from_bits(exact.scale);
                if let (Some(c), Some((p, d, g))) = (h.last_certificate.as_mut(), exact.certificate)
                {
                    (c.primal, c.dual, c.gap) =
                        (f64::from_bits(p), f64::from_bits(d), f64::from_bits(g));
                }
            }
            let mut samples = Vec::with_capacity(h.window_len.min(1 << 24) as usize);
            for _ in 0..h.window_len {
                let label = c.f64()?;
                let weight = c.f64()?;
                let alpha = c.f64()?;
                let nnz = c.u32()? as usize;
                let indices = (0..nnz).map(|_| c.u32()).collect::<Result<Vec<_>, _>>()?;
                let values = (0..nnz).map(|_| c.f64()).collect::<Result<Vec<_>, _>>()?;
                let weight = (!weight.is_nan()).then_some(weight);
                let s = Sample::new(indices, values, label, weight).map_err(|e| e.to_string())?;
                samples.push((s, alpha));
            }
            learners.push(LearnerCheckpoint {
                identity: h.identity,
                snapshot: h.snapshot,
                state: LearnerState {
                    samples,
                    stats: LearnerStats {
                        samples_seen: h.samples_seen,
                        steps: h.steps,
                        mutations: h.mutations,
                        progressive_loss_sum: h.progressive_loss_sum,
                        progressive_count: h.progressive_count,
                        numeric_faults: h.numeric_faults,
                    },
                    last_certificate: h.last_certificate,
                    scale: h.scale,
                    intercept: f64::from_bits(h.intercept_bits),
                    steps_since_insert: h.steps_since_insert,
                    primal: h.primal.map(PrimalBits::into_state),
                    auto: h.auto.map(AutoBits::into_state),
                },
            });
        }
        if c.at != c.bytes.len() {
            return Err("trailing bytes".into());
        }
        Ok(Checkpoint {
            learners,
            feature_kind: match header.feature_kind.as_deref() {
                None => FeatureKind::Open,
                Some(k) => FeatureKind::from_name(k)
                    .ok_or_else(|| format!("unknown feature kind {k:?}"))?,
            },
            feature_names: header.feature_names,
            feature_names_file: header.feature_names_file,
            pending_acks: header.pending_acks,
            wal_through: header.wal_through,
        })
    };
    parse(&mut c).map_err(corrupt)
}

impl LearnerIdentity {
    /// The identity `config` gives its learner (what a checkpoint must match to restore into it).
    pub fn of(config: &LearnerConfig) -> LearnerIdentity {
        LearnerIdentity {
            name: config.name.clone(),
            loss: config.loss.kind().name().into(),
            k: config.k,
            lambda: config.lambda,
        }
    }
}

/// The NATS deliveries each learner has absorbed, and the NATS source's ledger of unacknowledged
/// batches, if the source is on. Built with the learners; a checkpoint is what lets a delivery be
/// acknowledged, so the [`Checkpointer`] reads both.
pub struct Deliveries {
    /// One counter per learner, in config order: raised by the learner's thread under its lock as it
    /// absorbs a NATS batch, read under the same lock when its state is checkpointed.
    pub absorbed: Vec<Arc<Absorbed>>,
    /// The NATS source's batches not yet acknowledged (shared with the source, which enters them);
    /// told after each checkpoint which deliveries it holds. `None` without the NATS source.
    pub ledger: Option<Arc<AckLedger>>,
}

/// What a checkpoint reflects: each learner's mutation counter, published version, absorbed NATS
/// delivery and write-ahead log batch, and the number of feature names (which only grow). Equal
/// marks mean an unchanged state.
type ChangeMark = (Vec<(u64, u64, u64, u64)>, usize);

fn change_mark(
    learners: &[(SharedLearner, Arc<ModelCell>)],
    dictionary: &FeatureDictionary,
    deliveries: &Deliveries,
) -> ChangeMark {
    let per_learner = learners
        .iter()
        .zip(&deliveries.absorbed)
        .map(|((l, cell), absorbed)| {
            let l = l.lock();
            let mutations = l.stats().mutations;
            let delivery = absorbed.delivery.load(Ordering::Acquire);
            let logged = absorbed.logged.load(Ordering::Acquire);
            drop(l);
            let version = cell.get().map_or(0, |s| s.version);
            (mutations, version, delivery, logged)
        })
        .collect();
    (per_learner, dictionary.len())
}

/// Whether [`Checkpointer::write`] wrote a file.
#[derive(Debug, PartialEq)]
enum Written {
    Yes,
    /// Nothing changed since the checkpoint on disk: not rewritten.
    Unchanged,
}

/// Writes the checkpoints of a daemon with a data directory: shared by the checkpoint thread (every
/// `checkpoint.interval_s`) and the shutdown (the final checkpoint, once the checkpoint thread has
/// ended).
pub struct Checkpointer {
    /// The data directory (`--data-dir`).
    dir: PathBuf,
    /// Every learner with its published cell, in config order (the same handles the learner threads
    /// and the HTTP handlers hold).
    learners: Vec<(SharedLearner, Arc<ModelCell>)>,
    dictionary: Arc<FeatureDictionary>,
    metrics: Metrics,
    deliveries: Arc<Deliveries>,
    /// The write-ahead log, truncated after each checkpoint to what the checkpoint does not hold.
    wal: Option<Arc<Wal>>,
    /// Told of every failed and every successful write (`GET /readyz`).
    persistence: Arc<Persistence>,
    /// The mark of the checkpoint on disk (`None`: none yet, or one that did not hold exactly the
    /// configured learners, so the next one is written even if nothing changes). Locked for a whole
    /// write: the checkpoint thread and the final checkpoint never interleave.
    written: Mutex<Option<ChangeMark>>,
    /// `(count, digest)` of the names in the dictionary's file as last written by this daemon
    /// (`None`: not yet): the file is rewritten only when the dictionary has grown.
    names_written: Mutex<Option<(u64, u64)>>,
}

impl Checkpointer {
    /// A writer for `dir`. `restored_exactly`: the file there holds exactly these learners, just
    /// restored from it, so it reflects their state now (nothing to write until they change).
    pub fn new(
        dir: PathBuf,
        learners: Vec<(SharedLearner, Arc<ModelCell>)>,
        dictionary: Arc<FeatureDictionary>,
        metrics: Metrics,
        deliveries: Arc<Deliveries>,
        restored_exactly: bool,
    ) -> Checkpointer {
        let written = restored_exactly.then(|| change_mark(&learners, &dictionary, &deliveries));
        Checkpointer {
            dir,
            learners,
            dictionary,
            metrics,
            deliveries,
            wal: None,
            persistence: Arc::default(),
            written: Mutex::new(written),
            names_written: Mutex::new(None),
        }
    }

    /// Truncates `wal` after each checkpoint and reports failures to `persistence`.
    pub fn with_wal(
        mut self,
        wal: Option<Arc<Wal>>,
        persistence: Arc<Persistence>,
    ) -> Checkpointer {
        self.wal = wal;
        self.persistence = persistence;
        self
    }

    /// After a checkpoint holding every logged batch up to `covered` is on disk (written now, or
    /// unchanged): the log keeps only what it does not hold.
    fn truncate_log(&self, covered: u64) {
        if let Some(wal) = &self.wal {
            if let Err(e) = wal.truncate_through(covered) {
                tracing::error!(error = %e, "cannot truncate the write-ahead log");
            }
        }
    }

    /// The final checkpoint, at shutdown, logged. A refused one (a non-finite number) is no error:
    /// the previous file stays, and the fault was logged and counted.
    pub fn write_final(&self) -> Result<(), CheckpointError> {
        let dir = &self.dir;
        match self.write() {
            Ok(Written::Yes) => tracing::info!(dir = %dir.display(), "final checkpoint written"),
            Ok(Written::Unchanged) => {
                tracing::info!(dir = %dir.display(), "final checkpoint: nothing changed since the last one")
            }
            Err(CheckpointError::NonFinite { .. }) => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// Writes every learner's state and published snapshot (each learner locked in turn), unless
    /// nothing changed since the checkpoint on disk: an idle daemon does not rewrite the same
    /// checkpoint every interval. A state or snapshot holding a non-finite number is refused (the
    /// previous file stays): a checkpoint must always restore.
    ///
    /// NATS: the file holds every delivery all learners had absorbed when their states were taken
    /// (read under each learner's lock, like the state); once it is on disk those may be acknowledged,
    /// and it lists the ones not yet acknowledged so a restart can acknowledge them.
    fn write(&self) -> Result<Written, CheckpointError> {
        use crate::metrics::checkpoint_outcome as outcome;
        let mut last = self.written.lock();
        let count = |o: &str| self.metrics.checkpoints.with_label_values(&[o]).inc();
        let mark = change_mark(&self.learners, &self.dictionary, &self.deliveries);
        if last.as_ref() == Some(&mark) {
            // The file on disk holds what the learners hold now.
            if let Some(ledger) = &self.deliveries.ledger {
                let covered = mark.0.iter().map(|m| m.2).min().unwrap_or(0);
                ledger.durable_through(covered);
            }
            self.truncate_log(mark.0.iter().map(|m| m.3).min().unwrap_or(0));
            self.persistence.recovered();
            count(outcome::UNCHANGED);
            return Ok(Written::Unchanged);
        }
        let (mut ckpt, covered) = self.take();
        if let Some(l) = ckpt
            .learners
            .iter()
            .find(|l| !l.state.is_finite() || l.snapshot.as_ref().is_some_and(|s| !s.is_finite()))
        {
            count(outcome::REFUSED);
            let e = CheckpointError::NonFinite {
                path: path_in(&self.dir),
                learner: l.identity.name.clone(),
            };
            tracing::error!(error = %e, "checkpoint refused");
            return Err(e);
        }
        // After the learners' states were taken: the file holds every name they use.
        if let Err(source) = self.sync_names(&mut ckpt) {
            count(outcome::FAILED);
            return Err(CheckpointError::Io {
                path: super::names_file::path_in(&self.dir),
                source,
            });
        }
        match write(&self.dir, &ckpt) {
            Ok(()) => {
                count(outcome::WRITTEN);
                *last = Some(mark);
                if let Some(ledger) = &self.deliveries.ledger {
                    ledger.durable_through(covered);
                }
                self.truncate_log(ckpt.wal_through);
                self.persistence.recovered();
                Ok(Written::Yes)
            }
            Err(e) => {
                count(outcome::FAILED);
                self.persistence.failed(e.to_string());
                Err(e)
            }
        }
    }

    /// Points `ckpt` at the dictionary's file, rewriting the file first if the dictionary has grown
    /// since it was last written (an unchanged dictionary is not rewritten).
    fn sync_names(&self, ckpt: &mut Checkpoint) -> std::io::Result<()> {
        let mut written = self.names_written.lock();
        let reference = match *written {
            Some((count, digest)) if count == self.dictionary.len() as u64 => (count, digest),
            _ => {
                let names = self.dictionary.names();
                std::fs::create_dir_all(&self.dir)?;
                super::names_file::write(&self.dir, &names)?;
                (names.len() as u64, super::names_file::digest(&names))
            }
        };
        *written = Some(reference);
        ckpt.feature_names = Vec::new();
        ckpt.feature_names_file = Some(reference);
        Ok(())
    }

    /// The checkpoint of every learner now, and the last NATS delivery all of them had absorbed.
    /// The dictionary is read after the learners, so it names every feature their states hold.
    fn take(&self) -> (Checkpoint, u64) {
        let (mut covered, mut logged) = (u64::MAX, u64::MAX);
        let learner_checkpoints = self
            .learners
            .iter()
            .zip(&self.deliveries.absorbed)
            .map(|((l, cell), absorbed)| {
                let l = l.lock();
                covered = covered.min(absorbed.delivery.load(Ordering::Acquire));
                logged = logged.min(absorbed.logged.load(Ordering::Acquire));
                LearnerCheckpoint {
                    identity: LearnerIdentity::of(l.config()),
                    snapshot: cell.get().map(|s| (*s).clone()),
                    state: l.state(),
                }
            })
            .collect();
        let covered = if covered == u64::MAX { 0 } else { covered };
        let ckpt = Checkpoint {
            wal_through: if logged == u64::MAX { 0 } else { logged },
            // The names go to their own file ([`Checkpointer::sync_names`]).
            feature_names: Vec::new(),
            feature_kind: self.dictionary.kind(),
            feature_names_file: None,
            learners: learner_checkpoints,
            pending_acks: self
                .deliveries
                .ledger
                .as_ref()
                .map_or_else(Vec::new, |l| l.held(covered)),
        };
        (ckpt, covered)
    }
}

/// When the checkpoint thread looks and writes.
#[derive(Debug, Clone, Copy)]
pub struct Cadence {
    /// `snapshot.interval_ms`: how often the thread wakes to look.
    pub tick: Duration,
    /// `checkpoint.interval_s`: a checkpoint at least this often.
    pub every: Duration,
    /// `nats.ack_interval_ms`, with the NATS source: batches from NATS wait for a checkpoint to be
    /// acknowledged, so one is written at least this often while some wait.
    pub ack_every: Option<Duration>,
}

/// The checkpoint thread: writes a checkpoint on its [`Cadence`] (with a data directory) until
/// stopped, then publishes every learner's final snapshot. Started after the learner threads;
/// stopped by the shutdown once they have ended, before the final checkpoint.
pub struct CheckpointThread {
    /// Raised by [`CheckpointThread::stop`]; the thread reads it every tick (at most 20 ms late).
    stop: Arc<AtomicBool>,
    handle: JoinHandle<()>,
}

impl CheckpointThread {
    /// Spawns the thread, named `checkpoint`. Without a `checkpointer` (no data directory) it only
    /// publishes the final snapshots.
    pub fn spawn(
        cadence: Cadence,
        learners: Vec<(SharedLearner, Arc<ModelCell>)>,
        metrics: Metrics,
        checkpointer: Option<Arc<Checkpointer>>,
    ) -> CheckpointThread {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let handle = std::thread::Builder::new()
            .name("checkpoint".into())
            .spawn(move || {
                let mut last_checkpoint = Instant::now();
                every_tick_until(cadence.tick, &stopped, || {
                    if let Some(checkpointer) = &checkpointer {
                        if cadence.due(last_checkpoint.elapsed(), &checkpointer.deliveries) {
                            last_checkpoint = Instant::now();
                            if let Err(e) = checkpointer.write() {
                                tracing::error!(error = %e, "periodic checkpoint failed");
                                // Retried at the next tick, not a whole interval later: /readyz
                                // turns ready as soon as a checkpoint succeeds again.
                                last_checkpoint = Instant::now()
                                    .checked_sub(cadence.every.saturating_sub(cadence.retry()))
                                    .unwrap_or(last_checkpoint);
                            }
                        }
                    }
                });
                for (learner, cell) in &learners {
                    publish(learner, cell, &metrics);
                }
            })
            .expect("spawn checkpoint thread");
        CheckpointThread { stop, handle }
    }

    /// Stops the thread once it has published the final snapshots (call it after the learner threads
    /// have ended).
    pub fn stop(self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.handle.join();
    }
}

impl Cadence {
    /// How soon a failed checkpoint is tried again: at least a second apart.
    fn retry(&self) -> Duration {
        self.tick.max(Duration::from_secs(1)).min(self.every)
    }

    /// Whether a checkpoint is due `since` the last one.
    fn due(&self, since: Duration, deliveries: &Deliveries) -> bool {
        let acks_wait = self.ack_every.is_some_and(|every| {
            since >= every
                && deliveries
                    .ledger
                    .as_ref()
                    .is_some_and(|l| l.awaiting_checkpoint())
        });
        since >= self.every || acks_wait
    }
}

/// Runs `on_tick` every `interval` until `stop`, looking at `stop` at least every 20 ms.
fn every_tick_until(interval: Duration, stop: &AtomicBool, mut on_tick: impl FnMut()) {
    let mut next = Instant::now() + interval;
    while !stop.load(Ordering::Acquire) {
        let now = Instant::now();
        if now < next {
            std::thread::sleep((next - now).min(Duration::from_millis(20)));
            continue;
        }
        next = now + interval;
        on_tick();
    }
}

mod files;
pub use files::{check_writable, read, write};

#[cfg(test)]
mod tests;
