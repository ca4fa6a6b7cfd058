//! client-go's `rest_client_*` metrics for a [`kube::Client`], from a tower layer.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `rest_client_requests_total` | counter | `code` (HTTP status, `<error>` when no response came), `method` (HTTP method), `host` |
//! | `rest_client_request_duration_seconds` | histogram | `verb` (HTTP method), `host` |
//! | `rest_client_request_size_bytes` | histogram | `verb`, `host` |
//! | `rest_client_response_size_bytes` | histogram | `verb`, `host` |
//!
//! Request size is the length of the request body (0 without one; a body of unknown length, a
//! stream, is not observed: kube sends every API request from a buffer). Response size counts
//! the body's bytes as they stream (after kube's gzip decompression, like client-go's
//! `len(body)`) and is observed when the body ends; a body dropped before its end is not
//! observed, and neither are watches (`?watch=true`), for which client-go observes none either
//! (a watch's body lasts as long as the watch). A stream of another kind (following a pod's
//! logs) is observed when it ends.
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
//! Cost: about 12 µs per request on the 2-core VM with the four metrics (a GET from the
//! in-process kcr-envtest: 112 µs plain, 124 µs through [`instrument`], measured while other
//! builds ran; 11-14 µs before the two size histograms): the wrapper's request buffer, the
//! metric updates and the counted response body. `cargo run --release -p kcr-controller --example
//! metrics_overhead` measures it.
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

use std::pin::Pin;

use axum::body::{Bytes, HttpBody};
use futures::Stream;
use futures::future::BoxFuture;
use http::{Request, Response};
use tower::{BoxError, Layer, Service};

/// `rest_client_requests_total`
pub const REQUESTS_TOTAL: &str = "rest_client_requests_total";
/// `rest_client_request_duration_seconds`
pub const REQUEST_DURATION_SECONDS: &str = "rest_client_request_duration_seconds";
/// client-go's buckets for `rest_client_request_duration_seconds`.
pub const REQUEST_DURATION_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];
/// `rest_client_request_size_bytes`
pub const REQUEST_SIZE_BYTES: &str = "rest_client_request_size_bytes";
/// `rest_client_response_size_bytes`
pub const RESPONSE_SIZE_BYTES: &str = "rest_client_response_size_bytes";
/// client-go's buckets for the two size histograms: 64 bytes to 16 MiB.
pub const SIZE_BUCKETS: &[f64] = &[
    64.0, 256.0, 512.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0,
];
/// The `host` label used when none is known.
pub const UNKNOWN_HOST: &str = "unknown";
/// The `code` label of a request that got no response.
pub const ERROR_CODE: &str = "<error>";

/// Registers the HELP texts of the `rest_client_*` metrics with the installed recorder.
pub fn describe() {
    metrics::describe_counter!(
        REQUESTS_TOTAL,
        "Number of HTTP requests, partitioned by status code, method, and host."
    );
    metrics::describe_histogram!(
        REQUEST_DURATION_SECONDS,
        metrics::Unit::Seconds,
        "Request latency in seconds. Broken down by verb and host."
    );
    metrics::describe_histogram!(
        REQUEST_SIZE_BYTES,
        metrics::Unit::Bytes,
        "Request size in bytes. Broken down by verb and host."
    );
    metrics::describe_histogram!(
        RESPONSE_SIZE_BYTES,
        metrics::Unit::Bytes,
        "Response size in bytes. Broken down by verb and host."
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
    ReqBody: HttpBody,
    ResBody: HttpBody<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    type Response = Response<axum::body::Body>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqBody>) -> Self::Future {
        if request.extensions().get::<Counted>().is_some() {
            let fut = self.inner.call(request);
            return Box::pin(async move { Ok(fut.await?.map(axum::body::Body::new)) });
        }
        request.extensions_mut().insert(Counted);
        let method = request.method().as_str().to_owned();
        let host = request
            .uri()
            .authority()
            .map(|a| a.as_str().to_owned())
            .unwrap_or_else(|| self.host.to_string());
        let watch = request.uri().query().is_some_and(is_watch);
        if let Some(size) = request.body().size_hint().exact() {
            metrics::histogram!(REQUEST_SIZE_BYTES, "verb" => method.clone(), "host" => host.clone())
                .record(size as f64);
        }
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
            let response_size = (!watch).then(|| {
                metrics::histogram!(RESPONSE_SIZE_BYTES, "verb" => method.clone(), "host" => host.clone())
            });
            metrics::counter!(REQUESTS_TOTAL, "code" => code, "method" => method, "host" => host)
                .increment(1);
            let response = res?;
            Ok(match response_size {
                None => response.map(axum::body::Body::new),
                Some(histogram) => response.map(|body| {
                    let frames = axum::body::Body::new(body).into_data_stream();
                    axum::body::Body::from_stream(CountedBody {
                        frames,
                        bytes: 0,
                        histogram: Some(histogram),
                    })
                }),
            })
        })
    }
}

/// Whether a query string asks for a watch (`watch=true` or `watch=1`, as the API server
/// reads it).
fn is_watch(query: &str) -> bool {
    query
        .split('&')
        .any(|pair| matches!(pair, "watch=true" | "watch=1"))
}

/// A response body's data, counted as it streams; the total is observed in `histogram` when
/// the body ends (not if it is dropped before).
struct CountedBody {
    frames: axum::body::BodyDataStream,
    bytes: u64,
    /// Taken when observed.
    histogram: Option<metrics::Histogram>,
}

impl Stream for CountedBody {
    type Item = Result<Bytes, axum::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let next = Pin::new(&mut this.frames).poll_next(cx);
        match &next {
            Poll::Ready(Some(Ok(data))) => this.bytes += data.len() as u64,
            Poll::Ready(None) => {
                if let Some(histogram) = this.histogram.take() {
                    histogram.record(this.bytes as f64);
                }
            }
            Poll::Ready(Some(Err(_))) | Poll::Pending => {}
        }
        next
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        Stream::size_hint(&self.frames)
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
    let service = RestClientMetricsLayer::new(host).layer(kcr_connect::ClientService(client));
    kube::Client::new(service, namespace)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::client::Body;
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    /// Answers every request with `body`.
    #[derive(Clone)]
    struct Fixed(&'static str);

    impl Service<Request<Body>> for Fixed {
        type Response = Response<Body>;
        type Error = std::convert::Infallible;
        type Future = BoxFuture<'static, Result<Response<Body>, Self::Error>>;

        fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _request: Request<Body>) -> Self::Future {
            let body = self.0;
            Box::pin(async move { Ok(Response::new(Body::from(body.as_bytes().to_vec()))) })
        }
    }

    /// One request through the layer; the size histograms' observations by name, and whether
    /// the caller got the whole body.
    fn sizes(uri: &str, request: &'static str, response: &'static str) -> Vec<(String, Vec<f64>)> {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        metrics::with_local_recorder(&recorder, || {
            runtime.block_on(async {
                let mut service = RestClientMetricsLayer::new("api:6443").layer(Fixed(response));
                let request = Request::builder()
                    .method("PUT")
                    .uri(uri)
                    .body(Body::from(request.as_bytes().to_vec()))
                    .expect("a request");
                let answer = service.call(request).await.expect("infallible");
                let bytes = axum::body::to_bytes(answer.into_body(), usize::MAX)
                    .await
                    .expect("the body");
                assert_eq!(bytes, response.as_bytes(), "the body passes unchanged");
            })
        });
        let mut out: Vec<(String, Vec<f64>)> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .filter(|(key, ..)| key.key().name().ends_with("_size_bytes"))
            .map(|(key, _, _, value)| {
                let labels: Vec<String> = key
                    .key()
                    .labels()
                    .map(|l| format!("{}={}", l.key(), l.value()))
                    .collect();
                assert_eq!(labels, ["verb=PUT", "host=api:6443"]);
                match value {
                    DebugValue::Histogram(v) => (
                        key.key().name().to_owned(),
                        v.iter().map(|x| x.into_inner()).collect(),
                    ),
                    other => panic!("a histogram, not {other:?}"),
                }
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    #[test]
    fn request_and_response_sizes_are_observed() {
        assert_eq!(
            sizes("/api/v1/namespaces/a/configmaps/b", "0123456789", "abc"),
            [
                (REQUEST_SIZE_BYTES.to_owned(), vec![10.0]),
                (RESPONSE_SIZE_BYTES.to_owned(), vec![3.0]),
            ]
        );
    }

    #[test]
    fn watches_observe_no_response_size() {
        assert_eq!(
            sizes(
                "/api/v1/configmaps?watch=true&resourceVersion=1",
                "",
                "events"
            ),
            [(REQUEST_SIZE_BYTES.to_owned(), vec![0.0])]
        );
        assert!(is_watch("labelSelector=a&watch=1"));
        assert!(!is_watch("watch=false"));
        assert!(!is_watch("allowWatchBookmarks=true"));
    }
}
