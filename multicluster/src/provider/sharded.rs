//! Clusters distributed across the replicas of an operator.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use k8s_openapi::api::coordination::v1::Lease;
use kcr_controller::{LeaderElectionConfig, LeaderElector};
use kcr_shard::{HashRing, MemberObserver, ShardConfig, member_lease_name};
use kube::Api;
use kube::api::ListParams;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Provider;
use crate::cluster::ClusterName;
use crate::error::FleetError;
use crate::fleet::Fleet;

/// Wraps a provider so that each replica engages only its share of the clusters: replicas
/// hold member Leases of a kcr-shard group ([`ShardConfig`]: group, Lease namespace, identity,
/// timings, virtual nodes), and a consistent-hash ring of the live members assigns every
/// cluster name to exactly one of them. When a replica joins or its Lease expires, the
/// clusters that move are disengaged on one replica and engaged on the other.
///
/// Use it with controllers that run on every replica
/// ([`FleetBuilder::every_replica`](crate::FleetBuilder::every_replica)), since each replica
/// reconciles only its own clusters.
///
/// Limits: the move is not drained as kcr-shard's object moves are. During a membership change
/// the old and the new owner may both reconcile a moving cluster's objects for up to one
/// `retry_period` (each replica re-reads the Leases on its own); a dead replica's clusters move
/// once its Lease has expired as the others observe it (`lease_duration` after its last
/// renewal). A replica that cannot renew its Lease disengages its clusters.
#[must_use]
pub struct ShardedProvider<P> {
    inner: P,
    client: kube::Client,
    config: ShardConfig,
}

impl<P> std::fmt::Debug for ShardedProvider<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardedProvider")
            .field("config", &self.config)
            .finish()
    }
}

impl<P: Provider> ShardedProvider<P> {
    /// Shards the clusters of `inner` across the replicas running the same `config.name`,
    /// their Leases read and written with `client` (the manager's own).
    pub fn new(inner: P, client: kube::Client, config: ShardConfig) -> Self {
        ShardedProvider {
            inner,
            client,
            config,
        }
    }
}

impl<P: Provider> Provider for ShardedProvider<P> {
    fn name(&self) -> String {
        format!("sharded/{}/{}", self.config.name, self.inner.name())
    }

    fn run(
        self: Box<Self>,
        fleet: Fleet,
        stop: CancellationToken,
    ) -> BoxFuture<'static, Result<(), FleetError>> {
        Box::pin(async move {
            let ShardedProvider {
                inner,
                client,
                config,
            } = *self;
            let bad = |reason: String| FleetError::Provider {
                provider: format!("sharded/{}", config.name),
                reason,
            };
            config.validate().map_err(|e| bad(e.to_string()))?;
            let namespace = config
                .namespace
                .clone()
                .unwrap_or_else(|| client.default_namespace().to_string());
            // Every cluster the inner provider reports, engaged on a fleet of its own: the
            // clients are made once and handed over to `fleet` for this replica's share.
            let all = Fleet::new(fleet.local_name().clone());
            let inner_stop = stop.child_token();
            let mut inner_task = tokio::spawn(Box::new(inner).run(all.clone(), inner_stop.clone()));

            let mut election =
                LeaderElectionConfig::new(member_lease_name(&config.name, &config.identity))
                    .identity(config.identity.clone())
                    .timings(
                        config.timings.lease_duration,
                        config.timings.renew_deadline,
                        config.timings.retry_period,
                    )
                    .release_on_cancel(config.release_on_cancel);
            election.namespace = Some(namespace.clone());
            let elector = LeaderElector::new(client.clone(), election);
            let lost = CancellationToken::new();
            let member_stop = stop.child_token();
            let member = tokio::spawn({
                let (lost, member_stop) = (lost.clone(), member_stop.clone());
                async move {
                    if !elector.acquire(&member_stop).await {
                        return;
                    }
                    let res = elector.renew_until_lost(&member_stop).await;
                    if res.is_err() {
                        lost.cancel();
                    } else if elector.config().release_on_cancel {
                        let _ = elector.release().await;
                    }
                }
            });

            let leases: Api<Lease> = Api::namespaced(client, &namespace);
            let mut observer =
                MemberObserver::new(config.name.clone(), config.timings.lease_duration);
            let mut changes = all.subscribe();
            // Which engagement of `all` each of this replica's clusters came from.
            let mut mine: BTreeMap<ClusterName, u64> = BTreeMap::new();
            let result = loop {
                let members = match leases.list(&ListParams::default()).await {
                    Ok(list) => Some(observer.observe(&list.items, Instant::now())),
                    Err(error) => {
                        tracing::warn!(%error, "sharded provider: listing member Leases");
                        None
                    }
                };
                if let Some(members) = members {
                    let alive = members.alive;
                    let ring = (alive.contains(&config.identity) && !lost.is_cancelled())
                        .then(|| HashRing::new(alive.iter().cloned(), config.virtual_nodes));
                    let mut wanted = BTreeMap::new();
                    for cluster in all.clusters() {
                        let owner = ring.as_ref().and_then(|r| r.owner(cluster.name().as_str()));
                        if owner == Some(config.identity.as_str()) {
                            wanted.insert(cluster.name().clone(), cluster);
                        }
                    }
                    let gone: Vec<ClusterName> = mine
                        .iter()
                        .filter(|(name, epoch)| {
                            wanted.get(*name).map(|c| c.epoch()) != Some(**epoch)
                        })
                        .map(|(name, _)| name.clone())
                        .collect();
                    for name in gone {
                        fleet.disengage(&name);
                        mine.remove(&name);
                    }
                    for (name, cluster) in wanted {
                        if mine.contains_key(&name) {
                            continue;
                        }
                        fleet.engage(name.clone(), cluster.client());
                        mine.insert(name, cluster.epoch());
                    }
                }
                tokio::select! {
                    _ = stop.cancelled() => break Ok(()),
                    _ = lost.cancelled() => {
                        // Without a Lease, the others may take these clusters: let them go.
                        for name in std::mem::take(&mut mine).into_keys() {
                            fleet.disengage(&name);
                        }
                        break Err(bad(format!("member {} lost its Lease", config.identity)));
                    }
                    res = &mut inner_task => {
                        break match res {
                            Ok(res) => res,
                            Err(e) => Err(bad(format!("the inner provider panicked: {e}"))),
                        };
                    }
                    _ = changes.changed() => {}
                    _ = tokio::time::sleep(config.timings.retry_period) => {}
                }
            };
            inner_stop.cancel();
            member_stop.cancel();
            let _ = member.await;
            for name in mine.into_keys() {
                fleet.disengage(&name);
            }
            result
        })
    }
}
