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
//!  checkpoint thread: every checkpoint.interval_s write a checkpoint; the final snapshot at shutdown.
//!  HTTP GET handlers read ModelCells only.
//! ```
//!
//! [`run`] is a list of phases, each in its own file: `preflight.rs` (every check that can stop the
//! start, the data directory locked ([`datadir`]), and the port bound), `restore.rs` (the checkpoint
//! read, the learners built), `learners.rs` (the ingest queue, the router and the learner threads),
//! the write-ahead log replayed into them (`restore.rs`), the [`checkpoint`] thread, `sources.rs`
//! (stdin, NATS, the cluster tasks), `serve.rs` (the HTTP front until the stop signal), then the
//! shutdown.
//!
//! Threads, named for what they do: `learner-NAME` (one per learner), `ingest-router`, `checkpoint`
//! and `ingest-stdin` are OS threads (solvers know nothing of tokio). HTTP ([`http`]): the read thread
//! `http-read` accepts every connection and serves those that open with a read (GET model, metrics,
//! health); a connection that opens with a POST is served by the tokio runtime's workers, which read
//! bodies and hand them to the blocking pool's parsers. **Shutdown order** (on the `shutdown` future —
//! SIGINT, SIGTERM or SIGHUP in the binary — or when a learner panics): stop accepting HTTP, close ingest, the
//! router drains the queue into the learners, learners absorb what they got and exit, the checkpoint
//! thread publishes a final snapshot, the final checkpoint is written, and `run` returns. A panicking
//! learner raises the fatal flag from its drop guard; the daemon then stops the same way but skips the
//! final checkpoint (the learner's state may be half-updated; the last good checkpoint stays) and
//! `run` returns an error.

pub mod checkpoint;
pub mod datadir;
pub mod fault;
pub mod http;
mod learners;
pub mod names_file;
mod preflight;
mod restore;
mod serve;
mod sources;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;

use crate::config::Config;
use crate::ingest::NatsError;
use crate::learner::worker::Fatal;
use crate::metrics::Metrics;
use checkpoint::{Cadence, CheckpointError, CheckpointThread, Checkpointer};
use learners::Learners;
use sources::Sources;

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
    Tls(#[from] http::tls::TlsError),
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

/// Runs the daemon until `shutdown` resolves (or a learner panics). Logs `listening on ADDR` once bound,
/// and sends the address to [`RunOptions::bound`] if given.
pub async fn run(
    config: Config,
    options: RunOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), DaemonError> {
    run_with_grace(config, options, shutdown, SHUTDOWN_GRACE).await
}

/// [`run`], giving open HTTP connections (and the cluster tasks and the NATS source) `grace` to finish
/// once stopping.
async fn run_with_grace(
    config: Config,
    options: RunOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> Result<(), DaemonError> {
    let metrics = Metrics::new();
    let fatal = Fatal::new();
    let mut preflight = preflight::check(&config)?;
    // Held until `run` returns: the data directory has one owner while anything may write to it.
    let _owner = preflight.owner.take();
    let restored = restore::restore(&config, &options, &metrics)?;
    let learners = learners::spawn(&config, &restored, &metrics, &fatal);
    restore::replay_log(&restored, &learners.admission).await?;
    let checkpoints = CheckpointThread::spawn(
        Cadence {
            tick: config.snapshot_interval,
            every: config.checkpoint_interval,
            ack_every: config.nats.as_ref().map(|n| n.ack_interval),
        },
        restored.learners.clone(),
        metrics.clone(),
        restored.checkpointer.clone(),
    );
    let state = serve::app_state(&config, &restored, &learners, &metrics);
    let sources = sources::start(&config, options.stdin, &state, &restored, &learners.stop).await?;
    let stop = serve::stop_signal(shutdown, fatal.clone());
    let served = serve::serve(
        preflight,
        state,
        &config,
        options.bound.as_ref(),
        stop,
        grace,
    )
    .await?;
    let running = Running {
        sources,
        learners,
        checkpoints,
        checkpointer: restored.checkpointer,
        fatal,
    };
    running.shut_down(served, grace).await
}

/// What the shutdown stops, once the HTTP front has.
struct Running {
    sources: Sources,
    learners: Learners,
    checkpoints: CheckpointThread,
    /// Writes the final checkpoint (with a data directory).
    checkpointer: Option<Arc<Checkpointer>>,
    /// Raised if a learner panicked: then no final checkpoint, and `run` fails.
    fatal: Arc<Fatal>,
}

impl Running {
    /// The ordered stop: ingest closed → router drains → learners drain → final snapshot → final
    /// checkpoint → cluster tasks and the NATS source's last acknowledgements. `served` is how the
    /// HTTP front ended.
    async fn shut_down(
        mut self,
        served: std::io::Result<()>,
        grace: Duration,
    ) -> Result<(), DaemonError> {
        tracing::info!("stopping: draining the ingest queue");
        self.sources.stop_pulling().await;
        self.learners.stop(self.checkpoints).await;
        served.map_err(DaemonError::Serve)?;
        if let Some(who) = self.fatal.raised_by() {
            return Err(DaemonError::LearnerPanicked(who));
        }
        if let Some(checkpointer) = &self.checkpointer {
            checkpointer.write_final()?;
        }
        self.sources.finish(grace).await;
        tracing::info!("stopped");
        Ok(())
    }
}

/// Convenience for callers that want the data directory's checkpoint path.
pub fn checkpoint_path(dir: &std::path::Path) -> PathBuf {
    checkpoint::path_in(dir)
}

#[cfg(test)]
mod tests;
