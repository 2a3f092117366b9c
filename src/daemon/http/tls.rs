//! TLS for the HTTP front (optional, rustls): the acceptor built from the configured PEM files, and
//! the connection task of a TLS connection.
//!
//! **TLS** (optional, rustls): with a certificate, each connection's handshake runs on the runtime
//! (bounded by the header timeout) and the connection is served there: the read-thread split ([`super`])
//! needs the first byte of the plain request, which TLS hides.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use super::io::Tracked;
use super::Connection;
use crate::config::TlsFiles;
use crate::metrics::closed;

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
pub fn acceptor(files: &TlsFiles) -> Result<TlsAcceptor, TlsError> {
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

impl Connection {
    /// A TLS connection (on the runtime): handshake within the header timeout, then served there.
    pub(super) async fn serve_tls(
        self,
        stream: std::net::TcpStream,
        tls: TlsAcceptor,
        header_read: Duration,
    ) {
        let state = self.registration.conn.clone();
        let table = self.registration.table.clone();
        let Ok(stream) = TcpStream::from_std(stream) else {
            return;
        };
        let io = Tracked {
            inner: stream,
            conn: state.clone(),
            table: table.clone(),
            write_timeout: table.write_timeout(),
            stalled: None,
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
}
