//! Checkpoint file round trips (exact, also for extreme states) and the detection of damaged files.

use std::path::Path;

use super::*;
use crate::learner::auto::selector::AutoState;
use crate::learner::{LearnerState, LearnerStats, PrimalState};
use crate::sample::Sample;
use crate::solver::Certificate;

fn sample_checkpoint() -> Checkpoint {
    let s = Sample::new(vec![1, 5], vec![0.5, -2.0], 1.0, Some(2.0)).unwrap();
    let t = Sample::new(vec![], vec![], -1.0, None).unwrap();
    Checkpoint {
        feature_names: vec!["a".into()],
        feature_kind: crate::ingest::batch::FeatureKind::Names,
        feature_names_file: None,
        feature_hashing: None,
        pending_acks: vec!["$JS.ACK.s.c.1.7.7.1700000000000000000.0".into()],
        wal_through: 42,
        learners: vec![LearnerCheckpoint {
            identity: LearnerIdentity {
                name: "p".into(),
                loss: "hinge".into(),
                k: 3,
                lambda: 0.1,
            },
            snapshot: None,
            state: LearnerState {
                samples: vec![(s, -0.25), (t, 0.5)],
                stats: LearnerStats {
                    samples_seen: 9,
                    steps: 4,
                    mutations: 13,
                    progressive_loss_sum: 1.5,
                    progressive_count: 9,
                    numeric_faults: 0,
                },
                last_certificate: Some(Certificate::new(1.0, 0.5, 2)),
                scale: 0.5,
                intercept: -0.25,
                steps_since_insert: 7,
                primal: Some(PrimalState {
                    coordinates: vec![(1, 0.1 + 0.2, -1e-300), (5, f64::MIN_POSITIVE, 3.0)],
                    solver_steps: 11,
                    row_sq_max: 1.0 / 3.0,
                    active: vec![1, 5, 8],
                    intercept: -0.1 - 0.2,
                }),
                auto: Some(AutoState {
                    grid: vec![0.1, 1e-3, 1e-5],
                    live: 2,
                    switches: 3,
                    since_switch: 40,
                    loss: vec![0.1 + 0.2, 0.25, 1.0 / 3.0],
                    weight: vec![0.5, 0.5, 0.5],
                    holdout: vec![0.7, 0.1 + 0.2, 1e300],
                }),
            },
        }],
    }
}

#[test]
fn round_trips_and_detects_damage() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = sample_checkpoint();
    write(dir.path(), &ckpt).unwrap();
    assert_eq!(read(dir.path()).unwrap(), Some(ckpt.clone()));
    let path = path_in(dir.path());
    let bytes = std::fs::read(&path).unwrap();
    let p = Path::new("x");
    let truncated = decode(&bytes[..bytes.len() - 3], p)
        .unwrap_err()
        .to_string();
    assert!(truncated.contains("truncated"), "{truncated}");
    let mut flipped = bytes.clone();
    flipped[30] ^= 1;
    assert!(decode(&flipped, p)
        .unwrap_err()
        .to_string()
        .contains("checksum"));
    let mut v3 = bytes.clone();
    v3[8] = 3;
    assert!(matches!(
        decode(&v3, p),
        Err(CheckpointError::Incompatible { .. })
    ));
    assert!(decode(b"hello", p)
        .unwrap_err()
        .to_string()
        .contains("magic"));
    assert_eq!(read(&dir.path().join("none")).unwrap(), None);
}

/// A file of format version 1 (the same body, checked with FNV-1a 64) still reads; each version is
/// checked with its own checksum.
#[test]
fn version_one_files_still_read() {
    let ckpt = sample_checkpoint();
    let bytes = encode(&ckpt);
    assert_eq!(u32::from_le_bytes(bytes[8..12].try_into().unwrap()), 2);
    let p = Path::new("x");
    let body = &bytes[20..bytes.len() - 8];
    let fnv = {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in body {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h
    };
    let mut v1 = bytes.clone();
    v1[8..12].copy_from_slice(&1u32.to_le_bytes());
    let at = v1.len() - 8;
    // Version 1 with version 2's checksum is damage.
    assert!(decode(&v1, p).unwrap_err().to_string().contains("checksum"));
    v1[at..].copy_from_slice(&fnv.to_le_bytes());
    assert_eq!(decode(&v1, p).unwrap(), ckpt);
}

/// Every checkpoint round-trips bit for bit: random learner states (seeded) drawn with extremes —
/// magnitudes at the ingest limit, 1e-300, subnormals, -0.0, the largest counters, names with
/// quotes and non-ASCII text — in the binary window, the JSON header and the snapshot.
#[test]
fn random_extreme_states_round_trip_exactly() {
    use crate::learner::publish::Snapshot;
    use crate::loss::LossKind;
    use crate::model::Model;
    use rand::{Rng, SeedableRng};

    const POOL: [f64; 12] = [
        1e6,
        -1e6,
        1e-300,
        -1e-300,
        -0.0,
        0.0,
        5e-324,
        f64::MIN_POSITIVE,
        0.1 + 0.2,
        1.0 / 3.0,
        -999_999.999_999_9,
        f64::EPSILON,
    ];
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2026);
    let mut number = |rng: &mut rand_chacha::ChaCha8Rng| -> f64 {
        if rng.gen_bool(0.6) {
            POOL[rng.gen_range(0..POOL.len())]
        } else {
            let e: i32 = rng.gen_range(-300..=5);
            rng.gen_range(-1.0..1.0) * 10f64.powi(e)
        }
    };
    let counter = |rng: &mut rand_chacha::ChaCha8Rng| -> u64 {
        [0, 1, u64::MAX, rng.gen()][rng.gen_range(0..4)]
    };
    let dir = tempfile::tempdir().unwrap();
    for round in 0..200 {
        let mut learners = Vec::new();
        for l in 0..rng.gen_range(1..4) {
            let mut samples = Vec::new();
            for _ in 0..rng.gen_range(0..12) {
                let mut indices: Vec<u32> = (0..rng.gen_range(0..6))
                    .map(|_| [0, u32::MAX - 1, rng.gen()][rng.gen_range(0..3)])
                    .collect();
                indices.sort_unstable();
                indices.dedup();
                let values = indices.iter().map(|_| number(&mut rng)).collect();
                let weight = rng
                    .gen_bool(0.3)
                    .then(|| number(&mut rng).abs().max(1e-300));
                let s = Sample::new(indices, values, number(&mut rng), weight).unwrap();
                samples.push((s, number(&mut rng)));
            }
            let certificate =
                |rng: &mut rand_chacha::ChaCha8Rng,
                 n: &mut dyn FnMut(&mut rand_chacha::ChaCha8Rng) -> f64| {
                    Certificate {
                        primal: n(rng),
                        dual: n(rng),
                        gap: n(rng),
                        samples: rng.gen_range(0..usize::MAX),
                    }
                };
            let last_certificate = rng
                .gen_bool(0.7)
                .then(|| certificate(&mut rng, &mut number));
            let primal = rng.gen_bool(0.5).then(|| PrimalState {
                coordinates: (0..rng.gen_range(0..5))
                    .map(|_| (rng.gen(), number(&mut rng), number(&mut rng)))
                    .collect(),
                solver_steps: counter(&mut rng),
                row_sq_max: number(&mut rng),
                active: (0..rng.gen_range(0..4)).map(|_| rng.gen()).collect(),
                intercept: number(&mut rng),
            });
            let snapshot = rng.gen_bool(0.5).then(|| {
                let support: Vec<u32> = (0..rng.gen_range(0..4)).map(|_| rng.gen()).collect();
                Snapshot {
                    learner: format!("l{l}"),
                    version: counter(&mut rng),
                    samples_seen: counter(&mut rng),
                    window_samples: rng.gen_range(0..1 << 20),
                    updated_at: number(&mut rng),
                    progressive_loss: number(&mut rng),
                    steps: counter(&mut rng),
                    mutations: counter(&mut rng),
                    support_changes_total: counter(&mut rng),
                    model: Model {
                        format: crate::model::FORMAT.into(),
                        loss: [
                            LossKind::Squared,
                            LossKind::Huber,
                            LossKind::Hinge,
                            LossKind::Logistic,
                        ][rng.gen_range(0..4)],
                        gamma: rng.gen_bool(0.5).then(|| number(&mut rng)),
                        solver: "sdiht".into(),
                        k: rng.gen_range(1..100),
                        lambda: number(&mut rng),
                        intercept: number(&mut rng),
                        weights: support.iter().map(|_| number(&mut rng)).collect(),
                        support,
                        certificate: certificate(&mut rng, &mut number),
                        lambda0: rng.gen_bool(0.3).then(|| number(&mut rng)),
                        lambda1: None,
                        lambda2: rng.gen_bool(0.3).then(|| number(&mut rng)),
                        lambda_auto: None,
                        cluster: None,
                        convergence: None,
                        polish: None,
                        standardize: None,
                    },
                }
            });
            learners.push(LearnerCheckpoint {
                identity: LearnerIdentity {
                    name: format!("l{l}"),
                    loss: "logistic".into(),
                    k: rng.gen_range(1..1000),
                    lambda: number(&mut rng),
                },
                snapshot,
                state: LearnerState {
                    samples,
                    stats: LearnerStats {
                        samples_seen: counter(&mut rng),
                        steps: counter(&mut rng),
                        mutations: counter(&mut rng),
                        progressive_loss_sum: number(&mut rng),
                        progressive_count: counter(&mut rng),
                        numeric_faults: counter(&mut rng),
                    },
                    last_certificate,
                    scale: number(&mut rng),
                    steps_since_insert: counter(&mut rng),
                    primal,
                    intercept: number(&mut rng),
                    auto: rng.gen_bool(0.3).then(|| {
                        let members = rng.gen_range(2..6);
                        AutoState {
                            grid: (0..members).map(|_| number(&mut rng)).collect(),
                            live: rng.gen_range(0..members),
                            switches: counter(&mut rng),
                            since_switch: counter(&mut rng),
                            loss: (0..members).map(|_| number(&mut rng)).collect(),
                            weight: (0..members).map(|_| number(&mut rng)).collect(),
                            holdout: (0..members * rng.gen_range(0..2))
                                .map(|_| number(&mut rng))
                                .collect(),
                        }
                    }),
                },
            });
        }
        let ckpt = Checkpoint {
            learners,
            pending_acks: Vec::new(),
            wal_through: rng.gen_range(0..3),
            feature_names: ["a", "\"quoted\"", "naïve", "tab\there", ""][..rng.gen_range(0..5)]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            feature_kind: crate::ingest::batch::FeatureKind::Indices,
            feature_names_file: None,
            feature_hashing: rng.gen_bool(0.5).then(|| crate::ingest::hashed::Hashing {
                bits: rng.gen_range(1..=30),
                seed: rng.gen(),
            }),
        };
        let back = decode(&encode(&ckpt), Path::new("x")).unwrap();
        // The learner states exactly: Debug prints each f64 by its shortest round-trip text,
        // -0.0 included, so equal text is equal bits. The snapshots (the served model) as one
        // pass through JSON gives them, which may be an ulp off.
        let through_json = |s: &Option<Snapshot>| -> Option<Snapshot> {
            s.as_ref()
                .map(|s| serde_json::from_slice(&serde_json::to_vec(s).unwrap()).unwrap())
        };
        let mut expected = ckpt.clone();
        for l in &mut expected.learners {
            l.snapshot = through_json(&l.snapshot);
        }
        assert_eq!(
            format!("{back:?}"),
            format!("{expected:?}"),
            "round {round}"
        );
        if round % 50 == 0 {
            write(dir.path(), &ckpt).unwrap();
            let read_back = read(dir.path()).unwrap().unwrap();
            assert_eq!(format!("{read_back:?}"), format!("{expected:?}"));
        }
    }
}
