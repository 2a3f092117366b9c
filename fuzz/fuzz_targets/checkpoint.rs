//! The checkpoint reader on arbitrary bytes: it returns an error or a checkpoint, never panics, and
//! what it returns re-encodes to bytes that decode to the same names and window. Half of the inputs are
//! wrapped in a valid envelope (magic, format version, length, checksum: format 1's FNV-1a or format
//! 2's XXH3, by the mode byte) so the fuzzer reaches the header and window parser behind the checksum.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use thresher::daemon::checkpoint::{checksum, decode, encode, FNV_VERSION, FORMAT_VERSION, MAGIC};

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz.ckpt");
    let Some((&mode, rest)) = data.split_first() else {
        let _ = decode(data, path);
        return;
    };
    let bytes = if mode & 1 == 0 {
        rest.to_vec()
    } else {
        let version = if mode & 2 == 0 {
            FNV_VERSION
        } else {
            FORMAT_VERSION
        };
        let mut b = Vec::with_capacity(rest.len() + 28);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&version.to_le_bytes());
        b.extend_from_slice(&(rest.len() as u64).to_le_bytes());
        b.extend_from_slice(rest);
        b.extend_from_slice(&checksum(version, rest).to_le_bytes());
        b
    };
    if let Ok(ckpt) = decode(&bytes, path) {
        let again = decode(&encode(&ckpt), path).expect("an encoded checkpoint decodes");
        // Header floats go through JSON text (serde_json's parser may differ in the last bit), so
        // the exact comparison is of the binary part: names and every window sample.
        assert_eq!(again.feature_names, ckpt.feature_names);
        assert_eq!(again.learners.len(), ckpt.learners.len());
        for (a, b) in again.learners.iter().zip(&ckpt.learners) {
            assert_eq!(a.state.samples.len(), b.state.samples.len());
            for ((sa, aa), (sb, ab)) in a.state.samples.iter().zip(&b.state.samples) {
                assert_eq!(sa.indices, sb.indices);
                assert_eq!(aa.to_bits(), ab.to_bits());
                assert_eq!(sa.label.to_bits(), sb.label.to_bits());
            }
        }
    }
});
