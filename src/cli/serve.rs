//! `thresher serve`: load and validate the configuration, install logging, run the daemon until
//! SIGINT/SIGTERM.

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
    /// Start empty, ignoring any checkpoint in the data directory.
    #[arg(long)]
    pub fresh: bool,
}

pub fn run_serve(args: &ServeArgs) -> Result<(), CliError> {
    crate::daemon::limit_malloc_arenas();
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
    };
    let config = Config::load_from_process(args.config.as_deref(), &overrides)?;
    let (realtime, slice_ns) = (config.realtime_http, config.http_slice_ns);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("thresher-http")
        // Only worker threads park (the blocking pool, where bodies are parsed, does not), so this
        // reaches exactly the threads that serve requests.
        .on_thread_park(move || latency_worker_once(realtime, slice_ns))
        .build()
        .map_err(|e| CliError::Argument(format!("cannot start the runtime: {e}")))?;
    let options = RunOptions {
        stdin: args.stdin,
        fresh: args.fresh,
    };
    runtime.block_on(run(config, options, shutdown_signal()))?;
    Ok(())
}

/// Sets the calling HTTP worker's scheduling, once per thread. With `server.realtime_http`: SCHED_FIFO
/// (priority 1). Why: on 2 busy cores a
/// worker woken for a `GET /v1/model` waited milliseconds in the run queue behind nice-0 work (the load
/// generator, other processes); a FIFO thread runs at once. What bounds the risk: the workers only
/// shuttle requests (parsing runs on the blocking pool, learning on nice +5 threads) and the kernel's
/// RT throttling leaves 5% of each second to everything else. Best effort: without CAP_SYS_NICE it
/// logs one warning per thread and the worker keeps the default policy.
///
/// Without it, each worker asks for a `server.http_slice_us` time slice
/// ([`crate::daemon::request_short_slice`]), which needs no privilege.
fn latency_worker_once(realtime: bool, slice_ns: u64) {
    thread_local! {
        static DONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if DONE.with(|d| d.replace(true)) {
        return;
    }
    if !realtime {
        if slice_ns == 0 {
            return;
        }
        if let Err(error) = crate::daemon::request_short_slice(slice_ns) {
            tracing::debug!(%error, "cannot shorten an HTTP worker's time slice; it keeps the default");
        }
        return;
    }
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 1 };
        // RESET_ON_FORK: threads a worker spawns (the blocking pool that parses bodies) start under the
        // default policy instead of inheriting FIFO.
        let policy = libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK;
        // SAFETY: `0` is the calling thread; `param` is a valid sched_param for the call's duration.
        if unsafe { libc::sched_setscheduler(0, policy, &param) } != 0 {
            tracing::warn!(
                error = %std::io::Error::last_os_error(),
                "server.realtime_http: cannot switch an HTTP worker to SCHED_FIFO; it keeps the default policy"
            );
        }
    }
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot install the SIGTERM handler; stopping on Ctrl-C only");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term.recv() => {},
    }
}
