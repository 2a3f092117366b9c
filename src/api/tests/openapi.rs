//! The OpenAPI document against the router: it parses as OpenAPI 3, every `$ref` resolves, every route
//! `router()` registers is documented with the same methods, and every documented operation reaches a
//! handler (not the 404 fallback).

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use serde_json::Value;

use super::{get, published};

/// `(METHOD, /path)` of every `.route(...)` in `api/mod.rs`, axum's `:param` written `{param}`.
fn routes_in_router_source() -> BTreeSet<(String, String)> {
    let source = include_str!("../mod.rs");
    let mut routes = BTreeSet::new();
    for chunk in source.split(".route(\"").skip(1) {
        let (path, rest) = chunk.split_once('"').expect("a quoted path");
        let path: String = path
            .split('/')
            .map(|s| match s.strip_prefix(':') {
                Some(p) => format!("{{{p}}}"),
                None => s.to_string(),
            })
            .collect::<Vec<_>>()
            .join("/");
        let methods = rest.split_once(')').expect("route(...)").0;
        for m in ["get", "post", "put", "delete", "patch"] {
            if methods.contains(&format!("{m}(")) {
                routes.insert((m.to_uppercase(), path.clone()));
            }
        }
    }
    routes
}

async fn document() -> Value {
    let api = published();
    let (status, doc) = api.json(get("/openapi.json")).await;
    assert_eq!(status, StatusCode::OK);
    doc
}

fn documented(doc: &Value) -> BTreeSet<(String, String)> {
    let mut ops = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("a path item").keys() {
            ops.insert((method.to_uppercase(), path.clone()));
        }
    }
    ops
}

fn refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(r)) = o.get("$ref") {
                out.push(r.clone());
            }
            o.values().for_each(|x| refs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

#[tokio::test]
async fn the_document_is_openapi_3_and_its_refs_resolve() {
    let doc = document().await;
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."), "{doc}");
    let parsed: utoipa::openapi::OpenApi =
        serde_json::from_value(doc.clone()).expect("an OpenAPI 3 document");
    assert!(!parsed.paths.paths.is_empty());
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(!all.is_empty());
    for r in all {
        let pointer = r.strip_prefix('#').expect("a local $ref");
        assert!(doc.pointer(pointer).is_some(), "{r} does not resolve");
    }
    let schemes = &doc["components"]["securitySchemes"]["bearer"];
    assert_eq!(schemes["type"], "http");
    assert_eq!(schemes["scheme"], "bearer");
}

#[tokio::test]
async fn every_route_is_documented_and_every_operation_is_served() {
    let doc = document().await;
    let served = routes_in_router_source();
    assert!(served.len() >= 9, "{served:?}");
    assert_eq!(documented(&doc), served);
    let api = published();
    for (method, path) in documented(&doc) {
        let uri = path.replace("{name}", "primary");
        let req = Request::builder()
            .method(Method::from_bytes(method.as_bytes()).unwrap())
            .uri(&uri)
            .header(header::CONTENT_TYPE, "text/plain")
            .body(Body::from("1 1:1\n"))
            .unwrap();
        let (status, _, body) = api.send(req).await;
        let text = String::from_utf8_lossy(&body);
        assert!(
            !(status == StatusCode::NOT_FOUND && text.contains("no route")),
            "{method} {uri}: {status} {text}"
        );
    }
}

#[tokio::test]
async fn every_operation_documents_its_errors_and_security() {
    let doc = document().await;
    let op = |m: &str, p: &str| doc["paths"][p][m].clone();
    let statuses = |o: &Value| -> BTreeSet<String> {
        o["responses"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    let samples = op("post", "/v1/samples");
    for s in ["202", "400", "401", "403", "413", "415", "503"] {
        assert!(statuses(&samples).contains(s), "samples lacks {s}");
    }
    let content = samples["requestBody"]["content"].as_object().unwrap();
    let types: BTreeSet<&str> = content.keys().map(String::as_str).collect();
    assert_eq!(
        types,
        BTreeSet::from(["application/json", "application/x-ndjson", "text/plain"])
    );
    assert_eq!(samples["security"][0]["bearer"][0], "write");
    for s in ["200", "400", "404", "413", "415", "503"] {
        assert!(statuses(&op("post", "/v1/predict")).contains(s), "{s}");
    }
    for (m, p) in [
        ("get", "/v1/model"),
        ("get", "/v1/models"),
        ("post", "/v1/predict"),
    ] {
        assert_eq!(op(m, p)["security"][0]["bearer"][0], "read", "{p}");
        assert!(statuses(&op(m, p)).contains("401"), "{p}");
        assert!(statuses(&op(m, p)).contains("403"), "{p}");
    }
    for p in ["/healthz", "/readyz", "/openapi.json"] {
        assert_eq!(op("get", p)["security"], serde_json::json!([{}]), "{p}");
    }
    // No tokens configured: "no credentials" is a listed alternative.
    assert!(samples["security"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!({})));
}

#[tokio::test]
async fn the_libsvm_pattern_admits_what_the_daemon_accepts() {
    let doc = document().await;
    let schema = &doc["components"]["schemas"]["Libsvm"];
    let pattern = schema["pattern"].as_str().unwrap();
    // Default config: squared loss, max_dim 2^24 -> at most 7-digit indices.
    assert!(pattern.contains(r"\+?[0-9]{1,7}:"), "{pattern}");
    let max = doc["components"]["schemas"]["SampleObject"]["oneOf"][0]["properties"]["indices"]
        ["items"]["maximum"]
        .as_u64()
        .unwrap();
    assert_eq!(max, (1 << 24) - 1);
}

/// Cases the contract run (benches/schemathesis.sh) found where the document and the server disagreed:
/// the server is right in each, and the document now says so.
#[tokio::test]
async fn the_document_matches_the_server_on_empty_bodies_null_fields_and_model_entries() {
    let doc = document().await;
    let api = published();
    // `[]` and a body of blank lines are refused: the document asks for at least one sample.
    let (status, _) = api
        .json(super::post("/v1/samples", "application/json", "[]"))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = api
        .json(super::post("/v1/predict", "application/json", "[]"))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    for path in ["/v1/samples", "/v1/predict"] {
        let content = &doc["paths"][path]["post"]["requestBody"]["content"];
        assert_eq!(
            content["application/json"]["schema"]["minItems"], 1,
            "{path}"
        );
        assert_eq!(content["application/x-ndjson"]["schema"]["minItems"], 1);
        let pattern = content["text/plain"]["schema"]["pattern"]
            .as_str()
            .or_else(|| doc["components"]["schemas"]["Libsvm"]["pattern"].as_str())
            .unwrap();
        assert!(!pattern.ends_with(")?$"), "{pattern}");
    }
    // `"weight": null` is an absent weight: accepted, and the document allows null.
    let (status, _) = api
        .json(super::post(
            "/v1/samples",
            "application/x-ndjson",
            "{\"features\": {}, \"label\": 0.0, \"weight\": null}\n",
        ))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let named = &doc["components"]["schemas"]["SampleObject"]["oneOf"][1]["properties"];
    assert_eq!(named["weight"]["anyOf"][1]["type"], "null");
    // `/v1/models` entries are the snapshot itself, not wrapped in a variant name.
    let entry = &doc["components"]["schemas"]["ModelEntry"]["oneOf"];
    assert_eq!(entry[0]["$ref"], "#/components/schemas/ModelSnapshot");
    let (_, models) = api.json(get("/v1/models")).await;
    assert_eq!(models["models"][0]["learner"], "primary");
    assert_eq!(models["models"][1]["version"], 0);
}

/// Every field the server writes in a model, an automatic lambda's record and a cluster cut included,
/// is a property of its schema in the document (a field added to `Model` must be documented).
#[tokio::test]
async fn every_field_of_a_served_model_is_in_its_schema() {
    let doc = document().await;
    let mut snapshot = super::snapshot("primary", 3);
    snapshot.model.lambda_auto = Some(crate::model::LambdaAuto {
        grid: vec![1e-2, 1e-3],
        live: 1,
        switches: 2,
        losses: vec![0.4, 0.3],
        criterion: "holdout".into(),
        progressive: vec![0.5, 0.4],
        held_out: 120,
        held_out_dropped: 7,
    });
    snapshot.model.cluster = Some(crate::model::ClusterCut {
        cut: 1,
        proposer: "n1".into(),
        nodes: vec!["n1".into()],
        samples: vec![10],
    });
    let api = super::api(
        vec![Arc::new(super::ModelCell::new("primary", Some(snapshot)))],
        8,
        1000,
    );
    let (status, model) = api.json(get("/v1/models/primary")).await;
    assert_eq!(status, StatusCode::OK);
    let schemas = &doc["components"]["schemas"];
    let resolve = |schema: &Value| -> Value {
        // An optional object is `oneOf [null, $ref]` (or a bare `$ref`).
        let mut found = schema.clone();
        for alternative in schema["oneOf"].as_array().into_iter().flatten() {
            if alternative.get("$ref").is_some() {
                found = alternative.clone();
            }
        }
        match found["$ref"].as_str() {
            Some(r) => schemas[r.trim_start_matches("#/components/schemas/")].clone(),
            None => found,
        }
    };
    let check = |body: &Value, schema: &Value, what: &str| {
        let properties = schema["properties"].as_object().expect(what);
        for key in body.as_object().expect(what).keys() {
            assert!(
                properties.contains_key(key),
                "{what}.{key} is not documented"
            );
        }
    };
    let snapshot_schema = &schemas["ModelSnapshot"];
    check(&model, snapshot_schema, "ModelSnapshot");
    for nested in ["lambda_auto", "cluster", "certificate"] {
        assert!(model[nested].is_object(), "{nested}: {model}");
        let schema = resolve(&snapshot_schema["properties"][nested]);
        check(&model[nested], &schema, nested);
    }
    assert_eq!(model["lambda_auto"]["held_out_dropped"], 7);
}
