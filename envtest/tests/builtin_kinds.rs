//! Built-in kinds as their descriptors declare them: selectable fields with the API server's
//! defaults. Everything goes through the Kubernetes API, so these hold on a real API server
//! too.

use k8s_openapi::api::core::v1::Node;
use kcr_envtest::TestApiServer;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

fn names<K: kube::Resource>(items: Vec<K>) -> Vec<String> {
    items.iter().filter_map(|o| o.meta().name.clone()).collect()
}

/// kube-apiserver defaults an absent `spec.unschedulable` to `false` for field selection, so
/// `kubectl get nodes --field-selector spec.unschedulable=false` finds nodes without the field.
#[tokio::test]
async fn unschedulable_false_selects_nodes_without_the_field() {
    let server = TestApiServer::start().await.unwrap();
    let nodes: Api<Node> = Api::all(server.client());
    for (name, spec) in [
        ("plain", json!({})),
        ("cordoned", json!({"unschedulable": true})),
    ] {
        let node: Node =
            serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    let plain = nodes.get("plain").await.unwrap();
    assert_eq!(
        plain.spec.and_then(|s| s.unschedulable),
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
    assert!(
        schedulable.contains(&"plain".to_string()),
        "{schedulable:?}"
    );
    assert!(
        !schedulable.contains(&"cordoned".to_string()),
        "{schedulable:?}"
    );
    let cordoned = select("spec.unschedulable=true").await;
    assert!(cordoned.contains(&"cordoned".to_string()), "{cordoned:?}");
    assert!(!cordoned.contains(&"plain".to_string()), "{cordoned:?}");
    let not_cordoned = select("spec.unschedulable!=true").await;
    assert!(
        not_cordoned.contains(&"plain".to_string()),
        "{not_cordoned:?}"
    );
}
