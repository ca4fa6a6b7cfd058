//! The kinds kcr and the NodePool operator use (Lease, core and events.k8s.io Events, Node,
//! RuntimeClass, webhook configurations), what a real server creates at start (the
//! `kubernetes` Service, bootstrap RBAC), status filled on create, and
//! `as=PartialObjectMetadata` on reads and writes.

use serde_json::json;

use super::{CM, cm};
use crate::exchange::{Area, Script, get, patch, post, put};

const PARTIAL: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";

/// The kinds area.
pub fn area() -> Area {
    let mut s = Script::new("kinds");
    s.pick(
        "kubernetes-service",
        get("/api/v1/namespaces/default/services/kubernetes"),
        &["/kind", "/metadata/name", "/spec/ports/*/port"],
    );
    s.pick(
        "cluster-admin",
        get("/apis/rbac.authorization.k8s.io/v1/clusterroles/cluster-admin"),
        &["/kind", "/rules"],
    );
    s.pick(
        "cluster-admin-binding",
        get("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/cluster-admin"),
        &["/kind", "/roleRef", "/subjects"],
    );
    s.pick(
        "default-namespaces",
        get("/api/v1/namespaces").q("fieldSelector", "metadata.name=kube-system"),
        &["/items/*/metadata/name", "/items/*/status"],
    );
    s.pick(
        "service-status-on-create",
        post(
            "/api/v1/namespaces/{ns}/services",
            json!({"apiVersion": "v1",
        "kind": "Service", "metadata": {"name": "s1"}, "spec": {"ports": [{"port": 80}]}}),
        ),
        &["/status", "/spec/type"],
    );
    s.pick(
        "pod-status-on-create",
        post(
            "/api/v1/namespaces/{ns}/pods",
            json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p1"}, "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}),
        ),
        &["/status/phase", "/status/qosClass"],
    );
    s.status("serviceaccount-token", post("/api/v1/namespaces/{ns}/serviceaccounts/default/token",
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"audiences": ["x"]}})));
    s.status(
        "ephemeral-containers",
        get("/api/v1/namespaces/{ns}/pods/p1/ephemeralcontainers"),
    );
    s.status("componentstatuses", get("/api/v1/componentstatuses"));
    s.status(
        "csr-list",
        get("/apis/certificates.k8s.io/v1/certificatesigningrequests"),
    );
    s.status(
        "apiservices-list",
        get("/apis/apiregistration.k8s.io/v1/apiservices/v1."),
    );
    let leases = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases";
    s.body("lease-create", post(leases, json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "leader"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 10,
        "acquireTime": "2024-01-01T00:00:00.000000Z", "renewTime": "2024-01-01T00:00:00.000000Z", "leaseTransitions": 0}})));
    s.body(
        "lease-renew",
        patch(
            &format!("{leases}/leader"),
            "merge",
            json!({"spec": {"renewTime": "2024-01-01T00:00:05.000000Z"}}),
        ),
    );
    s.status(
        "lease-bad-duration",
        post(
            leases,
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "bad"}, "spec": {"leaseDurationSeconds": -1}}),
        ),
    );
    let ev = "/api/v1/namespaces/{ns}/events";
    s.body("core-event-create", post(ev, json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"},
        "involvedObject": {"kind": "ConfigMap", "name": "c", "namespace": "{ns}"}, "reason": "R", "message": "m",
        "type": "Normal", "source": {"component": "conf"}, "count": 1,
        "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T00:00:00Z"})));
    s.body(
        "core-event-as-events-v1",
        get("/apis/events.k8s.io/v1/namespaces/{ns}/events/e1"),
    );
    s.body("events-v1-create", post("/apis/events.k8s.io/v1/namespaces/{ns}/events", json!({"apiVersion": "events.k8s.io/v1",
        "kind": "Event", "metadata": {"name": "e2"}, "eventTime": "2024-01-01T00:00:00.000000Z", "reportingController": "conf.kcr.dev/c",
        "reportingInstance": "i", "action": "A", "reason": "R", "type": "Warning", "note": "n",
        "regarding": {"kind": "ConfigMap", "name": "c", "namespace": "{ns}"}})));
    s.body("events-v1-as-core", get(&format!("{ev}/e2")));
    s.status(
        "events-v1-missing-fields",
        post(
            "/apis/events.k8s.io/v1/namespaces/{ns}/events",
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e3"}}),
        ),
    );
    let rc = "/apis/node.k8s.io/v1/runtimeclasses";
    s.body("runtimeclass-create", post(rc, json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
        "metadata": {"name": "conf-kinds-rc"}, "handler": "runc", "overhead": {"podFixed": {"cpu": "100m"}}})));
    s.status(
        "runtimeclass-handler-immutable",
        patch(
            &format!("{rc}/conf-kinds-rc"),
            "merge",
            json!({"handler": "kata"}),
        ),
    );
    s.pick(
        "runtimeclass-delete",
        crate::exchange::delete(&format!("{rc}/conf-kinds-rc")),
        &["/kind", "/metadata/name"],
    );
    s.body(
        "node-create",
        post("/api/v1/nodes", super::node("conf-kinds-n1")),
    );
    s.pick(
        "node-cordon",
        patch(
            "/api/v1/nodes/conf-kinds-n1",
            "strategic",
            json!({"spec": {"unschedulable": true}}),
        ),
        &["/spec", "/metadata/generation"],
    );
    s.pick(
        "node-delete",
        crate::exchange::delete("/api/v1/nodes/conf-kinds-n1"),
        &["/kind", "/metadata/name"],
    );
    for (k, p) in [
        ("mutating", "mutatingwebhookconfigurations"),
        ("validating", "validatingwebhookconfigurations"),
    ] {
        let kind = if k == "mutating" {
            "MutatingWebhookConfiguration"
        } else {
            "ValidatingWebhookConfiguration"
        };
        let path = format!("/apis/admissionregistration.k8s.io/v1/{p}");
        s.body(&format!("{k}-webhook-create"), post(&path, json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind, "metadata": {"name": format!("conf-kinds-{k}")}, "webhooks": [{"name": "w.conf.kcr.dev",
            "clientConfig": {"url": "https://127.0.0.1:1/x"}, "rules": [{"operations": ["CREATE"], "apiGroups": ["conf.kcr.dev"],
            "apiVersions": ["v1"], "resources": ["nothing"]}], "sideEffects": "None", "admissionReviewVersions": ["v1"]}]})));
        s.status(&format!("{k}-webhook-invalid"), post(&path, json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind, "metadata": {"name": format!("conf-kinds-{k}-bad")}, "webhooks": [{"name": "nodots",
            "clientConfig": {}, "sideEffects": "Maybe", "admissionReviewVersions": ["v1"]}]})));
        s.pick(
            &format!("{k}-webhook-delete"),
            crate::exchange::delete(&format!("{path}/conf-kinds-{k}")),
            &["/kind", "/status"],
        );
    }
    s.setup(post(CM, cm("pom", json!({"a": "1"}))));
    s.body(
        "partial-get",
        get(&format!("{CM}/pom")).h("Accept", PARTIAL),
    );
    s.pick(
        "partial-list",
        get(CM).h(
            "Accept",
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        ),
        &[
            "/kind",
            "/apiVersion",
            "/items/*/kind",
            "/items/*/metadata/name",
        ],
    );
    s.body(
        "partial-patch",
        patch(&format!("{CM}/pom"), "merge", json!({"data": {"b": "2"}})).h("Accept", PARTIAL),
    );
    s.body(
        "partial-put",
        put(&format!("{CM}/pom"), cm("pom", json!({"c": "3"}))).h("Accept", PARTIAL),
    );
    s.body(
        "partial-create",
        post(CM, cm("pom2", json!({}))).h("Accept", PARTIAL),
    );
    // Each kind's name rule: RBAC takes path segments (capitals, ':'), Services (1.37) and
    // StatefulSets DNS-1123 labels ("must not contain dots"), CSRs anything.
    s.pick(
        "rbac-role-name-with-capitals",
        post(
            "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "clusterRole-10:Reader"}}),
        ),
        &["/kind", "/metadata/name"],
    );
    s.status(
        "rbac-role-name-with-percent",
        post(
            "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "fifty%off"}}),
        ),
    );
    s.pick(
        "service-name-leading-digit",
        post(
            "/api/v1/namespaces/{ns}/services",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "1st"},
                "spec": {"ports": [{"port": 80}]}}),
        ),
        &["/kind", "/metadata/name"],
    );
    s.status(
        "service-name-with-dots",
        post(
            "/api/v1/namespaces/{ns}/services",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a.b"},
                "spec": {"ports": [{"port": 80}]}}),
        ),
    );
    s.status(
        "statefulset-name-with-dots",
        post(
            "/apis/apps/v1/namespaces/{ns}/statefulsets",
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db.v1"},
                "spec": {"selector": {"matchLabels": {"app": "db"}},
                    "template": {"metadata": {"labels": {"app": "db"}},
                        "spec": {"containers": [{"name": "db", "image": "db"}]}}}}),
        ),
    );
    // A Job's create: its generated selector and template labels (no manualSelector), its
    // defaults, and metadata labels defaulted from the template's.
    s.body(
        "job-create-generated-selector",
        post(
            "/apis/batch/v1/namespaces/{ns}/jobs",
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "gen"},
                "spec": {"suspend": true, "template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox:1"}]}}}}),
        ),
    );
    s.body(
        "job-read-generated-selector",
        get("/apis/batch/v1/namespaces/{ns}/jobs/gen"),
    );
    s.done()
}
