//! The `thresher` binary: parse the command line, run the command, report errors. Everything else is in
//! the library.

use clap::Parser;

fn main() -> anyhow::Result<()> {
    let cli = thresher::cli::Cli::parse();
    thresher::cli::run(cli)?;
    Ok(())
}
