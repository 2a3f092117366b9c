//! Cooperative yield points for long-running throughput work (body parsing, learner intake, block
//! steps, the certificate): a thread that has opted in gives up its core at the next yield point once
//! `interval` has passed since it last did.
//!
//! Why: on a busy 2-core machine the kernel only re-decides who runs at a wake-up or at its tick
//! (250 Hz here, so every 4 ms). A `GET /v1/model` whose HTTP worker (or client) woke while a parser
//! or learner held the core and was not picked at that wake-up waited for the tick, and a whole
//! tick more if the next pick went to another throughput thread: this was the 3.9–4.4 ms p99 of
//! `GET /v1/model` under 10 000-sample bodies (`perf sched timehist`: the waiting thread had a shorter
//! slice and a higher weight, and still waited 4–18 ms behind a parser or learner in user space). A
//! `sched_yield` every few hundred microseconds is a scheduling point the tick does not give: under
//! EEVDF it moves the yielding thread's deadline back by one slice, so a woken latency thread runs
//! next. It costs one system call per interval (~0.5 µs per 200 µs), and gives nothing away when no
//! other thread is waiting.
//!
//! Off by default on every thread: the offline `fit` path and the tests never yield. The daemon
//! switches it on for its parser and learner threads (`server.yield_interval_us`). Kernels call
//! [`yield_point`] at natural boundaries (every few hundred rows), never inside a row.

use std::cell::Cell;
use std::time::{Duration, Instant};

thread_local! {
    /// The calling thread's yield interval; `None` = never yield (the default).
    static INTERVAL: Cell<Option<Duration>> = const { Cell::new(None) };
    /// When the calling thread last yielded (or opted in).
    static LAST: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// How many rows a kernel handles between two calls of [`yield_point`]: ~25–100 µs of work at
/// 100–400 ns a row, so a thread yields within a quarter of its interval of it falling due, while the
/// clock read (~25 ns) stays below 0.1% of the work.
pub const ROWS_BETWEEN_YIELD_POINTS: usize = 256;

/// Makes the calling thread yield at yield points every `interval`; `Duration::ZERO` switches it off.
pub fn enable_for_this_thread(interval: Duration) {
    INTERVAL.with(|i| i.set((!interval.is_zero()).then_some(interval)));
    LAST.with(|l| l.set(Some(Instant::now())));
}

/// Yields the core if the calling thread has opted in and its interval has passed since it last
/// yielded; says whether it did. One thread-local read when the thread has not opted in.
#[inline]
pub fn yield_point() -> bool {
    match INTERVAL.with(Cell::get) {
        None => false,
        Some(interval) => yield_if_due(interval),
    }
}

#[cold]
#[inline(never)]
fn yield_if_due(interval: Duration) -> bool {
    let now = Instant::now();
    let due = LAST.with(|l| {
        l.get()
            .is_none_or(|last| now.duration_since(last) >= interval)
    });
    if due {
        std::thread::yield_now();
        LAST.with(|l| l.set(Some(Instant::now())));
    }
    due
}

/// How many dense entries a scan over a d-vector handles between two yield points (~20–60 µs).
pub const ENTRIES_BETWEEN_YIELD_POINTS: usize = 1 << 16;

/// [`yield_point`] at every [`ROWS_BETWEEN_YIELD_POINTS`]-th row: `i` is the row's position in the
/// kernel's loop.
#[inline]
pub fn yield_point_at_row(i: usize) {
    yield_point_every(i, ROWS_BETWEEN_YIELD_POINTS);
}

/// [`yield_point`] at every `period`-th iteration of a loop (`i` counts from 0; `period > 0`).
#[inline]
pub fn yield_point_every(i: usize, period: usize) {
    if i % period == period - 1 {
        yield_point();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spins for `d` with a yield point between "rows"; returns how many yields happened.
    fn yields_while_busy_for(d: Duration) -> u32 {
        let start = Instant::now();
        let mut yields = 0;
        while start.elapsed() < d {
            yields += u32::from(yield_point());
        }
        yields
    }

    /// Off by default (so `fit` and the tests never yield); once on, a thread yields about once per
    /// interval of busy work, never more often; `ZERO` switches it off again.
    #[test]
    fn only_a_thread_that_opted_in_yields_and_at_most_once_per_interval() {
        std::thread::spawn(|| {
            assert_eq!(yields_while_busy_for(Duration::from_millis(5)), 0);

            enable_for_this_thread(Duration::from_millis(1));
            let yields = yields_while_busy_for(Duration::from_millis(30));
            // 30 at most; a loaded machine may hold the thread off the core past a few intervals.
            assert!(
                (5..=30).contains(&yields),
                "{yields} yields in 30 ms at 1 ms"
            );

            enable_for_this_thread(Duration::ZERO);
            assert_eq!(yields_while_busy_for(Duration::from_millis(5)), 0);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_row_loop_reaches_a_yield_point_every_rows_between_yield_points() {
        std::thread::spawn(|| {
            // A zero-length interval would mean "off": 1 ns makes every reached point due.
            enable_for_this_thread(Duration::from_nanos(1));
            let before = LAST.with(Cell::get).unwrap();
            for i in 0..ROWS_BETWEEN_YIELD_POINTS - 1 {
                yield_point_at_row(i);
            }
            assert_eq!(
                LAST.with(Cell::get).unwrap(),
                before,
                "no point before the 256th row"
            );
            yield_point_at_row(ROWS_BETWEEN_YIELD_POINTS - 1);
            assert!(LAST.with(Cell::get).unwrap() > before);
        })
        .join()
        .unwrap();
    }
}
