//! A controller keyed by something else than `Request`, through the manager and its cache
//! (either envtest backend): ConfigMap events map to their namespace's name, and the
//! reconciler gets each namespace once per burst of changes in it.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use common::{configmap, eventually, manager_options};
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_controller::{Action, Context, Manager, Reconciler, WatchOptions};
use kcr_envtest::TestNamespace;
use kcr_handler::{EnqueueRequestsFromMapFunc, Funcs};
use kcr_source::WatchScope;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use parking_lot::Mutex;

/// A key of our own: the namespace, and whether the event came from a label change.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Tenant(String);

impl std::fmt::Display for Tenant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "tenant {}", self.0)
    }
}

#[derive(Clone, Default)]
struct PerTenant {
    seen: Arc<Mutex<Vec<Tenant>>>,
}

impl Reconciler<Tenant> for PerTenant {
    type Error = anyhow::Error;
    async fn reconcile(&self, tenant: &Tenant, _ctx: &Context) -> anyhow::Result<Action> {
        self.seen.lock().push(tenant.clone());
        Ok(Action::done())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_keyed_by_tenant_reconciles_each_tenant() {
    // Two tenants: two namespaces on the binary's shared server, the only ones watched.
    let team_a = TestNamespace::new("team-a").await.unwrap();
    let team_b = TestNamespace::new("team-b").await.unwrap();
    let (a, b) = (team_a.namespace(), team_b.namespace());
    let client = team_a.client();

    let mgr = Manager::new(client.clone(), manager_options())
        .await
        .unwrap();
    let reconciler = PerTenant::default();
    let tenants = WatchScope::all().namespaces([a, b]);
    let configmaps = mgr.cache().kind::<ConfigMap>(tenants.clone()).unwrap();
    let deletes_too = mgr.cache().kind::<ConfigMap>(tenants).unwrap();
    mgr.keyed_controller::<Tenant>()
        .named("tenants")
        .watches(
            configmaps,
            EnqueueRequestsFromMapFunc::new(|cm: &ConfigMap| {
                // Only our test objects: the API server's own ConfigMaps (kube-root-ca.crt)
                // exist in every namespace on the real backend.
                cm.name_any()
                    .starts_with("app-")
                    .then(|| Tenant(cm.namespace().unwrap_or_default()))
            }),
            WatchOptions::new(),
        )
        // A second handler kind on the same key type: Funcs<K, Tenant>.
        .watches(
            deletes_too,
            Funcs::<ConfigMap, Tenant>::new().delete(|cm, _unknown, queue| {
                queue.add(Tenant(format!(
                    "{}-deleted",
                    cm.namespace().unwrap_or_default()
                )))
            }),
            WatchOptions::new(),
        )
        .complete(reconciler.clone())
        .unwrap();
    let (_mgr, stop, run) = common::spawn_manager(mgr);

    for ns in [a, b] {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        for i in 0..3 {
            api.create(&PostParams::default(), &configmap(&format!("app-{i}"), "v"))
                .await
                .unwrap();
        }
    }
    let want: BTreeSet<Tenant> = [Tenant(a.into()), Tenant(b.into())].into();
    eventually(
        "both tenants reconciled",
        Duration::from_secs(20),
        || async {
            let seen: BTreeSet<Tenant> = reconciler.seen.lock().iter().cloned().collect();
            seen == want
        },
    )
    .await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), b);
    api.delete("app-0", &Default::default()).await.unwrap();
    eventually(
        "the delete handler's key reconciled",
        Duration::from_secs(20),
        || async {
            reconciler
                .seen
                .lock()
                .contains(&Tenant(format!("{b}-deleted")))
        },
    )
    .await;
    stop.cancel();
    run.await.unwrap().unwrap();
}
