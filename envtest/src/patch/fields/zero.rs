//! Data table: the shape of built-in kinds' zero values that field ownership depends on.
//!
//! kube-apiserver compares a write with the previous object (a create: with the kind's zero
//! value) after converting both from Go structs. A non-pointer struct field, and a list or map
//! field without `omitempty`, is always there, so a write never *adds* it: the writer owns its
//! fields only (`f:spec: {f:replicas: {}}`). A map or list the zero value lacks is added and
//! owned itself (`f:labels: {.: {}, f:app: {}}`). Structs and maps upstream marks atomic
//! (`+structType=atomic`, `+mapType=atomic`) are owned as one field, like atomic lists.
//!
//! Paths are dotted field names without list positions, as in
//! [`MergeStrategy`](crate::patch::strategy::MergeStrategy). Kinds with a pod spec get
//! [`POD_SPEC_ZERO`] and [`POD_SPEC_ATOMIC`] under it (and their template structs) from their
//! descriptor's pod spec prefix.

/// The zero-value shape of one kind.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Shape {
    /// Maps and lists the zero value has.
    pub zero: &'static [&'static str],
    /// Atomic maps and structs.
    pub atomic: &'static [&'static str],
}

/// Under a pod spec: lists without `omitempty` and the structs of list items.
pub(crate) const POD_SPEC_ZERO: &[&str] = &[
    "containers",
    "containers.resources",
    "initContainers.resources",
    "ephemeralContainers.resources",
];

/// Under a pod spec: atomic maps and structs.
/// The selectors of an env var's `valueFrom` are `+structType=atomic` upstream
/// (`ObjectFieldSelector`, `ResourceFieldSelector`, `ConfigMapKeySelector`,
/// `SecretKeySelector`): owned as a whole.
pub(crate) const POD_SPEC_ATOMIC: &[&str] = &[
    "nodeSelector",
    "containers.env.valueFrom.fieldRef",
    "containers.env.valueFrom.resourceFieldRef",
    "containers.env.valueFrom.configMapKeyRef",
    "containers.env.valueFrom.secretKeyRef",
    "initContainers.env.valueFrom.fieldRef",
    "initContainers.env.valueFrom.resourceFieldRef",
    "initContainers.env.valueFrom.configMapKeyRef",
    "initContainers.env.valueFrom.secretKeyRef",
    "ephemeralContainers.env.valueFrom.fieldRef",
    "ephemeralContainers.env.valueFrom.resourceFieldRef",
    "ephemeralContainers.env.valueFrom.configMapKeyRef",
    "ephemeralContainers.env.valueFrom.secretKeyRef",
];

const SPEC_STATUS: &[&str] = &["spec", "status"];

/// Whether the kind's pod template (`spec.template`) is a pointer, so that a write adds it (and
/// its `metadata` and `spec`) rather than finding it in the zero value: core/v1
/// ReplicationControllers (`*PodTemplateSpec`); the apps and batch workloads embed theirs.
pub(crate) fn template_is_pointer(group: &str, kind: &str) -> bool {
    (group, kind) == ("", "ReplicationController")
}

/// The zero-value shape of the built-in kind `(group, kind)`; empty for kinds not listed.
pub(crate) fn shape(group: &str, kind: &str) -> Shape {
    let (zero, atomic): (&[&str], &[&str]) = match (group, kind) {
        ("", "Pod") => (&["spec", "status"], &[]),
        ("", "Service") => (
            &["spec", "status", "status.loadBalancer"],
            &["spec.selector"],
        ),
        ("", "PersistentVolumeClaim") => (
            &["spec", "spec.resources", "status"],
            &["spec.selector", "spec.dataSource", "spec.dataSourceRef"],
        ),
        ("", "PersistentVolume") => (SPEC_STATUS, &["spec.claimRef"]),
        ("", "Namespace") => (SPEC_STATUS, &[]),
        ("", "Node") => (
            &[
                "spec",
                "status",
                "status.daemonEndpoints",
                "status.daemonEndpoints.kubeletEndpoint",
                "status.nodeInfo",
            ],
            &["spec.configSource", "status.config"],
        ),
        ("", "ReplicationController") => (SPEC_STATUS, &["spec.selector"]),
        ("", "Event") => (&["source"], &["involvedObject", "related"]),
        ("events.k8s.io", "Event") => (&["deprecatedSource"], &["regarding", "related"]),
        ("apps", "Deployment") => (&["spec", "spec.strategy", "status"], &["spec.selector"]),
        ("apps", "StatefulSet" | "DaemonSet") => (
            &["spec", "spec.updateStrategy", "status"],
            &["spec.selector"],
        ),
        ("apps", "ReplicaSet") => (SPEC_STATUS, &["spec.selector"]),
        ("batch", "Job") => (SPEC_STATUS, &["spec.selector"]),
        ("batch", "CronJob") => (&["spec", "spec.jobTemplate.metadata", "status"], &[]),
        ("coordination.k8s.io", "Lease") => (&["spec"], &[]),
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole") => (&["rules"], &[]),
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => (&[], &["roleRef"]),
        // A backend's `service.port` is a ServiceBackendPort, `+structType=atomic` upstream.
        ("networking.k8s.io", "Ingress") => (
            &["spec", "status", "status.loadBalancer"],
            &[
                "spec.defaultBackend.service.port",
                "spec.rules.http.paths.backend.service.port",
            ],
        ),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => (
            &[
                "spec",
                "spec.names",
                "spec.versions",
                "status",
                "status.acceptedNames",
            ],
            &[],
        ),
        _ => (&[], &[]),
    };
    Shape { zero, atomic }
}
