//! The failures the API answers with, as the real server words them: code, reason, message
//! and details of the Status (405 and 404 of the router, 415 for media types, bad patches,
//! apply bodies, delete preconditions, bodies of another kind, selector syntax).

#![allow(missing_docs)]

use http_body_util::BodyExt;
use kcr_envtest::{TestNamespace, eventually};
use kube::Client;
use serde_json::{Value, json};

/// Send a raw request; the status code and the body as JSON.
async fn send(
    client: &Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: &str,
) -> (u16, Value) {
    let mut req = http::Request::builder().method(method).uri(path);
    if !content_type.is_empty() {
        req = req.header("content-type", content_type);
    }
    let resp = client
        .send(
            req.body(kube::client::Body::from(body.as_bytes().to_vec()))
                .unwrap(),
        )
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// The parts of a Status a client reads.
fn parts(status: &Value) -> Value {
    json!({
        "code": status["code"],
        "reason": status.get("reason"),
        "message": status["message"],
        "details": status.get("details"),
    })
}

/// The ConfigMaps of the test's namespace.
fn configmaps(ns: &TestNamespace) -> String {
    format!("/api/v1/namespaces/{}/configmaps", ns.namespace())
}
const JSON: &str = "application/json";
const APPLY: &str = "application/apply-patch+yaml";

#[tokio::test]
async fn router_and_media_type_errors() {
    let ns = TestNamespace::new("router").await.unwrap();
    let c = ns.client();
    let cms = configmaps(&ns);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "texts-c1"}});
    let (code, _) = send(&c, "POST", &cms, JSON, &cm.to_string()).await;
    assert_eq!(code, 201);
    let not_allowed = json!({"code": 405, "reason": "MethodNotAllowed",
        "message": "the server does not allow this method on the requested resource", "details": {}});
    let not_found = json!({"code": 404, "reason": "NotFound",
        "message": "the server could not find the requested resource", "details": {}});
    let no_handler = json!({"code": 415, "reason": "UnsupportedMediaType",
        "message": "415: Unsupported Media Type", "details": {}});
    for (method, path, content_type, body, want) in [
        ("PUT", cms.clone(), JSON, "{}", &not_allowed),
        ("POST", format!("{cms}/texts-c1"), JSON, "{}", &not_allowed),
        (
            "PATCH",
            cms.clone(),
            "application/merge-patch+json",
            "{}",
            &not_allowed,
        ),
        (
            "GET",
            format!("/api/v1/namespaces/{}/frobs", ns.namespace()),
            "",
            "",
            &not_found,
        ),
        ("GET", format!("{cms}/texts-c1/status"), "", "", &not_found),
        ("PATCH", format!("{cms}/texts-c1"), JSON, "{}", &no_handler),
        (
            "PATCH",
            format!("{cms}/texts-c1"),
            "application/foo",
            "{}",
            &no_handler,
        ),
    ] {
        let (code, status) = send(&c, method, &path, content_type, body).await;
        assert_eq!(
            (code, &parts(&status)),
            (want["code"].as_u64().unwrap() as u16, want),
            "{method} {path}"
        );
    }
    let (code, status) = send(&c, "POST", &cms, "text/plain", "hello").await;
    assert_eq!(code, 415);
    assert_eq!(
        parts(&status),
        json!({"code": 415, "reason": "UnsupportedMediaType", "details": null,
            "message": "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"})
    );
}

#[tokio::test]
async fn bad_patches_and_apply_bodies() {
    let ns = TestNamespace::new("bad-patches").await.unwrap();
    let c = ns.client();
    let cms = configmaps(&ns);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "texts-p1"}, "data": {"a": "1"}});
    assert_eq!(send(&c, "POST", &cms, JSON, &cm.to_string()).await.0, 201);
    let path = format!("{cms}/texts-p1");
    let cases = [
        (
            "application/json-patch+json",
            r#"[{"op":"frob","path":"/data/a"}]"#,
            json!({"code": 422, "reason": "Invalid", "details": {},
                "message": "the server rejected our request due to an error in our request"}),
        ),
        (
            "application/json-patch+json",
            r#"{"op":"add"}"#,
            json!({"code": 400, "reason": "BadRequest", "details": null,
                "message": "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp"}),
        ),
        (
            APPLY,
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"other"}}"#,
            json!({"code": 400, "reason": "BadRequest", "details": null,
                "message": "the name of the object (other) does not match the name on the URL (texts-p1)"}),
        ),
        (
            APPLY,
            r#"{"metadata":{"name":"texts-p1"}}"#,
            json!({"code": 400, "reason": "BadRequest", "details": null,
                "message": "invalid object type: /, Kind="}),
        ),
        (
            APPLY,
            r#"{"apiVersion":"v1","metadata":{"name":"texts-p1"}}"#,
            json!({"code": 400, "reason": "BadRequest", "details": null,
                "message": "invalid object type: /v1, Kind="}),
        ),
    ];
    for (content_type, body, want) in cases {
        let (_, status) = send(
            &c,
            "PATCH",
            &format!("{path}?fieldManager=alice"),
            content_type,
            body,
        )
        .await;
        assert_eq!(parts(&status), want, "{content_type} {body}");
    }

    // An unknown strategic merge directive: a 500 without a reason, in Go's formatting.
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "texts-d1"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    let deployments = format!("/apis/apps/v1/namespaces/{}/deployments", ns.namespace());
    assert_eq!(
        send(&c, "POST", &deployments, JSON, &deploy.to_string())
            .await
            .0,
        201
    );
    let (code, status) = send(
        &c,
        "PATCH",
        &format!("{deployments}/texts-d1"),
        "application/strategic-merge-patch+json",
        r#"{"spec":{"$patch":"explode"}}"#,
    )
    .await;
    assert_eq!(code, 500);
    assert_eq!(
        parts(&status),
        json!({"code": 500, "reason": null, "details": null,
            "message": "unknown patch type: explode in map: map[$patch:explode]"})
    );

    // An apply conflict's details hold the causes only.
    let (code, status) = send(
        &c,
        "PATCH",
        &format!("{path}?fieldManager=bob"),
        APPLY,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"texts-p1"},"data":{"a":"x"}}"#,
    )
    .await;
    assert_eq!(code, 409, "{status}");
    let details = status["details"].as_object().unwrap();
    assert_eq!(details.keys().collect::<Vec<_>>(), ["causes"], "{status}");
}

#[tokio::test]
async fn delete_preconditions_and_bodies_of_another_kind() {
    let ns = TestNamespace::new("preconditions").await.unwrap();
    let c = ns.client();
    let cms = configmaps(&ns);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "texts-k1"}});
    let (_, created) = send(&c, "POST", &cms, JSON, &cm.to_string()).await;
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!("{cms}/texts-k1");
    let zero = "00000000-0000-0000-0000-000000000000";
    let (code, status) = send(
        &c,
        "DELETE",
        &path,
        JSON,
        &json!({"preconditions": {"uid": zero}}).to_string(),
    )
    .await;
    assert_eq!(code, 409);
    assert_eq!(
        parts(&status),
        json!({"code": 409, "reason": "Conflict", "details": {"name": "texts-k1", "kind": "ConfigMap"},
            "message": format!("Operation cannot be fulfilled on ConfigMap \"texts-k1\": the UID in the precondition ({zero}) does not match the UID in record ({uid}). The object might have been deleted and then recreated")})
    );
    let (_, status) = send(
        &c,
        "DELETE",
        &path,
        JSON,
        &json!({"preconditions": {"resourceVersion": "1"}}).to_string(),
    )
    .await;
    assert_eq!(
        status["message"],
        format!(
            "Operation cannot be fulfilled on ConfigMap \"texts-k1\": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record ({rv}). The object might have been modified"
        )
    );

    // events.k8s.io Events are validated as the core Event: no group in the answer.
    let event =
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e3"}});
    let (code, status) = send(
        &c,
        "POST",
        &format!(
            "/apis/events.k8s.io/v1/namespaces/{}/events",
            ns.namespace()
        ),
        JSON,
        &event.to_string(),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with("Event \"e3\" is invalid: "),
        "{status}"
    );
    assert_eq!(status["details"].get("group"), None, "{status}");
    assert_eq!(status["details"]["kind"], "Event", "{status}");

    // A body of another kind: the decoder's words.
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
    let (code, status) = send(&c, "POST", &cms, JSON, &secret.to_string()).await;
    assert_eq!((code, status["reason"].as_str()), (400, Some("BadRequest")));
    assert_eq!(
        status["message"],
        "Secret in version \"v1\" cannot be handled as a ConfigMap: converting (v1.Secret) to (core.ConfigMap): unknown conversion"
    );
    let leases = format!(
        "/apis/coordination.k8s.io/v1/namespaces/{}/leases",
        ns.namespace()
    );
    let cm_as_lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "ConfigMap", "metadata": {"name": "l"}});
    let (_, status) = send(&c, "POST", &leases, JSON, &cm_as_lease.to_string()).await;
    assert_eq!(
        status["message"],
        "ConfigMap in version \"v1\" cannot be handled as a Lease: no kind \"ConfigMap\" is registered for version \"coordination.k8s.io/v1\" in scheme \"pkg/runtime/scheme.go:111\""
    );
}

#[tokio::test]
async fn custom_resource_errors() {
    let ns = TestNamespace::new("cr-errors").await.unwrap();
    ns.install_crd_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "texts.texts.kcr.dev"},
            "spec": {"group": "texts.kcr.dev", "scope": "Namespaced",
                "names": {"plural": "texts", "singular": "text", "kind": "Text", "listKind": "TextList"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object",
                        "properties": {"n": {"type": "integer"}, "s": {"type": "string"}}}}}}}]}
        }))
        .await
        .unwrap();
    let c = ns.client();
    let path = &format!("/apis/texts.kcr.dev/v1/namespaces/{}/texts", ns.namespace());
    let text = json!({"apiVersion": "texts.kcr.dev/v1", "kind": "Text", "metadata": {"name": "t1"}, "spec": {"n": 1}});
    eventually(
        "the custom resource is served",
        std::time::Duration::from_secs(30),
        || async {
            let (code, status) = send(&c, "POST", path, JSON, &text.to_string()).await;
            if code == 201 {
                Ok(())
            } else {
                Err(format!("{code} {status}"))
            }
        },
    )
    .await;
    // No status subresource: the object is not found there.
    let (code, status) = send(&c, "GET", &format!("{path}/t1/status"), "", "").await;
    assert_eq!(code, 404);
    assert_eq!(
        parts(&status),
        json!({"code": 404, "reason": "NotFound", "message": "texts.texts.kcr.dev \"t1\" not found",
            "details": {"name": "t1", "group": "texts.kcr.dev", "kind": "texts"}})
    );
    // Strategic merge is not offered for custom resources.
    let (code, status) = send(
        &c,
        "PATCH",
        &format!("{path}/t1"),
        "application/strategic-merge-patch+json",
        "{}",
    )
    .await;
    assert_eq!(code, 415);
    assert_eq!(
        status["message"],
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    );
    // A value of the wrong type is shown by the name of its type.
    let bad = json!({"apiVersion": "texts.kcr.dev/v1", "kind": "Text", "metadata": {"name": "t2"}, "spec": {"n": "x", "s": 1.5}});
    let (code, status) = send(&c, "POST", path, JSON, &bad.to_string()).await;
    assert_eq!(code, 422);
    let mut causes: Vec<String> = status["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["message"].as_str().unwrap().to_string())
        .collect();
    causes.sort();
    assert_eq!(
        causes,
        [
            "Invalid value: \"number\": spec.s in body must be of type string: \"number\"",
            "Invalid value: \"string\": spec.n in body must be of type integer: \"string\"",
        ]
    );
    // A body of another kind: 422 on `kind`.
    let other =
        json!({"apiVersion": "texts.kcr.dev/v1", "kind": "Other", "metadata": {"name": "t3"}});
    let (code, status) = send(&c, "POST", path, JSON, &other.to_string()).await;
    assert_eq!(code, 422);
    assert_eq!(
        status["message"],
        "Other.texts.kcr.dev \"t3\" is invalid: kind: Invalid value: \"Other\": must be Text"
    );
}

#[tokio::test]
async fn selector_errors() {
    let ns = TestNamespace::new("selectors").await.unwrap();
    let c = ns.client();
    let cms = configmaps(&ns);
    for (query, message) in [
        (
            "labelSelector=a%3Db%20c",
            "found 'c', expected: ',' or 'end of string'",
        ),
        (
            "labelSelector=a%20in%20(x",
            "unable to parse requirement: found '', expected: ',' or ')'",
        ),
        (
            "labelSelector=%3Da",
            "found '=', expected: !, identifier, or 'end of string'",
        ),
        (
            "fieldSelector=data.k%3Dv",
            "\"data.k\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
        ),
        (
            "fieldSelector=metadata.name",
            "invalid selector: 'metadata.name'; can't understand 'metadata.name'",
        ),
    ] {
        let (code, status) = send(&c, "GET", &format!("{cms}?{query}"), "", "").await;
        assert_eq!(code, 400, "{query}");
        assert_eq!(status["message"], message, "{query}");
    }
    // A continue value that is no token: Go's words for what failed to decode.
    let (code, status) = send(
        &c,
        "GET",
        &format!("{cms}?limit=2&continue=garbage"),
        "",
        "",
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        status["message"],
        r"invalid continue token: continue key is not valid: invalid character '\u0081' looking for beginning of value"
    );
    // Pods convert their own field labels: another text.
    let (_, status) = send(
        &c,
        "GET",
        &format!(
            "/api/v1/namespaces/{}/pods?fieldSelector=spec.frob%3Dx",
            ns.namespace()
        ),
        "",
        "",
    )
    .await;
    assert_eq!(status["message"], "field label not supported: spec.frob");
}

#[tokio::test]
async fn json_syntax_finalizer_and_conflict_texts() {
    let ns = TestNamespace::new("json-syntax").await.unwrap();
    let c = ns.client();
    let cms = configmaps(&ns);
    // Bodies that are not JSON: Go's words, the start of the body quoted.
    let (code, status) = send(&c, "POST", &cms, JSON, "{not json").await;
    assert_eq!((code, status["reason"].as_str()), (400, Some("BadRequest")));
    assert_eq!(
        status["message"],
        "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: invalid character 'n' looking for beginning of object key string ({not json)"
    );
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "texts-j1",
        "finalizers": ["texts.kcr.dev/hold"]}, "data": {"a": "1"}});
    assert_eq!(send(&c, "POST", &cms, JSON, &cm.to_string()).await.0, 201);
    let path = format!("{cms}/texts-j1");
    let (code, status) = send(
        &c,
        "PATCH",
        &path,
        "application/merge-patch+json",
        "{not json",
    )
    .await;
    assert_eq!((code, status["reason"].as_str()), (400, Some("BadRequest")));
    // kube-apiserver 1.37 checks that the body is JSON before anything else (1.34 said "error
    // decoding patch: invalid character 'n' looking for beginning of object key string").
    assert_eq!(status["message"], "invalid JSON patch");
    // The same for an object that does not exist: the check comes before the read.
    let (code, status) = send(
        &c,
        "PATCH",
        &format!("{cms}/texts-absent"),
        "application/json-patch+json",
        "[{not json",
    )
    .await;
    assert_eq!(
        (code, status["message"].as_str()),
        (400, Some("invalid JSON patch"))
    );

    // Conflicts name an updater with its apiVersion, an applier alone.
    let applied = |value: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "texts-j1"},
            "data": {"a": value, "b": "x"}})
        .to_string()
    };
    let (code, status) = send(
        &c,
        "PATCH",
        &format!("{path}?fieldManager=bob"),
        APPLY,
        &applied("2"),
    )
    .await;
    assert_eq!(code, 409, "{status}");
    assert!(
        status["message"].as_str().unwrap().starts_with(
            "Apply failed with 1 conflict: conflict with \"unknown\" using v1: .data.a"
        ),
        "{status}"
    );
    let (code, _) = send(
        &c,
        "PATCH",
        &format!("{path}?fieldManager=bob&force=true"),
        APPLY,
        &applied("2"),
    )
    .await;
    assert_eq!(code, 200);
    let (code, status) = send(
        &c,
        "PATCH",
        &format!("{path}?fieldManager=carol"),
        APPLY,
        &applied("3"),
    )
    .await;
    assert_eq!(code, 409);
    assert_eq!(
        status["message"],
        "Apply failed with 1 conflict: conflict with \"bob\": .data.a"
    );
    assert_eq!(
        status["details"]["causes"],
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"bob\"", "field": ".data.a"}])
    );

    // New finalizers on an object being deleted: Go's `%#v` of the set, the cause once
    // (kube-apiserver 1.34 listed it twice).
    let (code, _) = send(&c, "DELETE", &path, "", "").await;
    assert_eq!(code, 200);
    let (_, current) = send(&c, "GET", &path, "", "").await;
    let mut added = current.clone();
    added["metadata"]["finalizers"] =
        json!(["texts.kcr.dev/hold", "texts.kcr.dev/b", "texts.kcr.dev/a"]);
    let (code, status) = send(&c, "PUT", &path, JSON, &added.to_string()).await;
    assert_eq!(code, 422, "{status}");
    let message = "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"texts.kcr.dev/a\", \"texts.kcr.dev/b\"}";
    assert_eq!(
        status["message"],
        format!("ConfigMap \"texts-j1\" is invalid: metadata.finalizers: {message}")
    );
    let cause = json!({"reason": "FieldValueForbidden", "message": message, "field": "metadata.finalizers"});
    assert_eq!(status["details"]["causes"], json!([cause]));
    let released = json!({"metadata": {"finalizers": null}}).to_string();
    assert_eq!(
        send(
            &c,
            "PATCH",
            &path,
            "application/merge-patch+json",
            &released
        )
        .await
        .0,
        200
    );
}
