//! Cluster-aware controllers: the same reconciler on every engaged cluster
//! ([`FleetBuilder`]), and watches of the member clusters that feed a controller of the hub
//! ([`Fleet::member_watch`]).

use std::marker::PhantomData;
use std::sync::Arc;

use kcr_controller::{Action, Context, Manager, ManagerError, ReconcileError, Reconciler, Watch};
use kcr_handler::Request;
use kcr_source::{CacheObject, ScopedApi, WatchScope};

use crate::cluster::{Cluster, ClusterName};
use crate::fleet::Fleet;
use crate::request::ClusterRequest;
use crate::watch::{ClusterFilter, FleetWatch, Mapper};

/// A reconciler run in every cluster of the fleet: it is handed the request and the engaged
/// cluster it is about (its client and cache). A request for a cluster that has been
/// disengaged since it was queued is finished without calling it.
pub trait FleetReconciler: Send + Sync + 'static {
    /// The error type (see kcr-controller's [`ReconcileError`]).
    type Error: ReconcileError;

    /// Reconciles `request` in `cluster`.
    fn reconcile(
        &self,
        request: &ClusterRequest,
        cluster: &Cluster,
        ctx: &Context,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send;
}

/// Adapts a [`FleetReconciler`] to kcr-controller's [`Reconciler`] of [`ClusterRequest`]s.
struct InCluster<R> {
    fleet: Fleet,
    inner: R,
}

impl<R: FleetReconciler> Reconciler<ClusterRequest> for InCluster<R> {
    type Error = R::Error;

    async fn reconcile(
        &self,
        request: &ClusterRequest,
        ctx: &Context,
    ) -> Result<Action, Self::Error> {
        let Some(cluster) = self.fleet.cluster(&request.cluster) else {
            tracing::debug!(%request, "the cluster was disengaged: request dropped");
            return Ok(Action::done());
        };
        self.inner.reconcile(request, &cluster, ctx).await
    }
}

/// Builds a controller of [`ClusterRequest`]s that runs the same reconciler in every cluster of
/// the fleet (see [`Fleet::controller`]).
#[must_use]
pub struct FleetBuilder<'m> {
    fleet: Fleet,
    manager: &'m Manager,
    name: Option<String>,
    primary: Option<(String, String, bool)>,
    watches: Vec<Box<dyn Watch<ClusterRequest>>>,
    workers: Option<usize>,
    every_replica: bool,
    include_local: bool,
    error: Option<String>,
}

impl std::fmt::Debug for FleetBuilder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetBuilder")
            .field("name", &self.name)
            .field("primary", &self.primary)
            .field("watches", &self.watches.len())
            .finish()
    }
}

impl Fleet {
    /// A builder of a controller that runs one reconciler in every engaged cluster: its
    /// `for_kind` and `owns` watches run in each cluster, and an owned object in cluster B
    /// enqueues its owner in cluster B. The manager's own cluster takes part only if it is
    /// engaged ([`engage_local`](Fleet::engage_local)) and not excluded
    /// ([`FleetBuilder::members_only`]).
    pub fn controller<'m>(&self, manager: &'m Manager) -> FleetBuilder<'m> {
        FleetBuilder {
            fleet: self.clone(),
            manager,
            name: None,
            primary: None,
            watches: Vec::new(),
            workers: None,
            every_replica: false,
            include_local: true,
            error: None,
        }
    }

    /// A watch of `K` in every engaged cluster except the manager's own, each object mapped to
    /// requests of a controller of the manager's own cluster (the hub): the "read in the
    /// members, write in the hub" form. Add it to a hub controller with
    /// `Controller::add_watch`.
    pub fn member_watch<K, F>(&self, scope: WatchScope, map: F) -> Box<dyn Watch<Request>>
    where
        K: CacheObject,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
        F: Fn(&ClusterName, &K) -> Vec<Request> + Send + Sync + 'static,
    {
        let local = self.local_name().clone();
        Box::new(FleetWatch {
            fleet: self.clone(),
            scope,
            map: Arc::new(map),
            filter: Arc::new(move |name: &ClusterName| *name != local),
            _kind: PhantomData,
        })
    }
}

impl<'m> FleetBuilder<'m> {
    /// Names the controller (unique in the manager).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Leaves the manager's own cluster out (it is the hub, say).
    pub fn members_only(mut self) -> Self {
        self.include_local = false;
        self
    }

    /// Runs on every replica, not only on the leader: for a fleet whose clusters are
    /// distributed across replicas ([`ShardedProvider`](crate::ShardedProvider)).
    pub fn every_replica(mut self) -> Self {
        self.every_replica = true;
        self
    }

    /// How many reconciles run at once, over all clusters (default: the manager's default).
    pub fn max_concurrent_reconciles(mut self, workers: usize) -> Self {
        self.workers = Some(workers);
        self
    }

    fn filter(&self) -> ClusterFilter {
        let local = self.fleet.local_name().clone();
        let include_local = self.include_local;
        Arc::new(move |name: &ClusterName| include_local || *name != local)
    }

    /// The primary kind, watched in every cluster: an object enqueues itself in its cluster.
    pub fn for_kind<K>(mut self, scope: WatchScope) -> Self
    where
        K: CacheObject,
        K::DynamicType: Default,
        K::Scope: ScopedApi + 'static,
    {
        let dt = K::DynamicType::default();
        if let Some((kind, _, _)) = &self.primary {
            self.error.get_or_insert(format!(
                "for_kind::<{}>() called after for_kind::<{kind}>(): a controller has one primary kind",
                K::kind(&dt)
            ));
            return self;
        }
        let cluster_scoped = std::any::TypeId::of::<K::Scope>()
            == std::any::TypeId::of::<k8s_openapi::ClusterResourceScope>();
        self.primary = Some((
            K::kind(&dt).into_owned(),
            K::group(&dt).into_owned(),
            cluster_scoped,
        ));
        let map: Mapper<K, ClusterRequest> = Arc::new(|cluster: &ClusterName, object: &K| {
            vec![ClusterRequest::new(
                cluster.clone(),
                Request::from_object(object),
            )]
        });
        self.watches.push(Box::new(FleetWatch {
            fleet: self.fleet.clone(),
            scope,
            map,
            filter: self.filter(),
            _kind: PhantomData,
        }));
        self
    }

    /// An owned kind, watched in every cluster: an object enqueues its controller owner of the
    /// primary kind, in the same cluster. Call after [`for_kind`](Self::for_kind).
    pub fn owns<C>(mut self, scope: WatchScope) -> Self
    where
        C: CacheObject,
        C::DynamicType: Default,
        C::Scope: ScopedApi,
    {
        let Some((kind, group, cluster_scoped)) = self.primary.clone() else {
            self.error.get_or_insert(format!(
                "owns::<{}>() needs for_kind::<Owner>() first, to know the owner's kind",
                C::kind(&C::DynamicType::default())
            ));
            return self;
        };
        let map: Mapper<C, ClusterRequest> = Arc::new(move |cluster: &ClusterName, child: &C| {
            let meta = child.meta();
            meta.owner_references
                .iter()
                .flatten()
                .filter(|r| {
                    r.controller == Some(true)
                        && r.kind == kind
                        && r.api_version.rsplit_once('/').map_or("", |(g, _)| g) == group
                })
                .map(|r| {
                    let namespace = if cluster_scoped {
                        None
                    } else {
                        meta.namespace.clone()
                    };
                    ClusterRequest::new(cluster.clone(), Request::new(r.name.clone(), namespace))
                })
                .collect()
        });
        self.watches.push(Box::new(FleetWatch {
            fleet: self.fleet.clone(),
            scope,
            map,
            filter: self.filter(),
            _kind: PhantomData,
        }));
        self
    }

    /// The hub's objects of `K` (the manager's own cluster, which must be engaged with
    /// [`Fleet::engage_local`]), each enqueued for every member cluster, and all of them again
    /// for a member engaged later: the "from the hub to every member" form. Use with
    /// [`members_only`](Self::members_only).
    pub fn from_hub<K>(mut self, scope: WatchScope) -> Self
    where
        K: CacheObject,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        self.watches.push(Box::new(crate::watch::HubFanout::<K> {
            fleet: self.fleet.clone(),
            scope,
            _kind: PhantomData,
        }));
        self
    }

    /// A watch of your own (for example [`Fleet::member_watch`]-like mappings to
    /// [`ClusterRequest`]s).
    pub fn watches(mut self, watch: Box<dyn Watch<ClusterRequest>>) -> Self {
        self.watches.push(watch);
        self
    }

    /// Builds the controller and registers it with the manager (it needs the leader, as every
    /// controller does by default, so the manager's leader election covers the fleet).
    pub fn complete<R: FleetReconciler>(self, reconciler: R) -> Result<(), ManagerError> {
        if let Some(reason) = self.error {
            return Err(ManagerError::Builder { reason });
        }
        let name = self
            .name
            .or_else(|| self.primary.as_ref().map(|(k, _, _)| k.to_lowercase()))
            .ok_or(ManagerError::MissingName)?;
        if self.watches.is_empty() {
            return Err(ManagerError::Builder {
                reason: format!(
                    "multi-cluster controller {name} has no watch: use for_kind, from_hub or watches"
                ),
            });
        }
        let mut builder = self
            .manager
            .keyed_controller::<ClusterRequest>()
            .named(name);
        if let Some(workers) = self.workers {
            builder = builder.max_concurrent_reconciles(workers);
        }
        if self.every_replica {
            builder = builder.needs_leader_election(false);
        }
        let mut controller = builder.build(InCluster {
            fleet: self.fleet.clone(),
            inner: reconciler,
        })?;
        for watch in self.watches {
            controller.add_watch(watch);
        }
        self.manager.add_controller(controller)
    }
}
