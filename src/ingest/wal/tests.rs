//! The log format and the log: round trips, a torn tail cut off at open, a bad checksum detected, a
//! corrupt older segment refused, truncation of covered segments only, replay after the checkpoint's
//! number, the size bound, group commit.

use super::record::{self, End, Reader, Record};
use super::*;
use crate::ingest::batch::FeatureKind;
use crate::sample::Sample;

fn block(n: usize, weighted: bool) -> SampleBlock {
    let samples: Vec<Sample> = (0..n)
        .map(|i| {
            let w = weighted.then_some(0.5 + i as f64);
            Sample::new(vec![i as u32, 7 + i as u32], vec![1.5, -2.0], 1.0, w).unwrap()
        })
        .collect();
    SampleBlock::from_samples(&samples)
}

fn config(mode: WalMode, max: u64) -> DurabilityConfig {
    DurabilityConfig {
        wal: mode,
        wal_max_bytes: max,
        wal_fsync_interval: Duration::from_millis(10),
    }
}

fn open(dir: &Path, through: u64) -> Arc<Wal> {
    Wal::open(
        dir,
        &config(WalMode::Always, 1 << 30),
        through,
        false,
        Metrics::new(),
    )
    .unwrap()
}

fn replayed(wal: &Wal, through: u64, dict: &FeatureDictionary) -> Vec<(u64, SampleBlock)> {
    let mut out = Vec::new();
    wal.replay(through, dict, |b, s| {
        out.push((s, b));
        true
    })
    .unwrap();
    out
}

#[test]
fn records_round_trip_bit_for_bit() {
    for weighted in [false, true] {
        let b = block(3, weighted);
        let mut framed = record::encode_samples(&b);
        record::seal(&mut framed, 42);
        let decoded = record::decode(&framed[record::FRAME..]).unwrap();
        assert_eq!(decoded, Record::Samples { seq: 42, block: b });
    }
    let names = vec!["a".to_string(), "é".to_string()];
    let framed = record::encode_names(5, &names);
    assert_eq!(
        record::decode(&framed[record::FRAME..]).unwrap(),
        Record::Names { start: 5, names }
    );
}

/// Every batch appended is replayed in order after a reopen; a reopen with the checkpoint's number
/// skips what it holds, and numbering continues past both.
#[test]
fn appends_replay_in_order_and_skip_what_the_checkpoint_holds() {
    let dir = tempfile::tempdir().unwrap();
    let dict = FeatureDictionary::new(100);
    let wal = open(dir.path(), 0);
    for n in 1..=3 {
        let seq = wal
            .append(record::encode_samples(&block(n, false)), &dict)
            .unwrap();
        assert_eq!(seq, n as u64);
    }
    wal.sync_through(3).unwrap();
    drop(wal);
    let wal = open(dir.path(), 1);
    let got = replayed(&wal, 1, &dict);
    assert_eq!(
        got.iter().map(|(s, b)| (*s, b.len())).collect::<Vec<_>>(),
        [(2, 2), (3, 3)]
    );
    assert_eq!(
        wal.append(record::encode_samples(&block(1, false)), &dict)
            .unwrap(),
        4
    );
    // A checkpoint past everything logged: numbering continues past it even with an empty log.
    let dir2 = tempfile::tempdir().unwrap();
    let wal = open(dir2.path(), 10);
    assert_eq!(
        wal.append(record::encode_samples(&block(1, false)), &dict)
            .unwrap(),
        11
    );
}

/// A record cut short (a kill mid-write) and a flipped byte are both detected; the torn tail of the
/// last segment is cut off at open, every record before it replays, and appends follow.
#[test]
fn a_torn_or_corrupt_tail_is_cut_off_not_a_refusal() {
    for damage in ["cut", "flip"] {
        let dir = tempfile::tempdir().unwrap();
        let dict = FeatureDictionary::new(100);
        let wal = open(dir.path(), 0);
        for n in 1..=2 {
            wal.append(record::encode_samples(&block(n, false)), &dict)
                .unwrap();
        }
        let path = wal.log.lock().segments.back().unwrap().path.clone();
        drop(wal);
        let mut bytes = std::fs::read(&path).unwrap();
        match damage {
            "cut" => bytes.truncate(bytes.len() - 5),
            _ => *bytes.last_mut().unwrap() ^= 0x40,
        }
        std::fs::write(&path, &bytes).unwrap();
        let mut reader = Reader::open(&path).unwrap();
        assert!(matches!(
            reader.next_record().unwrap(),
            Some(Record::Samples { seq: 1, .. })
        ));
        assert_eq!(reader.next_record().unwrap(), None);
        let reason = match reader.end() {
            Some(End::Torn { reason, .. }) => reason.clone(),
            other => panic!("{damage}: {other:?}"),
        };
        let expected = if damage == "cut" {
            "longer than the rest"
        } else {
            "checksum"
        };
        assert!(reason.contains(expected), "{damage}: {reason}");
        let wal = open(dir.path(), 0);
        assert!(
            std::fs::metadata(&path).unwrap().len() < bytes.len() as u64,
            "cut off"
        );
        let got = replayed(&wal, 0, &dict);
        assert_eq!(got.iter().map(|(s, _)| *s).collect::<Vec<_>>(), [1]);
        assert_eq!(
            wal.append(record::encode_samples(&block(1, false)), &dict)
                .unwrap(),
            2
        );
    }
}

/// A bad record in a segment that is not the last is corruption, not a torn tail: the start stops.
#[test]
fn a_corrupt_older_segment_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let dict = FeatureDictionary::new(100);
    let wal = open(dir.path(), 0);
    wal.append(record::encode_samples(&block(2, false)), &dict)
        .unwrap();
    let first = wal.log.lock().segments.back().unwrap().path.clone();
    drop(wal);
    let wal = open(dir.path(), 0);
    wal.append(record::encode_samples(&block(2, false)), &dict)
        .unwrap();
    drop(wal);
    let mut bytes = std::fs::read(&first).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&first, &bytes).unwrap();
    let e = Wal::open(
        dir.path(),
        &config(WalMode::Batch, 1 << 30),
        0,
        false,
        Metrics::new(),
    );
    assert!(matches!(e, Err(WalError::Corrupt { .. })), "{:?}", e.err());
}

/// Truncation deletes only segments whose every batch the checkpoint holds; the bound on disk
/// refuses an append that would pass it, and truncation makes room again.
#[test]
fn truncation_keeps_uncovered_batches_and_the_bound_holds() {
    let dir = tempfile::tempdir().unwrap();
    let dict = FeatureDictionary::new(100);
    let max = 1 << 20;
    let open_max = |through| {
        Wal::open(
            dir.path(),
            &config(WalMode::Batch, max),
            through,
            false,
            Metrics::new(),
        )
        .unwrap()
    };
    let on_disk = |d: &Path| {
        list_segments(d)
            .unwrap()
            .iter()
            .map(|(_, p)| std::fs::metadata(p).unwrap().len())
            .sum::<u64>()
    };
    let big = block(5_000, false);
    // Two batches in the first segment, then (after a reopen) batches in a second one until full.
    let wal = open_max(0);
    let first: Vec<u64> = (0..2)
        .map(|_| wal.append(record::encode_samples(&big), &dict).unwrap())
        .collect();
    drop(wal);
    let wal = open_max(0);
    let mut second = Vec::new();
    let refused = loop {
        match wal.append(record::encode_samples(&big), &dict) {
            Ok(s) => second.push(s),
            Err(e) => break e,
        }
    };
    assert!(matches!(refused, WalError::Full { .. }), "{refused}");
    assert!(second.len() >= 2, "{second:?}");
    assert!(on_disk(dir.path()) <= max);
    // A checkpoint holding the first segment's batches and one of the second's: only the first
    // segment goes; the second keeps its uncovered batches, and replay skips the covered one.
    wal.truncate_through(second[0]).unwrap();
    assert_eq!(list_segments(dir.path()).unwrap().len(), 1);
    assert!(
        wal.append(record::encode_samples(&big), &dict).is_ok(),
        "room again"
    );
    drop(wal);
    let wal = open_max(second[0]);
    let got = replayed(&wal, second[0], &dict);
    let expected: Vec<u64> = (second[1]..=second.last().unwrap() + 1).collect();
    assert_eq!(got.iter().map(|(s, _)| *s).collect::<Vec<_>>(), expected);
    assert!(first.iter().all(|s| *s < second[0]));
    // A checkpoint holding everything: only empty segment headers are left.
    wal.truncate_through(wal.last_seq()).unwrap();
    assert!(on_disk(dir.path()) <= 16, "{}", on_disk(dir.path()));
}

/// Names the dictionary gave are logged before the batch that uses them and replayed into a
/// dictionary that starts from the checkpoint's, index for index.
#[test]
fn names_replay_index_for_index() {
    let dir = tempfile::tempdir().unwrap();
    let dict = FeatureDictionary::from_names(100, 1 << 20, vec!["a".into()], FeatureKind::Names);
    let wal = open(dir.path(), 0);
    wal.replay(0, &dict, |_, _| true).unwrap();
    dict.restore_names(1, &["b".into(), "c".into()]).unwrap();
    wal.append(record::encode_samples(&block(1, false)), &dict)
        .unwrap();
    drop(wal);
    let restored =
        FeatureDictionary::from_names(100, 1 << 20, vec!["a".into()], FeatureKind::Names);
    let wal = open(dir.path(), 0);
    assert_eq!(replayed(&wal, 0, &restored).len(), 1);
    assert_eq!(restored.names(), ["a", "b", "c"]);
    // A log that disagrees with the dictionary is refused.
    let other = FeatureDictionary::from_names(
        100,
        1 << 20,
        vec!["a".into(), "x".into()],
        FeatureKind::Names,
    );
    assert!(wal.replay(0, &other, |_, _| true).is_err());
}

/// A log written with hashed names starts each segment with the hashing record: it replays into a
/// daemon with the same bits and seed, and is refused, naming both, under other bits, another seed or
/// the dictionary; a log of dictionary names is refused by a daemon that hashes names.
#[test]
fn a_log_replays_only_under_the_hashing_it_was_written_with() {
    use crate::ingest::hashed::{HashedNames, Hashing};
    let hashed = |bits, seed| {
        FeatureDictionary::new(0).with_hashing(Some(HashedNames::new(Hashing { bits, seed }, 8)))
    };
    let framed = record::encode_hashing(20, 7);
    assert_eq!(
        record::decode(&framed[record::FRAME..]).unwrap(),
        Record::Hashing { bits: 20, seed: 7 }
    );
    let dir = tempfile::tempdir().unwrap();
    let wal = open(dir.path(), 0);
    let dict = hashed(20, 7);
    for _ in 0..2 {
        wal.append(record::encode_samples(&block(1, false)), &dict)
            .unwrap();
    }
    drop(wal);
    let wal = open(dir.path(), 0);
    assert_eq!(replayed(&wal, 0, &hashed(20, 7)).len(), 2);
    for (other, says) in [
        (hashed(18, 7), "ingest.hash_bits = 18"),
        (hashed(20, 8), "ingest.hash_seed = 8"),
        (FeatureDictionary::new(10), "the feature dictionary"),
    ] {
        let e = wal.replay(0, &other, |_, _| true).unwrap_err().to_string();
        assert!(
            e.contains(says) && e.contains("ingest.hash_bits = 20"),
            "{e}"
        );
    }
    drop(wal);
    let dir = tempfile::tempdir().unwrap();
    let wal = open(dir.path(), 0);
    let named = FeatureDictionary::from_names(10, 100, vec!["a".into()], FeatureKind::Names);
    wal.append(record::encode_samples(&block(1, false)), &named)
        .unwrap();
    drop(wal);
    let wal = open(dir.path(), 0);
    let e = wal
        .replay(0, &hashed(20, 7), |_, _| true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("indexed by the feature dictionary"), "{e}");
}

/// Group commit: many threads appending and syncing concurrently each return only once their batch
/// is fsynced, and an fsync is never run for nothing new.
#[test]
fn concurrent_syncs_share_fsyncs() {
    let dir = tempfile::tempdir().unwrap();
    let dict = Arc::new(FeatureDictionary::new(100));
    let metrics = Metrics::new();
    let wal = Wal::open(
        dir.path(),
        &config(WalMode::Always, 1 << 30),
        0,
        false,
        metrics.clone(),
    )
    .unwrap();
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (wal, dict) = (wal.clone(), dict.clone());
            std::thread::spawn(move || {
                for _ in 0..25 {
                    let seq = wal
                        .append(record::encode_samples(&block(2, false)), &dict)
                        .unwrap();
                    wal.sync_through(seq).unwrap();
                    assert!(wal.synced.lock().through >= seq);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(metrics.wal_appended_records.get(), 200);
    assert!(
        metrics.wal_fsyncs.get() <= 200,
        "{}",
        metrics.wal_fsyncs.get()
    );
}

/// A full disk is named as such, not as "cannot access".
#[test]
fn a_full_disk_is_named() {
    let e = std::io::Error::from_raw_os_error(libc::ENOSPC);
    assert_eq!(describe_io(&e), "no space left on device");
    let e = io_error(Path::new("/d/thresher.wal.1"), &e).to_string();
    assert!(e.contains("no space left on device"), "{e}");
}
