//! Sample weights in LIBSVM text (`cost:c`, SVMlight's per-example cost factor) and in `thresher fit`:
//! a sample of integer weight `c` counts exactly as `c` copies of it (the objective is the weighted
//! mean), for DIHT, SDIHT, mirror descent and best subset; bad `cost:` tokens are refused naming the
//! line, by `fit` and by the daemon.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use crate::common::{assert_failed_with, assert_succeeded, thresher, write, Daemon};

/// A seeded regression/classification design: `rows` rows over 12 columns, the label a sparse linear
/// function of three of them (plus noise; its sign for `classify`), and an integer weight 1..=3 each.
/// One row of [`design`]: the label, the integer weight and the (index, value) pairs.
pub(crate) type Row = (f64, u32, Vec<(u32, f64)>);

pub(crate) fn design(rows: usize, classify: bool) -> Vec<Row> {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    (0..rows)
        .map(|_| {
            let mut x: Vec<(u32, f64)> = Vec::new();
            for j in 0..12 {
                let v = (rng.gen_range(-2.0..2.0f64) * 1000.0).round() / 1000.0;
                if rng.gen_bool(0.6) {
                    x.push((j, v));
                }
            }
            let value = |j: u32| x.iter().find(|p| p.0 == j).map_or(0.0, |p| p.1);
            let y = 1.5 * value(1) - 2.0 * value(4) + 0.8 * value(9) + rng.gen_range(-0.3..0.3);
            let y = if classify {
                y.signum()
            } else {
                (y * 1000.0).round() / 1000.0
            };
            (y, rng.gen_range(1..=3u32), x)
        })
        .collect()
}

/// One LIBSVM line, with `cost:c` when the weight is given.
pub(crate) fn line(y: f64, cost: Option<u32>, x: &[(u32, f64)]) -> String {
    let mut s = format!("{y}");
    if let Some(c) = cost {
        s.push_str(&format!(" cost:{c}"));
    }
    for (j, v) in x {
        s.push_str(&format!(" {j}:{v}"));
    }
    s + "\n"
}

/// The design with `cost:c` tokens, and the same design with each row written `c` times.
fn weighted_and_repeated(rows: &[Row]) -> (String, String) {
    let weighted = rows.iter().map(|(y, c, x)| line(*y, Some(*c), x)).collect();
    let repeated = rows
        .iter()
        .flat_map(|(y, c, x)| std::iter::repeat_n(line(*y, None, x), *c as usize))
        .collect();
    (weighted, repeated)
}

/// `thresher fit` on `data` with `args`; the model file as JSON.
fn fit(dir: &std::path::Path, name: &str, data: &str, args: &[&str]) -> Value {
    let (path, out) = (write(dir, name, data), dir.join(format!("{name}.json")));
    let out = out.to_str().unwrap();
    let mut all = vec!["fit", path.as_str(), "--out", out];
    all.extend_from_slice(args);
    assert_succeeded(&thresher(&all), name);
    serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap()
}

/// Support and weights as (index, weight) pairs.
fn coefficients(m: &Value) -> Vec<(u64, f64)> {
    let support = m["support"].as_array().unwrap().iter();
    let weights = m["weights"].as_array().unwrap().iter();
    support
        .zip(weights)
        .map(|(j, w)| (j.as_u64().unwrap(), w.as_f64().unwrap()))
        .collect()
}

/// Same support, weights within `tol` (relative to max(1, |w|)), intercepts too.
fn assert_same_model(a: &Value, b: &Value, tol: f64, what: &str) {
    let (ca, cb) = (coefficients(a), coefficients(b));
    assert_eq!(
        ca.iter().map(|p| p.0).collect::<Vec<_>>(),
        cb.iter().map(|p| p.0).collect::<Vec<_>>(),
        "{what}: support"
    );
    let close = |x: f64, y: f64| (x - y).abs() <= tol * x.abs().max(1.0);
    for ((j, x), (_, y)) in ca.iter().zip(&cb) {
        assert!(close(*x, *y), "{what}: weight {j}: {x} vs {y}");
    }
    let (ia, ib) = (
        a["intercept"].as_f64().unwrap_or(0.0),
        b["intercept"].as_f64().unwrap_or(0.0),
    );
    assert!(close(ia, ib), "{what}: intercept {ia} vs {ib}");
}

#[test]
fn integer_weights_fit_the_model_of_repeated_rows() {
    let dir = tempfile::tempdir().unwrap();
    let tight = ["--tol", "1e-12", "--patience", "0", "--epochs", "3000"];
    for (solver, loss, classify) in [
        ("diht", "squared", false),
        ("diht", "logistic", true),
        ("sdiht", "logistic", true),
    ] {
        let rows = design(90, classify);
        let (weighted, repeated) = weighted_and_repeated(&rows);
        let mut args = vec![
            "--solver", solver, "--loss", loss, "-k", "3", "--lambda", "0.01",
        ];
        args.extend_from_slice(&tight);
        args.extend_from_slice(&["--step", "adaptive", "--intercept", "--blocks", "3"]);
        if solver == "diht" {
            args.truncate(args.len() - 2);
        }
        let a = fit(dir.path(), &format!("w-{solver}-{loss}"), &weighted, &args);
        let b = fit(dir.path(), &format!("r-{solver}-{loss}"), &repeated, &args);
        assert_same_model(&a, &b, 1e-6, &format!("{solver}/{loss}"));
        // The certificate is for the same objective: the weighted mean.
        let (pa, pb) = (
            a["certificate"]["primal"].as_f64().unwrap(),
            b["certificate"]["primal"].as_f64().unwrap(),
        );
        assert!(
            (pa - pb).abs() <= 1e-8 * pb.abs().max(1.0),
            "{solver}/{loss}: primal {pa} vs {pb}"
        );
    }
}

#[test]
fn integer_weights_fit_the_mirror_and_subset_models_of_repeated_rows() {
    let dir = tempfile::tempdir().unwrap();
    let rows = design(90, false);
    let (weighted, repeated) = weighted_and_repeated(&rows);
    // Best subset: weights fold into the rows as sqrt(c) (a sum of squares), exactly repeated rows.
    let subset = [
        "--solver",
        "subset",
        "--lambda0",
        "0.05",
        "--lambda2",
        "0.01",
        "--xi",
        "1e-12",
    ];
    let a = fit(dir.path(), "w-subset", &weighted, &subset);
    let b = fit(dir.path(), "r-subset", &repeated, &subset);
    assert_same_model(&a, &b, 1e-6, "subset");
    // Mirror descent steps one sample at a time, so the paths differ; both reach the weighted-mean
    // optimum to the solver's tolerance.
    let mirror = [
        "--solver",
        "mirror",
        "--loss",
        "squared",
        "-k",
        "3",
        "--lambda",
        "0.01",
        "--tol",
        "1e-9",
        "--patience",
        "0",
        "--epochs",
        "2000",
        "--no-intercept",
    ];
    let a = fit(dir.path(), "w-mirror", &weighted, &mirror);
    let b = fit(dir.path(), "r-mirror", &repeated, &mirror);
    assert_same_model(&a, &b, 1e-3, "mirror");
}

#[test]
fn bad_cost_tokens_are_refused_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    for (body, message) in [
        ("1 1:1\n-1 cost:2 cost:3 2:1\n", "cost given twice"),
        ("1 1:1\n-1 cost:0 2:1\n", "weight must be finite and > 0"),
        ("1 1:1\n-1 cost:abc 2:1\n", "bad cost \"abc\""),
    ] {
        let path = write(dir.path(), "bad.svm", body);
        let out = thresher(&[
            "fit", &path, "--loss", "logistic", "-k", "1", "--lambda", "0.1",
        ]);
        assert_failed_with(&out, message);
        assert_failed_with(&out, "bad.svm:2: ");
    }
    let daemon = Daemon::start(&[]);
    let (status, reply, _) = daemon.post("/v1/samples", "text/plain", "1 1:1\n-1 cost:-1 2:1\n");
    assert_eq!(status, 400, "{reply}");
    assert_eq!(reply["line"], 2, "{reply}");
    let (status, reply, _) = daemon.post(
        "/v1/samples",
        "text/plain",
        "1 cost:2 1:1\n-1 cost:0.5 2:1\n",
    );
    assert_eq!(status, 202, "{reply}");
    assert_eq!(reply["accepted"], 2, "{reply}");
}
