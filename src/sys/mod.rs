//! OS-specific tuning, in one place: the only module with `libc` calls or `unsafe` system calls.
//! Thread priorities and time slices for the daemon's latency and throughput threads, and the
//! allocator's arena limit. Everything here is best effort: a failed call leaves the default and is
//! never an error.

use std::time::Duration;

/// Niceness of the body parser threads relative to the HTTP workers (nice 0).
pub const PARSER_NICE: i32 = 10;

/// Niceness of the learner threads: between the two. Why: under sustained load at nice 10, level with
/// the parsers, a learner spent ~40% of its time waiting for a core behind bodies it could not absorb
/// anyway (the parsed samples then wait in the queue, and further POSTs get 503); at nice 5 it keeps
/// up — no 503s, staleness p50 0.5 s instead of 0.8 s, the same ingest rate (`examples/loadgen`).
pub const LEARNER_NICE: i32 = 5;

/// Sets the calling thread's nice value. On Linux the nice value is per thread, so the learners and
/// the body parsers — throughput work — yield the two cores to the HTTP workers, whose requests
/// (GET /v1/model above all) are latency work. Best effort: a failure leaves the default.
pub fn set_thread_nice(nice: i32) {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority only reads its integer arguments; `who = 0` is the calling thread.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, nice);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
}

/// How the throughput threads (body parsers and learners) are scheduled: `server.worker_slice_us` and
/// `server.yield_interval_us`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorkerScheduling {
    /// The time slice they ask for, nanoseconds; 0 = the kernel's default.
    pub slice_ns: u64,
    /// How often they yield at the kernels' yield points ([`crate::courtesy`]); zero = never.
    pub yield_interval: Duration,
}

/// Sets the calling thread's nice value, its time slice (unless `slice_ns` is 0) and its yield interval
/// (the throughput threads: body parsers and learners), once per thread: a parser runs on tokio's
/// blocking pool and calls this before every body.
pub fn set_throughput_scheduling(nice: i32, scheduling: WorkerScheduling) {
    thread_local! {
        static DONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if DONE.with(|done| done.replace(true)) {
        return;
    }
    set_thread_nice(nice);
    if scheduling.slice_ns > 0 {
        // Best effort, like the nice value: an old kernel keeps its default slice.
        let _ = request_short_slice(scheduling.slice_ns);
    }
    crate::courtesy::enable_for_this_thread(scheduling.yield_interval);
}

/// Sets the calling HTTP thread's scheduling (the read thread and the runtime's workers), once per
/// thread. With `server.realtime_http`: SCHED_FIFO (priority 1). Why: on 2 busy cores a thread woken
/// for a `GET /v1/model` waited milliseconds in the run queue behind nice-0 work (the load generator,
/// other processes); a FIFO thread runs at once. What bounds the risk: these threads only shuttle
/// requests (parsing runs on the blocking pool, learning on nice +5 threads) and the kernel's RT
/// throttling leaves 5% of each second to everything else. Best effort: without CAP_SYS_NICE it logs
/// one warning per thread and the thread keeps the default policy.
///
/// Without it, each thread asks for a `server.http_slice_us` time slice ([`request_short_slice`]),
/// which needs no privilege.
pub fn set_latency_scheduling(realtime: bool, slice_ns: u64) {
    thread_local! {
        static DONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if DONE.with(|d| d.replace(true)) {
        return;
    }
    if !realtime {
        if slice_ns == 0 {
            return;
        }
        if let Err(error) = request_short_slice(slice_ns) {
            tracing::debug!(%error, "cannot shorten an HTTP thread's time slice; it keeps the default");
        }
        return;
    }
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 1 };
        // RESET_ON_FORK: threads a worker spawns (the blocking pool that parses bodies) start under the
        // default policy instead of inheriting FIFO.
        let policy = libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK;
        // SAFETY: `0` is the calling thread; `param` is a valid sched_param for the call's duration.
        if unsafe { libc::sched_setscheduler(0, policy, &param) } != 0 {
            tracing::warn!(
                error = %std::io::Error::last_os_error(),
                "server.realtime_http: cannot switch an HTTP thread to SCHED_FIFO; it keeps the default policy"
            );
        }
    }
}

/// The time slice the HTTP workers ask the scheduler for: 100 µs, the shortest Linux grants.
pub const LATENCY_SLICE_NS: u64 = 100_000;

/// Asks the scheduler for a short time slice for the calling thread (`slice_ns`), keeping its policy
/// and nice value: Linux's EEVDF scheduler (6.12 and later) gives a thread with a shorter slice an
/// earlier virtual deadline, so when it wakes — an HTTP worker with a `GET /v1/model` to answer — it
/// runs next, preempting longer-slice work (body parsing, learning) instead of waiting out the
/// running thread's slice (~3 ms). No privilege is needed; older kernels ignore the request. Returns
/// the OS error if the call itself is refused.
pub fn request_short_slice(slice_ns: u64) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        /// `struct sched_attr` (SCHED_ATTR_SIZE_VER0, 48 bytes) of `sched_setattr(2)`.
        #[repr(C)]
        struct SchedAttr {
            size: u32,
            sched_policy: u32,
            sched_flags: u64,
            sched_nice: i32,
            sched_priority: u32,
            sched_runtime: u64,
            sched_deadline: u64,
            sched_period: u64,
        }
        // SAFETY: getpriority only reads its integer arguments; `who = 0` is the calling thread.
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let attr = SchedAttr {
            size: std::mem::size_of::<SchedAttr>() as u32,
            sched_policy: libc::SCHED_OTHER as u32,
            sched_flags: 0,
            sched_nice: nice,
            sched_priority: 0,
            sched_runtime: slice_ns,
            sched_deadline: 0,
            sched_period: 0,
        };
        // SAFETY: `0` is the calling thread; `attr` is a valid sched_attr that outlives the call and
        // whose `size` field says how much of it the kernel may read.
        let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = slice_ns;
    Ok(())
}

/// glibc's `M_ARENA_MAX` for the daemon, unless `MALLOC_ARENA_MAX` is set.
const MALLOC_ARENAS: i32 = 2;

/// Caps glibc's malloc arenas before any thread starts. Why: by default glibc gives each busy thread its
/// own arena (up to 8 per core), and the parse pool's threads — which allocate every sample the learners
/// later free — left RSS creeping by ~25% over a 3M-sample stream (`benches/rss_soak.sh`: 776 → 990 MiB);
/// with two arenas it is flat. An explicit `MALLOC_ARENA_MAX` in the environment wins.
pub fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only reads its integer arguments; called before the runtime's threads exist.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, MALLOC_ARENAS);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel takes the request and the thread runs with the asked-for slice (where the kernel
    /// reports slices: `se.slice` in `/proc/thread-self/sched`, Linux 6.12 and later).
    #[test]
    fn a_thread_gets_the_short_slice_it_asks_for() {
        std::thread::spawn(|| {
            request_short_slice(LATENCY_SLICE_NS).expect("sched_setattr");
            let sched = std::fs::read_to_string("/proc/thread-self/sched").unwrap_or_default();
            if let Some(line) = sched.lines().find(|l| l.starts_with("se.slice")) {
                let slice: u64 = line.split(':').nth(1).unwrap().trim().parse().unwrap();
                assert_eq!(slice, LATENCY_SLICE_NS, "{line}");
            }
        })
        .join()
        .unwrap();
    }

    /// A parser or learner thread keeps its lowered priority and gets the `server.worker_slice_us`
    /// slice; asking again on the same thread changes nothing (the blocking pool reuses threads).
    #[test]
    fn throughput_threads_get_their_nice_value_and_slice_once() {
        std::thread::spawn(|| {
            let scheduling = |slice_ns| WorkerScheduling {
                slice_ns,
                yield_interval: Duration::from_micros(200),
            };
            set_throughput_scheduling(PARSER_NICE, scheduling(1_000_000));
            set_throughput_scheduling(LEARNER_NICE, scheduling(2_000_000));
            // SAFETY: getpriority only reads its integer arguments; `who = 0` is this thread.
            let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
            assert_eq!(nice, PARSER_NICE);
            let sched = std::fs::read_to_string("/proc/thread-self/sched").unwrap_or_default();
            if let Some(line) = sched.lines().find(|l| l.starts_with("se.slice")) {
                let slice: u64 = line.split(':').nth(1).unwrap().trim().parse().unwrap();
                assert_eq!(slice, 1_000_000, "{line}");
            }
        })
        .join()
        .unwrap();
    }
}
