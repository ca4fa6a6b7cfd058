//! What the server serves besides the workload kinds: RBAC, Ingress, EndpointSlice, Endpoints,
//! ReplicationController, CertificateSigningRequest and APIService objects, the computed
//! `componentstatuses` and `serviceaccounts/token`, `pods/ephemeralcontainers`, discovery as
//! kube-apiserver 1.37 writes it, and the objects a control plane holds before any client
//! writes. Everything goes through the API, so these hold on the real backend too.

use std::time::Duration;

use http_body_util::BodyExt;
use kcr_envtest::{TestNamespace, eventually};
use serde_json::{Value, json};

const LIMIT: Duration = Duration::from_secs(30);
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// One request: `(status, JSON body or Null)`.
async fn call(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Option<Value>,
    accept: Option<&str>,
) -> (u16, Value) {
    let mut req = http::Request::builder().method(method).uri(path);
    if body.is_some() {
        let content_type = if method == "PATCH" {
            "application/merge-patch+json"
        } else {
            "application/json"
        };
        req = req.header("Content-Type", content_type);
    }
    if let Some(accept) = accept {
        req = req.header("Accept", accept);
    }
    let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    let resp = client
        .send(req.body(kube::client::Body::from(bytes)).unwrap())
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn get(client: &kube::Client, path: &str) -> (u16, Value) {
    call(client, "GET", path, None, None).await
}

async fn post(client: &kube::Client, path: &str, body: Value) -> (u16, Value) {
    call(client, "POST", path, Some(body), None).await
}

/// Each newly served kind: created, read back, listed, and deleted.
#[tokio::test]
async fn the_added_kinds_are_served() {
    let ns = TestNamespace::new("served").await.unwrap();
    let client = ns.client();
    let n = ns.namespace();
    let role = ns.unique_name("served-kinds");
    let rbac = "rbac.authorization.k8s.io/v1";
    let kinds: [(&str, Value); 8] = [
        (
            &format!("/api/v1/namespaces/{n}/endpoints"),
            json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "ep"},
                "subsets": [{"addresses": [{"ip": "10.1.2.3"}], "ports": [{"port": 80}]}]}),
        ),
        (
            &format!("/api/v1/namespaces/{n}/replicationcontrollers"),
            json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "rc"},
                "spec": {"replicas": 0, "template": {"metadata": {"labels": {"app": "rc"}},
                "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}}),
        ),
        (
            &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{n}/roles"),
            json!({"apiVersion": rbac, "kind": "Role", "metadata": {"name": "r"},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
        ),
        (
            &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{n}/rolebindings"),
            json!({"apiVersion": rbac, "kind": "RoleBinding", "metadata": {"name": "rb"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
                "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            json!({"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": role},
                "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            json!({"apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": {"name": role},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "Group", "name": "g", "apiGroup": "rbac.authorization.k8s.io"}]}),
        ),
        (
            &format!("/apis/networking.k8s.io/v1/namespaces/{n}/ingresses"),
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "ing"},
                "spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}}}),
        ),
        (
            &format!("/apis/discovery.k8s.io/v1/namespaces/{n}/endpointslices"),
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "es"},
                "addressType": "IPv4", "endpoints": [{"addresses": ["10.1.2.3"]}], "ports": [{"port": 80}]}),
        ),
    ];
    for (collection, object) in kinds {
        let name = object["metadata"]["name"].as_str().unwrap();
        let (code, created) = post(&client, collection, object.clone()).await;
        assert_eq!(code, 201, "{collection}: {created}");
        let item = format!("{collection}/{name}");
        let (code, read) = get(&client, &item).await;
        assert_eq!(code, 200, "{item}");
        assert_eq!(read["metadata"]["uid"], created["metadata"]["uid"]);
        let (code, list) = get(&client, collection).await;
        assert_eq!(code, 200);
        assert!(
            list["items"]
                .as_array()
                .unwrap()
                .iter()
                .any(|i| i["metadata"]["name"] == name),
            "{collection}: {list}"
        );
        assert_eq!(post(&client, collection, object).await.0, 409, "{item}");
        assert_eq!(call(&client, "DELETE", &item, None, None).await.0, 200);
    }
    // Defaults and first status, as kube-apiserver writes them.
    let (_, ep) = post(
        &client,
        &format!("/api/v1/namespaces/{n}/endpoints"),
        json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "ep2"},
            "subsets": [{"addresses": [{"ip": "10.1.2.3"}], "ports": [{"port": 80}]}]}),
    )
    .await;
    assert_eq!(ep["subsets"][0]["ports"][0]["protocol"], "TCP");
    let (_, rc) = post(
        &client,
        &format!("/api/v1/namespaces/{n}/replicationcontrollers"),
        json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "rc2"},
            "spec": {"replicas": 0, "template": {"metadata": {"labels": {"app": "rc"}},
            "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}}),
    )
    .await;
    assert_eq!(rc["metadata"]["labels"], json!({"app": "rc"}));
    assert_eq!(rc["spec"]["selector"], json!({"app": "rc"}));
    assert_eq!(rc["status"], json!({"replicas": 0}));
    assert_eq!(rc["metadata"]["generation"], 1);
    let (_, ing) = post(
        &client,
        &format!("/apis/networking.k8s.io/v1/namespaces/{n}/ingresses"),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "ing2"},
            "spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}}}),
    )
    .await;
    assert_eq!(ing["status"], json!({"loadBalancer": {}}));
    // An EndpointSlice's generation counts label changes too.
    let slices = &format!("/apis/discovery.k8s.io/v1/namespaces/{n}/endpointslices");
    let (_, es) = post(
        &client,
        slices,
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "es2"},
            "addressType": "IPv4", "endpoints": [{"addresses": ["10.1.2.3"]}], "ports": [{"port": 80}]}),
    )
    .await;
    assert_eq!(es["endpoints"][0]["conditions"], json!({}));
    assert_eq!(
        es["ports"][0],
        json!({"name": "", "port": 80, "protocol": "TCP"})
    );
    let (code, labelled) = call(
        &client,
        "PATCH",
        &format!("{slices}/es2"),
        Some(json!({"metadata": {"labels": {"a": "b"}}})),
        None,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(labelled["metadata"]["generation"], 2);
    // A CertificateSigningRequest list and the local APIServices answer.
    let (code, csrs) = get(
        &client,
        "/apis/certificates.k8s.io/v1/certificatesigningrequests",
    )
    .await;
    assert_eq!(
        (code, csrs["kind"].as_str()),
        (200, Some("CertificateSigningRequestList"))
    );
    let (code, core) = get(&client, "/apis/apiregistration.k8s.io/v1/apiservices/v1.").await;
    assert_eq!(code, 200, "{core}");
    assert_eq!(core["spec"]["version"], "v1");
    assert_eq!(core["status"]["conditions"][0]["reason"], "Local");
}

/// Discovery lists what kube-apiserver lists: storage version hashes (SHA-256 of
/// group/version/kind), verbs, categories, subresources, and empty response-kind groups.
#[tokio::test]
async fn discovery_is_as_upstream() {
    let ns = TestNamespace::new("discovery").await.unwrap();
    let client = ns.client();
    let entry = |list: &Value, name: &str| {
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} in {list}"))
    };
    let (_, core) = get(&client, "/api/v1").await;
    assert_eq!(
        entry(&core, "configmaps")["storageVersionHash"],
        "qFsyl6wFWjQ="
    );
    assert_eq!(entry(&core, "events")["storageVersionHash"], "r2yiGXH7wu8=");
    let namespaces = entry(&core, "namespaces");
    assert_eq!(
        namespaces["verbs"],
        json!([
            "create", "delete", "get", "list", "patch", "update", "watch"
        ])
    );
    assert_eq!(
        entry(&core, "namespaces/finalize")["verbs"],
        json!(["update"])
    );
    let token = entry(&core, "serviceaccounts/token");
    assert_eq!(
        (
            &token["group"],
            &token["version"],
            &token["kind"],
            &token["verbs"]
        ),
        (
            &json!("authentication.k8s.io"),
            &json!("v1"),
            &json!("TokenRequest"),
            &json!(["create"])
        )
    );
    let cs = entry(&core, "componentstatuses");
    assert_eq!(cs["verbs"], json!(["get", "list"]));
    assert!(cs.get("storageVersionHash").is_none(), "{cs}");
    assert_eq!(entry(&core, "pods/ephemeralcontainers")["kind"], "Pod");
    assert_eq!(
        entry(&core, "replicationcontrollers")["shortNames"],
        json!(["rc"])
    );
    assert_eq!(entry(&core, "endpoints")["singularName"], "endpoints");
    let (_, events) = get(&client, "/apis/events.k8s.io/v1").await;
    assert_eq!(
        entry(&events, "events")["storageVersionHash"],
        "r2yiGXH7wu8="
    );
    let (_, ext) = get(&client, "/apis/apiextensions.k8s.io/v1").await;
    let crds = entry(&ext, "customresourcedefinitions");
    assert_eq!(crds["storageVersionHash"], "jfWCUB31mvA=");
    assert_eq!(crds["categories"], json!(["api-extensions"]));
    let (_, rbac) = get(&client, "/apis/rbac.authorization.k8s.io/v1").await;
    assert_eq!(entry(&rbac, "roles")["storageVersionHash"], "7FuwZcIIItM=");
    let (_, csr) = get(&client, "/apis/certificates.k8s.io/v1").await;
    assert_eq!(
        entry(&csr, "certificatesigningrequests/approval")["verbs"],
        json!(["get", "patch", "update"])
    );

    let (_, agg) = call(&client, "GET", "/api", None, Some(AGGREGATED)).await;
    let resources = agg["items"][0]["versions"][0]["resources"]
        .as_array()
        .unwrap();
    let ns = resources
        .iter()
        .find(|r| r["resource"] == "namespaces")
        .unwrap();
    assert_eq!(
        ns["responseKind"],
        json!({"group": "", "version": "", "kind": "Namespace"})
    );
    let subs: Vec<&str> = ns["subresources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["subresource"].as_str().unwrap())
        .collect();
    assert_eq!(subs, ["finalize", "status"]);
    let (_, agg) = call(&client, "GET", "/apis", None, Some(AGGREGATED)).await;
    let apps = agg["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "apps")
        .unwrap();
    let deploy = apps["versions"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "deployments")
        .unwrap();
    assert_eq!(
        deploy["subresources"],
        json!([
            {"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
             "verbs": ["get", "patch", "update"]},
            {"subresource": "status", "responseKind": {"group": "", "version": "", "kind": "Deployment"},
             "verbs": ["get", "patch", "update"]}
        ])
    );
}

/// Verbs a resource does not have answer 405, as upstream.
#[tokio::test]
async fn verbs_a_resource_lacks_are_not_allowed() {
    let ns = TestNamespace::new("verbs").await.unwrap();
    let client = ns.client();
    let (code, list) = get(&client, "/api/v1/componentstatuses").await;
    assert_eq!(code, 200);
    assert_eq!(list["kind"], "ComponentStatusList");
    let etcd = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["metadata"]["name"] == "etcd-0")
        .cloned()
        .unwrap();
    assert_eq!(etcd["conditions"][0]["status"], "True");
    let (code, one) = get(&client, "/api/v1/componentstatuses/etcd-0").await;
    assert_eq!((code, one["kind"].as_str()), (200, Some("ComponentStatus")));
    let (code, missing) = get(&client, "/api/v1/componentstatuses/nope").await;
    assert_eq!(code, 404);
    assert_eq!(missing["message"], "componentstatus \"nope\" not found");
    let (code, err) = post(
        &client,
        "/api/v1/componentstatuses",
        json!({"apiVersion": "v1", "kind": "ComponentStatus", "metadata": {"name": "x"}}),
    )
    .await;
    assert_eq!(
        (code, err["reason"].as_str()),
        (405, Some("MethodNotAllowed"))
    );
    let (code, err) = get(&client, "/api/v1/componentstatuses?watch=true").await;
    assert_eq!(code, 405);
    assert_eq!(
        err["message"],
        "watch is not supported on resources of kind \"componentstatuses\""
    );
    assert_eq!(
        call(&client, "DELETE", "/api/v1/namespaces", None, None)
            .await
            .0,
        405
    );
    let (code, _) = get(
        &client,
        &format!(
            "/api/v1/namespaces/{}/serviceaccounts/default/token",
            ns.namespace()
        ),
    )
    .await;
    assert_eq!(code, 405);
}

/// A TokenRequest for an existing ServiceAccount answers a token and stores nothing.
#[tokio::test]
async fn service_account_tokens() {
    let ns = TestNamespace::new("sa-tokens").await.unwrap();
    let client = ns.client();
    let n = ns.namespace();
    let path = &format!("/api/v1/namespaces/{n}/serviceaccounts/default/token");
    // The serviceaccount controller creates `default` (asynchronously on the real backend).
    eventually("the default ServiceAccount", LIMIT, || async {
        get(
            &client,
            &format!("/api/v1/namespaces/{n}/serviceaccounts/default"),
        )
        .await
        .0 == 200
    })
    .await;
    let request = |spec: Value| json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec});
    let (code, answer) = post(&client, path, request(json!({"audiences": ["x"]}))).await;
    assert_eq!(code, 201, "{answer}");
    assert_eq!(answer["kind"], "TokenRequest");
    assert_eq!(answer["spec"]["audiences"], json!(["x"]));
    assert_eq!(answer["spec"]["expirationSeconds"], 3600);
    let token = answer["status"]["token"].as_str().unwrap();
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    assert!(answer["status"]["expirationTimestamp"].is_string());
    let (code, err) = post(&client, path, request(json!({"expirationSeconds": 10}))).await;
    assert_eq!((code, err["reason"].as_str()), (422, Some("Invalid")));
    assert_eq!(
        err["details"]["causes"][0]["field"],
        "spec.expirationSeconds"
    );
    let missing = &format!("/api/v1/namespaces/{n}/serviceaccounts/nosuch/token");
    let (code, err) = post(&client, missing, request(json!({}))).await;
    assert_eq!(code, 404);
    assert_eq!(err["message"], "serviceaccounts \"nosuch\" not found");
}

/// `pods/ephemeralcontainers` reads the Pod and changes only its ephemeral containers.
#[tokio::test]
async fn ephemeral_containers() {
    let ns = TestNamespace::new("ephemeral").await.unwrap();
    let client = ns.client();
    let pods = &format!("/api/v1/namespaces/{}/pods", ns.namespace());
    let (code, _) = post(
        &client,
        pods,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}),
    )
    .await;
    assert_eq!(code, 201);
    let path = format!("{pods}/p/ephemeralcontainers");
    let (code, pod) = get(&client, &path).await;
    assert_eq!((code, pod["kind"].as_str()), (200, Some("Pod")));
    let (code, patched) = call(
        &client,
        "PATCH",
        &path,
        Some(
            json!({"spec": {"ephemeralContainers": [{"name": "debug", "image": "busybox:1"}],
            "containers": [{"name": "ignored", "image": "busybox:1"}]}}),
        ),
        None,
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["spec"]["ephemeralContainers"][0]["name"], "debug");
    assert_eq!(patched["spec"]["containers"][0]["name"], "c");
    assert_eq!(
        get(&client, &format!("{pods}/nope/ephemeralcontainers"))
            .await
            .0,
        404
    );
}

/// The system namespaces, the `kubernetes` Service, bootstrap RBAC and each namespace's
/// `default` ServiceAccount.
#[tokio::test]
async fn bootstrap_objects() {
    let ns = TestNamespace::new("bootstrap").await.unwrap();
    let client = ns.client();
    // kube-apiserver writes the namespaces and the Service moments after it is ready; both
    // backends' start returns only once they exist.
    for system in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let (code, _) = get(&client, &format!("/api/v1/namespaces/{system}")).await;
        assert_eq!(code, 200, "namespace {system}");
    }
    let (code, svc) = get(&client, "/api/v1/namespaces/default/services/kubernetes").await;
    assert_eq!(code, 200, "{svc}");
    assert_eq!(svc["spec"]["clusterIP"], "10.0.0.1");
    assert_eq!(svc["spec"]["ports"][0]["port"], 443);
    assert_eq!(svc["spec"]["ports"][0]["name"], "https");
    let (code, admin) = get(
        &client,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/cluster-admin",
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        admin["rules"][0],
        json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})
    );
    let (code, binding) = get(
        &client,
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/cluster-admin",
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(binding["subjects"][0]["name"], "system:masters");
    assert_eq!(binding["roleRef"]["name"], "cluster-admin");
    // The whole bootstrap policy: a role per controller, and namespaced roles in kube-system.
    for path in [
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/system:controller:namespace-controller",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/system:kube-controller-manager",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/roles/extension-apiserver-authentication-reader",
    ] {
        assert_eq!(get(&client, path).await.0, 200, "{path}");
    }
    let (_, view) = get(
        &client,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/view",
    )
    .await;
    assert!(
        view["aggregationRule"]["clusterRoleSelectors"].is_array(),
        "{view}"
    );
    let served_sa = ns.unique_name("served-sa");
    let (code, _) = post(
        &client,
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": served_sa}}),
    )
    .await;
    assert_eq!(code, 201);
    eventually(
        "a new namespace's default ServiceAccount",
        LIMIT,
        || async {
            get(
                &client,
                &format!("/api/v1/namespaces/{served_sa}/serviceaccounts/default"),
            )
            .await
            .0 == 200
        },
    )
    .await;
}

/// The Table cells of `path`'s rows, as `kubectl get` asks for them, with the column names.
async fn table(client: &kube::Client, path: &str) -> (Vec<String>, Vec<Vec<Value>>) {
    let (code, t) = call(
        client,
        "GET",
        path,
        None,
        Some("application/json;as=Table;v=v1;g=meta.k8s.io,application/json"),
    )
    .await;
    assert_eq!(code, 200, "{path}: {t}");
    let columns = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    let rows = t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["cells"].as_array().unwrap().clone())
        .collect();
    (columns, rows)
}

/// The added kinds print upstream's columns (the AGE cells aside).
#[tokio::test]
async fn the_added_kinds_print_upstreams_columns() {
    let test_ns = TestNamespace::new("print-columns").await.unwrap();
    let client = test_ns.client();
    let printed = test_ns.unique_name("printed");
    let ns = "/api/v1/namespaces";
    assert_eq!(
        post(
            &client,
            ns,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": printed}})
        )
        .await
        .0,
        201
    );
    let objects = [
        (
            &format!("/api/v1/namespaces/{printed}/endpoints"),
            json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "ep"},
                "subsets": [{"addresses": [{"ip": "10.1.2.3"}, {"ip": "10.1.2.4"}],
                    "ports": [{"port": 80, "name": "a"}, {"port": 81, "name": "b"}]}]}),
            vec!["Name", "Endpoints", "Age"],
            vec![
                json!("ep"),
                json!("10.1.2.3:80,10.1.2.4:80,10.1.2.3:81 + 1 more..."),
            ],
        ),
        (
            &format!("/apis/discovery.k8s.io/v1/namespaces/{printed}/endpointslices"),
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "es"},
                "addressType": "IPv4", "endpoints": [{"addresses": ["10.1.2.3"]}, {"addresses": ["10.1.2.4"]}],
                "ports": [{"port": 80, "name": "a"}, {"port": 81, "name": "b"}]}),
            vec!["Name", "AddressType", "Ports", "Endpoints", "Age"],
            vec![
                json!("es"),
                json!("IPv4"),
                json!("80,81"),
                json!("10.1.2.3,10.1.2.4"),
            ],
        ),
        (
            &format!("/apis/networking.k8s.io/v1/namespaces/{printed}/ingresses"),
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "ing"},
                "spec": {"ingressClassName": "nginx", "rules": [{"host": "a.example.com", "http": {"paths": [
                    {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "s", "port": {"number": 80}}}}]}},
                    {"host": "b.example.com"}], "tls": [{"hosts": ["a.example.com"]}]}}),
            vec!["Name", "Class", "Hosts", "Address", "Ports", "Age"],
            vec![
                json!("ing"),
                json!("nginx"),
                json!("a.example.com,b.example.com"),
                json!(""),
                json!("80, 443"),
            ],
        ),
        (
            &format!("/api/v1/namespaces/{printed}/replicationcontrollers"),
            json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "rc"},
                "spec": {"replicas": 2, "template": {"metadata": {"labels": {"app": "rc"}},
                "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}}),
            vec![
                "Name",
                "Desired",
                "Current",
                "Ready",
                "Age",
                "Containers",
                "Images",
                "Selector",
            ],
            vec![json!("rc"), json!(2), json!(0), json!(0)],
        ),
        (
            &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{printed}/rolebindings"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "rb"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
                "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"},
                    {"kind": "ServiceAccount", "name": "sa", "namespace": printed},
                    {"kind": "Group", "name": "g1", "apiGroup": "rbac.authorization.k8s.io"}]}),
            vec!["Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"],
            vec![json!("rb"), json!("Role/r")],
        ),
    ];
    for (path, object, columns, cells) in objects {
        assert_eq!(post(&client, path, object).await.0, 201, "{path}");
        let (names, rows) = table(&client, path).await;
        assert_eq!(names, columns, "{path}");
        assert_eq!(rows[0][..cells.len()], cells[..], "{path}");
    }
    let (_, rows) = table(
        &client,
        &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{printed}/rolebindings"),
    )
    .await;
    assert_eq!(
        rows[0][3..],
        [json!("alice"), json!("g1"), json!(format!("{printed}/sa"))]
    );
    let (_, rows) = table(
        &client,
        &format!("/api/v1/namespaces/{printed}/replicationcontrollers"),
    )
    .await;
    assert_eq!(
        rows[0][5..],
        [json!("c"), json!("busybox:1"), json!("app=rc")]
    );
    let (names, rows) = table(
        &client,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/cluster-admin",
    )
    .await;
    assert_eq!(names, ["Name", "Created At"]);
    assert_eq!(rows[0][0], "cluster-admin");
    let (names, rows) = table(
        &client,
        "/apis/apiregistration.k8s.io/v1/apiservices/v1.apps",
    )
    .await;
    assert_eq!(names, ["Name", "Service", "Available", "Age"]);
    assert_eq!(
        rows[0][..3],
        [json!("v1.apps"), json!("Local"), json!("True")]
    );
}

/// `pods/binding` assigns a Pod to a node once; `pods/eviction` deletes it.
#[tokio::test]
async fn pod_binding_and_eviction() {
    let ns = TestNamespace::new("binding").await.unwrap();
    let client = ns.client();
    let pods = &format!("/api/v1/namespaces/{}/pods", ns.namespace());
    for name in ["bound", "evicted"] {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}});
        assert_eq!(post(&client, pods, pod).await.0, 201);
    }
    let binding_of = |pod: &str, node: &str| {
        json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
            "target": {"kind": "Node", "name": node}})
    };
    let binding = |node: &str| binding_of("bound", node);
    let path = format!("{pods}/bound/binding");
    let (code, answer) = post(&client, &path, binding("n1")).await;
    assert_eq!(code, 201, "{answer}");
    assert_eq!(answer["status"], "Success");
    let (_, pod) = get(&client, &format!("{pods}/bound")).await;
    assert_eq!(pod["spec"]["nodeName"], "n1");
    let scheduled = pod["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "PodScheduled")
        .cloned()
        .unwrap();
    assert_eq!(scheduled["status"], "True");
    let (code, err) = post(&client, &path, binding("n2")).await;
    assert_eq!((code, err["reason"].as_str()), (409, Some("Conflict")));
    assert_eq!(
        err["message"],
        "Operation cannot be fulfilled on pods/binding \"bound\": pod bound is already assigned to node \"n1\""
    );
    let (code, err) = post(&client, &format!("{pods}/missing/binding"), binding("n1")).await;
    assert_eq!(code, 400);
    assert_eq!(
        err["message"],
        "name in URL does not match name in Binding object"
    );
    let missing = binding_of("missing", "n1");
    let (code, _) = post(&client, &format!("{pods}/missing/binding"), missing).await;
    assert_eq!(code, 404);
    let (code, _) = get(&client, &path).await;
    assert_eq!(code, 405);

    let eviction = |name: &str| json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}});
    let path = format!("{pods}/evicted/eviction");
    let (code, err) = post(&client, &path, eviction("other")).await;
    assert_eq!(code, 400);
    assert_eq!(
        err["message"],
        "name in URL does not match name in Eviction object"
    );
    let (code, answer) = post(&client, &path, eviction("evicted")).await;
    assert_eq!(code, 201, "{answer}");
    assert_eq!(answer["status"], "Success");
    eventually("the evicted pod is gone", LIMIT, || async {
        get(&client, &format!("{pods}/evicted")).await.0 == 404
    })
    .await;
    let (code, _) = post(&client, &path, eviction("evicted")).await;
    assert_eq!(code, 404);
}

/// `/version` names the Kubernetes release: in process the one kcr-envtest follows
/// (`EMULATED_KUBERNETES_VERSION`, with a `-kcr-envtest` suffix so that nobody mistakes it for a
/// real server), on the real backend the release of the binaries it runs.
#[tokio::test]
async fn version_names_the_release() {
    let ns = TestNamespace::new("version").await.unwrap();
    let (status, v) = get(&ns.client(), "/version").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["major"], "1", "{v}");
    let git = v["gitVersion"].as_str().unwrap_or_default().to_string();
    let minor = v["minor"]
        .as_str()
        .unwrap_or_default()
        .trim_end_matches('+');
    assert!(
        git.starts_with(&format!("v1.{minor}.")),
        "gitVersion {git} and minor {minor} disagree"
    );
    if ns.backend() == kcr_envtest::Backend::InProcess {
        assert_eq!(
            git,
            format!("{}-kcr-envtest", kcr_envtest::EMULATED_KUBERNETES_VERSION)
        );
        assert_eq!(minor, "37");
    }
}
