//! What `thresher fit` does around the k-sparse search: `--standardize` scales the columns before it
//! (and maps the model back to the original units after), and the model it returns is polished on its
//! support ([`crate::solver::polish`], on by default, `--no-polish` turns it off).
//!
//! With `--standardize` everything in between — the `--lambda auto` grid and its held-out scores, the
//! search, the polish and the certificate — runs on the scaled columns; the scales are the RMS of each
//! column over the whole file ([`ColumnScales`]: no labels are read, so the held-out part informs only
//! the column scales). Only the grid's final refit is polished; the grid members are ranked as the
//! search left them.

use std::time::Instant;

use super::Fit;
use crate::cli::{CliError, FitArgs};
use crate::model::{Model, Standardized};
use crate::sample::{ColumnScales, Dataset, Sample};
use crate::solver::driver::FitReport;
use crate::solver::polish::{polish_fit, PolishOutcome, PolishRecord};
use crate::solver::Problem;

impl Fit<'_> {
    /// Polishes `report`'s model on `data` at `lambda` (unless `--no-polish`) and prints what it did
    /// to stderr; the record for the model file.
    pub(super) fn polish(
        &self,
        data: &Dataset,
        lambda: f64,
        report: &mut FitReport,
    ) -> Result<PolishRecord, CliError> {
        if self.args.no_polish {
            return Ok(PolishRecord::not_run(
                PolishOutcome::Off,
                report.certificate.primal,
            ));
        }
        let problem = Problem::new(data, self.loss, lambda, self.k, self.args.intercept)?;
        let gap_before = report.certificate.gap;
        let started = Instant::now();
        let record = polish_fit(&problem, report);
        let outcome = serde_json::to_value(record.outcome)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        eprintln!(
            "polish: {outcome} primal {:.9e} -> {:.9e} gap {:.3e} -> {:.3e} newton_steps={} seconds={:.3}",
            record.primal_search,
            report.certificate.primal,
            gap_before,
            report.certificate.gap,
            record.iterations,
            started.elapsed().as_secs_f64(),
        );
        Ok(record)
    }
}

/// `data` with its columns scaled when `--standardize` asks for it, and the scales.
pub(super) fn standardize_dataset(
    args: &FitArgs,
    mut data: Dataset,
) -> (Dataset, Option<ColumnScales>) {
    if !args.standardize {
        return (data, None);
    }
    let scales = ColumnScales::rms(&data);
    data.scale_columns(&scales);
    (data, Some(scales))
}

/// Scales `samples`' columns in place when `--standardize` asks for it; the scales.
pub(super) fn standardize_samples(args: &FitArgs, samples: &mut [Sample]) -> Option<ColumnScales> {
    if !args.standardize {
        return None;
    }
    let scales = ColumnScales::rms_of_samples(samples);
    scales.scale_samples(samples);
    Some(scales)
}

/// A model solved on scaled columns, rewritten in the original units, with the record of its scales
/// (its certificate stays that of the scaled problem: [`Standardized`]).
pub(super) fn to_original_units(model: &mut Model, scales: &ColumnScales) {
    model.weights = scales.to_original(&model.support, &model.weights);
    model.standardize = Some(Standardized {
        scaling: "rms".into(),
        certified: "scaled".into(),
        scales: model.support.iter().map(|&j| scales.of(j)).collect(),
    });
}
