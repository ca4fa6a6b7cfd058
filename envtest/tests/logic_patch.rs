//! Patch and server-side-apply flows with the payloads real clients send (kubectl's
//! client-side apply, `kubectl label`/`taint`-style patches, kube-rs `Patch::Apply` by two
//! managers), through the public `kcr_envtest::patch` API, on k8s-openapi typed objects.

use k8s_openapi::api::core::v1::{Node, Pod};
use kcr_envtest::patch::{
    ApplyError, ApplyOptions, MergeStrategy, PatchType, UpdateOptions, parse_apply_body,
    patch_object, record_update, server_side_apply,
};
use serde_json::{Value, json};

const NOW: &str = "2025-01-01T00:00:00Z";

fn node_strategy() -> MergeStrategy {
    MergeStrategy::builtin("v1", "Node").expect("Node is in the table")
}

fn node() -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "worker-1", "labels": {"kubernetes.io/hostname": "worker-1"}},
        "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]},
        "status": {"conditions": [{"type": "Ready", "status": "False"}]}})
}

#[test]
fn kubectl_client_side_apply_patch_on_a_pod() -> anyhow::Result<()> {
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {"containers": [
        {"name": "app", "image": "nginx:1.24", "env": [{"name": "MODE", "value": "a"}]},
        {"name": "sidecar", "image": "envoy:1"}
    ]}});
    // The shape kubectl apply sends: $setElementOrder, changed fields only, null to delete.
    let patch =
        br#"{"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}"}},
        "spec":{"$setElementOrder/containers":[{"name":"app"},{"name":"sidecar"}],
        "containers":[{"$setElementOrder/env":[{"name":"MODE"},{"name":"LEVEL"}],
            "env":[{"name":"LEVEL","value":"2"}],"image":"nginx:1.25","name":"app"},
            {"name":"sidecar","image":null}]}}"#;
    let strategy = MergeStrategy::builtin("v1", "Pod").expect("Pod is in the table");
    let out = patch_object(PatchType::Strategic, &pod, patch, Some(&strategy))?;
    let typed: Pod = serde_json::from_value(out.clone())?;
    let containers = typed.spec.map(|s| s.containers).unwrap_or_default();
    assert_eq!(containers.len(), 2);
    assert_eq!(containers[0].image.as_deref(), Some("nginx:1.25"));
    let env: Vec<(String, Option<String>)> = containers[0]
        .env
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.name, e.value))
        .collect();
    assert_eq!(
        env,
        vec![
            ("MODE".to_string(), Some("a".to_string())),
            ("LEVEL".to_string(), Some("2".to_string()))
        ]
    );
    assert_eq!(containers[1].image, None);
    assert!(
        out["metadata"]["annotations"]
            .get("kubectl.kubernetes.io/last-applied-configuration")
            .is_some()
    );
    Ok(())
}

#[test]
fn label_and_taint_patches_on_a_node() -> anyhow::Result<()> {
    let strategy = node_strategy();
    // kubectl label: a merge patch.
    let labelled = patch_object(
        PatchType::Merge,
        &node(),
        br#"{"metadata":{"labels":{"pool":"gpu"}}}"#,
        None,
    )?;
    // An operator adding its taint and removing the not-ready one with a strategic patch.
    let tainted = patch_object(
        PatchType::Strategic,
        &labelled,
        br#"{"spec":{"taints":[{"key":"pool","value":"gpu","effect":"NoSchedule"},
            {"key":"node.kubernetes.io/not-ready","effect":"NoSchedule","$patch":"delete"}]}}"#,
        Some(&strategy),
    )?;
    let typed: Node = serde_json::from_value(tainted.clone())?;
    let labels = typed.metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("pool").map(String::as_str), Some("gpu"));
    assert_eq!(labels.len(), 2);
    let taints = typed.spec.and_then(|s| s.taints).unwrap_or_default();
    assert_eq!(taints.len(), 1);
    assert_eq!(taints[0].key, "pool");
    // A guarded JSON patch: `test` fails once the taint list changed underneath.
    let guarded = json!([
        {"op": "test", "path": "/spec/taints/0/key", "value": "node.kubernetes.io/not-ready"},
        {"op": "remove", "path": "/spec/taints/0"}
    ]);
    let err = patch_object(
        PatchType::Json,
        &tainted,
        guarded.to_string().as_bytes(),
        None,
    )
    .unwrap_err();
    assert_eq!(err.status_code(), 422);
    Ok(())
}

#[test]
fn two_managers_apply_to_one_node() -> anyhow::Result<()> {
    let strategy = node_strategy();
    let opts = |manager: &'static str, force: bool| ApplyOptions {
        manager,
        force,
        now: NOW,
        strategy: &strategy,
        subresource: None,
    };
    // The node exists, written by the kubelet with an ordinary update.
    let kubelet = UpdateOptions {
        manager: "kubelet",
        now: NOW,
        strategy: &strategy,
        subresource: None,
    };
    let current = record_update(None, &node(), &kubelet);

    // The pool operator applies its label and taint (kube-rs sends JSON with this content type).
    // `spec.taints` is atomic (as upstream declares it): the kubelet owns the whole list, so
    // the apply conflicts on the list...
    let body = br#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"worker-1","labels":{"pool":"gpu"}},
        "spec":{"taints":[{"key":"pool","value":"gpu","effect":"NoSchedule"}]}}"#;
    let applied = parse_apply_body(body)?;
    let err =
        server_side_apply(Some(&current), &applied, &opts("pool-operator", false)).unwrap_err();
    let ApplyError::Conflicts(conflicts) = &err else {
        anyhow::bail!("expected a conflict, got {err}");
    };
    assert_eq!(conflicts.len(), 1);
    assert_eq!(conflicts[0].manager, "kubelet");
    assert_eq!(conflicts[0].field, ".spec.taints");
    // ...and forcing it replaces the list: the kubelet's taint goes.
    let after_operator = server_side_apply(Some(&current), &applied, &opts("pool-operator", true))?;
    let taints = after_operator["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(taints.len(), 1, "the list is replaced: {taints:?}");
    assert_eq!(taints[0]["key"], "pool");

    // A second tool (YAML body) changing the operator's taint value conflicts on the list...
    let yaml = b"apiVersion: v1\nkind: Node\nmetadata:\n  name: worker-1\nspec:\n  taints:\n  - key: pool\n    value: cpu\n    effect: NoSchedule\n";
    let other = parse_apply_body(yaml)?;
    let err =
        server_side_apply(Some(&after_operator), &other, &opts("other-tool", false)).unwrap_err();
    let ApplyError::Conflicts(conflicts) = &err else {
        anyhow::bail!("expected a conflict, got {err}");
    };
    assert_eq!(conflicts.len(), 1);
    assert_eq!(conflicts[0].manager, "pool-operator");
    assert_eq!(conflicts[0].field, ".spec.taints");
    // ...unless forced, which moves ownership of the list.
    let forced = server_side_apply(Some(&after_operator), &other, &opts("other-tool", true))?;
    let managers: Vec<&str> = forced["metadata"]["managedFields"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| e["manager"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(managers, vec!["kubelet", "pool-operator", "other-tool"]);

    // The operator stops managing its fields: the taint list survives because other-tool owns
    // it, but the label (owned by the operator alone) goes.
    let release = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-1"}});
    let released = server_side_apply(Some(&forced), &release, &opts("pool-operator", false))?;
    assert!(released["metadata"]["labels"].get("pool").is_none());
    assert_eq!(
        released["metadata"]["labels"]["kubernetes.io/hostname"],
        "worker-1"
    );
    let taints = released["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(taints.len(), 1);
    assert!(
        taints
            .iter()
            .any(|t| t["key"] == "pool" && t["value"] == "cpu")
    );
    // The result is still a valid typed Node.
    let _typed: Node = serde_json::from_value(released)?;
    Ok(())
}
