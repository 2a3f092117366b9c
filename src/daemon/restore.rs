//! The restore phase of `thresher serve`: the checkpoint in the data directory read and checked
//! against the config (or none, or ignored with `--fresh`), and every configured learner built from
//! it with its published cell and metric series, the feature dictionary, the NATS delivery counters,
//! the write-ahead log (opened; replayed later, once the learners run) and the checkpoint writer. It
//! starts no thread but the log's fsync thread.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;

use super::checkpoint::{self, Checkpoint, CheckpointError, Checkpointer, Deliveries};
use super::checkpoint::{LearnerCheckpoint, LearnerIdentity};
use super::fault;
use super::RunOptions;
use crate::config::{Config, FeatureNames, WalMode};
use crate::ingest::batch::FeatureDictionary;
use crate::ingest::hashed::{HashedNames, Hashing};
use crate::ingest::labels::journal::Journal;
use crate::ingest::labels::LabelStore;
use crate::ingest::source::nats::AckLedger;
use crate::ingest::wal::{Persistence, Wal};
use crate::learner::build;
use crate::learner::params::LearnerConfig;
use crate::learner::publish::{set_gauges, set_solver_gauges, ModelCell, SharedLearner};
use crate::learner::worker::Absorbed;
use crate::metrics::Metrics;

/// The learners as restored (or new), and what is shared with them. Built once; every handle in it
/// is shared by the phases that follow.
pub struct Restored {
    /// Every configured learner, in config order, with its published cell: each learner is shared by
    /// its learner thread, the checkpoint thread and writer, and its cluster exchange; the cells by
    /// the HTTP handlers and the cluster announcer.
    pub learners: Vec<(SharedLearner, Arc<ModelCell>)>,
    /// The named-feature dictionary (the checkpoint's names first): shared by every parser and the
    /// checkpoint writer.
    pub dictionary: Arc<FeatureDictionary>,
    /// The NATS deliveries each learner has absorbed and the NATS source's ledger: shared by the
    /// learner threads, the NATS source and the checkpoint writer.
    pub deliveries: Arc<Deliveries>,
    /// The checkpoint writer (with a data directory): shared by the checkpoint thread and the final
    /// checkpoint.
    pub checkpointer: Option<Arc<Checkpointer>>,
    /// The acknowledgements the restored checkpoint lists as pending: the NATS source sends them
    /// first.
    pub pending_acks: Vec<String>,
    /// The write-ahead log (with a data directory, when `durability.wal` is on or an old log is
    /// left to replay).
    pub wal: Option<Arc<Wal>>,
    /// The last logged batch the restored checkpoint holds: replay starts after it.
    pub wal_through: u64,
    /// Whether checkpoints succeed: set by the writer, read by `GET /readyz`.
    pub persistence: Arc<Persistence>,
    /// The store of predicted samples waiting for a late label (its journal read back, with a data
    /// directory): shared by the HTTP handlers and the checkpoint writer.
    pub labels: Arc<LabelStore>,
}

/// Restores the learners from the data directory's checkpoint (unless `--fresh`), or builds them
/// empty, and registers their metric series.
pub fn restore(
    config: &Config,
    options: &RunOptions,
    metrics: &Metrics,
) -> Result<Restored, CheckpointError> {
    let (restored, restored_exactly) = match (&config.data_dir, options.fresh) {
        (Some(dir), false) => match read_compatible(config, dir, &options.drop_learners)? {
            Some((ckpt, exact)) => (Some(ckpt), exact),
            None => (None, false),
        },
        (Some(dir), true) => {
            tracing::info!(dir = %dir.display(), "--fresh: ignoring any checkpoint");
            (None, false)
        }
        (None, _) => (None, false),
    };
    let dictionary = Arc::new(
        match &restored {
            Some(c) => FeatureDictionary::from_names(
                config.max_named_features,
                config.max_named_feature_bytes,
                c.feature_names.clone(),
                c.feature_kind,
            ),
            None => FeatureDictionary::with_limits(
                config.max_named_features,
                config.max_named_feature_bytes,
            ),
        }
        .with_hashing(HashedNames::configured(config.feature_names)),
    );
    let learners: Vec<(SharedLearner, Arc<ModelCell>)> = config
        .learners
        .iter()
        .map(|lc| {
            let saved = restored
                .as_ref()
                .and_then(|c| c.learners.iter().find(|l| l.identity.name == lc.name));
            build_learner(config, lc, saved, metrics)
        })
        .collect();
    // Which NATS deliveries and logged batches each learner has absorbed, and the source's
    // unacknowledged batches.
    let wal_through = restored.as_ref().map_or(0, |c| c.wal_through);
    let deliveries = Arc::new(Deliveries {
        absorbed: learners
            .iter()
            .map(|_| {
                let absorbed = Absorbed::default();
                absorbed.logged.store(wal_through, Ordering::Release);
                Arc::new(absorbed)
            })
            .collect(),
        ledger: config
            .nats
            .as_ref()
            .map(|n| AckLedger::new(n.max_pending_batches)),
    });
    let wal = match &config.data_dir {
        Some(dir) => open_wal(config, dir, wal_through, options.fresh, metrics)?,
        None => None,
    };
    let persistence = Arc::new(Persistence::default());
    let labels = Arc::new(open_labels(config, options, metrics)?);
    // What the checkpoint on disk reflects: one restored as it is reflects the state just built from it.
    let checkpointer = config.data_dir.as_ref().map(|dir| {
        Arc::new(
            Checkpointer::new(
                dir.clone(),
                learners.clone(),
                dictionary.clone(),
                metrics.clone(),
                deliveries.clone(),
                restored_exactly,
            )
            .with_wal(wal.clone(), persistence.clone())
            .with_labels(labels.clone()),
        )
    });
    Ok(Restored {
        learners,
        dictionary,
        deliveries,
        checkpointer,
        pending_acks: restored.map(|c| c.pending_acks).unwrap_or_default(),
        wal,
        wal_through,
        persistence,
        labels,
    })
}

/// The label store, its journal read back from the data directory (none with `--fresh`: the next
/// checkpoint overwrites it).
fn open_labels(
    config: &Config,
    options: &RunOptions,
    metrics: &Metrics,
) -> Result<LabelStore, CheckpointError> {
    let names = config.learners.iter().map(|l| l.name.clone()).collect();
    let store = LabelStore::new(config.labels, names, metrics.labels.clone());
    let Some(dir) = &config.data_dir else {
        return Ok(store);
    };
    let d = &config.durability;
    let journal = Journal::new(dir, d.wal, d.wal_fsync_interval);
    if options.fresh {
        let _ = std::fs::remove_file(dir.join(crate::ingest::labels::journal::FILE_NAME));
    }
    let store = store.with_journal(journal)?;
    let (n, _) = store.fill();
    if n > 0 {
        tracing::info!(samples = n, "label store restored");
    }
    Ok(store)
}

/// Opens the write-ahead log in `dir`: when `durability.wal` is on, or when it is off but a log is
/// left from a run with it on (replayed, then truncated by the next checkpoint, and not appended to).
fn open_wal(
    config: &Config,
    dir: &Path,
    through: u64,
    fresh: bool,
    metrics: &Metrics,
) -> Result<Option<Arc<Wal>>, CheckpointError> {
    let leftover = std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(crate::ingest::wal::SEGMENT_PREFIX)
        })
    });
    if config.durability.wal == WalMode::Off && !leftover {
        return Ok(None);
    }
    let wal = Wal::open(dir, &config.durability, through, fresh, metrics.clone())?;
    tracing::info!(
        mode = config.durability.wal.name(),
        checkpoint_holds_through = through,
        next = wal.last_seq() + 1,
        "write-ahead log open"
    );
    Ok(Some(wal))
}

/// One configured learner, from its checkpointed state if `saved`, with its cell, history and
/// metric series.
fn build_learner(
    config: &Config,
    lc: &LearnerConfig,
    saved: Option<&LearnerCheckpoint>,
    metrics: &Metrics,
) -> (SharedLearner, Arc<ModelCell>) {
    let learner = fault::arm(build(
        lc,
        config.window_capacity,
        saved.map(|s| s.state.clone()),
    ));
    metrics.register_learner(&lc.name, config.window_capacity);
    let cell = Arc::new(
        ModelCell::new(&lc.name, saved.and_then(|s| s.snapshot.clone()))
            .with_history(config.history_points, config.window_capacity, metrics)
            .with_gate(config.max_relative_gap)
            .with_forgetting(config.half_life_samples)
            .with_drift(config.drift.action),
    );
    if let Some(a) = learner.lambda_auto() {
        metrics.register_lambda_grid(&lc.name, &a.grid, a.criterion == "holdout");
    }
    set_gauges(&cell, metrics);
    set_solver_gauges(metrics, &lc.name, learner.gauges());
    if let Some(s) = saved {
        tracing::info!(learner = %lc.name, window = s.state.samples.len(), version = s.snapshot.as_ref().map_or(0, |s| s.version), "restored from checkpoint");
    }
    (Arc::new(Mutex::new(learner)), cell)
}

/// Reads the checkpoint in `dir` and keeps what it holds for the configured learners, checking it
/// fits the config.
///
/// A learner of the checkpoint that the config does not have (renamed or removed) stops the start,
/// naming the learners of both, unless it is listed in `drop`: starting would overwrite its state
/// with the next checkpoint, which must not happen silently. A configured learner the checkpoint does
/// not have starts empty (nothing is lost), logged. The flag says whether the file holds exactly the
/// configured learners (otherwise the next checkpoint must be written even if nothing changes).
fn read_compatible(
    config: &Config,
    dir: &Path,
    drop: &[String],
) -> Result<Option<(Checkpoint, bool)>, CheckpointError> {
    let Some(mut ckpt) = checkpoint::read(dir)? else {
        return Ok(None);
    };
    let configured: Vec<&str> = config.learners.iter().map(|c| c.name.as_str()).collect();
    let saved: Vec<String> = ckpt
        .learners
        .iter()
        .map(|l| l.identity.name.clone())
        .collect();
    let missing: Vec<&String> = saved
        .iter()
        .filter(|n| !configured.contains(&n.as_str()) && !drop.contains(n))
        .collect();
    if !missing.is_empty() {
        return Err(CheckpointError::Incompatible {
            path: checkpoint::path_in(dir),
            reason: format!(
                "it holds learners {saved:?}, the config has {configured:?}: the state of {missing:?} \
                 would be lost (to discard it, start with --drop-learner NAME for each, or --fresh)"
            ),
        });
    }
    for name in drop {
        if saved.contains(name) {
            tracing::warn!(learner = %name, "--drop-learner: its checkpointed state is discarded");
        } else {
            tracing::warn!(learner = %name, "--drop-learner: no such learner in the checkpoint");
        }
    }
    let exact = saved == configured;
    ckpt.learners
        .retain(|l| configured.contains(&l.identity.name.as_str()));
    for name in &configured {
        if !saved.iter().any(|s| s == name) {
            tracing::info!(learner = %name, "not in the checkpoint: starts empty");
        }
    }
    for l in &ckpt.learners {
        if let Some(c) = config.learners.iter().find(|c| c.name == l.identity.name) {
            if LearnerIdentity::of(c) != l.identity {
                return Err(CheckpointError::Incompatible {
                    path: checkpoint::path_in(dir),
                    reason: format!(
                        "learner {:?} was saved with loss={} k={} lambda={}, the config has loss={} k={} lambda={}",
                        c.name, l.identity.loss, l.identity.k, l.identity.lambda,
                        c.loss.kind().name(), c.k, c.lambda
                    ),
                });
            }
        }
    }
    check_feature_names(config.feature_names, &ckpt).map_err(|reason| {
        CheckpointError::Incompatible {
            path: checkpoint::path_in(dir),
            reason,
        }
    })?;
    check_limits(config, &ckpt).map_err(|reason| CheckpointError::Incompatible {
        path: checkpoint::path_in(dir),
        reason,
    })?;
    Ok(Some((ckpt, exact)))
}

/// How often a replay waiting for room in the ingest queue looks again.
const REPLAY_POLL: std::time::Duration = std::time::Duration::from_millis(2);

/// Replays the write-ahead log into the running learners: the batches after the checkpoint's, in
/// order, each waiting for room in the ingest queue (one batch in memory at a time beyond the queue's
/// bound), before any source starts, so new batches follow them. Logged, with the count.
pub async fn replay_log(
    restored: &Restored,
    admission: &Arc<crate::ingest::Admission>,
) -> Result<(), CheckpointError> {
    let Some(wal) = restored.wal.clone() else {
        return Ok(());
    };
    let (through, dictionary, admission) = (
        restored.wal_through,
        restored.dictionary.clone(),
        admission.clone(),
    );
    let replayed = tokio::task::spawn_blocking(move || {
        let never = std::sync::atomic::AtomicBool::new(false);
        let mut samples = 0usize;
        let batches = wal.replay(through, &dictionary, |block, seq| {
            samples += block.len();
            admission.admit_replayed(block, seq, &never, REPLAY_POLL)
        })?;
        Ok::<_, CheckpointError>((batches, samples))
    })
    .await
    .unwrap_or_else(|e| {
        Err(CheckpointError::Corrupt {
            path: Default::default(),
            reason: format!("write-ahead log replay failed: {e}"),
        })
    })?;
    if replayed.0 > 0 {
        tracing::info!(
            batches = replayed.0,
            samples = replayed.1,
            "replayed the write-ahead log (acknowledged batches the checkpoint did not hold)"
        );
    }
    Ok(())
}

/// How names get indices (`ingest.feature_names`) is what the checkpoint was written with: the
/// dictionary, or the same hash's bits and seed. Another hash would give the names other indices than
/// the learners' states hold, so the start stops, naming both.
fn check_feature_names(mode: FeatureNames, ckpt: &Checkpoint) -> Result<(), String> {
    let configured = match mode {
        FeatureNames::Dictionary => None,
        FeatureNames::Hashed { bits, seed, .. } => Some(Hashing { bits, seed }),
    };
    if configured == ckpt.feature_hashing {
        return Ok(());
    }
    let describe = |h: Option<Hashing>| {
        h.map_or_else(
            || "the feature dictionary (ingest.feature_names = \"dictionary\")".to_string(),
            |h| h.describe(),
        )
    };
    Err(format!(
        "its feature names were indexed by {}, the config has {}: the same names would get other \
         indices than the learners hold (restore with the checkpoint's settings, or start with --fresh)",
        describe(ckpt.feature_hashing),
        describe(configured)
    ))
}

/// The checkpoint's contents fit the config's ingest limits: every feature index (window samples, a
/// primal model's coordinates, a published support) is below `ingest.max_dim` (the learners' dense
/// vectors are that long), every label, value and weight of the window is within
/// `ingest.max_abs_value`, and the dictionary's names fit `ingest.max_named_features`. A limit
/// lowered below what the checkpoint holds stops the start naming the key and the value it needs:
/// restoring anyway would index past the learners' vectors, or keep in the window numbers the
/// config now refuses.
fn check_limits(config: &Config, ckpt: &Checkpoint) -> Result<(), String> {
    let mut largest_index: Option<(u32, &str)> = None;
    let mut largest_abs: Option<(f64, &str)> = None;
    for l in &ckpt.learners {
        let name = l.identity.name.as_str();
        let mut index = |j: u32| {
            if largest_index.is_none_or(|(m, _)| j > m) {
                largest_index = Some((j, name));
            }
        };
        for (s, _) in &l.state.samples {
            s.indices.last().copied().map(&mut index);
        }
        if let Some(p) = &l.state.primal {
            p.coordinates.iter().for_each(|c| index(c.0));
            p.active.iter().copied().for_each(&mut index);
        }
        if let Some(snapshot) = &l.snapshot {
            snapshot.model.support.iter().copied().for_each(&mut index);
        }
        for (s, _) in &l.state.samples {
            let numbers = s.values.iter().chain([&s.label]).chain(s.weight.as_ref());
            for &v in numbers {
                if largest_abs.is_none_or(|(m, _)| v.abs() > m) {
                    largest_abs = Some((v.abs(), name));
                }
            }
        }
    }
    if let Some((j, learner)) = largest_index.filter(|&(j, _)| j as usize >= config.max_dim) {
        return Err(format!(
            "learner {learner:?} holds feature index {j}, not below ingest.max_dim ({}): set \
             ingest.max_dim to at least {} to restore it",
            config.max_dim,
            u64::from(j) + 1
        ));
    }
    if let Some((v, learner)) = largest_abs.filter(|&(v, _)| v > config.max_abs_value) {
        return Err(format!(
            "learner {learner:?} holds a number of magnitude {v:e} in its window, above \
             ingest.max_abs_value ({:e}): set ingest.max_abs_value to at least {v:e} to restore it",
            config.max_abs_value
        ));
    }
    let names = ckpt.feature_names.len();
    if names > config.max_named_features {
        return Err(format!(
            "the feature dictionary holds {names} names, more than ingest.max_named_features ({}): \
             set ingest.max_named_features to at least {names} to restore it",
            config.max_named_features
        ));
    }
    let bytes: usize = ckpt.feature_names.iter().map(String::len).sum();
    if bytes > config.max_named_feature_bytes {
        return Err(format!(
            "the feature dictionary holds {bytes} bytes of names, more than \
             ingest.max_named_feature_bytes ({}): set ingest.max_named_feature_bytes to at least \
             {bytes} to restore it",
            config.max_named_feature_bytes
        ));
    }
    Ok(())
}
