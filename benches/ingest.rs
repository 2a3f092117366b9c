//! Criterion benchmark of the daemon's ingest parser: `parse_body` on one 10 000-sample request body
//! with 40 nonzeros per sample at d = 2^20 (the load generator's stream, `benches/harness/loadgen.rs`), as
//! LIBSVM lines, as JSON lines and as one JSON array. Throughput is in samples. Figures are for
//! ratios on one machine.
//!
//! ```sh
//! cargo bench --bench ingest
//! ```

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

use thresher::ingest::batch::{parse_body, BodyFormat, FeatureDictionary, Rules};
use thresher::loss::{Loss, LossKind};
use thresher::synth::{sparse_stream, wire_body};

const SAMPLES: usize = 10_000;

fn ingest(c: &mut Criterion) {
    let data = sparse_stream(SAMPLES, 1 << 20, 100, 40, 0.0, true, 7);
    let rules = Rules::new(
        vec![Loss::new(LossKind::Logistic, 0.25).unwrap()],
        1 << 24,
        false,
    );
    let dict = FeatureDictionary::new(0);
    let mut group = c.benchmark_group("parse_body");
    group
        .throughput(Throughput::Elements(SAMPLES as u64))
        .sample_size(20)
        .measurement_time(Duration::from_secs(4));
    for (name, format) in [
        ("libsvm_10k_x40", BodyFormat::Libsvm),
        ("ndjson_10k_x40", BodyFormat::Ndjson),
        ("json_array_10k_x40", BodyFormat::JsonArray),
    ] {
        let text = wire_body(&data.samples, format);
        group.bench_function(name, |b| {
            b.iter(|| {
                let s = parse_body(format, &text, &rules, &dict).unwrap();
                assert_eq!(s.len(), SAMPLES);
                s
            })
        });
    }
    group.finish();
}

criterion_group!(benches, ingest);
criterion_main!(benches);
