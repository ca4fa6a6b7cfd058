//! A CustomResourceDefinition needs exactly one storage version and unique version names, as
//! kube-apiserver checks them (and with no single storage version its first
//! `status.storedVersions` is empty, refused too). Through the API, so it holds on a real API
//! server too (`KCR_ENVTEST_BACKEND=real`).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kcr_envtest::TestNamespace;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

fn crd(plural: &str, versions: Value) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "metadata": {"name": format!("{plural}.crdcheck.kcr.dev")},
        "spec": {"group": "crdcheck.kcr.dev", "scope": "Namespaced",
            "names": {"plural": plural, "kind": "Thing"}, "versions": versions}}))
    .unwrap()
}

fn version(name: &str, storage: bool) -> Value {
    json!({"name": name, "served": true, "storage": storage,
        "schema": {"openAPIV3Schema": {"type": "object"}}})
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

#[tokio::test]
async fn a_crd_needs_exactly_one_storage_version() {
    let ns = TestNamespace::new("crd-valid").await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(ns.client());
    let pp = PostParams::default();
    let causes = invalid(
        crds.create(&pp, &crd("nones", json!([])))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        causes,
        vec![
            (
                "spec.versions".to_string(),
                "Invalid value: []: must have exactly one version marked as storage version"
                    .to_string()
            ),
            (
                "status.storedVersions".to_string(),
                "Invalid value: null: must have at least one stored version".to_string()
            ),
        ]
    );
    let causes = invalid(
        crds.create(
            &pp,
            &crd("twos", json!([version("v1", true), version("v2", true)])),
        )
        .await
        .unwrap_err(),
    );
    assert!(
        causes.iter().any(|(f, m)| f == "spec.versions"
            && m.ends_with("must have exactly one version marked as storage version")),
        "{causes:?}"
    );
    assert!(
        crds.get_opt("twos.crdcheck.kcr.dev")
            .await
            .unwrap()
            .is_none()
    );
    crds.create(
        &pp,
        &crd("ones", json!([version("v1", true), version("v2", false)])),
    )
    .await
    .unwrap();
    crds.delete("ones.crdcheck.kcr.dev", &Default::default())
        .await
        .unwrap();
}
