//! Chunks of rows, and who walks them. A solver's walk over every row (the polish's gather, its
//! Newton sums) is cut into a number of chunks that depends on the row count alone ([`chunks_of`]),
//! and its sums are added chunk by chunk in order, so a result is the same on every machine, whatever
//! its cores. Who walks the chunks is the caller's choice ([`Spread`]): in turn on the calling thread
//! ([`InTurn`]: the daemon's learners, which share their cores with ingest), or on threads of the
//! caller's own (`fit`, whose second core is otherwise idle once the search has ended). Solvers know
//! nothing of threads.
//!
//! A set of at most [`MIN_CHUNK_ROWS`] rows is one chunk, so a small problem's sums are those of one
//! walk in row order.

use std::ops::Range;
use std::sync::Mutex;

/// The fewest rows a chunk holds before a walk is cut in two.
pub const MIN_CHUNK_ROWS: usize = 16_384;
/// The most chunks a walk is cut into: enough to balance two to eight threads, few enough that each
/// chunk's own sums (a Newton system of up to `1025^2` entries) stay small.
pub const MAX_CHUNKS: usize = 8;

/// How many chunks a walk over `rows` rows is cut into: one per [`MIN_CHUNK_ROWS`], at most
/// [`MAX_CHUNKS`], at least one.
pub fn chunks_of(rows: usize) -> usize {
    rows.div_ceil(MIN_CHUNK_ROWS).clamp(1, MAX_CHUNKS)
}

/// The rows of chunk `c` of `chunks` over `rows` rows: even cuts, in row order.
pub fn chunk(rows: usize, chunks: usize, c: usize) -> Range<usize> {
    rows * c / chunks..rows * (c + 1) / chunks
}

/// Runs a walk's chunks.
pub trait Spread: Sync + Send + std::fmt::Debug {
    /// `job(c)` once for every chunk `c` in `0..chunks`, in any order or at once.
    fn run(&self, chunks: usize, job: &(dyn Fn(usize) + Sync));
}

/// A lock that only its own chunk takes, so a chunk's job can write its part of a shared buffer; a
/// poisoned lock (a job that panicked, which the spread resumes) is taken as it is.
pub fn own<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `job(c)` for every chunk `c` in `0..chunks`, walked by `spread`; the results in chunk order. A
/// chunk the spread left out is walked here, in turn.
pub fn map<T: Send>(spread: &dyn Spread, chunks: usize, job: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let slots: Vec<Mutex<Option<T>>> = (0..chunks).map(|_| Mutex::new(None)).collect();
    spread.run(chunks, &|c| {
        let result = job(c);
        if let Some(slot) = slots.get(c) {
            *own(slot) = Some(result);
        }
    });
    slots
        .into_iter()
        .enumerate()
        .map(|(c, slot)| {
            let result = slot
                .into_inner()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            result.unwrap_or_else(|| job(c))
        })
        .collect()
}

/// Every chunk in turn, on the calling thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct InTurn;

impl Spread for InTurn {
    fn run(&self, chunks: usize, job: &(dyn Fn(usize) + Sync)) {
        (0..chunks).for_each(job);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_rows_in_order_and_depend_on_the_row_count_alone() {
        assert_eq!(chunks_of(0), 1);
        assert_eq!(chunks_of(MIN_CHUNK_ROWS), 1);
        assert_eq!(chunks_of(MIN_CHUNK_ROWS + 1), 2);
        assert_eq!(chunks_of(1_000_000), MAX_CHUNKS);
        for rows in [0, 1, 7, MIN_CHUNK_ROWS + 1, 1_000_003] {
            let chunks = chunks_of(rows);
            let mut next = 0;
            for c in 0..chunks {
                let range = chunk(rows, chunks, c);
                assert_eq!(range.start, next);
                next = range.end;
            }
            assert_eq!(next, rows);
        }
        assert_eq!(map(&InTurn, 3, |c| c * 10), vec![0, 10, 20]);
    }
}
