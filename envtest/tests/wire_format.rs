//! How answers are written, byte for byte where clients or tools could tell: member order
//! (`kind`, `apiVersion`, `metadata` first for built-ins; a custom resource's members in key
//! order, as the real server writes a map), Status bodies, list items, the answer to a DELETE,
//! and `PartialObjectMetadata` answers to writes.

#![allow(missing_docs)]

use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kcr_envtest::{TestNamespace, eventually};
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams, PropagationPolicy};
use serde_json::{Value, json};

/// How long the real server's apiextensions controllers may take.
const LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Send a raw request; the status code and the body as written.
async fn send(
    client: &Client,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (u16, String) {
    let mut req = http::Request::builder().method(method).uri(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let body = body
        .map(|b| serde_json::to_vec(&b).unwrap())
        .unwrap_or_default();
    if !body.is_empty() {
        req = req.header("content-type", "application/json");
    }
    let resp = client
        .send(req.body(kube::client::Body::from(body)).unwrap())
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, String::from_utf8(bytes.to_vec()).unwrap())
}

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}})
}

/// The ConfigMaps of the test's namespace.
fn configmaps(ns: &TestNamespace) -> String {
    format!("/api/v1/namespaces/{}/configmaps", ns.namespace())
}

#[tokio::test]
async fn built_in_objects_and_lists_are_written_kind_first_with_a_newline() {
    let ns = TestNamespace::new("wire-order").await.unwrap();
    let c = ns.client();
    let cms = configmaps(&ns);
    let (code, created) = send(&c, "POST", &cms, &[], Some(configmap("wire-order"))).await;
    assert_eq!(code, 201, "{created}");
    assert!(
        created.starts_with(r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"#),
        "{created}"
    );
    assert!(created.ends_with("}\n"), "{created:?}");
    let (code, got) = send(&c, "GET", &format!("{cms}/wire-order"), &[], None).await;
    assert_eq!(code, 200);
    assert!(
        got.starts_with(r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"#),
        "{got}"
    );

    let (code, list) = send(&c, "GET", &cms, &[], None).await;
    assert_eq!(code, 200);
    assert!(
        list.starts_with(
            r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"#
        ),
        "{list}"
    );
    assert!(list.ends_with("}\n"), "{list:?}");
    let list: Value = serde_json::from_str(&list).unwrap();
    let item = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["metadata"]["name"] == "wire-order")
        .expect("the created ConfigMap is listed");
    // Items of a typed list carry no kind/apiVersion; the rest of the object is there.
    assert_eq!(item.get("kind"), None, "{item}");
    assert_eq!(item.get("apiVersion"), None, "{item}");
    assert_eq!(item["data"]["a"], "1", "{item}");

    // kube's typed list still decodes (it fills the items' type from the list).
    let api: Api<ConfigMap> = Api::default_namespaced(c.clone());
    let listed = api.list(&Default::default()).await.unwrap();
    assert!(
        listed
            .items
            .iter()
            .any(|i| i.metadata.name.as_deref() == Some("wire-order"))
    );

    // Watch events carry the object whole, kind first.
    let (code, events) = send(
        &c,
        "GET",
        &format!("{cms}?watch=true&timeoutSeconds=1&fieldSelector=metadata.name%3Dwire-order"),
        &[],
        None,
    )
    .await;
    assert_eq!(code, 200);
    let first = events.lines().next().expect("an ADDED event");
    assert!(
        first.starts_with(
            r#"{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"#
        ),
        "{first}"
    );
}

#[tokio::test]
async fn status_bodies_are_written_as_the_real_server_does() {
    let ns = TestNamespace::new("wire-status").await.unwrap();
    let c = ns.client();
    let cms = configmaps(&ns);
    let (code, body) = send(&c, "GET", &format!("{cms}/wire-missing"), &[], None).await;
    assert_eq!(code, 404);
    assert!(
        body.starts_with(r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \"wire-missing\" not found","reason":"NotFound","details":{"name":"wire-missing","kind":"configmaps"},"code":404}"#),
        "{body}"
    );
    assert!(body.ends_with("}\n"), "{body:?}");

    // A group's resource names its group; an empty name is left out.
    let (code, body) = send(
        &c,
        "POST",
        &format!("/apis/apps/v1/namespaces/{}/deployments", ns.namespace()),
        &[],
        Some(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {}})),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["details"]["group"], "apps", "{body}");
    assert_eq!(status["details"].get("name"), None, "{body}");
    assert!(
        body.starts_with(r#"{"kind":"Status","apiVersion":"v1","metadata":{},"#),
        "{body}"
    );
}

#[tokio::test]
async fn custom_resources_are_written_in_key_order_and_listed_whole() {
    let ns = TestNamespace::new("wire-cr").await.unwrap();
    ns.install_crd_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "wires.wire.kcr.dev"},
            "spec": {
                "group": "wire.kcr.dev",
                "scope": "Namespaced",
                "names": {"plural": "wires", "singular": "wire", "kind": "Wire", "listKind": "WireList"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
            }
        }))
        .await
        .unwrap();
    let c = ns.client();
    let path = &format!("/apis/wire.kcr.dev/v1/namespaces/{}/wires", ns.namespace());
    let wire = json!({"apiVersion": "wire.kcr.dev/v1", "kind": "Wire", "metadata": {"name": "w1"}, "spec": {"b": 1, "a": 2}});
    eventually("the custom resource is created", LIMIT, || async {
        let (code, body) = send(&c, "POST", path, &[], Some(wire.clone())).await;
        if code == 201 {
            Ok(())
        } else {
            Err(format!("{code} {body}"))
        }
    })
    .await;
    let (code, got) = send(&c, "GET", &format!("{path}/w1"), &[], None).await;
    assert_eq!(code, 200);
    assert!(
        got.starts_with(r#"{"apiVersion":"wire.kcr.dev/v1","kind":"Wire","metadata":{"#),
        "{got}"
    );
    assert!(got.contains(r#""spec":{"a":2,"b":1}"#), "{got}");

    let (code, list) = send(&c, "GET", path, &[], None).await;
    assert_eq!(code, 200);
    assert!(list.starts_with(r#"{"apiVersion":"wire.kcr.dev/v1","items":[{"apiVersion":"wire.kcr.dev/v1","kind":"Wire","#), "{list}");
    let list: Value = serde_json::from_str(&list).unwrap();
    assert_eq!(list["kind"], "WireList");
    assert!(list["metadata"]["resourceVersion"].is_string(), "{list}");
    // An unstructured list always says `continue`, empty or not.
    assert_eq!(list["metadata"]["continue"], "", "{list}");

    // Deleting it answers a Status naming the group, the resource and the uid.
    let uid = serde_json::from_str::<Value>(&got).unwrap()["metadata"]["uid"].clone();
    let (code, body) = send(&c, "DELETE", &format!("{path}/w1"), &[], None).await;
    assert_eq!(code, 200, "{body}");
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
               "details": {"name": "w1", "group": "wire.kcr.dev", "kind": "wires", "uid": uid}})
    );
}

#[tokio::test]
async fn a_delete_that_removes_the_object_answers_a_status() {
    let ns = TestNamespace::new("wire-delete").await.unwrap();
    let c = ns.client();
    let cms = configmaps(&ns);
    let api: Api<ConfigMap> = Api::default_namespaced(c.clone());
    let pp = PostParams::default();
    let cm: ConfigMap = serde_json::from_value(configmap("wire-del")).unwrap();
    let created = api.create(&pp, &cm).await.unwrap();
    let (code, body) = send(&c, "DELETE", &format!("{cms}/wire-del"), &[], None).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
               "details": {"name": "wire-del", "kind": "configmaps", "uid": created.metadata.uid}})
    );
    assert!(body.ends_with("}\n"), "{body:?}");

    // kube's delete sees it as the Right (Status) side.
    api.create(&pp, &cm).await.unwrap();
    let answer = api
        .delete("wire-del", &DeleteParams::default())
        .await
        .unwrap();
    let status = answer.right().expect("a Status");
    assert_eq!(status.details.unwrap().name, "wire-del");

    // A dry run answers the same, and keeps the object.
    api.create(&pp, &cm).await.unwrap();
    let answer = api
        .delete(
            "wire-del",
            &DeleteParams {
                dry_run: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(answer.is_right(), "{answer:?}");
    api.get("wire-del").await.unwrap();

    // Foreground and Orphan propagation answer the object (the real server hands it to its
    // garbage collector with a finalizer).
    for policy in [PropagationPolicy::Foreground, PropagationPolicy::Orphan] {
        api.get("wire-del")
            .await
            .or(api.create(&pp, &cm).await)
            .unwrap();
        let dp = DeleteParams {
            propagation_policy: Some(policy.clone()),
            ..Default::default()
        };
        let answer = api.delete("wire-del", &dp).await.unwrap();
        let obj = answer
            .left()
            .unwrap_or_else(|| panic!("{policy:?}: the object"));
        assert_eq!(obj.metadata.name.as_deref(), Some("wire-del"));
        eventually("the ConfigMap is gone", LIMIT, || async {
            api.get_opt("wire-del").await.unwrap().is_none()
        })
        .await;
    }

    // An object with a finalizer stays: the answer is the object, marked.
    let mut held = cm.clone();
    held.metadata.finalizers = Some(vec!["wire.kcr.dev/hold".into()]);
    api.create(&pp, &held).await.unwrap();
    let answer = api
        .delete("wire-del", &DeleteParams::default())
        .await
        .unwrap();
    let obj = answer.left().expect("the object");
    assert!(obj.metadata.deletion_timestamp.is_some());
    api.patch(
        "wire-del",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();

    // Services (ReturnDeletedObject in their storage) answer the deleted object.
    let services: Api<Service> = Api::default_namespaced(c.clone());
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "wire-svc"},
        "spec": {"ports": [{"port": 80}]}
    }))
    .unwrap();
    services.create(&pp, &svc).await.unwrap();
    let answer = services
        .delete("wire-svc", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(
        answer.left().expect("the Service").metadata.name.as_deref(),
        Some("wire-svc")
    );
}

#[tokio::test]
async fn writes_answer_partial_object_metadata_when_asked() {
    let ns = TestNamespace::new("wire-pom").await.unwrap();
    let c = ns.client();
    let cms = configmaps(&ns);
    let accept = [(
        "accept",
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
    )];
    let (code, body) = send(&c, "POST", &cms, &accept, Some(configmap("wire-pom"))).await;
    assert_eq!(code, 201, "{body}");
    assert!(
        body.starts_with(
            r#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"#
        ),
        "{body}"
    );
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v.get("data"), None, "{body}");
    assert_eq!(v["metadata"]["name"], "wire-pom");
    let (code, body) = send(
        &c,
        "PUT",
        &format!("{cms}/wire-pom"),
        &accept,
        Some(configmap("wire-pom")),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert!(
        body.starts_with(r#"{"kind":"PartialObjectMetadata","#),
        "{body}"
    );
}

#[tokio::test]
async fn custom_resource_tables_show_the_crd_columns() {
    let ns = TestNamespace::new("wire-tables").await.unwrap();
    let crd = |plural: &str, kind: &str, columns: Value| {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.wire.kcr.dev")},
            "spec": {
                "group": "wire.kcr.dev",
                "scope": "Namespaced",
                "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "additionalPrinterColumns": columns,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
            }
        })
    };
    ns.install_crd_value(crd(
            "dials",
            "Dial",
            json!([
                {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1},
                {"name": "Phase", "type": "string", "jsonPath": ".status.phase", "description": "The phase."}
            ]),
        ))
        .await
        .unwrap();
    ns.install_crd_value(crd("knobs", "Knob", json!([])))
        .await
        .unwrap();
    let c = ns.client();
    let accept = [("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")];
    let dials = &format!("/apis/wire.kcr.dev/v1/namespaces/{}/dials", ns.namespace());
    let knobs = &format!("/apis/wire.kcr.dev/v1/namespaces/{}/knobs", ns.namespace());
    for (path, kind) in [(dials, "Dial"), (knobs, "Knob")] {
        let obj = json!({"apiVersion": "wire.kcr.dev/v1", "kind": kind, "metadata": {"name": "x1"},
            "spec": {"size": 6, "color": "red"}});
        eventually("the custom resource is created", LIMIT, || async {
            let (code, body) = send(&c, "POST", path, &[], Some(obj.clone())).await;
            if code == 201 {
                Ok(())
            } else {
                Err(format!("{code} {body}"))
            }
        })
        .await;
    }
    let (code, body) = send(&c, "GET", dials, &accept, None).await;
    assert_eq!(code, 200, "{body}");
    let table: Value = serde_json::from_str(&body).unwrap();
    let defs: Vec<Value> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| json!([d["name"], d["type"], d["priority"], d["description"]]))
        .collect();
    assert_eq!(
        defs[1..],
        [
            json!([
                "Size",
                "integer",
                0,
                "Custom resource definition column (in JSONPath format): .spec.size"
            ]),
            json!([
                "Color",
                "string",
                1,
                "Custom resource definition column (in JSONPath format): .spec.color"
            ]),
            json!(["Phase", "string", 0, "The phase."]),
        ]
    );
    assert!(
        defs[0][3].as_str().unwrap().starts_with(
            "Name must be unique within a namespace. Is required when creating resources"
        ),
        "{}",
        defs[0]
    );
    // A missing value is a null cell.
    assert_eq!(table["rows"][0]["cells"], json!(["x1", 6, "red", null]));

    // Without declared columns: NAME and AGE.
    let (_, body) = send(&c, "GET", knobs, &accept, None).await;
    let table: Value = serde_json::from_str(&body).unwrap();
    let names: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Name", "Age"]);
    let age = &table["columnDefinitions"][1];
    assert_eq!(age["type"], "date");
    assert_eq!(
        age["description"],
        "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
    );
    assert_eq!(
        table["columnDefinitions"][0]["description"],
        "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
    );
    let cells = table["rows"][0]["cells"].as_array().unwrap();
    assert_eq!(cells[0], "x1");
    assert!(cells[1].as_str().unwrap().ends_with('s'), "{}", cells[1]);
}
