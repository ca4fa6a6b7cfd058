//! Watch streams: newline-delimited JSON `WatchEvent`s on a chunked HTTP response.
//!
//! A watch starts either from a resourceVersion (every later event of the resource, in order)
//! or from "now" (synthetic ADDED events for the current state, then live events). With
//! `sendInitialEvents=true`, or from "now" with `allowWatchBookmarks=true` (as kube-apiserver
//! 1.37 does), the initial state ends with a BOOKMARK annotated
//! `k8s.io/initial-events-end: "true"`. Events are read from the store's bounded log in
//! batches, filtered by namespace and selectors (an object leaving the selection is sent as
//! DELETED, one entering it as ADDED) and written in one chunk per batch. Falling out of the
//! history window (or resuming from a compacted resourceVersion) ends the watch with an
//! `ERROR` event carrying a 410 Expired Status.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{Response, StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::json;
use tokio::sync::mpsc;

use super::query::{OutputMode, Query};
use super::response::render;
use super::route::Route;
use super::selectors::Selectors;
use super::{Body, Shared};
use crate::error::ApiError;
use crate::store::{LogEvent, StoredObject, WatchEventType};

/// Events read from the log per lock acquisition.
const BATCH: usize = 2048;
/// Flush a chunk once it grows beyond this many bytes.
const CHUNK: usize = 256 * 1024;

struct WatchSpec {
    route: Route,
    sel: Selectors,
    mode: OutputMode,
    rv: Option<String>,
    bookmarks: bool,
    send_initial: bool,
    timeout: Option<Duration>,
    /// `Faults::close_watches` as seen when the request was counted: a close since then ends
    /// this watch as soon as it runs.
    closes: tokio::sync::watch::Receiver<u64>,
}

/// Start a watch: validates parameters, spawns the producer and returns the streaming response.
/// `closes` is the close signal subscribed when the request was counted.
pub(crate) fn start(
    shared: Arc<Shared>,
    route: Route,
    q: &Query,
    mode: OutputMode,
    closes: tokio::sync::watch::Receiver<u64>,
) -> Result<Response<Body>, ApiError> {
    let sel = Selectors::parse(&route.t, q)?;
    let rv = q.get("resourceVersion").filter(|r| !r.is_empty()).cloned();
    if let Some(r) = &rv {
        r.parse::<u64>()
            .map_err(|_| super::options::invalid_rv(r))?;
    }
    let flag = |k: &str| q.get(k).is_some_and(|v| v == "true" || v == "1");
    let send_initial = flag("sendInitialEvents");
    let bookmarks = flag("allowWatchBookmarks");
    let rv_match = q.get("resourceVersionMatch").map(String::as_str);
    if send_initial && rv_match != Some("NotOlderThan") {
        let mut causes = vec![(
            "resourceVersionMatch".to_string(),
            "FieldValueForbidden".to_string(),
            "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
                .to_string(),
        )];
        if let Some(other) = rv_match.filter(|m| !m.is_empty()) {
            causes.push((
                "resourceVersionMatch".into(),
                "FieldValueNotSupported".into(),
                format!("Unsupported value: \"{other}\": supported values: \"NotOlderThan\""),
            ));
        }
        return Err(ApiError::invalid("meta.k8s.io", "ListOptions", "", causes));
    }
    let timeout = match q.get("timeoutSeconds") {
        Some(s) if !s.is_empty() => Some(Duration::from_secs(s.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!("strconv.ParseInt: parsing \"{s}\": invalid syntax"))
        })?)),
        _ => None,
    };
    let spec = WatchSpec {
        route,
        sel,
        mode,
        rv,
        bookmarks,
        send_initial,
        timeout,
        closes,
    };
    let (tx, rx) = mpsc::channel::<Bytes>(8);
    tokio::spawn(run(shared, spec, tx));
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, std::convert::Infallible>(Frame::data(b)), rx))
    });
    Ok(Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(StreamBody::new(stream).boxed())
        // invariant: static status and header are valid
        .unwrap_or_default())
}

/// One event line; `object` is a rendered body (its trailing newline is dropped).
fn event_line(buf: &mut BytesMut, kind: &str, object: &[u8]) {
    let object = object.strip_suffix(b"\n").unwrap_or(object);
    buf.extend_from_slice(b"{\"type\":\"");
    buf.extend_from_slice(kind.as_bytes());
    buf.extend_from_slice(b"\",\"object\":");
    buf.extend_from_slice(object);
    buf.extend_from_slice(b"}\n");
}

fn bookmark(route: &Route, rv: u64, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let obj = json!({
        "kind": route.t.kind,
        "apiVersion": route.t.api_version(&route.version),
        "metadata": meta,
    });
    let mut buf = BytesMut::new();
    event_line(&mut buf, "BOOKMARK", &crate::json::typed(&obj).bytes);
    buf.freeze()
}

fn error_event(err: &ApiError) -> Bytes {
    let mut buf = BytesMut::new();
    event_line(
        &mut buf,
        "ERROR",
        &crate::json::typed(&err.to_status()).bytes,
    );
    buf.freeze()
}

fn too_old(rv: u64, oldest: u64) -> ApiError {
    ApiError::expired(format!("too old resource version: {rv} ({oldest})"))
}

impl WatchSpec {
    fn in_scope(&self, ev: &LogEvent, key: &str) -> bool {
        &*ev.resource == key
            && self
                .route
                .namespace
                .as_deref()
                .is_none_or(|ns| ev.key.0 == ns)
    }

    fn matches(&self, obj: &StoredObject) -> bool {
        self.sel.is_everything() || self.sel.matches(&obj.value)
    }

    /// The event a log event is for this watch (after selector transitions), if any: its kind
    /// and the object it carries. An object that left the selector: the real server's DELETED
    /// carries the previous (still matching) state at the new resourceVersion.
    fn event_for(&self, ev: &LogEvent) -> Option<(WatchEventType, Arc<StoredObject>)> {
        let kind = self.event_kind(ev)?;
        let left = matches!(ev.kind, WatchEventType::Modified) && kind == WatchEventType::Deleted;
        let object = match (&ev.prev, left) {
            (Some(prev), true) => prev.at_rv(ev.rv),
            _ => ev.object.clone(),
        };
        Some((kind, object))
    }

    /// The kind of event a log event is for this watch (after selector transitions), if any.
    fn event_kind(&self, ev: &LogEvent) -> Option<WatchEventType> {
        let now = self.matches(&ev.object);
        let kind = match ev.kind {
            WatchEventType::Added if now => WatchEventType::Added,
            WatchEventType::Deleted if now => WatchEventType::Deleted,
            WatchEventType::Modified => {
                let before = ev.prev.as_deref().is_some_and(|p| self.matches(p));
                match (before, now) {
                    (true, true) => WatchEventType::Modified,
                    (true, false) => WatchEventType::Deleted,
                    (false, true) => WatchEventType::Added,
                    (false, false) => return None,
                }
            }
            _ => return None,
        };
        Some(kind)
    }
}

async fn send(tx: &mpsc::Sender<Bytes>, buf: &mut BytesMut) -> bool {
    if buf.is_empty() {
        return true;
    }
    tx.send(buf.split().freeze()).await.is_ok()
}

async fn run(shared: Arc<Shared>, spec: WatchSpec, tx: mpsc::Sender<Bytes>) {
    let key = crate::convert::storage_key(&spec.route.t);
    let mut rv_rx = shared.rv_tx.subscribe();
    // Not marked seen: a close between the request's count and now ends the watch at once.
    let mut kill = spec.closes.clone();
    let mut shutdown = shared.shutdown.subscribe();
    let deadline = spec.timeout.map(|t| tokio::time::Instant::now() + t);
    rv_rx.borrow_and_update();

    // Starting point.
    let from_now = matches!(spec.rv.as_deref(), None | Some("0"));
    let start: Result<(u64, Vec<Arc<StoredObject>>), ApiError> = {
        let store = shared.store.lock();
        if from_now || spec.send_initial {
            let items = store
                .range(&key, spec.route.namespace.as_deref(), None)
                .filter(|(_, o)| spec.matches(o))
                .map(|(_, o)| o.clone())
                .collect();
            Ok((store.rv(), items))
        } else {
            // invariant: validated as an integer in `start`
            let rv = spec.rv.as_deref().and_then(|r| r.parse().ok()).unwrap_or(0);
            if rv < store.oldest_rv() {
                Err(too_old(rv, store.oldest_rv()))
            } else {
                Ok((rv, Vec::new()))
            }
        }
    };
    let (mut cursor, initial) = match start {
        Ok(s) => s,
        Err(e) => {
            let _ = tx.send(error_event(&e)).await;
            return;
        }
    };
    // Objects stored in another version than the watch's go through the CRD's conversion
    // webhook; a failure ends the watch with an ERROR event.
    let initial = match super::conversion::served(&spec.route, initial).await {
        Ok(initial) => initial,
        Err(e) => {
            let _ = tx.send(error_event(&e)).await;
            return;
        }
    };
    let mut buf = BytesMut::new();
    for obj in &initial {
        event_line(&mut buf, "ADDED", &render(obj, &spec.route, spec.mode));
        if buf.len() >= CHUNK && !send(&tx, &mut buf).await {
            return;
        }
    }
    drop(initial);
    // kube-apiserver 1.37 ends the initial state with the annotated bookmark also for a
    // plain watch from "now" (no resourceVersion or "0") that allows bookmarks.
    if spec.send_initial || (from_now && spec.bookmarks) {
        buf.extend_from_slice(&bookmark(&spec.route, cursor, true));
    }
    if !send(&tx, &mut buf).await {
        return;
    }
    let mut ticker = tokio::time::interval(shared.bookmark_interval.max(Duration::from_millis(1)));
    ticker.tick().await;
    loop {
        shared.faults.wait_unpaused_quietly().await;
        rv_rx.borrow_and_update();
        // Drain the log.
        loop {
            let batch = shared.store.lock().events_since_live(cursor, BATCH);
            let events = match batch {
                Ok(events) => events,
                Err(expired) => {
                    let _ = tx.send(error_event(&too_old(cursor, expired.oldest))).await;
                    return;
                }
            };
            let Some(last) = events.last() else {
                // A CRD deleted meanwhile: its watches end, as on the real server.
                if shared.store.lock().registry.get(&key).is_none() {
                    return;
                }
                break;
            };
            cursor = last.rv;
            let (kinds, objects): (Vec<WatchEventType>, Vec<Arc<StoredObject>>) = events
                .iter()
                .filter(|ev| spec.in_scope(ev, &key))
                .filter_map(|ev| spec.event_for(ev))
                .unzip();
            let objects = match super::conversion::served(&spec.route, objects).await {
                Ok(objects) => objects,
                Err(e) => {
                    let _ = send(&tx, &mut buf).await;
                    let _ = tx.send(error_event(&e)).await;
                    return;
                }
            };
            for (kind, obj) in kinds.into_iter().zip(&objects) {
                event_line(
                    &mut buf,
                    kind.as_str(),
                    &render(obj, &spec.route, spec.mode),
                );
                if buf.len() >= CHUNK && !send(&tx, &mut buf).await {
                    return;
                }
            }
            if !send(&tx, &mut buf).await {
                return;
            }
        }
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = rv_rx.changed() => if changed.is_err() { return },
            _ = sleep => return,
            _ = kill.changed() => return,
            _ = async { let _ = shutdown.wait_for(|s| *s).await; } => return,
            _ = tx.closed() => return,
            _ = ticker.tick(), if spec.bookmarks => {
                if tx.send(bookmark(&spec.route, cursor, false)).await.is_err() {
                    return;
                }
            }
        }
    }
}
