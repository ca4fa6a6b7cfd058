//! CRUD on namespaced and cluster-scoped built-ins: create, get, list, replace, merge patch,
//! delete, get after delete, for each kind.

use serde_json::{Value, json};

use crate::exchange::{Area, Script, delete, get, patch, post, put};

/// (short name, collection path, object)
pub(crate) fn kinds() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        (
            "configmap",
            "/api/v1/namespaces/{ns}/configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"}, "data": {"a": "1"}}),
        ),
        (
            "secret",
            "/api/v1/namespaces/{ns}/secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}, "stringData": {"a": "1"}}),
        ),
        (
            "serviceaccount",
            "/api/v1/namespaces/{ns}/serviceaccounts",
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa1"}}),
        ),
        (
            "service",
            "/api/v1/namespaces/{ns}/services",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc1"},
                "spec": {"ports": [{"port": 80}], "selector": {"app": "x"}}}),
        ),
        (
            "pod",
            "/api/v1/namespaces/{ns}/pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1"},
                "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}),
        ),
        (
            "endpoints",
            "/api/v1/namespaces/{ns}/endpoints",
            json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "ep1"},
                "subsets": [{"addresses": [{"ip": "10.1.2.3"}], "ports": [{"port": 80}]}]}),
        ),
        (
            "pvc",
            "/api/v1/namespaces/{ns}/persistentvolumeclaims",
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "pvc1"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
        ),
        (
            "replicationcontroller",
            "/api/v1/namespaces/{ns}/replicationcontrollers",
            json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "rc1"},
                "spec": {"replicas": 0, "selector": {"app": "rc"}, "template": {"metadata": {"labels": {"app": "rc"}},
                "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}}),
        ),
        (
            "deployment",
            "/apis/apps/v1/namespaces/{ns}/deployments",
            super::deployment("d1", 1),
        ),
        (
            "lease",
            "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l1"},
                "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15}}),
        ),
        (
            "endpointslice",
            "/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "es1"},
                "addressType": "IPv4", "endpoints": [{"addresses": ["10.1.2.3"]}], "ports": [{"port": 80}]}),
        ),
        (
            "ingress",
            "/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses",
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "ing1"},
                "spec": {"defaultBackend": {"service": {"name": "svc1", "port": {"number": 80}}}}}),
        ),
        (
            "role",
            "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r1"},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
        ),
        (
            "rolebinding",
            "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "rb1"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r1"},
                "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]}),
        ),
        (
            "clusterrole",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "conf-crud-cr1"},
                "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]}),
        ),
        (
            "namespace",
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "conf-crud-ns1"}}),
        ),
        (
            "runtimeclass",
            "/apis/node.k8s.io/v1/runtimeclasses",
            json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "conf-crud-rc1"}, "handler": "runc"}),
        ),
        ("node", "/api/v1/nodes", super::node("conf-crud-node1")),
    ]
}

/// The CRUD area.
pub fn area() -> Area {
    let mut s = Script::new("crud");
    for (k, coll, obj) in kinds() {
        let name = obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let item = format!("{coll}/{name}");
        s.body(&format!("{k}/create"), post(coll, obj.clone()))
            .capture(&format!("rv_{k}"), "/metadata/resourceVersion")
            .capture(&format!("uid_{k}"), "/metadata/uid");
        s.body(&format!("{k}/get"), get(&item));
        s.pick(
            &format!("{k}/list"),
            get(coll),
            &["/kind", "/apiVersion", "/metadata", "/items"],
        );
        s.status(&format!("{k}/create-again"), post(coll, obj.clone()));
        let mut updated = obj.clone();
        updated["metadata"]["labels"] = json!({"updated": "yes"});
        updated["metadata"]["resourceVersion"] = json!(format!("{{rv_{k}}}"));
        s.body(&format!("{k}/update"), put(&item, updated.clone()));
        s.status(&format!("{k}/update-stale"), put(&item, updated));
        s.body(
            &format!("{k}/merge-patch"),
            patch(
                &item,
                "merge",
                json!({"metadata": {"annotations": {"a": "b"}}}),
            ),
        );
        if k == "namespace" {
            s.pick(
                &format!("{k}/delete"),
                delete(&item),
                &["/kind", "/metadata/name", "/status"],
            );
            continue;
        }
        s.body(&format!("{k}/delete"), delete(&item));
        // Some kinds go through the garbage collector's finalizers on the real backend
        // (ReplicationControllers orphan by default): wait until the object is gone.
        s.wait_for(get(&item), 404, 30);
        s.status(&format!("{k}/get-deleted"), get(&item));
        s.status(&format!("{k}/delete-missing"), delete(&item));
    }
    s.done()
}
