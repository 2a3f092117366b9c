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
pub mod pace;

/// Niceness of the body parser threads relative to the HTTP workers (nice 0).
pub(crate) const PARSER_NICE: i32 = 10;

/// Niceness of the learner threads: between the two. Why: under sustained load at nice 10, level with
/// the parsers, a learner spent ~40% of its time waiting for a core behind bodies it could not absorb
/// anyway (the parsed samples then wait in the queue, and further POSTs get 503); at nice 5 it keeps
/// up — no 503s, staleness p50 0.5 s instead of 0.8 s, the same ingest rate (`examples/loadgen`).
pub(crate) const LEARNER_NICE: i32 = 5;

/// Sets the calling thread's nice value. On Linux the nice value is per thread, so the learners and
/// the body parsers — throughput work — yield the two cores to the HTTP workers, whose requests
/// (GET /v1/model above all) are latency work. Best effort: a failure leaves the default.
pub(crate) fn set_thread_nice(nice: i32) {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority only reads its integer arguments; `who = 0` is the calling thread.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, nice);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
}

/// How the throughput threads (body parsers and learners) are scheduled: `server.worker_slice_us` and
/// `server.yield_interval_us`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorkerScheduling {
    /// The time slice they ask for, nanoseconds; 0 = the kernel's default.
    pub slice_ns: u64,
    /// How often they yield at the kernels' yield points ([`crate::courtesy`]); zero = never.
    pub yield_interval: Duration,
}

impl WorkerScheduling {
    pub fn of(config: &Config) -> WorkerScheduling {
        WorkerScheduling {
            slice_ns: config.worker_slice_ns,
            yield_interval: config.yield_interval,
        }
    }
}

/// Sets the calling thread's nice value, its time slice (unless `slice_ns` is 0) and its yield interval
/// (the throughput threads: body parsers and learners), once per thread: a parser runs on tokio's
/// blocking pool and calls this before every body.
pub(crate) fn set_throughput_scheduling(nice: i32, scheduling: WorkerScheduling) {
    thread_local! {
        static DONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if DONE.with(|done| done.replace(true)) {
        return;
    }
    set_thread_nice(nice);
    if scheduling.slice_ns > 0 {
        // Best effort, like the nice value: an old kernel keeps its default slice.
        let _ = request_short_slice(scheduling.slice_ns);
    }
    crate::courtesy::enable_for_this_thread(scheduling.yield_interval);
}

/// Sets the calling HTTP thread's scheduling (the read thread and the runtime's workers), once per
/// thread. With `server.realtime_http`: SCHED_FIFO (priority 1). Why: on 2 busy cores a thread woken
/// for a `GET /v1/model` waited milliseconds in the run queue behind nice-0 work (the load generator,
/// other processes); a FIFO thread runs at once. What bounds the risk: these threads only shuttle
/// requests (parsing runs on the blocking pool, learning on nice +5 threads) and the kernel's RT
/// throttling leaves 5% of each second to everything else. Best effort: without CAP_SYS_NICE it logs
/// one warning per thread and the thread keeps the default policy.
///
/// Without it, each thread asks for a `server.http_slice_us` time slice ([`request_short_slice`]),
/// which needs no privilege.
pub fn set_latency_scheduling(realtime: bool, slice_ns: u64) {
    thread_local! {
        static DONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if DONE.with(|d| d.replace(true)) {
        return;
    }
    if !realtime {
        if slice_ns == 0 {
            return;
        }
        if let Err(error) = request_short_slice(slice_ns) {
            tracing::debug!(%error, "cannot shorten an HTTP thread's time slice; it keeps the default");
        }
        return;
    }
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 1 };
        // RESET_ON_FORK: threads a worker spawns (the blocking pool that parses bodies) start under the
        // default policy instead of inheriting FIFO.
        let policy = libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK;
        // SAFETY: `0` is the calling thread; `param` is a valid sched_param for the call's duration.
        if unsafe { libc::sched_setscheduler(0, policy, &param) } != 0 {
            tracing::warn!(
                error = %std::io::Error::last_os_error(),
                "server.realtime_http: cannot switch an HTTP thread to SCHED_FIFO; it keeps the default policy"
            );
        }
    }
}

/// The time slice the HTTP workers ask the scheduler for: 100 µs, the shortest Linux grants.
pub const LATENCY_SLICE_NS: u64 = 100_000;

/// Asks the scheduler for a short time slice for the calling thread (`slice_ns`), keeping its policy
/// and nice value: Linux's EEVDF scheduler (6.12 and later) gives a thread with a shorter slice an
/// earlier virtual deadline, so when it wakes — an HTTP worker with a `GET /v1/model` to answer — it
/// runs next, preempting longer-slice work (body parsing, learning) instead of waiting out the
/// running thread's slice (~3 ms). No privilege is needed; older kernels ignore the request. Returns
/// the OS error if the call itself is refused.
pub fn request_short_slice(slice_ns: u64) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        /// `struct sched_attr` (SCHED_ATTR_SIZE_VER0, 48 bytes) of `sched_setattr(2)`.
        #[repr(C)]
        struct SchedAttr {
            size: u32,
            sched_policy: u32,
            sched_flags: u64,
            sched_nice: i32,
            sched_priority: u32,
            sched_runtime: u64,
            sched_deadline: u64,
            sched_period: u64,
        }
        // SAFETY: getpriority only reads its integer arguments; `who = 0` is the calling thread.
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let attr = SchedAttr {
            size: std::mem::size_of::<SchedAttr>() as u32,
            sched_policy: libc::SCHED_OTHER as u32,
            sched_flags: 0,
            sched_nice: nice,
            sched_priority: 0,
            sched_runtime: slice_ns,
            sched_deadline: 0,
            sched_period: 0,
        };
        // SAFETY: `0` is the calling thread; `attr` is a valid sched_attr that outlives the call and
        // whose `size` field says how much of it the kernel may read.
        let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = slice_ns;
    Ok(())
}

/// glibc's `M_ARENA_MAX` for the daemon, unless `MALLOC_ARENA_MAX` is set.
const MALLOC_ARENAS: i32 = 2;

/// Caps glibc's malloc arenas before any thread starts. Why: by default glibc gives each busy thread its
/// own arena (up to 8 per core), and the parse pool's threads — which allocate every sample the learners
/// later free — left RSS creeping by ~25% over a 3M-sample stream (`benches/rss_soak.sh`: 776 → 990 MiB);
/// with two arenas it is flat. An explicit `MALLOC_ARENA_MAX` in the environment wins.
pub fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only reads its integer arguments; called before the runtime's threads exist.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, MALLOC_ARENAS);
        }
    }
}

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};
use parking_lot::Mutex;
use thiserror::Error;
use tokio::sync::Notify;

use crate::api::{router, AppState, Batch};
use crate::config::{Config, LearnerConfig};
use crate::ingest::batch::{parse_body_into, BodyFormat, FeatureDictionary, Rules};
use crate::ingest::budget::{QueuedBatch, SampleBudget};
use crate::ingest::pressure::ParseGauge;
use crate::metrics::{reason, Metrics};
use crate::sample::SampleBlock;
use crate::snapshot::{
    publish, run_snapshot_loop, set_gauges, set_solver_gauges, ModelCell, SharedLearner,
};
use crate::solver::stream::{build, StepOutcome};
use checkpoint::{Checkpoint, CheckpointError, LearnerCheckpoint, LearnerIdentity};
use pace::StepPacer;

/// Block steps a learner takes per lock, so inserts and snapshots interleave with solving.
const STEPS_PER_LOCK: usize = 4;
/// How long an idle learner or the router waits before re-checking for shutdown.
const IDLE_WAIT: Duration = Duration::from_millis(20);
/// How long a learner out of step credit waits for a batch before looking at the parsers again.
const PACED_WAIT: Duration = Duration::from_millis(5);
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
}

/// Start-up options that are not configuration.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Read LIBSVM / JSON lines from stdin as well.
    pub stdin: bool,
    /// Ignore (and overwrite) any checkpoint in the data directory.
    pub fresh: bool,
}

/// Raised by a worker's drop guard when it unwinds: stops the daemon instead of hanging it.
struct Fatal {
    flag: AtomicBool,
    who: Mutex<Option<String>>,
    notify: Notify,
}

struct PanicGuard {
    fatal: Arc<Fatal>,
    name: String,
}

impl Drop for PanicGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            tracing::error!(learner = %self.name, "learner thread panicked; stopping the daemon");
            self.fatal
                .who
                .lock()
                .get_or_insert_with(|| self.name.clone());
            self.fatal.flag.store(true, Ordering::Release);
            self.fatal.notify.notify_one();
        }
    }
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
fn restore(config: &Config, dir: &std::path::Path) -> Result<Option<Checkpoint>, CheckpointError> {
    let Some(ckpt) = checkpoint::read(dir)? else {
        return Ok(None);
    };
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
    Ok(Some(ckpt))
}

/// Runs the daemon until `shutdown` resolves (or a learner panics). Logs `listening on ADDR` once bound.
pub async fn run(
    config: Config,
    options: RunOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), DaemonError> {
    let metrics = Metrics::new();
    let fatal = Arc::new(Fatal {
        flag: AtomicBool::new(false),
        who: Mutex::new(None),
        notify: Notify::new(),
    });

    // Restore (or start fresh).
    let restored = match (&config.data_dir, options.fresh) {
        (Some(dir), false) => restore(&config, dir)?,
        (Some(dir), true) => {
            tracing::info!(dir = %dir.display(), "--fresh: ignoring any checkpoint");
            None
        }
        (None, _) => None,
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
        let cell = Arc::new(ModelCell::new(
            &lc.name,
            saved.and_then(|s| s.snapshot.clone()),
        ));
        metrics.register_learner(&lc.name, config.window_capacity);
        set_gauges(&cell, &metrics);
        set_solver_gauges(&metrics, &lc.name, learner.gauges());
        if let Some(s) = saved {
            tracing::info!(learner = %lc.name, window = s.state.samples.len(), version = s.snapshot.as_ref().map_or(0, |s| s.version), "restored from checkpoint");
        }
        learners.push((Arc::new(Mutex::new(learner)), cell));
    }

    // Queues and threads.
    let (ingest_tx, ingest_rx) = bounded::<Batch>(config.queue_capacity);
    let budget = SampleBudget::new(config.queue_samples);
    let parsing = ParseGauge::new();
    let worker_scheduling = WorkerScheduling::of(&config);
    let stop_router = Arc::new(AtomicBool::new(false));
    let mut learner_txs = Vec::new();
    let mut learner_threads: Vec<(String, JoinHandle<()>)> = Vec::new();
    for (learner, cell) in &learners {
        // As deep as the ingest queue: a learner that falls behind then finds the whole backlog waiting
        // and absorbs it in one insert, where only the newest `window.capacity` samples cost more than a
        // prediction (`StreamingLearner::insert_batches`); a shallow channel would hand it a few batches
        // per round and keep it behind. The router blocks when it is full, backing up the ingest queue.
        let (tx, rx) = bounded::<Batch>(config.queue_capacity);
        learner_txs.push(tx);
        let name = learner.lock().config().name.clone();
        let (learner, fatal) = (learner.clone(), fatal.clone());
        let pressure = Pressure {
            parsing: parsing.clone(),
            pacer: StepPacer::new(config.busy_step_share),
        };
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
                    pressure,
                    Some(publisher),
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
        std::thread::Builder::new()
            .name("snapshot".into())
            .spawn(move || {
                let mut last_checkpoint = Instant::now();
                run_snapshot_loop(&learners, &metrics, interval, &stop, || {
                    if let Some(dir) = &dir {
                        if last_checkpoint.elapsed() >= every {
                            last_checkpoint = Instant::now();
                            if let Err(e) = write_checkpoint(dir, &learners, &dictionary) {
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
        losses: losses.clone(),
        max_dim: config.max_dim,
        predict: false,
    };
    let state = Arc::new(AppState {
        cells: learners.iter().map(|(_, c)| c.clone()).collect(),
        dictionary: dictionary.clone(),
        metrics: metrics.clone(),
        ingest_rules: ingest_rules.clone(),
        predict_rules: Rules {
            losses,
            max_dim: config.max_dim,
            predict: true,
        },
        ingest: Mutex::new(Some(ingest_tx.clone())),
        budget: budget.clone(),
        parsing,
        worker_scheduling,
    });
    if options.stdin {
        let (tx, budget, stop, metrics, dictionary) = (
            ingest_tx.clone(),
            budget.clone(),
            stop_router.clone(),
            metrics.clone(),
            dictionary.clone(),
        );
        let parsing = state.parsing.clone();
        // Detached: a blocking stdin read cannot be interrupted; it checks `stop` between lines.
        std::thread::Builder::new()
            .name("stdin".into())
            .spawn(move || {
                stdin_loop(
                    tx,
                    &budget,
                    &stop,
                    &metrics,
                    &ingest_rules,
                    &dictionary,
                    &parsing,
                )
            })
            .expect("spawn stdin thread");
    }
    drop(ingest_tx);

    let listener =
        listen(config.listen, config.recv_buffer_bytes).map_err(|source| DaemonError::Bind {
            addr: config.listen,
            source,
        })?;
    let bound = listener.local_addr().map_err(DaemonError::Serve)?;
    tracing::info!("listening on {bound}");
    let app = router(state.clone(), config.body_limit_bytes);
    let fatal_wait = fatal.clone();
    let stop_signal = async move {
        tokio::select! {
            _ = shutdown => tracing::info!("shutdown requested"),
            _ = fatal_wait.notify.notified() => {},
        }
    };
    // The read thread accepts and serves reads; bodies go to this runtime (`http`). It returns once
    // stopped and its connections closed (or `SHUTDOWN_GRACE` passed).
    let (realtime, slice_ns) = (config.realtime_http, config.http_slice_ns);
    let front = http::spawn(
        listener.into_std().map_err(DaemonError::Serve)?,
        app,
        tokio::runtime::Handle::current(),
        stop_signal,
        SHUTDOWN_GRACE,
        move || set_latency_scheduling(realtime, slice_ns),
    )
    .map_err(DaemonError::Serve)?;
    let served = match tokio::task::spawn_blocking(move || front.join()).await {
        Ok(Ok(served)) => served,
        _ => Err(std::io::Error::other("the HTTP read thread panicked")),
    };
    tracing::info!("HTTP server stopped");

    // Ordered stop: ingest closed → router drains → learners drain → final snapshot → checkpoint.
    tracing::info!("stopping: draining the ingest queue");
    state.ingest.lock().take();
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
    if fatal.flag.load(Ordering::Acquire) {
        let who = fatal.who.lock().clone().unwrap_or_default();
        return Err(DaemonError::LearnerPanicked(who));
    }
    if let Some(dir) = &config.data_dir {
        write_checkpoint(dir, &learners, &dictionary)?;
        tracing::info!(dir = %dir.display(), "final checkpoint written");
    }
    tracing::info!("stopped");
    Ok(())
}

/// Binds the HTTP listener. A `recv_buffer_bytes` above 0 is set as the listening socket's `SO_RCVBUF`
/// before `listen`, so every accepted connection inherits it (and the window scale it implies). Why
/// one might: the kernel's autotuning grows a busy loopback connection's buffer to tens of MiB, and a
/// co-located client's write of a 7 MB body then runs for milliseconds in one system call, where
/// (kernel preemption being off here) nothing else gets that core. Off by default: with the read
/// thread and the yield points the GET tail no longer needed it, and it cost a client on the same
/// machine ~10–15% of its ingest rate (see the README's daemon benchmarks).
fn listen(addr: SocketAddr, recv_buffer_bytes: usize) -> std::io::Result<tokio::net::TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    // As `TcpListener::bind` does: a restarted daemon can rebind while old connections linger.
    socket.set_reuseaddr(true)?;
    if recv_buffer_bytes > 0 {
        socket.set_recv_buffer_size(u32::try_from(recv_buffer_bytes).unwrap_or(u32::MAX))?;
    }
    socket.bind(addr)?;
    socket.listen(1024)
}

/// Writes every learner's state and published snapshot (each learner locked in turn).
fn write_checkpoint(
    dir: &std::path::Path,
    learners: &[(SharedLearner, Arc<ModelCell>)],
    dictionary: &FeatureDictionary,
) -> Result<(), CheckpointError> {
    let ckpt = Checkpoint {
        feature_names: dictionary.names(),
        learners: learners
            .iter()
            .map(|(l, cell)| {
                let l = l.lock();
                LearnerCheckpoint {
                    identity: identity(l.config()),
                    snapshot: cell.get().map(|s| (*s).clone()),
                    state: l.state(),
                }
            })
            .collect(),
    };
    checkpoint::write(dir, &ckpt)
}

/// Moves batches from the ingest queue to every learner. Blocking sends: a slow learner backs the
/// ingest queue up, which turns into 503s at the HTTP edge. On `stop`, forwards what is queued, then
/// exits (dropping the learner senders tells the learners to finish).
fn router_loop(rx: Receiver<Batch>, txs: Vec<Sender<Batch>>, stop: &AtomicBool, drain: bool) {
    let forward = |batch: Batch| {
        for tx in &txs {
            // A learner that died (panicked) has dropped its receiver; the others go on.
            let _ = tx.send(batch.clone());
        }
    };
    loop {
        let stopping = stop.load(Ordering::Acquire);
        if !drain && !stopping {
            std::thread::sleep(IDLE_WAIT);
            continue;
        }
        if stopping {
            while let Ok(batch) = rx.try_recv() {
                forward(batch);
            }
            return;
        }
        match rx.recv_timeout(IDLE_WAIT) {
            Ok(batch) => forward(batch),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// Where and how often a learner thread publishes its snapshots.
struct Publisher {
    cell: Arc<ModelCell>,
    metrics: Metrics,
    interval: Duration,
}

/// What a learner knows of the ingest side: whether bodies are being parsed, and its step credit.
struct Pressure {
    parsing: Arc<ParseGauge>,
    pacer: StepPacer,
}

/// A learner's thread: absorb every waiting batch in one insert (its re-thresholding is paid once per
/// round, not per batch, so ingest cost per sample falls as load rises), then solve a few steps (so the
/// model keeps improving under sustained ingest) — while bodies are being parsed, only within the step
/// share its inserts earned (`pace`: ingest first) — and every `interval` publish a certified snapshot
/// (between steps, so no other thread ever waits on the certificate); block on the channel when idle
/// or out of step credit; exit when the router is gone and the channel is empty.
fn learner_loop(
    learner: SharedLearner,
    rx: Receiver<Batch>,
    mut pressure: Pressure,
    publisher: Option<Publisher>,
    _guard: PanicGuard,
) {
    let mut waiting: Vec<Batch> = Vec::new();
    let mut last_publish = Instant::now();
    loop {
        if let Some(p) = &publisher {
            if last_publish.elapsed() >= p.interval {
                last_publish = Instant::now();
                publish(&learner, &p.cell, &p.metrics);
            }
        }
        let mut disconnected = false;
        loop {
            match rx.try_recv() {
                Ok(batch) => waiting.push(batch),
                Err(crossbeam_channel::TryRecvError::Empty) => break,
                Err(crossbeam_channel::TryRecvError::Disconnected) => {
                    disconnected = true;
                    break;
                }
            }
        }
        if !waiting.is_empty() {
            let started = Instant::now();
            let blocks: Vec<&SampleBlock> = waiting.iter().map(|b| b.samples()).collect();
            learner.lock().insert_batches(&blocks);
            drop(blocks);
            waiting.clear();
            pressure.pacer.absorbed(started.elapsed());
        }
        if disconnected {
            return;
        }
        let allowance = pressure.pacer.allowance(pressure.parsing.busy());
        if allowance == Some(Duration::ZERO) {
            match rx.recv_timeout(PACED_WAIT) {
                Ok(batch) => waiting.push(batch),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            continue;
        }
        let started = Instant::now();
        let outcome = {
            let mut l = learner.lock();
            let mut last = StepOutcome::Stepped;
            for _ in 0..STEPS_PER_LOCK {
                last = l.step();
                if last != StepOutcome::Stepped || allowance.is_some_and(|a| started.elapsed() >= a)
                {
                    break;
                }
            }
            last
        };
        if allowance.is_some() {
            pressure.pacer.stepped(started.elapsed());
        }
        if let StepOutcome::Idle(_) = outcome {
            match rx.recv_timeout(IDLE_WAIT) {
                Ok(batch) => learner.lock().insert(batch.samples()),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }
}

/// `--stdin`: LIBSVM or JSON lines (a line starting with `{` is JSON). A bad line is logged with its
/// number and counted; the rest go on. Lines are batched while more input is immediately available.
fn stdin_loop(
    tx: Sender<Batch>,
    budget: &Arc<SampleBudget>,
    stop: &AtomicBool,
    metrics: &Metrics,
    rules: &Rules,
    dictionary: &FeatureDictionary,
    parsing: &Arc<ParseGauge>,
) {
    use std::io::BufRead;
    let mut reader = std::io::BufReader::with_capacity(1 << 16, std::io::stdin());
    let mut batch = SampleBlock::new();
    let mut line = String::new();
    let mut number = 0usize;
    let mut parsing_batch = None;
    let send = |batch: &mut SampleBlock| {
        if batch.is_empty() {
            return;
        }
        let n = batch.len() as u64;
        // Only when stopping: a paused stdin is waited for, never dropped.
        let dropped_at_stop = || {
            metrics
                .rejected
                .with_label_values(&[reason::QUEUE_FULL])
                .inc_by(n)
        };
        // Back-pressure: wait for room (in the sample budget, then in the queue) rather than drop, since
        // stdin can be paused; unless stopping.
        let mut samples = std::mem::take(batch);
        let queued = loop {
            match QueuedBatch::reserve(budget, samples) {
                Ok(queued) => break queued,
                Err(back) if !stop.load(Ordering::Acquire) => {
                    samples = *back;
                    std::thread::sleep(IDLE_WAIT);
                }
                Err(_) => {
                    dropped_at_stop();
                    return;
                }
            }
        };
        let mut item: Batch = Arc::new(queued);
        loop {
            match tx.send_timeout(item, IDLE_WAIT) {
                Ok(()) => {
                    metrics.ingested.with_label_values(&["stdin"]).inc_by(n);
                    return;
                }
                Err(crossbeam_channel::SendTimeoutError::Timeout(back))
                    if !stop.load(Ordering::Acquire) =>
                {
                    item = back
                }
                Err(_) => {
                    dropped_at_stop();
                    return;
                }
            }
        }
    };
    loop {
        line.clear();
        match reader.read_line(&mut line) {
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
        // Counted as a body being parsed from the first line of a batch until it is sent (`pace`).
        parsing_batch.get_or_insert_with(|| parsing.enter());
        if !crate::ingest::is_skippable(&line) {
            let format = if line.trim_start().starts_with('{') {
                BodyFormat::Ndjson
            } else {
                BodyFormat::Libsvm
            };
            // Straight onto the batch; a bad line leaves it as it was.
            if let Err(e) = parse_body_into(format, &line, rules, dictionary, &mut batch) {
                tracing::warn!(line = number, error = %e.message, "stdin: bad line skipped");
                metrics.rejected.with_label_values(&[reason::INVALID]).inc();
            }
        }
        if batch.len() >= STDIN_BATCH || reader.buffer().is_empty() {
            send(&mut batch);
            parsing_batch = None;
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
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::ring::Window;
    use crate::sample::Sample;
    use crate::solver::stream::{LearnerSnapshot, LearnerState, LearnerStats, StreamingLearner};

    /// The kernel takes the request and the thread runs with the asked-for slice (where the kernel
    /// reports slices: `se.slice` in `/proc/thread-self/sched`, Linux 6.12 and later).
    #[test]
    fn a_thread_gets_the_short_slice_it_asks_for() {
        std::thread::spawn(|| {
            request_short_slice(LATENCY_SLICE_NS).expect("sched_setattr");
            let sched = std::fs::read_to_string("/proc/thread-self/sched").unwrap_or_default();
            if let Some(line) = sched.lines().find(|l| l.starts_with("se.slice")) {
                let slice: u64 = line.split(':').nth(1).unwrap().trim().parse().unwrap();
                assert_eq!(slice, LATENCY_SLICE_NS, "{line}");
            }
        })
        .join()
        .unwrap();
    }

    /// A parser or learner thread keeps its lowered priority and gets the `server.worker_slice_us`
    /// slice; asking again on the same thread changes nothing (the blocking pool reuses threads).
    #[test]
    fn throughput_threads_get_their_nice_value_and_slice_once() {
        std::thread::spawn(|| {
            let scheduling = |slice_ns| WorkerScheduling {
                slice_ns,
                yield_interval: Duration::from_micros(200),
            };
            set_throughput_scheduling(PARSER_NICE, scheduling(1_000_000));
            set_throughput_scheduling(LEARNER_NICE, scheduling(2_000_000));
            // SAFETY: getpriority only reads its integer arguments; `who = 0` is this thread.
            let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
            assert_eq!(nice, PARSER_NICE);
            let sched = std::fs::read_to_string("/proc/thread-self/sched").unwrap_or_default();
            if let Some(line) = sched.lines().find(|l| l.starts_with("se.slice")) {
                let slice: u64 = line.split(':').nth(1).unwrap().trim().parse().unwrap();
                assert_eq!(slice, 1_000_000, "{line}");
            }
        })
        .join()
        .unwrap();
    }

    /// A learner that panics on its first insert.
    struct Faulty {
        config: LearnerConfig,
        window: Window,
    }

    impl StreamingLearner for Faulty {
        fn config(&self) -> &LearnerConfig {
            &self.config
        }
        fn insert_batches(&mut self, _: &[&SampleBlock]) {
            panic!("injected fault");
        }
        fn evict(&mut self, _: crate::sample::Row<'_>, _: f64) {}
        fn step(&mut self) -> StepOutcome {
            StepOutcome::Idle(crate::solver::stream::Idle::EmptyWindow)
        }
        fn snapshot(&mut self) -> LearnerSnapshot {
            unreachable!("never published")
        }
        fn stats(&self) -> LearnerStats {
            LearnerStats::default()
        }
        fn window(&self) -> &Window {
            &self.window
        }
        fn state(&self) -> LearnerState {
            unreachable!("never checkpointed")
        }
    }

    #[test]
    fn a_panicking_learner_raises_the_fatal_flag_instead_of_hanging() {
        let config = Config::defaults().learners.remove(0);
        let learner: SharedLearner = Arc::new(Mutex::new(Box::new(Faulty {
            config,
            window: Window::new(4),
        })));
        let fatal = Arc::new(Fatal {
            flag: AtomicBool::new(false),
            who: Mutex::new(None),
            notify: Notify::new(),
        });
        let (tx, rx) = bounded::<Batch>(1);
        let guard = PanicGuard {
            fatal: fatal.clone(),
            name: "faulty".into(),
        };
        let pressure = Pressure {
            parsing: ParseGauge::new(),
            pacer: StepPacer::new(1.0),
        };
        let handle = std::thread::spawn(move || learner_loop(learner, rx, pressure, None, guard));
        let budget = SampleBudget::new(10);
        let one = SampleBlock::from_samples(&[Sample::new(vec![1], vec![1.0], 1.0, None).unwrap()]);
        tx.send(Arc::new(QueuedBatch::reserve(&budget, one).unwrap()))
            .unwrap();
        assert!(handle.join().is_err(), "the learner thread ends by panic");
        assert!(fatal.flag.load(Ordering::Acquire));
        assert_eq!(fatal.who.lock().as_deref(), Some("faulty"));
        // The stored permit wakes the shutdown future even though nobody was waiting yet.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(1), fatal.notify.notified())
                .await
                .expect("notified")
        });
    }

    /// Every accepted connection inherits the listening socket's receive buffer (Linux caps the asked-for
    /// size at `net.core.rmem_max`, doubles it and reports the doubled one); 0 leaves the kernel's
    /// default, which autotuning then grows.
    #[test]
    fn accepted_connections_inherit_the_receive_buffer() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap();
        rt.block_on(async {
            let rmem_max: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(usize::MAX);
            let capped = 2 * (256 * 1024).min(rmem_max);
            for (asked, expected) in [(256 * 1024, Some(capped)), (0, None)] {
                let listener = listen("127.0.0.1:0".parse().unwrap(), asked).unwrap();
                let addr = listener.local_addr().unwrap();
                let client = tokio::net::TcpStream::connect(addr);
                let (accepted, _client) = tokio::join!(listener.accept(), client);
                let (accepted, _) = accepted.unwrap();
                let size = tokio::net::TcpSocket::from_std_stream(accepted.into_std().unwrap())
                    .recv_buffer_size()
                    .unwrap() as usize;
                match expected {
                    Some(bytes) => assert_eq!(size, bytes, "asked {asked}"),
                    None => assert_ne!(size, capped, "the kernel's default"),
                }
            }
        });
    }
}
