//! `thresher fit --solver subset|dual-ast`: best subset with l0 + l1 + l2 penalties, one fit or a
//! warm-started `--path` of decreasing lambda0.

use std::io::Write;

use clap::Args;

use super::CliError;
use super::{load, write_results, FitArgs, SolverKind};
use crate::loss::LossKind;
use crate::model::Model;
use crate::sample::SampleSet;
use crate::solver::driver::{SparseModel, TraceRow};
use crate::solver::subset::{
    geometric_path, OuterStep, Penalty, SubsetLoss, SubsetParams, SubsetSolver, Variant,
};

/// The `fit` flags of the best-subset solvers (ignored by the others).
#[derive(Debug, Clone, Args)]
pub struct SubsetArgs {
    /// l0 strength: the price of each nonzero weight (subset). With --path, the last (smallest) value.
    #[arg(long)]
    pub lambda0: Option<f64>,
    /// l1 strength (subset).
    #[arg(long, default_value_t = 0.0)]
    pub lambda1: f64,
    /// l2 strength, > 0, without a 1/2 (subset).
    #[arg(long)]
    pub lambda2: Option<f64>,
    /// Stop when the duality gap is below this (subset).
    #[arg(long, default_value_t = 1e-6)]
    pub xi: f64,
    /// Stop when the gap changed by less than this over two outer steps (subset).
    #[arg(long, default_value_t = 1e-6)]
    pub zeta: f64,
    /// Feature inclusion adds ceil(c ln p) features per outer step (subset).
    #[arg(long = "c", default_value_t = 4.0)]
    pub inclusion_c: f64,
    /// Dual step of the inner solver (subset); default: inverse curvature of the sub-problem dual.
    #[arg(long)]
    pub omega: Option<f64>,
    /// Disable gap-safe screening (subset; for ablations).
    #[arg(long)]
    pub no_screening: bool,
    /// Solve a decreasing, warm-started sequence of lambda0 from lambda0_max (empty model) down to
    /// --lambda0 and print support size and gap at each (subset).
    #[arg(long)]
    pub path: bool,
    /// Number of lambda0 values on the --path (geometric spacing).
    #[arg(long, default_value_t = 10)]
    pub path_steps: usize,
}

pub fn run(args: &FitArgs) -> Result<(), CliError> {
    let s = &args.subset;
    if args.standardize {
        return Err(CliError::Argument(
            "--standardize is for the k-sparse solvers: subset and dual-ast normalise their columns themselves".into(),
        ));
    }
    let (loss, lambda0, params) = params_of(args)?;
    let data = load(&args.data, args.format)?;
    let mut solver = SubsetSolver::new(&data, params)?;
    let name = if args.solver == SolverKind::DualAst {
        "dual-ast"
    } else {
        "subset"
    };
    let mut run = Run::default();
    let stop = if s.path {
        run.path(&mut solver, s, lambda0)?
    } else {
        run.single(&mut solver)
    };
    let certificate = solver.certificate();
    let mut model = model_of(&solver, loss, name);
    // The subset solver stops on the absolute gap `--xi` (at least the relative one).
    model.convergence = Some(crate::model::Convergence::new(
        &certificate,
        &stop,
        args.tol.max(s.xi),
        false,
    ));
    let last = run.last.expect("solve takes at least one outer step");
    eprintln!(
        "solver={name} epochs={} seconds={:.4} primal={:.9e} dual={:.9e} gap={:.3e} support={} active_set={} screened={} stop={stop} samples={} dim={}",
        last.row.epoch,
        last.row.seconds,
        certificate.primal,
        certificate.dual,
        certificate.gap,
        model.support.len(),
        last.active_set_size,
        last.screened,
        data.len(),
        data.dim(),
    );
    // A path run has printed its table on stdout: the model goes only to `--out`.
    let x_label = if s.path {
        "outer step (along the lambda0 path)"
    } else {
        "outer step"
    };
    super::warn_if_unconverged(&model);
    write_results(args, &model, &run.trace, !s.path, (&run.rows, x_label))
}

/// The loss, the last `lambda0` and the solver's parameters the flags ask for, or why they are not valid
/// for the subset solvers.
fn params_of(args: &FitArgs) -> Result<(SubsetLoss, f64, SubsetParams), CliError> {
    let s = &args.subset;
    let loss = match args.loss {
        None | Some(LossKind::Squared) => SubsetLoss::Squared,
        Some(LossKind::Logistic) => SubsetLoss::Logistic,
        Some(_) => return Err(CliError::Argument(
            "--solver subset supports --loss squared or logistic only (squared = the paper's 1/2-squared loss)"
                .into(),
        )),
    };
    if args.intercept {
        return Err(CliError::Argument(
            "--solver subset does not fit an intercept".into(),
        ));
    }
    if args.time_budget.is_some() {
        return Err(CliError::Argument(
            "--time-budget is not supported by --solver subset".into(),
        ));
    }
    let lambda0 = s
        .lambda0
        .ok_or_else(|| CliError::Argument("--lambda0 is required for --solver subset".into()))?;
    let lambda2 = s
        .lambda2
        .ok_or_else(|| CliError::Argument("--lambda2 is required for --solver subset".into()))?;
    if s.path && lambda0 <= 0.0 {
        return Err(CliError::Argument(
            "--path needs --lambda0 > 0 (the end of the path)".into(),
        ));
    }
    if s.path && s.path_steps == 0 {
        return Err(CliError::Argument("--path-steps must be >= 1".into()));
    }
    let penalty = Penalty::new(lambda0, s.lambda1, lambda2)
        .map_err(crate::solver::subset::SubsetError::from)?;
    let mut params = SubsetParams::new(penalty);
    params.loss = loss;
    params.variant = if args.solver == SolverKind::DualAst {
        Variant::DualAst
    } else {
        Variant::PrimDual
    };
    params.xi = s.xi;
    params.zeta = s.zeta;
    params.c = s.inclusion_c;
    params.omega = s.omega;
    params.screening = !s.no_screening;
    params.max_outer = args.epochs.max(1);
    Ok((loss, lambda0, params))
}

/// What a run records as its outer steps go: the CSV trace, the last step, the plot's rows.
#[derive(Default)]
struct Run {
    trace: String,
    last: Option<OuterStep>,
    rows: Vec<TraceRow>,
}

impl Run {
    /// `--path`: the warm-started sequence of lambda0 from `lambda0_max` down to `lambda0`, its table
    /// on stdout; returns the last point's stop reason.
    fn path(
        &mut self,
        solver: &mut SubsetSolver,
        s: &SubsetArgs,
        lambda0: f64,
    ) -> Result<String, CliError> {
        let from = solver.lambda0_max().max(lambda0);
        let lambdas = geometric_path(from, lambda0, s.path_steps);
        let (trace, last, rows) = (&mut self.trace, &mut self.last, &mut self.rows);
        trace.push_str("lambda0,");
        trace.push_str(OuterStep::CSV_HEADER);
        trace.push('\n');
        let points = solver.path(&lambdas, &mut |l0, step| {
            trace.push_str(&format!("{l0:.6e},{}\n", step.csv()));
            *last = Some(*step);
            // Outer steps restart with each lambda0: the plot numbers them along the whole path.
            rows.push(TraceRow {
                epoch: rows.len() + 1,
                ..step.row
            });
        })?;
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        let _ = writeln!(
            out,
            "lambda0,support_size,primal,dual,gap,outer_steps,seconds,stop"
        );
        for p in &points {
            let _ = writeln!(
                out,
                "{:.6e},{},{:.9e},{:.9e},{:.3e},{},{:.4},{}",
                p.lambda0,
                p.support_size,
                p.primal,
                p.dual,
                p.gap,
                p.outer_steps,
                p.seconds,
                p.stop
            );
        }
        Ok(points
            .last()
            .map(|p| p.stop.to_string())
            .unwrap_or_default())
    }

    /// One solve at the configured penalty; returns its stop reason.
    fn single(&mut self, solver: &mut SubsetSolver) -> String {
        let (trace, last, rows) = (&mut self.trace, &mut self.last, &mut self.rows);
        trace.push_str(OuterStep::CSV_HEADER);
        trace.push('\n');
        let report = solver.solve(&mut |step| {
            trace.push_str(&step.csv());
            trace.push('\n');
            *last = Some(*step);
            rows.push(step.row);
        });
        report.stop.to_string()
    }
}

/// The model file of a subset fit, with its penalty's three lambdas.
fn model_of(solver: &SubsetSolver, loss: SubsetLoss, name: &str) -> Model {
    let final_penalty = solver.params().penalty;
    let mut model = Model::from_sparse(
        &SparseModel::from_view(solver.model()),
        match loss {
            SubsetLoss::Squared => LossKind::Squared,
            SubsetLoss::Logistic => LossKind::Logistic,
        },
        None,
        name,
        solver.model().support.len(),
        final_penalty.lambda2,
        solver.certificate(),
    );
    model.lambda0 = Some(final_penalty.lambda0);
    model.lambda1 = Some(final_penalty.lambda1);
    model.lambda2 = Some(final_penalty.lambda2);
    model
}
