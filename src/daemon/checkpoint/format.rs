//! The checkpoint file's format: what a checkpoint holds ([`Checkpoint`]: every learner's full state
//! and the feature dictionary's kind), and its bytes ([`encode`], [`decode`]).
//!
//! File layout (`<data-dir>/thresher.ckpt`), little endian:
//! `b"THRCKPT\n"` | format version `u32` | body length `u64` | body | checksum of the body `u64`.
//! The body is a small JSON header (learner configs, snapshots, counters, dictionary) followed by the
//! binary window of each learner. Reading checks magic, version, length and checksum: a corrupt or
//! incompatible file is a [`CheckpointError`] that stops the start (use `--fresh` to start empty).
//!
//! **Versions.** Version 2 (written since) checks the body with XXH3-64; version 1, whose body is the
//! same, with FNV-1a 64, and is still read. Why the change: a NATS node checkpoints its window every
//! `nats.ack_interval_ms` (a second by default) to acknowledge what it learned, and FNV-1a, a multiply
//! per byte in one dependency chain, took 54 ms of the 114 ms that encoding a window of 100 000 samples
//! of 40 features (51 MB) took; XXH3 takes 8 ms (`xxhash-rust`, already a dependency for hashed
//! names). The window is written in bulk into a buffer sized once (the same bytes).
//!
//! A primal learner's model ([`PrimalState`]: mirror, smidas, subset) rides in the JSON header as the
//! optional `primal` field, its floats as IEEE-754 bit patterns so the round trip is exact; files
//! without it (written by SDIHT-only builds) read as `None`, so format version 1 still describes both.
//! A `lambda = "auto"` learner's selection state ([`AutoState`]) rides the same way as the optional
//! `auto` field, next to the served member's state (`learner::auto` explains what a restore rebuilds).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::CheckpointError;
use crate::ingest::batch::FeatureKind;
use crate::ingest::hashed::Hashing;
use crate::learner::auto::selector::AutoState;
use crate::learner::params::LearnerConfig;
use crate::learner::publish::Snapshot;
use crate::learner::{LearnerState, LearnerStats, PrimalState};
use crate::sample::{ByteReader, Sample};
use crate::solver::Certificate;

pub const MAGIC: &[u8; 8] = b"THRCKPT\n";
/// The version [`encode`] writes; [`decode`] also reads [`FNV_VERSION`].
pub const FORMAT_VERSION: u32 = 2;
/// The first format version: the same body, checked with FNV-1a 64.
pub const FNV_VERSION: u32 = 1;
pub const FILE_NAME: &str = "thresher.ckpt";

/// What identifies a learner's problem: restoring into a different one would be wrong.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LearnerIdentity {
    pub name: String,
    pub loss: String,
    pub k: usize,
    pub lambda: f64,
}

/// One learner's checkpointed state.
#[derive(Debug, Clone, PartialEq)]
pub struct LearnerCheckpoint {
    pub identity: LearnerIdentity,
    pub snapshot: Option<Snapshot>,
    pub state: LearnerState,
}

/// The whole checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    pub learners: Vec<LearnerCheckpoint>,
    pub feature_names: Vec<String>,
    /// The kind of features the daemon takes ([`FeatureKind`]; `Names` whenever it holds a name).
    pub feature_kind: FeatureKind,
    /// `(count, digest)` of the names in the dictionary's own file ([`crate::daemon::names_file`]), when they
    /// are there rather than in the checkpoint: written by the daemon; [`super::read`] loads and checks them
    /// into `feature_names`.
    pub feature_names_file: Option<(u64, u64)>,
    /// The hash of names when they are hashed (`ingest.feature_names = "hashed"`; then there are no
    /// names): a daemon restores it only with the same bits and seed.
    pub feature_hashing: Option<Hashing>,
    /// The acknowledgement subjects of the NATS deliveries this checkpoint holds that were not yet
    /// acknowledged when it was written: a node restarted from it acknowledges them first, so a
    /// batch it holds is not also redelivered to another node (`ingest::source::nats`).
    pub pending_acks: Vec<String>,
    /// The last write-ahead log batch every learner's state holds (`ingest::wal`): a restart replays
    /// only the batches after it. 0: none.
    pub wal_through: u64,
}

#[derive(Serialize, Deserialize)]
struct Header {
    feature_names: Vec<String>,
    /// `"indices"`, `"names"` or `"open"` ([`FeatureKind`]); absent in files written before it:
    /// `"names"` if there are names, else open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    feature_kind: Option<String>,
    /// The names are in `thresher.names`: their count and digest (absent: in `feature_names`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    feature_names_file: Option<(u64, u64)>,
    /// Hashed names: the bits and the seed (absent: the dictionary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    feature_hashing: Option<Hashing>,
    learners: Vec<LearnerHeader>,
    /// Absent in files written before the NATS source: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pending_acks: Vec<String>,
    /// Absent in files written before the write-ahead log: 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    wal_through: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Serialize, Deserialize)]
struct LearnerHeader {
    identity: LearnerIdentity,
    snapshot: Option<Snapshot>,
    samples_seen: u64,
    steps: u64,
    mutations: u64,
    progressive_loss_sum: f64,
    progressive_count: u64,
    #[serde(default)]
    numeric_faults: u64,
    last_certificate: Option<Certificate>,
    scale: f64,
    /// The intercept's bits (absent, so 0, in checkpoints written before it existed).
    #[serde(default)]
    intercept_bits: u64,
    steps_since_insert: u64,
    window_len: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    primal: Option<PrimalBits>,
    /// The state's floats above as bit patterns, which override them when present (files written
    /// before it have only the JSON numbers, which `serde_json` may parse an ulp off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exact: Option<ExactBits>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    auto: Option<AutoBits>,
}

/// The bit patterns of a learner state's header floats, so a resumed learner is the saved one bit
/// for bit.
#[derive(Serialize, Deserialize)]
struct ExactBits {
    /// `identity.lambda`, compared with the config's at restore.
    lambda: u64,
    progressive_loss_sum: u64,
    scale: u64,
    /// `(primal, dual, gap)` of `last_certificate`.
    certificate: Option<(u64, u64, u64)>,
}

/// [`AutoState`] (`lambda = "auto"`) with every float as its bit pattern.
#[derive(Serialize, Deserialize)]
struct AutoBits {
    grid: Vec<u64>,
    live: usize,
    switches: u64,
    since_switch: u64,
    loss: Vec<u64>,
    weight: Vec<u64>,
    /// Absent in checkpoints written before the `holdout` criterion.
    #[serde(default)]
    holdout: Vec<u64>,
}

impl AutoBits {
    fn from_state(a: &AutoState) -> AutoBits {
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect();
        AutoBits {
            grid: bits(&a.grid),
            live: a.live,
            switches: a.switches,
            since_switch: a.since_switch,
            loss: bits(&a.loss),
            weight: bits(&a.weight),
            holdout: bits(&a.holdout),
        }
    }

    fn into_state(self) -> AutoState {
        let floats = |v: Vec<u64>| v.into_iter().map(f64::from_bits).collect();
        AutoState {
            grid: floats(self.grid),
            live: self.live,
            switches: self.switches,
            since_switch: self.since_switch,
            loss: floats(self.loss),
            weight: floats(self.weight),
            holdout: floats(self.holdout),
        }
    }
}

/// [`PrimalState`] with every float as its bit pattern (JSON number parsing may be off by an ulp).
#[derive(Serialize, Deserialize)]
struct PrimalBits {
    /// `(j, w_j bits, theta_j bits)`.
    coordinates: Vec<(u32, u64, u64)>,
    solver_steps: u64,
    row_sq_max: u64,
    #[serde(default)]
    active: Vec<u32>,
    /// The intercept's bits (absent in checkpoints written before streaming intercepts: 0).
    #[serde(default)]
    intercept: u64,
}

impl PrimalBits {
    fn from_state(p: &PrimalState) -> PrimalBits {
        PrimalBits {
            coordinates: p
                .coordinates
                .iter()
                .map(|&(j, w, t)| (j, w.to_bits(), t.to_bits()))
                .collect(),
            solver_steps: p.solver_steps,
            row_sq_max: p.row_sq_max.to_bits(),
            active: p.active.clone(),
            intercept: p.intercept.to_bits(),
        }
    }

    fn into_state(self) -> PrimalState {
        PrimalState {
            coordinates: self
                .coordinates
                .into_iter()
                .map(|(j, w, t)| (j, f64::from_bits(w), f64::from_bits(t)))
                .collect(),
            solver_steps: self.solver_steps,
            row_sq_max: f64::from_bits(self.row_sq_max),
            active: self.active,
            intercept: f64::from_bits(self.intercept),
        }
    }
}

pub fn path_in(dir: &Path) -> PathBuf {
    dir.join(FILE_NAME)
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The checksum of `body` in format `version` ([`FNV_VERSION`] or [`FORMAT_VERSION`]).
pub fn checksum(version: u32, body: &[u8]) -> u64 {
    if version == FNV_VERSION {
        fnv1a(body)
    } else {
        xxhash_rust::xxh3::xxh3_64(body)
    }
}

/// Appends `xs` little endian: one resize, then a copy the compiler vectorises (pushing each value
/// in turn checks the capacity at every one).
fn put_u32s(out: &mut Vec<u8>, xs: &[u32]) {
    let start = out.len();
    out.resize(start + 4 * xs.len(), 0);
    for (to, x) in out[start..].chunks_exact_mut(4).zip(xs) {
        to.copy_from_slice(&x.to_le_bytes());
    }
}

/// [`put_u32s`] for `f64`s.
fn put_f64s(out: &mut Vec<u8>, xs: &[f64]) {
    let start = out.len();
    out.resize(start + 8 * xs.len(), 0);
    for (to, x) in out[start..].chunks_exact_mut(8).zip(xs) {
        to.copy_from_slice(&x.to_le_bytes());
    }
}

/// Serialises a checkpoint to bytes (format [`FORMAT_VERSION`]).
pub fn encode(ckpt: &Checkpoint) -> Vec<u8> {
    let header = Header {
        feature_names: ckpt.feature_names.clone(),
        feature_kind: Some(ckpt.feature_kind.name().to_string()),
        feature_names_file: ckpt.feature_names_file,
        feature_hashing: ckpt.feature_hashing,
        pending_acks: ckpt.pending_acks.clone(),
        wal_through: ckpt.wal_through,
        learners: ckpt
            .learners
            .iter()
            .map(|l| LearnerHeader {
                identity: l.identity.clone(),
                snapshot: l.snapshot.clone(),
                samples_seen: l.state.stats.samples_seen,
                steps: l.state.stats.steps,
                mutations: l.state.stats.mutations,
                progressive_loss_sum: l.state.stats.progressive_loss_sum,
                progressive_count: l.state.stats.progressive_count,
                numeric_faults: l.state.stats.numeric_faults,
                last_certificate: l.state.last_certificate,
                scale: l.state.scale,
                intercept_bits: l.state.intercept.to_bits(),
                steps_since_insert: l.state.steps_since_insert,
                window_len: l.state.samples.len() as u64,
                primal: l.state.primal.as_ref().map(PrimalBits::from_state),
                exact: Some(ExactBits {
                    lambda: l.identity.lambda.to_bits(),
                    progressive_loss_sum: l.state.stats.progressive_loss_sum.to_bits(),
                    scale: l.state.scale.to_bits(),
                    certificate: l
                        .state
                        .last_certificate
                        .map(|c| (c.primal.to_bits(), c.dual.to_bits(), c.gap.to_bits())),
                }),
                auto: l.state.auto.as_ref().map(AutoBits::from_state),
            })
            .collect(),
    };
    let header = serde_json::to_vec(&header).expect("checkpoint header serialises");
    // Per sample: label, weight, dual (8 bytes each), the count (4), 12 bytes per feature.
    let window: usize = ckpt
        .learners
        .iter()
        .flat_map(|l| &l.state.samples)
        .map(|(s, _)| 28 + 12 * s.indices.len())
        .sum();
    let body_len = 8 + header.len() + window;
    let mut out = Vec::with_capacity(20 + body_len + 8);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(body_len as u64).to_le_bytes());
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(&header);
    for l in &ckpt.learners {
        for (s, alpha) in &l.state.samples {
            out.extend_from_slice(&s.label.to_le_bytes());
            out.extend_from_slice(&s.weight.unwrap_or(f64::NAN).to_le_bytes());
            out.extend_from_slice(&alpha.to_le_bytes());
            out.extend_from_slice(&(s.indices.len() as u32).to_le_bytes());
            put_u32s(&mut out, &s.indices);
            put_f64s(&mut out, &s.values);
        }
    }
    debug_assert_eq!(out.len(), 20 + body_len);
    let sum = checksum(FORMAT_VERSION, &out[20..]);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// Parses checkpoint bytes; `path` only names the file in errors.
pub fn decode(bytes: &[u8], path: &Path) -> Result<Checkpoint, CheckpointError> {
    let corrupt = |reason: String| CheckpointError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    if bytes.len() < 20 || &bytes[..8] != MAGIC {
        return Err(corrupt(format!(
            "not a thresher checkpoint ({} bytes, bad magic)",
            bytes.len()
        )));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if version != FORMAT_VERSION && version != FNV_VERSION {
        return Err(CheckpointError::Incompatible {
            path: path.to_path_buf(),
            reason: format!(
                "format version {version}, this build reads {FNV_VERSION} and {FORMAT_VERSION}"
            ),
        });
    }
    let len = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes")) as usize;
    if bytes.len() != 20 + len + 8 {
        return Err(corrupt(format!(
            "truncated: {} bytes, expected {}",
            bytes.len(),
            20 + len + 8
        )));
    }
    let body = &bytes[20..20 + len];
    let stored = u64::from_le_bytes(bytes[20 + len..].try_into().expect("8 bytes"));
    if checksum(version, body) != stored {
        return Err(corrupt("checksum mismatch".into()));
    }
    let mut c = ByteReader::new(body, "unexpected end of data");
    let parse = |c: &mut ByteReader| -> Result<Checkpoint, String> {
        let header_len = c.u64()? as usize;
        let header: Header =
            serde_json::from_slice(c.take(header_len)?).map_err(|e| e.to_string())?;
        let mut learners = Vec::new();
        for mut h in header.learners {
            if let Some(exact) = h.exact.take() {
                h.identity.lambda = f64::from_bits(exact.lambda);
                h.progressive_loss_sum = f64::from_bits(exact.progressive_loss_sum);
                h.scale = f64::from_bits(exact.scale);
                if let (Some(c), Some((p, d, g))) = (h.last_certificate.as_mut(), exact.certificate)
                {
                    (c.primal, c.dual, c.gap) =
                        (f64::from_bits(p), f64::from_bits(d), f64::from_bits(g));
                }
            }
            let mut samples = Vec::with_capacity(h.window_len.min(1 << 24) as usize);
            for _ in 0..h.window_len {
                let label = c.f64()?;
                let weight = c.f64()?;
                let alpha = c.f64()?;
                let (indices, values) = c.sparse_row()?;
                let weight = (!weight.is_nan()).then_some(weight);
                let s = Sample::new(indices, values, label, weight).map_err(|e| e.to_string())?;
                samples.push((s, alpha));
            }
            learners.push(LearnerCheckpoint {
                identity: h.identity,
                snapshot: h.snapshot,
                state: LearnerState {
                    samples,
                    stats: LearnerStats {
                        samples_seen: h.samples_seen,
                        steps: h.steps,
                        mutations: h.mutations,
                        progressive_loss_sum: h.progressive_loss_sum,
                        progressive_count: h.progressive_count,
                        numeric_faults: h.numeric_faults,
                    },
                    last_certificate: h.last_certificate,
                    scale: h.scale,
                    intercept: f64::from_bits(h.intercept_bits),
                    steps_since_insert: h.steps_since_insert,
                    primal: h.primal.map(PrimalBits::into_state),
                    auto: h.auto.map(AutoBits::into_state),
                },
            });
        }
        if !c.at_end() {
            return Err("trailing bytes".into());
        }
        Ok(Checkpoint {
            learners,
            feature_kind: match header.feature_kind.as_deref() {
                None => FeatureKind::Open,
                Some(k) => FeatureKind::from_name(k)
                    .ok_or_else(|| format!("unknown feature kind {k:?}"))?,
            },
            feature_names: header.feature_names,
            feature_names_file: header.feature_names_file,
            feature_hashing: header.feature_hashing,
            pending_acks: header.pending_acks,
            wal_through: header.wal_through,
        })
    };
    parse(&mut c).map_err(corrupt)
}

impl LearnerIdentity {
    /// The identity `config` gives its learner (what a checkpoint must match to restore into it).
    pub fn of(config: &LearnerConfig) -> LearnerIdentity {
        LearnerIdentity {
            name: config.name.clone(),
            loss: config.loss.kind().name().into(),
            k: config.k,
            lambda: config.lambda,
        }
    }
}
