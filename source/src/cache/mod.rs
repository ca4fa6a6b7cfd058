//! [`Cache`]: controller-runtime's informer map. Every [`Kind`] source and every [`Reader`] for
//! the same (type, namespaces, label selector, field selector) shares one watch and one store
//! (one watch per namespace when a [`WatchScope`] names several: see [`namespaces`]).
//!
//! Informers start when first asked for and run until the cache is stopped or the last handle
//! (the `Cache` itself, a `Kind`, a `Reader` or a started stream) is dropped. The way slow
//! subscribers are handled is described in [`KindStream`](crate::KindStream)'s module: bounded
//! per-subscriber buffers, and a subscriber that falls behind gets a resync of the current state.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::core::{ApiResource, PartialObjectMeta, Selector, SelectorExt};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use kube::{Client, Resource};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::informer::{CacheObject, Informer};
use crate::transform::{Transform, Transforms};
use crate::{IndexError, Kind, SelectorError, SyncError, SyncHandle};

pub mod defaults;
pub mod dynamic;
mod error;
mod fallback;
mod lifetime;
pub mod namespaces;
mod scope;
pub mod watch_errors;

pub use crate::kind::DEFAULT_SUBSCRIBER_BUFFER;
pub use defaults::MetaTransform;
use defaults::Scopes;
pub use dynamic::DynamicResource;
pub use error::CacheError;
pub(crate) use lifetime::Lifetime;
pub use namespaces::ReadError;
use namespaces::Readable;
pub use scope::{InitialList, ScopedApi, WatchScope};
pub use watch_errors::{WatchBackoff, WatchError, WatchErrorHook};

/// An informer's identity: the Rust type, the resource (for typed kinds `ApiResource::erase`
/// of the type; for `DynamicObject` the run-time resource, so dynamic kinds never share an
/// informer) and the normalized scope.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct InformerKey {
    type_id: TypeId,
    resource: ApiResource,
    options: WatchScope,
}

/// An `Arc<Informer<K>>` with `K` erased (the map key holds `K`'s `TypeId`).
type ErasedInformer = Arc<dyn Any + Send + Sync>;

/// Removes an informer from its cache: marks its streams removed and stops its watch.
type Removal = Box<dyn Fn() + Send + Sync>;

struct CacheInner {
    client: Client,
    informers: Mutex<HashMap<InformerKey, (ErasedInformer, SyncHandle, Removal)>>,
    transforms: Mutex<Transforms>,
    scopes: Mutex<Scopes>,
    /// Hears every watch error (shared with the watches' streams, so it may be set any time).
    watch_error_hook: Arc<Mutex<Option<WatchErrorHook>>>,
    backoff: Mutex<WatchBackoff>,
    /// The resync period of new informers (`None`: no resync).
    sync_period: Mutex<Option<Duration>>,
    subscriber_buffer: usize,
    token: CancellationToken,
    lifetime: Arc<Lifetime>,
}

/// A shared cache of watched objects (controller-runtime's informer cache). Cheap to clone.
///
/// ```no_run
/// # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
/// use k8s_openapi::api::core::v1::Node;
/// use kcr_source::{Cache, Source, WatchScope};
/// use std::time::Duration;
///
/// let cache = Cache::new(client);
/// let nodes_a = cache.kind::<Node>(WatchScope::all())?; // controller A
/// let nodes_b = cache.kind::<Node>(WatchScope::all())?; // controller B: same watch
/// let reader = cache.reader::<Node>(WatchScope::all())?;
/// let started = nodes_a.start()?;
/// reader.wait_for_sync(Duration::from_secs(30)).await?;
/// let gpu_nodes = reader.list_labels("gpu=true")?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Cache {
    inner: Arc<CacheInner>,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("informers", &self.informer_count())
            .field("subscriber_buffer", &self.inner.subscriber_buffer)
            .finish()
    }
}

impl Cache {
    /// A cache using `client`, with [`DEFAULT_SUBSCRIBER_BUFFER`]. Its lists and watches wait
    /// as long as `client` lets them: a kcr `Manager`'s client, or one from kcr-connect
    /// (`kcr_connect::client`), bounds each one, so that a dead connection (a silent network
    /// partition) never leaves a watch stuck; kube's default client bounds only its connects.
    pub fn new(client: Client) -> Self {
        Self::with_subscriber_buffer(client, DEFAULT_SUBSCRIBER_BUFFER)
    }

    /// A cache whose subscribers each buffer up to `events` events before they fall back to a
    /// resync.
    pub fn with_subscriber_buffer(client: Client, events: usize) -> Self {
        let token = CancellationToken::new();
        Self {
            inner: Arc::new(CacheInner {
                client,
                informers: Mutex::new(HashMap::new()),
                transforms: Mutex::new(Transforms::default()),
                scopes: Mutex::new(Scopes::default()),
                watch_error_hook: Arc::default(),
                backoff: Mutex::new(WatchBackoff::default()),
                sync_period: Mutex::new(None),
                subscriber_buffer: events.max(1),
                lifetime: Arc::new(Lifetime(token.clone())),
                token,
            }),
        }
    }

    /// Sets the transform applied to every object of type `K` before it is cached (see the
    /// [`transform`](crate::strip_managed_fields) docs; the default drops
    /// `metadata.managedFields`). Fails once a watch of `K` has started.
    ///
    /// ```no_run
    /// # fn demo(client: kube::Client) -> Result<(), kcr_source::CacheError> {
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kcr_source::{Cache, strip_managed_fields};
    ///
    /// let cache = Cache::new(client);
    /// // This controller never reads pods' status: do not keep it.
    /// cache.set_transform::<Pod>(|pod| {
    ///     strip_managed_fields(pod);
    ///     pod.status = None;
    /// })?;
    /// # Ok(()) }
    /// ```
    pub fn set_transform<K>(
        &self,
        transform: impl Fn(&mut K) + Send + Sync + 'static,
    ) -> Result<(), CacheError>
    where
        K: CacheObject,
        K::DynamicType: Default,
    {
        let resource = ApiResource::erase::<K>(&Default::default());
        self.register_transform::<K>(resource, Arc::new(transform))
    }

    /// Registers the transform of `K` objects of `resource`, unless a watch of them started.
    fn register_transform<K: CacheObject>(
        &self,
        resource: ApiResource,
        transform: Transform<K>,
    ) -> Result<(), CacheError> {
        let type_id = TypeId::of::<K>();
        // Hold the informer map while registering, so no watch of K starts in between.
        let informers = self.inner.informers.lock();
        if informers
            .keys()
            .any(|key| key.type_id == type_id && key.resource == resource)
        {
            return Err(CacheError::TransformAfterStart {
                kind: resource.kind,
            });
        }
        self.inner.transforms.lock().set(resource, transform);
        drop(informers);
        Ok(())
    }

    /// Caches objects of type `K` whole, `managedFields` included (no transform).
    pub fn keep_whole<K>(&self) -> Result<(), CacheError>
    where
        K: CacheObject,
        K::DynamicType: Default,
    {
        self.set_transform::<K>(|_| {})
    }

    /// Sets the cache-wide default scope: the namespaces, label selector and field selector of
    /// every watch that does not set its own (controller-runtime's `DefaultNamespaces`,
    /// `DefaultLabelSelector`, `DefaultFieldSelector`; resolution in [`defaults`]). Fails once
    /// any watch has started.
    pub fn set_default_scope(&self, scope: WatchScope) -> Result<(), CacheError> {
        self.before_any_watch(|| {
            self.inner.scopes.lock().default = scope;
        })
    }

    /// Sets the scope of `K` (controller-runtime's `ByObject`): its fields override the
    /// cache-wide default, and a watch's own fields override it (see [`defaults`]). Fails once
    /// a watch of `K` has started.
    pub fn set_scope<K>(&self, scope: WatchScope) -> Result<(), CacheError>
    where
        K: CacheObject,
        K::DynamicType: Default,
    {
        self.register_scope::<K>(ApiResource::erase::<K>(&Default::default()), scope)
    }

    fn register_scope<K: CacheObject>(
        &self,
        resource: ApiResource,
        scope: WatchScope,
    ) -> Result<(), CacheError> {
        let type_id = TypeId::of::<K>();
        let informers = self.inner.informers.lock();
        if informers
            .keys()
            .any(|key| key.type_id == type_id && key.resource == resource)
        {
            return Err(CacheError::ScopeAfterStart {
                kind: resource.kind,
            });
        }
        self.inner.scopes.lock().by_resource.insert(resource, scope);
        drop(informers);
        Ok(())
    }

    /// The scope a watch of `K` asking for `requested` gets: `requested`, its unset fields
    /// filled from `K`'s scope and then from the default (see [`defaults`]).
    pub fn scope_for<K>(&self, requested: &WatchScope) -> WatchScope
    where
        K: Resource,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        let resource = ApiResource::erase::<K>(&Default::default());
        self.inner
            .scopes
            .lock()
            .resolve(&resource, <K::Scope as ScopedApi>::NAMESPACED, requested)
    }

    /// Sets the transform of every object's metadata for the types without a transform of
    /// their own (controller-runtime's `DefaultTransform`; the default drops
    /// `metadata.managedFields`, and so should a replacement unless the controller reads
    /// them). Fails once any watch has started.
    ///
    /// ```no_run
    /// # fn demo(cache: &kcr_source::Cache) -> Result<(), kcr_source::CacheError> {
    /// cache.set_default_transform(|meta| {
    ///     meta.managed_fields = None;
    ///     // This operator never reads annotations.
    ///     meta.annotations = None;
    /// })?;
    /// # Ok(()) }
    /// ```
    pub fn set_default_transform(
        &self,
        transform: impl Fn(&mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta)
        + Send
        + Sync
        + 'static,
    ) -> Result<(), CacheError> {
        self.before_any_watch(|| {
            self.inner
                .transforms
                .lock()
                .set_default(Arc::new(transform));
        })
    }

    /// The [`Reader`] of `K` for `options` (resolved as [`reader`](Self::reader) resolves
    /// them) if its watch has started, without starting one: `Ok(None)` otherwise. What
    /// controller-runtime's `ReaderFailOnMissingInformer` checks.
    pub fn reader_if_started<K>(
        &self,
        options: &WatchScope,
    ) -> Result<Option<Reader<K>>, CacheError>
    where
        K: CacheObject,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        let options = self.scope_for::<K>(options).normalized()?;
        let key = InformerKey {
            type_id: TypeId::of::<K>(),
            resource: ApiResource::erase::<K>(&Default::default()),
            options: options.clone(),
        };
        Ok(self.started_informer::<K>(&key).map(|informer| Reader {
            informer,
            readable: Readable::new(key.resource.kind.clone(), options.namespaces),
            _lifetime: Arc::clone(&self.inner.lifetime),
        }))
    }

    fn started_informer<K: CacheObject>(&self, key: &InformerKey) -> Option<Arc<Informer<K>>> {
        self.inner
            .informers
            .lock()
            .get(key)
            .and_then(|(existing, _, _)| Arc::clone(existing).downcast::<Informer<K>>().ok())
    }

    /// Removes the watch of `K` in `options` (resolved as [`reader`](Self::reader) resolves
    /// them) from this cache and stops it (controller-runtime's `RemoveInformer`): each of its
    /// started streams ends with [`SourceError::Removed`](crate::SourceError::Removed) after the events delivered before;
    /// [`Reader`]s of it keep the last state they saw. The next `kind()` or `reader()` of the
    /// same type and options starts a new watch. Returns whether there was one to remove.
    pub fn remove_informer<K>(&self, options: &WatchScope) -> Result<bool, CacheError>
    where
        K: CacheObject,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        let options = self.scope_for::<K>(options).normalized()?;
        Ok(self.remove_key(&InformerKey {
            type_id: TypeId::of::<K>(),
            resource: ApiResource::erase::<K>(&Default::default()),
            options,
        }))
    }

    fn remove_key(&self, key: &InformerKey) -> bool {
        let removed = self.inner.informers.lock().remove(key);
        match removed {
            Some((_, _, removal)) => {
                removal();
                true
            }
            None => false,
        }
    }

    /// Calls `hook` with every error of this cache's watches, with the kind and namespace it
    /// concerns (controller-runtime's `WatchErrorHandler`; see [`watch_errors`]). The watch
    /// retries with backoff whatever the hook does. Applies at once, to running watches too;
    /// a later call replaces the hook.
    pub fn on_watch_error(&self, hook: impl Fn(&WatchError<'_>) + Send + Sync + 'static) {
        *self.inner.watch_error_hook.lock() = Some(Arc::new(hook));
    }

    /// Sets the backoff of this cache's watches between retries (see [`WatchBackoff`]; the
    /// default is kube-runtime's). Fails once any watch has started.
    pub fn set_watch_backoff(&self, backoff: WatchBackoff) -> Result<(), CacheError> {
        self.before_any_watch(|| {
            *self.inner.backoff.lock() = backoff;
        })
    }

    /// Resyncs every informer of this cache every `period` (controller-runtime's `SyncPeriod`):
    /// each cached object goes to every subscriber again as an update whose old and new object
    /// are the same, so a controller reconciles everything periodically even without changes.
    /// Each informer's period is jittered once, by up to ±10% as controller-runtime does, so
    /// that informers started together do not resync together. What a resync event does under
    /// each predicate is in kcr-predicate's docs (the "changed" predicates drop it). Fails once
    /// any watch has started; a zero period is refused.
    pub fn set_sync_period(&self, period: Duration) -> Result<(), CacheError> {
        if period.is_zero() {
            return Err(CacheError::ZeroSyncPeriod);
        }
        self.before_any_watch(|| {
            *self.inner.sync_period.lock() = Some(period);
        })
    }

    /// Spawns the periodic resync of `informer` (if a sync period is set): it ends with the
    /// cache's token, or when nothing holds the informer any more.
    fn spawn_resync<K: CacheObject>(&self, informer: &Arc<Informer<K>>, token: CancellationToken) {
        let Some(period) = *self.inner.sync_period.lock() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // the informer itself needed a runtime: not reached
        };
        let period = watch_errors::jittered(period, 0.1);
        let informer = Arc::downgrade(informer);
        runtime.spawn(async move {
            let start = tokio::time::Instant::now() + period;
            let mut ticks = tokio::time::interval_at(start, period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = token.cancelled() => break,
                    _ = ticks.tick() => match informer.upgrade() {
                        Some(informer) => {
                            informer.resync();
                        }
                        None => break,
                    },
                }
            }
        });
    }

    /// Runs `set` unless a watch has started ([`CacheError::ScopeAfterStart`] then), holding
    /// the informer map so that no watch starts in between.
    fn before_any_watch(&self, set: impl FnOnce()) -> Result<(), CacheError> {
        let informers = self.inner.informers.lock();
        if !informers.is_empty() {
            return Err(CacheError::ScopeAfterStart {
                kind: "every kind".into(),
            });
        }
        set();
        drop(informers);
        Ok(())
    }

    /// The backoff of a new watch.
    pub(crate) fn watch_backoff(&self) -> WatchBackoff {
        *self.inner.backoff.lock()
    }

    /// Number of informers (watches) this cache runs.
    pub fn informer_count(&self) -> usize {
        self.inner.informers.lock().len()
    }

    /// The sync handles of every informer created so far.
    pub fn sync_handles(&self) -> Vec<SyncHandle> {
        self.inner
            .informers
            .lock()
            .values()
            .map(|(_, sync, _)| sync.clone())
            .collect()
    }

    /// Waits until every informer created so far holds its first complete list (controller-
    /// runtime's `WaitForCacheSync`), within `timeout`.
    pub async fn wait_for_sync(&self, timeout: Duration) -> Result<(), SyncError> {
        let handles = self.sync_handles();
        crate::wait_for_sync(handles.iter(), timeout).await
    }

    /// Stops every watch; started streams end after their buffered events.
    pub fn stop(&self) {
        self.inner.token.cancel();
    }

    /// The informer of `K` objects of the run-time type `dt` for `options` (already
    /// [normalized](WatchScope::normalized)), started with `make_stream(config, namespace)`:
    /// once with `None` for a scope of every namespace, once per namespace otherwise.
    fn informer<K, F>(
        &self,
        options: &WatchScope,
        dt: K::DynamicType,
        make_stream: F,
    ) -> Result<Arc<Informer<K>>, CacheError>
    where
        K: CacheObject,
        F: Fn(
            watcher::Config,
            Option<&str>,
        ) -> Result<
            futures::stream::BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>,
            CacheError,
        >,
    {
        if self.inner.token.is_cancelled() {
            return Err(CacheError::Stopped);
        }
        let resource = ApiResource::erase::<K>(&dt);
        let key = InformerKey {
            type_id: TypeId::of::<K>(),
            resource: resource.clone(),
            options: options.clone(),
        };
        let mut informers = self.inner.informers.lock();
        // The key holds K's TypeId, so the downcast cannot fail for an existing entry (and its
        // resource, so a dynamic entry is of the same run-time type).
        if let Some(Ok(informer)) = informers
            .get(&key)
            .map(|(existing, _, _)| Arc::clone(existing).downcast::<Informer<K>>())
        {
            return Ok(informer);
        }
        let config = options.watcher_config()?;
        let transform = self.inner.transforms.lock().get::<K>(&resource);
        let hook = Arc::clone(&self.inner.watch_error_hook);
        let transformed = |namespace: Option<&str>| {
            let transform = Arc::clone(&transform);
            let hook = Arc::clone(&hook);
            let kind = resource.kind.clone();
            let namespace_owned = namespace.map(str::to_string);
            let stream =
                if config.initial_list_strategy == watcher::InitialListStrategy::StreamingList {
                    // Paged lists of the same scope, used only if the server refuses streaming.
                    let mut paged = config.clone();
                    paged.initial_list_strategy = watcher::InitialListStrategy::ListWatch;
                    fallback::streaming_or_paged(
                        make_stream(config.clone(), namespace)?,
                        make_stream(paged, namespace)?,
                    )
                } else {
                    make_stream(config.clone(), namespace)?
                };
            Ok::<_, CacheError>(
                stream
                    .map(move |event| {
                        if let Err(error) = &event {
                            let hook = hook.lock().clone();
                            if let Some(hook) = hook {
                                hook(&WatchError {
                                    kind: &kind,
                                    namespace: namespace_owned.as_deref(),
                                    error,
                                });
                            }
                        }
                        event.map(|e| e.modify(|object| transform(object)))
                    })
                    .boxed(),
            )
        };
        let name = format!("{}{:?}", std::any::type_name::<K>(), options);
        let token = self.inner.token.child_token();
        let resync_token = token.clone();
        let removal_token = token.clone();
        let capacity = self.inner.subscriber_buffer;
        let informer = match &options.namespaces {
            Some(namespaces) if namespaces.len() > 1 => {
                let streams = namespaces
                    .iter()
                    .map(|ns| Ok((ns.clone(), transformed(Some(ns))?)))
                    .collect::<Result<Vec<_>, CacheError>>()?;
                Informer::spawn_partitioned(streams, dt, capacity, token, name)?
            }
            Some(namespaces) => {
                let namespace = namespaces.first().map(String::as_str);
                Informer::spawn(transformed(namespace)?, dt, capacity, token, name)?
            }
            None => Informer::spawn(transformed(None)?, dt, capacity, token, name)?,
        };
        self.spawn_resync(&informer, resync_token);
        let removal: Removal = {
            let informer = Arc::downgrade(&informer);
            let token = removal_token;
            let kind = resource.kind.clone();
            Box::new(move || {
                if let Some(informer) = informer.upgrade() {
                    informer.remove(kind.clone());
                }
                token.cancel();
            })
        };
        informers.insert(
            key,
            (
                Arc::clone(&informer) as Arc<dyn Any + Send + Sync>,
                informer.sync_handle(),
                removal,
            ),
        );
        Ok(informer)
    }

    fn full_informer<K>(&self, options: &WatchScope) -> Result<Arc<Informer<K>>, CacheError>
    where
        K: CacheObject,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        let client = self.inner.client.clone();
        let backoff = self.watch_backoff();
        self.informer(options, Default::default(), |config, namespace| {
            let api = <K::Scope as ScopedApi>::api::<K>(client.clone(), namespace)?;
            Ok(watcher(api, config).backoff(backoff.build()).boxed())
        })
    }

    /// A [`Kind`] source for `K`, sharing the watch with every other user of the same options.
    pub fn kind<K>(&self, options: WatchScope) -> Result<Kind<K>, CacheError>
    where
        K: CacheObject,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        let options = self.scope_for::<K>(&options).normalized()?;
        let informer = self.full_informer::<K>(&options)?;
        let name = format!("kind<{}>", std::any::type_name::<K>());
        Ok(Kind::from_parts(
            informer,
            Arc::clone(&self.inner.lifetime),
            name,
        ))
    }

    /// A metadata-only [`Kind`] source (objects are `PartialObjectMeta<K>`: metadata without spec
    /// or status, much cheaper for large types).
    pub fn metadata_kind<K>(
        &self,
        options: WatchScope,
    ) -> Result<Kind<PartialObjectMeta<K>>, CacheError>
    where
        K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
        <PartialObjectMeta<K> as Resource>::DynamicType: Default,
        PartialObjectMeta<K>: CacheObject,
        <PartialObjectMeta<K> as Resource>::Scope: ScopedApi,
    {
        self.kind::<PartialObjectMeta<K>>(options)
    }

    /// A [`Reader`] of the store shared with the `Kind` sources of the same options.
    pub fn reader<K>(&self, options: WatchScope) -> Result<Reader<K>, CacheError>
    where
        K: CacheObject,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        let options = self.scope_for::<K>(&options).normalized()?;
        let informer = self.full_informer::<K>(&options)?;
        let kind = K::kind(&Default::default()).into_owned();
        Ok(Reader {
            informer,
            readable: Readable::new(kind, options.namespaces),
            _lifetime: Arc::clone(&self.inner.lifetime),
        })
    }

    /// A [`Reader`] of a metadata-only store.
    pub fn metadata_reader<K>(
        &self,
        options: WatchScope,
    ) -> Result<Reader<PartialObjectMeta<K>>, CacheError>
    where
        K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
        <PartialObjectMeta<K> as Resource>::DynamicType: Default,
        PartialObjectMeta<K>: CacheObject,
        <PartialObjectMeta<K> as Resource>::Scope: ScopedApi,
    {
        self.reader::<PartialObjectMeta<K>>(options)
    }
}

/// Reads a shared store without calling the API server.
#[derive(Clone)] // `K: Clone` holds for every `CacheObject`; only the `Arc`s are cloned
pub struct Reader<K: CacheObject> {
    informer: Arc<Informer<K>>,
    /// The namespaces it may read.
    readable: Readable,
    _lifetime: Arc<Lifetime>,
}

impl<K: CacheObject> std::fmt::Debug for Reader<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("type", &std::any::type_name::<K>())
            .field("objects", &self.informer.store().len())
            .field("namespaces", &self.readable.namespaces())
            .finish()
    }
}

impl<K: CacheObject> Reader<K> {
    /// The object `name` in `namespace` (`None` for cluster-scoped objects): `Ok(None)` when
    /// the cache does not hold it, [`ReadError::UnknownNamespace`] when the reader's scope names
    /// namespaces and `namespace` is not one of them (the cache cannot know that object).
    pub fn get(&self, name: &str, namespace: Option<&str>) -> Result<Option<Arc<K>>, ReadError> {
        if let Some(ns) = namespace {
            self.readable.check(ns, Some(name))?;
        }
        Ok(self.informer.store().get(namespace, name))
    }

    /// Every cached object (of every namespace the reader's scope names).
    pub fn list(&self) -> Vec<Arc<K>> {
        self.informer.store().state()
    }

    /// The cached objects of one namespace; [`ReadError::UnknownNamespace`] when the reader's
    /// scope names namespaces and `namespace` is not one of them.
    pub fn list_in(&self, namespace: &str) -> Result<Vec<Arc<K>>, ReadError> {
        self.readable.check(namespace, None)?;
        Ok(self
            .informer
            .store()
            .state_filter(|o| o.meta().namespace.as_deref() == Some(namespace)))
    }

    /// `Ok` when this reader may read `namespace`; [`ReadError::UnknownNamespace`] when its
    /// scope names namespaces and `namespace` is not one of them.
    pub fn check_namespace(&self, namespace: &str) -> Result<(), ReadError> {
        self.readable.check(namespace, None)
    }

    /// The namespaces this reader's scope names (sorted), or `None` for every namespace.
    pub fn namespaces(&self) -> Option<&[String]> {
        self.readable.namespaces()
    }

    /// The cached objects whose labels match `selector`.
    pub fn list_selected(&self, selector: &Selector) -> Vec<Arc<K>> {
        let empty = Default::default();
        self.informer
            .store()
            .state_filter(|o| selector.matches(o.meta().labels.as_ref().unwrap_or(&empty)))
    }

    /// The cached objects whose labels match the selector string (for example `app=web`).
    pub fn list_labels(&self, selector: &str) -> Result<Vec<Arc<K>>, SelectorError> {
        Ok(self.list_selected(&crate::parse_label_selector(selector)?))
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        self.informer.store().len()
    }

    /// Whether the cache holds no object.
    pub fn is_empty(&self) -> bool {
        self.informer.store().is_empty()
    }

    /// Registers a secondary index `name` on this reader's informer (controller-runtime's
    /// `IndexField`): every cached object is filed under the values `extract` returns for it,
    /// and [`by_index`](Self::by_index) finds them by value without scanning the store.
    /// Objects cached already are filed at once; later changes are filed under the same lock
    /// as the store, before any subscriber hears of them, so a reconciler triggered by a change
    /// finds the object under its new values. Every reader of the same type and options shares
    /// the index; registering a name twice is [`IndexError::Duplicate`].
    ///
    /// ```
    /// # use kcr_source::{Cache, WatchScope};
    /// # use k8s_openapi::api::core::v1::Pod;
    /// # fn example(cache: &Cache) -> Result<(), Box<dyn std::error::Error>> {
    /// let pods = cache.reader::<Pod>(WatchScope::all())?;
    /// pods.add_index("spec.nodeName", |pod: &Pod| {
    ///     pod.spec.iter().filter_map(|s| s.node_name.clone()).collect()
    /// })?;
    /// let on_node = pods.by_index("spec.nodeName", "worker-1")?;
    /// # let _ = on_node;
    /// # Ok(())
    /// # }
    /// ```
    pub fn add_index(
        &self,
        name: impl Into<String>,
        extract: impl Fn(&K) -> Vec<String> + Send + Sync + 'static,
    ) -> Result<(), IndexError> {
        self.informer.add_index(name.into(), Arc::new(extract))
    }

    /// The cached objects filed under `value` in the index `name`, sorted by namespace and
    /// name. An unknown index is [`IndexError::Unknown`] (it lists the registered ones).
    pub fn by_index(&self, name: &str, value: &str) -> Result<Vec<Arc<K>>, IndexError> {
        self.informer.by_index(name, value)
    }

    /// The most recent error of the underlying watch, if any (see [`Kind::last_error`]).
    pub fn last_error(&self) -> Option<String> {
        self.informer.last_error()
    }

    /// The sync handle of the underlying watch.
    pub fn sync(&self) -> SyncHandle {
        self.informer.sync_handle()
    }

    /// Waits until the store holds the first complete list.
    pub async fn wait_for_sync(&self, timeout: Duration) -> Result<(), SyncError> {
        self.informer.sync_handle().wait_timeout(timeout).await
    }
}
