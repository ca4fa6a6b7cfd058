//! Unknown fields of built-in kinds, as kube-apiserver treats them (it decodes a built-in's
//! JSON into its Go type): `fieldValidation=Strict` refuses the write naming each field with
//! its path, and otherwise they are dropped, never stored and never owned. Through the API,
//! so it holds on a real API server too (`KCR_ENVTEST_BACKEND=real`).

use k8s_openapi::api::core::v1::ConfigMap;
use kcr_envtest::TestNamespace;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

fn configmaps() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "ConfigMap"), "configmaps")
}

#[tokio::test]
async fn strict_refuses_unknown_fields_by_path_and_the_default_drops_them() {
    let ns = TestNamespace::new("unknown-fields").await.unwrap();
    let dynamic: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.namespace(), &configmaps());
    let object = |name: &str| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "surprise": true}, "bogus": 1, "data": {"k": "v"}}))
        .unwrap()
    };
    // kube's PostParams has no fieldValidation: the request by hand.
    let body = serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "strict", "surprise": true},
        "spec": {"nested": {"deeper": 1}}, "bogus": 1, "data": {"k": "v"}}))
    .unwrap();
    let req = http::Request::post(format!(
        "/api/v1/namespaces/{}/configmaps?fieldValidation=Strict",
        ns.namespace()
    ))
    .header("Content-Type", "application/json")
    .body(body)
    .unwrap();
    match ns.client().request::<ConfigMap>(req).await.unwrap_err() {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"), "{s:?}");
            assert_eq!(
                s.message,
                "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding \
                 error: unknown field \"bogus\", unknown field \"metadata.surprise\", unknown field \
                 \"spec\""
            );
        }
        other => panic!("expected 400, got {other:?}"),
    }
    let typed: Api<ConfigMap> = Api::default_namespaced(ns.client());
    assert!(typed.get_opt("strict").await.unwrap().is_none());

    // Without Strict the write goes through and the fields are gone: not stored, not owned.
    let created = dynamic
        .create(&PostParams::default(), &object("lenient"))
        .await
        .unwrap();
    assert!(created.data.get("bogus").is_none(), "{:?}", created.data);
    let stored = dynamic.get("lenient").await.unwrap();
    assert!(stored.data.get("bogus").is_none(), "{:?}", stored.data);
    assert_eq!(stored.data["data"], json!({"k": "v"}));
    let owned = serde_json::to_value(&stored.metadata.managed_fields).unwrap();
    assert!(!owned.to_string().contains("bogus"), "{owned}");
    assert!(!owned.to_string().contains("surprise"), "{owned}");
}
