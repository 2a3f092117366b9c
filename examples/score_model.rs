//! Read a saved model and score samples with it.
//!
//! ```sh
//! cargo run --release --example score_model -- model.json data.svm
//! ```
//! Loads a `thresher-model/1` file (written by `thresher fit --out`, the `fit_file` example, or saved
//! from the daemon's `GET /v1/model`), checks it, prints what it is and the certificate it was published
//! with, then the prediction for each line of the data file (the score `w.x + b` for the squared loss,
//! the class -1/+1 otherwise) and, when the file has labels, the accuracy or mean squared error.

use std::path::Path;

use thresher::ingest::{guess_format, read_file};
use thresher::loss::LossKind;
use thresher::Model;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(model_path), Some(data_path)) = (args.first(), args.get(1)) else {
        return Err("usage: score_model MODEL.json DATA".into());
    };
    let model = Model::load(Path::new(model_path))?;
    let c = &model.certificate;
    println!(
        "model: {:?} loss, solver {}, k={} lambda={}, {} nonzero weights, intercept {}",
        model.loss,
        model.solver,
        model.k,
        model.lambda,
        model.support.len(),
        model.intercept
    );
    println!(
        "certificate: primal={:e} dual={:e} gap={:e} over {} samples",
        c.primal, c.dual, c.gap, c.samples
    );

    let path = Path::new(data_path);
    let samples = read_file(path, guess_format(path))?;
    let mut error = 0.0;
    for s in &samples {
        let prediction = model.predict(s.row());
        println!("prediction={prediction} label={}", s.label);
        error += match model.loss {
            LossKind::Squared => (prediction - s.label).powi(2),
            _ => f64::from(prediction != s.label),
        };
    }
    let mean = error / samples.len().max(1) as f64;
    match model.loss {
        LossKind::Squared => println!("samples={} mse={mean}", samples.len()),
        _ => println!("samples={} accuracy={}", samples.len(), 1.0 - mean),
    }
    Ok(())
}
