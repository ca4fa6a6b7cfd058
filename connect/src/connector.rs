//! The connector of a client from [`crate::client`]: TCP connections that notice when they
//! died ([`TrackedIo`]), under TLS, with the connect and the TLS handshake bounded together
//! ([`BoundedConnector`]).
//!
//! A connection is taken for dead when bytes went out and nothing came back within the bound
//! (an HTTP/1 request abandoned by its deadline, an HTTP/2 PING unanswered): when such a
//! connection is dropped it is counted in `kcr_client_dead_connections_total` and logged. The
//! tracking sits under TLS, so a PING or a request counts as bytes out and any TLS record as
//! bytes in.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tower::{BoxError, Service};

use crate::error::{Timeout, TimeoutKind};
use crate::metrics::{DeadReason, dead_connection};

/// Opens plain TCP connections, each wrapped in a [`TrackedIo`].
#[derive(Debug, Clone)]
pub(crate) struct TcpConnector {
    /// The server's name in metrics and logs.
    pub(crate) host: Arc<str>,
    /// Bytes out and nothing back for this long: dead.
    pub(crate) dead_after: Duration,
}

impl Service<Uri> for TcpConnector {
    type Response = TrackedIo;
    type Error = io::Error;
    type Future = BoxFuture<'static, Result<TrackedIo, io::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), io::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let host = self.host.clone();
        let dead_after = self.dead_after;
        Box::pin(async move {
            let name = uri
                .host()
                .ok_or_else(|| {
                    io::Error::new(io::ErrorKind::InvalidInput, format!("no host in {uri}"))
                })?
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned();
            let port = uri
                .port_u16()
                .unwrap_or(if uri.scheme_str() == Some("https") {
                    443
                } else {
                    80
                });
            let stream = TcpStream::connect((name.as_str(), port)).await?;
            stream.set_nodelay(true)?;
            Ok(TrackedIo {
                io: TokioIo::new(Tracked {
                    stream,
                    host,
                    dead_after,
                    unanswered_since: None,
                }),
            })
        })
    }
}

/// A TCP stream that remembers since when it has sent bytes without receiving any.
#[derive(Debug)]
struct Tracked {
    stream: TcpStream,
    host: Arc<str>,
    dead_after: Duration,
    /// The first write since the last read.
    unanswered_since: Option<Instant>,
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(res, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.unanswered_since = None;
        }
        res
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let res = Pin::new(&mut self.stream).poll_write(cx, buf);
        if matches!(res, Poll::Ready(Ok(n)) if n > 0) && self.unanswered_since.is_none() {
            self.unanswered_since = Some(Instant::now());
        }
        res
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(since) = self.unanswered_since {
            let silence = since.elapsed();
            if silence >= self.dead_after {
                dead_connection(&self.host, DeadReason::NoAnswer, silence);
            }
        }
    }
}

/// A tracked TCP connection, as hyper's I/O.
#[derive(Debug)]
pub(crate) struct TrackedIo {
    io: TokioIo<Tracked>,
}

impl Read for TrackedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl Write for TrackedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

impl Connection for TrackedIo {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

/// A connector whose connections must be up (TCP connected and, over TLS, the handshake
/// done) within `timeout`.
#[derive(Debug, Clone)]
pub(crate) struct BoundedConnector<C> {
    pub(crate) inner: C,
    pub(crate) timeout: Duration,
    pub(crate) host: Arc<str>,
}

impl<C> Service<Uri> for BoundedConnector<C>
where
    C: Service<Uri>,
    C::Error: Into<BoxError>,
    C::Future: Send + 'static,
    C::Response: Send + 'static,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<C::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let bound = self.timeout;
        let host = self.host.clone();
        let connecting = self.inner.call(uri);
        Box::pin(async move {
            match crate::realtime::timeout(bound, connecting).await {
                Ok(result) => result.map_err(Into::into),
                Err(_) => {
                    dead_connection(&host, DeadReason::Connect, bound);
                    Err(Timeout {
                        kind: TimeoutKind::Connect,
                        host: host.to_string(),
                        what: "a new connection".to_owned(),
                        bound,
                    }
                    .into())
                }
            }
        })
    }
}
