//! Named features: bodies of `{"label": y, "features": {"name": value}}` objects, built from the fuzz
//! input, parsed in sequence into one small dictionary. No panic; an accepted body gives every name a
//! stable index below the dictionary's capacity; a refused body registers no name; a prediction body
//! never registers a name.
#![no_main]

use libfuzzer_sys::fuzz_target;
use thresher::ingest::batch::{parse_body, BodyFormat, FeatureDictionary, Rules};
use thresher::loss::{Loss, LossKind};

const CAPACITY: usize = 24;

fuzz_target!(|data: &[u8]| {
    let dict = FeatureDictionary::new(CAPACITY);
    // Small name limits, so the fuzzer reaches the refusals of a too-long name and of too many new
    // names in one body as well as the full dictionary.
    let rules = |predict| Rules {
        max_name_bytes: 24,
        max_new_names: 12,
        ..Rules::new(
            vec![Loss::new(LossKind::Squared, 0.0).unwrap()],
            1 << 20,
            predict,
        )
    };
    // Each 0xff-separated piece of the input is one body; its first byte picks format and mode.
    for piece in data.split(|&b| b == 0xff) {
        let Some((&mode, rest)) = piece.split_first() else {
            continue;
        };
        let Ok(text) = std::str::from_utf8(rest) else {
            continue;
        };
        // Either the raw text (JSON as written by the fuzzer) or objects built from its words.
        let body = if mode & 1 == 0 {
            text.to_string()
        } else {
            let objects: Vec<String> = text
                .split('\n')
                .map(|l| {
                    let features: Vec<String> = l
                        .split(' ')
                        .enumerate()
                        .map(|(i, name)| format!("{}: {}", serde_json_string(name), i as f64 * 0.5))
                        .collect();
                    format!(
                        "{{\"label\": 1, \"features\": {{{}}}}}",
                        features.join(", ")
                    )
                })
                .collect();
            if mode & 2 == 0 {
                format!("[{}]", objects.join(","))
            } else {
                objects.join("\n")
            }
        };
        let format = if mode & 2 == 0 {
            BodyFormat::JsonArray
        } else {
            BodyFormat::Ndjson
        };
        let predict = mode & 4 != 0;
        let before = dict.names();
        let result = parse_body(format, &body, &rules(predict), &dict);
        let after = dict.names();
        assert!(after.len() <= CAPACITY);
        assert_eq!(&after[..before.len()], &before[..], "indices are stable");
        if result.is_err() || predict {
            assert_eq!(
                after, before,
                "a refused or prediction body registers nothing"
            );
        }
        if let Ok(block) = result {
            for s in block.to_samples() {
                assert!(s
                    .indices
                    .iter()
                    .all(|&j| (j as usize) < after.len().max(1 << 20)));
                if !predict && mode & 1 == 1 {
                    // Built bodies use names only: every index is a registered name.
                    assert!(s.indices.iter().all(|&j| (j as usize) < after.len()));
                }
            }
        }
    }
});

/// `s` as a JSON string literal (the fuzz crate has no serde_json of its own).
fn serde_json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
