//! What a real control plane holds before any client writes: kube-apiserver's `kubernetes`
//! Service in `default` and the bootstrap RBAC roles and bindings a client can rely on
//! (`cluster-admin` and the `system:` roles every authenticated user is bound to),
//! kube-aggregator's local APIServices of the served group versions, and, from
//! kube-controller-manager's serviceaccount controller, a `default` ServiceAccount in every
//! namespace ([`default_service_account`], created with its namespace by the store).
//!
//! The in-process server seeds these at start ([`objects`]), after the four namespaces. The real
//! server has about seventy bootstrap ClusterRoles (one per controller); only the ones listed
//! here exist in process.

use serde_json::{Value, json};

/// The first address of the service range (10.0.0.0/24, kube-apiserver's default), which the
/// `kubernetes` Service takes.
pub(crate) const KUBERNETES_SERVICE_IP: &str = "10.0.0.1";

/// Labels and annotations of bootstrap RBAC objects.
fn rbac_meta(name: &str) -> Value {
    json!({"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}})
}

fn cluster_role(name: &str, rules: Value) -> (&'static str, Value) {
    (
        "rbac.authorization.k8s.io/clusterroles",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": rbac_meta(name), "rules": rules}),
    )
}

fn cluster_role_binding(name: &str, groups: &[&str]) -> (&'static str, Value) {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": g}))
        .collect();
    (
        "rbac.authorization.k8s.io/clusterrolebindings",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": rbac_meta(name), "subjects": subjects,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}}),
    )
}

/// The objects seeded at start, as `(resource key, object)`; `port` is the server's, the
/// `kubernetes` Service's target port.
pub(crate) fn objects(port: u16) -> Vec<(&'static str, Value)> {
    let read = |urls: &[&str]| json!([{"verbs": ["get"], "nonResourceURLs": urls}]);
    let mut objects = api_services(&crate::store::now_rfc3339());
    objects.extend([
        (
            "services",
            json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "kubernetes", "namespace": "default",
                    "labels": {"component": "apiserver", "provider": "kubernetes"}},
                "spec": {"ports": [{"name": "https", "protocol": "TCP", "port": 443, "targetPort": port}],
                    "clusterIP": KUBERNETES_SERVICE_IP, "clusterIPs": [KUBERNETES_SERVICE_IP],
                    "type": "ClusterIP", "sessionAffinity": "None"}}),
        ),
        cluster_role(
            "cluster-admin",
            json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                {"verbs": ["*"], "nonResourceURLs": ["*"]}]),
        ),
        cluster_role(
            "system:discovery",
            read(&[
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
                "/healthz",
                "/livez",
                "/openapi",
                "/openapi/*",
                "/readyz",
                "/version",
                "/version/",
            ]),
        ),
        cluster_role(
            "system:basic-user",
            json!([{"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]},
                {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"],
                    "resources": ["selfsubjectreviews"]}]),
        ),
        cluster_role(
            "system:public-info-viewer",
            read(&["/healthz", "/livez", "/readyz", "/version", "/version/"]),
        ),
        cluster_role_binding("cluster-admin", &["system:masters"]),
        cluster_role_binding("system:discovery", &["system:authenticated"]),
        cluster_role_binding("system:basic-user", &["system:authenticated"]),
        cluster_role_binding(
            "system:public-info-viewer",
            &["system:authenticated", "system:unauthenticated"],
        ),
    ]);
    objects
}

/// kube-aggregator's `groupPriorityMinimum` of the built-in groups kcr-envtest serves.
const GROUP_PRIORITIES: &[(&str, u32)] = &[
    ("", 18000),
    ("apps", 17800),
    ("events.k8s.io", 17750),
    ("batch", 17400),
    ("certificates.k8s.io", 17300),
    ("networking.k8s.io", 17200),
    ("rbac.authorization.k8s.io", 17000),
    ("admissionregistration.k8s.io", 16700),
    ("apiextensions.k8s.io", 16700),
    ("coordination.k8s.io", 16500),
    ("node.k8s.io", 16300),
    ("discovery.k8s.io", 16200),
];

/// The local APIService kube-aggregator keeps for a built-in group version (`v1.` for the core
/// group, `v1.apps`, ...), at the given start time.
pub(crate) fn api_services(now: &str) -> Vec<(&'static str, Value)> {
    GROUP_PRIORITIES
        .iter()
        .map(|(group, priority)| {
            let mut spec = json!({"version": "v1", "groupPriorityMinimum": priority,
                "versionPriority": if group.is_empty() { 1 } else { 15 }});
            if !group.is_empty() {
                spec["group"] = json!(group);
            }
            (
                "apiregistration.k8s.io/apiservices",
                json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                    "metadata": {"name": format!("v1.{group}"),
                        "labels": {"kube-aggregator.kubernetes.io/automanaged": "onstart"}},
                    "spec": spec,
                    "status": {"conditions": [{"type": "Available", "status": "True",
                        "lastTransitionTime": now, "reason": "Local",
                        "message": "Local APIServices are always available"}]}}),
            )
        })
        .collect()
}

/// The ServiceAccount the serviceaccount controller creates in namespace `ns`.
pub(crate) fn default_service_account(ns: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": ns}})
}
