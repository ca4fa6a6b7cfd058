//! One scenario, two API servers. A `Manager` with leader election runs a controller that
//! mirrors labelled ConfigMaps into Secrets they own, reading ConfigMaps from the manager's
//! shared cache and watching the Secrets metadata-only. The same scenario runs against kcr-envtest in every `cargo test`, and against
//! the cluster of the current kubeconfig when asked to:
//!
//! ```text
//! KCR_TEST_REAL_CLUSTER=1 cargo test -p kcr-tests --test any_cluster -- --ignored
//! ```
//!
//! It works in a namespace of its own (`kcr-test-<random>`, deleted at the end) and needs
//! rights to namespaces, ConfigMaps, Secrets and Leases there. Real clusters put a
//! `kube-root-ca.crt` ConfigMap in every namespace and run controllers of their own, so the
//! scenario only counts on what it created: its controller watches labelled ConfigMaps, and
//! every assertion is about a named object.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kcr_controller::{
    Action, Context, LeaderElectionConfig, Manager, ManagerOptions, Reconciler, WatchOptions,
};
use kcr_envtest::TestNamespace;
use kcr_handler::Request;
use kcr_source::Reader;
use kcr_tests::{RunningManager, eventually};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::PartialObjectMeta;
use kube::{Client, ResourceExt};
use parking_lot::Mutex;
use serde_json::json;

/// Real clusters are slower than envtest (admission, etcd, other controllers).
const WAIT: Duration = Duration::from_secs(60);
const LABEL: &str = "kcr-test";
const MIRRORED: &str = "kcr-test=mirror";

/// Mirrors a ConfigMap's data into a Secret `<name>-mirror` that the ConfigMap owns, and
/// records the name of every ConfigMap it was asked to reconcile.
#[derive(Clone)]
struct Mirror {
    client: Client,
    configmaps: Reader<ConfigMap>,
    reconciled: Arc<Mutex<Vec<String>>>,
}

impl Reconciler<Request> for Mirror {
    type Error = kube::Error;

    async fn reconcile(&self, request: &Request, _ctx: &Context) -> Result<Action, kube::Error> {
        let ns = request.namespace.as_deref().unwrap_or_default();
        self.reconciled.lock().push(request.name.clone());
        // A ConfigMap that is gone: its Secret goes with it (garbage collection).
        let cached = self
            .configmaps
            .get(&request.name, Some(ns))
            .map_err(|e| kube::Error::Service(Box::new(e)))?;
        let Some(cm) = cached else {
            return Ok(Action::done());
        };
        let mut secret = Secret::default();
        secret.metadata.name = Some(format!("{}-mirror", request.name));
        secret.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: cm.name_any(),
            uid: cm.uid().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
        // `data`, not `stringData`: server-side apply of stringData has upstream quirks (the
        // server folds it into data, and later applies can leave stale keys behind).
        secret.data = cm.data.as_ref().map(|d| {
            d.iter()
                .map(|(k, v)| (k.clone(), k8s_openapi::ByteString(v.clone().into_bytes())))
                .collect()
        });
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), ns);
        let apply = PatchParams::apply("kcr-test-mirror").force();
        secrets
            .patch(
                &format!("{}-mirror", request.name),
                &apply,
                &Patch::Apply(&secret),
            )
            .await?;
        Ok(Action::done())
    }
}

fn configmap(name: &str, labelled: bool, value: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_string());
    if labelled {
        cm.metadata.labels = Some(BTreeMap::from([(LABEL.into(), "mirror".into())]));
    }
    cm.data = Some(BTreeMap::from([("value".into(), value.into())]));
    cm
}

/// The mirrored value of `name`, or why there is none yet.
async fn mirrored(secrets: &Api<Secret>, name: &str) -> Result<String, String> {
    let secret = secrets
        .get_opt(&format!("{name}-mirror"))
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no secret {name}-mirror"))?;
    let value = secret
        .data
        .and_then(|d| d.get("value").cloned())
        .ok_or("the secret has no value")?;
    String::from_utf8(value.0).map_err(|e| e.to_string())
}

async fn expect_mirrored(secrets: &Api<Secret>, name: &str, want: &str) {
    eventually(&format!("{name} mirrored as {want:?}"), WAIT, || async {
        match mirrored(secrets, name).await {
            Ok(got) if got == want => Ok(()),
            Ok(got) => Err(format!("mirrored as {got:?}")),
            Err(e) => Err(e),
        }
    })
    .await;
}

async fn scenario(client: Client) {
    let ns_name = format!("kcr-test-{}", &random_suffix()[..8]);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(ns_name.clone());
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("create the test namespace");

    let options = ManagerOptions::default()
        .metrics_bind_address("0")
        .expect("an address")
        .health_probe_bind_address("0")
        .expect("an address")
        .leader_election(LeaderElectionConfig::new("kcr-test-mirror").namespace(&ns_name));
    let mgr = Manager::new(client.clone(), options)
        .await
        .expect("manager");
    let reader = mgr
        .reader::<ConfigMap>(
            kcr_source::WatchScope::all()
                .namespace(&ns_name)
                .labels(MIRRORED),
        )
        .expect("reader");
    let reconciled = Arc::new(Mutex::new(Vec::new()));
    mgr.controller()
        .named("mirror")
        .for_kind::<ConfigMap>(WatchOptions::new().namespace(&ns_name).labels(MIRRORED))
        // The controller never reads the Secrets it owns, only hears of their changes: a
        // metadata-only watch (controller-runtime's OnlyMetadata) is enough.
        .owns::<PartialObjectMeta<Secret>>(WatchOptions::new().namespace(&ns_name))
        .complete(Mirror {
            client: client.clone(),
            configmaps: reader,
            reconciled: reconciled.clone(),
        })
        .expect("controller");
    let running = RunningManager::start(mgr);

    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns_name);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns_name);
    let pp = PostParams::default();

    // A labelled ConfigMap is mirrored, and follows its changes.
    configmaps
        .create(&pp, &configmap("a", true, "one"))
        .await
        .expect("create a");
    expect_mirrored(&secrets, "a", "one").await;
    configmaps
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"value": "two"}})),
        )
        .await
        .expect("change a");
    expect_mirrored(&secrets, "a", "two").await;

    // Deleting the owned Secret by hand brings it back (`owns` maps it to its owner).
    secrets
        .delete("a-mirror", &DeleteParams::default())
        .await
        .expect("delete a-mirror");
    expect_mirrored(&secrets, "a", "two").await;

    // An unlabelled ConfigMap is not watched: create it, then a labelled one, and once the
    // labelled one is mirrored the unlabelled one has had its chance.
    configmaps
        .create(&pp, &configmap("plain", false, "x"))
        .await
        .expect("create plain");
    configmaps
        .create(&pp, &configmap("b", true, "three"))
        .await
        .expect("create b");
    expect_mirrored(&secrets, "b", "three").await;
    assert!(
        !reconciled.lock().iter().any(|name| name == "plain"),
        "an unlabelled ConfigMap was reconciled"
    );
    assert_eq!(
        mirrored(&secrets, "plain").await,
        Err("no secret plain-mirror".to_string())
    );

    running.stop(WAIT).await;
    namespaces
        .delete(&ns_name, &DeleteParams::default())
        .await
        .expect("delete the test namespace");
}

/// Random hex, for a namespace name that does not collide with an earlier run's.
fn random_suffix() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    format!("{:016x}", h.finish())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_scenario_on_envtest() {
    // The scenario makes a namespace of its own, as on a real cluster: the TestNamespace gives
    // it the binary's shared server.
    let ns = TestNamespace::new("any-cluster")
        .await
        .expect("envtest starts");
    scenario(ns.client()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real cluster: KCR_TEST_REAL_CLUSTER=1 and a kubeconfig"]
async fn mirror_scenario_on_a_real_cluster() {
    if std::env::var("KCR_TEST_REAL_CLUSTER").as_deref() != Ok("1") {
        eprintln!("skipped: set KCR_TEST_REAL_CLUSTER=1 to run against the current kubeconfig");
        return;
    }
    let client = Client::try_default()
        .await
        .expect("a client from the kubeconfig or the in-cluster environment");
    scenario(client).await;
}
