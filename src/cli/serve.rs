//! `thresher serve`: load and validate the configuration, install logging, run the daemon until
//! SIGINT, SIGTERM or SIGHUP. SIGHUP (a closed terminal, or a "reload" habit) is a graceful stop like
//! the other two — ingest drained, final checkpoint written — not a reload: restart to read a changed
//! configuration or tokens file.

use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::config::{Config, Overrides};
use crate::daemon::{run, RunOptions};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// TOML configuration file (keys missing from it keep their defaults; see config/thresher.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to listen on, e.g. 127.0.0.1:8080 (port 0 = any free port; the bound address is logged).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Also read samples (LIBSVM or JSON lines) from standard input.
    #[arg(long)]
    pub stdin: bool,
    /// Directory for checkpoints (enables durability).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// File of `SCOPE TOKEN` lines (scopes `read`, `write`) that turns on bearer-token authentication
    /// (`server.auth_tokens_file`).
    #[arg(long, value_name = "FILE")]
    pub auth_tokens_file: Option<PathBuf>,
    /// Start empty, ignoring any checkpoint in the data directory.
    #[arg(long)]
    pub fresh: bool,
    /// Discard the checkpointed state of learner NAME, which the config no longer has (repeatable).
    /// Without it, a checkpoint holding a learner the config lacks stops the start.
    #[arg(long = "drop-learner", value_name = "NAME")]
    pub drop_learners: Vec<String>,
}

pub fn run_serve(args: &ServeArgs) -> Result<(), CliError> {
    crate::sys::limit_malloc_arenas();
    let filter = tracing_subscriber::EnvFilter::try_from_env("THRESHER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(filter)
        .try_init();
    let overrides = Overrides {
        listen: args.listen.clone(),
        data_dir: args.data_dir.clone(),
        auth_tokens_file: args.auth_tokens_file.clone(),
    };
    let config = Config::load_from_process(args.config.as_deref(), &overrides)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("thresher-http")
        .build()
        .map_err(|e| CliError::Argument(format!("cannot start the runtime: {e}")))?;
    let options = RunOptions {
        stdin: args.stdin,
        fresh: args.fresh,
        drop_learners: args.drop_learners.clone(),
        bound: None,
    };
    runtime.block_on(run(config, options, shutdown_signal()))?;
    Ok(())
}

/// Resolves on SIGINT, SIGTERM or SIGHUP (logged by name).
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (term, hangup) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) {
        (Ok(term), Ok(hangup)) => (term, hangup),
        (Err(e), _) | (_, Err(e)) => {
            tracing::error!(error = %e, "cannot install the SIGTERM/SIGHUP handlers; stopping on Ctrl-C only");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    let (mut term, mut hangup) = (term, hangup);
    let name = tokio::select! {
        _ = tokio::signal::ctrl_c() => "SIGINT",
        _ = term.recv() => "SIGTERM",
        _ = hangup.recv() => "SIGHUP",
    };
    tracing::info!(signal = name, "stop signal received: stopping gracefully");
}
