//! The offline loop of the shared-support softmax solver, by the rules of [`crate::solver::driver`]:
//! epochs, a certificate at the cadence, the running best (the certified model with the lowest `P`
//! against the highest `D` seen), the stop on the relative gap, patience, epochs or time, and the
//! fall back to the empty model (with its best intercepts) when every iterate is worse.

use std::time::{Duration, Instant};

use super::certificate::{certify, empty_model};
use super::{SoftmaxProblem, SoftmaxState};
use crate::sample::SampleSet;
use crate::solver::driver::{made_progress, StopReason, StopRule, TraceRow};
use crate::solver::Certificate;
use crate::sparse::support_changes;

/// A shared-support model: `weights` (`|S| x C`, row-major) on the rows `support` (ascending) and
/// one intercept per class.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SharedModel {
    pub support: Vec<u32>,
    pub weights: Vec<f64>,
    pub intercepts: Vec<f64>,
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct SoftmaxReport {
    pub model: SharedModel,
    pub certificate: Certificate,
    pub stop_reason: StopReason,
    pub epochs: usize,
    pub seconds: f64,
    /// Every certified iterate was worse than the empty model, which is returned.
    pub empty_model: bool,
    /// Block changes dropped by the acceptance rule over the run.
    pub dropped_blocks: usize,
}

/// Runs `state` on `problem` until `stop`, calling `observe` with every certified point.
pub fn run<S: SampleSet>(
    problem: &SoftmaxProblem<S>,
    state: &mut SoftmaxState,
    stop: &StopRule,
    observe: &mut dyn FnMut(&TraceRow),
) -> SoftmaxReport {
    let cadence = stop.cadence.max(1);
    let mut solver_time = Duration::ZERO;
    let mut previous: Vec<u32> = Vec::new();
    let mut best_model = SharedModel::default();
    let mut best: Option<Certificate> = None;
    let (mut progress_gap, mut progress_primal, mut without_progress) =
        (f64::INFINITY, f64::INFINITY, 0);
    let mut epoch = 0;
    let (certificate, stop_reason) = loop {
        let started = Instant::now();
        state.epoch(problem);
        solver_time += started.elapsed();
        epoch += 1;
        let out_of_epochs = epoch >= stop.max_epochs;
        let out_of_time = stop.time_budget.is_some_and(|b| solver_time >= b);
        if epoch % cadence != 0 && !out_of_epochs && !out_of_time {
            continue;
        }
        let current = certify(problem, state);
        if !(current.primal.is_finite() && current.dual.is_finite()) {
            break (best.unwrap_or(current), StopReason::Diverged);
        }
        let certificate = match best {
            Some(b) if b.primal <= current.primal => {
                Certificate::new(b.primal, b.dual.max(current.dual), current.samples)
            }
            _ => {
                best_model = SharedModel {
                    support: state.support().to_vec(),
                    weights: state.weights(problem),
                    intercepts: state.b.clone(),
                };
                Certificate::new(
                    current.primal,
                    best.map_or(current.dual, |b| b.dual.max(current.dual)),
                    current.samples,
                )
            }
        };
        best = Some(certificate);
        observe(&TraceRow {
            epoch,
            seconds: solver_time.as_secs_f64(),
            primal: certificate.primal,
            dual: certificate.dual,
            gap: certificate.gap,
            support_size: state.support().len(),
            support_changes: support_changes(&previous, state.support()),
        });
        previous.clear();
        previous.extend_from_slice(state.support());
        if certificate.relative_gap() <= stop.tol {
            break (certificate, StopReason::Converged);
        }
        if made_progress(&certificate, progress_gap, progress_primal) {
            progress_gap = certificate.gap;
            progress_primal = certificate.primal;
            without_progress = 0;
        } else {
            without_progress += 1;
        }
        if stop.patience > 0 && without_progress >= stop.patience {
            break (certificate, StopReason::Stalled);
        }
        if out_of_epochs {
            break (certificate, StopReason::MaxEpochs);
        }
        if out_of_time {
            break (certificate, StopReason::TimeBudget);
        }
    };
    let mut report = SoftmaxReport {
        model: best_model,
        certificate,
        stop_reason,
        epochs: epoch,
        seconds: solver_time.as_secs_f64(),
        empty_model: false,
        dropped_blocks: state.dropped_blocks,
    };
    let (empty, intercepts) = empty_model(problem);
    if stop_reason != StopReason::Diverged && empty.is_finite() && empty < certificate.primal {
        report.model = SharedModel {
            intercepts,
            ..SharedModel::default()
        };
        report.certificate = Certificate::new(empty, certificate.dual, certificate.samples);
        report.empty_model = true;
    }
    report
}
