//! Builder hooks: how a layer built outside the manager (sharding is one: the `kcr-shard`
//! crate) takes part in building a controller, without the builder knowing the layer.
//!
//! A [`BuilderHook`], added with [`Builder::with_hook`](crate::Builder::with_hook), is told of
//! each cached watch the builder makes for [`for_kind`](crate::Builder::for_kind),
//! [`owns`](crate::Builder::owns) and their dynamic forms:
//!
//! 1. [`plan_watch`](BuilderHook::plan_watch), before the watch exists: the hook may narrow its
//!    [`WatchScope`] (a label selector of its own, say) or refuse the watch;
//! 2. [`watch_made`](BuilderHook::watch_made), once it exists: the hook gets the kind's
//!    [`ApiResource`] and a [`MetaAccess`] to read the cached objects' metadata and follow the
//!    watch's events, type-erased, so a hook needs no type parameter per kind.
//!
//! When the controller is completed, each hook may put a [`ReconcileGate`] in front of the
//! reconciler (which requests may run now, and when reconciles in flight must be dropped), and
//! one hook may take over the controller's registration with the manager
//! ([`BuilderHook::register`]), to run it under conditions of its own (for sharding: on every
//! replica holding a member Lease, beside the layer's own runnables).
//!
//! Watches added with [`watches`](crate::Builder::watches) are the user's own sources and are
//! not shown to hooks.

use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use kcr_source::{CacheObject, Event, Kind, Reader, Source, WatchScope};
use kube::core::{ApiResource, ObjectMeta};
use tokio_util::sync::CancellationToken;

use crate::controller::Key;
use crate::error::ControllerError;
use crate::error::ManagerError;
use crate::manager::Manager;
use crate::reconciler::{Action, Context, Reconciler};
use crate::watch::BoxError;

/// What a watch is for in its controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WatchRole {
    /// The primary kind ([`for_kind`](crate::Builder::for_kind), `for_dynamic`): its objects
    /// are what the controller reconciles.
    Primary,
    /// An owned kind ([`owns`](crate::Builder::owns), `owns_dynamic`): its objects enqueue
    /// their controller owner of the primary kind.
    Owned,
}

/// A cached watch about to be made, shown to [`BuilderHook::plan_watch`].
#[derive(Debug)]
pub struct PlannedWatch<'a> {
    /// The kind's name (`ConfigMap`).
    pub kind: &'a str,
    /// The kind's API group (`""` for the core group).
    pub group: &'a str,
    /// Primary or owned.
    pub role: WatchRole,
    /// Whether the kind was chosen at run time (`DynamicObject`s).
    pub dynamic: bool,
    /// The scope the user asked for.
    pub base: &'a WatchScope,
    /// The scope the watch will have: the user's, as earlier hooks changed it. A hook may
    /// narrow it (add a label selector); it decides what the cache holds.
    pub scope: WatchScope,
}

/// An object's metadata as a watch delivered it, with whether the event was a deletion.
#[derive(Debug, Clone)]
pub struct MetaEvent {
    /// The object's metadata (at the deletion, for a deleted object).
    pub meta: ObjectMeta,
    /// Whether the object was deleted (or left the watch's scope).
    pub deleted: bool,
}

/// The metadata events of a watch: [`MetaEvent`]s, or the source's errors (the source retries;
/// an error is reported, not the end of the stream).
pub type MetaEvents = BoxStream<'static, Result<MetaEvent, BoxError>>;

/// Type-erased access to a made watch's objects, for hooks.
pub trait MetaAccess: Send + Sync + 'static {
    /// The cached metadata of `name` in `namespace` (`None` for cluster-scoped objects), or
    /// `None` when the cache does not hold it (or has not synced).
    fn get(&self, name: &str, namespace: Option<&str>) -> Option<ObjectMeta>;

    /// Starts (or joins) the cached watch and follows its events, beginning with the objects
    /// already cached (as creations).
    fn events(&self) -> Result<MetaEvents, BoxError>;
}

/// A cached watch the builder made, shown to [`BuilderHook::watch_made`].
#[derive(Clone)]
pub struct MadeWatch {
    /// The kind's name.
    pub kind: String,
    /// The kind's group, version, kind and plural.
    pub resource: ApiResource,
    /// Whether the kind is cluster-scoped.
    pub cluster_scoped: bool,
    /// Primary or owned.
    pub role: WatchRole,
    /// Whether the kind was chosen at run time.
    pub dynamic: bool,
    /// The scope the user asked for (before hooks narrowed it).
    pub base: WatchScope,
    /// The scope of the watch as made.
    pub scope: WatchScope,
    /// Its objects' metadata and events.
    pub meta: Arc<dyn MetaAccess>,
}

impl std::fmt::Debug for MadeWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MadeWatch")
            .field("kind", &self.kind)
            .field("role", &self.role)
            .field("dynamic", &self.dynamic)
            .field("scope", &self.scope)
            .finish()
    }
}

/// What a gate returns for a request it lets through: held while the reconcile runs, dropped
/// when it ends (whichever way).
pub struct GatePass(#[allow(dead_code)] Box<dyn Send>);

impl GatePass {
    /// A pass holding `guard` (for example an in-flight count decremented on drop).
    pub fn new(guard: impl Send + 'static) -> Self {
        GatePass(Box::new(guard))
    }
}

impl std::fmt::Debug for GatePass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GatePass")
    }
}

/// Decides, before each reconcile, whether it may run on this replica now.
pub trait ReconcileGate<Q>: Send + Sync + 'static {
    /// `Some(pass)` lets the reconcile of `key` run, the pass held until it ends; `None` skips
    /// it (the request is finished as if the reconciler returned `Action::done()`).
    fn enter(&self, key: &Q) -> Option<GatePass>;

    /// A token cancelled when every reconcile in flight must be dropped at once (their futures
    /// are cancelled and the requests finished as `Action::done()`); `None` never.
    fn abandon(&self) -> Option<CancellationToken> {
        None
    }
}

/// A controller ready to run, type-erased, handed to the hook that takes over registration.
pub struct ControllerRunnable {
    name: String,
    run: Box<
        dyn FnOnce(CancellationToken) -> BoxFuture<'static, Result<(), ControllerError>> + Send,
    >,
}

impl std::fmt::Debug for ControllerRunnable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerRunnable")
            .field("name", &self.name)
            .finish()
    }
}

impl ControllerRunnable {
    pub(crate) fn new<Q: Key, R: Reconciler<Q>>(controller: crate::Controller<Q, R>) -> Self {
        ControllerRunnable {
            name: controller.name().to_string(),
            run: Box::new(move |token| Box::pin(controller.run(token))),
        }
    }

    /// The controller's name (unique in its manager: reserve it with
    /// [`Manager::reserve_name`]).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs the controller until `shutdown` is cancelled (see
    /// [`Controller::run`](crate::Controller::run)).
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), ControllerError> {
        (self.run)(shutdown).await
    }
}

/// A layer's part in building one controller (see the [module docs](self)). Every method has a
/// default that does nothing.
pub trait BuilderHook<Q>: Send + 'static {
    /// The hook's name, for errors.
    fn name(&self) -> &str;

    /// Called before a cached watch is made; may narrow `watch.scope`. An `Err(reason)` fails
    /// the builder with [`ManagerError::Builder`].
    fn plan_watch(&mut self, watch: &mut PlannedWatch<'_>) -> Result<(), String> {
        let _ = watch;
        Ok(())
    }

    /// Called once the watch exists. An `Err(reason)` fails the builder.
    fn watch_made(&mut self, watch: MadeWatch) -> Result<(), String> {
        let _ = watch;
        Ok(())
    }

    /// Called once when the controller is completed: a gate to put in front of its reconciler.
    /// A controller with a gate is registered with `complete`/`complete_objects`, not built
    /// alone. An `Err(reason)` fails the builder.
    fn gate(&mut self) -> Result<Option<Arc<dyn ReconcileGate<Q>>>, String> {
        Ok(None)
    }

    /// Whether this hook registers the controller itself ([`register`](Self::register)). At most
    /// one hook of a builder may.
    fn takes_registration(&self) -> bool {
        false
    }

    /// Registers `controller` with `manager` (called only if
    /// [`takes_registration`](Self::takes_registration)): typically reserves its name with
    /// [`Manager::reserve_name`] and adds runnables that run it.
    fn register(
        self: Box<Self>,
        manager: &Manager,
        controller: ControllerRunnable,
    ) -> Result<(), ManagerError> {
        let _ = (manager, controller);
        Ok(())
    }
}

/// A reconciler behind the gates of its builder's hooks.
pub(crate) struct Gated<R, Q> {
    inner: R,
    gates: Vec<Arc<dyn ReconcileGate<Q>>>,
    abandon: Vec<CancellationToken>,
}

impl<R, Q: 'static> Gated<R, Q> {
    pub(crate) fn new(inner: R, gates: Vec<Arc<dyn ReconcileGate<Q>>>) -> Self {
        let abandon = gates.iter().filter_map(|g| g.abandon()).collect();
        Gated {
            inner,
            gates,
            abandon,
        }
    }
}

impl<Q: Key, R: Reconciler<Q>> Reconciler<Q> for Gated<R, Q> {
    type Error = R::Error;

    async fn reconcile(&self, request: &Q, ctx: &Context) -> Result<Action, Self::Error> {
        let mut passes = Vec::with_capacity(self.gates.len());
        for gate in &self.gates {
            match gate.enter(request) {
                Some(pass) => passes.push(pass),
                None => {
                    tracing::trace!(%request, "refused by a reconcile gate: skipped");
                    return Ok(Action::done());
                }
            }
        }
        let abandoned = async {
            if self.abandon.is_empty() {
                std::future::pending::<()>().await;
            }
            futures::future::select_all(self.abandon.iter().map(|t| Box::pin(t.cancelled()))).await;
        };
        let res = tokio::select! {
            biased;
            _ = abandoned => {
                tracing::warn!(%request, "a reconcile gate abandoned the reconciles in flight");
                Ok(Action::done())
            }
            res = self.inner.reconcile(request, ctx) => res,
        };
        drop(passes);
        res
    }
}

/// [`MetaAccess`] over a typed cached watch and its reader.
pub(crate) struct TypedMeta<K: CacheObject> {
    pub(crate) kind: Kind<K>,
    pub(crate) reader: Reader<K>,
}

impl<K> MetaAccess for TypedMeta<K>
where
    K: CacheObject,
{
    fn get(&self, name: &str, namespace: Option<&str>) -> Option<ObjectMeta> {
        let object = self.reader.get(name, namespace).ok()??;
        Some(object.meta().clone())
    }

    fn events(&self) -> Result<MetaEvents, BoxError> {
        let started = self.kind.start().map_err(|e| Box::new(e) as BoxError)?;
        Ok(started
            .events
            .map(|event| {
                event
                    .map(|event| match event {
                        Event::Create { object, .. } | Event::Generic { object } => MetaEvent {
                            meta: object.meta().clone(),
                            deleted: false,
                        },
                        Event::Update { new, .. } => MetaEvent {
                            meta: new.meta().clone(),
                            deleted: false,
                        },
                        Event::Delete { object, .. } => MetaEvent {
                            meta: object.meta().clone(),
                            deleted: true,
                        },
                    })
                    .map_err(|e| Box::new(e) as BoxError)
            })
            .boxed())
    }
}

/// The hooks of a [`Builder`](crate::Builder).
pub(crate) type Hooks<Q> = Vec<Box<dyn BuilderHook<Q>>>;
