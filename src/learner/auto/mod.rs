//! `lambda = "auto"`: one learner per lambda of a log-spaced grid, all fed the same stream, and a served
//! learner at the lambda whose members rank best — champion/challenger on one stream.
//!
//! **Members.** [`AutoLambdaLearner`] wraps one learner per grid lambda, each built by
//! [`super::build`] from the learner's config with its own `lambda` (so it works for every solver whose
//! objective has the shared `lambda`: sdiht, mirror, smidas). Each member predicts each sample it
//! learns with its own model before learning it (its progressive loss). Each member here keeps its own
//! window, so the window's memory is paid once per grid member (5x with the default grid). SDIHT with
//! criterion `holdout` (the default) is built as [`shared::SharedGrid`] instead: one window whose
//! samples every member shares, each member keeping only its duals and vectors, the served model the
//! best settled member's own. This adapter serves the other solvers and criterion `progressive`.
//!
//! **Criterion `holdout` (the default).** One sample in [`HOLDOUT_EVERY`] (by arrival) is held out:
//! the members never learn it; it goes to a ring of at most `capacity / HOLDOUT_EVERY` samples (the
//! oldest leaves first, as from the window). At every certificate each member's *current* model is
//! scored on the ring (mean loss), and the served learner — one more learner, at the chosen lambda,
//! that learns every sample, held-out ones included — moves to the best member's lambda when that
//! member's loss is below `(1 - lambda_margin)` times the loss of the member at the served lambda at
//! [`selector::CONFIRM_SCORINGS`] certificates in a row. This is what `fit --lambda auto` does (choose on held-out
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
//! ([`selector::AutoState`]) in `LearnerState::auto`. A restore gives that state to the served learner and a copy
//! to each member, which starts from the served window and duals (or model) under its own lambda — a
//! warm start, not its exact former state. So a checkpoint holds one window, not one per member. The
//! held-out ring is not checkpointed: it refills from the samples that arrive after the restart.
//!
//! **Layout.** This file holds the adapter ([`AutoLambdaLearner`]); [`shared`] the SDIHT grid on one
//! shared window; [`selector`] the switching rules over the checkpointed selection state; [`holdout`] the
//! ring of held-out samples and their scoring.

pub mod holdout;
pub mod selector;
pub mod shared;
#[cfg(test)]
mod tests;

use super::{LearnerCore, LearnerSnapshot, LearnerState, LearnerStats, StepOutcome};
use super::{SolverGauges, StreamingLearner};
use crate::learner::params::{Criterion, LearnerConfig};
use crate::model::LambdaAuto;
use crate::sample::{Row, SampleBlock};
use holdout::Holdout;
use selector::{AutoState, Selector};

/// A loss that is not finite counts as this (worse than any real loss, and finite in the checkpoint).
pub const NON_FINITE_LOSS: f64 = 1e300;
/// Criterion `holdout`: one sample in this many is held out (20%, as `fit --lambda auto`'s default).
pub const HOLDOUT_EVERY: u64 = 5;
/// Criterion `holdout`: held-out samples needed before the members are compared at all.
pub const MIN_HOLDOUT: usize = 50;
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
        self.holdout.as_ref().map_or(0, |h| h.len())
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
        if holdout.len() < MIN_HOLDOUT {
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
            held_out_dropped: self.holdout.as_ref().map_or(0, |h| h.dropped()),
            validation: None,
            folds: None,
            extended: Vec::new(),
            refit: None,
        }
    }
}

/// The rest of a step round after the served learner's (`served`): the members from `*rotor` on
/// (round-robin over `n`, skipping `skip`) are stepped by `step_member` until one steps. Stepped if
/// either stepped; otherwise the served learner's outcome.
fn step_round(
    served: StepOutcome,
    n: usize,
    skip: Option<usize>,
    rotor: &mut usize,
    mut step_member: impl FnMut(usize) -> StepOutcome,
) -> StepOutcome {
    let mut other = StepOutcome::Idle(super::Idle::EmptyWindow);
    for _ in 0..n {
        let i = *rotor % n;
        *rotor = (*rotor + 1) % n;
        if Some(i) == skip {
            continue;
        }
        other = step_member(i);
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
                h.split(batches, usize::MAX);
                held_back = [h.learned()];
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
        let members = &mut self.members;
        step_round(served, members.len(), skip, &mut self.rotor, |i| {
            members[i].step()
        })
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
