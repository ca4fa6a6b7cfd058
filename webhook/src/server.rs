//! The HTTPS server: one listener, several webhooks by path, certificates from a
//! [`CertWatcher`], limits and timeouts, metrics and a tracing span per request.
//!
//! Per request, in order: only `POST` (405 otherwise), a registered path (404), a JSON
//! content type (415), a body of at most [`ServerOptions::max_request_bytes`] (413), the
//! whole of reading the body and answering within [`ServerOptions::request_timeout`] (504
//! otherwise). A TLS handshake must finish within [`ServerOptions::handshake_timeout`] and a
//! request's headers arrive within [`ServerOptions::header_read_timeout`]. A handler that
//! panics (a defaulter, validator, conversion or raw handler) is answered with 500, the panic is
//! counted in `controller_runtime_webhook_panics_total`, and the connection and the server keep
//! serving.
//!
//! TLS follows [`ServerOptions::tls`] ([`TlsOptions`]): by default HTTP/1.1 only (an HTTP/2
//! request, negotiated by ALPN or sent with prior knowledge, is refused), TLS 1.2 or later, no
//! client certificates. With a client CA bundle, every caller must present a certificate it
//! signed; raw handlers see it in their [`AdmissionContext`](crate::raw::AdmissionContext).
//!
//! Metrics (controller-runtime's names, through the `metrics` facade):
//!
//! | name | type | labels |
//! |---|---|---|
//! | `controller_runtime_webhook_requests_total` | counter | `webhook` (the path), `code` (HTTP status) |
//! | `controller_runtime_webhook_latency_seconds` | histogram | `webhook` |
//! | `controller_runtime_webhook_requests_in_flight` | gauge | `webhook` |
//! | `controller_runtime_webhook_panics_total` | counter | none (registered at 0 when the server is bound) |
//!
//! and kcr-tls's `certwatcher_read_certificate_total` and
//! `certwatcher_read_certificate_errors_total` for the serving certificate.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::FutureExt;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use parking_lot::{Mutex, RwLock};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::config::WebhookRegistration;
use crate::conversion::ConversionRegistry;
use crate::endpoint::{Endpoint, Reply};
use crate::tls::{
    CertWatcher, ClientCertificate, Connection, ServeOptions, TlsError, TlsOptions, serve_https,
};

/// `controller_runtime_webhook_requests_total`
pub const REQUESTS_TOTAL: &str = "controller_runtime_webhook_requests_total";
/// `controller_runtime_webhook_latency_seconds`
pub const LATENCY_SECONDS: &str = "controller_runtime_webhook_latency_seconds";
/// `controller_runtime_webhook_requests_in_flight`
pub const REQUESTS_IN_FLIGHT: &str = "controller_runtime_webhook_requests_in_flight";
/// `controller_runtime_webhook_panics_total`
pub const PANICS_TOTAL: &str = "controller_runtime_webhook_panics_total";

pub use crate::endpoint::CONVERT_PATH;

/// Webhook server errors.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The listener could not be bound.
    #[error("webhook server: cannot bind {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        source: std::io::Error,
    },
    /// TLS setup failed.
    #[error("webhook server: {0}")]
    Tls(#[from] TlsError),
    /// Two webhooks on one path.
    #[error("webhook server: a webhook is already registered at {path}")]
    DuplicatePath {
        /// The path.
        path: String,
    },
    /// A conversion for the kind is already registered.
    #[error("webhook server: a conversion for {kind} is already registered")]
    DuplicateConversion {
        /// `Kind.group`.
        kind: String,
    },
    /// A [`Conversion`](crate::Conversion) with mistakes (a spoke of another kind, a
    /// version twice).
    #[error("webhook server: {message}")]
    InvalidConversion {
        /// What is wrong.
        message: String,
    },
    /// [`WebhookServer::run`] was called twice.
    #[error("webhook server: already running (or ran)")]
    AlreadyRunning,
    /// Registering with the manager failed.
    #[error("webhook server: {0}")]
    Manager(#[from] kcr_controller::ManagerError),
    /// A path that cannot be served.
    #[error("webhook server: invalid path {path:?}: {reason}")]
    InvalidPath {
        /// The path.
        path: String,
        /// Why.
        reason: &'static str,
    },
}

/// Checks a path to serve: absolute, no query, fragment or whitespace.
pub(crate) fn check_path(path: &str) -> Result<(), WebhookError> {
    let reason = if !path.starts_with('/') {
        "it must start with /"
    } else if path.contains(['?', '#']) {
        "it must not hold a query or fragment"
    } else if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
        "it must not hold whitespace"
    } else {
        return Ok(());
    };
    Err(WebhookError::InvalidPath {
        path: path.to_string(),
        reason,
    })
}

/// Options of a [`WebhookServer`].
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Address to listen on (default `0.0.0.0:9443`, controller-runtime's port).
    pub bind_address: SocketAddr,
    /// The serving certificate (default `<tmp>/k8s-webhook-server/serving-certs/tls.crt`).
    pub cert_file: PathBuf,
    /// The serving key (default `<tmp>/k8s-webhook-server/serving-certs/tls.key`).
    pub key_file: PathBuf,
    /// Largest request body accepted (default 7 MiB: an AdmissionReview carries the object
    /// and the old object, each up to the API server's 3 MiB).
    pub max_request_bytes: usize,
    /// Bound on reading a request body and answering it (default 30 s, the API server's
    /// largest webhook timeout).
    pub request_timeout: Duration,
    /// Bound on a TLS handshake (default 10 s).
    pub handshake_timeout: Duration,
    /// Bound on receiving a request's headers (default 10 s).
    pub header_read_timeout: Duration,
    /// TLS settings (default: HTTP/1.1 only, TLS 1.2 or later, no client certificates).
    pub tls: TlsOptions,
}

impl Default for ServerOptions {
    fn default() -> Self {
        let dir = std::env::temp_dir()
            .join("k8s-webhook-server")
            .join("serving-certs");
        ServerOptions {
            bind_address: SocketAddr::from(([0, 0, 0, 0], 9443)),
            cert_file: dir.join(crate::tls::CERT_FILE),
            key_file: dir.join(crate::tls::KEY_FILE),
            max_request_bytes: 7 << 20,
            request_timeout: Duration::from_secs(30),
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            tls: TlsOptions::default(),
        }
    }
}

impl ServerOptions {
    /// Sets the bind address.
    pub fn bind_address(mut self, addr: SocketAddr) -> Self {
        self.bind_address = addr;
        self
    }

    /// Serves `dir/tls.crt` and `dir/tls.key`.
    pub fn cert_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        self.cert_file = dir.join(crate::tls::CERT_FILE);
        self.key_file = dir.join(crate::tls::KEY_FILE);
        self
    }

    /// Sets the largest request body accepted.
    pub fn max_request_bytes(mut self, bytes: usize) -> Self {
        self.max_request_bytes = bytes;
        self
    }

    /// Sets the per-request timeout.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets the TLS options (HTTP/2, minimum version, cipher suites, client CA).
    pub fn tls(mut self, tls: TlsOptions) -> Self {
        self.tls = tls;
        self
    }
}

#[derive(Clone)]
struct Route {
    endpoint: Arc<dyn Endpoint>,
    latency: metrics::Histogram,
    in_flight: metrics::Gauge,
}

struct Inner {
    options: ServerOptions,
    watcher: Arc<CertWatcher>,
    tls: Arc<rustls::ServerConfig>,
    routes: RwLock<HashMap<String, Route>>,
    registrations: Mutex<Vec<WebhookRegistration>>,
    conversions: Arc<ConversionRegistry>,
    listener: Mutex<Option<TcpListener>>,
    local_addr: SocketAddr,
    serving: AtomicBool,
}

/// The webhook server: cheap to clone (a handle). See the [module docs](self).
#[derive(Clone)]
pub struct WebhookServer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for WebhookServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookServer")
            .field("local_addr", &self.inner.local_addr)
            .field("paths", &self.paths())
            .finish()
    }
}

fn describe() {
    metrics::describe_counter!(
        REQUESTS_TOTAL,
        "Total number of admission requests by HTTP status code."
    );
    metrics::describe_histogram!(
        LATENCY_SECONDS,
        metrics::Unit::Seconds,
        "Histogram of the latency of processing admission requests"
    );
    metrics::describe_gauge!(
        REQUESTS_IN_FLIGHT,
        "Current number of admission requests being served."
    );
    metrics::describe_counter!(PANICS_TOTAL, "Total number of webhook panics");
    metrics::counter!(PANICS_TOTAL).increment(0);
}

impl WebhookServer {
    /// Binds the listener (so a busy port fails here and [`local_addr`](Self::local_addr)
    /// is known before the webhook configurations are written). The certificate files are read
    /// at the first handshake: they may appear later (see [`CertWatcher`]); to fail at start
    /// instead, call [`CertWatcher::load`] on [`cert_watcher`](Self::cert_watcher).
    pub async fn bind(options: ServerOptions) -> Result<Self, WebhookError> {
        let listener = TcpListener::bind(options.bind_address)
            .await
            .map_err(|source| WebhookError::Bind {
                addr: options.bind_address,
                source,
            })?;
        let local_addr = listener.local_addr().map_err(|source| WebhookError::Bind {
            addr: options.bind_address,
            source,
        })?;
        let watcher = Arc::new(CertWatcher::new(
            options.cert_file.clone(),
            options.key_file.clone(),
        ));
        let tls = options.tls.server_config(watcher.clone())?;
        describe();
        let server = WebhookServer {
            inner: Arc::new(Inner {
                options,
                watcher,
                tls,
                routes: RwLock::new(HashMap::new()),
                registrations: Mutex::new(Vec::new()),
                conversions: Arc::new(ConversionRegistry::default()),
                listener: Mutex::new(Some(listener)),
                local_addr,
                serving: AtomicBool::new(false),
            }),
        };
        Ok(server)
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local_addr
    }

    /// The options.
    pub fn options(&self) -> &ServerOptions {
        &self.inner.options
    }

    /// The certificate watcher.
    pub fn cert_watcher(&self) -> &Arc<CertWatcher> {
        &self.inner.watcher
    }

    /// The registered paths, sorted.
    pub fn paths(&self) -> Vec<String> {
        let mut paths: Vec<String> = self.inner.routes.read().keys().cloned().collect();
        paths.sort();
        paths
    }

    /// The admission webhooks registered (for the webhook configurations).
    pub fn registrations(&self) -> Vec<WebhookRegistration> {
        self.inner.registrations.lock().clone()
    }

    /// Adds an admission webhook to the [webhook configurations](Self::webhook_configurations)
    /// (the typed builder does this itself; a raw handler's resources are listed this way, one
    /// registration per resource, each with the handler's path).
    pub fn add_registration(&self, r: WebhookRegistration) {
        self.inner.registrations.lock().push(r);
    }

    /// Serves the raw admission `handler` at `path` (see [`crate::raw`]). Works before and
    /// while the server runs; fails on a path registered already or not servable.
    pub fn admission_handler<H: crate::raw::AdmissionHandler>(
        &self,
        path: &str,
        handler: H,
    ) -> Result<(), WebhookError> {
        check_path(path)?;
        self.register(
            path,
            Arc::new(crate::raw::RawEndpoint {
                path: path.into(),
                handler,
            }),
        )
    }

    pub(crate) fn conversions(&self) -> &Arc<ConversionRegistry> {
        &self.inner.conversions
    }

    /// Registers an endpoint at `path`. Works before and while the server runs.
    pub(crate) fn register(
        &self,
        path: &str,
        endpoint: Arc<dyn Endpoint>,
    ) -> Result<(), WebhookError> {
        let mut routes = self.inner.routes.write();
        if routes.contains_key(path) {
            return Err(WebhookError::DuplicatePath {
                path: path.to_string(),
            });
        }
        let label = path.to_string();
        routes.insert(
            path.to_string(),
            Route {
                endpoint,
                latency: metrics::histogram!(LATENCY_SECONDS, "webhook" => label.clone()),
                in_flight: metrics::gauge!(REQUESTS_IN_FLIGHT, "webhook" => label),
            },
        );
        Ok(())
    }

    /// Ok when the server is serving with a valid certificate; else why not (the readiness
    /// check).
    pub fn ready(&self) -> Result<(), String> {
        if !self.inner.serving.load(Ordering::SeqCst) {
            return Err(format!(
                "webhook server on {} is not serving",
                self.inner.local_addr
            ));
        }
        self.inner.watcher.check()
    }

    /// Serves until `shutdown` is cancelled, through kcr-tls's one HTTPS serving loop
    /// ([`kcr_tls::serve_https`]: `TCP_NODELAY`, the handshake and header-read bounds of the
    /// options); connections open then finish the requests they serve, for up to 10 s
    /// ([`ServeOptions::drain_timeout`]), before this returns.
    pub async fn run(&self, shutdown: CancellationToken) -> Result<(), WebhookError> {
        let Some(listener) = self.inner.listener.lock().take() else {
            return Err(WebhookError::AlreadyRunning);
        };
        let acceptor = TlsAcceptor::from(self.inner.tls.clone());
        self.inner.serving.store(true, Ordering::SeqCst);
        tracing::info!(addr = %self.inner.local_addr, paths = ?self.paths(), "webhook server serving");
        // Cert problems show now rather than at the first handshake.
        if let Err(e) = self.inner.watcher.check() {
            tracing::warn!(error = %e, "webhook server has no valid certificate yet");
        }
        let options = ServeOptions::new("webhook")
            .handshake_timeout(self.inner.options.handshake_timeout)
            .header_read_timeout(self.inner.options.header_read_timeout);
        let server = self.clone();
        serve_https(listener, acceptor, options, shutdown, move |connection: Connection| {
            let server = server.clone();
            let peer_cert = connection.client_certificate;
            hyper::service::service_fn(move |req| {
                let server = server.clone();
                let peer_cert = peer_cert.clone();
                async move { Ok::<_, std::convert::Infallible>(server.handle(req, peer_cert).await) }
            })
        })
        .await;
        self.inner.serving.store(false, Ordering::SeqCst);
        Ok(())
    }

    async fn handle(
        &self,
        req: Request<Incoming>,
        peer: Option<Arc<ClientCertificate>>,
    ) -> Response<Full<Bytes>> {
        let path = req.uri().path().to_string();
        let route = self.inner.routes.read().get(&path).cloned();
        let reply = match route {
            None => Reply::error(
                StatusCode::NOT_FOUND,
                format!("no webhook is registered at {path}"),
            ),
            Some(route) => {
                let span = tracing::info_span!(
                    "webhook",
                    webhook = %path,
                    uid = tracing::field::Empty,
                    operation = tracing::field::Empty,
                    name = tracing::field::Empty,
                    namespace = tracing::field::Empty,
                    code = tracing::field::Empty,
                );
                let started = Instant::now();
                route.in_flight.increment(1.0);
                let reply = self
                    .call(&path, &route, req, peer)
                    .instrument(span.clone())
                    .await;
                route.in_flight.decrement(1.0);
                route.latency.record(started.elapsed().as_secs_f64());
                span.record("code", reply.status.as_u16());
                reply
            }
        };
        metrics::counter!(REQUESTS_TOTAL, "webhook" => path, "code" => reply.status.as_u16().to_string())
            .increment(1);
        let mut resp = Response::new(Full::new(reply.body));
        *resp.status_mut() = reply.status;
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/json"),
        );
        resp
    }

    async fn call(
        &self,
        path: &str,
        route: &Route,
        req: Request<Incoming>,
        peer: Option<Arc<ClientCertificate>>,
    ) -> Reply {
        if req.method() != Method::POST {
            return Reply::error(
                StatusCode::METHOD_NOT_ALLOWED,
                format!("webhook {path}: only POST is served, not {}", req.method()),
            );
        }
        let content_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !content_type.starts_with("application/json") {
            return Reply::error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!("webhook {path}: content type {content_type:?}, expected application/json"),
            );
        }
        let limit = self.inner.options.max_request_bytes;
        let declared = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > limit as u64) {
            return Reply::error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("webhook {path}: request body larger than {limit} bytes"),
            );
        }
        let work = async {
            let body = match Limited::new(req.into_body(), limit).collect().await {
                Ok(b) => b.to_bytes(),
                Err(e) => {
                    if e.downcast_ref::<http_body_util::LengthLimitError>()
                        .is_some()
                    {
                        return Reply::error(
                            StatusCode::PAYLOAD_TOO_LARGE,
                            format!("webhook {path}: request body larger than {limit} bytes"),
                        );
                    }
                    return Reply::bad_request(format!(
                        "webhook {path}: cannot read the request body: {e}"
                    ));
                }
            };
            match std::panic::AssertUnwindSafe(route.endpoint.serve(body, peer))
                .catch_unwind()
                .await
            {
                Ok(reply) => reply,
                Err(panic) => {
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "a panic".to_string());
                    metrics::counter!(PANICS_TOTAL).increment(1);
                    tracing::error!(webhook = path, panic = %what, "webhook handler panicked");
                    Reply::error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("webhook {path}: the handler panicked: {what}"),
                    )
                }
            }
        };
        match tokio::time::timeout(self.inner.options.request_timeout, work).await {
            Ok(reply) => reply,
            Err(_) => Reply::error(
                StatusCode::GATEWAY_TIMEOUT,
                format!(
                    "webhook {path}: no answer within {:?}",
                    self.inner.options.request_timeout
                ),
            ),
        }
    }
}
