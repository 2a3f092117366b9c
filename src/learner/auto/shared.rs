//! `lambda = "auto"` for SDIHT with criterion `holdout` (the default): the grid members share one
//! window. [`SharedGrid`] stores each learned sample once; each member ([`StreamSdiht`]) keeps only its
//! own duals (one `f64` per window slot), its dense `z` and its `w` (sparse while parked), and the
//! window is lent to one member at a time with that member's duals and the grid's dense buffers
//! ([`crate::learner::sdiht`]'s `member`).
//!
//! **Served member.** The served model is a member's own (no extra learner at the chosen lambda, as
//! [`super::AutoLambdaLearner`] keeps): between calls the window sits in the served member, so the
//! learner's [`StreamingLearner::core`], window and checkpoint are the served member's. Held-out samples
//! (one in [`super::HOLDOUT_EVERY`]) are learned by no member, the served one included: the window spans
//! `capacity` learned samples, a quarter more of the stream than it would with every sample in it.
//!
//! **Choice.** At every certificate each member's current model is scored on the held-out ring, and
//! the served member moves to the best *eligible* member once the served one's loss has been led by
//! the margin at [`super::selector::CONFIRM_SCORINGS`] scorings in a row (by whichever eligible member
//! led each time: [`Selector::judge_led`]). A member is eligible when its held-out loss moved by less
//! than [`SETTLED`] (relative) since the previous scoring (settled), or fell since then (descending:
//! leading while falling, it only leads more as it settles — a small lambda's duals grow for many
//! passes on a small window, and waiting for it to settle served `w` = 0 on a rare-positive set), or
//! when it had no work left at its last step (converged or stalled on its window), or when its loss
//! at this scoring and the last were both below the served member's less the margin, by more than it
//! moved between the two (a k-sparse member near its optimum may swap support entries and swing by a
//! few percent at every scoring: on fine_foods a member at 0.52 against the served 0.61 swung by 2%
//! and waited past the benchmark's three-second settling, serving 11 points of accuracy less; a lead
//! smaller than the swing may be the swing's doing). The served member's loss is the lower of its
//! last two ([`Selector::judge_led_from`]): a swing of its own does not count as being led. Any other member whose loss swings up
//! and down is eligible at most every other scoring. A move only changes which member
//! holds the window: every member has been learning all along, so the new served model is that
//! member's own.
//!
//! **Small sets.** The members are compared once the ring holds [`MIN_HOLDOUT`] samples, or
//! [`MIN_HOLDOUT_PAUSED`] when no sample arrived since the last certificate or every member is idle
//! (the stream paused; a set
//! of 140 samples holds 28 out, and was served the grid's middle for good). When every member is
//! idle the selector's losses are final and the leader takes the place at once.
//!
//! **The grid's end.** When the member at the smallest lambda is eligible and ranks best,
//! a member a decade below joins (warm-started from that member's duals scaled by 1/10, which keeps
//! its `w`), as `fit --lambda auto` extends its grid: at most [`EXTEND`] past the configured grid,
//! never below its largest lambda times [`FLOOR`]. The joined lambdas are in the record's `grid` and
//! `extended` and in the checkpoint's selection state (a restore keeps them).
//!
//! **Work.** An insert is the served member's own (it predicts each sample, stores the rows once, enters
//! their warm-start duals: a single learner's insert, bit for bit); the other members only take the
//! evicted samples out of their `z` and admit the new rows with dual 0, for their block steps to raise.
//! So an insert costs about one learner's, and the members' progressive losses are not kept (the record's
//! `progressive` is the served member's alone; the held-out ring ranks them). The served member
//! reads the learned rows straight from the batches ([`super::holdout::Learned`]): a copy of them,
//! up to a window's worth per insert, was a second window's memory at the peak under load. Under a
//! backlog (an insert of more learned samples than the window holds) only the newest window's worth
//! is predicted: the older ones would pass through the window within the insert. A step
//! steps the served member and the next member that has work (round-robin), as
//! [`super::AutoLambdaLearner`] does.
//!
//! **A stream faster than the grid.** When an insert replaces more of the window than a parked
//! member's block steps can follow (its evictions times the blocks times the other members above the
//! window's capacity: a parked member steps one block per round of the others), the parked members
//! lose duals faster than their steps raise them, and decay towards `w = 0` whatever steps they are
//! given; until the next insert only the served member steps, as a single learner would. The parked
//! members are still scored at every certificate, but learn again only once the stream slows, so
//! under such a stream the grid keeps the choice it made before (a gap left open). On
//! the W3-like stream at a million samples a second (`docs/benchmarks/learners.md`) this took the
//! served member's held-out accuracy from 98.1-99.5% to 99.5-99.6%, one learner's.
//!
//! **Checkpoint.** The served member's state (window, its duals) with the selection state; a restore
//! gives the other members the served duals scaled by the ratio of the lambdas (which keeps `w`),
//! projected onto their domains.

use super::holdout::Holdout;
use super::selector::{AutoState, Selector};
use super::{at_lambda, nearest, step_round, MIN_HOLDOUT, NON_FINITE_LOSS};
use crate::learner::params::LearnerConfig;
use crate::learner::sdiht::{Scratch, StreamSdiht};
use crate::learner::{
    LearnerCore, LearnerSnapshot, LearnerState, LearnerStats, StepOutcome, StreamingLearner,
};
use crate::model::LambdaAuto;
use crate::ring::Window;
use crate::sample::{Row, SampleBlock, SampleSet};
use crate::solver::driver::SparseModel;

/// A member whose held-out loss moved by less than this (relative) between two scorings is settled.
pub const SETTLED: f64 = 0.01;
/// Held-out samples enough to compare the members once the stream paused (no sample arrived since the
/// last certificate): a small set never fills [`MIN_HOLDOUT`].
pub const MIN_HOLDOUT_PAUSED: usize = 20;
/// At most this many lambdas join below the configured grid ([`SharedGrid`]'s module docs), as
/// `fit --lambda auto` extends its grid.
pub const EXTEND: usize = 4;
/// No lambda joins below the configured grid's largest times this.
pub const FLOOR: f64 = 1e-9;

/// `lambda = "auto"` over SDIHT members sharing one window (module docs).
pub struct SharedGrid {
    config: LearnerConfig,
    /// One per grid lambda, in grid order; `members[live]` holds the window between calls.
    members: Vec<StreamSdiht>,
    /// An empty window exchanged for the shared one while it is lent (no allocation).
    hand: Window,
    /// The buffers only the running member uses, passed along with the window.
    scratch: Scratch,
    holdout: Holdout,
    selector: Selector,
    /// The next member (other than the served one) a step advances.
    rotor: usize,
    /// The last insert replaced more of the window than the parked members' block steps follow
    /// (module docs, "A stream faster than the grid"): until the next insert only the served member
    /// steps.
    pressed: bool,
    /// Per member: `(loss sum, count)` of the last insert, its last held-out loss, and whether its
    /// last step found no work.
    deltas: Vec<(f64, u64)>,
    last_loss: Vec<f64>,
    idle: Vec<bool>,
    /// Reused per insert: the slots the pushes overwrite, and where the new rows went.
    evicted: Vec<usize>,
    positions: Vec<usize>,
    /// Samples seen before a restore (the checkpoint's count).
    seen_before: u64,
    /// Samples that had arrived at the last certificate.
    arrived: u64,
    /// Certificates asked for by the selection (counted as mutations, so that one follows): when a
    /// member turns idle, and when a paused stream's ring is to be scored at the next certificate.
    rescore: u64,
}

impl SharedGrid {
    /// The members with an empty window, or resumed from `state` (module docs).
    pub fn new(config: LearnerConfig, capacity: usize, state: Option<LearnerState>) -> SharedGrid {
        let rule = config
            .lambda_auto
            .clone()
            .expect("a SharedGrid is built for lambda = \"auto\"");
        let grid = rule.grid.clone();
        let start = grid.len() / 2;
        let (selection, mut state) = match state {
            None => (AutoState::new(grid.clone(), start), None),
            Some(mut state) => {
                let selection = match state.auto.take() {
                    // The configured grid, or it with lambdas that joined below it.
                    Some(s) if extends(&s.grid, &grid) && s.live < s.grid.len() => s,
                    Some(s) => {
                        let lambda = s.grid.get(s.live).copied().unwrap_or(grid[start]);
                        AutoState::new(grid.clone(), nearest(&grid, lambda))
                    }
                    None => AutoState::new(grid.clone(), start),
                };
                (selection, Some(state))
            }
        };
        let (live, grid) = (selection.live, selection.grid.clone());
        let seen_before = state.as_ref().map_or(0, |s| s.stats.samples_seen);
        let members: Vec<StreamSdiht> = grid
            .iter()
            .enumerate()
            .map(|(i, &l)| {
                let own = if i == live { state.take() } else { None };
                StreamSdiht::new(at_lambda(&config, l), capacity, own)
            })
            .collect();
        let n = grid.len();
        let mut learner = SharedGrid {
            config,
            members,
            hand: Window::new(capacity),
            scratch: Scratch::default(),
            holdout: Holdout::new(capacity),
            selector: Selector::new(&rule, selection),
            rotor: 0,
            pressed: false,
            deltas: vec![(0.0, 0); n],
            last_loss: vec![f64::NAN; n],
            idle: vec![false; n],
            evicted: Vec::new(),
            positions: Vec::new(),
            seen_before,
            arrived: 0,
            rescore: 0,
        };
        let base: Vec<f64> = learner.members[live].window().alphas().to_vec();
        if !base.is_empty() {
            for (i, &lambda) in grid.iter().enumerate().filter(|&(i, _)| i != live) {
                let ratio = lambda / grid[live];
                learner.with(i, |m| m.restart_from(base.iter().map(|a| a * ratio)));
            }
        }
        learner
    }

    /// Index of the served member.
    pub fn live(&self) -> usize {
        self.selector.state.live
    }

    /// The members, in grid order.
    pub fn members(&self) -> &[StreamSdiht] {
        &self.members
    }

    pub fn selector(&self) -> &Selector {
        &self.selector
    }

    /// Runs `f` on member `i` with the window lent to it (and back to the served member after).
    fn with<R>(&mut self, i: usize, f: impl FnOnce(&mut StreamSdiht) -> R) -> R {
        let live = self.live();
        if i == live {
            return f(&mut self.members[i]);
        }
        self.members[live].park(&mut self.hand, &mut self.scratch);
        self.members[i].lend(&mut self.hand, &mut self.scratch);
        self.members[i].settle_model();
        let out = f(&mut self.members[i]);
        self.members[i].park(&mut self.hand, &mut self.scratch);
        self.members[live].lend(&mut self.hand, &mut self.scratch);
        out
    }

    /// Records whether member `i`'s last step found no work; turning idle asks for a certificate (the
    /// last member to idle makes the selector's losses final, and an idle daemon certifies nothing
    /// unless something changed).
    fn set_idle(&mut self, i: usize, idle: bool) {
        if idle && !self.idle[i] {
            self.rescore += 1;
        }
        self.idle[i] = idle;
    }

    /// Member `i`'s current model's mean loss on the held-out ring.
    fn holdout_loss(&mut self, i: usize) -> f64 {
        match self.with(i, |m| m.current_model()) {
            Some(model) => self.holdout.loss_of(&self.config, &model),
            None => NON_FINITE_LOSS,
        }
    }

    /// Scores every member's current model on the ring, extends the grid below its end when the
    /// smallest lambda ranks best, and moves the served place to the best eligible member when the
    /// selector says so (module docs).
    fn score_holdout(&mut self) {
        // Every member idle: no model changes before new samples (the selector's `last`).
        let last = self.idle.iter().all(|&idle| idle);
        // No sample arrived since the last certificate: the ring is all there is for now.
        let now = self.holdout.arrived();
        let paused = now == std::mem::replace(&mut self.arrived, now);
        let enough = if paused || last {
            MIN_HOLDOUT_PAUSED
        } else {
            MIN_HOLDOUT
        };
        if self.holdout.len() < enough {
            if !paused && self.holdout.len() >= MIN_HOLDOUT_PAUSED {
                // A small set may be all there is: the next certificate sees whether it paused.
                self.rescore += 1;
            }
            return;
        }
        let mut losses: Vec<f64> = (0..self.members.len())
            .map(|i| self.holdout_loss(i))
            .collect();
        // The served member's lower loss of this scoring and the last, less the margin: a member
        // below it at both leads whatever its swings and the served one's.
        let live = self.live();
        let bar = losses[live].min(self.last_loss[live]) * (1.0 - self.selector.margin);
        let mut eligible: Vec<bool> = (0..losses.len())
            .map(|i| eligible(self.idle[i], self.last_loss[i], losses[i], bar))
            .collect();
        if self.extend_below(&losses, &eligible) {
            let new = self.members.len() - 1;
            losses.push(self.holdout_loss(new));
            eligible.push(false);
        }
        let served_before = self.last_loss[live];
        self.last_loss.clone_from(&losses);
        let last = last && self.idle.len() == losses.len();
        if self
            .selector
            .judge_led_from(&losses, &eligible, last, served_before)
        {
            self.members[live].park(&mut self.hand, &mut self.scratch);
            let now = self.live();
            self.members[now].lend(&mut self.hand, &mut self.scratch);
        }
    }

    /// The number of lambdas in the configured grid (the members past it joined by
    /// [`SharedGrid::extend_below`]).
    fn configured(&self) -> usize {
        self.config.lambda_auto.as_ref().map_or(0, |r| r.grid.len())
    }

    /// When the member at the grid's smallest lambda is eligible (module docs) and ranks best
    /// (held-out loss no higher than any other member's), a member a decade below joins, warm-started from that
    /// member's duals scaled by the ratio of the lambdas (which keeps `w`): at most [`EXTEND`] past the
    /// configured grid and never below its largest lambda times [`FLOOR`]. Returns whether one joined.
    fn extend_below(&mut self, losses: &[f64], eligible: &[bool]) -> bool {
        let end = self.members.len() - 1;
        let best = (0..losses.len()).min_by(|&a, &b| losses[a].total_cmp(&losses[b]));
        let grid = &self.selector.state.grid;
        let lambda = grid[end] / 10.0;
        if best != Some(end)
            || !eligible[end]
            || losses[end] >= NON_FINITE_LOSS
            || self.members.len() >= self.configured() + EXTEND
            || lambda < grid[0] * FLOOR
        {
            return false;
        }
        let live = self.live();
        let base: Vec<f64> = if end == live {
            self.members[live].window().alphas().to_vec()
        } else {
            self.members[end].parked().to_vec()
        };
        let capacity = self.members[live].window().capacity();
        let config = at_lambda(&self.config, lambda);
        self.members.push(StreamSdiht::new(config, capacity, None));
        self.deltas.push((0.0, 0));
        self.last_loss.push(f64::NAN);
        self.idle.push(false);
        let s = &mut self.selector.state;
        s.grid.push(lambda);
        s.loss.push(0.0);
        s.weight.push(0.0);
        let new = self.members.len() - 1;
        self.with(new, |m| m.restart_from(base.iter().map(|a| a / 10.0)));
        true
    }

    fn record(&self) -> LambdaAuto {
        let s = &self.selector.state;
        let n = s.grid.len();
        LambdaAuto {
            grid: s.grid.clone(),
            live: s.live,
            switches: s.switches,
            losses: if s.holdout.len() == n {
                s.holdout.clone()
            } else {
                vec![0.0; n]
            },
            criterion: self.selector.criterion.name().into(),
            progressive: (0..n).map(|i| s.average(i)).collect(),
            held_out: self.holdout.len() as u64,
            held_out_dropped: self.holdout.dropped(),
            validation: None,
            folds: None,
            extended: s.grid.get(self.configured()..).unwrap_or(&[]).to_vec(),
            refit: None,
        }
    }
}

/// Whether `saved` is `configured` with at most [`EXTEND`] lambdas after it, each below the one
/// before (a checkpoint of a grid that extended itself).
fn extends(saved: &[f64], configured: &[f64]) -> bool {
    saved.len() <= configured.len() + EXTEND
        && saved.starts_with(configured)
        && saved[configured.len().max(1) - 1..]
            .windows(2)
            .all(|w| w[1] < w[0] && w[1] > 0.0)
}

/// Whether a member whose held-out loss went from `before` (NaN at its first scoring) to `now` may
/// take the served place (module docs): idle, settled, descending, or below `bar` (the served
/// member's loss less the margin) at both scorings.
fn eligible(idle: bool, before: f64, now: f64, bar: f64) -> bool {
    idle || settled(before, now) || now < before || leads_past_its_swing(before, now, bar)
}

/// Whether a member whose loss went from `before` to `now` stayed below `bar` at both scorings by more
/// than it moved between them: its lead over the served member is larger than its own swing, so the
/// swing cannot be what put it ahead.
fn leads_past_its_swing(before: f64, now: f64, bar: f64) -> bool {
    let worse = before.max(now);
    before.is_finite() && worse < bar && (now - before).abs() < bar - worse
}

/// Whether a held-out loss that went from `before` to `now` has settled (module docs).
fn settled(before: f64, now: f64) -> bool {
    before.is_finite() && (now - before).abs() <= SETTLED * before.abs().max(f64::MIN_POSITIVE)
}

impl StreamingLearner for SharedGrid {
    /// The served member's core: the window (with its duals) and its counters.
    fn core(&self) -> &LearnerCore {
        self.members[self.live()].core()
    }

    fn config(&self) -> &LearnerConfig {
        &self.config
    }

    /// The served member's counters, with every sample that arrived counted as seen (held out or not,
    /// whichever member served then), every member's steps and mutations, and the switches.
    fn stats(&self) -> LearnerStats {
        let mut stats = self.members[self.live()].stats();
        stats.samples_seen = self.seen_before + self.holdout.arrived();
        stats.steps = self.members.iter().map(|m| m.stats().steps).sum();
        stats.mutations = self
            .members
            .iter()
            .map(|m| m.stats().mutations)
            .sum::<u64>()
            + self.selector.state.switches
            + self.rescore;
        stats
    }

    fn insert_batches(&mut self, batches: &[&SampleBlock]) {
        // The window is the served member's; older learned samples would pass through it.
        let capacity = self.members[self.live()].window().capacity();
        let learned = self.holdout.split_ring(batches, capacity);
        let total = learned.len();
        if total > 0 {
            let live = self.live();
            let capacity = self.members[live].window().capacity();
            let pushes = total.min(capacity);
            // The others first take out what the insert will evict, while the rows are still there.
            self.members[live].park(&mut self.hand, &mut self.scratch);
            self.evicted.clear();
            self.evicted.extend(self.hand.evicted_by(pushes));
            // A parked member steps one block every `n - 1` step rounds; when more slots than a
            // block are replaced meanwhile, it loses duals faster than it raises them.
            let others = self.members.len().saturating_sub(1).max(1);
            self.pressed = self.evicted.len() * self.config.blocks * others > capacity;
            for (i, m) in self.members.iter_mut().enumerate() {
                if i != live {
                    m.evict_parked(&self.hand, &self.evicted, total >= capacity, learned.dim());
                }
            }
            self.members[live].lend(&mut self.hand, &mut self.scratch);
            let before = self.members[live].stats();
            let slot = self.config.slot;
            self.members[live].insert_rows(total, learned.dim(), learned.rows(batches, slot));
            let after = self.members[live].stats();
            self.deltas.iter_mut().for_each(|d| *d = (0.0, 0));
            self.deltas[live] = (
                after.progressive_loss_sum - before.progressive_loss_sum,
                after.progressive_count - before.progressive_count,
            );
            self.positions.clear();
            self.positions
                .extend_from_slice(self.members[live].last_positions());
            let len = self.members[live].window().len();
            for (i, m) in self.members.iter_mut().enumerate() {
                if i != live {
                    m.admit_parked(len, &self.positions);
                }
            }
            self.idle.iter_mut().for_each(|idle| *idle = false);
            self.selector.observe(&self.deltas);
        }
    }

    /// Nothing to remove here: an insert evicts from the shared window.
    fn evict(&mut self, _sample: Row<'_>, _alpha: f64) {}

    /// A step of the served member and of the next member (round-robin) that has work.
    fn step(&mut self) -> StepOutcome {
        let live = self.live();
        let served = self.members[live].step();
        self.set_idle(live, served != StepOutcome::Stepped);
        if self.pressed && served == StepOutcome::Stepped {
            return served;
        }
        let (n, mut rotor) = (self.members.len(), self.rotor);
        let outcome = step_round(served, n, Some(live), &mut rotor, |i| {
            let other = self.with(i, |m| m.step());
            self.set_idle(i, other != StepOutcome::Stepped);
            other
        });
        self.rotor = rotor;
        outcome
    }

    fn certify(&mut self) -> LearnerSnapshot {
        self.score_holdout();
        let live = self.live();
        let mut snap = self.members[live].certify();
        snap.model.lambda_auto = Some(self.record());
        snap.stats = self.stats();
        snap
    }

    fn state(&self) -> LearnerState {
        let mut state = self.members[self.live()].state();
        // Every sample that arrived counts as seen (a restore starts counting from it).
        state.stats.samples_seen = self.stats().samples_seen;
        state.auto = Some(self.selector.state.clone());
        state
    }

    fn lambda_auto(&self) -> Option<LambdaAuto> {
        Some(self.record())
    }

    fn current_model(&mut self) -> Option<SparseModel> {
        let live = self.live();
        self.members[live].current_model()
    }
}

#[cfg(test)]
mod tests;
