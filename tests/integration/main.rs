//! The one integration-test binary: runs the real `thresher` executable (fit, predict, serve).

mod auto;
mod autogrid;
mod cli;
mod cluster;
mod common;
mod daemon;
mod durability;
mod examples;
mod features;
mod grid;
mod inflight;
mod layout;
mod learners;
mod limits;
mod mirror;
mod nats;
mod nats_fixture;
mod polish;
mod prometheus;
mod regression;
mod sdiht;
mod security;
mod status_page;
mod stopping;
mod subset;
