//! The errors of this crate: [`ConnectError`] when a client cannot be built, [`Timeout`] when
//! a request, a watch or a connection did not answer within its bound.

use std::time::Duration;

/// A client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// A bound of [`ConnectionOptions`](crate::ConnectionOptions) is not usable.
    #[error("invalid connection options: {reason}")]
    InvalidOptions {
        /// What is wrong.
        reason: String,
    },
    /// The kubeconfig's settings could not be turned into a connection (TLS configuration,
    /// credentials, headers).
    #[error("building a client for {cluster}: {source}")]
    Config {
        /// The cluster's URL.
        cluster: String,
        /// kube's error.
        #[source]
        source: kube::Error,
    },
    /// The kubeconfig asks for a proxy, which this crate's connection stack does not speak.
    #[error(
        "building a client for {cluster}: the configuration asks for the proxy {proxy}, which \
         kcr-connect does not support; build the client with kube's own stack and bound it with \
         kcr_connect::bound"
    )]
    ProxyUnsupported {
        /// The cluster's URL.
        cluster: String,
        /// The proxy's URL.
        proxy: String,
    },
}

/// What did not answer within its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutKind {
    /// A request that is not a watch got no response headers.
    Response,
    /// A response body (not a watch's) stopped streaming.
    Body,
    /// A watch's stream did not start.
    WatchStart,
    /// A started watch heard nothing, not even a bookmark.
    WatchIdle,
    /// A connection did not connect or finish its TLS handshake.
    Connect,
}

impl TimeoutKind {
    /// A short label, also the `what` label of `kcr_client_request_timeouts_total`.
    pub fn label(self) -> &'static str {
        match self {
            TimeoutKind::Response => "response",
            TimeoutKind::Body => "body",
            TimeoutKind::WatchStart => "watch_start",
            TimeoutKind::WatchIdle => "watch_idle",
            TimeoutKind::Connect => "connect",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            TimeoutKind::Response => "got no response",
            TimeoutKind::Body => "got no more of its response body",
            TimeoutKind::WatchStart => "did not start its watch",
            TimeoutKind::WatchIdle => "heard nothing on its watch (not even a bookmark)",
            TimeoutKind::Connect => "did not connect or finish its TLS handshake",
        }
    }
}

/// A request, a watch or a connection that did not answer within its bound; kcr gave up on it
/// and on its connection. The error a `kube::Client` call returns carries it as its source
/// (`kube::Error::Service`); [`Timeout::find`] digs it out.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{what} to {host} {} within {bound:?}: the connection is taken for dead (a network partition, or a server that stopped answering)", kind.describe())]
pub struct Timeout {
    /// Which bound.
    pub kind: TimeoutKind,
    /// The server.
    pub host: String,
    /// The request (`GET /api/v1/namespaces/a/configmaps?watch=true...`), or `connection`.
    pub what: String,
    /// The bound that passed.
    pub bound: Duration,
}

impl Timeout {
    /// The [`Timeout`] in `error`'s chain of sources, if any.
    pub fn find<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a Timeout> {
        let mut next = Some(error);
        while let Some(e) = next {
            if let Some(timeout) = e.downcast_ref::<Timeout>() {
                return Some(timeout);
            }
            next = e.source();
        }
        None
    }
}
