//! The [`Builder`]: controller-runtime's `ctrl.NewControllerManagedBy(mgr)` in Rust.
//!
//! ```text
//! mgr.controller()                                   // or Builder::new() without a manager
//!     .named("nodepool")                             // default: the `for` kind, lower-cased
//!     .for_kind::<NodePool>(WatchOptions::new())     // primary kind → EnqueueRequestForObject
//!     .owns::<Node>(WatchOptions::new())             // children → EnqueueRequestForOwner<NodePool>
//!     .owns_dynamic(resource, WatchOptions::new())   // a child kind chosen at run time
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
//! cache with the `for_kind` options): each one is enqueued once, at [`LOW_PRIORITY`](kcr_queue::LOW_PRIORITY) (like a
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

//!
//! # Other keys than `Request`
//!
//! A controller's queue holds [`Request`]s (namespace and name) unless it is built with another
//! key: [`Manager::keyed_controller::<Q>()`](Manager::keyed_controller) or
//! [`Builder::keyed`]. Its watches then come from [`watches`](Builder::watches), with handlers
//! of [`EventHandler<K, Q>`] (a closure, [`EnqueueRequestsFromMapFunc`](kcr_handler::EnqueueRequestsFromMapFunc)
//! returning `Q`s, or [`Funcs<K, Q>`](kcr_handler::Funcs)), and its reconciler is a
//! `Reconciler<Q>`. `for_kind`, `owns` and the object reconciler derive requests from objects,
//! so they exist for `Request`-keyed builders only; a keyed controller has no primary kind to
//! resync, so a lagging source stops it (see above).
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kcr_controller::{Action, Context, Manager, Reconciler, WatchOptions};
//! use kcr_handler::EnqueueRequestsFromMapFunc;
//! use kube::ResourceExt;
//!
//! /// Reconciles a whole namespace (its key: the namespace's name) when any ConfigMap in it
//! /// changes.
//! struct PerNamespace;
//! impl Reconciler<String> for PerNamespace {
//!     type Error = kube::Error;
//!     async fn reconcile(&self, namespace: &String, _ctx: &Context) -> Result<Action, kube::Error> {
//!         tracing::info!(%namespace, "reconciling the namespace");
//!         Ok(Action::done())
//!     }
//! }
//!
//! # async fn run(mgr: &Manager) -> Result<(), Box<dyn std::error::Error>> {
//! let configmaps = mgr.cache().kind::<ConfigMap>(Default::default())?;
//! mgr.keyed_controller::<String>()
//!     .named("per-namespace")
//!     .watches(
//!         configmaps,
//!         EnqueueRequestsFromMapFunc::new(|cm: &ConfigMap| cm.namespace()),
//!         WatchOptions::new(),
//!     )
//!     .complete(PerNamespace)?;
//! # Ok(()) }
//! ```

use std::sync::Arc;

use k8s_openapi::ClusterResourceScope;
use kcr_handler::{EnqueueRequestForObject, EnqueueRequestForOwner, EventHandler, Request};
use kcr_predicate::Predicate;
use kcr_queue::{RateLimiter, WorkQueue};
use kcr_source::{Cache, CacheError, CacheObject, Kind, Reader, ScopedApi, Source, WatchScope};
use kube::Resource;
use kube::core::{ApiResource, DynamicObject};
use serde::Serialize;

use crate::clock::Clock;
use crate::controller::{Controller, ControllerOptions, Key};
use crate::defaults::group_kind;
use crate::error::ManagerError;
use crate::error_policy::{ErrorAction, ErrorPolicy};
use crate::log::{LogConstructor, ReconcileInfo};
use crate::manager::Manager;
use crate::object_reconciler::{FromCache, ObjectReconciler};
use crate::reason::ReconcileReason;
use crate::reconciler::{ReconcileError, Reconciler};
use crate::watch::Watch;

pub mod dynamic;
mod filter;
pub mod hook;
mod options;
mod source_watch;
#[cfg(test)]
mod tests;

pub use filter::EventFilter;
pub use hook::{
    BuilderHook, ControllerRunnable, GatePass, MadeWatch, MetaAccess, MetaEvent, MetaEvents,
    PlannedWatch, ReconcileGate, WatchRole,
};
pub use options::WatchOptions;
pub use source_watch::{Probe, Resync, SourceWatch, WatchedObject, probe_api};

use options::describe_options;
use source_watch::{probe_dynamic, probe_scope, resync_all};

/// What pending watches need when the controller is built.
struct BuildContext<Q> {
    filters: Vec<EventFilter>,
    owner: Option<EnqueueRequestForOwner<DynamicObject>>,
    /// Every object of the primary kind (set by `for_kind`).
    resync: Option<Resync<Q>>,
}

/// `watch` with the resync of `ctx` and `probe`, if any, boxed as the controller holds it.
fn finish_watch<K, S, H, Q>(
    watch: SourceWatch<K, S, H, Q>,
    probe: Option<Probe>,
    ctx: &BuildContext<Q>,
) -> Box<dyn Watch<Q>>
where
    K: WatchedObject,
    S: Source<K>,
    H: EventHandler<K, Q>,
    Q: Key,
{
    let watch = match &ctx.resync {
        Some(resync) => watch.with_resync(Arc::clone(resync)),
        None => watch,
    };
    Box::new(match probe {
        Some(p) => watch.with_probe(p),
        None => watch,
    })
}

/// A handler made when the controller is built (an owned kind's handler needs the primary
/// kind, which `BuildContext::owner` knows only then).
type MakeHandler<H, Q> = Box<dyn FnOnce(&BuildContext<Q>) -> Result<H, ManagerError> + Send>;

type PendingWatch<Q> =
    Box<dyn FnOnce(&BuildContext<Q>) -> Result<Box<dyn Watch<Q>>, ManagerError> + Send>;

/// Builds a [`Controller`] of [`Request`]s, or of another key `Q`; see the
/// [module docs](self#other-keys-than-request).
pub struct Builder<'m, Q = Request> {
    manager: Option<&'m Manager>,
    cache: Option<Cache>,
    client: Option<kube::Client>,
    name: Option<String>,
    for_kind: Option<String>,
    /// The primary kind's API group (set with `for_kind`).
    for_group: Option<String>,
    owner: Option<EnqueueRequestForOwner<DynamicObject>>,
    resync: Option<Resync<Q>>,
    /// The `Reader<K>` of the primary kind, for [`Builder::build_objects`].
    primary_reader: Option<Box<dyn std::any::Any + Send + Sync>>,
    watches: Vec<PendingWatch<Q>>,
    filters: Vec<EventFilter>,
    options: ControllerOptions,
    /// Set by [`Builder::clock`]: wins over the manager's clock.
    clock: Option<Clock>,
    rate_limiter: Option<Box<dyn RateLimiter<Q>>>,
    error: Option<ManagerError>,
    /// Layers taking part in building this controller ([`Builder::with_hook`]).
    hooks: hook::Hooks<Q>,
    /// Which options this builder set (they win over the manager's controller defaults).
    set: SetOptions,
    /// An [`ErrorPolicy`] of the reconciler's error type (checked in `build`).
    error_policy: Option<(Box<dyn std::any::Any + Send>, &'static str)>,
    log_constructor: Option<LogConstructor<Q>>,
}

/// The options a builder set itself.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SetOptions {
    all: bool,
    max_concurrent_reconciles: bool,
    reconcile_timeout: bool,
    recover_panic: bool,
    cache_sync_timeout: bool,
    needs_leader_election: bool,
    warmup: bool,
}

impl<Q> std::fmt::Debug for Builder<'_, Q> {
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

/// A type's name without module paths (`PartialObjectMeta<Secret>`).
fn short_type_name(full: &str) -> String {
    let mut out = String::new();
    let mut ident = String::new();
    let mut chars = full.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            ident.clear();
        } else if c.is_alphanumeric() || c == '_' {
            ident.push(c);
        } else {
            out.push_str(&std::mem::take(&mut ident));
            out.push(c);
        }
    }
    out.push_str(&ident);
    out
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
        Self::keyed()
    }

    /// A builder using the manager's cache and client, whose [`complete`](Self::complete)
    /// registers the controller with `manager`.
    pub fn for_manager(manager: &'m Manager) -> Self {
        Self::keyed_for_manager(manager)
    }
}

impl<'m, Q: Key> Builder<'m, Q> {
    /// A builder of a controller keyed by `Q` (not [`Request`]), not tied to a manager: its
    /// watches come from [`watches`](Self::watches) with handlers of
    /// [`EventHandler<K, Q>`] (see the [module docs](self#other-keys-than-request)).
    pub fn keyed() -> Self {
        Builder {
            manager: None,
            cache: None,
            client: None,
            name: None,
            for_kind: None,
            for_group: None,
            owner: None,
            resync: None,
            primary_reader: None,
            watches: Vec::new(),
            filters: Vec::new(),
            options: ControllerOptions::default(),
            clock: None,
            rate_limiter: None,
            error: None,
            hooks: Vec::new(),
            set: SetOptions::default(),
            error_policy: None,
            log_constructor: None,
        }
    }

    /// [`keyed`](Self::keyed), using the manager's cache and client, registered with `manager`
    /// by [`complete`](Self::complete).
    pub fn keyed_for_manager(manager: &'m Manager) -> Self {
        Builder {
            manager: Some(manager),
            cache: Some(manager.cache().clone()),
            client: Some(manager.kube_client()),
            ..Self::keyed()
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

    /// Records `error` as this builder's failure, returned by `build`/`complete` (the first
    /// recorded wins): for extension traits on the builder that find a misuse.
    #[must_use]
    pub fn failed(mut self, error: ManagerError) -> Self {
        self.fail(error);
        self
    }

    /// The manager this builder registers with (`None` for [`Builder::new`]).
    pub fn manager(&self) -> Option<&'m Manager> {
        self.manager
    }

    /// Whether a watch (`for_kind`, `owns`, `watches` or their dynamic forms) was added.
    pub fn has_watches(&self) -> bool {
        self.for_kind.is_some() || !self.watches.is_empty()
    }

    /// Adds a layer's hook ([`hook`]): it sees the cached watches made after it and may gate
    /// the reconciler and take over registration. Add hooks before the watches they should
    /// see; a hook added after one fails the builder.
    #[must_use]
    pub fn with_hook(mut self, hook: impl BuilderHook<Q>) -> Self {
        if self.has_watches() {
            let reason = format!(
                "add the builder hook {} before for_kind, owns and watches: it must see every watch",
                hook.name()
            );
            self.fail(ManagerError::Builder { reason });
            return self;
        }
        self.hooks.push(Box::new(hook));
        self
    }

    /// Shows a watch about to be made to the hooks; the scope to make it with, or `None` once
    /// a hook refused it (the builder has failed).
    fn plan_with_hooks(
        &mut self,
        kind: &str,
        group: &str,
        role: WatchRole,
        dynamic: bool,
        base: &WatchScope,
    ) -> Option<WatchScope> {
        let mut planned = PlannedWatch {
            kind,
            group,
            role,
            dynamic,
            base,
            scope: base.clone(),
        };
        let mut refused = None;
        for hook in &mut self.hooks {
            if let Err(reason) = hook.plan_watch(&mut planned) {
                refused = Some(reason);
                break;
            }
        }
        match refused {
            Some(reason) => {
                self.fail(ManagerError::Builder { reason });
                None
            }
            None => Some(planned.scope),
        }
    }

    /// Shows a made watch to the hooks; `false` once one refused it (the builder has failed).
    fn made_with_hooks(&mut self, made: impl FnOnce() -> MadeWatch) -> bool {
        if self.hooks.is_empty() {
            return true;
        }
        let made = made();
        let mut refused = None;
        for hook in &mut self.hooks {
            if let Err(reason) = hook.watch_made(made.clone()) {
                refused = Some(reason);
                break;
            }
        }
        match refused {
            Some(reason) => {
                self.fail(ManagerError::Builder { reason });
                false
            }
            None => true,
        }
    }

    /// The hooks' gates, and the hook that registers the controller if one does.
    #[allow(clippy::type_complexity)]
    fn take_hooks(
        &mut self,
    ) -> Result<
        (
            Vec<Arc<dyn ReconcileGate<Q>>>,
            Option<Box<dyn BuilderHook<Q>>>,
        ),
        ManagerError,
    > {
        let mut gates = Vec::new();
        let mut registrar: Option<Box<dyn BuilderHook<Q>>> = None;
        for mut hook in std::mem::take(&mut self.hooks) {
            if let Some(gate) = hook
                .gate()
                .map_err(|reason| ManagerError::Builder { reason })?
            {
                gates.push(gate);
            }
            if hook.takes_registration() {
                if let Some(first) = &registrar {
                    return Err(ManagerError::Builder {
                        reason: format!(
                            "the builder hooks {} and {} both register the controller; at most one may",
                            first.name(),
                            hook.name()
                        ),
                    });
                }
                registrar = Some(hook);
            }
        }
        Ok((gates, registrar))
    }

    /// Registers `reconciler`'s controller: behind the hooks' gates, by the hook that takes
    /// registration if one does, else with the manager.
    fn finish<R: Reconciler<Q>>(
        mut self,
        manager: &Manager,
        reconciler: R,
    ) -> Result<(), ManagerError> {
        if let Some(error) = self.error.take() {
            return Err(error);
        }
        let (gates, registrar) = self.take_hooks()?;
        if gates.is_empty() && registrar.is_none() {
            let mut controller = self.build(reconciler)?;
            controller.default_event_recorder(manager.event_recorder(controller.name()));
            return manager.register_controller(controller);
        }
        let mut controller = self.build(hook::Gated::new(reconciler, gates))?;
        controller.default_event_recorder(manager.event_recorder(controller.name()));
        match registrar {
            Some(hook) => hook.register(manager, ControllerRunnable::new(controller)),
            None => manager.register_controller(controller),
        }
    }

    /// Names the controller (labels its metrics, names its queue, must be unique in a manager).
    /// Defaults to the lower-cased kind given to [`for_kind`](Self::for_kind).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Watches `source`: events that pass the options' predicates and every event filter go to
    /// `handler`. If the source reports lost events, every object of the primary kind is
    /// resynced (see the
    /// [module docs](self#lagged-sources-every-object-of-the-primary-kind-is-resynced)).
    pub fn watches<K, S, H>(mut self, source: S, handler: H, options: WatchOptions<K>) -> Self
    where
        K: WatchedObject,
        K::DynamicType: Default,
        S: Source<K>,
        H: EventHandler<K, Q>,
    {
        self.push_watch(
            K::DynamicType::default(),
            source,
            Box::new(move |_| Ok(handler)),
            options.predicates,
            None,
            None,
        );
        self
    }

    /// Queues a watch to be built with the controller: `source` of objects of the run-time type
    /// `dt`, its predicates and the controller's event filters, into the handler `handler`
    /// makes, with the controller's resync and `probe` (how a sync timeout is explained).
    fn push_watch<K, S, H>(
        &mut self,
        dt: K::DynamicType,
        source: S,
        handler: MakeHandler<H, Q>,
        predicates: Vec<Box<dyn Predicate<K>>>,
        probe: Option<Probe>,
        reason: Option<ReconcileReason>,
    ) where
        K: WatchedObject,
        S: Source<K>,
        H: EventHandler<K, Q>,
    {
        self.watches.push(Box::new(move |ctx: &BuildContext<Q>| {
            let watch = SourceWatch::with_dynamic_type(
                dt,
                source,
                handler(ctx)?,
                predicates,
                ctx.filters.clone(),
            );
            let watch = match reason {
                Some(reason) => watch.with_reason(reason),
                None => watch,
            };
            Ok(finish_watch(watch, probe, ctx))
        }));
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
        self.set.max_concurrent_reconciles = true;
        self
    }

    /// Whether the controller runs only on the leader (default `true`; see
    /// [`ControllerOptions::needs_leader_election`]).
    #[must_use]
    pub fn needs_leader_election(mut self, needs: bool) -> Self {
        self.options.needs_leader_election = needs;
        self.set.needs_leader_election = true;
        self
    }

    /// Starts the controller's watches before leadership, its workers after (see
    /// [`ControllerOptions::warmup`]).
    #[must_use]
    pub fn warmup(mut self, warmup: bool) -> Self {
        self.options.warmup = warmup;
        self.set.warmup = true;
        self
    }

    /// Coalesces the events of one request within `window` (see
    /// [`ControllerOptions::debounce`]).
    #[must_use]
    pub fn debounce(mut self, window: std::time::Duration) -> Self {
        self.options.debounce = Some(window);
        self
    }

    /// Sets the error policy: what to do with a request whose reconcile returned a
    /// non-terminal error `E` (see [`crate::error_policy`]). `E` must be the reconciler's error
    /// type (for [`complete_objects`](Builder::complete_objects), the
    /// [`ObjectReconciler`]'s own error type, or [`FromCacheError`](crate::FromCacheError) of
    /// it); [`build`](Self::build) fails with [`ManagerError::Builder`] otherwise.
    #[must_use]
    pub fn error_policy<E: ReconcileError>(
        mut self,
        policy: impl Fn(&E, &crate::Context) -> ErrorAction + Send + Sync + 'static,
    ) -> Self {
        let policy: ErrorPolicy<E> = Arc::new(policy);
        self.error_policy = Some((Box::new(policy), std::any::type_name::<E>()));
        self
    }

    /// Sets the function that makes each reconcile's tracing span (see [`crate::log`];
    /// default: controller-runtime's keys).
    #[must_use]
    pub fn log_constructor(
        mut self,
        constructor: impl Fn(&ReconcileInfo<'_, Q>) -> tracing::Span + Send + Sync + 'static,
    ) -> Self {
        self.log_constructor = Some(Arc::new(constructor));
        self
    }

    /// Sets the rate limiter of the controller's queue (default: the queue's controller default).
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<Q>) -> Self {
        self.rate_limiter = Some(Box::new(limiter));
        self
    }

    /// Sets all controller options at once. Their [`clock`](ControllerOptions::clock), if
    /// manual, is kept; the system clock is replaced by the manager's (see
    /// [`clock`](Self::clock)).
    ///
    /// Options set this way are all the controller's own: the manager's
    /// [controller defaults](crate::ControllerDefaults) do not apply to them.
    pub fn options(mut self, options: ControllerOptions) -> Self {
        self.options = options;
        self.set.all = true;
        self
    }

    /// Sets the per-reconcile timeout.
    pub fn reconcile_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.options.reconcile_timeout = Some(timeout);
        self.set.reconcile_timeout = true;
        self
    }

    /// Sets how long start-up waits for every watch to sync.
    pub fn cache_sync_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.options.cache_sync_timeout = timeout;
        self.set.cache_sync_timeout = true;
        self
    }

    /// Whether panics in reconciles are recovered (default `true`).
    pub fn recover_panic(mut self, recover: bool) -> Self {
        self.options.recover_panic = recover;
        self.set.recover_panic = true;
        self
    }

    /// Sets the controller's clock ([`ControllerOptions::clock`]), whatever the manager's.
    /// Without it, a builder made by a manager uses the manager's
    /// [`clock`](Manager::clock), unless [`options`](Self::options) gave a manual one; other
    /// builders use the clock of their options (the system clock by default).
    #[must_use]
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Builds the controller without registering it anywhere.
    pub fn build<R: Reconciler<Q>>(
        mut self,
        reconciler: R,
    ) -> Result<Controller<Q, R>, ManagerError> {
        if let Some(error) = self.error {
            return Err(error);
        }
        for hook in &mut self.hooks {
            let gated = hook
                .gate()
                .map_err(|reason| ManagerError::Builder { reason })?
                .is_some();
            if gated || hook.takes_registration() {
                return Err(ManagerError::Builder {
                    reason: format!(
                        "a controller with the builder hook {} is registered with complete() or complete_objects(), not built alone",
                        hook.name()
                    ),
                });
            }
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
        let mut options = self.options;
        if let Some(manager) = self.manager
            && !self.set.all
        {
            let group_kind = self
                .for_kind
                .as_deref()
                .map(|kind| group_kind(self.for_group.as_deref().unwrap_or(""), kind));
            manager.options().controller_defaults.apply(
                &mut options,
                group_kind.as_deref(),
                |field| self.set.is_set(field),
            );
        }
        if let Some(clock) = self.clock {
            options.clock = clock;
        } else if let Some(manager) = self.manager
            && !options.clock.is_manual()
        {
            options.clock = manager.clock();
        }
        let mut controller = Controller::with_queue(name, queue, reconciler, options)
            .with_primary_kind(
                self.for_group.as_deref().unwrap_or(""),
                self.for_kind.as_deref().unwrap_or(""),
            );
        if let Some((policy, error_type)) = self.error_policy {
            let policy = policy
                .downcast::<ErrorPolicy<R::Error>>()
                .map_err(|_| ManagerError::Builder {
                    reason: format!(
                        "the error policy takes errors of type {error_type}, but the reconciler returns {}",
                        std::any::type_name::<R::Error>()
                    ),
                })?;
            controller.set_error_policy(*policy);
        }
        if let Some(constructor) = self.log_constructor {
            controller.set_log_constructor(constructor);
        }
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
    pub fn complete<R: Reconciler<Q>>(self, reconciler: R) -> Result<(), ManagerError> {
        let manager = self.manager.ok_or(ManagerError::NoManager)?;
        self.finish(manager, reconciler)
    }
}

/// The [`Request`]-keyed builder: the primary kind, owned kinds and object reconcilers.
impl<'m> Builder<'m> {
    /// A cached watch and a reader of one store through the shared cache (made by `make`),
    /// tracked by the manager's readiness, and the probe (made by `probe`) that explains a
    /// watch that does not sync.
    #[allow(clippy::type_complexity)]
    fn cached_source<K: CacheObject>(
        &mut self,
        kind_name: &str,
        scope: &WatchScope,
        make: impl FnOnce(&Cache) -> Result<(Kind<K>, Reader<K>), CacheError>,
        probe: impl FnOnce(kube::Client) -> Probe,
    ) -> Option<(Kind<K>, Reader<K>, Option<Probe>)> {
        let Some(cache) = self.cache.clone() else {
            self.fail(ManagerError::Builder {
                reason: format!(
                    "watching {kind_name} needs a cache: use Manager::controller() or Builder::cache()"
                ),
            });
            return None;
        };
        let (kind, reader) = match make(&cache) {
            Ok(pair) => pair,
            Err(source) => {
                self.fail(ManagerError::Cache {
                    kind: kind_name.to_string(),
                    source,
                });
                return None;
            }
        };
        if let Some(manager) = self.manager {
            manager.track_cache_sync(
                format!("{kind_name}{}", describe_options(scope)),
                reader.sync(),
            );
        }
        let probe = self.client.clone().map(probe);
        Some((kind, reader, probe))
    }

    /// A cached watch of the typed kind `K` through the shared cache, a reader of the same
    /// store, and its API probe.
    #[allow(clippy::type_complexity)]
    fn kind_source<K>(
        &mut self,
        options: &WatchOptions<K>,
    ) -> Option<(Kind<K>, Reader<K>, Option<Probe>)>
    where
        K: CacheObject,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        let kind_name = K::kind(&K::DynamicType::default()).into_owned();
        let scope = &options.scope;
        self.cached_source(
            &kind_name,
            scope,
            |cache| {
                let kind = cache.kind::<K>(scope.clone())?;
                let reader = cache.reader::<K>(scope.clone())?;
                Ok((kind, reader))
            },
            |client| probe_scope::<K>(client, scope),
        )
    }

    /// Makes `K` (objects of the run-time type `dt`, named `kind_name`) the primary kind, its
    /// watch and reader made by `source`.
    #[allow(clippy::type_complexity)]
    fn set_primary<K>(
        mut self,
        kind_name: String,
        dt: K::DynamicType,
        cluster_scoped: bool,
        source: impl FnOnce(&mut Self) -> Option<(Kind<K>, Reader<K>, Option<Probe>)>,
        predicates: Vec<Box<dyn kcr_predicate::Predicate<K>>>,
    ) -> Self
    where
        K: CacheObject + Serialize,
    {
        if let Some(previous) = &self.for_kind {
            let reason = format!(
                "for_kind::<{kind_name}>() called after for_kind::<{previous}>(): a controller has one primary kind"
            );
            self.fail(ManagerError::Builder { reason });
            return self;
        }
        self.for_kind = Some(kind_name);
        self.for_group = Some(K::group(&dt).into_owned());
        self.owner = Some(
            EnqueueRequestForOwner::<DynamicObject>::with_dynamic_type(&ApiResource::erase::<K>(
                &dt,
            ))
            .cluster_scoped(cluster_scoped),
        );
        let Some((kind, reader, probe)) = source(&mut self) else {
            return self;
        };
        self.primary_reader = Some(Box::new(reader.clone()));
        self.resync = Some(resync_all(reader));
        self.push_watch(
            dt,
            kind,
            Box::new(|_| Ok(EnqueueRequestForObject)),
            predicates,
            probe,
            Some(ReconcileReason::ObjectChanged),
        );
        self
    }

    /// Adds the watch of a child kind `C` (objects of the run-time type `dt`, named `child`)
    /// whose events enqueue their controller owner of the primary kind.
    #[allow(clippy::type_complexity)]
    fn add_owned<C>(
        mut self,
        child: String,
        dt: C::DynamicType,
        source: Option<(Kind<C>, Reader<C>, Option<Probe>)>,
        predicates: Vec<Box<dyn kcr_predicate::Predicate<C>>>,
    ) -> Self
    where
        C: CacheObject + Serialize,
    {
        let Some((kind, _reader, probe)) = source else {
            return self;
        };
        let child_kind = child.clone();
        let owner: MakeHandler<_, Request> = Box::new(move |ctx| {
            ctx.owner.clone().ok_or_else(|| ManagerError::Builder {
                reason: format!(
                    "owns::<{child}>() needs for_kind::<Owner>() to know the owner type"
                ),
            })
        });
        let reason = ReconcileReason::OwnedObjectChanged {
            kind: Arc::from(child_kind.as_str()),
        };
        self.push_watch(dt, kind, owner, predicates, probe, Some(reason));
        self
    }

    /// The controller's primary kind: a cached watch of `K` whose events enqueue the object itself
    /// (`EnqueueRequestForObject`). Call once. Its objects are what the controller resyncs when
    /// a source lags (see the
    /// [module docs](self#lagged-sources-every-object-of-the-primary-kind-is-resynced)). For a
    /// kind chosen at run time, see [`for_dynamic`](Self::for_dynamic).
    pub fn for_kind<K>(mut self, options: WatchOptions<K>) -> Self
    where
        K: CacheObject + Serialize,
        K::DynamicType: Default,
        K::Scope: ScopedApi + 'static,
    {
        let kind_name = K::kind(&K::DynamicType::default()).into_owned();
        let WatchOptions { predicates, scope } = options;
        let dt = K::DynamicType::default();
        let base = scope;
        let Some(scope) =
            self.plan_with_hooks(&kind_name, &K::group(&dt), WatchRole::Primary, false, &base)
        else {
            return self;
        };
        let options = WatchOptions {
            predicates: Vec::new(),
            scope: scope.clone(),
        };
        let name = kind_name.clone();
        self.set_primary(
            kind_name,
            dt,
            is_cluster_scoped::<K>(),
            |builder| {
                let source = builder.kind_source::<K>(&options)?;
                let (kind, reader) = (source.0.clone(), source.1.clone());
                builder
                    .made_with_hooks(|| MadeWatch {
                        kind: name,
                        resource: ApiResource::erase::<K>(&Default::default()),
                        cluster_scoped: is_cluster_scoped::<K>(),
                        role: WatchRole::Primary,
                        dynamic: false,
                        base,
                        scope,
                        meta: Arc::new(hook::TypedMeta { kind, reader }),
                    })
                    .then_some(source)
            },
            predicates,
        )
    }

    /// A child kind: a cached watch of `C` whose events enqueue the object's controller owner of
    /// the [`for_kind`](Self::for_kind) type (`EnqueueRequestForOwner`).
    ///
    /// A controller that only needs to hear that a child changed (not read it) can watch it
    /// metadata-only, controller-runtime's `OnlyMetadata`: `owns::<PartialObjectMeta<Secret>>(..)`
    /// (`kube::core::PartialObjectMeta`). The server then sends and the cache keeps metadata
    /// alone, which for Secrets or ConfigMaps is most of their size saved. For a kind chosen at
    /// run time, see [`owns_dynamic`](Self::owns_dynamic).
    pub fn owns<C>(mut self, options: WatchOptions<C>) -> Self
    where
        C: CacheObject + Serialize,
        C::DynamicType: Default,
        C::Scope: ScopedApi + 'static,
    {
        let child = C::kind(&C::DynamicType::default()).into_owned();
        let WatchOptions { predicates, scope } = options;
        let dt = C::DynamicType::default();
        let base = scope;
        let Some(scope) =
            self.plan_with_hooks(&child, &C::group(&dt), WatchRole::Owned, false, &base)
        else {
            return self;
        };
        let options = WatchOptions {
            predicates,
            scope: scope.clone(),
        };
        let source = self.kind_source::<C>(&options);
        if let Some((kind, reader, _)) = &source {
            let (kind, reader) = (kind.clone(), reader.clone());
            let made = self.made_with_hooks(|| MadeWatch {
                kind: child.clone(),
                resource: ApiResource::erase::<C>(&Default::default()),
                cluster_scoped: is_cluster_scoped::<C>(),
                role: WatchRole::Owned,
                dynamic: false,
                base,
                scope,
                meta: Arc::new(hook::TypedMeta { kind, reader }),
            });
            if !made {
                return self;
            }
        }
        self.add_owned(child, C::DynamicType::default(), source, options.predicates)
    }

    /// Builds a controller whose reconciler is handed the cached object of the primary kind
    /// (see [`ObjectReconciler`]); fails when `R::Object` is not the kind given to
    /// [`for_kind`](Self::for_kind), or when there is none.
    pub fn build_objects<R: ObjectReconciler>(
        mut self,
        reconciler: R,
    ) -> Result<Controller<Request, FromCache<R>>, ManagerError>
    where
        R::Object: 'static,
    {
        let reconciler = self.objects_reconciler(reconciler)?;
        self.build(reconciler)
    }

    /// The [`FromCache`] reconciler of `reconciler`, reading the primary kind's cache.
    fn objects_reconciler<R: ObjectReconciler>(
        &mut self,
        reconciler: R,
    ) -> Result<FromCache<R>, ManagerError>
    where
        R::Object: 'static,
    {
        if let Some(error) = self.error.take() {
            return Err(error);
        }
        // An error policy of the object reconciler's own error type sees the errors it
        // returns; a read of the cache that failed is terminal and never reaches it.
        if let Some((policy, error_type)) = self.error_policy.take() {
            self.error_policy = Some(match policy.downcast::<ErrorPolicy<R::Error>>() {
                Ok(own) => {
                    let wrapped: ErrorPolicy<crate::FromCacheError<R::Error>> =
                        Arc::new(move |error, ctx| match error {
                            crate::FromCacheError::Reconcile(e) => own(e, ctx),
                            crate::FromCacheError::Read(_) => ErrorAction::GiveUp,
                        });
                    (Box::new(wrapped), error_type)
                }
                Err(policy) => (policy, error_type),
            });
        }
        let wanted = short_type_name(std::any::type_name::<R::Object>());
        let reader = self
            .primary_reader
            .take()
            .and_then(|r| r.downcast::<Reader<R::Object>>().ok())
            .ok_or_else(|| ManagerError::Builder {
                reason: match &self.for_kind {
                    Some(kind) => format!(
                        "an ObjectReconciler of {wanted} ({}) needs for_kind of the same type, but for_kind is {kind}",
                        std::any::type_name::<R::Object>()
                    ),
                    None => format!(
                        "an ObjectReconciler of {wanted} needs for_kind::<{wanted}>() to read its objects from"
                    ),
                },
            })?;
        Ok(FromCache::new(*reader, reconciler))
    }

    /// [`build_objects`](Self::build_objects), registered with the manager as
    /// [`complete`](Self::complete) does.
    pub fn complete_objects<R: ObjectReconciler>(
        mut self,
        reconciler: R,
    ) -> Result<(), ManagerError>
    where
        R::Object: 'static,
    {
        let manager = self.manager.ok_or(ManagerError::NoManager)?;
        let reconciler = self.objects_reconciler(reconciler)?;
        self.finish(manager, reconciler)
    }
}

impl SetOptions {
    /// Whether the builder set `field` (or every option, with [`Builder::options`]).
    fn is_set(&self, field: crate::defaults::DefaultedOption) -> bool {
        use crate::defaults::DefaultedOption as F;
        self.all
            || match field {
                F::MaxConcurrentReconciles => self.max_concurrent_reconciles,
                F::ReconcileTimeout => self.reconcile_timeout,
                F::RecoverPanic => self.recover_panic,
                F::CacheSyncTimeout => self.cache_sync_timeout,
                F::NeedsLeaderElection => self.needs_leader_election,
                F::Warmup => self.warmup,
            }
    }
}

/// How a manager starts a builder (here, not in `manager.rs`: the builder names the manager,
/// the manager never names the builder).
impl Manager {
    /// A [`Builder`] whose `complete` registers the controller here.
    pub fn controller(&self) -> Builder<'_> {
        Builder::for_manager(self)
    }

    /// A [`Builder`] of a controller keyed by `Q` instead of [`Request`], registered with this
    /// manager by `complete`: its watches use handlers of `EventHandler<K, Q>` (see the
    /// [builder docs](crate::builder#other-keys-than-request)).
    pub fn keyed_controller<Q: Key>(&self) -> Builder<'_, Q> {
        Builder::keyed_for_manager(self)
    }
}
