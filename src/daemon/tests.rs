//! In-process tests of [`run`]: the whole daemon on a tokio runtime, listening on port 0 (the address
//! comes back through [`RunOptions::bound`]), stopped by its shutdown future; then restarted from the
//! checkpoint it wrote. HTTP is a blocking `reqwest` client on the test thread, outside the runtime.
//!
//! Stopping is checked to wait on events only: the daemons here give open connections an hour
//! ([`GRACE`]) to finish, and the wait for `run` to return gives up after [`DEADLINE`]; a stop that
//! waited out a timer (an idle keep-alive connection of the client left open) would not return in
//! time.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use reqwest::blocking::Client;
use reqwest::StatusCode;
use serde_json::Value;
use tokio::runtime::Runtime;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::daemon::{checkpoint, checkpoint_path, run, run_with_grace, DaemonError, RunOptions};
use crate::synth::{sparse_stream, to_libsvm};

/// Upper bound on every wait (each normally takes well under a second).
const DEADLINE: Duration = Duration::from_secs(5);
/// How long the daemons here let open HTTP connections finish once stopping: far beyond
/// [`DEADLINE`], so a stop that waited for it would fail the test.
const GRACE: Duration = Duration::from_secs(3600);

/// A small, quick daemon on `127.0.0.1:0` with its checkpoints in `dir`.
fn config(dir: &Path) -> Config {
    let mut config = Config::defaults();
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.data_dir = Some(dir.to_path_buf());
    config.window_capacity = 1000;
    config.snapshot_interval = Duration::from_millis(20);
    // The kernel's scheduling defaults: the test threads are not re-tuned.
    config.worker_slice_ns = 0;
    config.yield_interval = Duration::ZERO;
    config
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A running daemon: its task, its address and the trigger of its shutdown future.
struct Daemon {
    task: JoinHandle<Result<(), DaemonError>>,
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
}

impl Daemon {
    /// Spawns `run(config)` (with [`GRACE`]) on `rt` and waits until it is bound.
    fn start(rt: &Runtime, config: Config) -> Daemon {
        let (bound, mut bound_rx) = watch::channel(None);
        let (stop, stopped) = oneshot::channel::<()>();
        let options = RunOptions {
            bound: Some(bound),
            ..RunOptions::default()
        };
        let shutdown = async move {
            let _ = stopped.await;
        };
        let task = rt.spawn(run_with_grace(config, options, shutdown, GRACE));
        let addr = rt.block_on(async {
            let addr = tokio::time::timeout(DEADLINE, bound_rx.wait_for(Option::is_some)).await;
            let addr = addr
                .expect("bound in time")
                .expect("run keeps the sender until bound");
            addr.expect("is_some")
        });
        Daemon { task, addr, stop }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Fires the shutdown future; returns what `run` returned, once it has.
    fn shutdown(self, rt: &Runtime) -> Result<(), DaemonError> {
        self.stop.send(()).unwrap();
        // The timer is made inside the runtime (`timeout` needs one).
        rt.block_on(async { tokio::time::timeout(DEADLINE, self.task).await })
            .expect("run returns without waiting out a timer")
            .expect("run does not panic")
    }
}

/// GET `url` as JSON.
fn get(client: &Client, url: &str) -> (StatusCode, Value) {
    let response = client.get(url).send().unwrap();
    let status = response.status();
    (status, response.json().unwrap())
}

/// Polls GET /v1/model until `done` holds for the served model; returns that model.
fn wait_for_model(client: &Client, daemon: &Daemon, done: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let (status, model) = get(client, &daemon.url("/v1/model"));
        if status == StatusCode::OK && done(&model) {
            return model;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "no such model in time: {status} {model}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Posts LIBSVM lines; asserts they are all accepted.
fn post_samples(client: &Client, daemon: &Daemon, body: String, n: usize) {
    let response = client
        .post(daemon.url("/v1/samples"))
        .header("content-type", "text/plain")
        .body(body)
        .send()
        .unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    assert_eq!(
        response.json::<Value>().unwrap(),
        serde_json::json!({"accepted": n})
    );
}

/// Serve, learn, stop on the shutdown future with a final checkpoint; start again on the same data
/// directory and serve the restored model before any new sample, then keep learning from it.
#[test]
fn stops_on_its_shutdown_future_with_a_checkpoint_and_restarts_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let client = Client::new();
    let data = sparse_stream(400, 60, 5, 8, 0.1, false, 11);
    let (first, second) = data.samples.split_at(300);

    let daemon = Daemon::start(&rt, config(dir.path()));
    let (status, _) = get(&client, &daemon.url("/readyz"));
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "no model yet");
    post_samples(&client, &daemon, to_libsvm(first), 300);
    let served = wait_for_model(&client, &daemon, |m| m["samples_seen"] == 300);
    assert!(
        !checkpoint_path(dir.path()).exists(),
        "none before the first interval"
    );
    // The client keeps its connection open: the stop closes it rather than wait for it.
    let result = daemon.shutdown(&rt);
    assert!(result.is_ok(), "{result:?}");

    // The final checkpoint holds the last published snapshot (the learner may have stepped since).
    let saved = checkpoint::read(dir.path())
        .unwrap()
        .expect("the final checkpoint");
    assert_eq!(saved.learners.len(), 1);
    let snapshot = saved.learners[0].snapshot.clone().expect("a snapshot");
    assert_eq!(snapshot.learner, "primary");
    assert_eq!(snapshot.samples_seen, 300);
    assert!(snapshot.version >= served["version"].as_u64().unwrap());
    assert_eq!(saved.learners[0].state.samples.len(), 300);

    // Restarted: ready at once, with the same model, before any sample arrives.
    let daemon = Daemon::start(&rt, config(dir.path()));
    let (status, _) = get(&client, &daemon.url("/readyz"));
    assert_eq!(status, StatusCode::OK);
    let (status, restored) = get(&client, &daemon.url("/v1/model"));
    assert_eq!(status, StatusCode::OK);
    assert_eq!(restored["version"], snapshot.version);
    assert_eq!(restored["samples_seen"], 300);
    assert_eq!(
        restored["support"],
        serde_json::json!(snapshot.model.support)
    );
    // ... and it learns on from there.
    post_samples(&client, &daemon, to_libsvm(second), 100);
    let resumed = wait_for_model(&client, &daemon, |m| m["samples_seen"] == 400);
    assert!(resumed["version"].as_u64().unwrap() > snapshot.version);
    assert_eq!(resumed["window_samples"], 400);
    let result = daemon.shutdown(&rt);
    assert!(result.is_ok(), "{result:?}");
    let saved = checkpoint::read(dir.path()).unwrap().unwrap();
    assert_eq!(saved.learners[0].state.samples.len(), 400);
}

/// A port already taken is a `Bind` error naming the address, and `run` returns without serving.
#[test]
fn an_address_in_use_is_a_bind_error() {
    let rt = runtime();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut config = Config::defaults();
    config.listen = taken.local_addr().unwrap();
    let (bound, bound_rx) = watch::channel(None);
    let options = RunOptions {
        bound: Some(bound),
        ..RunOptions::default()
    };
    let result = rt
        .block_on(async {
            let run = run(config.clone(), options, std::future::pending());
            tokio::time::timeout(DEADLINE, run).await
        })
        .expect("run returns in time");
    match result {
        Err(DaemonError::Bind { addr, .. }) => assert_eq!(addr, config.listen),
        other => panic!("expected a bind error, got {other:?}"),
    }
    assert_eq!(*bound_rx.borrow(), None, "never bound, never told");
}
