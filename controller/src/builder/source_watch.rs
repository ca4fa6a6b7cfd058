//! [`SourceWatch`]: a source, its predicates, the event filters and a handler, pumped into a
//! controller's queue; the [`Resync`] a lagged source triggers; and [`probe_api`], which explains
//! a watch that does not sync.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use kcr_handler::{EventHandler, Request};
use kcr_predicate::Predicate;
use kcr_queue::{LOW_PRIORITY, WorkQueue};
use kcr_source::{
    CacheError, CacheObject, DynamicResource, Event, Reader, ScopedApi, Source, SourceError,
};
use kube::Resource;
use kube::api::{Api, ListParams};
use kube::core::{ApiResource, DynamicObject};
use parking_lot::Mutex;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::filter::{EventFilter, passes_filters};
use crate::controller::Key;
use crate::reason::{ReconcileReason, tag_of, with_tag};
use crate::watch::{BoxError, StartedWatch, Watch};

/// Events a watch's pump moves without awaiting (see `SourceWatch::start`).
const PUMP_BATCH: usize = 256;

/// What a controller enqueues when one of its sources reports lost events
/// ([`SourceError::Lagged`]): the [`Builder`](crate::builder::Builder) resyncs every object of the primary kind (see the
/// [module docs](crate::builder#lagged-sources-every-object-of-the-primary-kind-is-resynced)).
pub type Resync<Q = Request> = Arc<dyn Fn(&WorkQueue<Q>) + Send + Sync>;

/// Enqueues every object `reader` holds, at low priority.
pub(super) fn resync_all<K: CacheObject>(reader: Reader<K>) -> Resync {
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

/// The bounds of an object type a [`SourceWatch`] carries: a kube `Resource` (typed, or a
/// `DynamicObject` whose run-time type the watch is given), serialisable for the event
/// filters. Implemented for every type that satisfies them.
pub trait WatchedObject:
    Resource<DynamicType: Clone + Send + Sync> + Serialize + Send + Sync + 'static
{
}

impl<K> WatchedObject for K where
    K: Resource<DynamicType: Clone + Send + Sync> + Serialize + Send + Sync + 'static
{
}

/// Asks the API server about a resource when its watch does not sync (see [`probe_api`]).
pub type Probe = Box<dyn FnOnce() -> BoxFuture<'static, Option<String>> + Send>;

/// A [`Source`] plus predicates, event filters and a handler, as a [`Watch`].
///
/// When the source reports lost events ([`SourceError::Lagged`]), the watch enqueues what its
/// [`Resync`] gives (see [`with_resync`](Self::with_resync)); without one, its pump fails, which
/// stops the controller with [`ControllerError::WatchFailed`](crate::ControllerError).
///
/// `Q` is the key of the controller's queue ([`Request`] unless said otherwise); the handler
/// must be an [`EventHandler<K, Q>`].
pub struct SourceWatch<K: WatchedObject, S, H, Q = Request> {
    /// The run-time type of the objects (`()` for typed kinds).
    dt: K::DynamicType,
    source: S,
    handler: H,
    predicates: Vec<Box<dyn Predicate<K>>>,
    filters: Vec<EventFilter>,
    probe: Option<Probe>,
    resync: Option<Resync<Q>>,
    /// The reason of the requests its events add (see [`crate::reason`]).
    reason: ReconcileReason,
}

impl<K, S, H, Q> SourceWatch<K, S, H, Q>
where
    K: WatchedObject,
    K::DynamicType: Default,
    S: Source<K>,
    H: EventHandler<K, Q>,
{
    /// Combines a source, a handler, predicates and event filters.
    pub fn new(
        source: S,
        handler: H,
        predicates: Vec<Box<dyn Predicate<K>>>,
        filters: Vec<EventFilter>,
    ) -> Self {
        Self::with_dynamic_type(Default::default(), source, handler, predicates, filters)
    }
}

impl<K, S, H, Q> SourceWatch<K, S, H, Q>
where
    K: WatchedObject,
    S: Source<K>,
    H: EventHandler<K, Q>,
{
    /// [`new`](Self::new) for objects of the run-time type `dt` (the `ApiResource` of
    /// `DynamicObject`s: it names the kind in descriptions and in what event filters see).
    pub fn with_dynamic_type(
        dt: K::DynamicType,
        source: S,
        handler: H,
        predicates: Vec<Box<dyn Predicate<K>>>,
        filters: Vec<EventFilter>,
    ) -> Self {
        let reason = ReconcileReason::Mapped {
            kind: Arc::from(K::kind(&dt).as_ref()),
        };
        SourceWatch {
            reason,
            dt,
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

    /// Sets the [reason](crate::reason) of the reconciles its events trigger (by default
    /// [`ReconcileReason::Mapped`] from the watched kind; the builder's `for_kind` and `owns`
    /// watches say [`ObjectChanged`](ReconcileReason::ObjectChanged) and
    /// [`OwnedObjectChanged`](ReconcileReason::OwnedObjectChanged)). An update that changed no
    /// `resourceVersion` (a periodic resync) and the resync after a lag are
    /// [`Resync`](ReconcileReason::Resync) whatever this says.
    #[must_use]
    pub fn with_reason(mut self, reason: ReconcileReason) -> Self {
        self.reason = reason;
        self
    }

    /// Sets what is enqueued when the source reports lost events (the [`Builder`](crate::builder::Builder) gives every
    /// watch the resync of every object of the controller's primary kind).
    pub fn with_resync(mut self, resync: Resync<Q>) -> Self {
        self.resync = Some(resync);
        self
    }
}

impl<K, S, H, Q> Watch<Q> for SourceWatch<K, S, H, Q>
where
    K: WatchedObject,
    S: Source<K>,
    H: EventHandler<K, Q>,
    Q: Key,
{
    fn describe(&self) -> String {
        format!(
            "watch of {} ({}) from source {}",
            K::kind(&self.dt),
            K::api_version(&self.dt),
            self.source.name()
        )
    }

    fn start(
        self: Box<Self>,
        queue: WorkQueue<Q>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, Result<StartedWatch, BoxError>> {
        let started = self.source.start();
        Box::pin(async move {
            let started = started?;
            let SourceWatch {
                dt,
                handler,
                predicates,
                filters,
                source,
                probe,
                resync,
                reason,
            } = *self;
            let name = source.name();
            // Interned once here, not per event.
            let tag = tag_of(&reason);
            let resync_tag = tag_of(&ReconcileReason::Resync);
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
                            && passes_filters(&filters, &event, &dt)
                        {
                            // An update that changed no resourceVersion is a periodic resync.
                            let is_resync = matches!(&event, Event::Update { old, new }
                                if old.meta().resource_version.is_some()
                                    && old.meta().resource_version == new.meta().resource_version);
                            let tag = if is_resync { resync_tag } else { tag };
                            with_tag(tag, || handler.handle(&event, &queue));
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
                            with_tag(resync_tag, || resync(&queue));
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

/// Builds the `Api` a probe lists with, for a namespace or all of them.
type MakeApi<K> = Box<dyn Fn(Option<&str>) -> Result<Api<K>, CacheError> + Send + Sync>;

/// `plurals.group (apiVersion)`, as a probe names a resource.
fn resource_name(resource: &ApiResource) -> String {
    if resource.group.is_empty() {
        format!("{} ({})", resource.plural, resource.api_version)
    } else {
        format!(
            "{}.{} ({})",
            resource.plural, resource.group, resource.api_version
        )
    }
}

/// Lists one object through `api` and says what the answer means.
async fn probe_once<K>(api: Result<Api<K>, CacheError>, what: &str) -> String
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let api = match api {
        Ok(api) => api,
        Err(e) => return e.to_string(),
    };
    match api.list_metadata(&ListParams::default().limit(1)).await {
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
    }
}

/// A probe of every namespace of `namespaces` (each answer prefixed with its namespace when
/// there are several), or of all namespaces.
fn probe_namespaces<K>(make_api: MakeApi<K>, what: String, namespaces: Option<Vec<String>>) -> Probe
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    Box::new(move || {
        Box::pin(async move {
            match namespaces.as_deref() {
                None => Some(probe_once(make_api(None), &what).await),
                Some([namespace]) => Some(probe_once(make_api(Some(namespace)), &what).await),
                Some(namespaces) => {
                    let mut reasons = Vec::new();
                    for namespace in namespaces {
                        let reason = probe_once(make_api(Some(namespace)), &what).await;
                        reasons.push(format!("namespace {namespace}: {reason}"));
                    }
                    Some(reasons.join("; "))
                }
            }
        })
    })
}

/// [`probe_api`] for every namespace of `scope` (one watch each), or for all namespaces.
pub(super) fn probe_scope<K>(client: kube::Client, scope: &kcr_source::WatchScope) -> Probe
where
    K: CacheObject,
    K::DynamicType: Default,
    K::Scope: ScopedApi,
{
    let what = resource_name(&ApiResource::erase::<K>(&Default::default()));
    let make_api: MakeApi<K> =
        Box::new(move |namespace| <K::Scope as ScopedApi>::api::<K>(client.clone(), namespace));
    probe_namespaces(make_api, what, scope.namespaces.clone())
}

/// The probe of the run-time kind `resource` in `scope`.
pub(super) fn probe_dynamic(
    client: kube::Client,
    resource: DynamicResource,
    scope: &kcr_source::WatchScope,
) -> Probe {
    let what = resource_name(&resource.resource);
    let make_api: MakeApi<DynamicObject> =
        Box::new(move |namespace| resource.api(client.clone(), namespace));
    probe_namespaces(make_api, what, scope.namespaces.clone())
}

/// Lists one object of `K` to explain why its watch does not sync: `404` means the API server does
/// not serve the resource (a CRD that is not installed), `403` that RBAC forbids it.
pub fn probe_api<K>(client: kube::Client, namespace: Option<String>) -> Probe
where
    K: CacheObject,
    K::DynamicType: Default,
    K::Scope: ScopedApi,
{
    let scope = kcr_source::WatchScope {
        namespaces: namespace.map(|ns| vec![ns]),
        ..Default::default()
    };
    probe_scope::<K>(client, &scope)
}
