//! The label store on disk: `DIR/thresher.labels`, a journal of the store's changes
//! ([`super::Change`]) appended before each response, rewritten compactly (the stored samples only) at
//! each checkpoint, and read back at start.
//!
//! The file starts with [`MAGIC`] and holds framed records like the write-ahead log's
//! (`payload length u32 | CRC-32 u32 | payload`, little endian). A payload is `kind u8 | body`:
//! [`KIND_LEARNERS`] (`count u32`, then each name as `bytes u32 | UTF-8`: the columns of the served
//! scores, first in the file), [`KIND_PUT`] (`id`, `at_ms u64`, `nnz u32 | indices u32 × nnz | values
//! f64 × nnz`, `width u32 | served f64 × width`) and [`KIND_TAKE`] (`id`), an id as `bytes u32 | UTF-8`.
//!
//! **When it reaches the disk.** An append is written (to the page cache) before the response, so a
//! killed process loses nothing answered; it is fsynced before the response with `durability.wal =
//! "always"`, else at most every `durability.wal_fsync_interval_ms` (at the next append) and at every
//! checkpoint, which rewrites the file atomically (a temporary, fsync, rename, fsync of the directory).
//! A torn last record (a kill mid-write) ends the readable journal there; the rewrite at start drops it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use thiserror::Error;

use super::{Change, Stored};
use crate::config::WalMode;
use crate::ingest::wal::describe_io;
use crate::sample::ByteReader;

/// The journal's file name in the data directory.
pub const FILE_NAME: &str = "thresher.labels";
/// The first bytes of the file.
pub const MAGIC: &[u8; 8] = b"THRLBL1\n";
pub const KIND_LEARNERS: u8 = 1;
pub const KIND_PUT: u8 = 2;
pub const KIND_TAKE: u8 = 3;

#[derive(Debug, Error)]
pub enum JournalError {
    #[error("cannot write the label store {}: {reason}", path.display())]
    Io { path: PathBuf, reason: String },
    #[error("label store {} is not one (its first bytes are not {magic:?}); move it away to start without it", path.display(), magic = String::from_utf8_lossy(MAGIC))]
    Foreign { path: PathBuf },
}

/// The open journal.
pub struct Journal {
    path: PathBuf,
    file: Option<File>,
    bytes: u64,
    mode: WalMode,
    fsync_interval: Duration,
    last_sync: Instant,
    dirty: bool,
}

impl Journal {
    /// The journal of data directory `dir`, fsynced as `mode` and `fsync_interval` say (`Off`: only at
    /// checkpoints).
    pub fn new(dir: &Path, mode: WalMode, fsync_interval: Duration) -> Journal {
        Journal {
            path: dir.join(FILE_NAME),
            file: None,
            bytes: 0,
            mode,
            fsync_interval,
            last_sync: Instant::now(),
            dirty: false,
        }
    }

    fn io(&self, e: &std::io::Error) -> JournalError {
        JournalError::Io {
            path: self.path.clone(),
            reason: describe_io(e),
        }
    }

    /// Bytes in the file.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The learners the file's scores are for and its changes in order (none without a file).
    pub fn read(&mut self) -> Result<(Vec<String>, Vec<Change>), JournalError> {
        let mut bytes = Vec::new();
        match File::open(&self.path) {
            Ok(mut f) => f.read_to_end(&mut bytes).map_err(|e| self.io(&e))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), vec![])),
            Err(e) => return Err(self.io(&e)),
        };
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return Err(JournalError::Foreign {
                path: self.path.clone(),
            });
        }
        let (mut at, mut learners, mut changes) = (MAGIC.len(), Vec::new(), Vec::new());
        while at < bytes.len() {
            let decoded = frame_at(&bytes, at).and_then(|(payload, next)| {
                let record = decode(payload)?;
                Ok((record, next))
            });
            match decoded {
                Ok((Record::Learners(names), next)) => (learners, at) = (names, next),
                Ok((Record::Change(c), next)) => {
                    changes.push(c);
                    at = next;
                }
                Err(reason) => {
                    tracing::warn!(file = %self.path.display(), offset = at, %reason, "label store ends in a torn or bad record; the rest is dropped");
                    break;
                }
            }
        }
        Ok((learners, changes))
    }

    /// Appends `changes`, fsyncing as the mode says.
    pub fn append(&mut self, changes: &[Change]) -> Result<(), JournalError> {
        let mut out = Vec::new();
        for c in changes {
            frame(&mut out, &encode_change(c));
        }
        let file = match &mut self.file {
            Some(f) => f,
            None => return Err(self.io(&std::io::Error::other("the journal is not open"))),
        };
        if let Err(e) = file.write_all(&out) {
            return Err(self.io(&e));
        }
        self.bytes += out.len() as u64;
        self.dirty = true;
        let due = match self.mode {
            WalMode::Always => true,
            WalMode::Batch => self.last_sync.elapsed() >= self.fsync_interval,
            WalMode::Off => false,
        };
        if due {
            self.sync()?;
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<(), JournalError> {
        if let Some(f) = &self.file {
            f.sync_data().map_err(|e| self.io(&e))?;
        }
        self.last_sync = Instant::now();
        self.dirty = false;
        Ok(())
    }

    /// Rewrites the file atomically as `learners` and the `stored` samples, and reopens it to append.
    pub fn compact<'a>(
        &mut self,
        learners: &[String],
        stored: impl Iterator<Item = &'a Stored>,
    ) -> Result<(), JournalError> {
        let mut out = MAGIC.to_vec();
        frame(&mut out, &encode_learners(learners));
        for s in stored {
            frame(&mut out, &encode_change(&Change::Put(s.clone())));
        }
        let tmp = self
            .path
            .with_extension(format!("tmp.{}", std::process::id()));
        let written = (|| {
            let mut f = File::create(&tmp)?;
            f.write_all(&out)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(self.io(&e));
        }
        if let Some(dir) = self.path.parent().and_then(|d| File::open(d).ok()) {
            let _ = dir.sync_all();
        }
        self.file = Some(
            OpenOptions::new()
                .append(true)
                .open(&self.path)
                .map_err(|e| self.io(&e))?,
        );
        self.bytes = out.len() as u64;
        self.last_sync = Instant::now();
        self.dirty = false;
        Ok(())
    }
}

enum Record {
    Learners(Vec<String>),
    Change(Change),
}

fn frame(out: &mut Vec<u8>, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// The payload of the record at `at` and where the next starts, its frame checked.
fn frame_at(bytes: &[u8], at: usize) -> Result<(&[u8], usize), String> {
    let mut c = ByteReader::new(&bytes[at..], "torn record");
    let len = c.u32()? as usize;
    let crc = c.u32()?;
    let payload = c.take(len)?;
    if crc32fast::hash(payload) != crc {
        return Err("checksum mismatch".into());
    }
    Ok((payload, at + 8 + len))
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn encode_learners(learners: &[String]) -> Vec<u8> {
    let mut out = vec![KIND_LEARNERS];
    out.extend_from_slice(&(learners.len() as u32).to_le_bytes());
    for n in learners {
        put_str(&mut out, n);
    }
    out
}

fn encode_change(c: &Change) -> Vec<u8> {
    match c {
        Change::Put(s) => {
            let mut out = vec![KIND_PUT];
            put_str(&mut out, &s.id);
            out.extend_from_slice(&s.at_ms.to_le_bytes());
            out.extend_from_slice(&(s.indices.len() as u32).to_le_bytes());
            for j in &s.indices {
                out.extend_from_slice(&j.to_le_bytes());
            }
            for v in &s.values {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.extend_from_slice(&(s.served.len() as u32).to_le_bytes());
            for u in &s.served {
                out.extend_from_slice(&u.to_le_bytes());
            }
            out
        }
        Change::Take(id) => {
            let mut out = vec![KIND_TAKE];
            put_str(&mut out, id);
            out
        }
    }
}

fn get_str(c: &mut ByteReader<'_>) -> Result<String, String> {
    let len = c.u32()? as usize;
    String::from_utf8(c.take(len)?.to_vec()).map_err(|e| e.to_string())
}

fn decode(payload: &[u8]) -> Result<Record, String> {
    let mut c = ByteReader::new(payload, "record ends early");
    let record = match c.u8()? {
        KIND_LEARNERS => {
            let n = c.u32()? as usize;
            let mut names = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                names.push(get_str(&mut c)?);
            }
            Record::Learners(names)
        }
        KIND_PUT => {
            let id = get_str(&mut c)?;
            let at_ms = c.u64()?;
            let (indices, values) = c.sparse_row()?;
            let width = c.u32()? as usize;
            let mut served = Vec::with_capacity(width.min(1024));
            for _ in 0..width {
                served.push(c.f64()?);
            }
            Record::Change(Change::Put(Stored {
                id,
                at_ms,
                indices,
                values,
                served,
            }))
        }
        KIND_TAKE => Record::Change(Change::Take(get_str(&mut c)?)),
        other => return Err(format!("unknown record kind {other}")),
    };
    if !c.at_end() {
        return Err("trailing bytes in a record".into());
    }
    Ok(record)
}
