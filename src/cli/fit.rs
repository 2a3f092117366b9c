//! `thresher fit`: train one solver on a file, print a summary, write the model and the trace.

use std::io::IsTerminal;
use std::time::Duration;

use clap::ValueEnum;

use super::{load, write_results, CliError, FitArgs, MirrorKind, SolverKind};
use crate::loss::Loss;
use crate::model::Model;
use crate::sample::{Dataset, SampleSet};
use crate::solver::driver::{self, FitReport, StopRule, TraceRow};
use crate::solver::mirror::{Constraint, MirrorConfig, MirrorDescent, MirrorMap, MirrorStep};
use crate::solver::primal::{Htp, Iht};
use crate::solver::sdiht::{default_blocks, Sdiht};
use crate::solver::smidas::Smidas;
use crate::solver::{Problem, Solver, StepRule};

pub fn parse_step(text: &str) -> Result<StepRule, CliError> {
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
                    "--step must be coordinate, adaptive, theory or a number > 0, got {other:?}"
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

/// `thresher fit` with an SDIHT, IHT/HTP, mirror or SMIDAS solver (`cli::subset` runs the subset ones).
pub fn run(args: &FitArgs) -> Result<(), CliError> {
    let name = args
        .solver
        .to_possible_value()
        .map(|v| v.get_name().to_string())
        .unwrap_or_default();
    let missing =
        |flag: &str| CliError::Argument(format!("{flag} is required for --solver {name}"));
    let loss_kind = args.loss.ok_or_else(|| missing("--loss"))?;
    let k = args.k.ok_or_else(|| missing("-k/--k"))?;
    let lambda = args.lambda.ok_or_else(|| missing("--lambda"))?;
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
    let step = parse_step(&args.step)?;
    let data = load(&args.data, args.format)?;
    let loss = Loss::new(loss_kind, args.gamma)?;
    let problem = Problem::new(&data, loss, lambda, k, args.intercept)?;
    let mut solver: Box<dyn Solver<Dataset>> = match args.solver {
        SolverKind::Diht => Box::new(Sdiht::new(&problem, 1, step, args.seed)?),
        SolverKind::Sdiht => {
            let blocks = args.blocks.unwrap_or(match step {
                // At least 2: `--solver sdiht` stays SDIHT (one block is DIHT) on small files.
                StepRule::Coordinate => default_blocks(data.len()).max(2).min(data.len()),
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
            let l1 = args
                .l1
                .ok_or_else(|| CliError::Argument("--solver smidas needs --l1 STRENGTH".into()))?;
            let map = MirrorMap::pnorm_for_dim(data.dim());
            Box::new(Smidas::new(
                &problem,
                l1,
                mirror_step(step, &problem, map),
                args.seed,
            )?)
        }
        SolverKind::Subset | SolverKind::DualAst => unreachable!("dispatched to cli::subset above"),
    };
    let stop = StopRule {
        tol: args.tol,
        max_epochs: args.epochs.max(1),
        time_budget,
        cadence: args.cadence,
    };

    let mut trace = String::from(TraceRow::CSV_HEADER);
    trace.push('\n');
    let progress = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new(stop.max_epochs as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} epochs {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let report: FitReport = driver::run(&problem, solver.as_mut(), &stop, &mut |row| {
        if let Some(bar) = &progress {
            bar.set_position(row.epoch as u64);
            bar.set_message(format!("gap {:.3e} support {}", row.gap, row.support_size));
        }
        trace.push_str(&row.csv());
        trace.push('\n');
    });
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }

    if report.stop_reason == driver::StopReason::Diverged {
        return Err(CliError::Diverged {
            solver: solver.name().to_string(),
            epoch: report.epochs,
        });
    }
    let model = Model::from_sparse(
        &report.model,
        loss_kind,
        loss.gamma(),
        solver.name(),
        k,
        lambda,
        report.certificate,
    );
    eprintln!(
        "solver={} epochs={} seconds={:.3} primal={:.9e} dual={:.9e} gap={:.3e} support={} stop={} samples={} dim={}",
        solver.name(),
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
    write_results(args, &model, &trace, true)
}
