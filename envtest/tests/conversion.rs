//! CRDs in several versions, as the real API server serves them: objects stored in the storage
//! version, read and written in any served version through the CRD's conversion webhook (a
//! small HTTPS webhook in the test), a list mixing stored versions after the storage version
//! changes, watches converted too, and a failing webhook reported as a 500 in kube-apiserver
//! 1.37's words for each verb.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{Hook, start_hook};
use futures::{StreamExt, TryStreamExt};
use kcr_envtest::{TestApiServer, eventually};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchParams};
use kube::core::{GroupVersionKind, WatchEvent};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

const GROUP: &str = "conv.kcr.dev";

/// `v1` has `spec.size`, `v2` has `spec.replicas`; `/fail` refuses every review, `/bad-uid`
/// changes the uid of what it converts.
fn convert_one(obj: &Value, desired: &str) -> Value {
    let mut out = obj.clone();
    let spec = out["spec"].as_object_mut().cloned().unwrap_or_default();
    let mut new = serde_json::Map::new();
    for (k, v) in spec {
        let k = match (k.as_str(), desired) {
            ("size", "conv.kcr.dev/v2") => "replicas".to_string(),
            ("replicas", "conv.kcr.dev/v1") => "size".to_string(),
            _ => k,
        };
        new.insert(k, v);
    }
    out["spec"] = Value::Object(new);
    out["apiVersion"] = json!(desired);
    // Upstream keeps only labels and annotations of the converted metadata.
    out["metadata"]["labels"]["converted"] = json!("true");
    out["metadata"]["generation"] = json!(1000);
    out
}

fn review(path: &str, review: &Value) -> Value {
    let req = &review["request"];
    let uid = req["uid"].clone();
    let response = if path == "/fail" {
        json!({"uid": uid, "result": {"status": "Failure", "message": "the test webhook refuses to convert"}})
    } else if path == "/bad-uid" {
        let objects: Vec<Value> = req["objects"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|o| {
                let mut o = convert_one(o, req["desiredAPIVersion"].as_str().unwrap_or_default());
                o["metadata"]["uid"] = json!("changed-by-the-webhook");
                o
            })
            .collect();
        json!({"uid": uid, "result": {"status": "Success"}, "convertedObjects": objects})
    } else {
        let desired = req["desiredAPIVersion"].as_str().unwrap_or_default();
        let objects: Vec<Value> = req["objects"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|o| convert_one(o, desired))
            .collect();
        json!({"uid": uid, "result": {"status": "Success"}, "convertedObjects": objects})
    };
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response})
}

fn schema(field: &str) -> Value {
    json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {field: {"type": "integer"}}}}}})
}

/// The CRD `things.conv.kcr.dev` in v1 and v2, `storage` the storage version, converted by
/// the webhook at `url` + `path`.
fn crd(plural: &str, storage: &str, hook: &Hook, path: &str) -> Value {
    json!({
        "metadata": {"name": format!("{plural}.{GROUP}")},
        "spec": {
            "group": GROUP, "scope": "Namespaced",
            "names": {"plural": plural, "singular": plural.trim_end_matches('s'), "kind": kind_of(plural),
                      "listKind": format!("{}List", kind_of(plural))},
            "versions": [
                {"name": "v1", "served": true, "storage": storage == "v1", "schema": schema("size")},
                {"name": "v2", "served": true, "storage": storage == "v2", "schema": schema("replicas")},
            ],
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"url": format!("{}{path}", hook.url), "caBundle": hook.ca_bundle}}},
        },
    })
}

fn kind_of(plural: &str) -> String {
    let mut k = plural.trim_end_matches('s').to_string();
    k[..1].make_ascii_uppercase();
    k
}

fn api(ns: &TestApiServer, plural: &str, version: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(GROUP, version, &kind_of(plural));
    Api::namespaced_with(
        ns.client(),
        ns.namespace(),
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    )
}

fn obj(ns: &TestApiServer, plural: &str, version: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/{version}"), "kind": kind_of(plural),
        "metadata": {"name": name, "namespace": ns.namespace()}, "spec": spec,
    }))
    .unwrap()
}

/// How long the real API server may take to serve a changed CRD (in process: at once).
const IN_EFFECT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_are_converted_by_the_webhook_on_reads_writes_lists_and_watches() {
    // A server of its own: the CRD's conversion webhook dies with this test, and on a
    // cluster other tests share, the CRD would outlive it (its objects unreadable, the
    // garbage collector unable to sync).
    let ns = TestApiServer::start().await.unwrap();
    let hook = start_hook(review).await;
    ns.install_crd_value(crd("things", "v1", &hook, "/convert"))
        .await
        .unwrap();
    let v1 = api(&ns, "things", "v1");
    let v2 = api(&ns, "things", "v2");

    // Written as v2, stored as v1, read back in both versions.
    let created = v2
        .create(
            &PostParams::default(),
            &obj(&ns, "things", "v2", "a", json!({"replicas": 2})),
        )
        .await
        .unwrap();
    assert_eq!(
        created.types.as_ref().unwrap().api_version,
        "conv.kcr.dev/v2"
    );
    assert_eq!(created.data["spec"], json!({"replicas": 2}));
    // Only labels and annotations of the converted metadata are kept.
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(
        created.metadata.labels.as_ref().unwrap()["converted"],
        "true"
    );
    let as_v1 = v1.get("a").await.unwrap();
    assert_eq!(as_v1.types.as_ref().unwrap().api_version, "conv.kcr.dev/v1");
    assert_eq!(as_v1.data["spec"], json!({"size": 2}));
    assert_eq!(
        v2.get("a").await.unwrap().data["spec"],
        json!({"replicas": 2})
    );
    assert!(hook.calls.load(Ordering::SeqCst) > 0);

    // A merge patch in v2's fields, of an object stored as v1.
    let patched = v2
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["spec"], json!({"replicas": 4}));
    assert_eq!(v1.get("a").await.unwrap().data["spec"], json!({"size": 4}));

    // The storage version becomes v2: "a" stays stored as v1, "b" is stored as v2.
    ns.install_crd_value(crd("things", "v2", &hook, "/convert"))
        .await
        .unwrap();
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(ns.client());
    eventually("v1 and v2 are stored versions", IN_EFFECT, || async {
        let crd = crds.get("things.conv.kcr.dev").await.unwrap();
        crd.status.and_then(|s| s.stored_versions) == Some(vec!["v1".into(), "v2".into()])
    })
    .await;
    v1.create(
        &PostParams::default(),
        &obj(&ns, "things", "v1", "b", json!({"size": 3})),
    )
    .await
    .unwrap();
    // A metadata-only change of "a" (stored as v1, written now as v2) keeps its generation:
    // the spec is compared in one version.
    let before = v2.get("a").await.unwrap().metadata.generation;
    let labelled = v2
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
        )
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, before);
    assert_eq!(labelled.data["spec"], json!({"replicas": 4}));
    let spec_of = |list: Vec<DynamicObject>| -> Vec<(String, Value)> {
        let mut out: Vec<(String, Value)> = list
            .into_iter()
            .map(|o| (o.metadata.name.unwrap_or_default(), o.data["spec"].clone()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    };
    assert_eq!(
        spec_of(v1.list(&ListParams::default()).await.unwrap().items),
        vec![
            ("a".to_string(), json!({"size": 4})),
            ("b".to_string(), json!({"size": 3}))
        ]
    );
    assert_eq!(
        spec_of(v2.list(&ListParams::default()).await.unwrap().items),
        vec![
            ("a".to_string(), json!({"replicas": 4})),
            ("b".to_string(), json!({"replicas": 3}))
        ]
    );

    // A watch in v1 sees both objects in v1, and a later change of "b" too.
    let mut events = v1
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        match events.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(o) => {
                seen.push((o.metadata.name.clone().unwrap(), o.data["spec"].clone()))
            }
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected event {other:?}"),
        }
    }
    seen.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        seen,
        vec![
            ("a".to_string(), json!({"size": 4})),
            ("b".to_string(), json!({"size": 3}))
        ]
    );
    v2.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 7}})),
    )
    .await
    .unwrap();
    loop {
        match events.try_next().await.unwrap().unwrap() {
            WatchEvent::Modified(o) => {
                assert_eq!(o.types.as_ref().unwrap().api_version, "conv.kcr.dev/v1");
                assert_eq!(o.data["spec"], json!({"size": 7}));
                break;
            }
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected event {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_conversion_webhook_is_a_500_naming_it() {
    // A server of its own: the CRD's conversion webhook dies with this test, and on a
    // cluster other tests share, the CRD would outlive it (its objects unreadable, the
    // garbage collector unable to sync).
    let ns = TestApiServer::start().await.unwrap();
    let hook = start_hook(review).await;
    ns.install_crd_value(crd("fails", "v1", &hook, "/fail"))
        .await
        .unwrap();
    let v1 = api(&ns, "fails", "v1");
    let v2 = api(&ns, "fails", "v2");
    // In the storage version: no conversion, no failure.
    v1.create(
        &PostParams::default(),
        &obj(&ns, "fails", "v1", "a", json!({"size": 1})),
    )
    .await
    .unwrap();
    assert_eq!(v1.get("a").await.unwrap().data["spec"], json!({"size": 1}));
    let status = match v2.get("a").await.unwrap_err() {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other}"),
    };
    // kube-apiserver 1.37 converts a custom resource as it reads it from storage: a failure
    // there is a "corrupt object" storage error, whose words differ by verb.
    let failed = "conversion webhook for conv.kcr.dev/v1, Kind=Fail failed: the test webhook refuses to convert";
    let rv = v1
        .get("a")
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let key = format!("/conv.kcr.dev/fails/{}/a", ns.namespace());
    let corrupt = format!(
        "StorageError: corrupt object, Code: 7, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: object not decodable revision={rv}: {failed}"
    );
    assert_eq!(status.code, 500, "{status:?}");
    assert_eq!(status.reason, "InternalError", "{status:?}");
    assert_eq!(
        status.message,
        format!("Internal error occurred: {corrupt}")
    );
    let causes = status.details.map(|d| d.causes).unwrap_or_default();
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].message, corrupt);
    // An update reads the object first: the decoding error alone, without a reason.
    let status = match v2
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other}"),
    };
    assert_eq!(
        (status.code, status.reason.as_str()),
        (500, ""),
        "{status:?}"
    );
    assert_eq!(
        status.message,
        format!("object not decodable revision={rv}: {failed}")
    );
    let status = match v2
        .create(
            &PostParams::default(),
            &obj(&ns, "fails", "v2", "b", json!({"replicas": 1})),
        )
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other}"),
    };
    assert_eq!(status.code, 500, "{status:?}");
    // The object sent in v2 is converted to the storage version, v1.
    assert_eq!(
        status.message,
        "conversion webhook for conv.kcr.dev/v2, Kind=Fail failed: the test webhook refuses to convert"
    );
    assert!(v1.get_opt("b").await.unwrap().is_none());
    let status = match v2.list(&ListParams::default()).await.unwrap_err() {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other}"),
    };
    assert_eq!(status.code, 500, "{status:?}");
    assert_eq!(status.reason, "StorageReadError", "{status:?}");
    let registry_key = format!("/registry{key}");
    let corrupt_in_list = corrupt.replace(&key, &registry_key);
    assert_eq!(
        status.message,
        format!(
            "failed to read one or more fails.conv.kcr.dev from the storage: {corrupt_in_list}"
        )
    );
    let details = status.details.unwrap();
    assert_eq!(
        (
            details.name.as_str(),
            details.group.as_str(),
            details.kind.as_str()
        ),
        ("list", "conv.kcr.dev", "fails")
    );
    assert_eq!(details.causes.len(), 1);
    assert_eq!(details.causes[0].reason, "UnexpectedServerResponse");
    assert_eq!(details.causes[0].field, registry_key);
    assert_eq!(details.causes[0].message, corrupt_in_list);
    // A delete reads the object as a get does.
    let status = match v2.delete("a", &Default::default()).await.unwrap_err() {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other}"),
    };
    assert_eq!(
        (status.code, status.reason.as_str()),
        (500, "InternalError")
    );
    assert_eq!(
        status.message,
        format!("Internal error occurred: {corrupt}")
    );
    assert!(
        v1.get_opt("a").await.unwrap().is_some(),
        "nothing was deleted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversion_that_changes_the_uid_is_refused() {
    // A server of its own: the CRD's conversion webhook dies with this test, and on a
    // cluster other tests share, the CRD would outlive it (its objects unreadable, the
    // garbage collector unable to sync).
    let ns = TestApiServer::start().await.unwrap();
    let hook = start_hook(review).await;
    ns.install_crd_value(crd("uids", "v1", &hook, "/bad-uid"))
        .await
        .unwrap();
    let v1 = api(&ns, "uids", "v1");
    let v2 = api(&ns, "uids", "v2");
    let created = v1
        .create(
            &PostParams::default(),
            &obj(&ns, "uids", "v1", "a", json!({"size": 1})),
        )
        .await
        .unwrap();
    let uid = created.metadata.uid.unwrap();
    let status = match v2.get("a").await.unwrap_err() {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other}"),
    };
    assert_eq!(status.code, 500, "{status:?}");
    let rv = created.metadata.resource_version.unwrap();
    assert_eq!(
        status.message,
        format!(
            "Internal error occurred: StorageError: corrupt object, Code: 7, Key: /conv.kcr.dev/uids/{}/a, ResourceVersion: 0, AdditionalErrorMsg: object not decodable revision={rv}: conversion webhook for conv.kcr.dev/v1, Kind=Uid returned invalid object: must have the same UID: {uid} != changed-by-the-webhook",
            ns.namespace()
        )
    );
}
