//! `thresher fit` / `thresher predict` end to end through the binary.

use thresher::synth;

use crate::common::{assert_failed_with, assert_succeeded, thresher, write, FitFiles};

#[test]
fn fit_then_predict_recovers_a_planted_support() {
    let problem = synth::sparse_stream(400, 50, 5, 10, 0.05, false, 42);
    let files = FitFiles::new(&problem.samples);
    for solver in ["diht", "sdiht", "iht", "htp"] {
        let out = thresher(&[
            "fit",
            &files.data,
            "--loss",
            "squared",
            "-k",
            "5",
            "--lambda",
            "0.01",
            "--solver",
            solver,
            "--epochs",
            "500",
            "--tol",
            "1e-8",
            "--out",
            &files.model,
            "--trace",
            &files.trace,
        ]);
        let stderr = assert_succeeded(&out, solver);
        assert!(
            stderr.contains(&format!("solver={solver} ")) && stderr.contains("stop="),
            "{stderr}"
        );
        let model = files.load_model();
        assert_eq!(model.support, problem.true_support(), "{solver}");
        assert_eq!(model.solver, solver);
        assert!(
            model.certificate.gap >= -1e-12 && model.certificate.gap < 1e-3,
            "{solver}: {:?}",
            model.certificate
        );
        let trace = files.read_trace();
        let mut lines = trace.lines();
        assert_eq!(
            lines.next(),
            Some("epoch,seconds,primal,dual,gap,support_size,support_changes")
        );
        assert!(lines.all(|l| l.split(',').count() == 7));
    }
    let out = thresher(&["predict", "--model", &files.model, &files.data]);
    let stderr = assert_succeeded(&out, "predict");
    let predictions: Vec<f64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(predictions.len(), 400);
    let mse: f64 = stderr
        .trim()
        .rsplit("mse=")
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(mse < 0.05, "{stderr}");
}

#[test]
fn classification_fit_and_predict_report_accuracy() {
    let problem = synth::sparse_stream(600, 40, 4, 8, 0.0, true, 5);
    let files = FitFiles::new(&problem.samples);
    for loss in ["huber", "hinge", "logistic"] {
        let out = thresher(&[
            "fit",
            &files.data,
            "--loss",
            loss,
            "-k",
            "4",
            "--lambda",
            "0.01",
            "--solver",
            "sdiht",
            "--blocks",
            "4",
            "--intercept",
            "--epochs",
            "200",
            "--out",
            &files.model,
        ]);
        assert_succeeded(&out, loss);
        let out = thresher(&["predict", "--model", &files.model, &files.data]);
        let stderr = assert_succeeded(&out, loss);
        let accuracy: f64 = stderr
            .trim()
            .rsplit("accuracy=")
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(accuracy > 0.9, "{loss}: {stderr}");
        let classes = String::from_utf8_lossy(&out.stdout);
        assert!(classes.lines().all(|l| l == "1" || l == "-1"));
    }
}

#[test]
fn json_lines_input_and_unlabelled_prediction() {
    let lines: String = (0..50)
        .map(|i| {
            let x = (i as f64) / 10.0;
            format!(
                "{{\"label\": {}, \"indices\": [1, 3], \"values\": [{x}, 1.0]}}\n",
                2.0 * x
            )
        })
        .collect();
    let files = FitFiles::with_data("train.jsonl", &lines);
    let out = thresher(&[
        "fit",
        &files.data,
        "--loss",
        "squared",
        "-k",
        "1",
        "--lambda",
        "1e-4",
        "--out",
        &files.model,
    ]);
    assert_succeeded(&out, "fit on JSON lines");
    let model = files.load_model();
    assert_eq!(model.support, vec![1], "indices are kept exactly as given");
    assert!((model.weights[0] - 2.0).abs() < 0.01, "{:?}", model.weights);
    let query = write(
        files.dir.path(),
        "q.jsonl",
        "{\"indices\": [1], \"values\": [1.5]}\n",
    );
    let out = thresher(&["predict", "--model", &files.model, &query]);
    assert_succeeded(&out, "predict unlabelled");
    let y: f64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!((y - 3.0).abs() < 0.02, "{y}");
}

#[test]
fn bad_input_is_a_clear_error_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "unsorted.svm",
            "1 1:1\n1 3:1 2:1\n",
            ":2: ",
            "strictly increasing",
        ),
        (
            "duplicate.svm",
            "# c\n1 2:1 2:1\n",
            ":2: ",
            "duplicate feature index 2",
        ),
        ("nonfinite.svm", "1 1:inf\n", ":1: ", "non-finite"),
        (
            "badnum.svm",
            "1 1:1\n\n1 1:x\n",
            ":3: ",
            "bad feature value",
        ),
        ("nolabel.svm", "1:1 2:1\n", ":1: ", "missing label"),
        (
            "badjson.jsonl",
            "{\"label\": 1}\n{\"label\": \n",
            ":2: ",
            "invalid JSON",
        ),
    ];
    for (name, text, line, message) in cases {
        let data = write(dir.path(), name, text);
        let out = thresher(&[
            "fit", &data, "--loss", "squared", "-k", "1", "--lambda", "0.1",
        ]);
        assert_failed_with(&out, &format!("{name}{line}"));
        assert_failed_with(&out, message);
    }
    let data = write(dir.path(), "three.svm", "3 1:1\n1 2:1\n");
    let out = thresher(&[
        "fit", &data, "--loss", "hinge", "-k", "1", "--lambda", "0.1",
    ]);
    assert_failed_with(&out, "label 3 is not valid for hinge");
    let out = thresher(&[
        "fit", &data, "--loss", "squared", "-k", "1", "--lambda", "0",
    ]);
    // Refused as the flag is parsed (`--lambda` takes a number > 0 or `auto`).
    assert_failed_with(
        &out,
        "invalid value '0' for '--lambda <LAMBDA>': expected a number > 0 or \"auto\"",
    );
    let out = thresher(&["predict", "--model", &data, &data]);
    assert_failed_with(&out, "not a thresher model");
}

#[test]
fn a_diverging_step_is_an_error_not_a_model() {
    let problem = synth::paper_ridge(60, 50, 10, 3);
    let files = FitFiles::new(&problem.samples);
    let out = thresher(&[
        "fit",
        &files.data,
        "--loss",
        "squared",
        "-k",
        "10",
        "--lambda",
        "0.01",
        "--step",
        "1000",
        "--epochs",
        "200",
        "--out",
        &files.model,
    ]);
    assert_failed_with(&out, "diverged at epoch");
    assert!(
        !std::path::Path::new(&files.model).exists(),
        "no model is written for a diverged run"
    );
    let out = thresher(&[
        "fit",
        &files.data,
        "--loss",
        "squared",
        "-k",
        "10",
        "--lambda",
        "0.01",
        "--epochs",
        "200",
        "--out",
        &files.model,
    ]);
    assert_succeeded(&out, "the default step converges");
}

/// The `points` of every `<polyline>` in `svg` with `stroke` colour `stroke`, each as its (x, y) pairs.
fn polylines(svg: &roxmltree::Document, stroke: &str) -> Vec<Vec<(f64, f64)>> {
    svg.descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke") == Some(stroke))
        .map(|n| {
            n.attribute("points")
                .unwrap()
                .split_whitespace()
                .map(|p| {
                    let (x, y) = p.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect()
        })
        .collect()
}

#[test]
fn fit_plot_writes_an_svg_with_one_point_per_traced_epoch_in_each_series() {
    let problem = synth::sparse_stream(400, 50, 5, 10, 0.05, false, 42);
    let files = FitFiles::new(&problem.samples);
    let plot = files.dir.path().join("trace.svg");
    let plot = plot.to_str().unwrap();
    let out = thresher(&[
        "fit",
        &files.data,
        "--loss",
        "squared",
        "-k",
        "5",
        "--lambda",
        "0.01",
        "--solver",
        "sdiht",
        "--epochs",
        "40",
        "--tol",
        "0",
        "--trace",
        &files.trace,
        "--plot",
        plot,
    ]);
    assert_succeeded(&out, "fit --plot");
    let epochs = files.read_trace().lines().count() - 1;
    assert_eq!(epochs, 40);
    let text = std::fs::read_to_string(plot).unwrap();
    let svg = roxmltree::Document::parse(&text).expect("well-formed SVG");
    assert_eq!(svg.root_element().tag_name().name(), "svg");
    let labels: Vec<&str> = svg
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .map(str::trim)
        .collect();
    for (name, stroke) in [
        ("primal", "#2563EB"),
        ("dual", "#16A34A"),
        ("gap", "#DC2626"),
        ("support size", "#7C3AED"),
    ] {
        assert!(labels.contains(&name), "no legend {name:?} in {labels:?}");
        let lines = polylines(&svg, stroke);
        let series: Vec<_> = lines.iter().filter(|l| l.len() == epochs).collect();
        assert_eq!(series.len(), 1, "{name}: {lines:?}");
        let xs: Vec<f64> = series[0].iter().map(|p| p.0).collect();
        assert!(
            xs.windows(2).all(|w| w[0] < w[1]),
            "{name}: x follows the epochs"
        );
    }
    // Pixel y grows downwards: the gap shrinks from the first epoch to the last.
    let gap = polylines(&svg, "#DC2626")
        .into_iter()
        .find(|l| l.len() == epochs)
        .unwrap();
    assert!(gap[epochs - 1].1 > gap[0].1, "{gap:?}");

    let out = thresher(&[
        "fit",
        &files.data,
        "--loss",
        "squared",
        "-k",
        "5",
        "--lambda",
        "0.01",
        "--plot",
        "/nonexistent/dir/trace.svg",
    ]);
    assert_failed_with(&out, "cannot write /nonexistent/dir/trace.svg");
}
