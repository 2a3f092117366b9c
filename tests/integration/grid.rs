//! `fit --lambda auto`'s grid through the real CLI: a grid whose best lambda lies past its smallest end is
//! extended until the held-out score turns up, small files are ranked by K-fold cross-validation, and the
//! model JSON and stderr say which validation ran over which grid.

use thresher::model::RefitStart;
use thresher::synth::sparse_stream;

use crate::common::{assert_failed_with, assert_succeeded, thresher, FitFiles};

/// Squared loss, 5 true features of unit-scale weights and little noise: every lambda of 10..1e-2 shrinks
/// the model, so the grid as configured has its best at its smallest end.
fn fit_auto(files: &FitFiles, extra: &[&str]) -> String {
    let mut args = vec![
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
        "1e-1",
        "--lambda-grid",
        "3",
        "--epochs",
        "50",
        "--out",
        &files.model,
    ];
    args.extend_from_slice(extra);
    let out = thresher(&args);
    assert_succeeded(&out, "fit --lambda auto")
}

#[test]
fn fit_lambda_auto_extends_the_grid_past_its_smallest_end_and_ranks_small_files_by_cv() {
    let data = sparse_stream(1500, 100, 5, 10, 0.05, false, 9);
    let files = FitFiles::new(&data.samples);
    let stderr = fit_auto(&files, &[]);
    let model = files.load_model();
    let auto = model.lambda_auto.clone().expect("the grid is recorded");
    // 1,500 samples (< 5,000): five folds, every sample held out once.
    assert_eq!(auto.validation.as_deref(), Some("cv"), "{stderr}");
    assert_eq!(auto.folds, Some(5));
    assert_eq!(auto.held_out, 1500);
    assert!(stderr.contains("validation=cv folds=5"), "{stderr}");
    // The configured grid's best was its end, 0.1: the search went on below it, a decade at a time.
    assert!(!auto.extended.is_empty(), "{auto:?}\n{stderr}");
    assert_eq!(auto.grid.len(), 3 + auto.extended.len());
    assert_eq!(&auto.grid[..3], &[10.0, 1.0, 0.1]);
    for (i, &lambda) in auto.extended.iter().enumerate() {
        assert!(
            (lambda / (0.1 * 0.1f64.powi(i as i32 + 1)) - 1.0).abs() < 1e-9,
            "{auto:?}"
        );
        assert_eq!(auto.grid[3 + i], lambda);
    }
    assert!(model.lambda < 0.1, "{auto:?}\n{stderr}");
    assert_eq!(auto.grid[auto.live], model.lambda);
    let best = (0..auto.grid.len())
        .min_by(|&a, &b| auto.losses[a].total_cmp(&auto.losses[b]))
        .unwrap();
    assert_eq!(auto.live, best, "{auto:?}");
    assert!(auto.losses[auto.live] < auto.losses[2], "{auto:?}");
    // It stopped where the score turned up, or after the default four extensions.
    let last = auto.grid.len() - 1;
    assert!(
        auto.live < last || auto.extended.len() == 4,
        "{auto:?}\n{stderr}"
    );
    assert_eq!(model.support, data.true_support());
    assert_eq!(
        stderr.matches("lambda auto: lambda=").count(),
        auto.grid.len(),
        "{stderr}"
    );
    assert!(stderr.contains("cv5_loss="), "{stderr}");
    // The refit ran from the chosen member's duals and from zero; the model is the lower primal's.
    let refit = auto.refit.expect("the refit is recorded");
    let kept = refit.warm_primal.min(refit.cold_primal);
    assert_eq!(model.certificate.primal, kept, "{refit:?}\n{stderr}");
    let expected = if refit.cold_primal < refit.warm_primal {
        RefitStart::Cold
    } else {
        RefitStart::Warm
    };
    assert_eq!(refit.kept, expected);
    assert!(
        stderr.contains(&format!("kept {}", expected.as_str())),
        "{stderr}"
    );

    // The same file with cross-validation off and no extension: one held-out part, the grid as given.
    let stderr = fit_auto(&files, &["--cv-below", "0", "--lambda-extend", "0"]);
    let auto = files.load_model().lambda_auto.unwrap();
    assert_eq!(auto.validation.as_deref(), Some("holdout"));
    assert_eq!((auto.folds, auto.held_out), (None, 300));
    assert!(auto.extended.is_empty());
    assert_eq!((auto.grid.len(), auto.live), (3, 2), "{auto:?}");
    assert!(stderr.contains("holdout_loss="), "{stderr}");

    let base = ["--epochs", "2"];
    for (extra, message) in [
        (&["--folds", "1"][..], "--folds must be between 2 and 20"),
        (
            &["--lambda-extend", "17"][..],
            "--lambda-extend must be at most 16",
        ),
    ] {
        let mut args = vec![
            "fit",
            &files.data,
            "--loss",
            "squared",
            "-k",
            "5",
            "--lambda",
            "auto",
        ];
        args.extend_from_slice(&base);
        args.extend_from_slice(extra);
        assert_failed_with(&thresher(&args), message);
    }
}

/// A grid whose best is its largest lambda is extended upwards: logistic loss on labels that are pure
/// noise, where the most shrunk model predicts best.
#[test]
fn fit_lambda_auto_extends_the_grid_past_its_largest_end_when_less_is_better() {
    let mut data = sparse_stream(600, 200, 5, 10, 0.0, true, 3);
    for (i, s) in data.samples.iter_mut().enumerate() {
        s.label = if (i * 7919) % 13 < 6 { 1.0 } else { -1.0 };
    }
    let files = FitFiles::new(&data.samples);
    let out = thresher(&[
        "fit",
        &files.data,
        "--loss",
        "logistic",
        "-k",
        "20",
        "--lambda",
        "auto",
        "--lambda-max",
        "1",
        "--lambda-min",
        "1e-2",
        "--lambda-grid",
        "3",
        "--epochs",
        "30",
        // The coordinate step (`--step auto` takes the adaptive one on these 5%-dense rows, whose
        // held-out losses near the empty model's keep falling by rounding-level amounts as lambda grows,
        // so the extension would run to its last decade).
        "--step",
        "coordinate",
        // Without an intercept the empty model predicts no class better than another, so the most
        // shrunk nonzero model does best. (Smaller lambdas overfit the noise, and their search ends
        // above the empty model's objective: `fit` returns `w = 0` for them.)
        "--no-intercept",
        "--out",
        &files.model,
    ]);
    let stderr = assert_succeeded(&out, "fit --lambda auto");
    let auto = files.load_model().lambda_auto.unwrap();
    // The configured grid's best was its largest lambda, so a decade above it was tried; the search
    // stops at the first lambda that does not do strictly better.
    assert_eq!(auto.grid[0], 10.0, "{auto:?}\n{stderr}");
    assert!(auto.extended.contains(&10.0), "{auto:?}");
    assert!(auto.grid.windows(2).all(|w| w[0] > w[1]), "{auto:?}");
    assert!(
        auto.live > 0 && auto.losses[0] >= auto.losses[auto.live],
        "{auto:?}"
    );
    assert!(stderr.contains("extended=[10.0]"), "{stderr}");
}

/// Below 1,000 samples the cross-validation takes ten folds (each fold's fit trains on 90% of the file,
/// closer to the refit's size); `--folds` still chooses.
#[test]
fn a_small_file_is_ranked_by_ten_folds_unless_told() {
    let data = sparse_stream(400, 100, 5, 10, 0.05, false, 9);
    let files = FitFiles::new(&data.samples);
    let stderr = fit_auto(&files, &[]);
    let auto = files
        .load_model()
        .lambda_auto
        .expect("the grid is recorded");
    assert_eq!((auto.folds, auto.held_out), (Some(10), 400), "{stderr}");
    assert!(stderr.contains("validation=cv folds=10"), "{stderr}");
    let stderr = fit_auto(&files, &["--folds", "4"]);
    let auto = files
        .load_model()
        .lambda_auto
        .expect("the grid is recorded");
    assert_eq!((auto.folds, auto.held_out), (Some(4), 400), "{stderr}");
}
