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

    // The scale subresource with an autoscaling/v1 Scale.
    let (code, scale) = send(
        &client,
        "PUT",
        &format!("{web}/scale"),
        fixture("e2e_scale"),
    )
    .await;
    assert_eq!(code, 200, "{scale}");
    assert_eq!(scale["spec"], json!({"replicas": 3}));
    assert_eq!(get(&client, &web).await["spec"]["replicas"], json!(3));

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

#[tokio::test]
async fn a_go_client_pod_eviction_token_request_and_cluster_objects() {
    let ns = TestNamespace::new("protobuf-pod").await.unwrap();
    let client = ns.client();
    let n = ns.namespace();

    // A Pod with probes, resources, volumes, env and tolerations; then evicted.
    let pods = format!("/api/v1/namespaces/{n}/pods");
    let (code, pod) = send(&client, "POST", &pods, fixture("e2e_pod")).await;
    assert_eq!(code, 200, "{pod}");
    let spec = &pod["spec"];
    assert_eq!(
        spec["volumes"][0],
        json!({"name": "config", "configMap": {"name": "settings", "defaultMode": 420}})
    );
    assert_eq!(
        spec["tolerations"][0],
        json!({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"})
    );
    let c = &spec["containers"][0];
    assert_eq!(
        c["ports"],
        json!([{"name": "http", "containerPort": 8080, "protocol": "TCP"}])
    );
    // (fieldRef.apiVersion is defaulted upstream, not in process: not compared.)
    assert_eq!(
        c["env"][1]["valueFrom"]["fieldRef"]["fieldPath"],
        json!("metadata.name")
    );
    assert_eq!(
        c["securityContext"]["capabilities"],
        json!({"drop": ["ALL"]})
    );
    let eviction = format!("{pods}/pb-pod/eviction");
    let (code, answer) = send(&client, "POST", &eviction, fixture("e2e_eviction")).await;
    assert_eq!(code, 200, "{answer}");
    let req = http::Request::get(format!("{pods}/pb-pod"))
        .body(Vec::new())
        .unwrap();
    match client.request::<Value>(req).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 404),
        Ok(v) => assert!(v["metadata"]["deletionTimestamp"].is_string(), "{v}"),
        Err(e) => panic!("{e:?}"),
    }

    // A TokenRequest for a ServiceAccount.
    let sas = format!("/api/v1/namespaces/{n}/serviceaccounts");
    let req = http::Request::post(&sas)
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(&json!({"metadata": {"name": "pb-sa"}})).unwrap())
        .unwrap();
    client.request::<Value>(req).await.unwrap();
    let token = format!("{sas}/pb-sa/token");
    let (code, answer) = send(&client, "POST", &token, fixture("e2e_token_request")).await;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["spec"]["audiences"], json!(["pb-audience"]));
    assert_eq!(answer["spec"]["expirationSeconds"], json!(3600));
    assert!(
        answer["status"]["token"]
            .as_str()
            .is_some_and(|t| !t.is_empty()),
        "{answer}"
    );

    // An events.k8s.io Event (MicroTime eventTime), in `default`: its `regarding` has no
    // namespace, which upstream allows only there.
    let events = "/apis/events.k8s.io/v1/namespaces/default/events";
    let (code, event) = send(&client, "POST", events, fixture("e2e_event")).await;
    assert_eq!(code, 200, "{event}");
    assert_eq!(event["eventTime"], json!("2026-12-02T10:11:12.345678Z"));
    assert_eq!(event["regarding"]["name"], json!("pb-web"));
    let req = http::Request::delete(format!("{events}/kcr-protobuf-e2e-event"))
        .body(Vec::new())
        .unwrap();
    client.request::<Value>(req).await.unwrap();

    // A CertificateSigningRequest (bytes) and a ClusterRole (cluster-scoped).
    let csrs = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
    let (code, csr) = send(&client, "POST", csrs, fixture("e2e_csr")).await;
    assert_eq!(code, 200, "{csr}");
    let request = csr["spec"]["request"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        request.starts_with("LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNU"),
        "{csr}"
    );
    assert_eq!(
        csr["spec"]["usages"],
        json!(["digital signature", "client auth"])
    );
    assert_eq!(csr["spec"]["expirationSeconds"], json!(86400));
    let roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
    let (code, role) = send(&client, "POST", roles, fixture("e2e_clusterrole")).await;
    assert_eq!(code, 200, "{role}");
    assert_eq!(
        role["rules"],
        json!([{"verbs": ["get", "list", "watch"], "apiGroups": ["", "apps"],
                "resources": ["pods", "deployments/scale"]},
               {"verbs": ["get"], "nonResourceURLs": ["/healthz"]}])
    );
    for path in [
        format!("{csrs}/kcr-protobuf-e2e-csr"),
        format!("{roles}/kcr-protobuf-e2e-role"),
    ] {
        let req = http::Request::delete(path).body(Vec::new()).unwrap();
        client.request::<Value>(req).await.unwrap();
    }
}

/// A request with `accept`; the answer's status, content type and body.
async fn fetch(client: &kube::Client, path: &str, accept: &str) -> (u16, String, Vec<u8>) {
    use http_body_util::BodyExt;
    let req = http::Request::get(path)
        .header("Accept", accept)
        .body(kube::client::Body::from(Vec::new()))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let code = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = resp
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (code, content_type, body)
}

/// A list without its resourceVersion, which other tests' writes on a shared server move
/// between two reads.
fn without_list_rv(mut v: Value) -> Value {
    if v["kind"].as_str().is_some_and(|k| k.ends_with("List"))
        && let Some(meta) = v["metadata"].as_object_mut()
    {
        meta.remove("resourceVersion");
    }
    v
}

/// Answers in protobuf for a client that prefers it, as Go clients do
/// (`application/vnd.kubernetes.protobuf, application/json`): an object, a list and a Status
/// decode to what the same request answers in JSON.
#[tokio::test]
async fn go_clients_preferring_protobuf_get_protobuf_answers() {
    let ns = TestNamespace::new("protobuf-answers").await.unwrap();
    let client = ns.client();
    let n = ns.namespace();
    let deployments = format!("/apis/apps/v1/namespaces/{n}/deployments");
    let (code, created) = send(&client, "POST", &deployments, fixture("e2e_deployment")).await;
    assert_eq!(code, 200, "{created}");
    let leases = format!("/apis/coordination.k8s.io/v1/namespaces/{n}/leases");
    let (code, lease) = send(&client, "POST", &leases, fixture("e2e_lease")).await;
    assert_eq!(code, 200, "{lease}");

    let go_accept = "application/vnd.kubernetes.protobuf, application/json";
    for path in [
        format!("{deployments}/pb-web"),
        format!("{leases}/pb-leader"),
        deployments.clone(),
    ] {
        let (code, content_type, body) = fetch(&client, &path, go_accept).await;
        assert_eq!(code, 200, "{path}");
        assert_eq!(content_type, PROTOBUF, "{path}");
        let decoded = kcr_envtest::protobuf::decode(&body)
            .unwrap_or_else(|e| panic!("{path}: the answer does not decode: {e}"));
        let (_, json_type, json) = fetch(&client, &path, "application/json").await;
        assert_eq!(json_type, "application/json", "{path}");
        let json: Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(without_list_rv(decoded), without_list_rv(json), "{path}");
    }

    // client-go's metadata client (controller-runtime's metadata-only caches).
    for (path, as_kind) in [
        (format!("{deployments}/pb-web"), "PartialObjectMetadata"),
        (deployments.clone(), "PartialObjectMetadataList"),
    ] {
        let media = |m: &str| format!("{m};as={as_kind};g=meta.k8s.io;v=v1");
        let accept = format!(
            "{},{},application/json",
            media("application/vnd.kubernetes.protobuf"),
            media("application/json")
        );
        let (code, content_type, body) = fetch(&client, &path, &accept).await;
        assert_eq!(code, 200, "{path}");
        // (Upstream's content type has no `as=` parameter.)
        assert_eq!(content_type, PROTOBUF, "{path}");
        let decoded = kcr_envtest::protobuf::decode(&body)
            .unwrap_or_else(|e| panic!("{path}: the answer does not decode: {e}"));
        assert_eq!(decoded["kind"], json!(as_kind));
        let (_, json_type, json) = fetch(&client, &path, &media("application/json")).await;
        assert_eq!(json_type, "application/json", "{path}");
        let mut json: Value = serde_json::from_slice(&json).unwrap();
        // Items carry their kind in JSON only: TypeMeta is not in the protobuf message.
        let items = json.get_mut("items").and_then(Value::as_array_mut);
        for item in items.into_iter().flatten() {
            let item = item.as_object_mut().unwrap();
            item.remove("kind");
            item.remove("apiVersion");
        }
        assert_eq!(without_list_rv(decoded), without_list_rv(json), "{path}");
    }

    // An error is a protobuf Status.
    let missing = format!("{deployments}/missing");
    let (code, content_type, body) = fetch(&client, &missing, go_accept).await;
    assert_eq!((code, content_type.as_str()), (404, PROTOBUF));
    let status = kcr_envtest::protobuf::decode(&body).unwrap();
    assert_eq!(
        (&status["kind"], &status["reason"], &status["code"]),
        (&json!("Status"), &json!("NotFound"), &json!(404)),
        "{status}"
    );
}

/// The length-delimited fields of a protobuf message, by number (the last of each).
fn length_delimited(mut buf: &[u8]) -> std::collections::BTreeMap<u64, Vec<u8>> {
    fn varint(buf: &mut &[u8]) -> u64 {
        let mut v = 0;
        for shift in (0..64).step_by(7) {
            let (byte, rest) = buf.split_first().expect("a varint");
            *buf = rest;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
        }
        v
    }
    let mut out = std::collections::BTreeMap::new();
    while !buf.is_empty() {
        let key = varint(&mut buf);
        assert_eq!(key & 7, 2, "a length-delimited field");
        let len = varint(&mut buf) as usize;
        out.insert(key >> 3, buf[..len].to_vec());
        buf = &buf[len..];
    }
    out
}

/// A watch for a client that prefers protobuf: length-delimited `WatchEvent` frames, each
/// object in its own `k8s\0` envelope.
#[tokio::test]
async fn go_clients_preferring_protobuf_watch_in_protobuf_frames() {
    use http_body_util::BodyExt;
    let ns = TestNamespace::new("protobuf-watch").await.unwrap();
    let client = ns.client();
    let leases = format!(
        "/apis/coordination.k8s.io/v1/namespaces/{}/leases",
        ns.namespace()
    );
    let list = get(&client, &leases).await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let req = http::Request::get(format!("{leases}?watch=1&resourceVersion={rv}"))
        .header(
            "Accept",
            "application/vnd.kubernetes.protobuf, application/json",
        )
        .body(kube::client::Body::from(Vec::new()))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(
        resp.headers().get("content-type").unwrap(),
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    let (code, created) = send(&client, "POST", &leases, fixture("e2e_lease")).await;
    assert_eq!(code, 200, "{created}");

    let mut body = resp.into_body();
    let mut buf = Vec::new();
    let frame = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            if buf.len() >= 4 {
                let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
                if buf.len() >= 4 + len {
                    return buf[4..4 + len].to_vec();
                }
            }
            let next = body.frame().await.expect("the stream goes on").unwrap();
            if let Ok(data) = next.into_data() {
                buf.extend_from_slice(&data);
            }
        }
    })
    .await
    .expect("an event within 20s");
    let event = length_delimited(&frame);
    assert_eq!(event[&1], b"ADDED");
    let raw = &length_delimited(&event[&2])[&1];
    let object = kcr_envtest::protobuf::decode(raw).unwrap();
    assert_eq!(object, created);
}

/// A length-delimited protobuf field.
fn pb_field(number: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![number << 3 | 2];
    let mut len = payload.len();
    loop {
        let byte = (len & 0x7f) as u8;
        len >>= 7;
        if len == 0 {
            out.push(byte);
            break;
        }
        out.push(byte | 0x80);
    }
    out.extend_from_slice(payload);
    out
}

/// Field numbers a message does not have are dropped, not refused, as kube-apiserver's generated
/// unmarshallers skip them: a ConfigMap with an unknown field in its metadata and one at the top
/// level is created, without them.
#[tokio::test]
async fn unknown_protobuf_fields_are_dropped() {
    let ns = TestNamespace::new("protobuf-unknown").await.unwrap();
    let client = ns.client();
    let mut meta = pb_field(1, b"pb-unknown");
    meta.extend(pb_field(15, b"a field ObjectMeta does not have"));
    let mut raw = pb_field(1, &meta);
    raw.extend(pb_field(
        2,
        &[pb_field(1, b"a"), pb_field(2, b"b")].concat(),
    ));
    raw.extend(pb_field(9, b"a field ConfigMap does not have"));
    let type_meta = [pb_field(1, b"v1"), pb_field(2, b"ConfigMap")].concat();
    let body = [
        b"k8s\0".to_vec(),
        pb_field(1, &type_meta),
        pb_field(2, &raw),
        pb_field(3, b""),
        pb_field(4, b""),
    ]
    .concat();
    let path = format!("/api/v1/namespaces/{}/configmaps", ns.namespace());
    let (code, created) = send(&client, "POST", &path, body).await;
    assert_eq!(code, 200, "{created}");
    let got = get(&client, &format!("{path}/pb-unknown")).await;
    assert_eq!(got["data"], json!({"a": "b"}));
    let mut keys: Vec<&String> = got.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["apiVersion", "data", "kind", "metadata"]);
}

/// Custom resources have no protobuf form: a client that prefers protobuf gets their objects in
/// JSON, the second type its `Accept` lists, and their watch events too; errors are a Status,
/// which has one, in protobuf.
#[tokio::test]
async fn custom_resources_are_answered_in_json_to_protobuf_clients() {
    let ns = TestNamespace::new("protobuf-custom").await.unwrap();
    ns.install_crd_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.protobuf.kcr.example"},
        "spec": {
            "group": "protobuf.kcr.example",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": {"type": "object",
                              "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .await
    .unwrap();
    let client = ns.client();
    let gadgets = format!(
        "/apis/protobuf.kcr.example/v1/namespaces/{}/gadgets",
        ns.namespace()
    );
    let req = http::Request::post(&gadgets)
        .header("Content-Type", "application/json")
        .body(
            serde_json::to_vec(&json!({"apiVersion": "protobuf.kcr.example/v1",
                                       "kind": "Gadget", "metadata": {"name": "g"}}))
            .unwrap(),
        )
        .unwrap();
    client.request::<Value>(req).await.unwrap();
    let go_accept = "application/vnd.kubernetes.protobuf, application/json";
    let (code, content_type, body) = fetch(&client, &format!("{gadgets}/g"), go_accept).await;
    assert_eq!((code, content_type.as_str()), (200, "application/json"));
    let gadget: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(gadget["metadata"]["name"], json!("g"));
    let (code, content_type, body) = fetch(&client, &format!("{gadgets}/missing"), go_accept).await;
    assert_eq!((code, content_type.as_str()), (404, PROTOBUF));
    let status = kcr_envtest::protobuf::decode(&body).unwrap();
    assert_eq!(status["reason"], json!("NotFound"));
    let list = get(&client, &gadgets).await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let req = http::Request::get(format!(
        "{gadgets}?watch=1&resourceVersion={rv}&timeoutSeconds=1"
    ))
    .header("Accept", go_accept)
    .body(kube::client::Body::from(Vec::new()))
    .unwrap();
    let resp = client.send(req).await.unwrap();
    assert_eq!(
        (
            resp.status().as_u16(),
            resp.headers()
                .get("content-type")
                .unwrap()
                .to_str()
                .unwrap()
        ),
        (200, "application/json")
    );
}
