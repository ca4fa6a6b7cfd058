//! The one HTTPS serving loop of kcr's servers: the webhook server (kcr-webhook) and the
//! secured metrics endpoint (kcr-controller) both serve through [`serve_https`].
//!
//! - every accepted connection gets `TCP_NODELAY` (answers are small and latency counts);
//! - its TLS handshake must finish within [`ServeOptions::handshake_timeout`], and each
//!   request's headers arrive within [`ServeOptions::header_read_timeout`] (a client that
//!   connects and says nothing holds nothing for long);
//! - HTTP/2 is served only when the TLS configuration offers it in ALPN
//!   ([`TlsOptions::enable_http2`](crate::TlsOptions::enable_http2); off by default, as controller-runtime
//!   after CVE-2023-44487), HTTP/1.1 otherwise;
//! - the verified client certificate of a mutual-TLS connection is handed to the service
//!   ([`Connection::client_certificate`]);
//! - when `stop` fires, the listener closes, each open connection finishes the requests it is
//!   serving and closes (HTTP/1.1 keep-alive ends, HTTP/2 sends GOAWAY), and the loop returns
//!   once they are done, or after [`ServeOptions::drain_timeout`] with the stragglers cut.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::ClientCertificate;

/// The bounds of [`serve_https`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct ServeOptions {
    /// Names the server in logs (`webhook`, `metrics`).
    pub name: &'static str,
    /// The longest a TLS handshake may take (default 10 s).
    pub handshake_timeout: Duration,
    /// The longest a request's headers may take to arrive (default 10 s).
    pub header_read_timeout: Duration,
    /// After `stop`, how long open connections may take to finish their requests before they
    /// are cut (default 10 s).
    pub drain_timeout: Duration,
}

impl ServeOptions {
    /// Options with the defaults, naming the server `name` in logs.
    pub fn new(name: &'static str) -> Self {
        ServeOptions {
            name,
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(10),
        }
    }

    /// Sets [`handshake_timeout`](Self::handshake_timeout).
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout;
        self
    }

    /// Sets [`header_read_timeout`](Self::header_read_timeout).
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.header_read_timeout = timeout;
        self
    }

    /// Sets [`drain_timeout`](Self::drain_timeout).
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }
}

/// What the service of one connection knows about it.
#[derive(Debug, Clone)]
pub struct Connection {
    /// The client's address.
    pub peer: SocketAddr,
    /// The verified client certificate, with mutual TLS.
    pub client_certificate: Option<Arc<ClientCertificate>>,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Serves `listener` over TLS with `acceptor` until `stop` fires, then drains (see the
/// [module docs](self)). `service_for` makes the hyper service of each connection.
pub async fn serve_https<F, S, B>(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    options: ServeOptions,
    stop: CancellationToken,
    service_for: F,
) where
    F: Fn(Connection) -> S + Send + Sync + 'static,
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let name = options.name;
    let http2 = crate::http2_offered(acceptor.config());
    let service_for = Arc::new(service_for);
    let mut connections = JoinSet::new();
    loop {
        // Finished connections leave the set as they go.
        while connections.try_join_next().is_some() {}
        let (tcp, peer) = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Transient (EMFILE, aborted connections): keep serving.
                    tracing::warn!(error = %e, "{name} accept failed");
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let (acceptor, stop, options) = (acceptor.clone(), stop.clone(), options.clone());
        let service_for = service_for.clone();
        connections.spawn(async move {
            let stream =
                match tokio::time::timeout(options.handshake_timeout, acceptor.accept(tcp)).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "{name} TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "{name} TLS handshake timed out");
                        return;
                    }
                };
            let connection = Connection {
                peer,
                client_certificate: ClientCertificate::from_connection(stream.get_ref().1)
                    .map(Arc::new),
            };
            let service = service_for(connection);
            let mut builder = auto::Builder::new(TokioExecutor::new());
            if !http2 {
                builder = builder.http1_only();
            }
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(options.header_read_timeout);
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            let mut conn = std::pin::pin!(conn);
            let res = tokio::select! {
                res = conn.as_mut() => res,
                _ = stop.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = res {
                tracing::debug!(%peer, error = %e, "{name} connection ended with an error");
            }
        });
    }
    drop(listener);
    let drained = tokio::time::timeout(options.drain_timeout, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            open = connections.len(),
            "{name}: connections still open {:?} after the stop were cut",
            options.drain_timeout
        );
        connections.abort_all();
    }
}
