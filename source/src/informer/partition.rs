//! Partitions: one informer fed by one watch per namespace (a [`WatchScope`] naming several
//! namespaces, controller-runtime's `ByObject[..].Namespaces`).
//!
//! Every watch feeds the one store. Watch events (`Apply`, `Delete`) are applied as they come,
//! whichever namespace they belong to. A list is per namespace: a single watch's list replaces
//! the *whole* store at `InitDone`, which would drop the other namespaces' objects, so a
//! partition buffers its list itself and, at `InitDone`, replaces the objects of its own
//! namespace only: listed objects whose `resourceVersion` changed (or that are new) are written,
//! cached objects of the namespace that the list lacks are removed, and the difference comes
//! out as events with the usual list rules (creates `initial: true`, updates, deletes with
//! `state_unknown: true`). The other namespaces' objects and subscribers' views of them are not
//! touched. The informer is synced once every partition has completed its first list.
//!
//! [`WatchScope`]: crate::WatchScope

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::{Stream, StreamExt};
use kube::runtime::watcher;
use tokio_util::sync::CancellationToken;

use super::{ByName, CacheObject, Informer, State, diff};
use crate::{Event, SourceError};

impl<K: CacheObject> Informer<K> {
    /// Spawns an informer fed by one watch per namespace: `streams` holds each namespace and
    /// its watcher stream. The task ends when `token` is cancelled or every stream ends.
    pub(crate) fn spawn_partitioned<S>(
        streams: Vec<(String, S)>,
        dt: K::DynamicType,
        capacity: usize,
        token: CancellationToken,
        name: String,
    ) -> Result<Arc<Self>, SourceError>
    where
        S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    {
        let runtime = Self::runtime(&name)?;
        let namespaces = streams.iter().map(|(ns, _)| ns.clone()).collect();
        let (informer, signal) = Self::with_partitions(capacity, dt, namespaces);
        let tagged = futures::stream::select_all(
            streams
                .into_iter()
                .enumerate()
                .map(|(index, (_, stream))| stream.map(move |event| (index, event)).boxed()),
        );
        runtime.spawn(Self::run(
            Arc::clone(&informer),
            tagged,
            signal,
            token,
            name,
        ));
        Ok(informer)
    }

    /// The namespace of partition `index`, if the informer is partitioned.
    pub(super) fn partition_namespace(&self, index: usize) -> Option<String> {
        self.state
            .lock()
            .partitions
            .get(index)
            .map(|p| p.namespace.clone())
    }

    /// Ends the list of partition `index`: replaces the cached objects of its namespace with
    /// the listed ones and returns the difference as events, and whether this completed the
    /// informer's first sync. `None` for an unknown partition.
    pub(super) fn partition_list_done(
        &self,
        st: &mut State<K>,
        index: usize,
    ) -> Option<(Vec<Event<K>>, bool)> {
        let partition = st.partitions.get_mut(index)?;
        let listed = partition.listing.take().unwrap_or_default();
        partition.synced = true;
        let namespace = partition.namespace.clone();
        self.counters.relists.fetch_add(1, Ordering::Relaxed);
        let before: HashSet<ByName<K>> = self
            .store
            .state()
            .into_iter()
            .filter(|o| o.meta().namespace.as_deref() == Some(namespace.as_str()))
            .map(ByName)
            .collect();
        let mut after = Vec::with_capacity(listed.len());
        let mut seen = HashSet::with_capacity(listed.len());
        for object in listed {
            let listed = ByName(Arc::new(object));
            let unchanged = before
                .get(&listed)
                .filter(|ByName(old)| {
                    old.meta().resource_version.is_some()
                        && old.meta().resource_version == listed.0.meta().resource_version
                })
                .map(|ByName(old)| Arc::clone(old));
            let kept = match unchanged {
                // Keep the cached `Arc`: subscribers' views and indexes hold it already.
                Some(old) => old,
                None => {
                    self.store.insert(Arc::clone(&listed.0));
                    listed.0
                }
            };
            seen.insert(ByName::of(&kept));
            after.push(kept);
        }
        for old in &before {
            if !seen.contains(old) {
                self.store.remove_like(&old.0);
            }
        }
        let events = diff(&before, after, true);
        let first_sync = !st.synced && st.partitions.iter().all(|p| p.synced);
        if first_sync {
            st.synced = true;
        }
        Some((events, first_sync))
    }
}
