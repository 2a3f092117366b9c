//! The start-sources phase of `thresher serve`, and the sources' part of the shutdown: the stdin
//! reader thread (`--stdin`), the NATS source, and on a cluster the membership announcer and one
//! global-model exchange per SDIHT learner with a fixed lambda. HTTP bodies come in through the serve
//! phase's routes.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::restore::Restored;
use crate::api::AppState;
use crate::cluster::global::{GlobalModel, Subjects};
use crate::cluster::Announcer;
use crate::config::Config;
use crate::ingest::source::nats::{NatsSource, Sink};
use crate::ingest::source::stdin::stdin_loop;
use crate::ingest::NatsError;
use crate::learner::params::StreamSolverKind;

/// The sources besides HTTP, running.
pub struct Sources {
    /// The NATS source, when configured: stops pulling before ingest closes, and sends its last
    /// acknowledgements after the final checkpoint.
    nats: Option<NatsSource>,
    /// Set after the final checkpoint: the announcer and the exchanges end.
    stop_announcing: watch::Sender<bool>,
    /// The membership announcer, on a cluster (announces on the NATS source's connection).
    announcer: Option<JoinHandle<()>>,
    /// One global-model exchange per SDIHT learner with a fixed lambda, on a cluster.
    exchanges: Vec<JoinHandle<()>>,
}

/// Starts stdin (if `stdin`), the NATS source (if configured) and, on a cluster, the announcer and
/// the exchanges. `stop` is the learners' stop flag, which the stdin thread reads between lines.
pub async fn start(
    config: &Config,
    stdin: bool,
    state: &AppState,
    restored: &Restored,
    stop: &Arc<AtomicBool>,
) -> Result<Sources, NatsError> {
    if stdin {
        spawn_stdin(state, stop.clone());
    }
    let nats = start_nats(config, state, restored).await?;
    // Membership: announced on the source's connection until the daemon stops.
    let (stop_announcing, announcing) = watch::channel(false);
    let announcer = match (&config.nats, &nats, &state.cluster) {
        (Some(n), Some(source), Some(view)) => {
            let announcer = Announcer {
                client: source.client(),
                stream: n.stream.clone(),
                node: n.node.clone(),
                ttl: n.member_ttl,
                replicas: n.replicas,
                view: view.clone(),
                cells: state.cells.clone(),
                nodes: state.metrics.cluster_nodes.clone(),
            };
            Some(tokio::spawn(announcer.run(announcing.clone())))
        }
        _ => None,
    };
    let exchanges = start_exchanges(config, state, restored, nats.as_ref(), &announcing);
    Ok(Sources {
        nats,
        stop_announcing,
        announcer,
        exchanges,
    })
}

/// `--stdin`: a detached thread (a blocking stdin read cannot be interrupted; it checks `stop`
/// between lines).
fn spawn_stdin(state: &AppState, stop: Arc<AtomicBool>) {
    let (admission, metrics, rules, dictionary) = (
        state.ingest.admission.clone(),
        state.metrics.clone(),
        state.ingest.rules.clone(),
        state.ingest.dictionary.clone(),
    );
    std::thread::Builder::new()
        .name("ingest-stdin".into())
        .spawn(move || stdin_loop(&admission, &stop, &metrics, &rules, &dictionary))
        .expect("spawn stdin thread");
}

/// The NATS source, when configured, replaying the restored checkpoint's pending acknowledgements.
async fn start_nats(
    config: &Config,
    state: &AppState,
    restored: &Restored,
) -> Result<Option<NatsSource>, NatsError> {
    let (Some(nats), Some(ledger)) = (&config.nats, &restored.deliveries.ledger) else {
        return Ok(None);
    };
    let sink = Sink {
        admission: state.ingest.admission.clone(),
        rules: state.ingest.rules.clone(),
        dictionary: restored.dictionary.clone(),
        metrics: state.metrics.clone(),
    };
    tracing::info!(servers = ?nats.servers, node = %nats.node, "NATS source starting");
    let replay = restored.pending_acks.clone();
    Ok(Some(
        crate::ingest::source::nats::start(nats.clone(), sink, ledger.clone(), replay).await?,
    ))
}

/// The global model: one exchange task per SDIHT learner with a fixed lambda, on a cluster with
/// `nats.global_model`.
fn start_exchanges(
    config: &Config,
    state: &AppState,
    restored: &Restored,
    nats: Option<&NatsSource>,
    announcing: &watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let mut exchanges = Vec::new();
    if let (Some(n), Some(source), Some(view)) = (&config.nats, nats, &state.cluster) {
        for ((learner, _), lc) in restored.learners.iter().zip(&config.learners) {
            let decomposes = lc.solver == StreamSolverKind::Sdiht && lc.lambda_auto.is_none();
            if !(n.global_model && decomposes) {
                continue;
            }
            let exchange = GlobalModel {
                client: source.client(),
                subjects: Subjects::new(&n.stream, &lc.name),
                node: n.node.clone(),
                view: view.clone(),
                interval: config.snapshot_interval,
                learner: learner.clone(),
                config: lc.clone(),
                metrics: state.metrics.clone(),
            };
            exchanges.push(tokio::spawn(exchange.run(announcing.clone())));
        }
    }
    exchanges
}

impl Sources {
    /// Stops the NATS source pulling (the first step of the shutdown, before ingest closes).
    pub async fn stop_pulling(&mut self) {
        if let Some(nats) = self.nats.as_mut() {
            nats.stop_pulling().await;
        }
    }

    /// After the final checkpoint: stops the announcer and the exchanges, then lets the NATS source
    /// send its last acknowledgements; each may take `grace`.
    pub async fn finish(self, grace: Duration) {
        self.stop_announcing.send_replace(true);
        if let Some(announcer) = self.announcer {
            let _ = tokio::time::timeout(grace, announcer).await;
        }
        for exchange in self.exchanges {
            let _ = tokio::time::timeout(grace, exchange).await;
        }
        if let Some(nats) = self.nats {
            nats.finish(grace).await;
            tracing::info!("NATS source stopped");
        }
    }
}
