//! LIBSVM lines: neither reader panics, and where the fast (structural) reader accepts a line the
//! general reader accepts it too with the same label, indices and values (bit for bit). Whole bodies:
//! the batch reader gives the same outcome with and without its fast paths.
#![no_main]

use libfuzzer_sys::fuzz_target;
use thresher::ingest::batch::{parse_body, BodyFormat, FeatureDictionary, Rules};
use thresher::ingest::fuzzing::{libsvm_fast, outcome, parse_body_reference};
use thresher::ingest::libsvm::{parse_libsvm_general, parse_libsvm_line};
use thresher::loss::{Loss, LossKind};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for line in text.lines() {
        let general = parse_libsvm_general(line);
        let served = parse_libsvm_line(line);
        if let Some((label, indices, values)) = libsvm_fast(line) {
            let g = general
                .as_ref()
                .unwrap_or_else(|e| panic!("fast accepts, general refuses ({e}): {line:?}"));
            assert_eq!(label.to_bits(), g.label.to_bits(), "{line:?}");
            assert_eq!(indices, g.indices, "{line:?}");
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&values), bits(&g.values), "{line:?}");
        }
        assert_eq!(served.is_ok(), general.is_ok(), "{line:?}");
    }
    for predict in [false, true] {
        let rules = Rules::new(
            vec![Loss::new(LossKind::Squared, 0.0).unwrap()],
            1 << 20,
            predict,
        );
        let (d1, d2) = (FeatureDictionary::new(16), FeatureDictionary::new(16));
        let fast = parse_body(BodyFormat::Libsvm, text, &rules, &d1);
        let reference = parse_body_reference(BodyFormat::Libsvm, &[data], &rules, &d2);
        assert_eq!(
            outcome(&fast),
            outcome(&reference),
            "predict={predict} {text:?}"
        );
    }
});
