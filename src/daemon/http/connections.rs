//! The HTTP front's connection table: every open connection, its limits and timeouts, and the
//! sweeper that applies them.
//!
//! **Limits** ([`ConnectionLimits`], `[server]` keys). Every accepted connection is entered in a
//! table that knows whether it has a request in progress (the service wrapper counts them) and
//! when it started waiting for one (accepted, or its last response sent). A sweeper on the read thread
//! closes every connection with no request in progress that
//! - received the first byte of a request (or of a TLS handshake) and no complete head within
//!   `header_read_timeout_s` — slow-header clients; or
//! - received nothing for `keepalive_timeout_s` — idle sockets.
//!
//! (hyper's own `header_read_timeout` is not used: its clock starts when hyper starts waiting for a
//! head, i.e. at the end of the previous response, so it would also end every idle keep-alive
//! connection after the header timeout; the sweeper sees the first byte arrive.) A request body that
//! stalls for `body_idle_timeout_s` is cut where it is read (`ingest::source::http`), and the handler
//! answers 408. At most `max_connections` are open: at the limit a new connection closes the one with
//! no request in progress that has waited the longest, or is refused (closed at once) if every
//! connection is busy; both are counted (`thresher_http_connections_closed_total`). The daemon keeps
//! `max_connections` below its file-descriptor limit, so accepting never runs out of descriptors and
//! `/healthz` keeps answering however many idle sockets are opened; should `accept` still fail (other
//! descriptors, `ENFILE`), the loop closes the longest-idle connection, pauses briefly and goes on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::config::ConnectionLimits;
use crate::metrics::{closed, Metrics};

/// One open connection as the [`Table`] sees it. Times are milliseconds since the table's epoch.
pub(super) struct ConnState {
    /// Requests whose head has been read and whose response is not yet complete.
    in_progress: AtomicUsize,
    /// When it last started waiting for a request: accepted, or its last response completed.
    waiting_since: AtomicU64,
    /// When the first byte arrived since `waiting_since` (+1; 0 = none yet).
    head_started: AtomicU64,
    /// Set once the table has told it to close (it is then no longer counted against the limit).
    closing: AtomicBool,
    /// Woken once the table tells the connection to close; its task then drops it.
    pub(super) close: Notify,
}

impl ConnState {
    /// Notes that bytes arrived at `now_ms`: the start of a head, unless a request is in progress.
    pub(super) fn bytes_arrived(&self, now_ms: u64) {
        if self.in_progress.load(Ordering::Acquire) == 0 {
            let _ = self.head_started.compare_exchange(
                0,
                now_ms + 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
        }
    }
}

/// Every open connection, the limit and the timeouts the sweeper applies.
pub(super) struct Table {
    epoch: Instant,
    limits: ConnectionLimits,
    pub(super) metrics: Metrics,
    conns: Mutex<HashMap<u64, Arc<ConnState>>>,
    next_id: AtomicU64,
    /// Connections told to close that have not yet dropped their socket.
    pub(super) closing: AtomicUsize,
}

impl Table {
    pub(super) fn new(limits: ConnectionLimits, metrics: Metrics) -> Table {
        Table {
            epoch: Instant::now(),
            limits,
            metrics,
            conns: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            closing: AtomicUsize::new(0),
        }
    }

    /// `server.write_timeout_s`, for the connections' transports.
    pub(super) fn write_timeout(&self) -> Duration {
        self.limits.write_timeout
    }

    /// Milliseconds since the table's epoch.
    pub(super) fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Enters a new connection, closing the longest-idle one at the limit; `None` (refused, counted) if
    /// the limit is reached and every connection has a request in progress.
    pub(super) fn admit(self: &Arc<Self>) -> Option<Registration> {
        let live = {
            let conns = self.conns.lock();
            conns.len() - self.closing.load(Ordering::Acquire).min(conns.len())
        };
        if live >= self.limits.max_connections && !self.evict_longest_idle(closed::LIMIT_EVICTED) {
            self.metrics
                .http_connections_closed
                .with_label_values(&[closed::LIMIT_REFUSED])
                .inc();
            return None;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(ConnState {
            in_progress: AtomicUsize::new(0),
            waiting_since: AtomicU64::new(self.now_ms()),
            head_started: AtomicU64::new(0),
            closing: AtomicBool::new(false),
            close: Notify::new(),
        });
        let open = {
            let mut conns = self.conns.lock();
            conns.insert(id, conn.clone());
            conns.len()
        };
        self.metrics.http_connections.set(open as i64);
        Some(Registration {
            id,
            conn,
            table: self.clone(),
        })
    }

    /// Tells `conn` to close (once), counting it under `reason`.
    fn close(&self, conn: &ConnState, reason: &str) -> bool {
        if conn.closing.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.closing.fetch_add(1, Ordering::AcqRel);
        self.metrics
            .http_connections_closed
            .with_label_values(&[reason])
            .inc();
        conn.close.notify_one();
        true
    }

    /// Closes the connection with no request in progress that has waited the longest; false if every
    /// connection is busy.
    pub(super) fn evict_longest_idle(&self, reason: &str) -> bool {
        let victim = {
            let conns = self.conns.lock();
            conns
                .values()
                .filter(|c| {
                    c.in_progress.load(Ordering::Acquire) == 0 && !c.closing.load(Ordering::Acquire)
                })
                .min_by_key(|c| c.waiting_since.load(Ordering::Acquire))
                .cloned()
        };
        victim.is_some_and(|c| self.close(&c, reason))
    }

    /// Closes the connections past their header or keep-alive timeout.
    fn sweep_once(&self) {
        let now = self.now_ms();
        let header_ms = self.limits.header_read.as_millis() as u64;
        let keepalive_ms = self.limits.keepalive.as_millis() as u64;
        let expired: Vec<(Arc<ConnState>, &str)> = {
            let conns = self.conns.lock();
            conns
                .values()
                .filter(|c| {
                    c.in_progress.load(Ordering::Acquire) == 0 && !c.closing.load(Ordering::Acquire)
                })
                .filter_map(|c| match c.head_started.load(Ordering::Acquire) {
                    0 => {
                        let since = c.waiting_since.load(Ordering::Acquire);
                        (now.saturating_sub(since) >= keepalive_ms)
                            .then(|| (c.clone(), closed::IDLE_TIMEOUT))
                    }
                    started => (now.saturating_sub(started - 1) >= header_ms)
                        .then(|| (c.clone(), closed::HEADER_TIMEOUT)),
                })
                .collect()
        };
        for (conn, reason) in expired {
            self.close(&conn, reason);
        }
    }
}

/// How often the sweeper looks: a timeout fires at most this late.
fn sweep_period(limits: &ConnectionLimits) -> Duration {
    (limits.header_read.min(limits.keepalive) / 8)
        .clamp(Duration::from_millis(50), Duration::from_millis(500))
}

/// The sweeper: closes the connections past their timeouts, every [`sweep_period`], until aborted.
pub(super) async fn sweep(table: Arc<Table>) {
    let mut tick = tokio::time::interval(sweep_period(&table.limits));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        table.sweep_once();
    }
}

/// A connection's entry in the [`Table`]; removed when dropped (the connection task ends).
pub(super) struct Registration {
    id: u64,
    pub(super) conn: Arc<ConnState>,
    pub(super) table: Arc<Table>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let open = {
            let mut conns = self.table.conns.lock();
            conns.remove(&self.id);
            conns.len()
        };
        if self.conn.closing.load(Ordering::Acquire) {
            self.table.closing.fetch_sub(1, Ordering::AcqRel);
        }
        self.table.metrics.http_connections.set(open as i64);
    }
}

/// A request in progress on a connection, from its complete head to its response (or its
/// cancellation): such a connection is never closed by the limit or the timeouts.
pub(super) struct RequestInProgress {
    conn: Arc<ConnState>,
    table: Arc<Table>,
}

impl RequestInProgress {
    pub(super) fn begin(conn: &Arc<ConnState>, table: &Arc<Table>) -> Self {
        conn.in_progress.fetch_add(1, Ordering::AcqRel);
        conn.head_started.store(0, Ordering::Release);
        RequestInProgress {
            conn: conn.clone(),
            table: table.clone(),
        }
    }
}

impl Drop for RequestInProgress {
    fn drop(&mut self) {
        self.conn
            .waiting_since
            .store(self.table.now_ms(), Ordering::Release);
        self.conn.in_progress.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(max_connections: usize) -> Arc<Table> {
        Arc::new(Table::new(
            ConnectionLimits {
                header_read: Duration::from_secs(10),
                body_idle: Duration::from_secs(30),
                keepalive: Duration::from_secs(60),
                write_timeout: Duration::from_secs(10),
                max_connections,
            },
            Metrics::new(),
        ))
    }

    fn closed_count(table: &Table, reason: &str) -> u64 {
        table
            .metrics
            .http_connections_closed
            .with_label_values(&[reason])
            .get()
    }

    /// At the limit the connection idle the longest is told to close and the new one admitted; a busy
    /// connection is never chosen, and with every connection busy the new one is refused. Each is
    /// counted, and the gauge follows the table.
    #[test]
    fn at_the_limit_the_longest_idle_connection_makes_room() {
        let t = table(2);
        let older = t.admit().unwrap();
        let newer = t.admit().unwrap();
        older.conn.waiting_since.store(0, Ordering::Release);
        newer.conn.waiting_since.store(5, Ordering::Release);
        let busy = RequestInProgress::begin(&older.conn, &t);
        let third = t.admit().expect("the idle one makes room");
        assert!(
            newer.conn.closing.load(Ordering::Acquire),
            "the idle one closes"
        );
        assert!(!older.conn.closing.load(Ordering::Acquire), "busy: kept");
        assert_eq!(closed_count(&t, closed::LIMIT_EVICTED), 1);
        assert_eq!(
            t.metrics.http_connections.get(),
            3,
            "until it drops its socket"
        );
        drop(newer);
        assert_eq!(t.metrics.http_connections.get(), 2);
        assert_eq!(t.closing.load(Ordering::Acquire), 0);
        let _busy_too = RequestInProgress::begin(&third.conn, &t);
        assert!(t.admit().is_none(), "every connection busy: refused");
        assert_eq!(closed_count(&t, closed::LIMIT_REFUSED), 1);
        drop(busy);
        assert!(t.admit().is_some(), "idle again: evictable");
        assert!(older.conn.closing.load(Ordering::Acquire));
    }

    /// The sweeper closes a connection whose head started too long ago (header timeout) or that
    /// received nothing for the keep-alive time, and leaves busy and recent ones alone.
    #[test]
    fn the_sweeper_closes_slow_heads_and_idle_connections_only() {
        // An epoch 100 s back, so "10 s ago" is a valid time on the table's clock.
        let mut t = Arc::into_inner(table(10)).unwrap();
        t.epoch -= Duration::from_secs(100);
        let t = Arc::new(t);
        let now = t.now_ms();
        let [slow_head, idle, fresh_head, busy, recent] = [(); 5].map(|_| t.admit().unwrap());
        slow_head.conn.bytes_arrived(now - 10_001);
        idle.conn
            .waiting_since
            .store(now - 60_001, Ordering::Release);
        fresh_head
            .conn
            .waiting_since
            .store(now - 60_001, Ordering::Release);
        fresh_head.conn.bytes_arrived(now - 5_000);
        busy.conn.waiting_since.store(0, Ordering::Release);
        let _in_progress = RequestInProgress::begin(&busy.conn, &t);
        busy.conn.waiting_since.store(0, Ordering::Release);
        recent
            .conn
            .waiting_since
            .store(now - 1_000, Ordering::Release);
        t.sweep_once();
        let closing = |r: &Registration| r.conn.closing.load(Ordering::Acquire);
        assert!(closing(&slow_head) && closing(&idle));
        assert!(!closing(&fresh_head) && !closing(&busy) && !closing(&recent));
        assert_eq!(closed_count(&t, closed::HEADER_TIMEOUT), 1);
        assert_eq!(closed_count(&t, closed::IDLE_TIMEOUT), 1);
    }
}
