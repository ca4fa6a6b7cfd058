//! Each kind's rule for `metadata.name`, as upstream's validation gives it per kind: RBAC
//! objects take any path segment (capitals and `:` included), Namespaces, StatefulSets and
//! (since 1.37, KEP-5311) Services a DNS-1123 label, CertificateSigningRequests anything, and the
//! rest (custom resources too) a DNS-1123 subdomain. Through the API, so it holds on a real
//! API server too (`KCR_ENVTEST_BACKEND=real`).

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleBinding};
use kcr_envtest::TestNamespace;
use kube::api::{Api, DeleteParams, PostParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn of<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// The 422's causes as `(field, message)`.
fn invalid(e: kube::Error) -> Vec<(String, String)> {
    match e {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422, "{s:?}");
            s.details
                .expect("details")
                .causes
                .into_iter()
                .map(|c| (c.field, c.message))
                .collect()
        }
        other => panic!("expected 422, got {other:?}"),
    }
}

#[tokio::test]
async fn rbac_names_are_path_segments() {
    let ns = TestNamespace::new("rbac-names").await.unwrap();
    let pp = PostParams::default();
    let roles: Api<Role> = Api::default_namespaced(ns.client());
    // Capitals and ':' are fine for RBAC (a DNS subdomain would refuse both).
    let role = roles
        .create(
            &pp,
            &of(json!({"metadata": {"name": "clusterRole-10:Reader"}})),
        )
        .await
        .unwrap();
    assert_eq!(role.metadata.name.as_deref(), Some("clusterRole-10:Reader"));
    let bindings: Api<RoleBinding> = Api::default_namespaced(ns.client());
    bindings
        .create(
            &pp,
            &of(json!({"metadata": {"name": "Binding_With_Underscores"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                            "name": "clusterRole-10:Reader"}})),
        )
        .await
        .unwrap();
    // What a path segment may not hold: '%' (a '/' cannot reach the body's name check intact).
    let causes = invalid(
        roles
            .create(&pp, &of(json!({"metadata": {"name": "fifty%off"}})))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        causes,
        vec![(
            "metadata.name".to_string(),
            "Invalid value: \"fifty%off\": may not contain '%'".to_string()
        )]
    );
    let causes = invalid(
        roles
            .create(&pp, &of(json!({"metadata": {"name": ".."}})))
            .await
            .unwrap_err(),
    );
    assert_eq!(causes[0].1, "Invalid value: \"..\": may not be '..'");
    // Cluster-scoped RBAC kinds follow the same rule.
    let cluster_roles: Api<ClusterRole> = Api::all(ns.client());
    let name = format!("Kcr:Test:{}", ns.namespace());
    cluster_roles
        .create(&pp, &of(json!({"metadata": {"name": name}})))
        .await
        .unwrap();
    cluster_roles
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    // A ConfigMap keeps the DNS subdomain rule.
    let cms: Api<ConfigMap> = Api::default_namespaced(ns.client());
    let causes = invalid(
        cms.create(&pp, &of(json!({"metadata": {"name": "Capital"}})))
            .await
            .unwrap_err(),
    );
    assert_eq!(causes[0].0, "metadata.name");
    assert!(
        causes[0]
            .1
            .starts_with("Invalid value: \"Capital\": a lowercase RFC 1123 subdomain"),
        "{causes:?}"
    );
}

#[tokio::test]
async fn services_namespaces_and_stateful_sets_take_labels() {
    let ns = TestNamespace::new("label-names").await.unwrap();
    let pp = PostParams::default();
    // A Service name is a DNS-1123 label since 1.37 (KEP-5311): a leading digit is fine now,
    // a dot is not.
    let services: Api<Service> = Api::default_namespaced(ns.client());
    let svc = |name: &str| -> Service {
        of(json!({"metadata": {"name": name}, "spec": {"ports": [{"port": 80}]}}))
    };
    services.create(&pp, &svc("1st")).await.unwrap();
    let causes = invalid(services.create(&pp, &svc("a.b")).await.unwrap_err());
    assert_eq!(causes[0].0, "metadata.name");
    assert!(
        causes[0].1 == "Invalid value: \"a.b\": must not contain dots",
        "{causes:?}"
    );
    services.create(&pp, &svc("web")).await.unwrap();
    // A StatefulSet name is a DNS-1123 label: a dot (fine in a subdomain) is refused.
    let sets: Api<StatefulSet> = Api::default_namespaced(ns.client());
    let sts = |name: &str| -> StatefulSet {
        of(json!({"metadata": {"name": name}, "spec": {
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}},
                         "spec": {"containers": [{"name": "db", "image": "db"}]}}}}))
    };
    let causes = invalid(sets.create(&pp, &sts("db.v1")).await.unwrap_err());
    assert!(
        causes
            .iter()
            .any(|(f, m)| f == "metadata.name"
                && m == "Invalid value: \"db.v1\": must not contain dots"),
        "{causes:?}"
    );
    sets.create(&pp, &sts("db")).await.unwrap();
    // A Namespace name is a DNS-1123 label too.
    let namespaces: Api<Namespace> = Api::all(ns.client());
    let dotted = format!("{}.dotted", ns.namespace());
    let causes = invalid(
        namespaces
            .create(&pp, &of(json!({"metadata": {"name": dotted}})))
            .await
            .unwrap_err(),
    );
    assert_eq!(causes[0].0, "metadata.name");
    assert!(causes[0].1.ends_with("must not contain dots"), "{causes:?}");
}

#[tokio::test]
async fn certificate_signing_requests_take_any_name() {
    let ns = TestNamespace::new("csr-names").await.unwrap();
    let csrs: Api<CertificateSigningRequest> = Api::all(ns.client());
    // A CSR for a node is conventionally named after the node and the user: capitals and ':'.
    let name = format!("CSR:{}:Node_A", ns.namespace());
    let key = rcgen::KeyPair::generate().unwrap();
    let pem = rcgen::CertificateParams::new(vec!["node-a".to_string()])
        .unwrap()
        .serialize_request(&key)
        .unwrap()
        .pem()
        .unwrap();
    let request = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, pem);
    let created = csrs
        .create(
            &PostParams::default(),
            &of(json!({"metadata": {"name": name}, "spec": {
                "request": request,
                "signerName": "example.com/kcr-test",
                "usages": ["digital signature", "key encipherment"]}})),
        )
        .await
        .unwrap();
    assert_eq!(created.metadata.name.as_deref(), Some(name.as_str()));
    csrs.delete(&name, &DeleteParams::default()).await.unwrap();
}
