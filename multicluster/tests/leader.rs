//! The manager's leader election covers the fleet: of two replicas with the same fleet, only
//! the leader reconciles in the member clusters.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcr_controller::{Action, Context, LeaderElectionConfig, Manager, ManagerOptions};
use kcr_envtest::{TestApiServer, eventually};
use kcr_multicluster::{Cluster, ClusterRequest, Fleet, FleetReconciler, StaticProvider};
use kcr_source::WatchScope;
use kube::api::{Api, PostParams};
use parking_lot::Mutex;

/// Records which replica reconciled what.
#[derive(Clone)]
struct ByReplica {
    replica: &'static str,
    seen: Arc<Mutex<Vec<(&'static str, String)>>>,
}

impl FleetReconciler for ByReplica {
    type Error = std::convert::Infallible;
    async fn reconcile(
        &self,
        request: &ClusterRequest,
        _cluster: &Cluster,
        _ctx: &Context,
    ) -> Result<Action, Self::Error> {
        self.seen.lock().push((self.replica, request.to_string()));
        Ok(Action::done())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_reconciles_the_fleet() {
    let (hub, member) = tokio::try_join!(TestApiServer::start(), TestApiServer::start()).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut replicas = Vec::new();
    for replica in ["r-0", "r-1"] {
        let mut election = LeaderElectionConfig::new("fleet-leader")
            .identity(replica)
            .timings(
                Duration::from_secs(15),
                Duration::from_secs(10),
                Duration::from_millis(200),
            );
        election.namespace = Some(hub.namespace().to_string());
        let mgr = Manager::new(
            hub.client(),
            ManagerOptions::default()
                .metrics_bind_address("127.0.0.1:0")
                .unwrap()
                .health_probe_bind_address("127.0.0.1:0")
                .unwrap()
                .leader_election(election),
        )
        .await
        .unwrap();
        let fleet = Fleet::new("hub");
        fleet
            .run_provider(
                &mgr,
                StaticProvider::new().client("member", member.client()),
            )
            .unwrap();
        fleet
            .controller(&mgr)
            .named("recorder")
            .for_kind::<ConfigMap>(WatchScope::all().namespace(member.namespace()))
            .complete(ByReplica {
                replica,
                seen: seen.clone(),
            })
            .unwrap();
        let mgr = Arc::new(mgr);
        let stop = tokio_util::sync::CancellationToken::new();
        let run = tokio::spawn({
            let (mgr, stop) = (mgr.clone(), stop.clone());
            async move { mgr.run(stop).await }
        });
        replicas.push((replica, mgr, stop, run));
    }
    eventually("one replica leads", Duration::from_secs(60), || {
        let leaders = replicas.iter().filter(|r| r.1.is_leader()).count();
        async move { leaders == 1 }
    })
    .await;
    let leader = replicas.iter().find(|r| r.1.is_leader()).unwrap().0;
    for i in 0..5 {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(format!("cm-{i}"));
        cm.data = Some(BTreeMap::from([("v".to_string(), "1".to_string())]));
        Api::<ConfigMap>::namespaced(member.client(), member.namespace())
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
    }
    eventually(
        "the member's objects are reconciled",
        Duration::from_secs(60),
        || {
            let seen = seen.clone();
            async move {
                (0..5).all(|i| {
                    seen.lock()
                        .iter()
                        .any(|(_, k)| k.ends_with(&format!("/cm-{i}")))
                })
            }
        },
    )
    .await;
    // The follower never started the controller: every record is the leader's.
    assert!(
        seen.lock().iter().all(|(r, _)| *r == leader),
        "leader {leader}: {:?}",
        seen.lock()
    );
    assert_eq!(
        replicas.iter().filter(|r| r.1.is_leader()).count(),
        1,
        "still one leader"
    );
    for (_, _, stop, run) in replicas {
        stop.cancel();
        run.await.unwrap().unwrap();
    }
}
