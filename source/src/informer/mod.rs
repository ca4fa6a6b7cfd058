//! The shared informer behind [`Kind`](crate::Kind): one watch, one store, many
//! subscribers.
//!
//! # Events
//!
//! The watch (kube-runtime's `watcher`) feeds the informer's own store (`store.rs`: each object
//! once, keyed by its own namespace and name, stored as it came off the watch, never cloned).
//! Before each change is applied the previous object is read from the store, so an update
//! carries the cached `old` object.
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

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Waker;

use futures::{Stream, StreamExt};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use parking_lot::{Mutex, RwLock};
use tokio_util::sync::CancellationToken;

use crate::index::{IndexError, IndexFn, Indexes};
pub use crate::object::CacheObject;
use crate::{Event, SourceError, SyncHandle, SyncSignal};

mod by_name;
mod partition;
#[cfg(test)]
mod partition_tests;
mod store;
mod stream;
#[cfg(test)]
mod tests;

use by_name::ByName;
use store::ObjectStore;

pub use stream::KindStream;
/// The list state of one namespace's watch.
pub(super) struct Partition<K> {
    pub(super) namespace: String,
    /// The objects of the list in progress (between `Init` and `InitDone`).
    pub(super) listing: Option<Vec<K>>,
    /// Has completed its first list.
    pub(super) synced: bool,
}

impl<K> Partition<K> {
    pub(super) fn new(namespace: String) -> Self {
        Partition {
            namespace,
            listing: None,
            synced: false,
        }
    }
}

/// Buffers an `Init` (a list starts) or an `InitApply` (one listed object) of partition `index`.
fn listed_in_partition<K: CacheObject>(st: &mut State<K>, index: usize, event: watcher::Event<K>) {
    let Some(partition) = st.partitions.get_mut(index) else {
        return;
    };
    match event {
        watcher::Event::Init => partition.listing = Some(Vec::new()),
        watcher::Event::InitApply(object) => {
            partition.listing.get_or_insert_with(Vec::new).push(object);
        }
        _ => {}
    }
}

struct Subscriber<K> {
    buffer: VecDeque<Event<K>>,
    /// Fell behind: gets nothing until it resyncs from the store.
    lagged: bool,
    /// Still owed its initial list (its creates are `initial: true`).
    initial: bool,
    /// Missed (some of) a list's events while lagged: its resync's creates are `initial: true`.
    missed_list: bool,
    /// Was handed [`SourceError::Removed`] (the informer was removed from its cache).
    told_removed: bool,
    waker: Option<Waker>,
}

struct State<K: CacheObject> {
    /// The objects of the list in progress of a single-watch informer (between `Init` and
    /// `InitDone`); a partitioned informer keeps one per partition.
    listing: Option<Vec<Arc<K>>>,
    subscribers: HashMap<u64, Subscriber<K>>,
    next_id: u64,
    synced: bool,
    stopped: bool,
    /// Removed from its cache: streams end with [`SourceError::Removed`] (`Some(kind)`).
    removed: Option<String>,
    /// An index was registered: the event path must keep the indexes up to date.
    indexed: bool,
    /// One per namespace when the informer is fed by one watch per namespace; empty when it is
    /// fed by a single watch (see [`partition`]).
    partitions: Vec<Partition<K>>,
}

/// Counters of one informer (for tests, benchmarks and metrics).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) watch_events: AtomicU64,
    pub(crate) relists: AtomicU64,
    pub(crate) lags: AtomicU64,
}

pub(crate) struct Informer<K: CacheObject> {
    store: ObjectStore<K>,
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
        dt: K::DynamicType,
        capacity: usize,
        token: CancellationToken,
        name: String,
    ) -> Result<Arc<Self>, SourceError>
    where
        S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    {
        let runtime = Self::runtime(&name)?;
        let (informer, signal) = Self::with_partitions(capacity, dt, Vec::new());
        let tagged = stream.map(|event| (0, event));
        runtime.spawn(Self::run(
            Arc::clone(&informer),
            tagged,
            signal,
            token,
            name,
        ));
        Ok(informer)
    }

    /// The current tokio runtime, or the error of a source started outside one.
    fn runtime(name: &str) -> Result<tokio::runtime::Handle, SourceError> {
        tokio::runtime::Handle::try_current().map_err(|_| SourceError::NoRuntime {
            source_name: name.to_string(),
        })
    }

    /// The informer's task: applies the events of its watch (or watches: `(partition, event)`)
    /// until `token` is cancelled or every stream ends.
    async fn run<S>(
        self: Arc<Self>,
        stream: S,
        signal: SyncSignal,
        token: CancellationToken,
        name: String,
    ) where
        S: Stream<Item = (usize, Result<watcher::Event<K>, watcher::Error>)> + Send + 'static,
    {
        let mut stream = std::pin::pin!(stream);
        loop {
            tokio::select! {
                _ = token.cancelled() => break,
                next = stream.next() => match next {
                    Some((partition, Ok(event))) => self.process_from(partition, event, &signal),
                    Some((partition, Err(error))) => {
                        let error = match self.partition_namespace(partition) {
                            Some(namespace) => format!("namespace {namespace}: {error}"),
                            None => error.to_string(),
                        };
                        tracing::warn!(informer = %name, %error, "watch error (retrying with backoff)");
                        *self.last_error.lock() = Some(error);
                    }
                    None => break,
                },
            }
        }
        self.stop();
    }

    /// A new informer that is fed by hand with [`Informer::process`] (tests).
    #[cfg(test)]
    pub(crate) fn new(capacity: usize) -> (Arc<Self>, SyncSignal)
    where
        K::DynamicType: Default,
    {
        Self::with_partitions(capacity, K::DynamicType::default(), Vec::new())
    }

    /// A new informer of objects of the run-time type `dt`, fed by one watch per namespace of
    /// `namespaces` (by a single watch when it is empty), by hand with
    /// [`Informer::process_from`].
    pub(crate) fn with_partitions(
        capacity: usize,
        dt: K::DynamicType,
        namespaces: Vec<String>,
    ) -> (Arc<Self>, SyncSignal) {
        let (signal, sync) = SyncHandle::pair();
        let informer = Arc::new(Self {
            store: ObjectStore::default(),
            state: Mutex::new(State {
                listing: None,
                subscribers: HashMap::new(),
                next_id: 0,
                synced: false,
                stopped: false,
                removed: None,
                indexed: false,
                partitions: namespaces.into_iter().map(Partition::new).collect(),
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

    pub(crate) fn store(&self) -> &ObjectStore<K> {
        &self.store
    }

    /// The run-time type of the objects (`()` for typed kinds).
    pub(crate) fn dynamic_type(&self) -> &K::DynamicType {
        &self.dt
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
        // Name and namespace only: `ObjectRef` hashes and compares nothing else, and its
        // resourceVersion and uid would be two more copies per event and per index entry.
        let meta = object.meta();
        let mut key =
            ObjectRef::new_with(meta.name.as_deref().unwrap_or_default(), self.dt.clone());
        key.namespace.clone_from(&meta.namespace);
        key
    }

    /// Applies one watcher event of a single-watch informer to the store and fans the resulting
    /// events out.
    #[cfg(test)]
    pub(crate) fn process(&self, event: watcher::Event<K>, signal: &SyncSignal) {
        self.process_from(0, event, signal);
    }

    /// Applies one watcher event from the watch of partition `partition` (ignored when the
    /// informer has a single watch) to the store and fans the resulting events out.
    pub(crate) fn process_from(
        &self,
        partition: usize,
        event: watcher::Event<K>,
        signal: &SyncSignal,
    ) {
        self.counters.watch_events.fetch_add(1, Ordering::Relaxed);
        let mut st = self.state.lock();
        let mut from_list = false;
        let partitioned = !st.partitions.is_empty();
        let (events, first_sync) = match event {
            watcher::Event::Apply(object) => {
                let old = self.store.get_like(&object);
                // A replayed event for a version already cached (same resourceVersion) is not a
                // change (and the cached `Arc`, which views share, stays).
                if let Some(old) = &old
                    && old.meta().resource_version.is_some()
                    && old.meta().resource_version == object.meta().resource_version
                {
                    return;
                }
                let new = Arc::new(object);
                self.store.insert(Arc::clone(&new));
                let event = match old {
                    Some(old) => Event::Update { old, new },
                    None => Event::Create {
                        object: new,
                        initial: false,
                    },
                };
                (vec![event], false)
            }
            watcher::Event::Delete(object) => {
                self.store.remove_like(&object);
                (
                    vec![Event::Delete {
                        object: Arc::new(object),
                        state_unknown: false,
                    }],
                    false,
                )
            }
            // One namespace's (re)list: it replaces that namespace's objects only.
            event @ (watcher::Event::Init | watcher::Event::InitApply(_)) if partitioned => {
                listed_in_partition(&mut st, partition, event);
                return;
            }
            watcher::Event::InitDone if partitioned => {
                let Some(done) = self.partition_list_done(&mut st, partition) else {
                    return;
                };
                from_list = true;
                done
            }
            watcher::Event::Init => {
                st.listing = Some(Vec::new());
                return;
            }
            watcher::Event::InitApply(object) => {
                st.listing
                    .get_or_insert_with(Vec::new)
                    .push(Arc::new(object));
                return;
            }
            watcher::Event::InitDone => {
                self.counters.relists.fetch_add(1, Ordering::Relaxed);
                let before: HashSet<ByName<K>> =
                    self.store.state().into_iter().map(ByName).collect();
                let listed = st.listing.take().unwrap_or_default();
                let after = keep_unchanged(&before, listed);
                self.store.replace_all(after.iter().cloned());
                let first = !st.synced;
                // Every list's creates are list creates, not only the first list's: a relist
                // (after a 410 or a reconnect) can find many objects at once, and fresh changes
                // must overtake them.
                from_list = true;
                let events = diff(&before, after, true);
                st.synced = true;
                (events, first)
            }
        };
        self.fan_out(st, events, from_list, first_sync, Some(signal));
    }

    /// A resync (controller-runtime's `SyncPeriod`): every cached object goes to every
    /// subscriber again as an update whose old and new object are the same `Arc`. Nothing
    /// happens before the first list or after a stop. Returns how many objects were resent.
    ///
    /// A subscriber whose buffer cannot take the whole resync is marked lagging, and catches
    /// up from the store as after any lag: that finds no change, so it gets no resync events
    /// this time (none of its objects changed, so it loses nothing).
    pub(crate) fn resync(&self) -> usize {
        let st = self.state.lock();
        if !st.synced || st.stopped {
            return 0;
        }
        let events: Vec<Event<K>> = self
            .store
            .state()
            .into_iter()
            .map(|object| Event::Update {
                old: Arc::clone(&object),
                new: object,
            })
            .collect();
        let resent = events.len();
        self.fan_out(st, events, false, false, None);
        resent
    }

    /// Hands `events` (the store has changed already) to the indexes and every subscriber,
    /// then releases the state lock; `first_sync` marks the informer synced.
    fn fan_out(
        &self,
        mut st: parking_lot::MutexGuard<'_, State<K>>,
        events: Vec<Event<K>>,
        from_list: bool,
        first_sync: bool,
        signal: Option<&SyncSignal>,
    ) {
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
        if first_sync && let Some(signal) = signal {
            signal.set_synced();
        }
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Marks the informer removed from its cache (of kind `kind`) and stopped: each stream ends
    /// with [`SourceError::Removed`] once its buffer is drained.
    pub(crate) fn remove(&self, kind: String) {
        self.state.lock().removed = Some(kind);
        self.stop();
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
        // A subscriber that arrives after a list (the first list, or the first list of one of
        // the namespaces) starts from a snapshot of the store.
        let listed = st.synced || st.partitions.iter().any(|p| p.synced);
        st.subscribers.insert(
            id,
            Subscriber {
                buffer: VecDeque::new(),
                lagged: listed,
                initial: true,
                missed_list: false,
                told_removed: false,
                waker: None,
            },
        );
        KindStream {
            informer: Arc::clone(self),
            id,
            view: HashSet::new(),
            pending: VecDeque::new(),
            _keep_alive: Box::new(keep_alive),
        }
    }
}

/// `listed` with every object whose resourceVersion `before` already holds replaced by the
/// cached `Arc` (subscribers' views and indexes share it, so an unchanged object is not held
/// twice after a relist).
fn keep_unchanged<K: CacheObject>(before: &HashSet<ByName<K>>, listed: Vec<Arc<K>>) -> Vec<Arc<K>> {
    listed
        .into_iter()
        .map(|object| {
            let listed = ByName(object);
            match before.get(&listed) {
                Some(ByName(old))
                    if old.meta().resource_version.is_some()
                        && old.meta().resource_version == listed.0.meta().resource_version =>
                {
                    Arc::clone(old)
                }
                _ => listed.0,
            }
        })
        .collect()
}

/// The difference between `before` and `after` as events (see the module docs).
fn diff<K: CacheObject>(
    before: &HashSet<ByName<K>>,
    after: Vec<Arc<K>>,
    initial: bool,
) -> Vec<Event<K>> {
    let mut events = Vec::new();
    let mut seen = HashSet::with_capacity(after.len());
    for new in after {
        let key = ByName::of(&new);
        match before.get(&key) {
            Some(ByName(old)) => {
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
        seen.insert(key);
    }
    for old in before {
        if !seen.contains(old) {
            events.push(Event::Delete {
                object: Arc::clone(&old.0),
                state_unknown: true,
            });
        }
    }
    events
}
