//! Writes the W3-like synthetic classification stream as LIBSVM files for the side-by-side quality
//! benchmark (`benches/run quality`): d = 2^20 features, 40 nonzeros per sample, 100 true features,
//! labels the sign of `w.x` — the distribution of `benches/harness/loadgen.rs` (`thresher::synth::sparse_stream`
//! with the same parameters and seed), but as many samples as asked for, written as they are drawn.
//!
//! ```sh
//! cargo run --release --example w3_stream -- --train 1000000 --test 100000 --out data/w3
//! ```
//! writes `OUT/train.svm` (the first `--train` samples) and `OUT/test.svm` (the next `--test`), values at
//! 6 decimals as the load generator sends them, feature indices as drawn (0-based, below 2^20). Each file
//! is written under a temporary name and renamed when complete, so a reader never sees half a file.
//!
//! `sparse_stream` returns a `Vec` of samples: 1.1M of them would hold about 600 MB. The generator below
//! draws the same random numbers in the same order one sample at a time instead, and checks at start that
//! its first samples are bit for bit those of `sparse_stream`, so the two cannot drift apart silently.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Parser;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use thresher::sample::Sample;

#[derive(Debug, Parser)]
struct Args {
    /// Training samples (the first ones drawn).
    #[arg(long, default_value_t = 1_000_000)]
    train: usize,
    /// Test samples (drawn after the training ones, from the same truth).
    #[arg(long, default_value_t = 100_000)]
    test: usize,
    /// Output directory (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// Seed of the problem (the truth and the samples); 7 is the load generator's.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Label noise: labels are the sign of `w.x + noise * N(0,1)`; 0 is the load generator's.
    #[arg(long, default_value_t = 0.0)]
    noise: f64,
}

const DIM: usize = 1 << 20;
const NNZ: usize = 40;
const K_TRUE: usize = 100;

/// `synth::sparse_stream` one sample at a time: the same draws in the same order.
struct Stream {
    rng: ChaCha8Rng,
    truth: Vec<f64>,
    support: Vec<usize>,
    noise: f64,
}

impl Stream {
    fn new(seed: u64, noise: f64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut truth = vec![0.0; DIM];
        let mut support = Vec::with_capacity(K_TRUE);
        while support.len() < K_TRUE {
            let j = rng.gen_range(0..DIM);
            if truth[j] == 0.0 {
                let sign = if rng.gen_bool(0.5) { 1.0 } else { -1.0 };
                truth[j] = sign * rng.gen_range(1.0..2.0);
                support.push(j);
            }
        }
        Self {
            rng,
            truth,
            support,
            noise,
        }
    }

    fn next_sample(&mut self) -> Sample {
        let rng = &mut self.rng;
        let mut idx: Vec<u32> = Vec::with_capacity(NNZ);
        let from_truth = (NNZ / 4).min(self.support.len());
        while idx.len() < from_truth {
            let j = self.support[rng.gen_range(0..self.support.len())] as u32;
            if !idx.contains(&j) {
                idx.push(j);
            }
        }
        while idx.len() < NNZ {
            let j = rng.gen_range(0..DIM) as u32;
            if !idx.contains(&j) {
                idx.push(j);
            }
        }
        idx.sort_unstable();
        let values: Vec<f64> = idx
            .iter()
            .map(|_| StandardNormal.sample(&mut *rng))
            .collect();
        let clean: f64 = idx
            .iter()
            .zip(&values)
            .map(|(&j, v)| self.truth[j as usize] * v)
            .sum();
        let noise: f64 = StandardNormal.sample(&mut *rng);
        let label = if clean + self.noise * noise >= 0.0 {
            1.0
        } else {
            -1.0
        };
        Sample::new(idx, values, label, None).expect("finite by construction")
    }
}

fn write_file(path: &Path, n: usize, stream: &mut Stream) -> anyhow::Result<()> {
    let tmp = path.with_extension("svm.partial");
    let mut out = BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
    let mut line = String::with_capacity(1024);
    for _ in 0..n {
        line.clear();
        thresher::synth::write_wire_sample(&mut line, &stream.next_sample(), false);
        line.push('\n');
        out.write_all(line.as_bytes())?;
    }
    out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.noise.is_finite() && args.noise >= 0.0,
        "--noise must be finite and >= 0"
    );
    // The streamed draws must be sparse_stream's: compare the first samples bit for bit.
    let check = 2_000;
    let reference =
        thresher::synth::sparse_stream(check, DIM, K_TRUE, NNZ, args.noise, true, args.seed);
    let mut stream = Stream::new(args.seed, args.noise);
    anyhow::ensure!(
        stream.truth == reference.truth,
        "truth differs from synth::sparse_stream"
    );
    for (n, r) in reference.samples.iter().enumerate() {
        let s = stream.next_sample();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        anyhow::ensure!(
            s.indices == r.indices && bits(&s.values) == bits(&r.values) && s.label == r.label,
            "sample {n} differs from synth::sparse_stream"
        );
    }
    std::fs::create_dir_all(&args.out)?;
    let started = Instant::now();
    let mut stream = Stream::new(args.seed, args.noise);
    write_file(&args.out.join("train.svm"), args.train, &mut stream)?;
    write_file(&args.out.join("test.svm"), args.test, &mut stream)?;
    println!(
        "wrote {} train + {} test samples (d = {DIM}, {NNZ} nonzeros, {K_TRUE} true features, seed {}, noise {}) to {} in {:.1} s",
        args.train,
        args.test,
        args.seed,
        args.noise,
        args.out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
