//! kube::Api CRUD against the test server, and every error the API answers with.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, Secret};
use kcr_envtest::{TestApiServer, TestNamespace};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::core::ObjectMeta;
use serde_json::json;

fn cm(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..Default::default()
    }
}

fn api_err(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn create_get_update_delete_configmap() {
    let ns = TestNamespace::new("crud").await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(ns.client());
    let created = api
        .create(&PostParams::default(), &cm("a", &[("k", "v")]))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert!(meta.uid.as_deref().is_some_and(|u| !u.is_empty()));
    assert!(meta.creation_timestamp.is_some());
    let rv1: u64 = meta.resource_version.as_deref().unwrap().parse().unwrap();
    // The real server keeps metadata.generation only for some kinds (workloads, pods, CRDs and
    // custom resources, webhook configurations); ConfigMaps have none.
    assert_eq!(meta.generation, None);

    let got = api.get("a").await.unwrap();
    assert_eq!(got.data.as_ref().unwrap()["k"], "v");
    assert_eq!(got.metadata.uid, created.metadata.uid);

    let mut changed = got.clone();
    changed.data = Some(BTreeMap::from([("k".to_string(), "w".to_string())]));
    let updated = api
        .replace("a", &PostParams::default(), &changed)
        .await
        .unwrap();
    let rv2: u64 = updated
        .metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv1, "every write bumps the global resourceVersion");
    assert_eq!(
        updated.metadata.uid, created.metadata.uid,
        "uid is immutable"
    );
    assert_eq!(
        updated.metadata.generation, None,
        "no generation on data changes"
    );

    // Stale update: 409 Conflict.
    let err = api_err(
        api.replace("a", &PostParams::default(), &got)
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));

    let list = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    let list_rv: u64 = list
        .metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    assert!(list_rv >= rv2);

    api.delete("a", &DeleteParams::default()).await.unwrap();
    let err = api_err(api.get("a").await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (404, "NotFound"));
    assert!(
        err.message.contains("configmaps \"a\" not found"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn errors_have_status_codes_and_reasons() {
    let ns = TestNamespace::new("errors").await.unwrap();
    let client = ns.client();
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let configmaps = format!("/api/v1/namespaces/{}/configmaps", ns.namespace());
    api.create(&PostParams::default(), &cm("dup", &[]))
        .await
        .unwrap();

    // AlreadyExists
    let err = api_err(
        api.create(&PostParams::default(), &cm("dup", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "AlreadyExists"));

    // Invalid name: 422 with a cause on metadata.name
    let err = api_err(
        api.create(&PostParams::default(), &cm("Bad_Name", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    let causes = err.details.unwrap().causes;
    assert_eq!(causes[0].field, "metadata.name");

    // Missing namespace: 404
    let other: Api<ConfigMap> = Api::namespaced(client.clone(), "nope");
    let err = api_err(
        other
            .create(&PostParams::default(), &cm("x", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (404, "NotFound"));

    // Bad label selector: 400
    let err = api_err(
        api.list(&ListParams::default().labels("a in (b"))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (400, "BadRequest"));

    // Unsupported field selector: 400
    let err = api_err(
        api.list(&ListParams::default().fields("data.k=v"))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 400);

    // Strategic merge on a custom-less builtin works, unknown content type → 415
    let req = http::Request::patch(format!("{configmaps}/dup"))
        .header("Content-Type", "application/x-unknown")
        .body(b"{}".to_vec())
        .unwrap();
    let err = api_err(client.request::<ConfigMap>(req).await.unwrap_err());
    assert_eq!(
        (err.code, err.reason.as_str()),
        (415, "UnsupportedMediaType")
    );

    // A truncated protobuf body: 400, as any body that does not decode
    let req = http::Request::post("/api/v1/namespaces")
        .header("Content-Type", "application/vnd.kubernetes.protobuf")
        .body(b"k8s\0\n\x0f".to_vec())
        .unwrap();
    let err = api_err(client.request::<Namespace>(req).await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (400, "BadRequest"));

    // Method not allowed: POST on a named object
    let req = http::Request::post(format!("{configmaps}/dup"))
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(&cm("dup", &[])).unwrap())
        .unwrap();
    let err = api_err(client.request::<ConfigMap>(req).await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (405, "MethodNotAllowed"));

    // Unknown resource of a served group: 404 with a Status body
    let req = http::Request::get("/apis/apps/v1/widgets")
        .body(vec![])
        .unwrap();
    let err = api_err(client.request::<serde_json::Value>(req).await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (404, "NotFound"));
    // A group nothing serves: a plain-text 404 (no API handler), which kube cannot parse
    let req = http::Request::get("/apis/nothing-serves-this.kcr.dev/v1/widgets")
        .body(vec![])
        .unwrap();
    let err = api_err(client.request::<serde_json::Value>(req).await.unwrap_err());
    assert_eq!(err.code, 404);
    assert!(err.message.contains("404 page not found"), "{err:?}");

    // Garbage body: 400
    let req = http::Request::post(&configmaps)
        .header("Content-Type", "application/json")
        .body(b"{not json".to_vec())
        .unwrap();
    let err = api_err(client.request::<ConfigMap>(req).await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (400, "BadRequest"));

    // Kind mismatch: 400
    let req = http::Request::post(&configmaps)
        .header("Content-Type", "application/json")
        .body(
            serde_json::to_vec(
                &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}),
            )
            .unwrap(),
        )
        .unwrap();
    let err = api_err(client.request::<ConfigMap>(req).await.unwrap_err());
    assert_eq!(err.code, 400);

    // Delete preconditions: wrong uid → 409 Conflict
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("not-the-uid".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let err = api_err(api.delete("dup", &dp).await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    // Right resourceVersion precondition succeeds.
    let current = api.get("dup").await.unwrap();
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: current.metadata.uid.clone(),
            resource_version: current.metadata.resource_version.clone(),
        }),
        ..Default::default()
    };
    api.delete("dup", &dp).await.unwrap();
    // Delete of a missing object: 404
    let err = api_err(
        api.delete("dup", &DeleteParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 404);
    // Update of a missing object: 404
    let err = api_err(
        api.replace("dup", &PostParams::default(), &cm("dup", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 404);
    // Merge patch of a missing object: 404
    let err = api_err(
        api.patch(
            "dup",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": "b"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(err.code, 404);
}

/// Pinned to the in-process backend: a protobuf body of a kind outside the built-in message tables
/// (here a made-up `example.com/v1` `Widget` posted to pods) is refused with a 415 naming it.
#[tokio::test]
async fn protobuf_bodies_of_kinds_without_tables_are_415_in_process() {
    // Own server: pinned to the in-process backend (a builder option).
    let server = TestApiServer::builder()
        .backend(kcr_envtest::Backend::InProcess)
        .start()
        .await
        .unwrap();
    let mut body = b"k8s\0\x0a\x18\x0a\x0eexample.com/v1\x12\x06Widget".to_vec();
    body.extend(b"\x12\x05\x0a\x03\x0a\x01p");
    let req = http::Request::post("/api/v1/namespaces/default/pods")
        .header("Content-Type", "application/vnd.kubernetes.protobuf")
        .body(body)
        .unwrap();
    let err = api_err(server.client().request::<Pod>(req).await.unwrap_err());
    assert_eq!(err.code, 415);
    assert!(
        err.message
            .contains("protobuf bodies of example.com/v1 Widget are not supported"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn a_secret_without_a_type_is_opaque() {
    let ns = TestNamespace::new("opaque").await.unwrap();
    let secrets: Api<Secret> = Api::default_namespaced(ns.client());
    let plain = Secret {
        metadata: ObjectMeta {
            name: Some("plain".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let created = secrets
        .create(&PostParams::default(), &plain)
        .await
        .unwrap();
    assert_eq!(created.type_.as_deref(), Some("Opaque"));
    let mut typed = Secret {
        metadata: ObjectMeta {
            name: Some("tls".into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        ..Default::default()
    };
    // A typed Secret needs its type's keys: 422 naming each missing one.
    let err = api_err(
        secrets
            .create(&PostParams::default(), &typed)
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    let fields: Vec<String> = err
        .details
        .unwrap()
        .causes
        .into_iter()
        .map(|c| c.field)
        .collect();
    assert_eq!(fields, ["data[tls.crt]", "data[tls.key]"]);
    typed.data = Some(BTreeMap::from([
        (
            "tls.crt".to_string(),
            k8s_openapi::ByteString(b"cert".to_vec()),
        ),
        (
            "tls.key".to_string(),
            k8s_openapi::ByteString(b"key".to_vec()),
        ),
    ]));
    let created = secrets
        .create(&PostParams::default(), &typed)
        .await
        .unwrap();
    assert_eq!(created.type_.as_deref(), Some("kubernetes.io/tls"));
    // Removing a required key later is refused too.
    let err = api_err(
        secrets
            .patch(
                "tls",
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"tls.key": null}})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert!(err.message.contains("data[tls.key]"), "{}", err.message);
}

#[tokio::test]
async fn secret_string_data_is_merged_into_data() {
    let ns = TestNamespace::new("string-data").await.unwrap();
    let secrets: Api<Secret> = Api::default_namespaced(ns.client());
    let text = |s: &Secret, k: &str| {
        s.data
            .as_ref()
            .and_then(|d| d.get(k))
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
    };
    let with_string_data: Secret = serde_json::from_value(json!({
        "metadata": {"name": "s"},
        "data": {"a": "eA==", "keep": "aw=="},
        "stringData": {"a": "from-string-data", "b": "y"}
    }))
    .unwrap();
    let created = secrets
        .create(&PostParams::default(), &with_string_data)
        .await
        .unwrap();
    assert_eq!(created.string_data, None, "stringData is not stored");
    assert_eq!(
        (
            text(&created, "a"),
            text(&created, "b"),
            text(&created, "keep")
        ),
        (
            Some("from-string-data".into()),
            Some("y".into()),
            Some("k".into())
        )
    );
    // A patch through stringData changes data too.
    let patched = secrets
        .patch(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"b": "z"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        (text(&patched, "b"), patched.string_data),
        (Some("z".into()), None)
    );
    // A value that is not a string does not decode into a Secret: in a patch that is 422 on
    // the field `patch` (the patched object is decoded), in a create body 400.
    let err = api_err(
        secrets
            .patch(
                "s",
                &PatchParams::default(),
                &Patch::Merge(json!({"stringData": {"n": 5}})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (err.code, err.reason.as_str()),
        (422, "Invalid"),
        "{}",
        err.message
    );
    assert!(
        err.message.contains(
            "cannot unmarshal number into Go struct field Secret.stringData of type string"
        ),
        "{}",
        err.message
    );
    assert_eq!(err.details.unwrap().causes[0].field, "patch");
    let req = http::Request::post(format!("/api/v1/namespaces/{}/secrets", ns.namespace()))
        .header("Content-Type", "application/json")
        .body(
            serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "n"}, "stringData": {"n": 5}}))
            .unwrap(),
        )
        .unwrap();
    let err = api_err(ns.client().request::<Secret>(req).await.unwrap_err());
    assert_eq!(
        (err.code, err.reason.as_str()),
        (400, "BadRequest"),
        "{}",
        err.message
    );
    assert!(
        err.message.contains("Go struct field Secret.stringData"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn generate_name_and_namespaces() {
    // Own server: asserts on the whole list of namespaces.
    let server = TestApiServer::start().await.unwrap();
    let client = server.client();
    let ns: Api<Namespace> = Api::all(client.clone());
    let names: Vec<String> = ns
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert_eq!(
        names,
        ["default", "kube-node-lease", "kube-public", "kube-system"]
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"generateName": "web-"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    }))
    .unwrap();
    let a = pods.create(&PostParams::default(), &pod).await.unwrap();
    let b = pods.create(&PostParams::default(), &pod).await.unwrap();
    let (an, bn) = (a.metadata.name.unwrap(), b.metadata.name.unwrap());
    assert!(an.starts_with("web-") && an.len() == 9, "{an}");
    assert_ne!(an, bn);
    // Neither name nor generateName: 422
    let err = api_err(
        pods.create(&PostParams::default(), &Pod::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
}

#[tokio::test]
async fn nodes_helper_and_field_selectors() {
    // Own server: asserts on the node names `envtest-node-0` onwards and on whole node lists.
    let server = TestApiServer::start().await.unwrap();
    let names = server.add_nodes(3).await.unwrap();
    assert_eq!(
        names,
        ["envtest-node-0", "envtest-node-1", "envtest-node-2"]
    );
    let more = server.add_nodes(1).await.unwrap();
    assert_eq!(more, ["envtest-node-3"]);
    let nodes: Api<Node> = Api::all(server.client());
    let n = nodes.get("envtest-node-1").await.unwrap();
    let status = n.status.unwrap();
    assert_eq!(status.capacity.unwrap()["cpu"].0, "4");
    assert_eq!(status.allocatable.unwrap()["pods"].0, "110");
    let ready = status.conditions.unwrap();
    assert!(
        ready
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    );
    assert_eq!(
        n.metadata.labels.unwrap()["kubernetes.io/hostname"],
        "envtest-node-1"
    );
    let by_name = nodes
        .list(&ListParams::default().fields("metadata.name=envtest-node-2"))
        .await
        .unwrap();
    assert_eq!(by_name.items.len(), 1);
    let not = nodes
        .list(&ListParams::default().fields("metadata.name!=envtest-node-2"))
        .await
        .unwrap();
    assert_eq!(not.items.len(), 3);

    // Pods by spec.nodeName
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    for (name, node) in [
        ("p1", "envtest-node-0"),
        ("p2", "envtest-node-1"),
        ("p3", "envtest-node-0"),
    ] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    let on0 = pods
        .list(&ListParams::default().fields("spec.nodeName=envtest-node-0"))
        .await
        .unwrap();
    let mut got: Vec<String> = on0
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    got.sort();
    assert_eq!(got, ["p1", "p3"]);
}

#[tokio::test]
async fn label_selectors_full_syntax() {
    let ns = TestNamespace::new("labels").await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(ns.client());
    for (name, labels) in [
        ("a", json!({"env": "prod", "tier": "web"})),
        ("b", json!({"env": "dev", "tier": "web"})),
        ("c", json!({"env": "qa"})),
        ("d", json!({})),
    ] {
        let obj: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
        api.create(&PostParams::default(), &obj).await.unwrap();
    }
    let names = |sel: &'static str| {
        let api = api.clone();
        async move {
            let mut v: Vec<String> = api
                .list(&ListParams::default().labels(sel))
                .await
                .unwrap()
                .items
                .into_iter()
                .filter_map(|o| o.metadata.name)
                .collect();
            v.sort();
            v
        }
    };
    assert_eq!(names("env=prod").await, ["a"]);
    assert_eq!(names("env==prod").await, ["a"]);
    assert_eq!(names("env!=prod").await, ["b", "c", "d"]);
    assert_eq!(names("env in (prod,qa)").await, ["a", "c"]);
    assert_eq!(names("env notin (prod,qa)").await, ["b", "d"]);
    assert_eq!(names("tier").await, ["a", "b"]);
    assert_eq!(names("!tier").await, ["c", "d"]);
    assert_eq!(names("tier=web,env!=dev").await, ["a"]);
}

#[tokio::test]
async fn dry_run_and_resource_version_semantics() {
    // A server of its own: the test reads the cluster at resourceVersion 1, which a cluster
    // other tests have used past a compaction no longer has.
    let ns = TestApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(ns.client());
    let created = api
        .create(
            &PostParams {
                dry_run: true,
                ..Default::default()
            },
            &cm("dry", &[("a", "b")]),
        )
        .await
        .unwrap();
    assert_eq!(created.metadata.name.as_deref(), Some("dry"));
    assert!(
        api.get_opt("dry").await.unwrap().is_none(),
        "dry run stores nothing"
    );

    api.create(&PostParams::default(), &cm("x", &[]))
        .await
        .unwrap();
    let rv: u64 = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
        .parse()
        .unwrap();
    // NotOlderThan an RV from the future: 504 Timeout (ResourceVersionTooLarge). kube's client
    // retries 504s for a long while, so look at the raw answer.
    let raw = raw_get(
        &ns.url(),
        &format!(
            "/api/v1/namespaces/{}/configmaps?resourceVersion={}&resourceVersionMatch=NotOlderThan",
            ns.namespace(),
            rv + 100
        ),
    )
    .await;
    assert!(raw.starts_with("HTTP/1.1 504"), "{raw}");
    assert!(raw.contains("ResourceVersionTooLarge"), "{raw}");
    // "0" (any) and NotOlderThan an old RV both serve the current state.
    let any = api.list(&ListParams::default().match_any()).await.unwrap();
    assert_eq!(any.items.len(), 1);
    let not_older = api
        .list(
            &ListParams::default()
                .at("1")
                .matching(kube::api::VersionMatch::NotOlderThan),
        )
        .await
        .unwrap();
    assert_eq!(not_older.items.len(), 1);
    // Exact at an RV before "x" existed: empty.
    let exact = api
        .list(
            &ListParams::default()
                .at("1")
                .matching(kube::api::VersionMatch::Exact),
        )
        .await
        .unwrap();
    assert!(exact.items.is_empty());
    assert_eq!(exact.metadata.resource_version.as_deref(), Some("1"));
    // An invalid RV: 400.
    let err = api_err(
        api.list(
            &ListParams::default()
                .at("abc")
                .matching(kube::api::VersionMatch::Exact),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(err.code, 400);
}

/// A raw HTTP/1.1 GET returning the status line, headers and body as text.
async fn raw_get(base: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}
