//! The connection stack: a `kube::Client` whose every request and connection is bounded
//! ([`client`]), and
//! bounding the requests of a client built elsewhere ([`bound`]).

use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http::{Request, Response};
use hyper_util::rt::TokioExecutor;
use kube::client::{Body, ConfigExt};
use tower::{Layer, Service, ServiceBuilder};

use crate::connector::{BoundedConnector, TcpConnector};
use crate::deadline::DeadlineLayer;
use crate::error::ConnectError;
use crate::health::Health;
use crate::options::{ConnectionOptions, HttpVersion};
use crate::warnings::WarningLayer;

/// The name of `config`'s server in errors, logs and metrics: the authority of its URL
/// (`10.0.0.1:6443`), or the whole URL if it has none.
pub fn host_of(config: &kube::Config) -> String {
    config
        .cluster_url
        .authority()
        .map(|a| a.to_string())
        .unwrap_or_else(|| config.cluster_url.to_string())
}

/// A `kube::Client` for `config` with kcr's connection stack:
///
/// - connections connect and finish their TLS handshake within
///   [`connect_timeout`](ConnectionOptions::connect_timeout);
/// - HTTP/2 where the server offers it (kube-apiserver does, over TLS), with PINGs that close a
///   connection that stops answering, idle or not;
/// - HTTP/1.1 connections pooled for [`pool_idle_timeout`](ConnectionOptions::pool_idle_timeout)
///   at most;
/// - every request bounded by a [`DeadlineLayer`] (watches by the API server's bookmarks);
/// - each dead connection counted and logged ([`crate::metrics`]);
/// - the API server's warnings logged, each distinct one once by default, and counted
///   ([`crate::warnings`]).
///
/// Everything else is kube's own: the kubeconfig's credentials (certificates, tokens, exec
/// plugins, refreshed as kube does), its TLS settings, extra headers, the default namespace,
/// and kube's retry of 429, 503 and 504 when `config.default_retry` is set. A configuration
/// with a proxy (`proxy_url`) is [`ConnectError::ProxyUnsupported`]: build that client with
/// kube and bound it with [`bound`]. Needs a tokio runtime.
pub fn client(
    config: kube::Config,
    options: ConnectionOptions,
) -> Result<kube::Client, ConnectError> {
    client_with_health(config, options).map(|(client, _)| client)
}

/// [`client`], and the [`Health`] of its server as its requests see it.
pub fn client_with_health(
    config: kube::Config,
    options: ConnectionOptions,
) -> Result<(kube::Client, Health), ConnectError> {
    options.validate()?;
    let cluster = config.cluster_url.to_string();
    if let Some(proxy) = &config.proxy_url {
        return Err(ConnectError::ProxyUnsupported {
            cluster,
            proxy: proxy.to_string(),
        });
    }
    let config_error = |source| ConnectError::Config {
        cluster: cluster.clone(),
        source,
    };
    let host: Arc<str> = host_of(&config).into();
    crate::metrics::describe();

    let tls = config.rustls_client_config().map_err(config_error)?;
    let mut https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    if let Some(name) = &config.tls_server_name {
        let name = rustls_pki_name(name).map_err(|reason| ConnectError::Config {
            cluster: cluster.clone(),
            source: kube::Error::Service(reason.into()),
        })?;
        https = https.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
    }
    // Bytes out and nothing back for as long as the shortest bound allows: dead.
    let dead_after = options
        .ping_timeout
        .min(options.request_timeout)
        .min(options.watch_start_timeout);
    let tcp = TcpConnector {
        host: host.clone(),
        dead_after,
    };
    let https = match options.http_version {
        HttpVersion::Negotiate => https.enable_all_versions().wrap_connector(tcp),
        HttpVersion::Http1Only => https.enable_http1().wrap_connector(tcp),
        HttpVersion::Http2Only => https.enable_http2().wrap_connector(tcp),
    };
    let connector = BoundedConnector {
        inner: https,
        timeout: options.connect_timeout,
        host: host.clone(),
    };
    let mut builder = hyper_util::client::legacy::Client::builder(TokioExecutor::new());
    builder
        .timer(crate::realtime::RealTimer)
        .pool_timer(crate::realtime::RealTimer)
        .pool_idle_timeout(options.pool_idle_timeout)
        .http2_keep_alive_interval(options.ping_interval)
        .http2_keep_alive_timeout(options.ping_timeout)
        .http2_keep_alive_while_idle(true)
        .http2_only(options.http_version == HttpVersion::Http2Only);
    let hyper: hyper_util::client::legacy::Client<_, Body> = builder.build(connector);

    let retry = config
        .default_retry
        .then(|| tower::retry::RetryLayer::new(kube::client::retry::RetryPolicy::server_retry()));
    let health = Health::new();
    let stack = ServiceBuilder::new()
        .layer(WarningLayer::new(options.api_warnings, host.to_string()))
        .layer(DeadlineLayer::new(options, host.to_string()).with_health(health.clone()))
        .layer(config.base_uri_layer())
        .option_layer(retry)
        .option_layer(config.auth_layer().map_err(config_error)?)
        .layer(config.extra_headers_layer().map_err(config_error)?)
        .map_err(tower::BoxError::from)
        .service(hyper);
    Ok((kube::Client::new(stack, config.default_namespace), health))
}

fn rustls_pki_name(
    name: &str,
) -> Result<rustls::pki_types::ServerName<'static>, rustls::pki_types::InvalidDnsNameError> {
    rustls::pki_types::ServerName::try_from(name.to_owned())
}

/// `client` with every request bounded by `options` (a [`DeadlineLayer`] in front of it),
/// for a client whose connections kcr did not build: its requests and watches get their
/// deadlines, but its connections keep their own settings (kube's: HTTP/1.1 only, idle
/// connections pooled for 90 s, so a connection that froze while idle is noticed only when a
/// request on it reaches its deadline). Prefer [`client`]. `host` names the server in
/// errors, logs and metrics. Requests that already passed a [`DeadlineLayer`] (a client from
/// [`client`] wrapped again) are bounded once, by the outer layer. Needs a tokio runtime.
pub fn bound(
    client: kube::Client,
    options: ConnectionOptions,
    host: impl Into<String>,
) -> kube::Client {
    bound_with_health(client, options, host).0
}

/// [`bound`], and the [`Health`] of the server as the bounded requests see it.
pub fn bound_with_health(
    client: kube::Client,
    options: ConnectionOptions,
    host: impl Into<String>,
) -> (kube::Client, Health) {
    let namespace = client.default_namespace().to_owned();
    let health = Health::new();
    let host = host.into();
    let warnings = WarningLayer::new(options.api_warnings, host.clone());
    let service = warnings.layer(
        DeadlineLayer::new(options, host)
            .with_health(health.clone())
            .layer(ClientService(client)),
    );
    (kube::Client::new(service, namespace), health)
}

/// A [`kube::Client`] as a tower service ([`kube::Client::send`]), for putting layers in front
/// of a client built elsewhere: `kube::Client::new(layer.layer(ClientService(client)), ns)`.
#[derive(Clone)]
pub struct ClientService(pub kube::Client);

impl Service<Request<Body>> for ClientService {
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
