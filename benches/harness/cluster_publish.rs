//! The publisher of the cluster suite (`benches/run cluster`): a seeded sparse classification stream (`synth::sparse_stream`,
//! d = 2^20 features, 40 nonzeros per sample, 100 true features by default) as LIBSVM batches on a
//! NATS JetStream work-queue subject, at a fixed rate, each batch with its own `Nats-Msg-Id` and
//! retried with that id until the stream stores it.
//!
//! ```sh
//! cargo run --release --example cluster_publish -- --url nats://127.0.0.1:4222 --rate 30000 --duration 30
//! ```
//! `--distinct` samples are generated and serialised once, then cycled (new ids each time), so the
//! generator is not what limits the rate. It prints one line `published=... bytes=... seconds=...
//! samples_per_s=...` on stdout.

use std::time::{Duration, Instant};

use clap::Parser;
use thresher::ingest::batch::BodyFormat;
use thresher::synth::{sparse_stream, wire_body};

#[derive(Parser)]
struct Args {
    /// NATS servers, comma-separated.
    #[arg(long, default_value = "nats://127.0.0.1:4222")]
    url: String,
    #[arg(long, default_value = "thresher.samples")]
    subject: String,
    /// Samples per second over all batches (0 = as fast as the stream stores them).
    #[arg(long, default_value_t = 30_000)]
    rate: u64,
    /// Seconds to publish for.
    #[arg(long, default_value_t = 30.0)]
    duration: f64,
    /// Samples per batch (one message; 1 000 samples of 40 nonzeros are ~0.6 MB, under the server's
    /// 1 MB default payload limit).
    #[arg(long, default_value_t = 1000)]
    batch: usize,
    /// Distinct samples generated, then cycled.
    #[arg(long, default_value_t = 100_000)]
    distinct: usize,
    #[arg(long, default_value_t = 1 << 20)]
    dim: usize,
    #[arg(long, default_value_t = 40)]
    nnz: usize,
    #[arg(long, default_value_t = 100)]
    truth: usize,
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Prefix of the message ids (`PREFIX-N`): another run with another prefix is not deduplicated.
    #[arg(long, default_value = "bench")]
    id_prefix: String,
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = Args::parse();
    let problem = sparse_stream(
        args.distinct,
        args.dim,
        args.truth,
        args.nnz,
        0.0,
        true,
        args.seed,
    );
    let bodies: Vec<bytes::Bytes> = problem
        .samples
        .chunks(args.batch)
        .map(|c| wire_body(c, BodyFormat::Libsvm).into())
        .collect();
    let urls: Vec<String> = args.url.split(',').map(str::to_string).collect();
    let client = async_nats::connect(urls).await.expect("connect to NATS");
    let js = async_nats::jetstream::new(client);

    let start = Instant::now();
    let (mut published, mut bytes, mut n) = (0usize, 0usize, 0usize);
    while start.elapsed().as_secs_f64() < args.duration {
        if args.rate > 0 {
            // Batch n is due once n batches' worth of samples fit in the elapsed time at the rate.
            let due = Duration::from_secs_f64(published as f64 / args.rate as f64);
            if let Some(wait) = due.checked_sub(start.elapsed()) {
                tokio::time::sleep(wait).await;
            }
        }
        let body = &bodies[n % bodies.len()];
        let id = format!("{}-{n}", args.id_prefix);
        loop {
            let mut headers = async_nats::HeaderMap::new();
            headers.insert("Nats-Msg-Id", id.as_str());
            let stored = match js
                .publish_with_headers(args.subject.clone(), headers, body.clone())
                .await
            {
                Ok(ack) => tokio::time::timeout(Duration::from_secs(5), ack).await,
                Err(e) => {
                    eprintln!("publish {id}: {e}; retrying");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            match stored {
                Ok(Ok(_)) => break,
                Ok(Err(e)) => eprintln!("publish {id}: {e}; retrying"),
                Err(_) => eprintln!("publish {id}: no acknowledgement in 5 s; retrying"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        published += args
            .batch
            .min(problem.samples.len() - (n % bodies.len()) * args.batch);
        bytes += body.len();
        n += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "published={published} batches={n} bytes={bytes} seconds={seconds:.2} samples_per_s={:.0}",
        published as f64 / seconds
    );
}
