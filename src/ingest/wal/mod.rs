//! The write-ahead log of acknowledged samples (`[durability] wal`): every batch the HTTP and stdin
//! sources admit is appended here before it is acknowledged, a checkpoint truncates what it holds, and
//! a restart replays the rest, so a `202` survives a crash between checkpoints.
//!
//! **Ordering.** [`crate::ingest::Admission`] appends a batch and offers it to the ingest queue under
//! one lock, so log sequence numbers enter the queue in order; the router keeps that order into every
//! learner, and each learner records the highest sequence it has absorbed
//! (`learner::worker::Absorbed::logged`). A checkpoint takes the smallest of those over the learners
//! (`covered`): its state holds every batch up to it, and it stores that number. Only whole segments
//! whose last batch is at most `covered` are deleted after the checkpoint is on disk; a batch logged
//! and acknowledged but not yet absorbed when the checkpoint was taken stays in the log. Replay skips
//! every batch up to the checkpoint's number, so no sample is counted twice.
//!
//! **Names.** A batch's named features already have their dictionary indices; the names given since
//! the last append, those the batch itself adds included (granted to the dictionary only once this
//! append succeeded: [`Wal::append_with`]), are written (a [`record::KIND_NAMES`] record) just before
//! the batch, in the same append, so a replay rebuilds the same dictionary, index for index. With hashed
//! names (`ingest.feature_names = "hashed"`) each segment starts with the hash's bits and seed instead
//! ([`record::KIND_HASHING`]), and a replay under another hashing, or the dictionary, is refused.
//!
//! **Files.** Segments `<data-dir>/thresher.wal.NNNNNNNNNN` (numbered in order), each a header and
//! framed records ([`record`]). Appends go to the newest; it is closed (fsynced) and a new one started
//! past `wal_max_bytes / 8` (1 to 64 MiB), so truncation frees space in steps. The total on disk is
//! bounded by `durability.wal_max_bytes`: an append that would pass it is refused
//! ([`WalError::Full`], a `503` at the HTTP edge, counted as `wal_full`). A torn last record (a kill
//! mid-write) is cut off at start and logged; a bad record inside an older segment stops the start.
//!
//! **Fsync.** `batch`: a thread (`wal-sync`) fsyncs every `wal_fsync_interval_ms` when something was
//! written; `always`: [`Wal::sync_through`] is called before the `202`, and concurrent callers share
//! one fsync (group commit: whoever finds no fsync running does one for everything written so far;
//! the others wait for it).

pub mod record;

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use thiserror::Error;

use crate::config::{DurabilityConfig, WalMode};
use crate::ingest::batch::FeatureDictionary;
use crate::ingest::dictionary::NameView;
use crate::ingest::hashed::Hashing;
use crate::metrics::Metrics;
use crate::sample::SampleBlock;
use record::{End, Reader, Record, SEGMENT_MAGIC};

/// Segment file names: this prefix and a ten-digit number.
pub const SEGMENT_PREFIX: &str = "thresher.wal.";

#[derive(Debug, Error)]
pub enum WalError {
    #[error("the write-ahead log is full ({max} bytes, durability.wal_max_bytes); it is truncated by the next checkpoint")]
    Full { max: u64 },
    #[error("cannot write the write-ahead log {}: {reason}", path.display())]
    Io { path: PathBuf, reason: String },
    #[error("write-ahead log {} does not fit this daemon: {reason} (start with the settings it was written with, or move the file away to start without it)", path.display())]
    Mismatch { path: PathBuf, reason: String },
    #[error("write-ahead log {} is corrupt at byte {offset}: {reason} (move the file away to start without it)", path.display())]
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
}

/// An I/O error on `path`, "no space left on device" named as such.
pub fn io_error(path: &Path, e: &std::io::Error) -> WalError {
    WalError::Io {
        path: path.to_path_buf(),
        reason: describe_io(e),
    }
}

/// An I/O error's text, a full disk named as such.
pub fn describe_io(e: &std::io::Error) -> String {
    if crate::sys::is_disk_full(e) {
        "no space left on device".into()
    } else {
        e.to_string()
    }
}

/// One segment file.
#[derive(Debug)]
struct Segment {
    number: u64,
    path: PathBuf,
    bytes: u64,
    /// The last batch's sequence number in it (0: none).
    last_seq: u64,
}

/// The appending side, under one lock.
struct Log {
    /// The newest segment (the last of `segments`), opened for appending.
    file: Arc<File>,
    segments: VecDeque<Segment>,
    total: u64,
    next_seq: u64,
    /// Dictionary names already in the log.
    names_logged: usize,
    /// The newest segment holds the hashing record (hashed names: [`record::KIND_HASHING`]).
    hashing_logged: bool,
}

/// The group commit's state.
#[derive(Default)]
struct Synced {
    /// Every batch up to this sequence is fsynced.
    through: u64,
    /// An fsync is running (its caller updates `through` and wakes the waiters).
    syncing: bool,
}

/// The write-ahead log of one data directory.
pub struct Wal {
    dir: PathBuf,
    mode: WalMode,
    max_bytes: u64,
    segment_bytes: u64,
    log: Mutex<Log>,
    synced: Mutex<Synced>,
    synced_changed: Condvar,
    metrics: Metrics,
    /// The segments found at open, in order: what [`Wal::replay`] reads.
    found: Vec<PathBuf>,
}

impl Wal {
    /// Opens the log in `dir` (the data directory, locked by this process): reads every segment
    /// there to find the last batch (a torn last record is cut off), and starts a new segment for
    /// appends. `through`: the checkpoint's last batch (0 without one), which sequence numbers
    /// continue past. `fresh`: discard the old segments (`--fresh`).
    pub fn open(
        dir: &Path,
        config: &DurabilityConfig,
        through: u64,
        fresh: bool,
        metrics: Metrics,
    ) -> Result<Arc<Wal>, WalError> {
        let mut segments = VecDeque::new();
        for (number, path) in list_segments(dir)? {
            if fresh {
                std::fs::remove_file(&path).map_err(|e| io_error(&path, &e))?;
                continue;
            }
            segments.push_back(Segment {
                number,
                path,
                bytes: 0,
                last_seq: 0,
            });
        }
        let last_index = segments.len().checked_sub(1);
        for (i, segment) in segments.iter_mut().enumerate() {
            scan(segment, Some(i) == last_index)?;
        }
        let found = segments.iter().map(|s| s.path.clone()).collect();
        let last_seq = segments.iter().map(|s| s.last_seq).max().unwrap_or(0);
        let number = segments.back().map_or(1, |s| s.number + 1);
        let segment_bytes = (config.wal_max_bytes / 8).clamp(1 << 20, 64 << 20);
        let (file, segment) = create_segment(dir, number)?;
        segments.push_back(segment);
        let total = segments.iter().map(|s| s.bytes).sum();
        let next_seq = last_seq.max(through) + 1;
        let wal = Arc::new(Wal {
            dir: dir.to_path_buf(),
            mode: config.wal,
            max_bytes: config.wal_max_bytes,
            segment_bytes,
            log: Mutex::new(Log {
                file: Arc::new(file),
                segments,
                total,
                next_seq,
                names_logged: 0,
                hashing_logged: false,
            }),
            synced: Mutex::new(Synced {
                through: next_seq - 1,
                syncing: false,
            }),
            synced_changed: Condvar::new(),
            metrics,
            found,
        });
        wal.metrics.wal_bytes.set(total as i64);
        if config.wal == WalMode::Batch {
            spawn_syncer(Arc::downgrade(&wal), config.wal_fsync_interval);
        }
        Ok(wal)
    }

    /// `durability.wal`.
    pub fn mode(&self) -> WalMode {
        self.mode
    }

    /// Replays the segments found at open, in order: every names record into `dictionary`, and every
    /// batch after `through` (the checkpoint's last) to `feed` with its sequence number, one at a
    /// time. `feed` returns `false` to stop (the daemon is stopping). Returns the batches fed.
    pub fn replay(
        &self,
        through: u64,
        dictionary: &FeatureDictionary,
        mut feed: impl FnMut(SampleBlock, u64) -> bool,
    ) -> Result<u64, WalError> {
        let mut fed = 0;
        // Names the checkpoint's dictionary already holds are checked against it, not re-added.
        self.log.lock().names_logged = 0;
        for path in &self.found {
            let mut reader = Reader::open(path).map_err(|e| io_error(path, &e))?;
            while let Some(record) = reader.next_record().map_err(|e| io_error(path, &e))? {
                check_hashing(&record, dictionary).map_err(|reason| WalError::Mismatch {
                    path: path.clone(),
                    reason,
                })?;
                match record {
                    Record::Hashing { .. } => {}
                    Record::Names { start, names } => {
                        dictionary
                            .restore_names(start as usize, &names)
                            .map_err(|reason| WalError::Corrupt {
                                path: path.clone(),
                                offset: 0,
                                reason,
                            })?;
                    }
                    Record::Samples { seq, block } if seq > through => {
                        self.metrics.wal_replayed_records.inc();
                        fed += 1;
                        if !feed(block, seq) {
                            return Ok(fed);
                        }
                    }
                    Record::Samples { .. } => {}
                }
            }
        }
        self.log.lock().names_logged = dictionary.len();
        Ok(fed)
    }

    /// Appends `framed` (a samples record, [`record::encode_samples`]), preceded by the names the
    /// dictionary gave since the last append; returns its sequence number. The caller holds the
    /// admission lock, so numbers and queue order agree. Nothing is left of a failed append.
    pub fn append(&self, framed: Vec<u8>, dictionary: &FeatureDictionary) -> Result<u64, WalError> {
        dictionary.view(|names| self.append_with(framed, names))
    }

    /// [`Wal::append`] with the dictionary's names as `names` shows them (those a batch's claim adds
    /// included, before the dictionary holds them: `FeatureDictionary::grant`).
    pub fn append_with(&self, mut framed: Vec<u8>, view: &NameView<'_>) -> Result<u64, WalError> {
        let mut log = self.log.lock();
        let names_now = view.len();
        let names = (names_now > log.names_logged).then(|| {
            record::encode_names(log.names_logged as u64, &view.names_from(log.names_logged))
        });
        let rotate = log
            .segments
            .back()
            .is_some_and(|s| s.bytes >= self.segment_bytes);
        // Hashed names: every segment starts with the hashing record.
        let hashing = view
            .hashing()
            .filter(|_| rotate || !log.hashing_logged)
            .map(|h| record::encode_hashing(h.bits, h.seed));
        let names = match (hashing, names) {
            (Some(mut h), Some(n)) => {
                h.extend_from_slice(&n);
                Some(h)
            }
            (h, n) => h.or(n),
        };
        let need = framed.len() as u64 + names.as_ref().map_or(0, |n| n.len() as u64);
        if log.total + need > self.max_bytes {
            return Err(WalError::Full {
                max: self.max_bytes,
            });
        }
        if rotate {
            self.rotate(&mut log)?;
        }
        let seq = log.next_seq;
        record::seal(&mut framed, seq);
        let current = log.segments.back().expect("a current segment");
        let (path, before) = (current.path.clone(), current.bytes);
        let mut file: &File = &log.file;
        let written = names
            .as_deref()
            .map_or(Ok(()), |n| file.write_all(n))
            .and_then(|()| file.write_all(&framed));
        if let Err(e) = written {
            // Cut the partial record off: the next append must follow a whole one.
            let _ = log.file.set_len(before);
            return Err(io_error(&path, &e));
        }
        let current = log.segments.back_mut().expect("a current segment");
        current.bytes += need;
        current.last_seq = seq;
        log.total += need;
        log.next_seq += 1;
        log.names_logged = names_now;
        log.hashing_logged = view.hashing().is_some();
        self.metrics.wal_appended_bytes.inc_by(need);
        self.metrics.wal_appended_records.inc();
        self.metrics.wal_bytes.set(log.total as i64);
        Ok(seq)
    }

    /// Returns once every batch up to `seq` is fsynced (group commit: one caller fsyncs for all that
    /// is written, the others wait for it).
    pub fn sync_through(&self, seq: u64) -> Result<(), WalError> {
        let mut synced = self.synced.lock();
        loop {
            if synced.through >= seq {
                return Ok(());
            }
            if !synced.syncing {
                synced.syncing = true;
                drop(synced);
                let result = self.sync_now();
                synced = self.synced.lock();
                synced.syncing = false;
                if let Ok(target) = result {
                    synced.through = synced.through.max(target);
                }
                self.synced_changed.notify_all();
                result?;
                continue;
            }
            self.synced_changed.wait(&mut synced);
        }
    }

    /// Fsyncs the newest segment; returns the last batch it holds (older segments were fsynced when
    /// closed).
    fn sync_now(&self) -> Result<u64, WalError> {
        let (file, target, path) = {
            let log = self.log.lock();
            let current = log.segments.back().expect("a current segment");
            (log.file.clone(), log.next_seq - 1, current.path.clone())
        };
        file.sync_data().map_err(|e| io_error(&path, &e))?;
        self.metrics.wal_fsyncs.inc();
        Ok(target)
    }

    /// The last batch appended (0: none yet).
    pub fn last_seq(&self) -> u64 {
        self.log.lock().next_seq - 1
    }

    /// A checkpoint holding every batch up to `covered` is on disk: deletes the segments it wholly
    /// holds (the newest too, after starting a new one, if it holds batches and all are covered).
    pub fn truncate_through(&self, covered: u64) -> Result<(), WalError> {
        let mut log = self.log.lock();
        let newest_covered = log
            .segments
            .back()
            .is_some_and(|s| s.last_seq > 0 && s.last_seq <= covered);
        if newest_covered {
            self.rotate(&mut log)?;
        }
        while log.segments.len() > 1 && log.segments[0].last_seq <= covered {
            let old = log.segments.pop_front().expect("two segments");
            if let Err(e) = std::fs::remove_file(&old.path) {
                log.segments.push_front(old);
                return Err(io_error(&log.segments[0].path, &e));
            }
            log.total -= old.bytes;
        }
        self.metrics.wal_bytes.set(log.total as i64);
        Ok(())
    }

    /// Closes the newest segment (fsynced) and starts the next.
    fn rotate(&self, log: &mut Log) -> Result<(), WalError> {
        let current = log.segments.back().expect("a current segment");
        log.file
            .sync_data()
            .map_err(|e| io_error(&current.path, &e))?;
        let (file, segment) = create_segment(&self.dir, current.number + 1)?;
        log.total += segment.bytes;
        log.hashing_logged = false;
        log.file = Arc::new(file);
        log.segments.push_back(segment);
        Ok(())
    }
}

/// A logged record fits the daemon's way of indexing names: a hashing record has its bits and seed,
/// and dictionary names are not replayed into a daemon that hashes names.
fn check_hashing(record: &Record, dictionary: &FeatureDictionary) -> Result<(), String> {
    let ours = dictionary.hashed().map(|h| h.hashing());
    let describe = |h: Option<Hashing>| {
        h.map_or_else(
            || "the feature dictionary (ingest.feature_names = \"dictionary\")".to_string(),
            |h| h.describe(),
        )
    };
    let logged = match record {
        Record::Hashing { bits, seed } => Some(Hashing {
            bits: *bits,
            seed: *seed,
        }),
        Record::Names { .. } => None,
        Record::Samples { .. } => return Ok(()),
    };
    if logged == ours {
        return Ok(());
    }
    Err(format!(
        "its feature names were indexed by {}, the config has {}",
        describe(logged),
        describe(ours)
    ))
}

/// The segment files in `dir`, in order.
fn list_segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>, WalError> {
    let entries = std::fs::read_dir(dir).map_err(|e| io_error(dir, &e))?;
    let mut found: Vec<(u64, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let number = name.strip_prefix(SEGMENT_PREFIX)?.parse().ok()?;
            Some((number, e.path()))
        })
        .collect();
    found.sort();
    Ok(found)
}

/// Reads a segment through to learn its size and last batch; a torn tail of the `last` segment is
/// cut off (logged), anywhere else it is [`WalError::Corrupt`].
fn scan(segment: &mut Segment, last: bool) -> Result<(), WalError> {
    let path = segment.path.clone();
    let mut reader = Reader::open(&path).map_err(|e| io_error(&path, &e))?;
    while let Some(record) = reader.next_record().map_err(|e| io_error(&path, &e))? {
        if let Record::Samples { seq, .. } = record {
            segment.last_seq = seq;
        }
    }
    let len = std::fs::metadata(&path)
        .map_err(|e| io_error(&path, &e))?
        .len();
    segment.bytes = len;
    match reader.end() {
        Some(End::Torn { offset, reason }) if last => {
            tracing::warn!(file = %path.display(), offset, reason, dropped_bytes = len - offset,
                "write-ahead log: cut off a torn last record (the process stopped mid-write)");
            let cut = if *offset == 0 { 0 } else { *offset };
            let f = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| io_error(&path, &e))?;
            f.set_len(cut).map_err(|e| io_error(&path, &e))?;
            f.sync_all().map_err(|e| io_error(&path, &e))?;
            segment.bytes = cut;
            Ok(())
        }
        Some(End::Torn { offset, reason }) => Err(WalError::Corrupt {
            path,
            offset: *offset,
            reason: reason.clone(),
        }),
        _ => Ok(()),
    }
}

/// Creates segment `number` in `dir` with its header, and fsyncs the directory so it survives.
fn create_segment(dir: &Path, number: u64) -> Result<(File, Segment), WalError> {
    let path = dir.join(format!("{SEGMENT_PREFIX}{number:010}"));
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&path)
        .map_err(|e| io_error(&path, &e))?;
    file.write_all(SEGMENT_MAGIC)
        .map_err(|e| io_error(&path, &e))?;
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    let segment = Segment {
        number,
        path,
        bytes: SEGMENT_MAGIC.len() as u64,
        last_seq: 0,
    };
    Ok((file, segment))
}

/// `batch`: fsyncs the log every `interval` while it lives (the thread ends once the log is dropped).
fn spawn_syncer(wal: Weak<Wal>, interval: Duration) {
    let spawned = std::thread::Builder::new()
        .name("wal-sync".into())
        .spawn(move || loop {
            std::thread::sleep(interval);
            let Some(wal) = wal.upgrade() else { return };
            let last = wal.last_seq();
            if let Err(e) = wal.sync_through(last) {
                tracing::error!(error = %e, "write-ahead log fsync failed");
            }
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start the write-ahead log's fsync thread");
    }
}

/// Whether the daemon can persist what it accepts: checkpoints failing make `/readyz` say not ready,
/// with the reason. Shared by the checkpoint writer (which sets it) and the HTTP handlers.
#[derive(Debug, Default)]
pub struct Persistence {
    failure: Mutex<Option<String>>,
}

impl Persistence {
    /// The last checkpoint failed for `reason`.
    pub fn failed(&self, reason: String) {
        *self.failure.lock() = Some(reason);
    }

    /// A checkpoint succeeded.
    pub fn recovered(&self) {
        self.failure.lock().take();
    }

    /// Why the daemon cannot persist now, if it cannot.
    pub fn failure(&self) -> Option<String> {
        self.failure.lock().clone()
    }
}

#[cfg(test)]
mod tests;
