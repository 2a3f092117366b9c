//! `thresher fit --multiclass softmax`: one multinomial logistic model whose k features are shared by
//! all the classes ([`crate::solver::softmax`]), written as one `thresher-multiclass/2` file
//! ([`SharedModel`]). Labels are integer classes (2 to [`MAX_CLASSES`]), mapped to `0..C` in
//! ascending order. `--lambda auto` fits each lambda of the log-spaced grid (`--lambda-grid`,
//! `--lambda-max`, `--lambda-min`) and ranks them by the held-out multinomial log-loss: by
//! `--folds`-fold cross-validation below `--cv-below` samples, else on one `--holdout` part (seeded by
//! `--seed`); ties go to the larger lambda; the chosen lambda is refitted on all the samples. The grid
//! is not extended past its ends here (`--lambda-extend` is the binary fit's). Every fit ends with the
//! polish ([`crate::solver::softmax::polish`]; `--no-polish` turns it off), kept when it lowers `P`.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{write_file, CliError, FitArgs, LambdaArg};
use crate::ingest::{guess_format, read_file};
use crate::model::multiclass::MAX_CLASSES;
use crate::model::shared::{SharedModel, SHARED_FORMAT, SOFTMAX};
use crate::model::{Convergence, LambdaAuto};
use crate::sample::{mean_weight_one, Dataset, Sample, SampleSet};
use crate::solver::driver::{StopReason, StopRule};
use crate::solver::softmax::driver::{run as run_solver, SoftmaxReport};
use crate::solver::softmax::polish::polish;
use crate::solver::softmax::simplex::log_sum_exp;
use crate::solver::softmax::{default_block, SoftmaxProblem, SoftmaxState};
use crate::solver::Certificate;

/// The solver name in the model file.
pub const SOLVER: &str = "softmax-sdiht";

pub fn run(args: &FitArgs) -> Result<(), CliError> {
    if args.trace.is_some() || args.plot.is_some() || args.standardize {
        return Err(CliError::Argument(
            "--multiclass softmax does not take --trace, --plot or --standardize".into(),
        ));
    }
    if args.solver.is_subset() {
        return Err(CliError::Argument(
            "--multiclass softmax runs its own SDIHT (not subset or dual-ast)".into(),
        ));
    }
    if args
        .loss
        .is_some_and(|l| l != crate::loss::LossKind::Logistic)
    {
        return Err(CliError::Argument(
            "--multiclass softmax is the multinomial logistic loss: give --loss logistic or no --loss"
                .into(),
        ));
    }
    let k = args
        .k
        .ok_or_else(|| CliError::Argument("-k/--k is required".into()))?;
    if k == 0 {
        return Err(CliError::Argument("-k must be >= 1".into()));
    }
    let lambda_arg = args
        .lambda
        .ok_or_else(|| CliError::Argument("--lambda is required".into()))?;
    let stop = super::fit::stop_rule(args)?;
    let format = args.format.unwrap_or_else(|| guess_format(&args.data));
    let mut samples = read_file(&args.data, format)?;
    let classes = to_class_indices(&mut samples)?;
    mean_weight_one(&mut samples);
    let intercept = !args.no_intercept;
    let (lambda, record) = match lambda_arg {
        LambdaArg::Value(lambda) => (lambda, None),
        LambdaArg::Auto => {
            let (lambda, record) = choose_lambda(args, &samples, classes.len(), k, &stop)?;
            (lambda, Some(record))
        }
    };
    let data = Dataset::from_samples(&samples, 0);
    let (report, polished) = fit(args, &data, classes.len(), lambda, k, &stop)?;
    let mut model = to_model(classes, k, lambda, intercept, &report, &stop, record);
    model.polish = Some(polished.into());
    eprintln!(
        "solver={SOLVER} lambda={lambda} epochs={} seconds={:.3} primal={:.9e} dual={:.9e} gap={:.3e} support={} stop={} samples={} dim={} classes={}",
        report.epochs,
        report.seconds,
        report.certificate.primal,
        report.certificate.dual,
        report.certificate.gap,
        model.support.len(),
        report.stop_reason,
        data.len(),
        data.dim(),
        model.classes.len(),
    );
    if let Some(c) = &model.convergence {
        if !c.converged {
            eprintln!(
                "warning: the model did not converge: stop={} relative_gap={:.3e} > tol={:e}{}",
                c.reason,
                c.relative_gap,
                c.tol,
                if c.empty_model {
                    "; the empty model (intercepts only) is returned"
                } else {
                    ""
                }
            );
        }
    }
    let text = serde_json::to_string_pretty(&model).expect("a model always serialises");
    match &args.out {
        Some(path) => write_file(path, &(text + "\n")),
        None => {
            println!(
                "{}",
                serde_json::to_string(&model).expect("a model always serialises")
            );
            Ok(())
        }
    }
}

/// Rewrites every label as its class's index (classes ascending) and returns the classes: integers,
/// 2 to [`MAX_CLASSES`] of them.
fn to_class_indices(samples: &mut [Sample]) -> Result<Vec<f64>, CliError> {
    let mut classes = std::collections::BTreeSet::new();
    for (i, s) in samples.iter().enumerate() {
        if s.label.fract() != 0.0 || s.label.abs() > 1e15 {
            return Err(CliError::Argument(format!(
                "--multiclass takes integer class labels; sample {} has label {}",
                i + 1,
                s.label
            )));
        }
        classes.insert((s.label + 0.0) as i64);
        if classes.len() > MAX_CLASSES {
            return Err(CliError::Argument(format!(
                "--multiclass takes at most {MAX_CLASSES} classes"
            )));
        }
    }
    if classes.len() < 2 {
        return Err(CliError::Argument(format!(
            "--multiclass needs at least 2 classes; the data has {}",
            classes.len()
        )));
    }
    let classes: Vec<i64> = classes.into_iter().collect();
    for s in samples.iter_mut() {
        let class = (s.label + 0.0) as i64;
        s.label = classes.binary_search(&class).unwrap_or(0) as f64;
    }
    Ok(classes.into_iter().map(|c| c as f64).collect())
}

/// One fit of the shared-support problem on `data` (labels are class indices).
fn fit(
    args: &FitArgs,
    data: &Dataset,
    classes: usize,
    lambda: f64,
    k: usize,
    stop: &StopRule,
) -> Result<(SoftmaxReport, &'static str), CliError> {
    let problem = SoftmaxProblem::new(data, classes, lambda, k, !args.no_intercept)
        .map_err(|e| CliError::Argument(e.to_string()))?;
    let block = args
        .blocks
        .map(|m| data.len().div_ceil(m.max(1)))
        .unwrap_or_else(|| default_block(data.nnz(), data.len(), data.dim(), classes));
    let mut state = SoftmaxState::new(&problem, block, args.seed);
    let mut report = run_solver(&problem, &mut state, stop, &mut |_| {});
    if report.stop_reason == StopReason::Diverged {
        return Err(CliError::Diverged {
            solver: SOLVER.into(),
            epoch: report.epochs,
        });
    }
    let polished = if args.no_polish || report.empty_model {
        "skipped"
    } else {
        let m = &report.model;
        let (mut weights, mut b) = (m.weights.clone(), m.intercepts.clone());
        match polish(&problem, &m.support, &mut weights, &mut b) {
            Some(value) if value < report.certificate.primal => {
                let c = report.certificate;
                report.certificate = Certificate::new(value, c.dual, c.samples);
                report.model.weights = weights;
                report.model.intercepts = b;
                "improved"
            }
            Some(_) => "kept",
            None => "skipped",
        }
    };
    Ok((report, polished))
}

fn to_model(
    classes: Vec<f64>,
    k: usize,
    lambda: f64,
    intercept: bool,
    report: &SoftmaxReport,
    stop: &StopRule,
    lambda_auto: Option<LambdaAuto>,
) -> SharedModel {
    let c = classes.len();
    let m = &report.model;
    SharedModel {
        format: SHARED_FORMAT.into(),
        strategy: SOFTMAX.into(),
        classes,
        solver: SOLVER.into(),
        k,
        lambda,
        support: m.support.clone(),
        weights: m.weights.chunks(c).map(<[f64]>::to_vec).collect(),
        intercepts: if intercept {
            m.intercepts.clone()
        } else {
            vec![0.0; c]
        },
        certificate: report.certificate,
        convergence: Some(Convergence::new(
            &report.certificate,
            &report.stop_reason.to_string(),
            stop.tol,
            report.empty_model,
        )),
        lambda_auto,
        polish: None,
    }
}

/// The weighted mean multinomial log-loss of `report`'s model on `held` (labels are class indices).
fn held_out_loss(report: &SoftmaxReport, held: &Dataset, classes: usize) -> f64 {
    let m = &report.model;
    let (mut total, mut weight) = (0.0, 0.0);
    let mut scores = vec![0.0; classes];
    for i in 0..held.len() {
        let row = held.row(i);
        scores.copy_from_slice(&m.intercepts);
        let (mut a, mut b) = (0, 0);
        while a < row.indices.len() && b < m.support.len() {
            match row.indices[a].cmp(&m.support[b]) {
                std::cmp::Ordering::Less => a += 1,
                std::cmp::Ordering::Greater => b += 1,
                std::cmp::Ordering::Equal => {
                    let w = &m.weights[b * classes..(b + 1) * classes];
                    for (s, wc) in scores.iter_mut().zip(w) {
                        *s += row.values[a] * wc;
                    }
                    a += 1;
                    b += 1;
                }
            }
        }
        total += row.weight * (log_sum_exp(&scores) - scores[row.label as usize]);
        weight += row.weight;
    }
    if weight > 0.0 {
        total / weight
    } else {
        f64::INFINITY
    }
}

/// `--lambda auto` (module docs): the lambda and its record.
fn choose_lambda(
    args: &FitArgs,
    samples: &[Sample],
    classes: usize,
    k: usize,
    stop: &StopRule,
) -> Result<(f64, LambdaAuto), CliError> {
    super::grid::check_flags(args)?;
    let points = args.lambda_grid.max(1);
    let grid: Vec<f64> = (0..points)
        .map(|i| {
            let f = if points == 1 {
                0.0
            } else {
                i as f64 / (points - 1) as f64
            };
            args.lambda_max * (args.lambda_min / args.lambda_max).powf(f)
        })
        .collect();
    let mut order: Vec<usize> = (0..samples.len()).collect();
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(args.seed));
    let n = samples.len();
    let folds = super::grid::folds_for(args, n);
    let cv = n < args.cv_below && n >= folds;
    let parts: Vec<(Vec<usize>, Vec<usize>)> = if cv {
        (0..folds)
            .map(|f| {
                let (lo, hi) = (f * n / folds, (f + 1) * n / folds);
                let train = order[..lo].iter().chain(&order[hi..]).copied().collect();
                (train, order[lo..hi].to_vec())
            })
            .collect()
    } else {
        let held = ((args.holdout * n as f64).round() as usize).clamp(1, n.saturating_sub(1));
        vec![(order[held..].to_vec(), order[..held].to_vec())]
    };
    let pick = |rows: &[usize]| {
        let part: Vec<Sample> = rows.iter().map(|&i| samples[i].clone()).collect();
        Dataset::from_samples(&part, 0)
    };
    let parts: Vec<(Dataset, Dataset)> = parts
        .iter()
        .map(|(train, held)| (pick(train), pick(held)))
        .collect();
    let mut losses = Vec::with_capacity(grid.len());
    for &lambda in &grid {
        let mut total = 0.0;
        for (train, held) in &parts {
            let (report, _) = fit(args, train, classes, lambda, k, stop)?;
            total += held_out_loss(&report, held, classes);
        }
        let loss = total / parts.len() as f64;
        eprintln!("--lambda auto: lambda={lambda} held-out log-loss={loss:.6}");
        losses.push(if loss.is_finite() {
            loss
        } else {
            f64::INFINITY
        });
    }
    let live = (0..grid.len()).fold(0, |b, i| if losses[i] < losses[b] { i } else { b });
    if !losses[live].is_finite() {
        return Err(CliError::Argument(
            "--lambda auto: no lambda of the grid has a finite held-out loss".into(),
        ));
    }
    let record = LambdaAuto {
        grid: grid.clone(),
        live,
        switches: 0,
        losses,
        criterion: "holdout".into(),
        progressive: Vec::new(),
        held_out: parts.iter().map(|(_, h)| h.len() as u64).sum(),
        held_out_dropped: 0,
        validation: Some(if cv { "cv" } else { "holdout" }.into()),
        folds: cv.then_some(folds as u64),
        extended: Vec::new(),
        refit: None,
    };
    Ok((grid[live], record))
}
