//! The [`Builder`]: controller-runtime's `ctrl.NewControllerManagedBy(mgr)` in Rust.
//!
//! ```text
//! mgr.controller()                                   // or Builder::new() without a manager
//!     .named("nodepool")                             // default: the `for` kind, lower-cased
//!     .for_kind::<NodePool>(WatchOptions::new())     // primary kind → EnqueueRequestForObject
//!     .owns::<Node>(WatchOptions::new())             // children → EnqueueRequestForOwner<NodePool>
//!     .watches(source, handler, predicates)          // anything else
//!     .with_event_filter(GenerationChanged)          // applied to every watch
//!     .max_concurrent_reconciles(4)
//!     .rate_limiter(limiter)
//!     .complete(reconciler)?;                        // registers with the manager
//! ```
//!
//! Every event passes the watch's own predicates, then every event filter, then reaches the
//! handler, which adds requests to the controller's queue.
//!
//! # Event filters see the whole object
//!
//! One event filter applies to watches of different types, so it is a predicate over
//! [`DynamicObject`]: the watched object converted to JSON, whole (`apiVersion`, `kind`,
//! `metadata` and everything else: `data`, `spec`, `status`). So a filter that reads the body,
//! such as [`IgnoreStatusOnlyUpdates`](kcr_predicate::IgnoreStatusOnlyUpdates), sees a ConfigMap's
//! `data` edit as the change it is. The conversion costs one serialisation per object per event,
//! paid only by controllers that have event filters; a typed predicate on the watch itself
//! ([`WatchOptions::predicate`]) costs nothing. An object that cannot be serialised passes the
//! filters (never dropped unseen) and a warning is logged. A metadata-only watch
//! (`PartialObjectMeta`) has only metadata to show.
//!
//! # Lagged sources: every object of the primary kind is resynced
//!
//! A source may report that it skipped events ([`SourceError::Lagged`](kcr_source::SourceError),
//! from a [`Channel`](kcr_source::Channel) with [`Overflow::Lag`](kcr_source::Overflow)). The
//! requests those events stood for are unknown, so the controller recovers by resyncing **every
//! object of its primary kind** (the [`for_kind`](Builder::for_kind) type, as listed by the shared
//! cache with the `for_kind` options): each one is enqueued once, at [`LOW_PRIORITY`] (like a
//! relist: most of them did not change, and fresh events overtake them), bypassing predicates and
//! event filters. That covers every request a handler can produce for a live primary object,
//! whichever watch lagged and whatever its handler maps to; a primary object that is gone was
//! reported by the `for_kind` watch itself, which never lags. Requests for anything else (keys
//! that name no primary object) cannot be recovered this way.
//!
//! A controller without a `for_kind` has no set of keys to resync: a lag there stops the
//! controller with [`ControllerError::WatchFailed`](crate::ControllerError::WatchFailed) (on a
//! [`Manager`], whose `run` then fails with it, so the process can restart and list everything
//! afresh) rather than let it run on with requests lost. A [`SourceWatch`] made by hand resyncs
//! what [`SourceWatch::with_resync`] says.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::ClusterResourceScope;
use kcr_handler::{EnqueueRequestForObject, EnqueueRequestForOwner, EventHandler, Request};
use kcr_predicate::Predicate;
use kcr_queue::{LOW_PRIORITY, RateLimiter, WorkQueue};
use kcr_source::{Cache, CacheObject, Event, Kind, Reader, ScopedApi, Source, SourceError};
use kube::Resource;
use kube::api::ListParams;
use kube::core::{ApiResource, DynamicObject, TypeMeta};
use parking_lot::Mutex;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::controller::{Controller, ControllerOptions};
use crate::error::ManagerError;
use crate::manager::Manager;
use crate::reconciler::Reconciler;
use crate::watch::{BoxError, StartedWatch, Watch};

/// Events a watch's pump moves without awaiting (see `SourceWatch::start`).
const PUMP_BATCH: usize = 256;

/// An event filter: a predicate over any watched object, whole, as a [`DynamicObject`] (see the
/// [module docs](self#event-filters-see-the-whole-object)).
pub type EventFilter = Arc<dyn Predicate<DynamicObject>>;

/// What a controller enqueues when one of its sources reports lost events
/// ([`SourceError::Lagged`]): the [`Builder`] resyncs every object of the primary kind (see the
/// [module docs](self#lagged-sources-every-object-of-the-primary-kind-is-resynced)).
pub type Resync = Arc<dyn Fn(&WorkQueue<Request>) + Send + Sync>;

/// Enqueues every object `reader` holds, at low priority.
fn resync_all<K: CacheObject>(reader: Reader<K>) -> Resync {
    Arc::new(move |queue: &WorkQueue<Request>| {
        queue.add_all(
            reader
                .list()
                .iter()
                .map(|o| Request::from_object(o.as_ref())),
            LOW_PRIORITY,
        );
    })
}

/// Per-watch predicates and, for `for_kind`/`owns`, what to watch (namespace, label and field
/// selectors: kcr-source's [`WatchOptions`](kcr_source::WatchOptions)).
pub struct WatchOptions<K> {
    pub(crate) predicates: Vec<Box<dyn Predicate<K>>>,
    pub(crate) cache: kcr_source::WatchOptions,
}

impl<K> Default for WatchOptions<K> {
    fn default() -> Self {
        WatchOptions {
            predicates: Vec::new(),
            cache: kcr_source::WatchOptions::all(),
        }
    }
}

impl<K> std::fmt::Debug for WatchOptions<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchOptions")
            .field("predicates", &self.predicates.len())
            .field("cache", &self.cache)
            .finish()
    }
}

impl<K> WatchOptions<K> {
    /// No predicates; all objects in all namespaces.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a predicate; an event must pass all of them.
    pub fn predicate(mut self, predicate: impl Predicate<K>) -> Self {
        self.predicates.push(Box::new(predicate));
        self
    }

    /// Watches only `namespace` (`for_kind`/`owns`).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.cache = self.cache.namespace(namespace);
        self
    }

    /// Watches only objects matching the label selector (`for_kind`/`owns`).
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.cache = self.cache.labels(selector);
        self
    }

    /// Watches only objects matching the field selector (`for_kind`/`owns`).
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.cache = self.cache.fields(selector);
        self
    }
}

fn describe_options(options: &kcr_source::WatchOptions) -> String {
    let mut parts = Vec::new();
    if let Some(ns) = &options.namespace {
        parts.push(format!("namespace={ns}"));
    }
    if let Some(l) = &options.label_selector {
        parts.push(format!("labels={l}"));
    }
    if let Some(f) = &options.field_selector {
        parts.push(format!("fields={f}"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("[{}]", parts.join(","))
    }
}

/// `object`, whole, as the [`DynamicObject`] event filters see.
fn dynamic_view<K: Resource + Serialize>(
    object: &K,
) -> Result<Arc<DynamicObject>, serde_json::Error>
where
    K::DynamicType: Default,
{
    let dt = K::DynamicType::default();
    let mut data = serde_json::to_value(object)?;
    if let serde_json::Value::Object(fields) = &mut data {
        // Kept in `types` and `metadata` (a typed object may not serialise its type at all).
        for key in ["apiVersion", "kind", "metadata"] {
            fields.remove(key);
        }
    }
    Ok(Arc::new(DynamicObject {
        types: Some(TypeMeta {
            api_version: K::api_version(&dt).into_owned(),
            kind: K::kind(&dt).into_owned(),
        }),
        metadata: object.meta().clone(),
        data,
    }))
}

/// `event` with its objects as [`DynamicObject`]s.
fn dynamic_event<K: Resource + Serialize>(
    event: &Event<K>,
) -> Result<Event<DynamicObject>, serde_json::Error>
where
    K::DynamicType: Default,
{
    Ok(match event {
        Event::Create { object, initial } => Event::Create {
            object: dynamic_view(&**object)?,
            initial: *initial,
        },
        Event::Update { old, new } => Event::Update {
            old: dynamic_view(&**old)?,
            new: dynamic_view(&**new)?,
        },
        Event::Delete {
            object,
            state_unknown,
        } => Event::Delete {
            object: dynamic_view(&**object)?,
            state_unknown: *state_unknown,
        },
        Event::Generic { object } => Event::Generic {
            object: dynamic_view(&**object)?,
        },
    })
}

/// Whether `event` passes every event filter (an event that cannot be shown to them passes).
fn passes_filters<K: Resource + Serialize>(filters: &[EventFilter], event: &Event<K>) -> bool
where
    K::DynamicType: Default,
{
    if filters.is_empty() {
        return true;
    }
    match dynamic_event(event) {
        Ok(view) => filters.iter().all(|f| f.evaluate(&view)),
        Err(error) => {
            let dt = K::DynamicType::default();
            tracing::warn!(
                kind = %K::kind(&dt),
                %error,
                "cannot serialise the object for the event filters; letting the event through"
            );
            true
        }
    }
}

/// Asks the API server about a resource when its watch does not sync (see [`probe_api`]).
pub type Probe = Box<dyn FnOnce() -> BoxFuture<'static, Option<String>> + Send>;

/// A [`Source`] plus predicates, event filters and a handler, as a [`Watch`].
///
/// When the source reports lost events ([`SourceError::Lagged`]), the watch enqueues what its
/// [`Resync`] gives (see [`with_resync`](Self::with_resync)); without one, its pump fails, which
/// stops the controller with [`ControllerError::WatchFailed`](crate::ControllerError).
pub struct SourceWatch<K, S, H> {
    source: S,
    handler: H,
    predicates: Vec<Box<dyn Predicate<K>>>,
    filters: Vec<EventFilter>,
    probe: Option<Probe>,
    resync: Option<Resync>,
}

impl<K, S, H> SourceWatch<K, S, H>
where
    K: Resource + Serialize + Send + Sync + 'static,
    K::DynamicType: Default,
    S: Source<K>,
    H: EventHandler<K>,
{
    /// Combines a source, a handler, predicates and event filters.
    pub fn new(
        source: S,
        handler: H,
        predicates: Vec<Box<dyn Predicate<K>>>,
        filters: Vec<EventFilter>,
    ) -> Self {
        SourceWatch {
            source,
            handler,
            predicates,
            filters,
            probe: None,
            resync: None,
        }
    }

    /// Sets how a sync timeout is explained (by default: the last error in the event stream).
    pub fn with_probe(mut self, probe: Probe) -> Self {
        self.probe = Some(probe);
        self
    }

    /// Sets what is enqueued when the source reports lost events (the [`Builder`] gives every
    /// watch the resync of every object of the controller's primary kind).
    pub fn with_resync(mut self, resync: Resync) -> Self {
        self.resync = Some(resync);
        self
    }
}

impl<K, S, H> Watch<Request> for SourceWatch<K, S, H>
where
    K: Resource + Serialize + Send + Sync + 'static,
    K::DynamicType: Default,
    S: Source<K>,
    H: EventHandler<K>,
{
    fn describe(&self) -> String {
        let dt = K::DynamicType::default();
        format!(
            "watch of {} ({}) from source {}",
            K::kind(&dt),
            K::api_version(&dt),
            self.source.name()
        )
    }

    fn start(
        self: Box<Self>,
        queue: WorkQueue<Request>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, Result<StartedWatch, BoxError>> {
        let started = self.source.start();
        Box::pin(async move {
            let started = started?;
            let SourceWatch {
                handler,
                predicates,
                filters,
                source,
                probe,
                resync,
            } = *self;
            let name = source.name();
            let last_error = Arc::new(Mutex::new(None::<String>));
            let errors = last_error.clone();
            let mut events = started.events;
            let pump = Box::pin(async move {
                // `Ok(true)`: go on; `Ok(false)`: the source ended; `Err`: events were lost and
                // cannot be recovered.
                let deliver = |next: Option<Result<Event<K>, SourceError>>| match next {
                    None => Ok(false),
                    Some(Ok(event)) => {
                        if predicates.iter().all(|p| p.evaluate(&event))
                            && passes_filters(&filters, &event)
                        {
                            handler.handle(&event, &queue);
                        }
                        Ok(true)
                    }
                    Some(Err(e @ SourceError::Lagged { missed })) => match &resync {
                        Some(resync) => {
                            tracing::warn!(
                                source = %name,
                                missed,
                                "source lagged; resyncing every object of the primary kind"
                            );
                            *errors.lock() = Some(e.to_string());
                            resync(&queue);
                            Ok(true)
                        }
                        None => {
                            tracing::error!(
                                source = %name,
                                missed,
                                "source lagged and this watch has nothing to resync: stopping"
                            );
                            Err(BoxError::from(e))
                        }
                    },
                    Some(Err(e)) => {
                        tracing::warn!(source = %name, error = %e, "source reported an error");
                        *errors.lock() = Some(e.to_string());
                        Ok(true)
                    }
                };
                'pump: loop {
                    // Take what is ready without touching the stop token (polling a
                    // cancellation future takes a lock); check the flag between batches.
                    for _ in 0..PUMP_BATCH {
                        match events.next().now_or_never() {
                            Some(next) => {
                                if !deliver(next)? {
                                    break 'pump;
                                }
                            }
                            None => break,
                        }
                    }
                    if stop.is_cancelled() {
                        break;
                    }
                    // Nothing ready (or a full batch done): wait, letting other tasks run.
                    tokio::task::consume_budget().await;
                    let next = tokio::select! {
                        biased;
                        _ = stop.cancelled() => break,
                        next = events.next() => next,
                    };
                    if !deliver(next)? {
                        break;
                    }
                }
                // Keep the source alive as long as its events are consumed.
                drop(source);
                Ok(())
            });
            let sync = started.sync;
            Ok(StartedWatch {
                pump,
                synced: Box::pin(async move { sync.wait().await.map_err(BoxError::from) }),
                diagnose: Box::new(move || {
                    Box::pin(async move {
                        let from_stream = last_error.lock().clone();
                        let from_api = match probe {
                            Some(probe) => probe().await,
                            None => None,
                        };
                        match (from_stream, from_api) {
                            (Some(s), Some(a)) => Some(format!("{a}; last stream error: {s}")),
                            (s, a) => a.or(s),
                        }
                    })
                }),
            })
        })
    }
}

/// Lists one object of `K` to explain why its watch does not sync: `404` means the API server does
/// not serve the resource (a CRD that is not installed), `403` that RBAC forbids it.
pub fn probe_api<K>(client: kube::Client, namespace: Option<String>) -> Probe
where
    K: CacheObject,
    K::Scope: ScopedApi,
{
    Box::new(move || {
        Box::pin(async move {
            let dt = K::DynamicType::default();
            let group = K::group(&dt);
            let what = if group.is_empty() {
                format!("{} ({})", K::plural(&dt), K::api_version(&dt))
            } else {
                format!("{}.{} ({})", K::plural(&dt), group, K::api_version(&dt))
            };
            let api = match <K::Scope as ScopedApi>::api::<K>(client, namespace.as_deref()) {
                Ok(api) => api,
                Err(e) => return Some(e.to_string()),
            };
            let reason = match api.list_metadata(&ListParams::default().limit(1)).await {
                Ok(_) => format!(
                    "listing {what} succeeds now; the watch may have been failing earlier (see the logs)"
                ),
                Err(kube::Error::Api(status)) if status.code == 404 => format!(
                    "the API server does not serve {what} (404 Not Found): is its \
                     CustomResourceDefinition installed?"
                ),
                Err(kube::Error::Api(status)) if status.code == 403 => format!(
                    "RBAC forbids listing {what} (403 Forbidden: {}): grant list and watch on it to \
                     the service account",
                    status.message
                ),
                Err(e) => format!("listing {what} failed: {e}"),
            };
            Some(reason)
        })
    })
}

/// What pending watches need when the controller is built.
struct BuildContext {
    filters: Vec<EventFilter>,
    owner: Option<EnqueueRequestForOwner<DynamicObject>>,
    /// Every object of the primary kind (set by `for_kind`).
    resync: Option<Resync>,
}

/// `watch` with the resync of `ctx`, if any.
fn with_resync<K, S, H>(watch: SourceWatch<K, S, H>, ctx: &BuildContext) -> SourceWatch<K, S, H>
where
    K: Resource + Serialize + Send + Sync + 'static,
    K::DynamicType: Default,
    S: Source<K>,
    H: EventHandler<K>,
{
    match &ctx.resync {
        Some(resync) => watch.with_resync(Arc::clone(resync)),
        None => watch,
    }
}

type PendingWatch =
    Box<dyn FnOnce(&BuildContext) -> Result<Box<dyn Watch<Request>>, ManagerError> + Send>;

/// Builds a [`Controller`] of [`Request`]s; see the [module docs](self).
pub struct Builder<'m> {
    manager: Option<&'m Manager>,
    cache: Option<Cache>,
    client: Option<kube::Client>,
    name: Option<String>,
    for_kind: Option<String>,
    owner: Option<EnqueueRequestForOwner<DynamicObject>>,
    resync: Option<Resync>,
    watches: Vec<PendingWatch>,
    filters: Vec<EventFilter>,
    options: ControllerOptions,
    rate_limiter: Option<Box<dyn RateLimiter<Request>>>,
    error: Option<ManagerError>,
}

impl std::fmt::Debug for Builder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("name", &self.name)
            .field("for_kind", &self.for_kind)
            .field("watches", &self.watches.len())
            .field("filters", &self.filters.len())
            .field("options", &self.options)
            .finish()
    }
}

impl Default for Builder<'_> {
    fn default() -> Self {
        Self::new()
    }
}

fn is_cluster_scoped<K>() -> bool
where
    K: Resource,
    K::Scope: 'static,
{
    std::any::TypeId::of::<K::Scope>() == std::any::TypeId::of::<ClusterResourceScope>()
}

impl<'m> Builder<'m> {
    /// A builder not tied to a manager: [`build`](Self::build) returns the controller. Give it a
    /// [`cache`](Self::cache) to use [`for_kind`](Self::for_kind) and [`owns`](Self::owns).
    pub fn new() -> Self {
        Builder {
            manager: None,
            cache: None,
            client: None,
            name: None,
            for_kind: None,
            owner: None,
            resync: None,
            watches: Vec::new(),
            filters: Vec::new(),
            options: ControllerOptions::default(),
            rate_limiter: None,
            error: None,
        }
    }

    /// A builder using the manager's cache and client, whose [`complete`](Self::complete)
    /// registers the controller with `manager`.
    pub fn for_manager(manager: &'m Manager) -> Self {
        Builder {
            manager: Some(manager),
            cache: Some(manager.cache().clone()),
            client: Some(manager.client()),
            ..Self::new()
        }
    }

    /// The shared cache that `for_kind` and `owns` watch through (set by `for_manager`).
    pub fn cache(mut self, cache: Cache) -> Self {
        self.cache = Some(cache);
        self
    }

    /// The client used to explain cache-sync timeouts (set by `for_manager`).
    pub fn client(mut self, client: kube::Client) -> Self {
        self.client = Some(client);
        self
    }

    fn fail(&mut self, error: ManagerError) {
        if self.error.is_none() {
            self.error = Some(error);
        }
    }

    /// Names the controller (labels its metrics, names its queue, must be unique in a manager).
    /// Defaults to the lower-cased kind given to [`for_kind`](Self::for_kind).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// A cached watch of `K` through the shared cache, a reader of the same store, and its API
    /// probe.
    #[allow(clippy::type_complexity)]
    fn kind_source<K>(
        &mut self,
        options: &WatchOptions<K>,
    ) -> Option<(Kind<K>, Reader<K>, Option<Probe>)>
    where
        K: CacheObject,
        K::Scope: ScopedApi,
    {
        let kind_name = K::kind(&K::DynamicType::default()).into_owned();
        let Some(cache) = self.cache.clone() else {
            self.fail(ManagerError::Builder {
                reason: format!(
                    "watching {kind_name} needs a cache: use Manager::controller() or Builder::cache()"
                ),
            });
            return None;
        };
        let kind = match cache.kind::<K>(options.cache.clone()) {
            Ok(kind) => kind,
            Err(source) => {
                self.fail(ManagerError::Cache {
                    kind: kind_name,
                    source,
                });
                return None;
            }
        };
        let reader = match cache.reader::<K>(options.cache.clone()) {
            Ok(reader) => reader,
            Err(source) => {
                self.fail(ManagerError::Cache {
                    kind: kind_name,
                    source,
                });
                return None;
            }
        };
        if let Some(manager) = self.manager {
            manager.track_cache_sync(
                format!("{kind_name}{}", describe_options(&options.cache)),
                reader.sync(),
            );
        }
        let probe = self
            .client
            .clone()
            .map(|client| probe_api::<K>(client, options.cache.namespace.clone()));
        Some((kind, reader, probe))
    }

    /// The controller's primary kind: a cached watch of `K` whose events enqueue the object itself
    /// (`EnqueueRequestForObject`). Call once. Its objects are what the controller resyncs when
    /// a source lags (see the
    /// [module docs](self#lagged-sources-every-object-of-the-primary-kind-is-resynced)).
    pub fn for_kind<K>(mut self, options: WatchOptions<K>) -> Self
    where
        K: CacheObject + Serialize,
        K::Scope: ScopedApi + 'static,
    {
        let dt = K::DynamicType::default();
        if let Some(previous) = &self.for_kind {
            let reason = format!(
                "for_kind::<{}>() called after for_kind::<{previous}>(): a controller has one primary kind",
                K::kind(&dt)
            );
            self.fail(ManagerError::Builder { reason });
            return self;
        }
        self.for_kind = Some(K::kind(&dt).into_owned());
        self.owner = Some(
            EnqueueRequestForOwner::<DynamicObject>::with_dynamic_type(&ApiResource::erase::<K>(
                &dt,
            ))
            .cluster_scoped(is_cluster_scoped::<K>()),
        );
        let Some((kind, reader, probe)) = self.kind_source::<K>(&options) else {
            return self;
        };
        self.resync = Some(resync_all(reader));
        let predicates = options.predicates;
        self.watches.push(Box::new(move |ctx: &BuildContext| {
            let watch = with_resync(
                SourceWatch::new(
                    kind,
                    EnqueueRequestForObject,
                    predicates,
                    ctx.filters.clone(),
                ),
                ctx,
            );
            Ok(Box::new(match probe {
                Some(p) => watch.with_probe(p),
                None => watch,
            }) as Box<dyn Watch<Request>>)
        }));
        self
    }

    /// A child kind: a cached watch of `C` whose events enqueue the object's controller owner of
    /// the [`for_kind`](Self::for_kind) type (`EnqueueRequestForOwner`).
    ///
    /// A controller that only needs to hear that a child changed (not read it) can watch it
    /// metadata-only, controller-runtime's `OnlyMetadata`: `owns::<PartialObjectMeta<Secret>>(..)`
    /// (`kube::core::PartialObjectMeta`). The server then sends and the cache keeps metadata
    /// alone, which for Secrets or ConfigMaps is most of their size saved.
    pub fn owns<C>(mut self, options: WatchOptions<C>) -> Self
    where
        C: CacheObject + Serialize,
        C::Scope: ScopedApi,
    {
        let child = C::kind(&C::DynamicType::default()).into_owned();
        let Some((kind, _reader, probe)) = self.kind_source::<C>(&options) else {
            return self;
        };
        let predicates = options.predicates;
        self.watches.push(Box::new(move |ctx: &BuildContext| {
            let owner = ctx.owner.clone().ok_or_else(|| ManagerError::Builder {
                reason: format!(
                    "owns::<{child}>() needs for_kind::<Owner>() to know the owner type"
                ),
            })?;
            let watch = with_resync(
                SourceWatch::new(kind, owner, predicates, ctx.filters.clone()),
                ctx,
            );
            Ok(Box::new(match probe {
                Some(p) => watch.with_probe(p),
                None => watch,
            }) as Box<dyn Watch<Request>>)
        }));
        self
    }

    /// Watches `source`: events that pass the options' predicates and every event filter go to
    /// `handler`. If the source reports lost events, every object of the primary kind is
    /// resynced (see the
    /// [module docs](self#lagged-sources-every-object-of-the-primary-kind-is-resynced)).
    pub fn watches<K, S, H>(mut self, source: S, handler: H, options: WatchOptions<K>) -> Self
    where
        K: Resource + Serialize + Send + Sync + 'static,
        K::DynamicType: Default,
        S: Source<K>,
        H: EventHandler<K>,
    {
        let predicates = options.predicates;
        self.watches.push(Box::new(move |ctx: &BuildContext| {
            Ok(Box::new(with_resync(
                SourceWatch::new(source, handler, predicates, ctx.filters.clone()),
                ctx,
            )) as Box<dyn Watch<Request>>)
        }));
        self
    }

    /// Adds an event filter applied to every watch of this controller. It sees each object
    /// whole, as a [`DynamicObject`], so any predicate works, data-reading ones included (see the
    /// [module docs](self#event-filters-see-the-whole-object)).
    pub fn with_event_filter(mut self, filter: impl Predicate<DynamicObject>) -> Self {
        self.filters.push(Arc::new(filter));
        self
    }

    /// Sets the number of concurrent reconciles (default 1).
    pub fn max_concurrent_reconciles(mut self, n: usize) -> Self {
        self.options.max_concurrent_reconciles = n;
        self
    }

    /// Sets the rate limiter of the controller's queue (default: the queue's controller default).
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<Request>) -> Self {
        self.rate_limiter = Some(Box::new(limiter));
        self
    }

    /// Sets all controller options at once.
    pub fn options(mut self, options: ControllerOptions) -> Self {
        self.options = options;
        self
    }

    /// Sets the per-reconcile timeout.
    pub fn reconcile_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.options.reconcile_timeout = Some(timeout);
        self
    }

    /// Sets how long start-up waits for every watch to sync.
    pub fn cache_sync_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.options.cache_sync_timeout = timeout;
        self
    }

    /// Whether panics in reconciles are recovered (default `true`).
    pub fn recover_panic(mut self, recover: bool) -> Self {
        self.options.recover_panic = recover;
        self
    }

    /// Builds the controller without registering it anywhere.
    pub fn build<R: Reconciler<Request>>(
        self,
        reconciler: R,
    ) -> Result<Controller<Request, R>, ManagerError> {
        if let Some(error) = self.error {
            return Err(error);
        }
        let name = self
            .name
            .or_else(|| self.for_kind.as_ref().map(|k| k.to_lowercase()))
            .ok_or(ManagerError::MissingName)?;
        let queue = match self.rate_limiter {
            Some(limiter) => WorkQueue::builder(name.clone())
                .rate_limiter(limiter)
                .build(),
            None => WorkQueue::new(name.clone()),
        };
        let mut controller = Controller::with_queue(name, queue, reconciler, self.options);
        let ctx = BuildContext {
            filters: self.filters,
            owner: self.owner,
            resync: self.resync,
        };
        for pending in self.watches {
            controller.add_watch(pending(&ctx)?);
        }
        Ok(controller)
    }

    /// Builds the controller and registers it with the manager given to
    /// [`for_manager`](Self::for_manager); fails on a duplicate name, and with
    /// [`ManagerError::NoManager`] for a builder made with [`new`](Self::new).
    pub fn complete<R: Reconciler<Request>>(self, reconciler: R) -> Result<(), ManagerError> {
        let manager = self.manager.ok_or(ManagerError::NoManager)?;
        let controller = self.build(reconciler)?;
        manager.add_controller(controller)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodSpec, PodStatus};
    use kcr_predicate::IgnoreStatusOnlyUpdates;

    fn pod(node: &str, phase: &str) -> Pod {
        Pod {
            spec: Some(PodSpec {
                node_name: Some(node.into()),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn event_filters_see_the_whole_object() {
        let filters: Vec<EventFilter> = vec![Arc::new(IgnoreStatusOnlyUpdates)];
        // A ConfigMap's data edit (no generation, no status) is a real change.
        let mut old = ConfigMap::default();
        old.metadata.name = Some("cm".into());
        old.metadata.resource_version = Some("1".into());
        old.data = Some([("k".to_string(), "1".to_string())].into());
        let mut new = old.clone();
        new.metadata.resource_version = Some("2".into());
        new.data = Some([("k".to_string(), "2".to_string())].into());
        assert!(passes_filters(&filters, &Event::update(old.clone(), new)));
        let mut same = old.clone();
        same.metadata.resource_version = Some("3".into());
        assert!(!passes_filters(&filters, &Event::update(old, same)));
        // A pod: status-only updates are dropped, spec changes pass.
        let running = pod("n1", "Running");
        assert!(!passes_filters(
            &filters,
            &Event::update(pod("n1", "Pending"), running.clone())
        ));
        assert!(passes_filters(
            &filters,
            &Event::update(pod("n2", "Running"), running)
        ));
        // The view carries the type and the body.
        let view = dynamic_view(&pod("n1", "Pending")).expect("serialises");
        let types = view.types.clone().expect("types");
        assert_eq!(
            (types.api_version.as_str(), types.kind.as_str()),
            ("v1", "Pod")
        );
        assert_eq!(view.data["spec"]["nodeName"], "n1");
        assert_eq!(view.data["status"]["phase"], "Pending");
        assert!(
            view.data.get("metadata").is_none(),
            "metadata is kept apart"
        );
    }
}
