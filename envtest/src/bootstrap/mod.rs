//! What a real control plane holds before any client writes: kube-apiserver's `kubernetes`
//! Service in `default`, its bootstrap RBAC policy (every ClusterRole, ClusterRoleBinding,
//! Role and RoleBinding, from `rbac.json`), kube-aggregator's local APIServices of the served
//! group versions, and, from
//! kube-controller-manager's serviceaccount controller, a `default` ServiceAccount in every
//! namespace ([`default_service_account`], created with its namespace by the store).
//!
//! The in-process server seeds these at start ([`objects`]), after the four namespaces. The
//! aggregated ClusterRoles (`admin`, `edit`, `view`) keep `rules: null`, as on the real backend,
//! where the clusterrole-aggregation controller does not run either.

use serde_json::{Value, json};

/// The namespaces a control plane creates at start (kube-apiserver's system namespaces
/// controller).
pub(crate) const SYSTEM_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

/// The first address of the service range (10.0.0.0/24, kube-apiserver's default), which the
/// `kubernetes` Service takes.
pub(crate) const KUBERNETES_SERVICE_IP: &str = "10.0.0.1";

/// kube-apiserver's bootstrap RBAC policy (`plugin/pkg/auth/authorizer/rbac/bootstrappolicy`),
/// as kube-apiserver 1.37 stores it (regenerate with `envtest/tools/bootstrap_rbac.py`): every
/// ClusterRole, ClusterRoleBinding, Role and
/// RoleBinding it writes at start, copied from the real backend without uid, resourceVersion
/// and creationTimestamp; `<start>` stands for the time of their managedFields entries.
const RBAC: &str = include_str!("rbac.json");

/// The resource key of a bootstrap RBAC kind.
fn rbac_resource(kind: &str) -> Option<&'static str> {
    match kind {
        "ClusterRole" => Some("rbac.authorization.k8s.io/clusterroles"),
        "ClusterRoleBinding" => Some("rbac.authorization.k8s.io/clusterrolebindings"),
        "Role" => Some("rbac.authorization.k8s.io/roles"),
        "RoleBinding" => Some("rbac.authorization.k8s.io/rolebindings"),
        _ => None,
    }
}

/// The bootstrap RBAC objects, their managedFields times set to `now`.
fn rbac(now: &str) -> Vec<(&'static str, Value)> {
    // invariant: the fixture is a JSON array of objects (checked by the unit tests)
    let objects: Vec<Value> = serde_json::from_str(RBAC).unwrap_or_default();
    objects
        .into_iter()
        .filter_map(|mut obj| {
            let key = rbac_resource(obj["kind"].as_str()?)?;
            for entry in obj["metadata"]["managedFields"]
                .as_array_mut()
                .into_iter()
                .flatten()
            {
                entry["time"] = json!(now);
            }
            Some((key, obj))
        })
        .collect()
}

/// The objects seeded at start, as `(resource key, object)`; `port` is the server's, the
/// `kubernetes` Service's target port.
pub(crate) fn objects(port: u16) -> Vec<(&'static str, Value)> {
    let now = crate::store::now_rfc3339();
    let mut objects = vec![(
        "services",
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kubernetes", "namespace": "default",
                "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"ports": [{"name": "https", "protocol": "TCP", "port": 443, "targetPort": port}],
                "clusterIP": KUBERNETES_SERVICE_IP, "clusterIPs": [KUBERNETES_SERVICE_IP],
                "type": "ClusterIP", "sessionAffinity": "None"}}),
    )];
    objects.extend(rbac(&now));
    objects.extend(api_services(&now));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rbac_fixture_holds_the_bootstrap_policy() {
        let objects = rbac("2026-01-01T00:00:00Z");
        let raw: Vec<Value> = serde_json::from_str(RBAC).unwrap();
        assert_eq!(objects.len(), raw.len(), "every object has a known kind");
        let find = |key: &str, name: &str| {
            objects
                .iter()
                .find(|(k, o)| *k == key && o["metadata"]["name"] == name)
                .map(|(_, o)| o.clone())
                .unwrap_or_else(|| panic!("no {key} {name}"))
        };
        let admin = find("rbac.authorization.k8s.io/clusterroles", "cluster-admin");
        assert_eq!(
            admin["rules"][0],
            json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})
        );
        let binding = find(
            "rbac.authorization.k8s.io/clusterrolebindings",
            "cluster-admin",
        );
        assert_eq!(binding["subjects"][0]["name"], "system:masters");
        find("rbac.authorization.k8s.io/clusterroles", "system:discovery");
        let namespaces: std::collections::BTreeSet<&str> = objects
            .iter()
            .filter(|(k, _)| *k == "rbac.authorization.k8s.io/roles")
            .filter_map(|(_, o)| o["metadata"]["namespace"].as_str())
            .collect();
        assert_eq!(Vec::from_iter(namespaces), ["kube-public", "kube-system"]);
        for (_, o) in &objects {
            assert!(o["metadata"].get("uid").is_none());
            for entry in o["metadata"]["managedFields"]
                .as_array()
                .into_iter()
                .flatten()
            {
                assert_eq!(entry["time"], "2026-01-01T00:00:00Z");
            }
        }
    }

    #[test]
    fn objects_start_with_the_kubernetes_service() {
        let objects = objects(6443);
        assert_eq!(objects[0].0, "services");
        assert_eq!(objects[0].1["spec"]["ports"][0]["targetPort"], 6443);
        assert!(
            objects
                .iter()
                .any(|(k, o)| *k == "apiregistration.k8s.io/apiservices"
                    && o["metadata"]["name"] == "v1.")
        );
    }
}
