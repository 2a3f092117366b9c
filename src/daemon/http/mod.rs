//! The HTTP front: one listening socket, two places to serve a connection.
//!
//! A dedicated **read thread** (`http-read`: a current-thread tokio runtime on its own OS thread) accepts every
//! connection and peeks at the method of its first request (after any empty lines, which HTTP/1.1
//! allows before a request line). POST, PUT, PATCH (a request body — samples to learn, samples to
//! predict) and HTTP/2's preface (`PRI`) hand the connection to the multi-threaded runtime, whose
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
//! This file routes and accepts: where a connection is served, the accept loop, and the connection
//! tasks. The connection table, its limits and its sweeper are in `connections.rs` (every connection
//! counts there); TLS, whose connections are all served on the runtime, in [`tls`]; the transport
//! wrapper that reports arriving bytes to the table in `io.rs`.

mod connections;
mod io;
pub mod tls;

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
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
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::config::ConnectionLimits;
use crate::metrics::{closed, Metrics};
use connections::{sweep, Registration, RequestInProgress, Table};
use io::Tracked;

/// Where a connection is served, from the method of its first request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Served {
    /// On the read thread: no request body expected.
    ReadThread,
    /// On the multi-threaded runtime: a request with a body.
    Runtime,
}

/// The longest start of a request [`method_of`] looks at: empty lines and a method fit well inside.
const PEEK_BYTES: usize = 64;

/// The method of the request that starts `peeked` (after empty lines): `Ok(method)`, `Err(true)` if
/// more bytes are needed to tell, `Err(false)` if `peeked` cannot start a request (hyper answers it).
fn method_of(peeked: &[u8]) -> Result<&[u8], bool> {
    let start = peeked
        .iter()
        .position(|b| !matches!(b, b'\r' | b'\n'))
        .ok_or(peeked.len() < PEEK_BYTES)?;
    let rest = &peeked[start..];
    match rest.iter().position(|&b| b == b' ') {
        Some(end) => Ok(&rest[..end]),
        None => Err(peeked.len() < PEEK_BYTES && rest.iter().all(u8::is_ascii_uppercase)),
    }
}

fn served_by(method: Option<&[u8]>) -> Served {
    match method {
        Some(b"POST" | b"PUT" | b"PATCH" | b"PRI") => Served::Runtime,
        _ => Served::ReadThread,
    }
}

/// The method of a connection's first request, peeked (not read) as its bytes arrive; `None` if the
/// connection closed or sent something that is no request (the read thread's hyper then answers it).
async fn peek_method(stream: &TcpStream) -> Option<Vec<u8>> {
    let mut buf = [0u8; PEEK_BYTES];
    let mut seen = 0;
    loop {
        let n = stream.peek(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        match method_of(&buf[..n]) {
            Ok(method) => return Some(method.to_vec()),
            Err(false) => return None,
            // A peek returns at once while unread bytes wait, so wait a little before the next one
            // when nothing new came (a head sent byte by byte; the header timeout bounds it).
            Err(true) if n == seen => tokio::time::sleep(PEEK_PAUSE).await,
            Err(true) => seen = n,
        }
    }
}

/// The pause between peeks at a request line that has not arrived whole.
const PEEK_PAUSE: Duration = Duration::from_millis(2);

/// How connections are admitted and served: limits, TLS and the metrics they report to.
#[derive(Clone)]
pub struct Front {
    pub limits: ConnectionLimits,
    /// `None`: plain HTTP.
    pub tls: Option<TlsAcceptor>,
    pub metrics: Metrics,
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
        .name("http-read".into())
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
    /// A plain connection: routed by its first request's method (module docs), served until it
    /// closes, the shutdown asks it to, or the table closes it (limit, timeouts).
    async fn serve_plain(self, stream: TcpStream) {
        let state = self.registration.conn.clone();
        let mut shutdown = self.shutdown.clone();
        let mut first = [0u8; 1];
        tokio::select! {
            peeked = stream.peek(&mut first) => if let Ok(1) = peeked {
                state.bytes_arrived(self.registration.table.now_ms());
            },
            _ = state.close.notified() => return,
            _ = shutdown.wait_for(|stop| *stop) => return,
        };
        let method = tokio::select! {
            method = peek_method(&stream) => method,
            _ = state.close.notified() => return,
            _ = shutdown.wait_for(|stop| *stop) => return,
        };
        match served_by(method.as_deref()) {
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
            write_timeout: table.write_timeout(),
            stalled: None,
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

#[cfg(test)]
mod tests;
