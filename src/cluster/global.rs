//! The exchange behind a cluster's one exact SDIHT model (`nats.global_model`): cuts proposed on core
//! NATS, each node's partial sums sent to the proposer, and the proposer's sum of a complete cut sent
//! back to every node ([`crate::learner::global`] has the mathematics; `docs/cluster.md` the protocol;
//! [`super::wire`] the chunks).
//!
//! Per learner, every node runs one [`GlobalModel`] task:
//!
//! 1. **Propose.** Every snapshot interval the live member with the lowest name (membership in the
//!    key-value bucket, [`super::Membership`]) publishes a proposal on
//!    `thresher.cluster.<stream>.<learner>.cut`: a cut number (its clock, ms), the live members' names,
//!    and its current model `(w, b)`.
//! 2. **Answer.** Every listed node, on receiving it, takes its [`PartialSums`] at that model under its
//!    learner lock (one instant, so its part is consistent), keeps it, and publishes it to the proposer
//!    on `thresher.cluster.<stream>.<learner>.part.<proposer>.<node>` (each node subscribes only to the
//!    parts addressed to it); the proposer keeps its own part without sending it.
//! 3. **Reduce.** Once every listed node's part of the cut is in, the proposer adds them in name order
//!    ([`cut_total`]), certifies the proposal's model on the sum, and publishes the sum with the
//!    certificate and each node's sample count on `thresher.cluster.<stream>.<learner>.sum`.
//! 4. **Install.** Every node (the proposer at once, the others on the sum) publishes the proposal's
//!    model with that certificate (the proposer's bits: the same model and certificate on every node,
//!    `"scope": "global"`) and replaces its view of the other nodes' part by the sum less its own part
//!    ([`RemoteSums::without`]) with CoCoA's `sigma' =` the number of nodes.
//!
//! **Unchanged, referred to.** A node whose part of this cut is the one it sent for the cut it last
//! merged (nothing changed: `Taken::Reused`), with the same proposer, sends a reference to that
//! cut instead of the pairs (`wire::encode_reference`); the proposer files the part it holds, after
//! checking the sums agree. When every listed part of a cut is the very one of the last cut reduced,
//! at the same model, the sum and certificate are the last ones bit for bit: the proposer sums
//! nothing and sends a reference to that sum, which every listed node holds (each referred to its
//! part, so each merged that cut). A reference that cannot be resolved leaves that cut incomplete, and
//! the next part is whole. So an idle cluster's cut costs a few hundred bytes a node, not its parts.
//!
//! Why a reduction: when every node sent its part to every node, the server sent `N^2` parts per cut
//! and every node merged `N` of them (`docs/benchmarks/cluster.md`); now the server sends `N - 1` parts
//! to one node and one sum to `N` nodes, and every node but the proposer subtracts one part.
//!
//! The proposer proposes the next cut only once the last one completed, or after `10 x` the interval
//! (at least 2 s) without completing: then the newer proposal abandons it (a node that died mid-cut
//! leaves the members after the TTL and the next proposals do not wait for it; a proposer that died
//! mid-cut is replaced by the next lowest name). So under load the cut cadence is the time a cut
//! takes, not the interval. Everything held is bounded: one proposal, one own part, one assembly and
//! one complete part per node (the proposer), one sum being assembled, one waiting for its proposal
//! and the last one merged, at most [`MAX_NODES`] nodes and [`super::wire::MAX_CHUNKS`] chunks per part; a malformed message
//! is dropped and counted (`thresher_cluster_cuts_total{outcome="invalid"}`). Core NATS delivers at
//! most once: a lost chunk only leaves that cut incomplete.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

use super::wire::{
    decode_chunk, decode_sum_extras, encode_part, encode_reference, encode_sum,
    encode_sum_reference, from_older_version, Assembly, SumExtras, HEADER_ROOM, PAIR_BYTES,
};
use super::ClusterView;
use crate::learner::global::{cut_total, total_certificate, PartialSums, RemoteSums};
use crate::learner::model_of;
use crate::learner::params::LearnerConfig;
use crate::learner::publish::SharedLearner;
use crate::metrics::Metrics;
use crate::model::ClusterCut;
use crate::solver::driver::SparseModel;
use crate::sparse::ThresholdScratch;

/// Nodes a cut may list, and nodes whose parts a node keeps.
pub const MAX_NODES: usize = 64;
/// A proposer waits this many intervals (and at least [`MIN_PATIENCE`]) for its cut to complete
/// before it proposes the next one.
const PATIENCE_INTERVALS: u32 = 10;
const MIN_PATIENCE: Duration = Duration::from_secs(2);

/// A cut as proposed: its number, the nodes it waits for, and the model it certifies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proposal {
    pub cut: u64,
    pub proposer: String,
    /// Sorted, distinct.
    pub nodes: Vec<String>,
    pub support: Vec<u32>,
    pub weights: Vec<f64>,
    pub intercept: f64,
}

impl Proposal {
    fn model(&self) -> SparseModel {
        SparseModel {
            support: self.support.clone(),
            weights: self.weights.clone(),
            intercept: self.intercept,
        }
    }

    /// Well formed: named nodes (sorted, distinct, at most [`MAX_NODES`]), a finite model with one
    /// weight per ascending support index.
    fn is_valid(&self) -> bool {
        !self.nodes.is_empty()
            && self.nodes.len() <= MAX_NODES
            && self.nodes.windows(2).all(|p| p[0] < p[1])
            && self.support.len() == self.weights.len()
            && self.support.windows(2).all(|p| p[0] < p[1])
            && self.weights.iter().all(|w| w.is_finite())
            && self.intercept.is_finite()
    }
}

/// The subjects of one learner's exchange.
#[derive(Debug, Clone)]
pub struct Subjects {
    pub cut: String,
    /// `<prefix>.<proposer>.<node>` for a node's part sent to a cut's proposer.
    pub part_prefix: String,
    /// The proposer's sum of each complete cut.
    pub sum: String,
}

impl Subjects {
    pub fn new(stream: &str, learner: &str) -> Subjects {
        let base = format!("thresher.cluster.{stream}.{learner}");
        Subjects {
            cut: format!("{base}.cut"),
            part_prefix: format!("{base}.part"),
            sum: format!("{base}.sum"),
        }
    }

    /// Where `node` sends its part of a cut `proposer` proposed.
    fn part_to(&self, proposer: &str, node: &str) -> String {
        format!("{}.{proposer}.{node}", self.part_prefix)
    }

    /// The parts addressed to `node` (as a proposer).
    fn parts_for(&self, node: &str) -> String {
        format!("{}.{node}.*", self.part_prefix)
    }
}

/// What one node holds of the exchange (all bounded: module docs).
#[derive(Default)]
struct Exchange {
    /// The latest proposal, until its cut completes.
    proposal: Option<Proposal>,
    /// The cut last merged.
    merged: Option<u64>,
    /// The sum of the cut last merged here, which a later cut's proposer may refer to instead of
    /// sending it again (`encode_sum_reference`), and to whose proposer this node's unchanged part
    /// may travel as a reference (`encode_reference`).
    last_sum: Option<MergedSum>,
    /// As a proposer: the cut last reduced here, its model and each listed node's part, so a cut whose
    /// parts are all the same ones, at the same model, reuses its sum and sends a reference to it.
    last_reduced: Option<(u64, SparseModel, Vec<Arc<PartialSums>>)>,
    /// This node's part of the latest cut it answered: the sum less it is the other nodes' part.
    own: Option<(u64, Arc<PartialSums>)>,
    /// What `own` was taken at: the samples the learner had seen, its window's
    /// [`crate::ring::Window::fingerprint`] (the duals) and the cut's model. A part is a function of
    /// these alone, so a cut at the same model with none of them changed gets the same part, bit for
    /// bit, without the pass over the window (an idle cluster keeps cutting; its learners' steps may
    /// go on, rejected, without moving a dual).
    own_taken_at: Option<(u64, u64, SparseModel)>,
    /// As a proposer: the parts being assembled, and the latest complete part of each node.
    assembling: BTreeMap<String, Assembly>,
    parts: BTreeMap<String, (u64, Arc<PartialSums>)>,
    /// The proposer's sum being assembled, and the latest complete one not yet installed (it can
    /// arrive before its proposal on a node the proposal does not list).
    sum_assembling: Option<(Assembly, SumExtras)>,
    sum_ready: Option<(u64, Arc<PartialSums>, SumExtras)>,
    /// As a proposer: the cut last proposed and when (a cut pending past the patience is abandoned;
    /// a complete one is timed in `thresher_cluster_cut_seconds`).
    proposed: Option<(u64, Instant)>,
}

/// A merged cut's sum as this node holds it: the cut, its proposer, the sum and its extras (the
/// certificate and node samples).
#[derive(Clone)]
struct MergedSum {
    cut: u64,
    proposer: String,
    total: Arc<PartialSums>,
    extras: SumExtras,
}

/// A node's part of a cut: taken now, or the previous one (nothing changed since).
enum Taken {
    Computed(Arc<PartialSums>),
    Reused(Arc<PartialSums>),
}

/// Whether a chunk of cut `chunk` is a late one, to drop rather than let reset an assembly of cut
/// `assembling`: it is older, and not of the proposed cut (a new proposer's clock may be behind the
/// old one's).
fn is_late(chunk: u64, assembling: u64, proposed: Option<u64>) -> bool {
    chunk < assembling && proposed != Some(chunk)
}

/// One learner's exchange task (module docs).
pub struct GlobalModel {
    pub client: async_nats::Client,
    pub subjects: Subjects,
    pub node: String,
    pub view: Arc<ClusterView>,
    /// How often the lowest-named member proposes a cut (`snapshot.interval_ms`).
    pub interval: Duration,
    pub learner: SharedLearner,
    pub config: LearnerConfig,
    pub metrics: Metrics,
}

impl GlobalModel {
    /// Runs until `stop`.
    pub async fn run(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let subscribed = tokio::try_join!(
            self.client.subscribe(self.subjects.cut.clone()),
            self.client.subscribe(self.subjects.parts_for(&self.node)),
            self.client.subscribe(self.subjects.sum.clone()),
        );
        let (mut proposals, mut parts, mut sums) = match subscribed {
            Ok(subs) => subs,
            Err(e) => {
                tracing::error!(error = %e, learner = %self.config.name, "cannot subscribe to the global model's subjects; this node learns alone");
                return;
            }
        };
        let mut ticker = tokio::time::interval(self.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut exchange = Exchange::default();
        let mut last_cut = 0;
        let patience = (PATIENCE_INTERVALS * self.interval).max(MIN_PATIENCE);
        loop {
            tokio::select! {
                _ = stop.changed() => break,
                _ = ticker.tick() => {
                    // One cut at a time: a new proposal would abandon the one in progress, so under
                    // load (parts slower than the interval) no cut would ever complete. A cut that
                    // has not completed within `patience` (a node died mid-cut) is abandoned.
                    let pending = exchange.proposed.is_some_and(|(_, at)| {
                        exchange.merged != Some(last_cut) && at.elapsed() < patience
                    });
                    if !pending {
                        if let Some(cut) = self.propose(last_cut).await {
                            last_cut = cut;
                            exchange.proposed = Some((cut, Instant::now()));
                        }
                    }
                }
                Some(msg) = proposals.next() => self.on_proposal(&msg.payload, &mut exchange).await,
                Some(msg) = parts.next() => {
                    self.received(msg.length);
                    let node = msg.subject.rsplit('.').next().unwrap_or_default().to_string();
                    self.on_part(node, msg.headers.as_ref(), &msg.payload, &mut exchange).await;
                }
                Some(msg) = sums.next() => {
                    self.received(msg.length);
                    self.on_sum(msg.headers.as_ref(), &msg.payload, &mut exchange).await;
                }
            }
        }
    }

    fn count(&self, outcome: &str) {
        self.metrics
            .cluster_cuts
            .with_label_values(&[&self.config.name, outcome])
            .inc();
    }

    fn received(&self, bytes: usize) {
        self.metrics
            .cluster_partial_bytes
            .with_label_values(&["received"])
            .inc_by(bytes as u64);
    }

    /// Proposes a cut if this node is the live member with the lowest name; returns its number.
    async fn propose(&self, last_cut: u64) -> Option<u64> {
        let members = self.view.joined()?.members().await.ok()?;
        let mut nodes: Vec<String> = members.into_iter().map(|m| m.status.node).collect();
        nodes.sort();
        nodes.dedup();
        nodes.truncate(MAX_NODES);
        if nodes.first() != Some(&self.node) {
            return None;
        }
        let learner = self.learner.clone();
        let model = tokio::task::spawn_blocking(move || learner.lock().cut_model())
            .await
            .ok()??;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let cut = now.max(last_cut + 1);
        let proposal = Proposal {
            cut,
            proposer: self.node.clone(),
            nodes,
            support: model.support,
            weights: model.weights,
            intercept: model.intercept,
        };
        if !proposal.is_valid() {
            // A non-finite model is not proposed (the learner's own fault handling rebuilds it).
            return None;
        }
        let body = serde_json::to_vec(&proposal).expect("a proposal serialises");
        if let Err(e) = self
            .client
            .publish(self.subjects.cut.clone(), body.into())
            .await
        {
            tracing::debug!(error = %e, "proposing a cut failed");
            return None;
        }
        Some(cut)
    }

    async fn on_proposal(&self, payload: &[u8], exchange: &mut Exchange) {
        let Some(proposal) = serde_json::from_slice::<Proposal>(payload)
            .ok()
            .filter(Proposal::is_valid)
        else {
            self.count("invalid");
            return;
        };
        if exchange.merged == Some(proposal.cut) {
            return;
        }
        if let Some(old) = &exchange.proposal {
            if old.cut != proposal.cut {
                self.count("abandoned");
            }
        }
        let listed = proposal.nodes.binary_search(&self.node).is_ok();
        let at = proposal.model();
        let (cut, proposer) = (proposal.cut, proposal.proposer.clone());
        // Parts of nodes no longer listed go (the bound on what is held is the live membership).
        exchange
            .parts
            .retain(|node, _| proposal.nodes.binary_search(node).is_ok());
        exchange
            .assembling
            .retain(|node, _| proposal.nodes.binary_search(node).is_ok());
        self.view.keep_parts_of(&self.config.name, &proposal.nodes);
        exchange.proposal = Some(proposal);
        if listed {
            self.answer(cut, at, &proposer, exchange).await;
        }
        if proposer == self.node {
            self.reduce_if_complete(exchange).await;
        } else {
            self.install_sum_if_ready(exchange).await;
        }
    }

    /// Takes this node's part at `at` and keeps it; sends it to `proposer` (or, as the proposer,
    /// files it with the parts it collects).
    async fn answer(&self, cut: u64, at: SparseModel, proposer: &str, exchange: &mut Exchange) {
        let learner = self.learner.clone();
        let previous_cut = exchange.own.as_ref().map(|(cut, _)| *cut);
        let previous = exchange.own.as_ref().map(|(_, part)| part.clone());
        let taken_at = exchange.own_taken_at.take();
        let taken = tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let mut l = learner.lock();
            let (seen, window) = (l.stats().samples_seen, l.window().fingerprint());
            let part = match (previous, taken_at) {
                (Some(part), Some((s, w, model))) if (s, w) == (seen, window) && model == at => {
                    Taken::Reused(part)
                }
                _ => match l.partial_sums(&at) {
                    Some(part) => Taken::Computed(Arc::new(part)),
                    None => return None,
                },
            };
            Some((part, (seen, window, at), started.elapsed()))
        })
        .await;
        let Ok(Some((part, taken_at, took))) = taken else {
            return;
        };
        let name = [self.config.name.as_str()];
        // The proposer holds this node's part of the cut last merged (it summed it): the same part
        // again travels as a reference to that cut. Only to a proposer that reads references: that
        // cut's sum carried the samples-taken-in count, which the same version began to send (a
        // proposer of an earlier version would take a reference for a part without pairs).
        let held_by_proposer = exchange.last_sum.as_ref().is_some_and(|merged| {
            Some(merged.cut) == previous_cut
                && merged.proposer == proposer
                && merged.total.seen.is_some()
        });
        let mut reference = None;
        let part = match part {
            Taken::Reused(part) => {
                self.metrics
                    .cluster_parts_reused
                    .with_label_values(&name)
                    .inc();
                if held_by_proposer {
                    reference = previous_cut;
                }
                part
            }
            Taken::Computed(part) => {
                self.metrics
                    .cluster_partial_seconds
                    .with_label_values(&name)
                    .inc_by(took.as_secs_f64());
                part
            }
        };
        exchange.own = Some((cut, part.clone()));
        exchange.own_taken_at = Some(taken_at);
        if proposer == self.node {
            self.view
                .part_received(&self.config.name, &self.node, cut, part.samples);
            exchange.parts.insert(self.node.clone(), (cut, part));
            return;
        }
        let subject = self.subjects.part_to(proposer, &self.node);
        let chunks = match reference {
            Some(same_as) => {
                self.referenced("part");
                encode_reference(cut, same_as, &part)
            }
            None => encode_part(cut, &part, self.pairs_per_chunk()),
        };
        self.send(subject, chunks).await;
    }

    fn referenced(&self, kind: &str) {
        self.metrics
            .cluster_references
            .with_label_values(&[&self.config.name, kind])
            .inc();
    }

    /// Pairs per chunk under the server's `max_payload`.
    fn pairs_per_chunk(&self) -> usize {
        let max_payload = self.client.server_info().max_payload.max(2 * HEADER_ROOM);
        (max_payload - HEADER_ROOM) / PAIR_BYTES
    }

    /// Publishes `chunks` on `subject`, counting the bytes sent; stops at the first failure (the cut
    /// stays incomplete).
    async fn send(&self, subject: String, chunks: Vec<(HeaderMap, bytes::Bytes)>) {
        for (headers, payload) in chunks {
            let bytes = payload.len() as u64;
            if let Err(e) = self
                .client
                .publish_with_headers(subject.clone(), headers, payload)
                .await
            {
                tracing::debug!(error = %e, "publishing a cut's chunk failed");
                return;
            }
            self.metrics
                .cluster_partial_bytes
                .with_label_values(&["sent"])
                .inc_by(bytes);
        }
    }

    async fn on_part(
        &self,
        node: String,
        headers: Option<&HeaderMap>,
        payload: &[u8],
        exchange: &mut Exchange,
    ) {
        let Some(chunk) = decode_chunk(headers, payload) else {
            if from_older_version(headers) {
                tracing::warn!(
                    learner = %self.config.name,
                    %node,
                    "refused a part without the sample mass (a node of an older version): the cluster's nodes must run versions that certify the same objective"
                );
            }
            self.count("invalid");
            return;
        };
        if let Some(same_as) = chunk.same_as {
            // The node's part of an earlier cut, held here: filed for this cut if its sums agree.
            match exchange.parts.get(&node) {
                Some((held, part)) if *held == same_as && chunk.sums_match(part) => {
                    let part = part.clone();
                    self.view
                        .part_received(&self.config.name, &node, chunk.cut, part.samples);
                    exchange.parts.insert(node, (chunk.cut, part));
                    self.reduce_if_complete(exchange).await;
                }
                _ => self.count("invalid"),
            }
            return;
        }
        if !exchange.assembling.contains_key(&node) && exchange.assembling.len() >= MAX_NODES {
            self.count("invalid");
            return;
        }
        let proposed = exchange.proposal.as_ref().map(|p| p.cut);
        let assembly = exchange
            .assembling
            .entry(node.clone())
            .or_insert_with(|| Assembly::new(&chunk));
        if assembly.cut != chunk.cut {
            if is_late(chunk.cut, assembly.cut, proposed) {
                return;
            }
            *assembly = Assembly::new(&chunk);
        }
        let cut = chunk.cut;
        match assembly.add(chunk) {
            Ok(None) => return,
            Ok(Some(part)) => {
                exchange.assembling.remove(&node);
                if exchange.parts.len() < MAX_NODES || exchange.parts.contains_key(&node) {
                    self.view
                        .part_received(&self.config.name, &node, cut, part.samples);
                    exchange.parts.insert(node, (cut, Arc::new(part)));
                }
            }
            Err(()) => {
                exchange.assembling.remove(&node);
                self.count("invalid");
                return;
            }
        }
        self.reduce_if_complete(exchange).await;
    }

    /// As the proposer, once every listed node's part of the proposed cut is in: sums them, certifies
    /// the proposal's model on the sum, installs the cut here and sends the sum to every node.
    async fn reduce_if_complete(&self, exchange: &mut Exchange) {
        let Some(proposal) = &exchange.proposal else {
            return;
        };
        if proposal.proposer != self.node {
            return;
        }
        let parts: Option<Vec<Arc<PartialSums>>> = proposal
            .nodes
            .iter()
            .map(|n| match exchange.parts.get(n) {
                Some((cut, part)) if *cut == proposal.cut => Some(part.clone()),
                _ => None,
            })
            .collect();
        let Some(parts) = parts else {
            return;
        };
        let proposal = exchange.proposal.take().expect("checked above");
        exchange.merged = Some(proposal.cut);
        let own = exchange.own.as_ref().map(|(_, part)| part.clone());
        // The same parts (the very ones, not equal copies) at the same model: the same sum and
        // certificate, bit for bit, which every listed node holds (each referred to its part of that
        // cut, so each merged it). A reference to it travels instead, and nothing is summed.
        let model = proposal.model();
        let unchanged = match (&exchange.last_reduced, &exchange.last_sum) {
            (Some((cut, at, previous)), Some(merged)) => {
                *cut == merged.cut
                    && *at == model
                    && previous.len() == parts.len()
                    && previous.iter().zip(&parts).all(|(a, b)| Arc::ptr_eq(a, b))
            }
            _ => false,
        };
        exchange.last_reduced = Some((proposal.cut, model, parts.clone()));
        if unchanged {
            let last = exchange.last_sum.take().expect("checked above");
            let chunks = encode_sum_reference(proposal.cut, last.cut, &last.total, &last.extras);
            exchange.last_sum = Some(MergedSum {
                cut: proposal.cut,
                ..last.clone()
            });
            self.referenced("sum");
            self.send(self.subjects.sum.clone(), chunks).await;
            self.observe_cut(exchange, proposal.cut);
            self.install(proposal, last.total, last.extras, own, Duration::ZERO)
                .await;
            return;
        }
        let config = self.config.clone();
        let summed = tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let refs: Vec<&PartialSums> = parts.iter().map(|p| p.as_ref()).collect();
            let total = cut_total(&refs);
            let certificate = total_certificate(
                &total,
                &proposal.model(),
                config.lambda,
                config.k,
                &mut ThresholdScratch::default(),
            );
            let extras = SumExtras {
                primal: certificate.primal,
                dual: certificate.dual,
                node_samples: refs.iter().map(|p| p.samples).collect(),
            };
            (proposal, total, extras, own, started.elapsed())
        })
        .await;
        let Ok((proposal, total, extras, own, took)) = summed else {
            self.count("invalid");
            return;
        };
        if !(extras.primal.is_finite() && extras.dual.is_finite()) {
            self.count("invalid");
            return;
        }
        let chunks = encode_sum(proposal.cut, &total, &extras, self.pairs_per_chunk());
        let total = Arc::new(total);
        exchange.last_sum = Some(MergedSum {
            cut: proposal.cut,
            proposer: proposal.proposer.clone(),
            total: total.clone(),
            extras: extras.clone(),
        });
        // The sum goes out first: the other nodes install it while this one does (its install takes
        // the learner's lock and a pass over the window).
        self.send(self.subjects.sum.clone(), chunks).await;
        self.observe_cut(exchange, proposal.cut);
        self.install(proposal, total, extras, own, took).await;
    }

    /// Records how long cut `cut` took from its proposal here to its sum sent.
    fn observe_cut(&self, exchange: &mut Exchange, cut: u64) {
        if let Some((proposed, at)) = exchange.proposed {
            if proposed == cut {
                self.metrics
                    .cluster_cut_seconds
                    .with_label_values(&[self.config.name.as_str()])
                    .observe(at.elapsed().as_secs_f64());
            }
        }
    }

    async fn on_sum(&self, headers: Option<&HeaderMap>, payload: &[u8], exchange: &mut Exchange) {
        let (Some(chunk), Some(extras)) =
            (decode_chunk(headers, payload), decode_sum_extras(headers))
        else {
            self.count("invalid");
            return;
        };
        if exchange.merged == Some(chunk.cut) {
            // This node's own sum (the proposer), or one it installed already.
            return;
        }
        if let Some(same_as) = chunk.same_as {
            // The sum of an earlier cut, installed here: ready for this cut if it agrees.
            match &exchange.last_sum {
                Some(held)
                    if held.cut == same_as
                        && held.extras == extras
                        && chunk.sums_match(&held.total) =>
                {
                    exchange.sum_ready = Some((chunk.cut, held.total.clone(), extras));
                    self.install_sum_if_ready(exchange).await;
                }
                // Not held: this node did not merge that cut (it was not listed: it joined since,
                // or came back). Its next part is whole, so the next sum it is listed in is too.
                _ => {}
            }
            return;
        }
        let proposed = exchange.proposal.as_ref().map(|p| p.cut);
        let replace = match &exchange.sum_assembling {
            None => true,
            Some((a, seen)) if a.cut == chunk.cut => {
                if *seen != extras {
                    exchange.sum_assembling = None;
                    self.count("invalid");
                    return;
                }
                false
            }
            Some((a, _)) => {
                if is_late(chunk.cut, a.cut, proposed) {
                    return;
                }
                true
            }
        };
        if replace {
            exchange.sum_assembling = Some((Assembly::new(&chunk), extras));
        }
        let cut = chunk.cut;
        let Some((assembly, _)) = exchange.sum_assembling.as_mut() else {
            return;
        };
        match assembly.add(chunk) {
            Ok(None) => {}
            Ok(Some(total)) => {
                let (_, extras) = exchange.sum_assembling.take().expect("assembling");
                exchange.sum_ready = Some((cut, Arc::new(total), extras));
                self.install_sum_if_ready(exchange).await;
            }
            Err(()) => {
                exchange.sum_assembling = None;
                self.count("invalid");
            }
        }
    }

    /// Installs the proposer's sum once this node holds its proposal (and, if listed, its own part
    /// of that cut).
    async fn install_sum_if_ready(&self, exchange: &mut Exchange) {
        let (Some(proposal), Some((cut, _, _))) = (&exchange.proposal, &exchange.sum_ready) else {
            return;
        };
        if proposal.cut != *cut {
            if *cut < proposal.cut {
                exchange.sum_ready = None;
            }
            return;
        }
        let (_, total, extras) = exchange.sum_ready.take().expect("checked above");
        let proposal = exchange.proposal.take().expect("checked above");
        exchange.merged = Some(proposal.cut);
        exchange.last_sum = Some(MergedSum {
            cut: proposal.cut,
            proposer: proposal.proposer.clone(),
            total: total.clone(),
            extras: extras.clone(),
        });
        let listed = proposal.nodes.binary_search(&self.node).is_ok();
        let own = match &exchange.own {
            Some((cut, part)) if *cut == proposal.cut => Some(part.clone()),
            _ if listed => {
                // Listed but without its part of this cut: the other nodes' sum is unknown here.
                self.count("invalid");
                return;
            }
            _ => None,
        };
        if extras.node_samples.len() != proposal.nodes.len() {
            self.count("invalid");
            return;
        }
        self.install(proposal, total, extras, own, Duration::ZERO)
            .await;
    }

    /// Publishes the cut's model with its certificate and takes the other nodes' part (the sum less
    /// `own`) into the learner; `spent` is the time already spent summing the cut.
    async fn install(
        &self,
        proposal: Proposal,
        total: Arc<PartialSums>,
        extras: SumExtras,
        own: Option<Arc<PartialSums>>,
        spent: Duration,
    ) {
        for (node, &samples) in proposal.nodes.iter().zip(&extras.node_samples) {
            self.view
                .part_received(&self.config.name, node, proposal.cut, samples);
        }
        let (learner, config, me) = (self.learner.clone(), self.config.clone(), self.node.clone());
        let installed = tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let certificate = extras.certificate();
            let mut remote = match &own {
                Some(own) => RemoteSums::without(&total, own, proposal.nodes.len()),
                None => RemoteSums::of([total.as_ref()], proposal.nodes.len()),
            };
            remote.intercept = (proposal.proposer != me).then_some(proposal.intercept);
            remote.certificate = Some(certificate);
            let mut model = model_of(&config, &proposal.model(), certificate);
            model.cluster = Some(ClusterCut {
                cut: proposal.cut,
                proposer: proposal.proposer.clone(),
                samples: extras.node_samples.clone(),
                nodes: proposal.nodes.clone(),
            });
            let mut l = learner.lock();
            l.set_remote(&remote);
            l.set_global(model);
            drop(l);
            started.elapsed()
        })
        .await;
        match installed {
            Ok(took) => {
                let name = [self.config.name.as_str()];
                self.metrics.cluster_merges.with_label_values(&name).inc();
                self.metrics
                    .cluster_merge_seconds
                    .with_label_values(&name)
                    .inc_by((spent + took).as_secs_f64());
                self.count("complete");
            }
            Err(_) => self.count("invalid"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proposals_must_be_well_formed() {
        let good = Proposal {
            cut: 1,
            proposer: "a".into(),
            nodes: vec!["a".into(), "b".into()],
            support: vec![1, 5],
            // Numbers JSON read back one ulp off before `float_roundtrip` (every node must certify the
            // proposer's `w` exactly).
            weights: vec![7.771561172376097e-16, -0.00041814026609911627],
            intercept: 0.1 + 0.2,
        };
        assert!(good.is_valid());
        let back: Proposal = serde_json::from_slice(&serde_json::to_vec(&good).unwrap()).unwrap();
        assert_eq!(back, good);
        for bad in [
            Proposal {
                nodes: vec!["b".into(), "a".into()],
                ..good.clone()
            },
            Proposal {
                nodes: vec![],
                ..good.clone()
            },
            Proposal {
                support: vec![5, 1],
                ..good.clone()
            },
            Proposal {
                weights: vec![f64::NAN, 1.0],
                ..good.clone()
            },
            Proposal {
                weights: vec![1.0],
                ..good.clone()
            },
        ] {
            assert!(!bad.is_valid(), "{bad:?}");
        }
    }
}
