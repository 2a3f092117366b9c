//! `thresher fit` on dense designs (a dense, collinear logistic set; a small integer design with the
//! squared loss and an intercept; exact data) and on input that cannot seek (`/dev/stdin` on a pipe).

use std::io::Write;
use std::process::{Command, Stdio};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use crate::common::{assert_succeeded, support, thresher, FitFiles};

fn model_json(path: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A standard normal draw (Box-Muller).
fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let (u, v): (f64, f64) = (rng.gen_range(1e-12..1.0), rng.gen());
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// 400 dense rows of 40 correlated columns (each a random mix of two latent factors plus noise, as
/// `make_classification`'s redundant features are), labelled by the first factor's sign.
fn dense_classification() -> String {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mix: Vec<[f64; 2]> = (0..40)
        .map(|_| [normal(&mut rng), normal(&mut rng)])
        .collect();
    let mut text = String::new();
    for _ in 0..400 {
        let latent = [normal(&mut rng), normal(&mut rng)];
        let label = if latent[0] + 0.3 * normal(&mut rng) >= 0.0 {
            1
        } else {
            -1
        };
        text.push_str(&label.to_string());
        for (j, m) in mix.iter().enumerate() {
            let x = m[0] * latent[0] + m[1] * latent[1] + 0.5 * normal(&mut rng);
            text.push_str(&format!(" {j}:{x:.6}"));
        }
        text.push('\n');
    }
    text
}

/// The training accuracy `thresher predict` reports for `model` on `data`.
fn accuracy(model: &str, data: &str) -> f64 {
    let out = thresher(&["predict", "--model", model, data]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        assert_succeeded(&out, "predict")
    );
    let at = text.find("accuracy=").expect("predict reports accuracy") + "accuracy=".len();
    text[at..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// On a dense design the default fit learns: its primal is well below the empty model's (ln 2), the
/// empty-model fallback is not taken, and the model classifies far better than chance. (The
/// coordinate step, the former default, stalled there within a dozen epochs above ln 2 and returned
/// `w = 0`.)
#[test]
fn fit_learns_a_dense_logistic_design_with_the_defaults() {
    let files = FitFiles::with_data("dense.svm", &dense_classification());
    let out = thresher(&[
        "fit",
        &files.data,
        "--loss",
        "logistic",
        "-k",
        "5",
        "--lambda",
        "1e-3",
        "--out",
        &files.model,
    ]);
    assert_succeeded(&out, "dense fit");
    let model = model_json(&files.model);
    assert_eq!(support(&model).len(), 5, "{model}");
    assert_ne!(model["convergence"]["empty_model"], true, "{model}");
    let primal = model["certificate"]["primal"].as_f64().unwrap();
    assert!(primal < std::f64::consts::LN_2 - 0.2, "{model}");
    let acc = accuracy(&files.model, &files.data);
    assert!(acc > 0.8, "accuracy {acc}: {model}");
}

/// 20 rows of 5 integer columns in 0..9; the label is `f(x)` plus an optional integer noise.
fn integer_design(seed: u64, label: impl Fn(&[i64], &mut ChaCha8Rng) -> i64) -> String {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut text = String::new();
    for _ in 0..20 {
        let x: Vec<i64> = (0..5).map(|_| rng.gen_range(0..10)).collect();
        text.push_str(&label(&x, &mut rng).to_string());
        for (j, v) in x.iter().enumerate().filter(|(_, v)| **v != 0) {
            text.push_str(&format!(" {j}:{v}"));
        }
        text.push('\n');
    }
    text
}

/// The search's own model (`--no-polish`: the polish would hide a search that stalled) with the
/// squared loss and an intercept.
fn squared_intercept_fit(data: &str, k: &str) -> Value {
    let files = FitFiles::with_data("int.svm", data);
    let out = thresher(&[
        "fit",
        &files.data,
        "--loss",
        "squared",
        "-k",
        k,
        "--lambda",
        "1e-3",
        "--intercept",
        "--no-polish",
        "--out",
        &files.model,
    ]);
    assert_succeeded(&out, "squared fit with an intercept");
    model_json(&files.model)
}

/// The squared loss with an intercept on a small integer design finds the true support and fits it
/// to the noise level; on exact data (y = x0) it reaches about 0 loss (`lambda/2 ||w||^2` and less).
#[test]
fn fit_squared_loss_with_an_intercept_on_an_integer_design() {
    let noisy = integer_design(1, |x, rng| 2 * x[0] - x[3] + 5 + rng.gen_range(-1..=1));
    let model = squared_intercept_fit(&noisy, "2");
    assert_eq!(support(&model), vec![0, 3], "{model}");
    // The noise's variance is 2/3 (the squared loss here is (y - u)^2, not halved).
    let primal = model["certificate"]["primal"].as_f64().unwrap();
    assert!(primal < 1.0, "{model}");

    let exact = integer_design(2, |x, _| x[0]);
    let model = squared_intercept_fit(&exact, "1");
    assert_eq!(support(&model), vec![0], "{model}");
    let primal = model["certificate"]["primal"].as_f64().unwrap();
    assert!(primal < 1e-2, "{model}");
}

/// `fit /dev/stdin` reads a pipe (which cannot seek), with a fixed lambda and with `--lambda auto`,
/// and learns the same model as from the file.
#[test]
fn fit_reads_a_pipe_through_dev_stdin() {
    let data = dense_classification();
    let files = FitFiles::with_data("dense.svm", &data);
    let args = |input: &str, lambda: &str| {
        vec![
            "fit".to_string(),
            input.to_string(),
            "--format".into(),
            "libsvm".into(),
            "--loss".into(),
            "logistic".into(),
            "-k".into(),
            "5".into(),
            "--lambda".into(),
            lambda.into(),
        ]
    };
    for lambda in ["1e-2", "auto"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_thresher"))
            .args(args("/dev/stdin", lambda))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let text = data.clone();
        let feeder = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
        let out = child.wait_with_output().unwrap();
        feeder.join().unwrap().unwrap();
        assert_succeeded(&out, &format!("fit /dev/stdin --lambda {lambda}"));
        let piped: Value = serde_json::from_slice(&out.stdout).unwrap();
        let args = args(&files.data, lambda);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = thresher(&args);
        assert_succeeded(&out, "fit FILE");
        let from_file: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(piped["weights"], from_file["weights"], "{piped}");
        assert_eq!(support(&piped).len(), 5, "{piped}");
    }
}
