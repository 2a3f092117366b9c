//! `thresher serve`: wires ingest, learners, snapshots, checkpoints and the HTTP API, and stops them in
//! order.
//!
//! ```text
//!  HTTP POST /v1/samples ─┐ reserve samples, try_send (503 when the budget or the queue is full)
//!  --stdin reader ────────┴──▶ ingest queue (bounded, batches) ──▶ router thread ──▶ one bounded channel
//!                              (samples in flight bounded by     per learner ──▶ learner thread
//!                               ingest.queue_samples until the   (insert every waiting batch at once /
//!                               last learner drops a batch)       evict / step on its window;
//!                                                                   every interval_ms, between steps,
//!                                                                   certify and publish an immutable
//!                                                                   Arc<Snapshot> into its ModelCell)
//!  snapshot thread: every checkpoint.interval_s write a checkpoint; the final snapshot at shutdown.
//!  HTTP GET handlers read ModelCells only.
//! ```
//!
//! Threads: learners and the snapshot thread are OS threads (solvers know nothing of tokio). HTTP
//! ([`http`]): a read thread accepts every connection and serves those that open with a read (GET
//! model, metrics, health); a connection that opens with a POST is served by the tokio runtime's
//! workers, which read bodies and hand them to the blocking pool's parsers. **Shutdown order** (on the `shutdown` future — SIGINT/SIGTERM in
//! the binary — or when a learner panics): stop accepting HTTP, close ingest, the router drains the
//! queue into the learners, learners absorb what they got and exit, the snapshot thread publishes a
//! final snapshot, the final checkpoint is written, and `run` returns. A panicking learner raises the
//! fatal flag from its drop guard; the daemon then stops the same way but skips the final checkpoint
//! (the learner's state may be half-updated; the last good checkpoint stays) and `run` returns an error.

pub mod checkpoint;
pub mod fault;
pub mod http;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::bounded;
use parking_lot::Mutex;
use thiserror::Error;

use crate::api::auth::{protect, AuthPolicy, Tokens};
use crate::api::{router, AppState};
use crate::config::ConnectionLimits;
use crate::config::{Config, LearnerConfig, StreamSolverKind};
use crate::ingest::batch::{parse_body_into, BodyFormat, FeatureDictionary, Rules};
use crate::ingest::budget::SampleBudget;
use crate::ingest::source::http::HttpSource;
use crate::ingest::source::nats::{AckLedger, Sink};
use crate::ingest::Batch;
use crate::ingest::{Admission, NatsError, Source};
use crate::learner::build;
use crate::learner::publish::{
    run_snapshot_loop, set_gauges, set_solver_gauges, ModelCell, SharedLearner,
};
use crate::learner::worker::{learner_loop, router_loop, Fatal, PanicGuard, Publisher, IDLE_WAIT};
use crate::metrics::{reason, Metrics};
use crate::sample::SampleBlock;
use crate::sys::{set_throughput_scheduling, WorkerScheduling, LEARNER_NICE};
use checkpoint::{Checkpoint, CheckpointError, LearnerCheckpoint, LearnerIdentity};

/// stdin lines per batch at most.
const STDIN_BATCH: usize = 1024;
/// How long open HTTP connections may take to finish once stopping; then they are closed.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, Error)]
pub enum DaemonError {
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("HTTP server failed: {0}")]
    Serve(std::io::Error),
    #[error("learner {0:?} panicked; the daemon stopped (the last good checkpoint is kept)")]
    LearnerPanicked(String),
    #[error(transparent)]
    Tokens(#[from] crate::api::auth::TokensError),
    #[error(transparent)]
    Tls(#[from] http::TlsError),
    #[error(transparent)]
    Nats(#[from] NatsError),
}

/// Start-up options that are not configuration.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Read LIBSVM / JSON lines from stdin as well.
    pub stdin: bool,
    /// Ignore (and overwrite) any checkpoint in the data directory.
    pub fresh: bool,
    /// Learners of the checkpoint the config no longer has, whose state may be discarded
    /// (`--drop-learner NAME`); without it such a checkpoint stops the start.
    pub drop_learners: Vec<String>,
    /// Told the bound address once the listener is bound (before the first request is served): how an
    /// in-process caller that asked for port 0 learns the port. `run` sends `Some(addr)` once; a caller
    /// waits with `receiver.wait_for(Option::is_some)`. The binary leaves it `None` and reads the log.
    pub bound: Option<tokio::sync::watch::Sender<Option<SocketAddr>>>,
}

fn identity(c: &LearnerConfig) -> LearnerIdentity {
    LearnerIdentity {
        name: c.name.clone(),
        loss: c.loss.kind().name().into(),
        k: c.k,
        lambda: c.lambda,
    }
}

/// Restores what the checkpoint holds for the configured learners, checking it fits the config.
///
/// A learner of the checkpoint that the config does not have (renamed or removed) stops the start,
/// naming the learners of both, unless it is listed in `drop`: starting would overwrite its state
/// with the next checkpoint, which must not happen silently. A configured learner the checkpoint does
/// not have starts empty (nothing is lost), logged. The flag says whether the file holds exactly the
/// configured learners (otherwise the next checkpoint must be written even if nothing changes).
fn restore(
    config: &Config,
    dir: &std::path::Path,
    drop: &[String],
) -> Result<Option<(Checkpoint, bool)>, CheckpointError> {
    let Some(mut ckpt) = checkpoint::read(dir)? else {
        return Ok(None);
    };
    let configured: Vec<&str> = config.learners.iter().map(|c| c.name.as_str()).collect();
    let saved: Vec<String> = ckpt
        .learners
        .iter()
        .map(|l| l.identity.name.clone())
        .collect();
    let missing: Vec<&String> = saved
        .iter()
        .filter(|n| !configured.contains(&n.as_str()) && !drop.contains(n))
        .collect();
    if !missing.is_empty() {
        return Err(CheckpointError::Incompatible {
            path: checkpoint::path_in(dir),
            reason: format!(
                "it holds learners {saved:?}, the config has {configured:?}: the state of {missing:?} \
                 would be lost (to discard it, start with --drop-learner NAME for each, or --fresh)"
            ),
        });
    }
    for name in drop {
        if saved.contains(name) {
            tracing::warn!(learner = %name, "--drop-learner: its checkpointed state is discarded");
        } else {
            tracing::warn!(learner = %name, "--drop-learner: no such learner in the checkpoint");
        }
    }
    let exact = saved == configured;
    ckpt.learners
        .retain(|l| configured.contains(&l.identity.name.as_str()));
    for name in &configured {
        if !saved.iter().any(|s| s == name) {
            tracing::info!(learner = %name, "not in the checkpoint: starts empty");
        }
    }
    for l in &ckpt.learners {
        if let Some(c) = config.learners.iter().find(|c| c.name == l.identity.name) {
            if identity(c) != l.identity {
                return Err(CheckpointError::Incompatible {
                    path: checkpoint::path_in(dir),
                    reason: format!(
                        "learner {:?} was saved with loss={} k={} lambda={}, the config has loss={} k={} lambda={}",
                        c.name, l.identity.loss, l.identity.k, l.identity.lambda,
                        c.loss.kind().name(), c.k, c.lambda
                    ),
                });
            }
        }
    }
    Ok(Some((ckpt, exact)))
}

/// Runs the daemon until `shutdown` resolves (or a learner panics). Logs `listening on ADDR` once bound,
/// and sends the address to [`RunOptions::bound`] if given.
pub async fn run(
    config: Config,
    options: RunOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), DaemonError> {
    let metrics = Metrics::new();
    let fatal = Fatal::new();

    // Tokens and certificate first: a bad file stops the start before anything listens.
    let tokens = match &config.auth.tokens_file {
        Some(path) => {
            let tokens = Tokens::load(path)?;
            tracing::info!(file = %path.display(), entries = tokens.len(), "bearer-token authentication on");
            Some(tokens)
        }
        None => None,
    };
    let tls = config.tls.as_ref().map(http::tls_acceptor).transpose()?;
    // The NATS credentials file too (the connection itself may come up later).
    if let Some(path) = config
        .nats
        .as_ref()
        .and_then(|n| n.credentials_file.as_ref())
    {
        std::fs::read(path).map_err(|source| NatsError::Credentials {
            path: path.clone(),
            source,
        })?;
    }
    let limits = fit_to_fd_limit(config.limits);

    // Then the data directory (created, then test-written): one where no checkpoint can be written
    // stops the start before the port is even bound.
    if let Some(dir) = &config.data_dir {
        checkpoint::check_writable(dir)?;
    }
    // Bound next: a port in use stops the start before any thread exists.
    let listener = listen(config.listen).map_err(|source| DaemonError::Bind {
        addr: config.listen,
        source,
    })?;
    if tokens.is_none() && !config.listen.ip().is_loopback() {
        tracing::warn!(
            "NO AUTHENTICATION: listening on {} (not a loopback address) without server.auth_tokens_file; \
             anyone who can reach this port can post samples and read the models",
            config.listen
        );
    }

    // Restore (or start fresh).
    let (restored, restored_exactly) = match (&config.data_dir, options.fresh) {
        (Some(dir), false) => match restore(&config, dir, &options.drop_learners)? {
            Some((ckpt, exact)) => (Some(ckpt), exact),
            None => (None, false),
        },
        (Some(dir), true) => {
            tracing::info!(dir = %dir.display(), "--fresh: ignoring any checkpoint");
            (None, false)
        }
        (None, _) => (None, false),
    };
    let dictionary = Arc::new(match &restored {
        Some(c) => {
            FeatureDictionary::from_names(config.max_named_features, c.feature_names.clone())
        }
        None => FeatureDictionary::new(config.max_named_features),
    });
    let mut learners: Vec<(SharedLearner, Arc<ModelCell>)> = Vec::new();
    for lc in &config.learners {
        let saved = restored
            .as_ref()
            .and_then(|c| c.learners.iter().find(|l| l.identity.name == lc.name));
        let learner = fault::arm(build(
            lc,
            config.window_capacity,
            saved.map(|s| s.state.clone()),
        ));
        metrics.register_learner(&lc.name, config.window_capacity);
        let cell = Arc::new(
            ModelCell::new(&lc.name, saved.and_then(|s| s.snapshot.clone())).with_history(
                config.history_points,
                config.window_capacity,
                &metrics,
            ),
        );
        if let Some(a) = learner.lambda_auto() {
            metrics.register_lambda_grid(&lc.name, &a.grid, a.criterion == "holdout");
        }
        set_gauges(&cell, &metrics);
        set_solver_gauges(&metrics, &lc.name, learner.gauges());
        if let Some(s) = saved {
            tracing::info!(learner = %lc.name, window = s.state.samples.len(), version = s.snapshot.as_ref().map_or(0, |s| s.version), "restored from checkpoint");
        }
        learners.push((Arc::new(Mutex::new(learner)), cell));
    }

    // Which NATS deliveries each learner has absorbed, and the source's unacknowledged batches.
    let deliveries = Arc::new(Deliveries {
        absorbed: learners.iter().map(|_| Arc::default()).collect(),
        ledger: config
            .nats
            .as_ref()
            .map(|n| AckLedger::new(n.max_pending_batches)),
    });
    // What the checkpoint on disk reflects: one restored as it is reflects the state just built from it.
    let written = Arc::new(Mutex::new(
        restored_exactly.then(|| change_mark(&learners, &dictionary, &deliveries)),
    ));

    // Queues and threads.
    let (ingest_tx, ingest_rx) = bounded::<Batch>(config.queue_capacity);
    let admission = Arc::new(Admission::new(
        ingest_tx,
        SampleBudget::new(config.queue_samples),
        metrics.clone(),
    ));
    let worker_scheduling = WorkerScheduling {
        slice_ns: config.worker_slice_ns,
        yield_interval: config.yield_interval,
    };
    let stop_router = Arc::new(AtomicBool::new(false));
    let mut learner_txs = Vec::new();
    let mut learner_threads: Vec<(String, JoinHandle<()>)> = Vec::new();
    for ((learner, cell), absorbed) in learners.iter().zip(&deliveries.absorbed) {
        let absorbed = absorbed.clone();
        // As deep as the ingest queue: a learner that falls behind then finds the whole backlog waiting
        // and absorbs it in one insert, where only the newest `window.capacity` samples cost more than a
        // prediction (`StreamingLearner::insert_batches`); a shallow channel would hand it a few batches
        // per round and keep it behind. The router blocks when it is full, backing up the ingest queue.
        let (tx, rx) = bounded::<Batch>(config.queue_capacity);
        learner_txs.push(tx);
        let name = learner.lock().config().name.clone();
        let (learner, fatal) = (learner.clone(), fatal.clone());
        let publisher = Publisher {
            cell: cell.clone(),
            metrics: metrics.clone(),
            interval: config.snapshot_interval,
        };
        let thread_name = name.clone();
        let handle = std::thread::Builder::new()
            .name(format!("learner-{name}"))
            .spawn(move || {
                set_throughput_scheduling(LEARNER_NICE, worker_scheduling);
                learner_loop(
                    learner,
                    rx,
                    Some(publisher),
                    absorbed,
                    PanicGuard {
                        fatal,
                        name: thread_name,
                    },
                )
            })
            .expect("spawn learner thread");
        learner_threads.push((name, handle));
    }
    let router_thread = {
        let (stop, drain) = (stop_router.clone(), config.drain);
        std::thread::Builder::new()
            .name("ingest-router".into())
            .spawn(move || router_loop(ingest_rx, learner_txs, &stop, drain))
            .expect("spawn router thread")
    };
    let stop_snapshots = Arc::new(AtomicBool::new(false));
    let snapshot_thread = {
        let (learners, metrics, stop) = (learners.clone(), metrics.clone(), stop_snapshots.clone());
        let (interval, every) = (config.snapshot_interval, config.checkpoint_interval);
        let (dir, dictionary) = (config.data_dir.clone(), dictionary.clone());
        let (written, deliveries) = (written.clone(), deliveries.clone());
        // Batches from NATS wait for a checkpoint to be acknowledged: one is written at least every
        // `nats.ack_interval_ms` while some wait.
        let ack_every = config.nats.as_ref().map(|n| n.ack_interval);
        std::thread::Builder::new()
            .name("snapshot".into())
            .spawn(move || {
                let mut last_checkpoint = Instant::now();
                run_snapshot_loop(&learners, &metrics, interval, &stop, || {
                    if let Some(dir) = &dir {
                        let since = last_checkpoint.elapsed();
                        let acks_wait = ack_every.is_some_and(|every| {
                            since >= every
                                && deliveries
                                    .ledger
                                    .as_ref()
                                    .is_some_and(|l| l.awaiting_checkpoint())
                        });
                        if since >= every || acks_wait {
                            last_checkpoint = Instant::now();
                            let mut written = written.lock();
                            if let Err(e) = write_checkpoint(
                                dir,
                                &learners,
                                &dictionary,
                                &metrics,
                                &deliveries,
                                &mut written,
                            ) {
                                tracing::error!(error = %e, "periodic checkpoint failed");
                            }
                        }
                    }
                });
            })
            .expect("spawn snapshot thread")
    };

    let losses: Vec<_> = config.learners.iter().map(|l| l.loss).collect();
    let ingest_rules = Rules {
        max_abs_value: config.max_abs_value,
        max_name_bytes: config.max_feature_name_bytes,
        max_new_names: config.max_new_names_per_request,
        ..Rules::new(losses.clone(), config.max_dim, false)
    };
    let state = Arc::new(AppState {
        cells: learners.iter().map(|(_, c)| c.clone()).collect(),
        metrics: metrics.clone(),
        ingest: Arc::new(HttpSource {
            admission: admission.clone(),
            dictionary: dictionary.clone(),
            rules: ingest_rules.clone(),
            predict_rules: Rules {
                predict: true,
                ..ingest_rules.clone()
            },
            metrics: metrics.clone(),
            worker_scheduling,
            body_idle: config.limits.body_idle,
        }),
        snapshot_interval: config.snapshot_interval,
        cluster: config
            .nats
            .as_ref()
            .map(|n| Arc::new(crate::cluster::ClusterView::new(&n.node))),
    });
    if options.stdin {
        let (admission, stop, metrics, dictionary) = (
            admission.clone(),
            stop_router.clone(),
            metrics.clone(),
            dictionary.clone(),
        );
        // Detached: a blocking stdin read cannot be interrupted; it checks `stop` between lines.
        std::thread::Builder::new()
            .name("stdin".into())
            .spawn(move || stdin_loop(&admission, &stop, &metrics, &ingest_rules, &dictionary))
            .expect("spawn stdin thread");
    }

    let mut nats = match (&config.nats, &deliveries.ledger) {
        (Some(nats), Some(ledger)) => {
            let replay = restored
                .as_ref()
                .map(|c| c.pending_acks.clone())
                .unwrap_or_default();
            let sink = Sink {
                admission: admission.clone(),
                rules: state.ingest.rules.clone(),
                dictionary: dictionary.clone(),
                metrics: metrics.clone(),
            };
            tracing::info!(servers = ?nats.servers, node = %nats.node, "NATS source starting");
            Some(
                crate::ingest::source::nats::start(nats.clone(), sink, ledger.clone(), replay)
                    .await?,
            )
        }
        _ => None,
    };
    // Membership: announced on the source's connection until the daemon stops.
    let (stop_announcing, announcing) = tokio::sync::watch::channel(false);
    let announcer = match (&config.nats, &nats, &state.cluster) {
        (Some(n), Some(source), Some(view)) => {
            let announcer = crate::cluster::Announcer {
                client: source.client(),
                stream: n.stream.clone(),
                node: n.node.clone(),
                ttl: n.member_ttl,
                replicas: n.replicas,
                view: view.clone(),
                cells: state.cells.clone(),
                nodes: metrics.cluster_nodes.clone(),
            };
            Some(tokio::spawn(announcer.run(announcing.clone())))
        }
        _ => None,
    };
    // The global model: one exchange task per SDIHT learner with a fixed lambda.
    let mut exchanges = Vec::new();
    if let (Some(n), Some(source), Some(view)) = (&config.nats, &nats, &state.cluster) {
        for ((learner, _), lc) in learners.iter().zip(&config.learners) {
            let decomposes = lc.solver == StreamSolverKind::Sdiht && lc.lambda_auto.is_none();
            if !(n.global_model && decomposes) {
                continue;
            }
            let exchange = crate::cluster::global::GlobalModel {
                client: source.client(),
                subjects: crate::cluster::global::Subjects::new(&n.stream, &lc.name),
                node: n.node.clone(),
                view: view.clone(),
                interval: config.snapshot_interval,
                learner: learner.clone(),
                config: lc.clone(),
                metrics: metrics.clone(),
            };
            exchanges.push(tokio::spawn(exchange.run(announcing.clone())));
        }
    }

    let bound = listener.local_addr().map_err(DaemonError::Serve)?;
    tracing::info!("listening on {bound}");
    if let Some(tell) = &options.bound {
        // A receiver dropped meanwhile is no error: nobody waits for the address any more.
        tell.send_replace(Some(bound));
    }
    let app = protect(
        router(state.clone(), config.body_limit_bytes, tokens.is_some()),
        AuthPolicy {
            tokens,
            metrics: config.auth.metrics,
        },
        metrics.clone(),
    );
    let fatal_wait = fatal.clone();
    let stop_signal = async move {
        tokio::select! {
            _ = shutdown => tracing::info!("shutdown requested"),
            _ = fatal_wait.raised() => {},
        }
    };
    // The read thread accepts and serves reads; bodies go to this runtime (`http`). It returns once
    // stopped and its connections closed (or `SHUTDOWN_GRACE` passed).
    let front = http::spawn(
        listener.into_std().map_err(DaemonError::Serve)?,
        app,
        tokio::runtime::Handle::current(),
        stop_signal,
        SHUTDOWN_GRACE,
        http::Front {
            limits,
            tls,
            metrics: metrics.clone(),
        },
    )
    .map_err(DaemonError::Serve)?;
    let served = match tokio::task::spawn_blocking(move || front.join()).await {
        Ok(Ok(served)) => served,
        _ => Err(std::io::Error::other("the HTTP read thread panicked")),
    };
    tracing::info!("HTTP server stopped");

    // Ordered stop: ingest closed → router drains → learners drain → final snapshot → checkpoint.
    tracing::info!("stopping: draining the ingest queue");
    if let Some(nats) = nats.as_mut() {
        nats.stop_pulling().await;
    }
    state.ingest.admission.close();
    stop_router.store(true, Ordering::Release);
    let _ = tokio::task::spawn_blocking(move || {
        let _ = router_thread.join();
        for (name, handle) in learner_threads {
            if let Err(payload) = handle.join() {
                let panic = fault::panic_message(payload.as_ref());
                tracing::error!(learner = %name, panic, "learner thread ended by panic");
            }
        }
        tracing::info!("learners stopped");
        stop_snapshots.store(true, Ordering::Release);
        let _ = snapshot_thread.join();
        tracing::info!("final snapshot published");
    })
    .await;
    served.map_err(DaemonError::Serve)?;
    if let Some(who) = fatal.raised_by() {
        return Err(DaemonError::LearnerPanicked(who));
    }
    if let Some(dir) = &config.data_dir {
        let mut written = written.lock();
        match write_checkpoint(
            dir,
            &learners,
            &dictionary,
            &metrics,
            &deliveries,
            &mut written,
        ) {
            Ok(Written::Yes) => tracing::info!(dir = %dir.display(), "final checkpoint written"),
            Ok(Written::Unchanged) => {
                tracing::info!(dir = %dir.display(), "final checkpoint: nothing changed since the last one")
            }
            // The previous checkpoint stays, and the fault was logged and counted.
            Err(CheckpointError::NonFinite { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    stop_announcing.send_replace(true);
    if let Some(announcer) = announcer {
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, announcer).await;
    }
    for exchange in exchanges {
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, exchange).await;
    }
    if let Some(nats) = nats {
        nats.finish(SHUTDOWN_GRACE).await;
        tracing::info!("NATS source stopped");
    }
    tracing::info!("stopped");
    Ok(())
}

/// File descriptors kept free of connections: the listener, the runtimes' event fds, stdio, the
/// checkpoint files being written, the config and tokens files.
const FD_RESERVE: u64 = 64;

/// Raises the file-descriptor limit to its hard limit (logged) and lowers `server.max_connections`,
/// with a warning, to what it leaves after [`FD_RESERVE`] (half of a limit below twice the reserve).
fn fit_to_fd_limit(mut limits: ConnectionLimits) -> ConnectionLimits {
    let fds = match crate::sys::raise_fd_limit() {
        Ok(fds) => fds,
        Err(error) => {
            tracing::warn!(%error, "cannot read the file-descriptor limit; server.max_connections kept");
            return limits;
        }
    };
    tracing::info!(
        was = fds.was,
        soft = fds.soft,
        hard = fds.hard,
        "file-descriptor limit (RLIMIT_NOFILE) raised to the hard limit"
    );
    let reserve = FD_RESERVE.min(fds.soft / 2);
    let room = usize::try_from(fds.soft - reserve)
        .unwrap_or(usize::MAX)
        .max(1);
    if limits.max_connections > room {
        tracing::warn!(
            configured = limits.max_connections,
            lowered_to = room,
            fd_limit = fds.soft,
            "server.max_connections exceeds what the file-descriptor limit allows (less {reserve} kept \
             for other files); lowered"
        );
        limits.max_connections = room;
    }
    limits
}

/// Binds the HTTP listener (the kernel's default socket buffers and their autotuning).
fn listen(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    // As `TcpListener::bind` does: a restarted daemon can rebind while old connections linger.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

/// The NATS deliveries each learner has absorbed (raised by its thread under its lock), and the NATS
/// source's ledger of unacknowledged batches, if the source is on.
struct Deliveries {
    absorbed: Vec<Arc<AtomicU64>>,
    ledger: Option<Arc<AckLedger>>,
}

/// What a checkpoint reflects: each learner's mutation counter, published version and absorbed NATS
/// delivery, and the number of feature names (which only grow). Equal marks mean an unchanged state.
type ChangeMark = (Vec<(u64, u64, u64)>, usize);

fn change_mark(
    learners: &[(SharedLearner, Arc<ModelCell>)],
    dictionary: &FeatureDictionary,
    deliveries: &Deliveries,
) -> ChangeMark {
    let per_learner = learners
        .iter()
        .zip(&deliveries.absorbed)
        .map(|((l, cell), absorbed)| {
            let l = l.lock();
            let (mutations, absorbed) = (l.stats().mutations, absorbed.load(Ordering::Acquire));
            drop(l);
            (mutations, cell.get().map_or(0, |s| s.version), absorbed)
        })
        .collect();
    (per_learner, dictionary.len())
}

/// Whether [`write_checkpoint`] wrote a file.
#[derive(Debug, PartialEq)]
enum Written {
    Yes,
    /// Nothing changed since the checkpoint on disk: not rewritten.
    Unchanged,
}

/// Writes every learner's state and published snapshot (each learner locked in turn), unless nothing
/// changed since `last` (the mark of the checkpoint on disk, updated on success): an idle daemon does
/// not rewrite the same checkpoint every interval. A state or snapshot holding a non-finite number is
/// refused (the previous file stays): a checkpoint must always restore.
///
/// NATS: the file holds every delivery all learners had absorbed when their states were taken (read
/// under each learner's lock, like the state); once it is on disk those may be acknowledged, and it
/// lists the ones not yet acknowledged so a restart can acknowledge them.
fn write_checkpoint(
    dir: &std::path::Path,
    learners: &[(SharedLearner, Arc<ModelCell>)],
    dictionary: &FeatureDictionary,
    metrics: &Metrics,
    deliveries: &Deliveries,
    last: &mut Option<ChangeMark>,
) -> Result<Written, CheckpointError> {
    use crate::metrics::checkpoint_outcome as outcome;
    let count = |o: &str| metrics.checkpoints.with_label_values(&[o]).inc();
    let mark = change_mark(learners, dictionary, deliveries);
    if last.as_ref() == Some(&mark) {
        // The file on disk holds what the learners hold now.
        if let Some(ledger) = &deliveries.ledger {
            let covered = mark.0.iter().map(|m| m.2).min().unwrap_or(0);
            ledger.durable_through(covered);
        }
        count(outcome::UNCHANGED);
        return Ok(Written::Unchanged);
    }
    let mut covered = u64::MAX;
    let learner_checkpoints = learners
        .iter()
        .zip(&deliveries.absorbed)
        .map(|((l, cell), absorbed)| {
            let l = l.lock();
            covered = covered.min(absorbed.load(Ordering::Acquire));
            LearnerCheckpoint {
                identity: identity(l.config()),
                snapshot: cell.get().map(|s| (*s).clone()),
                state: l.state(),
            }
        })
        .collect();
    let covered = if covered == u64::MAX { 0 } else { covered };
    let ckpt = Checkpoint {
        feature_names: dictionary.names(),
        learners: learner_checkpoints,
        pending_acks: deliveries
            .ledger
            .as_ref()
            .map_or_else(Vec::new, |l| l.held(covered)),
    };
    if let Some(l) = ckpt
        .learners
        .iter()
        .find(|l| !l.state.is_finite() || l.snapshot.as_ref().is_some_and(|s| !s.is_finite()))
    {
        count(outcome::REFUSED);
        let e = CheckpointError::NonFinite {
            path: checkpoint::path_in(dir),
            learner: l.identity.name.clone(),
        };
        tracing::error!(error = %e, "checkpoint refused");
        return Err(e);
    }
    match checkpoint::write(dir, &ckpt) {
        Ok(()) => {
            count(outcome::WRITTEN);
            *last = Some(mark);
            if let Some(ledger) = &deliveries.ledger {
                ledger.durable_through(covered);
            }
            Ok(Written::Yes)
        }
        Err(e) => {
            count(outcome::FAILED);
            Err(e)
        }
    }
}

/// `--stdin`: LIBSVM or JSON lines (a line starting with `{` is JSON). A bad line is logged with its
/// number and counted; the rest go on. Lines are batched while more input is immediately available.
fn stdin_loop(
    admission: &Admission,
    stop: &AtomicBool,
    metrics: &Metrics,
    rules: &Rules,
    dictionary: &FeatureDictionary,
) {
    use std::io::BufRead;
    let mut reader = std::io::BufReader::with_capacity(1 << 16, std::io::stdin());
    let mut batch = SampleBlock::new();
    let mut bytes = Vec::new();
    let mut number = 0usize;
    // Back-pressure: wait for room rather than drop, since stdin can be paused; unless stopping.
    let send = |batch: &mut SampleBlock| {
        if !batch.is_empty() {
            let _ = admission.admit_waiting(std::mem::take(batch), Source::Stdin, stop, IDLE_WAIT);
        }
    };
    loop {
        bytes.clear();
        match reader.read_until(b'\n', &mut bytes) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                tracing::error!(error = %e, "stdin read failed; stdin ingest stops");
                break;
            }
        }
        number += 1;
        if stop.load(Ordering::Acquire) {
            return;
        }
        // A line that is not UTF-8 is a bad line like any other: skipped, logged and counted, and the
        // input goes on (reading it as a `String` ended stdin ingest at that line).
        let Ok(line) = std::str::from_utf8(&bytes) else {
            tracing::warn!(line = number, "stdin: bad line skipped: not UTF-8");
            metrics.rejected.with_label_values(&[reason::INVALID]).inc();
            continue;
        };
        if !crate::ingest::is_skippable(line) {
            let format = if line.trim_start().starts_with('{') {
                BodyFormat::Ndjson
            } else {
                BodyFormat::Libsvm
            };
            // Straight onto the batch; a bad line leaves it as it was.
            if let Err(e) = parse_body_into(format, line, rules, dictionary, &mut batch) {
                tracing::warn!(line = number, error = %e.message, "stdin: bad line skipped");
                metrics.rejected.with_label_values(&[reason::INVALID]).inc();
            }
        }
        if batch.len() >= STDIN_BATCH || reader.buffer().is_empty() {
            send(&mut batch);
        }
    }
    send(&mut batch);
    tracing::info!(lines = number, "stdin: end of input; still serving");
}

/// Convenience for callers that want the data directory's checkpoint path.
pub fn checkpoint_path(dir: &std::path::Path) -> PathBuf {
    checkpoint::path_in(dir)
}

#[cfg(test)]
mod tests;
