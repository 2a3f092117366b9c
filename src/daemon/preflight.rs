//! The preflight phase of `thresher serve`: every check that can stop the start, made before any
//! thread exists — the tokens file, the TLS certificate, the NATS credentials file, the data
//! directory (locked, then written to), the file-descriptor limit, and the port (bound). It opens files and the
//! listener and starts nothing; serving them is the serve phase's.

use std::net::SocketAddr;

use tokio_rustls::TlsAcceptor;

use super::checkpoint;
use super::datadir::DataDirLock;
use super::http;
use super::DaemonError;
use crate::api::auth::Tokens;
use crate::config::{Config, ConnectionLimits};
use crate::ingest::NatsError;

/// What the preflight opened, handed to the serve phase.
pub struct Preflight {
    /// The bearer tokens (`server.auth_tokens_file`); `None`: no authentication. Moved into the
    /// router's authentication layer by the serve phase.
    pub tokens: Option<Tokens>,
    /// The TLS acceptor (`server.tls_cert_file`, `server.tls_key_file`); `None`: plain HTTP.
    pub tls: Option<TlsAcceptor>,
    /// The `[server]` connection limits, `max_connections` fitted to the file-descriptor limit.
    pub limits: ConnectionLimits,
    /// The bound HTTP listener: nothing is accepted until the serve phase hands it to the read thread.
    pub listener: tokio::net::TcpListener,
    /// The data directory's lock, held until the daemon has stopped (`datadir`).
    pub owner: Option<DataDirLock>,
}

/// Checks and opens what the daemon needs, in an order where a bad file stops the start before the
/// port is bound and a taken port stops it before any thread exists.
pub fn check(config: &Config) -> Result<Preflight, DaemonError> {
    // Tokens and certificate first: a bad file stops the start before anything listens.
    let tokens = match &config.auth.tokens_file {
        Some(path) => {
            let tokens = Tokens::load(path)?;
            tracing::info!(file = %path.display(), entries = tokens.len(), "bearer-token authentication on");
            Some(tokens)
        }
        None => None,
    };
    let tls = config.tls.as_ref().map(http::tls::acceptor).transpose()?;
    // The NATS credentials file too (the connection itself may come up later).
    if let Some(path) = config
        .nats
        .as_ref()
        .and_then(|n| n.credentials_file.as_ref())
    {
        std::fs::read(path).map_err(|source| NatsError::Credentials {
            path: path.clone(),
            source,
        })?;
    }
    let limits = fit_to_fd_limit(config.limits);

    // Then the data directory (created, then test-written): one where no checkpoint can be written
    // stops the start before the port is even bound.
    // Locked first: a second daemon on the same directory is refused before it touches anything in it.
    let owner = match &config.data_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|source| checkpoint::CheckpointError::Io {
                path: dir.clone(),
                source,
            })?;
            let owner = DataDirLock::acquire(dir)?;
            checkpoint::check_writable(dir)?;
            Some(owner)
        }
        None => None,
    };
    // Bound next: a port in use stops the start before any thread exists.
    let listener = listen(config.listen).map_err(|source| DaemonError::Bind {
        addr: config.listen,
        source,
    })?;
    if tokens.is_none() && !config.listen.ip().is_loopback() {
        tracing::warn!(
            "NO AUTHENTICATION: listening on {} (not a loopback address) without server.auth_tokens_file; \
             anyone who can reach this port can post samples and read the models",
            config.listen
        );
    }
    Ok(Preflight {
        tokens,
        tls,
        limits,
        listener,
        owner,
    })
}

/// File descriptors kept free of connections: the listener, the runtimes' event fds, stdio, the
/// checkpoint files being written, the config and tokens files.
const FD_RESERVE: u64 = 64;

/// Raises the file-descriptor limit to its hard limit (logged) and lowers `server.max_connections`,
/// with a warning, to what it leaves after [`FD_RESERVE`] (half of a limit below twice the reserve).
fn fit_to_fd_limit(mut limits: ConnectionLimits) -> ConnectionLimits {
    let fds = match crate::sys::raise_fd_limit() {
        Ok(fds) => fds,
        Err(error) => {
            tracing::warn!(%error, "cannot read the file-descriptor limit; server.max_connections kept");
            return limits;
        }
    };
    tracing::info!(
        was = fds.was,
        soft = fds.soft,
        hard = fds.hard,
        "file-descriptor limit (RLIMIT_NOFILE) raised to the hard limit"
    );
    let reserve = FD_RESERVE.min(fds.soft / 2);
    let room = usize::try_from(fds.soft - reserve)
        .unwrap_or(usize::MAX)
        .max(1);
    if limits.max_connections > room {
        tracing::warn!(
            configured = limits.max_connections,
            lowered_to = room,
            fd_limit = fds.soft,
            "server.max_connections exceeds what the file-descriptor limit allows (less {reserve} kept \
             for other files); lowered"
        );
        limits.max_connections = room;
    }
    limits
}

/// Binds the HTTP listener (the kernel's default socket buffers and their autotuning).
fn listen(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    // As `TcpListener::bind` does: a restarted daemon can rebind while old connections linger.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}
