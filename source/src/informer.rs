//! The shared informer behind [`Kind`](crate::Kind): one watch, one reflector store, many
//! subscribers.
//!
//! # Events
//!
//! The watch (kube-runtime's `watcher`) feeds a reflector `Writer`. Before each change is applied
//! the previous object is read from the store, so an update carries the cached `old` object.
//! A (re)list arrives as `Init`, `InitApply`..., `InitDone`; at `InitDone` the new list is diffed
//! against the store: new objects become creates with `initial: true` (for the very first list
//! and for every relist, e.g. after a `410 Gone`: a create found by a list goes into a
//! controller's queue at low priority, so that fresh changes overtake it), objects whose
//! `resourceVersion` changed become updates, and objects that vanished become deletes with
//! `state_unknown: true` (their deletion happened while the watch was down). Unchanged objects
//! produce nothing. Creates seen as watch events have `initial: false`.
//!
//! # Slow subscribers
//!
//! Each subscriber has a bounded buffer (the cache's `subscriber_buffer`). The informer never
//! waits for a subscriber: if an event does not fit, the subscriber is marked *lagged* and gets no
//! more events. Each subscriber remembers the last state of every object it was told about (its
//! *view*: `Arc`s, not copies). When a lagged subscriber has consumed its buffer, it takes a
//! snapshot of the store (atomically with leaving the lagged state) and receives the difference
//! between its view and the snapshot, with the same rules as a relist: creates, updates (old =
//! what this subscriber saw last), deletes with `state_unknown: true`. Its creates have
//! `initial: true` when it missed a list (the first list, or a relist) while lagged, as they
//! would have had without the lag. So a slow subscriber never
//! blocks the others, and never loses a change silently: intermediate versions of an object are
//! collapsed into one update, which is what a level-triggered controller needs.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};

use futures::{Stream, StreamExt};
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::watcher;
use parking_lot::{Mutex, RwLock};
use tokio_util::sync::CancellationToken;

use crate::index::{IndexError, IndexFn, Indexes};
use crate::{Event, SourceError, SyncHandle, SyncSignal};

/// The bounds an object type needs to be watched and cached.
///
/// Implemented for every type that satisfies them (all `k8s-openapi` types, `kube::CustomResource`
/// types, `PartialObjectMeta<K>`).
pub trait CacheObject:
    Resource<DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync>
    + Clone
    + serde::de::DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> CacheObject for K where
    K: Resource<DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

struct Subscriber<K> {
    buffer: VecDeque<Event<K>>,
    /// Fell behind: gets nothing until it resyncs from the store.
    lagged: bool,
    /// Still owed its initial list (its creates are `initial: true`).
    initial: bool,
    /// Missed (some of) a list's events while lagged: its resync's creates are `initial: true`.
    missed_list: bool,
    waker: Option<Waker>,
}

struct State<K: CacheObject> {
    writer: Writer<K>,
    subscribers: HashMap<u64, Subscriber<K>>,
    next_id: u64,
    synced: bool,
    stopped: bool,
    /// An index was registered: the event path must keep the indexes up to date.
    indexed: bool,
}

/// Counters of one informer (for tests, benchmarks and metrics).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) watch_events: AtomicU64,
    pub(crate) relists: AtomicU64,
    pub(crate) lags: AtomicU64,
}

pub(crate) struct Informer<K: CacheObject> {
    store: Store<K>,
    state: Mutex<State<K>>,
    /// Secondary indexes, changed only with `state` locked (so in step with the store).
    indexes: RwLock<Indexes<K>>,
    sync: SyncHandle,
    capacity: usize,
    dt: K::DynamicType,
    pub(crate) counters: Counters,
    /// The most recent watch error (kept after recovery, for diagnostics).
    last_error: Mutex<Option<String>>,
}

impl<K: CacheObject> Informer<K> {
    /// Creates the informer and spawns its task on the current tokio runtime. The task ends when
    /// `token` is cancelled or the stream ends.
    pub(crate) fn spawn<S>(
        stream: S,
        capacity: usize,
        token: CancellationToken,
        name: String,
    ) -> Result<Arc<Self>, SourceError>
    where
        S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    {
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|_| SourceError::NoRuntime {
                source_name: name.clone(),
            })?;
        let (informer, signal) = Self::new(capacity);
        let task_informer = Arc::clone(&informer);
        runtime.spawn(async move {
            let mut stream = std::pin::pin!(stream);
            loop {
                tokio::select! {
                    _ = token.cancelled() => break,
                    next = stream.next() => match next {
                        Some(Ok(event)) => task_informer.process(event, &signal),
                        Some(Err(error)) => {
                            tracing::warn!(informer = %name, %error, "watch error (retrying with backoff)");
                            *task_informer.last_error.lock() = Some(error.to_string());
                        }
                        None => break,
                    },
                }
            }
            task_informer.stop();
        });
        Ok(informer)
    }

    /// A new informer that is fed by hand with [`Informer::process`] (used by `spawn`, tests and
    /// benchmarks).
    pub(crate) fn new(capacity: usize) -> (Arc<Self>, SyncSignal) {
        let dt = K::DynamicType::default();
        let writer = Writer::new(dt.clone());
        let (signal, sync) = SyncHandle::pair();
        let informer = Arc::new(Self {
            store: writer.as_reader(),
            state: Mutex::new(State {
                writer,
                subscribers: HashMap::new(),
                next_id: 0,
                synced: false,
                stopped: false,
                indexed: false,
            }),
            indexes: RwLock::new(Indexes::default()),
            sync,
            capacity: capacity.max(1),
            dt,
            counters: Counters::default(),
            last_error: Mutex::new(None),
        });
        (informer, signal)
    }

    pub(crate) fn store(&self) -> &Store<K> {
        &self.store
    }

    pub(crate) fn sync_handle(&self) -> SyncHandle {
        self.sync.clone()
    }

    pub(crate) fn last_error(&self) -> Option<String> {
        self.last_error.lock().clone()
    }

    pub(crate) fn subscriber_count(&self) -> usize {
        self.state.lock().subscribers.len()
    }

    /// Registers a secondary index, filing the objects cached so far.
    pub(crate) fn add_index(&self, name: String, extract: IndexFn<K>) -> Result<(), IndexError> {
        // The state lock keeps the store and the event path still while the index is built.
        let mut state = self.state.lock();
        let current = self.store.state().into_iter().map(|o| (self.key(&o), o));
        self.indexes.write().add(name, extract, current)?;
        state.indexed = true;
        Ok(())
    }

    /// The objects filed under `value` in the index `name`.
    pub(crate) fn by_index(&self, name: &str, value: &str) -> Result<Vec<Arc<K>>, IndexError> {
        self.indexes.read().get(name, value)
    }

    fn key(&self, object: &K) -> ObjectRef<K> {
        ObjectRef::from_obj_with(object, self.dt.clone())
    }

    /// Applies one watcher event to the store and fans the resulting events out.
    pub(crate) fn process(&self, event: watcher::Event<K>, signal: &SyncSignal) {
        self.counters.watch_events.fetch_add(1, Ordering::Relaxed);
        let mut st = self.state.lock();
        let mut from_list = false;
        let (events, first_sync) = match event {
            watcher::Event::Apply(object) => {
                let key = self.key(&object);
                let old = self.store.get(&key);
                let event = watcher::Event::Apply(object);
                st.writer.apply_watcher_event(&event);
                let new = match (self.store.get(&key), event) {
                    (Some(new), _) => new,
                    // Unreachable in practice (we are the only writer and hold the lock), but
                    // never panic: fall back to the watched object itself.
                    (None, watcher::Event::Apply(object)) => Arc::new(object),
                    (None, _) => return,
                };
                let event = match old {
                    // A replayed event for a version already cached (same resourceVersion) is
                    // not a change.
                    Some(old)
                        if old.meta().resource_version.is_some()
                            && old.meta().resource_version == new.meta().resource_version =>
                    {
                        return;
                    }
                    Some(old) => Event::Update { old, new },
                    None => Event::Create {
                        object: new,
                        initial: false,
                    },
                };
                (vec![event], false)
            }
            watcher::Event::Delete(object) => {
                let event = watcher::Event::Delete(object);
                st.writer.apply_watcher_event(&event);
                let watcher::Event::Delete(object) = event else {
                    return;
                };
                (
                    vec![Event::Delete {
                        object: Arc::new(object),
                        state_unknown: false,
                    }],
                    false,
                )
            }
            event @ (watcher::Event::Init | watcher::Event::InitApply(_)) => {
                st.writer.apply_watcher_event(&event);
                return;
            }
            watcher::Event::InitDone => {
                self.counters.relists.fetch_add(1, Ordering::Relaxed);
                let before: HashMap<ObjectRef<K>, Arc<K>> = self
                    .store
                    .state()
                    .into_iter()
                    .map(|o| (self.key(&o), o))
                    .collect();
                st.writer
                    .apply_watcher_event(&watcher::Event::<K>::InitDone);
                let first = !st.synced;
                // Every list's creates are list creates, not only the first list's: a relist
                // (after a 410 or a reconnect) can find many objects at once, and fresh changes
                // must overtake them.
                from_list = true;
                let events = diff(&before, self.store.state(), true, |o| self.key(o));
                st.synced = true;
                (events, first)
            }
        };
        // The indexes follow the store before any subscriber hears of the change (no index
        // lock on this path until an index exists).
        if st.indexed {
            self.indexes.write().apply(&events, |o| self.key(o));
        }
        let mut wakers = Vec::new();
        let capacity = self.capacity;
        for sub in st.subscribers.values_mut() {
            if sub.lagged {
                sub.missed_list |= from_list;
                continue;
            }
            if sub.buffer.len() + events.len() > capacity {
                sub.lagged = true;
                sub.missed_list |= from_list;
                self.counters.lags.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(
                    object_type = std::any::type_name::<K>(),
                    capacity,
                    "subscriber fell behind; it will be resynced from the store"
                );
            } else {
                sub.buffer.extend(events.iter().cloned());
                if first_sync {
                    sub.initial = false;
                }
            }
            if let Some(waker) = sub.waker.take() {
                wakers.push(waker);
            }
        }
        drop(st);
        if first_sync {
            signal.set_synced();
        }
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Marks the informer stopped: streams end once their buffers are drained.
    pub(crate) fn stop(&self) {
        let wakers: Vec<Waker> = {
            let mut st = self.state.lock();
            st.stopped = true;
            st.subscribers
                .values_mut()
                .filter_map(|s| s.waker.take())
                .collect()
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// A new subscriber. If the informer has already synced, the subscriber starts from a snapshot
    /// of the store (as `initial: true` creates); otherwise it receives the first list as it
    /// arrives.
    pub(crate) fn subscribe<L: Send + Sync + 'static>(
        self: &Arc<Self>,
        keep_alive: L,
    ) -> KindStream<K> {
        let mut st = self.state.lock();
        let id = st.next_id;
        st.next_id += 1;
        let synced = st.synced;
        st.subscribers.insert(
            id,
            Subscriber {
                buffer: VecDeque::new(),
                lagged: synced,
                initial: true,
                missed_list: false,
                waker: None,
            },
        );
        KindStream {
            informer: Arc::clone(self),
            id,
            view: HashMap::new(),
            pending: VecDeque::new(),
            _keep_alive: Box::new(keep_alive),
        }
    }
}

/// The difference between `before` and `after` as events (see the module docs).
fn diff<K: CacheObject>(
    before: &HashMap<ObjectRef<K>, Arc<K>>,
    after: Vec<Arc<K>>,
    initial: bool,
    key: impl Fn(&K) -> ObjectRef<K>,
) -> Vec<Event<K>> {
    let mut events = Vec::new();
    let mut seen = std::collections::HashSet::with_capacity(after.len());
    for new in after {
        let k = key(&new);
        match before.get(&k) {
            Some(old) => {
                if old.meta().resource_version != new.meta().resource_version {
                    events.push(Event::Update {
                        old: Arc::clone(old),
                        new,
                    });
                }
            }
            None => events.push(Event::Create {
                object: new,
                initial,
            }),
        }
        seen.insert(k);
    }
    for (k, old) in before {
        if !seen.contains(k) {
            events.push(Event::Delete {
                object: Arc::clone(old),
                state_unknown: true,
            });
        }
    }
    events
}

/// One subscriber's events from a shared informer (the stream of a started
/// [`Kind`](crate::Kind)). Dropping it unsubscribes.
///
/// # Slow subscribers
///
/// Each subscriber has a bounded buffer. The informer never waits for a subscriber: if an event
/// does not fit, the subscriber is marked *lagged* and receives nothing more for now. Each stream
/// remembers the last state of every object it delivered (its *view*: shared `Arc`s, not copies).
/// Once a lagged stream has delivered its buffered events, it snapshots the store (atomically
/// with leaving the lagged state) and delivers the difference between its view and the snapshot,
/// like a relist: creates, updates (whose `old` is what this subscriber saw last) and deletes with
/// `state_unknown: true`. A slow subscriber thus never blocks the others and never loses a change
/// silently; intermediate versions of an object collapse into one update, which is what a
/// level-triggered controller needs.
///
/// Cost: the view is one map entry (object key and an `Arc` of the object) per object per
/// subscriber; objects themselves are shared with the store, never copied.
pub struct KindStream<K: CacheObject> {
    informer: Arc<Informer<K>>,
    id: u64,
    /// What this subscriber was told about last, per object.
    view: HashMap<ObjectRef<K>, Arc<K>>,
    /// Events of a resync, delivered before anything newer.
    pending: VecDeque<Event<K>>,
    /// Keeps the owning cache (and so the watch) alive while the stream is consumed.
    _keep_alive: Box<dyn Send + Sync>,
}

impl<K: CacheObject> std::fmt::Debug for KindStream<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KindStream")
            .field("id", &self.id)
            .field("known_objects", &self.view.len())
            .field("pending", &self.pending.len())
            .finish()
    }
}

impl<K: CacheObject> KindStream<K> {
    fn track(&mut self, event: &Event<K>) {
        match event {
            Event::Create { object, .. } => {
                self.view
                    .insert(self.informer.key(object), Arc::clone(object));
            }
            Event::Update { new, .. } => {
                self.view.insert(self.informer.key(new), Arc::clone(new));
            }
            Event::Delete { object, .. } => {
                self.view.remove(&self.informer.key(object));
            }
            Event::Generic { .. } => {}
        }
    }
}

// The stream is never structurally pinned (it holds no self-references), whatever `K` is.
impl<K: CacheObject> Unpin for KindStream<K> {}

impl<K: CacheObject> Stream for KindStream<K> {
    type Item = Result<Event<K>, SourceError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(event) = this.pending.pop_front() {
                this.track(&event);
                return Poll::Ready(Some(Ok(event)));
            }
            let informer = Arc::clone(&this.informer);
            let mut st = informer.state.lock();
            let stopped = st.stopped;
            let Some(sub) = st.subscribers.get_mut(&this.id) else {
                return Poll::Ready(None);
            };
            if let Some(event) = sub.buffer.pop_front() {
                drop(st);
                this.track(&event);
                return Poll::Ready(Some(Ok(event)));
            }
            // A lagged subscriber resyncs even after the watch stopped, so that it ends with the
            // final state.
            if sub.lagged {
                // Leave the lagged state and snapshot the store under the same lock: every later
                // event goes to the buffer and applies on top of this snapshot.
                sub.lagged = false;
                let initial =
                    std::mem::take(&mut sub.initial) | std::mem::take(&mut sub.missed_list);
                let snapshot = informer.store.state();
                drop(st);
                let events = diff(&this.view, snapshot, initial, |o| informer.key(o));
                this.pending = events.into();
                continue;
            }
            if stopped {
                return Poll::Ready(None);
            }
            sub.waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
    }
}

impl<K: CacheObject> Drop for KindStream<K> {
    fn drop(&mut self) {
        let removed = self.informer.state.lock().subscribers.remove(&self.id);
        drop(removed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn cm(name: &str, rv: &str) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.metadata.namespace = Some("ns".into());
        cm.metadata.resource_version = Some(rv.into());
        cm
    }

    /// A compact description of an event: (kind, name, old rv, new rv, flag).
    type Desc = (&'static str, String, Option<String>, String, bool);

    fn desc(event: &Event<ConfigMap>) -> Desc {
        let rv = |o: &ConfigMap| o.metadata.resource_version.clone().unwrap_or_default();
        let name = |o: &ConfigMap| o.metadata.name.clone().unwrap_or_default();
        match event {
            Event::Create { object, initial } => {
                ("create", name(object), None, rv(object), *initial)
            }
            Event::Update { old, new } => ("update", name(new), Some(rv(old)), rv(new), false),
            Event::Delete {
                object,
                state_unknown,
            } => ("delete", name(object), None, rv(object), *state_unknown),
            Event::Generic { object } => ("generic", name(object), None, rv(object), false),
        }
    }

    fn d(kind: &'static str, name: &str, old: Option<&str>, new: &str, flag: bool) -> Desc {
        (kind, name.into(), old.map(String::from), new.into(), flag)
    }

    /// Everything the stream has ready now, sorted by name within the batch when `sort`.
    fn ready(stream: &mut KindStream<ConfigMap>) -> Vec<Desc> {
        let mut out = Vec::new();
        while let Some(Some(item)) = stream.next().now_or_never() {
            out.push(desc(&item.expect("kind streams have no errors")));
        }
        out
    }

    fn sorted(mut v: Vec<Desc>) -> Vec<Desc> {
        v.sort_by(|a, b| (&a.1, a.0).cmp(&(&b.1, b.0)));
        v
    }

    fn list(informer: &Informer<ConfigMap>, signal: &SyncSignal, objects: &[ConfigMap]) {
        informer.process(watcher::Event::Init, signal);
        for o in objects {
            informer.process(watcher::Event::InitApply(o.clone()), signal);
        }
        informer.process(watcher::Event::InitDone, signal);
    }

    #[test]
    fn initial_list_then_watch_events_with_old_objects() {
        let (informer, signal) = Informer::<ConfigMap>::new(16);
        let mut s = informer.subscribe(());
        assert!(ready(&mut s).is_empty());
        list(&informer, &signal, &[cm("a", "1"), cm("b", "2")]);
        assert!(informer.sync_handle().is_synced());
        assert_eq!(
            sorted(ready(&mut s)),
            vec![
                d("create", "a", None, "1", true),
                d("create", "b", None, "2", true)
            ]
        );
        informer.process(watcher::Event::Apply(cm("a", "3")), &signal);
        informer.process(watcher::Event::Apply(cm("c", "4")), &signal);
        informer.process(watcher::Event::Delete(cm("b", "5")), &signal);
        assert_eq!(
            ready(&mut s),
            vec![
                d("update", "a", Some("1"), "3", false),
                d("create", "c", None, "4", false),
                d("delete", "b", None, "5", false),
            ]
        );
        assert_eq!(informer.store().len(), 2);
        // the update's new object is the very Arc held by the store
        informer.process(watcher::Event::Apply(cm("a", "6")), &signal);
        let event = s
            .next()
            .now_or_never()
            .flatten()
            .expect("ready")
            .expect("ok");
        let key = ObjectRef::from_obj(&cm("a", "6"));
        assert!(Arc::ptr_eq(
            event.object(),
            &informer.store().get(&key).expect("cached")
        ));
    }

    #[test]
    fn replayed_versions_are_not_updates_but_versionless_objects_are() {
        let (informer, signal) = Informer::<ConfigMap>::new(16);
        list(&informer, &signal, &[cm("a", "1")]);
        let mut s = informer.subscribe(());
        assert_eq!(ready(&mut s).len(), 1);
        informer.process(watcher::Event::Apply(cm("a", "1")), &signal);
        assert!(ready(&mut s).is_empty());
        let mut no_rv = cm("b", "");
        no_rv.metadata.resource_version = None;
        informer.process(watcher::Event::Apply(no_rv.clone()), &signal);
        informer.process(watcher::Event::Apply(no_rv), &signal);
        assert_eq!(
            ready(&mut s),
            vec![
                d("create", "b", None, "", false),
                d("update", "b", Some(""), "", false)
            ]
        );
    }

    #[tokio::test]
    async fn the_watch_stops_when_the_last_handle_is_dropped() {
        let (tx, rx) = futures::channel::mpsc::unbounded::<
            Result<watcher::Event<ConfigMap>, watcher::Error>,
        >();
        let kind = crate::Kind::from_watcher(rx).expect("inside a runtime");
        let clone = kind.clone();
        let mut stream = kind.subscribe();
        drop(kind);
        drop(clone);
        // the stream keeps the watch alive
        tx.unbounded_send(Ok(watcher::Event::Init)).expect("alive");
        tx.unbounded_send(Ok(watcher::Event::InitApply(cm("a", "1"))))
            .expect("alive");
        tx.unbounded_send(Ok(watcher::Event::InitDone))
            .expect("alive");
        assert!(stream.next().await.is_some());
        assert!(!tx.is_closed());
        drop(stream);
        // the task notices the cancellation and drops the watch stream
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while !tx.is_closed() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("watch stopped");
    }

    #[test]
    fn relist_diffs_against_the_store() {
        let (informer, signal) = Informer::<ConfigMap>::new(16);
        list(
            &informer,
            &signal,
            &[cm("a", "1"), cm("b", "2"), cm("same", "3")],
        );
        let mut s = informer.subscribe(());
        assert_eq!(ready(&mut s).len(), 3);
        // after a 410: a changed, b vanished, c appeared, "same" is unchanged
        list(
            &informer,
            &signal,
            &[cm("a", "7"), cm("c", "8"), cm("same", "3")],
        );
        assert_eq!(
            sorted(ready(&mut s)),
            vec![
                d("update", "a", Some("1"), "7", false),
                d("delete", "b", None, "2", true),
                // found by a list: a list create, queued at low priority like the first list's
                d("create", "c", None, "8", true),
            ]
        );
        assert_eq!(informer.counters.relists.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn late_subscriber_starts_from_a_snapshot() {
        let (informer, signal) = Informer::<ConfigMap>::new(16);
        list(&informer, &signal, &[cm("a", "1")]);
        informer.process(watcher::Event::Apply(cm("b", "2")), &signal);
        let mut late = informer.subscribe(());
        informer.process(watcher::Event::Apply(cm("a", "3")), &signal);
        assert_eq!(
            sorted(ready(&mut late)),
            vec![
                d("create", "a", None, "3", true),
                d("create", "b", None, "2", true)
            ]
        );
        informer.process(watcher::Event::Delete(cm("b", "4")), &signal);
        assert_eq!(ready(&mut late), vec![d("delete", "b", None, "4", false)]);
    }

    #[test]
    fn slow_subscriber_is_resynced_without_blocking_the_fast_one() {
        let (informer, signal) = Informer::<ConfigMap>::new(2);
        list(&informer, &signal, &[cm("a", "1"), cm("b", "2")]);
        let mut fast = informer.subscribe(());
        let mut slow = informer.subscribe(());
        assert_eq!(ready(&mut fast).len(), 2);
        assert_eq!(ready(&mut slow).len(), 2);

        // slow stops reading; fast keeps up with every event
        let mut fast_seen = Vec::new();
        for rv in 10..15 {
            informer.process(watcher::Event::Apply(cm("a", &rv.to_string())), &signal);
            fast_seen.extend(ready(&mut fast));
        }
        informer.process(watcher::Event::Apply(cm("c", "20")), &signal);
        informer.process(watcher::Event::Delete(cm("b", "21")), &signal);
        fast_seen.extend(ready(&mut fast));
        assert_eq!(fast_seen.len(), 7, "fast got every event: {fast_seen:?}");
        assert_eq!(informer.counters.lags.load(Ordering::Relaxed), 1);

        // slow gets its two buffered events, then the resync: one update from what it saw last
        // to the current state, the create, and the delete it missed (state unknown)
        let got = ready(&mut slow);
        assert_eq!(
            got[..2],
            [
                d("update", "a", Some("1"), "10", false),
                d("update", "a", Some("10"), "11", false)
            ]
        );
        assert_eq!(
            sorted(got[2..].to_vec()),
            vec![
                d("update", "a", Some("11"), "14", false),
                d("delete", "b", None, "2", true),
                d("create", "c", None, "20", false),
            ]
        );
        // and it is live again
        informer.process(watcher::Event::Apply(cm("c", "22")), &signal);
        assert_eq!(
            ready(&mut slow),
            vec![d("update", "c", Some("20"), "22", false)]
        );
    }

    #[test]
    fn subscriber_lagging_through_the_first_list_gets_initial_creates() {
        let (informer, signal) = Informer::<ConfigMap>::new(1);
        let mut s = informer.subscribe(());
        list(&informer, &signal, &[cm("a", "1"), cm("b", "2")]);
        assert_eq!(
            sorted(ready(&mut s)),
            vec![
                d("create", "a", None, "1", true),
                d("create", "b", None, "2", true)
            ]
        );
    }

    #[test]
    fn a_relists_creates_are_initial_and_watch_creates_are_not() {
        let (informer, signal) = Informer::<ConfigMap>::new(16);
        let mut s = informer.subscribe(());
        list(&informer, &signal, &[cm("a", "1")]);
        assert_eq!(ready(&mut s), vec![d("create", "a", None, "1", true)]);
        informer.process(watcher::Event::Apply(cm("b", "2")), &signal);
        assert_eq!(ready(&mut s), vec![d("create", "b", None, "2", false)]);
        // A relist (after a 410) finds "c", created while the watch was down.
        list(
            &informer,
            &signal,
            &[cm("a", "1"), cm("b", "2"), cm("c", "3")],
        );
        assert_eq!(ready(&mut s), vec![d("create", "c", None, "3", true)]);
    }

    #[test]
    fn subscriber_lagging_through_a_relist_gets_initial_creates() {
        let (informer, signal) = Informer::<ConfigMap>::new(1);
        let mut s = informer.subscribe(());
        list(&informer, &signal, &[cm("a", "1")]);
        assert_eq!(ready(&mut s), vec![d("create", "a", None, "1", true)]);
        // Two creates found by one relist do not fit: the subscriber lags through the relist.
        list(
            &informer,
            &signal,
            &[cm("a", "1"), cm("b", "2"), cm("c", "3")],
        );
        assert_eq!(
            sorted(ready(&mut s)),
            vec![
                d("create", "b", None, "2", true),
                d("create", "c", None, "3", true)
            ]
        );
        // Lagging through watch events alone resyncs their creates as watch creates.
        informer.process(watcher::Event::Apply(cm("d", "4")), &signal);
        informer.process(watcher::Event::Apply(cm("e", "5")), &signal);
        assert_eq!(
            sorted(ready(&mut s)),
            vec![
                d("create", "d", None, "4", false),
                d("create", "e", None, "5", false)
            ]
        );
    }

    #[test]
    fn stop_ends_streams_after_their_buffers_and_drop_unsubscribes() {
        let (informer, signal) = Informer::<ConfigMap>::new(8);
        let mut s = informer.subscribe(());
        let other = informer.subscribe(());
        assert_eq!(informer.subscriber_count(), 2);
        drop(other);
        assert_eq!(informer.subscriber_count(), 1);
        list(&informer, &signal, &[cm("a", "1")]);
        informer.stop();
        assert_eq!(
            s.next().now_or_never(),
            Some(Some(Ok(Event::Create {
                object: Arc::new(cm("a", "1")),
                initial: true
            })))
        );
        assert_eq!(s.next().now_or_never(), Some(None));
    }

    #[tokio::test]
    async fn spawned_informer_follows_a_watcher_stream() {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let informer = Informer::<ConfigMap>::spawn(rx, 8, CancellationToken::new(), "test".into())
            .expect("inside a runtime");
        let mut s = informer.subscribe(());
        for e in [
            watcher::Event::Init,
            watcher::Event::InitApply(cm("a", "1")),
            watcher::Event::InitDone,
            watcher::Event::Apply(cm("a", "2")),
        ] {
            tx.unbounded_send(Ok(e)).expect("receiver alive");
        }
        informer.sync_handle().wait().await.expect("synced");
        let first = s.next().await.expect("event").expect("ok");
        assert_eq!(desc(&first), d("create", "a", None, "1", true));
        let second = s.next().await.expect("event").expect("ok");
        assert_eq!(desc(&second), d("update", "a", Some("1"), "2", false));
        drop(tx); // the watch ends: the stream ends
        assert!(s.next().await.is_none());
    }

    #[test]
    fn spawn_outside_a_runtime_is_an_error() {
        let result = Informer::<ConfigMap>::spawn(
            futures::stream::empty(),
            8,
            CancellationToken::new(),
            "outside".into(),
        );
        assert!(matches!(result, Err(SourceError::NoRuntime { .. })));
    }

    /// Applies `event` to a subscriber's reconstructed state, checking it is consistent with
    /// what the subscriber knew: creates only for unknown objects, updates and deletes only for
    /// known ones, and an update's `old` is exactly the version last delivered.
    fn apply_checked(view: &mut HashMap<String, String>, event: &Event<ConfigMap>) {
        let rv = |o: &ConfigMap| o.metadata.resource_version.clone().unwrap_or_default();
        let name = |o: &ConfigMap| o.metadata.name.clone().unwrap_or_default();
        match event {
            Event::Create { object, .. } => {
                assert!(
                    view.insert(name(object), rv(object)).is_none(),
                    "create of a known object"
                );
            }
            Event::Update { old, new } => {
                let known = view.insert(name(new), rv(new));
                assert_eq!(
                    known,
                    Some(rv(old)),
                    "update's old is not what was delivered"
                );
                assert_ne!(rv(old), rv(new), "no-op update");
            }
            Event::Delete { object, .. } => {
                assert!(
                    view.remove(&name(object)).is_some(),
                    "delete of an unknown object"
                );
            }
            Event::Generic { .. } => panic!("kind emits no generic events"),
        }
    }

    #[test]
    fn randomised_watch_histories_keep_every_subscriber_consistent() {
        use rand::{Rng, SeedableRng};
        for seed in 0..40u64 {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
            let capacity = rng.random_range(1..6);
            let (informer, signal) = Informer::<ConfigMap>::new(capacity);
            // the "server": name -> rv
            let mut server: HashMap<String, u64> = HashMap::new();
            let mut rv = 0u64;
            let mut subs: Vec<(KindStream<ConfigMap>, HashMap<String, String>, f64)> = Vec::new();
            let mut disconnected = false;
            list(&informer, &signal, &[]);
            for step in 0..400 {
                match rng.random_range(0..100) {
                    // a new subscriber with its own reading speed
                    0..3 if subs.len() < 4 => subs.push((
                        informer.subscribe(()),
                        HashMap::new(),
                        rng.random_range(0.05..1.0),
                    )),
                    // the watch drops: changes are not delivered until the next relist
                    3..5 => disconnected = true,
                    // a relist of the current server state (after a 410 or a reconnect)
                    5..8 => {
                        disconnected = false;
                        let items: Vec<ConfigMap> =
                            server.iter().map(|(n, v)| cm(n, &v.to_string())).collect();
                        list(&informer, &signal, &items);
                    }
                    // server changes, delivered by the watch unless it is down
                    _ => {
                        let name = format!("o{}", rng.random_range(0..8));
                        rv += 1;
                        let delivered = !disconnected;
                        if server.contains_key(&name) && rng.random_bool(0.3) {
                            server.remove(&name);
                            if delivered {
                                informer.process(
                                    watcher::Event::Delete(cm(&name, &rv.to_string())),
                                    &signal,
                                );
                            }
                        } else {
                            server.insert(name.clone(), rv);
                            if delivered {
                                informer.process(
                                    watcher::Event::Apply(cm(&name, &rv.to_string())),
                                    &signal,
                                );
                            }
                        }
                    }
                }
                for (stream, view, speed) in subs.iter_mut() {
                    while rng.random_bool(*speed) {
                        match stream.next().now_or_never() {
                            Some(Some(Ok(event))) => apply_checked(view, &event),
                            Some(other) => panic!("seed {seed} step {step}: {other:?}"),
                            None => break,
                        }
                    }
                }
            }
            // final relist, then every subscriber drains and must equal the store exactly
            let items: Vec<ConfigMap> = server.iter().map(|(n, v)| cm(n, &v.to_string())).collect();
            list(&informer, &signal, &items);
            let expected: HashMap<String, String> = server
                .iter()
                .map(|(n, v)| (n.clone(), v.to_string()))
                .collect();
            for (stream, view, _) in subs.iter_mut() {
                while let Some(Some(item)) = stream.next().now_or_never() {
                    apply_checked(view, &item.expect("ok"));
                }
                assert_eq!(*view, expected, "seed {seed}");
            }
        }
    }

    /// Files a config map under `rv % 3` and, when it has one, under its `tier` value.
    fn by_rv_and_tier(cm: &ConfigMap) -> Vec<String> {
        let rv: u64 = cm
            .metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut values = vec![format!("rv{}", rv % 3)];
        values.extend(cm.data.iter().flat_map(|d| d.get("tier").cloned()));
        values
    }

    fn names(objects: Vec<Arc<ConfigMap>>) -> Vec<String> {
        objects
            .iter()
            .map(|o| o.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    #[test]
    fn indexes_file_current_objects_and_follow_changes() {
        let (informer, signal) = Informer::<ConfigMap>::new(16);
        let mut tiered = cm("a", "3");
        tiered.data = Some([("tier".to_string(), "rv0".to_string())].into());
        list(&informer, &signal, &[tiered, cm("b", "4")]);
        informer
            .add_index("idx".into(), Arc::new(by_rv_and_tier))
            .expect("a new index");
        // "a" is filed once under rv0 even though both of its values are "rv0".
        assert_eq!(names(informer.by_index("idx", "rv0").unwrap()), ["a"]);
        assert_eq!(names(informer.by_index("idx", "rv1").unwrap()), ["b"]);
        // An update moves an object between values; a delete removes it.
        informer.process(watcher::Event::Apply(cm("b", "5")), &signal);
        assert!(informer.by_index("idx", "rv1").unwrap().is_empty());
        assert_eq!(names(informer.by_index("idx", "rv2").unwrap()), ["b"]);
        informer.process(watcher::Event::Apply(cm("c", "6")), &signal);
        assert_eq!(names(informer.by_index("idx", "rv0").unwrap()), ["a", "c"]);
        informer.process(watcher::Event::Delete(cm("a", "7")), &signal);
        assert_eq!(names(informer.by_index("idx", "rv0").unwrap()), ["c"]);
        assert!(
            informer
                .by_index("idx", "no-such-value")
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn index_names_are_unique_and_unknown_ones_are_errors() {
        let (informer, _signal) = Informer::<ConfigMap>::new(16);
        informer
            .add_index("b".into(), Arc::new(by_rv_and_tier))
            .unwrap();
        informer
            .add_index("a".into(), Arc::new(by_rv_and_tier))
            .unwrap();
        assert_eq!(
            informer.add_index("a".into(), Arc::new(by_rv_and_tier)),
            Err(IndexError::Duplicate { index: "a".into() })
        );
        let err = informer.by_index("c", "x").unwrap_err();
        assert_eq!(
            err,
            IndexError::Unknown {
                index: "c".into(),
                known: vec!["a".into(), "b".into()]
            }
        );
        assert!(err.to_string().contains("Reader::add_index"), "{err}");
    }

    #[test]
    fn randomised_histories_keep_indexes_equal_to_a_store_scan() {
        use rand::{Rng, SeedableRng};
        for seed in 0..40u64 {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
            let (informer, signal) = Informer::<ConfigMap>::new(4);
            let mut server: HashMap<String, (u64, Option<String>)> = HashMap::new();
            let mut rv = 0u64;
            let mut indexed = false;
            let mut disconnected = false;
            let object = |name: &str, (rv, tier): &(u64, Option<String>)| {
                let mut o = cm(name, &rv.to_string());
                o.data = tier.clone().map(|t| [("tier".to_string(), t)].into());
                o
            };
            list(&informer, &signal, &[]);
            for step in 0..300 {
                match rng.random_range(0..100) {
                    // The index is registered part-way, over whatever is cached by then.
                    0..4 if !indexed => {
                        informer
                            .add_index("idx".into(), Arc::new(by_rv_and_tier))
                            .unwrap();
                        indexed = true;
                    }
                    4..6 => disconnected = true,
                    6..9 => {
                        disconnected = false;
                        let items: Vec<ConfigMap> =
                            server.iter().map(|(n, v)| object(n, v)).collect();
                        list(&informer, &signal, &items);
                    }
                    _ => {
                        let name = format!("o{}", rng.random_range(0..8));
                        rv += 1;
                        if server.contains_key(&name) && rng.random_bool(0.3) {
                            server.remove(&name);
                            if !disconnected {
                                let gone = cm(&name, &rv.to_string());
                                informer.process(watcher::Event::Delete(gone), &signal);
                            }
                        } else {
                            let tier = ["rv0", "rv1", "x"][rng.random_range(0..3)];
                            let state = (rv, rng.random_bool(0.5).then(|| tier.to_string()));
                            let o = object(&name, &state);
                            server.insert(name, state);
                            if !disconnected {
                                informer.process(watcher::Event::Apply(o), &signal);
                            }
                        }
                    }
                }
                if !indexed {
                    continue;
                }
                // Whatever the history, the index answers what a scan of the store answers.
                for value in ["rv0", "rv1", "rv2", "x"] {
                    let mut scan: Vec<String> = informer
                        .store()
                        .state()
                        .into_iter()
                        .filter(|o| by_rv_and_tier(o).iter().any(|v| v == value))
                        .map(|o| o.metadata.name.clone().unwrap_or_default())
                        .collect();
                    scan.sort();
                    assert_eq!(
                        names(informer.by_index("idx", value).unwrap()),
                        scan,
                        "seed {seed} step {step} value {value}"
                    );
                }
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_subscribers_end_with_the_final_state() {
        use rand::{Rng, SeedableRng};
        let (tx, rx) = futures::channel::mpsc::channel(8);
        let kind = crate::Kind::<ConfigMap>::from_watcher_with_buffer(rx, 4).expect("runtime");
        let consumers: Vec<_> = (0..4u64)
            .map(|seed| {
                let mut stream = kind.subscribe();
                tokio::spawn(async move {
                    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
                    let mut view = HashMap::new();
                    while let Some(item) = stream.next().await {
                        apply_checked(&mut view, &item.expect("ok"));
                        if rng.random_bool(0.2 * seed as f64) {
                            tokio::task::yield_now().await;
                        }
                    }
                    view
                })
            })
            .collect();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(99);
        let mut server: HashMap<String, u64> = HashMap::new();
        let mut tx = tx;
        use futures::SinkExt;
        tx.send(Ok(watcher::Event::Init)).await.expect("open");
        tx.send(Ok(watcher::Event::InitDone)).await.expect("open");
        for rv in 1..3000u64 {
            let name = format!("o{}", rng.random_range(0..20));
            let event = if server.contains_key(&name) && rng.random_bool(0.3) {
                server.remove(&name);
                watcher::Event::Delete(cm(&name, &rv.to_string()))
            } else {
                server.insert(name.clone(), rv);
                watcher::Event::Apply(cm(&name, &rv.to_string()))
            };
            tx.send(Ok(event)).await.expect("open");
        }
        drop(tx); // the watch ends; every stream ends after delivering the final state
        let expected: HashMap<String, String> = server
            .iter()
            .map(|(n, v)| (n.clone(), v.to_string()))
            .collect();
        for consumer in consumers {
            assert_eq!(consumer.await.expect("no panic"), expected);
        }
        assert_eq!(kind.stats().watch_events, 3001);
    }
}
