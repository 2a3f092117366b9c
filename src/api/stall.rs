//! The body-idle timeout against slow senders ("slowloris"): a request body that sends nothing for
//! `server.body_idle_timeout_s` fails with [`BodyStalled`], which the handlers answer with 408
//! ([`super::ApiError::BodyStalled`]) and which ends the connection. The HTTP front wraps every
//! request body in [`IdleTimeoutBody`] (`daemon::http`); the clock restarts at every frame, so a slow
//! but steady upload is not cut, only one that stops.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Bytes, HttpBody};
use tokio::time::{Instant, Sleep};

/// A request body sent nothing for the given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the request body sent nothing for {0:?}")]
pub struct BodyStalled(pub Duration);

/// The stall in a body read error, if that is what it is (the error as axum's `Body` reports it).
pub fn stalled(error: &axum::Error) -> Option<Duration> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(BodyStalled(idle)) = e.downcast_ref::<BodyStalled>() {
            return Some(*idle);
        }
        source = e.source();
    }
    None
}

/// `inner` with a deadline on every frame.
pub struct IdleTimeoutBody<B> {
    inner: B,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
}

impl<B> IdleTimeoutBody<B> {
    pub fn new(inner: B, idle: Duration) -> Self {
        IdleTimeoutBody {
            inner,
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
        }
    }
}

impl<B> HttpBody for IdleTimeoutBody<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                let next = Instant::now() + this.idle;
                this.deadline.as_mut().reset(next);
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyStalled(this.idle))))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    async fn next_frame(body: &mut Body) -> Option<Result<Bytes, axum::Error>> {
        let frame = std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await?;
        Some(frame.map(|f| f.into_data().unwrap_or_default()))
    }

    #[tokio::test]
    async fn a_body_that_stops_sending_fails_after_the_idle_time() {
        let idle = Duration::from_millis(300);
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
        let stream = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
        let mut body = Body::new(IdleTimeoutBody::new(Body::from_stream(stream), idle));
        // Steady frames keep it alive well past one idle period.
        for _ in 0..6 {
            tokio::time::sleep(idle / 3).await;
            tx.send(Ok(Bytes::from_static(b"1 1:1\n"))).await.unwrap();
            assert_eq!(next_frame(&mut body).await.unwrap().unwrap(), "1 1:1\n");
        }
        let start = Instant::now();
        let error = next_frame(&mut body).await.unwrap().unwrap_err();
        assert!(start.elapsed() >= idle, "{:?}", start.elapsed());
        assert_eq!(stalled(&error), Some(idle));
        let other = axum::Error::new(std::io::Error::other("reset"));
        assert_eq!(stalled(&other), None);
        drop(tx);
    }
}
