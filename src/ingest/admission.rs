//! Admission: the one door from a parsed body to the learners. Every [`Source`] (HTTP bodies, stdin,
//! a NATS JetStream consumer) hands its validated [`SampleBlock`] to [`Admission::admit`] (or
//! [`Admission::admit_waiting`]), which reserves the samples in the memory
//! budget (`ingest.queue_samples`), offers the batch to the bounded ingest queue
//! (`ingest.queue_capacity`) and counts the outcome, all or nothing: a refused batch gives its
//! reservation back and nothing of it enters. Callers carry no ingest internals.
//!
//! Overflow policy: **reject newest**. A full budget or queue refuses the new batch
//! ([`AdmitError::QueueFull`], counted in `thresher_rejected_samples_total{reason="queue_full"}`);
//! what is queued is never dropped. Sources that can wait (stdin) use [`Admission::admit_waiting`],
//! which retries until there is room or the daemon stops.
//!
//! A source that acknowledges its input upstream (NATS) numbers its batches ([`Source::Nats`]): the
//! number rides with the batch to every learner, which records the highest it has absorbed, so a
//! checkpoint knows which deliveries it holds and only those are acknowledged.
//!
//! **The write-ahead log** (`durability.wal`, [`crate::ingest::wal`]): a batch from HTTP or stdin is
//! appended to the log and offered to the queue under the sender's lock, after the queue was seen to
//! have room, so a batch is logged if and only if it is queued, and log sequence numbers enter the
//! queue in order (every send goes through that lock; the router is the queue's only receiver, so
//! room seen under the lock stays). The sequence number rides with the batch like a delivery number.
//! With `always`, [`Admission::admit`] returns only once the batch is fsynced (after the lock, so
//! concurrent requests share fsyncs). A log at its bound refuses the batch ([`AdmitError::LogFull`],
//! counted as `wal_full`). NATS batches are not logged: the stream redelivers what no checkpoint held.
//!
//! **The dictionary** ([`FeatureDictionary::grant`]): a parse changes no state; what a body asks of
//! the feature dictionary (its feature kind, its new names: a [`Claim`]) is granted here, under the
//! sender's lock, after the queue was seen to have room and only once the log took the batch (the
//! names first). So a batch refused for a full queue or log, a failed log or a stop leaves no name and
//! no kind behind. A claim that no longer fits (another body took the other kind, or the last room
//! in the dictionary, since this one's parse) is refused as [`AdmitError::Invalid`], naming the line.
//! (One exception: if the router has stopped, which only a failure does, a granted batch cannot be
//! sent; its names stay, as they stay in the log.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Sender, TrySendError};
use parking_lot::Mutex;

use super::batch::{Claim, FeatureDictionary, GrantError};
use super::wal::{record, Persistence, Wal, WalError};
use super::AdmitError;
use crate::config::WalMode;
use crate::metrics::{reason, Metrics};
use crate::ring::budget::Ticket;
use crate::ring::{Batch, QueuedBatch, SampleBudget};
use crate::sample::SampleBlock;

/// Where a batch came from: its label in `thresher_ingested_samples_total{source}`, and for a source
/// that acknowledges upstream, the delivery number the learners record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `POST /v1/samples`.
    Http,
    /// `thresher serve --stdin`.
    Stdin,
    /// `POST /v1/labels`: predicted samples joined to their late labels (`ingest::labels`).
    Labels,
    /// A JetStream message; `delivery` numbers the source's batches from 1 in admission order.
    Nats { delivery: u64 },
}

impl Source {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Source::Http => "http",
            Source::Stdin => "stdin",
            Source::Labels => "labels",
            Source::Nats { .. } => "nats",
        }
    }

    fn delivery(self) -> u64 {
        match self {
            Source::Nats { delivery } => delivery,
            Source::Http | Source::Stdin | Source::Labels => 0,
        }
    }

    /// Whether its batches go to the write-ahead log (NATS redelivers what no checkpoint held).
    fn logged(self) -> bool {
        !matches!(self, Source::Nats { .. })
    }
}

/// The write-ahead log batches are appended to (with the dictionary's new names before them).
pub struct AdmissionLog {
    pub wal: Arc<Wal>,
}

/// The ingest side's shared handle: the queue's sender, the sample budget and the counters.
pub struct Admission {
    /// Why a lock around the sender: [`Admission::close`] takes it out (closing ingest) while handlers
    /// may still be finishing; they hold the lock only for a non-blocking `try_send`.
    sender: Mutex<Option<Sender<Batch>>>,
    /// Samples admitted and not yet absorbed by every learner, bounded by `ingest.queue_samples`.
    budget: Arc<SampleBudget>,
    metrics: Metrics,
    /// The feature dictionary whose kind and names admitted bodies claim.
    dictionary: Arc<FeatureDictionary>,
    /// The write-ahead log (`durability.wal` other than `off`, with a data directory).
    log: Option<AdmissionLog>,
    /// Whether checkpoints succeed (`GET /readyz` reads it).
    persistence: Arc<Persistence>,
}

impl Admission {
    pub fn new(
        sender: Sender<Batch>,
        budget: Arc<SampleBudget>,
        metrics: Metrics,
        dictionary: Arc<FeatureDictionary>,
    ) -> Admission {
        Admission {
            sender: Mutex::new(Some(sender)),
            budget,
            metrics,
            dictionary,
            log: None,
            persistence: Arc::default(),
        }
    }

    /// Appends admitted HTTP and stdin batches to `log` before they are acknowledged.
    pub fn with_log(mut self, log: Option<AdmissionLog>) -> Admission {
        self.log = log.filter(|l| l.wal.mode() != WalMode::Off);
        self
    }

    /// Shares the checkpoint writer's record of failures.
    pub fn with_persistence(mut self, persistence: Arc<Persistence>) -> Admission {
        self.persistence = persistence;
        self
    }

    /// Why accepted samples cannot be persisted now (checkpoints failing), if they cannot.
    pub fn persistence_failure(&self) -> Option<String> {
        self.persistence.failure()
    }

    /// Whether [`Admission::admit`] may wait for an fsync (`durability.wal = "always"`): async callers
    /// then call it on the blocking pool.
    pub fn waits_for_fsync(&self) -> bool {
        self.log
            .as_ref()
            .is_some_and(|l| l.wal.mode() == WalMode::Always)
    }

    /// Whether a batch offered now would be refused as [`AdmitError::QueueFull`] (the queue or the
    /// budget is full): a line body is then refused before it is parsed, since parsing bodies only to
    /// drop them would take the CPU the learners need to catch up.
    pub fn is_full(&self) -> bool {
        self.sender.lock().as_ref().is_some_and(|tx| tx.is_full())
            || self.budget.in_flight() >= self.budget.limit()
    }

    /// An empty reservation of the sample budget for a parse to grow as its rows appear
    /// ([`crate::ingest::inflight::ParseWatch`]), and the budget's limit.
    pub fn parse_ticket(&self) -> (Ticket, usize) {
        (self.budget.empty_ticket(), self.budget.limit())
    }

    /// Counts `n` samples refused because the queue was full (without offering them).
    pub fn refused_full(&self, n: usize) {
        self.metrics
            .rejected
            .with_label_values(&[reason::QUEUE_FULL])
            .inc_by(n as u64);
    }

    /// Offers `samples` to the learners without waiting, granting `claim` (what their parse asked of
    /// the dictionary) if they are admitted; counts them under `source` when admitted, as
    /// `queue_full` rejections when refused for room. Returns how many were admitted.
    pub fn admit(
        &self,
        samples: SampleBlock,
        claim: Claim,
        source: Source,
    ) -> Result<usize, AdmitError> {
        // Encoded before the lock: only the sequence number and the checksum are set under it.
        let framed = self
            .log_of(source)
            .map(|_| record::encode_samples(&samples));
        let reserved = QueuedBatch::reserve(&self.budget, samples).map_err(|back| back.len());
        self.offer(reserved, claim, framed, source)
    }

    /// [`Admission::admit`] for samples whose reservation a parse already holds (`ticket`, trimmed to
    /// them): never refused for the budget, only for a full queue or log.
    pub fn admit_reserved(
        &self,
        samples: SampleBlock,
        claim: Claim,
        ticket: Ticket,
        source: Source,
    ) -> Result<usize, AdmitError> {
        let framed = self
            .log_of(source)
            .map(|_| record::encode_samples(&samples));
        self.offer(
            Ok(QueuedBatch::with_ticket(samples, ticket)),
            claim,
            framed,
            source,
        )
    }

    /// Offers a reserved batch to the queue, appending `framed` to the log first when given (or
    /// counts a batch of `n` the budget refused).
    fn offer(
        &self,
        reserved: Result<QueuedBatch, usize>,
        claim: Claim,
        framed: Option<Vec<u8>>,
        source: Source,
    ) -> Result<usize, AdmitError> {
        let n = match &reserved {
            Ok(batch) => batch.samples().len(),
            Err(n) => *n,
        };
        let reserved = reserved.map(|mut batch| {
            batch.set_delivery(source.delivery());
            batch
        });
        let sent = match (self.sender.lock().as_ref(), reserved) {
            (None, _) => Err(AdmitError::ShuttingDown),
            (Some(_), Err(_)) => Err(AdmitError::QueueFull),
            // A refused batch is dropped with its reservation, which gives the samples back.
            (Some(tx), Ok(batch)) => self.log_and_send(tx, batch, &claim, framed),
        };
        let sent = sent.and_then(|seq| self.synced(seq));
        self.count(source, n, sent.map(|_| n))
    }

    /// The log a batch from `source` goes to, if any.
    fn log_of(&self, source: Source) -> Option<&AdmissionLog> {
        self.log.as_ref().filter(|_| source.logged())
    }

    /// Under the sender's lock: if the queue has room, grants `claim`, appending `framed` (if given;
    /// re-encoded if the grant rewrote the samples' indices) to the log as the grant's commit, and
    /// sends the batch with its sequence number; returns the number (0: not logged).
    fn log_and_send(
        &self,
        tx: &Sender<Batch>,
        mut batch: QueuedBatch,
        claim: &Claim,
        framed: Option<Vec<u8>>,
    ) -> Result<u64, AdmitError> {
        if tx.is_full() {
            return Err(AdmitError::QueueFull);
        }
        let seq = self
            .dictionary
            .grant(
                claim,
                batch.samples_mut(),
                |names, samples, rewritten| match (framed, &self.log) {
                    (Some(framed), Some(log)) => {
                        let framed = match rewritten {
                            true => record::encode_samples(samples),
                            false => framed,
                        };
                        log.wal
                            .append_with(framed, names)
                            .map_err(|e| self.log_failed(&e))
                    }
                    _ => Ok(0),
                },
            )
            .map_err(|e| match e {
                GrantError::Refused(e) => AdmitError::Invalid(e),
                GrantError::Commit(e) => e,
            })?;
        batch.set_logged(seq);
        // Room was seen under this lock and only the router takes from the queue: `Full` cannot
        // happen here, so a logged batch is always a queued one.
        match tx.try_send(Arc::new(batch)) {
            Ok(()) => Ok(seq),
            Err(TrySendError::Full(_)) => Err(AdmitError::QueueFull),
            Err(TrySendError::Disconnected(_)) => Err(AdmitError::ShuttingDown),
        }
    }

    /// `always`: waits until the batch numbered `seq` is fsynced.
    fn synced(&self, seq: u64) -> Result<u64, AdmitError> {
        match &self.log {
            Some(log) if seq > 0 && log.wal.mode() == WalMode::Always => log
                .wal
                .sync_through(seq)
                .map(|()| seq)
                .map_err(|e| self.log_failed(&e)),
            _ => Ok(seq),
        }
    }

    fn log_failed(&self, e: &WalError) -> AdmitError {
        match e {
            WalError::Full { .. } => AdmitError::LogFull,
            _ => {
                tracing::error!(error = %e, "write-ahead log append failed; batch refused");
                AdmitError::LogFailed
            }
        }
    }

    /// Counts the outcome of offering `n` samples from `source`.
    fn count(
        &self,
        source: Source,
        n: usize,
        sent: Result<usize, AdmitError>,
    ) -> Result<usize, AdmitError> {
        match sent {
            Ok(n) => self.admitted(source, n),
            Err(AdmitError::QueueFull) => self.refused_full(n),
            Err(AdmitError::LogFull | AdmitError::LogFailed) => self
                .metrics
                .rejected
                .with_label_values(&[reason::WAL_FULL])
                .inc_by(n as u64),
            Err(AdmitError::Invalid(_)) => self
                .metrics
                .rejected
                .with_label_values(&[reason::INVALID])
                .inc_by(n as u64),
            Err(AdmitError::ShuttingDown) => {}
        }
        sent
    }

    /// Replay at start: offers a batch read back from the write-ahead log, numbered `seq`, waiting for
    /// room like [`Admission::admit_waiting`]; it is not logged again (it is in the log). `false`
    /// when stopping.
    pub fn admit_replayed(
        &self,
        samples: SampleBlock,
        seq: u64,
        stop: &AtomicBool,
        poll: Duration,
    ) -> bool {
        let Some(mut queued) = self.reserve_waiting(samples, stop, poll) else {
            return false;
        };
        queued.set_logged(seq);
        let mut item = Some(queued);
        loop {
            {
                let guard = self.sender.lock();
                let Some(tx) = guard.as_ref() else {
                    return false;
                };
                if !tx.is_full() {
                    return tx.try_send(Arc::new(item.take().expect("once"))).is_ok();
                }
            }
            if stop.load(Ordering::Acquire) {
                return false;
            }
            std::thread::sleep(poll);
        }
    }

    /// Reserves room for `samples` in the budget, waiting (re-checking `stop` every `poll`); `None`
    /// when stopping.
    fn reserve_waiting(
        &self,
        samples: SampleBlock,
        stop: &AtomicBool,
        poll: Duration,
    ) -> Option<QueuedBatch> {
        let mut samples = samples;
        loop {
            match QueuedBatch::reserve(&self.budget, samples) {
                Ok(queued) => return Some(queued),
                Err(back) if !stop.load(Ordering::Acquire) => {
                    samples = *back;
                    std::thread::sleep(poll);
                }
                Err(_) => return None,
            }
        }
    }

    /// [`Admission::admit`] for a source that can wait (stdin, NATS): waits for room in the budget,
    /// then in the queue, re-checking `stop` every `poll` (the lock is not held while waiting, so the
    /// HTTP handlers are not held up); when stopping, the batch is refused and counted as
    /// `queue_full`.
    pub fn admit_waiting(
        &self,
        samples: SampleBlock,
        claim: Claim,
        source: Source,
        stop: &AtomicBool,
        poll: Duration,
    ) -> Result<usize, AdmitError> {
        let n = samples.len();
        let refused = |e| {
            self.refused_full(n);
            Err(e)
        };
        if self.sender.lock().is_none() {
            return refused(AdmitError::ShuttingDown);
        }
        let framed = self
            .log_of(source)
            .map(|_| record::encode_samples(&samples));
        let Some(mut queued) = self.reserve_waiting(samples, stop, poll) else {
            return refused(AdmitError::QueueFull);
        };
        queued.set_delivery(source.delivery());
        let mut item = Some((queued, framed));
        loop {
            {
                let guard = self.sender.lock();
                let Some(tx) = guard.as_ref() else {
                    return refused(AdmitError::ShuttingDown);
                };
                if !tx.is_full() {
                    let (queued, framed) = item.take().expect("sent once");
                    let sent = self.log_and_send(tx, queued, &claim, framed);
                    drop(guard);
                    let sent = sent.and_then(|seq| self.synced(seq)).map(|_| n);
                    return self.count(source, n, sent);
                }
            }
            if stop.load(Ordering::Acquire) {
                return refused(AdmitError::QueueFull);
            }
            std::thread::sleep(poll);
        }
    }

    /// Closes ingest: every later offer is [`AdmitError::ShuttingDown`]. Batches already queued stay
    /// for the router to drain.
    pub fn close(&self) {
        self.sender.lock().take();
    }

    /// Sets the queue gauges (`thresher_queue_batches`, `thresher_samples_in_flight`).
    pub fn set_gauges(&self) {
        let depth = self.sender.lock().as_ref().map_or(0, |tx| tx.len());
        self.metrics.queue_batches.set(depth as i64);
        self.metrics
            .samples_in_flight
            .set(self.budget.in_flight() as i64);
    }

    fn admitted(&self, source: Source, n: usize) {
        self.metrics
            .ingested
            .with_label_values(&[source.label()])
            .inc_by(n as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::budget::tests::samples;

    fn counted(metrics: &Metrics, family: &str, label: &str) -> f64 {
        match family {
            "ingested" => metrics.ingested.with_label_values(&[label]).get() as f64,
            _ => metrics.rejected.with_label_values(&[label]).get() as f64,
        }
    }

    /// All or nothing: a batch over the budget or into a full queue is refused whole, counted, and
    /// gives its reservation back; after `close` every offer is refused.
    #[test]
    fn admits_whole_batches_refuses_whole_batches_and_counts_both() {
        let (tx, rx) = crossbeam_channel::bounded(2);
        let metrics = Metrics::new();
        let admission = Admission::new(
            tx,
            SampleBudget::new(5),
            metrics.clone(),
            Default::default(),
        );
        assert_eq!(
            admission.admit(samples(3), Claim::default(), Source::Http),
            Ok(3)
        );
        // 3 + 3 > 5: refused whole (a batch only exceeds the limit alone, into an empty budget).
        assert_eq!(
            admission.admit(samples(3), Claim::default(), Source::Http),
            Err(AdmitError::QueueFull)
        );
        assert_eq!(
            admission.admit(samples(2), Claim::default(), Source::Http),
            Ok(2)
        );
        assert!(admission.is_full(), "the budget is used up");
        assert_eq!(
            admission.admit(samples(1), Claim::default(), Source::Http),
            Err(AdmitError::QueueFull)
        );
        assert_eq!(counted(&metrics, "ingested", "http"), 5.0);
        assert_eq!(counted(&metrics, "rejected", reason::QUEUE_FULL), 4.0);
        let queued = rx.recv().unwrap();
        assert_eq!(queued.samples().len(), 3);
        drop(queued);
        assert!(!admission.is_full(), "the budget came back with the batch");
        assert_eq!(
            admission.admit(samples(3), Claim::default(), Source::Http),
            Ok(3)
        );
        assert!(admission.is_full(), "the two-batch queue is full");
        assert_eq!(
            admission.admit(samples(0), Claim::default(), Source::Http),
            Err(AdmitError::QueueFull)
        );
        admission.close();
        assert_eq!(
            admission.admit(samples(1), Claim::default(), Source::Http),
            Err(AdmitError::ShuttingDown)
        );
        let stop = AtomicBool::new(true);
        let waited = admission.admit_waiting(
            samples(1),
            Claim::default(),
            Source::Stdin,
            &stop,
            Duration::ZERO,
        );
        assert_eq!(waited, Err(AdmitError::ShuttingDown));
    }

    /// With a log: HTTP and stdin batches carry log numbers in queue order, NATS batches none; a
    /// batch refused for room is not logged; a full log refuses the batch, counted as `wal_full`.
    #[test]
    fn logged_batches_are_numbered_in_queue_order_and_a_full_log_refuses() {
        use crate::config::DurabilityConfig;
        let dir = tempfile::tempdir().unwrap();
        let metrics = Metrics::new();
        let config = DurabilityConfig {
            wal: WalMode::Batch,
            wal_max_bytes: 1 << 20,
            wal_fsync_interval: Duration::from_secs(1),
        };
        let wal = Wal::open(dir.path(), &config, 0, false, metrics.clone()).unwrap();
        let (tx, rx) = crossbeam_channel::bounded(3);
        let admission = Admission::new(
            tx,
            SampleBudget::new(1 << 30),
            metrics.clone(),
            Default::default(),
        )
        .with_log(Some(AdmissionLog { wal: wal.clone() }));
        let stop = AtomicBool::new(false);
        assert_eq!(
            admission.admit(samples(2), Claim::default(), Source::Http),
            Ok(2)
        );
        assert_eq!(
            admission.admit(samples(1), Claim::default(), Source::Nats { delivery: 7 }),
            Ok(1)
        );
        let waited = admission.admit_waiting(
            samples(1),
            Claim::default(),
            Source::Stdin,
            &stop,
            Duration::ZERO,
        );
        assert_eq!(waited, Ok(1));
        // The queue is full: refused, and not logged.
        assert_eq!(
            admission.admit(samples(1), Claim::default(), Source::Http),
            Err(AdmitError::QueueFull)
        );
        let numbers: Vec<(u64, u64)> = rx.try_iter().map(|b| (b.logged(), b.delivery())).collect();
        assert_eq!(numbers, [(1, 0), (0, 7), (2, 0)]);
        assert_eq!(wal.last_seq(), 2);
        // Fill the log (1 MiB): the refusal is `LogFull`, counted, and nothing is queued.
        let refused = loop {
            match admission.admit(samples(20_000), Claim::default(), Source::Http) {
                Ok(_) => drop(rx.try_recv()),
                Err(e) => break e,
            }
        };
        assert_eq!(refused, AdmitError::LogFull);
        assert!(rx.try_recv().is_err());
        assert_eq!(counted(&metrics, "rejected", reason::WAL_FULL), 20_000.0);
    }
}
