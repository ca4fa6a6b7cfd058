//! Label and field selectors, including invalid ones and per-kind fields (a node's
//! `spec.unschedulable`, a pod's `spec.nodeName` and `status.phase`, a secret's `type`).

use serde_json::json;

use super::{CM, cm_labels};
use crate::exchange::{Area, Script, get, post};

/// The selectors area.
pub fn area() -> Area {
    let mut s = Script::new("selectors");
    s.setup(post(
        CM,
        cm_labels("a", json!({"env": "prod", "tier": "web"})),
    ));
    s.setup(post(
        CM,
        cm_labels("b", json!({"env": "dev", "tier": "web"})),
    ));
    s.setup(post(CM, cm_labels("c", json!({"env": "prod"}))));
    let names = &["/kind", "/items/*/metadata/name"];
    for (n, sel) in [
        ("eq", "env=prod"),
        ("double-eq", "env==prod"),
        ("neq", "env!=prod"),
        ("exists", "tier"),
        ("not-exists", "!tier"),
        ("in", "env in (prod,dev)"),
        ("notin", "env notin (prod)"),
        ("and", "env=prod,tier=web"),
        ("none", "env=qa"),
        ("empty", ""),
    ] {
        s.pick(
            &format!("label-{n}"),
            get(CM).q("labelSelector", sel),
            names,
        );
    }
    for (n, sel) in [
        ("bad-op", "env=>prod"),
        ("bad-value", "env=a b"),
        ("bad-key", "-env=x"),
        ("unclosed", "env in (a"),
    ] {
        s.status(&format!("label-{n}"), get(CM).q("labelSelector", sel));
    }
    for (n, sel) in [
        ("name", "metadata.name=a"),
        ("name-neq", "metadata.name!=a"),
        ("namespace", "metadata.namespace={ns}"),
        ("name-and", "metadata.name=a,metadata.name=b"),
    ] {
        s.pick(
            &format!("field-{n}"),
            get(CM).q("fieldSelector", sel),
            names,
        );
    }
    s.status("field-unsupported", get(CM).q("fieldSelector", "data.k=v"));
    s.status(
        "field-bad-syntax",
        get(CM).q("fieldSelector", "metadata.name"),
    );
    s.setup(post(
        "/api/v1/nodes",
        json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "conf-sel-n1", "labels": {"conf-sel": "y"}}}),
    ));
    s.setup(post("/api/v1/nodes", json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "conf-sel-n2", "labels": {"conf-sel": "y"}}, "spec": {"unschedulable": true}})));
    for (n, sel) in [
        ("unschedulable-false", "spec.unschedulable=false"),
        ("unschedulable-true", "spec.unschedulable=true"),
        ("unschedulable-neq", "spec.unschedulable!=true"),
        ("node-name", "metadata.name=conf-sel-n1"),
    ] {
        s.pick(
            &format!("node-{n}"),
            get("/api/v1/nodes")
                .q("labelSelector", "conf-sel=y")
                .q("fieldSelector", sel),
            names,
        );
    }
    s.setup(crate::exchange::delete("/api/v1/nodes/conf-sel-n1"));
    s.setup(crate::exchange::delete("/api/v1/nodes/conf-sel-n2"));
    let pods = "/api/v1/namespaces/{ns}/pods";
    s.setup(post(
        pods,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox:1"}]}}),
    ));
    s.setup(post(
        pods,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p2"},
        "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}),
    ));
    for (n, sel) in [
        ("pod-node", "spec.nodeName=n1"),
        ("pod-no-node", "spec.nodeName="),
        ("pod-phase", "status.phase=Pending"),
        ("pod-restart", "spec.restartPolicy=Always"),
    ] {
        s.pick(n, get(pods).q("fieldSelector", sel), names);
    }
    let secrets = "/api/v1/namespaces/{ns}/secrets";
    s.setup(post(
        secrets,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}, "type": "Opaque"}),
    ));
    s.pick(
        "secret-type",
        get(secrets).q("fieldSelector", "type=Opaque"),
        names,
    );
    s.done()
}
