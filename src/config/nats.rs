//! The `[nats]` section: [`NatsConfig`], the settings of the NATS JetStream source (in `ingest`),
//! and its reader. The source is off while `nats.url` is empty.

use std::path::PathBuf;
use std::time::Duration;

use super::check::{count, duration, is_name, need, path_key, range};
use super::error::ConfigError;
use super::raw::NatsLayer;

/// The NATS JetStream source's settings (the `[nats]` table, validated).
#[derive(Debug, Clone, PartialEq)]
pub struct NatsConfig {
    /// Server addresses, tried in turn (the client reconnects to any of them).
    pub servers: Vec<String>,
    pub stream: String,
    pub subject: String,
    pub consumer: String,
    pub node: String,
    pub credentials_file: Option<PathBuf>,
    pub replicas: usize,
    pub duplicate_window: Duration,
    pub ack_wait: Duration,
    pub ack_interval: Duration,
    pub max_pending_batches: usize,
    /// How long a node stays listed after its last announcement (`crate::cluster`).
    pub member_ttl: Duration,
    /// SDIHT learners learn one exact model across the nodes (`crate::cluster::global`).
    pub global_model: bool,
}

/// `[nats]`: off while `url` is empty. A node acknowledges a batch only once a checkpoint holds it,
/// so the source needs `checkpoint.data_dir`.
pub(super) fn read_nats(
    nats: &NatsLayer,
    has_data_dir: bool,
) -> Result<Option<NatsConfig>, ConfigError> {
    let url = need(&nats.url, "nats.url")?;
    let Some(servers) = read_servers(&url)? else {
        return Ok(None);
    };
    if !has_data_dir {
        return Err(range(
            "checkpoint.data_dir",
            "\"\"",
            "the NATS source (nats.url is set) acknowledges a batch only once a checkpoint holds it: \
             set a data directory",
        ));
    }
    let subject = need(&nats.subject, "nats.subject")?;
    if subject.is_empty()
        || subject.contains(['*', '>', ' '])
        || subject.split('.').any(str::is_empty)
    {
        return Err(range(
            "nats.subject",
            &format!("{subject:?}"),
            "expected a NATS subject without wildcards, e.g. thresher.samples",
        ));
    }
    let secs = |v: &Option<i64>, key: &str, hi: i64| duration(v, key, (1, hi), Duration::from_secs);
    Ok(Some(NatsConfig {
        servers,
        stream: name(&nats.stream, "nats.stream")?,
        subject,
        consumer: name(&nats.consumer, "nats.consumer")?,
        node: name(&nats.node, "nats.node")?,
        credentials_file: path_key(&nats.credentials_file, "nats.credentials_file")?,
        replicas: count(&nats.replicas, "nats.replicas", 1, 5)?,
        duplicate_window: secs(&nats.duplicate_window_s, "nats.duplicate_window_s", 86_400)?,
        ack_wait: secs(&nats.ack_wait_s, "nats.ack_wait_s", 3600)?,
        ack_interval: duration(
            &nats.ack_interval_ms,
            "nats.ack_interval_ms",
            (1, 3_600_000),
            Duration::from_millis,
        )?,
        max_pending_batches: count(
            &nats.max_pending_batches,
            "nats.max_pending_batches",
            1,
            10_000,
        )?,
        member_ttl: secs(&nats.member_ttl_s, "nats.member_ttl_s", 3600)?,
        global_model: need(&nats.global_model, "nats.global_model")?,
    }))
}

/// `nats.url`'s servers, comma-separated; `None` when there are none (the source is off).
fn read_servers(url: &str) -> Result<Option<Vec<String>>, ConfigError> {
    let servers: Vec<String> = url
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if servers.is_empty() {
        return Ok(None);
    }
    for server in &servers {
        if server.parse::<async_nats::ServerAddr>().is_err() {
            return Err(range(
                "nats.url",
                &format!("{url:?}"),
                &format!("{server:?} is not a NATS server address (nats://host:port)"),
            ));
        }
    }
    Ok(Some(servers))
}

/// A stream, consumer or node name: `[A-Za-z0-9_-]+`.
fn name(value: &Option<String>, key: &str) -> Result<String, ConfigError> {
    let v = need(value, key)?;
    if !is_name(&v) {
        return Err(range(key, &format!("{v:?}"), "expected [A-Za-z0-9_-]+"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use crate::config::tests::load_text;
    use crate::config::Config;

    /// `[nats]`: off by default; file and environment; each key validated; a data directory needed;
    /// unknown keys refused.
    #[test]
    fn the_nats_table_is_read_and_validated() {
        assert_eq!(Config::defaults().nats, None);
        let c = load_text(
            "[checkpoint]\ndata_dir = \"/tmp/d\"\n[nats]\nurl = \"nats://127.0.0.1:4222, 127.0.0.1:4223\"\n",
            &[
                ("THRESHER_NATS_NODE", "n-1"),
                ("THRESHER_NATS_ACK_WAIT_S", "7"),
                ("THRESHER_NATS_CREDENTIALS_FILE", "/etc/n.creds"),
            ],
        )
        .unwrap();
        let n = c.nats.unwrap();
        assert_eq!(n.servers, ["nats://127.0.0.1:4222", "127.0.0.1:4223"]);
        assert_eq!(
            (n.stream.as_str(), n.subject.as_str(), n.consumer.as_str()),
            ("thresher", "thresher.samples", "thresher")
        );
        assert_eq!(
            (n.node.as_str(), n.ack_wait),
            ("n-1", Duration::from_secs(7))
        );
        assert_eq!(n.credentials_file, Some(PathBuf::from("/etc/n.creds")));
        assert_eq!((n.replicas, n.max_pending_batches), (1, 64));
        let err = |text: &str, env: &[(&str, &str)]| load_text(text, env).unwrap_err().to_string();
        let on =
            "[checkpoint]\ndata_dir = \"/tmp/d\"\n[nats]\nurl = \"127.0.0.1:4222\"\nnode = \"a\"\n";
        assert!(err("[nats]\nurl = \"127.0.0.1:4222\"\nnode = \"a\"\n", &[])
            .contains("checkpoint.data_dir"));
        assert!(err(on, &[("THRESHER_NATS_NODE", "")]).contains("`nats.node`"));
        assert!(err(on, &[("THRESHER_NATS_NODE", "a.b")]).contains("`nats.node`"));
        assert!(err(on, &[("THRESHER_NATS_SUBJECT", "a.*")]).contains("`nats.subject`"));
        assert!(err(on, &[("THRESHER_NATS_URL", "nats://[x")]).contains("`nats.url`"));
        assert!(err(on, &[("THRESHER_NATS_REPLICAS", "6")]).contains("`nats.replicas`"));
        assert!(err(on, &[("THRESHER_NATS_ACK_WAIT_S", "0")]).contains("`nats.ack_wait_s`"));
        assert!(err(&format!("{on}servers = 3\n"), &[]).contains("`nats.servers`"));
        assert!(err(on, &[("THRESHER_NATS_SERVERS", "x")]).contains("THRESHER_NATS_SERVERS"));
    }
}
