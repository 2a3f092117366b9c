//! `thresher fit`: train one solver on a file, print a summary, write the model and the trace; with
//! `--lambda auto`, first pick lambda from a grid ([`super::grid`]). [`refine`] scales the columns first
//! (`--standardize`) and polishes the model on its support after the search.

mod cores;
mod refine;

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use clap::ValueEnum;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{load, write_results, CliError, FitArgs, LambdaArg, MirrorKind, SolverKind};
use crate::learner::auto::NON_FINITE_LOSS;
use crate::loss::{Loss, LossKind};
use crate::model::{Convergence, Model, RefitRecord, RefitStart};
use crate::sample::{Dataset, SampleSet};
use crate::solver::driver::{self, FitReport, StopRule, TraceRow};
use crate::solver::mirror::{Constraint, MirrorConfig, MirrorDescent, MirrorMap, MirrorStep};
use crate::solver::polish::PolishRecord;
use crate::solver::primal::{Htp, Iht};
use crate::solver::sdiht::offline::{coordinate_blocks, Sdiht};
use crate::solver::smidas::Smidas;
use crate::solver::spread::Spread;
use crate::solver::{Problem, Solver, StepRule, WarmStart};

/// `--step`: a rule, or `None` for `auto` ([`auto_step`] picks it once the data is read).
pub fn parse_step(text: &str) -> Result<Option<StepRule>, CliError> {
    if text == "auto" {
        return Ok(None);
    }
    parse_rule(text).map(Some)
}

/// Rows holding on average at least this share of the columns are dense: `--step auto` takes the
/// adaptive rule on them.
pub const DENSE_ROWS: f64 = 0.05;

/// `--step auto`: the adaptive rule when the rows are dense (`nnz / (n d) >= DENSE_ROWS`), the
/// coordinate rule otherwise. `nnz` counts nonzero values: an explicit `j:0` (scikit-learn's
/// `dump_svmlight_file` writes stored zeros) must not choose another rule for the same data.
///
/// Why: the coordinate rule maximises each dual along its own axis with the curvature
/// `l*'' + ||x_i||^2 / (lambda N)` of that row alone, its block's rows seeing each other's changes only
/// on the current support; off the support their changes pile up in `z` unseen. On sparse text rows
/// that share few columns this is nearly exact, and one pass learns. On dense rows every row moves
/// every column of `z`: the block's joint change is up to `|B|` times what each row assumed, `H_k`
/// then swaps the support, `D` falls, and the backtracking drops the block — the iterate stalls in a
/// few epochs above the empty model (a 400 x 40 dense logistic set: primal 1.13 against ln 2, `w = 0`
/// returned). The adaptive rule steps every dual of the block from the same margins and backtracks
/// one scale on `D`, which crosses those kinks. Measured on every set (`docs/benchmarks/quality.md`):
/// on the two dense regression sets (16% and 23% of the columns per row) it lifts R² from 0.16 / 0.32
/// to 0.30 / 0.86; on the text sets (0.07% to 3.3%) the coordinate rule is 1.0-4x faster at similar
/// accuracy.
pub fn auto_step(nnz: usize, rows: usize, dim: usize) -> StepRule {
    let density = nnz as f64 / (rows.max(1) as f64 * dim.max(1) as f64);
    if density >= DENSE_ROWS {
        StepRule::Adaptive
    } else {
        StepRule::Coordinate
    }
}

fn parse_rule(text: &str) -> Result<StepRule, CliError> {
    match text {
        "coordinate" => Ok(StepRule::Coordinate),
        "adaptive" => Ok(StepRule::Adaptive),
        "theory" => Ok(StepRule::Theory),
        other => other
            .parse::<f64>()
            .ok()
            .filter(|eta| eta.is_finite() && *eta > 0.0)
            .map(StepRule::Constant)
            .ok_or_else(|| {
                CliError::Argument(format!(
                    "--step must be auto, coordinate, adaptive, theory or a number > 0, got {other:?}"
                ))
            }),
    }
}

/// `--step` for the mirror solvers: `adaptive` is their `Auto` schedule, a number a constant mirror-space
/// step, and `theory` the thesis's (5.71) with `R = psi(w*)` bounded by `psi` of the ridge-ball radius
/// `sqrt(2 P(0) / lambda)` (every minimiser lies in it) and `G = |l'(0)| max_i ||x_i||_2 + lambda sqrt(2 P(0) / lambda)`
/// estimated from the data (in l2 for every map), `phi = 0` (greedy is exact for these maps).
fn mirror_step<S: SampleSet>(step: StepRule, problem: &Problem<S>, map: MirrorMap) -> MirrorStep {
    match step {
        StepRule::Adaptive | StepRule::Coordinate => MirrorStep::Auto,
        StepRule::Constant(eta) => MirrorStep::Constant(eta),
        StepRule::Theory => {
            let p0 = crate::solver::objective::primal_value(
                problem.data,
                &problem.loss,
                problem.lambda,
                &[],
                0.0,
            );
            let ball = (2.0 * p0 / problem.lambda).sqrt().max(1e-12);
            let radius = map.psi(&[ball]).max(1e-12);
            let row_norm = (0..problem.data.len())
                .map(|i| crate::sparse::sparse_sq_norm(problem.data.row(i).values).sqrt())
                .fold(0.0f64, f64::max);
            let slope = problem.loss.derivative(0.0, 1.0).abs().max(1.0);
            let gradient_bound = (slope * row_norm).max(1e-12) + problem.lambda * ball;
            MirrorStep::Theory {
                radius,
                gradient_bound,
                phi: 0.0,
            }
        }
    }
}

/// The stop rule of `--tol`, `--epochs`, `--time-budget`, `--cadence` and `--patience`, checked.
pub(super) fn stop_rule(args: &FitArgs) -> Result<StopRule, CliError> {
    if !(args.tol.is_finite() && args.tol >= 0.0) {
        return Err(CliError::Argument(format!(
            "--tol must be >= 0, got {}",
            args.tol
        )));
    }
    let time_budget = match args.time_budget {
        Some(s) if !(s.is_finite() && s > 0.0) => {
            return Err(CliError::Argument(format!(
                "--time-budget must be > 0 seconds, got {s}"
            )))
        }
        Some(s) => Some(Duration::from_secs_f64(s)),
        None => None,
    };
    Ok(StopRule {
        tol: args.tol,
        max_epochs: args.epochs.max(1),
        time_budget,
        cadence: args.cadence,
        patience: args.patience,
    })
}

/// `thresher fit` with an SDIHT, IHT/HTP, mirror or SMIDAS solver (`cli::subset` runs the subset ones).
pub fn run(args: &FitArgs) -> Result<(), CliError> {
    let fitted = fit_model(args, None)?;
    write_results(
        args,
        &fitted.model,
        &fitted.trace,
        true,
        (&fitted.rows, "epoch"),
    )
}

/// A fitted model with the CSV trace and the certified rows of its run.
pub(super) struct Fitted {
    pub(super) model: Model,
    pub(super) trace: String,
    pub(super) rows: Vec<TraceRow>,
}

/// One search of `fit_model` on the whole file, polished: its report, the solver's name, the polish's
/// record, and its trace (CSV and rows).
struct Run {
    report: FitReport,
    solver_name: &'static str,
    polish: PolishRecord,
    trace: String,
    rows: Vec<TraceRow>,
}

/// Reads `args.data` and fits it as `args` ask. `one_vs_rest`: the labels become `+1` for samples of
/// that class and `-1` for the rest (one class of a `--multiclass ovr` fit).
pub(super) fn fit_model(args: &FitArgs, one_vs_rest: Option<f64>) -> Result<Fitted, CliError> {
    let name = args
        .solver
        .to_possible_value()
        .map(|v| v.get_name().to_string())
        .unwrap_or_default();
    let missing =
        |flag: &str| CliError::Argument(format!("{flag} is required for --solver {name}"));
    let loss_kind = args.loss.ok_or_else(|| missing("--loss"))?;
    let k = args.k.ok_or_else(|| missing("-k/--k"))?;
    let lambda_arg = args.lambda.ok_or_else(|| missing("--lambda"))?;
    let step_arg = parse_step(&args.step)?;
    let loss = Loss::new(loss_kind, args.gamma)?;
    let stop = stop_rule(args)?;
    let mut fit = Fit {
        args,
        loss,
        k,
        step: step_arg.unwrap_or(StepRule::Coordinate),
        stop,
    };
    let mut data = load(&args.data, args.format)?;
    if let Some(class) = one_vs_rest {
        data.map_labels(|y| if y == class { 1.0 } else { -1.0 });
    }
    let (data, scales) = refine::standardize_dataset(args, data);
    fit.step = step_arg.unwrap_or_else(|| auto_step(data.nonzero_values(), data.len(), data.dim()));
    let (lambda, lambda_auto, warm, cold) = std::thread::scope(|scope| {
        if scales.is_none() {
            // Whether to suggest `--standardize` takes a pass over every stored value; it reads the
            // data beside the search (a one-pass fit leaves the second core idle) and warns on its own.
            scope.spawn(|| refine::suggest_standardize(&data));
        }
        let (lambda, lambda_auto, start) = match lambda_arg {
            LambdaArg::Value(lambda) => (lambda, None, None),
            LambdaArg::Auto => {
                let (record, start) = fit.choose_lambda(&data)?;
                (record.grid[record.live], Some(record), start)
            }
        };
        let (warm, cold) = match &start {
            // Either start can end at the lower primal of a non-convex problem (`grid`'s docs, "The
            // refit"); the two runs share nothing mutable, so they run side by side.
            Some(start) => {
                let (fit, data) = (&fit, &data);
                let cold = scope.spawn(move || fit.refit(data, lambda, None, false));
                let warm = fit.refit(data, lambda, Some(start), true);
                let cold = cold
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                (warm, Some(cold))
            }
            None => (fit.refit(&data, lambda, None, true), None),
        };
        Ok::<_, CliError>((lambda, lambda_auto, warm, cold))
    })?;
    let mut run = warm?;
    let mut refit = None;
    // A cold run that fails leaves the warm one, which is a whole fit of its own: the model is
    // written, without a `refit` record, and stderr says why.
    let cold = cold.and_then(|cold| {
        cold.map_err(|e| {
            eprintln!("warning: the refit from zero duals failed ({e}); kept the warm refit")
        })
        .ok()
    });
    if let Some(cold) = cold {
        let (warm_primal, cold_primal) = (
            run.report.certificate.primal,
            cold.report.certificate.primal,
        );
        let kept = if cold_primal < warm_primal {
            run = cold;
            RefitStart::Cold
        } else {
            RefitStart::Warm
        };
        eprintln!(
            "refit: warm primal {warm_primal:.9e}, cold primal {cold_primal:.9e}: kept {}",
            kept.as_str()
        );
        refit = Some(RefitRecord {
            kept,
            warm_primal,
            cold_primal,
        });
    }
    let Run {
        report,
        solver_name,
        polish,
        trace,
        rows,
    } = run;
    let mut model = Model::from_sparse(
        &report.model,
        loss_kind,
        loss.gamma(),
        solver_name,
        k,
        lambda,
        report.certificate,
    );
    model.lambda_auto = lambda_auto.map(|mut record| {
        record.refit = refit;
        record
    });
    model.convergence = Some(convergence_of(&report, stop.tol));
    model.polish = Some(polish);
    if let Some(scales) = &scales {
        refine::to_original_units(&mut model, scales);
    }
    eprintln!(
        "solver={} lambda={} epochs={} seconds={:.3} primal={:.9e} dual={:.9e} gap={:.3e} support={} stop={} samples={} dim={}",
        solver_name,
        lambda,
        report.epochs,
        report.seconds,
        report.certificate.primal,
        report.certificate.dual,
        report.certificate.gap,
        model.support.len(),
        report.stop_reason,
        data.len(),
        data.dim(),
    );
    super::warn_if_unconverged(&model);
    Ok(Fitted { model, trace, rows })
}

impl Fit<'_> {
    /// Searches `data` at `lambda` from `start` (or from zero duals), with a progress bar on a terminal
    /// if `shows_progress`, then polishes the result; a diverged search is an error.
    fn refit(
        &self,
        data: &Dataset,
        lambda: f64,
        start: Option<&WarmStart>,
        shows_progress: bool,
    ) -> Result<Run, CliError> {
        let mut trace = String::from(TraceRow::CSV_HEADER);
        trace.push('\n');
        let mut rows = Vec::new();
        let progress = (shows_progress && std::io::stderr().is_terminal()).then(|| {
            let bar = indicatif::ProgressBar::new(self.stop.max_epochs as u64);
            bar.set_style(
                indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} epochs {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar
        });
        let spread = cores::Cores::shared();
        let (mut report, solver_name, _) = self.solve(
            data,
            lambda,
            start,
            (&self.stop, Some(&spread)),
            &mut |row| {
                if let Some(bar) = &progress {
                    bar.set_position(row.epoch as u64);
                    bar.set_message(format!("gap {:.3e} support {}", row.gap, row.support_size));
                }
                trace.push_str(&row.csv());
                trace.push('\n');
                rows.push(*row);
            },
        )?;
        if let Some(bar) = progress {
            bar.finish_and_clear();
        }
        if report.stop_reason == driver::StopReason::Diverged {
            return Err(CliError::Diverged {
                solver: solver_name.to_string(),
                epoch: report.epochs,
            });
        }
        let polish = self.polish(data, lambda, &mut report)?;
        Ok(Run {
            report,
            solver_name,
            polish,
            trace,
            rows,
        })
    }
}

/// The model file's record of how `report` ended against `tol` ([`Convergence`]).
pub fn convergence_of(report: &FitReport, tol: f64) -> Convergence {
    Convergence::new(
        &report.certificate,
        &report.stop_reason.to_string(),
        tol,
        report.empty_model,
    )
}

/// What every fit of one `thresher fit` run shares: the flags, the loss, `k`, the step and the stop rule.
pub(super) struct Fit<'a> {
    pub(super) args: &'a FitArgs,
    pub(super) loss: Loss,
    pub(super) k: usize,
    pub(super) step: StepRule,
    pub(super) stop: StopRule,
}

impl Fit<'_> {
    /// Runs the solver `--solver` asks for on `data` with `lambda` until `stop`, from `start` when
    /// the solver keeps duals, reporting certified points to `observe`; returns the run, the solver's
    /// name and its final dual state. `spread`, when given, walks the chunks of its certificates (the
    /// final search's; the grid's fits run side by side already).
    pub(super) fn solve(
        &self,
        data: &Dataset,
        lambda: f64,
        start: Option<&WarmStart>,
        (stop, spread): (&StopRule, Option<&Arc<dyn Spread>>),
        observe: &mut dyn FnMut(&TraceRow),
    ) -> Result<(FitReport, &'static str, Option<WarmStart>), CliError> {
        let args = self.args;
        let (step, k) = (self.step, self.k);
        let problem = Problem::new(data, self.loss, lambda, k, args.fits_intercept())?;
        let kind = match args.solver {
            SolverKind::Auto if step == StepRule::Coordinate => SolverKind::Sdiht,
            SolverKind::Auto => SolverKind::Diht,
            kind => kind,
        };
        let mut solver: Box<dyn Solver<Dataset>> = match kind {
            SolverKind::Auto | SolverKind::Diht => {
                Box::new(Sdiht::new(&problem, 1, step, args.seed)?)
            }
            SolverKind::Sdiht => {
                let blocks = args.blocks.unwrap_or(match step {
                    StepRule::Coordinate => {
                        coordinate_blocks(data.len(), data.nonzero_values(), data.dim())
                    }
                    _ => 10,
                });
                Box::new(Sdiht::new(&problem, blocks, step, args.seed)?)
            }
            SolverKind::Iht => Box::new(Iht::new(&problem)),
            SolverKind::Htp => Box::new(Htp::new(&problem)),
            SolverKind::Mirror => {
                let map = match args.mirror {
                    MirrorKind::Euclidean => MirrorMap::Euclidean,
                    MirrorKind::Pnorm => MirrorMap::pnorm_for_dim(data.dim()),
                    MirrorKind::Hypentropy => MirrorMap::HypEntropy { beta: args.beta },
                };
                let config = MirrorConfig {
                    constraint: args.constraint.parse::<Constraint>()?,
                    step: mirror_step(step, &problem, map),
                    batch: args.batch,
                    ..MirrorConfig::new(map)
                };
                Box::new(MirrorDescent::new(&problem, config, args.seed)?)
            }
            SolverKind::Smidas => {
                let l1 = args.l1.ok_or_else(|| {
                    CliError::Argument("--solver smidas needs --l1 STRENGTH".into())
                })?;
                let map = MirrorMap::pnorm_for_dim(data.dim());
                Box::new(Smidas::new(
                    &problem,
                    l1,
                    mirror_step(step, &problem, map),
                    args.seed,
                )?)
            }
            SolverKind::Subset | SolverKind::DualAst => {
                unreachable!("dispatched to cli::subset above")
            }
        };
        if let Some(start) = start {
            solver.warm_start(&problem, start);
        }
        if let Some(spread) = spread {
            solver.spread_certificate(Arc::clone(spread));
        }
        let report = driver::run(&problem, solver.as_mut(), stop, observe);
        Ok((report, solver.name(), solver.warm_state()))
    }
}

/// A grid fit's duals on the training rows, put back in the file's row order (`order`: the training
/// rows' positions among `samples` rows) for the refit on all of them; the held-out rows start fresh.
pub(super) fn in_file_order(state: WarmStart, order: &[usize], samples: usize) -> WarmStart {
    let mut alpha = vec![0.0; samples];
    let mut fresh = vec![true; samples];
    for (&row, &a) in order.iter().zip(&state.alpha) {
        alpha[row] = a;
        fresh[row] = false;
    }
    WarmStart {
        alpha,
        fresh,
        intercept: state.intercept,
    }
}

/// The relative gap at which a `--lambda auto` grid fit stops (or `--tol`, if looser).
pub const GRID_TOL: f64 = 1e-2;
/// Certified epochs without progress after which a `--lambda auto` grid fit stops.
pub const GRID_PATIENCE: usize = 3;

/// Splits the rows `0..rows` into `(training rows, held-out rows)`: a seeded shuffle, the last
/// `fraction` (at least one, at most all but one) held out. `None` with fewer than two rows.
pub fn holdout_split(rows: usize, fraction: f64, seed: u64) -> Option<(Vec<usize>, Vec<usize>)> {
    if rows < 2 {
        return None;
    }
    let mut order: Vec<usize> = (0..rows).collect();
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    let held = ((rows as f64 * fraction).round() as usize).clamp(1, rows - 1);
    let held = order.split_off(rows - held);
    Some((order, held))
}

/// Whether `--lambda auto` ranks the grid by held-out misclassification rather than by loss: for the
/// hinge losses (hinge, and Huber, its smoothed form), whose value counts margin violations, not
/// errors, and is no proper scoring rule. On trump_tweets the hinge grid's held-out losses at 1e-3 and
/// 1e-4 were within 2.3% (0.479 against 0.491) and chose 1e-3, 3.4 points of test accuracy below 1e-4
/// (`docs/benchmarks/quality.md`). Logistic loss is a proper scoring rule and keeps ranking by loss.
pub fn ranks_by_errors(kind: LossKind) -> bool {
    matches!(kind, LossKind::Hinge | LossKind::Huber)
}

/// The weighted share of `data` that `model` misclassifies (score sign against label sign, a zero
/// score counting as positive, as `thresher predict` does).
pub fn holdout_error(model: &Model, data: &Dataset) -> f64 {
    weighted_mean(model, data, |label, score| {
        if (score >= 0.0) != (label > 0.0) {
            1.0
        } else {
            0.0
        }
    })
}

/// The weighted mean loss of `model` on `data` (`NON_FINITE_LOSS` if it is not finite).
pub fn holdout_loss(loss: &Loss, model: &Model, data: &Dataset) -> f64 {
    weighted_mean(model, data, |label, score| loss.value(score, label))
}

/// The weighted mean of `per_row(label, score)` over `data` ([`NON_FINITE_LOSS`] when not finite).
fn weighted_mean(model: &Model, data: &Dataset, per_row: impl Fn(f64, f64) -> f64) -> f64 {
    let (mut sum, mut weight) = (0.0, 0.0);
    for i in 0..data.len() {
        let row = data.row(i);
        sum += row.weight * per_row(row.label, model.score(row));
        weight += row.weight;
    }
    let mean = sum / weight;
    if mean.is_finite() {
        mean
    } else {
        NON_FINITE_LOSS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::Sample;
    use crate::solver::driver::SparseModel;
    use crate::solver::Certificate;

    /// Explicit zeros (`j:0`, as scikit-learn's `dump_svmlight_file` writes stored zeros) do not count
    /// toward the density: the same data chose the adaptive rule from one file and the coordinate rule
    /// from another, and the two models differed in the 8th digit.
    #[test]
    fn explicit_zeros_do_not_choose_the_step_rule() {
        // 9 values in 10 rows x 20 columns (4.5%): coordinate; counting its one or two stored zeros
        // would make it 5% or 5.5%, adaptive.
        let rows = |zero: bool| -> Vec<Sample> {
            (0..10u32)
                .map(|i| {
                    let (indices, values) = match (i, zero) {
                        (0, true) => (vec![0, 19], vec![1.0, 0.0]),
                        (9, _) => (vec![19], vec![0.0]),
                        _ => (vec![i], vec![1.0]),
                    };
                    Sample::new(indices, values, 1.0, None).unwrap()
                })
                .collect()
        };
        let step = |data: &Dataset| auto_step(data.nonzero_values(), data.len(), data.dim());
        assert_eq!(
            step(&Dataset::from_samples(&rows(false), 0)),
            StepRule::Coordinate
        );
        let data = Dataset::from_samples(&rows(true), 0);
        assert_eq!(step(&data), StepRule::Coordinate);
        assert_eq!((data.nnz(), data.nonzero_values()), (11, 9));
    }

    /// `--step auto`: adaptive on rows holding at least 5% of the columns, coordinate below; an
    /// empty file is sparse.
    #[test]
    fn auto_step_takes_the_adaptive_rule_on_dense_rows() {
        assert_eq!(parse_step("auto").unwrap(), None);
        assert_eq!(parse_step("adaptive").unwrap(), Some(StepRule::Adaptive));
        assert!(parse_step("sideways").is_err());
        assert_eq!(auto_step(400 * 40, 400, 40), StepRule::Adaptive);
        assert_eq!(auto_step(2198 * 71, 2198, 312), StepRule::Adaptive);
        assert_eq!(auto_step(5, 1, 100), StepRule::Adaptive);
        assert_eq!(auto_step(4, 1, 100), StepRule::Coordinate);
        assert_eq!(auto_step(9606 * 25, 9606, 34_413), StepRule::Coordinate);
        assert_eq!(auto_step(0, 0, 0), StepRule::Coordinate);
    }

    /// Weighted share of sign errors, a zero score counting as positive; hinge and Huber rank by it,
    /// logistic and squared by loss.
    #[test]
    fn holdout_error_counts_weighted_sign_errors() {
        let samples = vec![
            Sample::new(vec![0], vec![1.0], 1.0, None).unwrap(), // score 2: right
            Sample::new(vec![0], vec![-1.0], 1.0, Some(3.0)).unwrap(), // score -2: wrong, weight 3
            Sample::new(vec![1], vec![1.0], -1.0, None).unwrap(), // score 0: positive, wrong
            Sample::new(vec![1], vec![1.0], 1.0, None).unwrap(), // score 0: right
        ];
        let data = Dataset::from_samples(&samples, 0);
        let sparse = SparseModel {
            support: vec![0],
            weights: vec![2.0],
            intercept: 0.0,
        };
        let model = Model::from_sparse(
            &sparse,
            LossKind::Hinge,
            None,
            "sdiht",
            1,
            0.1,
            Certificate::new(1.0, 0.0, 4),
        );
        assert_eq!(holdout_error(&model, &data), 4.0 / 6.0);
        assert!(ranks_by_errors(LossKind::Hinge) && ranks_by_errors(LossKind::Huber));
        assert!(!ranks_by_errors(LossKind::Logistic) && !ranks_by_errors(LossKind::Squared));
    }
}
