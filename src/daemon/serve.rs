//! The serve phase of `thresher serve`: the state the HTTP handlers read, the router behind its
//! authentication layer, and the HTTP front ([`super::http`]) on the preflight's listener until the
//! stop signal (the shutdown future, or a learner's panic). It returns once the front has closed its
//! connections; what follows is the shutdown's.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::http;
use super::learners::Learners;
use super::preflight::Preflight;
use super::restore::Restored;
use super::DaemonError;
use crate::api::auth::{protect, AuthPolicy};
use crate::api::{router, AppState};
use crate::config::Config;
use crate::ingest::batch::Rules;
use crate::ingest::inflight::InflightBytes;
use crate::ingest::source::http::HttpSource;
use crate::learner::worker::Fatal;
use crate::metrics::Metrics;

/// What the HTTP handlers read: the learners' cells, the ingest rules and the door to the learners.
/// The sources share its rules, dictionary and cluster view.
pub fn app_state(
    config: &Config,
    restored: &Restored,
    learners: &Learners,
    metrics: &Metrics,
) -> Arc<AppState> {
    let losses: Vec<_> = config.learners.iter().map(|l| l.loss).collect();
    let ingest_rules = Rules {
        max_abs_value: config.max_abs_value,
        max_name_bytes: config.max_feature_name_bytes,
        max_new_names: config.max_new_names_per_request,
        classes: config.classes(),
        class_names: config.class_names(),
        ..Rules::new(losses, config.max_dim, false)
    };
    let cells = restored.learners.iter().map(|(_, c)| c.clone()).collect();
    let ingest = HttpSource {
        admission: learners.admission.clone(),
        dictionary: restored.dictionary.clone(),
        rules: ingest_rules.clone(),
        predict_rules: Rules {
            predict: true,
            ..ingest_rules
        },
        metrics: metrics.clone(),
        worker_scheduling: learners.scheduling,
        body_idle: config.limits.body_idle,
        inflight: InflightBytes::new(config.inflight_bytes, metrics.clone()),
    };
    let state = AppState {
        cluster: config
            .nats
            .as_ref()
            .map(|n| Arc::new(crate::cluster::ClusterView::new(&n.node))),
        labels: restored.labels.clone(),
        ..AppState::new(config, cells, metrics.clone(), ingest)
    };
    Arc::new(state)
}

/// Resolves when the daemon is to stop: `shutdown` resolved (logged) or a learner panicked.
pub async fn stop_signal(shutdown: impl Future<Output = ()> + Send + 'static, fatal: Arc<Fatal>) {
    tokio::select! {
        _ = shutdown => tracing::info!("shutdown requested"),
        _ = fatal.raised() => {},
    }
}

/// Serves HTTP until `stop` resolves and the front's connections have closed (or `grace` passed).
/// Logs `listening on ADDR` once bound and tells `bound`. The outer error: serving could not start;
/// the inner result: how the front ended.
pub async fn serve(
    preflight: Preflight,
    state: Arc<AppState>,
    config: &Config,
    bound: Option<&tokio::sync::watch::Sender<Option<SocketAddr>>>,
    stop: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> Result<std::io::Result<()>, DaemonError> {
    let Preflight {
        tokens,
        tls,
        limits,
        listener,
        ..
    } = preflight;
    let addr = listener.local_addr().map_err(DaemonError::Serve)?;
    tracing::info!("listening on {addr}");
    if let Some(tell) = bound {
        // A receiver dropped meanwhile is no error: nobody waits for the address any more.
        tell.send_replace(Some(addr));
    }
    let metrics = state.metrics.clone();
    let app = protect(
        router(state, config.body_limit_bytes, tokens.is_some()),
        AuthPolicy {
            tokens,
            metrics: config.auth.metrics,
        },
        metrics.clone(),
    );
    // The read thread accepts and serves reads; bodies go to this runtime (`http`). It returns once
    // stopped and its connections closed (or `grace` passed).
    let front = http::spawn(
        listener.into_std().map_err(DaemonError::Serve)?,
        app,
        tokio::runtime::Handle::current(),
        stop,
        grace,
        http::Front {
            limits,
            tls,
            metrics,
        },
    )
    .map_err(DaemonError::Serve)?;
    let served = match tokio::task::spawn_blocking(move || front.join()).await {
        Ok(Ok(served)) => served,
        _ => Err(std::io::Error::other("the HTTP read thread panicked")),
    };
    tracing::info!("HTTP server stopped");
    Ok(served)
}
