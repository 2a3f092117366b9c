//! Sample weights in the daemon: a window of rows with integer weights `c` (LIBSVM `cost:c`, JSON
//! `"weight"`) solves the same objective, the weighted mean, as a window holding each row `c` times,
//! for SDIHT, mirror descent and best subset. Two daemons, one per window, each left to settle; their
//! trajectories differ (different rows, different blocks), so they are compared through their
//! certificates: each dual value bounds the other's primal from below (weak duality holds across them
//! only when the objective is the same), and the two primals differ by at most the larger gap (each is
//! within its gap of the same optimum); SDIHT's and best subset's weights are compared too. Ignoring
//! the weights changes the objective (the unweighted mean of the distinct rows) and fails these checks
//! by far more than the gaps. SDIHT runs with `k` = every column here: at `k = 3` on this 90-row
//! window the streaming learner locks onto a wrong support and stalls at a relative gap near 0.9,
//! weighted or repeated alike (a limit of the streaming step on tiny windows, not of the weights).

use serde_json::{json, Value};

use crate::common::{certificate, model_weights, support, Daemon};
use crate::weights::{design, line as libsvm};

fn json_row(y: f64, cost: Option<u32>, x: &[(u32, f64)]) -> Value {
    let mut o = json!({
        "label": y,
        "indices": x.iter().map(|p| p.0).collect::<Vec<_>>(),
        "values": x.iter().map(|p| p.1).collect::<Vec<_>>(),
    });
    if let Some(c) = cost {
        o["weight"] = json!(c);
    }
    o
}

/// A daemon with one learner (`learner`, TOML lines) whose window holds everything sent.
fn start(dir: &std::path::Path, name: &str, learner: &str) -> Daemon {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            "[snapshot]\ninterval_ms = 50\n[window]\ncapacity = 5000\n[[learner]]\n{learner}\n"
        ),
    )
    .unwrap();
    Daemon::start(&["--config", path.to_str().unwrap()])
}

/// Waits until the daemon has seen `n` samples and its model stopped moving; returns the model.
fn settled(d: &Daemon, n: u64) -> Value {
    d.wait_for(&format!("{n} samples seen"), |d| {
        d.model().filter(|m| m["samples_seen"].as_u64() == Some(n))
    });
    d.wait_until_settled()
}

/// The two models solve the same objective, to their certificates (weak duality across the two
/// windows, and primals within the larger gap).
fn assert_same_objective(a: &Value, b: &Value, what: &str) {
    let ((pa, da, ga), (pb, db, gb)) = (certificate(a), certificate(b));
    let slack = 1e-9 * pa.abs().max(pb.abs()).max(1.0);
    assert!(
        da <= pb + slack && db <= pa + slack,
        "{what}: weak duality across the windows: weighted (P {pa}, D {da}), repeated (P {pb}, D {db})"
    );
    assert!(
        (pa - pb).abs() <= ga.max(gb) + slack,
        "{what}: primals {pa} and {pb} differ by more than the gaps {ga}, {gb}"
    );
}

/// `||w_a - w_b||`.
fn distance(a: &Value, b: &Value) -> f64 {
    model_weights(a)
        .iter()
        .zip(model_weights(b))
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f64>()
        .sqrt()
}

#[test]
fn integer_weights_in_the_daemon_learn_the_model_of_repeated_rows() {
    let dir = tempfile::tempdir().unwrap();
    for (what, learner, classify) in [
        (
            "sdiht",
            "k = 12\nlambda = 0.01\nloss = \"squared\"\nintercept = false",
            false,
        ),
        (
            "mirror",
            "solver = \"mirror\"\nk = 3\nlambda = 0.01\nloss = \"squared\"\nintercept = false",
            false,
        ),
        (
            "subset",
            "solver = \"subset\"\nloss = \"squared\"\nlambda0 = 0.05\nlambda2 = 0.01\nxi = 1e-12\nresolve_interval_ms = 0",
            false,
        ),
    ] {
        let rows = design(90, classify);
        let copies: u64 = rows.iter().map(|r| r.1 as u64).sum();
        let a = start(dir.path(), &format!("{what}-weighted"), learner);
        let b = start(dir.path(), &format!("{what}-repeated"), learner);
        // The weighted rows: half as LIBSVM `cost:c`, half as JSON `"weight"`.
        let (first, second) = rows.split_at(45);
        let text: String = first.iter().map(|(y, c, x)| libsvm(*y, Some(*c), x)).collect();
        assert_eq!(a.post("/v1/samples", "text/plain", text).0, 202);
        let objects: Vec<Value> = second
            .iter()
            .map(|(y, c, x)| json_row(*y, Some(*c), x))
            .collect();
        let (status, reply, _) =
            a.post("/v1/samples", "application/json", json!(objects).to_string());
        assert_eq!(status, 202, "{reply}");
        let repeated: String = rows
            .iter()
            .flat_map(|(y, c, x)| std::iter::repeat_n(libsvm(*y, None, x), *c as usize))
            .collect();
        assert_eq!(b.post("/v1/samples", "text/plain", repeated).0, 202);
        let (ma, mb) = (settled(&a, rows.len() as u64), settled(&b, copies));
        assert_eq!(ma["window_samples"], json!(rows.len()), "{ma}");
        assert_same_objective(&ma, &mb, what);
        // Mirror descent's model depends on how the stream was cut into inserts (a loaded machine
        // cut it otherwise and it settled on another support, with a gap of 154): its support is not
        // compared.
        if what != "mirror" {
            assert_eq!(support(&ma), support(&mb), "{what}: support\n{ma}\n{mb}");
        }
        let ((pa, _, ga), (pb, _, gb)) = (certificate(&ma), certificate(&mb));
        match what {
            // On one support the objective is lambda-strongly convex: each model is within
            // sqrt(2 gap / lambda) of its minimiser.
            "sdiht" => {
                let bound = (2.0 * ga / 0.01).sqrt() + (2.0 * gb / 0.01).sqrt();
                assert!(distance(&ma, &mb) <= bound, "{what}: {ma}\n{mb}");
            }
            // Best subset re-solves each window to its gap target: the same model to rounding.
            "subset" => {
                assert!((pa - pb).abs() <= 1e-9 * pa.abs(), "{what}: {pa} vs {pb}");
                assert!(distance(&ma, &mb) <= 1e-6, "{what}: {ma}\n{mb}");
            }
            // Mirror descent's certificate (the dual point of its iterate) is loose here (gaps
            // above 1 on primals near 0.07): its check above is the weaker one.
            _ => {}
        }
    }
}
