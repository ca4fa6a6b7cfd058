//! The secured metrics endpoint (controller-runtime's `SecureServing` with
//! `WithAuthenticationAndAuthorization`): optional, off by default.
//!
//! With [`ManagerOptions::secure_metrics`](crate::ManagerOptions::secure_metrics) set, the
//! metrics server speaks HTTPS only and every request must carry `Authorization: Bearer
//! <token>`:
//!
//! 1. **TLS** with the certificate pair of a [`CertWatcher`] (reloaded when its files change, as
//!    the webhook server's; see kcr-tls). Until a valid pair loads, handshakes fail and the
//!    manager's `/readyz` check `metrics-certificate` says why.
//! 2. **Authentication**: a `TokenReview` of the bearer token. No token, or one the API server
//!    does not authenticate: **401**.
//! 3. **Authorization**: a `SubjectAccessReview` for the authenticated user, verb = the request's
//!    method in lower case (`get` for a scrape), non-resource URL = the request's path
//!    (`/metrics`). Not allowed: **403**.
//! 4. A review that fails (the API server unreachable, the manager not allowed to create
//!    reviews) answers **500**, is logged, and is not cached.
//!
//! Verdicts are cached per (SHA-256 of the token, verb, path) for
//! [`SecureMetrics::cache_ttl`] (default 10 s) in a cache of at most
//! [`SecureMetrics::cache_size`] entries (default 1024; when full, expired entries go first,
//! then the oldest), so a Prometheus scraping every few seconds costs one pair of reviews per
//! TTL, and a revoked token or role stops working within the TTL. Tokens themselves are not
//! kept.
//!
//! The manager's own identity needs `create` on `tokenreviews` (authentication.k8s.io) and
//! `subjectaccessreviews` (authorization.k8s.io); the scraper needs `get` on the non-resource
//! URL `/metrics` (the NodePool operator's `config/rbac/metrics_auth_role.yaml` and
//! `metrics_reader_role.yaml`).
//!
//! ```no_run
//! # async fn doc(client: kube::Client) -> Result<(), kcr_controller::ManagerError> {
//! use kcr_controller::secure_metrics::SecureMetrics;
//! let options = kcr_controller::ManagerOptions::default()
//!     .metrics_bind_address(":8443")?
//!     .secure_metrics(SecureMetrics::from_dir("/tmp/k8s-metrics-server/metrics-certs"));
//! let manager = kcr_controller::Manager::new(client, options).await?;
//! # Ok(()) }
//! ```
//!
//! The reviews go through a [`Reviewer`]: [`KubeReviewer`] (the default, on the manager's
//! client) or your own ([`SecureMetrics::reviewer`]), for instance to test the endpoint
//! without an API server that serves reviews.
//!
//! TLS follows [`SecureMetrics::tls`] ([`TlsOptions`], shared with the webhook server): by
//! default HTTP/1.1 only (kubebuilder's scaffold turns HTTP/2 off since CVE-2023-44487 and
//! CVE-2023-39325), TLS 1.2 or later, rustls' cipher suites. With a client CA bundle
//! ([`TlsOptions::client_ca_file`]) a scraper must also present a certificate that CA signed
//! (before any token is looked at); the verified certificate reaches every handler as a
//! [`kcr_tls::ClientCertificate`] request extension, and the bundle is re-read when it
//! changes.
//!
//! ```no_run
//! # async fn doc(client: kube::Client) -> Result<(), kcr_controller::ManagerError> {
//! use kcr_controller::secure_metrics::SecureMetrics;
//! use kcr_tls::{TlsOptions, TlsVersion};
//! let options = kcr_controller::ManagerOptions::default()
//!     .metrics_bind_address(":8443")?
//!     .secure_metrics(
//!         SecureMetrics::from_dir("/tmp/k8s-metrics-server/metrics-certs").tls(
//!             TlsOptions::default()
//!                 .min_version(TlsVersion::Tls13)
//!                 .client_ca_file("/etc/metrics/client-ca/ca.crt"),
//!         ),
//!     );
//! # let _ = (client, options); Ok(()) }
//! ```

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use k8s_openapi::api::authentication::v1::TokenReview;
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kcr_tls::{CertWatcher, TlsOptions};
use kube::api::{Api, PostParams};
use parking_lot::Mutex;
use tokio::time::Instant;

/// Default time a verdict is cached.
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(10);
/// Default bound on cached verdicts.
pub const DEFAULT_CACHE_SIZE: usize = 1024;
/// The readiness check reporting the serving certificate.
pub const READYZ_CHECK: &str = "metrics-certificate";
/// The `/readyz` check of the client-CA bundle, when the metrics server requires client
/// certificates ([`kcr_tls::TlsOptions::client_ca_file`]): failing while no bundle has loaded.
pub const READYZ_CLIENT_CA_CHECK: &str = "metrics-client-ca";

/// Errors of the secured metrics endpoint.
#[derive(Debug, thiserror::Error)]
pub enum SecureMetricsError {
    /// The `TokenReview` request failed.
    #[error("metrics authentication: creating a TokenReview failed: {0}")]
    TokenReview(#[source] kube::Error),
    /// The `SubjectAccessReview` request failed.
    #[error("metrics authorization: creating a SubjectAccessReview for {user} failed: {source}")]
    SubjectAccessReview {
        /// The user being authorized.
        user: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// A custom [`Reviewer`] failed.
    #[error("metrics {stage}: {source}")]
    Reviewer {
        /// `authentication` or `authorization`.
        stage: &'static str,
        /// Its error.
        #[source]
        source: crate::BoxError,
    },
    /// The TLS configuration could not be built.
    #[error("metrics server TLS: {0}")]
    Tls(#[from] kcr_tls::TlsError),
    /// A cache of size 0 was asked for.
    #[error("metrics review cache: the size must be at least 1")]
    ZeroCacheSize,
}

/// An authenticated user, as a `TokenReview` reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// The user name (`system:serviceaccount:<namespace>:<name>` for a ServiceAccount).
    pub username: String,
    /// The user's uid, if any.
    pub uid: Option<String>,
    /// Its groups.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The outcome of a review.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Authenticated and allowed.
    Allowed(UserInfo),
    /// Not authenticated (401), with the reason.
    Unauthenticated(String),
    /// Authenticated but not allowed (403).
    Forbidden {
        /// Who.
        user: String,
        /// Why (the authorizer's reason, possibly empty).
        reason: String,
    },
}

/// Authentication and authorization of a request to the metrics endpoint.
pub trait Reviewer: Send + Sync + 'static {
    /// Who `token` belongs to: `Ok(Ok(user))`, `Ok(Err(reason))` when not authenticated, `Err`
    /// when the review itself failed.
    fn authenticate<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Result<UserInfo, String>, SecureMetricsError>>;

    /// Whether `user` may `verb` the non-resource URL `path`: `Ok(Ok(()))`, `Ok(Err(reason))`
    /// when not allowed, `Err` when the review itself failed.
    fn authorize<'a>(
        &'a self,
        user: &'a UserInfo,
        verb: &'a str,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Result<(), String>, SecureMetricsError>>;
}

/// The [`Reviewer`] asking the API server: `TokenReview` and `SubjectAccessReview`.
#[derive(Clone)]
pub struct KubeReviewer {
    client: kube::Client,
}

impl std::fmt::Debug for KubeReviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeReviewer").finish_non_exhaustive()
    }
}

impl KubeReviewer {
    /// Reviews with `client` (whose identity needs `create` on both review kinds).
    pub fn new(client: kube::Client) -> Self {
        KubeReviewer { client }
    }
}

impl Reviewer for KubeReviewer {
    fn authenticate<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Result<UserInfo, String>, SecureMetricsError>> {
        Box::pin(async move {
            // Built from JSON: `spec.token` is optional in some Kubernetes versions' types and
            // required in others, and the user of kcr picks the version.
            let review: TokenReview = serde_json::from_value(serde_json::json!({
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": token},
            }))
            .map_err(|e| SecureMetricsError::TokenReview(kube::Error::SerdeError(e)))?;
            let reviewed = Api::<TokenReview>::all(self.client.clone())
                .create(&PostParams::default(), &review)
                .await
                .map_err(SecureMetricsError::TokenReview)?;
            let status = reviewed.status.unwrap_or_default();
            if status.authenticated != Some(true) {
                let reason = status
                    .error
                    .filter(|e| !e.is_empty())
                    .unwrap_or_else(|| "the token was not authenticated".to_owned());
                return Ok(Err(reason));
            }
            let user = status.user.unwrap_or_default();
            Ok(Ok(UserInfo {
                username: user.username.unwrap_or_default(),
                uid: user.uid,
                groups: user.groups.unwrap_or_default(),
                extra: user.extra.unwrap_or_default(),
            }))
        })
    }

    fn authorize<'a>(
        &'a self,
        user: &'a UserInfo,
        verb: &'a str,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Result<(), String>, SecureMetricsError>> {
        Box::pin(async move {
            let review = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some(user.username.clone()),
                    uid: user.uid.clone(),
                    groups: Some(user.groups.clone()),
                    extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
                    non_resource_attributes: Some(NonResourceAttributes {
                        path: Some(path.to_owned()),
                        verb: Some(verb.to_owned()),
                    }),
                    resource_attributes: None,
                },
                ..SubjectAccessReview::default()
            };
            let reviewed = Api::<SubjectAccessReview>::all(self.client.clone())
                .create(&PostParams::default(), &review)
                .await
                .map_err(|source| SecureMetricsError::SubjectAccessReview {
                    user: user.username.clone(),
                    source,
                })?;
            let status = reviewed.status.unwrap_or_default();
            if status.allowed && status.denied != Some(true) {
                Ok(Ok(()))
            } else {
                Ok(Err(status
                    .reason
                    .or(status.evaluation_error)
                    .unwrap_or_default()))
            }
        })
    }
}

/// Configuration of the secured metrics endpoint: see the [module docs](self).
#[derive(Clone)]
#[must_use]
pub struct SecureMetrics {
    pub(crate) certs: Arc<CertWatcher>,
    pub(crate) tls: TlsOptions,
    pub(crate) cache_ttl: Duration,
    pub(crate) cache_size: usize,
    pub(crate) reviewer: Option<Arc<dyn Reviewer>>,
}

impl std::fmt::Debug for SecureMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecureMetrics")
            .field("cert", &self.certs.cert_path())
            .field("tls", &self.tls)
            .field("cache_ttl", &self.cache_ttl)
            .field("cache_size", &self.cache_size)
            .field("custom_reviewer", &self.reviewer.is_some())
            .finish()
    }
}

impl SecureMetrics {
    /// Serves `dir/tls.crt` and `dir/tls.key` (a Secret volume's layout), reviews through the
    /// manager's client.
    pub fn from_dir(dir: impl AsRef<Path>) -> Self {
        Self::from_watcher(Arc::new(CertWatcher::from_dir(dir.as_ref())))
    }

    /// Serves the pair of `certs`.
    pub fn from_watcher(certs: Arc<CertWatcher>) -> Self {
        SecureMetrics {
            certs,
            tls: TlsOptions::default(),
            cache_ttl: DEFAULT_CACHE_TTL,
            cache_size: DEFAULT_CACHE_SIZE,
            reviewer: None,
        }
    }

    /// How long a verdict is reused (0 reviews every request).
    pub fn cache_ttl(mut self, ttl: Duration) -> Self {
        self.cache_ttl = ttl;
        self
    }

    /// At most this many cached verdicts (at least 1).
    pub fn cache_size(mut self, size: usize) -> Self {
        self.cache_size = size;
        self
    }

    /// Reviews through `reviewer` instead of the manager's client.
    pub fn reviewer(mut self, reviewer: impl Reviewer) -> Self {
        self.reviewer = Some(Arc::new(reviewer));
        self
    }

    /// The certificate watcher.
    pub fn certs(&self) -> &Arc<CertWatcher> {
        &self.certs
    }

    /// Sets the TLS options (HTTP/2, minimum version, cipher suites, client CA); the defaults
    /// serve HTTP/1.1 only.
    pub fn tls(mut self, tls: TlsOptions) -> Self {
        self.tls = tls;
        self
    }

    /// The TLS options.
    pub fn tls_options(&self) -> &TlsOptions {
        &self.tls
    }

    /// The rustls configuration of the endpoint: the certificate watcher's pair with the TLS
    /// options. The certificate-read counters are registered (at 0) with the recorder installed
    /// now, the manager's.
    pub fn server_config(
        &self,
    ) -> Result<Arc<tokio_rustls::rustls::ServerConfig>, SecureMetricsError> {
        kcr_tls::register_metrics();
        Ok(self.tls.server_config(self.certs.clone())?)
    }
}

type CacheKey = ([u8; 32], String, String);

/// Bearer-token reviews with a short-lived, bounded cache of verdicts.
pub struct MetricsAuth {
    reviewer: Arc<dyn Reviewer>,
    ttl: Duration,
    capacity: usize,
    cache: Mutex<HashMap<CacheKey, (Instant, Verdict)>>,
}

impl std::fmt::Debug for MetricsAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsAuth")
            .field("ttl", &self.ttl)
            .field("capacity", &self.capacity)
            .field("cached", &self.cache.lock().len())
            .finish()
    }
}

impl MetricsAuth {
    /// Reviews through `reviewer`, caching verdicts for `ttl`, at most `capacity` of them.
    pub fn new(
        reviewer: Arc<dyn Reviewer>,
        ttl: Duration,
        capacity: usize,
    ) -> Result<Self, SecureMetricsError> {
        if capacity == 0 {
            return Err(SecureMetricsError::ZeroCacheSize);
        }
        Ok(MetricsAuth {
            reviewer,
            ttl,
            capacity,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// How many verdicts are cached.
    pub fn cached(&self) -> usize {
        self.cache.lock().len()
    }

    /// The verdict for `token` wanting to `verb` `path`: from the cache while fresh, else from
    /// the reviewer (and cached unless the review failed).
    pub async fn review(
        &self,
        token: &str,
        verb: &str,
        path: &str,
    ) -> Result<Verdict, SecureMetricsError> {
        let key: CacheKey = (digest(token), verb.to_owned(), path.to_owned());
        let cached = self
            .cache
            .lock()
            .get(&key)
            .filter(|(at, _)| at.elapsed() < self.ttl)
            .map(|(_, verdict)| verdict.clone());
        if let Some(verdict) = cached {
            return Ok(verdict);
        }
        let verdict = match self.reviewer.authenticate(token).await? {
            Err(reason) => Verdict::Unauthenticated(reason),
            Ok(user) => match self.reviewer.authorize(&user, verb, path).await? {
                Ok(()) => Verdict::Allowed(user),
                Err(reason) => Verdict::Forbidden {
                    user: user.username,
                    reason,
                },
            },
        };
        if !self.ttl.is_zero() {
            self.insert(key, verdict.clone());
        }
        Ok(verdict)
    }

    fn insert(&self, key: CacheKey, verdict: Verdict) {
        let mut cache = self.cache.lock();
        if cache.len() >= self.capacity && !cache.contains_key(&key) {
            let ttl = self.ttl;
            cache.retain(|_, (at, _)| at.elapsed() < ttl);
            while cache.len() >= self.capacity {
                let Some(oldest) = cache
                    .iter()
                    .min_by_key(|(_, (at, _))| *at)
                    .map(|(k, _)| k.clone())
                else {
                    break;
                };
                cache.remove(&oldest);
            }
        }
        cache.insert(key, (Instant::now(), verdict));
    }
}

fn digest(token: &str) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// The bearer token of `headers`, if any (`Authorization: Bearer <token>`, scheme
/// case-insensitive).
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn plain(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
    }
    response
}

/// The axum middleware: 401 / 403 / 500 or the wrapped handler.
pub(crate) async fn guard(
    State(auth): State<Arc<MetricsAuth>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = bearer_token(request.headers()) else {
        return plain(
            StatusCode::UNAUTHORIZED,
            "Unauthorized: no bearer token\n".to_owned(),
        );
    };
    let verb = request.method().as_str().to_ascii_lowercase();
    let path = request.uri().path().to_owned();
    match auth.review(token, &verb, &path).await {
        Ok(Verdict::Allowed(_)) => next.run(request).await,
        Ok(Verdict::Unauthenticated(reason)) => {
            tracing::debug!(%reason, "metrics request not authenticated");
            plain(StatusCode::UNAUTHORIZED, "Unauthorized\n".to_owned())
        }
        Ok(Verdict::Forbidden { user, reason }) => {
            tracing::debug!(%user, %reason, "metrics request not authorized");
            plain(
                StatusCode::FORBIDDEN,
                format!("Forbidden: user {user:?} may not {verb} {path}\n"),
            )
        }
        Err(e) => {
            tracing::error!(error = %e, "metrics request review failed");
            plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Internal Server Error: the request could not be reviewed\n".to_owned(),
            )
        }
    }
}

#[cfg(test)]
mod tests;
