//! The NATS JetStream source against real `nats-server` processes (`nats_fixture`): several daemons
//! share one durable consumer, and every acknowledged batch ends up in exactly one node's checkpoint,
//! across a kill -9 and restart of a node; `GET /v1/cluster` lists the live members, drops a killed
//! one by the membership bucket's TTL and a stopped one at once.

use std::path::Path;
use std::time::Duration;

use crate::common::{poll, Daemon, WAIT};
use crate::nats_fixture::{
    assert_each_batch_in_one_checkpoint, free_port, kill_9, start_node, wait_pulling, JetStream,
    KeyWatch, NatsCluster, NatsServer,
};

/// Every node's config: small and fast.
const CONFIG: &str = "[snapshot]\ninterval_ms = 50\n[window]\ncapacity = 100000\n[checkpoint]\n\
                      interval_s = 1\n[[learner]]\nk = 5\nlambda = 0.1\n";

/// A daemon pulling from `url` as `node`, checkpointing into `dir/node`, acking quickly.
fn node(dir: &Path, url: &str, node: &str) -> Daemon {
    node_with(dir, url, node, &[])
}

/// [`node`] with more environment (later entries win).
pub fn node_with(dir: &Path, url: &str, node: &str, extra: &[(&str, &str)]) -> Daemon {
    let daemon = start_node(dir, url, node, CONFIG, extra);
    wait_pulling(&daemon);
    daemon
}

/// Batch `b` of the seeded stream: `SAMPLES` lines, LIBSVM for even `b` and JSON lines for odd `b`,
/// each sample carrying the marker feature `MARKER + b` so a checkpoint tells which batch it came from.
pub const SAMPLES: usize = 20;
pub const MARKER: u32 = 1000;

fn batch(b: u32) -> String {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(u64::from(b));
    (0..SAMPLES)
        .map(|_| {
            let (x1, x2): (f64, f64) = (rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0));
            let (y, m) = (2.0 * x1 - x2, MARKER + b);
            if b.is_multiple_of(2) {
                format!("{y} 1:{x1} 2:{x2} {m}:1\n")
            } else {
                format!("{{\"label\":{y},\"indices\":[1,2,{m}],\"values\":[{x1},{x2},1]}}\n")
            }
        })
        .collect()
}

/// Publishes batches `range` with message ids `b<N>`; returns how many the stream called duplicates.
pub fn publish(js: &JetStream, range: std::ops::Range<u32>) -> usize {
    range
        .filter(|b| js.publish_until_stored(&format!("b{b}"), &batch(*b)))
        .count()
}

/// Two nodes share the consumer; one is killed (-9) mid-stream and restarted from its checkpoint. At
/// the end the stream is empty (every batch acknowledged or terminated), every batch is in exactly one
/// node's checkpoint with all its samples, re-published ids were dropped by the stream, and the one
/// bad batch was terminated and counted.
#[test]
fn every_acknowledged_batch_is_in_exactly_one_node_across_a_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let server = NatsServer::start(&dir.path().join("js"));
    let url = server.url();
    let a = node(dir.path(), &url, "a");
    let b = node(dir.path(), &url, "b");
    let js = JetStream::connect(&url);

    const TOTAL: u32 = 60;
    assert_eq!(publish(&js, 0..TOTAL / 2), 0);
    // Kill -9 a node once it has acknowledged batches and holds unacknowledged ones (its checkpoint
    // holds acked batches; the others must be redelivered).
    let busy = |d: &Daemon| {
        d.metric("thresher_nats_batches_total{outcome=\"acked\"}") > 0.0
            && d.metric("thresher_nats_pending_batches") > 0.0
    };
    let victim = poll(
        "a node to acknowledge a batch while holding others",
        WAIT,
        Duration::from_millis(5),
        || {
            if busy(&a) {
                Some("a")
            } else {
                busy(&b).then_some("b")
            }
        },
        || format!("a:\n{}\nb:\n{}", a.log(), b.log()),
    );
    let (killed, survivor) = if victim == "a" { (a, b) } else { (b, a) };
    kill_9(killed);
    assert_eq!(publish(&js, TOTAL / 2..TOTAL), 0);
    // The same ids again: dropped by the stream's duplicate window.
    assert_eq!(publish(&js, 0..10), 10);
    let restarted = node(dir.path(), &url, victim);
    js.rt.block_on(async {
        js.js
            .publish("thresher.samples", "1 3:1\nnot a sample\n".into())
            .await
            .unwrap()
            .await
            .unwrap();
    });
    js.wait_empty(WAIT, || {
        format!(
            "restarted:\n{}\nsurvivor:\n{}",
            restarted.log(),
            survivor.log()
        )
    });
    let (a, b) = (restarted, survivor);
    let invalid = |d: &Daemon| d.metric("thresher_nats_batches_total{outcome=\"invalid\"}");
    assert_eq!(invalid(&a) + invalid(&b), 1.0);

    // Stopped cleanly, each node's final checkpoint holds what it learned.
    for d in [a, b] {
        let (status, log) = d.terminate();
        assert!(status.success(), "{log}");
    }
    let held =
        assert_each_batch_in_one_checkpoint(dir.path(), &["a", "b"], TOTAL, SAMPLES, MARKER, "");
    assert!(
        held.values().all(|batches| !batches.is_empty()),
        "both nodes took part: {held:?}"
    );
    drop(server);
}

/// The node names `GET /v1/cluster` lists on `d` (None while the membership is not open yet).
fn members(d: &Daemon) -> Option<Vec<String>> {
    let (status, body) = d.get("/v1/cluster");
    if status == 503 {
        return None;
    }
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    Some(
        v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["node"].as_str().unwrap().to_string())
            .collect(),
    )
}

/// Membership: both nodes listed with their learners; a node killed -9 drops out after its TTL
/// (2 s), one stopped cleanly at once; a daemon without NATS answers 404.
#[test]
fn the_cluster_lists_live_members_and_forgets_a_killed_one_after_its_ttl() {
    let dir = tempfile::tempdir().unwrap();
    let server = NatsServer::start(&dir.path().join("js"));
    let url = server.url();
    let a = node(dir.path(), &url, "a");
    let b = node(dir.path(), &url, "b");
    a.wait_for("both members listed", |d| {
        members(d).filter(|m| m == &["a", "b"]).map(|_| ())
    });
    let (status, body) = a.get("/v1/cluster");
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["node"], "a");
    assert_eq!(v["ttl_s"], 2);
    let first = &v["nodes"][0];
    assert_eq!(first["learners"][0]["name"], "primary");
    assert!(first["age_s"].as_f64().unwrap() <= 2.0, "{first}");
    assert_eq!(first["thresher"], env!("CARGO_PKG_VERSION"));
    a.wait_for("the members gauge to count both", |d| {
        (d.metric("thresher_cluster_nodes") == 2.0).then_some(())
    });

    // A killed node cannot leave: it drops out because the server expires its last announcement after
    // the bucket's TTL.
    let js = JetStream::connect(&url);
    assert_eq!(js.members_ttl(), Duration::from_secs(2));
    let watch = KeyWatch::start(&url, "b");
    kill_9(b);
    a.wait_for("the killed node to drop out", |d| {
        members(d).filter(|m| m == &["a"]).map(|_| ())
    });
    assert!(!watch.left(), "a killed node removed its key");
    drop(watch);

    let b = node(dir.path(), &url, "b");
    a.wait_for("the restarted node listed", |d| {
        members(d).filter(|m| m == &["a", "b"]).map(|_| ())
    });
    // A clean stop leaves at once, not after the TTL: the node purges its key before it exits, and the
    // next listing no longer has it.
    let watch = KeyWatch::start(&url, "b");
    let (status, log) = b.terminate();
    assert!(status.success(), "{log}");
    watch.wait_left("the stopped node to remove its key");
    assert_eq!(members(&a), Some(vec!["a".to_string()]));

    let alone = Daemon::start(&[]);
    assert_eq!(alone.get("/v1/cluster").0, 404);
    drop(server);
}

/// Three NATS servers (JetStream, the stream with 3 replicas) and three daemons: one server is killed
/// -9 mid-stream while the publisher retries each batch with its message id until the stream takes it.
/// Every batch ends up in exactly one node's checkpoint, none twice, none lost.
#[test]
fn three_servers_and_three_nodes_lose_nothing_when_a_server_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = NatsCluster::start(&dir.path().join("js"));
    let url = cluster.url.clone();
    // A long ack_wait: no daemon dies here, and a leader election must not cause redeliveries.
    let env = [
        ("THRESHER_NATS_REPLICAS", "3"),
        ("THRESHER_NATS_ACK_WAIT_S", "30"),
    ];
    let nodes: Vec<Daemon> = ["a", "b", "c"]
        .iter()
        .map(|n| node_with(dir.path(), &url, n, &env))
        .collect();
    let js = JetStream::connect(&url);
    const TOTAL: u32 = 40;
    // A retry after an acknowledgement lost in the election may be called a duplicate: not counted.
    publish(&js, 0..TOTAL / 2);
    cluster.kill(0);
    publish(&js, TOTAL / 2..TOTAL);
    js.wait_empty(Duration::from_secs(60), || {
        nodes
            .iter()
            .map(|d| d.log())
            .collect::<Vec<_>>()
            .join("\n---\n")
    });
    for d in nodes {
        let (status, log) = d.terminate();
        assert!(status.success(), "{log}");
    }
    assert_each_batch_in_one_checkpoint(dir.path(), &["a", "b", "c"], TOTAL, SAMPLES, MARKER, "");
    drop(cluster);
}

/// A daemon whose NATS server is not up yet starts and serves HTTP; once the server comes up on that
/// address it creates the stream and learns what is published. With `nats.global_model = false` its
/// model says it is the node's own (`"scope": "node"`).
#[test]
fn a_node_started_before_its_server_pulls_once_the_server_is_up() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let url = format!("nats://127.0.0.1:{port}");
    // Without the global model: this node's model is its own.
    let a = start_node(
        dir.path(),
        &url,
        "a",
        CONFIG,
        &[("THRESHER_NATS_GLOBAL_MODEL", "false")],
    );
    assert_eq!(a.get("/healthz").0, 200);
    assert_eq!(
        a.get("/v1/cluster").0,
        503,
        "no membership without a server"
    );
    let _server = NatsServer::start_on(&dir.path().join("js"), port);
    wait_pulling(&a);
    let js = JetStream::connect(&url);
    assert_eq!(publish(&js, 0..4), 0);
    a.wait_for("the batches to be learned and acknowledged", |d| {
        let acked = d.metric("thresher_nats_batches_total{outcome=\"acked\"}");
        (acked == 4.0).then_some(())
    });
    assert_eq!(
        a.metric("thresher_samples_ingested_total{source=\"nats\"}"),
        (4 * SAMPLES) as f64
    );
    // The model says it is this node's own.
    let model = a.wait_for("a model", Daemon::model);
    assert_eq!(
        (model["node"].as_str(), model["scope"].as_str()),
        (Some("a"), Some("node"))
    );
}

/// A credentials file that cannot be read stops the start, naming it, before anything listens.
#[test]
fn an_unreadable_credentials_file_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.creds");
    let out = crate::common::thresher_with_env(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            dir.path().to_str().unwrap(),
        ],
        &[
            ("THRESHER_NATS_URL", "nats://127.0.0.1:1"),
            ("THRESHER_NATS_NODE", "a"),
            ("THRESHER_NATS_CREDENTIALS_FILE", missing.to_str().unwrap()),
        ],
    );
    crate::common::assert_failed_with(&out, "cannot read NATS credentials file");
    assert!(crate::common::stderr(&out).contains("nope.creds"));
    assert!(!crate::common::stderr(&out).contains("listening on"));
}
