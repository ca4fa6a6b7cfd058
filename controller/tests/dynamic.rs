//! Kinds chosen at run time (`DynamicObject`s of an `ApiResource`) as the `For`, `Owns` and
//! `Watches` kinds of a controller, on either envtest backend: a built-in kind handled
//! dynamically (ConfigMap owning Secrets), and a custom resource known only by its group,
//! version and kind.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{configmap, eventually, manager_options};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcr_controller::{Action, Context, Manager, ObjectReconciler, WatchOptions};
use kcr_envtest::TestNamespace;
use kcr_handler::{EnqueueRequestsFromMapFunc, Request};
use kcr_source::{DynamicResource, Event, WatchScope};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::discovery::Scope;
use parking_lot::Mutex;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

/// Logs `Kind/name=value` for each reconciled object (the value at `field`), `gone:ns/name`
/// for each request whose object is not cached.
#[derive(Clone)]
struct Log {
    field: &'static [&'static str],
    entries: Arc<Mutex<Vec<String>>>,
}

impl Log {
    fn new(field: &'static [&'static str]) -> Self {
        Log {
            field,
            entries: Arc::default(),
        }
    }

    fn count(&self, entry: &str) -> usize {
        self.entries.lock().iter().filter(|e| *e == entry).count()
    }
}

impl ObjectReconciler for Log {
    type Object = DynamicObject;
    type Error = anyhow::Error;

    async fn reconcile(
        &self,
        object: Arc<DynamicObject>,
        _ctx: &Context,
    ) -> anyhow::Result<Action> {
        let kind = object
            .types
            .as_ref()
            .map(|t| t.kind.clone())
            .unwrap_or_default();
        let value = self
            .field
            .iter()
            .fold(&object.data, |v, key| &v[*key])
            .to_string();
        self.entries
            .lock()
            .push(format!("{kind}/{}={value}", object.name_any()));
        Ok(Action::done())
    }

    async fn gone(&self, request: &Request, _ctx: &Context) -> anyhow::Result<Action> {
        self.entries.lock().push(format!("gone:{request}"));
        Ok(Action::done())
    }
}

/// The events every event filter of these controllers saw, as `Kind/name` (the filters see
/// dynamic objects whole, with the kind their watch was given).
fn filter_log(seen: Arc<Mutex<Vec<String>>>) -> impl Fn(&Event<DynamicObject>) -> bool {
    move |event: &Event<DynamicObject>| {
        let o = event.object();
        let kind = o.types.as_ref().map(|t| t.kind.clone()).unwrap_or_default();
        seen.lock().push(format!("{kind}/{}", o.name_any()));
        true
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dynamic_configmap_is_reconciled_when_its_dynamic_secrets_change() {
    let ns = TestNamespace::new("dyn-cm").await.expect("envtest starts");
    let client = ns.client();
    let mgr = Manager::new(client.clone(), manager_options())
        .await
        .expect("manager");
    let log = Log::new(&["data", "value"]);
    let filtered = Arc::new(Mutex::new(Vec::new()));
    mgr.controller()
        .named("dynamic-configmaps")
        .for_dynamic(
            DynamicResource::of::<ConfigMap>(),
            WatchOptions::new().namespace(ns.namespace()),
        )
        .owns_dynamic(
            DynamicResource::of::<Secret>(),
            WatchOptions::new().namespace(ns.namespace()),
        )
        .with_event_filter(filter_log(filtered.clone()))
        .complete_objects(log.clone())
        .expect("controller");
    let reader = mgr
        .reader_dynamic(
            &DynamicResource::of::<ConfigMap>(),
            WatchScope::all().namespace(ns.namespace()),
        )
        .expect("reader");
    let (mgr, stop, run) = common::spawn_manager(mgr);
    assert_eq!(
        mgr.cache().informer_count(),
        2,
        "the reader shares the controller's watch"
    );

    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), ns.namespace());
    let parent = configmaps
        .create(&PostParams::default(), &configmap("parent", "v1"))
        .await
        .expect("create");
    eventually("the ConfigMap reconciled", WAIT, || async {
        log.count("ConfigMap/parent=\"v1\"") == 1
    })
    .await;
    let cached = reader
        .get("parent", Some(ns.namespace()))
        .expect("watched")
        .expect("cached");
    assert_eq!(cached.data["data"]["value"], "v1");

    // A Secret controlled by the ConfigMap enqueues the ConfigMap; one it does not own, nothing.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns.namespace());
    let owned: Secret = serde_json::from_value(json!({
        "metadata": {
            "name": "child",
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "parent",
                "uid": parent.metadata.uid.clone().expect("uid"), "controller": true
            }]
        },
        "stringData": {"v": "1"}
    }))
    .expect("valid Secret");
    secrets
        .create(&PostParams::default(), &owned)
        .await
        .expect("create");
    let orphan: Secret =
        serde_json::from_value(json!({"metadata": {"name": "orphan"}})).expect("valid Secret");
    secrets
        .create(&PostParams::default(), &orphan)
        .await
        .expect("create");
    eventually("the owner reconciled for its child", WAIT, || async {
        log.count("ConfigMap/parent=\"v1\"") == 2
    })
    .await;
    secrets
        .patch(
            "child",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"v": "2"}})),
        )
        .await
        .expect("patch");
    eventually(
        "the owner reconciled for its child's change",
        WAIT,
        || async { log.count("ConfigMap/parent=\"v1\"") == 3 },
    )
    .await;
    // A marker, reconciled after everything queued before it (one worker).
    configmaps
        .create(&PostParams::default(), &configmap("marker", "m"))
        .await
        .expect("create");
    eventually("the marker reconciled", WAIT, || async {
        log.count("ConfigMap/marker=\"m\"") == 1
    })
    .await;
    let entries = log.entries.lock().clone();
    assert_eq!(log.count("ConfigMap/parent=\"v1\""), 3, "{entries:?}");
    assert!(
        entries.iter().all(|e| !e.starts_with("gone:")),
        "a child was taken for its own request: {entries:?}"
    );
    let filtered = filtered.lock().clone();
    for seen in ["ConfigMap/parent", "Secret/child", "Secret/orphan"] {
        assert!(filtered.iter().any(|f| f == seen), "{seen} in {filtered:?}");
    }
    stop.cancel();
    run.await.expect("manager task").expect("clean shutdown");
}

fn gadgets() -> DynamicResource {
    let gvk = GroupVersionKind::gvk("dyn.kcr.io", "v1", "Gadget");
    DynamicResource::new(ApiResource::from_gvk(&gvk), Scope::Namespaced)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_resource_chosen_at_run_time_is_the_primary_kind() {
    let ns = TestNamespace::new("dyn-gadget")
        .await
        .expect("envtest starts");
    ns.install_crd_value(json!({
            "metadata": {"name": "gadgets.dyn.kcr.io"},
            "spec": {
                "group": "dyn.kcr.io",
                "scope": "Namespaced",
                "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget", "listKind": "GadgetList"},
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {
                        "type": "object",
                        "properties": {"spec": {
                            "type": "object",
                            "properties": {"size": {"type": "integer"}}
                        }}
                    }}
                }]
            }
        }))
        .await
        .expect("CRD installed");
    let client = ns.client();
    let mgr = Manager::new(client.clone(), manager_options())
        .await
        .expect("manager");
    let log = Log::new(&["spec", "size"]);
    let filtered = Arc::new(Mutex::new(Vec::new()));
    let resource = gadgets();
    // ConfigMaps labelled `gadget=<name>` poke that gadget (a dynamic Watches kind).
    let configmaps = DynamicResource::of::<ConfigMap>();
    let configmap_source = mgr
        .cache()
        .kind_dynamic(
            &configmaps,
            WatchScope::all().namespace(ns.namespace()).labels("gadget"),
        )
        .expect("kind");
    mgr.controller()
        .for_dynamic(
            resource.clone(),
            WatchOptions::new().namespace(ns.namespace()),
        )
        .watches_dynamic(
            &configmaps.resource,
            configmap_source,
            EnqueueRequestsFromMapFunc::new(|cm: &DynamicObject| {
                let gadget = cm.labels().get("gadget").cloned()?;
                Some(Request::namespaced(gadget, cm.namespace()?))
            }),
            WatchOptions::new(),
        )
        .with_event_filter(filter_log(filtered.clone()))
        .complete_objects(log.clone())
        .expect("controller");
    let (_mgr, stop, run) = common::spawn_manager(mgr);

    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns.namespace(), &resource.resource);
    let gadget = DynamicObject::new("g1", &resource.resource).data(json!({"spec": {"size": 1}}));
    api.create(&PostParams::default(), &gadget)
        .await
        .expect("create");
    eventually("the gadget reconciled", WAIT, || async {
        log.count("Gadget/g1=1") == 1
    })
    .await;
    api.patch(
        "g1",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 2}})),
    )
    .await
    .expect("patch");
    eventually("the gadget's change reconciled", WAIT, || async {
        log.count("Gadget/g1=2") == 1
    })
    .await;
    let poke: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "poke", "labels": {"gadget": "g1"}}
    }))
    .expect("valid ConfigMap");
    Api::<ConfigMap>::namespaced(client.clone(), ns.namespace())
        .create(&PostParams::default(), &poke)
        .await
        .expect("create");
    eventually(
        "the gadget reconciled for the watched ConfigMap",
        WAIT,
        || async { log.count("Gadget/g1=2") == 2 },
    )
    .await;
    let filtered = filtered.lock().clone();
    for seen in ["Gadget/g1", "ConfigMap/poke"] {
        assert!(filtered.iter().any(|f| f == seen), "{seen} in {filtered:?}");
    }
    assert!(log.entries.lock().iter().all(|e| !e.starts_with("gone:")));
    stop.cancel();
    run.await.expect("manager task").expect("clean shutdown");
}
