//! A multi-class learner in the daemon (`classes = C`): the stream's labels are class indices, each
//! class's learner (`NAME-c`) learns its class against the rest, and `GET /v1/models/NAME` and
//! `POST /v1/predict?learner=NAME` serve them as one model. Checked over HTTP and the NATS source:
//! labels that are not classes refused with their line and nothing learned; each class's certificate
//! against `thresher fit --multiclass ovr` on the same samples (weak duality both ways: one
//! objective); the group's certificate the sum of the classes'; the served model file read by
//! `thresher predict` with the daemon's answers; the classes' learners restored by a restart.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use crate::common::{
    assert_succeeded, certificate, post_json, serve_args, test_config, thresher, write, Daemon,
};
use crate::nats_fixture::{start_node, wait_pulling, JetStream, NatsServer};

const CLASSES: usize = 4;

/// `rows` samples of four classes, each marked by its own two of 16 noisy features (LIBSVM, labels
/// 0..3).
fn four_classes(rows: usize, seed: u64) -> String {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut text = String::new();
    for _ in 0..rows {
        let class = rng.gen_range(0..CLASSES);
        text.push_str(&class.to_string());
        for j in 0..16u32 {
            let signal = if j as usize / 2 == class { 1.5 } else { 0.0 };
            let v: f64 = signal + rng.gen_range(-1.0..1.0);
            text.push_str(&format!(" {}:{v:.3}", j + 1));
        }
        text.push('\n');
    }
    text
}

const LEARNER: &str = "name = \"topic\"\nloss = \"logistic\"\nk = 4\nlambda = 0.01\n\
                       step = \"adaptive\"\nblocks = 1\nclasses = 4\n";

/// Waits until every class's learner has learned `n` samples and settled; the group's model.
fn settled_group(d: &Daemon, n: u64) -> Value {
    for c in 0..CLASSES {
        d.wait_for(&format!("topic-{c} to learn {n} samples"), |d| {
            let m = d.learner_model(&format!("topic-{c}"))?;
            (m["samples_seen"].as_u64() == Some(n)).then_some(())
        });
        d.wait_until_learner_settled(&format!("topic-{c}"));
    }
    d.learner_model("topic").expect("the group's model")
}

/// The classes a `POST /v1/predict` answer gives, as indices.
fn classes_of(answer: &Value) -> Vec<u64> {
    answer["predictions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_u64().unwrap())
        .collect()
}

fn accuracy(predicted: &[u64], data: &str) -> f64 {
    let truth: Vec<u64> = data
        .lines()
        .map(|l| l.split(' ').next().unwrap().parse().unwrap())
        .collect();
    let right = predicted.iter().zip(&truth).filter(|(p, t)| p == t).count();
    right as f64 / truth.len() as f64
}

#[test]
fn a_multiclass_learner_serves_one_certified_model_and_predicts_the_class() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = test_config(dir.path(), LEARNER, "");
    let train = four_classes(1200, 1);
    let test = four_classes(400, 2);
    let d = Daemon::start(&serve_args(&config, &data));

    // A label that is not a class: the body is refused with its line, and nothing is learned.
    let bad = format!(
        "{}9 1:1\n",
        &train[..train.find('\n').unwrap() + 1].repeat(2)
    );
    let (status, body, _) = d.post("/v1/samples", "text/plain", bad);
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["line"], 3, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("not a class"),
        "{body}"
    );
    let json_bad = "{\"label\": 1.5, \"indices\": [1], \"values\": [1.0]}\n";
    let (status, _, _) = d.post("/v1/samples", "application/x-ndjson", json_bad);
    assert_eq!(status, 400);
    let (status, _) = d.get("/v1/models/topic");
    assert_eq!(status, 503, "no class has learned anything");

    let lines: Vec<&str> = train.lines().collect();
    for part in lines.chunks(300) {
        let (status, body, _) = d.post("/v1/samples", "text/plain", part.join("\n") + "\n");
        assert_eq!(status, 202, "{body}");
    }
    let group = settled_group(&d, 1200);
    assert_eq!(group["learner"], "topic");
    assert_eq!(group["strategy"], "one-vs-rest");
    assert_eq!(group["classes"], serde_json::json!([0, 1, 2, 3]));
    assert_eq!(group["model"]["format"], "thresher-multiclass/1");
    let members = group["members"].as_array().unwrap();
    let models = group["model"]["models"].as_array().unwrap();
    assert_eq!((members.len(), models.len()), (CLASSES, CLASSES));
    // The group's certificate is the sum of the classes'.
    let summed = models
        .iter()
        .map(certificate)
        .fold((0.0, 0.0, 0.0), |a, c| (a.0 + c.0, a.1 + c.1, a.2 + c.2));
    let (p, dual, gap) = certificate(&group);
    assert!((p - summed.0).abs() < 1e-9 && (dual - summed.1).abs() < 1e-9);
    assert!((gap - summed.2).abs() < 1e-9 && gap >= 0.0);
    // The primary (`/v1/model`) is the multi-class learner of the first table.
    assert_eq!(d.model().unwrap()["learner"], "topic");

    // Each class's certificate against the offline fit of the same samples: one objective, so each
    // dual is below the other's primal (weak duality across the two).
    let train_path = write(dir.path(), "train.svm", &train);
    let test_path = write(dir.path(), "test.svm", &test);
    let fitted = dir.path().join("fit.json");
    let fit = thresher(&[
        "fit",
        &train_path,
        "--multiclass",
        "ovr",
        "--loss",
        "logistic",
        "-k",
        "4",
        "--lambda",
        "0.01",
        "--out",
        fitted.to_str().unwrap(),
    ]);
    assert_succeeded(&fit, "fit --multiclass ovr");
    let offline: Value = serde_json::from_str(&std::fs::read_to_string(&fitted).unwrap()).unwrap();
    for (c, (daemon, fit)) in models
        .iter()
        .zip(offline["models"].as_array().unwrap())
        .enumerate()
    {
        let (dp, dd, _) = certificate(daemon);
        let (fp, fd, _) = certificate(fit);
        let slack = 1e-9 * fp.abs().max(1.0);
        assert!(dd <= fp + slack, "class {c}: daemon D {dd} > fit P {fp}");
        assert!(fd <= dp + slack, "class {c}: fit D {fd} > daemon P {dp}");
    }

    // Predictions: the class of the highest score, the same as `thresher predict` on the served file.
    let (status, answer, _) = d.post("/v1/predict?learner=topic", "text/plain", test.clone());
    assert_eq!(status, 200, "{answer}");
    let predicted = classes_of(&answer);
    for (p, scores) in predicted.iter().zip(answer["scores"].as_array().unwrap()) {
        let scores: Vec<f64> = scores
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_f64().unwrap())
            .collect();
        assert_eq!(scores.len(), CLASSES);
        let best = (0..CLASSES).fold(0, |b, c| if scores[c] > scores[b] { c } else { b });
        assert_eq!(*p, best as u64);
    }
    let acc = accuracy(&predicted, &test);
    assert!(acc > 0.85, "held-out accuracy {acc}");
    let served = write(dir.path(), "served.json", &group["model"].to_string());
    let offline_predict = thresher(&["predict", "--model", &served, &test_path]);
    assert_succeeded(&offline_predict, "predict with the served model");
    let lines: Vec<u64> = String::from_utf8(offline_predict.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| l.trim().parse::<f64>().unwrap() as u64)
        .collect();
    assert_eq!(lines, predicted, "thresher predict reads the served model");

    // The OpenAPI document describes the class labels and the multi-class answers (every field it
    // requires is in the daemon's).
    let (_, doc) = d.get("/openapi.json");
    let doc: Value = serde_json::from_str(&doc).unwrap();
    let schemas = &doc["components"]["schemas"];
    let label = &schemas["SampleObject"]["oneOf"][0]["properties"]["label"];
    assert_eq!(
        (label["minimum"].as_u64(), label["maximum"].as_u64()),
        (Some(0), Some(3))
    );
    let pattern = schemas["Libsvm"]["pattern"].as_str().unwrap();
    assert!(pattern.contains("(0|1|2|3)"), "{pattern}");
    for (schema, answer) in [
        ("MulticlassModelDoc", &group),
        ("MulticlassPredictions", &answer),
    ] {
        for field in schemas[schema]["required"].as_array().unwrap() {
            let field = field.as_str().unwrap();
            assert!(answer.get(field).is_some(), "{schema}.{field} in {answer}");
        }
    }
    let response = &doc["paths"]["/v1/predict"]["post"]["responses"]["200"]["content"];
    assert!(
        response.to_string().contains("MulticlassPredictions"),
        "{response}"
    );

    // GET /v1/models lists the multi-class learner; the status page draws its weight per class.
    let models: Value = serde_json::from_str(&d.get("/v1/models").1).unwrap();
    assert_eq!(models["multiclass"][0]["learner"], "topic", "{models}");
    assert_eq!(models["multiclass"][0]["members"][3], "topic-3", "{models}");
    let dom = crate::status_page::browse(&format!("{}/", d.base), &["--dump-dom"]);
    assert!(dom.contains(r#"data-multiclass="topic""#), "{dom}");
    assert!(dom.contains("class 3</th>"), "{dom}");
    // Feature 1 (class 0's) is in the table, with a weight in class 0's column.
    let table = &dom[dom.find(r#"table class="weights multiclass""#).unwrap()..];
    assert!(table.contains(r#"<tr data-index="1">"#), "{table}");

    // Late labels: predicted with ids, the samples are learned by every class's learner once their
    // class arrives.
    let rows: Vec<Value> = test
        .lines()
        .take(10)
        .enumerate()
        .map(|(i, line)| {
            let pairs: Vec<(u32, f64)> = line
                .split(' ')
                .skip(1)
                .map(|p| {
                    let (j, v) = p.split_once(':').unwrap();
                    (j.parse().unwrap(), v.parse().unwrap())
                })
                .collect();
            serde_json::json!({"id": format!("s{i}"),
                "indices": pairs.iter().map(|p| p.0).collect::<Vec<_>>(),
                "values": pairs.iter().map(|p| p.1).collect::<Vec<_>>()})
        })
        .collect();
    let (status, answer) = post_json(&d, "/v1/predict?learner=topic", &Value::from(rows));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["scores"][0].as_array().unwrap().len(),
        CLASSES,
        "{answer}"
    );
    let labels: Vec<Value> = test
        .lines()
        .take(10)
        .enumerate()
        .map(|(i, l)| serde_json::json!({"id": format!("s{i}"), "label": l[..1].parse::<u64>().unwrap()}))
        .collect();
    let (status, answer) = post_json(&d, "/v1/labels", &Value::from(labels));
    assert_eq!(
        (status, &answer["joined"]),
        (202, &Value::from(10)),
        "{answer}"
    );
    let group = settled_group(&d, 1210);

    // A restart restores every class's learner from the checkpoint.
    let (status, _) = d.terminate();
    assert!(status.success());
    let d = Daemon::start(&serve_args(&config, &data));
    let again = d.wait_for("the restored group", |d| d.learner_model("topic"));
    assert_eq!(again["samples_seen"], 1210);
    assert_eq!(again["classes"], group["classes"]);
}

#[test]
fn a_multiclass_learner_learns_from_the_nats_source() {
    let dir = tempfile::tempdir().unwrap();
    let server = NatsServer::start(&dir.path().join("nats"));
    let config = format!(
        "[snapshot]\ninterval_ms = 50\n[window]\ncapacity = 5000\n[checkpoint]\ninterval_s = 1\n\
         [[learner]]\n{LEARNER}"
    );
    // Each node learns its own model (a cluster's global model is one binary model).
    let own = [("THRESHER_NATS_GLOBAL_MODEL", "false")];
    let d = start_node(dir.path(), &server.url(), "mc", &config, &own);
    wait_pulling(&d);
    let js = JetStream::connect(&server.url());
    let train = four_classes(900, 3);
    let lines: Vec<&str> = train.lines().collect();
    for (b, part) in lines.chunks(100).enumerate() {
        assert!(!js.publish_until_stored(&format!("mc{b}"), &(part.join("\n") + "\n")));
    }
    let group = settled_group(&d, 900);
    let test = four_classes(300, 4);
    let (status, answer, _) = d.post("/v1/predict", "text/plain", test.clone());
    assert_eq!(status, 200, "{answer}");
    let predicted = classes_of(&answer);
    let acc = accuracy(&predicted, &test);
    assert!(acc > 0.85, "held-out accuracy {acc}: {group}");
}

/// `four_classes` as JSON lines, every other label given by its class's name.
fn named_json(text: &str, names: &[&str]) -> String {
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            let mut tokens = line.split(' ');
            let class: usize = tokens.next().unwrap().parse().unwrap();
            let (indices, values): (Vec<u32>, Vec<f64>) = tokens
                .map(|p| {
                    let (j, v) = p.split_once(':').unwrap();
                    (j.parse::<u32>().unwrap(), v.parse::<f64>().unwrap())
                })
                .unzip();
            let label = match i % 2 {
                0 => Value::from(names[class]),
                _ => Value::from(class),
            };
            let sample = serde_json::json!({"label": label, "indices": indices, "values": values});
            format!("{sample}\n")
        })
        .collect()
}

#[test]
fn named_classes_are_taken_by_name_and_answered_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let names = ["north", "east", "south", "west"];
    let learner = LEARNER.replace(
        "classes = 4",
        "classes = [\"north\", \"east\", \"south\", \"west\"]",
    );
    let config = test_config(dir.path(), &learner, "");
    let d = Daemon::start(&["--config", config.to_str().unwrap()]);
    // A name that is not a class's refuses the body, naming its line; nothing is learned.
    let bad = "{\"label\": 0, \"indices\": [1], \"values\": [1.0]}\n\
               {\"label\": \"up\", \"indices\": [1], \"values\": [1.0]}\n";
    let (status, body, _) = d.post("/v1/samples", "application/x-ndjson", bad);
    assert_eq!((status, &body["line"]), (400, &Value::from(2)), "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("not a class name"),
        "{body}"
    );
    let (status, body, _) = d.post(
        "/v1/samples",
        "application/x-ndjson",
        named_json(&four_classes(1200, 5), &names),
    );
    assert_eq!(status, 202, "{body}");
    let group = settled_group(&d, 1200);
    assert_eq!(group["classes"], serde_json::json!(names));
    let test = four_classes(300, 6);
    let (status, answer, _) = d.post("/v1/predict", "text/plain", test.clone());
    assert_eq!(status, 200, "{answer}");
    let predicted: Vec<u64> = answer["predictions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| names.iter().position(|n| p == n).expect("a class name") as u64)
        .collect();
    let acc = accuracy(&predicted, &test);
    assert!(acc > 0.85, "held-out accuracy {acc}");
    // A late label may be a name.
    let (status, answer) = post_json(
        &d,
        "/v1/predict",
        &serde_json::json!([{"id": "q", "indices": [1, 2], "values": [1.5, 1.5]}]),
    );
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = post_json(
        &d,
        "/v1/labels",
        &serde_json::json!([{"id": "q", "label": "north"}]),
    );
    assert_eq!(
        (status, &answer["joined"]),
        (202, &Value::from(1)),
        "{answer}"
    );
    settled_group(&d, 1201);
    let dom = crate::status_page::browse(&format!("{}/", d.base), &["--dump-dom"]);
    assert!(dom.contains("class west</th>"), "{dom}");
}
