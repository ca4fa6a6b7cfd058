//! CRDs, the status subresource, generation rules, schema validation and every patch type.

#![allow(missing_docs)]

use k8s_openapi::api::core::v1::{ConfigMap, Node};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kcr_envtest::{TestApiServer, TestNamespace, eventually};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::{DynamicObject, GroupVersionKind};
use kube::discovery::{ApiResource, Discovery};
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema, PartialEq)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    shortname = "wg",
    printcolumn = r#"{"name":"Size","type":"integer","jsonPath":".spec.size"}"#
)]
pub struct WidgetSpec {
    size: i32,
    color: Color,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, JsonSchema, PartialEq)]
pub enum Color {
    Red,
    Blue,
}

#[derive(Serialize, Deserialize, Clone, Debug, JsonSchema, PartialEq, Default)]
pub struct WidgetStatus {
    ready: bool,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[kube(group = "example.com", version = "v1", kind = "Gadget")]
pub struct GadgetSpec {
    level: i64,
}

/// The Widget of `crd_is_served_and_unserved`, in a group of its own: that test deletes its
/// CRD, which must not pull `widgets.example.com` from under the binary's other tests (they
/// share one server).
mod lifecycle {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    use super::{Color, WidgetStatus};

    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema, PartialEq)]
    #[kube(
        group = "lifecycle.example.com",
        version = "v1",
        kind = "Widget",
        namespaced,
        status = "WidgetStatus",
        shortname = "wg",
        printcolumn = r#"{"name":"Size","type":"integer","jsonPath":".spec.size"}"#
    )]
    pub struct WidgetSpec {
        pub size: i32,
        color: Color,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    }

    pub fn widget(name: &str, size: i32) -> Widget {
        Widget::new(
            name,
            WidgetSpec {
                size,
                color: Color::Red,
                note: None,
            },
        )
    }
}

/// How long the real server's apiextensions controllers may take.
const LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

fn api_err(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn widget(name: &str, size: i32) -> Widget {
    Widget::new(
        name,
        WidgetSpec {
            size,
            color: Color::Red,
            note: None,
        },
    )
}

#[tokio::test]
async fn crd_is_served_and_unserved() {
    use lifecycle::{Widget, widget};
    // A server of its own: the test needs the CRD absent at its start and runs a full
    // discovery, which CRDs of other tests on a shared cluster come and go under.
    let ns = TestApiServer::start().await.unwrap();
    let client = ns.client();
    let widgets: Api<Widget> = Api::default_namespaced(client.clone());
    let err = api_err(widgets.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(err.code, 404);

    // Create the CRD through the API like an operator would, and wait for Established (the
    // real server's apiextensions controllers set it asynchronously; in process it is set by
    // the create).
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &Widget::crd())
        .await
        .unwrap();
    eventually("the CRD is Established", LIMIT, || async {
        let crd = crds.get("widgets.lifecycle.example.com").await.unwrap();
        let conds = crd.status.and_then(|s| s.conditions).unwrap_or_default();
        conds
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
            && conds
                .iter()
                .any(|c| c.type_ == "NamesAccepted" && c.status == "True")
    })
    .await;
    // Established: the resource is served (kube-apiserver's handler may lag its condition by
    // a moment, answering 404 until it has the CRD; any other answer fails the test).
    eventually("w1 is created", LIMIT, || async {
        match widgets
            .create(&PostParams::default(), &widget("w1", 3))
            .await
        {
            Ok(_) => true,
            Err(kube::Error::Api(s)) if s.code == 404 => false,
            Err(e) => panic!("creating w1: {e}"),
        }
    })
    .await;
    assert_eq!(widgets.get("w1").await.unwrap().spec.size, 3);

    // Discovery sees the group with kind and short names.
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let (ar, caps) = discovery
        .resolve_gvk(&GroupVersionKind::gvk(
            "lifecycle.example.com",
            "v1",
            "Widget",
        ))
        .expect("Widget discovered");
    assert_eq!(ar.plural, "widgets");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    assert!(
        caps.subresources
            .iter()
            .any(|(s, _)| s.plural.ends_with("status"))
    );

    // Deleting the CRD stops serving and removes the objects (on the real server
    // asynchronously: its finalizer deletes the objects, then the CRD goes).
    crds.delete("widgets.lifecycle.example.com", &DeleteParams::default())
        .await
        .unwrap();
    eventually("w1 and the CRD are gone", LIMIT, || async {
        let w1 = widgets.get("w1").await;
        matches!(w1, Err(kube::Error::Api(ref s)) if s.code == 404)
            && crds
                .get_opt("widgets.lifecycle.example.com")
                .await
                .unwrap()
                .is_none()
    })
    .await;
    // Reinstalling starts empty.
    ns.install_crd::<Widget>().await.unwrap();
    assert!(
        widgets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn status_subresource_and_generation() {
    let ns = TestNamespace::new("status").await.unwrap();
    ns.install_crd::<Widget>().await.unwrap();
    let widgets: Api<Widget> = Api::default_namespaced(ns.client());
    let mut w = widget("w", 1);
    w.status = Some(WidgetStatus { ready: true });
    let created = widgets.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(
        created.status, None,
        "status is dropped on create with a status subresource"
    );

    // Status write: changes status only, generation unchanged.
    let st = widgets
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}, "spec": {"size": 99}})),
        )
        .await
        .unwrap();
    assert_eq!(st.status, Some(WidgetStatus { ready: true }));
    assert_eq!(st.spec.size, 1, "status writes ignore the spec");
    assert_eq!(st.metadata.generation, Some(1));

    // Main resource write: status ignored, spec change bumps generation.
    let mut changed = st.clone();
    changed.spec.size = 2;
    changed.status = Some(WidgetStatus { ready: false });
    let up = widgets
        .replace("w", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_eq!(up.spec.size, 2);
    assert_eq!(
        up.status,
        Some(WidgetStatus { ready: true }),
        "main writes ignore status"
    );
    assert_eq!(up.metadata.generation, Some(2));

    // Metadata-only change: generation unchanged, resourceVersion bumped.
    let labelled = widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(2));
    assert_ne!(
        labelled.metadata.resource_version,
        up.metadata.resource_version
    );

    // replace_status with a stale resourceVersion: 409.
    let mut stale = st.clone();
    stale.status = Some(WidgetStatus { ready: false });
    let err = api_err(
        widgets
            .replace_status("w", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 409);
    // Server-side apply on the status subresource changes only the status.
    let applied = widgets
        .patch_status(
            "w",
            &PatchParams::apply("status-writer").force(),
            &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 50}, "status": {"ready": false}})),
        )
        .await
        .unwrap();
    assert_eq!(applied.status, Some(WidgetStatus { ready: false }));
    assert_eq!(applied.spec.size, 2);
    assert_eq!(applied.metadata.generation, Some(2));
    widgets
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}})),
        )
        .await
        .unwrap();
    // Apply to the status of a missing object: 404 (no create through /status).
    let err = api_err(
        widgets
            .patch_status(
                "missing",
                &PatchParams::apply("status-writer"),
                &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "missing"}, "status": {"ready": true}})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 404);
    // The status writer owned only status fields (until the merge patch above took them over).
    let owned = applied.metadata.managed_fields.clone().unwrap_or_default();
    let entry = owned
        .iter()
        .find(|e| e.manager.as_deref() == Some("status-writer"))
        .expect("status-writer entry");
    assert_eq!(entry.subresource.as_deref(), Some("status"));
    let fields = serde_json::to_string(&entry.fields_v1).unwrap();
    assert!(
        fields.contains("f:status") && !fields.contains("f:spec"),
        "{fields}"
    );
    // get_status works.
    assert_eq!(
        widgets.get_status("w").await.unwrap().status,
        Some(WidgetStatus { ready: true })
    );
}

#[tokio::test]
async fn generation_without_status_subresource_counts_status() {
    let ns = TestNamespace::new("generation").await.unwrap();
    // A custom resource without a status subresource: everything but metadata counts.
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}});
    ns.install_crd_value(json!({
        "metadata": {"name": "doohickeys.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "doohickeys", "singular": "doohickey", "kind": "Doohickey"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": schema}}],
        },
    }))
    .await
    .unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Doohickey"),
        "doohickeys",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.namespace(), &ar);
    let obj: DynamicObject = serde_json::from_value(json!({"apiVersion": "example.com/v1",
        "kind": "Doohickey", "metadata": {"name": "d"}, "spec": {"n": 1}}))
    .unwrap();
    let created = api.create(&PostParams::default(), &obj).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let merge = |patch| {
        let api = api.clone();
        async move {
            api.patch("d", &PatchParams::default(), &Patch::Merge(patch))
                .await
                .unwrap()
        }
    };
    let p = merge(json!({"status": {"phase": "Ready"}})).await;
    assert_eq!(p.data["status"]["phase"], "Ready");
    assert_eq!(p.metadata.generation, Some(2), "status counts");
    let p = merge(json!({"metadata": {"annotations": {"x": "y"}}})).await;
    assert_eq!(p.metadata.generation, Some(2), "metadata does not");

    // Built-ins without generation (ConfigMap here) never get one.
    let cms: Api<ConfigMap> = Api::default_namespaced(ns.client());
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "c"}, "data": {"a": "1"}})).unwrap();
    assert_eq!(
        cms.create(&PostParams::default(), &cm)
            .await
            .unwrap()
            .metadata
            .generation,
        None
    );
    let p = cms
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": "2"}})),
        )
        .await
        .unwrap();
    assert_eq!(p.metadata.generation, None);
}

#[tokio::test]
async fn schema_validation_gives_422_with_field_paths() {
    let ns = TestNamespace::new("schema").await.unwrap();
    ns.install_crd::<Widget>().await.unwrap();
    let widgets = format!("/apis/example.com/v1/namespaces/{}/widgets", ns.namespace());
    let api: Api<DynamicObject> = Api::namespaced_with(
        ns.client(),
        ns.namespace(),
        &ApiResource::erase::<Widget>(&()),
    );
    let bad: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "bad"},
        "spec": {"size": "big", "color": "Green"},
    }))
    .unwrap();
    let err = api_err(api.create(&PostParams::default(), &bad).await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    let causes = err.details.unwrap().causes;
    let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
    assert!(fields.contains(&"spec.size"), "{causes:?}");
    assert!(fields.contains(&"spec.color"), "{causes:?}");
    let missing: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "missing"},
        "spec": {"color": "Red"},
    }))
    .unwrap();
    let err = api_err(
        api.create(&PostParams::default(), &missing)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert_eq!(err.details.unwrap().causes[0].reason, "FieldValueRequired");
    // Unknown fields are pruned, valid objects accepted.
    let ok: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "ok"},
        "spec": {"size": 1, "color": "Blue", "bogus": true},
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &ok).await.unwrap();
    assert!(created.data["spec"].get("bogus").is_none());
    // Without fieldValidation the pruned field is reported in a Warning header; with Strict
    // it is an error.
    let mut other = ok.clone();
    other.metadata.name = Some("ok2".into());
    let req = http::Request::post(&widgets)
        .header("Content-Type", "application/json")
        .body(kube::client::Body::from(
            serde_json::to_vec(&other).unwrap(),
        ))
        .unwrap();
    let resp = ns.client().send(req).await.unwrap();
    assert_eq!(resp.status(), 201);
    let warning = resp
        .headers()
        .get("warning")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(warning, r#"299 - "unknown field \"spec.bogus\"""#);
    other.metadata.name = Some("ok3".into());
    let req = http::Request::post(format!("{widgets}?fieldValidation=Strict"))
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(&other).unwrap())
        .unwrap();
    let err = api_err(ns.client().request::<DynamicObject>(req).await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (400, "BadRequest"));
    assert!(
        err.message.contains(r#"unknown field "spec.bogus""#),
        "{}",
        err.message
    );
    // An update that breaks the schema is refused too.
    let err = api_err(
        api.patch(
            "ok",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"color": "Pink"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(err.code, 422);
}

#[tokio::test]
async fn cluster_scoped_crd() {
    let ns = TestNamespace::new("gadget").await.unwrap();
    ns.install_crd::<Gadget>().await.unwrap();
    let gadgets: Api<Gadget> = Api::all(ns.client());
    let name = ns.unique_name("g");
    gadgets
        .create(
            &PostParams::default(),
            &Gadget::new(&name, GadgetSpec { level: 3 }),
        )
        .await
        .unwrap();
    let g = gadgets.get(&name).await.unwrap();
    assert_eq!(g.metadata.namespace, None);
    assert_eq!(g.spec.level, 3);
}

#[tokio::test]
async fn patch_types() {
    let ns = TestNamespace::new("patch-types").await.unwrap();
    ns.install_crd::<Widget>().await.unwrap();
    let node_names = ns.add_nodes(1).await.unwrap();
    let widgets: Api<Widget> = Api::default_namespaced(ns.client());
    widgets
        .create(&PostParams::default(), &widget("p", 1))
        .await
        .unwrap();

    // JSON patch
    let p = widgets
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::<()>::Json(
                serde_json::from_value(
                    json!([{"op": "replace", "path": "/spec/size", "value": 5}]),
                )
                .unwrap(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(p.spec.size, 5);
    // Failing JSON patch test op: 422
    let err = api_err(
        widgets
            .patch(
                "p",
                &PatchParams::default(),
                &Patch::<()>::Json(
                    serde_json::from_value(
                        json!([{"op": "test", "path": "/spec/size", "value": 6}]),
                    )
                    .unwrap(),
                ),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    // Strategic merge on a custom resource: 415
    let err = api_err(
        widgets
            .patch(
                "p",
                &PatchParams::default(),
                &Patch::Strategic(json!({"spec": {"size": 2}})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (err.code, err.reason.as_str()),
        (415, "UnsupportedMediaType")
    );
    // A stale resourceVersion inside a patch is a precondition: 409
    let err = api_err(
        widgets
            .patch(
                "p",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"resourceVersion": "1"}, "spec": {"size": 7}})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 409);

    // Strategic merge on node taints replaces the list: it is atomic upstream.
    let nodes: Api<Node> = Api::all(ns.client());
    let name = node_names[0].as_str();
    nodes
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"spec": {"taints": [{"key": "a", "value": "1", "effect": "NoSchedule"}]}}),
            ),
        )
        .await
        .unwrap();
    let n = nodes
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"spec": {"taints": [{"key": "b", "value": "2", "effect": "NoSchedule"}]}}),
            ),
        )
        .await
        .unwrap();
    let keys: Vec<String> = n
        .spec
        .unwrap()
        .taints
        .unwrap()
        .into_iter()
        .map(|t| t.key)
        .collect();
    assert_eq!(keys, ["b"]);

    // Server-side apply: create, then two managers, then a field dropped by its only owner.
    let ssa = PatchParams::apply("mgr-a");
    let applied = widgets
        .patch(
            "s",
            &ssa,
            &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "s", "labels": {"a": "1"}}, "spec": {"size": 1, "color": "Red", "note": "hi"}})),
        )
        .await
        .unwrap();
    assert_eq!(applied.spec.note.as_deref(), Some("hi"));
    assert!(
        applied
            .metadata
            .managed_fields
            .as_ref()
            .is_some_and(|m| m.iter().any(|e| e.manager.as_deref() == Some("mgr-a")))
    );
    let b = PatchParams::apply("mgr-b");
    widgets
        .patch("s", &b, &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "s", "labels": {"b": "2"}}})))
        .await
        .unwrap();
    // mgr-a drops `note` and label a: they go; label b (owned by mgr-b) stays.
    let after = widgets
        .patch("s", &ssa, &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "s"}, "spec": {"size": 1, "color": "Red"}})))
        .await
        .unwrap();
    assert_eq!(after.spec.note, None);
    let labels = after.metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("b").map(String::as_str), Some("2"));
    assert!(!labels.contains_key("a"));
    // A conflicting apply without force: 409; with force: taken over.
    let err = api_err(
        widgets
            .patch("s", &b, &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "s"}, "spec": {"size": 9}})))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 409);
    let forced = widgets
        .patch("s", &b.clone().force(), &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "s"}, "spec": {"size": 9}})))
        .await
        .unwrap();
    assert_eq!(forced.spec.size, 9);
    // Apply without fieldManager: 422 on the field fieldManager (kube refuses client-side, so
    // send it raw).
    let req = http::Request::patch(format!(
        "/apis/example.com/v1/namespaces/{}/widgets/s",
        ns.namespace()
    ))
    .header("Content-Type", "application/apply-patch+yaml")
    .body(b"{}".to_vec())
    .unwrap();
    let err = api_err(ns.client().request::<Widget>(req).await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert_eq!(err.details.unwrap().causes[0].field, "fieldManager");
}

#[tokio::test]
async fn aggregated_discovery() {
    let ns = TestNamespace::new("discovery").await.unwrap();
    ns.install_crd::<Widget>().await.unwrap();
    let discovery = Discovery::new(ns.client()).run_aggregated().await.unwrap();
    let (ar, caps) = discovery
        .resolve_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"))
        .expect("Widget discovered");
    assert_eq!(ar.plural, "widgets");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    let (pods, _) = discovery
        .resolve_gvk(&GroupVersionKind::gvk("", "v1", "Pod"))
        .expect("core group discovered");
    assert_eq!(pods.plural, "pods");
    assert!(discovery.has_group("coordination.k8s.io"));
}

#[tokio::test]
async fn multiple_served_versions_share_objects() {
    let ns = TestNamespace::new("versions").await.unwrap();
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"n": {"type": "integer"}}}}});
    ns.install_crd_value(json!({
            "metadata": {"name": "things.example.com"},
            "spec": {
                "group": "example.com", "scope": "Namespaced",
                "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
                "versions": [
                    {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema}},
                    {"name": "v2", "served": true, "storage": false, "schema": {"openAPIV3Schema": schema}},
                    {"name": "v0", "served": false, "storage": false, "schema": {"openAPIV3Schema": schema}},
                ],
            },
        }))
        .await
        .unwrap();
    let ar = |v: &str| {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("example.com", v, "Thing"),
            "things",
        )
    };
    let v2: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.namespace(), &ar("v2"));
    let v1: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.namespace(), &ar("v1"));
    let obj: DynamicObject = serde_json::from_value(json!({"apiVersion": "example.com/v2", "kind": "Thing", "metadata": {"name": "t"}, "spec": {"n": 1}})).unwrap();
    let created = v2.create(&PostParams::default(), &obj).await.unwrap();
    assert_eq!(
        created.types.unwrap().api_version,
        "example.com/v2",
        "answered in the request's version"
    );
    assert_eq!(
        v1.get("t").await.unwrap().types.unwrap().api_version,
        "example.com/v1"
    );
    let via_v2 = v2.get("t").await.unwrap();
    assert_eq!(via_v2.types.unwrap().api_version, "example.com/v2");
    assert_eq!(v1.get("t").await.unwrap().data["spec"]["n"], 1);
    let v0: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.namespace(), &ar("v0"));
    assert_eq!(
        api_err(v0.get("t").await.unwrap_err()).code,
        404,
        "unserved version"
    );
}
