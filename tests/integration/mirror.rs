//! `thresher fit --solver mirror|smidas` end to end through the binary.

use thresher::model::Model;
use thresher::synth;

use crate::common::{assert_failed_with, assert_succeeded, thresher, FitFiles};

#[test]
fn fit_with_mirror_descent_recovers_a_planted_support_and_certifies_it() {
    let problem = synth::sparse_stream(1500, 100, 6, 12, 0.05, false, 42);
    let files = FitFiles::new(&problem.samples);
    for (mirror, constraint) in [
        ("euclidean", "none"),
        ("hypentropy", "box:3"),
        ("euclidean", "l1:20"),
    ] {
        let out = thresher(&[
            "fit",
            &files.data,
            "--loss",
            "squared",
            "-k",
            "6",
            "--lambda",
            "0.001",
            "--solver",
            "mirror",
            "--mirror",
            mirror,
            "--constraint",
            constraint,
            "--batch",
            "1",
            "--epochs",
            "15",
            "--tol",
            "0",
            "--out",
            &files.model,
            "--trace",
            &files.trace,
        ]);
        let stderr = assert_succeeded(&out, &format!("{mirror} {constraint}"));
        let name = format!("mirror-{mirror}");
        assert!(stderr.contains(&format!("solver={name} ")), "{stderr}");
        let model = files.load_model();
        assert_eq!(model.solver, name);
        assert_eq!(
            model.support,
            problem.true_support(),
            "{mirror} {constraint}"
        );
        let c = model.certificate;
        assert!(
            c.gap >= -1e-12 && c.relative_gap() < 0.05,
            "{mirror} {constraint}: {c:?}"
        );
        let trace = files.read_trace();
        assert_eq!(trace.lines().count(), 16, "{trace}");
    }
}

#[test]
fn fit_with_smidas_reports_its_support_and_bad_mirror_arguments_fail_cleanly() {
    let problem = synth::sparse_stream(300, 40, 4, 8, 0.05, false, 7);
    let files = FitFiles::new(&problem.samples);
    let data = files.data.as_str();
    let base = [
        "fit", data, "--loss", "squared", "-k", "4", "--lambda", "0.01", "--epochs", "3",
    ];
    let out = thresher(&[&base[..], &["--solver", "smidas", "--l1", "0.3"]].concat());
    let stderr = assert_succeeded(&out, "smidas");
    assert!(
        stderr.contains("solver=smidas ") && stderr.contains(" support="),
        "{stderr}"
    );
    let model: Model = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(model.solver, "smidas");
    assert!(!model.support.is_empty());

    for (extra, message) in [
        (&["--solver", "smidas"][..], "--l1"),
        (
            &["--solver", "mirror", "--constraint", "ball:2"][..],
            "constraint",
        ),
        (
            &[
                "--solver",
                "mirror",
                "--mirror",
                "hypentropy",
                "--beta",
                "0",
            ][..],
            "beta",
        ),
        (&["--solver", "mirror", "--batch", "0"][..], "batch"),
    ] {
        assert_failed_with(&thresher(&[&base[..], extra].concat()), message);
    }
}
