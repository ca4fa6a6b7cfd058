//! The README's "write your own controller" example, run for real against kcr-envtest: a
//! `Manager` with leader election, Deployments filtered by `GenerationChanged`, owned ReplicaSets
//! mapped to their Deployment, four workers, graceful shutdown.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use kcr_controller::{
    Action, Client, ClientError, Context, LeaderElectionConfig, ListOptions, Manager,
    ManagerOptions, ObjectReconciler, WatchOptions,
};
use kcr_envtest::TestNamespace;
use kcr_handler::Request;
use kcr_predicate::GenerationChanged;
use kcr_tests::{RunningManager, eventually};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use parking_lot::Mutex;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

/// The README's reconciler, recording what it was asked to reconcile and the ReplicaSets it
/// found.
#[derive(Clone)]
struct Hello {
    client: Client,
    seen: Arc<Mutex<Vec<String>>>,
    /// The ReplicaSets each Deployment's last reconcile found.
    owned: Arc<Mutex<std::collections::HashMap<String, Vec<String>>>>,
}

impl ObjectReconciler for Hello {
    type Object = Deployment;
    type Error = ClientError;
    async fn reconcile(&self, d: Arc<Deployment>, ctx: &Context) -> Result<Action, ClientError> {
        // Its ReplicaSets, from the cache, through the index registered in main.
        let owned = self
            .client
            .list::<ReplicaSet>(
                &ListOptions::new()
                    .namespace(d.namespace().unwrap_or_default())
                    .matching_field("owner", d.name_any()),
            )
            .await?;
        let replicas = d.spec.replicas;
        tracing::info!(name = %d.name_any(), ?replicas, replicasets = owned.len(), id = %ctx.reconcile_id(), "reconciling");
        let request = Request::namespaced(d.name_any(), d.namespace().unwrap_or_default());
        self.seen.lock().push(request.to_string());
        let names = owned.iter().map(|rs| rs.name_any()).collect();
        self.owned.lock().insert(d.name_any(), names);
        Ok(Action::done())
    }
}

/// The Deployments that own a ReplicaSet: its index entries.
fn owners(rs: &ReplicaSet) -> Vec<String> {
    let refs = rs.owner_references().iter();
    refs.filter(|o| o.kind == "Deployment")
        .map(|o| o.name.clone())
        .collect()
}

impl Hello {
    fn count(&self, request: &str) -> usize {
        self.seen.lock().iter().filter(|r| *r == request).count()
    }
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    let mut d = Deployment::default();
    d.metadata.name = Some(name.to_string());
    let spec = &mut d.spec;
    spec.replicas = Some(replicas);
    spec.selector.match_labels = Some([("app".to_string(), name.to_string())].into());
    spec.template = pod_template(name);
    d
}

/// A template a real API server accepts: labels matching the selector, one container.
fn pod_template(app: &str) -> PodTemplateSpec {
    serde_json::from_value(json!({
        "metadata": {"labels": {"app": app}},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]},
    }))
    .expect("a pod template")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_controller_reconciles_spec_changes_and_owned_replicasets() {
    // The README's controller exactly: it watches Deployments and ReplicaSets in every
    // namespace, which on the binary's shared server only this test writes.
    let ns = TestNamespace::new("readme").await.expect("envtest starts");
    let client = ns.client();
    let key = |name: &str| format!("{}/{name}", ns.namespace());
    let options = ManagerOptions::default()
        .metrics_bind_address("127.0.0.1:0")
        .expect("an address")
        .health_probe_bind_address("127.0.0.1:0")
        .expect("an address")
        .field_owner("hello")
        .leader_election(LeaderElectionConfig::new("hello").namespace(ns.namespace()));
    let mgr = Manager::new(client.clone(), options)
        .await
        .expect("manager");
    let hello = Hello {
        client: mgr.client(),
        seen: Arc::default(),
        owned: Arc::default(),
    };
    hello
        .client
        .index_field::<ReplicaSet>("owner", owners)
        .expect("index");
    mgr.controller()
        .for_kind::<Deployment>(WatchOptions::new().predicate(GenerationChanged))
        .owns::<ReplicaSet>(WatchOptions::new())
        .max_concurrent_reconciles(4)
        .complete_objects(hello.clone())
        .expect("controller");
    let running = RunningManager::start(mgr);

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.namespace());
    let web = deployments
        .create(&PostParams::default(), &deployment("web", 1))
        .await
        .expect("create web");
    eventually("web is reconciled once", WAIT, || async {
        hello.count(&key("web")) == 1
    })
    .await;

    // The leader holds the Lease the example names.
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns.namespace());
    let lease = leases.get("hello").await.expect("the lease exists");
    assert!(
        lease
            .spec
            .and_then(|s| s.holder_identity)
            .is_some_and(|h| !h.is_empty()),
        "the running manager holds the lease"
    );

    // A label change does not change the generation: GenerationChanged drops it. A later
    // create on the same watch must pass, so once it is reconciled the label change is behind us.
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"tier": "front"}}})),
        )
        .await
        .expect("label web");
    deployments
        .create(&PostParams::default(), &deployment("db", 1))
        .await
        .expect("create db");
    eventually("db is reconciled", WAIT, || async {
        hello.count(&key("db")) == 1
    })
    .await;
    assert_eq!(
        hello.count(&key("web")),
        1,
        "a metadata-only change was filtered"
    );

    // A spec change bumps the generation: reconciled again.
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .expect("scale web");
    eventually("web is reconciled after its spec changed", WAIT, || async {
        hello.count(&key("web")) == 2
    })
    .await;

    // A ReplicaSet controlled by web reconciles web (owns), not itself.
    let mut rs = ReplicaSet::default();
    rs.metadata.name = Some("web-5d9c".into());
    rs.spec = ReplicaSetSpec {
        selector: LabelSelector {
            match_labels: Some([("app".to_string(), "web".to_string())].into()),
            ..LabelSelector::default()
        },
        template: Some(pod_template("web")),
        ..ReplicaSetSpec::default()
    };
    rs.metadata.owner_references = Some(vec![OwnerReference {
        api_version: Deployment::api_version(&()).into_owned(),
        kind: Deployment::kind(&()).into_owned(),
        name: "web".into(),
        uid: web.uid().expect("a uid"),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    let replicasets: Api<ReplicaSet> = Api::namespaced(client.clone(), ns.namespace());
    replicasets
        .create(&PostParams::default(), &rs)
        .await
        .expect("create the replicaset");
    eventually("web is reconciled for its replicaset", WAIT, || async {
        hello.count(&key("web")) == 3
    })
    .await;
    assert_eq!(hello.count(&key("web-5d9c")), 0);
    // The reconcile found it through the client's index, in the cache the controller's `owns`
    // watch fills (one ReplicaSet watch in the manager's cache, shared).
    let owned = hello.owned.lock().get("web").cloned().unwrap_or_default();
    assert!(owned.contains(&"web-5d9c".to_string()), "{owned:?}");

    running.stop(WAIT).await;
}
