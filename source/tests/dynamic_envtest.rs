//! Kinds chosen at run time (`DynamicObject` of an `ApiResource`) in the cache, against
//! kcr-envtest on either backend: a built-in kind (ConfigMap, erased) and a custom resource
//! known only by its group, version and kind; two dynamic kinds in one cache never mix.
//!
//! Both tests share the binary's server, each in a `TestNamespace` of its own.
//!
//! Real clock: every wait is bounded by a deadline that only expires when the behaviour is
//! wrong.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Secret};
use kcr_envtest::TestNamespace;
use kcr_source::{Cache, CacheError, DynamicResource, Event, EventStream, Source, WatchScope};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::discovery::Scope;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

async fn next(events: &mut EventStream<DynamicObject>) -> Event<DynamicObject> {
    tokio::time::timeout(WAIT, events.next())
        .await
        .expect("an event within the timeout")
        .expect("stream still open")
        .expect("kind streams yield no errors")
}

async fn quiet(events: &mut EventStream<DynamicObject>) {
    if let Ok(Some(extra)) = tokio::time::timeout(Duration::from_millis(500), events.next()).await {
        panic!("unexpected extra event {extra:?}");
    }
}

fn name(o: &DynamicObject) -> String {
    o.metadata.name.clone().unwrap_or_default()
}

fn gadgets() -> DynamicResource {
    let gvk = GroupVersionKind::gvk("dyn.kcr.io", "v1", "Gadget");
    DynamicResource::new(ApiResource::from_gvk(&gvk), Scope::Namespaced)
}

async fn install_gadget_crd(ns: &TestNamespace) {
    ns
        .install_crd_value(json!({
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
}

fn gadget(name: &str, size: i64) -> DynamicObject {
    DynamicObject::new(name, &gadgets().resource).data(json!({"spec": {"size": size}}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_resource_known_only_at_run_time_is_cached_and_watched() {
    let ns = TestNamespace::new("dyn-gadget")
        .await
        .expect("envtest starts");
    install_gadget_crd(&ns).await;
    let resource = gadgets();
    let api: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.namespace(), &resource.resource);
    api.create(&PostParams::default(), &gadget("small", 1))
        .await
        .expect("create");

    let cache = Cache::new(ns.client());
    let kind = cache
        .kind_dynamic(&resource, WatchScope::all().namespace(ns.namespace()))
        .expect("kind");
    let reader = cache
        .reader_dynamic(&resource, WatchScope::all().namespace(ns.namespace()))
        .expect("reader");
    assert_eq!(cache.informer_count(), 1, "kind and reader share one watch");
    let mut started = kind.start().expect("start");
    reader.wait_for_sync(WAIT).await.expect("synced");
    match next(&mut started.events).await {
        Event::Create { object, initial } => {
            assert!(initial);
            assert_eq!(name(&object), "small");
            assert_eq!(object.data["spec"]["size"], 1);
            assert_eq!(
                object.metadata.managed_fields, None,
                "the default transform ran"
            );
        }
        other => panic!("expected the listed gadget, got {other:?}"),
    }

    api.create(&PostParams::default(), &gadget("big", 10))
        .await
        .expect("create");
    api.patch(
        "small",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 2}})),
    )
    .await
    .expect("patch");
    api.delete("big", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(matches!(next(&mut started.events).await,
        Event::Create { object, initial: false } if name(&object) == "big"));
    match next(&mut started.events).await {
        Event::Update { old, new } => {
            assert_eq!(
                (
                    name(&new),
                    &old.data["spec"]["size"],
                    &new.data["spec"]["size"]
                ),
                ("small".into(), &json!(1), &json!(2))
            );
        }
        other => panic!("expected the update, got {other:?}"),
    }
    assert!(matches!(next(&mut started.events).await,
        Event::Delete { object, state_unknown: false } if name(&object) == "big"));
    quiet(&mut started.events).await;

    let small = reader
        .get("small", Some(ns.namespace()))
        .expect("a watched namespace")
        .expect("cached");
    assert_eq!(small.data["spec"]["size"], 2);
    assert_eq!(reader.list().len(), 1);
    assert!(reader.get("small", Some("kube-system")).is_err());
    assert!(kind.last_error().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_dynamic_kinds_in_one_cache_do_not_mix() {
    let ns = TestNamespace::new("dyn-mix").await.expect("envtest starts");
    let configmaps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.namespace());
    let secrets: Api<Secret> = Api::namespaced(ns.client(), ns.namespace());
    // Every namespace is watched, for objects with a label value no other test uses.
    let label = ns.unique_name("dynamic");
    // The same name in both kinds.
    for name in ["shared", "cm-only"] {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"test": label}},
            "data": {"kind": "configmap"}
        }))
        .expect("valid ConfigMap");
        configmaps
            .create(&PostParams::default(), &cm)
            .await
            .expect("create");
    }
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "shared", "labels": {"test": label}},
        "stringData": {"kind": "secret"}
    }))
    .expect("valid Secret");
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("create");

    let cache = Cache::new(ns.client());
    let scope = WatchScope::all().labels(format!("test={label}"));
    // Secrets keep only their keys' names: a transform of one dynamic kind only.
    let secret_resource = DynamicResource::of::<Secret>();
    cache
        .set_transform_dynamic(&secret_resource.resource, |secret| {
            if let Some(data) = secret.data.get_mut("data").and_then(|d| d.as_object_mut()) {
                for value in data.values_mut() {
                    *value = json!("");
                }
            }
        })
        .expect("set before the watch starts");
    let cm_reader = cache
        .reader_dynamic(&DynamicResource::of::<ConfigMap>(), scope.clone())
        .expect("reader");
    let secret_reader = cache
        .reader_dynamic(&secret_resource, scope.clone())
        .expect("reader");
    // A typed reader of the same resource is a watch of its own (another Rust type).
    let typed = cache
        .reader::<ConfigMap>(scope.clone())
        .expect("typed reader");
    assert_eq!(cache.informer_count(), 3);
    cache.wait_for_sync(WAIT).await.expect("synced");

    let names = |reader: &kcr_source::Reader<DynamicObject>| -> BTreeSet<String> {
        reader.list().iter().map(|o| name(o)).collect()
    };
    assert_eq!(
        names(&cm_reader),
        BTreeSet::from(["cm-only".into(), "shared".into()])
    );
    assert_eq!(names(&secret_reader), BTreeSet::from(["shared".into()]));
    let cm = cm_reader
        .get("shared", Some(ns.namespace()))
        .expect("watched")
        .expect("cached");
    assert_eq!(cm.data["data"]["kind"], "configmap");
    // Listed, so sent without its kind by the server: the cache names it.
    assert_eq!(
        cm.types
            .as_ref()
            .map(|t| (t.api_version.as_str(), t.kind.as_str())),
        Some(("v1", "ConfigMap"))
    );
    let secret = secret_reader
        .get("shared", Some(ns.namespace()))
        .expect("watched")
        .expect("cached");
    assert_eq!(secret.data["data"]["kind"], "", "the Secret transform ran");
    assert_eq!(cm.data["data"]["kind"], "configmap", "and only on Secrets");
    assert_eq!(typed.len(), 2);
    assert!(
        cache
            .set_transform_dynamic(&secret_resource.resource, |_| {})
            .is_err(),
        "too late: the Secret watch started"
    );
    assert!(
        cache
            .set_transform_dynamic(&gadgets().resource, |_| {})
            .is_ok(),
        "another dynamic kind is still free"
    );

    // A cluster-scoped dynamic kind refuses namespaces, as a typed one does.
    assert!(matches!(
        cache.kind_dynamic(&DynamicResource::of::<Node>(), WatchScope::all().namespaces(["a", "b"])),
        Err(CacheError::NamespaceOnClusterScoped { kind, .. }) if kind == "Node"
    ));
    assert_eq!(cache.informer_count(), 3);
}
