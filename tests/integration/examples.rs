//! The user examples (`examples/`) run as a user runs them: each prints what its header promises.
//!
//! `cargo test` builds the examples next to the test binary (`target/<profile>/examples/`);
//! `cargo test --test integration` does not, so the first test here builds them with cargo (a no-op
//! when they are fresh).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use thresher::synth::{sparse_stream, to_libsvm};
use thresher::Model;

use crate::common::assert_succeeded;

const EXAMPLES: [&str; 3] = ["fit_file", "score_model", "stream_learner"];

/// The built example `name`, from the same profile and target directory as this test binary.
fn example(name: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let dir = BUILT.get_or_init(|| {
        // target/<profile>/deps/integration-<hash>
        let exe = std::env::current_exe().expect("the test binary's path");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target/<profile>");
        let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") => "dev",
            Some(other) => other,
            None => panic!("no profile directory above {}", exe.display()),
        };
        let mut cargo = Command::new(env!("CARGO"));
        // What cargo set for this test process (`CARGO_PKG_NAME`, `CARGO_MANIFEST_DIR`, ...) would read to
        // the nested build as a changed environment and rebuild build scripts that watch those names.
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy();
            if name.starts_with("CARGO_") && name != "CARGO_HOME" {
                cargo.env_remove(&*name);
            }
        }
        cargo
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["build", "--quiet", "--profile", profile])
            .env("CARGO_TARGET_DIR", profile_dir.parent().expect("target/"));
        for e in EXAMPLES {
            cargo.args(["--example", e]);
        }
        let status = cargo.status().expect("run cargo build");
        assert!(status.success(), "cargo build of the examples failed");
        profile_dir.join("examples")
    });
    dir.join(name)
}

fn run(name: &str, args: &[&str]) -> String {
    let out = Command::new(example(name))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run example {name}: {e}"));
    assert_succeeded(&out, name);
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// The number after `key=` in `text`.
fn field(text: &str, key: &str) -> f64 {
    let at = text
        .find(&format!("{key}="))
        .unwrap_or_else(|| panic!("no {key}= in:\n{text}"));
    text[at + key.len() + 1..]
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{key}= is not a number in:\n{text}"))
}

/// A classification file: 2 000 samples, 50 features, labels the sign of 5 of them.
fn classification_file(dir: &Path) -> (String, Vec<u32>) {
    let problem = sparse_stream(2000, 50, 5, 10, 0.05, true, 7);
    let path = dir.join("train.svm");
    std::fs::write(&path, to_libsvm(&problem.samples)).unwrap();
    (path.to_str().unwrap().to_string(), problem.true_support())
}

#[test]
fn fit_file_writes_a_model_with_a_nonnegative_gap() {
    let dir = tempfile::tempdir().unwrap();
    let (data, truth) = classification_file(dir.path());
    let model_path = dir.path().join("model.json");
    let out = run(
        "fit_file",
        &[&data, model_path.to_str().unwrap(), "5", "0.01"],
    );
    let gap = field(&out, "gap");
    assert!(gap >= 0.0 && gap.is_finite(), "{out}");
    assert!(field(&out, "primal") >= field(&out, "dual"), "{out}");
    let model = Model::load(&model_path).expect("the example writes a model file");
    assert_eq!(model.certificate.gap.to_bits(), gap.to_bits(), "{out}");
    assert_eq!(model.support, truth, "{out}");
    assert!(out.contains("loss=Logistic"), "{out}");
}

#[test]
fn score_model_predicts_each_line_of_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let (data, _) = classification_file(dir.path());
    let model_path = dir.path().join("model.json");
    let model = model_path.to_str().unwrap();
    run("fit_file", &[&data, model, "5", "0.01"]);
    let out = run("score_model", &[model, &data]);
    assert_eq!(out.matches("prediction=").count(), 2000, "{out}");
    assert!(field(&out, "gap") >= 0.0, "{out}");
    let accuracy = field(&out, "accuracy");
    assert!(accuracy > 0.9, "{out}");
}

#[test]
fn stream_learner_publishes_a_certified_model_of_the_stream() {
    let out = run("stream_learner", &[]);
    let last = out
        .lines()
        .find(|l| l.starts_with("final:"))
        .unwrap_or_else(|| panic!("no final line:\n{out}"));
    assert_eq!(field(last, "samples_seen"), 40_000.0, "{out}");
    assert_eq!(field(last, "window"), 20_000.0, "{out}");
    assert!(field(last, "version") >= 1.0, "{out}");
    let gap = field(last, "gap");
    assert!(gap >= 0.0 && gap.is_finite(), "{out}");
    let support = out.lines().find(|l| l.starts_with("support="));
    let truth = out.lines().find(|l| l.starts_with("true_support="));
    assert_eq!(
        support.map(|l| &l["support=".len()..]),
        truth.map(|l| &l["true_support=".len()..]),
        "{out}"
    );
}
