//! Objects the real API server refuses as invalid (422) with its field and message: label and
//! annotation keys, label values, ConfigMap keys, a Deployment's selector that does not select
//! its template, a Lease's duration, an unconditional update of a custom resource. Everything
//! goes through the Kubernetes API, so these hold on a real API server too.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kcr_envtest::TestNamespace;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn of<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// The 422's first cause as `(field, message)`.
fn invalid(e: kube::Error) -> (String, String) {
    match e {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422, "{s:?}");
            let cause = &s.details.as_ref().expect("details").causes[0];
            (cause.field.clone(), cause.message.clone())
        }
        other => panic!("expected 422, got {other:?}"),
    }
}

#[tokio::test]
async fn bad_metadata_and_configmap_keys() {
    let ns = TestNamespace::new("keys").await.unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(ns.client());
    let pp = PostParams::default();
    let e = cms
        .create(
            &pp,
            &of(json!({"metadata": {"name": "l", "labels": {"bad key!": "v"}}})),
        )
        .await
        .unwrap_err();
    let (field, message) = invalid(e);
    assert_eq!(field, "metadata.labels");
    assert!(
        message.starts_with("Invalid value: \"bad key!\": name part must consist"),
        "{message}"
    );
    let e = cms
        .create(
            &pp,
            &of(json!({"metadata": {"name": "v", "labels": {"k": "bad value!"}}})),
        )
        .await
        .unwrap_err();
    assert!(
        invalid(e)
            .1
            .contains("a valid label must be an empty string")
    );
    let e = cms
        .create(
            &pp,
            &of(json!({"metadata": {"name": "a", "annotations": {"bad key!": ""}}})),
        )
        .await
        .unwrap_err();
    assert_eq!(invalid(e).0, "metadata.annotations");
    let e = cms
        .create(
            &pp,
            &of(json!({"metadata": {"name": "d"}, "data": {"bad key": "v"}})),
        )
        .await
        .unwrap_err();
    let (field, message) = invalid(e);
    assert_eq!(field, "data[bad key]");
    assert!(
        message.contains("a valid config key must consist"),
        "{message}"
    );
    let e = cms
        .create(
            &pp,
            &of(
                json!({"metadata": {"name": "b"}, "data": {"a": "1"}, "binaryData": {"a": "dg=="}}),
            ),
        )
        .await
        .unwrap_err();
    assert_eq!(
        invalid(e),
        (
            "data[a]".to_string(),
            "Invalid value: \"a\": duplicate of key present in binaryData".to_string()
        )
    );
    // Valid keys pass.
    cms.create(
        &pp,
        &of(
            json!({"metadata": {"name": "ok", "labels": {"example.com/a": "b"}},
        "data": {"key.name-1_x": "v"}}),
        ),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_selector_that_misses_the_template_and_a_negative_lease() {
    let ns = TestNamespace::new("selector-lease").await.unwrap();
    let deployments: Api<Deployment> = Api::default_namespaced(ns.client());
    let e = deployments
        .create(
            &PostParams::default(),
            &of(json!({"metadata": {"name": "bad"},
            "spec": {"selector": {"matchLabels": {"a": "b"}},
                "template": {"metadata": {"labels": {"a": "c"}},
                    "spec": {"containers": [{"name": "c", "image": "i"}]}}}})),
        )
        .await
        .unwrap_err();
    assert_eq!(
        invalid(e),
        (
            "spec.template.metadata.labels".to_string(),
            "Invalid value: {\"a\":\"c\"}: `selector` does not match template `labels`".to_string()
        )
    );
    let leases: Api<Lease> = Api::default_namespaced(ns.client());
    let e = leases
        .create(
            &PostParams::default(),
            &of(json!({"metadata": {"name": "bad"},
            "spec": {"leaseDurationSeconds": -1}})),
        )
        .await
        .unwrap_err();
    assert_eq!(
        invalid(e),
        (
            "spec.leaseDurationSeconds".to_string(),
            "Invalid value: -1: must be greater than 0".to_string()
        )
    );
}

#[tokio::test]
async fn a_custom_resource_update_needs_a_resource_version() {
    let ns = TestNamespace::new("cr-update").await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(ns.client());
    crds.create(&PostParams::default(), &of(json!({"metadata": {"name": "things.v.kcr.dev"},
        "spec": {"group": "v.kcr.dev", "scope": "Namespaced",
            "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})))
        .await
        .unwrap();
    let gvk = GroupVersionKind::gvk("v.kcr.dev", "v1", "Thing");
    let things: Api<DynamicObject> =
        Api::namespaced_with(ns.client(), ns.namespace(), &ApiResource::from_gvk(&gvk));
    let thing: DynamicObject = of(json!({"apiVersion": "v.kcr.dev/v1", "kind": "Thing",
        "metadata": {"name": "t"}, "spec": {"a": 1}}));
    kcr_envtest::eventually(
        "the CRD is served",
        std::time::Duration::from_secs(30),
        || async { things.create(&PostParams::default(), &thing).await.is_ok() },
    )
    .await;
    let e = things
        .replace("t", &PostParams::default(), &thing)
        .await
        .unwrap_err();
    assert_eq!(
        invalid(e),
        (
            "metadata.resourceVersion".to_string(),
            "Invalid value: 0: must be specified for an update".to_string()
        )
    );
    let current = things.get("t").await.unwrap();
    things
        .replace("t", &PostParams::default(), &current)
        .await
        .unwrap();
    // A missing object is a 404 before anything is validated (found by the randomised test).
    let mut missing = thing.clone();
    missing.metadata.name = Some("missing".into());
    match things
        .replace("missing", &PostParams::default(), &missing)
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => assert_eq!((s.code, s.reason.as_str()), (404, "NotFound")),
        other => panic!("expected a 404, got {other}"),
    }
}

#[tokio::test]
async fn an_invalid_webhook_configuration_names_each_broken_field() {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    let ns = TestNamespace::new("bad-webhook").await.unwrap();
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(ns.client());
    let e = configs
        .create(
            &PostParams::default(),
            &of(
                json!({"metadata": {"name": ns.unique_name("bad")}, "webhooks": [{"name": "nodots",
                "clientConfig": {}, "sideEffects": "Maybe", "admissionReviewVersions": ["v1"]}]}),
            ),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = e else {
        panic!("expected an API error")
    };
    assert_eq!(status.code, 422);
    let fields: Vec<String> = status
        .details
        .unwrap()
        .causes
        .into_iter()
        .map(|c| c.field)
        .collect();
    assert_eq!(
        fields,
        [
            "webhooks[0].name",
            "webhooks[0].sideEffects",
            "webhooks[0].clientConfig"
        ]
    );
}
