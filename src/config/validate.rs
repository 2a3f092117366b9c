//! Phase two: [`RawConfig::validate`] checks every key of the layered configuration against its range
//! and builds the [`Config`], section by section; the `[server]`, `[nats]` and `[[learner]]` readers
//! are in their own files.

use std::time::Duration;

use super::check::{count, duration, int, need, path_key, positive, range};
use super::durability::read_durability;
use super::error::ConfigError;
use super::labels::read_labels;
use super::learner::read_learners;
use super::names::read_feature_names;
use super::nats::read_nats;
use super::raw::RawConfig;
use super::server::{read_auth, read_limits, read_listen, read_tls};
use super::Config;
use crate::learner::drift::page_hinkley::PageHinkleyParams;
use crate::learner::drift::{DriftAction, DriftConfig};

impl RawConfig {
    /// Phase two: checks every key's range and builds the [`Config`]. The keys are read in a fixed
    /// order, so of two bad keys the same one is named.
    pub fn validate(self) -> Result<Config, ConfigError> {
        let (server, ingest) = (&self.server, &self.ingest);
        let listen = read_listen(server)?;
        let max_dim = count(&ingest.max_dim, "ingest.max_dim", 1, 1 << 30)?;
        let data_dir = path_key(&self.checkpoint.data_dir, "checkpoint.data_dir")?;
        let mut learners = read_learners(&self.learner, max_dim)?;
        let nats = read_nats(&self.nats, data_dir.is_some())?;
        check_classes(&learners, nats.as_ref())?;
        let (snapshot, checkpoint) = (&self.snapshot, &self.checkpoint);
        let window_capacity = count(&self.window.capacity, "window.capacity", 1, 100_000_000)?;
        let half_life_samples = read_half_life(&self.window, window_capacity, nats.as_ref())?;
        for learner in &mut learners {
            learner.half_life_samples = half_life_samples;
        }
        Ok(Config {
            listen,
            body_limit_bytes: count(
                &server.body_limit_bytes,
                "server.body_limit_bytes",
                1,
                1 << 32,
            )?,
            inflight_bytes: count(&server.inflight_bytes, "server.inflight_bytes", 1, 1 << 40)?,
            worker_slice_ns: int(
                &server.worker_slice_us,
                "server.worker_slice_us",
                0,
                100_000,
            )? as u64
                * 1000,
            yield_interval: duration(
                &server.yield_interval_us,
                "server.yield_interval_us",
                (0, 100_000),
                Duration::from_micros,
            )?,
            queue_capacity: count(
                &ingest.queue_capacity,
                "ingest.queue_capacity",
                1,
                1_000_000,
            )?,
            queue_samples: count(
                &ingest.queue_samples,
                "ingest.queue_samples",
                1,
                1_000_000_000,
            )?,
            max_dim,
            // Capped at `max_dim` (a name needs an index below it), so lowering `max_dim` alone is
            // a valid configuration.
            max_named_features: count(
                &ingest.max_named_features,
                "ingest.max_named_features",
                0,
                1 << 32,
            )?
            .min(max_dim),
            max_named_feature_bytes: count(
                &ingest.max_named_feature_bytes,
                "ingest.max_named_feature_bytes",
                0,
                1 << 40,
            )?,
            max_feature_name_bytes: count(
                &ingest.max_feature_name_bytes,
                "ingest.max_feature_name_bytes",
                1,
                1 << 16,
            )?,
            max_new_names_per_request: count(
                &ingest.max_new_names_per_request,
                "ingest.max_new_names_per_request",
                1,
                1 << 30,
            )?,
            feature_names: read_feature_names(ingest, max_dim)?,
            max_abs_value: positive(&ingest.max_abs_value, "ingest.max_abs_value")?,
            drain: need(&ingest.drain, "ingest.drain")?,
            window_capacity,
            half_life_samples,
            snapshot_interval: duration(
                &snapshot.interval_ms,
                "snapshot.interval_ms",
                (1, 3_600_000),
                Duration::from_millis,
            )?,
            history_points: count(
                &snapshot.history_points,
                "snapshot.history_points",
                1,
                100_000,
            )?,
            history_page_points: count(
                &snapshot.history_page_points,
                "snapshot.history_page_points",
                1,
                100_000,
            )?,
            max_relative_gap: read_gate(&self.publish.max_relative_gap)?,
            drift: read_drift(&self.drift)?,
            data_dir,
            checkpoint_interval: duration(
                &checkpoint.interval_s,
                "checkpoint.interval_s",
                (1, 86_400),
                Duration::from_secs,
            )?,
            durability: read_durability(&self.durability)?,
            labels: read_labels(&self.labels)?,
            learners,
            auth: read_auth(server)?,
            tls: read_tls(server)?,
            limits: read_limits(server)?,
            nats,
        })
    }
}

/// Multi-class learners learn on each node alone: a cluster's global model is one binary model.
fn check_classes(
    learners: &[crate::learner::params::LearnerConfig],
    nats: Option<&super::NatsConfig>,
) -> Result<(), ConfigError> {
    match (learners[0].class.as_ref(), nats.filter(|n| n.global_model)) {
        (Some(c), Some(_)) => Err(range(
            "learner[0].classes",
            &c.classes.to_string(),
            "a multi-class learner does not run a cluster's global model: set nats.global_model = false (each node then learns from the messages it pulls)",
        )),
        _ => Ok(()),
    }
}

/// `window.half_life_samples` (0 = off): at most 10^9; the window may span at most
/// [`crate::learner::forget::MAX_HALF_LIVES`] half-lives (older samples would weigh less than
/// `2^-256` and leave the floating-point range near the period's end); not with a cluster's global
/// model, whose nodes' windows share one objective and no sequence.
fn read_half_life(
    window: &super::raw::WindowLayer,
    capacity: usize,
    nats: Option<&super::NatsConfig>,
) -> Result<Option<u64>, ConfigError> {
    let key = "window.half_life_samples";
    let h = int(&window.half_life_samples, key, 0, 1_000_000_000)? as u64;
    if h == 0 {
        return Ok(None);
    }
    let max = crate::learner::forget::MAX_HALF_LIVES;
    if capacity as u64 > max * h {
        return Err(ConfigError::Range {
            key: key.into(),
            value: h.to_string(),
            reason: format!(
                "window.capacity = {capacity} spans more than {max} half-lives; raise the half-life \
                 to at least {} or lower the capacity",
                (capacity as u64).div_ceil(max)
            ),
        });
    }
    if nats.is_some_and(|n| n.global_model) {
        return Err(ConfigError::Range {
            key: key.into(),
            value: h.to_string(),
            reason: "forgetting is not supported with a cluster's global model \
                     (nats.global_model = true)"
                .into(),
        });
    }
    Ok(Some(h))
}

/// The `[drift]` section: the action and the Page-Hinkley test's parameters.
fn read_drift(d: &super::raw::DriftLayer) -> Result<DriftConfig, ConfigError> {
    let text = need(&d.action, "drift.action")?;
    let action = match text.as_str() {
        "off" => DriftAction::Off,
        "alarm" => DriftAction::Alarm,
        "shrink" => DriftAction::Shrink,
        other => {
            return Err(range(
                "drift.action",
                &format!("{other:?}"),
                "expected \"off\", \"alarm\" or \"shrink\"",
            ))
        }
    };
    let delta = need(&d.delta, "drift.delta")?;
    if !(delta.is_finite() && delta >= 0.0) {
        return Err(range(
            "drift.delta",
            &delta.to_string(),
            "must be finite and >= 0",
        ));
    }
    let alpha = need(&d.alpha, "drift.alpha")?;
    if !(alpha > 0.0 && alpha <= 1.0) {
        return Err(range(
            "drift.alpha",
            &alpha.to_string(),
            "must be in (0, 1]",
        ));
    }
    Ok(DriftConfig {
        action,
        params: PageHinkleyParams {
            min_samples: int(&d.min_samples, "drift.min_samples", 1, 1 << 40)? as u64,
            delta,
            threshold: positive(&d.threshold, "drift.threshold")?,
            alpha,
        },
    })
}

/// `publish.max_relative_gap`: a number above zero; `inf` (the default) is no gate.
fn read_gate(value: &Option<f64>) -> Result<Option<f64>, ConfigError> {
    let key = "publish.max_relative_gap";
    let v = need(value, key)?;
    if v.is_nan() || v <= 0.0 {
        return Err(range(key, &v.to_string(), "must be > 0 (inf: no gate)"));
    }
    Ok(v.is_finite().then_some(v))
}

#[cfg(test)]
mod tests {
    use crate::config::tests::load_text;
    use crate::config::Config;

    /// The ingest limits: defaults, file and environment, and their ranges (finite, positive).
    #[test]
    fn ingest_limits_are_read_and_validated() {
        let c = Config::defaults();
        assert_eq!(
            (
                c.max_abs_value,
                c.max_feature_name_bytes,
                c.max_new_names_per_request
            ),
            (1e6, 256, 10_000)
        );
        let c = load_text(
            "[ingest]\nmax_abs_value = 2.5\nmax_feature_name_bytes = 8\n",
            &[("THRESHER_INGEST_MAX_NEW_NAMES_PER_REQUEST", "3")],
        )
        .unwrap();
        assert_eq!(
            (
                c.max_abs_value,
                c.max_feature_name_bytes,
                c.max_new_names_per_request
            ),
            (2.5, 8, 3)
        );
        let c = load_text("", &[("THRESHER_INGEST_MAX_ABS_VALUE", "1e300")]).unwrap();
        assert_eq!(c.max_abs_value, 1e300);
        for bad in ["0", "-1", "inf", "nan", "1e309"] {
            let e = load_text("", &[("THRESHER_INGEST_MAX_ABS_VALUE", bad)])
                .unwrap_err()
                .to_string();
            assert!(e.contains("ingest.max_abs_value"), "{bad}: {e}");
        }
        for key in ["max_feature_name_bytes", "max_new_names_per_request"] {
            let e = load_text(&format!("[ingest]\n{key} = 0\n"), &[])
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("`ingest.{key}` = 0")), "{e}");
        }
    }

    /// Regression: lowering `ingest.max_dim` alone was refused, since the dictionary's default limit
    /// (2^20 names) exceeded it; the limit is now capped at `max_dim`.
    #[test]
    fn a_smaller_max_dim_alone_is_a_valid_configuration() {
        let c = load_text("[ingest]\nmax_dim = 1000\n", &[]).unwrap();
        assert_eq!((c.max_dim, c.max_named_features), (1000, 1000));
        let c = load_text("[ingest]\nmax_dim = 1000\nmax_named_features = 10\n", &[]).unwrap();
        assert_eq!(c.max_named_features, 10);
    }

    /// `publish.max_relative_gap`: off by default (`inf`), a number above zero from the file or the
    /// environment, anything else refused naming the key.
    #[test]
    fn the_publish_gate_is_off_by_default_and_validated() {
        assert_eq!(Config::defaults().max_relative_gap, None);
        let c = load_text("[publish]\nmax_relative_gap = 1e-3\n", &[]).unwrap();
        assert_eq!(c.max_relative_gap, Some(1e-3));
        let c = load_text("", &[("THRESHER_PUBLISH_MAX_RELATIVE_GAP", "0.5")]).unwrap();
        assert_eq!(c.max_relative_gap, Some(0.5));
        for bad in ["0", "-1", "nan"] {
            let e = load_text("", &[("THRESHER_PUBLISH_MAX_RELATIVE_GAP", bad)])
                .unwrap_err()
                .to_string();
            assert!(e.contains("publish.max_relative_gap"), "{bad}: {e}");
        }
    }

    /// `[drift]`: off with River's Page-Hinkley defaults; the action and parameters from the file or
    /// the environment; out-of-range values refused naming the key.
    #[test]
    fn the_drift_section_is_read_and_validated() {
        use crate::learner::drift::{DriftAction, DriftConfig};
        assert_eq!(Config::defaults().drift, DriftConfig::default());
        let c = load_text(
            "[drift]\naction = \"shrink\"\nthreshold = 5\nmin_samples = 10\n",
            &[("THRESHER_DRIFT_DELTA", "0.1")],
        )
        .unwrap();
        assert_eq!(c.drift.action, DriftAction::Shrink);
        assert_eq!(
            (
                c.drift.params.threshold,
                c.drift.params.min_samples,
                c.drift.params.delta
            ),
            (5.0, 10, 0.1)
        );
        for (text, key) in [
            ("action = \"reset\"", "drift.action"),
            ("threshold = 0", "drift.threshold"),
            ("delta = -1", "drift.delta"),
            ("alpha = 1.5", "drift.alpha"),
            ("min_samples = 0", "drift.min_samples"),
        ] {
            let e = load_text(&format!("[drift]\n{text}\n"), &[])
                .unwrap_err()
                .to_string();
            assert!(e.contains(key), "{text}: {e}");
        }
    }
}
