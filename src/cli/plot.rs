//! `fit --plot FILE.svg`: the run's certified points drawn as an SVG file with `plotters` (its SVG
//! backend only): primal, dual and gap per epoch on a log scale above, the support size below.
//!
//! A log axis cannot show a value at or below zero (a gap of exactly 0 at convergence, a negative
//! dual early on): such a point is drawn on the axis's lowest line, a decade below the smallest
//! positive value, and the caption says so.

use std::path::Path;

use plotters::prelude::*;

use super::CliError;
use crate::solver::driver::TraceRow;

/// Width and height of the image, pixels.
const SIZE: (u32, u32) = (960, 640);

/// Writes the plot of `rows` (in run order) to `path`; `x_label` names their `epoch` field (an epoch,
/// or a subset solver's outer step).
pub fn write_svg(path: &Path, rows: &[TraceRow], x_label: &str) -> Result<(), CliError> {
    draw(path, rows, x_label).map_err(|e| CliError::Write {
        path: path.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    })
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// One series of the upper chart: its legend, colour and value.
type Series = (&'static str, RGBColor, fn(&TraceRow) -> f64);

fn draw(path: &Path, rows: &[TraceRow], x_label: &str) -> DrawResult {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(SIZE.1 * 3 / 5);
    let x = |r: &TraceRow| r.epoch as f64;
    let (x0, x1) = rows
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), r| {
            (a.min(x(r)), b.max(x(r)))
        });
    let (x0, x1) = if x0 < x1 {
        (x0, x1)
    } else if x0.is_finite() {
        (x0 - 1.0, x0 + 1.0)
    } else {
        (0.0, 1.0)
    };

    let positive = rows
        .iter()
        .flat_map(|r| [r.primal, r.dual, r.gap])
        .filter(|v| *v > 0.0 && v.is_finite());
    let (lo, hi) = positive.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    let (floor, hi) = if lo.is_finite() {
        let floor = 10f64.powf(lo.log10().floor() - 1.0);
        (floor, 10f64.powf(hi.log10().ceil()).max(floor * 10.0))
    } else {
        (1e-12, 1.0)
    };
    let clamp = |v: f64| if v > floor { v } else { floor };

    let mut chart = ChartBuilder::on(&top)
        .caption(
            "certificate: primal, dual and gap (log scale; values <= 0 on the lowest line)",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(80)
        .build_cartesian_2d(x0..x1, (floor..hi).log_scale())?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_desc("objective")
        .y_label_formatter(&|v| format!("{v:.0e}"))
        .draw()?;
    let series: [Series; 3] = [
        ("primal", RGBColor(37, 99, 235), |r| r.primal),
        ("dual", RGBColor(22, 163, 74), |r| r.dual),
        ("gap", RGBColor(220, 38, 38), |r| r.gap),
    ];
    for (name, color, value) in series {
        chart
            .draw_series(LineSeries::new(
                rows.iter().map(|r| (x(r), clamp(value(r)))),
                color.stroke_width(2),
            ))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()?;

    let support_max = rows
        .iter()
        .map(|r| r.support_size)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let mut chart = ChartBuilder::on(&bottom)
        .caption("support size", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(80)
        .build_cartesian_2d(x0..x1, 0.0..support_max * 1.1)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_desc("nonzero weights")
        .draw()?;
    let purple = RGBColor(124, 58, 237);
    chart
        .draw_series(LineSeries::new(
            rows.iter().map(|r| (x(r), r.support_size as f64)),
            purple.stroke_width(2),
        ))?
        .label("support size")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], purple));
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()?;
    root.present()?;
    Ok(())
}
