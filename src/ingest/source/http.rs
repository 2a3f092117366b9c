//! The HTTP source: the body of a `POST /v1/samples` or `POST /v1/predict` request read frame by
//! frame, parsed on the blocking pool and, for samples, handed to [`Admission`]. The routes, and the
//! status each error becomes, are `api`'s; this module owns everything from the first byte of a body
//! to the validated batch, and the counters of what it refuses.
//!
//! **Reading.** The body is read chunk by chunk ([`HttpSource::read`]), yielding to the runtime after
//! each chunk, and the chunks are parsed where they are, not joined (for line bodies). Why: with the
//! stock `Bytes` extractor, hyper reads up to 16 chunks (most of a 6 MB, 10k-sample batch) in one
//! poll of the connection task and axum then copies them into one buffer in the same poll, and a
//! `GET /v1/model` that arrived meanwhile waited for that worker (2 workers on 2 cores, both often
//! on POSTs). Over the body limit (by `Content-Length` up front, or by what arrives) is refused and
//! the rest is not read.
//!
//! **Slow senders.** A body that sends nothing for `server.body_idle_timeout_s` fails
//! ([`BodyError::Stalled`], which `api` answers with 408 and a closed connection): the body is read
//! through `tower_http`'s [`TimeoutBody`], whose clock restarts at every frame, so a slow but steady
//! upload is not cut, only one that stops.
//!
//! **Parsing** runs on the blocking pool so large bodies do not stall the runtime, on threads
//! scheduled as parsers (`sys::PARSER_NICE`, `server.worker_slice_us`). The queue is fed with
//! `try_send` only: when it is full the request is refused and nothing from it enters; a line body
//! is then refused before it is parsed.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::http::{header, HeaderMap};
use tower_http::timeout::{TimeoutBody, TimeoutError};

use crate::ingest::batch::{parse_segments, BodyFormat, FeatureDictionary, Rules};
use crate::ingest::segments::count_content_lines;
use crate::ingest::{Admission, AdmitError, BatchError, BodyError, HttpIngestError, Source};
use crate::metrics::{reason, Metrics};
use crate::sample::SampleBlock;
use crate::sys::WorkerScheduling;

/// What the HTTP handlers parse bodies with and hand samples to (shared by every request).
pub struct HttpSource {
    /// The door to the learners: budget, queue and counters.
    pub admission: Arc<Admission>,
    pub dictionary: Arc<FeatureDictionary>,
    /// The rules of `POST /v1/samples` bodies.
    pub rules: Rules,
    /// The rules of `POST /v1/predict` bodies (labels optional, unknown names ignored).
    pub predict_rules: Rules,
    pub metrics: Metrics,
    /// How parser threads are scheduled (`server.worker_slice_us`).
    pub worker_scheduling: WorkerScheduling,
    /// `server.body_idle_timeout_s`: the longest pause in a body before it is refused as stalled.
    pub body_idle: Duration,
}

impl HttpSource {
    /// The body format the `Content-Type` header names (parameters such as `charset` ignored).
    pub fn format(headers: &HeaderMap) -> Result<BodyFormat, BodyError> {
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        BodyFormat::from_content_type(content_type)
            .ok_or_else(|| BodyError::UnsupportedMediaType(content_type.to_string()))
    }

    /// The request body as the chunks hyper read, not joined: the blocking pool parses them in place.
    /// Yields to the runtime after every chunk: `yield_now` defers this task until the worker has
    /// polled the I/O driver, so a `GET` that arrived meanwhile runs before the next chunk is read.
    /// Over `limit` (by `Content-Length` up front, or by what arrives) is [`BodyError::TooLarge`]
    /// (counted) and the rest is not read.
    pub async fn read(
        &self,
        headers: &HeaderMap,
        body: Body,
        limit: usize,
    ) -> Result<Vec<Bytes>, BodyError> {
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        if declared.is_some_and(|n| n > limit) {
            return Err(self.too_large(limit));
        }
        let mut body = std::pin::pin!(TimeoutBody::new(self.body_idle, body));
        let mut chunks = Vec::new();
        let mut total = 0usize;
        while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
            let frame = frame.map_err(|e| {
                if e.is::<TimeoutError>() {
                    BodyError::Stalled(self.body_idle)
                } else {
                    BodyError::Unreadable(e.to_string())
                }
            })?;
            let Ok(data) = frame.into_data() else {
                continue; // trailers
            };
            total += data.len();
            if total > limit {
                return Err(self.too_large(limit));
            }
            chunks.push(data);
            tokio::task::yield_now().await;
        }
        Ok(chunks)
    }

    fn too_large(&self, limit: usize) -> BodyError {
        self.metrics
            .rejected
            .with_label_values(&[reason::TOO_LARGE])
            .inc();
        BodyError::TooLarge { limit }
    }

    /// Parses `chunks` (a body in `format`) on the blocking pool, with the prediction rules if
    /// `predict`, on a thread scheduled as a parser.
    pub async fn parse(
        self: &Arc<Self>,
        format: BodyFormat,
        chunks: Vec<Bytes>,
        predict: bool,
    ) -> Result<SampleBlock, BatchError> {
        let source = self.clone();
        tokio::task::spawn_blocking(move || {
            crate::sys::set_throughput_scheduling(
                crate::sys::PARSER_NICE,
                source.worker_scheduling,
            );
            // Line bodies are read chunk by chunk, in place (`ingest::segments`): no joined copy.
            let segments: Vec<&[u8]> = chunks.iter().map(|c| c.as_ref()).collect();
            let rules = if predict {
                &source.predict_rules
            } else {
                &source.rules
            };
            parse_segments(format, &segments, rules, &source.dictionary)
        })
        .await
        .unwrap_or_else(|e| {
            Err(BatchError {
                line: None,
                message: format!("parser failed: {e}"),
                samples: 0,
            })
        })
    }

    /// A `POST /v1/samples` body, all or nothing: its format, read, parsed and admitted; the number
    /// of samples that entered. Every refusal is counted in `thresher_samples_rejected_total`.
    pub async fn ingest(
        self: &Arc<Self>,
        headers: &HeaderMap,
        body: Body,
        limit: usize,
    ) -> Result<usize, HttpIngestError> {
        let format = Self::format(headers).inspect_err(|_| {
            self.metrics
                .rejected
                .with_label_values(&[reason::UNSUPPORTED_MEDIA_TYPE])
                .inc();
        })?;
        let chunks = self.read(headers, body, limit).await?;
        // A full queue refuses a line-format body before it is parsed: under overload, parsing bodies
        // only to drop them would take the CPU the learners need to catch up. (It may still fill
        // during a parse; then the parsed body is refused below. JSON arrays, whose samples only a
        // parse can count, always take that path.)
        if self.admission.is_full() && format != BodyFormat::JsonArray {
            let n = tokio::task::spawn_blocking(move || count_content_lines(&chunks))
                .await
                .unwrap_or(0);
            self.admission.refused_full(n);
            return Err(AdmitError::QueueFull.into());
        }
        let samples = self.parse(format, chunks, false).await.map_err(|e| {
            self.metrics
                .rejected
                .with_label_values(&[reason::INVALID])
                .inc_by(e.samples as u64);
            HttpIngestError::Invalid(e)
        })?;
        if self.admission.waits_for_fsync() {
            // `durability.wal = "always"`: the 202 waits for the log's fsync, on the blocking pool.
            let admission = self.admission.clone();
            return tokio::task::spawn_blocking(move || admission.admit(samples, Source::Http))
                .await
                .unwrap_or(Err(AdmitError::ShuttingDown))
                .map_err(Into::into);
        }
        Ok(self.admission.admit(samples, Source::Http)?)
    }
}

#[cfg(test)]
mod tests;
