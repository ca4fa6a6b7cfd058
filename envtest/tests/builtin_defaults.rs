//! The defaulting kube-apiserver does on create and update (`src/defaults/`): Pods (spec,
//! containers, admission tolerations and priority, first status), Services (spec defaults,
//! cluster IP and node port allocation), Deployments, ReplicaSets, webhook configurations,
//! Events, CRDs and ConfigMaps. Everything goes through the API, so these hold on the real
//! backend too.

use http_body_util::BodyExt;
use kcr_envtest::TestApiServer;
use serde_json::{Value, json};

/// One request: `(status, JSON body or Null)`.
async fn call(client: &kube::Client, method: &str, path: &str, body: Value) -> (u16, Value) {
    let content_type = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("Content-Type", content_type)
        .body(kube::client::Body::from(body.to_string().into_bytes()))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn get(client: &kube::Client, path: &str) -> Value {
    let req = http::Request::get(path)
        .body(kube::client::Body::from(Vec::new()))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    assert_eq!(resp.status(), 200, "{path}");
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap()
}

async fn create(client: &kube::Client, path: &str, body: Value) -> Value {
    let (code, created) = call(client, "POST", path, body).await;
    assert_eq!(code, 201, "{path}: {created}");
    created
}

const PODS: &str = "/api/v1/namespaces/default/pods";

#[tokio::test]
async fn pods_are_defaulted_and_start_pending() {
    let server = TestApiServer::start().await.unwrap();
    let client = server.client();
    let pod = create(
        &client,
        PODS,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "busybox:1", "ports": [{"containerPort": 80}]}],
                "initContainers": [{"name": "i", "image": "busybox"}]},
            "status": {"phase": "Running"}}),
    )
    .await;
    let spec = &pod["spec"];
    assert_eq!(spec["restartPolicy"], "Always");
    assert_eq!(spec["terminationGracePeriodSeconds"], 30);
    assert_eq!(spec["dnsPolicy"], "ClusterFirst");
    assert_eq!(spec["securityContext"], json!({}));
    assert_eq!(spec["schedulerName"], "default-scheduler");
    assert_eq!(spec["enableServiceLinks"], true);
    assert_eq!(spec["priority"], 0);
    assert_eq!(spec["preemptionPolicy"], "PreemptLowerPriority");
    let c = &spec["containers"][0];
    assert_eq!(c["imagePullPolicy"], "IfNotPresent");
    assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(c["terminationMessagePolicy"], "File");
    assert_eq!(c["resources"], json!({}));
    assert_eq!(c["ports"][0]["protocol"], "TCP");
    assert_eq!(spec["initContainers"][0]["imagePullPolicy"], "Always");
    let tolerations: Vec<&str> = spec["tolerations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            assert_eq!(
                (&t["effect"], &t["tolerationSeconds"]),
                (&json!("NoExecute"), &json!(300))
            );
            t["key"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        tolerations,
        [
            "node.kubernetes.io/not-ready",
            "node.kubernetes.io/unreachable"
        ]
    );
    // The status a client sends on create is replaced.
    assert_eq!(
        pod["status"],
        json!({"phase": "Pending", "qosClass": "BestEffort"})
    );

    // An update without the admission-written fields gets them back.
    let mut replacement = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "labels": {"a": "b"}},
        "spec": {"containers": [{"name": "c", "image": "busybox:1", "ports": [{"containerPort": 80}]}],
            "initContainers": [{"name": "i", "image": "busybox"}]}});
    replacement["metadata"]["resourceVersion"] = pod["metadata"]["resourceVersion"].clone();
    let (code, updated) = call(&client, "PUT", &format!("{PODS}/p"), replacement).await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["spec"]["tolerations"], spec["tolerations"]);
    assert_eq!(updated["spec"]["priority"], 0);
    assert_eq!(
        updated["metadata"]["generation"], 1,
        "nothing in spec changed"
    );

    // Limits without requests: requests follow, and the pod is Guaranteed.
    let guaranteed = create(
        &client,
        PODS,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "g"},
            "spec": {"containers": [{"name": "c", "image": "busybox:1",
                "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}),
    )
    .await;
    assert_eq!(
        guaranteed["spec"]["containers"][0]["resources"]["requests"],
        json!({"cpu": "1", "memory": "1Gi"})
    );
    assert_eq!(guaranteed["status"]["qosClass"], "Guaranteed");

    // Field selectors on the defaulted fields find the pods.
    for selector in ["status.phase=Pending", "spec.restartPolicy=Always"] {
        let list = get(&client, &format!("{PODS}?fieldSelector={selector}")).await;
        let mut names: Vec<&str> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["metadata"]["name"].as_str().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["g", "p"], "{selector}");
    }
}

const SERVICES: &str = "/api/v1/namespaces/default/services";

/// The last octet of a cluster IP in `10.0.0.0/24`.
fn last_octet(ip: &Value) -> u8 {
    ip.as_str()
        .and_then(|ip| ip.strip_prefix("10.0.0."))
        .and_then(|last| last.parse().ok())
        .unwrap_or_else(|| panic!("{ip} is not in 10.0.0.0/24"))
}

#[tokio::test]
async fn services_get_defaults_and_allocated_addresses() {
    let server = TestApiServer::start().await.unwrap();
    let client = server.client();
    let svc = create(
        &client,
        SERVICES,
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
            "spec": {"ports": [{"port": 80}], "selector": {"app": "x"}}}),
    )
    .await;
    let spec = &svc["spec"];
    assert_eq!(spec["type"], "ClusterIP");
    assert_eq!(spec["sessionAffinity"], "None");
    assert_eq!(spec["internalTrafficPolicy"], "Cluster");
    assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
    assert_eq!(spec["ipFamilyPolicy"], "SingleStack");
    assert_eq!(
        spec["ports"][0],
        json!({"port": 80, "protocol": "TCP", "targetPort": 80})
    );
    assert!(last_octet(&spec["clusterIP"]) > 1);
    assert_eq!(spec["clusterIPs"], json!([spec["clusterIP"]]));
    assert_eq!(svc["status"], json!({"loadBalancer": {}}));

    // A replace without the cluster IP keeps it.
    let replacement = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "s", "resourceVersion": svc["metadata"]["resourceVersion"]},
        "spec": {"ports": [{"port": 80}], "selector": {"app": "y"}}});
    let (code, updated) = call(&client, "PUT", &format!("{SERVICES}/s"), replacement).await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["spec"]["clusterIP"], spec["clusterIP"]);

    // A taken address, or one out of range, is refused.
    for ip in ["10.0.0.1", "192.168.7.7"] {
        let (code, err) = call(
            &client,
            "POST",
            SERVICES,
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "taken"},
                "spec": {"clusterIP": ip, "ports": [{"port": 80}]}}),
        )
        .await;
        assert_eq!(
            (code, err["reason"].as_str()),
            (422, Some("Invalid")),
            "{ip}: {err}"
        );
    }
    // Headless and NodePort Services.
    let headless = create(
        &client,
        SERVICES,
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "h"},
            "spec": {"clusterIP": "None", "ports": [{"port": 80}]}}),
    )
    .await;
    assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
    let node_port = create(
        &client,
        SERVICES,
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "np"},
            "spec": {"type": "NodePort", "ports": [{"port": 80}]}}),
    )
    .await;
    let port = node_port["spec"]["ports"][0]["nodePort"].as_u64().unwrap();
    assert!((30000..=32767).contains(&port), "{port}");
    assert_eq!(node_port["spec"]["externalTrafficPolicy"], "Cluster");
}

#[tokio::test]
async fn workloads_webhooks_events_and_crds_are_defaulted() {
    let server = TestApiServer::start().await.unwrap();
    let client = server.client();
    let template = json!({"metadata": {"labels": {"app": "d"}},
        "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}});
    let deploy = create(
        &client,
        "/apis/apps/v1/namespaces/default/deployments",
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": template}}),
    )
    .await;
    let spec = &deploy["spec"];
    assert_eq!(spec["replicas"], 1);
    assert_eq!(
        spec["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
    );
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(spec["progressDeadlineSeconds"], 600);
    assert_eq!(spec["template"]["spec"]["restartPolicy"], "Always");
    assert!(spec["template"]["spec"].get("enableServiceLinks").is_none());
    assert_eq!(deploy["status"], json!({}));
    let rs = create(
        &client,
        "/apis/apps/v1/namespaces/default/replicasets",
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "r"},
            "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": template}}),
    )
    .await;
    assert_eq!(rs["spec"]["replicas"], 1);

    let hook = create(
        &client,
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "defaults-hook"}, "webhooks": [{"name": "w.example.com",
            "clientConfig": {"url": "https://127.0.0.1:1/x"}, "rules": [{"operations": ["CREATE"],
            "apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["nothing"]}],
            "sideEffects": "None", "admissionReviewVersions": ["v1"]}]}),
    )
    .await;
    let w = &hook["webhooks"][0];
    assert_eq!(w["failurePolicy"], "Fail");
    assert_eq!(w["matchPolicy"], "Equivalent");
    assert_eq!(w["namespaceSelector"], json!({}));
    assert_eq!(w["objectSelector"], json!({}));
    assert_eq!(w["timeoutSeconds"], 10);
    assert_eq!(w["reinvocationPolicy"], "Never");
    assert_eq!(w["rules"][0]["scope"], "*");

    let event = create(
        &client,
        "/api/v1/namespaces/default/events",
        json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
            "involvedObject": {"kind": "ConfigMap", "name": "c", "namespace": "default"},
            "reason": "R", "message": "m", "type": "Normal"}),
    )
    .await;
    assert!(event["eventTime"].is_null() && event.get("eventTime").is_some());
    assert_eq!(event["reportingComponent"], "");
    assert_eq!(event["reportingInstance"], "");
    assert_eq!(event["source"], json!({}));
    let v1 = get(
        &client,
        "/apis/events.k8s.io/v1/namespaces/default/events/e",
    )
    .await;
    assert!(v1.get("reportingController").is_none(), "{v1}");
    assert_eq!(v1["deprecatedSource"], json!({}));

    let crd = create(
        &client,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "things.defaults.example.com"},
            "spec": {"group": "defaults.example.com", "scope": "Namespaced",
                "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object"}}}]}}),
    )
    .await;
    assert_eq!(crd["spec"]["conversion"], json!({"strategy": "None"}));

    // An empty data map is not stored.
    let cm = create(
        &client,
        "/api/v1/namespaces/default/configmaps",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "empty"}, "data": {}}),
    )
    .await;
    assert!(cm.get("data").is_none(), "{cm}");
}

#[tokio::test]
async fn field_references_name_their_api_version_and_are_owned_whole() {
    let server = TestApiServer::start().await.unwrap();
    let client = server.client();
    let pod = create(
        &client,
        PODS,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "field-ref"},
            "spec": {"containers": [{"name": "c", "image": "busybox:1", "env": [
                {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}],
                "volumes": [{"name": "info", "downwardAPI": {"items": [
                    {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}}]}}),
    )
    .await;
    // `SetDefaults_ObjectFieldSelector`.
    assert_eq!(
        pod["spec"]["containers"][0]["env"][0]["valueFrom"]["fieldRef"],
        json!({"apiVersion": "v1", "fieldPath": "spec.nodeName"})
    );
    assert_eq!(
        pod["spec"]["volumes"][0]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"],
        "v1"
    );
    // `ObjectFieldSelector` is `+structType=atomic`: its manager owns it as a whole.
    let fields = &pod["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"]
        ["f:env"]["k:{\"name\":\"NODE\"}"]["f:valueFrom"];
    assert_eq!(fields["f:fieldRef"], json!({}), "{fields}");
}
