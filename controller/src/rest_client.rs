//! client-go's `rest_client_*` metrics for a [`kube::Client`], from a tower layer.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `rest_client_requests_total` | counter | `code` (HTTP status, `<error>` when no response came), `method` (HTTP method), `host` |
//! | `rest_client_request_duration_seconds` | histogram | `verb` (HTTP method), `host` |
//!
//! The duration runs from the request being handed to the client's service until the response
//! headers arrive (for a watch: until the stream starts), as client-go measures it.
//!
//! Three ways to get them:
//! - the [`Manager`](crate::Manager) wraps the client it is given ([`instrument`]) unless
//!   [`ManagerOptions::rest_client_metrics`](crate::ManagerOptions::rest_client_metrics) is
//!   off: every request of its cache, controllers, leader election and event recorders counts;
//! - [`instrumented_client`] builds a client from a [`kube::Config`] with the layer in its
//!   stack (and the `host` label from the config's cluster URL);
//! - [`RestClientMetricsLayer`] is the layer itself, for a stack built with
//!   [`kube::client::ClientBuilder::with_layer`].
//!
//! Requests pass the layer with an absolute URI only below kube's base-URI layer; above it (where
//! `with_layer` and [`instrument`] put it) the URI is relative, so the `host` label is the one the
//! layer was made with ([`host_of`] a config's cluster URL). A request is counted once even if it
//! crosses two instrumented layers (a client from [`instrumented_client`] given to a Manager): the
//! outer layer marks it and the inner one lets it through.
//!
//! ```no_run
//! # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
//! let config = kube::Config::infer().await?;
//! let host = kcr_controller::rest_client::host_of(&config);
//! let client = kcr_controller::rest_client::instrumented_client(config)?;
//! let options = kcr_controller::ManagerOptions::default().api_server_host(host);
//! let manager = kcr_controller::Manager::new(client, options).await?;
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use futures::future::BoxFuture;
use http::{Request, Response};
use kube::client::Body;
use tower::{Layer, Service};

/// `rest_client_requests_total`
pub const REQUESTS_TOTAL: &str = "rest_client_requests_total";
/// `rest_client_request_duration_seconds`
pub const REQUEST_DURATION_SECONDS: &str = "rest_client_request_duration_seconds";
/// client-go's buckets for `rest_client_request_duration_seconds`.
pub const REQUEST_DURATION_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];
/// The `host` label used when none is known.
pub const UNKNOWN_HOST: &str = "unknown";
/// The `code` label of a request that got no response.
pub const ERROR_CODE: &str = "<error>";

/// Registers the HELP texts of the `rest_client_*` metrics with the installed recorder.
pub fn describe() {
    metrics::describe_counter!(
        REQUESTS_TOTAL,
        "Number of HTTP requests, partitioned by status code, method, and host"
    );
    metrics::describe_histogram!(
        REQUEST_DURATION_SECONDS,
        metrics::Unit::Seconds,
        "Request latency in seconds, broken down by verb and host"
    );
}

/// The `host` label for a client of `config`: its cluster URL's `host:port`.
pub fn host_of(config: &kube::Config) -> String {
    config
        .cluster_url
        .authority()
        .map(|a| a.as_str().to_owned())
        .unwrap_or_else(|| UNKNOWN_HOST.to_owned())
}

/// A layer recording `rest_client_*` for every request through it: see the [module docs](self).
#[derive(Debug, Clone)]
pub struct RestClientMetricsLayer {
    host: Arc<str>,
}

impl RestClientMetricsLayer {
    /// A layer labelling requests without an absolute URI with `host`.
    pub fn new(host: impl Into<String>) -> Self {
        let host: String = host.into();
        RestClientMetricsLayer {
            host: Arc::from(if host.is_empty() {
                UNKNOWN_HOST
            } else {
                host.as_str()
            }),
        }
    }
}

impl<S> Layer<S> for RestClientMetricsLayer {
    type Service = RestClientMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RestClientMetrics {
            inner,
            host: self.host.clone(),
        }
    }
}

/// The service [`RestClientMetricsLayer`] wraps around another.
#[derive(Debug, Clone)]
pub struct RestClientMetrics<S> {
    inner: S,
    host: Arc<str>,
}

/// Marks a request as counted by an outer layer.
#[derive(Debug, Clone, Copy)]
struct Counted;

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for RestClientMetrics<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqBody>) -> Self::Future {
        if request.extensions().get::<Counted>().is_some() {
            return Box::pin(self.inner.call(request));
        }
        request.extensions_mut().insert(Counted);
        let method = request.method().as_str().to_owned();
        let host = request
            .uri()
            .authority()
            .map(|a| a.as_str().to_owned())
            .unwrap_or_else(|| self.host.to_string());
        let started = Instant::now();
        let fut = self.inner.call(request);
        Box::pin(async move {
            let res = fut.await;
            let code = match &res {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => ERROR_CODE.to_owned(),
            };
            metrics::histogram!(REQUEST_DURATION_SECONDS, "verb" => method.clone(), "host" => host.clone())
                .record(started.elapsed().as_secs_f64());
            metrics::counter!(REQUESTS_TOTAL, "code" => code, "method" => method, "host" => host)
                .increment(1);
            res
        })
    }
}

/// A [`kube::Client`] built from `config` with [`RestClientMetricsLayer`] in its stack (`host`
/// from [`host_of`]).
pub fn instrumented_client(config: kube::Config) -> Result<kube::Client, kube::Error> {
    let layer = RestClientMetricsLayer::new(host_of(&config));
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&layer)
        .build())
}

/// `client` wrapped so that its requests record `rest_client_*` labelled with `host` (the
/// wrapper keeps the client's default namespace; errors come back as the client returned them).
/// Needs a tokio runtime (the new client's request buffer is a task).
pub fn instrument(client: kube::Client, host: impl Into<String>) -> kube::Client {
    let namespace = client.default_namespace().to_owned();
    let service = RestClientMetricsLayer::new(host).layer(SendService(client));
    kube::Client::new(service, namespace)
}

/// A [`kube::Client`] as a tower service: [`kube::Client::send`].
#[derive(Clone)]
struct SendService(kube::Client);

impl Service<Request<Body>> for SendService {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, Result<Response<Body>, kube::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // `send` waits for the inner client's buffer itself.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let client = self.0.clone();
        Box::pin(async move { client.send(request).await })
    }
}
