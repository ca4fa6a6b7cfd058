//! Simulated Nodes for [`crate::TestApiServer::add_nodes`].

use serde_json::{Value, json};

/// A Ready node object named `name` with capacity/allocatable and the usual labels.
pub fn simulated_node(name: &str, now: &str) -> Value {
    let resources =
        json!({"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"});
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
            },
        },
        "spec": {},
        "status": {
            "capacity": resources.clone(),
            "allocatable": resources,
            "conditions": [{
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status (simulated by kcr-envtest)",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }],
            "addresses": [{"type": "Hostname", "address": name}],
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": crate::discovery::EMULATED_KUBERNETES_VERSION,
                "containerRuntimeVersion": "envtest://0.1.0",
                "kernelVersion": "", "osImage": "kcr-envtest", "kubeProxyVersion": "",
                "machineID": "", "systemUUID": "", "bootID": "",
            },
        },
    })
}
