//! Built-in kinds as their descriptors declare them: selectable fields with the API server's
//! defaults, and a kind added as one descriptor entry (PersistentVolumeClaim) served, listed and
//! printed as kube-apiserver v1.37 does. Everything goes through the Kubernetes API, so these
//! hold on a real API server too.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim};
use kcr_envtest::{TestNamespace, eventually};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

const LIMIT: Duration = Duration::from_secs(30);

fn names<K: kube::Resource>(items: Vec<K>) -> Vec<String> {
    items.iter().filter_map(|o| o.meta().name.clone()).collect()
}

/// kube-apiserver defaults an absent `spec.unschedulable` to `false` for field selection, so
/// `kubectl get nodes --field-selector spec.unschedulable=false` finds nodes without the field.
#[tokio::test]
async fn unschedulable_false_selects_nodes_without_the_field() {
    let ns = TestNamespace::new("unsched").await.unwrap();
    let nodes: Api<Node> = Api::all(ns.client());
    let (plain, cordoned) = (ns.unique_name("plain"), ns.unique_name("cordoned"));
    for (name, spec) in [
        (&plain, json!({})),
        (&cordoned, json!({"unschedulable": true})),
    ] {
        let node: Node =
            serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    let got = nodes.get(&plain).await.unwrap();
    assert_eq!(
        got.spec.and_then(|s| s.unschedulable),
        None,
        "the node has no spec.unschedulable"
    );
    let select = |selector: &'static str| {
        let nodes = nodes.clone();
        async move {
            names(
                nodes
                    .list(&ListParams::default().fields(selector))
                    .await
                    .unwrap()
                    .items,
            )
        }
    };
    let schedulable = select("spec.unschedulable=false").await;
    assert!(schedulable.contains(&plain), "{schedulable:?}");
    assert!(!schedulable.contains(&cordoned), "{schedulable:?}");
    let unschedulable = select("spec.unschedulable=true").await;
    assert!(unschedulable.contains(&cordoned), "{unschedulable:?}");
    assert!(!unschedulable.contains(&plain), "{unschedulable:?}");
    let not_cordoned = select("spec.unschedulable!=true").await;
    assert!(not_cordoned.contains(&plain), "{not_cordoned:?}");
}

/// The Table rows of the PersistentVolumeClaims in `namespace`, as `kubectl get pvc -o wide`
/// asks for them: `(column name, priority)` and each row's cells.
async fn pvc_table(
    client: &kube::Client,
    namespace: &str,
) -> (Vec<(String, i64)>, Vec<Vec<Value>>) {
    let request = http::Request::get(format!(
        "/api/v1/namespaces/{namespace}/persistentvolumeclaims"
    ))
    .header(
        http::header::ACCEPT,
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
    )
    .body(Vec::new())
    .unwrap();
    let table: Value = client.request(request).await.unwrap();
    assert_eq!(table["kind"], "Table", "{table}");
    let columns = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["priority"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    let rows = table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["cells"].as_array().unwrap().clone())
        .collect();
    (columns, rows)
}

#[tokio::test]
async fn persistent_volume_claims_are_served_and_printed() {
    let ns = TestNamespace::new("pvc").await.unwrap();
    let pvcs: Api<PersistentVolumeClaim> = Api::default_namespaced(ns.client());
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "standard"
        }
    }))
    .unwrap();
    pvcs.create(&PostParams::default(), &claim).await.unwrap();
    let got = pvcs.get("data").await.unwrap();
    let spec = got.spec.unwrap();
    assert_eq!(spec.volume_mode.as_deref(), Some("Filesystem"), "defaulted");
    assert_eq!(spec.storage_class_name.as_deref(), Some("standard"));
    // StorageObjectInUseProtection: a new claim carries the protection finalizer.
    assert_eq!(
        got.metadata.finalizers.as_deref(),
        Some(&["kubernetes.io/pvc-protection".to_string()][..])
    );
    let listed = pvcs
        .list(&ListParams::default().fields("metadata.name=data"))
        .await
        .unwrap();
    assert_eq!(names(listed.items), ["data"]);
    // No volume binds it (no provisioner): it stays Pending.
    eventually("the claim is Pending", LIMIT, || async {
        pvcs.get("data")
            .await
            .unwrap()
            .status
            .and_then(|s| s.phase)
            .as_deref()
            == Some("Pending")
    })
    .await;
    let (columns, rows) = pvc_table(&ns.client(), ns.namespace()).await;
    assert_eq!(
        columns,
        [
            ("Name", 0),
            ("Status", 0),
            ("Volume", 0),
            ("Capacity", 0),
            ("Access Modes", 0),
            ("StorageClass", 0),
            ("VolumeAttributesClass", 0),
            ("Age", 0),
            ("VolumeMode", 1),
        ]
        .map(|(n, p)| (n.to_string(), p))
    );
    assert_eq!(rows.len(), 1);
    let cells = &rows[0];
    assert_eq!(
        [&cells[..7], &cells[8..]].concat(),
        [
            json!("data"),
            json!("Pending"),
            json!(""),
            json!(""),
            json!(""),
            json!("standard"),
            json!("<unset>"),
            json!("Filesystem"),
        ]
    );
    // No pvc-protection controller runs (on either backend): a deleted claim stays, marked for
    // deletion, until a client removes the finalizer.
    pvcs.delete("data", &Default::default()).await.unwrap();
    let deleting = pvcs.get("data").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());
    pvcs.patch(
        "data",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually("the claim is gone", LIMIT, || async {
        pvcs.get_opt("data").await.unwrap().is_none()
    })
    .await;
}
