//! The status subresource: on built-ins (Deployment, Pod, Node) and on CRDs with (Widget) and
//! without (Gadget) it.

use serde_json::json;

use super::{DEPLOY, GADGETS, WIDGETS, deployment, gadget, widget};
use crate::exchange::{Area, Script, get, patch, post, put};

/// The status area.
pub fn area() -> Area {
    let mut s = Script::new("status");
    s.setup(post(WIDGETS, widget("w1", 2)));
    s.setup(post(GADGETS, gadget("g1")));
    s.setup(post(DEPLOY, deployment("d1", 1)));
    let w = format!("{WIDGETS}/w1");
    s.body(
        "widget-main-ignores-status",
        patch(&w, "merge", json!({"status": {"phase": "Main"}})),
    );
    s.body(
        "widget-status-merge",
        patch(
            &format!("{w}/status"),
            "merge",
            json!({"status": {"phase": "Up"}, "spec": {"size": 9}}),
        ),
    );
    s.body("widget-status-get", get(&format!("{w}/status")));
    s.body("widget-status-put",
        put(&format!("{w}/status"), json!({"apiVersion": "conf.kcr.dev/v1", "kind": "Widget",
            "metadata": {"name": "w1"}, "spec": {"size": 2, "color": "red"}, "status": {"phase": "Down"}})));
    s.status(
        "widget-status-bad-name",
        put(
            &format!("{w}/status"),
            json!({"apiVersion": "conf.kcr.dev/v1", "kind": "Widget",
            "metadata": {"name": "other"}, "spec": {"size": 2}, "status": {"phase": "Down"}}),
        ),
    );
    let g = format!("{GADGETS}/g1");
    s.body(
        "gadget-main-writes-status",
        patch(&g, "merge", json!({"status": {"phase": "Main"}})),
    );
    s.status("gadget-status-missing", get(&format!("{g}/status")));
    s.status(
        "gadget-status-patch-missing",
        patch(
            &format!("{g}/status"),
            "merge",
            json!({"status": {"phase": "X"}}),
        ),
    );
    let d = format!("{DEPLOY}/d1");
    s.pick(
        "deployment-main-ignores-status",
        patch(&d, "merge", json!({"status": {"replicas": 5}})),
        &["/status", "/metadata/generation"],
    );
    s.pick(
        "deployment-status-patch",
        patch(
            &format!("{d}/status"),
            "merge",
            json!({"status": {"replicas": 7, "observedGeneration": 1}, "spec": {"replicas": 4}}),
        ),
        &["/status", "/spec/replicas", "/metadata/generation"],
    );
    s.pick(
        "deployment-status-get",
        get(&format!("{d}/status")),
        &["/kind", "/status", "/spec/replicas"],
    );
    s.setup(post("/api/v1/nodes", super::node("conf-status-n1")));
    s.pick("node-status-patch",
        patch("/api/v1/nodes/conf-status-n1/status", "merge",
            json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "r", "message": "m",
                "lastHeartbeatTime": "2024-01-01T00:00:00Z", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}})),
        &["/status/conditions", "/metadata/generation"]);
    s.pick(
        "node-main-ignores-status",
        patch(
            "/api/v1/nodes/conf-status-n1",
            "merge",
            json!({"status": {"phase": "Running"}}),
        ),
        &["/status/phase"],
    );
    s.setup(crate::exchange::delete("/api/v1/nodes/conf-status-n1"));
    s.setup(post(
        "/api/v1/namespaces/{ns}/pods",
        json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p1"}, "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}),
    ));
    s.pick(
        "pod-status-on-create",
        get("/api/v1/namespaces/{ns}/pods/p1"),
        &["/status"],
    );
    s.pick(
        "pod-status-patch",
        patch(
            "/api/v1/namespaces/{ns}/pods/p1/status",
            "merge",
            json!({"status": {"message": "hi"}}),
        ),
        &["/status/message", "/metadata/generation"],
    );
    // What a status write keeps of the metadata it sends, per kind's status strategy: a
    // Deployment keeps annotation changes and resets labels; a Job keeps both.
    s.pick(
        "deployment-status-metadata",
        patch(
            &format!("{d}/status"),
            "merge",
            json!({"metadata": {"annotations": {"conf.kcr.dev/seen": "yes"},
                                "labels": {"conf-extra": "x"}},
                   "status": {"replicas": 2}}),
        ),
        &[
            "/metadata/annotations",
            "/metadata/labels",
            "/status/replicas",
        ],
    );
    s.setup(post(
        "/apis/batch/v1/namespaces/{ns}/jobs",
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j1"},
            "spec": {"suspend": true, "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox:1"}]}}}}),
    ));
    s.pick(
        "job-status-metadata",
        patch(
            "/apis/batch/v1/namespaces/{ns}/jobs/j1/status",
            "merge",
            json!({"metadata": {"annotations": {"note": "n"}, "labels": {"stage": "two"}},
                   "spec": {"suspend": false}}),
        ),
        &["/metadata/annotations", "/metadata/labels", "/spec/suspend"],
    );
    s.done()
}
