//! Exposure hardening on the real binary: bearer tokens and scopes, TLS, connection limits and
//! timeouts, the file-descriptor limit.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::blocking::{Client, RequestBuilder};

use crate::common::{assert_failed_with, test_config, thresher, Daemon, WAIT};

const READ: &str = "read-token-0123456789abcdef";
const WRITE: &str = "write-token-0123456789abcdef";
const BOTH: &str = "both-token-0123456789abcdef";
const CHALLENGE: &str = "Bearer realm=\"thresher\"";
const INGESTED: &str = "thresher_samples_ingested_total{source=\"http\"}";

/// `n` LIBSVM lines of a 3-feature problem.
fn samples(n: usize) -> String {
    (0..n)
        .map(|i| format!("{} 1:{} 2:{} 3:0.5\n", i % 3, i % 7, i % 5))
        .collect()
}

fn tokens_file(dir: &Path) -> String {
    let path = dir.join("tokens");
    std::fs::write(
        &path,
        format!(
            "# thresher tokens\nread {READ}\nwrite {WRITE}\n\nread {BOTH}\n# both\nwrite {BOTH}\n"
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

fn with_token(request: RequestBuilder, token: Option<&str>) -> RequestBuilder {
    match token {
        Some(t) => request.bearer_auth(t),
        None => request,
    }
}

/// Status, `WWW-Authenticate` and body of `GET path`.
fn get(d: &Daemon, path: &str, token: Option<&str>) -> (u16, Option<String>, String) {
    let r = with_token(d.client.get(format!("{}{path}", d.base)), token)
        .send()
        .unwrap();
    let challenge = r
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string());
    (r.status().as_u16(), challenge, r.text().unwrap())
}

fn post(
    d: &Daemon,
    path: &str,
    token: Option<&str>,
    body: String,
) -> (u16, Option<String>, String) {
    let r = with_token(d.client.post(format!("{}{path}", d.base)), token)
        .header("content-type", "text/plain")
        .body(body)
        .send()
        .unwrap();
    let challenge = r
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string());
    (r.status().as_u16(), challenge, r.text().unwrap())
}

fn metric_with(d: &Daemon, token: Option<&str>, series: &str) -> f64 {
    let (status, _, text) = get(d, "/metrics", token);
    assert_eq!(status, 200, "{text}");
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|r| r.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("{series} not in /metrics:\n{text}"))
        .parse()
        .unwrap()
}

fn error_of(body: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("{body}"));
    v["error"].as_str().unwrap().to_string()
}

#[test]
fn tokens_and_scopes_guard_every_route_and_a_refused_post_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(dir.path(), "k = 2", "");
    let tokens = tokens_file(dir.path());
    let d = Daemon::start(&[
        "--config",
        config.to_str().unwrap(),
        "--auth-tokens-file",
        &tokens,
    ]);
    assert!(
        d.log().contains("bearer-token authentication on"),
        "{}",
        d.log()
    );
    assert!(!d.log().contains("NO AUTHENTICATION"), "{}", d.log());

    // No token, a wrong one: 401 with the challenge and the API's JSON error; nothing enters.
    for path in [
        "/v1/model",
        "/v1/models",
        "/v1/models/primary",
        "/metrics",
        "/nowhere",
    ] {
        let (status, challenge, body) = get(&d, path, None);
        assert_eq!(status, 401, "{path}: {body}");
        assert_eq!(challenge.as_deref(), Some(CHALLENGE), "{path}");
        assert!(error_of(&body).contains("Bearer"), "{body}");
        let (status, challenge, _) = get(&d, path, Some("wrong-token-0123456789abcdef"));
        assert_eq!(status, 401, "{path}");
        assert!(challenge.unwrap().starts_with(CHALLENGE));
    }
    let (status, challenge, body) = post(&d, "/v1/samples", None, samples(50));
    assert_eq!(
        (status, challenge.as_deref()),
        (401, Some(CHALLENGE)),
        "{body}"
    );
    let (status, _, _) = post(
        &d,
        "/v1/samples",
        Some("nope-nope-nope-nope-nope"),
        samples(50),
    );
    assert_eq!(status, 401);
    // A read token cannot write, a write token cannot read: 403.
    let (status, challenge, body) = post(&d, "/v1/samples", Some(READ), samples(50));
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        challenge.as_deref(),
        Some("Bearer realm=\"thresher\", error=\"insufficient_scope\", scope=\"write\"")
    );
    assert!(error_of(&body).contains("write scope"), "{body}");
    for path in ["/v1/model", "/v1/models", "/metrics"] {
        let (status, _, body) = get(&d, path, Some(WRITE));
        assert_eq!(status, 403, "{path}: {body}");
        assert!(error_of(&body).contains("read scope"), "{body}");
    }
    let (status, _, _) = post(&d, "/v1/predict", Some(WRITE), samples(1));
    assert_eq!(status, 403, "predict is a read");
    // Health checks stay open.
    assert_eq!(get(&d, "/healthz", None).0, 200);
    assert!(matches!(get(&d, "/readyz", None).0, 200 | 503));
    // So is the API's contract, which then requires the bearer token on every protected operation
    // (without tokens it also lists "no credentials").
    let (status, _, body) = get(&d, "/openapi.json", None);
    assert_eq!(status, 200, "{body}");
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
    let security = &doc["paths"]["/v1/samples"]["post"]["security"];
    assert_eq!(
        security,
        &serde_json::json!([{"bearer": ["write"]}]),
        "{security}"
    );
    // None of the refused posts entered.
    assert_eq!(metric_with(&d, Some(READ), INGESTED), 0.0);
    assert_eq!(
        metric_with(
            &d,
            Some(READ),
            "thresher_http_auth_refused_total{status=\"401\"}"
        ),
        12.0
    );
    assert_eq!(
        metric_with(
            &d,
            Some(READ),
            "thresher_http_auth_refused_total{status=\"403\"}"
        ),
        5.0
    );

    // The right scopes: 202, then the model and a prediction with a read token.
    let (status, _, body) = post(&d, "/v1/samples", Some(WRITE), samples(200));
    assert_eq!(status, 202, "{body}");
    let (status, _, body) = post(&d, "/v1/samples", Some(BOTH), samples(100));
    assert_eq!(status, 202, "{body}");
    d.wait_for("300 samples in", |d| {
        (metric_with(d, Some(BOTH), INGESTED) == 300.0).then_some(())
    });
    d.wait_for("a model", |d| {
        (get(d, "/v1/model", Some(READ)).0 == 200).then_some(())
    });
    let (status, _, body) = post(&d, "/v1/predict", Some(READ), samples(2));
    assert_eq!(status, 200, "{body}");
    assert_eq!(get(&d, "/v1/models/primary", Some(BOTH)).0, 200);
    assert_eq!(get(&d, "/readyz", None).0, 200);
    let (status, _, _) = get(&d, "/v1/model", Some(&format!("{READ}x")));
    assert_eq!(status, 401, "a longer token is not a match");
    let r = d
        .client
        .get(format!("{}/v1/model", d.base))
        .header("authorization", format!("bearer {READ}"))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "the scheme is case-insensitive");
}

#[test]
fn metrics_can_be_left_open_for_a_scraper() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(dir.path(), "k = 2", "[server]\nmetrics_auth = \"open\"\n");
    let tokens = tokens_file(dir.path());
    let d = Daemon::start(&[
        "--config",
        config.to_str().unwrap(),
        "--auth-tokens-file",
        &tokens,
    ]);
    assert_eq!(metric_with(&d, None, INGESTED), 0.0);
    assert_eq!(get(&d, "/v1/model", None).0, 401, "only /metrics is open");
    assert_eq!(post(&d, "/v1/samples", None, samples(5)).0, 401);
}

#[test]
fn bad_token_settings_stop_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad-tokens");
    std::fs::write(&bad, format!("read {READ}\nadmin {WRITE}\n")).unwrap();
    let out = thresher(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--auth-tokens-file",
        bad.to_str().unwrap(),
    ]);
    assert_failed_with(&out, "line 2: unknown scope \"admin\"");
    assert!(
        !crate::common::stderr(&out).contains(WRITE),
        "no token echoed"
    );
    assert!(!crate::common::stderr(&out).contains("listening on"));
    let out = thresher(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--auth-tokens-file",
        "/nonexistent/tokens",
    ]);
    assert_failed_with(&out, "cannot read the tokens file /nonexistent/tokens");
    // A token in the configuration itself is refused, pointing at the tokens file.
    let config = dir.path().join("c.toml");
    std::fs::write(&config, format!("[server]\nauth_token = \"{READ}\"\n")).unwrap();
    let out = thresher(&["serve", "--config", config.to_str().unwrap()]);
    assert_failed_with(&out, "`server.auth_token`: unknown key");
    assert_failed_with(&out, "server.auth_tokens_file");
    let out = crate::common::thresher_with_env(
        &["serve", "--listen", "127.0.0.1:0"],
        &[("THRESHER_SERVER_AUTH_TOKEN", READ)],
    );
    assert_failed_with(&out, "server.auth_tokens_file");
}

/// Reads the daemon's stderr until it logs its address; returns what it logged so far.
fn log_until_listening(child: &mut std::process::Child) -> String {
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut log = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            log.push_str(&line);
            log.push('\n');
            if line.contains("listening on") {
                let _ = tx.send(log.clone());
            }
        }
    });
    rx.recv_timeout(WAIT).expect("the daemon logs its address")
}

#[test]
fn no_tokens_on_a_non_loopback_address_warns_loudly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_thresher"))
        .args(["serve", "--listen", "0.0.0.0:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = log_until_listening(&mut child);
    let _ = child.kill();
    let _ = child.wait();
    let warning = log
        .lines()
        .find(|l| l.contains("NO AUTHENTICATION"))
        .unwrap_or_else(|| panic!("no warning in:\n{log}"));
    assert!(warning.contains("WARN"), "{warning}");
    assert!(warning.contains("server.auth_tokens_file"), "{warning}");
    // On loopback (every other test's daemon) there is no such warning.
    let d = Daemon::start(&[]);
    assert!(!d.log().contains("NO AUTHENTICATION"), "{}", d.log());
}

#[test]
fn tls_serves_with_the_configured_certificate_and_refuses_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.key_pair.serialize_pem()).unwrap();
    let config = test_config(
        dir.path(),
        "k = 2",
        &format!(
            "[server]\ntls_cert_file = {:?}\ntls_key_file = {:?}\n",
            cert_path.to_str().unwrap(),
            key_path.to_str().unwrap()
        ),
    );
    let tokens = tokens_file(dir.path());
    let d = Daemon::start(&[
        "--config",
        config.to_str().unwrap(),
        "--auth-tokens-file",
        &tokens,
    ]);
    let port = d.base.rsplit(':').next().unwrap().to_string();
    let base = format!("https://localhost:{port}");
    let client = Client::builder()
        .use_rustls_tls()
        .add_root_certificate(reqwest::Certificate::from_pem(cert.cert.pem().as_bytes()).unwrap())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let r = client.get(format!("{base}/healthz")).send().unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let r = client
        .post(format!("{base}/v1/samples"))
        .bearer_auth(WRITE)
        .header("content-type", "text/plain")
        .body(samples(100))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let r = client.get(format!("{base}/v1/models")).send().unwrap();
    assert_eq!(r.status().as_u16(), 401, "authentication applies over TLS");
    let r = client
        .get(format!("{base}/metrics"))
        .bearer_auth(READ)
        .send()
        .unwrap();
    assert!(r.text().unwrap().contains(&format!("{INGESTED} 100")));
    // Plain HTTP to the TLS port gets no HTTP answer; a client that does not trust the certificate
    // fails the handshake.
    assert!(d.client.get(format!("{}/healthz", d.base)).send().is_err());
    let untrusting = Client::builder().use_rustls_tls().build().unwrap();
    assert!(untrusting.get(format!("{base}/healthz")).send().is_err());
    let r = client.get(format!("{base}/healthz")).send().unwrap();
    assert_eq!(r.status().as_u16(), 200, "still serving");

    // A certificate file that is no certificate, or a lone key, stops the start.
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let env_cert = [
        ("THRESHER_SERVER_TLS_CERT_FILE", garbage.to_str().unwrap()),
        ("THRESHER_SERVER_TLS_KEY_FILE", key_path.to_str().unwrap()),
    ];
    let out = crate::common::thresher_with_env(&["serve", "--listen", "127.0.0.1:0"], &env_cert);
    assert_failed_with(&out, "server.tls_cert_file");
    let env_key = [
        ("THRESHER_SERVER_TLS_CERT_FILE", cert_path.to_str().unwrap()),
        ("THRESHER_SERVER_TLS_KEY_FILE", garbage.to_str().unwrap()),
    ];
    let out = crate::common::thresher_with_env(&["serve", "--listen", "127.0.0.1:0"], &env_key);
    assert_failed_with(&out, "server.tls_key_file");
    let lone = [("THRESHER_SERVER_TLS_CERT_FILE", cert_path.to_str().unwrap())];
    let out = crate::common::thresher_with_env(&["serve", "--listen", "127.0.0.1:0"], &lone);
    assert_failed_with(&out, "TLS needs both files");
}

/// Reads until the peer closes or `limit` passes; returns what arrived and whether it closed.
fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> (String, bool) {
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let start = Instant::now();
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    while start.elapsed() < limit {
        match stream.read(&mut chunk) {
            Ok(0) => return (String::from_utf8_lossy(&got).into_owned(), true),
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return (String::from_utf8_lossy(&got).into_owned(), true)
            }
            Err(_) => {}
        }
    }
    (String::from_utf8_lossy(&got).into_owned(), false)
}

#[test]
fn slow_headers_idle_sockets_and_stalled_bodies_are_cut() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(
        dir.path(),
        "k = 2",
        "[server]\nheader_read_timeout_s = 1\nkeepalive_timeout_s = 2\nbody_idle_timeout_s = 1\n",
    );
    let d = Daemon::start(&["--config", config.to_str().unwrap()]);
    let addr = d.base.trim_start_matches("http://").to_string();

    let header_timeouts =
        || d.metric("thresher_http_connections_closed_total{reason=\"header_timeout\"}");
    let idle_timeouts =
        || d.metric("thresher_http_connections_closed_total{reason=\"idle_timeout\"}");
    // A partial head: closed by the header timeout (counted as such), with nothing answered.
    let mut slow = TcpStream::connect(&addr).unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        .unwrap();
    let (answer, closed) = read_until_closed(&mut slow, Duration::from_secs(10));
    assert!(closed, "a partial head was held open");
    assert_eq!(answer, "");
    d.wait_for("the partial head counted as a header timeout", |_| {
        (header_timeouts() >= 1.0).then_some(())
    });
    // The same for a partial head on a POST (served on the runtime).
    let mut slow_post = TcpStream::connect(&addr).unwrap();
    slow_post
        .write_all(b"POST /v1/samples HTTP/1.1\r\nHo")
        .unwrap();
    assert!(read_until_closed(&mut slow_post, Duration::from_secs(10)).1);

    let cut_heads = d.wait_for("the partial POST head counted as a header timeout", |_| {
        Some(header_timeouts()).filter(|&n| n >= 2.0)
    });

    // An idle socket: closed by the keep-alive timeout, not the (shorter) header timeout; one that asks
    // in time is answered.
    let idle_before = idle_timeouts();
    let mut idle = TcpStream::connect(&addr).unwrap();
    let mut prompt = TcpStream::connect(&addr).unwrap();
    prompt
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert!(
        read_until_closed(&mut idle, Duration::from_secs(10)).1,
        "idle socket held open"
    );
    d.wait_for("the idle socket counted as a keep-alive timeout", |_| {
        (idle_timeouts() > idle_before).then_some(())
    });
    assert_eq!(
        header_timeouts(),
        cut_heads,
        "the idle socket was cut by the header timeout"
    );
    let (answer, _) = read_until_closed(&mut prompt, Duration::from_millis(300));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    // A body that stops: 408, the connection closed, nothing of it admitted.
    let mut stalled = TcpStream::connect(&addr).unwrap();
    stalled
        .write_all(
            b"POST /v1/samples HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n1 1:1 2:1\n0 1:2\n",
        )
        .unwrap();
    let (answer, closed) = read_until_closed(&mut stalled, Duration::from_secs(10));
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("server.body_idle_timeout_s"), "{answer}");
    assert!(closed, "the stalled connection stays open");
    assert_eq!(d.metric(INGESTED), 0.0);
    assert!(header_timeouts() >= 2.0);
    assert!(idle_timeouts() >= 1.0);
    // A slow but steady body is not cut: a byte every 400 ms for 2 s, well past the idle timeout.
    let mut steady = TcpStream::connect(&addr).unwrap();
    let body = samples(5);
    steady
        .write_all(
            format!(
                "POST /v1/samples HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        )
        .unwrap();
    let (head, rest) = body.split_at(5);
    for byte in head.bytes() {
        steady.write_all(&[byte]).unwrap();
        std::thread::sleep(Duration::from_millis(400));
    }
    steady.write_all(rest.as_bytes()).unwrap();
    let (answer, _) = read_until_closed(&mut steady, Duration::from_secs(3));
    assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
}

#[test]
fn healthz_answers_with_more_idle_sockets_than_file_descriptors() {
    // The test process holds the client side of every socket.
    let _ = thresher::sys::raise_fd_limit();
    const FDS: libc::rlim_t = 128;
    // Timeouts far beyond the test: a slot can only come free by eviction.
    let no_timeouts = [
        ("THRESHER_SERVER_HEADER_READ_TIMEOUT_S", "3600"),
        ("THRESHER_SERVER_KEEPALIVE_TIMEOUT_S", "3600"),
    ];
    let d = Daemon::start_customized(&[], &no_timeouts, |command| {
        use std::os::unix::process::CommandExt;
        // SAFETY: only setrlimit, which is async-signal-safe, runs between fork and exec.
        unsafe {
            command.pre_exec(|| {
                let limit = libc::rlimit {
                    rlim_cur: FDS,
                    rlim_max: FDS,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    });
    let log = d.log();
    assert!(log.contains("soft=128 hard=128"), "{log}");
    assert!(
        log.contains("server.max_connections exceeds") && log.contains("lowered_to=64"),
        "{log}"
    );
    let addr = d.base.trim_start_matches("http://").to_string();
    let mut idle = Vec::new();
    for _ in 0..300 {
        idle.push(TcpStream::connect(&addr).unwrap());
    }
    // Half of them have sent part of a request head, half nothing.
    for s in idle.iter_mut().step_by(2) {
        let _ = s.write_all(b"GET /healthz HTTP/1.1\r\n");
    }
    // The timeout only ends a hung test: with no connection timing out, the answer can only come from
    // evicting idle connections.
    let client = Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let r = client
        .get(format!("{}/healthz", d.base))
        .send()
        .unwrap_or_else(|e| panic!("/healthz did not answer: {e}\n{}", d.log()));
    assert_eq!(r.status().as_u16(), 200);
    for reason in ["header_timeout", "idle_timeout"] {
        let series = format!("thresher_http_connections_closed_total{{reason=\"{reason}\"}}");
        assert_eq!(
            d.metric(&series),
            0.0,
            "{reason}: a slot came free by a timeout"
        );
    }
    let evicted = d.metric("thresher_http_connections_closed_total{reason=\"limit_evicted\"}");
    assert!(evicted >= 300.0 - 64.0, "evicted {evicted}");
    assert!(d.metric("thresher_http_connections") <= 64.0);
    // Most of the first sockets were closed to admit the later ones.
    let closed = idle
        .iter_mut()
        .take(100)
        .filter_map(|s| {
            read_until_closed(s, Duration::from_millis(20))
                .1
                .then_some(())
        })
        .count();
    assert!(closed >= 90, "only {closed} of the oldest 100 closed");
    assert!(!d.log().contains("panicked"), "{}", d.log());
}
