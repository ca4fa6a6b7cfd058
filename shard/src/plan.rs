//! How sharding plugs into a manager from outside: the manager extension that runs this
//! replica's member Lease and the sharder ([`ShardOptionsExt::shard_by_lease`]), and the builder
//! hook that labels a controller's watches and gates its reconciles
//! ([`ShardBuilderExt::sharded`]).

use std::sync::Arc;

use kcr_controller::builder::{
    BuilderHook, ControllerRunnable, MadeWatch, PlannedWatch, ReconcileGate, WatchRole,
};
use kcr_controller::extension::ManagerExtension;
use kcr_controller::leader::LeaderElector;
use kcr_controller::{BoxError, Builder, Manager, ManagerError, ManagerOptions};
use kcr_handler::Request;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::ShardError;
use crate::config::ShardConfig;
use crate::gate::{self, DrainSource, DrainTask, Lookup, Ownership, ShardGate, ShardMeta};
use crate::membership::{member_lease_name, sharder_lease_name};
use crate::sharder::{self, KindSharder, KindSpec, OwnerSpec};
use crate::target;
use kcr_source::WatchScope;

/// Sharding on a [`ManagerOptions`]: the extension trait that sets it up.
pub trait ShardOptionsExt {
    /// Shards the controller built with [`ShardBuilderExt::sharded`] across the replicas
    /// running this option with the same group name (see the [crate docs](crate)); the
    /// manager's other controllers are unaffected. A bad configuration fails
    /// [`Manager::new`] ([`ManagerError::Extension`] with the [`ShardError`]).
    #[must_use]
    fn shard_by_lease(self, config: ShardConfig) -> Self;
}

impl ShardOptionsExt for ManagerOptions {
    fn shard_by_lease(self, config: ShardConfig) -> Self {
        self.extension(ShardExtension { config })
    }
}

/// Sharding on a controller's [`Builder`]: the extension trait.
pub trait ShardBuilderExt {
    /// Shards this controller across the replicas of its manager's
    /// [`shard_by_lease`](ShardOptionsExt::shard_by_lease) group: its `for_kind` and `owns`
    /// watches see only this replica's objects, and it runs on every replica that holds its
    /// member Lease, not only on the leader. Call before `for_kind` and `owns`; register with
    /// `complete` or `complete_objects`.
    #[must_use]
    fn sharded(self) -> Self;
}

impl ShardBuilderExt for Builder<'_, Request> {
    fn sharded(self) -> Self {
        let runtime = self.manager().and_then(|m| m.extension::<ShardRuntime>());
        let Some(runtime) = runtime else {
            return self.failed(ManagerError::Builder {
                reason: "sharded() needs a manager made with ManagerOptions::shard_by_lease".into(),
            });
        };
        if self.has_watches() {
            return self.failed(ManagerError::Builder {
                reason: "call sharded() before for_kind, owns and watches: their caches hold only this replica's shard".into(),
            });
        }
        self.with_hook(ShardPlan::new(runtime))
    }
}

/// The [`ManagerExtension`] of [`ShardOptionsExt::shard_by_lease`].
struct ShardExtension {
    config: ShardConfig,
}

impl ManagerExtension for ShardExtension {
    fn name(&self) -> &str {
        "kcr-shard"
    }

    fn init(
        &self,
        client: &kube::Client,
    ) -> Result<Arc<dyn std::any::Any + Send + Sync>, BoxError> {
        Ok(Arc::new(ShardRuntime::new(
            client.clone(),
            self.config.clone(),
        )?))
    }
}

/// The per-manager sharding state.
pub(crate) struct ShardRuntime {
    pub(crate) config: Arc<ShardConfig>,
    pub(crate) namespace: String,
    client: kube::Client,
    /// The sharded controller's name, once one is registered.
    sharded: Mutex<Option<String>>,
    /// Cancelled when the member Lease is lost.
    lost: CancellationToken,
    /// The live members as this replica's sharder sees them, while it leads.
    view: sharder::View,
}

impl std::fmt::Debug for ShardRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardRuntime")
            .field("config", &self.config)
            .field("namespace", &self.namespace)
            .field("sharded", &*self.sharded.lock())
            .finish()
    }
}

impl ShardRuntime {
    pub(crate) fn new(client: kube::Client, config: ShardConfig) -> Result<Self, ShardError> {
        config.validate()?;
        let namespace = config
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string());
        Ok(ShardRuntime {
            config: Arc::new(config),
            namespace,
            client,
            sharded: Mutex::new(None),
            lost: CancellationToken::new(),
            view: Arc::default(),
        })
    }
}

/// What a sharded controller's builder gathers, as its [`BuilderHook`]: the gate's lookup, the
/// sharder's kinds and the replica's drain watchers.
struct ShardPlan {
    runtime: Arc<ShardRuntime>,
    ownership: Arc<Ownership<Request>>,
    lookup: Option<Lookup<Request>>,
    primary: Option<OwnerSpec>,
    kinds: Vec<Arc<dyn KindSharder>>,
    drains: Vec<DrainTask>,
}

impl std::fmt::Debug for ShardPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardPlan")
            .field("group", &self.runtime.config.name)
            .field("kinds", &self.kinds.len())
            .finish()
    }
}

impl ShardPlan {
    fn new(runtime: Arc<ShardRuntime>) -> Self {
        let ownership = Arc::new(Ownership::new(
            runtime.config.identity.clone(),
            runtime.lost.clone(),
        ));
        ShardPlan {
            runtime,
            ownership,
            lookup: None,
            primary: None,
            kinds: Vec::new(),
            drains: Vec::new(),
        }
    }

    /// Refuses a scope the sharder cannot follow: it labels the objects of one namespace or of
    /// all, not of a list of namespaces.
    fn check_scope(kind: &str, base: &WatchScope) -> Result<(), String> {
        match base.namespaces.as_deref() {
            Some([_, _, ..]) => Err(format!(
                "a sharded controller watches {kind} in one namespace or in all, not in several ({})",
                base.namespaces.as_deref().unwrap_or_default().join(", ")
            )),
            _ => Ok(()),
        }
    }

    /// `base` restricted to this replica's shard.
    fn scope(&self, base: &WatchScope) -> WatchScope {
        let mine = self.runtime.config.selector();
        let labels = match &base.label_selector {
            Some(l) if !l.trim().is_empty() => format!("{l},{mine}"),
            _ => mine,
        };
        WatchScope {
            label_selector: Some(labels),
            ..base.clone()
        }
    }

    /// The primary kind: sharded by its own key, gated, drained after in-flight reconciles.
    fn add_primary(&mut self, watch: MadeWatch) {
        let keys = self.runtime.config.keys();
        let (label, drain) = (keys.label.clone(), keys.drain.clone());
        let meta = watch.meta.clone();
        self.lookup = Some(Arc::new(move |r: &Request| {
            let object = meta.get(&r.name, r.namespace.as_deref())?;
            Some(ShardMeta::of(&object, &label, &drain))
        }));
        let target = target::Target {
            resource: watch.resource.clone(),
            cluster_scoped: watch.cluster_scoped,
        };
        self.primary = Some(OwnerSpec {
            group: watch.resource.group.clone(),
            kind: watch.resource.kind.clone(),
            cluster_scoped: watch.cluster_scoped,
        });
        self.kinds.push(Arc::new(KindSpec {
            target: target.clone(),
            scope: watch.base.clone(),
            owner: None,
        }));
        self.drains.push(gate::drain_watcher(
            DrainSource {
                target,
                meta: watch.meta,
            },
            self.runtime.client.clone(),
            keys,
            self.ownership.clone(),
            true,
            self.runtime.config.timings.retry_period,
        ));
    }

    /// An owned kind: sharded by its controller owner's key, drained at once.
    fn add_child(&mut self, watch: MadeWatch) -> Result<(), String> {
        let Some(owner) = self.primary.clone() else {
            return Err(format!(
                "on a sharded controller, call for_kind before owns::<{}>(): children are sharded by their owner",
                watch.kind
            ));
        };
        let target = target::Target {
            resource: watch.resource.clone(),
            cluster_scoped: watch.cluster_scoped,
        };
        self.kinds.push(Arc::new(KindSpec {
            target: target.clone(),
            scope: watch.base.clone(),
            owner: Some(owner),
        }));
        self.drains.push(gate::drain_watcher(
            DrainSource {
                target,
                meta: watch.meta,
            },
            self.runtime.client.clone(),
            self.runtime.config.keys(),
            self.ownership.clone(),
            false,
            self.runtime.config.timings.retry_period,
        ));
        Ok(())
    }
}

impl BuilderHook<Request> for ShardPlan {
    fn name(&self) -> &str {
        "kcr-shard"
    }

    fn plan_watch(&mut self, watch: &mut PlannedWatch<'_>) -> Result<(), String> {
        if watch.dynamic {
            return Err(format!(
                "a sharded controller takes typed kinds (for_kind, owns), not the run-time kind {}: \
                 sharding does not support DynamicObject yet",
                watch.kind
            ));
        }
        Self::check_scope(watch.kind, watch.base)?;
        if watch.role == WatchRole::Owned && self.primary.is_none() {
            return Err(format!(
                "on a sharded controller, call for_kind before owns::<{}>(): children are sharded by their owner",
                watch.kind
            ));
        }
        // A sharded controller's cache holds only this replica's shard of the kind.
        watch.scope = self.scope(&watch.scope);
        Ok(())
    }

    fn watch_made(&mut self, watch: MadeWatch) -> Result<(), String> {
        match watch.role {
            WatchRole::Primary => {
                self.add_primary(watch);
                Ok(())
            }
            _ => self.add_child(watch),
        }
    }

    fn gate(&mut self) -> Result<Option<Arc<dyn ReconcileGate<Request>>>, String> {
        let lookup = self.lookup.clone().ok_or_else(|| {
            "a sharded controller needs for_kind::<K>(): its objects are what is sharded"
                .to_string()
        })?;
        Ok(Some(Arc::new(ShardGate {
            ownership: self.ownership.clone(),
            lookup,
        })))
    }

    fn takes_registration(&self) -> bool {
        true
    }

    fn register(
        self: Box<Self>,
        manager: &Manager,
        controller: ControllerRunnable,
    ) -> Result<(), ManagerError> {
        register(manager, controller, *self)
    }
}

/// Registers a sharded controller: its member Lease, the controller (on every replica, once
/// the Lease is held) with its drain watchers, and the sharder's election.
fn register(
    manager: &Manager,
    controller: ControllerRunnable,
    plan: ShardPlan,
) -> Result<(), ManagerError> {
    let runtime = plan.runtime.clone();
    let name = controller.name().to_string();
    {
        let mut sharded = runtime.sharded.lock();
        if let Some(existing) = &*sharded {
            return Err(ManagerError::Builder {
                reason: format!(
                    "controller {name}: this manager already shards controller {existing} (one sharded controller per manager)"
                ),
            });
        }
        manager.reserve_name(&name)?;
        *sharded = Some(name.clone());
    }
    let config = runtime.config.clone();
    let group = config.name.clone();
    let (joined_tx, joined_rx) = tokio::sync::watch::channel(false);
    let controller_done = CancellationToken::new();

    // 1. The member Lease: renewed until the manager stops *and* the controller has finished,
    //    so that no reconcile runs after the Lease is released or left to expire.
    let member = {
        let client = runtime.client.clone();
        let le = config.election(
            member_lease_name(&config.name, &config.identity),
            config.release_on_cancel,
        );
        let lost = runtime.lost.clone();
        let done = controller_done.clone();
        let (group, identity) = (config.name.clone(), config.identity.clone());
        move |token: CancellationToken| async move {
            let elector = LeaderElector::new(client, le);
            let stop = CancellationToken::new();
            let stopper = tokio::spawn({
                let stop = stop.clone();
                async move {
                    token.cancelled().await;
                    done.cancelled().await;
                    stop.cancel();
                }
            });
            let _stopper = AbortOnDrop(stopper);
            if !elector.acquire(&stop).await {
                return Ok(());
            }
            tracing::info!(%group, %identity, "joined the shard group");
            let _ = joined_tx.send(true);
            match elector.renew_until_lost(&stop).await {
                Ok(()) => {
                    if elector.config().release_on_cancel
                        && let Err(e) = elector.release().await
                    {
                        tracing::warn!(error = %e, "could not release the member lease");
                    }
                    Ok(())
                }
                Err(source) => {
                    lost.cancel();
                    Err(Box::new(ShardError::MembershipLost {
                        group,
                        identity,
                        source: Box::new(source),
                    }) as BoxError)
                }
            }
        }
    };
    manager.add_runnable(format!("shard-member/{group}"), false, member)?;

    // 2. The controller and its drain watchers, once this replica is a member.
    let run_controller = {
        let lost = runtime.lost.clone();
        let drains = plan.drains;
        let mut joined = joined_rx;
        move |token: CancellationToken| async move {
            let _done = controller_done.drop_guard();
            tokio::select! {
                _ = token.cancelled() => return Ok(()),
                _ = lost.cancelled() => return Ok(()),
                j = joined.wait_for(|j| *j) => if j.is_err() { return Ok(()) },
            }
            let stop = token.child_token();
            let link = tokio::spawn({
                let (stop, lost) = (stop.clone(), lost.clone());
                async move {
                    lost.cancelled().await;
                    stop.cancel();
                }
            });
            let _link = AbortOnDrop(link);
            let mut watchers = tokio::task::JoinSet::new();
            for drain in drains {
                watchers.spawn(drain(stop.clone()));
            }
            let res = controller.run(stop.clone()).await;
            stop.cancel();
            watchers.abort_all();
            res.map_err(|e| Box::new(e) as BoxError)
        }
    };
    manager.add_runnable(format!("controller/{name}"), false, run_controller)?;

    // 3. The sharder: its own leader election; while it leads, it assigns.
    let sharder = {
        let client = runtime.client.clone();
        let namespace = runtime.namespace.clone();
        let le = config.election(sharder_lease_name(&config.name), true);
        let kinds = plan.kinds;
        let view = runtime.view.clone();
        move |token: CancellationToken| async move {
            let elector = LeaderElector::new(client.clone(), le);
            loop {
                if !elector.acquire(&token).await {
                    return Ok(());
                }
                tracing::info!(group = %config.name, identity = %config.identity, "leading the sharder");
                let lead = token.child_token();
                // Aborted if this runnable is dropped (a crash must not leave a sharder behind).
                let mut work = AbortOnDrop(tokio::spawn(sharder::lead(
                    client.clone(),
                    config.clone(),
                    namespace.clone(),
                    kinds.clone(),
                    view.clone(),
                    lead.clone(),
                )));
                let res = elector.renew_until_lost(&token).await;
                lead.cancel();
                let _ = (&mut work.0).await;
                match res {
                    Ok(()) => {
                        if let Err(e) = elector.release().await {
                            tracing::warn!(error = %e, "could not release the sharder lease");
                        }
                        return Ok(());
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "lost the sharder lease; campaigning again");
                    }
                }
            }
        }
    };
    manager.add_runnable(format!("sharder/{group}"), false, sharder)?;
    Ok(())
}

/// The live members of `manager`'s shard group as its sharder sees them, if this replica runs
/// the sharder now (`None` otherwise, or without sharding). For status pages and tests: the
/// sharder assigns objects to exactly these members.
pub fn sharder_view(manager: &Manager) -> Option<std::collections::BTreeSet<String>> {
    manager.extension::<ShardRuntime>()?.view.lock().clone()
}

/// This replica's identity in `manager`'s shard group, if it shards.
pub fn identity(manager: &Manager) -> Option<String> {
    manager
        .extension::<ShardRuntime>()
        .map(|r| r.config.identity.clone())
}

/// Aborts a task when dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
