//! The fault-injecting reverse proxy of the `real` and `existing` backends: plain HTTP (HTTPS
//! for the existing backend) on 127.0.0.1 in front of an API server ([`Upstream`]):
//! kube-apiserver's TLS port, authenticating with the admin client certificate (real
//! backend), or the cluster of a kubeconfig through a `kube::Client` built from it, which
//! authenticates as the kubeconfig says (existing backend).
//!
//! Every client of such a [`TestApiServer`](crate::TestApiServer) (its `client()`, kubectl
//! through its kubeconfig) talks to the proxy, so the same [`Faults`] as the in-process server
//! apply:
//! - requests are counted and failed by `(verb, resource)` ([`RequestInfo`]) before they are
//!   forwarded, delayed by the configured latency, and held while paused;
//! - watch responses are streamed through, held while paused, and ended by `close_watches`;
//! - `compact_history` makes every later watch from, or list continuing at, a resourceVersion
//!   handed out before it answer 410 Expired as the real server does for a compacted one (the
//!   watch as a 200 with one `ERROR` event, the list as a 410 Status). The boundary is the
//!   resourceVersion of a write the proxy makes on the next such request: a Lease named
//!   [`COMPACTION_LEASE`] (in `kube-node-lease` on the real backend, in the test's own
//!   namespace on an existing cluster), so a relist afterwards is never expired.
//!
//! Impersonation headers pass through (the admin may impersonate anyone), so a test can act as
//! another user with `kube::Config::auth_info.impersonate`. Upgraded connections (exec, attach,
//! port-forward) are not proxied.
//!
//! In front of an existing cluster the proxy would lend the kubeconfig's credentials to
//! whoever reaches it, so there it serves HTTPS with a certificate of its own and asks for a
//! bearer token of its own ([`ProxyAccess`]), which the handle's client and kubeconfig carry
//! (over HTTPS, because kubectl sends no credentials over plain HTTP); a request without it is
//! a 401 and never forwarded, and the token itself is not forwarded. Request bodies are read
//! whole before they are forwarded there (`kube::Client::send` takes a complete body);
//! responses, watches included, stream through.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderMap, Request, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, BodyStream, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::request_info::{RequestInfo, query_value};
use crate::error::{ApiError, EnvtestError};
use crate::faults::Faults;

/// The Lease the proxy writes to mark a compaction (namespace `kube-node-lease`).
pub const COMPACTION_LEASE: &str = "kcr-envtest-compaction";

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type ProxyBody = UnsyncBoxBody<Bytes, BoxError>;
type TlsClient = Client<HttpsConnector<HttpConnector>, ProxyBody>;

/// Where the proxy forwards requests.
pub(crate) enum Upstream {
    /// kube-apiserver of the real backend: HTTPS at `base` (`https://host:port`) with a TLS
    /// configuration that trusts its CA and presents the admin certificate.
    Tls {
        /// The hyper client with that TLS configuration (boxed: it is large).
        client: Box<TlsClient>,
        /// `https://host:port`.
        base: String,
    },
    /// An existing cluster: a client built from its kubeconfig, which adds the server's
    /// address, TLS and the kubeconfig's authentication (certificates, tokens, exec plugins)
    /// to each request ([`kube::Client::send`]). It must not retry by itself (429, 503 and 504
    /// answers go to the client as they are); its bounds are kcr-connect's (a watch may stay
    /// silent as long as the cluster sends bookmarks).
    Kube(kube::Client),
}

impl Upstream {
    /// kube-apiserver at `base` (`https://host:port`), reached with `tls`.
    pub fn tls(base: String, tls: rustls::ClientConfig) -> Upstream {
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only()
            .enable_http1()
            .build();
        Upstream::Tls {
            client: Box::new(Client::builder(TokioExecutor::new()).build(connector)),
            base,
        }
    }

    /// Send `req`, whose URI is a path and query, and return the answer as it came.
    async fn send(&self, req: Request<ProxyBody>) -> Result<Response<ProxyBody>, String> {
        let (mut parts, body) = req.into_parts();
        let path = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| "/".to_string());
        match self {
            Upstream::Tls { client, base } => {
                parts.uri = format!("{base}{path}")
                    .parse()
                    .map_err(|e| format!("bad path {path}: {e}"))?;
                let resp = client
                    .request(Request::from_parts(parts, body))
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(resp.map(|b| b.map_err(|e| Box::new(e) as BoxError).boxed_unsync()))
            }
            Upstream::Kube(client) => {
                let bytes = body
                    .collect()
                    .await
                    .map_err(|e| format!("reading the request body: {e}"))?
                    .to_bytes();
                parts.uri = path.parse().map_err(|e| format!("bad path {path}: {e}"))?;
                let req = Request::from_parts(parts, kube::client::Body::from(bytes));
                let resp = client.send(req).await.map_err(|e| e.to_string())?;
                Ok(resp.map(|b| b.map_err(|e| Box::new(e) as BoxError).boxed_unsync()))
            }
        }
    }
}

/// How clients reach the proxy, who may use it, and where it keeps its compaction Lease.
pub(crate) struct ProxyAccess {
    /// When set, the proxy serves HTTPS with this configuration (plain HTTP otherwise).
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// When set, every request must carry `Authorization: Bearer <token>` (401 otherwise); the
    /// header is not forwarded.
    pub token: Option<String>,
    /// The namespace of the [`COMPACTION_LEASE`].
    pub lease_namespace: String,
}

/// Compaction requests and the resourceVersion boundary they set.
#[derive(Default)]
pub(crate) struct Expiry {
    /// Compactions requested so far.
    requested: AtomicU64,
    /// `(compactions applied, boundary)`: resourceVersions below the boundary are expired.
    applied: tokio::sync::Mutex<(u64, u64)>,
}

impl Expiry {
    /// Ask for a compaction; it takes effect at the next request that carries a
    /// resourceVersion or continue token.
    pub fn request(&self) {
        self.requested.fetch_add(1, Ordering::SeqCst);
    }

    /// The boundary, first writing the compaction Lease if a compaction is pending.
    async fn boundary(&self, state: &State) -> Result<u64, ApiError> {
        let requested = self.requested.load(Ordering::SeqCst);
        let mut applied = self.applied.lock().await;
        if applied.0 < requested {
            let rv = state.mark_compaction().await?;
            *applied = (requested, applied.1.max(rv));
        }
        Ok(applied.1)
    }
}

struct State {
    upstream: Upstream,
    access: ProxyAccess,
    faults: Faults,
    expiry: Arc<Expiry>,
    shutdown: watch::Receiver<bool>,
}

/// A running proxy; stops when dropped.
pub(crate) struct Proxy {
    addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listen on `127.0.0.1:port` (0 for any) and forward to `upstream`, admitting the
    /// requests `access` allows.
    pub async fn start(
        port: u16,
        upstream: Upstream,
        access: ProxyAccess,
        faults: Faults,
        expiry: Arc<Expiry>,
    ) -> Result<Proxy, EnvtestError> {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let bind = |source| EnvtestError::Bind {
            addr: addr.to_string(),
            source,
        };
        let listener = TcpListener::bind(addr).await.map_err(bind)?;
        let addr = listener.local_addr().map_err(bind)?;
        let (shutdown, shutdown_rx) = watch::channel(false);
        let state = Arc::new(State {
            upstream,
            access,
            faults,
            expiry,
            shutdown: shutdown_rx.clone(),
        });
        let tls = state
            .access
            .tls
            .clone()
            .map(tokio_rustls::TlsAcceptor::from);
        let task = tokio::spawn(crate::serve::serve(
            listener,
            shutdown_rx,
            tls,
            state.faults.partition(),
            move |req| {
                let state = state.clone();
                async move { handle(&state, req).await }
            },
        ));
        Ok(Proxy {
            addr,
            shutdown,
            task,
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop accepting, end open connections and watches.
    pub fn stop(&self) {
        self.shutdown.send_replace(true);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop();
        self.task.abort();
    }
}

fn full(code: StatusCode, content_type: &str, body: Vec<u8>) -> Response<ProxyBody> {
    let mut resp = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *resp.status_mut() = code;
    if let Ok(v) = http::HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    resp
}

fn status_response(err: &ApiError) -> Response<ProxyBody> {
    let code = StatusCode::from_u16(err.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = full(
        code,
        "application/json",
        serde_json::to_vec(&err.to_status()).unwrap_or_default(),
    );
    if let Some(secs) = err.retry_after
        && let Ok(v) = http::HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

/// The resourceVersion a continue token carries (base64 of `{"rv": N, ...}`).
fn continue_rv(token: &str) -> Option<u64> {
    use base64::Engine;
    let token = token.replace("%3D", "=").replace("%3d", "=");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice::<Value>(&raw).ok()?["rv"].as_u64()
}

/// Headers that belong to one hop and are not forwarded.
fn is_hop_by_hop(name: &header::HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
    )
}

fn copy_headers(from: &HeaderMap, to: &mut HeaderMap) {
    for (name, value) in from {
        if !is_hop_by_hop(name) {
            to.append(name.clone(), value.clone());
        }
    }
}

/// Whether `headers` carry `Authorization: Bearer <token>` (compared in constant time).
fn has_token(headers: &HeaderMap, token: &str) -> bool {
    let Some(given) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    else {
        return false;
    };
    given.len() == token.len()
        && given
            .bytes()
            .zip(token.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

async fn handle(state: &State, req: Request<Incoming>) -> Response<ProxyBody> {
    let (mut parts, body) = req.into_parts();
    if let Some(token) = &state.access.token {
        if !has_token(&parts.headers, token) {
            return status_response(&ApiError::new(
                401,
                "Unauthorized",
                "kcr-envtest proxy: this proxy lends a kubeconfig's credentials and needs the \
                 bearer token of the TestApiServer's kubeconfig or client",
            ));
        }
        parts.headers.remove(header::AUTHORIZATION);
    }
    let path = parts.uri.path().to_string();
    let query = parts.uri.query().map(str::to_string);
    let info = RequestInfo::of(&parts.method, &path, query.as_deref());
    // A watch is open from the moment it is asked for: `close_watches` while it is on its way
    // to kube-apiserver ends it as soon as its response starts.
    let mut closed = state.faults.close_watches_receiver();
    closed.borrow_and_update();
    state.faults.wait_unpaused().await;
    let (fault, latency) =
        state
            .faults
            .on_request(&info.verb, &info.resource, info.namespace.as_deref());
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    if let Some(err) = fault {
        return status_response(&err);
    }
    let watch = info.verb == "watch";
    // A resume from before a compaction: 410, as the real server answers a compacted one.
    let resume_rv = if watch {
        query_value(query.as_deref(), "resourceVersion")
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|rv| *rv > 0)
    } else if info.verb == "list" {
        query_value(query.as_deref(), "continue").and_then(continue_rv)
    } else {
        None
    };
    if let Some(rv) = resume_rv
        && state.expiry.requested.load(Ordering::SeqCst) > 0
    {
        let boundary = match state.expiry.boundary(state).await {
            Ok(b) => b,
            Err(e) => return status_response(&e),
        };
        if rv < boundary {
            return expired(watch, rv, boundary);
        }
    }
    let mut upstream_req = Request::new(body.map_err(|e| Box::new(e) as BoxError).boxed_unsync());
    *upstream_req.method_mut() = parts.method.clone();
    *upstream_req.uri_mut() = parts.uri.clone();
    copy_headers(&parts.headers, upstream_req.headers_mut());
    let resp = match state.upstream.send(upstream_req).await {
        Ok(r) => r,
        Err(e) => {
            return status_response(&ApiError::new(
                503,
                "ServiceUnavailable",
                format!("kcr-envtest proxy: the API server did not answer: {e}"),
            ));
        }
    };
    let (resp_parts, resp_body) = resp.into_parts();
    let body: ProxyBody = if watch {
        watch_body(state, resp_body, closed)
    } else {
        resp_body
    };
    let mut out = Response::new(body);
    *out.status_mut() = resp_parts.status;
    copy_headers(&resp_parts.headers, out.headers_mut());
    out
}

/// The 410 of a resume from before a compaction.
fn expired(watch: bool, rv: u64, boundary: u64) -> Response<ProxyBody> {
    let err = ApiError::expired(format!(
        "too old resource version: {rv} ({boundary}) (history compacted by kcr-envtest)"
    ));
    if watch {
        let event = json!({"type": "ERROR", "object": err.to_status()});
        let mut line = serde_json::to_vec(&event).unwrap_or_default();
        line.push(b'\n');
        full(StatusCode::OK, "application/json", line)
    } else {
        status_response(&err)
    }
}

/// A watch body streamed through: held while paused, ended by `close_watches` (counted from
/// `closed`'s last seen value) or shutdown.
fn watch_body(state: &State, body: ProxyBody, closed: watch::Receiver<u64>) -> ProxyBody {
    let faults = state.faults.clone();
    let shutdown = state.shutdown.clone();
    let frames = BodyStream::new(body);
    let stream = futures::stream::unfold(
        (frames, faults, closed, shutdown),
        |(mut frames, faults, mut closed, mut shutdown)| async move {
            if closed.has_changed().unwrap_or(true) {
                return None;
            }
            let next = tokio::select! {
                _ = closed.changed() => None,
                _ = shutdown.wait_for(|s| *s) => None,
                frame = frames.next() => frame,
            };
            let frame: Result<Frame<Bytes>, BoxError> = next?;
            faults.wait_unpaused_quietly().await;
            Some((frame, (frames, faults, closed, shutdown)))
        },
    );
    BodyExt::boxed_unsync(StreamBody::new(stream))
}

impl State {
    /// Write the compaction Lease and return its new resourceVersion.
    async fn mark_compaction(&self) -> Result<u64, ApiError> {
        let path = format!(
            "/apis/coordination.k8s.io/v1/namespaces/{}/leases",
            self.access.lease_namespace
        );
        let now = jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
            .to_string();
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": COMPACTION_LEASE},
            "spec": {"holderIdentity": "kcr-envtest", "renewTime": now},
        });
        // Server-side apply creates or updates in one request.
        let uri = format!("{path}/{COMPACTION_LEASE}?fieldManager=kcr-envtest&force=true");
        let mut req = Request::new(
            Full::new(Bytes::from(lease.to_string()))
                .map_err(|never| match never {})
                .boxed_unsync(),
        );
        *req.method_mut() = http::Method::PATCH;
        let fail = |what: String| ApiError::internal(format!("kcr-envtest compaction: {what}"));
        *req.uri_mut() = uri.parse().map_err(|e| fail(format!("{e}")))?;
        req.headers_mut().insert(
            header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/apply-patch+yaml"),
        );
        let resp = self.upstream.send(req).await.map_err(fail)?;
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| fail(e.to_string()))?
            .to_bytes();
        if !status.is_success() {
            return Err(fail(format!(
                "writing the Lease answered {status}: {}",
                String::from_utf8_lossy(&body)
            )));
        }
        serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v["metadata"]["resourceVersion"].as_str()?.parse().ok())
            .ok_or_else(|| fail("the Lease came back without a resourceVersion".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_carry_their_resource_version() {
        use base64::Engine;
        let token = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(br#"{"v":"meta.k8s.io/v1","rv":1234,"start":"default/a\u0000"}"#);
        assert_eq!(continue_rv(&token), Some(1234));
        assert_eq!(continue_rv("not base64 at all!"), None);
        let no_rv = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"v":1}"#);
        assert_eq!(continue_rv(&no_rv), None);
    }

    #[test]
    fn only_the_exact_bearer_token_is_admitted() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, value.parse().unwrap());
            headers
        };
        assert!(has_token(&with("Bearer s3cret"), "s3cret"));
        assert!(!has_token(&with("Bearer s3cre"), "s3cret"));
        assert!(!has_token(&with("Bearer s3cret!"), "s3cret"));
        assert!(!has_token(&with("Bearer S3cret"), "s3cret"));
        assert!(!has_token(&with("Basic s3cret"), "s3cret"));
        assert!(!has_token(&HeaderMap::new(), "s3cret"));
    }

    #[test]
    fn hop_by_hop_headers_stay_behind() {
        let mut from = HeaderMap::new();
        from.insert(header::HOST, "127.0.0.1:1".parse().unwrap());
        from.insert(header::CONNECTION, "keep-alive".parse().unwrap());
        from.insert(header::ACCEPT, "application/json".parse().unwrap());
        from.insert("impersonate-user", "alice".parse().unwrap());
        let mut to = HeaderMap::new();
        copy_headers(&from, &mut to);
        assert_eq!(to.len(), 2);
        assert_eq!(to["impersonate-user"], "alice");
    }

    #[test]
    fn an_expired_watch_is_one_error_event() {
        let resp = expired(true, 5, 9);
        assert_eq!(resp.status(), StatusCode::OK);
        let resp = expired(false, 5, 9);
        assert_eq!(resp.status(), StatusCode::GONE);
    }
}
