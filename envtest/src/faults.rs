//! Fault injection and request counters, deterministic and observable.
//!
//! Obtained from [`crate::TestApiServer::faults`]. Rules match on `(verb, resource)` where
//! `verb` is the Kubernetes verb (`get`, `list`, `watch`, `create`, `update`, `patch`,
//! `delete`, `deletecollection`) and `resource` the plural name, with `/status` appended for
//! the status subresource (`pods/status`); `"*"` matches anything. A rule of
//! [`Faults::fail_next_in`] also matches on the namespace in the request's path only.
//!
//! Besides requests, the faults act on connections: [`Faults::blackhole`] freezes every
//! connection without closing it, as a silent network partition does (see
//! [`Faults::blackhole`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;

use crate::error::ApiError;
use crate::partition::Partition;

/// One armed failure rule.
#[derive(Debug, Clone)]
struct Rule {
    verb: String,
    resource: String,
    /// Only requests in this namespace (`/namespaces/{ns}/{resource}...`); `None`: any.
    namespace: Option<String>,
    remaining: usize,
    error: ApiError,
}

#[derive(Debug, Default)]
struct Inner {
    rules: Vec<Rule>,
    latency: Duration,
    counts: BTreeMap<(String, String), u64>,
}

/// Fault controls and request counters of one server. Cheap to clone.
#[derive(Clone)]
pub struct Faults {
    inner: Arc<Mutex<Inner>>,
    paused: watch::Sender<bool>,
    held: Arc<std::sync::atomic::AtomicUsize>,
    close_watches: watch::Sender<u64>,
    compact: Arc<dyn Fn() + Send + Sync>,
    partition: Arc<Partition>,
}

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faults")
            .field("inner", &self.inner)
            .field("paused", &self.is_paused())
            .field("blackholed", &self.is_blackholed())
            .finish_non_exhaustive()
    }
}

fn matches(pattern: &str, value: &str) -> bool {
    pattern == "*" || pattern == value
}

impl Faults {
    pub(crate) fn new(compact: Arc<dyn Fn() + Send + Sync>) -> Self {
        Faults {
            inner: Arc::default(),
            paused: watch::channel(false).0,
            held: Arc::default(),
            close_watches: watch::channel(0).0,
            compact,
            partition: Arc::default(),
        }
    }

    /// Fail the next `n` requests matching `(verb, resource)` with HTTP `code` (the Status
    /// reason follows the code: 404 NotFound, 409 Conflict, 500 InternalError, 503
    /// ServiceUnavailable, ...).
    ///
    /// kube's client (`kube::Config::default_retry`, on in [`crate::TestApiServer::client`])
    /// retries a 429, 503 or 504 by itself, up to 15 times from 5 ms on, before its caller
    /// sees it: each retry is a request of its own here. Use another code (500) for a
    /// failure the caller must see at once.
    pub fn fail_next(&self, verb: &str, resource: &str, n: usize, code: u16) {
        self.fail_next_with(
            verb,
            resource,
            n,
            ApiError::from_code(code, format!("injected fault for {verb} {resource}")),
        );
    }

    /// Fail the next `n` requests matching `(verb, resource)` with the given error.
    pub fn fail_next_with(&self, verb: &str, resource: &str, n: usize, error: ApiError) {
        self.push(None, verb, resource, n, error);
    }

    /// Like [`Faults::fail_next`], for requests in `namespace` only (its objects' paths,
    /// `/namespaces/{namespace}/{resource}...`; cluster-wide and cluster-scoped requests never
    /// match): the watch of one namespace can be refused while another's goes on.
    pub fn fail_next_in(&self, namespace: &str, verb: &str, resource: &str, n: usize, code: u16) {
        self.push(
            Some(namespace),
            verb,
            resource,
            n,
            ApiError::from_code(
                code,
                format!("injected fault for {verb} {resource} in namespace {namespace}"),
            ),
        );
    }

    fn push(&self, namespace: Option<&str>, verb: &str, resource: &str, n: usize, error: ApiError) {
        if n == 0 {
            return;
        }
        self.inner.lock().rules.push(Rule {
            verb: verb.to_string(),
            resource: resource.to_string(),
            namespace: namespace.map(str::to_string),
            remaining: n,
            error,
        });
    }

    /// Answer the next `n` matching requests with 429 TooManyRequests and
    /// `Retry-After: retry_after_secs`.
    pub fn throttle_next(&self, verb: &str, resource: &str, n: usize, retry_after_secs: u64) {
        self.fail_next_with(
            verb,
            resource,
            n,
            ApiError::too_many_requests(retry_after_secs),
        );
    }

    /// Remove every armed failure rule.
    pub fn clear(&self) {
        self.inner.lock().rules.clear();
    }

    /// Number of injected failures still armed.
    pub fn pending_failures(&self) -> usize {
        self.inner.lock().rules.iter().map(|r| r.remaining).sum()
    }

    /// Delay every request by `latency` before it is handled (zero to turn off). Uses tokio
    /// time, so a paused test clock controls it.
    pub fn set_latency(&self, latency: Duration) {
        self.inner.lock().latency = latency;
    }

    /// Close every open watch now (the client sees the stream end cleanly).
    pub fn close_watches(&self) {
        self.close_watches.send_modify(|g| *g += 1);
    }

    /// Compact the history: every resume from a resourceVersion handed out so far (watch or
    /// continue token) gets 410 Expired, so clients must relist.
    pub fn compact_history(&self) {
        (self.compact)();
    }

    /// Pause the server: requests are accepted but not answered until [`Faults::resume`].
    /// Open watches stop delivering events meanwhile.
    pub fn pause(&self) {
        self.paused.send_replace(true);
    }

    /// Resume a paused server.
    pub fn resume(&self) {
        self.paused.send_replace(false);
    }

    /// Number of requests currently held by [`Faults::pause`].
    pub fn held_requests(&self) -> usize {
        self.held.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether the server is paused.
    pub fn is_paused(&self) -> bool {
        *self.paused.borrow()
    }

    /// Start a silent network partition between the clients and the server: every connection
    /// open now and every connection accepted until [`Faults::heal`] is frozen for good. A
    /// frozen connection is closed by nothing the client could see: the bytes it sends are
    /// read and dropped, nothing comes back, no FIN or RST is ever sent, and a TLS handshake on
    /// it (the existing backend's HTTPS proxy) never finishes. This is what a dead load
    /// balancer, a vanished route or an expired NAT entry does; a client recovers only if it
    /// notices the dead connection by itself (a deadline, a liveness check).
    ///
    /// [`Faults::pause`] and [`Faults::close_watches`] cannot show that: a paused server still
    /// answers after the pause, and a closed watch tells the client at once.
    ///
    /// It acts on the connections of this server's listener (the in-process server, or the
    /// fault proxy of the real and existing backends); the helpers that bypass the proxy
    /// (`upsert`, `add_nodes`, `install_crd`; on the in-process server they write to its store
    /// directly) keep working, so a test can change objects during the partition. A test that
    /// blackholes needs a server of its own: every client of a shared server would freeze.
    pub fn blackhole(&self) {
        tracing::info!("fault: blackhole (every connection frozen, nothing closed)");
        self.partition.start();
    }

    /// End the partition of [`Faults::blackhole`] for new connections: they flow again. The
    /// connections frozen by it stay frozen for good, as after a real partition.
    pub fn heal(&self) {
        tracing::info!("fault: heal (new connections flow; frozen ones stay frozen)");
        self.partition.heal();
    }

    /// Whether a partition of [`Faults::blackhole`] is on.
    pub fn is_blackholed(&self) -> bool {
        self.partition.is_on()
    }

    /// How many connections partitions have frozen so far (those open when one started and
    /// those accepted while one lasted).
    pub fn frozen_connections(&self) -> usize {
        self.partition.frozen_connections()
    }

    /// The partition state the server's accept loop wraps every connection in.
    pub(crate) fn partition(&self) -> Arc<Partition> {
        self.partition.clone()
    }

    /// Requests received for `(verb, resource)` so far (`"*"` sums over that position).
    pub fn request_count(&self, verb: &str, resource: &str) -> u64 {
        self.inner
            .lock()
            .counts
            .iter()
            .filter(|((v, r), _)| matches(verb, v) && matches(resource, r))
            .map(|(_, n)| *n)
            .sum()
    }

    /// All request counters keyed by `(verb, resource)`.
    pub fn request_counts(&self) -> BTreeMap<(String, String), u64> {
        self.inner.lock().counts.clone()
    }

    /// Reset the request counters.
    pub fn reset_counts(&self) {
        self.inner.lock().counts.clear();
    }

    /// Count a request and return the injected failure it must get, if any, and the latency.
    /// `namespace` is the one in the request's path, if any.
    pub(crate) fn on_request(
        &self,
        verb: &str,
        resource: &str,
        namespace: Option<&str>,
    ) -> (Option<ApiError>, Duration) {
        let mut inner = self.inner.lock();
        *inner
            .counts
            .entry((verb.to_string(), resource.to_string()))
            .or_default() += 1;
        let latency = inner.latency;
        let pos = inner.rules.iter().position(|r| {
            matches(&r.verb, verb)
                && matches(&r.resource, resource)
                && r.namespace
                    .as_deref()
                    .is_none_or(|ns| namespace == Some(ns))
        });
        let error = pos.map(|i| {
            let rule = &mut inner.rules[i];
            rule.remaining -= 1;
            let error = rule.error.clone();
            if rule.remaining == 0 {
                inner.rules.remove(i);
            }
            error
        });
        (error, latency)
    }

    /// Wait while the server is paused.
    pub(crate) async fn wait_unpaused(&self) {
        let mut rx = self.paused.subscribe();
        if !*rx.borrow_and_update() {
            return;
        }
        self.held.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // An error means the sender is gone, i.e. the server is shutting down: stop waiting.
        let _ = rx.wait_for(|paused| !paused).await;
        self.held.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Like [`Faults::wait_unpaused`] without counting (for watch streams).
    pub(crate) async fn wait_unpaused_quietly(&self) {
        let mut rx = self.paused.subscribe();
        let _ = rx.wait_for(|paused| !paused).await;
    }

    pub(crate) fn close_watches_receiver(&self) -> watch::Receiver<u64> {
        self.close_watches.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn faults() -> Faults {
        Faults::new(Arc::new(|| {}))
    }

    #[test]
    fn a_namespaced_rule_fails_only_requests_in_its_namespace() {
        let f = faults();
        f.fail_next_in("team-b", "watch", "configmaps", 2, 503);
        let code = |ns: Option<&str>| f.on_request("watch", "configmaps", ns).0.map(|e| e.code);
        assert_eq!(code(Some("team-a")), None);
        assert_eq!(code(None), None, "a cluster-wide watch");
        assert_eq!(code(Some("team-b")), Some(503));
        assert_eq!(code(Some("team-b")), Some(503));
        assert_eq!(code(Some("team-b")), None, "two failures, then none");
        assert_eq!(f.request_count("watch", "configmaps"), 5, "all counted");
    }

    #[test]
    fn a_rule_without_namespace_fails_any_request() {
        let f = faults();
        f.fail_next("get", "*", 2, 500);
        assert_eq!(
            f.on_request("get", "pods", Some("a")).0.map(|e| e.code),
            Some(500)
        );
        assert_eq!(
            f.on_request("get", "nodes", None).0.map(|e| e.code),
            Some(500)
        );
        assert!(f.on_request("get", "pods", Some("a")).0.is_none());
        assert_eq!(f.pending_failures(), 0);
    }
}
