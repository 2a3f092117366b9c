//! The drift alarm (`[drift]`): a Page-Hinkley test ([`page_hinkley`]) on each learner's progressive
//! loss, run by the learner's thread after every insert ([`DriftWatch::observe`]), and what it does on
//! a change: `action = "alarm"` records it (a metric, an event in `GET /v1/history`, a mark in the model
//! JSON and on the status page, [`DriftRecord`]); `"shrink"` also drops from the window the samples
//! older than the estimated change, so the model re-learns the new regime from the new samples only.
//!
//! What the test sees: a learner reports its progressive loss as a running sum and count, so the
//! samples of one insert enter the test at their mean loss (one value per sample, in order). With one
//! sample per insert this is the per-sample series; with larger inserts a change is placed at the end
//! of the insert that shows it.
//!
//! How the window shrinks: the learner is rebuilt from its own state without the oldest samples
//! ([`forget_oldest`]), the path a checkpoint restore takes, so every solver's state stays consistent
//! with its window (SDIHT's `z` and sums are recomputed from the remaining samples and their duals, a
//! primal learner keeps its model as the warm start); the next certificate is computed exactly over
//! the remaining window, the objective actually solved. A `lambda = "auto"` learner is rebuilt from its
//! served member's state, as after a restart.

pub mod page_hinkley;

use serde::Serialize;

use super::{build, LearnerState, LearnerStats, StreamingLearner};
use crate::sample::SampleSet;
use page_hinkley::{PageHinkley, PageHinkleyParams};

/// `drift.action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriftAction {
    /// No test.
    Off,
    /// Record each change.
    Alarm,
    /// Record each change and drop the window's samples older than it.
    Shrink,
}

impl DriftAction {
    pub fn name(self) -> &'static str {
        match self {
            DriftAction::Off => "off",
            DriftAction::Alarm => "alarm",
            DriftAction::Shrink => "shrink",
        }
    }
}

/// The `[drift]` section.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DriftConfig {
    pub action: DriftAction,
    pub params: PageHinkleyParams,
}

impl Default for DriftConfig {
    fn default() -> Self {
        DriftConfig {
            action: DriftAction::Off,
            params: PageHinkleyParams::default(),
        }
    }
}

/// One alarm, as `GET /v1/history`, the model JSON and the status page show it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct DriftEvent {
    /// The learner's samples seen when the change was signalled.
    pub at_sample: u64,
    /// Samples since the estimated change (the new regime so far).
    pub since_change: u64,
    /// Samples dropped from the window (`shrink`; 0 with `alarm`).
    pub dropped: u64,
    /// Samples left in the window.
    pub window_samples: usize,
    /// Unix time (seconds) of the alarm.
    pub raised_at: f64,
}

/// A learner's alarms so far, kept in its cell.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct DriftRecord {
    /// `drift.action`.
    pub action: String,
    /// Alarms since the daemon started.
    pub alarms: u64,
    /// The latest alarm.
    pub last: Option<DriftEvent>,
    /// The latest alarm not yet in a history point.
    #[serde(skip)]
    pub pending: Option<DriftEvent>,
}

/// The test on one learner's progressive loss, with the sum and count it has read so far.
#[derive(Debug)]
pub struct DriftWatch {
    config: DriftConfig,
    test: PageHinkley,
    sum: f64,
    count: u64,
}

impl DriftWatch {
    /// A watch from the learner's counters as they stand (`None` with `action = "off"`).
    pub fn new(config: DriftConfig, stats: &LearnerStats) -> Option<DriftWatch> {
        (config.action != DriftAction::Off).then(|| DriftWatch {
            config,
            test: PageHinkley::new(config.params),
            sum: stats.progressive_loss_sum,
            count: stats.progressive_count,
        })
    }

    /// After an insert (holding the learner's lock): feeds the test the progressive losses counted
    /// since the last call and, on a change, acts (`shrink`: rebuilds `learner` without the samples
    /// older than the change); returns the alarm.
    pub fn observe(&mut self, learner: &mut Box<dyn StreamingLearner>) -> Option<DriftEvent> {
        let stats = learner.stats();
        if stats.progressive_count < self.count {
            // The counters were reset (a learner rebuilt after a numeric fault): read afresh.
            (self.sum, self.count) = (stats.progressive_loss_sum, stats.progressive_count);
            return None;
        }
        let n = stats.progressive_count - self.count;
        if n == 0 {
            return None;
        }
        let mean = (stats.progressive_loss_sum - self.sum) / n as f64;
        (self.sum, self.count) = (stats.progressive_loss_sum, stats.progressive_count);
        let mut since = None;
        for i in 0..n {
            if let Some(change) = self.test.update(mean) {
                // The rest of the insert belongs to the new regime too.
                since = Some(change.since + (n - 1 - i));
            }
        }
        let since_change = since?;
        let len = learner.window().len();
        let keep = (since_change.min(len as u64) as usize).max(1);
        let dropped = if self.config.action == DriftAction::Shrink && keep < len {
            let (config, capacity) = (learner.config().clone(), learner.window().capacity());
            let mut state = learner.state();
            forget_oldest(&mut state, len - keep);
            *learner = build(&config, capacity, Some(state));
            len - keep
        } else {
            0
        };
        let event = DriftEvent {
            at_sample: stats.samples_seen,
            since_change,
            dropped: dropped as u64,
            window_samples: learner.window().len(),
            raised_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        };
        tracing::warn!(
            learner = %learner.config().name,
            at_sample = event.at_sample,
            since_change,
            dropped,
            action = self.config.action.name(),
            "drift: the progressive loss rose (Page-Hinkley)"
        );
        Some(event)
    }
}

/// Drops the `n` oldest samples of a learner's state (with their duals): the window a rebuilt learner
/// starts from. The last certificate was for the old window and is forgotten; the state counts as
/// changed (published and checkpointed again) and the learner steps again.
pub fn forget_oldest(state: &mut LearnerState, n: usize) {
    let n = n.min(state.samples.len());
    state.samples.drain(..n);
    state.last_certificate = None;
    state.steps_since_insert = 0;
    state.stats.mutations += 1;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::sample::Sample;

    /// A learner on a stream whose labels flip sign at sample 600: the watch signals the change soon
    /// after it, and `shrink` leaves a window of the new regime only, whose certificate is over that
    /// window (the samples it holds are the newest ones, in order).
    #[test]
    fn shrink_drops_the_samples_older_than_the_change() {
        let mut config = Config::defaults().learners.remove(0);
        // The defaults' squared loss fits an intercept; this test was written without one.
        config.intercept = false;
        config.k = 5;
        let data = crate::synth::sparse_stream(1000, 40, 3, 8, 0.05, false, 5);
        let samples: Vec<Sample> = data
            .samples
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut s = s.clone();
                if i >= 600 {
                    s.label = -s.label;
                }
                s
            })
            .collect();
        for action in [DriftAction::Alarm, DriftAction::Shrink] {
            let mut learner = build(&config, 2000, None);
            let drift = DriftConfig {
                action,
                params: PageHinkleyParams::default(),
            };
            let mut watch = DriftWatch::new(drift, &learner.stats()).unwrap();
            let mut events = Vec::new();
            for chunk in samples.chunks(10) {
                learner.insert_samples(chunk);
                events.extend(watch.observe(&mut learner));
                for _ in 0..20 {
                    learner.step();
                }
            }
            let first = &events[0];
            assert!(
                (600..=700).contains(&first.at_sample),
                "{action:?}: {events:?}"
            );
            assert!(first.since_change <= first.at_sample - 590, "{first:?}");
            if action == DriftAction::Alarm {
                assert!(events.iter().all(|e| e.dropped == 0));
                assert_eq!(learner.window().len(), 1000);
            } else {
                assert_eq!(
                    first.dropped as usize + first.window_samples,
                    first.at_sample as usize
                );
                assert!(first.window_samples as u64 <= first.since_change.max(1));
                // The window holds the newest samples, the last one last.
                let w = learner.window();
                let (len, last) = (w.len(), w.row(w.len() - 1).label);
                assert_eq!(last, samples[999].label);
                let snap = learner.certify();
                assert_eq!(snap.window_samples, len);
                assert_eq!(snap.model.certificate.samples, len);
                assert!(snap.stats.samples_seen == 1000);
            }
        }
    }
}
