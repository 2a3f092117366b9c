//! `thresher fit --solver subset` (and `--path`, `dual-ast`) end to end through the binary.

use thresher::synth;

use crate::common::{assert_failed_with, assert_succeeded, thresher, write, FitFiles};

fn planted() -> (FitFiles, synth::Synthetic) {
    let problem = synth::sparse_stream(400, 50, 5, 10, 0.05, false, 42);
    (FitFiles::new(&problem.samples), problem)
}

#[test]
fn subset_fit_recovers_the_planted_support_with_a_certificate_and_trace() {
    let (files, problem) = planted();
    for solver in ["subset", "dual-ast"] {
        let out = thresher(&[
            "fit",
            &files.data,
            "--solver",
            solver,
            "--lambda0",
            "1",
            "--lambda1",
            "0.1",
            "--lambda2",
            "0.01",
            "--out",
            &files.model,
            "--trace",
            &files.trace,
        ]);
        let stderr = assert_succeeded(&out, solver);
        assert!(
            stderr.contains(&format!("solver={solver} ")) && stderr.contains("screened="),
            "{stderr}"
        );
        let model = files.load_model();
        assert_eq!(model.solver, solver);
        assert_eq!(model.support, problem.true_support(), "{solver}");
        assert_eq!(
            (model.lambda0, model.lambda1, model.lambda2),
            (Some(1.0), Some(0.1), Some(0.01))
        );
        assert!(
            model.certificate.gap >= -1e-9 && model.certificate.gap.is_finite(),
            "{:?}",
            model.certificate
        );
        // Weights come back in the data's scale: the truth shrunk by at most a few percent by l1 + l2.
        for (&j, &w) in model.support.iter().zip(&model.weights) {
            let truth = problem.truth[j as usize];
            assert!(
                (w - truth).abs() < 0.05 * truth.abs(),
                "{solver} feature {j}: {w} vs {truth}"
            );
        }
        let trace = files.read_trace();
        let mut lines = trace.lines();
        assert_eq!(
            lines.next().unwrap(),
            "epoch,seconds,primal,dual,gap,support_size,support_changes,active_set_size,screened"
        );
        let rows: Vec<Vec<f64>> = lines
            .map(|l| l.split(',').map(|v| v.parse::<f64>().unwrap()).collect())
            .collect();
        assert!(!rows.is_empty());
        for pair in rows.windows(2) {
            assert!(
                pair[1][2] <= pair[0][2] + 1e-9 * pair[0][2].abs(),
                "primal rose: {pair:?}"
            );
        }
        assert!(
            rows.iter().all(|r| r[4] >= -1e-9 * r[2].abs().max(1.0)),
            "negative gap in {trace}"
        );
    }
}

#[test]
fn subset_path_walks_lambda0_down_from_the_empty_model() {
    let (files, problem) = planted();
    let out = thresher(&[
        "fit",
        &files.data,
        "--solver",
        "subset",
        "--lambda0",
        "1",
        "--lambda1",
        "0.1",
        "--lambda2",
        "0.01",
        "--path",
        "--path-steps",
        "6",
        "--out",
        &files.model,
    ]);
    assert_succeeded(&out, "subset --path");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines = stdout.lines();
    assert_eq!(
        lines.next().unwrap(),
        "lambda0,support_size,primal,dual,gap,outer_steps,seconds,stop"
    );
    let rows: Vec<Vec<String>> = lines
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    assert_eq!(rows.len(), 6, "{stdout}");
    let lambda0: Vec<f64> = rows.iter().map(|r| r[0].parse().unwrap()).collect();
    let support: Vec<usize> = rows.iter().map(|r| r[1].parse().unwrap()).collect();
    assert!(lambda0.windows(2).all(|w| w[0] > w[1]), "{lambda0:?}");
    assert!((lambda0[5] - 1.0).abs() < 1e-9);
    assert_eq!(
        support[0], 0,
        "the path starts at lambda0_max, where the empty model is optimal"
    );
    assert_eq!(support[5], 5, "{stdout}");
    for r in &rows {
        assert!(r[4].parse::<f64>().unwrap() >= -1e-9, "{stdout}");
    }
    let model = files.load_model();
    assert_eq!(model.support, problem.true_support());
    assert_eq!(model.lambda0, Some(1.0));
}

#[test]
fn subset_and_k_sparse_flags_are_checked() {
    let (files, _) = planted();
    let data = files.data.as_str();
    let out = thresher(&["fit", data, "--solver", "subset", "--lambda2", "1"]);
    assert_failed_with(&out, "--lambda0 is required for --solver subset");
    let out = thresher(&[
        "fit",
        data,
        "--solver",
        "subset",
        "--lambda0",
        "1",
        "--lambda2",
        "0",
    ]);
    assert_failed_with(&out, "lambda2 must be finite and > 0");
    let out = thresher(&[
        "fit", data, "--solver", "diht", "--loss", "squared", "--lambda", "0.1",
    ]);
    assert_failed_with(&out, "-k/--k is required for --solver diht");
    let out = thresher(&[
        "fit",
        data,
        "--solver",
        "subset",
        "--loss",
        "hinge",
        "--lambda0",
        "1",
        "--lambda2",
        "1",
    ]);
    assert_failed_with(&out, "squared or logistic only");
}

#[test]
fn subset_fit_with_logistic_loss_finds_the_planted_support_and_classifies() {
    let problem = synth::sparse_stream(600, 50, 5, 10, 0.0, true, 7);
    let files = FitFiles::new(&problem.samples);
    let out = thresher(&[
        "fit",
        &files.data,
        "--solver",
        "subset",
        "--loss",
        "logistic",
        "--lambda0",
        "2",
        "--lambda1",
        "0.1",
        "--lambda2",
        "0.05",
        "--out",
        &files.model,
        "--trace",
        &files.trace,
    ]);
    let stderr = assert_succeeded(&out, "subset logistic");
    let model = files.load_model();
    assert_eq!(model.loss, thresher::loss::LossKind::Logistic);
    assert_eq!(model.support, problem.true_support(), "{stderr}");
    assert!(
        model.certificate.gap >= -1e-9 && model.certificate.gap < 1e-3 * model.certificate.primal,
        "{:?}",
        model.certificate
    );
    // Every planted weight has the right sign, and the model classifies its training data well.
    for (&j, &w) in model.support.iter().zip(&model.weights) {
        assert!(w * problem.truth[j as usize] > 0.0, "feature {j}: {w}");
    }
    let correct = problem
        .samples
        .iter()
        .filter(|s| {
            let score: f64 = s
                .indices
                .iter()
                .zip(&s.values)
                .filter_map(|(&j, &v)| {
                    model
                        .support
                        .iter()
                        .position(|&k| k == j)
                        .map(|at| v * model.weights[at])
                })
                .sum();
            score * s.label > 0.0
        })
        .count();
    assert!(correct >= 570, "{correct} of 600 correct");
    let trace = files.read_trace();
    assert!(trace.lines().count() >= 2, "{trace}");
    // Labels other than +-1 are a clear error.
    let bad = write(files.dir.path(), "bad.svm", "0.5 1:1\n-1 2:1\n");
    let out = thresher(&[
        "fit",
        &bad,
        "--solver",
        "subset",
        "--loss",
        "logistic",
        "--lambda0",
        "1",
        "--lambda2",
        "1",
    ]);
    assert_failed_with(&out, "labels -1 or +1");
}
