//! `lambda = "auto"`: one learner per lambda of a log-spaced grid, all fed the same stream, serving the
//! one whose progressive-validation loss is lowest — champion/challenger on one stream.
//!
//! **Members.** [`AutoLambdaLearner`] wraps one learner per grid lambda, each built by
//! [`super::build`] from the learner's config with its own `lambda` (so it works for every solver whose
//! objective has the shared `lambda`: sdiht, mirror, smidas). Every insert goes to every member: each
//! predicts each sample with its own model before it learns it, which is what makes its progressive
//! loss an honest out-of-sample score. Each member keeps its own window, so the window's memory is paid
//! once per grid member (5x with the default grid): the members' solver states live inside their
//! windows (the duals next to the samples) and sharing the samples would need a window that several
//! learners mutate in step.
//!
//! **Work per round.** Inserts cost every member (they must see every sample). A [`StreamingLearner::step`]
//! steps the served member and one other member, round-robin, so the served model improves as fast as
//! a single learner's and the challengers share one step's worth of work between them
//! (`docs/benchmarks/learners.md` measures the ingest this leaves). The learner idles when every member
//! does; the other members are never certified, so they idle only by [`super::IDLE_EPOCHS`] passes
//! without new data (until then their steps also count as changes, and the served model is re-certified
//! at the snapshot cadence).
//!
//! **Selection** ([`Selector`]). Per member, the progressive loss of each insert (the batch's summed
//! loss over its sample count, from the member's counters) enters an exponentially weighted average
//! with half-life `lambda_half_life` samples, bias-corrected so the first batches are not pulled to 0
//! (Adam's correction). The served member changes only when both hold:
//!
//! - at least `lambda_half_life` samples arrived since the last switch (or the start), and
//! - the best other member's average is below `(1 - lambda_margin)` times the served one's.
//!
//! The new served member is the one with the lowest average. Losses that are not finite count as
//! `1e300`, so a diverged member is never chosen and a diverged served member is replaced.
//! The first served member is the middle of the grid.
//!
//! **Published view.** `certify` certifies the served member only (its model, its lambda, its window);
//! the model's `lambda_auto` field names the grid, the served index, the switch count and each member's
//! average loss. `samples_seen` and `progressive_loss` are the served member's own; `steps` and
//! `mutations` add up every member's (and the switches), so a publication follows any change.
//!
//! **Checkpoint.** The served member's full state ([`LearnerState`]) with the selection state
//! ([`AutoState`]) in `LearnerState::auto`. A restore gives that state to the served member and a copy
//! to each other member, which starts from the served member's window and duals (or model) under its
//! own lambda — a warm start, not its exact former state. So a checkpoint holds one window, not one per
//! member.

use super::{LearnerCore, LearnerSnapshot, LearnerState, LearnerStats, StepOutcome};
use super::{SolverGauges, StreamingLearner};
use crate::config::{AutoLambda, LearnerConfig};
use crate::model::LambdaAuto;
use crate::sample::{Row, SampleBlock};

/// A loss that is not finite counts as this (worse than any real loss, and finite in the checkpoint).
pub const NON_FINITE_LOSS: f64 = 1e300;

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
    /// Per member: the exponentially weighted sum of batch mean losses, and the total weight it has
    /// (`1 - decay^n`; the average is `loss / weight`).
    pub loss: Vec<f64>,
    pub weight: Vec<f64>,
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

/// The switching rule with hysteresis (see the module docs), over [`AutoState`].
#[derive(Debug, Clone, PartialEq)]
pub struct Selector {
    pub state: AutoState,
    pub margin: f64,
    pub half_life: u64,
}

impl Selector {
    pub fn new(rule: &AutoLambda, state: AutoState) -> Selector {
        Selector {
            state,
            margin: rule.margin,
            half_life: rule.half_life.max(1),
        }
    }

    /// Takes one batch: `(summed loss, samples)` per member (every member saw the same samples), and
    /// returns whether the served member changed.
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
        if s.since_switch < self.half_life {
            return false;
        }
        let champion = s.average(s.live);
        let (best, best_loss) = (0..s.grid.len())
            .filter(|&i| i != s.live && s.weight[i] > 0.0)
            .map(|i| (i, s.average(i)))
            .fold((s.live, f64::INFINITY), |acc, (i, l)| {
                if l < acc.1 {
                    (i, l)
                } else {
                    acc
                }
            });
        if best != s.live && best_loss < champion * (1.0 - self.margin) {
            s.live = best;
            s.switches += 1;
            s.since_switch = 0;
            return true;
        }
        false
    }
}

/// `lambda = "auto"` (see the module docs).
pub struct AutoLambdaLearner {
    /// The learner's own config (`lambda_auto` set; `lambda` = the first served member's).
    config: LearnerConfig,
    /// One per grid lambda, in grid order.
    members: Vec<Box<dyn StreamingLearner>>,
    selector: Selector,
    /// The next member (other than the served one) a step advances.
    rotor: usize,
    /// Per-member `(loss sum, count)` of the last insert (reused).
    deltas: Vec<(f64, u64)>,
}

impl AutoLambdaLearner {
    /// The members with empty windows, or resumed from `state` (see the module docs).
    pub fn new(
        config: LearnerConfig,
        capacity: usize,
        state: Option<LearnerState>,
    ) -> AutoLambdaLearner {
        let rule = config
            .lambda_auto
            .clone()
            .expect("an AutoLambdaLearner is built for lambda = \"auto\"");
        let grid = rule.grid.clone();
        let start = grid.len() / 2;
        let member_config = |lambda: f64| LearnerConfig {
            lambda,
            lambda_auto: None,
            ..config.clone()
        };
        let (selection, members) = match state {
            None => (
                AutoState::new(grid.clone(), start),
                grid.iter()
                    .map(|&l| super::build(&member_config(l), capacity, None))
                    .collect(),
            ),
            Some(mut state) => {
                let saved = state.auto.take();
                let selection = match saved {
                    Some(s) if s.grid == grid && s.live < grid.len() => s,
                    // Another grid: the state goes to the nearest lambda, and selection restarts.
                    Some(s) => {
                        let lambda = s.grid.get(s.live).copied().unwrap_or(grid[start]);
                        AutoState::new(grid.clone(), nearest(&grid, lambda))
                    }
                    None => AutoState::new(grid.clone(), start),
                };
                let live = selection.live;
                let mut own = Some(state.clone());
                let members = grid
                    .iter()
                    .enumerate()
                    .map(|(i, &l)| {
                        let s = if i == live {
                            own.take().expect("one served member")
                        } else {
                            state.clone()
                        };
                        super::build(&member_config(l), capacity, Some(s))
                    })
                    .collect();
                drop(state);
                (selection, members)
            }
        };
        let n = grid.len();
        AutoLambdaLearner {
            config,
            members,
            selector: Selector::new(&rule, selection),
            rotor: 0,
            deltas: vec![(0.0, 0); n],
        }
    }

    /// Index of the served member.
    pub fn live(&self) -> usize {
        self.selector.state.live
    }

    /// The members, in grid order.
    pub fn members(&self) -> &[Box<dyn StreamingLearner>] {
        &self.members
    }

    pub fn selector(&self) -> &Selector {
        &self.selector
    }

    fn record(&self) -> LambdaAuto {
        let s = &self.selector.state;
        LambdaAuto {
            grid: s.grid.clone(),
            live: s.live,
            switches: s.switches,
            losses: (0..s.grid.len()).map(|i| s.average(i)).collect(),
            criterion: "progressive".into(),
        }
    }
}

/// The index of the grid lambda nearest to `lambda` on a log scale.
fn nearest(grid: &[f64], lambda: f64) -> usize {
    let distance = |g: f64| (g.ln() - lambda.ln()).abs();
    (0..grid.len())
        .min_by(|&a, &b| distance(grid[a]).total_cmp(&distance(grid[b])))
        .unwrap_or(0)
}

impl StreamingLearner for AutoLambdaLearner {
    /// The served member's core (its window and counters).
    fn core(&self) -> &LearnerCore {
        self.members[self.live()].core()
    }

    fn config(&self) -> &LearnerConfig {
        &self.config
    }

    fn stats(&self) -> LearnerStats {
        let mut stats = self.members[self.live()].stats();
        stats.steps = self.members.iter().map(|m| m.stats().steps).sum();
        stats.mutations = self
            .members
            .iter()
            .map(|m| m.stats().mutations)
            .sum::<u64>()
            + self.selector.state.switches;
        stats
    }

    fn insert_batches(&mut self, batches: &[&SampleBlock]) {
        for (member, delta) in self.members.iter_mut().zip(&mut self.deltas) {
            let before = member.stats();
            member.insert_batches(batches);
            let after = member.stats();
            *delta = (
                after.progressive_loss_sum - before.progressive_loss_sum,
                after.progressive_count - before.progressive_count,
            );
        }
        self.selector.observe(&self.deltas);
    }

    /// Nothing to remove here: each member evicts from its own window as it inserts.
    fn evict(&mut self, _sample: Row<'_>, _alpha: f64) {}

    /// A step of the served member and of the next other member (round-robin) that has work.
    fn step(&mut self) -> StepOutcome {
        let live = self.live();
        let served = self.members[live].step();
        let n = self.members.len();
        let mut other = StepOutcome::Idle(super::Idle::EmptyWindow);
        for _ in 0..n {
            let i = self.rotor % n;
            self.rotor = (self.rotor + 1) % n;
            if i == live {
                continue;
            }
            other = self.members[i].step();
            if other == StepOutcome::Stepped {
                break;
            }
        }
        if served == StepOutcome::Stepped || other == StepOutcome::Stepped {
            StepOutcome::Stepped
        } else {
            served
        }
    }

    fn certify(&mut self) -> LearnerSnapshot {
        let live = self.live();
        let mut snap = self.members[live].certify();
        snap.model.lambda_auto = Some(self.record());
        snap.stats = self.stats();
        snap
    }

    fn state(&self) -> LearnerState {
        let mut state = self.members[self.live()].state();
        state.auto = Some(self.selector.state.clone());
        state
    }

    fn gauges(&self) -> SolverGauges {
        self.members[self.live()].gauges()
    }

    fn lambda_auto(&self) -> Option<LambdaAuto> {
        Some(self.record())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{log_grid, Config};
    use crate::loss::{Loss, LossKind};
    use crate::sample::SampleSet;
    use crate::synth::sparse_stream;

    fn rule(margin: f64, half_life: u64, n: usize) -> AutoLambda {
        AutoLambda {
            grid: log_grid(0.1, 1e-5, n),
            margin,
            half_life,
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

    fn auto_config(loss: LossKind, half_life: u64) -> LearnerConfig {
        let mut c = Config::defaults().learners.remove(0);
        c.loss = Loss::new(loss, 0.25).unwrap();
        c.k = 5;
        c.blocks = 4;
        c.lambda_auto = Some(AutoLambda {
            grid: vec![10.0, 0.1, 1e-3],
            margin: 0.02,
            half_life,
        });
        c.lambda = 0.1;
        c
    }

    /// Each member predicts every sample before learning it; the selector's averages are exactly the
    /// decayed means of the members' own progressive-loss counters.
    #[test]
    fn progressive_losses_are_each_members_own_counters() {
        let data = sparse_stream(300, 50, 3, 8, 0.1, false, 5);
        let mut l = AutoLambdaLearner::new(auto_config(LossKind::Squared, 100), 200, None);
        let mut reference = AutoState::new(vec![10.0, 0.1, 1e-3], 1);
        for chunk in data.samples.chunks(60) {
            let before: Vec<LearnerStats> = l.members().iter().map(|m| m.stats()).collect();
            l.insert_samples(chunk);
            for _ in 0..5 {
                l.step();
            }
            let decay = 0.5f64.powf(60.0 / 100.0);
            for (i, m) in l.members().iter().enumerate() {
                let after = m.stats();
                assert_eq!(after.progressive_count - before[i].progressive_count, 60);
                let mean = (after.progressive_loss_sum - before[i].progressive_loss_sum) / 60.0;
                reference.loss[i] = decay * reference.loss[i] + (1.0 - decay) * mean;
                reference.weight[i] = decay * reference.weight[i] + (1.0 - decay);
                assert_eq!(l.selector().state.loss[i], reference.loss[i]);
                assert_eq!(l.selector().state.weight[i], reference.weight[i]);
            }
        }
        assert_eq!(l.stats().samples_seen, 300);
        assert_eq!(l.window().len(), 200);
        let snap = l.certify();
        let record = snap.model.lambda_auto.expect("the record is published");
        assert_eq!(snap.model.lambda, record.grid[record.live]);
        assert_eq!(record.live, l.live());
        assert_eq!(record.losses.len(), 3);
        assert_eq!(
            snap.stats.steps,
            l.members().iter().map(|m| m.stats().steps).sum::<u64>()
        );
    }

    /// Squared loss with unit true weights: lambda = 10 shrinks the model to almost nothing, so the
    /// learner must leave the start member (0.1) for the smallest lambda's, and stay there.
    #[test]
    fn ends_on_the_small_lambda_a_stream_calls_for_and_checkpoints_it() {
        let data = sparse_stream(4000, 100, 5, 10, 0.05, false, 9);
        let config = auto_config(LossKind::Squared, 500);
        let mut l = AutoLambdaLearner::new(config.clone(), 2000, None);
        for chunk in data.samples.chunks(200) {
            l.insert_samples(chunk);
            for _ in 0..20 {
                l.step();
            }
        }
        assert_eq!(l.live(), 2, "{:?}", l.selector().state);
        let s = &l.selector().state;
        assert!(
            s.average(2) < s.average(1) && s.average(1) < s.average(0),
            "{s:?}"
        );
        // The checkpoint carries the selection; a restore serves the same member with the same model.
        let state = l.state();
        assert_eq!(state.auto.as_ref(), Some(&l.selector().state));
        let before = l.certify();
        let mut back = AutoLambdaLearner::new(config, 2000, Some(state));
        assert_eq!(back.live(), 2);
        assert_eq!(back.selector().state, l.selector().state);
        let after = back.certify();
        assert_eq!(after.model.support, before.model.support);
        assert_eq!(after.model.lambda, 1e-3);
        assert_eq!(
            back.members()[0].window().len(),
            2000,
            "challengers restart warm"
        );
    }

    #[test]
    fn build_makes_an_auto_learner_for_lambda_auto() {
        let l = super::super::build(&auto_config(LossKind::Logistic, 10), 16, None);
        let record = l.lambda_auto().expect("lambda = auto");
        assert_eq!(record.grid, [10.0, 0.1, 1e-3]);
        assert_eq!(record.live, 1);
        assert_eq!(l.config().lambda, 0.1);
        assert!(l.config().lambda_auto.is_some());
    }
}
