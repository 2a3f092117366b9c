//! DIHT paper Sec. 5.2 efficiency protocol on real sparse text data (rotten_tomatoes, trump_tweets):
//! Huber (gamma = 0.25) and hinge loss, lambda in {0.002, 0.0002}, k fixed (default 1000).
//!
//! Protocol (paper Sec. 5.2.1): run IHT until `|P_t - P_{t-1}| / P_t <= 1e-4` (`--iht-change`; a smaller
//! value gives a tighter target than the paper's) or its epoch cap; its
//! final primal value is the target `P*` and its time `t_IHT`. Then HTP, DIHT and SDIHT (10 blocks)
//! run until their primal value is `<= P*` (or a time budget runs out), and the times are reported as
//! ratios to IHT and HTP. Times are solver time only: the primal value used to test the target is
//! evaluated outside the clock after every epoch (for every solver alike). Every run's trace
//! (`epoch,seconds,primal`) is written to `OUT/trace_<data>_<loss>_<lambda>_<solver>.csv`.
//!
//! ```text
//! bash ../shared/datasets/fetch.sh data/real
//! cargo run --release --example efficiency_5_2 -- [--data data/real] [--k 1000] [--iht-change 1e-4]
//!     [--out data/efficiency_5_2]
//! ```

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use thresher::ingest::{read_file, Format};
use thresher::loss::{Loss, LossKind};
use thresher::sample::{Dataset, SampleSet};
use thresher::solver::objective::primal_value;
use thresher::solver::primal::{Htp, Iht};
use thresher::solver::sdiht::offline::Sdiht;
use thresher::solver::{Problem, Solver, StepRule};

const DATASETS: [&str; 2] = ["rotten_tomatoes", "trump_tweets"];
const LAMBDAS: [f64; 2] = [0.002, 0.0002];
const GAMMA: f64 = 0.25;
const SDIHT_BLOCKS: usize = 10;
const IHT_MAX_EPOCHS: usize = 2000;
/// Every other solver may spend this multiple of IHT's time (but at least `MIN_BUDGET`) to reach `P*`.
const BUDGET_FACTOR: f64 = 20.0;
const MIN_BUDGET: Duration = Duration::from_secs(5);
const MAX_BUDGET: Duration = Duration::from_secs(30);

struct Options {
    data: PathBuf,
    k: usize,
    out: PathBuf,
    /// IHT stops when its relative change of P falls below this (the paper: 1e-4).
    iht_change: f64,
}

fn parse_options() -> Options {
    let mut options = Options {
        data: PathBuf::from("data/real"),
        k: 1000,
        out: PathBuf::from("data/efficiency_5_2"),
        iht_change: 1e-4,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        match flag.as_str() {
            "--data" => options.data = PathBuf::from(value),
            "--k" => options.k = value.parse().unwrap_or_else(|_| usage("--k: a count")),
            "--out" => options.out = PathBuf::from(value),
            "--iht-change" => {
                options.iht_change = value
                    .parse()
                    .unwrap_or_else(|_| usage("--iht-change: a number"))
            }
            other => usage(&format!("unknown flag {other}")),
        }
    }
    options
}

fn usage(message: &str) -> ! {
    eprintln!("{message}\nusage: efficiency_5_2 [--data DIR] [--k K] [--iht-change C] [--out DIR]");
    std::process::exit(2)
}

/// A run's trace and when (if ever) it reached the target.
struct Run {
    /// `(epoch, solver seconds, primal)` after every epoch.
    trace: Vec<(usize, f64, f64)>,
    /// Solver seconds at the first epoch with `P <= target`.
    hit: Option<f64>,
    /// Relative gap at the end of the run (evaluated outside the clock).
    final_relative_gap: f64,
}

impl Run {
    fn write(&self, path: &Path) -> std::io::Result<()> {
        let mut text = String::from("epoch,seconds,primal\n");
        for (epoch, seconds, primal) in &self.trace {
            let _ = writeln!(text, "{epoch},{seconds:.6},{primal:.12e}");
        }
        std::fs::write(path, text)
    }
}

/// Runs `solver` until `done(trace)` says so or `budget` of solver time is spent.
fn drive(
    problem: &Problem<Dataset>,
    solver: &mut dyn Solver<Dataset>,
    target: f64,
    budget: Duration,
    max_epochs: usize,
    mut done: impl FnMut(&[(usize, f64, f64)]) -> bool,
) -> Run {
    let mut trace = Vec::new();
    let mut clock = Duration::ZERO;
    let mut hit = None;
    for epoch in 1..=max_epochs {
        let started = Instant::now();
        solver.epoch(problem);
        clock += started.elapsed();
        let model = solver.model();
        let primal = primal_value(
            problem.data,
            &problem.loss,
            problem.lambda,
            model.weights,
            model.intercept,
        );
        trace.push((epoch, clock.as_secs_f64(), primal));
        if hit.is_none() && primal <= target {
            hit = Some(clock.as_secs_f64());
        }
        if done(&trace) || clock >= budget {
            break;
        }
    }
    let final_relative_gap = solver.certificate(problem).relative_gap();
    Run {
        trace,
        hit,
        final_relative_gap,
    }
}

fn seconds(run: &Run) -> String {
    match run.hit {
        Some(s) => format!("{s:.3}"),
        None => format!(
            "> {:.1} (not reached)",
            run.trace.last().map_or(0.0, |t| t.1)
        ),
    }
}

fn ratio(a: &Run, b: Option<f64>) -> String {
    match (a.hit, b) {
        (Some(x), Some(y)) if y > 0.0 => format!("{:.2}", x / y),
        _ => "-".to_string(),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // As the binary: the dense d-vectors ask for huge pages.
    thresher::sparse::set_dense_advice(thresher::sys::advise_huge_pages);
    let options = parse_options();
    std::fs::create_dir_all(&options.out)?;
    let mut table = String::new();
    let _ = writeln!(
        table,
        "| data | loss | lambda | P* (IHT) | IHT s (epochs) | HTP s | DIHT s | SDIHT s | DIHT/IHT | SDIHT/IHT | \
         DIHT/HTP | SDIHT/HTP | final rel. gap DIHT / SDIHT |"
    );
    let _ = writeln!(
        table,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for name in DATASETS {
        let path = options.data.join(format!("{name}.svm"));
        let samples = read_file(&path, Format::Libsvm)?;
        let data = Dataset::from_samples(&samples, 0);
        eprintln!(
            "{name}: N = {}, d = {}, nnz = {}",
            data.len(),
            data.dim(),
            data.nnz()
        );
        for kind in [LossKind::Huber, LossKind::Hinge] {
            let loss = Loss::new(kind, GAMMA)?;
            for lambda in LAMBDAS {
                let problem = Problem::new(&data, loss, lambda, options.k, false)?;
                let tag = format!(
                    "{name}_{kind}_{lambda}_k{}_c{}",
                    options.k, options.iht_change
                );
                let mut iht = Iht::new(&problem);
                let reference = drive(
                    &problem,
                    &mut iht,
                    f64::NEG_INFINITY,
                    MAX_BUDGET,
                    IHT_MAX_EPOCHS,
                    |t| {
                        let n = t.len();
                        n >= 2
                            && (t[n - 1].2 - t[n - 2].2).abs()
                                <= options.iht_change * t[n - 1].2.abs()
                    },
                );
                reference.write(&options.out.join(format!("trace_{tag}_iht.csv")))?;
                let &(iht_epochs, iht_seconds, target) =
                    reference.trace.last().expect("at least one epoch");
                let budget = Duration::from_secs_f64(iht_seconds * BUDGET_FACTOR)
                    .clamp(MIN_BUDGET, MAX_BUDGET);
                let chase =
                    |solver: &mut dyn Solver<Dataset>, label: &str| -> std::io::Result<Run> {
                        let run = drive(&problem, solver, target, budget, usize::MAX, |t| {
                            t.last().is_some_and(|r| r.2 <= target)
                        });
                        run.write(&options.out.join(format!("trace_{tag}_{label}.csv")))?;
                        Ok(run)
                    };
                let htp = chase(&mut Htp::new(&problem), "htp")?;
                let diht = chase(&mut Sdiht::new(&problem, 1, StepRule::Adaptive, 0)?, "diht")?;
                let sdiht = chase(
                    &mut Sdiht::new(&problem, SDIHT_BLOCKS, StepRule::Adaptive, 0)?,
                    "sdiht",
                )?;
                let row = format!(
                    "| {name} | {kind} | {lambda} | {target:.6} | {iht_seconds:.3} ({iht_epochs}) | {} | {} | {} | \
                     {} | {} | {} | {} | {:.1e} / {:.1e} |",
                    seconds(&htp),
                    seconds(&diht),
                    seconds(&sdiht),
                    ratio(&diht, Some(iht_seconds)),
                    ratio(&sdiht, Some(iht_seconds)),
                    ratio(&diht, htp.hit),
                    ratio(&sdiht, htp.hit),
                    diht.final_relative_gap,
                    sdiht.final_relative_gap,
                );
                eprintln!("{row}");
                table.push_str(&row);
                table.push('\n');
            }
        }
    }
    let table_name = format!("table_k{}_c{}.md", options.k, options.iht_change);
    std::fs::write(options.out.join(table_name), &table)?;
    println!("{table}");
    Ok(())
}
