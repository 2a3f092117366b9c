//! The memory bound of the queue into the learners' windows, in samples: a [`SampleBudget`] that every
//! accepted batch reserves from and gives back when the last learner has absorbed it, and [`Batch`], the
//! shared batch that crosses from `ingest` to the learners. It sits with the window, below both, so that
//! neither depends on the other for the type they pass.
//!
//! Why samples and not only batches: the queues count batches (one request = one batch), but a batch can
//! hold one sample or fifty thousand. A bound in batches alone is either too small for small requests
//! (32 batches of 1 000 samples fill in milliseconds and clients get 503s while memory sits idle) or too
//! large for big ones. So the queues are deep in batches (`ingest.queue_capacity`) and the memory bound is
//! `ingest.queue_samples`: a request whose samples would take the accepted-but-not-yet-learned total over
//! it is refused with 503 (`queue_full`), like a full queue. A [`QueuedBatch`] carries its reservation as a
//! [`Ticket`]; the batch is shared (`Arc`) by every learner, so the samples are given back exactly when
//! the last learner drops it — when their memory is freed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::sample::SampleBlock;

/// Samples accepted and not yet absorbed by every learner, against a limit.
#[derive(Debug)]
pub struct SampleBudget {
    limit: usize,
    in_flight: AtomicUsize,
}

impl SampleBudget {
    pub fn new(limit: usize) -> Arc<SampleBudget> {
        Arc::new(SampleBudget {
            limit,
            in_flight: AtomicUsize::new(0),
        })
    }

    /// Reserves `n` samples, or `None` if that would exceed the limit. A batch always fits an empty
    /// budget, so a request larger than the limit alone is not refused forever (the body limit bounds it).
    pub fn try_reserve(self: &Arc<Self>, n: usize) -> Option<Ticket> {
        self.in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (used == 0 || used.saturating_add(n) <= self.limit).then_some(used + n)
            })
            .ok()
            .map(|_| Ticket {
                budget: self.clone(),
                samples: n,
            })
    }

    /// An empty reservation, to be grown as a body is parsed ([`Ticket::try_grow`]).
    pub fn empty_ticket(self: &Arc<Self>) -> Ticket {
        Ticket {
            budget: self.clone(),
            samples: 0,
        }
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    pub fn limit(&self) -> usize {
        self.limit
    }
}

/// A reservation of samples, given back on drop.
#[derive(Debug)]
pub struct Ticket {
    budget: Arc<SampleBudget>,
    samples: usize,
}

impl Ticket {
    /// Samples this ticket holds.
    pub fn samples(&self) -> usize {
        self.samples
    }

    /// Reserves `n` more samples, or false (nothing reserved) if that would take the budget over its
    /// limit. No exception for an empty budget: a parse grows its ticket as it goes, so a body with
    /// more samples than the whole limit fails here however quiet the daemon is.
    pub fn try_grow(&mut self, n: usize) -> bool {
        let limit = self.budget.limit;
        let grown = self
            .budget
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (used.saturating_add(n) <= limit).then_some(used + n)
            })
            .is_ok();
        if grown {
            self.samples += n;
        }
        grown
    }

    /// Gives back all but `n` of the samples held (a parse reserves ahead of its rows).
    pub fn shrink_to(&mut self, n: usize) {
        let excess = self.samples.saturating_sub(n);
        self.budget.in_flight.fetch_sub(excess, Ordering::AcqRel);
        self.samples -= excess;
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.budget
            .in_flight
            .fetch_sub(self.samples, Ordering::AcqRel);
    }
}

/// What the ingest queue carries: one batch, shared by every learner (`Arc`), holding its reservation of
/// the `ingest.queue_samples` budget until the last learner drops it.
pub type Batch = Arc<QueuedBatch>;

/// A batch on its way from ingest to the learners, with the reservation it holds.
#[derive(Debug)]
pub struct QueuedBatch {
    samples: SampleBlock,
    _ticket: Ticket,
    /// The source's delivery number (`Source::Nats`), 0 for sources that need no receipt: a learner
    /// records the highest it has absorbed, so a checkpoint can say which deliveries it holds.
    delivery: u64,
    /// Its write-ahead log sequence number (`ingest::wal`), 0 if not logged: a learner records the
    /// highest it has absorbed, so a checkpoint knows which logged batches it holds.
    logged: u64,
}

impl QueuedBatch {
    /// Reserves room for `samples` and wraps them, or gives them back if the budget is full (boxed: a
    /// refusal is the rare path, and a small `Result` is cheap to move on the common one).
    pub fn reserve(
        budget: &Arc<SampleBudget>,
        samples: SampleBlock,
    ) -> Result<QueuedBatch, Box<SampleBlock>> {
        match budget.try_reserve(samples.len()) {
            Some(ticket) => Ok(QueuedBatch {
                samples,
                _ticket: ticket,
                delivery: 0,
                logged: 0,
            }),
            None => Err(Box::new(samples)),
        }
    }

    /// Wraps `samples` with a reservation already taken for them (a parse's, [`Ticket::try_grow`]),
    /// trimmed to their number.
    pub fn with_ticket(samples: SampleBlock, mut ticket: Ticket) -> QueuedBatch {
        ticket.shrink_to(samples.len());
        QueuedBatch {
            samples,
            _ticket: ticket,
            delivery: 0,
            logged: 0,
        }
    }

    pub fn samples(&self) -> &SampleBlock {
        &self.samples
    }

    /// The samples, to rewrite before the batch is queued (feature indices given at admission).
    pub fn samples_mut(&mut self) -> &mut SampleBlock {
        &mut self.samples
    }

    /// The delivery number its source gave it (0: none).
    pub fn delivery(&self) -> u64 {
        self.delivery
    }

    pub(crate) fn set_delivery(&mut self, delivery: u64) {
        self.delivery = delivery;
    }

    /// Its write-ahead log sequence number (0: not logged).
    pub fn logged(&self) -> u64 {
        self.logged
    }

    pub(crate) fn set_logged(&mut self, seq: u64) {
        self.logged = seq;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    use crate::sample::Sample;

    /// `n` one-feature samples (`x_i = e_i`, label 1): a block whose only property that matters is its
    /// size (also the admission tests' fixture).
    pub(crate) fn samples(n: usize) -> SampleBlock {
        let samples: Vec<Sample> = (0..n)
            .map(|i| Sample::new(vec![i as u32], vec![1.0], 1.0, None).unwrap())
            .collect();
        SampleBlock::from_samples(&samples)
    }

    #[test]
    fn reserves_up_to_the_limit_and_gives_back_when_the_last_holder_drops() {
        let budget = SampleBudget::new(10);
        let a = Arc::new(QueuedBatch::reserve(&budget, samples(6)).unwrap());
        assert_eq!(budget.in_flight(), 6);
        // 6 + 5 > 10: refused, and the samples come back untouched.
        let back = QueuedBatch::reserve(&budget, samples(5)).unwrap_err();
        assert_eq!(back.len(), 5);
        assert_eq!(budget.in_flight(), 6);
        let b = QueuedBatch::reserve(&budget, samples(4)).unwrap();
        assert_eq!(budget.in_flight(), 10);
        // Shared by two learners: given back only when both have dropped it.
        let second_learner = a.clone();
        drop(a);
        assert_eq!(budget.in_flight(), 10);
        drop(second_learner);
        assert_eq!(budget.in_flight(), 4);
        drop(b);
        assert_eq!(budget.in_flight(), 0);
        // A batch over the limit fits an empty budget, and only then.
        let big = QueuedBatch::reserve(&budget, samples(25)).unwrap();
        assert!(QueuedBatch::reserve(&budget, samples(1)).is_err());
        drop(big);
        assert_eq!(budget.in_flight(), 0);
    }

    /// A parse's ticket grows up to the limit and no further (an empty budget included), and shrinks
    /// to its rows when it becomes a batch.
    #[test]
    fn a_growing_ticket_stops_at_the_limit_and_shrinks_to_its_rows() {
        let budget = SampleBudget::new(10);
        let mut ticket = budget.empty_ticket();
        assert!(ticket.try_grow(8));
        assert!(!ticket.try_grow(3), "8 + 3 > 10");
        assert_eq!((ticket.samples(), budget.in_flight()), (8, 8));
        let batch = QueuedBatch::with_ticket(samples(5), ticket);
        assert_eq!(budget.in_flight(), 5);
        drop(batch);
        let mut alone = budget.empty_ticket();
        assert!(!alone.try_grow(11), "more than the whole limit, even alone");
        assert_eq!(budget.in_flight(), 0);
    }
}
