//! The ClusterProfile provider on kcr-envtest servers: a profile with a credential provider
//! engages its cluster, a profile whose credential provider has no credentials configured is
//! reported, and deleting a profile disengages its cluster.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kcr_controller::{Action, Context, Manager, ManagerOptions};
use kcr_envtest::{TestApiServer, eventually};
use kcr_multicluster::provider::cluster_profile_resource;
use kcr_multicluster::{
    Cluster, ClusterName, ClusterProfileProvider, ClusterRequest, Fleet, FleetReconciler,
};
use kcr_source::WatchScope;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use parking_lot::Mutex;

const WAIT: Duration = Duration::from_secs(60);

#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<String>>>);

impl FleetReconciler for Seen {
    type Error = std::convert::Infallible;
    async fn reconcile(
        &self,
        request: &ClusterRequest,
        _cluster: &Cluster,
        _ctx: &Context,
    ) -> Result<Action, Self::Error> {
        self.0.lock().push(request.to_string());
        Ok(Action::done())
    }
}

/// Creates the profile `name` whose status offers `provider` with `member`'s connection data.
async fn profile(hub: &TestApiServer, name: &str, provider: &str, member: &TestApiServer) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(hub.client(), hub.namespace(), &cluster_profile_resource());
    let mut p = DynamicObject::new(name, &cluster_profile_resource());
    p.data = serde_json::json!({"spec": {"clusterManager": {"name": "kcr-test"}}});
    api.create(&PostParams::default(), &p).await.unwrap();
    let kubeconfig = member.kubeconfig();
    let cluster = kubeconfig.clusters[0].cluster.clone().unwrap();
    let status = serde_json::json!({"status": {"credentialProviders": [
        {"name": provider, "cluster": cluster}
    ]}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_profiles_engage_and_disengage_clusters() {
    let (hub, member) = tokio::try_join!(TestApiServer::start(), TestApiServer::start()).unwrap();
    hub.install_crds_from(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/crds"))
        .await
        .unwrap();
    // The member's credentials, configured for the credential provider "kcr-test-creds".
    let auth = member.kubeconfig().auth_infos[0].auth_info.clone().unwrap();
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
    fleet
        .run_provider(
            &mgr,
            ClusterProfileProvider::new(hub.client(), hub.namespace())
                .credentials("kcr-test-creds", auth),
        )
        .unwrap();
    let seen = Seen::default();
    fleet
        .controller(&mgr)
        .named("profiles")
        .for_kind::<ConfigMap>(WatchScope::all().namespace(member.namespace()))
        .complete(seen.clone())
        .unwrap();
    let mgr = Arc::new(mgr);
    let stop = tokio_util::sync::CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });

    profile(&hub, "member", "kcr-test-creds", &member).await;
    profile(&hub, "unknown", "someone-elses-plugin", &member).await;
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("hello".into());
    cm.data = Some(BTreeMap::from([("v".to_string(), "1".to_string())]));
    Api::<ConfigMap>::namespaced(member.client(), member.namespace())
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let key = format!("member/{}/hello", member.namespace());
    eventually("the profile's cluster is reconciled", WAIT, || {
        let (seen, key) = (seen.clone(), key.clone());
        async move { seen.0.lock().contains(&key) }
    })
    .await;
    eventually("the profile without credentials is reported", WAIT, || {
        let fleet = fleet.clone();
        async move {
            fleet
                .errors()
                .get(&ClusterName::from("unknown"))
                .is_some_and(|e| e.contains("someone-elses-plugin"))
        }
    })
    .await;
    assert_eq!(fleet.names(), vec![ClusterName::from("member")]);

    Api::<DynamicObject>::namespaced_with(
        hub.client(),
        hub.namespace(),
        &cluster_profile_resource(),
    )
    .delete("member", &DeleteParams::default())
    .await
    .unwrap();
    eventually("deleting the profile disengages its cluster", WAIT, || {
        let fleet = fleet.clone();
        async move { fleet.names().is_empty() }
    })
    .await;

    stop.cancel();
    run.await.unwrap().unwrap();
}
