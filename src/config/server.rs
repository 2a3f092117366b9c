//! The `[server]` section's readers: the listen address, authentication, TLS files and connection
//! limits, checked into the parts of [`Config`](super::Config) that the HTTP front runs on.

use std::net::SocketAddr;
use std::time::Duration;

use super::check::{count, duration, need, path_key, range};
use super::error::ConfigError;
use super::raw::ServerLayer;
use super::{AuthConfig, ConnectionLimits, MetricsAuth, TlsFiles};

/// `server.listen`: an IP:port.
pub(super) fn read_listen(server: &ServerLayer) -> Result<SocketAddr, ConfigError> {
    let listen_text = need(&server.listen, "server.listen")?;
    listen_text.parse().map_err(|_| {
        range(
            "server.listen",
            &format!("{listen_text:?}"),
            "expected IP:port, e.g. 127.0.0.1:8080",
        )
    })
}

pub(super) fn read_auth(server: &ServerLayer) -> Result<AuthConfig, ConfigError> {
    let metrics = match need(&server.metrics_auth, "server.metrics_auth")?.as_str() {
        "open" => MetricsAuth::Open,
        "read" => MetricsAuth::Read,
        other => {
            return Err(range(
                "server.metrics_auth",
                &format!("{other:?}"),
                "expected \"open\" or \"read\"",
            ))
        }
    };
    Ok(AuthConfig {
        tokens_file: path_key(&server.auth_tokens_file, "server.auth_tokens_file")?,
        metrics,
    })
}

pub(super) fn read_tls(server: &ServerLayer) -> Result<Option<TlsFiles>, ConfigError> {
    let cert = path_key(&server.tls_cert_file, "server.tls_cert_file")?;
    let key = path_key(&server.tls_key_file, "server.tls_key_file")?;
    match (cert, key) {
        (Some(cert), Some(key)) => Ok(Some(TlsFiles { cert, key })),
        (None, None) => Ok(None),
        (Some(cert), None) => Err(range(
            "server.tls_key_file",
            "\"\"",
            &format!(
                "server.tls_cert_file is set ({}): TLS needs both files",
                cert.display()
            ),
        )),
        (None, Some(key)) => Err(range(
            "server.tls_cert_file",
            "\"\"",
            &format!(
                "server.tls_key_file is set ({}): TLS needs both files",
                key.display()
            ),
        )),
    }
}

pub(super) fn read_limits(server: &ServerLayer) -> Result<ConnectionLimits, ConfigError> {
    let secs = |v: &Option<i64>, key: &str, hi: i64| duration(v, key, (1, hi), Duration::from_secs);
    Ok(ConnectionLimits {
        header_read: secs(
            &server.header_read_timeout_s,
            "server.header_read_timeout_s",
            3600,
        )?,
        body_idle: secs(
            &server.body_idle_timeout_s,
            "server.body_idle_timeout_s",
            3600,
        )?,
        keepalive: secs(
            &server.keepalive_timeout_s,
            "server.keepalive_timeout_s",
            86_400,
        )?,
        write_timeout: secs(&server.write_timeout_s, "server.write_timeout_s", 3600)?,
        max_connections: count(
            &server.max_connections,
            "server.max_connections",
            1,
            1_000_000,
        )?,
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use crate::config::tests::load_text;
    use crate::config::{Config, ConnectionLimits, MetricsAuth, Overrides, TlsFiles};

    #[test]
    fn server_security_keys_are_validated() {
        let c = Config::defaults();
        assert_eq!(c.auth.tokens_file, None);
        assert_eq!(c.auth.metrics, MetricsAuth::Read);
        assert_eq!(c.tls, None);
        assert_eq!(
            c.limits,
            ConnectionLimits {
                header_read: Duration::from_secs(10),
                body_idle: Duration::from_secs(30),
                keepalive: Duration::from_secs(60),
                write_timeout: Duration::from_secs(10),
                max_connections: 768,
            }
        );
        let c = load_text(
            "[server]\nauth_tokens_file = \"/etc/t\"\nmetrics_auth = \"open\"\ntls_cert_file = \"c.pem\"\ntls_key_file = \"k.pem\"\nmax_connections = 5\n",
            &[("THRESHER_SERVER_HEADER_READ_TIMEOUT_S", "2")],
        )
        .unwrap();
        assert_eq!(c.auth.tokens_file, Some(PathBuf::from("/etc/t")));
        assert_eq!(c.auth.metrics, MetricsAuth::Open);
        assert_eq!(
            c.tls,
            Some(TlsFiles {
                cert: "c.pem".into(),
                key: "k.pem".into()
            })
        );
        assert_eq!(c.limits.header_read, Duration::from_secs(2));
        assert_eq!(c.limits.max_connections, 5);
        let flags = Overrides {
            auth_tokens_file: Some("/run/t".into()),
            ..Overrides::default()
        };
        let c = Config::load(None, Vec::new(), &flags).unwrap();
        assert_eq!(c.auth.tokens_file, Some(PathBuf::from("/run/t")));

        let msg = |t: &str| load_text(t, &[]).unwrap_err().to_string();
        assert!(msg("[server]\nmetrics_auth = \"write\"\n").contains("`server.metrics_auth`"));
        assert!(msg("[server]\ntls_cert_file = \"c.pem\"\n").contains("TLS needs both files"));
        assert!(msg("[server]\ntls_key_file = \"k.pem\"\n").contains("`server.tls_cert_file`"));
        assert!(msg("[server]\nmax_connections = 0\n").contains("`server.max_connections` = 0"));
        assert!(msg("[server]\nheader_read_timeout_s = 0\n").contains("header_read_timeout_s"));
        assert!(msg("[server]\nbody_idle_timeout_s = 0\n").contains("body_idle_timeout_s"));
        assert!(msg("[server]\nkeepalive_timeout_s = -1\n").contains("keepalive_timeout_s"));
        // A token-looking key is refused with a pointer to the tokens file, in the file and the
        // environment; an ordinary unknown key gets no such hint.
        let e = msg("[server]\ntoken = \"abc\"\n");
        assert!(
            e.contains("`server.token`: unknown key") && e.contains("server.auth_tokens_file"),
            "{e}"
        );
        assert!(!msg("[server]\nlistn = \"x\"\n").contains("never set in the configuration"));
        let e = load_text("", &[("THRESHER_SERVER_AUTH_TOKEN", "abc")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("never set in the configuration"), "{e}");
    }
}
