//! JSON bodies (`application/json` arrays and `application/x-ndjson` lines): no panic, and the batch
//! reader gives the same outcome (samples bit for bit, or the same error) with and without its fast
//! one-pass object reader. Accepted samples hold the sample invariants and the index bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use thresher::ingest::batch::{parse_segments, BodyFormat, FeatureDictionary, Rules};
use thresher::ingest::fuzzing::{outcome, parse_body_reference};
use thresher::loss::{Loss, LossKind};
use thresher::sample::Sample;

const MAX_DIM: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the format, the loss and prediction rules, and where the body is cut
    // into two chunks (as an HTTP body may arrive).
    let Some((&mode, body)) = data.split_first() else {
        return;
    };
    let format = if mode & 1 == 0 {
        BodyFormat::JsonArray
    } else {
        BodyFormat::Ndjson
    };
    let kind = if mode & 2 == 0 {
        LossKind::Squared
    } else {
        LossKind::Logistic
    };
    let rules = Rules::new(vec![Loss::new(kind, 0.0).unwrap()], MAX_DIM, mode & 4 != 0);
    let cut = (usize::from(mode >> 3) * body.len() / 31).min(body.len());
    let (d1, d2) = (FeatureDictionary::new(64), FeatureDictionary::new(64));
    let fast = parse_segments(format, &[&body[..cut], &body[cut..]], &rules, &d1);
    let reference = parse_body_reference(format, &[body], &rules, &d2);
    assert_eq!(outcome(&fast), outcome(&reference), "{format:?} {rules:?}");
    assert_eq!(d1.names(), d2.names());
    if let Ok(block) = fast {
        for s in block.to_samples() {
            Sample::check(&s.indices, &s.values, s.label, s.weight).expect("a valid sample");
            assert!(s.indices.iter().all(|&j| (j as usize) < MAX_DIM));
            if !rules.predict {
                rules.losses[0].check_label(s.label).expect("a valid label");
            }
        }
    }
});
