//! `thresher fit --multiclass ovr`: one k-sparse binary fit per class, one-vs-rest (the class's
//! samples `+1`, every other sample `-1`), each with every other flag as given (its own lambda when
//! `--lambda auto`), written as one `thresher-multiclass/1` file ([`MulticlassModel`]).
//!
//! Each class's fit reads the file again: a class is a whole `fit` (its own grid, refit, polish and
//! certificate), and re-reading costs one parse per class, small beside the solve on the data this
//! is for (tens of classes).

use std::collections::BTreeSet;

use super::fit::fit_model;
use super::{write_file, CliError, FitArgs};
use crate::ingest::{guess_format, read_file};
use crate::model::multiclass::{MulticlassModel, MAX_CLASSES};

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
    let mut models = Vec::with_capacity(classes.len());
    for (i, &class) in classes.iter().enumerate() {
        eprintln!(
            "class {class} ({} of {}): one-vs-rest",
            i + 1,
            classes.len()
        );
        models.push(fit_model(args, Some(class))?.model);
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
