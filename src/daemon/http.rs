//! The HTTP front: one listening socket, two places to serve a connection.
//!
//! A dedicated **read thread** (a current-thread tokio runtime on its own OS thread) accepts every
//! connection and peeks at the first byte of its first request. `P` (POST, PUT, PATCH: a request body
//! — samples to learn, samples to predict) hands the connection to the multi-threaded runtime, whose
//! workers read bodies and hand them to the parsers.
//! Anything else (`GET /v1/model`, `/metrics`, the health checks) is served on the read thread itself,
//! which never reads a large body. A keep-alive connection stays where its first request put it, with
//! one exception: a request with a body that arrives on the read thread is served there and answered
//! with `Connection: close`, so a pooled client whose first request was a read does not go on sending
//! every body through the read thread — its next connection is routed by its own first request. (A
//! read on a runtime connection is served there, as before this split.)
//!
//! Why: under full ingest, the runtime's workers spend their share of the two cores copying
//! multi-megabyte bodies out of their sockets. A `GET` queued behind such a read on a worker, and a
//! worker that has used its share loses the scheduler's pick at its wake-up to threads that have not.
//! The read thread sleeps between small requests, so it wins that pick (`perf sched timehist`: its
//! wake-up delay p99 0.09 ms where the workers' was 2.4–2.9 ms, in an experiment serving a second port).
//! On by default, no key. Re-measured with the binary of `4f2c278` under full ingest (3 alternating
//! pairs per workload, load 5–11; `docs/benchmarks/scheduling.md`): with every connection served on
//! the runtime instead, `GET /v1/model` p99 rose in 6 of 6 pairs — median 0.32 → 2.86 ms with LIBSVM
//! 10 000-sample bodies, 0.38 → 2.68 ms with 1 000.
//!
//! Shutdown: when `stop` resolves the read thread stops accepting, asks every connection on either
//! runtime to finish its request in flight and close ([`GracefulShutdown`]), and waits up to `grace`.
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
//!
//! **TLS** (optional, rustls): with a certificate, each connection's handshake runs on the runtime
//! (bounded by the header timeout) and the connection is served there: the read-thread split above
//! needs the first byte of the plain request, which TLS hides.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::Response;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Handle;
use tokio::sync::{watch, Notify};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

pub use crate::config::ConnectionLimits;
use crate::config::TlsFiles;
use crate::metrics::{closed, Metrics};

/// Where a connection is served, from the first byte of its first request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Served {
    /// On the read thread: no request body expected.
    ReadThread,
    /// On the multi-threaded runtime: a request with a body.
    Runtime,
}

fn served_by(first_byte: Option<u8>) -> Served {
    match first_byte {
        Some(b'P') => Served::Runtime,
        _ => Served::ReadThread,
    }
}

/// How connections are admitted and served: limits, TLS and the metrics they report to.
#[derive(Clone)]
pub struct Front {
    pub limits: ConnectionLimits,
    /// `None`: plain HTTP.
    pub tls: Option<TlsAcceptor>,
    pub metrics: Metrics,
}

/// A certificate or key that cannot serve TLS; the start stops with it.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the TLS certificate {} (server.tls_cert_file): {reason}", path.display())]
    Cert {
        path: std::path::PathBuf,
        reason: String,
    },
    #[error("cannot read the TLS private key {} (server.tls_key_file): {reason}", path.display())]
    Key {
        path: std::path::PathBuf,
        reason: String,
    },
    #[error("the TLS certificate {} and key {} do not make a server configuration: {reason}", cert.display(), key.display())]
    Config {
        cert: std::path::PathBuf,
        key: std::path::PathBuf,
        reason: String,
    },
}

/// Builds the TLS acceptor from PEM files: the certificate chain (leaf first) and its private key
/// (PKCS#8, PKCS#1 or SEC1). rustls with the *ring* provider; TLS 1.2 and 1.3; ALPN offers h2 and
/// http/1.1.
pub fn tls_acceptor(files: &TlsFiles) -> Result<TlsAcceptor, TlsError> {
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let cert_error = |reason: String| TlsError::Cert {
        path: files.cert.clone(),
        reason,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|e| cert_error(e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| cert_error(e.to_string()))?;
    if certs.is_empty() {
        return Err(cert_error("no PEM CERTIFICATE block in it".into()));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| TlsError::Key {
        path: files.key.clone(),
        reason: e.to_string(),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
        .map_err(|e| TlsError::Config {
            cert: files.cert.clone(),
            key: files.key.clone(),
            reason: e.to_string(),
        })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Starts the read thread serving `app` on `listener` (a non-blocking std listener: it is registered
/// with the read thread's runtime there), handing body connections to `bodies`. The returned handle
/// yields the accept loop's outcome once `stop` has resolved and the connections have closed or
/// `grace` has passed.
pub fn spawn(
    listener: std::net::TcpListener,
    app: Router,
    bodies: Handle,
    stop: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
    front: Front,
) -> std::io::Result<std::thread::JoinHandle<std::io::Result<()>>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let app = Apps {
        read_thread: app
            .clone()
            .layer(axum::middleware::from_fn(close_after_a_body)),
        runtime: app,
    };
    std::thread::Builder::new()
        .name("thresher-read".into())
        .spawn(move || {
            runtime.block_on(async move {
                let listener = TcpListener::from_std(listener)?;
                serve(listener, app, bodies, stop, grace, front).await;
                Ok(())
            })
        })
}

/// The router as served on each side.
#[derive(Clone)]
struct Apps {
    /// With [`close_after_a_body`].
    read_thread: Router,
    runtime: Router,
}

/// On the read thread: closes the connection after a request with a body (see the module docs).
async fn close_after_a_body(request: Request, next: Next) -> Response {
    let has_body = matches!(
        *request.method(),
        Method::POST | Method::PUT | Method::PATCH
    );
    let mut response = next.run(request).await;
    if has_body {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

async fn serve(
    listener: TcpListener,
    app: Apps,
    bodies: Handle,
    stop: impl Future<Output = ()>,
    grace: Duration,
    front: Front,
) {
    let graceful = GracefulShutdown::new();
    let table = Arc::new(Table::new(front.limits, front.metrics.clone()));
    let (shutdown_tx, shutdown) = watch::channel(false);
    let sweeper = tokio::spawn(sweep(table.clone()));
    let mut last_accept_log: Option<Instant> = None;
    tokio::pin!(stop);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = &mut stop => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                accept_failed(&table, error, &mut last_accept_log).await;
                continue;
            }
        };
        let Some(registration) = table.admit() else {
            drop(stream); // every connection busy: refused (counted)
            continue;
        };
        if table.closing.load(Ordering::Relaxed) > 0 {
            // Let the connections just told to close (here or on the runtime) drop their sockets before
            // the next accept, so descriptors are freed as fast as they are taken.
            tokio::task::yield_now().await;
        }
        let conn = Connection {
            app: app.clone(),
            bodies: bodies.clone(),
            watcher: graceful.watcher(),
            shutdown: shutdown.clone(),
            registration,
        };
        match &front.tls {
            None => {
                tokio::spawn(conn.serve_plain(stream));
            }
            Some(tls) => match stream.into_std() {
                Ok(stream) => {
                    let (tls, header_read) = (tls.clone(), front.limits.header_read);
                    bodies.spawn(conn.serve_tls(stream, tls, header_read));
                }
                Err(error) => tracing::debug!(%error, "cannot hand a connection over"),
            },
        }
    }
    drop(listener);
    sweeper.abort();
    let _ = shutdown_tx.send(true);
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after {grace:?}; closing them");
    }
}

/// An accept that failed: counted and logged (at most every few seconds), and followed by a short
/// pause so a persistent error (out of file descriptors) does not spin. Out of descriptors, the
/// longest-idle connection is closed too, so the next accept can succeed.
async fn accept_failed(table: &Table, error: std::io::Error, last_log: &mut Option<Instant>) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        error.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    ) {
        return; // that connection only
    }
    table.metrics.http_accept_errors.inc();
    let out_of_fds = matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE));
    if out_of_fds {
        table.evict_longest_idle(closed::LIMIT_EVICTED);
    }
    if last_log.is_none_or(|at| at.elapsed() >= Duration::from_secs(5)) {
        *last_log = Some(Instant::now());
        tracing::error!(%error, "accept failed; pausing {ACCEPT_PAUSE:?} and going on");
    }
    tokio::time::sleep(ACCEPT_PAUSE).await;
}

/// The pause after a failed accept.
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// What a connection task needs.
struct Connection {
    app: Apps,
    bodies: Handle,
    watcher: Watcher,
    shutdown: watch::Receiver<bool>,
    registration: Registration,
}

impl Connection {
    /// A plain connection: routed by its first byte (module docs), served until it closes, the
    /// shutdown asks it to, or the table closes it (limit, timeouts).
    async fn serve_plain(self, stream: TcpStream) {
        let state = self.registration.conn.clone();
        let mut shutdown = self.shutdown.clone();
        let mut first = [0u8; 1];
        let first_byte = tokio::select! {
            peeked = stream.peek(&mut first) => match peeked {
                Ok(1) => Some(first[0]),
                _ => None,
            },
            _ = state.close.notified() => return,
            _ = shutdown.wait_for(|stop| *stop) => return,
        };
        if first_byte.is_some() {
            state.bytes_arrived(self.registration.table.now_ms());
        }
        match served_by(first_byte) {
            Served::ReadThread => {
                let app = self.app.read_thread.clone();
                self.serve(stream, app).await
            }
            Served::Runtime => match stream.into_std() {
                Ok(stream) => {
                    let bodies = self.bodies.clone();
                    bodies.spawn(async move {
                        // Registered with the runtime that polls it from here on.
                        match TcpStream::from_std(stream) {
                            Ok(stream) => {
                                let app = self.app.runtime.clone();
                                self.serve(stream, app).await
                            }
                            Err(error) => {
                                tracing::debug!(%error, "cannot hand a connection over")
                            }
                        }
                    });
                }
                Err(error) => tracing::debug!(%error, "cannot hand a connection over"),
            },
        }
    }

    /// A TLS connection (on the runtime): handshake within the header timeout, then served there.
    async fn serve_tls(self, stream: std::net::TcpStream, tls: TlsAcceptor, header_read: Duration) {
        let state = self.registration.conn.clone();
        let table = self.registration.table.clone();
        let Ok(stream) = TcpStream::from_std(stream) else {
            return;
        };
        let io = Tracked {
            inner: stream,
            conn: state.clone(),
            table: table.clone(),
        };
        let mut shutdown = self.shutdown.clone();
        let handshake = tokio::select! {
            done = tokio::time::timeout(header_read, tls.accept(io)) => done,
            _ = state.close.notified() => return,
            _ = shutdown.wait_for(|stop| *stop) => return,
        };
        match handshake {
            Ok(Ok(stream)) => {
                let app = self.app.runtime.clone();
                self.serve(stream, app).await
            }
            Ok(Err(error)) => {
                tracing::debug!(%error, "TLS handshake failed");
                table
                    .metrics
                    .http_connections_closed
                    .with_label_values(&[closed::TLS_HANDSHAKE])
                    .inc();
            }
            Err(_) => {
                table
                    .metrics
                    .http_connections_closed
                    .with_label_values(&[closed::TLS_HANDSHAKE])
                    .inc();
            }
        }
    }

    /// Serves HTTP/1 and HTTP/2 on `io` until it closes, the shutdown asks it to finish, or the table
    /// closes it (dropped at once: the table closes only connections with no request in progress).
    async fn serve<I>(self, io: I, app: Router)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Connection {
            watcher,
            registration,
            ..
        } = self;
        let conn = registration.conn.clone();
        let table = registration.table.clone();
        let io = Tracked {
            inner: io,
            conn: conn.clone(),
            table: table.clone(),
        };
        let service = {
            let (conn, table) = (conn.clone(), table.clone());
            tower::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let in_progress = RequestInProgress::begin(&conn, &table);
                let request = request.map(Body::new);
                let app = app.clone();
                async move {
                    let response = app.oneshot(request).await;
                    drop(in_progress);
                    response
                }
            })
        };
        let builder = Builder::new(TokioExecutor::new());
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(io), TowerToHyperService::new(service));
        tokio::select! {
            ended = watcher.watch(connection.into_owned()) => {
                if let Err(error) = ended {
                    tracing::trace!(%error, "connection ended with an error");
                }
            }
            _ = conn.close.notified() => {}
        }
        drop(registration);
    }
}

/// One open connection as the [`Table`] sees it. Times are milliseconds since the table's epoch.
struct ConnState {
    /// Requests whose head has been read and whose response is not yet complete.
    in_progress: AtomicUsize,
    /// When it last started waiting for a request: accepted, or its last response completed.
    waiting_since: AtomicU64,
    /// When the first byte arrived since `waiting_since` (+1; 0 = none yet).
    head_started: AtomicU64,
    /// Set once the table has told it to close (it is then no longer counted against the limit).
    closing: AtomicBool,
    close: Notify,
}

impl ConnState {
    fn bytes_arrived(&self, now_ms: u64) {
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
struct Table {
    epoch: Instant,
    limits: ConnectionLimits,
    metrics: Metrics,
    conns: Mutex<HashMap<u64, Arc<ConnState>>>,
    next_id: AtomicU64,
    /// Connections told to close that have not yet dropped their socket.
    closing: AtomicUsize,
}

impl Table {
    fn new(limits: ConnectionLimits, metrics: Metrics) -> Table {
        Table {
            epoch: Instant::now(),
            limits,
            metrics,
            conns: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            closing: AtomicUsize::new(0),
        }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Enters a new connection, closing the longest-idle one at the limit; `None` (refused, counted) if
    /// the limit is reached and every connection has a request in progress.
    fn admit(self: &Arc<Self>) -> Option<Registration> {
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
    fn evict_longest_idle(&self, reason: &str) -> bool {
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

async fn sweep(table: Arc<Table>) {
    let mut tick = tokio::time::interval(sweep_period(&table.limits));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        table.sweep_once();
    }
}

/// A connection's entry in the [`Table`]; removed when dropped (the connection task ends).
struct Registration {
    id: u64,
    conn: Arc<ConnState>,
    table: Arc<Table>,
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
struct RequestInProgress {
    conn: Arc<ConnState>,
    table: Arc<Table>,
}

impl RequestInProgress {
    fn begin(conn: &Arc<ConnState>, table: &Arc<Table>) -> Self {
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

/// A connection's transport that tells its [`ConnState`] when bytes arrive between requests (the
/// header timeout runs from the first of them).
struct Tracked<I> {
    inner: I,
    conn: Arc<ConnState>,
    table: Arc<Table>,
}

impl<I: AsyncRead + Unpin> AsyncRead for Tracked<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            let now = self.table.now_ms();
            self.conn.bytes_arrived(now);
        }
        polled
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Tracked<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::{get, post};
    use std::io::{Read, Write};

    #[test]
    fn requests_with_a_body_go_to_the_runtime_and_the_rest_stay() {
        assert_eq!(served_by(Some(b'P')), Served::Runtime);
        for first in [Some(b'G'), Some(b'H'), Some(b'O'), Some(b'D'), None] {
            assert_eq!(served_by(first), Served::ReadThread, "{first:?}");
        }
    }

    fn table(max_connections: usize) -> Arc<Table> {
        Arc::new(Table::new(
            ConnectionLimits {
                header_read: Duration::from_secs(10),
                body_idle: Duration::from_secs(30),
                keepalive: Duration::from_secs(60),
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

    /// Sends `request` on `stream` and returns the response body (the test routes answer with
    /// `Content-Length`).
    fn exchange(stream: &mut std::net::TcpStream, request: &str) -> String {
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let n = stream.read(&mut chunk).unwrap();
            assert!(n > 0, "connection closed");
            response.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&response).to_string();
            if let Some(head_end) = text.find("\r\n\r\n") {
                let length: usize = text[..head_end]
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap();
                if response.len() >= head_end + 4 + length {
                    return text[head_end + 4..head_end + 4 + length].to_string();
                }
            }
        }
    }

    /// A real listener, read thread and runtime: each route answers with the name of the thread that
    /// served it. A connection opened by a GET is served on the read thread until a request with a
    /// body, which is served there and closes it; one opened by a POST is served on the runtime for
    /// every request. Stopping closes idle connections and ends the thread.
    #[test]
    fn connections_are_served_where_their_first_request_puts_them() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("test-runtime")
            .enable_all()
            .build()
            .unwrap();
        let thread_name = || std::thread::current().name().unwrap_or("").to_string();
        let app = Router::new()
            .route("/who", get(move || async move { thread_name() }))
            .route("/who", post(move || async move { thread_name() }));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let front = spawn(
            listener,
            app,
            runtime.handle().clone(),
            async move {
                let _ = stop_rx.await;
            },
            Duration::from_secs(5),
            Front {
                limits: crate::config::Config::defaults().limits,
                tls: None,
                metrics: Metrics::new(),
            },
        )
        .unwrap();

        let get = "GET /who HTTP/1.1\r\nhost: x\r\n\r\n";
        let post = "POST /who HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\nhi";
        let mut mixed = std::net::TcpStream::connect(addr).unwrap();
        assert_eq!(exchange(&mut mixed, get), "thresher-read");
        assert_eq!(exchange(&mut mixed, get), "thresher-read");
        assert_eq!(exchange(&mut mixed, post), "thresher-read");
        let mut rest = Vec::new();
        mixed
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(
            mixed.read_to_end(&mut rest).unwrap(),
            0,
            "closed after the body"
        );
        let mut reads = std::net::TcpStream::connect(addr).unwrap();
        assert_eq!(exchange(&mut reads, get), "thresher-read");
        let mut writes = std::net::TcpStream::connect(addr).unwrap();
        assert_eq!(exchange(&mut writes, post), "test-runtime");
        assert_eq!(
            exchange(&mut writes, get),
            "test-runtime",
            "stays on its first thread"
        );

        stop_tx.send(()).unwrap();
        front.join().unwrap().unwrap();
        for mut idle in [reads, writes] {
            let mut rest = Vec::new();
            idle.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            assert_eq!(
                idle.read_to_end(&mut rest).unwrap(),
                0,
                "closed by the shutdown"
            );
        }
        assert!(
            std::net::TcpStream::connect(addr).is_err(),
            "no longer listening"
        );
    }
}
