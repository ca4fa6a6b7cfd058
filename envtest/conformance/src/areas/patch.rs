//! Every patch type: JSON patch (a failing `test` op included), merge patch, strategic merge
//! with merge keys and `$patch` directives on Nodes and Deployments.

use serde_json::json;

use super::{CM, DEPLOY, WIDGETS, cm, deployment, widget};
use crate::exchange::{Area, Script, patch, post};

/// The patch area.
pub fn area() -> Area {
    let mut s = Script::new("patch");
    s.setup(post(CM, cm("c1", json!({"a": "1", "b": "2"}))));
    let c = format!("{CM}/c1");
    s.body(
        "json-add",
        patch(
            &c,
            "json",
            json!([{"op": "add", "path": "/data/c", "value": "3"}]),
        ),
    );
    s.body(
        "json-remove",
        patch(&c, "json", json!([{"op": "remove", "path": "/data/b"}])),
    );
    s.body(
        "json-replace",
        patch(
            &c,
            "json",
            json!([{"op": "replace", "path": "/data/a", "value": "9"}]),
        ),
    );
    s.body(
        "json-test-ok",
        patch(
            &c,
            "json",
            json!([{"op": "test", "path": "/data/a", "value": "9"},
        {"op": "add", "path": "/data/t", "value": "ok"}]),
        ),
    );
    s.status(
        "json-test-fails",
        patch(
            &c,
            "json",
            json!([{"op": "test", "path": "/data/a", "value": "0"}]),
        ),
    );
    s.status(
        "json-remove-missing",
        patch(&c, "json", json!([{"op": "remove", "path": "/data/zzz"}])),
    );
    s.status(
        "json-bad-op",
        patch(&c, "json", json!([{"op": "frob", "path": "/data/a"}])),
    );
    s.status("json-not-array", patch(&c, "json", json!({"op": "add"})));
    s.body(
        "json-move-copy",
        patch(
            &c,
            "json",
            json!([{"op": "copy", "from": "/data/a", "path": "/data/a2"},
        {"op": "move", "from": "/data/t", "path": "/data/t2"}]),
        ),
    );
    s.body(
        "merge-null-deletes",
        patch(&c, "merge", json!({"data": {"a": null, "n": "new"}})),
    );
    s.status(
        "merge-stale-rv",
        patch(
            &c,
            "merge",
            json!({"metadata": {"resourceVersion": "1"}, "data": {"x": "y"}}),
        ),
    );
    s.status(
        "merge-invalid-json",
        patch(&c, "merge", json!(null)).text("{not json"),
    );
    s.status(
        "patch-missing-object",
        patch(&format!("{CM}/nope"), "merge", json!({"data": {}})),
    );
    s.status(
        "patch-unsupported-type",
        patch(&c, "application/foo", json!({})),
    );
    s.body(
        "strategic-configmap",
        patch(&c, "strategic", json!({"data": {"s": "1"}})),
    );
    s.setup(post(DEPLOY, deployment("d1", 1)));
    let d = format!("{DEPLOY}/d1");
    let containers = &["/spec/template/spec/containers"];
    s.pick(
        "strategic-merge-key-add",
        patch(
            &d,
            "strategic",
            json!({"spec": {"template": {"spec":
        {"containers": [{"name": "side", "image": "nginx:1"}]}}}}),
        ),
        containers,
    );
    s.pick(
        "strategic-merge-key-update",
        patch(
            &d,
            "strategic",
            json!({"spec": {"template": {"spec":
        {"containers": [{"name": "c", "image": "busybox:2"}]}}}}),
        ),
        containers,
    );
    s.pick(
        "strategic-delete-directive",
        patch(
            &d,
            "strategic",
            json!({"spec": {"template": {"spec":
        {"containers": [{"name": "side", "$patch": "delete"}]}}}}),
        ),
        containers,
    );
    s.pick("strategic-set-element-order", patch(&d, "strategic", json!({"spec": {"template": {"spec":
        {"$setElementOrder/containers": [{"name": "z"}, {"name": "c"}], "containers": [{"name": "z", "image": "z:1"}]}}}})), containers);
    s.pick(
        "strategic-replace-directive",
        patch(
            &d,
            "strategic",
            json!({"spec": {"template": {"spec":
        {"containers": [{"name": "only", "image": "o:1"}], "$patch": "replace"}}}}),
        ),
        &["/spec/template/spec"],
    );
    s.pick(
        "strategic-env-merge",
        patch(
            &d,
            "strategic",
            json!({"spec": {"template": {"spec":
        {"containers": [{"name": "only", "env": [{"name": "A", "value": "1"}]}]}}}}),
        ),
        containers,
    );
    s.pick(
        "strategic-retain-keys",
        patch(
            &d,
            "strategic",
            json!({"spec": {"strategy": {"type": "Recreate", "rollingUpdate": null}}}),
        ),
        &["/spec/strategy"],
    );
    s.status(
        "strategic-bad-directive",
        patch(&d, "strategic", json!({"spec": {"$patch": "explode"}})),
    );
    let n = "/api/v1/nodes/conf-patch-n1";
    s.setup(post(
        "/api/v1/nodes",
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "conf-patch-n1"},
        "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}}),
    ));
    s.pick(
        "node-taints-strategic",
        patch(
            n,
            "strategic",
            json!({"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}}),
        ),
        &["/spec/taints"],
    );
    s.pick(
        "node-labels-strategic",
        patch(n, "strategic", json!({"metadata": {"labels": {"x": "1"}}})),
        &["/metadata/labels"],
    );
    s.pick(
        "node-addresses-strategic",
        patch(
            &format!("{n}/status"),
            "strategic",
            json!({"status": {"addresses":
        [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "h"}]}}),
        ),
        &["/status/addresses"],
    );
    s.pick(
        "node-addresses-merge-key",
        patch(
            &format!("{n}/status"),
            "strategic",
            json!({"status": {"addresses":
        [{"type": "InternalIP", "address": "10.0.0.2"}]}}),
        ),
        &["/status/addresses"],
    );
    s.setup(crate::exchange::delete(n));
    s.setup(post(WIDGETS, widget("w1", 1)));
    s.status(
        "strategic-on-custom-resource",
        patch(
            &format!("{WIDGETS}/w1"),
            "strategic",
            json!({"spec": {"size": 2}}),
        ),
    );
    s.body(
        "merge-on-custom-resource",
        patch(
            &format!("{WIDGETS}/w1"),
            "merge",
            json!({"spec": {"size": 2}}),
        ),
    );
    s.done()
}
