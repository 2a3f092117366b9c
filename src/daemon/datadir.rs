//! One owner per data directory: the lock file `<data-dir>/thresher.lock`, held with an exclusive
//! `flock` for the daemon's whole life, holding the owner's pid. A second daemon on the same directory
//! is refused at start with a message naming that pid (two writers of one checkpoint would each
//! overwrite the other's model, silently). The kernel drops the lock when the process ends, however it
//! ends, so a daemon killed with -9 leaves no stale lock behind.
//!
//! Once the lock is held, temporary checkpoint files left by an owner that died mid-write are removed:
//! no other process can be writing them.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::checkpoint::{CheckpointError, FILE_NAME};

/// The lock file's name in the data directory.
pub const LOCK_FILE: &str = "thresher.lock";

/// The held lock of a data directory; released when dropped (the file is closed).
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
    path: PathBuf,
}

impl DataDirLock {
    /// Takes the lock of `dir` (which exists), writes this process's pid into it, and removes
    /// temporary checkpoints a dead owner left. Another live owner is [`CheckpointError::Locked`].
    pub fn acquire(dir: &Path) -> Result<DataDirLock, CheckpointError> {
        let path = dir.join(LOCK_FILE);
        let io = |source| CheckpointError::Io {
            path: path.clone(),
            source,
        };
        // Not truncated on open: the holder's pid must stay readable to a refused second daemon.
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        if !crate::sys::try_lock_exclusive(&file).map_err(io)? {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            let holder = text.trim();
            return Err(CheckpointError::Locked {
                dir: dir.to_path_buf(),
                holder: if holder.is_empty() {
                    "unknown".into()
                } else {
                    holder.to_string()
                },
            });
        }
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
        remove_stale_temporaries(dir);
        Ok(DataDirLock { _file: file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Removes `thresher.ckpt.tmp*` files in `dir` (best effort, each logged): under the lock they can
/// only be what an owner that died mid-write left.
fn remove_stale_temporaries(dir: &Path) {
    let prefix = format!("{FILE_NAME}.tmp");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name.to_string_lossy().starts_with(&prefix) {
            match std::fs::remove_file(entry.path()) {
                Ok(()) => {
                    tracing::warn!(file = %entry.path().display(), "removed a temporary checkpoint left by a daemon that stopped mid-write")
                }
                Err(e) => {
                    tracing::warn!(file = %entry.path().display(), error = %e, "cannot remove a stale temporary checkpoint")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second lock on the same directory is refused naming the holder's pid; once the first is
    /// dropped, the directory can be locked again; stale temporaries are removed.
    #[test]
    fn one_owner_at_a_time_named_by_pid() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(format!("{FILE_NAME}.tmp.1.0")), b"x").unwrap();
        let first = DataDirLock::acquire(dir.path()).unwrap();
        assert!(!dir.path().join(format!("{FILE_NAME}.tmp.1.0")).exists());
        let e = DataDirLock::acquire(dir.path()).unwrap_err().to_string();
        assert!(e.contains(&format!("pid {}", std::process::id())), "{e}");
        drop(first);
        DataDirLock::acquire(dir.path()).unwrap();
    }
}
