//! A fleet of kcr-envtest servers (in process by default; `KCR_ENVTEST_BACKEND=real` runs a
//! kube-apiserver + etcd per cluster): clusters engaged from Secrets, removed and added at run
//! time, an owned object enqueuing its owner in its own cluster, a bad kubeconfig reported
//! without harm to the others, and a cluster whose API server stops not delaying the others.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kcr_controller::{Action, Context, Manager, ManagerOptions};
use kcr_envtest::{TestApiServer, eventually};
use kcr_multicluster::{
    Cluster, ClusterName, ClusterRequest, Fleet, FleetReconciler, SecretProvider,
};
use kcr_source::WatchScope;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use parking_lot::Mutex;

const WAIT: Duration = Duration::from_secs(60);

/// A minimal HTTP/1.1 GET of a probe or metrics endpoint: `(status, body)`.
async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let text = String::from_utf8_lossy(&response).to_string();
    let status = text.split(' ').nth(1).unwrap().parse().unwrap();
    (status, text)
}
const LABEL: &str = "kcr.io/cluster=true";

fn options() -> ManagerOptions {
    ManagerOptions::default()
        .metrics_bind_address("127.0.0.1:0")
        .unwrap()
        .health_probe_bind_address("127.0.0.1:0")
        .unwrap()
}

/// Records `(cluster, name)` of every reconcile and checks the cluster handed over is the
/// request's.
#[derive(Clone, Default)]
struct Record(Arc<Mutex<Vec<(String, String)>>>);

impl Record {
    fn has(&self, cluster: &str, name: &str) -> bool {
        self.0.lock().iter().any(|(c, n)| c == cluster && n == name)
    }
}

impl FleetReconciler for Record {
    type Error = anyhow::Error;
    async fn reconcile(
        &self,
        request: &ClusterRequest,
        cluster: &Cluster,
        _ctx: &Context,
    ) -> anyhow::Result<Action> {
        anyhow::ensure!(
            *cluster.name() == request.cluster,
            "handed cluster {} for a request of {}",
            cluster.name(),
            request.cluster
        );
        self.0
            .lock()
            .push((request.cluster.to_string(), request.request.name.clone()));
        Ok(Action::done())
    }
}

fn cluster_secret(name: &str, kubeconfig: &str) -> Secret {
    let mut s = Secret::default();
    s.metadata.name = Some(name.into());
    s.metadata.labels = Some(BTreeMap::from([(
        "kcr.io/cluster".to_string(),
        "true".to_string(),
    )]));
    s.data = Some(BTreeMap::from([(
        "kubeconfig".to_string(),
        ByteString(kubeconfig.as_bytes().to_vec()),
    )]));
    s
}

async fn create_cm(server: &TestApiServer, name: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.data = Some(BTreeMap::from([("v".to_string(), "1".to_string())]));
    Api::<ConfigMap>::namespaced(server.client(), server.namespace())
        .create(&PostParams::default(), &cm)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_from_secrets_changes_at_run_time_and_one_cluster_down_stalls_no_other() {
    let (hub, east, west, north, south) = tokio::try_join!(
        TestApiServer::start(),
        TestApiServer::start(),
        TestApiServer::start(),
        TestApiServer::start(),
        TestApiServer::start(),
    )
    .unwrap();
    let secrets: Api<Secret> = Api::namespaced(hub.client(), hub.namespace());
    for (name, server) in [("east", &east), ("west", &west), ("north", &north)] {
        secrets
            .create(
                &PostParams::default(),
                &cluster_secret(name, &server.kubeconfig_yaml()),
            )
            .await
            .unwrap();
    }
    let mgr = Manager::new(hub.client(), options()).await.unwrap();
    let fleet = Fleet::new("hub");
    fleet.engage_local(&mgr);
    fleet.install(&mgr).unwrap();
    fleet
        .run_provider(
            &mgr,
            SecretProvider::new(hub.client(), hub.namespace(), LABEL),
        )
        .unwrap();
    let record = Record::default();
    let scope = WatchScope::all().namespace(east.namespace());
    fleet
        .controller(&mgr)
        .named("recorder")
        .members_only()
        .for_kind::<ConfigMap>(scope.clone())
        .owns::<Secret>(scope)
        .complete(record.clone())
        .unwrap();
    let mgr = Arc::new(mgr);
    let stop = tokio_util::sync::CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });

    // Three clusters engaged from Secrets, each reconciled in its own cluster.
    for (name, server) in [("east", &east), ("west", &west), ("north", &north)] {
        create_cm(server, &format!("cm-{name}")).await;
    }
    eventually("every member's ConfigMap is reconciled there", WAIT, || {
        let record = record.clone();
        async move {
            ["east", "west", "north"]
                .iter()
                .all(|c| record.has(c, &format!("cm-{c}")))
        }
    })
    .await;
    let names: Vec<String> = fleet.names().iter().map(|n| n.to_string()).collect();
    assert_eq!(names, ["east", "hub", "north", "west"]);
    assert!(
        !record.has("hub", "cm-east"),
        "members only: the hub is left out"
    );

    // An owned object in east enqueues its owner in east.
    let owner = Api::<ConfigMap>::namespaced(east.client(), east.namespace())
        .get("cm-east")
        .await
        .unwrap();
    record.0.lock().clear();
    let mut child = Secret::default();
    child.metadata.name = Some("child".into());
    child.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: owner.name_any(),
        uid: owner.uid().unwrap(),
        controller: Some(true),
        ..Default::default()
    }]);
    Api::<Secret>::namespaced(east.client(), east.namespace())
        .create(&PostParams::default(), &child)
        .await
        .unwrap();
    eventually("the child's owner is reconciled in east", WAIT, || {
        let record = record.clone();
        async move { record.has("east", "cm-east") }
    })
    .await;
    // Only east's owner (other objects, such as each namespace's kube-root-ca.crt, may be
    // reconciled in any cluster meanwhile).
    assert!(
        record
            .0
            .lock()
            .iter()
            .filter(|(_, n)| n == "cm-east")
            .all(|(c, _)| c == "east"),
        "cm-east only in east: {:?}",
        record.0.lock()
    );

    // A Secret with a bad kubeconfig is reported and engages nothing; the others go on.
    let mut broken = cluster_secret("broken", "not: [a kubeconfig");
    broken.metadata.name = Some("broken".into());
    secrets
        .create(&PostParams::default(), &broken)
        .await
        .unwrap();
    eventually("the broken cluster is reported", WAIT, || {
        let fleet = fleet.clone();
        async move {
            fleet
                .errors()
                .get(&ClusterName::from("broken"))
                .is_some_and(|e| e.contains("not a kubeconfig"))
        }
    })
    .await;
    assert!(fleet.cluster(&ClusterName::from("broken")).is_none());
    // Readiness says which cluster is not engaged and why; the metrics count the engaged.
    let probes = mgr.health_probe_addr().unwrap();
    let (status, body) = http_get(probes, "/readyz/fleet").await;
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("cluster broken not engaged"), "{body}");
    let (status, body) = http_get(mgr.metrics_addr().unwrap(), "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        body.lines()
            .any(|l| l == "kcr_multicluster_engaged_clusters 4"),
        "{body}"
    );

    // West removed, south added, at run time.
    let west_cluster = fleet.cluster(&ClusterName::from("west")).unwrap();
    secrets
        .delete("west", &DeleteParams::default())
        .await
        .unwrap();
    secrets
        .create(
            &PostParams::default(),
            &cluster_secret("south", &south.kubeconfig_yaml()),
        )
        .await
        .unwrap();
    eventually("west is gone and south engaged", WAIT, || {
        let fleet = fleet.clone();
        async move {
            let names = fleet.names();
            !names.contains(&"west".into()) && names.contains(&"south".into())
        }
    })
    .await;
    // West's cache was stopped: its watches end and its stores go with the last handle.
    assert!(
        west_cluster
            .cache()
            .reader::<ConfigMap>(WatchScope::all().namespace(west.namespace()))
            .is_err(),
        "a disengaged cluster's cache serves no new reader"
    );
    drop(west_cluster);
    create_cm(&south, "cm-south").await;
    eventually("south's ConfigMap is reconciled", WAIT, || {
        let record = record.clone();
        async move { record.has("south", "cm-south") }
    })
    .await;

    // North's API server stops: east still reconciles at once.
    north.shutdown();
    let started = Instant::now();
    create_cm(&east, "after-north-down").await;
    eventually("east reconciles while north is down", WAIT, || {
        let record = record.clone();
        async move { record.has("east", "after-north-down") }
    })
    .await;
    let delay = started.elapsed();
    println!("multicluster: east reconciled {delay:?} after its create, north down");

    stop.cancel();
    run.await.unwrap().unwrap();
    drop((hub, east, west, north, south));
}
