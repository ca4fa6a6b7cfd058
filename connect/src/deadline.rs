//! [`DeadlineLayer`]: a tower layer that bounds every request of a client stack, whatever its
//! connections are: response headers within their deadline, and a response body that may not
//! stay silent past its own (for a watch, tied to the bookmarks the API server sends).
//!
//! When a bound passes, the request is dropped, which drops its connection too on HTTP/1 (the
//! connection's answer is incomplete and cannot be reused), and the caller gets a
//! [`Timeout`]: a watcher then resumes its watch on a new connection, a reconcile fails and is
//! retried. Each one is counted in `kcr_client_request_timeouts_total` and logged at `WARN`
//! with the host and the request.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use std::time::Instant;
use tower::{BoxError, Layer, Service};

use crate::classify::{Class, describe};
use crate::error::{Timeout, TimeoutKind};
use crate::health::Health;
use crate::options::ConnectionOptions;
use crate::realtime::RealSleep;

/// A tower layer bounding every request that passes it (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct DeadlineLayer {
    options: Arc<ConnectionOptions>,
    host: Arc<str>,
    health: Option<Health>,
}

impl DeadlineLayer {
    /// A layer with `options`' bounds; `host` names the server in errors, logs and metrics.
    pub fn new(options: ConnectionOptions, host: impl Into<String>) -> Self {
        let host: Arc<str> = host.into().into();
        crate::metrics::describe();
        crate::metrics::register(&host);
        DeadlineLayer {
            options: Arc::new(options),
            host,
            health: None,
        }
    }

    /// Records every answer and timeout of the requests it bounds in `health`.
    pub fn with_health(mut self, health: Health) -> Self {
        self.health = Some(health);
        self
    }
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = Deadlines<S>;

    fn layer(&self, inner: S) -> Deadlines<S> {
        Deadlines {
            inner,
            options: self.options.clone(),
            host: self.host.clone(),
            health: self.health.clone(),
        }
    }
}

/// The service of [`DeadlineLayer`].
#[derive(Debug, Clone)]
pub struct Deadlines<S> {
    inner: S,
    options: Arc<ConnectionOptions>,
    host: Arc<str>,
    health: Option<Health>,
}

impl<S, ReqBody, B> Service<Request<ReqBody>> for Deadlines<S>
where
    S: Service<Request<ReqBody>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<BoundedBody<B>>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut request: Request<ReqBody>) -> Self::Future {
        if request.extensions().get::<Bounded>().is_some() {
            // An outer DeadlineLayer bounds this request already (a bounded client wrapped in
            // another): one set of bounds, one count.
            let response = self.inner.call(request);
            return Box::pin(async move {
                let response = response.await.map_err(Into::into)?;
                Ok(response.map(|body| BoundedBody {
                    inner: body,
                    idle: None,
                    health: None,
                    done: false,
                }))
            });
        }
        request.extensions_mut().insert(Bounded);
        let class = Class::of(&request, &self.options);
        let what = describe(&request);
        let (start_kind, start_bound, body_bound) = match class {
            Class::Request => (
                TimeoutKind::Response,
                self.options.request_timeout,
                Some(self.options.request_timeout),
            ),
            Class::Watch { idle } => (
                TimeoutKind::WatchStart,
                self.options.watch_start_timeout,
                Some(idle),
            ),
            Class::Stream => (TimeoutKind::Response, self.options.request_timeout, None),
        };
        let body_kind = match class {
            Class::Watch { .. } => TimeoutKind::WatchIdle,
            Class::Request | Class::Stream => TimeoutKind::Body,
        };
        let host = self.host.clone();
        let health = self.health.clone();
        let response = self.inner.call(request);
        Box::pin(async move {
            match crate::realtime::timeout(start_bound, response).await {
                Ok(Ok(response)) => {
                    if let Some(health) = &health {
                        health.answered();
                    }
                    Ok(response.map(|body| BoundedBody {
                        inner: body,
                        idle: body_bound.map(|bound| Idle {
                            bound,
                            last: Instant::now(),
                            sleep: RealSleep::new(bound),
                            kind: body_kind,
                            host,
                            what,
                        }),
                        health,
                        done: false,
                    }))
                }
                Ok(Err(error)) => {
                    let error: BoxError = error.into();
                    // A connect or TLS handshake that timed out below this layer.
                    if let (Some(health), Some(timeout)) = (&health, Timeout::find(&*error)) {
                        health.timed_out(timeout);
                    }
                    Err(error)
                }
                Err(_) => {
                    let timeout = Timeout {
                        kind: start_kind,
                        host: host.to_string(),
                        what,
                        bound: start_bound,
                    };
                    crate::metrics::timed_out(&timeout);
                    if let Some(health) = &health {
                        health.timed_out(&timeout);
                    }
                    Err(timeout.into())
                }
            }
        })
    }
}

/// Marks a request bounded by a [`DeadlineLayer`], so that an inner one lets it through.
#[derive(Debug, Clone, Copy)]
struct Bounded;

/// The silence bound of a response body.
struct Idle {
    bound: Duration,
    /// When the last frame came.
    last: Instant,
    /// Fires `bound` after some earlier frame; re-armed lazily from `last` when it fires early.
    sleep: RealSleep,
    kind: TimeoutKind,
    host: Arc<str>,
    what: String,
}

/// A response body that ends with a [`Timeout`] error when it stays silent past its bound.
#[pin_project::pin_project]
pub struct BoundedBody<B> {
    #[pin]
    inner: B,
    idle: Option<Idle>,
    health: Option<Health>,
    done: bool,
}

impl<B> std::fmt::Debug for BoundedBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundedBody")
            .field("bound", &self.idle.as_ref().map(|i| i.bound))
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl<B> Body for BoundedBody<B>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.project();
        if *this.done {
            return Poll::Ready(None);
        }
        match this.inner.poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(idle) = this.idle.as_mut() {
                    idle.last = Instant::now();
                }
                if let Some(health) = this.health.as_ref() {
                    health.answered();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => {
                *this.done = true;
                Poll::Ready(Some(Err(error.into())))
            }
            Poll::Ready(None) => {
                *this.done = true;
                Poll::Ready(None)
            }
            Poll::Pending => {
                let Some(idle) = this.idle.as_mut() else {
                    return Poll::Pending;
                };
                loop {
                    if Pin::new(&mut idle.sleep).poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    let due = idle.last + idle.bound;
                    if due > Instant::now() {
                        // A frame came since the timer was armed: re-arm from it.
                        idle.sleep.reset(due);
                        continue;
                    }
                    *this.done = true;
                    let timeout = Timeout {
                        kind: idle.kind,
                        host: idle.host.to_string(),
                        what: std::mem::take(&mut idle.what),
                        bound: idle.bound,
                    };
                    crate::metrics::timed_out(&timeout);
                    if let Some(health) = this.health.as_ref() {
                        health.timed_out(&timeout);
                    }
                    return Poll::Ready(Some(Err(timeout.into())));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
