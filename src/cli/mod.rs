//! The command line: argument types (clap) and the `fit` / `predict` commands.
//!
//! `main.rs` only parses [`Cli`] and calls [`run`]; everything a command does lives here, returning
//! [`CliError`] so the binary can print one clear message and exit non-zero.

mod fit;
mod predict;
mod serve;
mod subset;

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use thiserror::Error;

pub use fit::{FitArgs, MirrorKind, SolverKind};
pub use predict::PredictArgs;
pub use serve::ServeArgs;

/// thresher: learn k-sparse linear models with a primal-dual gap certificate.
#[derive(Debug, Parser)]
#[command(name = "thresher", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Train a k-sparse model on a file and write it as JSON.
    // Boxed: the fit flags of every solver make this variant much larger than the others.
    Fit(Box<FitArgs>),
    /// Predict with a model file, one prediction per input line.
    Predict(PredictArgs),
    /// Run the daemon: ingest samples over HTTP (and stdin), learn continuously, serve the model.
    Serve(ServeArgs),
}

#[derive(Debug, Error)]
pub enum CliError {
    #[error(transparent)]
    Read(#[from] crate::ingest::ReadError),
    #[error(transparent)]
    Problem(#[from] crate::solver::ProblemError),
    #[error(transparent)]
    Loss(#[from] crate::loss::LossError),
    #[error(transparent)]
    Model(#[from] crate::model::ModelError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Daemon(#[from] crate::daemon::DaemonError),
    #[error(transparent)]
    Mirror(#[from] crate::solver::mirror::MirrorError),
    #[error(transparent)]
    Subset(#[from] crate::solver::subset::SubsetError),
    #[error("{solver} diverged at epoch {epoch} (non-finite objective): the step is too large for this data; use --step adaptive or a smaller constant")]
    Diverged { solver: String, epoch: usize },
    #[error("invalid argument: {0}")]
    Argument(String),
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Runs one command.
pub fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Fit(args) => fit::run(&args),
        Command::Predict(args) => predict::run(&args),
        Command::Serve(args) => serve::run_serve(&args),
    }
}
