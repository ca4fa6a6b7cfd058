//! Admission round trip through the server: webhook configurations stored via the API, a small
//! HTTPS webhook in the test (allow, deny with message, mutate), failurePolicy and timeouts.

mod common;

use std::sync::atomic::Ordering;

use base64::Engine as _;
use common::start_hook;
use k8s_openapi::api::core::v1::ConfigMap;
use kcr_envtest::{TestNamespace, eventually};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

/// Decide on one AdmissionReview: deny objects labelled `deny`, label everything `admitted`.
fn review(path: &str, review: &Value) -> Value {
    let req = &review["request"];
    let uid = req["uid"].clone();
    let response = match path {
        "/validate" => {
            let denied = req["object"]["metadata"]["labels"]["deny"].is_string();
            if denied {
                json!({"uid": uid, "allowed": false, "status": {"code": 403, "message": "objects labelled deny are refused"}})
            } else {
                json!({"uid": uid, "allowed": true, "warnings": ["validated by the test webhook"]})
            }
        }
        "/mutate" => {
            let has_labels = req["object"]["metadata"]["labels"].is_object();
            let ops = if has_labels {
                json!([{"op": "add", "path": "/metadata/labels/admitted", "value": req["operation"]}])
            } else {
                json!([{"op": "add", "path": "/metadata/labels", "value": {"admitted": req["operation"]}}])
            };
            let patch = base64::engine::general_purpose::STANDARD.encode(ops.to_string());
            json!({"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch})
        }
        _ => json!({"uid": uid, "allowed": true}),
    };
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

/// A configuration with one webhook on ConfigMap creates and updates in `namespace` only (the
/// server is shared with the binary's other tests).
fn webhook_config(
    kind: &str,
    name: &str,
    namespace: &str,
    url: &str,
    ca: &str,
    policy: &str,
) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [{
            "name": format!("{name}.example.com"),
            "clientConfig": {"url": url, "caBundle": ca},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"], "operations": ["CREATE", "UPDATE"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "failurePolicy": policy,
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 2,
        }],
    }))
    .unwrap()
}

fn cm(name: &str, labels: Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
}

/// How long kube-apiserver may take to use a changed webhook configuration (it reads them
/// through an informer; in process a configuration is in effect once written).
const IN_EFFECT: std::time::Duration = std::time::Duration::from_secs(30);

/// Wait until a dry-run create of a ConfigMap labelled `labels` passes `check` (webhooks with
/// `sideEffects: None` are called for dry runs too).
async fn until_dry_run<F>(cms: &Api<ConfigMap>, what: &str, labels: Value, check: F)
where
    F: Fn(&kube::Result<ConfigMap>) -> bool,
{
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    eventually(what, IN_EFFECT, || async {
        check(&cms.create(&dry, &cm("probe", labels.clone())).await)
    })
    .await;
}

fn api_for(ns: &TestNamespace, kind: &str, plural: &str) -> Api<DynamicObject> {
    let gvk = kube::core::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
    Api::all_with(
        ns.client(),
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    )
}

#[tokio::test]
async fn allow_deny_and_mutate() {
    let ns = TestNamespace::new("admit").await.unwrap();
    let hook = start_hook(review).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(ns.client());
    let (m, v) = (ns.unique_name("m"), ns.unique_name("v"));
    let mutating = api_for(
        &ns,
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
    );
    let validating = api_for(
        &ns,
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
    );
    mutating
        .create(
            &PostParams::default(),
            &webhook_config(
                "MutatingWebhookConfiguration",
                &m,
                ns.namespace(),
                &format!("{}/mutate", hook.url),
                &hook.ca_bundle,
                "Fail",
            ),
        )
        .await
        .unwrap();
    validating
        .create(
            &PostParams::default(),
            &webhook_config(
                "ValidatingWebhookConfiguration",
                &v,
                ns.namespace(),
                &format!("{}/validate", hook.url),
                &hook.ca_bundle,
                "Fail",
            ),
        )
        .await
        .unwrap();
    until_dry_run(&cms, "the mutating webhook is in effect", json!({}), |r| {
        r.as_ref().is_ok_and(|o| {
            o.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key("admitted"))
        })
    })
    .await;
    until_dry_run(
        &cms,
        "the validating webhook is in effect",
        json!({"deny": "yes"}),
        |r| matches!(r, Err(kube::Error::Api(s)) if s.code == 403),
    )
    .await;
    let calls_before = hook.calls.load(Ordering::SeqCst);

    // Allowed and mutated on create.
    let ok = cms
        .create(&PostParams::default(), &cm("ok", json!({"a": "b"})))
        .await
        .unwrap();
    let labels = ok.metadata.labels.unwrap();
    assert_eq!(labels["admitted"], "CREATE");
    assert_eq!(labels["a"], "b");
    // Mutated on update (patch) as well.
    let patched = cms
        .patch(
            "ok",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "v"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.metadata.labels.unwrap()["admitted"], "UPDATE");
    assert_eq!(
        hook.calls.load(Ordering::SeqCst) - calls_before,
        4,
        "mutate+validate per write"
    );

    // Webhook warnings come back as Warning headers.
    let req = http::Request::post(format!("/api/v1/namespaces/{}/configmaps", ns.namespace()))
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(&cm("warned", json!({}))).unwrap())
        .unwrap();
    let resp = ns
        .client()
        .send(req.map(kube::client::Body::from))
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let warnings: Vec<String> = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    assert_eq!(warnings, [r#"299 - "validated by the test webhook""#]);

    // Denied with the webhook's message.
    let err = cms
        .create(&PostParams::default(), &cm("no", json!({"deny": "yes"})))
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 403);
            assert!(
                s.message.contains("objects labelled deny are refused"),
                "{}",
                s.message
            );
            assert!(
                s.message.contains(&format!("{v}.example.com")),
                "{}",
                s.message
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(
        cms.get("no").await.is_err(),
        "denied objects are not stored"
    );
    // Rules: deletes are not intercepted by these configurations.
    cms.delete("ok", &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn failure_policy() {
    let ns = TestNamespace::new("failpol").await.unwrap();
    let hook = start_hook(review).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(ns.client());
    let (ignore, fail) = (ns.unique_name("ignore"), ns.unique_name("fail"));
    // A URL nobody listens on (the hook's own port, wrong scheme path is fine: use a closed port).
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        format!("https://{addr}/validate")
    };
    let validating = api_for(
        &ns,
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
    );
    // Two configurations calling the closed port: one ignores the failure, one fails closed.
    // kube-apiserver applies configuration changes in order, so once the second is in effect
    // the first is too.
    for (name, policy) in [(&ignore, "Ignore"), (&fail, "Fail")] {
        validating
            .create(
                &PostParams::default(),
                &webhook_config(
                    "ValidatingWebhookConfiguration",
                    name,
                    ns.namespace(),
                    &closed,
                    &hook.ca_bundle,
                    policy,
                ),
            )
            .await
            .unwrap();
    }
    let fail_hook = format!("{fail}.example.com");
    let refused_by_fail = |r: &kube::Result<ConfigMap>| matches!(r, Err(kube::Error::Api(s)) if s.code == 500 && s.message.contains(&fail_hook));
    until_dry_run(&cms, "the failing webhook is in effect", json!({}), |r| {
        refused_by_fail(r)
    })
    .await;
    let err = cms
        .create(&PostParams::default(), &cm("blocked", json!({})))
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 500);
            assert!(s.message.contains(&fail_hook), "{}", s.message);
            assert!(
                !s.message.contains(&format!("{ignore}.example.com")),
                "{}",
                s.message
            );
        }
        other => panic!("{other:?}"),
    }
    // Removing the failing configuration lets writes through again: the unreachable webhook
    // of the other one is ignored.
    validating
        .delete(&fail, &DeleteParams::default())
        .await
        .unwrap();
    until_dry_run(&cms, "the failing webhook is gone", json!({}), |r| {
        r.is_ok()
    })
    .await;
    cms.create(&PostParams::default(), &cm("passes", json!({})))
        .await
        .unwrap();
    assert!(
        cms.get("blocked").await.is_err(),
        "refused objects are not stored"
    );
    assert_eq!(hook.calls.load(Ordering::SeqCst), 0);
}
