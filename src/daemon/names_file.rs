//! The feature dictionary's file, `<data-dir>/thresher.names`: every name in index order, one JSON
//! string a line (an escape for any character a line cannot hold). It is written beside the checkpoint
//! only when the dictionary has changed, so an unchanged dictionary (often most of a checkpoint's
//! bytes) is not rewritten at every interval; the checkpoint names it by its count of names and their
//! digest, which a restore checks, so a names file that does not belong to the checkpoint (say, left by
//! a `--fresh` run that stopped before its first checkpoint) stops the start instead of renaming
//! features. Written atomically like the checkpoint: a temporary file, `fsync`, `rename`, `fsync` of
//! the directory.

use std::io::Write;
use std::path::{Path, PathBuf};

pub const FILE_NAME: &str = "thresher.names";

pub fn path_in(dir: &Path) -> PathBuf {
    dir.join(FILE_NAME)
}

/// FNV-1a 64 of the names, each followed by a newline: what the checkpoint records to match its file.
pub fn digest(names: &[String]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in names.iter().flat_map(|n| n.bytes().chain([b'\n'])) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Writes `names` to the file in `dir`, atomically.
pub fn write(dir: &Path, names: &[String]) -> std::io::Result<()> {
    let target = path_in(dir);
    let tmp = dir.join(format!("{FILE_NAME}.tmp"));
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        for name in names {
            serde_json::to_writer(&mut f, name)?;
            f.write_all(b"\n")?;
        }
        f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    }
    std::fs::rename(&tmp, &target)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// The names in the file in `dir`, checked against the checkpoint's `count` and `digest`.
pub fn read(dir: &Path, count: u64, expected: u64) -> Result<Vec<String>, String> {
    let path = path_in(dir);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read its feature names {}: {e}", path.display()))?;
    let names = text
        .lines()
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str::<String>(line)
                .map_err(|e| format!("{} line {}: {e}", path.display(), i + 1))
        })
        .collect::<Result<Vec<String>, String>>()?;
    if names.len() as u64 != count || digest(&names) != expected {
        return Err(format!(
            "its feature names {} do not match it ({} names, the checkpoint lists {count})",
            path.display(),
            names.len()
        ));
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_a_foreign_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let names: Vec<String> = ["a", "naïve", "tab\there", "\"q\"", "line\nbreak"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        write(dir.path(), &names).unwrap();
        let d = digest(&names);
        assert_eq!(read(dir.path(), 5, d).unwrap(), names);
        assert!(read(dir.path(), 4, d).is_err());
        assert!(read(dir.path(), 5, d ^ 1).is_err());
        write(dir.path(), &[]).unwrap();
        assert_eq!(
            read(dir.path(), 0, digest(&[])).unwrap(),
            Vec::<String>::new()
        );
    }
}
