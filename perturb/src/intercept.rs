//! The interception layer on the controller's client: it records every write and every watch
//! event, counts requests in flight (for settling), trips a crash, and holds or drops watch
//! events.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;
use http::{Method, Request, Response};
use http_body::Frame;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use kube::client::Body;
use parking_lot::Mutex;
use tokio::sync::{Notify, mpsc, watch};
use tokio::time::Instant;
use tower::{BoxError, Layer, Service};

/// The body the intercepted client hands to kube.
pub(crate) type InterceptBody = UnsyncBoxBody<Bytes, BoxError>;

/// What one run does to the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Nothing: the reference run.
    None,
    /// Crash right after write `k` (1-based) is answered.
    CrashAfter(usize),
    /// Crash right before write `k` is sent.
    CrashBefore(usize),
    /// Hold the watch event `point`; drop it if a newer event of the same object arrives
    /// on its stream within `hold`, else deliver it late.
    Missed {
        /// The event.
        point: EventKey,
        /// How long it is held.
        hold: Duration,
    },
    /// From the watch event `point` on, hold its whole stream for `hold`, then release
    /// everything in order.
    Stale {
        /// The event where the lag starts.
        point: EventKey,
        /// How long the stream lags.
        hold: Duration,
    },
}

/// A watch event, identified across runs: the stream (the watch's path), the event type, the
/// object, and how many events of that type for that object the stream delivered before it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventKey {
    /// The watch request's path, e.g. `/api/v1/configmaps`.
    pub stream: String,
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub event_type: String,
    /// The object's namespace (none for a cluster-scoped object).
    pub namespace: Option<String>,
    /// The object's name; `<generateName>*` for a name made from a `generateName`, since
    /// that differs from run to run.
    pub name: String,
    /// 1 for the first event of this type for this object (or, for generated names, any
    /// object of that `generateName`) on this stream, and so on.
    pub occurrence: usize,
}

impl std::fmt::Display for EventKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} ", self.event_type, self.stream)?;
        if let Some(ns) = &self.namespace {
            write!(f, "{ns}/")?;
        }
        write!(f, "{} #{}", self.name, self.occurrence)
    }
}

/// One write the controller made (or tried to make), in the order the layer saw them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteRecord {
    /// 1-based position among the run's writes.
    pub index: usize,
    /// `create`, `update`, `patch` or `delete` (`deletecollection` for a DELETE of a list).
    pub verb: String,
    /// The resource (plural; `plural.group` outside the core group).
    pub resource: String,
    /// The subresource (`status`, ...), if any.
    pub subresource: Option<String>,
    /// The namespace in the path, if any.
    pub namespace: Option<String>,
    /// The object's name: from the path, or for a create from the response.
    pub name: Option<String>,
    /// The response's status code; none if the write got no response (a crash).
    pub status: Option<u16>,
    /// Which controller incarnation made it (1 is the first).
    pub incarnation: usize,
    /// The write identified across runs: verb, resource, the object as the path names it
    /// (`<new>` for a create), and how many such writes came before it, e.g.
    /// `patch nodes/status envtest-node-0 #2`. [`ONLY_ENV`](crate::ONLY_ENV) accepts it.
    pub key: String,
}

impl std::fmt::Display for WriteRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.verb, self.resource)?;
        if let Some(sub) = &self.subresource {
            write!(f, "/{sub}")?;
        }
        write!(f, " ")?;
        if let Some(ns) = &self.namespace {
            write!(f, "{ns}/")?;
        }
        write!(f, "{}", self.name.as_deref().unwrap_or("<new>"))?;
        match self.status {
            Some(code) => write!(f, " -> {code}"),
            None => write!(f, " -> (no response)"),
        }
    }
}

/// An event type of one object on one stream: (stream, type, namespace, name).
type ObjectEvent = (String, String, Option<String>, String);

/// The state of one run, shared by every incarnation's layer and the harness.
pub(crate) struct RunShared {
    plan: Plan,
    /// Resources whose writes are not counted as crash points (Events, Leases).
    uncounted: Vec<String>,
    writes: Mutex<Vec<WriteRecord>>,
    write_counter: AtomicUsize,
    write_occurrences: Mutex<HashMap<String, usize>>,
    events: Mutex<Vec<EventKey>>,
    occurrences: Mutex<HashMap<ObjectEvent, usize>>,
    /// Watch events held back now (a final settle waits for them).
    held: AtomicUsize,
    last_activity: Mutex<Instant>,
    fired: AtomicBool,
    /// Signalled once when the layer trips a crash.
    pub(crate) crash: Notify,
    /// What the perturbation actually did (none: its point was never reached).
    effect: Mutex<Option<String>>,
}

impl RunShared {
    pub(crate) fn new(plan: Plan, uncounted: Vec<String>) -> Arc<RunShared> {
        Arc::new(RunShared {
            plan,
            uncounted,
            writes: Mutex::new(Vec::new()),
            write_counter: AtomicUsize::new(0),
            write_occurrences: Mutex::new(HashMap::new()),
            events: Mutex::new(Vec::new()),
            occurrences: Mutex::new(HashMap::new()),
            held: AtomicUsize::new(0),
            last_activity: Mutex::new(Instant::now()),
            fired: AtomicBool::new(false),
            crash: Notify::new(),
            effect: Mutex::new(None),
        })
    }

    pub(crate) fn touch(&self) {
        *self.last_activity.lock() = Instant::now();
    }

    pub(crate) fn last_activity(&self) -> Instant {
        *self.last_activity.lock()
    }

    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }

    pub(crate) fn writes(&self) -> Vec<WriteRecord> {
        self.writes.lock().clone()
    }

    pub(crate) fn events(&self) -> Vec<EventKey> {
        self.events.lock().clone()
    }

    pub(crate) fn effect(&self) -> Option<String> {
        self.effect.lock().clone()
    }

    fn set_effect(&self, effect: String) {
        let mut slot = self.effect.lock();
        if slot.is_none() {
            *slot = Some(effect);
        }
    }

    /// The perturbation fires at most once per run.
    fn fire(&self) -> bool {
        self.fired
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    fn next_event(
        &self,
        stream: &str,
        event_type: &str,
        namespace: Option<String>,
        name: String,
    ) -> EventKey {
        let mut occurrences = self.occurrences.lock();
        let n = occurrences
            .entry((
                stream.to_owned(),
                event_type.to_owned(),
                namespace.clone(),
                name.clone(),
            ))
            .or_insert(0);
        *n += 1;
        let key = EventKey {
            stream: stream.to_owned(),
            event_type: event_type.to_owned(),
            namespace,
            name,
            occurrence: *n,
        };
        self.events.lock().push(key.clone());
        key
    }
}

/// One controller incarnation's switch: once tripped, nothing more it sends is forwarded or
/// answered. Also counts its requests in flight.
pub(crate) struct Gate {
    pub(crate) number: usize,
    tripped: watch::Sender<bool>,
    in_flight: AtomicUsize,
}

impl Gate {
    pub(crate) fn new(number: usize) -> Arc<Gate> {
        Arc::new(Gate {
            number,
            tripped: watch::Sender::new(false),
            in_flight: AtomicUsize::new(0),
        })
    }

    pub(crate) fn trip(&self) {
        self.tripped.send_replace(true);
    }

    pub(crate) fn is_tripped(&self) -> bool {
        *self.tripped.borrow()
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Completes once the gate is tripped.
    async fn tripped(&self) {
        let mut rx = self.tripped.subscribe();
        // The sender lives as long as `self`: an error cannot happen while we hold it.
        let _ = rx.wait_for(|t| *t).await;
    }
}

/// Decrements the incarnation's in-flight count when a request ends (or its future is
/// dropped, as when the incarnation's runtime is shut down).
struct InFlight(Arc<Gate>);

impl InFlight {
    fn start(gate: &Arc<Gate>) -> InFlight {
        gate.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(gate.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The layer the harness puts on the controller's client.
#[derive(Clone)]
pub(crate) struct InterceptLayer {
    pub(crate) run: Arc<RunShared>,
    pub(crate) gate: Arc<Gate>,
}

impl<S> Layer<S> for InterceptLayer {
    type Service = Intercept<S>;

    fn layer(&self, inner: S) -> Intercept<S> {
        Intercept {
            inner,
            run: self.run.clone(),
            gate: self.gate.clone(),
        }
    }
}

/// The service of [`InterceptLayer`].
pub(crate) struct Intercept<S> {
    inner: S,
    run: Arc<RunShared>,
    gate: Arc<Gate>,
}

/// What the layer needs to know about a request.
#[derive(Debug, Clone, Default)]
struct RequestInfo {
    watch: bool,
    verb: Option<&'static str>,
    resource: String,
    subresource: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    path: String,
}

fn parse_request<B>(req: &Request<B>) -> RequestInfo {
    let path = req.uri().path().to_owned();
    let watch = req.method() == Method::GET
        && req
            .uri()
            .query()
            .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, rest) = match segments.as_slice() {
        ["api", _version, rest @ ..] => (None, rest),
        ["apis", group, _version, rest @ ..] => (Some(*group), rest),
        _ => (None, &[][..]),
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some((*ns).to_owned()), rest),
        _ => (None, rest),
    };
    let resource = rest.first().map(|r| match group {
        Some(g) => format!("{r}.{g}"),
        None => (*r).to_owned(),
    });
    let name = rest.get(1).map(|n| (*n).to_owned());
    let subresource = rest.get(2).map(|s| (*s).to_owned());
    let verb = match *req.method() {
        Method::POST => Some("create"),
        Method::PUT => Some("update"),
        Method::PATCH => Some("patch"),
        Method::DELETE if name.is_none() => Some("deletecollection"),
        Method::DELETE => Some("delete"),
        _ => None,
    };
    RequestInfo {
        watch,
        verb,
        resource: resource.unwrap_or_else(|| path.clone()),
        subresource,
        namespace,
        name,
        path,
    }
}

fn full(bytes: Bytes) -> InterceptBody {
    Full::new(bytes)
        .map_err(|never| match never {})
        .boxed_unsync()
}

impl<S, B> Service<Request<Body>> for Intercept<S>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: Into<BoxError> + Send,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError> + Send,
{
    type Response = Response<InterceptBody>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Response<InterceptBody>, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let gate = self.gate.clone();
        let run = self.run.clone();
        if gate.is_tripped() {
            // A crashed incarnation: nothing it sends reaches the server.
            return Box::pin(futures::future::pending());
        }
        let info = parse_request(&req);
        if info.watch {
            let fut = self.inner.call(req);
            return Box::pin(async move {
                let response = tokio::select! {
                    biased;
                    () = gate.tripped() => futures::future::pending().await,
                    r = fut => r.map_err(Into::into)?,
                };
                run.touch();
                let (parts, body) = response.into_parts();
                let (tx, rx) = mpsc::unbounded_channel();
                tokio::spawn(pump(body, tx, run, gate, info.path));
                let stream = futures::stream::unfold(rx, |mut rx| async move {
                    rx.recv().await.map(|item| (item, rx))
                });
                Ok(Response::from_parts(
                    parts,
                    StreamBody::new(stream).boxed_unsync(),
                ))
            });
        }
        let in_flight = InFlight::start(&gate);
        run.touch();
        let write = info.verb.map(|verb| {
            let counted = !run
                .uncounted
                .iter()
                .any(|r| info.resource == *r || info.resource.starts_with(&format!("{r}.")));
            let index = if counted {
                run.write_counter.fetch_add(1, Ordering::SeqCst) + 1
            } else {
                0
            };
            let mut what = format!("{verb} {}", info.resource);
            if let Some(sub) = &info.subresource {
                what.push('/');
                what.push_str(sub);
            }
            what.push(' ');
            if let Some(ns) = &info.namespace {
                what.push_str(ns);
                what.push('/');
            }
            what.push_str(info.name.as_deref().unwrap_or("<new>"));
            let occurrence = {
                let mut occurrences = run.write_occurrences.lock();
                let n = occurrences.entry(what.clone()).or_insert(0);
                *n += 1;
                *n
            };
            let record = WriteRecord {
                key: format!("{what} #{occurrence}"),
                index,
                verb: verb.to_owned(),
                resource: info.resource.clone(),
                subresource: info.subresource.clone(),
                namespace: info.namespace.clone(),
                name: info.name.clone(),
                status: None,
                incarnation: gate.number,
            };
            (counted, record)
        });
        if let Some((true, record)) = &write
            && run.plan == Plan::CrashBefore(record.index)
            && run.fire()
        {
            gate.trip();
            run.set_effect(format!(
                "crashed controller incarnation {} before write {} ({}) was sent",
                gate.number, record.index, record
            ));
            run.writes.lock().push(record.clone());
            run.crash.notify_one();
            return Box::pin(futures::future::pending());
        }
        let fut = self.inner.call(req);
        Box::pin(async move {
            let _in_flight = in_flight;
            let response = tokio::select! {
                biased;
                () = gate.tripped() => futures::future::pending().await,
                r = fut => r.map_err(Into::into)?,
            };
            let (parts, body) = response.into_parts();
            let bytes = tokio::select! {
                biased;
                () = gate.tripped() => futures::future::pending().await,
                b = body.collect() => b.map_err(Into::into)?.to_bytes(),
            };
            run.touch();
            if let Some((counted, mut record)) = write {
                record.status = Some(parts.status.as_u16());
                if record.name.is_none() && record.verb == "create" {
                    record.name = serde_json::from_slice::<serde_json::Value>(&bytes)
                        .ok()
                        .and_then(|v| v["metadata"]["name"].as_str().map(str::to_owned));
                }
                run.writes.lock().push(record.clone());
                if counted && run.plan == Plan::CrashAfter(record.index) && run.fire() {
                    gate.trip();
                    run.set_effect(format!(
                        "crashed controller incarnation {} right after write {} ({})",
                        gate.number, record.index, record
                    ));
                    run.crash.notify_one();
                    return futures::future::pending().await;
                }
            }
            Ok(Response::from_parts(parts, full(bytes)))
        })
    }
}

type Item = Result<Frame<Bytes>, BoxError>;

/// What a watch stream's pump holds back.
struct Holding {
    /// Events held back in order (stale), or the one event held (missed).
    queue: VecDeque<Bytes>,
    /// The held object (missed): a newer event of it drops the held one.
    object: Option<(Option<String>, String)>,
    /// The held event (missed), for the effect's description.
    key: Option<EventKey>,
    until: Instant,
}

/// Reads a watch response line by line, records each event, applies the run's plan and
/// forwards what the controller sees.
async fn pump<B>(
    mut body: B,
    tx: mpsc::UnboundedSender<Item>,
    run: Arc<RunShared>,
    gate: Arc<Gate>,
    stream: String,
) where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    let mut buf = BytesMut::new();
    let mut holding: Option<Holding> = None;
    loop {
        let until = holding.as_ref().map(|h| h.until);
        tokio::select! {
            biased;
            () = gate.tripped() => return futures::future::pending().await,
            () = sleep_until_opt(until) => {
                if let Some(h) = holding.take() {
                    release(&run, &tx, h);
                }
            }
            frame = body.frame() => match frame {
                None => {
                    if let Some(h) = holding.take() {
                        release(&run, &tx, h);
                    }
                    return;
                }
                Some(Err(e)) => {
                    let _ = tx.send(Err(e.into()));
                    return;
                }
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else { continue };
                    buf.extend_from_slice(&data);
                    while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                        let line = buf.split_to(pos + 1).freeze();
                        on_line(&run, &tx, &stream, &mut holding, line);
                    }
                }
            }
        }
    }
}

async fn sleep_until_opt(until: Option<Instant>) {
    match until {
        Some(t) => tokio::time::sleep_until(t).await,
        None => futures::future::pending().await,
    }
}

fn forward(run: &RunShared, tx: &mpsc::UnboundedSender<Item>, line: Bytes) {
    run.touch();
    let _ = tx.send(Ok(Frame::data(line)));
}

fn release(run: &RunShared, tx: &mpsc::UnboundedSender<Item>, holding: Holding) {
    let n = holding.queue.len();
    for line in holding.queue {
        forward(run, tx, line);
    }
    run.held.fetch_sub(n, Ordering::SeqCst);
}

fn on_line(
    run: &RunShared,
    tx: &mpsc::UnboundedSender<Item>,
    stream: &str,
    holding: &mut Option<Holding>,
    line: Bytes,
) {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(&line).ok();
    let event = parsed.as_ref().and_then(|v| {
        let event_type = v["type"].as_str()?;
        if !matches!(event_type, "ADDED" | "MODIFIED" | "DELETED") {
            return None;
        }
        let meta = &v["object"]["metadata"];
        let name = meta["name"].as_str()?;
        // A generated name differs from run to run: such objects are told apart by the
        // order in which they appear (the key's occurrence), under `<generateName>*`.
        let name = match meta["generateName"].as_str() {
            Some(prefix) if !prefix.is_empty() && name.starts_with(prefix) => format!("{prefix}*"),
            _ => name.to_owned(),
        };
        let namespace = meta["namespace"].as_str().map(str::to_owned);
        Some(run.next_event(stream, event_type, namespace, name))
    });
    // A stream that lags keeps everything, bookmarks included, in order.
    if let Some(h) = holding.as_mut()
        && h.object.is_none()
    {
        h.queue.push_back(line);
        run.held.fetch_add(1, Ordering::SeqCst);
        return;
    }
    let Some(key) = event else {
        forward(run, tx, line);
        return;
    };
    // A held intermediate event is dropped when a newer one of its object arrives.
    if let Some(h) = holding.as_ref()
        && h.object.as_ref() == Some(&(key.namespace.clone(), key.name.clone()))
        && let Some(h) = holding.take()
    {
        let n = h.queue.len();
        run.held.fetch_sub(n, Ordering::SeqCst);
        if let Some(dropped) = &h.key {
            run.set_effect(format!(
                "dropped watch event {dropped}: the controller saw {key} instead"
            ));
        }
    }
    match &run.plan {
        Plan::Stale { point, hold } if *point == key && run.fire() => {
            run.set_effect(format!(
                "held watch stream {stream} for {hold:?} from event {key} on"
            ));
            run.held.fetch_add(1, Ordering::SeqCst);
            *holding = Some(Holding {
                queue: VecDeque::from([line]),
                object: None,
                key: Some(key),
                until: Instant::now() + *hold,
            });
        }
        Plan::Missed { point, hold } if *point == key && holding.is_none() && run.fire() => {
            run.held.fetch_add(1, Ordering::SeqCst);
            *holding = Some(Holding {
                queue: VecDeque::from([line]),
                object: Some((key.namespace.clone(), key.name.clone())),
                key: Some(key),
                until: Instant::now() + *hold,
            });
        }
        _ => forward(run, tx, line),
    }
}

/// Shortens an error for a one-line report.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl<S> std::fmt::Debug for Intercept<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Intercept")
            .field("incarnation", &self.gate.number)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: Method, uri: &str) -> RequestInfo {
        parse_request(&Request::builder().method(method).uri(uri).body(()).unwrap())
    }

    #[test]
    fn parses_paths() {
        let i = info(
            Method::POST,
            "/api/v1/namespaces/default/configmaps?fieldManager=x",
        );
        assert_eq!(i.verb, Some("create"));
        assert_eq!(i.resource, "configmaps");
        assert_eq!(i.namespace.as_deref(), Some("default"));
        assert_eq!(i.name, None);
        let i = info(
            Method::PATCH,
            "/apis/demo.kcr.dev/v1/namespaces/ns/widgets/w1/status",
        );
        assert_eq!(i.verb, Some("patch"));
        assert_eq!(i.resource, "widgets.demo.kcr.dev");
        assert_eq!(i.name.as_deref(), Some("w1"));
        assert_eq!(i.subresource.as_deref(), Some("status"));
        let i = info(Method::DELETE, "/api/v1/namespaces/gone");
        assert_eq!(i.verb, Some("delete"));
        assert_eq!(i.resource, "namespaces");
        assert_eq!(i.namespace, None);
        assert_eq!(i.name.as_deref(), Some("gone"));
        let i = info(
            Method::GET,
            "/api/v1/configmaps?watch=true&resourceVersion=5",
        );
        assert!(i.watch);
        assert_eq!(i.verb, None);
        let i = info(Method::GET, "/api/v1/configmaps?watch=false");
        assert!(!i.watch);
    }

    #[test]
    fn event_keys_count_occurrences() {
        let run = RunShared::new(Plan::None, vec![]);
        let a = run.next_event("/s", "MODIFIED", None, "a".into());
        let b = run.next_event("/s", "MODIFIED", None, "a".into());
        let c = run.next_event("/s", "ADDED", None, "a".into());
        assert_eq!((a.occurrence, b.occurrence, c.occurrence), (1, 2, 1));
        assert_eq!(run.events().len(), 3);
        assert_eq!(b.to_string(), "MODIFIED /s a #2");
    }

    #[test]
    fn fires_once() {
        let run = RunShared::new(Plan::CrashAfter(1), vec![]);
        assert!(run.fire());
        assert!(!run.fire());
    }
}
