//! How much solving a learner may do while request bodies wait to be parsed: the daemon's "ingest
//! first" rule (`ingest.busy_step_share`).
//!
//! Why: a learner steps continuously on its window, and a step is work that can wait — the next one
//! improves the same model a moment later. A request body is work nothing but a parser can do, and a
//! body not parsed is ingest lost. When every core is busy (on the 2-core reference machine, under a
//! sustained stream, always), each millisecond a learner spends stepping while bodies are being parsed
//! is taken from ingest. So while the [`ParseGauge`](crate::ingest::pressure::ParseGauge) reads busy, a
//! learner earns step time only by absorbing samples — `share / (1 - share)` of its insert time — and
//! spends at most that on steps; absorbing and certifying are never limited. When no body is being
//! parsed, it steps freely (until its tolerance is met), as before.

use std::time::Duration;

/// The most step time a learner can bank: a burst of inserts buys a bounded burst of steps, not an
/// unbounded one, so the rule still holds over any stretch of tens of milliseconds.
const MAX_CREDIT: Duration = Duration::from_millis(50);

/// A learner's step-time balance under ingest pressure. A step cannot be cut short, so the balance may
/// go negative (a step longer than the credit left): that debt is paid off by later inserts before the
/// next step, which keeps the share on average however long a step is against an insert.
#[derive(Debug, Clone)]
pub struct StepPacer {
    /// Step time earned per unit of insert time; `None` when the share is 1 (no limit).
    earn_ratio: Option<f64>,
    /// Step time earned minus step time spent, seconds (at most `MAX_CREDIT`).
    balance: f64,
}

impl StepPacer {
    /// `share` in `(0, 1]`: the most of a learner's busy time that steps may take while ingest is busy.
    pub fn new(share: f64) -> StepPacer {
        StepPacer {
            earn_ratio: (share < 1.0).then(|| share / (1.0 - share)),
            balance: 0.0,
        }
    }

    /// Credits the time an insert took.
    pub fn absorbed(&mut self, insert_time: Duration) {
        if let Some(ratio) = self.earn_ratio {
            self.balance =
                (self.balance + insert_time.as_secs_f64() * ratio).min(MAX_CREDIT.as_secs_f64());
        }
    }

    /// How long the learner may step now: unlimited (`None`) unless ingest is busy and the share is
    /// below 1; `Some(ZERO)` means wait for the next batch instead.
    pub fn allowance(&self, ingest_busy: bool) -> Option<Duration> {
        match (ingest_busy, self.earn_ratio) {
            (true, Some(_)) => Some(Duration::from_secs_f64(self.balance.max(0.0))),
            _ => None,
        }
    }

    /// Debits the time steps took under an allowance (possibly more than it was).
    pub fn stepped(&mut self, step_time: Duration) {
        self.balance -= step_time.as_secs_f64();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn allowance_ms(pacer: &StepPacer) -> f64 {
        pacer
            .allowance(true)
            .map(|d| d.as_secs_f64() * 1e3)
            .unwrap()
    }

    #[test]
    fn a_quarter_share_earns_a_third_of_the_insert_time() {
        let mut pacer = StepPacer::new(0.25);
        assert_eq!(pacer.allowance(true), Some(Duration::ZERO));
        pacer.absorbed(9 * MS);
        assert!((allowance_ms(&pacer) - 3.0).abs() < 1e-9);
        pacer.stepped(2 * MS);
        assert!((allowance_ms(&pacer) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_step_longer_than_the_credit_is_paid_off_before_the_next() {
        let mut pacer = StepPacer::new(0.25);
        pacer.absorbed(3 * MS); // earns 1 ms
        pacer.stepped(4 * MS); // a 4 ms step: 3 ms of debt
        for _ in 0..8 {
            pacer.absorbed(MS); // each earns 1/3 ms
            assert_eq!(pacer.allowance(true), Some(Duration::ZERO));
        }
        pacer.absorbed(2 * MS);
        assert!(allowance_ms(&pacer) > 0.0);
    }

    #[test]
    fn an_idle_stream_or_a_full_share_never_limits_steps() {
        let mut paced = StepPacer::new(0.1);
        assert_eq!(paced.allowance(false), None);
        let mut free = StepPacer::new(1.0);
        free.absorbed(10 * MS);
        free.stepped(100 * MS);
        assert_eq!(free.allowance(true), None);
        paced.absorbed(Duration::from_secs(10));
        assert_eq!(paced.allowance(true), Some(MAX_CREDIT));
    }
}
