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
//! **In flight** (`ingest::inflight`). Before a body is read its bytes are reserved in
//! `server.inflight_bytes` (its `Content-Length`; a chunked body's bytes as they arrive; a JSON array
//! twice, as it is joined to be parsed): a body that does not fit is refused with 503 (413 if it is
//! larger than the whole budget) and not read. The reservation is held until the body's chunks are
//! freed, at the end of its parse. The parse reserves its rows in the sample budget
//! (`ingest.queue_samples`) as it goes and stops when the budget is spent (503; 413 for a body with
//! more samples than the whole budget) or its request is dropped (the client went away); the
//! reservation becomes the queued batch's, so samples being parsed and queued share one bound.
//!
//! **Parsing** runs on the blocking pool so large bodies do not stall the runtime, on threads
//! scheduled as parsers (`sys::PARSER_NICE`, `server.worker_slice_us`). The queue is fed with
//! `try_send` only: when it is full the request is refused and nothing from it enters; a line body
//! is then refused before it is parsed.
//!
//! A body with a `Content-Encoding` other than `identity` is refused (415): nothing is decoded, so no
//! compressed body can expand past the bounds above.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::http::{header, HeaderMap};
use tower_http::timeout::{TimeoutBody, TimeoutError};

use crate::ingest::batch::{parse_segments_watched, BodyFormat, Claim, FeatureDictionary, Rules};
use crate::ingest::inflight::{BytesTicket, Cancel, InflightBytes, ParseWatch, Stopped};
use crate::ingest::segments::count_content_lines;
use crate::ingest::{Admission, AdmitError, BodyError, HttpIngestError, Source};
use crate::metrics::{reason, Metrics};
use crate::ring::budget::Ticket;
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
    /// Request bytes in flight (`server.inflight_bytes`).
    pub inflight: Arc<InflightBytes>,
}

/// A body read within the in-flight bounds: the chunks hyper read, not joined, and the bytes of
/// `server.inflight_bytes` they hold until they are freed.
pub struct ReadBody {
    chunks: Vec<Bytes>,
    _bytes: BytesTicket,
}

impl ReadBody {
    /// The body's bytes in one buffer (its chunks joined).
    pub fn joined(&self) -> Vec<u8> {
        self.chunks.concat()
    }

    /// Replaces the body's bytes by `bytes` (a prediction body without its ids, `ingest::labels`); the
    /// bytes reserved for the body stay held until the parse ends.
    pub fn replace(&mut self, bytes: Vec<u8>) {
        self.chunks = vec![Bytes::from(bytes)];
    }
}

impl HttpSource {
    /// The body format the `Content-Type` header names (parameters such as `charset` ignored). A body
    /// with a `Content-Encoding` other than `identity` is refused first: bodies are not decoded.
    pub fn format(headers: &HeaderMap) -> Result<BodyFormat, BodyError> {
        if let Some(encoding) = headers.get(header::CONTENT_ENCODING) {
            let encoding = String::from_utf8_lossy(encoding.as_bytes()).into_owned();
            if !encoding.trim().eq_ignore_ascii_case("identity") {
                return Err(BodyError::UnsupportedEncoding(encoding));
            }
        }
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        BodyFormat::from_content_type(content_type)
            .ok_or_else(|| BodyError::UnsupportedMediaType(content_type.to_string()))
    }

    /// The request body as the chunks hyper read, not joined: the blocking pool parses them in place.
    /// Its bytes are reserved in `server.inflight_bytes` before they are read (module docs), twice for
    /// a JSON array (`format`). Yields to the runtime after every chunk: `yield_now` defers this task
    /// until the worker has polled the I/O driver, so a `GET` that arrived meanwhile runs before the
    /// next chunk is read. Over `limit` (by `Content-Length` up front, or by what arrives) is
    /// [`BodyError::TooLarge`] (counted) and the rest is not read.
    pub async fn read(
        &self,
        headers: &HeaderMap,
        body: Body,
        limit: usize,
        format: BodyFormat,
    ) -> Result<ReadBody, BodyError> {
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        if declared.is_some_and(|n| n > limit) {
            return Err(self.too_large(limit));
        }
        let held = |n: usize| match format {
            BodyFormat::JsonArray => n.saturating_mul(2),
            BodyFormat::Libsvm | BodyFormat::Ndjson => n,
        };
        let mut bytes = self.inflight.ticket();
        if let Some(n) = declared {
            bytes.reserve(held(n))?;
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
            if declared.is_none() {
                bytes.reserve(held(data.len()))?;
            }
            chunks.push(data);
            tokio::task::yield_now().await;
        }
        Ok(ReadBody {
            chunks,
            _bytes: bytes,
        })
    }

    fn too_large(&self, limit: usize) -> BodyError {
        self.metrics
            .rejected
            .with_label_values(&[reason::TOO_LARGE])
            .inc();
        BodyError::TooLarge { limit }
    }

    /// Parses `body` (in `format`) on the blocking pool, with the prediction rules if `predict`, on a
    /// thread scheduled as a parser, under a [`ParseWatch`]: the rows are reserved in the sample budget
    /// as they appear, and the parse stops when the budget is spent or this future is dropped (the
    /// client went away). The body's chunks and bytes are freed when the parse ends; the samples come
    /// with their reservation, to be queued ([`Admission::admit_reserved`]) or dropped.
    pub async fn parse(
        self: &Arc<Self>,
        format: BodyFormat,
        body: ReadBody,
        predict: bool,
    ) -> Result<(SampleBlock, Claim, Ticket), HttpIngestError> {
        let source = self.clone();
        let cancel = Cancel::default();
        let on_drop = cancel.on_drop();
        let (ticket, limit) = self.admission.parse_ticket();
        let mut watch = ParseWatch::new(ticket, limit, cancel, self.metrics.clone());
        let parsed = tokio::task::spawn_blocking(move || {
            crate::sys::set_throughput_scheduling(
                crate::sys::PARSER_NICE,
                source.worker_scheduling,
            );
            let rules = if predict {
                &source.predict_rules
            } else {
                &source.rules
            };
            // Line bodies are read chunk by chunk, in place (`ingest::segments`): no joined copy.
            let segments: Vec<&[u8]> = body.chunks.iter().map(|c| c.as_ref()).collect();
            let parsed =
                parse_segments_watched(format, &segments, rules, &source.dictionary, &mut |rows| {
                    watch.row(rows)
                });
            drop(segments);
            if watch.stopped() == Some(Stopped::Busy) && !predict {
                // As a full queue's refusal: every sample of the body, counted by its lines (an
                // array's, as far as the parse read).
                let n = match (format, &parsed) {
                    (BodyFormat::JsonArray, Err(e)) => e.samples,
                    _ => count_content_lines(&body.chunks),
                };
                source.admission.refused_full(n);
            }
            drop(body);
            match (parsed, watch.stopped()) {
                (_, Some(stopped)) => Err(source.stopped(stopped, limit)),
                (Ok((samples, claim)), None) => Ok((samples, claim, watch.into_ticket())),
                (Err(e), None) => {
                    if !predict {
                        source
                            .metrics
                            .rejected
                            .with_label_values(&[reason::INVALID])
                            .inc_by(e.samples as u64);
                    }
                    Err(HttpIngestError::Invalid(e))
                }
            }
        })
        .await;
        on_drop.disarm();
        parsed.unwrap_or_else(|e| {
            Err(HttpIngestError::Invalid(crate::ingest::BatchError {
                line: None,
                message: format!("parser failed: {e}"),
                samples: 0,
            }))
        })
    }

    /// The error of a parse its watch stopped (`limit`: `ingest.queue_samples`).
    fn stopped(&self, stopped: Stopped, limit: usize) -> HttpIngestError {
        let key = "ingest.queue_samples";
        match stopped {
            Stopped::Busy => BodyError::Busy {
                what: "samples",
                key,
            },
            Stopped::TooMany => BodyError::OverBudget {
                what: "samples",
                key,
                limit,
            },
            Stopped::Cancelled => BodyError::ClientGone,
        }
        .into()
    }

    /// A `POST /v1/samples` body, all or nothing: its format, read, parsed and admitted; the number
    /// of samples that entered. Every refusal is counted in `thresher_samples_rejected_total` (and
    /// those of the in-flight bounds in `thresher_inflight_refused_total`).
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
        let body = self.read(headers, body, limit, format).await?;
        // A full queue refuses a line-format body before it is parsed: under overload, parsing bodies
        // only to drop them would take the CPU the learners need to catch up. (It may still fill
        // during a parse; then the parse stops, or the parsed body is refused below. JSON arrays,
        // whose samples only a parse can count, always take that path.)
        if self.admission.is_full() && format != BodyFormat::JsonArray {
            let n = tokio::task::spawn_blocking(move || count_content_lines(&body.chunks))
                .await
                .unwrap_or(0);
            self.admission.refused_full(n);
            return Err(AdmitError::QueueFull.into());
        }
        let (samples, claim, ticket) = self.parse(format, body, false).await?;
        if self.admission.waits_for_fsync() {
            // `durability.wal = "always"`: the 202 waits for the log's fsync, on the blocking pool.
            let admission = self.admission.clone();
            return tokio::task::spawn_blocking(move || {
                admission.admit_reserved(samples, claim, ticket, Source::Http)
            })
            .await
            .unwrap_or(Err(AdmitError::ShuttingDown))
            .map_err(Into::into);
        }
        Ok(self
            .admission
            .admit_reserved(samples, claim, ticket, Source::Http)?)
    }

    /// Sets the gauge of request bytes in flight (`thresher_inflight_bytes`).
    pub fn set_gauges(&self) {
        self.metrics.inflight_bytes.set(self.inflight.used() as i64);
    }
}

#[cfg(test)]
mod tests;
