//! Late labels (`[labels]`): the bounded store of predicted samples that wait for their label, and the
//! join of a label to its sample.
//!
//! `POST /v1/predict` with an `id` on a sample ([`wire::take_ids`]) keeps the sample's features and the
//! score each learner served for it ([`LabelStore::remember`]). `POST /v1/labels`
//! ([`wire::parse_labels`]) takes each labelled sample out of the store ([`LabelStore::take`]) and the
//! route hands them, as one block carrying their served scores ([`crate::sample::SampleBlock::served`]),
//! to [`crate::ingest::Admission`] like any ingested batch: the write-ahead log, the bounded queue and
//! the same refusals. A refused block's samples go back ([`LabelStore::put_back`]); an admitted one's
//! are gone for good ([`LabelStore::confirm`]). A learner charges such a sample the loss of the score it
//! served before the label was known (River's delayed progressive validation).
//!
//! **Bounds.** At most `labels.capacity` samples and `labels.max_bytes` bytes (an entry's id,
//! features and scores, plus a fixed overhead): past either the oldest leaves (`capacity`). A sample
//! older than `labels.ttl_seconds` (by the wall clock, so a restart does not reset it) leaves when it
//! is met: at the front of the store when a sample is added, or when its label comes (`expired`). A
//! prediction with an id already stored replaces the stored sample (`replaced`): the newest prediction
//! is the one a client acts on. The ids of samples that left unlabelled are remembered (as many as
//! `labels.capacity`, oldest forgotten first), so a late label is answered `expired` or `evicted`
//! rather than `unknown`. Every departure is counted (`thresher_label_store_dropped_total`).
//!
//! **Durability** ([`journal`]): with a data directory every change is appended to
//! `DIR/thresher.labels` before its response, and the file is rewritten compactly at each checkpoint
//! (and when it grows past twice `labels.max_bytes`); a restart reads it back. The rewrite runs under
//! the store's lock, so predictions with ids and labels wait for it: it writes the stored samples
//! once (at most `labels.max_bytes`, 256 MiB by default, typically far less) and fsyncs, a pause of
//! the order of the bytes stored over the disk's write speed at each checkpoint. Writing a snapshot
//! outside the lock (entries behind `Arc`s) would remove it; not done yet.

pub mod journal;
pub mod wire;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use crate::config::LabelsConfig;
use crate::metrics::labels::{dropped, outcome, LabelMetrics};
use journal::{Journal, JournalError};

/// Bytes an entry is charged beyond its id, features and scores (the maps and the entry itself).
pub const ENTRY_OVERHEAD: usize = 96;

/// A predicted sample waiting for its label.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub id: String,
    /// When it was predicted, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    pub indices: Vec<u32>,
    pub values: Vec<f64>,
    /// The score each learner served for it, in learner order (NaN: the learner served none).
    pub served: Vec<f64>,
}

impl Stored {
    /// The bytes the store charges for it.
    pub fn bytes(&self) -> usize {
        ENTRY_OVERHEAD + self.id.len() + 12 * self.indices.len() + 8 * self.served.len()
    }
}

/// Why a label found no sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    Unknown,
    Expired,
    Evicted,
    Duplicate,
}

impl Missing {
    /// Its name in responses and in `thresher_labels_total`.
    pub fn name(self) -> &'static str {
        match self {
            Missing::Unknown => outcome::UNKNOWN,
            Missing::Expired => outcome::EXPIRED,
            Missing::Evicted => outcome::EVICTED,
            Missing::Duplicate => outcome::DUPLICATE,
        }
    }
}

/// A change of the store, as the journal records it.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A sample stored (replacing one with its id).
    Put(Stored),
    /// A sample labelled and admitted: gone for good.
    Take(String),
}

/// The store's contents.
#[derive(Debug, Default)]
struct Inner {
    /// Oldest first; `None` where a sample left out of order (taken or replaced).
    order: VecDeque<Option<Stored>>,
    /// The position in `order` of each stored id, offset by `base`.
    by_id: HashMap<String, u64>,
    /// The position of `order[0]`.
    base: u64,
    bytes: usize,
    /// Ids of samples that left unlabelled, with why, oldest first (bounded by the capacity).
    gone: VecDeque<String>,
    gone_why: HashMap<String, Missing>,
}

/// The bounded store of predicted samples waiting for a late label (module docs).
pub struct LabelStore {
    config: LabelsConfig,
    /// The learners' names, in order: the columns of [`Stored::served`].
    learners: Vec<String>,
    inner: Mutex<Inner>,
    metrics: LabelMetrics,
    journal: Option<Mutex<Journal>>,
    /// The wall clock in milliseconds since the epoch (replaced in tests).
    clock: Arc<dyn Fn() -> u64 + Send + Sync>,
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl LabelStore {
    /// An empty store for `learners` (their names, in order), in memory only.
    pub fn new(config: LabelsConfig, learners: Vec<String>, metrics: LabelMetrics) -> LabelStore {
        LabelStore {
            config,
            learners,
            inner: Mutex::new(Inner::default()),
            metrics,
            journal: None,
            clock: Arc::new(unix_ms),
        }
    }

    /// The store with the clock `clock` (milliseconds since the epoch).
    pub fn with_clock(mut self, clock: Arc<dyn Fn() -> u64 + Send + Sync>) -> LabelStore {
        self.clock = clock;
        self
    }

    /// Reads `journal`'s file back into the store, then appends every later change to it.
    pub fn with_journal(mut self, mut journal: Journal) -> Result<LabelStore, JournalError> {
        let (learners, changes) = journal.read()?;
        let now = (self.clock)();
        {
            let mut inner = self.inner.lock();
            for change in changes {
                match change {
                    Change::Put(mut s) => {
                        s.served = remap(&learners, &self.learners, s.served);
                        self.insert(&mut inner, s, now);
                    }
                    Change::Take(id) => {
                        self.remove(&mut inner, &id);
                    }
                }
            }
            self.expire_front(&mut inner, now);
            journal.compact(&self.learners, inner.order.iter().flatten())?;
            self.set_gauges(&inner);
        }
        self.journal = Some(Mutex::new(journal));
        Ok(self)
    }

    /// The configuration it keeps to.
    pub fn config(&self) -> &LabelsConfig {
        &self.config
    }

    /// The learners' names, in the order of the served scores.
    pub fn learners(&self) -> &[String] {
        &self.learners
    }

    /// What `GET /v1/models` and the status page show of the store: its bounds, its fill and the
    /// labels received by outcome since this process started (`thresher_labels_total`).
    pub fn summary(&self) -> serde_json::Value {
        let (samples, bytes) = self.fill();
        let mut labels = serde_json::Map::new();
        for o in crate::metrics::labels::outcome::ALL {
            labels.insert(
                o.to_string(),
                self.metrics.outcomes.with_label_values(&[o]).get().into(),
            );
        }
        serde_json::json!({
            "capacity": self.config.capacity,
            "ttl_seconds": self.config.ttl.as_secs_f64(),
            "samples": samples,
            "bytes": bytes,
            "labels": labels,
        })
    }

    /// Samples stored and their bytes.
    pub fn fill(&self) -> (usize, usize) {
        let inner = self.inner.lock();
        (inner.by_id.len(), inner.bytes)
    }

    /// Stores predicted samples (each replacing a stored one with its id), dropping the oldest past
    /// the bounds, and journals them before returning. Samples are stamped with the clock now.
    pub fn remember(&self, mut samples: Vec<Stored>) -> Result<(), JournalError> {
        let now = (self.clock)();
        let mut inner = self.inner.lock();
        for s in &mut samples {
            s.at_ms = now;
        }
        if let Some(journal) = &self.journal {
            let changes: Vec<Change> = samples.iter().cloned().map(Change::Put).collect();
            journal.lock().append(&changes)?;
        }
        self.expire_front(&mut inner, now);
        for s in samples {
            if self.insert(&mut inner, s, now) {
                self.metrics
                    .dropped
                    .with_label_values(&[dropped::REPLACED])
                    .inc();
            }
        }
        self.maybe_compact(&inner)?;
        self.set_gauges(&inner);
        Ok(())
    }

    /// Takes the samples of `ids` out of the store, in order: each a stored sample, or why none (an
    /// id repeated in `ids` is [`Missing::Duplicate`] after its first). Taken samples are out of the
    /// store until [`LabelStore::put_back`] or [`LabelStore::confirm`].
    pub fn take(&self, ids: &[&str]) -> Vec<Result<Stored, Missing>> {
        let now = (self.clock)();
        let mut inner = self.inner.lock();
        let mut seen = std::collections::HashSet::new();
        let out = ids
            .iter()
            .map(|&id| {
                if !seen.insert(id) {
                    return Err(Missing::Duplicate);
                }
                match self.remove(&mut inner, id) {
                    Some(s) if self.expired(&s, now) => {
                        self.forget(&mut inner, s.id, Missing::Expired);
                        Err(Missing::Expired)
                    }
                    Some(s) => Ok(s),
                    None => Err(inner.gone_why.get(id).copied().unwrap_or(Missing::Unknown)),
                }
            })
            .collect();
        self.set_gauges(&inner);
        out
    }

    /// Counts what each label of a request found (called once the request's outcome is known).
    pub fn count(&self, outcomes: &[Option<Missing>]) {
        for o in outcomes {
            let name = o.map_or(outcome::JOINED, Missing::name);
            self.metrics.outcomes.with_label_values(&[name]).inc();
        }
    }

    /// Puts back samples [`LabelStore::take`] gave whose block was refused, unless a prediction
    /// stored their id again meanwhile. They keep their place by age among what is stored now.
    pub fn put_back(&self, samples: Vec<Stored>) {
        let now = (self.clock)();
        let mut inner = self.inner.lock();
        for s in samples {
            if !inner.by_id.contains_key(&s.id) {
                self.insert(&mut inner, s, now);
            }
        }
        self.set_gauges(&inner);
    }

    /// Journals that the samples of `ids` were labelled and admitted: gone for good.
    pub fn confirm(&self, ids: Vec<String>) -> Result<(), JournalError> {
        let Some(journal) = &self.journal else {
            return Ok(());
        };
        let inner = self.inner.lock();
        let changes: Vec<Change> = ids.into_iter().map(Change::Take).collect();
        journal.lock().append(&changes)?;
        self.maybe_compact(&inner)
    }

    /// Rewrites the journal as the store's contents (at a checkpoint), and fsyncs it.
    pub fn checkpoint(&self) -> Result<(), JournalError> {
        let Some(journal) = &self.journal else {
            return Ok(());
        };
        let inner = self.inner.lock();
        journal
            .lock()
            .compact(&self.learners, inner.order.iter().flatten())
    }

    /// Rewrites the journal once it holds more than twice the store's bound.
    fn maybe_compact(&self, inner: &Inner) -> Result<(), JournalError> {
        let Some(journal) = &self.journal else {
            return Ok(());
        };
        let mut journal = journal.lock();
        if journal.bytes() > 2 * self.config.max_bytes as u64 + (1 << 20) {
            journal.compact(&self.learners, inner.order.iter().flatten())?;
        }
        Ok(())
    }

    fn expired(&self, s: &Stored, now: u64) -> bool {
        now.saturating_sub(s.at_ms) as u128 >= self.config.ttl.as_millis()
    }

    /// Adds `s` (replacing a stored sample with its id: `true`), then drops the oldest past the bounds.
    fn insert(&self, inner: &mut Inner, s: Stored, now: u64) -> bool {
        if self.expired(&s, now) {
            self.forget(inner, s.id, Missing::Expired);
            return false;
        }
        let replaced = self.remove(inner, &s.id).is_some();
        if let Some(why) = inner.gone_why.remove(&s.id) {
            let _ = why; // the id lives again; its old departure no longer answers for it
        }
        inner.bytes += s.bytes();
        let at = inner.base + inner.order.len() as u64;
        inner.by_id.insert(s.id.clone(), at);
        inner.order.push_back(Some(s));
        while inner.by_id.len() > self.config.capacity || inner.bytes > self.config.max_bytes {
            let Some(oldest) = self.pop_front(inner) else {
                break;
            };
            self.forget(inner, oldest.id, Missing::Evicted);
        }
        replaced
    }

    /// Drops the expired samples at the front (the oldest).
    fn expire_front(&self, inner: &mut Inner, now: u64) {
        loop {
            match inner.order.front() {
                Some(None) => {
                    inner.order.pop_front();
                    inner.base += 1;
                }
                Some(Some(s)) if self.expired(s, now) => {
                    let s = self.pop_front(inner).expect("a front sample");
                    self.forget(inner, s.id, Missing::Expired);
                }
                _ => return,
            }
        }
    }

    /// Removes and returns the oldest sample.
    fn pop_front(&self, inner: &mut Inner) -> Option<Stored> {
        while let Some(front) = inner.order.pop_front() {
            inner.base += 1;
            if let Some(s) = front {
                inner.by_id.remove(&s.id);
                inner.bytes -= s.bytes();
                return Some(s);
            }
        }
        None
    }

    /// Removes the sample of `id`, if stored.
    fn remove(&self, inner: &mut Inner, id: &str) -> Option<Stored> {
        let at = inner.by_id.remove(id)?;
        let s = inner.order[(at - inner.base) as usize]
            .take()
            .expect("an indexed sample");
        inner.bytes -= s.bytes();
        while let Some(None) = inner.order.front() {
            inner.order.pop_front();
            inner.base += 1;
        }
        Some(s)
    }

    /// Remembers that `id` left unlabelled (`why`), counted; forgets the oldest such id past the
    /// capacity.
    fn forget(&self, inner: &mut Inner, id: String, why: Missing) {
        let reason = match why {
            Missing::Expired => dropped::EXPIRED,
            _ => dropped::CAPACITY,
        };
        self.metrics.dropped.with_label_values(&[reason]).inc();
        if inner.gone_why.insert(id.clone(), why).is_none() {
            inner.gone.push_back(id);
        }
        while inner.gone.len() > self.config.capacity.max(1) {
            if let Some(old) = inner.gone.pop_front() {
                inner.gone_why.remove(&old);
            }
        }
    }

    fn set_gauges(&self, inner: &Inner) {
        self.metrics.stored.set(inner.by_id.len() as i64);
        self.metrics.bytes.set(inner.bytes as i64);
    }

    /// How long a stored sample waits for its label.
    pub fn ttl(&self) -> Duration {
        self.config.ttl
    }
}

/// Served scores written for the learners `from`, in the order of `to` (NaN for a learner `from`
/// lacks): the learners may have been reordered, added or removed across a restart.
fn remap(from: &[String], to: &[String], served: Vec<f64>) -> Vec<f64> {
    if from == to {
        return served;
    }
    to.iter()
        .map(|name| {
            from.iter()
                .position(|f| f == name)
                .and_then(|i| served.get(i).copied())
                .unwrap_or(f64::NAN)
        })
        .collect()
}

#[cfg(test)]
mod tests;
