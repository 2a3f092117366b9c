//! The `[labels]` section: [`LabelsConfig`], the bounded store of predicted samples that wait for a
//! late label (`POST /v1/predict` with an `id`, `POST /v1/labels`; `ingest::labels`), and its reader.

use std::time::Duration;

use super::check::{int, need, range};
use super::error::ConfigError;
use super::raw::LabelsLayer;

/// The `[labels]` table, validated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LabelsConfig {
    /// The most predicted samples the store holds (0 = no store: an `id` on a prediction is refused).
    pub capacity: usize,
    /// The most bytes the store's samples may hold (ids, features and served scores).
    pub max_bytes: usize,
    /// How long a stored sample waits for its label; then a label for it is answered `expired`.
    pub ttl: Duration,
    /// The longest id, in bytes.
    pub id_max_bytes: usize,
}

pub(super) fn read_labels(l: &LabelsLayer) -> Result<LabelsConfig, ConfigError> {
    let ttl = need(&l.ttl_seconds, "labels.ttl_seconds")?;
    if !(0.001..=31_536_000.0).contains(&ttl) {
        return Err(range(
            "labels.ttl_seconds",
            &ttl.to_string(),
            "expected 0.001 ..= 31536000 (a year)",
        ));
    }
    Ok(LabelsConfig {
        capacity: int(&l.capacity, "labels.capacity", 0, 100_000_000)? as usize,
        max_bytes: int(&l.max_bytes, "labels.max_bytes", 1 << 16, 1 << 40)? as usize,
        ttl: Duration::from_secs_f64(ttl),
        id_max_bytes: int(&l.id_max_bytes, "labels.id_max_bytes", 1, 4096)? as usize,
    })
}

#[cfg(test)]
mod tests {
    use crate::config::tests::load_text;
    use crate::config::Config;

    #[test]
    fn defaults_and_ranges() {
        let c = Config::defaults();
        assert_eq!(c.labels.capacity, 100_000);
        assert_eq!(c.labels.id_max_bytes, 128);
        let c = load_text("[labels]\nttl_seconds = 0.5\ncapacity = 10\n", &[]).unwrap();
        assert_eq!(c.labels.ttl.as_millis(), 500);
        assert_eq!(c.labels.capacity, 10);
        let c = load_text("", &[("THRESHER_LABELS_CAPACITY", "0")]).unwrap();
        assert_eq!(c.labels.capacity, 0);
        for bad in [
            "[labels]\nttl_seconds = 0.0\n",
            "[labels]\ncapacity = -1\n",
            "[labels]\nmax_bytes = 10\n",
            "[labels]\nid_max_bytes = 0\n",
            "[labels]\nsize = 3\n",
        ] {
            let e = load_text(bad, &[]).unwrap_err().to_string();
            assert!(e.contains("labels.") || e.contains("size"), "{bad}: {e}");
        }
    }
}
