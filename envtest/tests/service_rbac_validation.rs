//! Services and RBAC objects are validated as kube-apiserver validates them: ports required
//! and numbered, port names unique, a supported type; rules with verbs and resources, bindings
//! with a role name and supported subject kinds. Nothing refused is stored. Through the API,
//! so it holds on a real API server too (`KCR_ENVTEST_BACKEND=real`).

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kcr_envtest::TestNamespace;
use kube::api::{Api, PostParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn of<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// The 422's causes as `(field, message)`, sorted.
fn invalid(e: kube::Error) -> Vec<(String, String)> {
    match e {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{s:?}");
            let mut causes: Vec<(String, String)> = s
                .details
                .expect("details")
                .causes
                .into_iter()
                .map(|c| (c.field, c.message))
                .collect();
            causes.sort();
            causes
        }
        other => panic!("expected 422, got {other:?}"),
    }
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(f, m)| (f.to_string(), m.to_string()))
        .collect()
}

#[tokio::test]
async fn services_need_valid_ports_and_type() {
    let ns = TestNamespace::new("svc-valid").await.unwrap();
    let services: Api<Service> = Api::default_namespaced(ns.client());
    let pp = PostParams::default();
    let svc = |name: &str, spec: Value| -> Service {
        of(json!({"metadata": {"name": name}, "spec": spec}))
    };
    let causes = invalid(
        services
            .create(&pp, &svc("none", json!({"selector": {"app": "x"}})))
            .await
            .unwrap_err(),
    );
    assert_eq!(causes, pairs(&[("spec.ports", "Required value")]));
    let causes = invalid(
        services
            .create(&pp, &svc("big", json!({"ports": [{"port": 70000}]})))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        causes,
        pairs(&[
            (
                "spec.ports[0].port",
                "Invalid value: 70000: must be between 1 and 65535, inclusive"
            ),
            (
                "spec.ports[0].targetPort",
                "Invalid value: 70000: must be between 1 and 65535, inclusive"
            )
        ])
    );
    let causes = invalid(
        services
            .create(
                &pp,
                &svc(
                    "dup",
                    json!({"ports": [{"name": "a", "port": 80}, {"name": "a", "port": 81}]}),
                ),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(
        causes,
        pairs(&[("spec.ports[1].name", "Duplicate value: \"a\"")])
    );
    // A headless Service needs no ports.
    services
        .create(
            &pp,
            &svc(
                "headless",
                json!({"clusterIP": "None", "selector": {"app": "x"}}),
            ),
        )
        .await
        .unwrap();
    assert!(services.get_opt("dup").await.unwrap().is_none());
}

#[tokio::test]
async fn rbac_rules_and_bindings_are_checked() {
    let ns = TestNamespace::new("rbac-valid").await.unwrap();
    let roles: Api<Role> = Api::default_namespaced(ns.client());
    let pp = PostParams::default();
    let causes = invalid(
        roles
            .create(
                &pp,
                &of(json!({"metadata": {"name": "r"},
                    "rules": [{"apiGroups": [""], "resources": ["pods"]},
                              {"apiGroups": [""], "verbs": ["get"]}]})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(
        causes,
        pairs(&[
            ("rules[0].verbs", "Required value"),
            (
                "rules[1].resources",
                "Required value: resource rules must supply at least one resource"
            )
        ])
    );
    let bindings: Api<RoleBinding> = Api::default_namespaced(ns.client());
    let causes = invalid(
        bindings
            .create(
                &pp,
                &of(json!({"metadata": {"name": "rb"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
                    "subjects": [{"kind": "Robot", "name": "r2d2"}]})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(
        causes,
        pairs(&[(
            "subjects[0].kind",
            "Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\""
        )])
    );
    // A valid pair is accepted.
    roles
        .create(
            &pp,
            &of(json!({"metadata": {"name": "reader"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})),
        )
        .await
        .unwrap();
    bindings
        .create(
            &pp,
            &of(json!({"metadata": {"name": "readers"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "default"}]})),
        )
        .await
        .unwrap();
}
