//! The NATS JetStream source: batches of sample lines pulled from a work-queue stream through one
//! durable pull consumer that every node shares, so each batch goes to one node.
//!
//! Each message is one batch: LIBSVM or JSON lines (the `Content-Type` header names the format, as for
//! `POST /v1/samples`; without it, a first line opening with `{` means JSON lines), read by the same
//! parser with the same validation as an HTTP body, all or nothing. A batch that fails validation is
//! terminated (`+TERM`, never redelivered) and counted in `thresher_nats_batches_total{outcome="invalid"}`.
//!
//! **Acknowledged only once durable.** A valid batch gets a delivery number ([`AckLedger::enter`]) and
//! goes through [`Admission`] like any other source ([`Source::Nats`]). Each learner records the highest
//! delivery it has absorbed; a checkpoint taken after that holds the batch, and once it is on disk the
//! daemon tells the ledger ([`AckLedger::durable_through`]) and the batch is acknowledged (`+ACK`,
//! confirmed by the server). Until then the batch is touched with in-progress acks (`+WPI`) every third
//! of `nats.ack_wait_s`, so a slow checkpoint does not make the server redeliver it. A node killed
//! before its checkpoint loses nothing acknowledged: its unacknowledged batches are redelivered to the
//! other nodes after `ack_wait`.
//!
//! A crash between the checkpoint and the acknowledgement would leave a batch both in the checkpoint
//! and unacknowledged; the checkpoint therefore lists the acknowledgement subjects of the batches it
//! holds that were not acknowledged yet ([`AckLedger::held`]), and a node restarted from it sends those
//! acknowledgements first. A batch is only held twice if the node stays down longer than `ack_wait`.
//!
//! Bounds: at most `nats.max_pending_batches` batches are fetched and unacknowledged at once (the
//! puller fetches no more until there is room); admission waits for room in the ingest queue instead
//! of refusing (the batch stays in the stream meanwhile).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer, stream};
use futures_util::StreamExt;
use parking_lot::Mutex;

use crate::config::NatsConfig;
use crate::ingest::batch::{parse_body_into, BodyFormat, Claim, FeatureDictionary, Rules};
use crate::ingest::lines::lines;
use crate::ingest::{is_skippable, Admission, AdmitError, NatsError, Source};
use crate::metrics::{nats_outcome, reason, Metrics};
use crate::sample::SampleBlock;

/// Messages asked for per fetch at most (fewer when the ledger has less room).
const FETCH_MAX: usize = 16;
/// How long one fetch waits for messages before asking again (and re-checking for shutdown).
const FETCH_WAIT: Duration = Duration::from_secs(1);
/// How often acknowledgements and in-progress acks are sent.
const ACK_TICK: Duration = Duration::from_millis(50);
/// Pause before retrying a failed connection, stream or consumer set-up, or fetch.
const RETRY: Duration = Duration::from_millis(500);
/// How long admission waits between checks for shutdown while the ingest queue is full.
const ADMIT_POLL: Duration = Duration::from_millis(20);

/// One fetched batch waiting for the checkpoint that acknowledges it.
#[derive(Debug)]
struct Entry {
    /// The message's `$JS.ACK...` subject.
    reply: String,
    /// Last in-progress ack (or the fetch).
    touched: Instant,
}

#[derive(Debug, Default)]
struct LedgerInner {
    /// The last delivery number given.
    last: u64,
    pending: BTreeMap<u64, Entry>,
}

/// The batches a node has fetched and not yet acknowledged, numbered in admission order, and the highest
/// number a checkpoint on disk holds. Shared by the source's tasks and the checkpoint writer.
#[derive(Debug)]
pub struct AckLedger {
    inner: Mutex<LedgerInner>,
    capacity: usize,
    durable: AtomicU64,
}

impl AckLedger {
    pub fn new(capacity: usize) -> Arc<AckLedger> {
        Arc::new(AckLedger {
            inner: Mutex::new(LedgerInner::default()),
            capacity,
            durable: AtomicU64::new(0),
        })
    }

    /// Batches that may still be fetched.
    pub fn room(&self) -> usize {
        self.capacity
            .saturating_sub(self.inner.lock().pending.len())
    }

    /// Batches fetched and not yet acknowledged.
    pub fn len(&self) -> usize {
        self.inner.lock().pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records a fetched batch and gives it the next delivery number.
    pub fn enter(&self, reply: String) -> u64 {
        let mut inner = self.inner.lock();
        inner.last += 1;
        let delivery = inner.last;
        inner.pending.insert(
            delivery,
            Entry {
                reply,
                touched: Instant::now(),
            },
        );
        delivery
    }

    /// Drops a batch that was not admitted (the daemon is stopping): it is not acknowledged, so the
    /// server redelivers it.
    pub fn forget(&self, delivery: u64) {
        self.inner.lock().pending.remove(&delivery);
    }

    /// The acknowledgement subjects of the unacknowledged batches numbered up to `covered` (those a
    /// checkpoint whose learners absorbed up to `covered` holds).
    pub fn held(&self, covered: u64) -> Vec<String> {
        self.inner
            .lock()
            .pending
            .range(..=covered)
            .map(|(_, e)| e.reply.clone())
            .collect()
    }

    /// A checkpoint holding every delivery up to `covered` is on disk: those may be acknowledged.
    pub fn durable_through(&self, covered: u64) {
        self.durable.fetch_max(covered, Ordering::AcqRel);
    }

    /// Whether some fetched batch waits for a checkpoint (so one is worth writing soon).
    pub fn awaiting_checkpoint(&self) -> bool {
        let durable = self.durable.load(Ordering::Acquire);
        self.inner
            .lock()
            .pending
            .last_key_value()
            .is_some_and(|(&d, _)| d > durable)
    }

    /// The batches a checkpoint on disk holds, to acknowledge now.
    fn due(&self) -> Vec<(u64, String)> {
        let durable = self.durable.load(Ordering::Acquire);
        self.inner
            .lock()
            .pending
            .range(..=durable)
            .map(|(&d, e)| (d, e.reply.clone()))
            .collect()
    }

    fn acked(&self, delivery: u64) {
        self.inner.lock().pending.remove(&delivery);
    }

    /// The subjects of the batches not touched for `older`, marked touched now.
    fn stale(&self, older: Duration) -> Vec<String> {
        let now = Instant::now();
        self.inner
            .lock()
            .pending
            .values_mut()
            .filter(|e| now.duration_since(e.touched) >= older)
            .map(|e| {
                e.touched = now;
                e.reply.clone()
            })
            .collect()
    }
}

/// What the source hands its batches to.
pub struct Sink {
    pub admission: Arc<Admission>,
    pub rules: Rules,
    pub dictionary: Arc<FeatureDictionary>,
    pub metrics: Metrics,
}

/// The running source: stop pulling before ingest closes, finish after the final checkpoint.
pub struct NatsSource {
    /// Stops the puller ([`NatsSource::stop_pulling`]).
    stop: tokio::sync::watch::Sender<bool>,
    /// Stops the acknowledger after a last round ([`NatsSource::finish`], after the final checkpoint).
    stop_acking: tokio::sync::watch::Sender<bool>,
    /// Tells a waiting admission to give up (read from a blocking thread).
    stopping: Arc<AtomicBool>,
    puller: tokio::task::JoinHandle<()>,
    acker: tokio::task::JoinHandle<()>,
    client: async_nats::Client,
}

/// The format of a batch: its `Content-Type` header if it has one, else JSON lines when the first
/// line that is neither blank nor a comment opens with `{`, else LIBSVM.
pub fn batch_format(content_type: Option<&str>, text: &str) -> Option<BodyFormat> {
    if let Some(value) = content_type {
        return BodyFormat::from_content_type(value);
    }
    let first = lines(text).find(|l| !is_skippable(l));
    Some(match first {
        Some(line) if line.trim_start().starts_with('{') => BodyFormat::Ndjson,
        _ => BodyFormat::Libsvm,
    })
}

/// Connects (retrying in the background while no server answers: the daemon serves meanwhile), then
/// starts the puller and the acknowledger. `replay` are acknowledgement subjects from the restored
/// checkpoint, sent first.
pub async fn start(
    config: NatsConfig,
    sink: Sink,
    ledger: Arc<AckLedger>,
    replay: Vec<String>,
) -> Result<NatsSource, NatsError> {
    let mut options = async_nats::ConnectOptions::new()
        .name(format!("thresher-{}", config.node))
        .retry_on_initial_connect()
        .request_timeout(Some(Duration::from_secs(5)))
        .max_reconnects(None);
    if let Some(path) = &config.credentials_file {
        options =
            options
                .credentials_file(path)
                .await
                .map_err(|source| NatsError::Credentials {
                    path: path.clone(),
                    source,
                })?;
    }
    let client = options.connect(config.servers.as_slice()).await?;
    for m in nats_outcome::ALL {
        sink.metrics.nats_batches.with_label_values(&[m]);
    }
    sink.metrics
        .ingested
        .with_label_values(&[Source::Nats { delivery: 0 }.label()]);
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let (stop_acking, stop_acking_rx) = tokio::sync::watch::channel(false);
    let stopping = Arc::new(AtomicBool::new(false));
    let acker = tokio::spawn(ack_loop(
        client.clone(),
        ledger.clone(),
        sink.metrics.clone(),
        config.ack_wait,
        replay,
        stop_acking_rx,
    ));
    let puller = tokio::spawn(pull_loop(
        client.clone(),
        config,
        sink,
        ledger,
        stopping.clone(),
        stop_rx,
    ));
    Ok(NatsSource {
        stop,
        stop_acking,
        stopping,
        puller,
        acker,
        client,
    })
}

impl NatsSource {
    /// The source's connection (shared by the cluster membership).
    pub fn client(&self) -> async_nats::Client {
        self.client.clone()
    }

    /// Stops fetching; a batch waiting for admission is dropped unacknowledged (it is redelivered).
    /// Returns once the puller has ended.
    pub async fn stop_pulling(&mut self) {
        self.stopping.store(true, Ordering::Release);
        self.stop.send_replace(true);
        let _ = (&mut self.puller).await;
    }

    /// After the final checkpoint: one last round of acknowledgements, then the connection is closed.
    pub async fn finish(self, grace: Duration) {
        self.stop_acking.send_replace(true);
        let _ = tokio::time::timeout(grace, self.acker).await;
        let _ = tokio::time::timeout(grace, self.client.flush()).await;
    }
}

async fn setup(
    js: &jetstream::Context,
    config: &NatsConfig,
) -> Result<consumer::PullConsumer, NatsError> {
    let stream = js
        .get_or_create_stream(stream::Config {
            name: config.stream.clone(),
            subjects: vec![config.subject.clone()],
            retention: stream::RetentionPolicy::WorkQueue,
            storage: stream::StorageType::File,
            num_replicas: config.replicas,
            duplicate_window: config.duplicate_window,
            ..Default::default()
        })
        .await
        .map_err(|e| NatsError::Stream {
            stream: config.stream.clone(),
            reason: e.to_string(),
        })?;
    stream
        .get_or_create_consumer(
            &config.consumer,
            consumer::pull::Config {
                durable_name: Some(config.consumer.clone()),
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait: config.ack_wait,
                filter_subject: config.subject.clone(),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| NatsError::Consumer {
            consumer: config.consumer.clone(),
            reason: e.to_string(),
        })
}

/// Fetches while the ledger has room, and hands each message to [`take`].
async fn pull_loop(
    client: async_nats::Client,
    config: NatsConfig,
    sink: Sink,
    ledger: Arc<AckLedger>,
    stopping: Arc<AtomicBool>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let sink = Arc::new(sink);
    let js = jetstream::new(client);
    let consumer = loop {
        if *stop.borrow() {
            return;
        }
        match setup(&js, &config).await {
            Ok(c) => break c,
            Err(e) => {
                tracing::warn!(error = %e, "NATS source not ready; retrying");
                let _ = tokio::time::timeout(RETRY, stop.changed()).await;
            }
        }
    };
    tracing::info!(stream = %config.stream, consumer = %config.consumer, node = %config.node, "NATS source pulling");
    loop {
        if *stop.borrow() {
            return;
        }
        sink.metrics.nats_pending.set(ledger.len() as i64);
        let room = ledger.room();
        if room == 0 {
            let _ = tokio::time::timeout(ACK_TICK, stop.changed()).await;
            continue;
        }
        let fetched = consumer
            .fetch()
            .max_messages(room.min(FETCH_MAX))
            .expires(FETCH_WAIT)
            .messages();
        let mut messages = tokio::select! {
            fetched = fetched => match fetched {
                Ok(messages) => messages,
                Err(e) => {
                    tracing::debug!(error = %e, "NATS fetch failed; retrying");
                    let _ = tokio::time::timeout(RETRY, stop.changed()).await;
                    continue;
                }
            },
            _ = stop.changed() => return,
        };
        loop {
            let next = tokio::select! {
                next = messages.next() => next,
                _ = stop.changed() => return,
            };
            match next {
                None => break,
                Some(Ok(message)) => take(message, &js, &sink, &ledger, &stopping).await,
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "NATS fetch ended early");
                    break;
                }
            }
        }
    }
}

/// One message: parse (a bad batch is terminated), then admit under a new delivery number (waiting
/// for room), or acknowledge at once if it holds no sample.
async fn take(
    message: jetstream::Message,
    js: &jetstream::Context,
    sink: &Arc<Sink>,
    ledger: &AckLedger,
    stopping: &Arc<AtomicBool>,
) {
    // Not `split()`: that moves the reply subject into its acker, and the ledger keeps the subject.
    let message = message.message;
    let Some(reply) = message.reply.as_ref().map(|r| r.to_string()) else {
        return;
    };
    let client = js.client();
    let content_type = message
        .headers
        .as_ref()
        .and_then(|h| h.get("Content-Type"))
        .map(|v| v.as_str().to_string());
    let parse_sink = sink.clone();
    let payload = message.payload.clone();
    let parsed = tokio::task::spawn_blocking(move || {
        let text = std::str::from_utf8(&payload).map_err(|e| {
            let line = payload[..e.valid_up_to()]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1;
            format!("line {line}: not UTF-8")
        })?;
        let format = batch_format(content_type.as_deref(), text)
            .ok_or_else(|| "unsupported Content-Type".to_string())?;
        let (mut samples, mut claim) = (SampleBlock::new(), Claim::default());
        let rules = &parse_sink.rules;
        parse_body_into(
            format,
            text,
            rules,
            &parse_sink.dictionary,
            &mut samples,
            &mut claim,
        )
        .map(|_| (samples, claim))
        .map_err(|e| {
            parse_sink
                .metrics
                .rejected
                .with_label_values(&[reason::INVALID])
                .inc_by(e.samples as u64);
            match e.line {
                Some(line) => format!("line {line}: {}", e.message),
                None => e.message,
            }
        })
    })
    .await;
    let (samples, claim) = match parsed {
        Ok(Ok(parsed)) => parsed,
        Ok(Err(why)) => {
            tracing::warn!(subject = %message.subject, error = %why, "NATS batch refused; terminated");
            let _ = client.publish(reply, "+TERM".into()).await;
            sink.metrics
                .nats_batches
                .with_label_values(&[nats_outcome::INVALID])
                .inc();
            return;
        }
        // The parser panicked: leave the batch unacknowledged (the server redelivers it).
        Err(_) => return,
    };
    if samples.is_empty() {
        if client.request(reply, "+ACK".into()).await.is_ok() {
            sink.metrics
                .nats_batches
                .with_label_values(&[nats_outcome::EMPTY])
                .inc();
        }
        return;
    }
    let delivery = ledger.enter(reply.clone());
    let (admit_sink, stopping) = (sink.clone(), stopping.clone());
    let admitted = tokio::task::spawn_blocking(move || {
        admit_sink.admission.admit_waiting(
            samples,
            claim,
            Source::Nats { delivery },
            &stopping,
            ADMIT_POLL,
        )
    })
    .await;
    if !matches!(admitted, Ok(Ok(_))) {
        ledger.forget(delivery);
    }
    if let Ok(Err(AdmitError::Invalid(e))) = admitted {
        // It no longer fits the dictionary (another batch took the other feature kind or its last
        // room since this one's parse): as invalid as at its parse, so never redelivered.
        tracing::warn!(subject = %message.subject, error = %e.message, "NATS batch refused; terminated");
        let _ = client.publish(reply, "+TERM".into()).await;
        sink.metrics
            .nats_batches
            .with_label_values(&[nats_outcome::INVALID])
            .inc();
    }
}

/// Acknowledges what a checkpoint holds and keeps the rest from being redelivered; on stop, one last
/// round.
async fn ack_loop(
    client: async_nats::Client,
    ledger: Arc<AckLedger>,
    metrics: Metrics,
    ack_wait: Duration,
    replay: Vec<String>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    // A restored checkpoint's batches: acknowledged before anything else (an error here means the
    // batch was already acknowledged or redelivered; nothing more can be done).
    for reply in replay {
        if let Err(e) = client.request(reply, "+ACK".into()).await {
            tracing::debug!(error = %e, "acknowledging a restored batch failed");
        }
    }
    let progress_every = ack_wait / 3;
    loop {
        let stopping = tokio::time::timeout(ACK_TICK, stop.changed()).await.is_ok();
        for (delivery, reply) in ledger.due() {
            match client.request(reply, "+ACK".into()).await {
                Ok(_) => {
                    ledger.acked(delivery);
                    metrics
                        .nats_batches
                        .with_label_values(&[nats_outcome::ACKED])
                        .inc();
                }
                // Kept: retried next round (a server may be electing a leader).
                Err(e) => tracing::debug!(error = %e, delivery, "NATS ack failed; retrying"),
            }
        }
        for reply in ledger.stale(progress_every) {
            let _ = client.publish(reply, "+WPI".into()).await;
        }
        metrics.nats_pending.set(ledger.len() as i64);
        if stopping || *stop.borrow() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Numbers in order; `held` lists exactly the unacknowledged batches up to a cut; only batches a
    /// durable checkpoint holds are due; a forgotten batch frees its room.
    #[test]
    fn the_ledger_acknowledges_only_what_a_checkpoint_holds() {
        let ledger = AckLedger::new(3);
        assert_eq!(ledger.room(), 3);
        let [a, b, c] = ["r1", "r2", "r3"].map(|r| ledger.enter(r.into()));
        assert_eq!((a, b, c), (1, 2, 3));
        assert_eq!(ledger.room(), 0);
        assert!(ledger.awaiting_checkpoint());
        assert!(ledger.due().is_empty(), "no checkpoint yet");
        assert_eq!(ledger.held(2), vec!["r1", "r2"]);
        ledger.durable_through(2);
        assert_eq!(ledger.due(), vec![(1, "r1".into()), (2, "r2".into())]);
        ledger.acked(1);
        ledger.acked(2);
        assert_eq!(ledger.held(3), vec!["r3"]);
        // An older checkpoint finishing late does not lower the mark.
        ledger.durable_through(1);
        assert!(ledger.due().is_empty());
        assert!(ledger.awaiting_checkpoint());
        ledger.forget(c);
        assert!(!ledger.awaiting_checkpoint());
        assert_eq!(ledger.room(), 3);
        assert_eq!(ledger.enter("r4".into()), 4, "numbers are never reused");
    }

    #[test]
    fn in_progress_acks_touch_only_stale_batches() {
        let ledger = AckLedger::new(4);
        ledger.enter("r1".into());
        assert_eq!(ledger.stale(Duration::ZERO), vec!["r1"]);
        assert!(ledger.stale(Duration::from_secs(60)).is_empty());
    }

    #[test]
    fn the_batch_format_follows_the_header_then_the_first_line() {
        assert_eq!(
            batch_format(None, "# c\n\n{\"label\":1}\n"),
            Some(BodyFormat::Ndjson)
        );
        assert_eq!(batch_format(None, "1 3:1\n"), Some(BodyFormat::Libsvm));
        assert_eq!(batch_format(None, ""), Some(BodyFormat::Libsvm));
        assert_eq!(
            batch_format(Some("application/x-ndjson"), "1 3:1"),
            Some(BodyFormat::Ndjson)
        );
        assert_eq!(batch_format(Some("image/png"), "1 3:1"), None);
    }
}
