use std::sync::Arc;

use super::*;
use crate::ingest::admission::{Admission, Source};
use crate::ingest::batch::{parse_body_into, BodyFormat, Rules};
use crate::ingest::AdmitError;
use crate::loss::{Loss, LossKind};
use crate::metrics::Metrics;
use crate::ring::SampleBudget;

fn rules() -> Rules {
    Rules::new(
        vec![Loss::new(LossKind::Squared, 0.25).unwrap()],
        1000,
        false,
    )
}

/// Parses `body` (NDJSON if it starts with `{`, else LIBSVM) against `dict` into a new block and
/// claim.
fn parse(dict: &FeatureDictionary, body: &str) -> Result<(SampleBlock, Claim), BatchError> {
    let format = match body.starts_with('{') {
        true => BodyFormat::Ndjson,
        false => BodyFormat::Libsvm,
    };
    let (mut block, mut claim) = (SampleBlock::new(), Claim::default());
    parse_body_into(format, body, &rules(), dict, &mut block, &mut claim)?;
    Ok((block, claim))
}

/// Grants with a commit that succeeds (`Ok(rewritten)`) or fails (`fail`).
fn grant(
    dict: &FeatureDictionary,
    claim: &Claim,
    block: &mut SampleBlock,
    fail: bool,
) -> Result<bool, GrantError<()>> {
    dict.grant(claim, block, |_, _, rewritten| match fail {
        true => Err(()),
        false => Ok(rewritten),
    })
}

fn named(line: &[(&str, f64)]) -> String {
    let features: Vec<String> = line.iter().map(|(n, v)| format!("{n:?}:{v}")).collect();
    format!("{{\"label\":1,\"features\":{{{}}}}}\n", features.join(","))
}

/// The names of a row's features, with their values.
fn row_names(dict: &FeatureDictionary, block: &SampleBlock, i: usize) -> Vec<(String, f64)> {
    let row = block.get(i);
    let names = dict.names_of(row.indices);
    names
        .into_iter()
        .map(|n| n.expect("every index has a name"))
        .zip(row.values.iter().copied())
        .collect()
}

/// A parse changes nothing; a grant whose commit fails changes nothing; a granted claim gives its
/// names the indices the parse numbered them with, and takes the kind.
#[test]
fn a_parse_and_a_failed_commit_change_nothing() {
    let dict = FeatureDictionary::new(100);
    let (mut block, claim) = parse(&dict, &named(&[("b", 2.0), ("a", 1.0)])).unwrap();
    assert_eq!((dict.len(), dict.kind()), (0, FeatureKind::Open));
    assert_eq!(claim.kind(), FeatureKind::Names);
    assert_eq!(claim.new_names().collect::<Vec<_>>(), ["a", "b"]);
    assert!(matches!(
        grant(&dict, &claim, &mut block, true),
        Err(GrantError::Commit(()))
    ));
    assert_eq!((dict.len(), dict.kind()), (0, FeatureKind::Open));
    // A numeric body refused at its commit leaves the kind open as well.
    let (mut numeric, numeric_claim) = parse(&dict, "1 3:1\n").unwrap();
    assert_eq!(numeric_claim.kind(), FeatureKind::Indices);
    assert!(grant(&dict, &numeric_claim, &mut numeric, true).is_err());
    assert_eq!(dict.kind(), FeatureKind::Open);
    // Granted: the provisional indices stand.
    assert!(
        !grant(&dict, &claim, &mut block, false).unwrap(),
        "not rewritten"
    );
    assert_eq!(dict.names(), ["a", "b"]);
    assert_eq!(dict.kind(), FeatureKind::Names);
    assert_eq!(
        row_names(&dict, &block, 0),
        [("a".into(), 1.0), ("b".into(), 2.0)]
    );
}

/// Two bodies parsed against the same dictionary, granted in the other order: the second's names
/// take the indices the first was given (or the next free ones), and its samples are rewritten in
/// index order; the log's view lists the names in index order.
#[test]
fn a_claim_granted_after_another_is_renumbered() {
    let dict = FeatureDictionary::new(100);
    let (mut first, first_claim) = parse(
        &dict,
        &(named(&[("x", 1.0), ("y", 2.0)]) + &named(&[("y", 3.0)])),
    )
    .unwrap();
    let (mut second, second_claim) = parse(&dict, &named(&[("y", 4.0), ("z", 5.0)])).unwrap();
    assert_eq!(
        second.get(0).indices,
        [0, 1],
        "provisional: numbered from 0 too"
    );
    assert!(!grant(&dict, &second_claim, &mut second, false).unwrap());
    assert_eq!(dict.names(), ["y", "z"]);
    let logged = dict
        .grant(&first_claim, &mut first, |view, samples, rewritten| {
            assert!(rewritten);
            assert_eq!(samples.get(0).indices, [0, 2], "x is new: 2; y is 0");
            Ok::<_, ()>(view.names_from(1))
        })
        .unwrap();
    assert_eq!(logged, ["z", "x"]);
    assert_eq!(dict.names(), ["y", "z", "x"]);
    assert_eq!(
        row_names(&dict, &first, 0),
        [("y".into(), 2.0), ("x".into(), 1.0)]
    );
    assert_eq!(row_names(&dict, &first, 1), [("y".into(), 3.0)]);
    assert_eq!(first.dim(), 3);
    // A later parse sees them: nothing new to claim.
    let (_, claim) = parse(&dict, &named(&[("x", 1.0), ("z", 1.0)])).unwrap();
    assert_eq!(claim.new_names().len(), 0);
}

/// Between a body's parse and its grant, another body took the other kind, or the dictionary's last
/// room: refused naming the line, counted, and nothing changes.
#[test]
fn a_claim_that_no_longer_fits_is_refused_naming_its_line() {
    let dict = FeatureDictionary::new(3);
    let (mut numeric, numeric_claim) = parse(&dict, "\n1 2:1\n").unwrap();
    let (mut a, a_claim) = parse(&dict, &(named(&[]) + &named(&[("a", 1.0), ("b", 1.0)]))).unwrap();
    let (mut c, c_claim) = parse(&dict, &(named(&[("c", 1.0)]) + &named(&[("d", 1.0)]))).unwrap();
    grant(&dict, &a_claim, &mut a, false).unwrap();
    match grant(&dict, &numeric_claim, &mut numeric, false) {
        Err(GrantError::Refused(e)) => {
            assert_eq!(e.line, Some(2));
            assert!(
                e.message.contains("numeric feature indices are refused"),
                "{e:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    match grant(&dict, &c_claim, &mut c, false) {
        Err(GrantError::Refused(e)) => {
            assert_eq!(e.line, Some(2), "d, the fourth name, is on line 2");
            assert!(e.message.contains("ingest.max_named_features"), "{e:?}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(dict.names(), ["a", "b"]);
    assert_eq!(
        dict.refused(),
        1,
        "the kind is not one of the dictionary's limits"
    );
    // The bytes bound likewise.
    let dict = FeatureDictionary::with_limits(10, 4);
    let (mut a, a_claim) = parse(&dict, &named(&[("aaa", 1.0)])).unwrap();
    let (mut b, b_claim) = parse(&dict, &named(&[("bb", 1.0)])).unwrap();
    grant(&dict, &a_claim, &mut a, false).unwrap();
    assert!(matches!(
        grant(&dict, &b_claim, &mut b, false),
        Err(GrantError::Refused(e)) if e.message.contains("max_named_feature_bytes")
    ));
}

/// A failed parse leaves the claim it joined as it was (a stdin batch goes on).
#[test]
fn a_failed_parse_rewinds_its_claim() {
    let dict = FeatureDictionary::new(100);
    let (mut block, mut claim) = (SampleBlock::new(), Claim::default());
    let ndjson = |body: &str, block: &mut SampleBlock, claim: &mut Claim| {
        parse_body_into(BodyFormat::Ndjson, body, &rules(), &dict, block, claim)
    };
    ndjson(&named(&[("a", 1.0)]), &mut block, &mut claim).unwrap();
    let bad = named(&[("b", 1.0), ("c", 1.0)]) + "{\"label\":\"x\"}\n";
    assert!(ndjson(&bad, &mut block, &mut claim).is_err());
    ndjson(&named(&[("c", 1.0)]), &mut block, &mut claim).unwrap();
    assert_eq!(claim.new_names().collect::<Vec<_>>(), ["a", "c"]);
    assert_eq!(block.get(1).indices, [1]);
    // A numeric line after a named one in the same claim is refused, as in one body.
    let e = parse_body_into(
        BodyFormat::Libsvm,
        "1 1:1\n",
        &rules(),
        &dict,
        &mut block,
        &mut claim,
    )
    .unwrap_err();
    assert!(
        e.message.contains("numeric feature indices are refused"),
        "{e:?}"
    );
    assert_eq!(claim.kind(), FeatureKind::Names);
    grant(&dict, &claim, &mut block, false).unwrap();
    assert_eq!(dict.names(), ["a", "c"]);
}

/// Concurrent bodies of both kinds, parsed on an open dictionary and admitted from several threads
/// at once: one kind wins, every body of the other kind is refused as invalid, and every admitted
/// sample's indices name the features it was sent with.
#[test]
fn concurrent_claims_race_to_one_kind_and_consistent_names() {
    for round in 0..20 {
        let dict = Arc::new(FeatureDictionary::new(10_000));
        let (tx, rx) = crossbeam_channel::bounded(1000);
        let admission = Arc::new(Admission::new(
            tx,
            SampleBudget::new(1 << 20),
            Metrics::new(),
            dict.clone(),
        ));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let (dict, admission) = (dict.clone(), admission.clone());
                std::thread::spawn(move || {
                    let body = match (t + round) % 2 {
                        0 => format!("1 {}:1\n", t + 1),
                        _ => (0..3)
                            .map(|k| {
                                named(&[("shared", 100.0), (&format!("t{t}k{k}"), k as f64 + 1.0)])
                            })
                            .collect(),
                    };
                    let kind = match (t + round) % 2 {
                        0 => FeatureKind::Indices,
                        _ => FeatureKind::Names,
                    };
                    // Refused at its parse if the other kind was taken already, else at admission.
                    let outcome = parse(&dict, &body)
                        .map_err(AdmitError::Invalid)
                        .and_then(|(block, claim)| admission.admit(block, claim, Source::Http));
                    (kind, outcome)
                })
            })
            .collect();
        let outcomes: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let won = dict.kind();
        assert_ne!(won, FeatureKind::Open);
        for (kind, outcome) in &outcomes {
            match outcome {
                Ok(_) => assert_eq!(*kind, won),
                Err(AdmitError::Invalid(e)) => {
                    assert_ne!(*kind, won);
                    assert!(e.message.contains("are refused"), "{e:?}");
                }
                Err(e) => panic!("{e:?}"),
            }
        }
        if won == FeatureKind::Indices {
            assert!(dict.is_empty(), "no named body left a name");
        }
        for batch in rx.try_iter().filter(|_| won == FeatureKind::Names) {
            for i in 0..batch.samples().len() {
                for (name, value) in row_names(&dict, batch.samples(), i) {
                    let expected = match name.as_str() {
                        "shared" => 100.0,
                        other => other[other.len() - 1..].parse::<f64>().unwrap() + 1.0,
                    };
                    assert_eq!(value, expected, "{name}");
                }
            }
        }
        let names = dict.names();
        assert_eq!(
            names.iter().filter(|n| *n == "shared").count(),
            names.len().min(1)
        );
    }
}

/// Through admission with a write-ahead log: a batch refused for the log's bound leaves no name; a
/// batch renumbered at its grant is logged as granted, so a replay into a fresh dictionary gives
/// every sample the same names.
#[test]
fn the_log_holds_what_was_granted_and_nothing_refused() {
    use crate::config::{DurabilityConfig, WalMode};
    use crate::ingest::admission::AdmissionLog;
    use crate::ingest::wal::Wal;
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let config = DurabilityConfig {
        wal: WalMode::Batch,
        wal_max_bytes: 1 << 16,
        wal_fsync_interval: Duration::from_secs(1),
    };
    let open = || Wal::open(dir.path(), &config, 0, false, Metrics::new()).unwrap();
    let dict = Arc::new(FeatureDictionary::new(100));
    let (tx, rx) = crossbeam_channel::bounded(10);
    let wal = open();
    let admission = Admission::new(tx, SampleBudget::new(1 << 30), Metrics::new(), dict.clone())
        .with_log(Some(AdmissionLog { wal: wal.clone() }));
    // Larger than the whole log: refused, and its names with it.
    let big: String = (0..30_000).map(|_| named(&[("big", 1.0)])).collect();
    let (block, claim) = parse(&dict, &big).unwrap();
    assert_eq!(
        admission.admit(block, claim, Source::Http),
        Err(AdmitError::LogFull)
    );
    assert_eq!((dict.len(), dict.kind()), (0, FeatureKind::Open));
    let (first, first_claim) = parse(&dict, &named(&[("x", 1.0), ("y", 2.0)])).unwrap();
    let (second, second_claim) = parse(&dict, &named(&[("y", 2.0), ("z", 3.0)])).unwrap();
    admission.admit(second, second_claim, Source::Http).unwrap();
    admission.admit(first, first_claim, Source::Http).unwrap();
    assert_eq!(dict.names(), ["y", "z", "x"]);
    let sent: Vec<Vec<(String, f64)>> = rx
        .try_iter()
        .map(|b| row_names(&dict, b.samples(), 0))
        .collect();
    drop((admission, wal));
    let restored = FeatureDictionary::new(100);
    let mut replayed = Vec::new();
    open()
        .replay(0, &restored, |block, _| {
            replayed.push(row_names(&restored, &block, 0));
            true
        })
        .unwrap();
    assert_eq!(restored.names(), ["y", "z", "x"]);
    assert_eq!(replayed, sent);
    assert_eq!(sent[1], [("y".into(), 2.0), ("x".into(), 1.0)]);
}
