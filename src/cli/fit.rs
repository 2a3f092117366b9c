//! `thresher fit`: train one solver on a file, print a summary, write the model and the trace.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::CliError;
use crate::ingest::{guess_format, read_file, Format};
use crate::loss::{Loss, LossKind, DEFAULT_GAMMA};
use crate::model::Model;
use crate::sample::{Dataset, SampleSet};
use crate::solver::driver::{self, FitReport, StopRule, TraceRow};
use crate::solver::mirror::{Constraint, MirrorConfig, MirrorDescent, MirrorMap, MirrorStep};
use crate::solver::primal::{Htp, Iht};
use crate::solver::sdiht::Sdiht;
use crate::solver::smidas::Smidas;
use crate::solver::{Problem, Solver, StepRule};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SolverKind {
    /// Dual iterative hard thresholding (Alg. 1).
    Diht,
    /// Stochastic DIHT over `--blocks` random blocks (Alg. 2).
    Sdiht,
    /// Iterative hard thresholding (primal baseline).
    Iht,
    /// Hard thresholding pursuit (primal baseline).
    Htp,
    /// Stochastic sparse mirror descent (`--mirror`, `--constraint`, `--batch`).
    Mirror,
    /// SMIDAS: p-norm mirror descent with l1 soft-thresholding (`--l1`); not k-sparse.
    Smidas,
    /// Best subset with l0 + l1 + l2 penalties (Ren & Qian's dynamic incremental PrimDual); takes
    /// `--lambda0/--lambda1/--lambda2` instead of `-k/--lambda`.
    Subset,
    /// The same outer loop with the DualAst inner solver (no primal CD): the paper's ablation.
    DualAst,
}

impl SolverKind {
    /// The l0 + l1 + l2 solvers, configured by `--lambda0/1/2` rather than `-k/--lambda`.
    pub fn is_subset(self) -> bool {
        matches!(self, SolverKind::Subset | SolverKind::DualAst)
    }
}

/// The mirror map of `--solver mirror`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MirrorKind {
    /// psi = (1/2)||w||^2: stochastic IHT.
    Euclidean,
    /// psi = (1/2)||w||_q^2 with p = 2 ln d.
    Pnorm,
    /// Hyperbolic entropy with scale `--beta`.
    Hypentropy,
}

#[derive(Debug, Args)]
pub struct FitArgs {
    /// Training data (LIBSVM text or JSON lines).
    pub data: PathBuf,
    /// Input format; guessed from the extension when omitted (.jsonl/.ndjson/.json = JSON lines).
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Loss (required, except for subset/dual-ast which use the paper's 1/2-squared loss).
    #[arg(long, value_enum)]
    pub loss: Option<LossKind>,
    /// Huber smoothing.
    #[arg(long, default_value_t = DEFAULT_GAMMA)]
    pub gamma: f64,
    /// Maximum number of nonzero weights (required, except for subset/dual-ast).
    #[arg(short = 'k', long = "k")]
    pub k: Option<usize>,
    /// Ridge strength (> 0; required, except for subset/dual-ast).
    #[arg(long)]
    pub lambda: Option<f64>,
    #[command(flatten)]
    pub subset: Box<super::subset::SubsetArgs>,
    #[arg(long, value_enum, default_value_t = SolverKind::Diht)]
    pub solver: SolverKind,
    /// Number of blocks for SDIHT.
    #[arg(long, default_value_t = 10)]
    pub blocks: usize,
    /// Dual step rule: `adaptive` (default), `theory`, or a constant eta.
    #[arg(long, default_value = "adaptive")]
    pub step: String,
    /// Maximum number of epochs.
    #[arg(long, default_value_t = 1000)]
    pub epochs: usize,
    /// Stop when (P - D) / max(1, |P|) <= tol.
    #[arg(long, default_value_t = 1e-6)]
    pub tol: f64,
    /// Stop after this many seconds of solver time.
    #[arg(long)]
    pub time_budget: Option<f64>,
    /// Certify (and trace) every this many epochs.
    #[arg(long, default_value_t = 1)]
    pub cadence: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Fit an unpenalised intercept (enters the dual as sum(alpha) = 0).
    #[arg(long)]
    pub intercept: bool,
    /// Mirror map of `--solver mirror`.
    #[arg(long, value_enum, default_value_t = MirrorKind::Euclidean)]
    pub mirror: MirrorKind,
    /// Hyperbolic-entropy scale beta (> 0).
    #[arg(long, default_value_t = 1.0)]
    pub beta: f64,
    /// Convex set of `--solver mirror`: none, box:R (max |w_j| <= R) or l1:R (sum |w_j| <= R).
    #[arg(long, default_value = "none")]
    pub constraint: String,
    /// Samples per mirror-descent step (per-sample steps make the k-sparse support churn with every
    /// sample; 128 measured best on the benchmark data, see the README).
    #[arg(long, default_value_t = 128)]
    pub batch: usize,
    /// l1 strength of `--solver smidas` (required there).
    #[arg(long)]
    pub l1: Option<f64>,
    /// Write the model here (JSON).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write the trace CSV here.
    #[arg(long)]
    pub trace: Option<PathBuf>,
}

pub fn parse_step(text: &str) -> Result<StepRule, CliError> {
    match text {
        "adaptive" => Ok(StepRule::Adaptive),
        "theory" => Ok(StepRule::Theory),
        other => other
            .parse::<f64>()
            .ok()
            .filter(|eta| eta.is_finite() && *eta > 0.0)
            .map(StepRule::Constant)
            .ok_or_else(|| {
                CliError::Argument(format!(
                    "--step must be adaptive, theory or a number > 0, got {other:?}"
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
        StepRule::Adaptive => MirrorStep::Auto,
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

/// Loads a data file in the given (or guessed) format.
pub fn load(path: &Path, format: Option<Format>) -> Result<Dataset, CliError> {
    let format = format.unwrap_or_else(|| guess_format(path));
    let samples = read_file(path, format)?;
    Ok(Dataset::from_samples(&samples, 0))
}

pub(super) fn write_file(path: &Path, text: &str) -> Result<(), CliError> {
    std::fs::write(path, text).map_err(|source| CliError::Write {
        path: path.to_path_buf(),
        source,
    })
}

pub fn run(args: &FitArgs) -> Result<(), CliError> {
    if args.solver.is_subset() {
        return super::subset::run(args);
    }
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
        SolverKind::Sdiht => Box::new(Sdiht::new(&problem, args.blocks, step, args.seed)?),
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

    let mut trace_rows: Vec<TraceRow> = Vec::new();
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
        trace_rows.push(*row);
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
    if let Some(path) = &args.out {
        let text = serde_json::to_string_pretty(&model).expect("a model always serialises");
        write_file(path, &(text + "\n"))?;
    }
    if let Some(path) = &args.trace {
        let mut text = String::from(TraceRow::CSV_HEADER);
        text.push('\n');
        for row in &trace_rows {
            text.push_str(&row.csv());
            text.push('\n');
        }
        write_file(path, &text)?;
    }
    if args.out.is_none() {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string(&model).expect("a model always serialises")
        );
    }
    Ok(())
}
