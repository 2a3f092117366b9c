//! The selection of `lambda = "auto"` ([`super`]'s module docs): the checkpointed state ([`AutoState`]:
//! the served member, the members' weighted progressive losses and latest held-out losses) and the
//! switching rules with hysteresis over it ([`Selector`]), for both criteria.

use super::NON_FINITE_LOSS;
use crate::learner::params::{AutoLambda, Criterion};

/// Criterion `holdout`: certificates in a row at which a member must lead before the served lambda moves
/// to it (one scoring is one set of models; three keep a member that leads only between two of its
/// steps from moving the served learner).
pub const CONFIRM_SCORINGS: u32 = 3;

/// The selection state (checkpointed): which member is served and each member's weighted loss.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoState {
    /// The grid, largest lambda first.
    pub grid: Vec<f64>,
    /// Index of the served member.
    pub live: usize,
    pub switches: u64,
    /// Samples since the last switch (or the start).
    pub since_switch: u64,
    /// Per member: the exponentially weighted sum of batch mean progressive losses, and the total
    /// weight it has (`1 - decay^n`; the average is `loss / weight`).
    pub loss: Vec<f64>,
    pub weight: Vec<f64>,
    /// Criterion `holdout`: each member's held-out loss at the latest scoring (empty before the first).
    pub holdout: Vec<f64>,
}

impl AutoState {
    /// A fresh state serving member `live` of `grid`.
    pub fn new(grid: Vec<f64>, live: usize) -> AutoState {
        let n = grid.len();
        AutoState {
            grid,
            live,
            switches: 0,
            since_switch: 0,
            loss: vec![0.0; n],
            weight: vec![0.0; n],
            holdout: Vec::new(),
        }
    }

    /// Member `i`'s weighted progressive loss (0 before it saw a sample).
    pub fn average(&self, i: usize) -> f64 {
        if self.weight[i] > 0.0 {
            self.loss[i] / self.weight[i]
        } else {
            0.0
        }
    }
}

/// The switching rules with hysteresis (see the module docs), over [`AutoState`].
#[derive(Debug, Clone, PartialEq)]
pub struct Selector {
    pub state: AutoState,
    pub margin: f64,
    pub half_life: u64,
    pub criterion: Criterion,
    /// Criterion `holdout`: the member leading the served one by the margin, and at how many
    /// scorings in a row.
    pub leader: Option<(usize, u32)>,
}

/// The index and loss of the lowest of `losses` other than `except` (a non-finite loss counts as
/// [`NON_FINITE_LOSS`]; ties keep the first).
fn best_other(losses: impl Iterator<Item = (usize, f64)>, except: usize) -> Option<(usize, f64)> {
    losses
        .filter(|&(i, _)| i != except)
        .map(|(i, l)| (i, if l.is_finite() { l } else { NON_FINITE_LOSS }))
        .fold(None, |acc, (i, l)| match acc {
            Some((_, best)) if best <= l => acc,
            _ => Some((i, l)),
        })
}

impl Selector {
    pub fn new(rule: &AutoLambda, state: AutoState) -> Selector {
        Selector {
            state,
            margin: rule.margin,
            half_life: rule.half_life.max(1),
            criterion: rule.criterion,
            leader: None,
        }
    }

    /// Takes one batch: `(summed progressive loss, samples)` per member, into the weighted averages;
    /// with criterion `progressive`, returns whether the served member changed.
    pub fn observe(&mut self, batch: &[(f64, u64)]) -> bool {
        let s = &mut self.state;
        let count = batch.iter().map(|&(_, c)| c).max().unwrap_or(0);
        if count == 0 {
            return false;
        }
        for (i, &(sum, c)) in batch.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let mean = sum / c as f64;
            let mean = if mean.is_finite() {
                mean
            } else {
                NON_FINITE_LOSS
            };
            // A batch of c samples weighs as c single-sample updates would.
            let decay = 0.5f64.powf(c as f64 / self.half_life as f64);
            s.loss[i] = decay * s.loss[i] + (1.0 - decay) * mean;
            s.weight[i] = decay * s.weight[i] + (1.0 - decay);
        }
        s.since_switch += count;
        if self.criterion != Criterion::Progressive || s.since_switch < self.half_life {
            return false;
        }
        let champion = s.average(s.live);
        let weighted = (0..s.grid.len())
            .filter(|&i| s.weight[i] > 0.0)
            .map(|i| (i, s.average(i)));
        match best_other(weighted, s.live) {
            Some((best, loss)) if loss < champion * (1.0 - self.margin) => {
                self.switch_to(best);
                true
            }
            _ => false,
        }
    }

    /// Criterion `holdout`: takes each member's mean loss on the held-out samples at one certificate,
    /// and returns whether the served lambda changed: a member must lead the served lambda's member by
    /// the margin at [`CONFIRM_SCORINGS`] scorings in a row (the same member each time).
    pub fn judge(&mut self, losses: &[f64]) -> bool {
        self.judge_among(losses, &vec![true; losses.len()], false)
    }

    /// [`Selector::judge`] where only the members marked `eligible` may take the served place (all of
    /// them are recorded); the served member is compared whatever its mark. `last` says no member's
    /// model will change before new samples arrive (every member idle): the losses are final, so the
    /// leader takes the place without waiting for more scorings, which may not come.
    pub fn judge_among(&mut self, losses: &[f64], eligible: &[bool], last: bool) -> bool {
        self.judge_with(losses, eligible, last, true, f64::INFINITY)
    }

    /// [`Selector::judge_among`] counting the scorings at which the served member was led by the
    /// margin, whichever eligible member led: it moves once led at [`CONFIRM_SCORINGS`] scorings in a
    /// row, to the member leading at the last. The shared grid's rule: its members descend at once,
    /// and the best of several falling ones changes from scoring to scoring while each beats the
    /// served one.
    pub fn judge_led(&mut self, losses: &[f64], eligible: &[bool], last: bool) -> bool {
        self.judge_with(losses, eligible, last, false, f64::INFINITY)
    }

    /// [`Selector::judge_led`] with the served member's loss taken as the lower of this scoring's and
    /// `served_before` (its loss at the last scoring): a served member whose loss swings is led only
    /// by a loss below its better one (the shared grid's members near their optimum swing by a few
    /// percent between scorings).
    pub fn judge_led_from(
        &mut self,
        losses: &[f64],
        eligible: &[bool],
        last: bool,
        served_before: f64,
    ) -> bool {
        self.judge_with(losses, eligible, last, false, served_before)
    }

    fn judge_with(
        &mut self,
        losses: &[f64],
        eligible: &[bool],
        last: bool,
        same: bool,
        served_before: f64,
    ) -> bool {
        let s = &mut self.state;
        s.holdout.clear();
        s.holdout.extend(
            losses
                .iter()
                .map(|&l| if l.is_finite() { l } else { NON_FINITE_LOSS }),
        );
        let live = s.live;
        // `min` ignores a NaN `served_before` (no earlier scoring).
        let served = s.holdout[live].min(served_before);
        let candidates = s.holdout.iter().copied().enumerate();
        let leading = best_other(
            candidates.filter(|&(i, _)| eligible.get(i) == Some(&true)),
            live,
        )
        .filter(|&(_, loss)| loss < served * (1.0 - self.margin))
        .map(|(i, _)| i);
        self.leader = match (leading, self.leader) {
            (Some(i), Some((j, n))) if i == j || !same => Some((i, n + 1)),
            (Some(i), _) => Some((i, 1)),
            (None, _) => None,
        };
        match self.leader {
            Some((i, n)) if n >= CONFIRM_SCORINGS || last => {
                self.switch_to(i);
                true
            }
            _ => false,
        }
    }

    fn switch_to(&mut self, member: usize) {
        let s = &mut self.state;
        s.live = member;
        s.switches += 1;
        s.since_switch = 0;
        self.leader = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learner::params::log_grid;

    fn rule(margin: f64, half_life: u64, n: usize) -> AutoLambda {
        AutoLambda {
            grid: log_grid(0.1, 1e-5, n),
            margin,
            half_life,
            criterion: Criterion::Progressive,
        }
    }

    /// Feeds `(batch size, per-member mean losses)` and returns the served member after each batch.
    fn script(selector: &mut Selector, batches: &[(u64, &[f64])]) -> Vec<usize> {
        batches
            .iter()
            .map(|&(c, means)| {
                let batch: Vec<(f64, u64)> = means.iter().map(|&m| (m * c as f64, c)).collect();
                selector.observe(&batch);
                selector.state.live
            })
            .collect()
    }

    #[test]
    fn switches_on_the_scripted_sequence_exactly() {
        let r = rule(0.1, 4, 3);
        let mut s = Selector::new(&r, AutoState::new(r.grid.clone(), 1));
        let live = script(
            &mut s,
            &[
                (2, &[1.0, 1.0, 1.0]), // 2 samples: too early to switch
                (2, &[1.0, 1.0, 1.0]), // a tie never switches
                (2, &[0.2, 1.0, 1.0]), // member 0 leads by far more than 10%: switch
                (2, &[1.0, 1.0, 0.0]), // member 2 leads, but only 2 samples since the switch
                (2, &[1.0, 1.0, 0.0]), // 4 samples since: switch
                (2, &[0.0, 1.0, 1.0]),
                (2, &[0.0, 1.0, 1.0]),
            ],
        );
        assert_eq!(live, [1, 1, 0, 0, 2, 2, 0]);
        assert_eq!(s.state.switches, 3);
        assert_eq!(s.state.since_switch, 0);
    }

    #[test]
    fn a_lead_below_the_margin_never_switches() {
        let r = rule(0.1, 10, 2);
        let mut s = Selector::new(&r, AutoState::new(r.grid.clone(), 1));
        let steady = vec![(10u64, &[0.95, 1.0][..]); 50];
        assert_eq!(script(&mut s, &steady), vec![1; 50]);
        // With a 1% margin the same 5% lead switches as soon as the champion has held 10 samples.
        let r = rule(0.01, 10, 2);
        let mut s = Selector::new(&r, AutoState::new(r.grid.clone(), 1));
        assert_eq!(
            script(
                &mut s,
                &[(5, &[0.95, 1.0]), (5, &[0.95, 1.0]), (5, &[0.95, 1.0])]
            ),
            [1, 0, 0]
        );
    }

    #[test]
    fn a_non_finite_served_loss_is_replaced_and_never_chosen() {
        let r = rule(0.02, 1, 3);
        let mut s = Selector::new(&r, AutoState::new(r.grid.clone(), 1));
        let live = script(
            &mut s,
            &[(1, &[2.0, f64::NAN, 3.0]), (1, &[f64::INFINITY, 1.0, 3.0])],
        );
        // Member 1's NaN weighs on its average long after (1e300 decays by halves), so when member 0
        // goes non-finite too, member 2 takes over even though member 1's latest loss is the best.
        assert_eq!(live, [0, 2]);
        assert!(s.state.loss.iter().all(|l| l.is_finite()));
    }

    #[test]
    fn the_weighted_average_is_bias_corrected_and_halves_per_half_life() {
        let r = rule(0.0, 100, 2);
        let mut s = Selector::new(&r, AutoState::new(r.grid.clone(), 0));
        s.observe(&[(300.0, 100), (100.0, 100)]);
        // One batch: the average is the batch mean, whatever the decay.
        assert_eq!((s.state.average(0), s.state.average(1)), (3.0, 1.0));
        // A second batch of one half-life weighs as much as everything before it... plus the correction:
        // (0.5 * 0.5 * 3 + 0.5 * 1) / (0.5 * 0.5 + 0.5) for member 0.
        s.observe(&[(100.0, 100), (100.0, 100)]);
        assert!((s.state.average(0) - (0.75 + 0.5) / 0.75).abs() < 1e-15);
        assert_eq!(s.state.live, 1, "member 1 leads by far after 100 samples");
    }

    #[test]
    fn judge_moves_after_three_leading_scorings_in_a_row_by_the_margin() {
        let r = AutoLambda {
            criterion: Criterion::Holdout,
            ..rule(0.1, 1, 3)
        };
        let mut s = Selector::new(&r, AutoState::new(r.grid.clone(), 1));
        let mut served = Vec::new();
        for losses in [
            [0.5, 1.0, 0.95], // member 0 leads by more than 10%: 1
            [0.5, 1.0, 0.95], // 2
            [1.0, 1.0, 0.5],  // member 2 leads now: its count starts at 1
            [0.95, 1.0, 0.5], // 2
            [1.0, 1.0, 1.0],  // nobody leads: the count restarts
            [1.0, 1.0, 0.5],
            [1.0, 1.0, 0.5],
            [1.0, 1.0, 0.5], // third in a row: member 2 is served
            [1.0, 0.5, 0.6], // member 1 leads the served member 2 (0.6) by 17%
            [f64::NAN, 0.5, 0.6],
            [1.0, 0.5, 0.6],
        ] {
            s.judge(&losses);
            served.push(s.state.live);
        }
        assert_eq!(served, [1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 1]);
        assert_eq!(s.state.switches, 2);
        // `judge_led` counts the scorings at which the served member was led, by whichever member:
        // the same losses move it at the third (to member 2, leading then); none of `judge`'s counts
        // reached three before.
        let mut led = Selector::new(&r, AutoState::new(r.grid.clone(), 1));
        let all = [true; 3];
        for (n, losses) in [[0.5, 1.0, 0.95], [1.0, 1.0, 0.5], [0.5, 1.0, 0.6]]
            .iter()
            .enumerate()
        {
            assert_eq!(led.judge_led(losses, &all, false), n == 2);
        }
        assert_eq!(led.state.live, 0);
        let mut same = Selector::new(&r, AutoState::new(r.grid.clone(), 1));
        for losses in [[0.5, 1.0, 0.95], [1.0, 1.0, 0.5], [0.5, 1.0, 0.6]] {
            assert!(!same.judge_among(&losses, &all, false));
        }
        assert!(s.state.holdout.iter().all(|l| l.is_finite()));
        // Progressive losses never move a holdout selector.
        assert!(!s.observe(&[(0.0, 10_000), (1e6, 10_000), (1e6, 10_000)]));
        assert_eq!(s.state.live, 1);
    }
}
