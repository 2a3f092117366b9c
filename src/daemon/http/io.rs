//! The HTTP front's transport wrapper: a connection's socket (plain or TLS) that reports arriving
//! bytes to the connection table, so the header timeout runs from the first byte of a request, and
//! fails a write its client has not made room for within `server.write_timeout_s`, so a client that
//! never reads its response cannot hold the response (and the connection) in memory.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use super::connections::{ConnState, Table};
use crate::metrics::closed;

/// A connection's transport that tells its [`ConnState`] when bytes arrive between requests (the
/// header timeout runs from the first of them), and times out writes that make no progress.
pub(super) struct Tracked<I> {
    pub(super) inner: I,
    pub(super) conn: Arc<ConnState>,
    pub(super) table: Arc<Table>,
    /// `server.write_timeout_s`.
    pub(super) write_timeout: Duration,
    /// Armed when a write or flush found the socket full; disarmed by any progress.
    pub(super) stalled: Option<Pin<Box<Sleep>>>,
}

impl<I> Tracked<I> {
    /// What a write that returned `polled` becomes: progress disarms the timer; `Pending` arms it (once)
    /// and becomes a `TimedOut` error when it fires (counted: the connection then closes).
    fn timed<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        if polled.is_ready() {
            self.stalled = None;
            return polled;
        }
        let timeout = self.write_timeout;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match timer.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(()) => {
                self.table
                    .metrics
                    .http_connections_closed
                    .with_label_values(&[closed::WRITE_TIMEOUT])
                    .inc();
                Poll::Ready(Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("the client read nothing for {timeout:?} (server.write_timeout_s)"),
                )))
            }
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Tracked<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            let now = self.table.now_ms();
            self.conn.bytes_arrived(now);
        }
        polled
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Tracked<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.timed(cx, polled)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.timed(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.timed(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
