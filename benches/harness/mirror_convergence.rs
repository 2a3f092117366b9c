//! Convergence of SDIHT, IHT, stochastic sparse mirror descent (each map) and SMIDAS on one data set:
//! primal, dual and gap per pass and per second of solver time, all certified the same way.
//!
//! ```text
//! cargo run --release --example mirror_convergence -- DATA.svm --loss logistic --lambda 0.002 --k 100 \
//!     --epochs 20 [--l1 1e-4] [--beta 1] [--batch 128] [--eta E] [--solvers sdiht,iht,euclidean,pnorm,hypentropy,smidas] [--out trace.csv]
//! cargo run --release --example mirror_convergence -- synthetic ...   # synth::sparse_stream(20000, 2000, 20, 40)
//! ```
//! Prints one CSV row per certified epoch (`solver,epoch,seconds,primal,dual,gap,support`) to `--out`
//! (or stdout) and a summary table to stderr.

use std::time::Duration;

use clap::Parser;
use thresher::ingest::{read_file, Format};
use thresher::loss::{Loss, LossKind};
use thresher::sample::{Dataset, SampleSet};
use thresher::solver::driver::{run, StopRule};
use thresher::solver::mirror::{MirrorConfig, MirrorDescent, MirrorMap, MirrorStep};
use thresher::solver::primal::Iht;
use thresher::solver::sdiht::offline::Sdiht;
use thresher::solver::smidas::Smidas;
use thresher::solver::{Problem, Solver, StepRule};

#[derive(Parser)]
struct Args {
    /// A LIBSVM file, or `synthetic`.
    data: String,
    #[arg(long, value_enum, default_value_t = LossKind::Logistic)]
    loss: LossKind,
    #[arg(long, default_value_t = 0.25)]
    gamma: f64,
    #[arg(long, default_value_t = 0.002)]
    lambda: f64,
    #[arg(long, default_value_t = 100)]
    k: usize,
    #[arg(long, default_value_t = 20)]
    epochs: usize,
    /// Seconds of solver time per solver at most.
    #[arg(long, default_value_t = 60.0)]
    budget: f64,
    /// SMIDAS's l1 strength.
    #[arg(long, default_value_t = 1e-4)]
    l1: f64,
    #[arg(long, default_value_t = 1.0)]
    beta: f64,
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// A constant mirror-space step for the mirror solvers and SMIDAS instead of the `Auto` schedule.
    #[arg(long)]
    eta: Option<f64>,
    #[arg(long, default_value = "sdiht,iht,euclidean,pnorm,hypentropy,smidas")]
    solvers: String,
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

fn main() -> anyhow::Result<()> {
    // As the binary: the dense d-vectors ask for huge pages.
    thresher::sparse::set_dense_advice(thresher::sys::advise_huge_pages);
    let args = Args::parse();
    let data: Dataset = if args.data == "synthetic" {
        let s = thresher::synth::sparse_stream(
            20_000,
            2_000,
            20,
            40,
            0.1,
            args.loss != LossKind::Squared,
            7,
        );
        Dataset::from_samples(&s.samples, 2_000)
    } else {
        Dataset::from_samples(
            &read_file(std::path::Path::new(&args.data), Format::Libsvm)?,
            0,
        )
    };
    let loss = Loss::new(args.loss, args.gamma)?;
    let problem = Problem::new(&data, loss, args.lambda, args.k, false)?;
    eprintln!(
        "{}: n={} d={} loss={} lambda={} k={}",
        args.data,
        data.len(),
        data.dim(),
        args.loss,
        args.lambda,
        args.k
    );
    let mut csv = String::from("solver,epoch,seconds,primal,dual,gap,support\n");
    let mut summary = Vec::new();
    for name in args.solvers.split(',') {
        let step = args.eta.map_or(MirrorStep::Auto, MirrorStep::Constant);
        let mirror = |map| MirrorConfig {
            batch: args.batch,
            step,
            ..MirrorConfig::new(map)
        };
        let mut solver: Box<dyn Solver<Dataset>> = match name {
            "sdiht" => Box::new(Sdiht::new(&problem, 10, StepRule::Adaptive, args.seed)?),
            "diht" => Box::new(Sdiht::new(&problem, 1, StepRule::Adaptive, args.seed)?),
            "iht" => Box::new(Iht::new(&problem)),
            "euclidean" => Box::new(MirrorDescent::new(
                &problem,
                mirror(MirrorMap::Euclidean),
                args.seed,
            )?),
            "pnorm" => Box::new(MirrorDescent::new(
                &problem,
                mirror(MirrorMap::pnorm_for_dim(data.dim())),
                args.seed,
            )?),
            "hypentropy" => Box::new(MirrorDescent::new(
                &problem,
                mirror(MirrorMap::HypEntropy { beta: args.beta }),
                args.seed,
            )?),
            "smidas" => Box::new(Smidas::new(&problem, args.l1, step, args.seed)?),
            other => anyhow::bail!("unknown solver {other}"),
        };
        let stop = StopRule {
            tol: 0.0,
            max_epochs: args.epochs,
            time_budget: Some(Duration::from_secs_f64(args.budget)),
            cadence: 1,
            patience: 0,
        };
        let label = solver.name();
        let report = run(&problem, solver.as_mut(), &stop, &mut |row| {
            csv.push_str(&format!(
                "{label},{},{:.4},{:.10e},{:.10e},{:.6e},{}\n",
                row.epoch, row.seconds, row.primal, row.dual, row.gap, row.support_size
            ));
        });
        let support = solver.model().support.len();
        summary.push((label, report, support));
    }
    eprintln!(
        "{:<18} {:>6} {:>9} {:>14} {:>14} {:>11} {:>8}",
        "solver", "epochs", "seconds", "primal", "dual", "gap", "support"
    );
    for (label, r, support) in &summary {
        eprintln!(
            "{:<18} {:>6} {:>9.3} {:>14.8} {:>14.8} {:>11.3e} {:>8}",
            label,
            r.epochs,
            r.seconds,
            r.certificate.primal,
            r.certificate.dual,
            r.certificate.gap,
            support
        );
    }
    match &args.out {
        Some(path) => std::fs::write(path, csv)?,
        None => print!("{csv}"),
    }
    Ok(())
}
