//! Checkpoints: when they are written, and by whom. The file's format (every learner's full state and
//! the feature dictionary's kind) is [`mod@format`]; its atomic write and its read are `files.rs`; the
//! dictionary's names have their own file ([`super::names_file`], rewritten only when the dictionary
//! has grown).
//!
//! **Cadence.** The thread named `checkpoint` ([`CheckpointThread`]) wakes every
//! `snapshot.interval_ms` and writes a checkpoint every `checkpoint.interval_s` (and, while NATS
//! batches wait for one to be acknowledged, every `nats.ack_interval_ms`) through the
//! [`Checkpointer`], which skips a write when nothing changed. Once the learner threads have ended it
//! publishes every learner's final snapshot and ends; the shutdown then writes the final checkpoint
//! through the same [`Checkpointer`].
//!
//! Writes go to a temporary file in the same directory, are fsynced, renamed over the old checkpoint,
//! and the directory is fsynced, so a crash leaves either the old or the new checkpoint, never a torn
//! one.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use thiserror::Error;

use crate::ingest::batch::FeatureDictionary;
use crate::ingest::labels::LabelStore;
use crate::ingest::source::nats::AckLedger;
use crate::ingest::wal::{Persistence, Wal};
use crate::learner::publish::{publish, ModelCell, SharedLearner};
use crate::learner::worker::Absorbed;
use crate::metrics::Metrics;

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
    #[error(transparent)]
    Labels(#[from] crate::ingest::labels::journal::JournalError),
    #[error("checkpoint {} is corrupt: {reason} (move it away, or start with --fresh)", path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error("checkpoint {} is incompatible: {reason} (start with --fresh to discard it)", path.display())]
    Incompatible { path: PathBuf, reason: String },
    #[error("checkpoint {} not written: learner {learner:?} holds a non-finite number (the previous checkpoint is kept)", path.display())]
    NonFinite { path: PathBuf, learner: String },
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
    /// The label store, whose journal each checkpoint rewrites compactly.
    labels: Option<Arc<LabelStore>>,
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
            labels: None,
        }
    }

    /// Rewrites `labels`' journal at each checkpoint.
    pub fn with_labels(mut self, labels: Arc<LabelStore>) -> Checkpointer {
        self.labels = Some(labels);
        self
    }

    /// Rewrites the label store's journal compactly (and fsyncs it); a failure is logged and reported
    /// to `GET /readyz` like a failed checkpoint.
    fn write_labels(&self) {
        if let Some(labels) = &self.labels {
            if let Err(e) = labels.checkpoint() {
                tracing::error!(error = %e, "cannot rewrite the label store");
                self.persistence.failed(e.to_string());
            }
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
        self.write_labels();
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
            feature_hashing: self.dictionary.hashed().map(|h| h.hashing()),
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

pub mod format;
pub use format::{
    checksum, decode, encode, path_in, Checkpoint, LearnerCheckpoint, LearnerIdentity, FILE_NAME,
    FNV_VERSION, FORMAT_VERSION, MAGIC,
};
mod files;
pub use files::{check_writable, read, write};

#[cfg(test)]
mod tests;
