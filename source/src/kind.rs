//! [`Kind`]: a cached watch of one resource type as a [`Source`].

use std::sync::Arc;

use futures::{Stream, StreamExt};
use kube::runtime::watcher;
use tokio_util::sync::CancellationToken;

use crate::cache::Lifetime;
use crate::informer::{CacheObject, Informer, KindStream};
use crate::{Source, SourceError, Started};

/// Default size of each subscriber's buffer.
pub const DEFAULT_SUBSCRIBER_BUFFER: usize = 1024;

/// A cached watch of objects of type `K`, built on kube-runtime's `watcher` and the informer's
/// own store.
///
/// Get one from a [`Cache`](crate::Cache) (so that every controller watching the same type with
/// the same options shares one watch and one store), or wrap any kube-runtime watcher stream with
/// [`Kind::from_watcher`]. Each [`Source::start`] is an independent subscriber: it first receives
/// the current contents as creates with `initial: true`, then every change. Update events carry
/// the previous object from the cache; after a relist, objects that appeared meanwhile come out as
/// creates with `initial: true` (found by a list, like the first list's), objects that changed
/// as updates and objects that vanished as deletes with `state_unknown: true`. A subscriber that
/// falls behind is resynced from the store instead of blocking the others (see
/// [`KindStream`]).
#[derive(Clone)] // `K: Clone` holds for every `CacheObject`; only the `Arc`s are cloned
pub struct Kind<K: CacheObject> {
    informer: Arc<Informer<K>>,
    lifetime: Arc<Lifetime>,
    /// `kind<type>`, and the resource for a dynamic kind.
    name: Arc<str>,
}

impl<K: CacheObject> std::fmt::Debug for Kind<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kind")
            .field("name", &self.name)
            .field("subscribers", &self.informer.subscriber_count())
            .finish()
    }
}

impl<K: CacheObject> Kind<K> {
    pub(crate) fn from_parts(
        informer: Arc<Informer<K>>,
        lifetime: Arc<Lifetime>,
        name: String,
    ) -> Self {
        Self {
            informer,
            lifetime,
            name: name.into(),
        }
    }

    /// A `Kind` fed by any kube-runtime watcher stream (for example
    /// `watcher(api, config).default_backoff()`), with its own store. The watch task runs on the
    /// current tokio runtime until this `Kind`, its clones and its started streams are all
    /// dropped.
    pub fn from_watcher<S>(stream: S) -> Result<Self, SourceError>
    where
        S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
        K::DynamicType: Default,
    {
        Self::from_watcher_with_buffer(stream, DEFAULT_SUBSCRIBER_BUFFER)
    }

    /// Like [`Kind::from_watcher`] with a chosen per-subscriber buffer size.
    pub fn from_watcher_with_buffer<S>(stream: S, buffer: usize) -> Result<Self, SourceError>
    where
        S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
        K::DynamicType: Default,
    {
        let token = CancellationToken::new();
        let name = format!("kind<{}>", std::any::type_name::<K>());
        let informer = Informer::spawn(
            stream,
            K::DynamicType::default(),
            buffer,
            token.clone(),
            name.clone(),
        )?;
        Ok(Self::from_parts(informer, Arc::new(Lifetime(token)), name))
    }

    /// The run-time type of the watched objects (`()` for typed kinds, the `ApiResource` of a
    /// dynamic kind).
    pub fn dynamic_type(&self) -> &K::DynamicType {
        self.informer.dynamic_type()
    }

    /// A typed subscription (what [`Source::start`] boxes).
    pub fn subscribe(&self) -> KindStream<K> {
        self.informer.subscribe(Arc::clone(&self.lifetime))
    }

    /// The most recent error of the shared watch (for example `403 Forbidden` or `404` for a CRD
    /// that is not installed), kept after the watch recovers; `None` if there was none. Useful to
    /// explain a sync that times out.
    pub fn last_error(&self) -> Option<String> {
        self.informer.last_error()
    }

    /// Number of current subscribers of the shared informer.
    pub fn subscribers(&self) -> usize {
        self.informer.subscriber_count()
    }

    /// `(watch events processed, relists, subscriber lags)` of the shared informer.
    pub fn stats(&self) -> KindStats {
        use std::sync::atomic::Ordering::Relaxed;
        let c = &self.informer.counters;
        KindStats {
            watch_events: c.watch_events.load(Relaxed),
            relists: c.relists.load(Relaxed),
            lags: c.lags.load(Relaxed),
        }
    }
}

/// Counters of a shared informer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KindStats {
    /// Watcher events processed (including list items).
    pub watch_events: u64,
    /// Completed lists (the first one and every relist).
    pub relists: u64,
    /// Times a subscriber fell behind and was switched to a resync.
    pub lags: u64,
}

impl<K: CacheObject> Source<K> for Kind<K> {
    fn start(&self) -> Result<Started<K>, SourceError> {
        Ok(Started {
            events: self.subscribe().boxed(),
            sync: self.informer.sync_handle(),
        })
    }

    fn name(&self) -> String {
        self.name.to_string()
    }
}
