//! The calling thread's CPU time, shared by the CPU-cost examples (`learner_insert`,
//! `ingest_cpu`, `cluster_cost`; each includes this file with `#[path]`). Why CPU time and not wall time: this 2-core
//! machine is shared with builds and other benchmarks, and a thread's own CPU time barely moves when
//! another process takes the other core, where wall time would swing by 2x.

/// The calling thread's CPU time so far, nanoseconds (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu_ns() -> u128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer to a timespec, alive for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}

/// CPU milliseconds of the calling thread since `start_ns` (a [`thread_cpu_ns`] reading).
#[allow(dead_code)] // not every example that includes this file reports milliseconds
pub fn ms_since(start_ns: u128) -> f64 {
    (thread_cpu_ns() - start_ns) as f64 / 1e6
}

/// `median [min, max]` of CPU milliseconds.
#[allow(dead_code)] // as `ms_since`
pub fn summary(mut ms: Vec<f64>) -> String {
    ms.sort_by(f64::total_cmp);
    format!(
        "{:.2} [{:.2}, {:.2}]",
        ms[ms.len() / 2],
        ms[0],
        ms[ms.len() - 1]
    )
}
