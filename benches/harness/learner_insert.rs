//! CPU cost of a streaming learner's intake: `StreamingLearner::insert_batches` on the load generator's
//! stream (d = 2^20, 40 nonzeros per sample, 100 true features, logistic loss, k = 100, window 100k),
//! in thread CPU time per sample, so the figure holds on a busy machine too (wall time would not).
//!
//! ```sh
//! cargo run --release --example learner_insert
//! ```
//! The stream is cut into 1 000-sample blocks (one HTTP request each under the load generator), and a
//! call hands over as many blocks as `per_call` samples. Each line: the solver, the samples handed over per call (a learner thread drains every waiting batch
//! in one call, so calls grow when it falls behind), ns of CPU per sample for the intake alone, and for
//! intake plus 4 solver steps per call (as the daemon's learner loop interleaves them). The intake
//! includes freeing the handed-over batches, which the daemon's learner thread does too. The heap calls
//! (allocations and reallocations, frees) per sample over the same span come from a counting global
//! allocator.

#[path = "support/cpu.rs"]
mod cpu;
#[path = "support/learner.rs"]
mod learner;
use cpu::thread_cpu_ns;
use learner::loadgen_learner;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use thresher::learner::build;
use thresher::learner::params::StreamSolverKind;
use thresher::sample::SampleBlock;
use thresher::synth::sparse_stream;

/// The system allocator, counting calls: heap traffic per sample is the figure the window's slot reuse
/// is about, and unlike time it does not depend on what else the machine runs.
struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);
static FREES: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded unchanged to `System`; the counters are only side effects.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        FREES.fetch_add(1, Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn heap_calls() -> (u64, u64) {
    (
        ALLOCS.load(Ordering::Relaxed),
        FREES.load(Ordering::Relaxed),
    )
}

fn main() {
    // As the binary: the dense d-vectors ask for huge pages.
    thresher::sparse::set_dense_advice(thresher::sys::advise_huge_pages);
    const CAPACITY: usize = 100_000;
    const TOTAL: usize = 600_000;
    let data = sparse_stream(TOTAL, 1 << 20, 100, 40, 0.0, true, 7);
    // An optional argument picks one solver (`sdiht` or `mirror`), e.g. for a profile.
    let only = std::env::args().nth(1);
    for solver in [StreamSolverKind::Sdiht, StreamSolverKind::Mirror] {
        if only
            .as_deref()
            .is_some_and(|o| !format!("{solver:?}").eq_ignore_ascii_case(o))
        {
            continue;
        }
        for per_call in [10_000usize, 100_000, 300_000] {
            for steps in [0usize, 4] {
                // The daemon hands the learner blocks as they came off the wire (1 000-sample
                // requests under the load generator): built before the clock starts, as the parser
                // threads do, and dropped after each call on the clock, as the learner thread does.
                let calls: Vec<Vec<SampleBlock>> = data.samples[CAPACITY..]
                    .chunks(per_call)
                    .map(|call| call.chunks(1000).map(SampleBlock::from_samples).collect())
                    .collect();
                let config = loadgen_learner(solver);
                let mut learner = build(&config, CAPACITY, None);
                // Fill the window first: the steady state is a full window.
                learner.insert_samples(&data.samples[..CAPACITY]);
                let (allocs, frees) = heap_calls();
                let start = thread_cpu_ns();
                let mut fed = 0;
                for call in calls {
                    let blocks: Vec<&SampleBlock> = call.iter().collect();
                    learner.insert_batches(&blocks);
                    fed += call.iter().map(SampleBlock::len).sum::<usize>();
                    drop(blocks);
                    drop(call);
                    for _ in 0..steps {
                        learner.step();
                    }
                }
                let ns = (thread_cpu_ns() - start) as f64 / fed as f64;
                let (allocs_after, frees_after) = heap_calls();
                let per_sample = |n: u64| n as f64 / fed as f64;
                println!(
                    "solver={solver:?} per_call={per_call} steps_per_call={steps} cpu_ns_per_sample={ns:.0} allocs_per_sample={:.3} frees_per_sample={:.3}",
                    per_sample(allocs_after - allocs),
                    per_sample(frees_after - frees),
                );
            }
        }
    }
}
