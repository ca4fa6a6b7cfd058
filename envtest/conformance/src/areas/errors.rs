//! Error bodies for 400, 404, 405, 409, 415 and 422: code, reason, details, causes, message
//! and the JSON shape (`kind` first, `metadata: {}`, no empty `group`, trailing newline).

use serde_json::json;

use super::{CM, cm};
use crate::exchange::{Area, Request, Script, get, patch, post, put};

/// The errors area.
pub fn area() -> Area {
    let mut s = Script::new("errors");
    s.setup(post(CM, cm("c1", json!({}))));
    s.status("400-bad-json", Request::new("POST", CM).text("{bad"));
    s.status(
        "400-name-mismatch",
        put(&format!("{CM}/c1"), cm("c2", json!({}))),
    );
    s.status(
        "400-namespace-mismatch",
        post(
            CM,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "x4", "namespace": "other"}}),
        ),
    );
    s.status(
        "400-wrong-kind",
        post(
            CM,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x5"}}),
        ),
    );
    s.status(
        "400-bad-field-validation",
        post(CM, cm("x0", json!({}))).q("fieldValidation", "Loud"),
    );
    s.status(
        "400-strict-unknown-field",
        post(
            CM,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "strict"}, "bogus": 1}),
        )
        .q("fieldValidation", "Strict"),
    );
    s.status("404-object", get(&format!("{CM}/missing")));
    s.status(
        "404-namespace",
        get("/api/v1/namespaces/conf-nowhere/configmaps/x"),
    );
    s.status(
        "404-create-in-missing-namespace",
        post(
            "/api/v1/namespaces/conf-nowhere/configmaps",
            cm("x1", json!({})),
        ),
    );
    s.status("404-resource", get("/api/v1/namespaces/{ns}/frobs"));
    s.status("404-group", get("/apis/nosuch.example.com/v1/things"));
    s.status(
        "404-crd-object",
        get("/apis/conf.kcr.dev/v1/namespaces/{ns}/widgets/nope"),
    );
    s.status("404-node", get("/api/v1/nodes/conf-missing-node"));
    s.status(
        "404-deployment",
        get("/apis/apps/v1/namespaces/{ns}/deployments/nope"),
    );
    s.status("405-put-collection", put(CM, cm("x2", json!({}))));
    s.status(
        "405-post-item",
        post(&format!("{CM}/c1"), cm("c1", json!({}))),
    );
    s.status(
        "405-patch-collection",
        crate::exchange::patch(CM, "merge", json!({})),
    );
    s.status("409-already-exists", post(CM, cm("c1", json!({}))));
    s.status(
        "409-conflict",
        put(&format!("{CM}/c1"), {
            let mut c = cm("c1", json!({}));
            c["metadata"]["resourceVersion"] = json!("1");
            c
        }),
    );
    s.status(
        "415-content-type",
        Request::new("POST", CM)
            .h("Content-Type", "text/plain")
            .text("hello"),
    );
    s.status(
        "415-patch-content-type",
        Request::new("PATCH", &format!("{CM}/c1"))
            .h("Content-Type", "application/json")
            .text("{}"),
    );
    s.status("422-bad-name", post(CM, cm("Bad_Name", json!({}))));
    s.status(
        "422-bad-label",
        post(
            CM,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "x6", "labels": {"bad key!": "v"}}}),
        ),
    );
    s.status(
        "422-no-name",
        post(
            CM,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
        ),
    );
    s.status(
        "422-bad-data-key",
        post(CM, cm("x3", json!({"bad key": "v"}))),
    );
    s.status(
        "422-secret-type-data",
        post(
            "/api/v1/namespaces/{ns}/secrets",
            json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "tls"}, "type": "kubernetes.io/tls", "data": {}}),
        ),
    );
    s.status("422-deployment-selector", post(super::DEPLOY, json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "bad"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "c"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}})));
    s.status(
        "422-too-long-name",
        post(CM, cm(&"x".repeat(260), json!({}))),
    );
    s.status(
        "403-terminating-namespace-create",
        post(
            "/api/v1/namespaces/kube-system/configmaps",
            cm("conf-errors-ok", json!({})).clone(),
        )
        .q("dryRun", "All"),
    );
    // A resourceVersion on create: the store's unclassified 500 for a real create, and an
    // answer for a dry run (which never reaches the store).
    s.status(
        "500-create-with-resource-version",
        post(
            CM,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "with-rv", "resourceVersion": "12345"}}),
        ),
    );
    s.pick(
        "dry-run-create-with-resource-version",
        post(
            CM,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "with-rv", "resourceVersion": "12345"}}),
        )
        .q("dryRun", "All"),
        &["/kind", "/metadata/name", "/metadata/resourceVersion"],
    );
    // Unknown fields of built-ins: refused by name with Strict (nested ones with their list
    // positions), dropped without it (never stored).
    s.status(
        "400-strict-unknown-nested-fields",
        post(
            "/api/v1/namespaces/{ns}/pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "strict-pod", "extra": 1},
                "spec": {"containers": [{"name": "c", "image": "a", "colour": "red"}]}}),
        )
        .q("fieldValidation", "Strict"),
    );
    s.body(
        "unknown-field-dropped",
        post(
            CM,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "dropped"}, "bogus": 1, "data": {"k": "v"}}),
        ),
    );
    s.body(
        "unknown-field-dropped-node",
        post(
            "/api/v1/nodes",
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "conf-errors-unknown"},
                "spec": {"invalidField": "x", "unschedulable": true}}),
        )
        .q("fieldValidation", "Ignore"),
    );
    s.setup(crate::exchange::delete("/api/v1/nodes/conf-errors-unknown"));
    // Dry-run answers: a generated name, defaults and a workload's first status on create;
    // the resourceVersion unchanged and the generation bumped on an update that changes the
    // spec.
    s.body(
        "dry-run-create-generated-name-and-defaults",
        post(
            "/apis/apps/v1/namespaces/{ns}/deployments",
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"generateName": "dry-"},
                "spec": {"selector": {"matchLabels": {"app": "d"}},
                    "template": {"metadata": {"labels": {"app": "d"}},
                        "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}}),
        )
        .q("dryRun", "All"),
    );
    s.setup(post(
        "/apis/apps/v1/namespaces/{ns}/deployments",
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "dry-up"},
            "spec": {"selector": {"matchLabels": {"app": "d"}},
                "template": {"metadata": {"labels": {"app": "d"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}}),
    ));
    s.body(
        "dry-run-update-spec",
        patch(
            "/apis/apps/v1/namespaces/{ns}/deployments/dry-up",
            "merge",
            json!({"spec": {"replicas": 3}}),
        )
        .q("dryRun", "All"),
    );
    s.done()
}
