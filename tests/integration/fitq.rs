//! `thresher fit` on dense designs (a `make_classification` set; a small integer design with the
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

/// A dense design: `sklearn.datasets.make_classification(n_samples=60, n_features=10,
/// n_informative=2, random_state=0)` (labels as +-1, values to 3 decimals). The coordinate step, the
/// former default, stalls on it within a dozen epochs above the empty model's objective (ln 2), and
/// `fit` returned `w = 0`.
const DENSE: &str = "\
-1 0:-0.193 1:-0.223 2:-0.204 3:-1.616 4:-0.353 5:-0.144 6:0.164 7:0.567 8:0.003 9:1.648
-1 0:0.325 1:0.088 2:0.572 3:0.844 4:-1.225 5:0.046 6:1.930 7:0.949 8:-0.492 9:-0.498
-1 0:-0.976 1:0.880 2:-0.888 3:0.387 4:-1.698 5:-0.848 6:-1.571 7:-0.207 8:-0.295 9:0.643
-1 0:-1.472 1:-0.107 2:-1.805 3:-0.813 4:-0.720 5:-0.881 6:-0.287 7:-0.062 8:0.551 9:-0.042
-1 0:-0.216 1:-1.214 2:-0.475 3:-0.280 4:-0.441 5:0.051 6:-0.453 7:-0.688 8:0.531 9:1.069
-1 0:-0.873 1:-0.731 2:-1.518 3:0.094 4:-0.385 5:-0.138 6:1.078 7:-1.127 8:1.285 9:-0.134
-1 0:-0.973 1:-1.080 2:-0.677 3:-0.438 4:-1.147 5:-1.025 6:-0.663 7:1.127 8:-0.742 9:-0.098
1 0:0.403 1:1.302 2:0.351 3:-0.481 4:-0.628 5:0.363 6:1.211 7:0.690 8:0.155 9:-1.045
1 0:1.292 1:-0.808 2:0.730 3:0.800 4:-1.447 5:1.506 6:0.059 7:-0.185 8:1.347 9:0.815
1 0:0.344 1:0.189 2:0.524 3:0.088 4:0.524 5:0.118 6:-0.053 7:-1.936 8:-0.347 9:-0.596
-1 0:-0.633 1:0.350 2:-0.378 3:-1.438 4:-0.764 5:-0.720 6:0.157 7:0.579 8:-0.616 9:-0.365
-1 0:-1.781 1:-1.168 2:-2.490 3:-0.172 4:0.523 5:-0.804 6:0.267 7:-0.039 8:1.321 9:-1.293
1 0:-0.042 1:-2.773 2:0.257 3:0.390 4:1.956 5:-0.291 6:0.097 7:0.399 8:-0.646 9:-0.311
-1 0:0.748 1:-1.657 2:0.298 3:-1.472 4:-0.986 5:0.978 6:-1.023 7:0.039 8:1.046 9:-2.256
-1 0:-0.920 1:0.317 2:-0.240 3:0.319 4:0.921 5:-1.311 6:-1.545 7:1.188 8:-1.556 9:-1.000
-1 0:-0.854 1:-1.189 2:-2.071 3:-1.184 4:0.773 5:0.366 6:0.943 7:0.747 8:2.511 9:-0.705
-1 0:-1.026 1:0.004 2:-1.686 3:0.340 4:0.932 5:-0.248 6:0.620 7:0.698 8:1.299 9:-0.480
1 0:0.381 1:1.080 2:0.645 3:-1.466 4:-0.813 5:0.075 6:-1.676 7:1.152 8:-0.524 9:-0.309
1 0:0.213 1:-0.319 2:-0.100 3:0.695 4:0.692 5:0.437 6:-0.576 7:0.142 8:0.694 9:0.521
-1 0:-0.611 1:-0.312 2:-0.932 3:2.257 4:-0.158 5:-0.209 6:-0.891 7:-1.157 8:0.620 9:0.275
1 0:2.625 1:0.078 2:2.005 3:-1.159 4:-0.395 5:2.613 6:0.005 7:0.801 8:1.619 9:0.822
1 0:2.338 1:0.251 2:1.565 3:-0.539 4:-2.016 5:2.516 6:-0.793 7:-2.289 8:1.914 9:-0.961
-1 0:-1.681 1:0.944 2:-0.408 3:1.117 4:-0.913 5:-2.424 6:0.635 7:2.383 8:-2.912 9:0.167
-1 0:-1.588 1:0.317 2:-1.148 3:-0.466 4:0.786 5:-1.636 6:-0.098 7:0.910 8:-1.117 9:0.280
1 0:0.462 1:1.137 2:1.078 3:0.583 4:0.098 5:-0.163 6:-1.060 7:-0.136 8:-1.269 9:2.304
1 0:1.707 1:0.994 2:1.156 3:-0.882 4:1.319 5:1.824 6:-0.710 7:1.739 8:1.367 9:-0.276
1 0:0.128 1:1.536 2:0.430 3:0.609 4:0.286 5:-0.158 6:1.020 7:-0.692 8:-0.633 9:-0.111
-1 0:-0.525 1:-0.249 2:-1.686 3:0.494 4:0.049 5:0.581 6:-0.993 7:0.842 8:2.430 9:0.280
-1 0:-2.047 1:-1.617 2:-0.547 3:-0.738 4:-0.024 5:-2.908 6:0.655 7:0.640 8:-3.438 9:1.100
1 0:1.316 1:-2.740 2:0.853 3:0.270 4:-0.569 5:1.439 6:0.094 7:0.943 8:1.135 9:-0.130
1 0:0.527 1:1.029 2:0.198 3:-0.424 4:-0.909 5:0.700 6:0.496 7:0.771 8:0.763 9:1.129
1 0:-0.210 1:0.181 2:-0.693 3:2.412 4:-0.503 5:0.247 6:-0.979 7:-0.439 8:1.011 9:-0.518
-1 0:-0.783 1:0.451 2:-1.624 3:1.660 4:-0.684 5:0.100 6:0.606 7:-1.756 8:1.715 9:-2.659
1 0:-0.421 1:0.277 2:-0.497 3:0.315 4:-0.971 5:-0.267 6:-1.417 7:0.869 8:0.118 9:-0.467
1 0:1.865 1:0.356 2:1.234 3:0.355 4:-1.769 5:2.019 6:-1.116 7:0.767 8:1.558 9:-0.599
-1 0:-0.432 1:1.141 2:-1.600 3:0.853 4:1.467 5:0.660 6:-0.761 7:0.858 8:2.454 9:-0.292
1 0:0.922 1:0.553 2:0.385 3:0.221 4:-0.046 5:1.190 6:-2.656 7:1.513 8:1.250 9:0.863
1 0:0.537 1:0.481 2:1.201 3:0.063 4:-1.541 5:-0.144 6:-0.346 7:-0.464 8:-1.364 9:-0.956
1 0:0.359 1:0.781 2:0.780 3:-2.070 4:1.494 5:-0.076 6:0.416 7:-1.156 8:-0.862 9:-0.543
1 0:1.135 1:0.685 2:0.627 3:0.142 4:0.371 5:1.335 6:-0.233 7:1.733 8:1.213 9:-0.309
1 0:2.622 1:-0.115 2:1.830 3:-0.965 4:0.457 5:2.757 6:0.194 7:0.876 8:1.985 9:-0.086
1 0:1.541 1:0.582 2:0.825 3:0.124 4:-2.095 5:1.835 6:1.720 7:0.930 8:1.703 9:1.520
-1 0:-0.967 1:-1.375 2:0.049 3:-2.223 4:-0.644 5:-1.638 6:0.017 7:-0.354 8:-2.282 9:-0.456
1 0:1.703 1:0.820 2:1.426 3:0.279 4:0.463 5:1.587 6:-0.110 7:-1.055 8:0.782 9:-0.783
1 0:-0.104 1:-0.116 2:-0.237 3:2.064 4:-2.031 5:0.033 6:-0.391 7:0.494 8:0.275 9:-0.652
1 0:-0.313 1:0.610 2:0.195 3:-0.507 4:-1.189 5:-0.683 6:-1.383 7:-1.583 8:-1.121 9:-0.726
-1 0:-0.158 1:0.032 2:0.879 3:0.676 4:-0.636 5:-1.015 6:0.539 7:-0.674 8:-2.239 9:-0.770
1 0:0.509 1:1.658 2:1.119 3:-0.680 4:-0.118 5:-0.120 6:0.370 7:-1.307 8:-1.251 9:-0.399
1 0:0.889 1:-0.397 2:2.184 3:-0.298 4:-0.133 5:-0.406 6:0.677 7:-0.637 8:-2.674 9:0.426
-1 0:1.591 1:-1.093 2:2.057 3:0.439 4:-1.491 5:0.861 6:-0.208 7:0.396 8:-0.822 9:0.577
-1 0:-0.586 1:-0.395 2:-1.209 3:-1.128 4:-0.268 5:0.069 6:0.161 7:-0.191 8:1.269 9:-0.016
1 0:0.320 1:-0.238 2:-0.111 3:-0.493 4:-1.424 5:0.624 6:0.232 7:-0.597 8:0.959 9:0.157
1 0:-0.210 1:-2.201 2:-0.794 3:-0.051 4:0.199 5:0.334 6:2.021 7:-0.469 8:1.228 9:0.339
-1 0:-2.229 1:0.052 2:-1.589 3:1.543 4:-0.740 5:-2.315 6:-1.602 7:-1.104 8:-1.616 9:0.625
-1 0:-1.858 1:1.337 2:-1.015 3:-0.239 4:-0.369 5:-2.195 6:0.824 7:2.163 8:-2.009 9:0.772
-1 0:0.957 1:0.379 2:1.752 3:-0.042 4:2.259 5:0.077 6:-0.410 7:-0.017 8:-1.596 9:-0.944
1 0:0.289 1:-1.347 2:0.449 3:-0.160 4:0.694 5:0.092 6:-0.461 7:-1.334 8:-0.310 9:0.666
-1 0:-0.819 1:0.682 2:-0.295 3:-0.690 4:-0.803 5:-1.098 6:-0.651 7:-1.034 8:-1.212 9:0.857
-1 0:-0.652 1:-0.521 2:-0.815 3:-0.478 4:-1.843 5:-0.377 6:-0.689 7:-0.652 8:0.276 9:1.365
-1 0:-1.147 1:1.713 2:-0.354 3:-0.826 4:-0.745 5:-1.589 6:-0.462 7:-0.068 8:-1.824 9:-1.316
";

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
/// empty-model fallback is not taken, and the model classifies far better than chance ([`DENSE`]).
#[test]
fn fit_learns_a_dense_logistic_design_with_the_defaults() {
    let files = FitFiles::with_data("dense.svm", DENSE);
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
    let data = DENSE.to_string();
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
