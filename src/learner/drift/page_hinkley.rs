//! The Page-Hinkley test for an increase in the mean of a stream (Page 1954; Gama et al. 2013), as
//! River's `drift.PageHinkley` computes it with `mode = "up"`: the running mean `x̄_t` of the values
//! seen, the faded cumulative deviation `m_t = alpha * m_{t-1} + (x_t - x̄_t - delta)`, its minimum
//! `M_t`, and a change once `t >= min_samples` and `m_t - M_t > threshold`; after a change the test
//! starts afresh with the next value.
//!
//! Where the change lies is estimated once it is signalled, over the last [`RECENT`] values since the
//! test started: the split that maximises the rise of the mean, weighted by the segments' sizes
//! (`(mean_after - mean_before) * sqrt(k (L - k) / L)`, the mean-shift statistic of binary
//! segmentation). Why not where `M_t` was last attained (the classical CUSUM estimate): with River's
//! defaults `delta` is small next to the noise of a loss, so before a change `m_t` is a random walk
//! drifting slowly down whose minimum can lie anywhere (on River's doctest stream, 784 values before
//! the step).
//!
//! Why our own: the Rust crates that have a Page-Hinkley test (`rill-ml`, `aprender-core`,
//! `optirs-core`) carry it inside whole machine-learning libraries, young and fast-changing, and none
//! gives the change-point estimate that `drift.action = "shrink"` cuts the window at; the test is a
//! dozen lines. The unit tests replay River 0.26.1 on its own doctest stream and on a second stream,
//! and find its detections at the same indices.

/// The test's parameters, River's defaults by [`PageHinkleyParams::default`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PageHinkleyParams {
    /// Values seen (since the start or the last change) before a change may be signalled.
    pub min_samples: u64,
    /// The magnitude of change tolerated: subtracted from each deviation.
    pub delta: f64,
    /// `lambda`: the rise of the cumulative deviation above its minimum that signals a change.
    pub threshold: f64,
    /// The forgetting factor of the cumulative deviation (1: none).
    pub alpha: f64,
}

impl Default for PageHinkleyParams {
    fn default() -> Self {
        PageHinkleyParams {
            min_samples: 30,
            delta: 0.005,
            threshold: 50.0,
            alpha: 1.0 - 0.0001,
        }
    }
}

/// Values kept for the estimate of where a change lies (the newest ones since the test started).
pub const RECENT: usize = 4096;

/// A change the test signalled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    /// Values since the estimated change, the one that signalled it included: the new regime's
    /// length (at most [`RECENT`]).
    pub since: u64,
}

/// The state of one test.
#[derive(Debug, Clone, PartialEq)]
pub struct PageHinkley {
    params: PageHinkleyParams,
    /// Values since the start or the last change.
    n: u64,
    mean: f64,
    sum: f64,
    min: f64,
    /// The newest values since the start (at most [`RECENT`]).
    recent: std::collections::VecDeque<f64>,
    /// The last value signalled a change: the next one starts the test afresh.
    detected: bool,
}

impl PageHinkley {
    pub fn new(params: PageHinkleyParams) -> PageHinkley {
        PageHinkley {
            params,
            n: 0,
            mean: 0.0,
            sum: 0.0,
            min: f64::INFINITY,
            recent: std::collections::VecDeque::new(),
            detected: false,
        }
    }

    /// Adds `x`; `Some` when it signals a change. A non-finite `x` is ignored.
    pub fn update(&mut self, x: f64) -> Option<Change> {
        if !x.is_finite() {
            return None;
        }
        if self.detected {
            *self = PageHinkley::new(self.params);
        }
        self.n += 1;
        self.mean += (x - self.mean) / self.n as f64;
        let p = &self.params;
        self.sum = p.alpha * self.sum + (x - self.mean) - p.delta;
        self.min = self.min.min(self.sum);
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(x);
        self.detected = self.n >= p.min_samples && self.sum - self.min > p.threshold;
        self.detected.then(|| Change {
            since: rise_length(&self.recent),
        })
    }

    /// Values the test has seen since its start or its last change.
    pub fn samples(&self) -> u64 {
        self.n
    }
}

/// Values after the split of `values` that maximises the weighted rise of the mean (at least 1).
fn rise_length(values: &std::collections::VecDeque<f64>) -> u64 {
    let len = values.len();
    let total: f64 = values.iter().sum();
    let (mut before, mut best, mut best_k) = (0.0, f64::NEG_INFINITY, len.saturating_sub(1));
    for (k, &x) in values.iter().enumerate().take(len.saturating_sub(1)) {
        before += x;
        let (a, b) = ((k + 1) as f64, (len - k - 1) as f64);
        let rise = ((total - before) / b - before / a) * (a * b / len as f64).sqrt();
        if rise > best {
            (best, best_k) = (rise, k + 1);
        }
    }
    (len - best_k).max(1) as u64
}

#[cfg(test)]
mod tests {
    //! The reference (`river_reference.txt`) was written by River 0.26.1 with this script:
    //!
    //! ```python
    //! import random
    //! from river import drift
    //! rng = random.Random(12345)
    //! data = rng.choices([0, 1], k=1000) + rng.choices(range(4, 8), k=1000)
    //! ph = drift.PageHinkley(mode="up")
    //! print([i for i, v in enumerate(data) if (ph.update(v), ph.drift_detected)[1]])
    //! rng = random.Random(7)
    //! levels = [0.2]*300 + [1.5]*300 + [0.3]*300 + [2.5]*300
    //! data2 = [round(l + rng.random() * 0.5, 3) for l in levels]
    //! ph = drift.PageHinkley(min_instances=20, delta=0.05, threshold=10.0, alpha=0.999, mode="up")
    //! print([i for i, v in enumerate(data2) if (ph.update(v), ph.drift_detected)[1]])
    //! ```
    use super::*;

    const REFERENCE: &str = include_str!("river_reference.txt");

    /// The streams and River's detections in the reference file.
    fn reference() -> Vec<(Vec<f64>, Vec<usize>)> {
        let lines: Vec<&str> = REFERENCE.lines().filter(|l| !l.starts_with('#')).collect();
        let detections = |l: &str| -> Vec<usize> {
            let list = l
                .strip_prefix("detections [")
                .unwrap()
                .trim_end_matches(']');
            list.split(", ").map(|v| v.parse().unwrap()).collect()
        };
        let digits = lines[0]
            .chars()
            .map(|c| c.to_digit(10).unwrap() as f64)
            .collect();
        let values = lines[2].split(',').map(|v| v.parse().unwrap()).collect();
        vec![
            (digits, detections(lines[1])),
            (values, detections(lines[3])),
        ]
    }

    fn detections(params: PageHinkleyParams, stream: &[f64]) -> Vec<(usize, u64)> {
        let mut ph = PageHinkley::new(params);
        stream
            .iter()
            .enumerate()
            .filter_map(|(i, &x)| ph.update(x).map(|c| (i, c.since)))
            .collect()
    }

    /// River's doctest: the step from {0, 1} to {4..7} at index 1000 is found at index 1006.
    #[test]
    fn finds_rivers_doctest_change_at_the_same_index() {
        let (stream, river) = &reference()[0];
        assert_eq!(stream.len(), 2000);
        let found = detections(PageHinkleyParams::default(), stream);
        let at: Vec<usize> = found.iter().map(|&(i, _)| i).collect();
        assert_eq!(&at, river);
        assert_eq!(at, [1006]);
        // The change is estimated at the step: the 7 values from index 1000 on are the new regime.
        assert_eq!(found[0].1, 7);
    }

    /// A loss-like series rising, falling and rising again, with River's other parameters: the test
    /// signals both rises (not the fall) at River's indices, starting afresh after the first.
    #[test]
    fn finds_rivers_changes_on_a_stepped_series_with_resets() {
        let (stream, river) = &reference()[1];
        let params = PageHinkleyParams {
            min_samples: 20,
            delta: 0.05,
            threshold: 10.0,
            alpha: 0.999,
        };
        let found = detections(params, stream);
        let at: Vec<usize> = found.iter().map(|&(i, _)| i).collect();
        assert_eq!(&at, river);
        assert_eq!(at, [307, 905]);
        // Each estimate lands at its step (300, 900), within the few values before the signal.
        assert_eq!(found[0].1, 307 - 300 + 1);
        assert_eq!(found[1].1, 905 - 900 + 1);
    }

    /// A stationary stream raises nothing; a non-finite value is ignored.
    #[test]
    fn a_stationary_stream_raises_nothing() {
        let mut ph = PageHinkley::new(PageHinkleyParams::default());
        for i in 0..100_000 {
            assert_eq!(ph.update((i % 7) as f64), None, "at {i}");
        }
        assert_eq!(ph.update(f64::NAN), None);
        assert_eq!(ph.samples(), 100_000);
    }
}
