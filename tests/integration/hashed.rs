//! Hashed feature names (`ingest.feature_names = "hashed"`) in the real daemon: more distinct names
//! than `ingest.max_named_features` are accepted (the dictionary refuses them), the model reports
//! its support's names, predictions take names, a restart from the checkpoint restores the model,
//! and a restart with other bits, another seed or the dictionary is refused naming both settings.

use std::path::Path;

use crate::common::*;

/// `n` training samples: the label is the sign of feature `"signal"`, and each sample also carries
/// three names of its own (`noise{i}_{j}`), so `3n` distinct names in all.
fn named_samples(from: usize, n: usize) -> String {
    (from..from + n)
        .map(|i| {
            let y = if i % 2 == 0 { 1 } else { -1 };
            format!(
                "{{\"label\": {y}, \"features\": {{\"signal\": {y}, \"noise{i}_a\": 0.1, \
                 \"noise{i}_b\": -0.1, \"noise{i}_c\": 0.05}}}}\n"
            )
        })
        .collect()
}

/// A config of its own folder under `dir` (`test_config` writes `thresher.toml` in the folder given).
fn hashed_config(dir: &Path, bits: u32, seed: u64) -> std::path::PathBuf {
    let dir = dir.join(format!("hashed-{bits}-{seed}"));
    std::fs::create_dir_all(&dir).unwrap();
    test_config(
        &dir,
        "k = 2\nloss = \"logistic\"\nlambda = 0.01",
        &format!(
            "[ingest]\nmax_named_features = 100\nfeature_names = \"hashed\"\nhash_bits = {bits}\n\
             hash_seed = {seed}\n"
        ),
    )
}

#[test]
fn hashed_names_never_fill_and_the_support_keeps_its_names() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let body = named_samples(0, 200);

    // The dictionary holds 100 names: 600 distinct names are refused.
    let dictionary = test_config(
        &{
            let d = dir.path().join("dictionary");
            std::fs::create_dir_all(&d).unwrap();
            d
        },
        "k = 2\nloss = \"logistic\"\nlambda = 0.01",
        "[ingest]\nmax_named_features = 100\n",
    );
    let d = Daemon::start(&["--config", dictionary.to_str().unwrap()]);
    let (status, reply, _) = d.post("/v1/samples", "application/x-ndjson", body.clone());
    assert_eq!(status, 400, "{reply}");
    assert!(
        reply["error"]
            .as_str()
            .unwrap()
            .contains("feature dictionary is full"),
        "{reply}"
    );
    drop(d);

    // Hashed: every name is accepted, nothing is registered.
    let config = hashed_config(dir.path(), 16, 0);
    let d = Daemon::start(&serve_args(&config, &data));
    let (status, reply, _) = d.post("/v1/samples", "application/x-ndjson", body);
    assert_eq!(status, 202, "{reply}");
    let (status, reply, _) = d.post(
        "/v1/samples",
        "application/x-ndjson",
        named_samples(200, 200),
    );
    assert_eq!(status, 202, "{reply}");
    assert_eq!(d.metric("thresher_feature_names"), 0.0);
    let model = d.wait_for("a model with signal in its support, named", |d| {
        let m = d.model()?;
        m["feature_names"]
            .to_string()
            .contains("\"signal\"")
            .then_some(m)
    });
    assert_finite_model(&model);
    assert_eq!(model["feature_hashing"]["bits"], 16, "{model}");
    let names = model["feature_names"].as_array().unwrap();
    assert_eq!(names.len(), support(&model).len(), "{model}");
    assert!(d.metric("thresher_hashed_name_collisions_total") >= 0.0);
    assert!(d.metric("thresher_hashed_names_evicted_total") >= 0.0);

    // Predictions take names; an unseen name hashes too and changes nothing unless it collides.
    let (status, reply, _) = d.post(
        "/v1/predict",
        "application/x-ndjson",
        "{\"features\": {\"signal\": 1}}\n{\"features\": {\"signal\": -1, \"never seen\": 1}}\n",
    );
    assert_eq!(status, 200, "{reply}");
    let p = reply["predictions"].as_array().unwrap();
    assert!(p[0].as_f64().unwrap() > p[1].as_f64().unwrap(), "{reply}");

    // The feature-kind rule holds: numeric indices are refused once names are taken.
    let (status, reply, _) = d.post("/v1/samples", "text/plain", "1 3:1\n");
    assert_eq!(status, 400, "{reply}");
    assert!(
        reply["error"]
            .as_str()
            .unwrap()
            .contains("numeric feature indices are refused"),
        "{reply}"
    );
    let version = model["version"].as_u64().unwrap();
    let (status, _) = d.terminate();
    assert!(status.success());

    // A restart restores the model; the support's names come back as they are seen again.
    let d = Daemon::start(&serve_args(&config, &data));
    let restored = d.model().expect("restored");
    assert!(
        restored["version"].as_u64().unwrap() >= version,
        "{restored}"
    );
    assert_eq!(restored["samples_seen"], 400, "{restored}");
    assert_eq!(restored["feature_hashing"]["bits"], 16, "{restored}");
    let (status, reply, _) = d.post(
        "/v1/samples",
        "application/x-ndjson",
        named_samples(400, 20),
    );
    assert_eq!(status, 202, "{reply}");
    d.wait_for("the restored support named again", |d| {
        let m = d.model()?;
        m["feature_names"]
            .to_string()
            .contains("\"signal\"")
            .then_some(())
    });
    let (status, _) = d.terminate();
    assert!(status.success());

    // Other bits, another seed or the dictionary: refused, naming both settings.
    let start = |config: &Path| {
        thresher(&[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--config",
            config.to_str().unwrap(),
            "--data-dir",
            data.to_str().unwrap(),
        ])
    };
    let out = start(&hashed_config(dir.path(), 18, 0));
    assert_failed_with(&out, "ingest.hash_bits = 16, ingest.hash_seed = 0");
    assert_failed_with(&out, "ingest.hash_bits = 18, ingest.hash_seed = 0");
    let out = start(&hashed_config(dir.path(), 16, 9));
    assert_failed_with(&out, "ingest.hash_seed = 9");
    let out = start(&dictionary);
    assert_failed_with(&out, "the config has the feature dictionary");
    // The original settings still restore.
    let d = Daemon::start(&serve_args(&hashed_config(dir.path(), 16, 0), &data));
    assert!(d.model().is_some(), "{}", d.log());
}
