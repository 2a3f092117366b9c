//! One-vs-rest on a stream: a learner for `C > 2` classes made of `C` binary learners, one per class,
//! each fed the same samples with the label `+1` for its class and `-1` for the others (liblinear's and
//! Vowpal Wabbit's `--oaa` reduction, as `thresher fit --multiclass ovr` fits it offline).
//!
//! Labels are the class indices `0..C-1`. A batch is checked whole before any member sees it: one label
//! outside the classes (or not an integer) refuses the batch, naming its row, and changes no state.
//!
//! **Certificate.** Each member keeps its own exact certificate over its window. The one-vs-rest
//! objective is the sum of the members' objectives (they share no variable), so the sum of their gaps
//! bounds the whole model's suboptimality; it is what [`MulticlassSnapshot::gap`] publishes. The sum
//! (not the max) because it is the bound of the objective the model minimises, and, every gap being
//! `>= 0`, it also bounds each class's gap.
//!
//! **Memory.** Each member holds its own window (the samples are stored `C` times, with their `±1`
//! labels); the members are whole learners built by [`super::build`], so every binary solver and
//! `lambda = "auto"` run per class unchanged, and each member checkpoints as a binary learner does.

use thiserror::Error;

use super::{build, LearnerSnapshot, LearnerState, StepOutcome, StreamingLearner};
use crate::learner::params::LearnerConfig;
use crate::model::multiclass::{MulticlassModel, MAX_CLASSES};
use crate::sample::SampleBlock;

/// Why a one-vs-rest learner cannot be built or cannot take a batch.
#[derive(Debug, Error, PartialEq)]
pub enum MulticlassError {
    #[error("a multi-class learner has 3 to {MAX_CLASSES} classes, not {0}")]
    Classes(usize),
    #[error("one-vs-rest needs a classification loss (logistic, hinge or squared hinge)")]
    Loss,
    #[error("the checkpoint holds {found} class learners, the config asks for {classes} classes")]
    State { found: usize, classes: usize },
    #[error("row {row}: label {label} is not a class (an integer 0..{last})")]
    Label { row: usize, label: f64, last: usize },
    #[error("the class models do not form a multi-class model: {0}")]
    Model(String),
}

/// A one-vs-rest learner's published view: the multi-class model (every class's model with its own
/// certificate), the summed gap, and each member's counters.
#[derive(Debug, Clone, PartialEq)]
pub struct MulticlassSnapshot {
    pub model: MulticlassModel,
    /// The sum of the classes' gaps: a bound on the one-vs-rest objective's suboptimality.
    pub gap: f64,
    pub members: Vec<LearnerSnapshot>,
}

impl MulticlassSnapshot {
    /// Every published number is finite (each member's model, certificate and counters, and the sum).
    pub fn is_finite(&self) -> bool {
        self.gap.is_finite() && self.members.iter().all(LearnerSnapshot::is_finite)
    }
}

/// `C` binary learners, one per class (see the module docs).
pub struct OneVsRest {
    members: Vec<Box<dyn StreamingLearner>>,
    /// The batch relabelled for one class at a time (reused across inserts).
    relabelled: SampleBlock,
    /// The next member [`OneVsRest::step`] tries first (round robin).
    next: usize,
}

impl OneVsRest {
    /// `classes` learners by `config` on windows of `capacity`, or resumed from `states` (one per class,
    /// in class order, as [`OneVsRest::state`] wrote them).
    pub fn new(
        config: &LearnerConfig,
        classes: usize,
        capacity: usize,
        states: Option<Vec<LearnerState>>,
    ) -> Result<OneVsRest, MulticlassError> {
        if !(3..=MAX_CLASSES).contains(&classes) {
            return Err(MulticlassError::Classes(classes));
        }
        if !config.loss.is_classification() {
            return Err(MulticlassError::Loss);
        }
        let members = match states {
            Some(states) if states.len() != classes => {
                return Err(MulticlassError::State {
                    found: states.len(),
                    classes,
                })
            }
            Some(states) => states
                .into_iter()
                .map(|s| build(config, capacity, Some(s)))
                .collect(),
            None => (0..classes)
                .map(|_| build(config, capacity, None))
                .collect(),
        };
        Ok(OneVsRest {
            members,
            relabelled: SampleBlock::new(),
            next: 0,
        })
    }

    /// The number of classes.
    pub fn classes(&self) -> usize {
        self.members.len()
    }

    /// The binary learner of each class.
    pub fn members(&self) -> &[Box<dyn StreamingLearner>] {
        &self.members
    }

    /// The first row of `batch` whose label is not a class index, as the error naming it.
    pub fn check(&self, batch: &SampleBlock) -> Result<(), MulticlassError> {
        let last = self.classes() - 1;
        for (row, s) in batch.iter().enumerate() {
            let label = s.label;
            if !(label.fract() == 0.0 && (0.0..=last as f64).contains(&label)) {
                return Err(MulticlassError::Label { row, label, last });
            }
        }
        Ok(())
    }

    /// Checks `batch` whole, then gives it to every member with its class's `±1` labels. A refused
    /// batch changes nothing.
    pub fn insert(&mut self, batch: &SampleBlock) -> Result<(), MulticlassError> {
        self.check(batch)?;
        for (class, member) in self.members.iter_mut().enumerate() {
            relabel_into(&mut self.relabelled, batch, class);
            member.insert(&self.relabelled);
        }
        Ok(())
    }

    /// One step of the first member (round robin from the last one stepped) with work to do; idle only
    /// when every member is (with the last member's reason).
    pub fn step(&mut self) -> StepOutcome {
        let c = self.classes();
        let mut outcome = StepOutcome::Stepped;
        for i in 0..c {
            let m = (self.next + i) % c;
            outcome = self.members[m].step();
            if outcome == StepOutcome::Stepped {
                self.next = (m + 1) % c;
                return outcome;
            }
        }
        outcome
    }

    /// Every member's model with its exact certificate over its window, as one multi-class model.
    pub fn certify(&mut self) -> Result<MulticlassSnapshot, MulticlassError> {
        let members: Vec<LearnerSnapshot> = self.members.iter_mut().map(|m| m.certify()).collect();
        let gap = members.iter().map(|s| s.model.certificate.gap).sum();
        let classes = (0..members.len()).map(|c| c as f64).collect();
        let models = members.iter().map(|s| s.model.clone()).collect();
        Ok(MulticlassSnapshot {
            model: MulticlassModel::one_vs_rest(classes, models)
                .map_err(|e| MulticlassError::Model(e.to_string()))?,
            gap,
            members,
        })
    }

    /// The checkpoint payload: each member's state, in class order.
    pub fn state(&self) -> Vec<LearnerState> {
        self.members.iter().map(|m| m.state()).collect()
    }
}

/// `batch` as class `class`'s learner sees it, written into `out`: label `+1` for the samples of the
/// class, `-1` for the others (features, weights and served scores unchanged). The daemon's learner
/// of a class ([`crate::learner::params::ClassOf`]) takes every batch through it.
pub fn relabel_into(out: &mut SampleBlock, batch: &SampleBlock, class: usize) {
    out.clone_from(batch);
    for label in out.labels_mut() {
        *label = if *label == class as f64 { 1.0 } else { -1.0 };
    }
}

#[cfg(test)]
mod tests;
