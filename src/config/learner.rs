//! The `[[learner]]` tables, read into the learner's own parameter types
//! ([`crate::learner::params`]). Each table is
//! the default learner (`config/thresher.toml`'s `[[learner]]` and the solver-specific defaults of
//! [`super::solvers`]) overlaid with the keys it sets, checked into a [`LearnerConfig`]; a key of a
//! solver the learner does not run is an error naming it.

use super::check::{count, int, is_name, need, positive, range};
use super::error::ConfigError;
use std::sync::Arc;

use super::raw::{ClassesValue, LambdaValue, LearnerLayer, RawConfig};
use super::solvers;
use crate::learner::params::{
    log_grid, AutoLambda, ClassOf, Criterion, LearnerConfig, StreamSolverKind,
};
use crate::loss::{Loss, LossKind};
use crate::model::multiclass::MAX_CLASSES;
use crate::solver::StepRule;

/// The keys that only `lambda = "auto"` reads.
pub const LAMBDA_AUTO_KEYS: &[&str] = &[
    "lambda_grid",
    "lambda_min",
    "lambda_max",
    "lambda_margin",
    "lambda_half_life",
    "lambda_criterion",
];

/// The default learner: every learner key with its default (the shared keys from the embedded
/// defaults, the solver-specific ones from [`solvers::SOLVER_KEYS_TOML`]).
pub(super) fn default_learner() -> LearnerLayer {
    let mut learner = solvers::defaults();
    let shipped = RawConfig::defaults()
        .learner
        .and_then(|mut l| (!l.is_empty()).then(|| l.remove(0)))
        .expect("config/thresher.toml has a [[learner]] table");
    learner.overlay(shipped);
    learner
}

/// The `[[learner]]` tables: at least one, with unique names.
pub(super) fn read_learners(
    layers: &Option<Vec<LearnerLayer>>,
    max_dim: usize,
) -> Result<Vec<LearnerConfig>, ConfigError> {
    let layers = match layers {
        Some(l) if !l.is_empty() => l,
        Some(_) => {
            return Err(range(
                "learner",
                "[]",
                "at least one [[learner]] table is needed",
            ))
        }
        None => return Err(ConfigError::Missing("learner".into())),
    };
    let mut learners: Vec<LearnerConfig> = Vec::new();
    let mut daemon_classes = None;
    for (i, given) in layers.iter().enumerate() {
        let learner = read_learner(given, i, max_dim)?;
        let mut t = default_learner();
        t.overlay(given.clone());
        let classes = read_classes(&t, i, learner.loss)?;
        // The labels of one stream must suit every learner: class indices for a multi-class learner,
        // +-1 or numbers for the others.
        if i > 0 && classes != daemon_classes {
            return Err(range(
                &LearnerLayer::key(i, "classes"),
                &classes
                    .as_ref()
                    .map_or("unset".into(), |(c, _)| c.to_string()),
                "every [[learner]] of a daemon with a multi-class learner sets the same classes (count and names) (the stream's labels are class indices)",
            ));
        }
        daemon_classes = classes.clone();
        let tables = match classes {
            Some((c, names)) => class_members(learner, c, names),
            None => vec![learner],
        };
        for mut learner in tables {
            if clashes(&learners, &learner) {
                return Err(range(
                    &format!("learner[{i}].name"),
                    &learner.name,
                    "learner names must be unique (a multi-class learner NAME runs as NAME-0, NAME-1, ...)",
                ));
            }
            // The learner's column among the served scores of a late label: its place in the list.
            learner.slot = learners.len();
            learners.push(learner);
        }
    }
    Ok(learners)
}

/// Learner `i`: the keys `given` sets over the default learner.
fn read_learner(
    given: &LearnerLayer,
    i: usize,
    max_dim: usize,
) -> Result<LearnerConfig, ConfigError> {
    let key = |k: &str| LearnerLayer::key(i, k);
    let mut t = default_learner();
    t.overlay(given.clone());
    let name = need(&t.name, &key("name"))?;
    if !is_name(&name) {
        return Err(range(
            &key("name"),
            &name,
            "use letters, digits, '_' and '-'",
        ));
    }
    let (solver_name, solver) = read_solver(&t, i)?;
    solvers::check_applicable(i, &solver_name, &given.given())?;
    let loss = read_loss(&t, i, solver)?;
    let k = count(&t.k, &key("k"), 1, max_dim as i64)?;
    let (lambda, lambda_auto) = read_lambda(&t, given, i, solver)?;
    let mut blocks = count(&t.blocks, &key("blocks"), 1, 1_000_000)?;
    if solver_name == "diht" {
        blocks = 1;
    }
    let step = read_step(&t, i, solver, loss.kind())?;
    let tol = need(&t.tol, &key("tol"))?;
    if !(tol.is_finite() && tol >= 0.0) {
        return Err(range(
            &key("tol"),
            &tol.to_string(),
            "must be finite and >= 0",
        ));
    }
    let options = solvers::read(&t, i, &solver_name, step, max_dim)?;
    let intercept = read_intercept(&t, i, solver)?;
    Ok(LearnerConfig {
        intercept,
        options,
        slot: i,
        name,
        solver,
        loss,
        k,
        lambda,
        lambda_auto,
        blocks,
        step,
        recompute_every: count(&t.recompute_every, &key("recompute_every"), 1, i64::MAX)?,
        polish: need(&t.polish, &key("polish"))?,
        tol,
        seed: int(&t.seed, &key("seed"), 0, i64::MAX)? as u64,
        // `window.half_life_samples`, a window key: set by `RawConfig::validate`.
        half_life_samples: None,
        // Set by `read_learners` on each class's learner of a `classes = C` table.
        class: None,
    })
}

/// A multi-class table's classes: their number, and their names if given.
type Classes = (usize, Option<Arc<[String]>>);

/// `classes`: unset for a binary or regression learner; for a multi-class one, the number of classes
/// (3 ..= [`MAX_CLASSES`]) or their names (as many, each 1 to [`MAX_CLASS_NAME_BYTES`] bytes of printable
/// text, no two alike, none a number: a number is a class index). Its loss must be a classification loss
/// (each class is learned as `+1` against the rest).
fn read_classes(t: &LearnerLayer, i: usize, loss: Loss) -> Result<Option<Classes>, ConfigError> {
    let key = LearnerLayer::key(i, "classes");
    let (classes, names) = match &t.classes {
        None => return Ok(None),
        Some(ClassesValue::Count(c)) => (count(&Some(*c), &key, 3, MAX_CLASSES as i64)?, None),
        Some(ClassesValue::Names(names)) => {
            let shown = format!("{names:?}");
            count(&Some(names.len() as i64), &key, 3, MAX_CLASSES as i64)
                .map_err(|_| range(&key, &shown, "give 3 to 1000 class names"))?;
            for (c, name) in names.iter().enumerate() {
                let bad = name.is_empty()
                    || name.len() > MAX_CLASS_NAME_BYTES
                    || name.chars().any(char::is_control)
                    || name.trim().parse::<f64>().is_ok()
                    || names[..c].contains(name);
                if bad {
                    return Err(range(
                        &key,
                        &shown,
                        &format!(
                            "class name {name:?}: each name is 1 to {MAX_CLASS_NAME_BYTES} bytes of printable text, not a number, and unique"
                        ),
                    ));
                }
            }
            (names.len(), Some(names.clone().into()))
        }
    };
    if !loss.is_classification() {
        return Err(range(
            &key,
            &classes.to_string(),
            "a multi-class learner needs a classification loss (logistic, hinge or huber)",
        ));
    }
    Ok(Some((classes, names)))
}

/// The longest class name, in bytes.
pub const MAX_CLASS_NAME_BYTES: usize = 256;

/// Whether `new` takes a name already taken: a learner's, or a multi-class learner's, whose name
/// names its model too (`/v1/models/NAME`).
fn clashes(learners: &[LearnerConfig], new: &LearnerConfig) -> bool {
    let group = |l: &LearnerConfig| l.class.as_ref().map(|c| c.group.clone());
    learners.iter().any(|l| {
        l.name == new.name
            || group(l).as_deref() == Some(new.name.as_str())
            || group(new).as_deref() == Some(l.name.as_str())
    })
}

/// A `classes = C` table as the `C` binary learners it runs: `NAME-c` learns class `c` as `+1`
/// against the others (one-vs-rest, `crate::learner::multiclass`).
fn class_members(
    learner: LearnerConfig,
    classes: usize,
    names: Option<Arc<[String]>>,
) -> Vec<LearnerConfig> {
    (0..classes)
        .map(|class| LearnerConfig {
            name: format!("{}-{class}", learner.name),
            class: Some(ClassOf {
                group: learner.name.clone(),
                class,
                classes,
                names: names.clone(),
            }),
            ..learner.clone()
        })
        .collect()
}

/// `solver`: its name as given (`diht` is SDIHT with one block) and its kind.
fn read_solver(t: &LearnerLayer, i: usize) -> Result<(String, StreamSolverKind), ConfigError> {
    let key = LearnerLayer::key(i, "solver");
    let name = need(&t.solver, &key)?;
    let solver = match name.as_str() {
        "sdiht" | "diht" => StreamSolverKind::Sdiht,
        "mirror" => StreamSolverKind::Mirror,
        "smidas" => StreamSolverKind::Smidas,
        "subset" => StreamSolverKind::Subset,
        other => {
            return Err(range(
                &key,
                other,
                "the streaming solvers are: sdiht, diht, mirror, smidas, subset",
            ))
        }
    };
    Ok((name, solver))
}

/// `loss` (the subset solver implements squared and logistic only) and `gamma`.
fn read_loss(t: &LearnerLayer, i: usize, solver: StreamSolverKind) -> Result<Loss, ConfigError> {
    let key = |k: &str| LearnerLayer::key(i, k);
    let loss_name = need(&t.loss, &key("loss"))?;
    let kind = match loss_name.as_str() {
        "squared" => LossKind::Squared,
        "huber" => LossKind::Huber,
        "hinge" => LossKind::Hinge,
        "logistic" => LossKind::Logistic,
        other => {
            return Err(range(
                &key("loss"),
                other,
                "expected squared, huber, hinge or logistic",
            ))
        }
    };
    if solver == StreamSolverKind::Subset && !matches!(kind, LossKind::Squared | LossKind::Logistic)
    {
        return Err(range(
            &key("loss"),
            &loss_name,
            "solver = \"subset\" supports loss = \"squared\" or \"logistic\" only",
        ));
    }
    let gamma = need(&t.gamma, &key("gamma"))?;
    Loss::new(kind, gamma).map_err(|e| range(&key("gamma"), &gamma.to_string(), &e.to_string()))
}

/// `step`. Unset, SDIHT with a classification loss steps by coordinates: on the text sets the adaptive
/// rule's block-wide Jacobi step idled at a relative gap of 0.18 where the coordinate rule reached
/// 0.006 (`docs/benchmarks/quality.md`), and the duals' bounded domain keeps the coordinate rule
/// stable in a sliding window; squared loss keeps `adaptive` (`learner::sdiht::small_lambda_stream`).
fn read_step(
    t: &LearnerLayer,
    i: usize,
    solver: StreamSolverKind,
    kind: LossKind,
) -> Result<StepRule, ConfigError> {
    let step_text = match &t.step {
        Some(text) => text.clone(),
        None if solver == StreamSolverKind::Sdiht && kind != LossKind::Squared => {
            "coordinate".into()
        }
        None => "adaptive".into(),
    };
    Ok(match step_text.as_str() {
        "coordinate" => StepRule::Coordinate,
        "adaptive" => StepRule::Adaptive,
        other => match other.parse::<f64>() {
            Ok(eta) if eta.is_finite() && eta > 0.0 => StepRule::Constant(eta),
            _ => {
                return Err(range(
                    &LearnerLayer::key(i, "step"),
                    other,
                    "expected \"coordinate\", \"adaptive\" or a constant eta > 0",
                ))
            }
        },
    })
}

/// `intercept`. Unset, every loss gets an intercept (an unbalanced stream otherwise costs its prior, a
/// response far from 0 its mean), but subset (its dual has no intercept).
fn read_intercept(
    t: &LearnerLayer,
    i: usize,
    solver: StreamSolverKind,
) -> Result<bool, ConfigError> {
    match t.intercept {
        Some(true) if solver == StreamSolverKind::Subset => Err(range(
            &LearnerLayer::key(i, "intercept"),
            "true",
            "solver = \"subset\" does not fit an intercept",
        )),
        Some(given) => Ok(given),
        None => Ok(solver != StreamSolverKind::Subset),
    }
}

/// `learner.lambda`: a number > 0, or `"auto"` with the grid keys; the grid keys set with a numeric
/// lambda are an error naming the key.
fn read_lambda(
    t: &LearnerLayer,
    given: &LearnerLayer,
    i: usize,
    solver: StreamSolverKind,
) -> Result<(f64, Option<AutoLambda>), ConfigError> {
    let key = |k: &str| LearnerLayer::key(i, k);
    match need(&t.lambda, &key("lambda"))? {
        LambdaValue::Number(lambda) => {
            if !(lambda.is_finite() && lambda > 0.0) {
                return Err(range(
                    &key("lambda"),
                    &lambda.to_string(),
                    "must be finite and > 0, or \"auto\"",
                ));
            }
            if let Some(k) = given
                .given()
                .into_iter()
                .find(|k| LAMBDA_AUTO_KEYS.contains(k))
            {
                return Err(range(
                    &key(k),
                    &format!("(set with lambda = {lambda})"),
                    "this key applies to lambda = \"auto\" only",
                ));
            }
            Ok((lambda, None))
        }
        LambdaValue::Text(text) if text == "auto" => {
            if solver == StreamSolverKind::Subset {
                return Err(range(
                    &key("lambda"),
                    "\"auto\"",
                    "solver = \"subset\" is set by lambda0, lambda1, lambda2, not lambda",
                ));
            }
            let auto = read_auto(t, i)?;
            Ok((auto.grid[auto.grid.len() / 2], Some(auto)))
        }
        LambdaValue::Text(text) => Err(range(
            &key("lambda"),
            &format!("{text:?}"),
            "expected a number > 0 or \"auto\"",
        )),
    }
}

/// The keys of `lambda = "auto"` (`lambda_*`).
fn read_auto(t: &LearnerLayer, i: usize) -> Result<AutoLambda, ConfigError> {
    let key = |k: &str| LearnerLayer::key(i, k);
    let max = positive(&t.lambda_max, &key("lambda_max"))?;
    let min = positive(&t.lambda_min, &key("lambda_min"))?;
    if min >= max {
        return Err(range(
            &key("lambda_min"),
            &min.to_string(),
            &format!("must be below lambda_max = {max}"),
        ));
    }
    let n = count(&t.lambda_grid, &key("lambda_grid"), 2, 16)?;
    let margin = need(&t.lambda_margin, &key("lambda_margin"))?;
    if !(0.0..1.0).contains(&margin) {
        return Err(range(
            &key("lambda_margin"),
            &margin.to_string(),
            "must be in [0, 1)",
        ));
    }
    let half_life = int(
        &t.lambda_half_life,
        &key("lambda_half_life"),
        1,
        1_000_000_000,
    )? as u64;
    let criterion = match need(&t.lambda_criterion, &key("lambda_criterion"))?.as_str() {
        "holdout" => Criterion::Holdout,
        "progressive" => Criterion::Progressive,
        other => {
            return Err(range(
                &key("lambda_criterion"),
                &format!("{other:?}"),
                "expected \"holdout\" or \"progressive\"",
            ))
        }
    };
    Ok(AutoLambda {
        grid: log_grid(max, min, n),
        margin,
        half_life,
        criterion,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::raw::DEFAULT_TOML;
    use crate::config::tests::load_text;
    use crate::config::Config;

    #[test]
    fn the_step_rule_defaults_by_solver_and_loss() {
        let step_of = |table: &str| {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("c.toml");
            std::fs::write(&path, format!("[[learner]]\n{table}")).unwrap();
            Config::load(Some(&path), std::iter::empty(), &Default::default())
                .unwrap()
                .learners[0]
                .step
        };
        assert_eq!(step_of("loss = \"logistic\"\n"), StepRule::Coordinate);
        assert_eq!(step_of("loss = \"hinge\"\n"), StepRule::Coordinate);
        assert_eq!(step_of("loss = \"squared\"\n"), StepRule::Adaptive);
        assert_eq!(
            step_of("solver = \"mirror\"\nloss = \"logistic\"\n"),
            StepRule::Adaptive
        );
        assert_eq!(
            step_of("loss = \"logistic\"\nstep = \"adaptive\"\n"),
            StepRule::Adaptive
        );
    }

    #[test]
    fn lambda_auto_parses_from_the_file_and_the_environment() {
        let c = load_text("[[learner]]\nlambda = \"auto\"\nlambda_grid = 3\nlambda_max = 1.0\nlambda_min = 0.01\n", &[])
            .unwrap();
        let a = c.learners[0].lambda_auto.as_ref().expect("auto");
        assert_eq!(a.grid.len(), 3);
        assert_eq!((a.grid[0], a.grid[2]), (1.0, 0.01));
        assert_eq!((a.margin, a.half_life), (0.01, 2000));
        assert_eq!(
            c.learners[0].lambda, a.grid[1],
            "the middle member is served first"
        );
        let c = load_text(
            "",
            &[
                ("THRESHER_LEARNER_LAMBDA", "auto"),
                ("THRESHER_LEARNER_LAMBDA_MARGIN", "0.1"),
                ("THRESHER_LEARNER_LAMBDA_HALF_LIFE", "50"),
            ],
        )
        .unwrap();
        let a = c.learners[0].lambda_auto.as_ref().expect("auto");
        assert_eq!(a.grid, log_grid(0.1, 1e-5, 5));
        assert_eq!((a.margin, a.half_life), (0.1, 50));
        // Numbers keep working, as TOML integers, floats and environment text.
        let c = load_text("[[learner]]\nlambda = 1\n", &[]).unwrap();
        assert_eq!(
            (c.learners[0].lambda, &c.learners[0].lambda_auto),
            (1.0, &None)
        );
        let c = load_text("", &[("THRESHER_LEARNER_LAMBDA", "0.003")]).unwrap();
        assert_eq!(c.learners[0].lambda, 0.003);
        assert_eq!(Config::defaults().learners[0].lambda_auto, None);
    }

    #[test]
    fn bad_lambda_auto_values_are_refused_naming_the_key() {
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);
        let cases: &[Case] = &[
            (
                "[[learner]]\nlambda = \"automatic\"\n",
                &[],
                "`learner[0].lambda` = \"automatic\"",
            ),
            ("[[learner]]\nlambda = 0\n", &[], "`learner[0].lambda` = 0"),
            (
                "",
                &[("THRESHER_LEARNER_LAMBDA", "nan")],
                "`learner[0].lambda` = NaN",
            ),
            (
                "",
                &[("THRESHER_LEARNER_LAMBDA", "Auto")],
                "`learner[0].lambda` = \"Auto\"",
            ),
            (
                "[[learner]]\nlambda = true\n",
                &[],
                "a number > 0 or \"auto\"",
            ),
            (
                "[[learner]]\nlambda = \"auto\"\nlambda_grid = 1\n",
                &[],
                "`learner[0].lambda_grid` = 1",
            ),
            (
                "[[learner]]\nlambda = \"auto\"\nlambda_grid = 17\n",
                &[],
                "`learner[0].lambda_grid` = 17",
            ),
            (
                "[[learner]]\nlambda = \"auto\"\nlambda_min = 0.5\n",
                &[],
                "must be below lambda_max",
            ),
            (
                "[[learner]]\nlambda = \"auto\"\nlambda_max = -1\n",
                &[],
                "`learner[0].lambda_max` = -1",
            ),
            (
                "[[learner]]\nlambda = \"auto\"\nlambda_margin = 1.0\n",
                &[],
                "`learner[0].lambda_margin` = 1",
            ),
            (
                "[[learner]]\nlambda = \"auto\"\nlambda_half_life = 0\n",
                &[],
                "`learner[0].lambda_half_life` = 0",
            ),
            (
                "[[learner]]\nlambda_grid = 3\n",
                &[],
                "`learner[0].lambda_grid`",
            ),
            (
                "",
                &[("THRESHER_LEARNER_LAMBDA_MIN", "0.001")],
                "applies to lambda = \"auto\" only",
            ),
            (
                "[[learner]]\nsolver = \"subset\"\nlambda = \"auto\"\n",
                &[],
                "lambda0, lambda1, lambda2",
            ),
        ];
        for (text, env, expected) in cases {
            let e = load_text(text, env).unwrap_err().to_string();
            assert!(e.contains(expected), "{text} {env:?}: {e}");
        }
    }

    /// Every learner key has a default, and `config/thresher.toml` documents each once: the shared keys
    /// set in its `[[learner]]` table, the others in commented `# key = value` lines, whose values are
    /// the code's defaults (but for `step` and `intercept`, whose defaults depend on the loss and the
    /// solver: their lines are examples).
    #[test]
    fn every_learner_key_has_a_default_documented_in_the_shipped_file() {
        let learner = default_learner();
        // `intercept`'s and `step`'s defaults depend on the loss or the solver, and `classes` unset is a
        // binary learner: the keys left unset.
        let defaulted: Vec<&str> = LearnerLayer::KEYS
            .iter()
            .copied()
            .filter(|&k| k != "intercept" && k != "step" && k != "classes")
            .collect();
        assert_eq!(
            learner.given(),
            defaulted,
            "every learner key has a default"
        );
        let table = &DEFAULT_TOML[DEFAULT_TOML.find("[[learner]]").unwrap()..];
        let is_key = |k: &str| {
            k.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        };
        let commented: String = table
            .lines()
            .filter_map(|l| l.strip_prefix("# "))
            .filter(|l| l.split_once(" = ").is_some_and(|(k, _)| is_key(k)))
            .map(|l| format!("{l}\n"))
            .collect();
        let mut commented: LearnerLayer =
            toml::from_str(&commented).expect("the commented keys are learner keys");
        let mut documented = RawConfig::defaults().learner.unwrap().remove(0).given();
        documented.extend(commented.given());
        documented.sort_unstable();
        let mut keys = LearnerLayer::KEYS.to_vec();
        keys.sort_unstable();
        assert_eq!(
            documented, keys,
            "config/thresher.toml documents every learner key once"
        );
        assert!(commented.step.take().is_some() && commented.intercept.take().is_some());
        assert!(commented.classes.take().is_some());
        assert_eq!(
            commented,
            solvers::defaults(),
            "the commented defaults in config/thresher.toml are the code's"
        );
    }
}
