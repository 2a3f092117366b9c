//! The one integration-test binary: runs the real `thresher` executable (fit, predict, serve).

mod cli;
mod daemon;
mod mirror;
mod prometheus;
mod subset;
