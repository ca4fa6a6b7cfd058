//! A watch that follows the fleet: the same cached watch in every engaged cluster, its events
//! mapped to the controller's keys, started when a cluster is engaged and stopped when it goes.

use std::collections::{BTreeSet, HashMap};
use std::marker::PhantomData;
use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use kcr_controller::{BoxError, Key, StartedWatch, Watch};
use kcr_queue::WorkQueue;
use kcr_source::{CacheObject, Event, ScopedApi, Source, WatchScope};
use tokio_util::sync::CancellationToken;

use crate::cluster::{Cluster, ClusterName};
use crate::fleet::Fleet;

/// Maps an object of one cluster to the keys it enqueues.
pub(crate) type Mapper<K, Q> = Arc<dyn Fn(&ClusterName, &K) -> Vec<Q> + Send + Sync>;

/// Which clusters a watch runs in.
pub(crate) type ClusterFilter = Arc<dyn Fn(&ClusterName) -> bool + Send + Sync>;

/// The watch of `K` in every engaged cluster that `filter` admits.
pub(crate) struct FleetWatch<K, Q> {
    pub fleet: Fleet,
    pub scope: WatchScope,
    pub map: Mapper<K, Q>,
    pub filter: ClusterFilter,
    pub _kind: PhantomData<fn() -> K>,
}

impl<K, Q> Watch<Q> for FleetWatch<K, Q>
where
    K: CacheObject,
    K::DynamicType: Default,
    K::Scope: ScopedApi,
    Q: Key,
{
    fn describe(&self) -> String {
        format!(
            "{} in every engaged cluster",
            K::kind(&K::DynamicType::default())
        )
    }

    fn start(
        self: Box<Self>,
        queue: WorkQueue<Q>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, Result<StartedWatch, BoxError>> {
        let fleet = self.fleet.clone();
        let pump = Box::pin(async move { self.follow(queue, stop).await });
        Box::pin(async move {
            Ok(StartedWatch {
                pump,
                // A fleet has no "synced": clusters come and go, and one that cannot be reached
                // must not hold up the others. Per-cluster sync is readiness (`Fleet::unready`).
                synced: Box::pin(async { Ok(()) }),
                diagnose: Box::new(move || {
                    Box::pin(async move {
                        let unready = fleet.unready();
                        (!unready.is_empty()).then(|| format!("clusters not synced: {unready:?}"))
                    })
                }),
            })
        })
    }
}

impl<K, Q> FleetWatch<K, Q>
where
    K: CacheObject,
    K::DynamicType: Default,
    K::Scope: ScopedApi,
    Q: Key,
{
    /// Starts and stops the per-cluster watches as the fleet changes, until `stop`.
    async fn follow(self, queue: WorkQueue<Q>, stop: CancellationToken) -> Result<(), BoxError> {
        let mut changes = self.fleet.subscribe();
        let mut running: HashMap<(ClusterName, u64), CancellationToken> = HashMap::new();
        loop {
            let engaged: BTreeSet<(ClusterName, u64)> = self
                .fleet
                .engaged()
                .into_iter()
                .filter(|(name, _)| (self.filter)(name))
                .collect();
            running.retain(|key, token| {
                let keep = engaged.contains(key);
                if !keep {
                    token.cancel();
                }
                keep
            });
            for key in engaged {
                if running.contains_key(&key) {
                    continue;
                }
                let Some(cluster) = self.fleet.cluster(&key.0) else {
                    continue;
                };
                if cluster.epoch() != key.1 {
                    continue;
                }
                let token = stop.child_token();
                running.insert(key, token.clone());
                tokio::spawn(self.pump_cluster(cluster, queue.clone(), token));
            }
            tokio::select! {
                _ = stop.cancelled() => break,
                changed = changes.changed() => if changed.is_err() { break },
            }
        }
        for token in running.values() {
            token.cancel();
        }
        Ok(())
    }

    /// Moves the events of `K` in `cluster` into `queue` until `stop`.
    fn pump_cluster(
        &self,
        cluster: Cluster,
        queue: WorkQueue<Q>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, ()> {
        let (fleet, scope, map) = (self.fleet.clone(), self.scope.clone(), self.map.clone());
        Box::pin(async move {
            let kind_name = K::kind(&K::DynamicType::default()).into_owned();
            let started = cluster
                .cache()
                .kind::<K>(scope)
                .map_err(|e| e.to_string())
                .and_then(|kind| kind.start().map_err(|e| e.to_string()));
            let started = match started {
                Ok(started) => started,
                Err(error) => {
                    tracing::error!(cluster = %cluster.name(), kind = %kind_name, %error, "could not watch the cluster");
                    return;
                }
            };
            fleet.track_sync(&cluster, kind_name.clone(), started.sync.clone());
            let mut events = started.events;
            let name = cluster.name().clone();
            loop {
                let event = tokio::select! {
                    _ = stop.cancelled() => return,
                    e = events.next() => e,
                };
                match event {
                    None => return,
                    Some(Err(error)) => {
                        tracing::warn!(cluster = %name, kind = %kind_name, %error, "watch error");
                    }
                    Some(Ok(event)) => {
                        if let Event::Update { old, .. } = &event {
                            for key in map(&name, old) {
                                queue.add(key);
                            }
                        }
                        for key in map(&name, event.object()) {
                            queue.add(key);
                        }
                    }
                }
            }
        })
    }
}

/// The hub's objects of `K`, each fanned out to a request in every engaged member cluster; a
/// member engaged later gets a request for every hub object then.
pub(crate) struct HubFanout<K> {
    pub fleet: Fleet,
    pub scope: WatchScope,
    pub _kind: PhantomData<fn() -> K>,
}

impl<K> Watch<crate::ClusterRequest> for HubFanout<K>
where
    K: CacheObject,
    K::DynamicType: Default,
    K::Scope: ScopedApi,
{
    fn describe(&self) -> String {
        format!(
            "{} in the hub, to every member",
            K::kind(&K::DynamicType::default())
        )
    }

    fn start(
        self: Box<Self>,
        queue: WorkQueue<crate::ClusterRequest>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, Result<StartedWatch, BoxError>> {
        Box::pin(async move {
            let local = self.fleet.local_name().clone();
            let hub = self.fleet.cluster(&local).ok_or_else(|| {
                format!("the hub (the manager's own cluster, {local}) is not engaged: call Fleet::engage_local")
            })?;
            let kind = hub.cache().kind::<K>(self.scope.clone())?;
            let reader = hub.cache().reader::<K>(self.scope.clone())?;
            let started = kind.start()?;
            let sync = started.sync.clone();
            let mut events = started.events;
            let fleet = self.fleet.clone();
            let members = move |fleet: &Fleet| -> Vec<ClusterName> {
                fleet.names().into_iter().filter(|n| *n != local).collect()
            };
            let pump = Box::pin(async move {
                let mut changes = fleet.subscribe();
                let mut known: BTreeSet<(ClusterName, u64)> = BTreeSet::new();
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => return Ok(()),
                        changed = changes.changed() => {
                            if changed.is_err() {
                                return Ok(());
                            }
                            let now: BTreeSet<(ClusterName, u64)> = fleet
                                .engaged()
                                .into_iter()
                                .filter(|(n, _)| members(&fleet).contains(n))
                                .collect();
                            for (member, _) in now.difference(&known) {
                                for object in reader.list() {
                                    queue.add(crate::ClusterRequest::new(
                                        member.clone(),
                                        kcr_handler::Request::from_object(object.as_ref()),
                                    ));
                                }
                            }
                            known = now;
                        }
                        event = events.next() => match event {
                            None => return Ok(()),
                            Some(Err(error)) => tracing::warn!(%error, "hub watch error"),
                            Some(Ok(event)) => {
                                let request = kcr_handler::Request::from_object(event.object().as_ref());
                                for member in members(&fleet) {
                                    queue.add(crate::ClusterRequest::new(member, request.clone()));
                                }
                            }
                        },
                    }
                }
            });
            Ok(StartedWatch {
                pump,
                synced: Box::pin(
                    async move { sync.wait().await.map_err(|e| Box::new(e) as BoxError) },
                ),
                diagnose: Box::new(|| Box::pin(async { None })),
            })
        })
    }
}
