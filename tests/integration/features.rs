//! Feature names and indices, and the start-up checks around them, on the real binary: numeric and
//! named features never share an index, a JSON `features` object with a repeated key or a bad name is
//! refused naming its line, the dictionary's bounds, the tokens file's `#`, and a checkpoint that no
//! longer fits a lowered `max_dim` / `max_abs_value`.

use std::path::Path;

use crate::common::{assert_failed_with, serve_args, test_config, thresher, Daemon};

const READ: &str = "rrrrrrrrrrrrrrrr-read";

/// A `#` inside a token is part of the token: the prefix before it does not authenticate. A trailing
/// `# comment` after a token stops the start naming the line.
#[test]
fn a_hash_inside_a_token_is_part_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("# readers\nread {READ}#tail\n")).unwrap();
    let d = Daemon::start(&["--auth-tokens-file", tokens.to_str().unwrap()]);
    let status = |token: &str| {
        d.client
            .get(format!("{}/v1/model", d.base))
            .header("authorization", format!("Bearer {token}"))
            .send()
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(status(READ), 401, "the prefix before `#` is not a token");
    assert_ne!(status(&format!("{READ}#tail")), 401, "the whole token is");
    drop(d);
    std::fs::write(&tokens, format!("read {READ} # the dashboard\n")).unwrap();
    let out = thresher(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--auth-tokens-file",
        tokens.to_str().unwrap(),
    ]);
    assert_failed_with(&out, "line 1: expected `SCOPE TOKEN`");
    assert_failed_with(&out, "`#` starts a comment only at the start of a line");
    assert!(
        !crate::common::stderr(&out).contains(READ),
        "no token echoed"
    );
}

/// A repeated key in a `"features"` object (also spelt through an escape, also in an array body) and
/// a name that is empty, whitespace, or holds NUL or a bidi control are each a 400 naming the line,
/// and add no name to the dictionary.
#[test]
fn repeated_and_unprintable_names_are_refused_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(dir.path(), "k = 2", "");
    let d = Daemon::start(&["--config", config.to_str().unwrap()]);
    let good = r#"{"label": 1, "features": {"good": 1}}"#;
    let bad = [
        (
            r#"{"label": 1, "features": {"price": 1, "price": 2}}"#,
            "duplicate feature name \"price\"",
        ),
        (
            r#"{"label": 1, "features": {"p": 1, "\u0070": 2}}"#,
            "duplicate feature name \"p\"",
        ),
        (
            r#"{"label": 1, "features": {"": 1}}"#,
            "feature name is empty",
        ),
        (r#"{"label": 1, "features": {" ": 1}}"#, "only whitespace"),
        (r#"{"label": 1, "features": {"a\u0000": 1}}"#, "U+0000"),
        (
            r#"{"label": 1, "features": {"cost\u202egnp": 1}}"#,
            "U+202E",
        ),
        (r#"{"label": 1, "features": {"\u2067x": 1}}"#, "U+2067"),
    ];
    for (object, message) in bad {
        for (content_type, body) in [
            ("application/x-ndjson", format!("{good}\n{object}\n")),
            ("application/json", format!("[{good}, {object}]")),
        ] {
            let (status, reply, _) = d.post("/v1/samples", content_type, body.clone());
            assert_eq!(status, 400, "{body}: {reply}");
            assert_eq!(reply["line"].as_u64(), Some(2), "{body}: {reply}");
            let error = reply["error"].as_str().unwrap();
            assert!(error.contains(message), "{body}: {error}");
            assert_eq!(
                d.metric("thresher_feature_names"),
                0.0,
                "{body}: nothing registered"
            );
        }
    }
    let (status, reply, _) = d.post("/v1/samples", "application/x-ndjson", format!("{good}\n"));
    assert_eq!(status, 202, "{reply}");
    assert_eq!(d.metric("thresher_feature_names"), 1.0);
}

/// A checkpoint that holds a feature index at or above a lowered `ingest.max_dim`, or a number above
/// a lowered `ingest.max_abs_value`, stops the start naming the key and the value it needs (instead
/// of restoring silently); with the old limits it restores.
#[test]
fn a_checkpoint_beyond_lowered_limits_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let write_config = |extra: &str| test_config(dir.path(), "k = 2", extra);
    let config = write_config("");
    let d = Daemon::start(&serve_args(&config, &data));
    let body: String = (0..50)
        .map(|i| format!("{} 3:{} 500:{}\n", i % 2, 1 + i % 3, 1000 - i))
        .collect();
    assert_eq!(d.post("/v1/samples", "text/plain", body).0, 202);
    d.wait_until_settled();
    let (status, _) = d.terminate();
    assert!(status.success());
    let start = |extra: &str| {
        let config = write_config(extra);
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
    let out = start("[ingest]\nmax_dim = 400\nmax_named_features = 400\n");
    assert_failed_with(&out, "feature index 500, not below ingest.max_dim (400)");
    assert_failed_with(&out, "ingest.max_dim to at least 501");
    let out = start("[ingest]\nmax_abs_value = 100\n");
    assert_failed_with(&out, "above ingest.max_abs_value");
    assert_failed_with(&out, "at least 1e3");
    restarts_with(&write_config(""), &data);
}

/// The daemon restores from `data` with `config` and serves the restored model.
fn restarts_with(config: &Path, data: &Path) {
    let d = Daemon::start(&serve_args(&config, &data));
    assert!(d.model().is_some(), "restored: {}", d.log());
}

/// Numeric indices and names never share an index: after 200 numeric samples, a named body is a 400
/// naming its line (it used to be given index 0 and publish the numeric feature's weight as "price"),
/// the dictionary stays empty, and the kind survives a restart. A daemon whose first features are
/// names refuses numeric ones the same way, and one body holding both is refused at the second kind.
#[test]
fn numeric_and_named_features_never_share_an_index() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = test_config(dir.path(), "k = 2", "");
    let d = Daemon::start(&serve_args(&config, &data));
    let numeric: String = (0..200).map(|_| "3 0:1\n").collect();
    assert_eq!(d.post("/v1/samples", "text/plain", numeric).0, 202);
    let named = "{\"label\": 1}\n{\"label\": -1, \"features\": {\"price\": 1}}\n";
    let refused = |d: &Daemon, what: &str| {
        let (status, reply, _) = d.post("/v1/samples", "application/x-ndjson", named);
        assert_eq!(
            (status, reply["line"].as_u64()),
            (400, Some(2)),
            "{what}: {reply}"
        );
        let error = reply["error"].as_str().unwrap();
        assert!(
            error.contains("named features are refused"),
            "{what}: {error}"
        );
    };
    refused(&d, "after numeric samples");
    assert_eq!(d.metric("thresher_feature_names"), 0.0);
    let model = d.wait_until_settled();
    assert!(model.get("feature_names").is_none(), "{model}");
    let (status, _) = d.terminate();
    assert!(status.success());
    let d = Daemon::start(&serve_args(&config, &data));
    refused(&d, "after a restart");
    drop(d);

    let d = Daemon::start(&["--config", config.to_str().unwrap()]);
    let mixed = "{\"label\": 1, \"features\": {\"a\": 1}}\n{\"label\": 1, \"features\": {}}\n\
                 {\"label\": 1, \"indices\": [0], \"values\": [1]}\n";
    let (status, reply, _) = d.post("/v1/samples", "application/x-ndjson", mixed);
    assert_eq!((status, reply["line"].as_u64()), (400, Some(3)), "{reply}");
    assert!(
        reply["error"].as_str().unwrap().contains("in one body"),
        "{reply}"
    );
    let first = "{\"label\": 1, \"features\": {\"a\": 1}}\n";
    assert_eq!(d.post("/v1/samples", "application/x-ndjson", first).0, 202);
    let (status, reply, _) = d.post("/v1/samples", "text/plain", "1\n2 7:1\n");
    assert_eq!((status, reply["line"].as_u64()), (400, Some(2)), "{reply}");
    let error = reply["error"].as_str().unwrap();
    assert!(
        error.contains("numeric feature indices are refused"),
        "{error}"
    );
    assert_eq!(
        d.post("/v1/samples", "text/plain", "1\n").0,
        202,
        "no features fit either kind"
    );
}

/// The dictionary lives in its own file beside the checkpoint, rewritten only when it has grown:
/// checkpoints of a changed model with an unchanged dictionary leave `thresher.names` as it was (the
/// same inode: no rename over it), the checkpoint itself holds no name, and a restart restores them.
#[test]
fn an_unchanged_dictionary_is_not_rewritten() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // No intercept: the labels do not depend on `price`, so only the constant `size` (which an
    // intercept would replace) puts a name in the model's support.
    let config = test_config(
        dir.path(),
        "k = 2\nintercept = false",
        "[checkpoint]\ninterval_s = 1\n",
    );
    let d = Daemon::start(&serve_args(&config, &data));
    let sample = |i: usize| {
        format!(
            "{{\"label\": {}, \"features\": {{\"price\": {}, \"size\": 1}}}}\n",
            i % 3,
            i % 5
        )
    };
    let body: String = (0..50).map(sample).collect();
    assert_eq!(
        d.post("/v1/samples", "application/x-ndjson", body.clone())
            .0,
        202
    );
    let written = |d: &Daemon| d.metric("thresher_checkpoints_total{outcome=\"written\"}");
    d.wait_for("a checkpoint", |d| (written(d) >= 1.0).then_some(()));
    let names = data.join("thresher.names");
    let inode = std::fs::metadata(&names).unwrap().ino();
    let before = written(&d);
    let body: String = (50..90).map(sample).collect();
    assert_eq!(d.post("/v1/samples", "application/x-ndjson", body).0, 202);
    d.wait_for("a checkpoint of the new samples", |d| {
        (written(d) > before).then_some(())
    });
    assert_eq!(
        std::fs::metadata(&names).unwrap().ino(),
        inode,
        "names not rewritten"
    );
    let ckpt = std::fs::read(data.join("thresher.ckpt")).unwrap();
    assert!(
        !ckpt.windows(5).any(|w| w == b"price"),
        "no name in the checkpoint"
    );
    let (status, _) = d.terminate();
    assert!(status.success());
    let d = Daemon::start(&serve_args(&config, &data));
    let model = d.model().expect("restored");
    let shown = model["feature_names"].to_string();
    assert!(shown.contains("price") || shown.contains("size"), "{model}");
    assert_eq!(d.metric("thresher_feature_names"), 2.0);
}
