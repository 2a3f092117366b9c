//! The bound on request memory in flight: bytes of bodies being read or parsed
//! ([`InflightBytes`], `server.inflight_bytes`) and the watch a parse runs under ([`ParseWatch`]),
//! which grows the parse's reservation of the sample budget (`ingest.queue_samples`) as rows appear
//! and stops the parse when that budget is spent or its client has gone.
//!
//! Why both: the bytes of a body are known before it is read (its `Content-Length`), so they are
//! reserved first and a body that does not fit is never read; but parsing multiplies a body (one
//! 32 MB body of `1\n` lines is 16.7 M samples), and the samples only a parse can count. Counting them
//! against the same budget the queue uses, as the parse proceeds, makes `ingest.queue_samples` hold for
//! samples being parsed, queued or not yet absorbed alike, whatever the body's size. The RSS bound
//! these two give is stated in `docs/limits.md`.
//!
//! Every refusal is counted by reason in `thresher_inflight_refused_total` ([`refused`]).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::ingest::{BatchError, BodyError};
use crate::metrics::{inflight_refused as refused, Metrics};
use crate::ring::budget::Ticket;

/// Request bytes in flight (bodies being read or parsed) against `server.inflight_bytes`.
pub struct InflightBytes {
    limit: usize,
    used: AtomicUsize,
    metrics: Metrics,
}

impl InflightBytes {
    pub fn new(limit: usize, metrics: Metrics) -> Arc<InflightBytes> {
        Arc::new(InflightBytes {
            limit,
            used: AtomicUsize::new(0),
            metrics,
        })
    }

    /// An empty reservation, grown by [`BytesTicket::reserve`].
    pub fn ticket(self: &Arc<Self>) -> BytesTicket {
        BytesTicket {
            budget: self.clone(),
            bytes: 0,
        }
    }

    /// Bytes reserved now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    fn refuse(&self, reason: &str) {
        self.metrics
            .inflight_refused
            .with_label_values(&[reason])
            .inc();
    }
}

/// Bytes held for one request; given back on drop (when its body's chunks are freed).
pub struct BytesTicket {
    budget: Arc<InflightBytes>,
    bytes: usize,
}

impl BytesTicket {
    /// Reserves `n` more bytes: [`BodyError::OverBudget`] (413, counted) if this request alone would
    /// hold more than the whole budget, [`BodyError::Busy`] (503, counted) if the others leave no
    /// room for it.
    pub fn reserve(&mut self, n: usize) -> Result<(), BodyError> {
        let budget = &self.budget;
        let wanted = self.bytes.saturating_add(n);
        if wanted > budget.limit {
            budget.refuse(refused::BYTES_TOO_LARGE);
            return Err(BodyError::OverBudget {
                what: "bytes",
                key: "server.inflight_bytes",
                limit: budget.limit,
            });
        }
        let limit = budget.limit;
        let taken = budget
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (used.saturating_add(n) <= limit).then_some(used + n)
            });
        if taken.is_err() {
            budget.refuse(refused::BYTES_BUSY);
            return Err(BodyError::Busy {
                what: "bytes",
                key: "server.inflight_bytes",
            });
        }
        self.bytes = wanted;
        Ok(())
    }

    /// Bytes this ticket holds.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for BytesTicket {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// Set when the request a parse serves is gone (its handler was dropped: the client closed the
/// connection); the parse then stops at its next row.
#[derive(Debug, Default, Clone)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// A guard that sets the flag when dropped: held by the request's handler, so dropping the handler
    /// (hyper does when its client goes away mid-request) stops the parse on the blocking pool.
    pub fn on_drop(&self) -> CancelOnDrop {
        CancelOnDrop(self.clone())
    }
}

/// Sets its [`Cancel`] when dropped.
#[derive(Debug)]
pub struct CancelOnDrop(Cancel);

impl CancelOnDrop {
    /// The request finished: dropping the guard no longer cancels anything.
    pub fn disarm(self) {
        std::mem::forget(self);
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0 .0.store(true, Ordering::Release);
    }
}

/// Why a watched parse stopped before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// The sample budget has no room for more rows now (503).
    Busy,
    /// The body holds more samples than the whole budget (413).
    TooMany,
    /// The client went away.
    Cancelled,
}

/// Rows the watch reserves at a time: the budget's atomic is touched once per this many rows.
const ROWS_PER_GROWTH: usize = 1024;

/// The watch a body's parse runs under: reserves samples ahead of the rows parsed and stops the
/// parse (a [`BatchError`] the caller replaces with [`ParseWatch::stopped`]) when the budget is spent
/// or the request is cancelled.
pub struct ParseWatch {
    ticket: Ticket,
    limit: usize,
    cancel: Cancel,
    stopped: Option<Stopped>,
    metrics: Metrics,
}

impl ParseWatch {
    /// `ticket`: an empty reservation of the sample budget whose limit is `limit`.
    pub fn new(ticket: Ticket, limit: usize, cancel: Cancel, metrics: Metrics) -> ParseWatch {
        ParseWatch {
            ticket,
            limit,
            cancel,
            stopped: None,
            metrics,
        }
    }

    /// Called before row `rows` (1-based) is kept: Ok to go on, or the error that ends the parse.
    pub fn row(&mut self, rows: usize) -> Result<(), BatchError> {
        if rows <= self.ticket.samples() && self.stopped.is_none() {
            return Ok(());
        }
        let stop = if self.stopped.is_some() {
            self.stopped
        } else if self.cancel.is_set() {
            Some(Stopped::Cancelled)
        } else {
            // Ahead by a step when there is room for it, else by exactly the row.
            let needed = rows.saturating_sub(self.ticket.samples());
            let step = ROWS_PER_GROWTH.min(self.limit.saturating_sub(self.ticket.samples()));
            if rows > self.limit {
                Some(Stopped::TooMany)
            } else if self.ticket.try_grow(step.max(needed)) || self.ticket.try_grow(needed) {
                None
            } else {
                Some(Stopped::Busy)
            }
        };
        match stop {
            None => Ok(()),
            Some(stop) => {
                if self.stopped.is_none() {
                    self.stopped = Some(stop);
                    let reason = match stop {
                        Stopped::Busy => refused::SAMPLES_BUSY,
                        Stopped::TooMany => refused::SAMPLES_TOO_LARGE,
                        Stopped::Cancelled => refused::CLIENT_GONE,
                    };
                    self.metrics
                        .inflight_refused
                        .with_label_values(&[reason])
                        .inc();
                }
                Err(BatchError {
                    line: None,
                    message: "the parse was stopped".into(),
                    samples: rows,
                })
            }
        }
    }

    /// Why the parse stopped early, if it did.
    pub fn stopped(&self) -> Option<Stopped> {
        self.stopped
    }

    /// The reservation the parse took, for the batch it became.
    pub fn into_ticket(self) -> Ticket {
        self.ticket
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::SampleBudget;

    fn count(m: &Metrics, reason: &str) -> u64 {
        m.inflight_refused.with_label_values(&[reason]).get()
    }

    /// Bytes: a request over the whole budget is 413, one that does not fit beside the others 503;
    /// each counted; dropped tickets give their bytes back.
    #[test]
    fn bytes_refuse_too_large_and_busy_and_come_back() {
        let m = Metrics::new();
        let budget = InflightBytes::new(100, m.clone());
        let mut a = budget.ticket();
        a.reserve(60).unwrap();
        let mut b = budget.ticket();
        assert!(matches!(b.reserve(50), Err(BodyError::Busy { .. })));
        assert!(matches!(b.reserve(101), Err(BodyError::OverBudget { .. })));
        b.reserve(40).unwrap();
        assert_eq!(budget.used(), 100);
        drop(a);
        assert_eq!(budget.used(), 40);
        drop(b);
        assert_eq!(budget.used(), 0);
        assert_eq!(count(&m, refused::BYTES_BUSY), 1);
        assert_eq!(count(&m, refused::BYTES_TOO_LARGE), 1);
    }

    /// Samples: the watch reserves ahead of the rows, stops at a full budget (busy) or past the whole
    /// limit (too many), and at a cancelled request; the first stop is the one reported and counted.
    #[test]
    fn the_watch_stops_at_the_budget_and_at_a_cancel() {
        let m = Metrics::new();
        let samples = SampleBudget::new(3000);
        let mut w = ParseWatch::new(samples.empty_ticket(), 3000, Cancel::default(), m.clone());
        for row in 1..=2000 {
            w.row(row).unwrap();
        }
        let left = 3000 - samples.in_flight();
        let mut other = ParseWatch::new(samples.empty_ticket(), 3000, Cancel::default(), m.clone());
        let stopped = (1..=3000).find(|&r| other.row(r).is_err()).unwrap();
        assert_eq!(stopped, left + 1, "room for exactly what is left");
        assert_eq!(other.stopped(), Some(Stopped::Busy));
        drop(other);
        let ticket = w.into_ticket();
        drop(ticket);
        assert_eq!(samples.in_flight(), 0);
        let mut alone = ParseWatch::new(samples.empty_ticket(), 3000, Cancel::default(), m.clone());
        assert!((1..=3001).any(|r| alone.row(r).is_err()));
        assert_eq!(alone.stopped(), Some(Stopped::TooMany));
        drop(alone);
        let cancel = Cancel::default();
        let mut c = ParseWatch::new(samples.empty_ticket(), 3000, cancel.clone(), m.clone());
        c.row(1).unwrap();
        drop(cancel.on_drop());
        assert!((2..=3000).any(|r| c.row(r).is_err()));
        assert_eq!(c.stopped(), Some(Stopped::Cancelled));
        assert_eq!(count(&m, refused::SAMPLES_BUSY), 1);
        assert_eq!(count(&m, refused::SAMPLES_TOO_LARGE), 1);
        assert_eq!(count(&m, refused::CLIENT_GONE), 1);
    }
}
