//! `thresher predict`: one prediction per input line, and a quality summary when labels are present;
//! from a binary or regression model file, or a multi-class one (the class; `--scores`: every class's
//! score, space-separated in the order of the file's `classes`; `--probabilities`, a shared-support
//! softmax model: every class's probability).

use std::io::{BufRead, BufWriter, Write};
use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::ingest::json::JsonSample;
use crate::ingest::libsvm::parse_libsvm_line;
use crate::ingest::{guess_format, is_skippable, Format, LineError, ReadError};
use crate::loss::LossKind;
use crate::model::multiclass::AnyModel;
use crate::sample::Row;

#[derive(Debug, Args)]
pub struct PredictArgs {
    /// Model file written by `thresher fit`.
    #[arg(long)]
    pub model: PathBuf,
    /// Data to predict (LIBSVM or JSON lines; JSON labels are optional).
    pub data: PathBuf,
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Print raw scores `w.x + b` instead of classes for classification losses (a multi-class model:
    /// one score per class, space-separated).
    #[arg(long)]
    pub scores: bool,
    /// A shared-support (`--multiclass softmax`) model: print every class's probability,
    /// space-separated in the order of the file's `classes`, instead of the class.
    #[arg(long, conflicts_with = "scores")]
    pub probabilities: bool,
}

pub fn run(args: &PredictArgs) -> Result<(), CliError> {
    let model = AnyModel::load(&args.model)?;
    if args.probabilities && !matches!(model, AnyModel::Shared(_)) {
        return Err(CliError::Argument(
            "--probabilities needs a shared-support model (fit --multiclass softmax)".into(),
        ));
    }
    let format = args.format.unwrap_or_else(|| guess_format(&args.data));
    let io_err = |source| ReadError::Io {
        path: args.data.clone(),
        source,
    };
    let file = std::fs::File::open(&args.data).map_err(io_err)?;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let (mut labelled, mut total, mut sq_err, mut correct) = (0usize, 0usize, 0.0, 0usize);
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(io_err)?;
        if is_skippable(&line) {
            continue;
        }
        let parsed = match format {
            Format::Libsvm => parse_libsvm_line(&line).map(|s| (s, true)),
            Format::Jsonl => serde_json::from_str::<JsonSample>(&line)
                .map_err(|e| LineError::Json(e.to_string()))
                .and_then(|js| {
                    let has_label = js.label.is_some();
                    js.into_sample(true).map(|s| (s, has_label))
                }),
        };
        let (sample, has_label) = parsed.map_err(|source| ReadError::Line {
            path: args.data.clone(),
            line: n + 1,
            source,
        })?;
        let written = match (&model, args.scores) {
            (AnyModel::Single(m), true) => writeln!(out, "{}", m.score(sample.row())),
            (AnyModel::Single(m), false) => writeln!(out, "{}", m.predict(sample.row())),
            (AnyModel::Multiclass(m), true) => {
                let scores: Vec<String> =
                    m.scores(sample.row()).iter().map(f64::to_string).collect();
                writeln!(out, "{}", scores.join(" "))
            }
            (AnyModel::Multiclass(m), false) => writeln!(out, "{}", m.predict(sample.row())),
            (AnyModel::Shared(m), scores) => {
                let values = if scores {
                    m.scores(sample.row())
                } else if args.probabilities {
                    m.probabilities(sample.row())
                } else {
                    vec![m.predict(sample.row())]
                };
                let values: Vec<String> = values.iter().map(f64::to_string).collect();
                writeln!(out, "{}", values.join(" "))
            }
        };
        if let Err(e) = written {
            return stdout_closed_or(e);
        }
        total += 1;
        if has_label {
            labelled += 1;
            let (class, score) = class_and_score(&model, sample.row());
            sq_err += (score - sample.label).powi(2);
            if class == sample.label {
                correct += 1;
            }
        }
    }
    if let Err(e) = out.flush() {
        return stdout_closed_or(e);
    }
    let loss = match &model {
        AnyModel::Single(m) => m.loss,
        AnyModel::Multiclass(m) => m.models[0].loss,
        AnyModel::Shared(_) => LossKind::Logistic,
    };
    if labelled > 0 {
        match loss {
            LossKind::Squared => eprintln!("samples={total} mse={:.6e}", sq_err / labelled as f64),
            _ => eprintln!(
                "samples={total} accuracy={:.4}",
                correct as f64 / labelled as f64
            ),
        }
    } else {
        eprintln!("samples={total}");
    }
    Ok(())
}

/// The predicted class (the score itself for a regression model) and the score (a multi-class model:
/// the winning class's).
fn class_and_score(model: &AnyModel, row: Row<'_>) -> (f64, f64) {
    match model {
        AnyModel::Single(m) => (m.predict(row), m.score(row)),
        AnyModel::Multiclass(m) => {
            let class = m.predict(row);
            let at = m.classes.iter().position(|&c| c == class).unwrap_or(0);
            (class, m.models[at].score(row))
        }
        AnyModel::Shared(m) => {
            let class = m.predict(row);
            let at = m.classes.iter().position(|&c| c == class).unwrap_or(0);
            (class, m.scores(row)[at])
        }
    }
}

/// A failed write of the predictions: a reader that closed the pipe (`predict ... | head -1`) has what
/// it wanted, so the command ends quietly and successfully, as other line tools do; any other failure
/// is an error naming standard output.
fn stdout_closed_or(e: std::io::Error) -> Result<(), CliError> {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Ok(())
    } else {
        Err(CliError::Write {
            path: "standard output".into(),
            source: e,
        })
    }
}
