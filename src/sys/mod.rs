//! OS-specific tuning, in one place: the only module with `libc` calls or `unsafe` system calls
//! (SIMD intrinsics and prefetches in the kernels are not system calls and live with their kernels).
//! Everything here is best effort: a failed call leaves the kernel's default and is never an error.
//! Two calls are not tuning and do report errors: [`try_lock_exclusive`] (the one owner of a data
//! directory) and [`is_disk_full`] (a failed write named for what it is).
//!
//! What the daemon asks of the OS, each re-measured under full ingest before it was kept
//! (`examples/loadgen`, `GET /v1/model` p99 and samples/s, old and new settings alternating on the same
//! harness; the tables are in `docs/benchmarks/scheduling.md`, "Current measurements", binaries at
//! `4f2c278`):
//!
//! | mechanism | default | where |
//! | --- | --- | --- |
//! | nice +10 body parsers, +5 learners | on (no key) | [`set_throughput_scheduling`] |
//! | 1 ms EEVDF slice for parsers and learners | on, `server.worker_slice_us = 1000` | [`set_throughput_scheduling`] |
//! | yield points between rows / blocks in the drivers | on, `server.yield_interval_us = 1000` | [`yield_point`] |
//! | two glibc malloc arenas | on (`MALLOC_ARENA_MAX` wins) | [`limit_malloc_arenas`] |
//! | transparent huge pages for dense d-vectors | on | [`advise_huge_pages`] |
//! | `RLIMIT_NOFILE` soft limit raised to the hard limit | on (no key) | [`raise_fd_limit`] |
//!
//! One more mechanism that keeps `GET /v1/model` fast is not an OS call and lives elsewhere: the HTTP
//! read thread (`daemon::http`). Dropped after the re-measurement, with their keys: `SCHED_FIFO` HTTP
//! threads (`server.realtime_http`), a short time slice for the HTTP threads (`server.http_slice_us`),
//! a fixed receive buffer per connection (`server.recv_buffer_kib`) and the learners' ingest-first step
//! share (`ingest.busy_step_share`). No numerical kernel makes a scheduling call: the yield points sit
//! in the learner loop and the body-parsing loop only.

use std::time::Duration;

/// Niceness of the body parser threads relative to the HTTP threads (nice 0).
pub const PARSER_NICE: i32 = 10;

/// Niceness of the learner threads: between the two. Why: under sustained load at nice 10, level with
/// the parsers, a learner spent ~40% of its time waiting for a core behind bodies it could not absorb
/// anyway (the parsed samples then wait in the queue, and further POSTs get 503); at nice 5 it keeps
/// up — no 503s, staleness p50 0.5 s instead of 0.8 s, the same ingest rate (`examples/loadgen`).
pub const LEARNER_NICE: i32 = 5;

/// Niceness of a learner's background solve (the best-subset learner's outer steps on a copy of the
/// window, `learner::subset::away`): below the parsers. Why: spawned from a thread at nice 0, the
/// solve ran level with the HTTP threads and above the parsers and the learner, took ~90% of a core
/// under load, and the window took 0.51-0.56 M samples/s; at 15, 0.78 M, at 0.3 points less held-out
/// accuracy at the end of a 10 s burst (a solve that gets a core only when ingest leaves one converges
/// once the burst ends; `docs/benchmarks/learners.md`).
pub const SOLVE_NICE: i32 = 15;

/// Sets the calling thread's nice value (per thread on Linux). Best effort: a failure leaves the
/// default.
///
/// On by default, no key: parsers at [`PARSER_NICE`], learners at [`LEARNER_NICE`], so the throughput
/// work leaves the cores to the HTTP threads. Re-measured with the binary of `4f2c278` (6 alternating
/// pairs per workload, load 5–15): without it `GET /v1/model` p99 rose in 5 of 6 pairs with LIBSVM
/// 10 000-sample bodies (median 0.37 → 1.10 ms) and in 5 of 6 with 1 000 (0.37 → 0.52 ms), and
/// 10 000-body ingest fell in 5 of 6 (median 0.80 → 0.58 M samples/s).
pub fn set_thread_nice(nice: i32) {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority only reads its integer arguments; `who = 0` is the calling thread.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, nice);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
}

/// The calling thread's nice value.
pub fn thread_nice() -> i32 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: getpriority only reads its integer arguments; `who = 0` is the calling thread.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// How the throughput threads (body parsers and learners) are scheduled: `server.worker_slice_us`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorkerScheduling {
    /// The time slice they ask for, nanoseconds; 0 = the kernel's default.
    pub slice_ns: u64,
    /// How often they yield at their drivers' yield points ([`yield_point`]); zero = never.
    pub yield_interval: Duration,
}

/// Sets the calling throughput thread's nice value and its time slice (unless `slice_ns` is 0), once
/// per thread: a parser runs on tokio's blocking pool and calls this before every body.
///
/// The slice is on by default (`server.worker_slice_us = 1000`, against the kernel's ~3 ms): a busy
/// parser or learner gives its core up sooner to a woken HTTP thread. Re-measured with the binary of
/// `4f2c278` (6 alternating pairs per workload, load 5–15): without it, with LIBSVM 10 000-sample
/// bodies, p99 was worse in 5 of 6 pairs (median 0.37 → 1.96 ms) and ingest lower in 5 of 6 (0.80 →
/// 0.49 M samples/s); with 1 000, p99 worse in 5 of 6 (0.37 → 0.57 ms) at ~15% more ingest (0.80 →
/// 0.92 M).
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
    enable_yields_for_this_thread(scheduling.yield_interval);
}

thread_local! {
    /// The calling thread's yield interval; `None` = never yield (the default).
    static YIELD_INTERVAL: std::cell::Cell<Option<Duration>> = const { std::cell::Cell::new(None) };
    /// When the calling thread last yielded (or opted in).
    static LAST_YIELD: std::cell::Cell<Option<std::time::Instant>> =
        const { std::cell::Cell::new(None) };
}

/// Rows a driver loop handles between two calls of [`yield_point`] ([`yield_point_every`]): ~25–100 µs
/// of parsing at 100–400 ns a row, so the clock read (~25 ns) stays below 0.1% of the work.
pub const ROWS_BETWEEN_YIELD_POINTS: usize = 256;

/// Makes the calling thread yield at [`yield_point`] every `interval`; `Duration::ZERO` switches it off.
pub fn enable_yields_for_this_thread(interval: Duration) {
    YIELD_INTERVAL.with(|i| i.set((!interval.is_zero()).then_some(interval)));
    LAST_YIELD.with(|l| l.set(Some(std::time::Instant::now())));
}

/// Gives up the core (`sched_yield`) if the calling thread has opted in and its interval has passed
/// since it last did; says whether it yielded. One thread-local read on a thread that has not opted in
/// (`fit`, the tests, the HTTP threads).
///
/// Called by the drivers of throughput work only, between units of it — the learner loop between an
/// insert, a block step and a certificate, the body-parsing loop between rows — never from inside a
/// numerical kernel. Why: the kernel re-decides who runs only at a wake-up or at its 4 ms tick, and
/// under EEVDF a yield moves the yielder's deadline back a slice, so a woken HTTP thread or client runs
/// next. On by default every 1 000 µs (`server.yield_interval_us`). Measured in this placement (`88a0eaf`,
/// the same code as here) against the build without any yield point (`7819226`), alternating, load
/// 2.5–4.6 (`docs/benchmarks/scheduling.md`, sets 7–8): GET p99 0.18–0.77 ms against 1.15–1.98 ms with
/// LIBSVM 10 000-sample bodies and 0.24–0.46 ms against 1.03–1.35 ms with 1 000, in all 12 pairs; the
/// price is ingest, 5–10% with 10 000-sample bodies and ~17% with 1 000 (0.95 against 1.15 M samples/s),
/// which `server.yield_interval_us = 0` takes back. Why 1 000 µs and not 200: at `f191249`, 2 rounds,
/// load 3.1–4.1, 1 000-sample bodies took 0.96–0.98 M samples/s at 200 µs, 1.00 at 1 000 µs and
/// 1.11–1.13 with no yields, for a GET p99 of 0.31–0.36, 0.46–0.71 and 1.11–1.25 ms; with 10 000-sample
/// bodies 1.06–1.07, 1.06–1.11 and 1.10 M/s for 0.47–1.42, 0.50–0.76 and 1.22–1.70 ms. 1 000 µs keeps
/// both daemon targets (≥ 1 M samples/s, p99 ≤ 2 ms) with the tail far from its bound.
#[inline]
pub fn yield_point() -> bool {
    match YIELD_INTERVAL.with(std::cell::Cell::get) {
        None => false,
        Some(interval) => yield_if_due(interval),
    }
}

/// [`yield_point`] at every `period`-th iteration of a driver loop (`i` counts from 0; `period > 0`).
#[inline]
pub fn yield_point_every(i: usize, period: usize) {
    if i % period == period - 1 {
        yield_point();
    }
}

#[cold]
#[inline(never)]
fn yield_if_due(interval: Duration) -> bool {
    let now = std::time::Instant::now();
    let due = LAST_YIELD.with(|l| {
        l.get()
            .is_none_or(|last| now.duration_since(last) >= interval)
    });
    if due {
        std::thread::yield_now();
        LAST_YIELD.with(|l| l.set(Some(std::time::Instant::now())));
    }
    due
}

/// Asks the scheduler for a short time slice for the calling thread (`slice_ns`), keeping its policy
/// and nice value: Linux's EEVDF scheduler (6.12 and later) gives a thread with a shorter slice an
/// earlier virtual deadline, so when it wakes it runs next, preempting longer-slice work instead of
/// waiting out the running thread's slice. No privilege is needed; older kernels ignore the request.
/// Returns the OS error if the call itself is refused.
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
        let nice = thread_nice();
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

/// The process's open-file limit (`RLIMIT_NOFILE`) before and after [`raise_fd_limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdLimit {
    /// The soft limit found at start.
    pub was: u64,
    /// The soft limit in force now: the most file descriptors the process may hold.
    pub soft: u64,
    /// The hard limit (the ceiling an unprivileged process may raise its soft limit to).
    pub hard: u64,
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit and returns both. Why: every open connection holds
/// a descriptor, and a soft limit of 1024 (a common default) ran the daemon out of them under many idle
/// connections (`accept failed … Too many open files`). Best effort: if the raise is refused, the
/// limits in force are returned; `Err` only if they cannot even be read.
pub fn raise_fd_limit() -> std::io::Result<FdLimit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` through a valid pointer to a local.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let was = limit.rlim_cur;
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads one `rlimit` through a valid pointer to a local.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit = raised;
        }
    }
    Ok(FdLimit {
        was,
        soft: limit.rlim_cur,
        hard: limit.rlim_max,
    })
}

/// Takes an exclusive advisory lock (`flock(LOCK_EX | LOCK_NB)`) on `file` without waiting:
/// `Ok(false)` if another open file description holds it. The kernel releases it when the file is
/// closed or the process ends, however it ends (kill -9 included), so a lock never outlives its owner.
/// Used for the one owner of a data directory (`daemon::datadir`).
pub fn try_lock_exclusive(file: &std::fs::File) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor the borrowed `File` keeps open for the call.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// Whether `e` is "no space left on device" (`ENOSPC`) or a quota exceeded (`EDQUOT`): a full disk,
/// which an operator fixes differently from a missing or forbidden path.
pub fn is_disk_full(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

/// glibc's `M_ARENA_MAX` for the daemon, unless `MALLOC_ARENA_MAX` is set.
const MALLOC_ARENAS: i32 = 2;

/// Caps glibc's malloc arenas before any thread starts. On by default (an explicit `MALLOC_ARENA_MAX`
/// in the environment wins); a memory mechanism (`a48c3c6`), not re-measured with the scheduling ones.
/// Why: by
/// default glibc gives each busy thread its own arena (up to 8 per core), and the parse pool's threads
/// — which allocate every sample the learners later free — left RSS creeping by ~25% over a 3M-sample
/// stream (`benches/rss_soak.sh`: 776 → 990 MiB); with two arenas it is flat.
pub fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only reads its integer arguments; called before the runtime's threads exist.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, MALLOC_ARENAS);
        }
    }
}

/// Asks Linux to back the allocation at `ptr` of `bytes` bytes (a buffer's capacity, not just its
/// length) with transparent huge pages: `madvise(MADV_HUGEPAGE)`, a hint, nothing on other systems or
/// for a buffer smaller than one huge page. On by default for the solvers' dense d-vectors: the binary
/// installs it as [`crate::sparse::reserve_dense`]'s hint (`sparse::set_dense_advice`, which says why); the system's THP mode here is `madvise`, so nothing is huge unless asked. A memory
/// mechanism, not re-measured with the scheduling ones: at `5056e54` the daemon went from 0 to 32 MiB+
/// of huge pages and its learner CPU fell ~6% under load (`docs/benchmarks/learners.md`).
pub fn advise_huge_pages(ptr: *const u8, bytes: usize) {
    #[cfg(target_os = "linux")]
    {
        /// The smallest buffer worth advising: one huge page.
        const HUGE_PAGE_BYTES: usize = 2 << 20;
        const PAGE_BYTES: usize = 4096;
        if bytes >= HUGE_PAGE_BYTES {
            // The advice covers whole pages: from the page holding the first element (a large
            // allocation is a mapping of its own, so its first page is the allocator's header and
            // this buffer) to the last whole page inside the buffer.
            let start = ptr as usize & !(PAGE_BYTES - 1);
            let end = (ptr as usize + bytes) & !(PAGE_BYTES - 1);
            // SAFETY: `madvise(MADV_HUGEPAGE)` changes no memory contents and no mapping's
            // permissions; it only marks the range as eligible for huge pages. The range lies within
            // mapped memory (this buffer and, at most, the rest of the page before it).
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After the raise the soft limit is the hard one (an unprivileged process may always raise it that
    /// far), the OS agrees, and a second call finds nothing left to raise.
    #[test]
    fn the_fd_limit_is_raised_to_the_hard_limit() {
        let first = raise_fd_limit().unwrap();
        assert!(first.was <= first.soft);
        assert_eq!(first.soft, first.hard);
        let again = raise_fd_limit().unwrap();
        assert_eq!(
            (again.was, again.soft, again.hard),
            (first.soft, first.soft, first.hard)
        );
    }

    /// Spins for `d` with a yield point between "rows"; returns how many yields happened.
    fn yields_while_busy_for(d: Duration) -> u32 {
        let start = std::time::Instant::now();
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

            enable_yields_for_this_thread(Duration::from_millis(1));
            let yields = yields_while_busy_for(Duration::from_millis(30));
            // 30 at most; a loaded machine may hold the thread off the core past a few intervals.
            assert!(
                (5..=30).contains(&yields),
                "{yields} yields in 30 ms at 1 ms"
            );

            enable_yields_for_this_thread(Duration::ZERO);
            assert_eq!(yields_while_busy_for(Duration::from_millis(5)), 0);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_row_loop_reaches_a_yield_point_every_rows_between_yield_points() {
        std::thread::spawn(|| {
            // A zero-length interval would mean "off": 1 ns makes every reached point due.
            enable_yields_for_this_thread(Duration::from_nanos(1));
            let before = LAST_YIELD.with(std::cell::Cell::get).unwrap();
            for i in 0..ROWS_BETWEEN_YIELD_POINTS - 1 {
                yield_point_every(i, ROWS_BETWEEN_YIELD_POINTS);
            }
            assert_eq!(
                LAST_YIELD.with(std::cell::Cell::get).unwrap(),
                before,
                "no point before the 256th row"
            );
            yield_point_every(ROWS_BETWEEN_YIELD_POINTS - 1, ROWS_BETWEEN_YIELD_POINTS);
            assert!(LAST_YIELD.with(std::cell::Cell::get).unwrap() > before);
        })
        .join()
        .unwrap();
    }

    /// The calling thread's time slice is `ns`, where the kernel reports slices (`se.slice` in
    /// `/proc/thread-self/sched`, Linux 6.12 and later); elsewhere nothing to check.
    fn assert_slice_where_reported(ns: u64) {
        let sched = std::fs::read_to_string("/proc/thread-self/sched").unwrap_or_default();
        if let Some(line) = sched.lines().find(|l| l.starts_with("se.slice")) {
            let slice: u64 = line.split(':').nth(1).unwrap().trim().parse().unwrap();
            assert_eq!(slice, ns, "{line}");
        }
    }

    /// The kernel takes the request and the thread runs with the asked-for slice (where the kernel
    /// reports slices: `se.slice` in `/proc/thread-self/sched`, Linux 6.12 and later).
    #[test]
    fn a_thread_gets_the_short_slice_it_asks_for() {
        std::thread::spawn(|| {
            request_short_slice(100_000).expect("sched_setattr");
            assert_slice_where_reported(100_000);
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
            assert_eq!(thread_nice(), PARSER_NICE);
            assert_slice_where_reported(1_000_000);
        })
        .join()
        .unwrap();
    }
}
