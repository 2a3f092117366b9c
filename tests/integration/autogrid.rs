//! `lambda = "auto"` on a small set through the real binary: the members are compared once every
//! member idles though the held-out ring holds fewer than the 50 samples a stream waits for, and the
//! grid extends below its smallest lambda while that ranks best (the record's `extended`), across a
//! restart too.

use thresher::synth::{sparse_stream, to_libsvm};

use crate::common::{serve_args, test_config, Daemon};

/// Squared loss with unit true weights and a grid of strong ridges (100 .. 1): every configured lambda
/// shrinks the model, so the smallest ranks best and lambdas below it join.
const SMALL_GRID: &str = "loss = \"squared\"\nk = 5\nlambda = \"auto\"\nlambda_grid = 3\nlambda_max = 100.0\nlambda_min = 1.0\n";

fn floats(v: &serde_json::Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

#[test]
fn a_small_set_is_served_below_the_configured_grid_and_keeps_it_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(dir.path(), SMALL_GRID, "");
    let data_dir = dir.path().join("data");
    let args = serve_args(&config, &data_dir);
    let data = sparse_stream(150, 100, 5, 10, 0.05, false, 9);
    let d = Daemon::start(&args);
    assert_eq!(
        d.post("/v1/samples", "text/plain", to_libsvm(&data.samples))
            .0,
        202
    );
    // 150 samples: 30 held out, fewer than a stream's 50; before, the grid's middle (10) was served
    // for good. The served lambda lies below the configured grid.
    let model = d.wait_for("a lambda below the configured grid served", |d| {
        let m = d.model()?;
        let lambda = m["lambda"].as_f64()?;
        (m["samples_seen"] == 150 && lambda < 1.0).then_some(m)
    });
    let auto = &model["lambda_auto"];
    assert_eq!(auto["held_out"].as_u64(), Some(30), "{auto}");
    let (grid, extended) = (floats(&auto["grid"]), floats(&auto["extended"]));
    assert_eq!(&grid[..3], &[100.0, 10.0, 1.0], "{auto}");
    assert!(!extended.is_empty() && extended.len() <= 4, "{auto}");
    assert_eq!(&grid[3..], &extended[..], "{auto}");
    for pair in grid[2..].windows(2) {
        assert!((pair[1] * 10.0 / pair[0] - 1.0).abs() < 1e-12, "{grid:?}");
    }
    let live = auto["live"].as_u64().unwrap() as usize;
    assert_eq!(model["lambda"].as_f64().unwrap(), grid[live]);
    let losses = floats(&auto["losses"]);
    assert_eq!(losses.len(), grid.len(), "{auto}");
    assert!(losses[live] < losses[2], "{losses:?}");

    let before = d.wait_until_settled();
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
    // The checkpoint keeps the lambdas that joined and the one served.
    let d = Daemon::start(&args);
    assert_eq!(
        d.post("/v1/samples", "text/plain", to_libsvm(&data.samples))
            .0,
        202
    );
    // The first model certified after the restart has the whole grid (the joined lambdas come back
    // with the selection, not by joining again: that waits for the members to idle).
    let after = d.wait_for("the samples after the restart learned", |d| {
        let m = d.model()?;
        (m["samples_seen"] == 300).then_some(m)
    });
    let before_grid = floats(&before["lambda_auto"]["grid"]);
    let after_grid = floats(&after["lambda_auto"]["grid"]);
    assert!(
        after_grid.len() >= before_grid.len() && after_grid[..before_grid.len()] == before_grid[..],
        "{before_grid:?} then {after_grid:?}"
    );
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
}
