//! `fit --lambda auto`'s search for lambda: how the samples are split to rank the grid (one held-out
//! part, or K-fold cross-validation on small files), the fits along the grid (warm-started from the
//! previous lambda, per split), and the extension of the grid past an end where its best lambda lies.
//!
//! **Validation.** With at least [`CV_BELOW`] samples (`--cv-below`) one seeded held-out part
//! (`--holdout`, 20%) ranks the grid, as before. Below it, `--folds` folds (5; 10 below
//! [`SMALL_BELOW`] samples, [`folds_for`]): each lambda is fitted
//! once per fold on the other folds and scored on the fold, and its score is the pooled (weighted) mean
//! over every sample, each held out exactly once. Why: 20% of a thousand documents is some two hundred
//! samples, too few to rank lambdas whose held-out losses differ by a few percent; cross-validation
//! scores every sample at K times the fitting cost, small on small files. The folds' fits at one lambda are independent
//! and deterministic, so they run side by side on the machine's cores ([`Fit::fit_parts`]); the model
//! is the same as from one core.
//!
//! **Extension.** When the best lambda is the grid's smallest (largest), the search fits a lambda a
//! decade below (above) it, from that end's duals, and goes on while each new lambda is strictly the
//! best so far: it stops at the first one whose held-out score turns up (or ties), after `--lambda-extend`
//! ([`EXTEND`], 4) new lambdas past that end, or at the floor `lambda_max * `[`FLOOR`] (`1e-9`;
//! the ceiling is `lambda_max * `[`CEILING`]). The model's `lambda_auto.grid` is the grid actually
//! tried (largest first), `extended` lists the lambdas added past the configured grid,
//! `validation` says `"holdout"` or `"cv"`, and `folds` the K.
//!
//! **The refit.** The chosen lambda is fitted again on every sample twice, from the chosen member's
//! duals (in file order, the held-out rows at zero) and from zero duals, each polished; the model is
//! the one with the lower primal (`lambda_auto.refit` records both and which was kept). The k-sparse
//! problem is not convex, and on ames the warm start ended at primal 4.16e-3 (R² 0.902) where the
//! cold one reached 3.79e-3 (R² 0.910). The two runs go on two threads, so the second costs little wall time
//! on a machine with a core to spare.

use super::fit::{
    holdout_error, holdout_loss, holdout_split, in_file_order, ranks_by_errors, Fit, GRID_PATIENCE,
    GRID_TOL,
};
use super::CliError;
use crate::learner::auto::NON_FINITE_LOSS;
use crate::learner::params::log_grid;
use crate::model::{LambdaAuto, Model};
use crate::sample::{Dataset, SampleSet};
use crate::solver::driver::{self, StopRule};
use crate::solver::WarmStart;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Files with fewer samples than this rank the grid by cross-validation (`--cv-below`).
pub const CV_BELOW: usize = 5000;
/// Folds of the cross-validation (`--folds`) from [`SMALL_BELOW`] samples on.
pub const FOLDS: usize = 5;
/// Folds below [`SMALL_BELOW`] samples: each fold's fit then trains on 90% of the file, not 80%.
pub const SMALL_FOLDS: usize = 10;
/// Files with fewer samples than this take [`SMALL_FOLDS`] folds by default.
pub const SMALL_BELOW: usize = 1000;

/// `--folds`, or its default for `samples` samples ([`SMALL_FOLDS`] below [`SMALL_BELOW`], else
/// [`FOLDS`]). Why more folds on small files: the folds' fits rank the lambdas for the refit on all the
/// samples, and on 142 documents five folds train on 114, a fifth fewer than the refit — a sample size
/// at which a larger lambda wins. Ten folds train on 128. On convention_2012, over ten seeded splits,
/// held-out accuracy 87.66% -> 89.15% (7 splits up, 2 down; `docs/benchmarks/quality.md`); a fit
/// costs little at this size.
pub fn folds_for(args: &super::FitArgs, samples: usize) -> usize {
    args.folds.unwrap_or(if samples < SMALL_BELOW {
        SMALL_FOLDS
    } else {
        FOLDS
    })
}
/// Lambdas tried past an end of the grid, at most, a decade apart (`--lambda-extend`).
pub const EXTEND: usize = 4;
/// The extension never goes below `lambda_max * FLOOR`.
pub const FLOOR: f64 = 1e-9;
/// The extension never goes above `lambda_max * CEILING`.
pub const CEILING: f64 = 1e4;

/// A fit of one part: its report, the solver's name and its duals to warm-start the next lambda.
type PartFit = (driver::FitReport, &'static str, Option<WarmStart>);

/// The threads the folds' fits run on: the cores this process may use.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// One way of splitting the file: fit on `train`, score on `held`; `order` holds the training rows'
/// positions in the file.
struct Part {
    train: Dataset,
    held: Dataset,
    held_weight: f64,
    order: Vec<usize>,
}

/// One lambda tried: its pooled held-out score and each part's final duals.
struct Point {
    lambda: f64,
    loss: f64,
    states: Vec<Option<WarmStart>>,
}

/// The `--lambda auto` flags are valid: a grid of 2 to 16 lambdas between finite `0 < min < max`, a
/// held-out fraction in `(0, 1)`, 2 to 20 folds and at most 16 extensions.
pub fn check_flags(args: &super::FitArgs) -> Result<(), CliError> {
    let n = args.lambda_grid;
    if !(2..=16).contains(&n) {
        return Err(CliError::Argument(format!(
            "--lambda-grid must be between 2 and 16, got {n}"
        )));
    }
    let (max, min) = (args.lambda_max, args.lambda_min);
    if !(min.is_finite() && max.is_finite() && min > 0.0 && min < max) {
        return Err(CliError::Argument(format!(
            "--lambda-min and --lambda-max must be finite with 0 < min < max, got {min} and {max}"
        )));
    }
    if !(args.holdout > 0.0 && args.holdout < 1.0) {
        return Err(CliError::Argument(format!(
            "--holdout must be in (0, 1), got {}",
            args.holdout
        )));
    }
    if let Some(folds) = args.folds.filter(|f| !(2..=20).contains(f)) {
        return Err(CliError::Argument(format!(
            "--folds must be between 2 and 20, got {folds}"
        )));
    }
    if args.lambda_extend > 16 {
        return Err(CliError::Argument(format!(
            "--lambda-extend must be at most 16, got {}",
            args.lambda_extend
        )));
    }
    Ok(())
}

/// `K` seeded folds of `data`'s rows (a shuffle, then contiguous folds of near-equal size), each as a
/// [`Part`]; `None` with fewer than `folds` rows.
fn k_folds(data: &Dataset, folds: usize, seed: u64) -> Option<Vec<Part>> {
    if folds < 2 || data.len() < folds {
        return None;
    }
    let mut order: Vec<usize> = (0..data.len()).collect();
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    let n = data.len();
    Some(
        (0..folds)
            .map(|f| {
                let (lo, hi) = (f * n / folds, (f + 1) * n / folds);
                let train_rows: Vec<usize> =
                    order[..lo].iter().chain(&order[hi..]).copied().collect();
                part(data, train_rows, &order[lo..hi])
            })
            .collect(),
    )
}

/// The part that trains on `data`'s rows `train` (in that order) and scores on its rows `held`.
fn part(data: &Dataset, train: Vec<usize>, held: &[usize]) -> Part {
    let held = data.select_rows(held);
    let held_weight = (0..held.len()).map(|i| held.row(i).weight).sum();
    Part {
        train: data.select_rows(&train),
        held,
        held_weight,
        order: train,
    }
}

/// The lowest score's index (ties: the larger lambda, the earlier one).
fn best(points: &[Point]) -> usize {
    (0..points.len()).fold(0, |b, i| {
        if points[i].loss < points[b].loss {
            i
        } else {
            b
        }
    })
}

impl Fit<'_> {
    /// `--lambda auto` (module docs): ranks the grid, extended past an end where its best lies, and
    /// returns the record with the refit's starting point (the winner's duals on the first part's
    /// training rows, the other rows fresh).
    pub(super) fn choose_lambda(
        &self,
        data: &Dataset,
    ) -> Result<(LambdaAuto, Option<WarmStart>), CliError> {
        let args = self.args;
        check_flags(args)?;
        let cv = data.len() < args.cv_below;
        let parts = match cv
            .then(|| k_folds(data, folds_for(args, data.len()), args.seed))
            .flatten()
        {
            Some(parts) => parts,
            None => {
                let (train, held) =
                    holdout_split(data.len(), args.holdout, args.seed).ok_or_else(|| {
                        CliError::Argument(format!(
                            "--lambda auto needs at least 2 samples to hold some out, got {}",
                            data.len()
                        ))
                    })?;
                vec![part(data, train, &held)]
            }
        };
        let validation = if parts.len() > 1 { "cv" } else { "holdout" };
        let errors = ranks_by_errors(self.loss.kind());
        let label = format!(
            "{}_{}",
            if parts.len() > 1 {
                format!("cv{}", parts.len())
            } else {
                "holdout".into()
            },
            if errors { "error" } else { "loss" }
        );
        let base = log_grid(args.lambda_max, args.lambda_min, args.lambda_grid);
        let mut points: Vec<Point> = Vec::with_capacity(base.len() + 2 * args.lambda_extend);
        for &lambda in &base {
            let point = self.score_point(&parts, lambda, points.last(), &label)?;
            points.push(point);
        }
        let (floor, ceiling) = (args.lambda_max * FLOOR, args.lambda_max * CEILING);
        let mut extended = Vec::new();
        for _ in 0..args.lambda_extend {
            let last = points.len() - 1;
            let lambda = points[last].lambda / 10.0;
            if best(&points) != last || lambda < floor {
                break;
            }
            let point = self.score_point(&parts, lambda, points.last(), &label)?;
            extended.push(lambda);
            points.push(point);
        }
        for _ in 0..args.lambda_extend {
            let lambda = points[0].lambda * 10.0;
            if best(&points) != 0 || lambda > ceiling {
                break;
            }
            let point = self.score_point(&parts, lambda, points.first(), &label)?;
            extended.push(lambda);
            points.insert(0, point);
        }
        let live = best(&points);
        let grid: Vec<f64> = points.iter().map(|p| p.lambda).collect();
        eprintln!(
            "lambda auto: chose lambda={:e} ({label} {:.6e}; validation={validation} folds={} grid={:?} extended={:?}); refitting on all {} samples",
            grid[live],
            points[live].loss,
            parts.len(),
            grid,
            extended,
            data.len()
        );
        let start = points[live].states[0]
            .take()
            .map(|state| in_file_order(state, &parts[0].order, data.len()));
        let held_out = parts.iter().map(|p| p.held.len() as u64).sum();
        let record = LambdaAuto {
            grid,
            live,
            switches: 0,
            losses: points.iter().map(|p| p.loss).collect(),
            criterion: if errors { "holdout_error" } else { "holdout" }.into(),
            progressive: Vec::new(),
            held_out,
            held_out_dropped: 0,
            validation: Some(validation.into()),
            folds: (parts.len() > 1).then_some(parts.len() as u64),
            extended,
            refit: None,
        };
        Ok((record, start))
    }

    /// [`Fit::solve`] of `lambda` on every part, from `from`'s duals on that part scaled by the ratio
    /// of the lambdas ([`Fit::score_point`]), in part order. The parts' fits share nothing mutable and
    /// each is deterministic, so they run on up to `threads` threads (part `p` on thread
    /// `p % threads`; `fit` gives [`cores`]) with the same results as one after another: on the
    /// cross-validated sets the grid is most of `fit`'s time (convention_2012: 0.39 of 0.59 s).
    fn fit_parts(
        &self,
        parts: &[Part],
        lambda: f64,
        from: Option<&Point>,
        stop: &StopRule,
        threads: usize,
    ) -> Vec<Result<PartFit, CliError>> {
        let fit_one = |p: usize| {
            let start = from.and_then(|f| f.states[p].as_ref()).map(|state| {
                let scale = lambda / from.map_or(lambda, |f| f.lambda);
                WarmStart {
                    alpha: state.alpha.iter().map(|a| a * scale).collect(),
                    fresh: vec![true; state.alpha.len()],
                    intercept: state.intercept,
                }
            });
            self.solve(&parts[p].train, lambda, start.as_ref(), stop, &mut |_| {})
        };
        let threads = threads.min(parts.len());
        if threads <= 1 {
            return (0..parts.len()).map(fit_one).collect();
        }
        let mut out: Vec<Option<Result<PartFit, CliError>>> =
            (0..parts.len()).map(|_| None).collect();
        std::thread::scope(|scope| {
            let fit_one = &fit_one;
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    scope.spawn(move || {
                        (t..parts.len())
                            .step_by(threads)
                            .map(|p| (p, fit_one(p)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            for handle in handles {
                let fitted = handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                for (p, result) in fitted {
                    out[p] = Some(result);
                }
            }
        });
        out.into_iter()
            .map(|r| r.expect("every part is fitted by one thread"))
            .collect()
    }

    /// Fits `lambda` on every part, each from `from`'s duals on that part scaled by the ratio of the
    /// lambdas (which keeps its `w`: `w~ = -z / (lambda N)`; a feasible point, as `F` is a box around 0
    /// and the sum stays 0, every row fresh), scores it on the part's held-out rows, and prints one line.
    fn score_point(
        &self,
        parts: &[Part],
        lambda: f64,
        from: Option<&Point>,
        label: &str,
    ) -> Result<Point, CliError> {
        let grid_stop = StopRule {
            tol: self.stop.tol.max(GRID_TOL),
            patience: GRID_PATIENCE,
            ..self.stop
        };
        let (mut sum, mut weight) = (0.0, 0.0);
        let (mut epochs, mut seconds, mut support) = (0, 0.0, 0);
        let mut stops = Vec::new();
        let mut states = Vec::with_capacity(parts.len());
        for (part, fitted) in
            parts
                .iter()
                .zip(self.fit_parts(parts, lambda, from, &grid_stop, cores()))
        {
            let (report, name, state) = fitted?;
            states.push(state);
            let model = Model::from_sparse(
                &report.model,
                self.loss.kind(),
                self.loss.gamma(),
                name,
                self.k,
                lambda,
                report.certificate,
            );
            let loss = if report.stop_reason == driver::StopReason::Diverged {
                NON_FINITE_LOSS
            } else if ranks_by_errors(self.loss.kind()) {
                holdout_error(&model, &part.held)
            } else {
                holdout_loss(&self.loss, &model, &part.held)
            };
            sum += loss * part.held_weight;
            weight += part.held_weight;
            epochs += report.epochs;
            seconds += report.seconds;
            support = support.max(model.support.len());
            let stop = report.stop_reason.to_string();
            if !stops.contains(&stop) {
                stops.push(stop);
            }
        }
        let loss = sum / weight;
        let loss = if loss.is_finite() && loss < NON_FINITE_LOSS {
            loss
        } else {
            NON_FINITE_LOSS
        };
        let (train, held) = (
            parts.iter().map(|p| p.train.len()).max().unwrap_or(0),
            parts.iter().map(|p| p.held.len()).sum::<usize>(),
        );
        eprintln!(
            "lambda auto: lambda={lambda:e} {label}={loss:.6e} support={support} epochs={epochs} seconds={seconds:.3} stop={} train={train} holdout={held}",
            stops.join(","),
        );
        Ok(Point {
            lambda,
            loss,
            states,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every sample is held out exactly once, the folds' sizes differ by at most one, and each part's
    /// training rows are the others, in the positions `order` names.
    #[test]
    fn k_folds_hold_every_sample_out_once() {
        let data = crate::synth::sparse_stream(23, 10, 2, 3, 0.0, false, 4);
        let all = Dataset::from_samples(&data.samples, 0);
        let parts = k_folds(&all, 5, 7).unwrap();
        assert_eq!(parts.len(), 5);
        let sizes: Vec<usize> = parts.iter().map(|p| p.held.len()).collect();
        assert_eq!(sizes.iter().sum::<usize>(), 23);
        assert!(sizes.iter().all(|&s| s == 4 || s == 5), "{sizes:?}");
        let mut held_rows = Vec::new();
        for p in &parts {
            assert_eq!(p.train.len() + p.held.len(), 23);
            assert_eq!(p.held_weight, p.held.len() as f64);
            for (i, &row) in p.order.iter().enumerate() {
                assert_eq!(p.train.row(i).label, data.samples[row].label);
                assert_eq!(p.train.row(i).indices, &data.samples[row].indices[..]);
            }
            let mut all: Vec<usize> = (0..23).filter(|r| !p.order.contains(r)).collect();
            held_rows.append(&mut all);
        }
        held_rows.sort();
        assert_eq!(held_rows, (0..23).collect::<Vec<_>>());
        assert!(k_folds(&Dataset::from_samples(&data.samples[..4], 0), 5, 7).is_none());
    }

    /// The folds' fits side by side give what they give one after another: the same models, duals
    /// and certificates, in part order.
    #[test]
    fn folds_fitted_on_threads_match_one_thread() {
        use clap::Parser;
        let cli = crate::cli::Cli::parse_from(["thresher", "fit", "x.svm", "-k", "5"]);
        let crate::cli::Command::Fit(args) = cli.command else {
            panic!("not fit");
        };
        let fit = Fit {
            args: &args,
            loss: crate::loss::Loss::new(crate::loss::LossKind::Logistic, 1.0).unwrap(),
            k: 5,
            step: crate::solver::StepRule::Coordinate,
            stop: StopRule::default(),
        };
        let mut data = crate::synth::sparse_stream(200, 40, 4, 6, 0.1, false, 3);
        for s in &mut data.samples {
            s.label = if s.label >= 0.0 { 1.0 } else { -1.0 };
        }
        let parts = k_folds(&Dataset::from_samples(&data.samples, 0), 5, 1).unwrap();
        let run = |threads| {
            fit.fit_parts(&parts, 1e-2, None, &StopRule::default(), threads)
                .into_iter()
                .map(|r| {
                    let (report, _, state) = r.unwrap();
                    (
                        report.model,
                        report.certificate.primal,
                        report.certificate.dual,
                        state,
                    )
                })
                .collect::<Vec<_>>()
        };
        let one = run(1);
        assert_eq!(one.len(), 5);
        assert_eq!(one, run(2));
        assert_eq!(one, run(3));
    }

    #[test]
    fn ties_go_to_the_larger_lambda() {
        let point = |lambda, loss| Point {
            lambda,
            loss,
            states: Vec::new(),
        };
        assert_eq!(
            best(&[point(1.0, 2.0), point(0.1, 1.0), point(0.01, 1.0)]),
            1
        );
        assert_eq!(best(&[point(1.0, 1.0), point(0.1, 1.0)]), 0);
    }
}
