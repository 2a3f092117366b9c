//! The exchange behind a cluster's one exact SDIHT model (`nats.global_model`): cuts proposed on core
//! NATS, each node's partial sums in chunks, and the merge every node makes of a complete cut
//! ([`crate::learner::global`] has the mathematics; `docs/cluster.md` the protocol).
//!
//! Per learner, every node runs one [`GlobalModel`] task:
//!
//! 1. **Propose.** Every snapshot interval the live member with the lowest name (membership in the
//!    key-value bucket, [`super::Membership`]) publishes a proposal on
//!    `thresher.cluster.<stream>.<learner>.cut`: a cut number (its clock, ms), the live members' names,
//!    and its current model `(w, b)`.
//! 2. **Answer.** Every listed node, on receiving it, takes its [`PartialSums`] at that model under its
//!    learner lock (one instant, so its part is consistent) and publishes them on
//!    `thresher.cluster.<stream>.<learner>.part.<node>` in chunks below the server's `max_payload`:
//!    headers name the cut, the chunk (`i/n`) and the scalar sums (`samples loss conj mass`, the sums
//!    as `f64` bits, exactly; a part of an older version without the mass is refused); the
//!    payload is `(u32 index, f64 value)` pairs, little-endian, ascending.
//! 3. **Merge.** Every node (listed or not) collects the latest complete part of each node; once every
//!    node the proposal lists has answered that cut, it computes the cut's certificate from the parts
//!    in name order (the same bits on every node), publishes the proposal's model with it (the same
//!    model on every node: `"scope": "global"`), and replaces its view of the other nodes' part by
//!    their sum ([`RemoteSums`]) with CoCoA's `sigma' =` the number of nodes.
//!
//! The proposer proposes the next cut only once the last one completed, or after `10 x` the interval
//! (at least 2 s) without completing: then the newer proposal abandons it (a node that died mid-cut
//! leaves the members after the TTL and the next proposals do not wait for it). So under load the cut
//! cadence is the time a cut takes, not the interval. Everything held is bounded: one proposal, one
//! assembly and one complete part per node, at most [`MAX_NODES`] nodes and [`MAX_CHUNKS`] chunks per
//! part; a malformed message is dropped and counted (`thresher_cluster_cuts_total{outcome="invalid"}`).
//! Core NATS delivers at most once: a lost chunk only leaves that cut incomplete.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use bytes::Bytes;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

use super::ClusterView;
use crate::learner::global::{cut_certificate, PartialSums, RemoteSums};
use crate::learner::model_of;
use crate::learner::params::LearnerConfig;
use crate::learner::publish::SharedLearner;
use crate::metrics::Metrics;
use crate::model::ClusterCut;
use crate::solver::driver::SparseModel;
use crate::sparse::ThresholdScratch;

/// Nodes a cut may list, and nodes whose parts a node keeps.
pub const MAX_NODES: usize = 64;
/// Chunks one part may have (at 1 MB each, 4 GB: far above any window).
pub const MAX_CHUNKS: usize = 4096;
/// A proposer waits this many intervals (and at least [`MIN_PATIENCE`]) for its cut to complete
/// before it proposes the next one.
const PATIENCE_INTERVALS: u32 = 10;
const MIN_PATIENCE: Duration = Duration::from_secs(2);
/// Bytes of one `(index, value)` pair on the wire.
const PAIR_BYTES: usize = 12;
/// Room left in a chunk for the headers.
const HEADER_ROOM: usize = 4096;

const CUT_HEADER: &str = "Thresher-Cut";
const CHUNK_HEADER: &str = "Thresher-Chunk";
/// The scalar sums of a part, `"samples loss conj mass"` (the sums as `f64` bits). Named apart
/// from [`OLD_SUMS_HEADER`], the header of the nodes that divided by the sample count and sent no
/// mass: a mixed cluster would certify another objective on each side, so each side refuses the
/// other's parts (counted as invalid, and logged here).
const SUMS_HEADER: &str = "Thresher-Sums-2";
/// The sums header of the versions before the mass, `"samples loss conj"`: refused.
const OLD_SUMS_HEADER: &str = "Thresher-Sums";

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
    /// `<prefix>.<node>` for a node's parts.
    pub part_prefix: String,
}

impl Subjects {
    pub fn new(stream: &str, learner: &str) -> Subjects {
        let base = format!("thresher.cluster.{stream}.{learner}");
        Subjects {
            cut: format!("{base}.cut"),
            part_prefix: format!("{base}.part"),
        }
    }
}

/// A part's chunks: `(headers, payload)` each, `pairs_per_chunk` pairs at most per payload.
pub fn encode_part(
    cut: u64,
    part: &PartialSums,
    pairs_per_chunk: usize,
) -> Vec<(HeaderMap, Bytes)> {
    let pairs_per_chunk = pairs_per_chunk.max(1);
    let chunks: Vec<&[(u32, f64)]> = if part.z.is_empty() {
        vec![&[]]
    } else {
        part.z.chunks(pairs_per_chunk).collect()
    };
    let sums = format!(
        "{} {:016x} {:016x} {:016x}",
        part.samples,
        part.loss_sum.to_bits(),
        part.conj_sum.to_bits(),
        part.mass.to_bits()
    );
    let n = chunks.len();
    chunks
        .into_iter()
        .enumerate()
        .map(|(i, pairs)| {
            let mut headers = HeaderMap::new();
            headers.insert(CUT_HEADER, cut.to_string().as_str());
            headers.insert(CHUNK_HEADER, format!("{i}/{n}").as_str());
            headers.insert(SUMS_HEADER, sums.as_str());
            let mut payload = Vec::with_capacity(pairs.len() * PAIR_BYTES);
            for &(j, v) in pairs {
                payload.extend_from_slice(&j.to_le_bytes());
                payload.extend_from_slice(&v.to_le_bytes());
            }
            (headers, Bytes::from(payload))
        })
        .collect()
}

/// One chunk of a part, as received.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub cut: u64,
    pub index: usize,
    pub count: usize,
    pub samples: usize,
    pub loss_sum: f64,
    pub conj_sum: f64,
    pub mass: f64,
    pub pairs: Vec<(u32, f64)>,
}

/// A part from a node of a version before the mass (the `Thresher-Sums` header, not `Thresher-Sums-2`).
pub fn from_older_version(headers: Option<&HeaderMap>) -> bool {
    headers.is_some_and(|h| h.get(SUMS_HEADER).is_none() && h.get(OLD_SUMS_HEADER).is_some())
}

/// Reads a chunk; `None` if anything is malformed (missing header, bad numbers, a payload that is
/// not whole pairs, a non-finite value, indices not ascending).
pub fn decode_chunk(headers: Option<&HeaderMap>, payload: &[u8]) -> Option<Chunk> {
    let headers = headers?;
    let cut: u64 = headers.get(CUT_HEADER)?.as_str().parse().ok()?;
    let (index, count) = headers.get(CHUNK_HEADER)?.as_str().split_once('/')?;
    let (index, count): (usize, usize) = (index.parse().ok()?, count.parse().ok()?);
    if count == 0 || count > MAX_CHUNKS || index >= count {
        return None;
    }
    let sums: Vec<&str> = headers.get(SUMS_HEADER)?.as_str().split(' ').collect();
    let [samples, loss, conj, mass] = sums.as_slice() else {
        return None;
    };
    let bits = |s: &str| u64::from_str_radix(s, 16).ok().map(f64::from_bits);
    let (samples, loss_sum, conj_sum) = (samples.parse().ok()?, bits(loss)?, bits(conj)?);
    let mass = bits(mass)?;
    let whole = payload.len().is_multiple_of(PAIR_BYTES);
    if !(loss_sum.is_finite() && conj_sum.is_finite() && mass.is_finite() && mass >= 0.0 && whole) {
        return None;
    }
    let pairs: Vec<(u32, f64)> = payload
        .chunks_exact(PAIR_BYTES)
        .map(|p| {
            let j = u32::from_le_bytes(p[..4].try_into().expect("4 bytes"));
            let v = f64::from_le_bytes(p[4..].try_into().expect("8 bytes"));
            (j, v)
        })
        .collect();
    let ascending = pairs.windows(2).all(|p| p[0].0 < p[1].0);
    if !ascending || pairs.iter().any(|&(_, v)| !v.is_finite()) {
        return None;
    }
    Some(Chunk {
        cut,
        index,
        count,
        samples,
        loss_sum,
        conj_sum,
        mass,
        pairs,
    })
}

/// The chunks of one node's part for one cut, as they arrive.
#[derive(Debug)]
struct Assembly {
    cut: u64,
    chunks: Vec<Option<Vec<(u32, f64)>>>,
    missing: usize,
    sums: (usize, f64, f64, f64),
}

impl Assembly {
    fn new(c: &Chunk) -> Assembly {
        Assembly {
            cut: c.cut,
            chunks: vec![None; c.count],
            missing: c.count,
            sums: (c.samples, c.loss_sum, c.conj_sum, c.mass),
        }
    }

    /// Adds a chunk; the whole part once the last one is in (`None` also for a chunk that does not
    /// fit this assembly, which the caller counts).
    fn add(&mut self, c: Chunk) -> Result<Option<PartialSums>, ()> {
        if c.count != self.chunks.len() || (c.samples, c.loss_sum, c.conj_sum, c.mass) != self.sums
        {
            return Err(());
        }
        let slot = &mut self.chunks[c.index];
        if slot.is_none() {
            self.missing -= 1;
        }
        *slot = Some(c.pairs);
        if self.missing > 0 {
            return Ok(None);
        }
        let z: Vec<(u32, f64)> = self
            .chunks
            .iter_mut()
            .flat_map(|c| c.take().unwrap_or_default())
            .collect();
        if !z.windows(2).all(|p| p[0].0 < p[1].0) {
            return Err(());
        }
        let (samples, loss_sum, conj_sum, mass) = self.sums;
        Ok(Some(PartialSums {
            samples,
            mass,
            loss_sum,
            conj_sum,
            z,
        }))
    }
}

/// What one node holds of the exchange (all bounded: module docs).
#[derive(Default)]
struct Exchange {
    /// The latest proposal, until its cut completes.
    proposal: Option<Proposal>,
    /// The cut last merged.
    merged: Option<u64>,
    assembling: BTreeMap<String, Assembly>,
    /// The latest complete part of each node, with its cut.
    parts: BTreeMap<String, (u64, Arc<PartialSums>)>,
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
            self.client
                .subscribe(format!("{}.*", self.subjects.part_prefix)),
        );
        let (mut proposals, mut parts) = match subscribed {
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
        let mut proposed_at: Option<Instant> = None;
        let patience = (PATIENCE_INTERVALS * self.interval).max(MIN_PATIENCE);
        loop {
            tokio::select! {
                _ = stop.changed() => break,
                _ = ticker.tick() => {
                    // One cut at a time: a new proposal would abandon the one in progress, so under
                    // load (parts slower than the interval) no cut would ever complete. A cut that
                    // has not completed within `patience` (a node died mid-cut) is abandoned.
                    let pending = proposed_at.is_some_and(|at| {
                        exchange.merged != Some(last_cut) && at.elapsed() < patience
                    });
                    if !pending {
                        if let Some(cut) = self.propose(last_cut).await {
                            last_cut = cut;
                            proposed_at = Some(Instant::now());
                        }
                    }
                }
                Some(msg) = proposals.next() => self.on_proposal(&msg.payload, &mut exchange).await,
                Some(msg) = parts.next() => {
                    let bytes = msg.length as u64;
                    self.metrics.cluster_partial_bytes.with_label_values(&["received"]).inc_by(bytes);
                    let node = msg.subject.rsplit('.').next().unwrap_or_default().to_string();
                    self.on_part(node, msg.headers.as_ref(), &msg.payload, &mut exchange).await;
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
        let cut = proposal.cut;
        exchange.proposal = Some(proposal);
        // Parts of nodes no longer listed go (the bound on what is held is the live membership).
        let keep = |node: &String, exchange: &Exchange| {
            exchange
                .proposal
                .as_ref()
                .is_some_and(|p| p.nodes.binary_search(node).is_ok())
        };
        let stale: Vec<String> = exchange
            .parts
            .keys()
            .chain(exchange.assembling.keys())
            .filter(|n| !keep(n, exchange))
            .cloned()
            .collect();
        for node in stale {
            exchange.parts.remove(&node);
            exchange.assembling.remove(&node);
        }
        if let Some(p) = &exchange.proposal {
            self.view.keep_parts_of(&self.config.name, &p.nodes);
        }
        if listed {
            self.answer(cut, at).await;
        }
        self.merge_if_complete(exchange).await;
    }

    /// Takes this node's part at `at` and publishes it.
    async fn answer(&self, cut: u64, at: SparseModel) {
        let learner = self.learner.clone();
        let taken = tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let part = learner.lock().partial_sums(&at);
            (part, started.elapsed())
        })
        .await;
        let Ok((Some(part), took)) = taken else {
            return;
        };
        self.metrics
            .cluster_partial_seconds
            .with_label_values(&[&self.config.name])
            .inc_by(took.as_secs_f64());
        let max_payload = self.client.server_info().max_payload.max(2 * HEADER_ROOM);
        let pairs_per_chunk = (max_payload - HEADER_ROOM) / PAIR_BYTES;
        let subject = format!("{}.{}", self.subjects.part_prefix, self.node);
        for (headers, payload) in encode_part(cut, &part, pairs_per_chunk) {
            let bytes = payload.len() as u64;
            if let Err(e) = self
                .client
                .publish_with_headers(subject.clone(), headers, payload)
                .await
            {
                tracing::debug!(error = %e, "publishing a partial sum failed");
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
            // A late chunk of an older cut does not reset a newer assembly; the proposed cut's does
            // (a new proposer's clock may be behind the old one's).
            if chunk.cut < assembly.cut && proposed != Some(chunk.cut) {
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
        self.merge_if_complete(exchange).await;
    }

    /// Merges the proposal's cut once every listed node's part for it is in (module docs).
    async fn merge_if_complete(&self, exchange: &mut Exchange) {
        let Some(proposal) = &exchange.proposal else {
            return;
        };
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
        let (learner, config, me) = (self.learner.clone(), self.config.clone(), self.node.clone());
        let merged = tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let at = proposal.model();
            let refs: Vec<&PartialSums> = parts.iter().map(|p| p.as_ref()).collect();
            let certificate = cut_certificate(
                &refs,
                &at,
                config.lambda,
                config.k,
                &mut ThresholdScratch::default(),
            );
            if !(certificate.primal.is_finite() && certificate.dual.is_finite()) {
                return None;
            }
            let others = proposal
                .nodes
                .iter()
                .zip(&refs)
                .filter(|(n, _)| **n != me)
                .map(|(_, p)| *p);
            let mut remote = RemoteSums::of(others, proposal.nodes.len());
            remote.intercept = (proposal.proposer != me).then_some(proposal.intercept);
            let mut model = model_of(&config, &at, certificate);
            model.cluster = Some(ClusterCut {
                cut: proposal.cut,
                proposer: proposal.proposer.clone(),
                samples: refs.iter().map(|p| p.samples).collect(),
                nodes: proposal.nodes.clone(),
            });
            let mut l = learner.lock();
            l.set_remote(&remote);
            l.set_global(model);
            drop(l);
            Some(started.elapsed())
        })
        .await;
        match merged {
            Ok(Some(took)) => {
                let name = [self.config.name.as_str()];
                self.metrics.cluster_merges.with_label_values(&name).inc();
                self.metrics
                    .cluster_merge_seconds
                    .with_label_values(&name)
                    .inc_by(took.as_secs_f64());
                self.count("complete");
            }
            _ => self.count("invalid"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(pairs: usize) -> PartialSums {
        PartialSums {
            samples: 7,
            mass: 7.5,
            loss_sum: 0.1 + 0.2,
            conj_sum: -1.0 / 3.0,
            z: (0..pairs as u32).map(|j| (3 * j, j as f64 / 7.0)).collect(),
        }
    }

    fn reassemble(chunks: Vec<(HeaderMap, Bytes)>) -> Option<PartialSums> {
        let mut assembly: Option<Assembly> = None;
        let mut done = None;
        for (h, p) in chunks.into_iter().rev() {
            let c = decode_chunk(Some(&h), &p).expect("a valid chunk");
            let a = assembly.get_or_insert_with(|| Assembly::new(&c));
            if let Some(part) = a.add(c).expect("fits") {
                done = Some(part);
            }
        }
        done
    }

    #[test]
    fn a_part_round_trips_through_its_chunks_bit_for_bit() {
        for (pairs, per_chunk) in [(0, 4), (1, 4), (10, 4), (12, 4), (1000, 1000)] {
            let p = part(pairs);
            let chunks = encode_part(42, &p, per_chunk);
            assert_eq!(chunks.len(), pairs.div_ceil(per_chunk).max(1));
            assert_eq!(reassemble(chunks), Some(p));
        }
    }

    #[test]
    fn malformed_chunks_are_refused() {
        let (h, p) = encode_part(1, &part(3), 10).remove(0);
        assert!(decode_chunk(None, &p).is_none());
        assert!(decode_chunk(Some(&h), &p[..p.len() - 1]).is_none());
        let mut nan = p.to_vec();
        nan[4..12].copy_from_slice(&f64::NAN.to_le_bytes());
        assert!(decode_chunk(Some(&h), &nan).is_none());
        let mut descending = p.to_vec();
        descending[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_chunk(Some(&h), &descending).is_none());
        let mut bad = h.clone();
        bad.insert(CHUNK_HEADER, "3/2");
        assert!(decode_chunk(Some(&bad), &p).is_none());
        let mut bad = h.clone();
        bad.insert(SUMS_HEADER, "1 2");
        assert!(decode_chunk(Some(&bad), &p).is_none());
        // A part of the format before the mass (three sums, the old header) is refused and known.
        let mut old = HeaderMap::new();
        for name in [CUT_HEADER, CHUNK_HEADER] {
            old.insert(name, h.get(name).unwrap().as_str());
        }
        old.insert(OLD_SUMS_HEADER, "7 3fd3333333333334 bfd5555555555555");
        assert!(decode_chunk(Some(&old), &p).is_none());
        assert!(from_older_version(Some(&old)));
        assert!(!from_older_version(Some(&h)));
        let mut three = h;
        three.insert(SUMS_HEADER, "7 3fd3333333333334 bfd5555555555555");
        assert!(decode_chunk(Some(&three), &p).is_none());
    }

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
