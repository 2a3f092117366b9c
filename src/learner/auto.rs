//! `lambda = "auto"`: one learner per lambda of a log-spaced grid, all fed the same stream, and a served
//! learner at the lambda whose members rank best — champion/challenger on one stream.
//!
//! **Members.** [`AutoLambdaLearner`] wraps one learner per grid lambda, each built by
//! [`super::build`] from the learner's config with its own `lambda` (so it works for every solver whose
//! objective has the shared `lambda`: sdiht, mirror, smidas). Each member predicts each sample it
//! learns with its own model before learning it (its progressive loss). Each member keeps its own
//! window, so the window's memory is paid once per grid member (5x with the default grid): the
//! members' solver states live inside their windows (the duals next to the samples) and sharing the
//! samples would need a window that several learners mutate in step.
//!
//! **Criterion `holdout` (the default).** One sample in [`HOLDOUT_EVERY`] (by arrival) is held out:
//! the members never learn it; it goes to a ring of at most `capacity / HOLDOUT_EVERY` samples (the
//! oldest leaves first, as from the window). At every certificate each member's *current* model is
//! scored on the ring (mean loss), and the served learner — one more learner, at the chosen lambda,
//! that learns every sample, held-out ones included — moves to the best member's lambda when that
//! member's loss is below `(1 - lambda_margin)` times the loss of the member at the served lambda at
//! [`CONFIRM_SCORINGS`] certificates in a row. This is what `fit --lambda auto` does (choose on held-out
//! samples, then fit on all of them), kept up continuously. Why not progressive loss: it scores each
//! sample by the model of the moment it arrived, so a burst (a file POSTed in seconds, or a
//! backlog) is scored by models that had no time to converge, and the small lambdas, which converge
//! last, lose: on the text sets the daemon served 1e-3 where 1e-4 is 4 points of accuracy better
//! (`docs/benchmarks/quality.md`). Scoring the members as they are now ranks the converged models.
//! A move warm-starts the served learner from its own state under the new lambda: a dual learner's
//! duals are scaled by `lambda_new / lambda_old` (which keeps `w = H_k(-z / (lambda N))`) and
//! projected onto their domain; a primal learner keeps its model.
//!
//! **Criterion `progressive`.** The members learn every sample and the served learner is the best
//! member itself: per member, the progressive loss of each insert enters an exponentially weighted
//! average with half-life `lambda_half_life` samples, bias-corrected so the first batches are not
//! pulled to 0 (Adam's correction). The served member changes only when at least `lambda_half_life`
//! samples arrived since the last switch (or the start) and the best other member's average is below
//! `(1 - lambda_margin)` times the served one's. Right for a long stream at a steady rate; wrong for
//! bursts (above).
//!
//! Losses that are not finite count as `1e300`, so a diverged member is never chosen and a diverged
//! served member is replaced. The first served lambda is the middle of the grid.
//!
//! **Work per round.** Inserts cost every member (they must see every sample). A [`StreamingLearner::step`]
//! steps the served learner and one member, round-robin, so the served model improves as fast as
//! a single learner's and the members share one step's worth of work between them
//! (`docs/benchmarks/learners.md` measures the ingest this leaves). The other members are never
//! certified, so they idle only by [`super::IDLE_EPOCHS`] passes without new data.
//!
//! **Published view.** `certify` certifies the served learner only (its model, its lambda, its window);
//! the model's `lambda_auto` field names the grid, the served index, the switch count and each member's
//! loss by the criterion and its progressive loss. `samples_seen` and `progressive_loss` are the served
//! learner's own; `steps` and `mutations` add up every learner's (and the switches), so a publication
//! follows any change.
//!
//! **Checkpoint.** The served learner's full state ([`LearnerState`]) with the selection state
//! ([`AutoState`]) in `LearnerState::auto`. A restore gives that state to the served learner and a copy
//! to each member, which starts from the served window and duals (or model) under its own lambda — a
//! warm start, not its exact former state. So a checkpoint holds one window, not one per member. The
//! held-out ring is not checkpointed: it refills from the samples that arrive after the restart.

use std::collections::VecDeque;

use super::{LearnerCore, LearnerSnapshot, LearnerState, LearnerStats, StepOutcome};
use super::{SolverGauges, StreamingLearner};
use crate::config::{AutoLambda, Criterion, LearnerConfig};
use crate::model::LambdaAuto;
use crate::sample::{Row, Sample, SampleBlock};
use crate::sparse::merge_dot;

/// A loss that is not finite counts as this (worse than any real loss, and finite in the checkpoint).
pub const NON_FINITE_LOSS: f64 = 1e300;
/// Criterion `holdout`: one sample in this many is held out (20%, as `fit --lambda auto`'s default).
pub const HOLDOUT_EVERY: u64 = 5;
/// Criterion `holdout`: certificates in a row at which a member must lead before the served lambda moves
/// to it (one scoring is one set of models; three keep a member that leads only between two of its
/// steps from moving the served learner).
pub const CONFIRM_SCORINGS: u32 = 3;
/// Criterion `holdout`: held-out samples needed before the members are compared at all.
pub const MIN_HOLDOUT: usize = 50;

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
        let s = &mut self.state;
        s.holdout.clear();
        s.holdout.extend(
            losses
                .iter()
                .map(|&l| if l.is_finite() { l } else { NON_FINITE_LOSS }),
        );
        let live = s.live;
        let served = s.holdout[live];
        let leading = best_other(s.holdout.iter().copied().enumerate(), live)
            .filter(|&(_, loss)| loss < served * (1.0 - self.margin))
            .map(|(i, _)| i);
        self.leader = match (leading, self.leader) {
            (Some(i), Some((j, n))) if i == j => Some((i, n + 1)),
            (Some(i), _) => Some((i, 1)),
            (None, _) => None,
        };
        match self.leader {
            Some((i, n)) if n >= CONFIRM_SCORINGS => {
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

/// Criterion `holdout`: the samples no member learns, newest last, at most `capacity`.
struct Holdout {
    ring: VecDeque<Sample>,
    capacity: usize,
    /// Samples that arrived (which of them is held out is decided by this count).
    arrived: u64,
    /// Held-out samples dropped from the full ring (the oldest first).
    dropped: u64,
    /// Reused: the samples of an insert the members learn.
    learned: SampleBlock,
}

impl Holdout {
    fn new(window_capacity: usize) -> Holdout {
        Holdout {
            ring: VecDeque::new(),
            capacity: (window_capacity / HOLDOUT_EVERY as usize).max(1),
            arrived: 0,
            dropped: 0,
            learned: SampleBlock::new(),
        }
    }

    /// Splits an insert: every [`HOLDOUT_EVERY`]-th sample into the ring (the oldest leaving a full
    /// ring), the others into `self.learned`.
    fn split(&mut self, batches: &[&SampleBlock]) {
        self.learned.clear();
        for sample in batches.iter().flat_map(|b| b.iter()) {
            self.arrived += 1;
            if self.arrived.is_multiple_of(HOLDOUT_EVERY) {
                if self.ring.len() == self.capacity {
                    self.ring.pop_front();
                    self.dropped += 1;
                }
                self.ring.push_back(sample.to_sample());
            } else {
                self.learned.push_ref(sample);
            }
        }
    }

    /// The mean loss of `model` (its support ascending, as every learner keeps it) over the ring.
    fn loss_of(&self, config: &LearnerConfig, model: &crate::solver::driver::SparseModel) -> f64 {
        let mut sum = 0.0;
        for sample in &self.ring {
            let r = sample.row();
            let margin = merge_dot(
                model.intercept,
                r.indices,
                r.values,
                &model.support,
                &model.weights,
            );
            sum += config.loss.sample(r.label, r.weight).value(margin);
        }
        sum / self.ring.len().max(1) as f64
    }
}

/// `lambda = "auto"` (see the module docs).
pub struct AutoLambdaLearner {
    /// The learner's own config (`lambda_auto` set; `lambda` = the first served member's).
    config: LearnerConfig,
    capacity: usize,
    /// One per grid lambda, in grid order.
    members: Vec<Box<dyn StreamingLearner>>,
    /// Criterion `holdout`: the learner served, over every sample at `grid[live]`; `None` with
    /// criterion `progressive`, where the served learner is `members[live]`.
    served: Option<Box<dyn StreamingLearner>>,
    holdout: Option<Holdout>,
    selector: Selector,
    /// The next member (other than a served one) a step advances.
    rotor: usize,
    /// Per-member `(loss sum, count)` of the last insert (reused).
    deltas: Vec<(f64, u64)>,
}

/// The config of the learner at `lambda` of an auto learner's grid.
fn at_lambda(config: &LearnerConfig, lambda: f64) -> LearnerConfig {
    LearnerConfig {
        lambda,
        lambda_auto: None,
        ..config.clone()
    }
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
        let holdout = rule.criterion == Criterion::Holdout;
        let (selection, members, served) = match state {
            None => (
                AutoState::new(grid.clone(), start),
                grid.iter()
                    .map(|&l| super::build(&at_lambda(&config, l), capacity, None))
                    .collect(),
                holdout.then(|| super::build(&at_lambda(&config, grid[start]), capacity, None)),
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
                        let s = if i == live && !holdout {
                            own.take().expect("one served member")
                        } else {
                            state.clone()
                        };
                        super::build(&at_lambda(&config, l), capacity, Some(s))
                    })
                    .collect();
                let served = holdout.then(|| {
                    let s = own.take().expect("one served learner");
                    super::build(&at_lambda(&config, grid[live]), capacity, Some(s))
                });
                drop(state);
                (selection, members, served)
            }
        };
        let n = grid.len();
        AutoLambdaLearner {
            config,
            capacity,
            members,
            served,
            holdout: holdout.then(|| Holdout::new(capacity)),
            selector: Selector::new(&rule, selection),
            rotor: 0,
            deltas: vec![(0.0, 0); n],
        }
    }

    /// Index of the served member (its lambda is the one served).
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

    /// Criterion `holdout`: the held-out samples now in the ring (0 with `progressive`).
    pub fn held_out(&self) -> usize {
        self.holdout.as_ref().map_or(0, |h| h.ring.len())
    }

    /// The learner whose model is published.
    pub fn served(&self) -> &dyn StreamingLearner {
        match &self.served {
            Some(s) => s.as_ref(),
            None => self.members[self.live()].as_ref(),
        }
    }

    fn served_mut(&mut self) -> &mut dyn StreamingLearner {
        let live = self.live();
        match &mut self.served {
            Some(s) => s.as_mut(),
            None => self.members[live].as_mut(),
        }
    }

    /// Criterion `holdout`: scores every member's current model on the ring and, when the selector
    /// moves the served lambda, warm-starts the served learner there (module docs).
    fn score_holdout(&mut self) {
        let Some(holdout) = &self.holdout else {
            return;
        };
        if holdout.ring.len() < MIN_HOLDOUT {
            return;
        }
        let losses: Vec<f64> = self
            .members
            .iter_mut()
            .map(|m| match m.current_model() {
                Some(model) => holdout.loss_of(&self.config, &model),
                None => NON_FINITE_LOSS,
            })
            .collect();
        if !self.selector.judge(&losses) {
            return;
        }
        let Some(served) = self.served.take() else {
            return;
        };
        let lambda = self.selector.state.grid[self.live()];
        let old_lambda = served.config().lambda;
        let mut state = served.state();
        drop(served);
        if state.primal.is_none() {
            // A dual learner: `w = H_k(-z / (lambda N))` stays put when every dual scales with lambda.
            let (ratio, loss) = (lambda / old_lambda, self.config.loss);
            for (sample, alpha) in &mut state.samples {
                let r = sample.row();
                *alpha = loss.sample(r.label, r.weight).project(*alpha * ratio);
            }
        }
        state.last_certificate = None;
        state.steps_since_insert = 0;
        state.stats.mutations += 1;
        self.served = Some(super::build(
            &at_lambda(&self.config, lambda),
            self.capacity,
            Some(state),
        ));
    }

    fn record(&self) -> LambdaAuto {
        let s = &self.selector.state;
        let progressive: Vec<f64> = (0..s.grid.len()).map(|i| s.average(i)).collect();
        let losses = match self.selector.criterion {
            Criterion::Holdout if s.holdout.len() == s.grid.len() => s.holdout.clone(),
            Criterion::Holdout => vec![0.0; s.grid.len()],
            Criterion::Progressive => progressive.clone(),
        };
        LambdaAuto {
            grid: s.grid.clone(),
            live: s.live,
            switches: s.switches,
            losses,
            criterion: self.selector.criterion.name().into(),
            progressive,
            held_out: self.held_out() as u64,
            held_out_dropped: self.holdout.as_ref().map_or(0, |h| h.dropped),
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
    /// The served learner's core (its window and counters).
    fn core(&self) -> &LearnerCore {
        self.served().core()
    }

    fn config(&self) -> &LearnerConfig {
        &self.config
    }

    fn stats(&self) -> LearnerStats {
        let mut stats = self.served().stats();
        let served_extra = self.served.as_ref().map(|s| s.stats());
        stats.steps = self.members.iter().map(|m| m.stats().steps).sum::<u64>()
            + served_extra.map_or(0, |s| s.steps);
        stats.mutations = self
            .members
            .iter()
            .map(|m| m.stats().mutations)
            .sum::<u64>()
            + served_extra.map_or(0, |s| s.mutations)
            + self.selector.state.switches;
        stats
    }

    fn insert_batches(&mut self, batches: &[&SampleBlock]) {
        let held_back;
        let learned: &[&SampleBlock] = match &mut self.holdout {
            Some(h) => {
                h.split(batches);
                held_back = [&h.learned];
                &held_back
            }
            None => batches,
        };
        if let Some(served) = &mut self.served {
            served.insert_batches(batches);
        }
        for (member, delta) in self.members.iter_mut().zip(&mut self.deltas) {
            let before = member.stats();
            member.insert_batches(learned);
            let after = member.stats();
            *delta = (
                after.progressive_loss_sum - before.progressive_loss_sum,
                after.progressive_count - before.progressive_count,
            );
        }
        self.selector.observe(&self.deltas);
    }

    /// Nothing to remove here: each learner evicts from its own window as it inserts.
    fn evict(&mut self, _sample: Row<'_>, _alpha: f64) {}

    /// A step of the served learner and of the next member (round-robin, skipping a served member)
    /// that has work.
    fn step(&mut self) -> StepOutcome {
        let served = self.served_mut().step();
        let skip = self.served.is_none().then(|| self.live());
        let n = self.members.len();
        let mut other = StepOutcome::Idle(super::Idle::EmptyWindow);
        for _ in 0..n {
            let i = self.rotor % n;
            self.rotor = (self.rotor + 1) % n;
            if Some(i) == skip {
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
        self.score_holdout();
        let mut snap = self.served_mut().certify();
        snap.model.lambda_auto = Some(self.record());
        snap.stats = self.stats();
        snap
    }

    fn state(&self) -> LearnerState {
        let mut state = self.served().state();
        state.auto = Some(self.selector.state.clone());
        state
    }

    fn gauges(&self) -> SolverGauges {
        self.served().gauges()
    }

    fn lambda_auto(&self) -> Option<LambdaAuto> {
        Some(self.record())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{learner::log_grid, Config};
    use crate::loss::{Loss, LossKind};
    use crate::sample::SampleSet;
    use crate::synth::sparse_stream;

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

    fn auto_config(loss: LossKind, half_life: u64, criterion: Criterion) -> LearnerConfig {
        let mut c = Config::defaults().learners.remove(0);
        c.loss = Loss::new(loss, 0.25).unwrap();
        c.k = 5;
        c.blocks = 4;
        c.lambda_auto = Some(AutoLambda {
            grid: vec![10.0, 0.1, 1e-3],
            margin: 0.02,
            half_life,
            criterion,
        });
        c.lambda = 0.1;
        c
    }

    /// Each member predicts every sample before learning it; the selector's averages are exactly the
    /// decayed means of the members' own progressive-loss counters.
    #[test]
    fn progressive_losses_are_each_members_own_counters() {
        let data = sparse_stream(300, 50, 3, 8, 0.1, false, 5);
        let mut l = AutoLambdaLearner::new(
            auto_config(LossKind::Squared, 100, Criterion::Progressive),
            200,
            None,
        );
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
        let config = auto_config(LossKind::Squared, 500, Criterion::Progressive);
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
        let config = auto_config(LossKind::Logistic, 10, Criterion::Holdout);
        let l = super::super::build(&config, 16, None);
        let record = l.lambda_auto().expect("lambda = auto");
        assert_eq!(record.grid, [10.0, 0.1, 1e-3]);
        assert_eq!(record.live, 1);
        assert_eq!(l.config().lambda, 0.1);
        assert!(l.config().lambda_auto.is_some());
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
        assert!(s.state.holdout.iter().all(|l| l.is_finite()));
        // Progressive losses never move a holdout selector.
        assert!(!s.observe(&[(0.0, 10_000), (1e6, 10_000), (1e6, 10_000)]));
        assert_eq!(s.state.live, 1);
    }

    /// A whole data set inserted at once (a file POSTed in one body): every member predicts it with its
    /// empty model, so the progressive losses tie and never move the served lambda, while the held-out
    /// samples, scored after the members have converged, move it to the small lambda the data call for.
    #[test]
    fn a_burst_is_ranked_by_the_held_out_samples() {
        let data = sparse_stream(3000, 100, 5, 10, 0.05, false, 9);
        let run = |criterion| {
            let mut l =
                AutoLambdaLearner::new(auto_config(LossKind::Squared, 500, criterion), 4000, None);
            l.insert_samples(&data.samples);
            for _ in 0..50 {
                for _ in 0..40 {
                    l.step();
                }
                l.certify();
            }
            l
        };
        let progressive = run(Criterion::Progressive);
        assert_eq!(progressive.live(), 1, "{:?}", progressive.selector());
        let l = run(Criterion::Holdout);
        assert_eq!(l.live(), 2, "{:?}", l.selector());
        let h = &l.selector().state.holdout;
        assert!(h[2] < h[1] && h[1] < h[0], "{h:?}");
        // The members learned 4 in 5 samples; the served learner all of them; the ring holds the rest.
        assert_eq!(l.held_out(), 600);
        assert!(l.members().iter().all(|m| m.window().len() == 2400));
        assert_eq!(l.window().len(), 3000);
        let snap = l.served().core().stats.samples_seen;
        assert_eq!(snap, 3000);
        let record = l.lambda_auto().expect("the record");
        assert_eq!(record.criterion, "holdout");
        assert_eq!(record.losses, *h);
        assert_eq!(record.progressive.len(), 3);
    }

    /// The ring keeps the newest fifth of a window's worth of samples, and a restore serves the same
    /// lambda from the served learner's window (the ring refills from new samples).
    #[test]
    fn the_ring_is_bounded_and_a_restore_keeps_the_served_lambda() {
        let data = sparse_stream(3000, 100, 5, 10, 0.05, false, 9);
        let config = auto_config(LossKind::Squared, 500, Criterion::Holdout);
        let mut l = AutoLambdaLearner::new(config.clone(), 1000, None);
        for chunk in data.samples.chunks(250) {
            l.insert_samples(chunk);
            for _ in 0..20 {
                l.step();
            }
            l.certify();
        }
        assert_eq!(l.held_out(), 200);
        // 600 held out, the ring holds a fifth of the window: the oldest 400 dropped, and recorded.
        let record = l.record();
        assert_eq!((record.held_out, record.held_out_dropped), (200, 400));
        assert_eq!(l.window().len(), 1000);
        let state = l.state();
        let before = l.certify();
        let mut back = AutoLambdaLearner::new(config, 1000, Some(state));
        assert_eq!(back.live(), l.live());
        assert_eq!(back.held_out(), 0);
        let after = back.certify();
        assert_eq!(after.model.lambda, before.model.lambda);
        assert_eq!(back.window().len(), 1000);
    }
}
