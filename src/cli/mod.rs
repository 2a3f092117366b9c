//! The command line: argument types (clap) and the `fit` / `predict` commands.
//!
//! `main.rs` only parses [`Cli`] and calls [`run`]; everything a command does lives here, returning
//! [`CliError`] so the binary can print one clear message and exit non-zero.

mod fit;
mod grid;
mod multiclass;
pub mod plot;
mod predict;
mod serve;
mod softmax;
mod subset;

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::ingest::{guess_format, read_dataset, Format};
use crate::loss::{LossKind, DEFAULT_GAMMA};
use crate::sample::Dataset;
use thiserror::Error;

pub use predict::PredictArgs;
pub use serve::ServeArgs;

/// thresher: learn k-sparse linear models with a primal-dual gap certificate.
#[derive(Debug, Parser)]
#[command(name = "thresher", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Train a k-sparse model on a file and write it as JSON.
    // Boxed: the fit flags of every solver make this variant much larger than the others.
    Fit(Box<FitArgs>),
    /// Predict with a model file, one prediction per input line.
    Predict(PredictArgs),
    /// Run the daemon: ingest samples over HTTP (and stdin), learn continuously, serve the model.
    Serve(ServeArgs),
}

#[derive(Debug, Error)]
pub enum CliError {
    #[error(transparent)]
    Read(#[from] crate::ingest::ReadError),
    #[error(transparent)]
    Problem(#[from] crate::solver::ProblemError),
    #[error(transparent)]
    Loss(#[from] crate::loss::LossError),
    #[error(transparent)]
    Model(#[from] crate::model::ModelError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Daemon(#[from] crate::daemon::DaemonError),
    #[error(transparent)]
    Mirror(#[from] crate::solver::mirror::MirrorError),
    #[error(transparent)]
    Subset(#[from] crate::solver::subset::SubsetError),
    #[error("{solver} diverged at epoch {epoch} (non-finite objective): the step is too large for this data; use --step adaptive or a smaller constant")]
    Diverged { solver: String, epoch: usize },
    #[error("invalid argument: {0}")]
    Argument(String),
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Runs one command.
pub fn run(cli: Cli) -> Result<(), CliError> {
    // The solvers' dense d-vectors ask for huge pages (`sparse::reserve_dense`, `sys`).
    crate::sparse::set_dense_advice(crate::sys::advise_huge_pages);
    match cli.command {
        Command::Fit(args) if args.multiclass == Some(MulticlassKind::Softmax) => {
            softmax::run(&args)
        }
        Command::Fit(args) if args.multiclass.is_some() => multiclass::run(&args),
        Command::Fit(args) if args.solver.is_subset() => subset::run(&args),
        Command::Fit(args) => fit::run(&args),
        Command::Predict(args) => predict::run(&args),
        Command::Serve(args) => serve::run_serve(&args),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SolverKind {
    /// The default: `sdiht` with the coordinate step (blocks of about `d / nnz` rows each, see
    /// `--blocks`), `diht` with the others.
    Auto,
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

#[derive(Debug, Clone, Args)]
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
    /// Ridge strength (> 0; required, except for subset/dual-ast), or `auto`: fit each lambda of a
    /// log-spaced grid (`--lambda-grid`, `--lambda-max`, `--lambda-min`) on a seeded split, keep the
    /// one with the lowest held-out loss (`--holdout`), and refit it on all the data.
    #[arg(long)]
    pub lambda: Option<LambdaArg>,
    /// Lambdas in the `--lambda auto` grid.
    #[arg(long, default_value_t = 5)]
    pub lambda_grid: usize,
    /// Largest lambda of the `--lambda auto` grid.
    #[arg(long, default_value_t = 0.1)]
    pub lambda_max: f64,
    /// Smallest lambda of the `--lambda auto` grid.
    #[arg(long, default_value_t = 1e-5)]
    pub lambda_min: f64,
    /// Fraction of the samples (chosen by `--seed`) `--lambda auto` holds out to score the grid.
    #[arg(long, default_value_t = 0.2)]
    pub holdout: f64,
    /// `--lambda auto` on fewer samples than this ranks the grid by `--folds`-fold cross-validation
    /// instead of one held-out part (0: always one held-out part).
    #[arg(long, default_value_t = crate::cli::grid::CV_BELOW)]
    pub cv_below: usize,
    /// Folds of `--lambda auto`'s cross-validation (2 to 20; default 10 below 1,000 samples, else 5).
    #[arg(long)]
    pub folds: Option<usize>,
    /// When `--lambda auto`'s best lambda is at an end of the grid, try up to this many more lambdas
    /// a decade apart past that end, until the held-out loss turns up (0: the grid as given).
    #[arg(long, default_value_t = crate::cli::grid::EXTEND)]
    pub lambda_extend: usize,
    #[command(flatten)]
    pub subset: Box<subset::SubsetArgs>,
    #[arg(long, value_enum, default_value_t = SolverKind::Auto)]
    pub solver: SolverKind,
    /// Number of blocks for SDIHT (default with `--step coordinate`: blocks of `d / nnz` rows, `nnz`
    /// the mean nonzeros per row, between 16 and 4096 rows and at least 2 blocks; else 10).
    #[arg(long)]
    pub blocks: Option<usize>,
    /// Dual step rule: `auto` (default: `adaptive` when the rows are dense, holding on average at
    /// least 5% of the columns, else `coordinate`), `coordinate`, `adaptive`, `theory`, or a constant eta.
    #[arg(long, default_value = "auto")]
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
    /// Stop when this many certified epochs in a row neither shrink the best gap by 1% nor lower the
    /// best primal by 0.1% of max(1, |P|) (0: never); the k-sparse gap need not close, and often stops
    /// moving long before `--tol` while the primal still falls.
    #[arg(long, default_value_t = 10)]
    pub patience: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Fit an unpenalised intercept (enters the dual as sum(alpha) = 0). The default for every loss
    /// (but the subset solvers'), as in the daemon; `--no-intercept` turns it off.
    #[arg(long, conflicts_with = "no_intercept")]
    pub intercept: bool,
    /// Fit no intercept, whatever the loss.
    #[arg(long)]
    pub no_intercept: bool,
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
    /// Draw the trace here as SVG: primal, dual and gap per epoch (log scale) and the support size.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Do not polish the search's model: by default it is re-solved on its own support (Newton on at
    /// most k weights and the intercept) and kept when its primal is lower; smooth losses only (not
    /// hinge). The model file's `polish` says what happened.
    #[arg(long)]
    pub no_polish: bool,
    /// Solve on columns divided by their root mean square (never centred: zeros stay zeros), write
    /// the weights in the original units, and certify the scaled problem (the model file's
    /// `standardize`). For features of very different magnitudes.
    #[arg(long)]
    pub standardize: bool,
    /// More than two classes (labels are integers): `ovr` fits one k-sparse model per class (that
    /// class's samples +1, the rest -1) with every other flag as given, and writes a
    /// `thresher-multiclass/1` file; `softmax` fits one multinomial logistic model whose at most k
    /// features are shared by all the classes, and writes a `thresher-multiclass/2` file. `predict`
    /// reads both as it reads a binary model.
    #[arg(long, value_enum)]
    pub multiclass: Option<MulticlassKind>,
}

/// `fit --multiclass`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MulticlassKind {
    /// One-vs-rest: one binary k-sparse model per class; the class is the highest score.
    Ovr,
    /// Multinomial logistic regression with one support of at most k features shared by all the
    /// classes (one weight per class on each), with its certificate; a `thresher-multiclass/2` file.
    Softmax,
}

impl FitArgs {
    /// Whether the fit has an intercept: `--intercept`, or by default for every loss as in the daemon
    /// (for squared loss the unpenalised intercept is the mean of `y - Xw`: without it a response
    /// far from 0 spends the k weights on fitting its mean), unless `--no-intercept`; never by
    /// default for the subset solvers (their dual has no intercept).
    pub fn fits_intercept(&self) -> bool {
        if self.intercept || self.no_intercept {
            return self.intercept;
        }
        !self.solver.is_subset()
    }
}

/// `--lambda`: a ridge strength, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LambdaArg {
    Value(f64),
    Auto,
}

impl std::str::FromStr for LambdaArg {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text == "auto" {
            return Ok(LambdaArg::Auto);
        }
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() && v > 0.0 => Ok(LambdaArg::Value(v)),
            _ => Err(format!("expected a number > 0 or \"auto\", got {text:?}")),
        }
    }
}

/// Loads a data file in the given (or guessed) format.
pub fn load(path: &Path, format: Option<Format>) -> Result<Dataset, CliError> {
    let format = format.unwrap_or_else(|| guess_format(path));
    Ok(read_dataset(path, format)?)
}

/// Writes what a fit produced: the model as pretty JSON to `--out` (else, if `print`, as one JSON line
/// on stdout), the CSV `trace` to `--trace` and the plot of `rows` (x axis `x_label`) to `--plot`.
fn write_results(
    args: &FitArgs,
    model: &crate::model::Model,
    trace: &str,
    print: bool,
    (rows, x_label): (&[crate::solver::driver::TraceRow], &str),
) -> Result<(), CliError> {
    if let Some(path) = &args.plot {
        plot::write_svg(path, rows, x_label)?;
    }
    if let Some(path) = &args.out {
        let text = serde_json::to_string_pretty(model).expect("a model always serialises");
        write_file(path, &(text + "\n"))?;
    }
    if let Some(path) = &args.trace {
        write_file(path, trace)?;
    }
    if args.out.is_none() && print {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string(model).expect("a model always serialises")
        );
    }
    Ok(())
}

/// Warns on stderr when `model` did not converge (its relative gap above the tolerance): why it
/// stopped, the relative gap, and whether the empty model was returned; nothing for a converged one.
pub fn warn_if_unconverged(model: &crate::model::Model) {
    let Some(c) = &model.convergence else { return };
    if c.converged {
        return;
    }
    let empty = if c.empty_model {
        "; the best iterate was worse than the empty model, which is returned instead (w = 0)"
    } else {
        ""
    };
    eprintln!(
        "warning: the model did not converge: stop={} relative_gap={:.3e} > tol={:e} (the certificate bounds its distance to the optimum; more --epochs, a larger --patience or a larger lambda may close it){empty}",
        c.reason, c.relative_gap, c.tol
    );
}

fn write_file(path: &Path, text: &str) -> Result<(), CliError> {
    std::fs::write(path, text).map_err(|source| CliError::Write {
        path: path.to_path_buf(),
        source,
    })
}
