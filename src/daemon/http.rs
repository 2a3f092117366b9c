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

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{header, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::Response;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Handle;

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
                serve(listener, app, bodies, stop, grace).await;
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
) {
    let graceful = GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            accepted = accept(&listener) => match accepted {
                Some((stream, _)) => stream,
                None => continue,
            },
            _ = &mut stop => break,
        };
        let (app, bodies, watcher) = (app.clone(), bodies.clone(), graceful.watcher());
        tokio::spawn(async move {
            let mut first = [0u8; 1];
            let first_byte = match stream.peek(&mut first).await {
                Ok(1) => Some(first[0]),
                _ => None,
            };
            match served_by(first_byte) {
                Served::ReadThread => serve_connection(stream, app.read_thread, watcher).await,
                Served::Runtime => match stream.into_std() {
                    Ok(stream) => {
                        bodies.spawn(async move {
                            // Registered with the runtime that polls it from here on.
                            match TcpStream::from_std(stream) {
                                Ok(stream) => serve_connection(stream, app.runtime, watcher).await,
                                Err(error) => {
                                    tracing::debug!(%error, "cannot hand a connection over")
                                }
                            }
                        });
                    }
                    Err(error) => tracing::debug!(%error, "cannot hand a connection over"),
                },
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after {grace:?}; closing them");
    }
}

/// Serves HTTP/1 and HTTP/2 on one connection until it closes or the shutdown asks it to finish.
async fn serve_connection(stream: TcpStream, app: Router, watcher: Watcher) {
    let service = TowerToHyperService::new(app);
    let builder = Builder::new(TokioExecutor::new());
    let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
    if let Err(error) = watcher.watch(connection.into_owned()).await {
        tracing::trace!(%error, "connection ended with an error");
    }
}

/// One accepted connection; `None` after an error, which is logged and, unless it concerned only that
/// connection, followed by a pause (as `axum::serve` does: out of file descriptors, say, accepting at
/// once again would spin).
async fn accept(listener: &TcpListener) -> Option<(TcpStream, SocketAddr)> {
    match listener.accept().await {
        Ok(accepted) => Some(accepted),
        Err(error) => {
            use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
            if !matches!(
                error.kind(),
                ConnectionRefused | ConnectionAborted | ConnectionReset
            ) {
                tracing::error!(%error, "accept failed");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            None
        }
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
