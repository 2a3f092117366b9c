//! Bearer-token authentication: the tokens file, the scope each route needs, and the middleware that
//! checks `Authorization: Bearer TOKEN` before any handler runs (so a refused request reads no body and
//! changes no state).
//!
//! The file (`server.auth_tokens_file`) holds one `SCOPE TOKEN` per line; a line whose first visible
//! character is `#` is a comment and blank lines are skipped. A `#` anywhere else is part of the line:
//! a token may hold `#`, and a trailing `# comment` is an error (a third word), never a silent cut
//! that would leave the token's prefix authenticating. Scopes are independent — `write` does not imply `read` — so a producer's
//! token cannot read the model; a token listed on a `read` and a `write` line has both. A token is
//! 16 to 4096 visible ASCII characters. Which scope a request needs ([`required_scope`]):
//!
//! | request | scope |
//! | --- | --- |
//! | `GET /healthz`, `GET /readyz`, `GET /openapi.json`, `GET /` (the status page: no data) | none (open) |
//! | `GET /metrics` | `read`, or none with `server.metrics_auth = "open"` |
//! | `POST /v1/predict` and every other `GET`/`HEAD` (models, unknown paths) | `read` |
//! | every other method (`POST /v1/samples`, any future mutating route) | `write` |
//!
//! A missing or unknown token is 401 with `WWW-Authenticate: Bearer realm="thresher"`; a known token
//! without the scope is 403 (statuses mapped in [`super::ApiError`]). Each presented token is compared
//! with every configured one in constant time ([`subtle`]), so the time taken reveals neither which
//! token nor how much of one matched (only, as for any string compare, whether the lengths differ).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;
use thiserror::Error;

use super::ApiError;
use crate::config::MetricsAuth;
use crate::metrics::Metrics;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Models, predictions, metrics and status.
    Read,
    /// Samples (every mutating route).
    Write,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
        }
    }
}

/// Shortest token accepted: a guessable token is no protection.
pub const MIN_TOKEN_CHARS: usize = 16;
/// Longest token accepted.
pub const MAX_TOKEN_CHARS: usize = 4096;

/// A tokens file that cannot be used; the start stops with it.
#[derive(Debug, Error, PartialEq)]
pub enum TokensError {
    #[error("cannot read the tokens file {} (server.auth_tokens_file): {reason}", path.display())]
    Io { path: PathBuf, reason: String },
    #[error("tokens file {} line {line}: {reason}", path.display())]
    Line {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("tokens file {} holds no token (server.auth_tokens_file): add `read TOKEN` / `write TOKEN` lines, or unset the key to serve without authentication", path.display())]
    Empty { path: PathBuf },
}

/// The configured tokens with their scopes.
#[derive(Clone, PartialEq)]
pub struct Tokens {
    entries: Vec<(Vec<u8>, Scope)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the tokens themselves (logs, panics).
        write!(f, "Tokens({} entries)", self.entries.len())
    }
}

impl Tokens {
    /// Reads and parses the tokens file.
    pub fn load(path: &Path) -> Result<Tokens, TokensError> {
        let text = std::fs::read_to_string(path).map_err(|e| TokensError::Io {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        Tokens::parse(&text, path)
    }

    /// Parses `text`, naming `path` and the line in errors (never echoing a token).
    pub fn parse(text: &str, path: &Path) -> Result<Tokens, TokensError> {
        let mut entries = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line_error = |reason: String| TokensError::Line {
                path: path.to_path_buf(),
                line: i + 1,
                reason,
            };
            let content = raw.trim();
            if content.is_empty() || content.starts_with('#') {
                continue;
            }
            let mut words = content.split_whitespace();
            let (Some(scope), Some(token), None) = (words.next(), words.next(), words.next())
            else {
                let hint = if content
                    .split_whitespace()
                    .skip(1)
                    .any(|w| w.starts_with('#'))
                {
                    "; `#` starts a comment only at the start of a line"
                } else {
                    ""
                };
                return Err(line_error(format!(
                    "expected `SCOPE TOKEN` (two words: read or write, then the token){hint}"
                )));
            };
            let scope = match scope {
                "read" => Scope::Read,
                "write" => Scope::Write,
                other => {
                    return Err(line_error(format!(
                        "unknown scope {other:?}: expected read or write"
                    )))
                }
            };
            let chars = token.chars().count();
            if !(MIN_TOKEN_CHARS..=MAX_TOKEN_CHARS).contains(&chars) {
                return Err(line_error(format!(
                    "the token has {chars} characters: use {MIN_TOKEN_CHARS} to {MAX_TOKEN_CHARS} \
                     (e.g. `openssl rand -hex 32`)"
                )));
            }
            if !token.chars().all(|c| c.is_ascii_graphic()) {
                return Err(line_error(
                    "the token must be visible ASCII characters (a header value)".into(),
                ));
            }
            let token = token.as_bytes().to_vec();
            if entries.iter().any(|(t, s)| *t == token && *s == scope) {
                return Err(line_error(format!(
                    "this token is already listed with scope {}",
                    scope.name()
                )));
            }
            entries.push((token, scope));
        }
        if entries.is_empty() {
            return Err(TokensError::Empty {
                path: path.to_path_buf(),
            });
        }
        Ok(Tokens { entries })
    }

    /// Number of `SCOPE TOKEN` entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The scopes of `presented`: `None` if it is no configured token. Compares with every entry, each
    /// in constant time, and does not stop at a match.
    pub fn scopes_of(&self, presented: &[u8]) -> Option<(bool, bool)> {
        let (mut known, mut read, mut write) = (0u8, 0u8, 0u8);
        for (token, scope) in &self.entries {
            let hit = token.as_slice().ct_eq(presented).unwrap_u8();
            known |= hit;
            match scope {
                Scope::Read => read |= hit,
                Scope::Write => write |= hit,
            }
        }
        (known == 1).then_some((read == 1, write == 1))
    }
}

/// Who may call what: the tokens (none = everything open) and the `/metrics` policy.
#[derive(Debug, Clone)]
pub struct AuthPolicy {
    pub tokens: Option<Tokens>,
    pub metrics: MetricsAuth,
}

impl AuthPolicy {
    /// No authentication: every route open (the daemon's behaviour without a tokens file).
    pub fn open() -> AuthPolicy {
        AuthPolicy {
            tokens: None,
            metrics: MetricsAuth::Open,
        }
    }
}

/// The scope a request needs; `None` = open. See the module docs' table.
pub fn required_scope(method: &Method, path: &str, metrics: MetricsAuth) -> Option<Scope> {
    let reads = matches!(*method, Method::GET | Method::HEAD);
    match path {
        // The API's contract is no secret, and clients read it before they hold a token.
        // The status page is a static document; the data it shows comes from routes that need `read`.
        "/healthz" | "/readyz" | "/openapi.json" | "/" if reads => None,
        "/metrics" if reads => match metrics {
            MetricsAuth::Open => None,
            MetricsAuth::Read => Some(Scope::Read),
        },
        "/v1/predict" if *method == Method::POST => Some(Scope::Read),
        _ if reads => Some(Scope::Read),
        _ => Some(Scope::Write),
    }
}

/// The token of an `Authorization: Bearer TOKEN` header (scheme case-insensitive, RFC 6750).
fn bearer(request: &Request) -> Option<&[u8]> {
    let value = request.headers().get(header::AUTHORIZATION)?.as_bytes();
    let (scheme, token) = value.split_at_checked(7)?;
    (scheme.eq_ignore_ascii_case(b"bearer ") && !token.is_empty()).then_some(token)
}

/// Wraps `router` so every request is checked against `policy` first (the outermost layer: nothing
/// inside runs for a refused request).
pub fn protect(router: axum::Router, policy: AuthPolicy, metrics: Metrics) -> axum::Router {
    if policy.tokens.is_none() {
        return router;
    }
    let state = Arc::new((policy, metrics));
    router.layer(axum::middleware::from_fn_with_state(state, check))
}

async fn check(
    State(state): State<Arc<(AuthPolicy, Metrics)>>,
    request: Request,
    next: Next,
) -> Response {
    let (policy, metrics) = &*state;
    let Some(tokens) = &policy.tokens else {
        return next.run(request).await;
    };
    let Some(needed) = required_scope(request.method(), request.uri().path(), policy.metrics)
    else {
        return next.run(request).await;
    };
    let refused = match bearer(&request).map(|t| tokens.scopes_of(t)) {
        None => ApiError::Unauthorized { presented: false },
        Some(None) => ApiError::Unauthorized { presented: true },
        Some(Some((read, write))) => {
            let allowed = match needed {
                Scope::Read => read,
                Scope::Write => write,
            };
            if allowed {
                return next.run(request).await;
            }
            ApiError::Forbidden(needed)
        }
    };
    let status = match refused {
        ApiError::Forbidden(_) => "403",
        _ => "401",
    };
    metrics.auth_refused.with_label_values(&[status]).inc();
    refused.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaa-read";
    const B: &str = "bbbbbbbbbbbbbbbb-write";

    fn parse(text: &str) -> Result<Tokens, TokensError> {
        Tokens::parse(text, Path::new("/etc/t"))
    }

    #[test]
    fn the_file_gives_each_token_its_scopes() {
        let t = parse(&format!(
            "# comment\n\nread {A}\nwrite {B}\n  # indented comment\n  read {B}\nread {A}#x\n"
        ))
        .unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!(
            t.scopes_of(format!("{A}#x").as_bytes()),
            Some((true, false)),
            "a `#` inside a token is part of it"
        );
        assert_eq!(t.scopes_of(A.as_bytes()), Some((true, false)));
        assert_eq!(t.scopes_of(B.as_bytes()), Some((true, true)));
        assert_eq!(t.scopes_of(b"aaaaaaaaaaaaaaaa-rea"), None, "a prefix");
        assert_eq!(t.scopes_of(b"aaaaaaaaaaaaaaaa-readx"), None);
        assert_eq!(t.scopes_of(b""), None);
    }

    #[test]
    fn a_malformed_line_is_named_and_no_token_is_echoed() {
        let cases = [
            (
                format!("read {A}\nadmin {B}\n"),
                2,
                "unknown scope \"admin\"",
            ),
            ("read\n".to_string(), 1, "expected `SCOPE TOKEN`"),
            (
                format!("write {B} # producer\n"),
                1,
                "`#` starts a comment only at the start of a line",
            ),
            (format!("read {A} extra\n"), 1, "expected `SCOPE TOKEN`"),
            ("write short\n".to_string(), 1, "the token has 5 characters"),
            (format!("read {A}\n\nread {A}\n"), 3, "already listed"),
            (
                "read aaaaaaaaaaaaaaaaaaaa\u{e9}\n".into(),
                1,
                "visible ASCII",
            ),
        ];
        for (text, line, reason) in cases {
            let e = parse(&text).unwrap_err();
            let message = e.to_string();
            assert!(
                matches!(&e, TokensError::Line { line: l, .. } if *l == line),
                "{text:?}: {message}"
            );
            assert!(message.contains(reason), "{text:?}: {message}");
            assert!(message.contains("/etc/t"), "{message}");
            assert!(!message.contains(A) && !message.contains(B), "{message}");
        }
        assert!(matches!(
            parse("# nothing\n\n"),
            Err(TokensError::Empty { .. })
        ));
        let e = Tokens::load(Path::new("/nonexistent/tokens")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/tokens"), "{e}");
        assert_eq!(
            format!("{:?}", parse(&format!("read {A}")).unwrap()),
            "Tokens(1 entries)"
        );
    }

    #[test]
    fn routes_need_the_documented_scope() {
        use MetricsAuth::{Open, Read};
        let get = Method::GET;
        assert_eq!(required_scope(&get, "/healthz", Read), None);
        assert_eq!(required_scope(&get, "/readyz", Read), None);
        assert_eq!(required_scope(&get, "/", Read), None);
        assert_eq!(required_scope(&get, "/v1/history", Open), Some(Scope::Read));
        assert_eq!(required_scope(&Method::POST, "/", Open), Some(Scope::Write));
        assert_eq!(required_scope(&get, "/metrics", Open), None);
        assert_eq!(required_scope(&get, "/metrics", Read), Some(Scope::Read));
        for path in ["/v1/model", "/v1/models", "/v1/models/a", "/nowhere"] {
            assert_eq!(
                required_scope(&get, path, Open),
                Some(Scope::Read),
                "{path}"
            );
            assert_eq!(required_scope(&Method::HEAD, path, Open), Some(Scope::Read));
        }
        assert_eq!(
            required_scope(&Method::POST, "/v1/predict", Open),
            Some(Scope::Read)
        );
        for method in [Method::POST, Method::PUT, Method::DELETE, Method::PATCH] {
            assert_eq!(
                required_scope(&method, "/v1/samples", Open),
                Some(Scope::Write)
            );
            assert_eq!(
                required_scope(&method, "/healthz", Open),
                Some(Scope::Write)
            );
        }
    }
}
