//! A fleet sharded across two replicas (kcr-shard's member Leases and ring): each cluster is
//! engaged and reconciled by exactly one replica, and when one replica stops the other takes
//! every cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_controller::{Action, Context, Manager, ManagerOptions};
use kcr_envtest::{TestApiServer, eventually};
use kcr_multicluster::{
    Cluster, ClusterRequest, Fleet, FleetReconciler, ShardedProvider, StaticProvider,
};
use kcr_shard::{ShardConfig, member_lease_name};
use kcr_source::WatchScope;
use kube::api::{Api, PostParams};
use parking_lot::Mutex;

const WAIT: Duration = Duration::from_secs(60);

/// `(replica, cluster, object)` of every reconcile.
type Seen = Arc<Mutex<Vec<(String, String, String)>>>;

struct Recorder {
    replica: String,
    seen: Seen,
}

impl FleetReconciler for Recorder {
    type Error = std::convert::Infallible;
    async fn reconcile(
        &self,
        request: &ClusterRequest,
        _cluster: &Cluster,
        _ctx: &Context,
    ) -> Result<Action, Self::Error> {
        self.seen.lock().push((
            self.replica.clone(),
            request.cluster.to_string(),
            request.request.name.clone(),
        ));
        Ok(Action::done())
    }
}

async fn create_cm(server: &TestApiServer, name: &str) {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.data = Some(BTreeMap::from([("v".to_string(), "1".to_string())]));
    Api::<ConfigMap>::namespaced(server.client(), server.namespace())
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
}

fn names(fleet: &Fleet) -> BTreeSet<String> {
    fleet.names().iter().map(|n| n.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_cluster_has_one_replica_and_a_stopped_replica_s_clusters_move() {
    let (hub, m0, m1, m2, m3) = tokio::try_join!(
        TestApiServer::start(),
        TestApiServer::start(),
        TestApiServer::start(),
        TestApiServer::start(),
        TestApiServer::start(),
    )
    .unwrap();
    let members = [("m0", &m0), ("m1", &m1), ("m2", &m2), ("m3", &m3)];
    let all: BTreeSet<String> = members.iter().map(|(n, _)| n.to_string()).collect();
    let seen: Seen = Arc::default();
    let mut replicas = Vec::new();
    for replica in ["r-0", "r-1"] {
        let mgr = Manager::new(
            hub.client(),
            ManagerOptions::default()
                .metrics_bind_address("127.0.0.1:0")
                .unwrap()
                .health_probe_bind_address("127.0.0.1:0")
                .unwrap(),
        )
        .await
        .unwrap();
        let fleet = Fleet::new("hub");
        let mut provider = StaticProvider::new();
        for (name, server) in members {
            provider = provider.client(name, server.client());
        }
        let config = ShardConfig::new("fleet")
            .namespace(hub.namespace())
            .identity(replica)
            // Long Leases: a replica that misses renewals on a loaded machine would move its
            // clusters mid-test; a stopped replica releases its Lease, so moves stay fast.
            .timings(
                Duration::from_secs(15),
                Duration::from_secs(10),
                Duration::from_millis(250),
            );
        fleet
            .run_provider(&mgr, ShardedProvider::new(provider, hub.client(), config))
            .unwrap();
        fleet
            .controller(&mgr)
            .named("recorder")
            .every_replica()
            .for_kind::<ConfigMap>(WatchScope::all().namespace(m0.namespace()))
            .complete(Recorder {
                replica: replica.to_string(),
                seen: seen.clone(),
            })
            .unwrap();
        let mgr = Arc::new(mgr);
        let stop = tokio_util::sync::CancellationToken::new();
        let run = tokio::spawn({
            let (mgr, stop) = (mgr.clone(), stop.clone());
            async move { mgr.run(stop).await }
        });
        replicas.push((replica, fleet, stop, run));
    }

    // Both replicas are members (a replica owns nothing until its own Lease is visible, so
    // before that one replica owning everything would look settled)...
    let leases: Api<Lease> = Api::namespaced(hub.client(), hub.namespace());
    eventually("both member Leases are held", WAIT, || {
        let leases = leases.clone();
        async move {
            let mut held = 0;
            for r in ["r-0", "r-1"] {
                let lease = leases.get_opt(&member_lease_name("fleet", r)).await;
                let holder = lease.ok().flatten().and_then(|l| l.spec?.holder_identity);
                held += usize::from(holder.as_deref() == Some(r));
            }
            held == 2
        }
    })
    .await;
    // ...and settled: the two replicas' clusters are disjoint and cover the fleet.
    eventually("the clusters are split between the replicas", WAIT, || {
        let (a, b) = (names(&replicas[0].1), names(&replicas[1].1));
        let all = all.clone();
        async move { a.is_disjoint(&b) && a.union(&b).cloned().collect::<BTreeSet<_>>() == all }
    })
    .await;
    let owner: BTreeMap<String, &str> = replicas
        .iter()
        .flat_map(|(r, fleet, _, _)| names(fleet).into_iter().map(move |c| (c, *r)))
        .collect();
    for (name, server) in members {
        create_cm(server, &format!("first-{name}")).await;
    }
    eventually("every cluster's object is reconciled", WAIT, || {
        let seen = seen.clone();
        async move {
            ["m0", "m1", "m2", "m3"].iter().all(|c| {
                seen.lock()
                    .iter()
                    .any(|(_, cl, o)| cl == c && *o == format!("first-{c}"))
            })
        }
    })
    .await;
    for (replica, cluster, object) in seen.lock().iter() {
        if object.starts_with("first-") {
            assert_eq!(
                owner[cluster], replica,
                "{cluster}'s {object} reconciled by {replica}, not by its owner"
            );
        }
    }

    // r-0 stops (releasing its Lease): r-1 takes every cluster.
    let (_, _, stop0, run0) = replicas.remove(0);
    stop0.cancel();
    run0.await.unwrap().unwrap();
    let r1 = replicas[0].1.clone();
    eventually("r-1 has every cluster", WAIT, || {
        let r1 = r1.clone();
        let all = all.clone();
        async move { names(&r1) == all }
    })
    .await;
    for (name, server) in members {
        create_cm(server, &format!("second-{name}")).await;
    }
    eventually("r-1 reconciles every cluster", WAIT, || {
        let seen = seen.clone();
        async move {
            ["m0", "m1", "m2", "m3"].iter().all(|c| {
                seen.lock()
                    .iter()
                    .any(|(r, cl, o)| r == "r-1" && cl == c && *o == format!("second-{c}"))
            })
        }
    })
    .await;
    for (_, _, stop, run) in replicas {
        stop.cancel();
        run.await.unwrap().unwrap();
    }
}
