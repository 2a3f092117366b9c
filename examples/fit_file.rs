//! Fit a k-sparse linear model to a data file and read the certificate that says how good it is.
//!
//! ```sh
//! cargo run --release --example fit_file -- train.svm model.json [k] [lambda]
//! ```
//! The file is LIBSVM (`label index:value ...`) or JSON lines; labels of +1/-1 get the logistic loss,
//! anything else the squared loss. SDIHT runs until the relative duality gap is below 1e-6, or 10
//! certified epochs in a row close it by less than 1% (a k-sparse gap need not close), as `thresher
//! fit` does; the model is written as `thresher-model/1` JSON (what `thresher predict` and the
//! `score_model` example read). The certificate brackets the best k-sparse objective:
//! `dual <= min P <= primal`, so `gap = primal - dual >= 0` bounds how far the model is from it.

use std::path::Path;

use thresher::ingest::{guess_format, read_file};
use thresher::loss::LossKind;
use thresher::solver::driver::{self, StopRule};
use thresher::solver::sdiht::offline::{default_blocks, Sdiht};
use thresher::solver::StepRule;
use thresher::{Dataset, Loss, Model, Problem};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(data_path), Some(model_path)) = (args.first(), args.get(1)) else {
        return Err("usage: fit_file DATA MODEL.json [k] [lambda]".into());
    };
    let k: usize = args.get(2).map_or(Ok(10), |a| a.parse())?;
    let lambda: f64 = args.get(3).map_or(Ok(1e-3), |a| a.parse())?;

    // Read every sample (a bad line is an error naming the file and the line).
    let path = Path::new(data_path);
    let samples = read_file(path, guess_format(path))?;
    let data = Dataset::from_samples(&samples, 0);
    let classes = samples.iter().all(|s| s.label == 1.0 || s.label == -1.0);
    let kind = if classes {
        LossKind::Logistic
    } else {
        LossKind::Squared
    };
    let loss = Loss::new(kind, 0.25)?;

    // The problem: min over ||w||_0 <= k of (1/N) sum_i loss(w.x_i; y_i) + lambda/2 ||w||^2.
    let problem = Problem::new(&data, loss, lambda, k, false)?;
    let blocks = default_blocks(samples.len());
    let mut solver = Sdiht::new(&problem, blocks, StepRule::Coordinate, 0)?;
    let stop = StopRule {
        patience: 10,
        ..StopRule::default()
    };
    let report = driver::run(&problem, &mut solver, &stop, &mut |_| {});

    let c = report.certificate;
    let model = Model::from_sparse(&report.model, kind, loss.gamma(), "sdiht", k, lambda, c);
    std::fs::write(model_path, serde_json::to_string_pretty(&model)? + "\n")?;
    println!(
        "samples={} loss={kind:?} k={k} lambda={lambda} epochs={} stop={:?}",
        samples.len(),
        report.epochs,
        report.stop_reason
    );
    println!(
        "primal={:e} dual={:e} gap={:e} relative_gap={:e}",
        c.primal,
        c.dual,
        c.gap,
        c.relative_gap()
    );
    println!("support={:?}", model.support);
    Ok(())
}
