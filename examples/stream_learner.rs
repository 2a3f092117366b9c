//! Run a streaming learner in-process: one thread pushes samples, the learner's thread learns on its
//! window and publishes certified models, and any thread reads the latest one without waiting.
//!
//! ```sh
//! cargo run --release --example stream_learner
//! ```
//! The learner is the daemon's default (SDIHT on a window, squared loss) with k = 5, on a seeded
//! stream whose labels depend on 5 of 200 features. The learner thread inserts each batch, takes a few
//! solver steps and publishes (`publish` certifies the model over the whole window: the gap bounds
//! how far it is from the best 5-sparse model of that window). The main thread reads the cell as the
//! daemon's `GET /v1/model` does.

use std::sync::{mpsc, Arc};

use parking_lot::Mutex;
use thresher::learner::publish::{publish, SharedLearner};
use thresher::metrics::Metrics;
use thresher::synth::sparse_stream;
use thresher::{learner, Config, ModelCell, Sample};

fn main() {
    let mut config = Config::defaults().learners.remove(0);
    config.k = 5;
    config.lambda = 1e-3;
    let shared: SharedLearner = Arc::new(Mutex::new(learner::build(&config, 20_000, None)));
    let cell = Arc::new(ModelCell::new("primary", None));

    let (tx, rx) = mpsc::sync_channel::<Vec<Sample>>(4);
    let learner_thread = {
        let (shared, cell) = (shared.clone(), cell.clone());
        std::thread::spawn(move || {
            let metrics = Metrics::new();
            for batch in rx {
                let mut l = shared.lock();
                l.insert_samples(&batch);
                for _ in 0..8 {
                    l.step();
                }
                drop(l); // publish takes the lock itself
                publish(&shared, &cell, &metrics);
            }
        })
    };

    // 40 batches of 1 000 samples: 200 features, 10 nonzeros per sample, 5 true features.
    let stream = sparse_stream(40_000, 200, 5, 10, 0.1, false, 7);
    for (i, batch) in stream.samples.chunks(1000).enumerate() {
        tx.send(batch.to_vec())
            .expect("the learner thread is running");
        if i % 10 == 9 {
            if let Some(s) = cell.get() {
                let c = &s.model.certificate;
                println!(
                    "read: version={} samples_seen={} gap={:e}",
                    s.version, s.samples_seen, c.gap
                );
            }
        }
    }
    drop(tx);
    learner_thread
        .join()
        .expect("the learner thread ended cleanly");

    let s = cell.get().expect("a published model");
    let c = &s.model.certificate;
    println!(
        "final: version={} samples_seen={} window={} primal={:e} dual={:e} gap={:e}",
        s.version, s.samples_seen, s.window_samples, c.primal, c.dual, c.gap
    );
    println!("support={:?}", s.model.support);
    println!("true_support={:?}", stream.true_support());
}
