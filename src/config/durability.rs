//! The `[durability]` section: [`DurabilityConfig`], how acknowledged samples survive a crash between
//! checkpoints (the write-ahead log of `ingest::wal`), and its reader.

use std::time::Duration;

use super::check::{duration, int, need, range};
use super::error::ConfigError;
use super::raw::DurabilityLayer;

/// When an accepted batch reaches the write-ahead log, relative to its `202` (`durability.wal`), in the
/// manner of Redis' `appendfsync` and Kafka's acks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalMode {
    /// No log: a `202` means queued; a crash loses what the last checkpoint does not hold.
    Off,
    /// Written to the log (the page cache) before the `202`, fsynced every `wal_fsync_interval_ms`:
    /// a killed process loses nothing acknowledged, a power loss at most that interval.
    Batch,
    /// Written and fsynced before the `202` (concurrent requests share one fsync): nothing
    /// acknowledged is lost even on power loss.
    Always,
}

impl WalMode {
    pub fn name(self) -> &'static str {
        match self {
            WalMode::Off => "off",
            WalMode::Batch => "batch",
            WalMode::Always => "always",
        }
    }
}

/// The `[durability]` table, validated. The log is kept only with a data directory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DurabilityConfig {
    pub wal: WalMode,
    /// The most bytes the log may hold on disk; a batch that would pass it is refused with 503 until a
    /// checkpoint truncates the log.
    pub wal_max_bytes: u64,
    /// `batch`: how often the log is fsynced.
    pub wal_fsync_interval: Duration,
}

pub(super) fn read_durability(d: &DurabilityLayer) -> Result<DurabilityConfig, ConfigError> {
    let text = need(&d.wal, "durability.wal")?;
    let wal = match text.as_str() {
        "off" => WalMode::Off,
        "batch" => WalMode::Batch,
        "always" => WalMode::Always,
        other => {
            return Err(range(
                "durability.wal",
                &format!("{other:?}"),
                "expected \"off\", \"batch\" or \"always\"",
            ))
        }
    };
    Ok(DurabilityConfig {
        wal,
        wal_max_bytes: int(
            &d.wal_max_bytes,
            "durability.wal_max_bytes",
            1 << 20,
            1 << 40,
        )? as u64,
        wal_fsync_interval: duration(
            &d.wal_fsync_interval_ms,
            "durability.wal_fsync_interval_ms",
            (1, 60_000),
            Duration::from_millis,
        )?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::load_text;
    use crate::config::Config;

    #[test]
    fn wal_modes_and_ranges() {
        let c = Config::defaults();
        assert_eq!(c.durability.wal, WalMode::Batch);
        let c = load_text("[durability]\nwal = \"always\"\n", &[]).unwrap();
        assert_eq!(c.durability.wal, WalMode::Always);
        let c = load_text("", &[("THRESHER_DURABILITY_WAL", "off")]).unwrap();
        assert_eq!(c.durability.wal, WalMode::Off);
        let e = load_text("[durability]\nwal = \"sometimes\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("durability.wal"), "{e}");
        let e = load_text("[durability]\nwal_max_bytes = 10\n", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("durability.wal_max_bytes"), "{e}");
    }
}
