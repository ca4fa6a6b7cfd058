//! The manager's HTTP endpoints: health probes (`/healthz`, `/readyz`, with named checks) and
//! Prometheus metrics (`/metrics`, rendered by metrics-exporter-prometheus, followed by the
//! [process and runtime metrics](crate::process) read at each scrape).
//!
//! The metrics server also serves the routes of [`MetricsExtraHandlers`]
//! ([`ManagerOptions::metrics_extra_handler`](crate::ManagerOptions::metrics_extra_handler),
//! controller-runtime's `metricsserver.Options.ExtraHandlers`), behind the same TLS and
//! authentication and authorization as `/metrics` when secure metrics are on (the
//! SubjectAccessReview names the route's path).
//!
//! No profiling endpoint is built in: the maintained Rust profilers (pprof-rs, a `SIGPROF`
//! sampler with its own unsafe signal-handling and stack-walking code, and jemalloc's heap
//! profiling, which needs jemalloc as the global allocator) would bring unsafe code or an
//! allocator choice into every operator; mount one as an extra handler if you want one.
//!
//! Probe responses follow Kubernetes' conventions: `200 ok` when every check passes, `500` with
//! one `[+]name ok` / `[-]name failed: reason` line per check otherwise (or always with
//! `?verbose`); `/healthz/<name>` runs a single check.

use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use parking_lot::RwLock;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::error::ManagerError;

/// Where to serve an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindAddress {
    /// Do not serve it.
    Disabled,
    /// Listen on this address (port 0 picks a free port; see [`Manager`](crate::Manager)'s
    /// accessors for the bound address).
    Addr(SocketAddr),
}

impl FromStr for BindAddress {
    type Err = ManagerError;

    /// Parses controller-runtime style addresses: `"0"` (or empty) disables, `":8080"` means all
    /// interfaces, otherwise `host:port`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() || s == "0" {
            return Ok(BindAddress::Disabled);
        }
        let full = if s.starts_with(':') {
            format!("0.0.0.0{s}")
        } else {
            s.to_string()
        };
        full.parse::<SocketAddr>()
            .map(BindAddress::Addr)
            .map_err(|e| ManagerError::InvalidBindAddress {
                address: s.to_string(),
                reason: e.to_string(),
            })
    }
}

/// A named health or readiness check: `Ok(())` when healthy, `Err(reason)` otherwise.
pub type Check = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// A set of named checks, shared between the manager and its HTTP server.
#[derive(Clone, Default)]
pub struct Checks {
    inner: Arc<RwLock<Vec<(String, Check)>>>,
}

impl std::fmt::Debug for Checks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.inner.read().iter().map(|(n, _)| n))
            .finish()
    }
}

impl Checks {
    /// Adds a check; names are unique.
    pub fn add(
        &self,
        name: impl Into<String>,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) -> Result<(), ManagerError> {
        let name = name.into();
        let mut inner = self.inner.write();
        if name.is_empty() || name.contains('/') {
            return Err(ManagerError::InvalidCheckName { name });
        }
        if inner.iter().any(|(n, _)| *n == name) {
            return Err(ManagerError::DuplicateCheck { name });
        }
        inner.push((name, Arc::new(check)));
        Ok(())
    }

    /// Runs every check (or only `only`); returns the HTTP status and body.
    pub fn evaluate(&self, only: Option<&str>, verbose: bool) -> (StatusCode, String) {
        let checks = self.inner.read().clone();
        if let Some(name) = only {
            return match checks.iter().find(|(n, _)| n == name) {
                None => (StatusCode::NOT_FOUND, format!("no check named {name}\n")),
                Some((_, check)) => match check() {
                    Ok(()) => (StatusCode::OK, "ok".to_string()),
                    Err(reason) => (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("[-]{name} failed: {reason}\n"),
                    ),
                },
            };
        }
        let mut body = String::new();
        let mut failed = false;
        for (name, check) in &checks {
            match check() {
                Ok(()) => body.push_str(&format!("[+]{name} ok\n")),
                Err(reason) => {
                    failed = true;
                    body.push_str(&format!("[-]{name} failed: {reason}\n"));
                }
            }
        }
        if failed {
            body.push_str("check failed\n");
            (StatusCode::INTERNAL_SERVER_ERROR, body)
        } else if verbose {
            body.push_str("check passed\n");
            (StatusCode::OK, body)
        } else {
            (StatusCode::OK, "ok".to_string())
        }
    }
}

#[derive(serde::Deserialize)]
struct ProbeQuery {
    verbose: Option<String>,
}

fn probe(checks: &Checks, only: Option<&str>, q: &ProbeQuery) -> Response {
    let (status, body) = checks.evaluate(only, q.verbose.is_some());
    (status, body).into_response()
}

/// The router for the health probe server: `/healthz` and `/readyz`, each also with
/// `/<name>` for a single check.
pub(crate) fn probes_router(healthz: Checks, readyz: Checks) -> Router {
    Router::new()
        .merge(probe_routes("/healthz", healthz))
        .merge(probe_routes("/readyz", readyz))
}

/// `path` (every check of `checks`) and `path/{name}` (one check).
fn probe_routes(path: &str, checks: Checks) -> Router {
    Router::new()
        .route(
            path,
            get(|State(c): State<Checks>, Query(q): Query<ProbeQuery>| async move {
                probe(&c, None, &q)
            }),
        )
        .route(
            &format!("{path}/{{name}}"),
            get(
                |State(c): State<Checks>, Path(name): Path<String>, Query(q): Query<ProbeQuery>| async move {
                    probe(&c, Some(&name), &q)
                },
            ),
        )
        .with_state(checks)
}

/// The path of the metrics endpoint, reserved on the metrics server.
pub const METRICS_PATH: &str = "/metrics";

/// Why [`MetricsExtraHandlers::add`] refused a route.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtraHandlerError {
    /// The path is one the metrics server serves itself (`/metrics`).
    #[error("extra metrics handler path {path:?} is reserved: the metrics server serves it")]
    Reserved {
        /// The refused path.
        path: String,
    },
    /// A handler is already registered for the path.
    #[error("an extra metrics handler is already registered for {path:?}")]
    Duplicate {
        /// The refused path.
        path: String,
    },
    /// The path is not a plain absolute path.
    #[error("invalid extra metrics handler path {path:?}: {reason}")]
    InvalidPath {
        /// The refused path.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Routes served on the metrics server besides `/metrics`, each at an exact path (no
/// captures or wildcards: `/debug/info` is served, `/debug/info/x` is not).
///
/// A handler is an axum [`MethodRouter`] (`axum::routing::get(handler)`, or several methods).
///
/// ```
/// use axum::routing::get;
/// use kcr_controller::http::{ExtraHandlerError, MetricsExtraHandlers};
/// let mut extra = MetricsExtraHandlers::default();
/// extra.add("/debug/version", get(|| async { env!("CARGO_PKG_VERSION") }))?;
/// assert!(matches!(
///     extra.add("/metrics", get(|| async { "mine" })),
///     Err(ExtraHandlerError::Reserved { .. })
/// ));
/// assert_eq!(extra.paths().collect::<Vec<_>>(), ["/debug/version"]);
/// # Ok::<(), ExtraHandlerError>(())
/// ```
#[derive(Clone, Default)]
pub struct MetricsExtraHandlers {
    routes: Vec<(String, MethodRouter)>,
}

impl std::fmt::Debug for MetricsExtraHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.paths()).finish()
    }
}

impl MetricsExtraHandlers {
    /// Serves `handler` at `path`: an absolute path of URL-safe characters (letters, digits,
    /// `-`, `.`, `_`, `~`, `/`) with no empty segment, other than `/metrics` and not already
    /// registered.
    pub fn add(&mut self, path: &str, handler: MethodRouter) -> Result<(), ExtraHandlerError> {
        let invalid = |reason: &str| ExtraHandlerError::InvalidPath {
            path: path.to_owned(),
            reason: reason.to_owned(),
        };
        if !path.starts_with('/') {
            return Err(invalid("it must start with '/'"));
        }
        if let Some(c) = path
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || "-._~/".contains(*c)))
        {
            return Err(invalid(&format!(
                "{c:?} is not allowed (letters, digits, '-', '.', '_', '~' and '/' are)"
            )));
        }
        if path.contains("//") {
            return Err(invalid("it has an empty segment"));
        }
        if path == METRICS_PATH {
            return Err(ExtraHandlerError::Reserved {
                path: path.to_owned(),
            });
        }
        if self.routes.iter().any(|(p, _)| p == path) {
            return Err(ExtraHandlerError::Duplicate {
                path: path.to_owned(),
            });
        }
        self.routes.push((path.to_owned(), handler));
        Ok(())
    }

    /// The registered paths, in registration order.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.routes.iter().map(|(p, _)| p.as_str())
    }

    /// Whether no route is registered.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }
}

/// The router for the metrics server: `/metrics` and the `extra` routes.
pub(crate) fn metrics_router(
    handle: Option<PrometheusHandle>,
    extra: &MetricsExtraHandlers,
) -> Router {
    // Paths were checked by `MetricsExtraHandlers::add`: plain, distinct and not `/metrics`,
    // so none of these `route` calls can panic.
    extra
        .routes
        .iter()
        .fold(Router::new(), |router, (path, handler)| {
            router.route(path, handler.clone())
        })
        .route(
        METRICS_PATH,
        get(move || {
            let handle = handle.clone();
            async move {
                match handle {
                    Some(h) => {
                        h.run_upkeep();
                        let mut body = h.render();
                        crate::process::render(&mut body);
                        (
                            StatusCode::OK,
                            [("content-type", "text/plain; version=0.0.4")],
                            body,
                        )
                            .into_response()
                    }
                    None => (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "another metrics recorder is installed in this process; kcr cannot render it\n",
                    )
                        .into_response(),
                }
            }
        }),
    )
}

static PROMETHEUS: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// The process-wide Prometheus recorder: installed as the global `metrics` recorder on first use,
/// with controller-runtime's buckets for the reconcile histogram, client-go's for the queue and
/// REST client histograms and Prometheus' default buckets for the others. `None` if another recorder was
/// installed first.
pub fn prometheus_handle() -> Option<PrometheusHandle> {
    PROMETHEUS
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets(crate::metrics::DEFAULT_BUCKETS)
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full(crate::metrics::RECONCILE_TIME_SECONDS.to_string()),
                        crate::metrics::RECONCILE_TIME_BUCKETS,
                    )
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full(crate::rest_client::REQUEST_DURATION_SECONDS.to_string()),
                        crate::rest_client::REQUEST_DURATION_BUCKETS,
                    )
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full(crate::rest_client::REQUEST_SIZE_BYTES.to_string()),
                        crate::rest_client::SIZE_BUCKETS,
                    )
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full(crate::rest_client::RESPONSE_SIZE_BYTES.to_string()),
                        crate::rest_client::SIZE_BUCKETS,
                    )
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Prefix("workqueue_".to_string()),
                        // client-go's ExponentialBuckets(10e-9, 10, 10)
                        &[1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 1.0, 10.0],
                    )
                });
            match builder.map(PrometheusBuilder::install_recorder) {
                Ok(Ok(handle)) => {
                    crate::metrics::describe();
                    Some(handle)
                }
                Ok(Err(e)) | Err(e) => {
                    tracing::warn!(error = %e, "could not install the Prometheus recorder; /metrics is unavailable");
                    None
                }
            }
        })
        .clone()
}

/// Serves `router` on `listener` until `stop` is cancelled.
pub(crate) fn serve(
    what: &'static str,
    listener: TcpListener,
    router: Router,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    if let Ok(bound) = listener.local_addr() {
        tracing::info!(%bound, "serving {what}");
    }
    tokio::spawn(async move {
        let res = axum::serve(listener, router)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await;
        if let Err(e) = res {
            tracing::error!(error = %e, "{what} server failed");
        }
    })
}

/// Serves `router` over TLS (`acceptor`) on `listener` until `stop` is cancelled, through
/// kcr-tls's one HTTPS serving loop ([`kcr_tls::serve_https`]: bounded handshakes and header
/// reads, `TCP_NODELAY`, open connections drained on stop).
///
/// HTTP/2 is served only when the TLS configuration offers it by ALPN
/// ([`kcr_tls::TlsOptions::enable_http2`]); otherwise the connection speaks HTTP/1 only, and an
/// HTTP/2 preface (prior knowledge) is refused. With mutual TLS, every request of a connection
/// carries the client's verified certificate as a [`kcr_tls::ClientCertificate`] extension.
pub(crate) fn serve_tls(
    what: &'static str,
    listener: TcpListener,
    router: Router,
    acceptor: tokio_rustls::TlsAcceptor,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    use hyper_util::service::TowerToHyperService;
    if let Ok(bound) = listener.local_addr() {
        tracing::info!(%bound, "serving {what} over HTTPS");
    }
    tokio::spawn(kcr_tls::serve_https(
        listener,
        acceptor,
        kcr_tls::ServeOptions::new(what),
        stop,
        move |connection: kcr_tls::Connection| {
            let router = match connection.client_certificate {
                Some(cert) => router.clone().layer(axum::Extension((*cert).clone())),
                None => router.clone(),
            };
            TowerToHyperService::new(router)
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_addresses() {
        assert_eq!("0".parse::<BindAddress>().unwrap(), BindAddress::Disabled);
        assert_eq!("".parse::<BindAddress>().unwrap(), BindAddress::Disabled);
        assert_eq!(
            ":8080".parse::<BindAddress>().unwrap(),
            BindAddress::Addr("0.0.0.0:8080".parse().unwrap())
        );
        assert_eq!(
            "127.0.0.1:0".parse::<BindAddress>().unwrap(),
            BindAddress::Addr("127.0.0.1:0".parse().unwrap())
        );
        assert!("nonsense".parse::<BindAddress>().is_err());
    }

    #[test]
    fn checks_evaluate_like_kubernetes() {
        let checks = Checks::default();
        assert_eq!(checks.evaluate(None, false), (StatusCode::OK, "ok".into()));
        checks.add("ping", || Ok(())).unwrap();
        let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let f = flag.clone();
        checks
            .add("synced", move || {
                if f.load(std::sync::atomic::Ordering::SeqCst) {
                    Ok(())
                } else {
                    Err("caches not synced".into())
                }
            })
            .unwrap();
        assert!(matches!(
            checks.add("ping", || Ok(())),
            Err(ManagerError::DuplicateCheck { .. })
        ));
        assert!(checks.add("a/b", || Ok(())).is_err());
        let (status, body) = checks.evaluate(None, false);
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            body,
            "[+]ping ok\n[-]synced failed: caches not synced\ncheck failed\n"
        );
        assert_eq!(checks.evaluate(Some("ping"), false).0, StatusCode::OK);
        assert_eq!(
            checks.evaluate(Some("synced"), false).0,
            StatusCode::INTERNAL_SERVER_ERROR
        );
        assert_eq!(
            checks.evaluate(Some("nope"), false).0,
            StatusCode::NOT_FOUND
        );
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(checks.evaluate(None, false), (StatusCode::OK, "ok".into()));
        assert_eq!(
            checks.evaluate(None, true).1,
            "[+]ping ok\n[+]synced ok\ncheck passed\n"
        );
    }
}
