//! Protobuf request bodies over HTTP, as a Go client sends them: every body here is one client-go
//! encoded (`fixtures/protobuf-go/e2e_*.pb`, written by
//! `tools/control-plane/v1.37/cmd/protobuf-fixtures`). The same test runs on every backend; the
//! real kube-apiserver decodes protobuf natively, so it pins what kcr-envtest must do.

use std::path::Path;

use kcr_envtest::TestNamespace;
use serde_json::{Value, json};

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/protobuf-go")
        .join(format!("{name}.pb"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Send `body` (protobuf) with `method` to `path`; the answer's status and JSON body.
async fn send(client: &kube::Client, method: &str, path: &str, body: Vec<u8>) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("Content-Type", PROTOBUF)
        .header("Accept", "application/json")
        .body(body)
        .unwrap();
    match client.request::<Value>(req).await {
        Ok(v) => (200, v),
        Err(kube::Error::Api(status)) => (
            status.code,
            json!({"reason": status.reason, "message": status.message}),
        ),
        Err(e) => panic!("{method} {path}: {e:?}"),
    }
}

async fn get(client: &kube::Client, path: &str) -> Value {
    let req = http::Request::get(path).body(Vec::new()).unwrap();
    client.request::<Value>(req).await.unwrap()
}

#[tokio::test]
async fn go_client_protobuf_bodies_create_update_and_delete() {
    let ns = TestNamespace::new("protobuf").await.unwrap();
    let client = ns.client();
    let n = ns.namespace();

    // A leader-election Lease: MicroTimes to the microsecond, a zero leaseTransitions kept.
    let leases = format!("/apis/coordination.k8s.io/v1/namespaces/{n}/leases");
    let (code, lease) = send(&client, "POST", &leases, fixture("e2e_lease")).await;
    assert_eq!(code, 200, "{lease}");
    assert_eq!(
        lease["spec"],
        json!({"holderIdentity": "manager-7d9f_1c2e", "leaseDurationSeconds": 15,
               "acquireTime": "2026-12-02T10:11:12.345678Z",
               "renewTime": "2026-12-02T10:11:12.345678Z", "leaseTransitions": 0})
    );
    assert_eq!(lease["metadata"]["namespace"], json!(n));

    // A Secret with bytes that are not UTF-8.
    let secrets = format!("/api/v1/namespaces/{n}/secrets");
    let (code, secret) = send(&client, "POST", &secrets, fixture("e2e_secret")).await;
    assert_eq!(code, 200, "{secret}");
    let secret = get(&client, &format!("{secrets}/pb-secret")).await;
    assert_eq!(
        secret["data"],
        json!({"binary": "AP/+gAo=", "token": "czNjcjN0"})
    );

    // A Deployment with replicas 0 (a pointer: kept), IntOrString strategy values, a template
    // with probes, resources and volumes (inlined volume sources).
    let deployments = format!("/apis/apps/v1/namespaces/{n}/deployments");
    let (code, created) = send(&client, "POST", &deployments, fixture("e2e_deployment")).await;
    assert_eq!(code, 200, "{created}");
    assert_eq!(created["spec"]["replicas"], json!(0));
    assert_eq!(
        created["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "25%"}})
    );
    let pod = &created["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(
        c["resources"],
        json!({"limits": {"cpu": "500m", "memory": "256Mi"},
               "requests": {"cpu": "100m", "memory": "100e6"}})
    );
    assert_eq!(c["livenessProbe"]["httpGet"]["port"], json!("http"));
    assert_eq!(
        c["livenessProbe"]["terminationGracePeriodSeconds"],
        json!(10)
    );
    assert_eq!(c["readinessProbe"]["tcpSocket"], json!({"port": 8080}));
    assert_eq!(c["startupProbe"]["exec"], json!({"command": ["true"]}));
    assert_eq!(c["args"], json!(["--port=8080", ""]));
    assert_eq!(c["env"][0], json!({"name": "EMPTY"}));
    assert_eq!(
        pod["volumes"][1],
        json!({"name": "scratch", "emptyDir": {"sizeLimit": "64Mi"}})
    );
    assert_eq!(pod["terminationGracePeriodSeconds"], json!(0));
    let created_at = created["metadata"]["creationTimestamp"].clone();
    assert!(created_at.is_string(), "{created}");

    // Read, then updated by a Go client: the body carries creationTimestamp, generation and
    // managedFields as read (here: a timestamp of its own, which the server ignores).
    let web = format!("{deployments}/pb-web");
    let (code, updated) = send(&client, "PUT", &web, fixture("e2e_deployment_update")).await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["spec"]["replicas"], json!(2));
    assert_eq!(updated["metadata"]["labels"]["version"], json!("v2"));
    assert_eq!(updated["metadata"]["creationTimestamp"], created_at);

    // DeleteOptions under the client's group version: a failed precondition is a 409, so the
    // preconditions were read; then a delete with propagationPolicy and gracePeriodSeconds.
    let (code, err) = send(&client, "DELETE", &web, fixture("e2e_delete_conflict")).await;
    assert_eq!((code, &err["reason"]), (409, &json!("Conflict")), "{err}");
    let (code, deleted) = send(&client, "DELETE", &web, fixture("e2e_delete")).await;
    assert_eq!(code, 200, "{deleted}");
    let req = http::Request::get(&web).body(Vec::new()).unwrap();
    match client.request::<Value>(req).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 404),
        // Background propagation on the real backend: the Deployment may still be finishing.
        Ok(v) => assert!(v["metadata"]["deletionTimestamp"].is_string(), "{v}"),
        Err(e) => panic!("{e:?}"),
    }
}

#[tokio::test]
async fn a_go_client_node_with_taints_and_status() {
    let ns = TestNamespace::new("protobuf-node").await.unwrap();
    let client = ns.client();
    let (code, node) = send(&client, "POST", "/api/v1/nodes", fixture("e2e_node")).await;
    assert_eq!(code, 200, "{node}");
    let spec = &node["spec"];
    assert_eq!(spec["podCIDR"], json!("10.244.9.0/24"));
    assert_eq!(spec["unschedulable"], json!(true));
    let taints = spec["taints"].as_array().cloned().unwrap_or_default();
    assert!(
        taints.contains(
            &json!({"key": "dedicated", "value": "gpu", "effect": "NoSchedule",
                                "timeAdded": "2026-12-01T23:59:59Z"})
        ),
        "{taints:?}"
    );
    let req = http::Request::delete("/api/v1/nodes/kcr-protobuf-e2e-node")
        .body(Vec::new())
        .unwrap();
    client.request::<Value>(req).await.unwrap();
}
