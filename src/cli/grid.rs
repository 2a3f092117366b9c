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
//! and deterministic, so they run side by side on the machine's cores, along the grid: a fold's fit at
//! the next lambda starts as soon as its fit at this one ends ([`Fit::fit_path`]); the model is the
//! same as from one core.
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

/// The fits of a path ([`Fit::fit_path`]) as they are made: `results[lambda][part]`, and per part the
/// next lambda to fit and whether a thread is fitting it.
struct FitPath {
    results: Vec<Vec<Option<Result<PartFit, CliError>>>>,
    next: Vec<usize>,
    busy: Vec<bool>,
}

/// What a thread of [`Fit::fit_path`] does next.
enum Taken {
    /// Fit lambda `i` on part `p` (marked busy).
    Fit(usize, usize),
    /// Every part left to fit is being fitted: wait for one to finish.
    Wait,
    Finished,
}

/// A part's state at a lambda, to start the next lambda's fit from (`None`: zero duals).
type Previous<'a> = Option<(&'a WarmStart, f64)>;

impl FitPath {
    fn new(lambdas: usize, parts: usize) -> FitPath {
        FitPath {
            results: (0..lambdas)
                .map(|_| (0..parts).map(|_| None).collect())
                .collect(),
            next: vec![0; parts],
            busy: vec![false; parts],
        }
    }

    /// The start of lambda `i` on part `p`: `from`'s state at `i = 0`, else the part's fit at
    /// `i - 1`; `None` (outer) when that fit failed or is missing, so `p` fits no further lambda.
    fn previous<'s, 'f: 's>(
        &'s self,
        i: usize,
        p: usize,
        from: &impl Fn(usize) -> Previous<'f>,
        lambdas: &[f64],
    ) -> Option<Previous<'s>> {
        if i == 0 {
            return Some(from(p));
        }
        match &self.results[i - 1][p] {
            Some(Ok((_, _, state))) => Some(state.as_ref().map(|s| (s, lambdas[i - 1]))),
            _ => None,
        }
    }

    /// Marks the first free part's next fit (lambda-then-part order) as taken; a part whose last
    /// fit failed is finished instead.
    fn take_next<'f>(&mut self, from: &impl Fn(usize) -> Previous<'f>, lambdas: &[f64]) -> Taken {
        loop {
            let free = (0..self.next.len())
                .filter(|&p| !self.busy[p] && self.next[p] < lambdas.len())
                .min_by_key(|&p| (self.next[p], p));
            let Some(p) = free else {
                return if self.next.iter().all(|&n| n >= lambdas.len()) {
                    Taken::Finished
                } else {
                    Taken::Wait
                };
            };
            let i = self.next[p];
            if self.previous(i, p, from, lambdas).is_none() {
                self.next[p] = lambdas.len();
                continue;
            }
            self.busy[p] = true;
            return Taken::Fit(i, p);
        }
    }
}

/// Stores a thread's fit into the shared path when dropped (also when the fit panicked: the part
/// is then finished with no result), frees the part and wakes the waiting threads.
struct Release<'s> {
    path: &'s std::sync::Mutex<FitPath>,
    done: &'s std::sync::Condvar,
    part: usize,
    at: usize,
    result: Option<Result<PartFit, CliError>>,
}

impl Drop for Release<'_> {
    fn drop(&mut self) {
        let mut path = self.path.lock().unwrap_or_else(|e| e.into_inner());
        let (p, i) = (self.part, self.at);
        path.busy[p] = false;
        match self.result.take() {
            Some(result) => {
                path.results[i][p] = Some(result);
                path.next[p] = i + 1;
            }
            None => path.next[p] = path.results.len(),
        }
        self.done.notify_all();
    }
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
        let stop = self.grid_stop();
        let fits = self.fit_path(&parts, &base, None, &stop, cores());
        for (&lambda, fits) in base.iter().zip(fits) {
            points.push(self.score_point(&parts, lambda, fits, &label)?);
        }
        // One lambda past an end, from that end's fits.
        let past = |from: &Point, lambda: f64| -> Result<Point, CliError> {
            let fits = self.fit_path(&parts, &[lambda], Some(from), &stop, cores());
            let fits = fits.into_iter().next().unwrap_or_default();
            self.score_point(&parts, lambda, fits, &label)
        };
        let (floor, ceiling) = (args.lambda_max * FLOOR, args.lambda_max * CEILING);
        let mut extended = Vec::new();
        for _ in 0..args.lambda_extend {
            let last = points.len() - 1;
            let lambda = points[last].lambda / 10.0;
            if best(&points) != last || lambda < floor {
                break;
            }
            let point = past(&points[last], lambda)?;
            extended.push(lambda);
            points.push(point);
        }
        for _ in 0..args.lambda_extend {
            let lambda = points[0].lambda * 10.0;
            if best(&points) != 0 || lambda > ceiling {
                break;
            }
            let point = past(&points[0], lambda)?;
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

    /// The stop rule of the grid's fits: the run's, with the relative gap loosened to [`GRID_TOL`]
    /// and the patience [`GRID_PATIENCE`] (they rank lambdas; the refit is what is kept).
    fn grid_stop(&self) -> StopRule {
        StopRule {
            tol: self.stop.tol.max(GRID_TOL),
            patience: GRID_PATIENCE,
            ..self.stop
        }
    }

    /// [`Fit::solve`] of each of `lambdas` in turn on every part, `[lambda][part]`: part `p` at
    /// `lambdas[i]` starts from its own fit at `lambdas[i - 1]` (at `lambdas[0]`, from `from`'s state
    /// on that part), its duals scaled by the ratio of the lambdas, which keeps its `w`
    /// (`w~ = -z / (lambda N)`; a feasible point, as `F` is a box around 0 and the sum stays 0, every
    /// row fresh).
    ///
    /// Each fit depends only on its part's previous one and is deterministic, so the fits run on up to
    /// `threads` threads (`fit` gives [`cores`]), each thread taking the first fit whose part is free
    /// in lambda-then-part order, with the same results as one after another. Why a path rather than
    /// one lambda at a time: five folds on two threads left one thread idle for a third of every
    /// lambda; along the path the next lambda's folds fill that time. A part whose fit fails fits no
    /// further lambda (its later slots stay `None`).
    fn fit_path(
        &self,
        parts: &[Part],
        lambdas: &[f64],
        from: Option<&Point>,
        stop: &StopRule,
        threads: usize,
    ) -> Vec<Vec<Option<Result<PartFit, CliError>>>> {
        let start_of = |previous: Option<(&WarmStart, f64)>, lambda: f64| {
            previous.map(|(state, at)| WarmStart {
                alpha: state.alpha.iter().map(|a| a * (lambda / at)).collect(),
                fresh: vec![true; state.alpha.len()],
                intercept: state.intercept,
            })
        };
        let from_state = |p: usize| from.and_then(|f| f.states[p].as_ref().map(|s| (s, f.lambda)));
        let fit = |p: usize, lambda: f64, start: Option<WarmStart>| {
            self.solve(
                &parts[p].train,
                lambda,
                start.as_ref(),
                (stop, None),
                &mut |_| {},
            )
        };
        let mut path = FitPath::new(lambdas.len(), parts.len());
        let threads = threads.min(parts.len());
        if threads <= 1 {
            for (i, &lambda) in lambdas.iter().enumerate() {
                for p in 0..parts.len() {
                    let Some(previous) = path.previous(i, p, &from_state, lambdas) else {
                        continue;
                    };
                    let result = fit(p, lambda, start_of(previous, lambda));
                    path.results[i][p] = Some(result);
                }
            }
            return path.results;
        }
        let shared = std::sync::Mutex::new(path);
        let done = std::sync::Condvar::new();
        let lock = || shared.lock().unwrap_or_else(|e| e.into_inner());
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| loop {
                    let (i, p, start) = {
                        let mut path = lock();
                        loop {
                            match path.take_next(&from_state, lambdas) {
                                Taken::Fit(i, p) => {
                                    let previous = path.previous(i, p, &from_state, lambdas);
                                    break (i, p, start_of(previous.flatten(), lambdas[i]));
                                }
                                Taken::Wait => {
                                    path = done.wait(path).unwrap_or_else(|e| e.into_inner())
                                }
                                Taken::Finished => return,
                            }
                        }
                    };
                    // Frees the part (and wakes the waiting threads) even if the fit panics, so
                    // the others finish and the scope re-raises the panic.
                    let mut release = Release {
                        path: &shared,
                        done: &done,
                        part: p,
                        result: None,
                        at: i,
                    };
                    release.result = Some(fit(p, lambdas[i], start));
                });
            }
        });
        shared
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .results
    }

    /// Scores the parts' fits at `lambda` on their held-out rows (pooled, weighted), prints one line,
    /// and keeps each part's final duals to start the next lambda from.
    fn score_point(
        &self,
        parts: &[Part],
        lambda: f64,
        fits: Vec<Option<Result<PartFit, CliError>>>,
        label: &str,
    ) -> Result<Point, CliError> {
        let (mut sum, mut weight) = (0.0, 0.0);
        let (mut epochs, mut seconds, mut support) = (0, 0.0, 0);
        let mut stops = Vec::new();
        let mut states = Vec::with_capacity(parts.len());
        for (part, fitted) in parts.iter().zip(fits) {
            // A part without a fit failed at an earlier lambda, whose score returned that error.
            let (report, name, state) = fitted.unwrap_or_else(|| {
                Err(CliError::Argument(format!(
                    "--lambda auto: no fit at lambda {lambda:e} after a failed one"
                )))
            })?;
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

    /// `thresher fit x.svm -k 5` as parsed: the flags the grid's tests fit with.
    fn fit_args() -> crate::cli::FitArgs {
        use clap::Parser;
        let cli = crate::cli::Cli::parse_from(["thresher", "fit", "x.svm", "-k", "5"]);
        let crate::cli::Command::Fit(args) = cli.command else {
            panic!("not fit");
        };
        *args
    }

    /// A logistic fit at k = 5 with the coordinate step and the default stop rule.
    fn logistic_fit(args: &crate::cli::FitArgs) -> Fit<'_> {
        Fit {
            args,
            loss: crate::loss::Loss::new(crate::loss::LossKind::Logistic, 1.0).unwrap(),
            k: 5,
            step: crate::solver::StepRule::Coordinate,
            stop: StopRule::default(),
        }
    }

    /// `folds` folds (seed 1) of a seeded synthetic stream of `n` rows over `d` features, labelled
    /// by sign.
    fn classified_folds(n: usize, d: usize, seed: u64, folds: usize) -> Vec<Part> {
        let mut data = crate::synth::sparse_stream(n, d, 4, 6, 0.1, false, seed);
        for s in &mut data.samples {
            s.label = if s.label >= 0.0 { 1.0 } else { -1.0 };
        }
        k_folds(&Dataset::from_samples(&data.samples, 0), folds, 1).unwrap()
    }

    /// The folds' fits side by side, along a path of lambdas, give what they give one after
    /// another: the same models, duals and certificates, in lambda and part order; and a path
    /// started from a point continues from that point's states.
    #[test]
    fn folds_fitted_on_threads_match_one_thread() {
        let args = fit_args();
        let fit = logistic_fit(&args);
        let parts = classified_folds(200, 40, 3, 5);
        let lambdas = [1e-1, 1e-2, 1e-3];
        let run = |lambdas: &[f64], from: Option<&Point>, threads| {
            fit.fit_path(&parts, lambdas, from, &fit.grid_stop(), threads)
                .into_iter()
                .map(|fits| {
                    fits.into_iter()
                        .map(|r| {
                            let (report, _, state) = r.unwrap().unwrap();
                            (
                                report.model,
                                report.certificate.primal,
                                report.certificate.dual,
                                state,
                            )
                        })
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>()
        };
        let one = run(&lambdas, None, 1);
        assert_eq!((one.len(), one[0].len()), (3, 5));
        assert_eq!(one, run(&lambdas, None, 2));
        assert_eq!(one, run(&lambdas, None, 3));
        // The last lambda again, from the second's states: the path's third row.
        let second = Point {
            lambda: lambdas[1],
            loss: 0.0,
            states: one[1].iter().map(|fit| fit.3.clone()).collect(),
        };
        assert_eq!(run(&lambdas[2..], Some(&second), 2)[0], one[2]);
    }

    /// A fit that fails ends its part's path: the later lambdas of that part are not fitted (their
    /// slots stay empty), the other slots are filled, and no thread waits for ever, on one thread
    /// or several; scoring the failed lambda returns its error.
    #[test]
    fn a_failed_fit_ends_its_parts_path_without_a_hang() {
        let args = fit_args();
        let fit = logistic_fit(&args);
        let parts = classified_folds(120, 30, 2, 4);
        // A lambda of 0 is refused by every part's problem.
        let lambdas = [1e-2, 0.0, 1e-3];
        for threads in [1, 2, 3] {
            let fits = fit.fit_path(&parts, &lambdas, None, &fit.grid_stop(), threads);
            assert_eq!(fits.len(), 3);
            assert!(
                fits[0].iter().all(|f| matches!(f, Some(Ok(_)))),
                "{threads}"
            );
            assert!(
                fits[1].iter().all(|f| matches!(f, Some(Err(_)))),
                "{threads}"
            );
            assert!(fits[2].iter().all(Option::is_none), "{threads}");
            let mut rows = fits.into_iter();
            let first = rows.next().unwrap();
            assert!(fit.score_point(&parts, lambdas[0], first, "t").is_ok());
            let failed = rows.next().unwrap();
            assert!(fit.score_point(&parts, lambdas[1], failed, "t").is_err());
            let skipped = rows.next().unwrap();
            assert!(fit.score_point(&parts, lambdas[2], skipped, "t").is_err());
        }
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
