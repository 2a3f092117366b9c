//! `thresher fit --multiclass ovr`: one k-sparse binary fit per class, one-vs-rest (the class's
//! samples `+1`, every other sample `-1`), each with every other flag as given (with
//! `--lambda auto`: one lambda for all the classes, the one whose held-out losses summed over the
//! classes are lowest; each class's record keeps its own grid and losses), written as one
//! `thresher-multiclass/1` file ([`MulticlassModel`]).
//!
//! Each class's fit reads the file again: a class is a whole `fit` (its own grid, refit, polish and
//! certificate), and re-reading costs one parse per class, small beside the solve on the data this
//! is for (tens of classes).

use std::collections::BTreeSet;

use super::fit::fit_model;
use super::{write_file, CliError, FitArgs, LambdaArg};
use crate::ingest::{guess_format, read_file};
use crate::model::multiclass::{MulticlassModel, MAX_CLASSES};
use crate::model::{LambdaAuto, Model};

pub fn run(args: &FitArgs) -> Result<(), CliError> {
    if args.trace.is_some() || args.plot.is_some() {
        return Err(CliError::Argument(
            "--trace and --plot follow one fit; with --multiclass each class is its own fit".into(),
        ));
    }
    if args.solver.is_subset() {
        return Err(CliError::Argument(
            "--multiclass fits the k-sparse solvers (not subset or dual-ast)".into(),
        ));
    }
    match args.loss {
        Some(loss) if loss != crate::loss::LossKind::Squared => {}
        _ => {
            return Err(CliError::Argument(
                "--multiclass needs a classification --loss (logistic, hinge or huber)".into(),
            ))
        }
    }
    let classes = classes_of(args)?;
    let mut models = fit_each(args, &classes)?;
    if matches!(args.lambda, Some(LambdaArg::Auto)) {
        // One lambda for all: the argmax of scores compares the classes' models, and a lambda chosen
        // per class lets a class with few samples (separable, so its held-out loss falls as lambda
        // does) take a tiny lambda and scores of a scale that outvotes every other class.
        let lambda = shared_lambda(&models)?;
        eprintln!(
            "--multiclass ovr --lambda auto: lambda={lambda} for every class (lowest held-out loss summed over the classes); refitting each class"
        );
        let mut fixed = args.clone();
        fixed.lambda = Some(LambdaArg::Value(lambda));
        let records: Vec<_> = models.iter_mut().map(|m| m.lambda_auto.take()).collect();
        models = fit_each(&fixed, &classes)?;
        for (m, record) in models.iter_mut().zip(records) {
            m.lambda_auto = record.map(|mut r| {
                r.live = r
                    .grid
                    .iter()
                    .position(|&l| same(l, lambda))
                    .unwrap_or(r.live);
                r
            });
        }
    }
    let model = MulticlassModel::one_vs_rest(classes, models)?;
    match &args.out {
        Some(path) => {
            let text = serde_json::to_string_pretty(&model).expect("a model always serialises");
            write_file(path, &(text + "\n"))
        }
        None => {
            println!(
                "{}",
                serde_json::to_string(&model).expect("a model always serialises")
            );
            Ok(())
        }
    }
}

/// One one-vs-rest fit per class, as `args` ask.
fn fit_each(args: &FitArgs, classes: &[f64]) -> Result<Vec<Model>, CliError> {
    let mut models = Vec::with_capacity(classes.len());
    for (i, &class) in classes.iter().enumerate() {
        eprintln!(
            "class {class} ({} of {}): one-vs-rest",
            i + 1,
            classes.len()
        );
        models.push(fit_model(args, Some(class))?.model);
    }
    Ok(models)
}

/// Two grid lambdas that are the same number (grids extended past an end are built by the same
/// products, but compare with a margin for rounding).
fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// The lambda, among those every class's grid tried, with the lowest held-out loss summed over the
/// classes (ties: the larger lambda, the simpler model).
fn shared_lambda(models: &[Model]) -> Result<f64, CliError> {
    let records: Vec<&LambdaAuto> = models
        .iter()
        .filter_map(|m| m.lambda_auto.as_ref())
        .collect();
    let first = records
        .first()
        .ok_or_else(|| CliError::Argument("--lambda auto left no grid record".into()))?;
    let mut best: Option<(f64, f64)> = None;
    for &lambda in &first.grid {
        let mut total = 0.0;
        let mut everywhere = true;
        for r in &records {
            match r.grid.iter().position(|&l| same(l, lambda)) {
                Some(i) => total += r.losses.get(i).copied().unwrap_or(f64::INFINITY),
                None => everywhere = false,
            }
        }
        let better = match best {
            None => true,
            Some((loss, kept)) => total < loss || (total == loss && lambda > kept),
        };
        if everywhere && total.is_finite() && better {
            best = Some((total, lambda));
        }
    }
    best.map(|(_, lambda)| lambda).ok_or_else(|| {
        CliError::Argument(
            "--multiclass ovr --lambda auto: no lambda has a finite held-out loss in every class"
                .into(),
        )
    })
}

/// The distinct labels of `args.data`, ascending: integers, 2 to [`MAX_CLASSES`] of them.
fn classes_of(args: &FitArgs) -> Result<Vec<f64>, CliError> {
    let format = args.format.unwrap_or_else(|| guess_format(&args.data));
    let samples = read_file(&args.data, format)?;
    let mut classes = BTreeSet::new();
    for (i, s) in samples.iter().enumerate() {
        if s.label.fract() != 0.0 || s.label.abs() > 1e15 {
            return Err(CliError::Argument(format!(
                "--multiclass takes integer class labels; sample {} has label {}",
                i + 1,
                s.label
            )));
        }
        // -0 and 0 are one class.
        classes.insert((s.label + 0.0) as i64);
        if classes.len() > MAX_CLASSES {
            return Err(CliError::Argument(format!(
                "--multiclass takes at most {MAX_CLASSES} classes (each class is a whole fit)"
            )));
        }
    }
    if classes.len() < 2 {
        return Err(CliError::Argument(format!(
            "--multiclass needs at least 2 classes; the data has {}",
            classes.len()
        )));
    }
    Ok(classes.into_iter().map(|c| c as f64).collect())
}
