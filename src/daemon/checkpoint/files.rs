//! The checkpoint file on disk: the atomic write (a temporary file of its own, fsynced, renamed over the
//! checkpoint, the directory fsynced), the start-up write probe, and the read.
//!
//! Every write uses a temporary name no other write shares (`thresher.ckpt.tmp.PID.N`), and a failed
//! write removes its temporary, so a full disk is not filled further by leftovers. A full disk is
//! reported as "no space left on device" ([`CheckpointError::Write`]).

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{decode, encode, path_in, Checkpoint, CheckpointError, FILE_NAME, MAGIC};
use crate::ingest::wal::describe_io;

/// Numbers the temporary files of this process.
static NEXT_TEMPORARY: AtomicU64 = AtomicU64::new(0);

fn write_error(path: &Path) -> impl Fn(std::io::Error) -> CheckpointError + '_ {
    move |e| CheckpointError::Write {
        path: path.to_path_buf(),
        reason: describe_io(&e),
    }
}

/// Writes atomically: a temporary file of its own, fsync, rename, fsync of the directory. On failure
/// the temporary is removed and the previous checkpoint stays.
pub fn write(dir: &Path, ckpt: &Checkpoint) -> Result<(), CheckpointError> {
    std::fs::create_dir_all(dir).map_err(write_error(dir))?;
    let target = path_in(dir);
    let n = NEXT_TEMPORARY.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!("{FILE_NAME}.tmp.{}.{n}", std::process::id()));
    let written = (|| {
        let bytes = encode(ckpt);
        let mut f = std::fs::File::create(&tmp).map_err(write_error(&tmp))?;
        f.write_all(&bytes).map_err(write_error(&tmp))?;
        f.sync_all().map_err(write_error(&tmp))?;
        std::fs::rename(&tmp, &target).map_err(write_error(&target))
    })();
    if let Err(e) = written {
        if let Err(removing) = std::fs::remove_file(&tmp) {
            if removing.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(file = %tmp.display(), error = %removing, "cannot remove the temporary checkpoint");
            }
        }
        return Err(e);
    }
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Checks at start that checkpoints can be written in `dir` (created if missing): writes, syncs and
/// removes a probe file next to where the checkpoint goes. Why at start: a data directory that cannot
/// be written would otherwise only show as a failing periodic checkpoint, after the daemon had
/// reported ready and accepted samples it could not keep.
pub fn check_writable(dir: &Path) -> Result<(), CheckpointError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CheckpointError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let probe = dir.join(format!("{FILE_NAME}.probe.{}", std::process::id()));
    let written = (|| {
        let mut f = std::fs::File::create(&probe).map_err(write_error(&probe))?;
        f.write_all(MAGIC).map_err(write_error(&probe))?;
        f.sync_all().map_err(write_error(&probe))
    })();
    let removed = std::fs::remove_file(&probe);
    written?;
    removed.map_err(io(&probe))
}

/// Reads the checkpoint in `dir`, if there is one.
pub fn read(dir: &Path) -> Result<Option<Checkpoint>, CheckpointError> {
    let path = path_in(dir);
    match std::fs::read(&path) {
        Ok(bytes) => {
            let mut ckpt = decode(&bytes, &path)?;
            if let Some((count, digest)) = ckpt.feature_names_file {
                ckpt.feature_names = super::super::names_file::read(dir, count, digest)
                    .map_err(|reason| CheckpointError::Corrupt { path, reason })?;
            }
            Ok(Some(ckpt))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(CheckpointError::Io { path, source }),
    }
}
