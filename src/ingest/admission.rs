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

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{SendTimeoutError, Sender, TrySendError};
use parking_lot::Mutex;

use super::AdmitError;
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
    /// A JetStream message; `delivery` numbers the source's batches from 1 in admission order.
    Nats { delivery: u64 },
}

impl Source {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Source::Http => "http",
            Source::Stdin => "stdin",
            Source::Nats { .. } => "nats",
        }
    }

    fn delivery(self) -> u64 {
        match self {
            Source::Nats { delivery } => delivery,
            Source::Http | Source::Stdin => 0,
        }
    }
}

/// The ingest side's shared handle: the queue's sender, the sample budget and the counters.
pub struct Admission {
    /// Why a lock around the sender: [`Admission::close`] takes it out (closing ingest) while handlers
    /// may still be finishing; they hold the lock only for a non-blocking `try_send`.
    sender: Mutex<Option<Sender<Batch>>>,
    /// Samples admitted and not yet absorbed by every learner, bounded by `ingest.queue_samples`.
    budget: Arc<SampleBudget>,
    metrics: Metrics,
}

impl Admission {
    pub fn new(sender: Sender<Batch>, budget: Arc<SampleBudget>, metrics: Metrics) -> Admission {
        Admission {
            sender: Mutex::new(Some(sender)),
            budget,
            metrics,
        }
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

    /// Offers `samples` to the learners without waiting; counts them under `source` when admitted, as
    /// `queue_full` rejections when refused for room. Returns how many were admitted.
    pub fn admit(&self, samples: SampleBlock, source: Source) -> Result<usize, AdmitError> {
        let reserved = QueuedBatch::reserve(&self.budget, samples).map_err(|back| back.len());
        self.offer(reserved, source)
    }

    /// [`Admission::admit`] for samples whose reservation a parse already holds (`ticket`, trimmed to
    /// them): never refused for the budget, only for a full queue.
    pub fn admit_reserved(
        &self,
        samples: SampleBlock,
        ticket: Ticket,
        source: Source,
    ) -> Result<usize, AdmitError> {
        self.offer(Ok(QueuedBatch::with_ticket(samples, ticket)), source)
    }

    /// Offers a reserved batch to the queue (or counts a batch of `n` the budget refused).
    fn offer(
        &self,
        reserved: Result<QueuedBatch, usize>,
        source: Source,
    ) -> Result<usize, AdmitError> {
        let n = match &reserved {
            Ok(batch) => batch.samples().len(),
            Err(n) => *n,
        };
        let reserved = reserved.map(|mut batch| {
            batch.set_delivery(source.delivery());
            Arc::new(batch)
        });
        let sent = match (self.sender.lock().as_ref(), reserved) {
            (None, _) => Err(AdmitError::ShuttingDown),
            (Some(_), Err(_)) => Err(AdmitError::QueueFull),
            // A refused batch is dropped with its reservation, which gives the samples back.
            (Some(tx), Ok(batch)) => match tx.try_send(batch) {
                Ok(()) => Ok(n),
                Err(TrySendError::Full(_)) => Err(AdmitError::QueueFull),
                Err(TrySendError::Disconnected(_)) => Err(AdmitError::ShuttingDown),
            },
        };
        match sent {
            Ok(n) => self.admitted(source, n),
            Err(AdmitError::QueueFull) => self.refused_full(n),
            Err(AdmitError::ShuttingDown) => {}
        }
        sent
    }

    /// [`Admission::admit`] for a source that can wait (stdin): waits for room in the budget, then in
    /// the queue, re-checking `stop` every `poll`; when stopping, the batch is refused and counted as
    /// `queue_full`.
    pub fn admit_waiting(
        &self,
        samples: SampleBlock,
        source: Source,
        stop: &AtomicBool,
        poll: Duration,
    ) -> Result<usize, AdmitError> {
        let n = samples.len();
        let refused = |e| {
            self.refused_full(n);
            Err(e)
        };
        // The sender is cloned out of the lock: a blocking send must not hold up the HTTP handlers.
        let Some(tx) = self.sender.lock().clone() else {
            return refused(AdmitError::ShuttingDown);
        };
        let mut samples = samples;
        let queued = loop {
            match QueuedBatch::reserve(&self.budget, samples) {
                Ok(queued) => break queued,
                Err(back) if !stop.load(Ordering::Acquire) => {
                    samples = *back;
                    std::thread::sleep(poll);
                }
                Err(_) => return refused(AdmitError::QueueFull),
            }
        };
        let mut queued = queued;
        queued.set_delivery(source.delivery());
        let mut item: Batch = Arc::new(queued);
        loop {
            match tx.send_timeout(item, poll) {
                Ok(()) => {
                    self.admitted(source, n);
                    return Ok(n);
                }
                Err(SendTimeoutError::Timeout(back)) if !stop.load(Ordering::Acquire) => {
                    item = back
                }
                Err(SendTimeoutError::Timeout(_)) => return refused(AdmitError::QueueFull),
                Err(SendTimeoutError::Disconnected(_)) => return refused(AdmitError::ShuttingDown),
            }
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
        let admission = Admission::new(tx, SampleBudget::new(5), metrics.clone());
        assert_eq!(admission.admit(samples(3), Source::Http), Ok(3));
        // 3 + 3 > 5: refused whole (a batch only exceeds the limit alone, into an empty budget).
        assert_eq!(
            admission.admit(samples(3), Source::Http),
            Err(AdmitError::QueueFull)
        );
        assert_eq!(admission.admit(samples(2), Source::Http), Ok(2));
        assert!(admission.is_full(), "the budget is used up");
        assert_eq!(
            admission.admit(samples(1), Source::Http),
            Err(AdmitError::QueueFull)
        );
        assert_eq!(counted(&metrics, "ingested", "http"), 5.0);
        assert_eq!(counted(&metrics, "rejected", reason::QUEUE_FULL), 4.0);
        let queued = rx.recv().unwrap();
        assert_eq!(queued.samples().len(), 3);
        drop(queued);
        assert!(!admission.is_full(), "the budget came back with the batch");
        assert_eq!(admission.admit(samples(3), Source::Http), Ok(3));
        assert!(admission.is_full(), "the two-batch queue is full");
        assert_eq!(
            admission.admit(samples(0), Source::Http),
            Err(AdmitError::QueueFull)
        );
        admission.close();
        assert_eq!(
            admission.admit(samples(1), Source::Http),
            Err(AdmitError::ShuttingDown)
        );
        let stop = AtomicBool::new(true);
        let waited = admission.admit_waiting(samples(1), Source::Stdin, &stop, Duration::ZERO);
        assert_eq!(waited, Err(AdmitError::ShuttingDown));
    }
}
