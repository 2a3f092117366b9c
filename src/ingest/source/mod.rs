//! Where samples come from besides files: HTTP request bodies ([`http`]), a NATS JetStream stream
//! ([`nats`]) and standard input ([`stdin`]). Each reads its input, parses it with the readers of [`crate::ingest::batch`] and hands the
//! validated batch to [`crate::ingest::Admission`]; none of them touches the learners.

pub mod http;
pub mod nats;
pub mod stdin;
