//! `metadata.managedFields` of `Update` operations as the real API server writes them (maps and
//! keyed list items carry a `"."` member, structs the type always has do not, atomic structs
//! are one field, what the server writes is nobody's), and the store semantics clients see
//! around writes: a no-op update, dry-run creates, paginated lists. Everything goes through the
//! Kubernetes API, so these hold on a real API server too.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, ServiceAccount};
use kcr_envtest::TestNamespace;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use kube::core::ObjectMeta;
use serde_json::{Value, json};

fn fields_v1(meta: &ObjectMeta) -> Value {
    let entries = meta.managed_fields.as_ref().expect("managedFields");
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].operation.as_deref(), Some("Update"));
    serde_json::to_value(entries[0].fields_v1.as_ref().expect("fieldsV1")).unwrap()
}

fn pp(manager: &str) -> PostParams {
    PostParams {
        field_manager: Some(manager.into()),
        ..Default::default()
    }
}

fn cm(name: &str, body: Value) -> ConfigMap {
    let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    if let (Some(m), Value::Object(b)) = (v.as_object_mut(), body) {
        for (k, val) in b {
            if k == "metadata" {
                for (mk, mv) in val.as_object().unwrap() {
                    m["metadata"][mk] = mv.clone();
                }
            } else {
                m.insert(k, val);
            }
        }
    }
    serde_json::from_value(v).unwrap()
}

#[tokio::test]
async fn a_create_owns_the_maps_it_adds_with_a_dot_member() {
    let ns = TestNamespace::new("mf-dot").await.unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(ns.client());
    let created = cms
        .create(
            &pp("writer"),
            &cm(
                "mf-dot",
                json!({"metadata": {"labels": {"app": "x"}}, "data": {"a": "1"}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        fields_v1(&created.metadata),
        json!({"f:data": {".": {}, "f:a": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}})
    );
    assert_eq!(
        created.metadata.managed_fields.as_ref().unwrap()[0]
            .manager
            .as_deref(),
        Some("writer")
    );
    // An owner reference is one atomic item, keyed by its uid.
    let uid = created.metadata.uid.clone().unwrap();
    let dependent = cms
        .create(
            &pp("writer"),
            &cm(
                "mf-dependent",
                json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                    "name": "mf-dot", "uid": uid}]}}),
            ),
        )
        .await
        .unwrap();
    let item = format!("k:{{\"uid\":\"{uid}\"}}");
    assert_eq!(
        fields_v1(&dependent.metadata),
        json!({"f:metadata": {"f:ownerReferences": {".": {}, item: {}}}})
    );
}

#[tokio::test]
async fn structs_the_type_always_has_are_not_owned_and_selectors_are_atomic() {
    let ns = TestNamespace::new("mf-structs").await.unwrap();
    let deployments: Api<Deployment> = Api::default_namespaced(ns.client());
    let d: Deployment =
        serde_json::from_value(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "mf-deploy"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "x"}},
            "template": {"metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}}))
        .unwrap();
    let created = deployments.create(&pp("writer"), &d).await.unwrap();
    let f = fields_v1(&created.metadata);
    let spec = &f["f:spec"];
    assert!(spec.get(".").is_none(), "{f}");
    assert_eq!(spec["f:replicas"], json!({}));
    assert_eq!(spec["f:selector"], json!({}), "an atomic struct: {f}");
    assert!(spec["f:template"].get(".").is_none(), "{f}");
    assert!(spec["f:template"]["f:metadata"].get(".").is_none(), "{f}");
    assert_eq!(spec["f:template"]["f:metadata"]["f:labels"]["."], json!({}));
    let containers = &spec["f:template"]["f:spec"]["f:containers"];
    assert!(containers.get(".").is_none(), "{f}");
    assert_eq!(containers["k:{\"name\":\"c\"}"]["."], json!({}));
    assert_eq!(containers["k:{\"name\":\"c\"}"]["f:image"], json!({}));
    assert!(f.get("f:status").is_none(), "{f}");
}

#[tokio::test]
async fn what_the_server_writes_on_create_is_nobodys() {
    let test_ns = TestNamespace::new("mf-nobody").await.unwrap();
    let namespaces: Api<Namespace> = Api::all(test_ns.client());
    let ns: Namespace = serde_json::from_value(
        json!({"metadata": {"name": test_ns.unique_name("mf-ns"), "labels": {"team": "a"}}, "status": {"phase": "Terminating"}}),
    )
    .unwrap();
    let created = namespaces.create(&pp("writer"), &ns).await.unwrap();
    assert_eq!(
        fields_v1(&created.metadata),
        json!({"f:metadata": {"f:labels": {".": {}, "f:kubernetes.io/metadata.name": {}, "f:team": {}}}})
    );
    let nodes: Api<Node> = Api::all(test_ns.client());
    let node: Node = serde_json::from_value(
        json!({"metadata": {"name": test_ns.unique_name("mf-node"), "labels": {"a": "b"}},
        "status": {"capacity": {"cpu": "1"}}}),
    )
    .unwrap();
    let created = nodes.create(&pp("writer"), &node).await.unwrap();
    // Neither the status (a subresource's) nor the not-ready taint (admission's).
    assert_eq!(
        fields_v1(&created.metadata),
        json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}}})
    );
}

#[tokio::test]
async fn updates_of_an_object_nobody_owns_anything_of_are_not_tracked() {
    let ns = TestNamespace::new("mf-untracked").await.unwrap();
    let accounts: Api<ServiceAccount> = Api::default_namespaced(ns.client());
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "mf-sa"}})).unwrap();
    let created = accounts.create(&pp("writer"), &sa).await.unwrap();
    assert!(created.metadata.managed_fields.is_none());
    let mut changed = created.clone();
    changed.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
    let updated = accounts
        .replace("mf-sa", &pp("writer"), &changed)
        .await
        .unwrap();
    assert_eq!(updated.metadata.labels, changed.metadata.labels);
    assert!(updated.metadata.managed_fields.is_none());
    // An object created owning something is tracked on update.
    let cms: Api<ConfigMap> = Api::default_namespaced(ns.client());
    let created = cms
        .create(
            &pp("creator"),
            &cm("mf-tracked", json!({"data": {"a": "1"}})),
        )
        .await
        .unwrap();
    let mut changed = created.clone();
    changed.data = Some([("b".to_string(), "2".to_string())].into());
    let updated = cms
        .replace("mf-tracked", &pp("updater"), &changed)
        .await
        .unwrap();
    let entries = updated.metadata.managed_fields.unwrap();
    let managers: Vec<_> = entries.iter().map(|e| e.manager.clone().unwrap()).collect();
    assert_eq!(managers, ["creator", "updater"]);
    // The creator keeps the map, the updater owns the key it added.
    assert_eq!(
        serde_json::to_value(entries[0].fields_v1.as_ref().unwrap()).unwrap(),
        json!({"f:data": {}})
    );
    assert_eq!(
        serde_json::to_value(entries[1].fields_v1.as_ref().unwrap()).unwrap(),
        json!({"f:data": {"f:b": {}}})
    );
}

#[tokio::test]
async fn an_update_that_changes_nothing_is_no_write() {
    let ns = TestNamespace::new("mf-noop").await.unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(ns.client());
    let created = cms
        .create(&pp("writer"), &cm("mf-noop", json!({"data": {"a": "1"}})))
        .await
        .unwrap();
    let rv = created.metadata.resource_version.clone().unwrap();
    let stream = cms
        .watch(&WatchParams::default().fields("metadata.name=mf-noop"), &rv)
        .await
        .unwrap();
    let same = cms
        .replace("mf-noop", &pp("writer"), &created)
        .await
        .unwrap();
    assert_eq!(same.metadata.resource_version.as_deref(), Some(rv.as_str()));
    // A real change afterwards is the first event the watch sees.
    let mut changed = same.clone();
    changed.data = Some([("a".to_string(), "2".to_string())].into());
    let updated = cms
        .replace("mf-noop", &pp("writer"), &changed)
        .await
        .unwrap();
    assert_ne!(
        updated.metadata.resource_version.as_deref(),
        Some(rv.as_str())
    );
    let first = stream.boxed().try_next().await.unwrap().expect("an event");
    match first {
        WatchEvent::Modified(o) => {
            assert_eq!(
                o.metadata.resource_version,
                updated.metadata.resource_version
            )
        }
        other => panic!("expected the modification, got {other:?}"),
    }
}

#[tokio::test]
async fn a_dry_run_create_answers_uid_and_creation_timestamp_and_stores_nothing() {
    let ns = TestNamespace::new("mf-dry").await.unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(ns.client());
    let params = PostParams {
        dry_run: true,
        field_manager: Some("writer".into()),
    };
    let answered = cms
        .create(&params, &cm("mf-dry", json!({"data": {"a": "1"}})))
        .await
        .unwrap();
    assert!(answered.metadata.uid.is_some_and(|u| !u.is_empty()));
    assert!(answered.metadata.creation_timestamp.is_some());
    assert!(answered.metadata.managed_fields.is_some());
    assert!(cms.get_opt("mf-dry").await.unwrap().is_none());
}

#[tokio::test]
async fn paginated_lists_count_the_remaining_items_and_rv0_ignores_the_limit() {
    let test_ns = TestNamespace::new("mf-paginated").await.unwrap();
    let namespaces: Api<Namespace> = Api::all(test_ns.client());
    let pages = test_ns.unique_name("mf-pages");
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": pages}})).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(test_ns.client(), &pages);
    for i in 0..5 {
        cms.create(&PostParams::default(), &cm(&format!("c{i}"), json!({})))
            .await
            .unwrap();
    }
    let page = cms.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(page.items.len(), 2);
    assert_eq!(page.metadata.remaining_item_count, Some(3));
    let next = cms
        .list(
            &ListParams::default()
                .limit(2)
                .continue_token(page.metadata.continue_.as_deref().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(next.metadata.remaining_item_count, Some(1));
    let last = cms
        .list(
            &ListParams::default()
                .limit(2)
                .continue_token(next.metadata.continue_.as_deref().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(last.items.len(), 1);
    assert_eq!(last.metadata.remaining_item_count, None);
    assert!(last.metadata.continue_.as_deref().is_none_or(str::is_empty));
    // A label selector filters: no count.
    let selected = cms
        .list(&ListParams::default().limit(2).labels("!absent"))
        .await
        .unwrap();
    assert_eq!(selected.items.len(), 2);
    assert_eq!(selected.metadata.remaining_item_count, None);
    // resourceVersion=0 is served whole (the watch cache ignores the limit). kube-rs leaves
    // resourceVersion=0 out when a limit is set: ask for it directly.
    let req = http::Request::get(format!(
        "/api/v1/namespaces/{pages}/configmaps?limit=2&resourceVersion=0"
    ))
    .body(Vec::new())
    .unwrap();
    let cached: Value = test_ns.client().request(req).await.unwrap();
    assert_eq!(
        cached["items"].as_array().map(Vec::len),
        Some(5),
        "{cached}"
    );
    assert!(cached["metadata"].get("continue").is_none(), "{cached}");
}

#[tokio::test]
async fn the_namespaces_the_server_creates_are_owned_by_kube_apiserver() {
    let test_ns = TestNamespace::new("mf-owned").await.unwrap();
    let namespaces: Api<Namespace> = Api::all(test_ns.client());
    for name in ["default", "kube-system"] {
        let ns = namespaces.get(name).await.unwrap();
        let entries = ns.metadata.managed_fields.as_ref().expect("managedFields");
        assert_eq!(entries[0].manager.as_deref(), Some("kube-apiserver"));
        assert_eq!(
            fields_v1(&ns.metadata),
            json!({"f:metadata": {"f:labels": {".": {}, "f:kubernetes.io/metadata.name": {}}}})
        );
    }
}

#[tokio::test]
async fn a_replication_controller_template_is_added_and_an_ingress_backend_port_is_atomic() {
    use k8s_openapi::api::core::v1::ReplicationController;
    use k8s_openapi::api::networking::v1::Ingress;
    let ns = TestNamespace::new("mf-rc").await.unwrap();
    // core/v1 ReplicationController's template is a pointer: the create adds it, so it and its
    // metadata and spec carry a "." (a Deployment's embedded template does not).
    let rcs: Api<ReplicationController> = Api::default_namespaced(ns.client());
    let rc: ReplicationController = serde_json::from_value(json!({"metadata": {"name": "rc"},
        "spec": {"replicas": 0, "selector": {"app": "rc"},
                 "template": {"metadata": {"labels": {"app": "rc"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}}))
    .unwrap();
    let created = rcs.create(&pp("writer"), &rc).await.unwrap();
    let template = &fields_v1(&created.metadata)["f:spec"]["f:template"];
    assert_eq!(template["."], json!({}), "{template}");
    assert_eq!(template["f:metadata"]["."], json!({}), "{template}");
    assert_eq!(template["f:spec"]["."], json!({}), "{template}");
    // networking/v1 ServiceBackendPort is an atomic struct: owned as one field.
    let ingresses: Api<Ingress> = Api::default_namespaced(ns.client());
    let ing: Ingress = serde_json::from_value(json!({"metadata": {"name": "ing"},
        "spec": {"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}}}))
    .unwrap();
    let created = ingresses.create(&pp("writer"), &ing).await.unwrap();
    let service = &fields_v1(&created.metadata)["f:spec"]["f:defaultBackend"]["f:service"];
    assert_eq!(service["f:port"], json!({}), "{service}");
}

/// Service ports are identified by `port` and `protocol` in field sets (upstream's
/// `listMapKeys`), a port without a protocol as `TCP`, its default; a strategic merge patch
/// still merges them by `port` alone (upstream's `patchMergeKey`).
#[tokio::test]
async fn service_ports_are_keyed_by_port_and_protocol_in_field_sets() {
    use k8s_openapi::api::core::v1::Service;
    use kube::api::{Patch, PatchParams};
    let ns = TestNamespace::new("mf-ports").await.unwrap();
    let services: Api<Service> = Api::default_namespaced(ns.client());
    let svc: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "mf-ports"},
        "spec": {"selector": {"app": "x"},
                 "ports": [{"name": "http", "port": 80}, {"name": "dns", "port": 53, "protocol": "UDP"}]}}))
    .unwrap();
    let created = services.create(&pp("writer"), &svc).await.unwrap();
    let ports = fields_v1(&created.metadata)["f:spec"]["f:ports"].clone();
    let mut keys: Vec<&str> = ports
        .as_object()
        .expect("f:ports is a map")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        vec![
            ".",
            r#"k:{"port":53,"protocol":"UDP"}"#,
            r#"k:{"port":80,"protocol":"TCP"}"#
        ],
        "{ports}"
    );
    // The item of port 80 owns the protocol the server defaulted.
    assert!(
        ports[r#"k:{"port":80,"protocol":"TCP"}"#]
            .get("f:protocol")
            .is_some(),
        "{ports}"
    );

    // A strategic merge patch merges by port: renaming port 80 keeps port 53.
    let patched = services
        .patch(
            "mf-ports",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"ports": [{"port": 80, "name": "web"}]}})),
        )
        .await
        .unwrap();
    let names: Vec<(i32, Option<String>)> = patched
        .spec
        .unwrap()
        .ports
        .unwrap()
        .into_iter()
        .map(|p| (p.port, p.name))
        .collect();
    assert_eq!(
        names,
        vec![(80, Some("web".to_string())), (53, Some("dns".to_string()))]
    );
}
