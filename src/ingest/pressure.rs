//! How many request bodies the parser threads are working on right now: the signal a learner uses to
//! give the cores to ingest first (see `daemon::learner_loop`).
//!
//! Why: a learner steps continuously, and a step is work it could also do later; a parsed body is
//! work nothing else can do. On a machine whose cores are all busy, every millisecond a learner spends
//! stepping while bodies wait to be parsed is a millisecond of ingest lost. The gauge lets a learner
//! tell "idle stream, step freely" from "saturated stream, absorb and step only within a share".

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Bodies being parsed (HTTP POSTs between their parse's start and end).
#[derive(Debug, Default)]
pub struct ParseGauge {
    parsing: AtomicUsize,
}

impl ParseGauge {
    pub fn new() -> Arc<ParseGauge> {
        Arc::new(ParseGauge::default())
    }

    /// Counts one body in until the returned guard drops (also on unwind).
    pub fn enter(self: &Arc<Self>) -> ParsingBody {
        self.parsing.fetch_add(1, Ordering::AcqRel);
        ParsingBody {
            gauge: self.clone(),
        }
    }

    /// Whether any body is being parsed.
    pub fn busy(&self) -> bool {
        self.parsing.load(Ordering::Acquire) > 0
    }
}

/// One body being parsed; leaves the gauge on drop.
#[derive(Debug)]
pub struct ParsingBody {
    gauge: Arc<ParseGauge>,
}

impl Drop for ParsingBody {
    fn drop(&mut self) {
        self.gauge.parsing.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gauge_counts_bodies_until_their_guards_drop() {
        let gauge = ParseGauge::new();
        assert!(!gauge.busy());
        let a = gauge.enter();
        let b = gauge.enter();
        drop(a);
        assert!(gauge.busy());
        drop(b);
        assert!(!gauge.busy());
    }
}
