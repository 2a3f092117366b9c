//! The worker threads that drive the learners — the streaming executor: the router thread that hands
//! every ingested batch to each learner, and one learner thread per learner that inserts, steps and
//! publishes on a cadence. Solvers know nothing of threads; this module knows nothing of HTTP.
//!
//! After each insert a learner thread runs the drift test on the learner's progressive loss
//! ([`super::drift`]) while it still holds the learner's lock.
//!
//! Each learner thread holds a [`PanicGuard`]: if the thread unwinds, the guard raises the daemon's
//! [`Fatal`] flag, so one panicking learner stops the daemon instead of hanging it (ripgrep's
//! quit-on-panic `Drop`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::drift::{DriftConfig, DriftWatch};
use super::multiclass::relabel_into;
use super::publish::{publish, ModelCell, SharedLearner, Snapshot};
use super::StepOutcome;
use crate::metrics::Metrics;
use crate::ring::Batch;
use crate::sample::SampleBlock;

/// What a learner's state holds of the numbered sources, raised by its thread under the learner's
/// lock as it inserts batches and read under the same lock when its state is checkpointed: whoever
/// holds the lock and reads them knows the state holds every batch up to them (each source numbers
/// its batches in the order it admits them, and the queues keep that order).
#[derive(Debug, Default)]
pub struct Absorbed {
    /// The highest NATS delivery number ([`crate::ingest::Source::Nats`]).
    pub delivery: AtomicU64,
    /// The highest write-ahead log sequence number (`ingest::wal`).
    pub logged: AtomicU64,
}

impl Absorbed {
    /// Raises both marks to the highest of `batches`.
    fn raise<'a>(&self, batches: impl IntoIterator<Item = &'a Batch>) {
        let (mut delivery, mut logged) = (0, 0);
        for b in batches {
            delivery = delivery.max(b.delivery());
            logged = logged.max(b.logged());
        }
        self.delivery.fetch_max(delivery, Ordering::AcqRel);
        self.logged.fetch_max(logged, Ordering::AcqRel);
    }
}

/// Block steps a learner takes per lock, so inserts and snapshots interleave with solving. Fewer when
/// a batch is waiting: it is inserted after one step. Under a stream the learner barely keeps up
/// with, every step taken while batches wait adds to the samples in flight (the ingest queue's memory
/// and the model's staleness); `lambda = "auto"`'s step, two members' block steps, held a quarter more
/// samples in flight than one learner's before this (`docs/benchmarks/learners.md`).
pub const STEPS_PER_LOCK: usize = 4;
/// How long an idle learner or the router waits before re-checking for shutdown.
pub const IDLE_WAIT: Duration = Duration::from_millis(20);

/// Raised by a worker's drop guard when it unwinds: stops the daemon instead of hanging it.
pub struct Fatal {
    /// Read by the daemon after its threads ended: a raised flag means skip the final checkpoint.
    flag: AtomicBool,
    /// The first worker that panicked (later ones do not overwrite it).
    who: Mutex<Option<String>>,
    /// Wakes the daemon's stop future as soon as a worker panics.
    notify: Notify,
}

impl Fatal {
    pub fn new() -> Arc<Fatal> {
        Arc::new(Fatal {
            flag: AtomicBool::new(false),
            who: Mutex::new(None),
            notify: Notify::new(),
        })
    }

    /// The name of the worker that panicked, if one did.
    pub fn raised_by(&self) -> Option<String> {
        if self.flag.load(Ordering::Acquire) {
            Some(self.who.lock().clone().unwrap_or_default())
        } else {
            None
        }
    }

    /// Resolves when a worker panics.
    pub async fn raised(&self) {
        self.notify.notified().await
    }
}

/// Held by a worker thread for its whole life: raises [`Fatal`] if the thread unwinds.
pub struct PanicGuard {
    pub fatal: Arc<Fatal>,
    pub name: String,
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

/// Moves batches from the ingest queue to every learner. Blocking sends: a slow learner backs the
/// ingest queue up, which turns into 503s at the HTTP edge. On `stop`, forwards what is queued, then
/// exits (dropping the learner senders tells the learners to finish).
pub fn router_loop(rx: Receiver<Batch>, txs: Vec<Sender<Batch>>, stop: &AtomicBool, drain: bool) {
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
pub struct Publisher {
    pub cell: Arc<ModelCell>,
    pub metrics: Metrics,
    /// `snapshot.interval_ms`.
    pub interval: Duration,
    /// Called with each snapshot this learner publishes (hashed feature names pin the names of its
    /// support: `ingest::hashed`).
    pub on_publish: Option<OnPublish>,
    /// `[drift]`: the test on the learner's progressive loss, run after each insert.
    pub drift: DriftConfig,
}

/// What a [`Publisher`] calls with each snapshot it publishes.
pub type OnPublish = Arc<dyn Fn(&Snapshot) + Send + Sync>;

/// A learner's thread: absorb every waiting batch in one insert (its re-thresholding is paid once per
/// round, not per batch, so ingest cost per sample falls as load rises), then solve a few steps (so the
/// model keeps improving under sustained ingest), and every `interval` publish a certified snapshot
/// (between steps, so no other thread ever waits on the certificate); block on the channel when idle;
/// exit when the router is gone and the channel is empty.
///
/// `absorbed` is raised, while the learner's lock is still held, to the highest delivery and log
/// numbers of the batches inserted ([`Absorbed`]).
pub fn learner_loop(
    learner: SharedLearner,
    rx: Receiver<Batch>,
    publisher: Option<Publisher>,
    absorbed: Arc<Absorbed>,
    _guard: PanicGuard,
) {
    let mut waiting: Vec<Batch> = Vec::new();
    // The learner of one class of a multi-class learner learns each batch with its class's `+-1`
    // labels (written into `relabelled`, reused).
    let class = learner.lock().config().class.as_ref().map(|c| c.class);
    let mut relabelled: Vec<SampleBlock> = Vec::new();
    let mut last_publish = Instant::now();
    let mut watch = publisher
        .as_ref()
        .and_then(|p| DriftWatch::new(p.drift, &learner.lock().stats()));
    // After an insert, under the learner's lock: the drift test, and its alarm into the cell.
    let mut watch_drift = |l: &mut Box<dyn super::StreamingLearner>| {
        if let (Some(w), Some(p)) = (watch.as_mut(), publisher.as_ref()) {
            if let Some(event) = w.observe(l) {
                p.cell.note_drift(event, &p.metrics);
            }
        }
    };
    loop {
        if let Some(p) = &publisher {
            if last_publish.elapsed() >= p.interval {
                last_publish = Instant::now();
                if publish(&learner, &p.cell, &p.metrics) {
                    if let (Some(call), Some(snapshot)) = (&p.on_publish, p.cell.get()) {
                        call(&snapshot);
                    }
                }
                crate::sys::yield_point();
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
            if let Some(class) = class {
                relabelled.resize_with(waiting.len(), SampleBlock::new);
                for (out, b) in relabelled.iter_mut().zip(&waiting) {
                    relabel_into(out, b.samples(), class);
                }
            }
            let blocks: Vec<&SampleBlock> = match class {
                Some(_) => relabelled[..waiting.len()].iter().collect(),
                None => waiting.iter().map(|b| b.samples()).collect(),
            };
            let mut l = learner.lock();
            match l.core().decay {
                Some(decay) => super::forget::insert(&mut l, &decay, &blocks),
                None => l.insert_batches(&blocks),
            }
            watch_drift(&mut l);
            absorbed.raise(&waiting);
            drop(l);
            drop(blocks);
            waiting.clear();
            crate::sys::yield_point();
        }
        if disconnected {
            return;
        }
        let outcome = {
            let mut l = learner.lock();
            let mut last = StepOutcome::Stepped;
            for _ in 0..STEPS_PER_LOCK {
                last = l.step();
                // Between block steps: the learner's scheduling point (`sys::yield_point`).
                crate::sys::yield_point();
                if last != StepOutcome::Stepped || !rx.is_empty() {
                    break;
                }
            }
            last
        };
        if let StepOutcome::Idle(_) = outcome {
            match rx.recv_timeout(IDLE_WAIT) {
                Ok(batch) => {
                    let block = match class {
                        Some(class) => {
                            relabelled.resize_with(1, SampleBlock::new);
                            relabel_into(&mut relabelled[0], batch.samples(), class);
                            &relabelled[0]
                        }
                        None => batch.samples(),
                    };
                    let mut l = learner.lock();
                    match l.core().decay {
                        Some(decay) => super::forget::insert(&mut l, &decay, &[block]),
                        None => l.insert(block),
                    }
                    watch_drift(&mut l);
                    absorbed.raise([&batch]);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::learner::{LearnerCore, LearnerSnapshot, LearnerState, StreamingLearner};
    use crate::ring::{QueuedBatch, SampleBudget};
    use crate::sample::Sample;

    /// A learner that panics on its first insert.
    struct Faulty {
        core: LearnerCore,
    }

    impl StreamingLearner for Faulty {
        fn core(&self) -> &LearnerCore {
            &self.core
        }
        fn insert_batches(&mut self, _: &[&SampleBlock]) {
            panic!("injected fault");
        }
        fn evict(&mut self, _: crate::sample::Row<'_>, _: f64) {}
        fn step(&mut self) -> StepOutcome {
            StepOutcome::Idle(crate::learner::Idle::EmptyWindow)
        }
        fn certify(&mut self) -> LearnerSnapshot {
            unreachable!("never published")
        }
        fn state(&self) -> LearnerState {
            unreachable!("never checkpointed")
        }
    }

    /// A learner that logs its inserts and steps, sends one more batch from its first step, and
    /// closes the channel (its last sender) once the log holds seven entries.
    struct Logged {
        core: LearnerCore,
        log: Arc<Mutex<Vec<&'static str>>>,
        send: Option<Batch>,
        tx: Option<crossbeam_channel::Sender<Batch>>,
    }

    impl StreamingLearner for Logged {
        fn core(&self) -> &LearnerCore {
            &self.core
        }
        fn insert_batches(&mut self, _: &[&SampleBlock]) {
            self.log.lock().push("insert");
        }
        fn evict(&mut self, _: crate::sample::Row<'_>, _: f64) {}
        fn step(&mut self) -> StepOutcome {
            let mut log = self.log.lock();
            log.push("step");
            if let (Some(batch), Some(tx)) = (self.send.take(), &self.tx) {
                tx.send(batch).unwrap();
            }
            if log.len() >= 7 {
                self.tx = None;
            }
            StepOutcome::Stepped
        }
        fn certify(&mut self) -> LearnerSnapshot {
            unreachable!("never published")
        }
        fn state(&self) -> LearnerState {
            unreachable!("never checkpointed")
        }
    }

    /// A batch that arrives during a step is inserted after that step, not after the lock's
    /// remaining [`STEPS_PER_LOCK`] steps; with no batch waiting the steps run on.
    #[test]
    fn a_waiting_batch_is_inserted_after_one_step() {
        let config = Config::defaults().learners.remove(0);
        let budget = SampleBudget::new(10);
        let batch = || {
            let one =
                SampleBlock::from_samples(&[Sample::new(vec![1], vec![1.0], 1.0, None).unwrap()]);
            Arc::new(QueuedBatch::reserve(&budget, one).unwrap())
        };
        let (tx, rx) = crossbeam_channel::bounded::<Batch>(4);
        let log = Arc::new(Mutex::new(Vec::new()));
        let learner: SharedLearner = Arc::new(Mutex::new(Box::new(Logged {
            core: LearnerCore::new(config, 4, None),
            log: log.clone(),
            send: Some(batch()),
            tx: Some(tx.clone()),
        })));
        tx.send(batch()).unwrap();
        drop(tx);
        let guard = PanicGuard {
            fatal: Fatal::new(),
            name: "logged".into(),
        };
        learner_loop(learner, rx, None, Default::default(), guard);
        let expected = [["insert", "step", "insert"].as_slice(), &["step"; 4]].concat();
        assert_eq!(*log.lock(), expected);
    }

    #[test]
    fn a_panicking_learner_raises_the_fatal_flag_instead_of_hanging() {
        let mut config = Config::defaults().learners.remove(0);
        // The defaults' squared loss fits an intercept; this test was written without one.
        config.intercept = false;
        let learner: SharedLearner = Arc::new(Mutex::new(Box::new(Faulty {
            core: LearnerCore::new(config, 4, None),
        })));
        let fatal = Fatal::new();
        let (tx, rx) = crossbeam_channel::bounded::<Batch>(1);
        let guard = PanicGuard {
            fatal: fatal.clone(),
            name: "faulty".into(),
        };
        let handle =
            std::thread::spawn(move || learner_loop(learner, rx, None, Default::default(), guard));
        let budget = SampleBudget::new(10);
        let one = SampleBlock::from_samples(&[Sample::new(vec![1], vec![1.0], 1.0, None).unwrap()]);
        tx.send(Arc::new(QueuedBatch::reserve(&budget, one).unwrap()))
            .unwrap();
        assert!(handle.join().is_err(), "the learner thread ends by panic");
        assert_eq!(fatal.raised_by().as_deref(), Some("faulty"));
        // The stored permit wakes the shutdown future even though nobody was waiting yet.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(1), fatal.raised())
                .await
                .expect("notified")
        });
    }
}
