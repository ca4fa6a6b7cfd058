//! The fault-injecting reverse proxy of the `real` backend: plain HTTP on 127.0.0.1 in front
//! of kube-apiserver's TLS port, authenticating upstream with the admin client certificate.
//!
//! Every client of a real-backend [`TestApiServer`](crate::TestApiServer) (its `client()`,
//! kubectl through its kubeconfig) talks to the proxy, so the same [`Faults`] as the
//! in-process server apply to the real one:
//! - requests are counted and failed by `(verb, resource)` ([`RequestInfo`]) before they are
//!   forwarded, delayed by the configured latency, and held while paused;
//! - watch responses are streamed through, held while paused, and ended by `close_watches`;
//! - `compact_history` makes every later watch from, or list continuing at, a resourceVersion
//!   handed out before it answer 410 Expired as the real server does for a compacted one (the
//!   watch as a 200 with one `ERROR` event, the list as a 410 Status). The boundary is the
//!   resourceVersion of a write the proxy makes on the next such request: a Lease named
//!   [`COMPACTION_LEASE`] in `kube-node-lease`, so a relist afterwards is never expired.
//!
//! Impersonation headers pass through (the admin may impersonate anyone), so a test can act as
//! another user with `kube::Config::auth_info.impersonate`. Upgraded connections (exec, attach,
//! port-forward) are not proxied.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderMap, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
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
type ProxyBody = BoxBody<Bytes, BoxError>;
type Upstream = Client<HttpsConnector<HttpConnector>, ProxyBody>;

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
    base: String,
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
    /// Listen on `127.0.0.1:port` (0 for any) and forward to `upstream` (`https://host:port`)
    /// with `tls` (trusting the control plane's CA, presenting the admin certificate).
    pub async fn start(
        port: u16,
        upstream: String,
        tls: rustls::ClientConfig,
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
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only()
            .enable_http1()
            .build();
        let (shutdown, shutdown_rx) = watch::channel(false);
        let state = Arc::new(State {
            upstream: Client::builder(TokioExecutor::new()).build(connector),
            base: upstream,
            faults,
            expiry,
            shutdown: shutdown_rx.clone(),
        });
        let task = tokio::spawn(crate::serve::serve(listener, shutdown_rx, move |req| {
            let state = state.clone();
            async move { handle(&state, req).await }
        }));
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
            .boxed(),
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

async fn handle(state: &State, req: Request<Incoming>) -> Response<ProxyBody> {
    let (parts, body) = req.into_parts();
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
    let uri = format!(
        "{}{}",
        state.base,
        parts
            .uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/")
    );
    let mut upstream_req = Request::new(body.map_err(|e| Box::new(e) as BoxError).boxed());
    *upstream_req.method_mut() = parts.method.clone();
    *upstream_req.uri_mut() = match uri.parse() {
        Ok(u) => u,
        Err(e) => return status_response(&ApiError::bad_request(format!("bad path: {e}"))),
    };
    copy_headers(&parts.headers, upstream_req.headers_mut());
    let resp = match state.upstream.request(upstream_req).await {
        Ok(r) => r,
        Err(e) => {
            return status_response(&ApiError::new(
                503,
                "ServiceUnavailable",
                format!("kcr-envtest proxy: kube-apiserver did not answer: {e}"),
            ));
        }
    };
    let (resp_parts, resp_body) = resp.into_parts();
    let body: ProxyBody = if watch {
        watch_body(state, resp_body, closed)
    } else {
        resp_body.map_err(|e| Box::new(e) as BoxError).boxed()
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
fn watch_body(state: &State, body: Incoming, closed: watch::Receiver<u64>) -> ProxyBody {
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
            let frame = next?;
            faults.wait_unpaused_quietly().await;
            let frame: Result<Frame<Bytes>, BoxError> = frame.map_err(|e| Box::new(e) as BoxError);
            Some((frame, (frames, faults, closed, shutdown)))
        },
    );
    BodyExt::boxed(StreamBody::new(stream))
}

impl State {
    /// Write the compaction Lease and return its new resourceVersion.
    async fn mark_compaction(&self) -> Result<u64, ApiError> {
        let path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
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
        let uri = format!(
            "{}{path}/{COMPACTION_LEASE}?fieldManager=kcr-envtest&force=true",
            self.base
        );
        let mut req = Request::new(
            Full::new(Bytes::from(lease.to_string()))
                .map_err(|never| match never {})
                .boxed(),
        );
        *req.method_mut() = http::Method::PATCH;
        let fail = |what: String| ApiError::internal(format!("kcr-envtest compaction: {what}"));
        *req.uri_mut() = uri.parse().map_err(|e| fail(format!("{e}")))?;
        req.headers_mut().insert(
            header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/apply-patch+yaml"),
        );
        let resp = self
            .upstream
            .request(req)
            .await
            .map_err(|e| fail(e.to_string()))?;
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
