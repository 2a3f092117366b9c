//! Squared loss gets an unpenalised intercept by default, in `fit` and in the daemon: a response far
//! from 0 (a price, a permeability) was fitted through the origin, and the k weights were spent on its
//! mean (held-out R² on the Ames house prices: 0.86 in `fit`, 0.17 in the daemon; 0.90 with it).

use thresher::synth::{self, to_libsvm};
use thresher::Sample;

use crate::common::{assert_succeeded, test_config, thresher, Daemon, FitFiles};

/// A sparse regression stream whose response sits at `offset` (noise 0.1 around `x.w* + offset`).
fn offset_stream(n: usize, offset: f64, seed: u64) -> (Vec<Sample>, Vec<f64>) {
    let problem = synth::sparse_stream(n, 200, 5, 10, 0.1, false, seed);
    let samples = problem
        .samples
        .into_iter()
        .map(|mut s| {
            s.label += offset;
            s
        })
        .collect();
    (samples, problem.truth)
}

/// `fit --loss squared` with its defaults centres the response: the model's intercept is the offset and
/// its weights the truth's; `--no-intercept` still fits through the origin.
#[test]
fn fit_squared_has_an_intercept_by_default() {
    let (samples, truth) = offset_stream(4000, 50.0, 3);
    let files = FitFiles::new(&samples);
    let fit = |extra: &[&str]| {
        let mut args = vec![
            "fit",
            &files.data,
            "--loss",
            "squared",
            "-k",
            "5",
            "--lambda",
            "1e-4",
            "--out",
        ];
        args.push(&files.model);
        args.extend_from_slice(extra);
        assert_succeeded(&thresher(&args), "fit");
        files.load_model()
    };
    let m = fit(&[]);
    assert!(
        (m.intercept - 50.0).abs() < 0.5,
        "intercept {}",
        m.intercept
    );
    let mut support = m.support.clone();
    support.sort_unstable();
    let truth_support: Vec<u32> = (0..truth.len() as u32)
        .filter(|&j| truth[j as usize] != 0.0)
        .collect();
    assert_eq!(support, truth_support, "weights {:?}", m.weights);
    assert!(m.certificate.gap >= 0.0, "{:?}", m.certificate);
    let origin = fit(&["--no-intercept"]);
    assert_eq!(origin.intercept, 0.0);
    assert!(
        origin.certificate.primal > 10.0 * m.certificate.primal,
        "without {:?}, with {:?}",
        origin.certificate,
        m.certificate
    );
}

/// The daemon's squared-loss learner publishes an intercept by default.
#[test]
fn daemon_squared_has_an_intercept_by_default() {
    let (samples, _) = offset_stream(2000, 50.0, 4);
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(
        dir.path(),
        "solver = \"sdiht\"\nloss = \"squared\"\nk = 5\nlambda = 1e-4",
        "",
    );
    let d = Daemon::start_with_stdin(
        &["--config", config.to_str().unwrap(), "--stdin"],
        &to_libsvm(&samples),
    );
    let m = d.wait_for("all 2000 samples learned, intercept near 50", |d| {
        let m = d.model()?;
        let b = m["intercept"].as_f64()?;
        ((b - 50.0).abs() < 1.0).then_some(m)
    });
    assert!(m["certificate"]["gap"].as_f64().unwrap() >= -1e-9, "{m}");
    d.terminate();
}
