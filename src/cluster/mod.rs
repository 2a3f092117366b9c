//! Cluster membership on a NATS JetStream key-value bucket: each node announces itself (its learners'
//! published versions and sample counts) under its `nats.node` key every `nats.member_ttl_s / 4`; the
//! bucket's `max_age` is the TTL, so the server removes a node that stopped announcing (killed, cut off)
//! after at most the TTL, and a node that stops cleanly deletes its key at once. `GET /v1/cluster`
//! lists the live members.
//!
//! The bucket is `<nats.stream>_members` (one per stream: the nodes sharing a stream are one cluster).
//! Ages are measured against the announcing node's clock (`updated_ms`): keep the nodes' clocks
//! synchronised (NTP) for them to mean anything; membership itself needs no clock, the TTL is the
//! server's.
//!
//! [`global`] is the exchange of partial sums by which the SDIHT learners of all members learn one
//! exact model.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_nats::jetstream::{self, kv};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::learner::publish::ModelCell;

pub mod global;
pub mod wire;

/// Why membership could not be read or written.
#[derive(Debug, Error)]
pub enum ClusterError {
    #[error("cannot create or open the membership bucket {bucket:?}: {reason}")]
    Bucket { bucket: String, reason: String },
    #[error("cannot announce node {node:?}: {reason}")]
    Announce { node: String, reason: String },
    #[error("cannot list the members: {0}")]
    List(String),
}

/// One learner of a node, as it announces it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LearnerStatus {
    pub name: String,
    /// The published model's version (0: none yet).
    pub version: u64,
    pub samples_seen: u64,
    pub window_samples: usize,
}

/// What a node announces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeStatus {
    pub node: String,
    /// The thresher build (`CARGO_PKG_VERSION`).
    pub thresher: String,
    pub learners: Vec<LearnerStatus>,
    /// When it was announced, milliseconds since the Unix epoch on the node's clock.
    pub updated_ms: u64,
}

impl NodeStatus {
    /// This node's status now, from its learners' published snapshots.
    pub fn of(node: &str, cells: &[Arc<ModelCell>]) -> NodeStatus {
        NodeStatus {
            node: node.to_string(),
            thresher: env!("CARGO_PKG_VERSION").to_string(),
            learners: cells
                .iter()
                .map(|cell| {
                    let snap = cell.get();
                    LearnerStatus {
                        name: cell.name.clone(),
                        version: snap.as_ref().map_or(0, |s| s.version),
                        samples_seen: snap.as_ref().map_or(0, |s| s.samples_seen),
                        window_samples: snap.as_ref().map_or(0, |s| s.window_samples),
                    }
                })
                .collect(),
            updated_ms: now_ms(),
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A live member as listed: its last announcement and how old that is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Member {
    #[serde(flatten)]
    pub status: NodeStatus,
    /// Seconds since the announcement (this node's clock against the member's; 0 if ahead).
    pub age_s: f64,
}

/// A node's handle on the membership bucket.
#[derive(Clone)]
pub struct Membership {
    store: kv::Store,
    pub node: String,
    pub ttl: Duration,
}

/// The bucket of the nodes sharing `stream`.
pub fn bucket_name(stream: &str) -> String {
    format!("{stream}_members")
}

impl Membership {
    /// Opens the bucket, creating it (TTL `ttl`, `replicas` replicas) if it is missing.
    pub async fn open(
        client: async_nats::Client,
        stream: &str,
        node: &str,
        ttl: Duration,
        replicas: usize,
    ) -> Result<Membership, ClusterError> {
        let js = jetstream::new(client);
        let bucket = bucket_name(stream);
        let store = match js.get_key_value(&bucket).await {
            Ok(store) => store,
            Err(_) => js
                .create_key_value(kv::Config {
                    bucket: bucket.clone(),
                    description: "thresher cluster members (one key per node, expiring)".into(),
                    history: 1,
                    max_age: ttl,
                    num_replicas: replicas,
                    ..Default::default()
                })
                .await
                .map_err(|e| ClusterError::Bucket {
                    bucket: bucket.clone(),
                    reason: e.to_string(),
                })?,
        };
        Ok(Membership {
            store,
            node: node.to_string(),
            ttl,
        })
    }

    /// Writes this node's status under its key (which also renews its TTL).
    pub async fn announce(&self, status: &NodeStatus) -> Result<(), ClusterError> {
        let value = serde_json::to_vec(status).expect("a status serialises");
        self.store
            .put(&self.node, value.into())
            .await
            .map(|_| ())
            .map_err(|e| ClusterError::Announce {
                node: self.node.clone(),
                reason: e.to_string(),
            })
    }

    /// Removes this node's key (a clean leave).
    pub async fn leave(&self) -> Result<(), ClusterError> {
        self.store
            .purge(&self.node)
            .await
            .map_err(|e| ClusterError::Announce {
                node: self.node.clone(),
                reason: e.to_string(),
            })
    }

    /// The live members, by node name. An entry that does not parse (another program's key) is
    /// skipped; one older than the TTL (the server's expiry runs periodically) too.
    pub async fn members(&self) -> Result<Vec<Member>, ClusterError> {
        let mut keys = self
            .store
            .keys()
            .await
            .map_err(|e| ClusterError::List(e.to_string()))?;
        let mut names = Vec::new();
        while let Some(key) = keys.next().await {
            names.push(key.map_err(|e| ClusterError::List(e.to_string()))?);
        }
        let now = now_ms();
        let mut members = Vec::new();
        for name in names {
            let Some(entry) = self
                .store
                .entry(name)
                .await
                .map_err(|e| ClusterError::List(e.to_string()))?
            else {
                continue;
            };
            if entry.operation != kv::Operation::Put {
                continue;
            }
            let Ok(status) = serde_json::from_slice::<NodeStatus>(&entry.value) else {
                continue;
            };
            let age_s = now.saturating_sub(status.updated_ms) as f64 / 1000.0;
            if age_s <= self.ttl.as_secs_f64() {
                members.push(Member { status, age_s });
            }
        }
        members.sort_by(|a, b| a.status.node.cmp(&b.status.node));
        Ok(members)
    }
}

/// The cluster as the API sees it: this node's name, and the membership once the bucket is open (NATS
/// may come up after the daemon).
pub struct ClusterView {
    pub node: String,
    membership: std::sync::OnceLock<Membership>,
    /// Per learner of the global model, the latest complete part received from each node
    /// ([`global`]), for `GET /v1/cluster`; bounded by the nodes a cut lists.
    partials: parking_lot::Mutex<BTreeMap<String, BTreeMap<String, PartSeen>>>,
}

/// The latest complete part of the global model received from one node.
#[derive(Debug, Clone, Copy)]
pub struct PartSeen {
    pub cut: u64,
    /// Samples in that node's window at the cut.
    pub samples: usize,
    pub received: std::time::Instant,
}

/// A node's latest part of one learner's global model, as `GET /v1/cluster` lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PartialStatus {
    pub node: String,
    pub cut: u64,
    pub samples: usize,
    /// Seconds since this node received it.
    pub age_s: f64,
}

impl ClusterView {
    pub fn new(node: &str) -> ClusterView {
        ClusterView {
            node: node.to_string(),
            membership: std::sync::OnceLock::new(),
            partials: parking_lot::Mutex::new(BTreeMap::new()),
        }
    }

    /// Records a complete part of `learner`'s global model from `node`.
    pub fn part_received(&self, learner: &str, node: &str, cut: u64, samples: usize) {
        let seen = PartSeen {
            cut,
            samples,
            received: std::time::Instant::now(),
        };
        self.partials
            .lock()
            .entry(learner.to_string())
            .or_default()
            .insert(node.to_string(), seen);
    }

    /// Forgets the parts of `learner` from nodes not in `nodes` (they left the cuts).
    pub fn keep_parts_of(&self, learner: &str, nodes: &[String]) {
        if let Some(parts) = self.partials.lock().get_mut(learner) {
            parts.retain(|node, _| nodes.contains(node));
        }
    }

    /// Per learner of the global model, each node's latest part with its age.
    pub fn partials(&self) -> BTreeMap<String, Vec<PartialStatus>> {
        self.partials
            .lock()
            .iter()
            .map(|(learner, parts)| {
                let list = parts
                    .iter()
                    .map(|(node, seen)| PartialStatus {
                        node: node.clone(),
                        cut: seen.cut,
                        samples: seen.samples,
                        age_s: seen.received.elapsed().as_secs_f64(),
                    })
                    .collect();
                (learner.clone(), list)
            })
            .collect()
    }

    pub fn joined(&self) -> Option<&Membership> {
        self.membership.get()
    }

    pub fn set(&self, membership: Membership) {
        let _ = self.membership.set(membership);
    }
}

/// The announcing task's inputs.
pub struct Announcer {
    pub client: async_nats::Client,
    pub stream: String,
    pub node: String,
    pub ttl: Duration,
    /// Replicas of the bucket when this node creates it.
    pub replicas: usize,
    pub view: Arc<ClusterView>,
    pub cells: Vec<Arc<ModelCell>>,
    /// `thresher_cluster_nodes`: live members counted at each announcement.
    pub nodes: prometheus::IntGauge,
}

impl Announcer {
    /// Opens the bucket (retrying until it can, or `stop`), then announces this node every `ttl / 4`
    /// until `stop`, and leaves.
    pub async fn run(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let every = (self.ttl / 4).max(Duration::from_millis(100));
        let membership = loop {
            if *stop.borrow() {
                return;
            }
            let opened = Membership::open(
                self.client.clone(),
                &self.stream,
                &self.node,
                self.ttl,
                self.replicas,
            )
            .await;
            match opened {
                Ok(m) => break m,
                Err(e) => {
                    tracing::warn!(error = %e, "cluster membership not ready; retrying");
                    let _ = tokio::time::timeout(every, stop.changed()).await;
                }
            }
        };
        self.view.set(membership.clone());
        loop {
            let status = NodeStatus::of(&self.node, &self.cells);
            if let Err(e) = membership.announce(&status).await {
                tracing::debug!(error = %e, "announcing failed; retrying");
            }
            if let Ok(members) = membership.members().await {
                self.nodes.set(members.len() as i64);
            }
            if tokio::time::timeout(every, stop.changed()).await.is_ok() || *stop.borrow() {
                break;
            }
        }
        if let Err(e) = membership.leave().await {
            tracing::debug!(error = %e, "leaving the cluster failed; the TTL will");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_round_trips_and_names_its_learners() {
        let cell = Arc::new(ModelCell::new("primary", None));
        let status = NodeStatus::of("n1", &[cell]);
        assert_eq!(status.learners[0].name, "primary");
        assert_eq!(status.learners[0].version, 0);
        let back: NodeStatus =
            serde_json::from_slice(&serde_json::to_vec(&status).unwrap()).unwrap();
        assert_eq!(back, status);
        assert_eq!(bucket_name("thresher"), "thresher_members");
    }
}
