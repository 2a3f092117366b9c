//! What `thresher fit` does around the k-sparse search: `--standardize` scales the columns before it
//! (and maps the model back to the original units after), and the model it returns is polished on its
//! support ([`crate::solver::polish`], on by default, `--no-polish` turns it off).
//!
//! With `--standardize` everything in between — the `--lambda auto` grid and its held-out scores, the
//! search, the polish and the certificate — runs on the scaled columns (without it, a warning suggests
//! it when the columns' magnitudes span more than [`SUGGEST_STANDARDIZE_DECADES`] decades); the scales are the RMS of each
//! column over the whole file ([`ColumnScales`]: no labels are read, so the held-out part informs only
//! the column scales). Only the grid's final refit is polished; the grid members are ranked as the
//! search left them.

use std::time::Instant;

use super::Fit;
use crate::cli::{CliError, FitArgs};
use crate::model::{Model, Standardized};
use crate::sample::{ColumnScales, Dataset};
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
        let problem = Problem::new(data, self.loss, lambda, self.k, self.args.fits_intercept())?;
        let gap_before = report.certificate.gap;
        let started = Instant::now();
        let record = polish_fit(&problem, report, &super::cores::Cores::shared());
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

/// Without `--standardize`, `fit` suggests it on stderr when the columns' RMS spans more than this
/// many decades: the real sets measured span at most 2.8, the badly scaled one 12, where the raw
/// problem's solver diverges or its certificate is vacuous (`docs/benchmarks/quality.md`).
pub const SUGGEST_STANDARDIZE_DECADES: f64 = 6.0;

/// Measures the columns' RMS and prints the suggestion of [`SUGGEST_STANDARDIZE_DECADES`] when it
/// applies.
pub(super) fn suggest_standardize(data: &Dataset) {
    let scales = ColumnScales::rms(data);
    if scales.decades() > SUGGEST_STANDARDIZE_DECADES {
        eprintln!(
            "warning: the columns' root mean squares span {:.1} decades; the solver may diverge or stall with a vacuous gap: consider --standardize",
            scales.decades()
        );
    }
}

/// `data` with its columns scaled when `--standardize` asks for it, and the scales; without it, the
/// data as they are (the caller may [`suggest_standardize`]).
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
