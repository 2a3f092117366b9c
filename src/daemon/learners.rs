//! The spawn-learners phase of `thresher serve`, and its part of the shutdown: the bounded ingest
//! queue behind [`Admission`], the router thread (`ingest-router`) that hands every batch to each
//! learner's channel, and one thread per learner (`learner-NAME`) that absorbs, steps and publishes.
//! Stopping closes ingest, lets the router drain the queue into the learners and joins them all.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Receiver};

use super::checkpoint::CheckpointThread;
use super::fault;
use super::restore::Restored;
use crate::config::Config;
use crate::ingest::admission::AdmissionLog;
use crate::ingest::batch::FeatureDictionary;
use crate::ingest::Admission;
use crate::learner::publish::SharedLearner;
use crate::learner::worker::{
    learner_loop, router_loop, Absorbed, Fatal, OnPublish, PanicGuard, Publisher,
};
use crate::metrics::Metrics;
use crate::ring::{Batch, SampleBudget};
use crate::sys::{set_throughput_scheduling, WorkerScheduling, LEARNER_NICE};

/// The running learners and the queue in front of them.
pub struct Learners {
    /// The one door from every source to the learners (budget, queue and counters): shared with the
    /// HTTP handlers and the sources; closed first when stopping, so nothing new enters.
    pub admission: Arc<Admission>,
    /// Raised when stopping, once ingest is closed: the router drains the queue into the learners and
    /// ends, dropping their channels, which ends them. The stdin thread reads it too, between lines.
    pub stop: Arc<AtomicBool>,
    /// How the learner threads (and the HTTP body parsers) are scheduled (`server.worker_slice_us`,
    /// `server.yield_interval`).
    pub scheduling: WorkerScheduling,
    /// The router thread; joined when stopping, before the learners.
    router: JoinHandle<()>,
    /// Each learner thread with its learner's name (for the log line of a panic).
    threads: Vec<(String, JoinHandle<()>)>,
}

/// Opens the ingest queue and starts the router and one thread per learner.
pub fn spawn(
    config: &Config,
    restored: &Restored,
    metrics: &Metrics,
    fatal: &Arc<Fatal>,
) -> Learners {
    let (ingest_tx, ingest_rx) = bounded::<Batch>(config.queue_capacity);
    let log = restored
        .wal
        .as_ref()
        .map(|wal| AdmissionLog { wal: wal.clone() });
    let admission = Arc::new(
        Admission::new(
            ingest_tx,
            SampleBudget::new(config.queue_samples),
            metrics.clone(),
            restored.dictionary.clone(),
        )
        .with_log(log)
        .with_persistence(restored.persistence.clone()),
    );
    let scheduling = WorkerScheduling {
        slice_ns: config.worker_slice_ns,
        yield_interval: config.yield_interval,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let mut learner_txs = Vec::new();
    let mut threads: Vec<(String, JoinHandle<()>)> = Vec::new();
    for ((learner, cell), absorbed) in restored.learners.iter().zip(&restored.deliveries.absorbed) {
        // As deep as the ingest queue: a learner that falls behind then finds the whole backlog waiting
        // and absorbs it in one insert, where only the newest `window.capacity` samples cost more than a
        // prediction (`StreamingLearner::insert_batches`); a shallow channel would hand it a few batches
        // per round and keep it behind. The router blocks when it is full, backing up the ingest queue.
        let (tx, rx) = bounded::<Batch>(config.queue_capacity);
        learner_txs.push(tx);
        let publisher = Publisher {
            cell: cell.clone(),
            metrics: metrics.clone(),
            interval: config.snapshot_interval,
            on_publish: pin_support_names(&restored.dictionary),
            drift: config.drift,
        };
        if let (Some(call), Some(snapshot)) = (&publisher.on_publish, cell.get()) {
            call(&snapshot);
        }
        let worker = Worker {
            learner: learner.clone(),
            rx,
            publisher,
            absorbed: absorbed.clone(),
            fatal: fatal.clone(),
            scheduling,
        };
        threads.push(worker.spawn());
    }
    let router = {
        let (stop, drain) = (stop.clone(), config.drain);
        std::thread::Builder::new()
            .name("ingest-router".into())
            .spawn(move || router_loop(ingest_rx, learner_txs, &stop, drain))
            .expect("spawn router thread")
    };
    Learners {
        admission,
        stop,
        scheduling,
        router,
        threads,
    }
}

/// What one learner thread runs with.
struct Worker {
    learner: SharedLearner,
    /// Its channel from the router.
    rx: Receiver<Batch>,
    publisher: Publisher,
    /// The last NATS delivery it absorbed ([`super::checkpoint::Deliveries`]).
    absorbed: Arc<Absorbed>,
    /// Raised by the thread's drop guard if it panics.
    fatal: Arc<Fatal>,
    scheduling: WorkerScheduling,
}

impl Worker {
    /// Starts the thread `learner-NAME`; returns it with the learner's name.
    fn spawn(self) -> (String, JoinHandle<()>) {
        let name = self.learner.lock().config().name.clone();
        let thread_name = name.clone();
        let handle = std::thread::Builder::new()
            .name(format!("learner-{name}"))
            .spawn(move || {
                set_throughput_scheduling(LEARNER_NICE, self.scheduling);
                learner_loop(
                    self.learner,
                    self.rx,
                    Some(self.publisher),
                    self.absorbed,
                    PanicGuard {
                        fatal: self.fatal,
                        name: thread_name,
                    },
                )
            })
            .expect("spawn learner thread");
        (name, handle)
    }
}

/// With hashed feature names, what pins the names of each published support (a restored snapshot's
/// support is pinned now): see `ingest::hashed`.
fn pin_support_names(dictionary: &Arc<FeatureDictionary>) -> Option<OnPublish> {
    dictionary.hashed()?;
    let dictionary = dictionary.clone();
    Some(Arc::new(move |s| {
        if let Some(h) = dictionary.hashed() {
            h.pin(&s.learner, &s.model.support);
        }
    }))
}

impl Learners {
    /// Closes ingest, lets the router drain the queue into the learners, waits for every learner to
    /// absorb what it got and end (a panic is logged), then stops the checkpoint thread, which
    /// publishes the final snapshots.
    pub async fn stop(self, checkpoints: CheckpointThread) {
        self.admission.close();
        self.stop.store(true, Ordering::Release);
        let (router, threads) = (self.router, self.threads);
        let _ = tokio::task::spawn_blocking(move || {
            let _ = router.join();
            for (name, handle) in threads {
                if let Err(payload) = handle.join() {
                    let panic = fault::panic_message(payload.as_ref());
                    tracing::error!(learner = %name, panic, "learner thread ended by panic");
                }
            }
            tracing::info!("learners stopped");
            checkpoints.stop();
            tracing::info!("final snapshot published");
        })
        .await;
    }
}
