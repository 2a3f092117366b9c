//! `fit`'s [`Spread`]: a solver's chunks of rows walked on every core the process may use. `fit` runs
//! alone on its machine once the search has ended (the polish), so its second core would otherwise
//! stand idle; the daemon's learners walk theirs in turn ([`crate::solver::spread::InTurn`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[cfg(test)]
use crate::solver::spread::map;
use crate::solver::spread::Spread;

/// Walks chunks on up to `threads` threads: the calling one and `threads - 1` scoped ones, each
/// taking the next chunk not yet taken.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cores {
    threads: usize,
}

impl Cores {
    /// As many threads as the system says this process may run at once.
    pub(crate) fn available() -> Cores {
        Cores {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }

    /// [`Cores::available`] as a solver holds it.
    pub(crate) fn shared() -> Arc<dyn Spread> {
        Arc::new(Cores::available())
    }
}

impl Spread for Cores {
    fn run(&self, chunks: usize, job: &(dyn Fn(usize) + Sync)) {
        let workers = self.threads.min(chunks);
        if workers <= 1 {
            return (0..chunks).for_each(job);
        }
        let next = AtomicUsize::new(0);
        let work = || loop {
            let c = next.fetch_add(1, Ordering::Relaxed);
            if c >= chunks {
                return;
            }
            job(c);
        };
        std::thread::scope(|scope| {
            let others: Vec<_> = (1..workers).map(|_| scope.spawn(work)).collect();
            work();
            for other in others {
                // A job that panicked on another thread panics here, as it would have in turn.
                other
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_come_back_in_order_whichever_thread_walked_them() {
        let cores = Cores { threads: 3 };
        let out = map(&cores, 50, |c| {
            // Later chunks finish first on some threads.
            std::thread::sleep(std::time::Duration::from_micros((50 - c as u64) * 20));
            c * 2
        });
        assert_eq!(out, (0..50).map(|c| c * 2).collect::<Vec<_>>());
        assert_eq!(map(&Cores { threads: 1 }, 2, |c| c), vec![0, 1]);
    }

    /// The chunks depend on the row count alone, so a polish walked on two threads equals one walked
    /// in turn, bit for bit: a model does not depend on the machine's cores.
    #[test]
    fn a_polish_on_two_threads_equals_one_in_turn() {
        use crate::loss::{Loss, LossKind};
        use crate::sample::Dataset;
        use crate::solver::driver::SparseModel;
        use crate::solver::polish::polish;
        use crate::solver::spread::{chunks_of, InTurn};
        use crate::solver::Problem;

        let samples = crate::synth::sparse_stream(40_000, 200, 5, 8, 0.5, true, 7).samples;
        let data = Dataset::from_samples(&samples, 0);
        assert!(chunks_of(40_000) > 1);
        let loss = Loss::new(LossKind::Logistic, 0.0).unwrap();
        let problem = Problem::new(&data, loss, 1e-3, 5, true).unwrap();
        let start = SparseModel {
            support: vec![1, 4, 9, 16, 25],
            weights: vec![0.1; 5],
            intercept: 0.0,
        };
        let in_turn = polish(&problem, &start, &InTurn).unwrap();
        let threaded = polish(&problem, &start, &Cores { threads: 2 }).unwrap();
        assert!(in_turn.iterations > 0);
        assert_eq!(in_turn, threaded);
    }
}
