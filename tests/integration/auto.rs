//! `lambda = "auto"` through the real binary: the daemon serving the best of a lambda grid (model JSON,
//! metrics, restart), and `fit --lambda auto` choosing lambda on held-out samples.

use thresher::synth::{sparse_stream, to_libsvm};

use crate::common::{
    assert_failed_with, assert_succeeded, serve_args, test_config, thresher, Daemon, FitFiles,
};

/// Squared loss with unit true weights: lambda = 10 shrinks the model to almost nothing, 1e-2 barely.
/// (Not 1e-3: there, with lambda N = 2, the streaming SDIHT member's progressive loss depends on how many
/// steps the daemon takes between inserts, i.e. on timing; `learner::sdiht::small_lambda_stream`.)
const AUTO_LEARNER: &str = "loss = \"squared\"\nk = 5\nlambda = \"auto\"\nlambda_grid = 3\nlambda_max = 10.0\nlambda_min = 1e-2\nlambda_half_life = 500\n";

#[test]
fn the_daemon_serves_the_small_lambda_a_stream_calls_for_and_keeps_it_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(dir.path(), AUTO_LEARNER, "");
    let data_dir = dir.path().join("data");
    let args = serve_args(&config, &data_dir);
    let data = sparse_stream(4000, 100, 5, 10, 0.05, false, 9);
    let d = Daemon::start(&args);
    // Before any sample the per-member series exist (zeros).
    assert_eq!(
        d.metric("thresher_lambda_progressive_loss{lambda=\"1e-2\",learner=\"primary\"}"),
        0.0
    );
    for chunk in data.samples.chunks(200) {
        assert_eq!(d.post("/v1/samples", "text/plain", to_libsvm(chunk)).0, 202);
    }
    // Held-out samples are scored at every certificate; the served lambda moves once a member has led
    // at three of them in a row.
    // 1e-2, or a lambda that joined below it while the grid's smallest ranked best (which one
    // depends on when certificates fall, so any of them).
    let model = d.wait_for("all samples seen and a lambda <= 1e-2 served", |d| {
        let m = d.model()?;
        (m["samples_seen"] == 4000 && m["lambda_auto"]["live"].as_u64()? >= 2).then_some(m)
    });
    let auto = &model["lambda_auto"];
    let grid: Vec<f64> = auto["grid"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    // The configured grid, and any lambda that joined below it while its smallest ranked best.
    assert!(grid.len() >= 3, "{grid:?}");
    assert_eq!((grid[0], grid[2]), (10.0, 1e-2));
    let live = auto["live"].as_u64().unwrap() as usize;
    assert_eq!(model["lambda"].as_f64().unwrap(), grid[live]);
    assert!(auto["switches"].as_u64().unwrap() >= 1, "{auto}");
    assert_eq!(auto["criterion"], "holdout");
    let numbers = |key: &str| -> Vec<f64> {
        auto[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect()
    };
    let (holdout, progressive) = (numbers("losses"), numbers("progressive"));
    assert!(
        holdout[2] < holdout[1] && holdout[1] < holdout[0],
        "{holdout:?}"
    );
    // With sdiht the members share the served member's window and only the served member predicts
    // each sample: the start member (0.1), served through the stream, has a progressive loss; the
    // others' stay at 0 until they serve.
    assert!(progressive[1] > 0.0, "{progressive:?}");
    assert!(
        progressive.iter().all(|l| l.is_finite() && *l >= 0.0),
        "{progressive:?}"
    );
    // The gauge is read a moment later: the served lambda may have moved down the grid since.
    let gauge = d.metric("thresher_lambda_live{learner=\"primary\"}");
    assert!(gauge <= 1e-2 && grid.contains(&gauge), "{gauge} {grid:?}");
    for name in ["progressive", "holdout"] {
        let metric = format!("thresher_lambda_{name}_loss{{lambda=\"1e-2\",learner=\"primary\"}}");
        let served = d.metric(&metric);
        let floor = if name == "holdout" { 0.0 } else { -1.0 };
        assert!(served > floor && served.is_finite(), "{metric} = {served}");
    }
    assert!(d.metric("thresher_lambda_switches_total{learner=\"primary\"}") >= 1.0);
    // One sample in 5 held out (800), in a ring of a fifth of the 2000-sample window: the oldest 400
    // dropped, and counted.
    assert_eq!(
        (auto["held_out"].as_u64(), auto["held_out_dropped"].as_u64()),
        (Some(400), Some(400))
    );
    d.wait_for("the held-out ring's metrics", |d| {
        let ring = d.metric("thresher_lambda_holdout_samples{learner=\"primary\"}");
        let dropped = d.metric("thresher_lambda_holdout_dropped_total{learner=\"primary\"}");
        (ring == 400.0 && dropped == 400.0).then_some(())
    });
    let before = d.wait_until_settled();
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");

    // The checkpoint carries the served member and the selection.
    let d = Daemon::start(&args);
    let after = d.model().expect("restored at once");
    for field in [
        "version",
        "lambda",
        "lambda_auto",
        "support",
        "samples_seen",
    ] {
        assert_eq!(after[field], before[field], "{field}");
    }
    assert_eq!(
        d.post("/v1/samples", "text/plain", to_libsvm(&data.samples[..200]))
            .0,
        202
    );
    let moved = d.wait_for("learning after the restart", |d| {
        let m = d.model()?;
        (m["samples_seen"] == 4200).then_some(m)
    });
    // 1e-2, or a lambda that joined below it (the grid extends while its smallest ranks best).
    assert!(moved["lambda"].as_f64().unwrap() <= 1e-2, "{moved}");
    let (status, log) = d.terminate();
    assert!(status.success(), "{log}");
}

#[test]
fn fit_lambda_auto_picks_the_lowest_holdout_loss_and_records_the_grid() {
    let data = sparse_stream(1500, 100, 5, 10, 0.05, false, 9);
    let files = FitFiles::new(&data.samples);
    let out = thresher(&[
        "fit",
        &files.data,
        "--loss",
        "squared",
        "-k",
        "5",
        "--lambda",
        "auto",
        "--lambda-max",
        "10",
        "--lambda-min",
        "1e-3",
        "--lambda-grid",
        "3",
        "--epochs",
        "50",
        "--cv-below",
        "0",
        "--lambda-extend",
        "0",
        "--out",
        &files.model,
    ]);
    let stderr = assert_succeeded(&out, "fit --lambda auto");
    assert_eq!(
        stderr.matches("lambda auto: lambda=").count(),
        3,
        "{stderr}"
    );
    assert!(stderr.contains("holdout=300"), "{stderr}");
    let model = files.load_model();
    let auto = model.lambda_auto.clone().expect("the grid is recorded");
    assert_eq!(auto.criterion, "holdout");
    assert_eq!(auto.grid.len(), 3);
    let best = (0..3)
        .min_by(|&a, &b| auto.losses[a].total_cmp(&auto.losses[b]))
        .unwrap();
    assert_eq!(auto.live, best);
    assert_eq!(auto.live, 2, "{auto:?}\n{stderr}");
    assert_eq!(model.lambda, 1e-3);
    assert_eq!(model.support, data.true_support());
    assert!(stderr.contains("lambda=0.001 "), "{stderr}");

    let base = [
        "fit",
        &files.data,
        "--loss",
        "squared",
        "-k",
        "5",
        "--epochs",
        "2",
    ];
    for (extra, message) in [
        (
            &["--lambda", "often"][..],
            "expected a number > 0 or \"auto\"",
        ),
        (&["--lambda", "0"][..], "expected a number > 0 or \"auto\""),
        (
            &["--lambda", "auto", "--lambda-grid", "1"][..],
            "--lambda-grid must be between 2 and 16",
        ),
        (
            &["--lambda", "auto", "--lambda-min", "1"][..],
            "0 < min < max",
        ),
        (
            &["--lambda", "auto", "--holdout", "1"][..],
            "--holdout must be in (0, 1)",
        ),
    ] {
        assert_failed_with(&thresher(&[&base[..], extra].concat()), message);
    }
}
