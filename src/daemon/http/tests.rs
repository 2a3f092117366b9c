//! Tests of the HTTP front's routing and accept loop: where a connection is served, end to end on a
//! real listener, read thread and runtime.

use super::*;
use axum::routing::{get, post};
use std::io::{Read, Write};

#[test]
fn requests_with_a_body_go_to_the_runtime_and_the_rest_stay() {
    for method in ["POST", "PUT", "PATCH", "PRI"] {
        assert_eq!(served_by(Some(method.as_bytes())), Served::Runtime);
    }
    for method in ["GET", "HEAD", "OPTIONS", "DELETE", "PROPFIND"] {
        let method = Some(method.as_bytes());
        assert_eq!(served_by(method), Served::ReadThread, "{method:?}");
    }
    assert_eq!(served_by(None), Served::ReadThread);
}

/// The method is read after leading empty lines, and only once it is whole; bytes that cannot start
/// a request, or a head longer than the peek without a method, are left to hyper.
#[test]
fn the_method_is_parsed_after_empty_lines_and_only_once_whole() {
    assert_eq!(
        method_of(b"POST /v1/samples HTTP/1.1\r\n"),
        Ok(&b"POST"[..])
    );
    assert_eq!(method_of(b"\r\n\r\nPOST /v1/samples"), Ok(&b"POST"[..]));
    assert_eq!(method_of(b"\r\nGET / HTTP/1.1"), Ok(&b"GET"[..]));
    assert_eq!(method_of(b"\r\n"), Err(true), "only an empty line yet");
    assert_eq!(
        method_of(b"\r\nPOS"),
        Err(true),
        "the method is not whole yet"
    );
    assert_eq!(
        method_of(b"\x16\x03\x01"),
        Err(false),
        "a TLS hello: not HTTP/1"
    );
    assert_eq!(method_of(&[b'\n'; PEEK_BYTES]), Err(false));
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
    assert_eq!(exchange(&mut mixed, get), "http-read");
    assert_eq!(exchange(&mut mixed, get), "http-read");
    assert_eq!(exchange(&mut mixed, post), "http-read");
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
    assert_eq!(exchange(&mut reads, get), "http-read");
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
