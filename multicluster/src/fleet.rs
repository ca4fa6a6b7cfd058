//! The fleet: the clusters engaged now, engagement and disengagement, and their readiness.
//!
//! Providers ([`crate::provider`]) engage and disengage clusters; multi-cluster controllers
//! follow the fleet ([`Fleet::subscribe`]) and start or stop their watches in each cluster.
//! When a cluster is disengaged its cache is stopped (its informers end and their stores are
//! released once the last reader is dropped) and the requests still queued for it are finished
//! as no-ops by the controllers (their reconciler is not called).
//!
//! A member's client is bounded by kcr-connect ([`Fleet::connection`]): no request or watch
//! waits on a dead connection, and a member whose server stops answering (a silent network
//! partition) shows as not ready on `/readyz/fleet` within those bounds, at the first request
//! or watch of its that times out, and ready again at its first answer.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kcr_controller::{Manager, ManagerError};
use kcr_source::{Cache, SyncHandle};
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::cluster::{Cluster, ClusterName};
use crate::error::FleetError;
use crate::metrics;

/// The clusters a manager reconciles across. Cheap to clone; every clone is the same fleet.
#[derive(Clone)]
pub struct Fleet {
    inner: Arc<Inner>,
}

struct Engagement {
    cluster: Cluster,
    /// Whether its server answers (members; the manager's own cluster has none here).
    health: Option<kcr_connect::Health>,
    /// Whether the fleet made the cache (and stops it on disengagement).
    owns_cache: bool,
    /// The sync handles of the watches started in the cluster.
    syncs: Vec<(String, SyncHandle)>,
}

struct Inner {
    local: ClusterName,
    connection: Mutex<kcr_connect::ConnectionOptions>,
    clusters: Mutex<BTreeMap<ClusterName, Engagement>>,
    errors: Mutex<BTreeMap<ClusterName, String>>,
    changed: watch::Sender<u64>,
    epoch: AtomicU64,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("local", &self.inner.local)
            .field("clusters", &self.names())
            .finish()
    }
}

impl Fleet {
    /// An empty fleet; `local_name` is the name the manager's own cluster gets when
    /// [`engage_local`](Self::engage_local) adds it.
    pub fn new(local_name: impl Into<ClusterName>) -> Self {
        let (changed, _) = watch::channel(0);
        Fleet {
            inner: Arc::new(Inner {
                local: local_name.into(),
                connection: Mutex::new(kcr_connect::ConnectionOptions::default()),
                clusters: Mutex::new(BTreeMap::new()),
                errors: Mutex::new(BTreeMap::new()),
                changed,
                epoch: AtomicU64::new(0),
            }),
        }
    }

    /// The name of the manager's own cluster in this fleet.
    pub fn local_name(&self) -> &ClusterName {
        &self.inner.local
    }

    /// Sets the bounds on the requests, watches and connections of the member clusters engaged
    /// from now on (kcr-connect's [`ConnectionOptions`](kcr_connect::ConnectionOptions); the
    /// defaults unless set). The manager's own cluster keeps the manager's.
    #[must_use]
    pub fn connection(self, options: kcr_connect::ConnectionOptions) -> Self {
        *self.inner.connection.lock() = options;
        self
    }

    /// Engages the manager's own cluster under [`local_name`](Self::local_name), sharing the
    /// manager's client and cache (which disengaging it does not stop).
    pub fn engage_local(&self, manager: &Manager) -> Cluster {
        let name = self.inner.local.clone();
        self.insert(
            name,
            manager.kube_client(),
            None,
            manager.cache().clone(),
            false,
        )
    }

    /// Engages `name` with `client` and a new cache of its own. An engaged cluster of the same
    /// name is replaced: its watches stop and the controllers start new ones on this one. The
    /// client's requests are bounded by [`Fleet::connection`] (kcr-connect's `bound`; its
    /// connections keep their own settings, so prefer [`Fleet::engage_kubeconfig`], whose
    /// client kcr-connect builds).
    pub fn engage(&self, name: impl Into<ClusterName>, client: kube::Client) -> Cluster {
        let name = name.into();
        let options = self.inner.connection.lock().clone();
        let (client, health) = kcr_connect::bound_with_health(client, options, name.to_string());
        let cache = Cache::new(client.clone());
        self.insert(name, client, Some(health), cache, true)
    }

    fn engage_connected(
        &self,
        name: ClusterName,
        client: kube::Client,
        health: kcr_connect::Health,
    ) -> Cluster {
        let cache = Cache::new(client.clone());
        self.insert(name, client, Some(health), cache, true)
    }

    /// Engages `name` from a kubeconfig (its current context); a kubeconfig that cannot be
    /// turned into a client fails with [`FleetError::Kubeconfig`], which is also recorded
    /// ([`errors`](Self::errors)).
    pub async fn engage_kubeconfig(
        &self,
        name: impl Into<ClusterName>,
        kubeconfig: kube::config::Kubeconfig,
    ) -> Result<Cluster, FleetError> {
        let name = name.into();
        let options = kube::config::KubeConfigOptions::default();
        let connection = self.inner.connection.lock().clone();
        let client = match kube::Config::from_custom_kubeconfig(kubeconfig, &options).await {
            Ok(config) => {
                kcr_connect::client_with_health(config, connection).map_err(|e| e.to_string())
            }
            Err(e) => Err(e.to_string()),
        };
        match client {
            Ok((client, health)) => Ok(self.engage_connected(name, client, health)),
            Err(reason) => Err(self.record_error(&name, reason)),
        }
    }

    /// Records why `name` could not be engaged (shown by [`errors`](Self::errors) and the
    /// fleet's readiness check) and returns it as an error.
    pub(crate) fn record_error(&self, name: &ClusterName, reason: String) -> FleetError {
        tracing::warn!(cluster = %name, %reason, "cluster not engaged");
        self.inner
            .errors
            .lock()
            .insert(name.clone(), reason.clone());
        FleetError::Kubeconfig {
            cluster: name.to_string(),
            reason,
        }
    }

    fn insert(
        &self,
        name: ClusterName,
        client: kube::Client,
        health: Option<kcr_connect::Health>,
        cache: Cache,
        owns_cache: bool,
    ) -> Cluster {
        let epoch = self.inner.epoch.fetch_add(1, Ordering::SeqCst) + 1;
        let cluster = Cluster::new(name.clone(), client, cache, epoch);
        let previous = self.inner.clusters.lock().insert(
            name.clone(),
            Engagement {
                cluster: cluster.clone(),
                health,
                owns_cache,
                syncs: Vec::new(),
            },
        );
        self.inner.errors.lock().remove(&name);
        if let Some(old) = previous {
            stop(old);
        }
        tracing::info!(cluster = %name, epoch, "cluster engaged");
        self.publish();
        cluster
    }

    /// Disengages `name`: controllers stop its watches, its cache is stopped, requests still
    /// queued for it finish without a reconcile. `false` if it was not engaged.
    pub fn disengage(&self, name: &ClusterName) -> bool {
        let removed = self.inner.clusters.lock().remove(name);
        let found = removed.is_some();
        if let Some(old) = removed {
            stop(old);
            metrics::cluster_ready(name, false);
            tracing::info!(cluster = %name, "cluster disengaged");
            self.publish();
        }
        found
    }

    /// Forgets the recorded engagement error of `name` (its source went away).
    pub(crate) fn clear_error(&self, name: &ClusterName) {
        self.inner.errors.lock().remove(name);
    }

    /// The engaged cluster `name`.
    pub fn cluster(&self, name: &ClusterName) -> Option<Cluster> {
        self.inner
            .clusters
            .lock()
            .get(name)
            .map(|e| e.cluster.clone())
    }

    /// Every engaged cluster, by name.
    pub fn clusters(&self) -> Vec<Cluster> {
        self.inner
            .clusters
            .lock()
            .values()
            .map(|e| e.cluster.clone())
            .collect()
    }

    /// The names of the engaged clusters, sorted.
    pub fn names(&self) -> Vec<ClusterName> {
        self.inner.clusters.lock().keys().cloned().collect()
    }

    /// Clusters a provider reported but that could not be engaged, with the reason.
    pub fn errors(&self) -> BTreeMap<ClusterName, String> {
        self.inner.errors.lock().clone()
    }

    /// A receiver that changes whenever a cluster is engaged or disengaged.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.changed.subscribe()
    }

    /// Engaged clusters with a watch that has not synced yet (unreachable, slow, or forbidden)
    /// or whose server stopped answering (its latest request or watch timed out), each with
    /// the watches still waiting and what timed out.
    pub fn unready(&self) -> BTreeMap<ClusterName, Vec<String>> {
        let clusters = self.inner.clusters.lock();
        let mut out = BTreeMap::new();
        for (name, e) in clusters.iter() {
            let mut waiting: Vec<String> = e
                .syncs
                .iter()
                .filter(|(_, h)| !h.is_synced())
                .map(|(what, _)| what.clone())
                .collect();
            if let Some(Err(why)) = e.health.as_ref().map(kcr_connect::Health::check) {
                waiting.push(format!("unreachable ({why})"));
            }
            metrics::cluster_ready(name, waiting.is_empty());
            if !waiting.is_empty() {
                out.insert(name.clone(), waiting);
            }
        }
        out
    }

    /// Tracks the sync of a watch started in `cluster` (for readiness); ignored if that
    /// engagement is gone.
    pub(crate) fn track_sync(&self, cluster: &Cluster, what: String, handle: SyncHandle) {
        let mut clusters = self.inner.clusters.lock();
        if let Some(e) = clusters.get_mut(cluster.name())
            && e.cluster.epoch() == cluster.epoch()
        {
            e.syncs.retain(|(w, _)| *w != what);
            e.syncs.push((what, handle));
        }
    }

    /// Serves the fleet's readiness at `/readyz/fleet` (failing while an engaged cluster has
    /// an unsynced watch or a reported cluster could not be engaged, naming each) and keeps
    /// the `kcr_multicluster_*` metrics.
    pub fn install(&self, manager: &Manager) -> Result<(), ManagerError> {
        let fleet = self.clone();
        manager.add_readyz_check("fleet", move || {
            let unready = fleet.unready();
            let errors = fleet.errors();
            if unready.is_empty() && errors.is_empty() {
                return Ok(());
            }
            let mut parts: Vec<String> = unready
                .iter()
                .map(|(c, w)| format!("cluster {c} not ready: {}", w.join(", ")))
                .collect();
            parts.extend(
                errors
                    .iter()
                    .map(|(c, e)| format!("cluster {c} not engaged: {e}")),
            );
            Err(parts.join("; "))
        })
    }

    fn publish(&self) {
        let n = self.inner.clusters.lock().len();
        metrics::engaged_clusters(n);
        self.inner.changed.send_modify(|v| *v += 1);
    }

    /// The engaged clusters as `(name, epoch)` pairs, for the controllers' diffs.
    pub(crate) fn engaged(&self) -> BTreeSet<(ClusterName, u64)> {
        self.inner
            .clusters
            .lock()
            .values()
            .map(|e| (e.cluster.name().clone(), e.cluster.epoch()))
            .collect()
    }
}

fn stop(old: Engagement) {
    if old.owns_cache {
        old.cluster.cache().stop();
    }
}
