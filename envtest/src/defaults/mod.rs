//! What the real API server writes into built-in objects besides what the client sent.
//!
//! kube-apiserver decodes every write into its Go types, runs the defaulting functions
//! (`pkg/apis/core/v1/defaults.go`) and the resource's create/update strategy, and encodes the
//! result. A struct field of a Go type (not a pointer) is always encoded, even when empty, so
//! some objects always carry fields a client never sent; clients see the difference: a JSON
//! patch `add /spec/taints` fails on a Node stored without `spec`, a merge patch of
//! `status.nodeInfo` finds the other fields there, a selector on `kubernetes.io/metadata.name`
//! matches every Namespace.
//!
//! Which functions a kind gets is part of its descriptor (`src/resources/kinds.rs`:
//! `defaults`, `encoded`, `on_create`, `on_update`, `prepare_create`):
//!
//! - [`apply`] (`defaults`, the `SetDefaults_*` functions) runs on every object the store
//!   writes (create, update, patch, server-side apply and
//!   [`TestApiServer::upsert`](crate::TestApiServer::upsert)) and, before admission, on the
//!   object mutating webhooks see (so field ownership includes what it fills in);
//! - [`encode`] (`encoded`: always-encoded zero-valued fields) runs in the store only, so that
//!   no field manager owns them, as upstream;
//! - [`admit_create`] / [`admit_update`] (`on_create` / `on_update`) run on writes through the
//!   API, as the built-in admission plugins that run before mutating webhooks;
//! - [`prepare_create`] (the strategy's `PrepareForCreate`: a new object's first status) and,
//!   for Services, [`allocate`] (cluster IP and node ports) run in the store on every create.
//!
//! They do only what the real server is known to do (checked against kube-apiserver 1.37):
//!
//! | Kind | When | Written |
//! |---|---|---|
//! | Node | every write | `spec: {}` when absent (`NodeSpec` is a struct); `status: {}` when absent, `status.daemonEndpoints.kubeletEndpoint.Port: 0` and the ten string fields of `status.nodeInfo` (`machineID` … `architecture`) as `""` when absent (structs and fields without `omitempty`); `status.allocatable` copied from `status.capacity` when only capacity is given (`SetDefaults_NodeStatus`) |
//! | Node | create (API) | the `node.kubernetes.io/not-ready:NoSchedule` taint (`TaintNodesByCondition`) unless a taint with that key and effect is there |
//! | Namespace | every write | label `kubernetes.io/metadata.name: <name>` (`SetDefaults_Namespace`, overriding any other value) |
//! | Namespace | create | `spec.finalizers` gains `kubernetes`; `status` is `{phase: Active}` whatever was sent (the namespace strategy's `PrepareForCreate`) |
//! | Namespace | update | `spec.finalizers` keeps its stored value (only the `finalize` subresource changes it upstream; `PrepareForUpdate`) |
//! | Namespace | every write | `status.phase: Active` when absent (`SetDefaults_NamespaceStatus`) |
//! | PersistentVolumeClaim | every write | `spec.volumeMode: Filesystem` and `status.phase: Pending` when absent (`SetDefaults_PersistentVolumeClaimSpec`, `SetDefaults_PersistentVolumeClaim`) |
//! | PersistentVolumeClaim | create (API) | the `kubernetes.io/pvc-protection` finalizer (`StorageObjectInUseProtection`, [`protect_claim`]) |
//! | Pod, and every pod template | every write | `restartPolicy: Always`, `terminationGracePeriodSeconds: 30`, `dnsPolicy: ClusterFirst`, `securityContext: {}`, `schedulerName: default-scheduler`; per container `resources: {}`, `terminationMessagePath: /dev/termination-log`, `terminationMessagePolicy: File`, `imagePullPolicy` (`Always` for an untagged or `:latest` image, else `IfNotPresent`), port `protocol: TCP`, probe timings; volume `defaultMode: 420` |
//! | Pod | every write | `enableServiceLinks: true`; requests copied from limits where only limits are set |
//! | Pod | create, update (API) | `NoExecute` tolerations of `node.kubernetes.io/not-ready` and `unreachable` for 300 s (`DefaultTolerationSeconds`); `priority: 0` and `preemptionPolicy: PreemptLowerPriority` without a priority class (`Priority`; an update keeps the stored ones) |
//! | Pod | create | `status: {phase: Pending, qosClass}` whatever was sent (`BestEffort`, `Burstable` or `Guaranteed`) |
//! | Service | every write | `type: ClusterIP`, `sessionAffinity: None`, `internalTrafficPolicy: Cluster`, `externalTrafficPolicy: Cluster` (NodePort, LoadBalancer), port `protocol: TCP` and `targetPort` = `port`; an update without them keeps the allocated cluster IPs and node ports |
//! | Service | create | a cluster IP from `10.0.0.0/24` (random in the dynamic band, as upstream; a requested one must be free and in range: 422), `clusterIPs`, `ipFamilies: [IPv4]`, `ipFamilyPolicy: SingleStack`; node ports from `30000-32767` for NodePort and LoadBalancer; `status: {loadBalancer: {}}` |
//! | Deployment | every write | `replicas: 1`, `strategy` `RollingUpdate` with `25%`/`25%`, `revisionHistoryLimit: 10`, `progressDeadlineSeconds: 600` |
//! | Deployment | create | `status: {}` |
//! | ReplicaSet, ReplicationController | every write | `replicas: 1`; a ReplicationController without a selector or labels takes its template's labels for both |
//! | ReplicationController | create | `status: {replicas: 0}` |
//! | Ingress | create | `status: {loadBalancer: {}}` |
//! | Endpoints, EndpointSlice | every write | port `protocol: TCP`; EndpointSlice port `name: ""` and endpoint `conditions: {}` |
//! | Mutating/ValidatingWebhookConfiguration | every write | per webhook `failurePolicy: Fail`, `matchPolicy: Equivalent`, `namespaceSelector: {}`, `objectSelector: {}`, `timeoutSeconds: 10`, (mutating) `reinvocationPolicy: Never`, rule `scope: "*"`, service `port: 443` |
//! | Event (core/v1 storage) | every write | `involvedObject: {}`, `source: {}`, `firstTimestamp`, `lastTimestamp` and `eventTime` as `null`, `reportingComponent` and `reportingInstance` as `""` (always encoded; events.k8s.io/v1 drops the empty reporting fields, `omitempty` there) |
//! | CustomResourceDefinition | every write | `spec.conversion: {strategy: None}` |
//! | ConfigMap | every write | an empty `data` or `binaryData` is not stored (`omitempty`) |
//!
//! `kcr-envtest/tests/builtin_writes.rs` and `builtin_defaults.rs` pin these through the API,
//! on either backend. On a cluster the node lifecycle controller removes the not-ready taint
//! once the kubelet reports Ready; no such controller runs here (on either backend), so it stays
//! until a client removes it. [`TestApiServer::add_nodes`](crate::TestApiServer::add_nodes)
//! makes registered, Ready nodes without it on both backends.
//!
//! Not done (the real server does more): the defaults of StatefulSet, DaemonSet, Job and
//! CronJob specs besides their pod templates, `serviceAccountName` (the real backend, like
//! controller-runtime's envtest, runs without the ServiceAccount admission plugin), dropping
//! other empty `omitempty` lists and maps (a Node stored with `spec.taints: []` keeps it here;
//! the real server stores no `taints`), and `spec.finalizers` driving namespace deletion
//! (contents are removed at once, as before).

mod objects;
mod pod;
mod service;

use serde_json::{Map, Value, json};

pub(crate) use objects::{
    config_map, custom_resource_definition, deployment, empty_status, endpoint_slice, endpoints,
    event, job, job_selector, mutating_webhooks, no_replicas, replicated, replication_controller,
    templated, validating_webhooks,
};
pub(crate) use pod::{admit_pod, admit_pod_update, pod, pod_status};
pub(crate) use service::{allocate, service, service_status};

use crate::resources::ResourceType;

/// Inserts `value` at `field` unless the field is there (a `null` counts as absent).
/// The objects in the list at `map[field]` (none when it is absent or not a list).
fn items_mut<'a>(
    map: &'a mut Map<String, Value>,
    field: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    map.get_mut(field)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

fn or_insert(map: &mut Map<String, Value>, field: &str, value: Value) {
    match map.get(field) {
        Some(v) if !v.is_null() => {}
        _ => {
            map.insert(field.to_string(), value);
        }
    }
}

/// The strategy's first status of a new object of `t` (`PrepareForCreate`), on every create
/// (through the API or [`TestApiServer::upsert`](crate::TestApiServer::upsert)).
pub(crate) fn prepare_create(t: &ResourceType, obj: &mut Value) {
    if !obj.is_object() {
        return;
    }
    if let Some(prepare) = crate::resources::kinds::of(t).and_then(|k| k.prepare_create) {
        prepare(obj);
    }
}

/// The taint `TaintNodesByCondition` gives every new Node.
pub(crate) const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

/// The built-in mutating admission of a create through the API (the descriptor's
/// `on_create`): see [`taint_not_ready`].
pub(crate) fn admit_create(t: &ResourceType, obj: &mut Value) {
    if !obj.is_object() {
        return;
    }
    if let Some(on_create) = crate::resources::kinds::of(t).and_then(|k| k.on_create) {
        on_create(obj);
    }
}

/// The built-in mutating admission of an update through the API (the descriptor's
/// `on_update`; `old` is the stored object): see [`admit_pod_update`].
pub(crate) fn admit_update(t: &ResourceType, old: &Value, obj: &mut Value) {
    if !obj.is_object() {
        return;
    }
    if let Some(on_update) = crate::resources::kinds::of(t).and_then(|k| k.on_update) {
        on_update(old, obj);
    }
}

/// A new Node gets the not-ready `NoSchedule` taint unless a taint with that key and effect
/// is there.
pub(crate) fn taint_not_ready(obj: &mut Value) {
    if !obj["spec"].is_object() {
        obj["spec"] = json!({});
    }
    let spec = &mut obj["spec"];
    if !spec["taints"].is_array() {
        spec["taints"] = json!([]);
    }
    if let Some(taints) = spec["taints"].as_array_mut() {
        let present = taints.iter().any(|taint| {
            taint["key"] == NOT_READY_TAINT && taint["effect"].as_str() == Some("NoSchedule")
        });
        if !present {
            taints.push(json!({"key": NOT_READY_TAINT, "effect": "NoSchedule"}));
        }
    }
}

/// The label every Namespace carries with its own name.
pub(crate) const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The finalizer a Namespace's `spec.finalizers` gains on create.
pub(crate) const NAMESPACE_FINALIZER: &str = "kubernetes";

/// `status.nodeInfo` fields that are always encoded (no `omitempty` upstream).
const NODE_INFO_FIELDS: [&str; 10] = [
    "machineID",
    "systemUUID",
    "bootID",
    "kernelVersion",
    "osImage",
    "containerRuntimeVersion",
    "kubeletVersion",
    "kubeProxyVersion",
    "operatingSystem",
    "architecture",
];

/// Writes into `obj` what the real API server would (see the [module docs](self)). `old` is
/// the stored object an update replaces (`None`: a create). Objects of other kinds, custom
/// resources and bodies that are not JSON objects are left as they are.
pub(crate) fn apply(t: &ResourceType, old: Option<&Value>, obj: &mut Value) {
    if !obj.is_object() {
        return;
    }
    if let Some(defaults) = crate::resources::kinds::of(t).and_then(|k| k.defaults) {
        defaults(old, obj);
    }
}

/// The always-encoded zero-valued fields of `t`'s objects (the descriptor's `encoded`), which
/// the store writes into every object it stores; kept out of [`apply`] so that, as upstream, no
/// field manager owns them. events.k8s.io Events are stored as core Events: the core form's.
pub(crate) fn encode(t: &ResourceType, obj: &mut Value) {
    if !obj.is_object() {
        return;
    }
    let descriptor = if crate::convert::is_events_v1(t) {
        crate::resources::kinds::core_events()
    } else {
        crate::resources::kinds::of(t)
    };
    if let Some(encoded) = descriptor.and_then(|k| k.encoded) {
        encoded(obj);
    }
}

/// `obj[field]` as an object, replacing an absent or non-object value (`null`) with `{}`.
fn object_field<'a>(obj: &'a mut Value, field: &str) -> Option<&'a mut Map<String, Value>> {
    let map = obj.as_object_mut()?;
    let slot = map
        .entry(field.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut()
}

/// A Node's always-encoded fields (see the module docs).
pub(crate) fn node(_old: Option<&Value>, obj: &mut Value) {
    object_field(obj, "spec");
    let Some(status) = object_field(obj, "status") else {
        return;
    };
    let endpoints = status.entry("daemonEndpoints").or_insert_with(|| json!({}));
    if !endpoints.is_object() {
        *endpoints = json!({});
    }
    if let Some(kubelet) = object_field(endpoints, "kubeletEndpoint") {
        kubelet.entry("Port").or_insert_with(|| json!(0));
    }
    let info = status.entry("nodeInfo").or_insert_with(|| json!({}));
    if !info.is_object() {
        *info = json!({});
    }
    if let Some(info) = info.as_object_mut() {
        for field in NODE_INFO_FIELDS {
            info.entry(field).or_insert_with(|| json!(""));
        }
    }
    let has_allocatable = status.get("allocatable").is_some_and(|a| !a.is_null());
    if !has_allocatable && let Some(capacity) = status.get("capacity").filter(|c| c.is_object()) {
        let capacity = capacity.clone();
        status.insert("allocatable".into(), capacity);
    }
}

/// A Namespace's name label, finalizer and phase (see the module docs).
pub(crate) fn namespace(old: Option<&Value>, obj: &mut Value) {
    if let Some(name) = obj["metadata"]["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        && let Some(meta) = object_field(obj, "metadata")
        && let Some(labels) = object_field_of(meta, "labels")
    {
        labels.insert(NAMESPACE_NAME_LABEL.into(), Value::String(name));
    }
    match old {
        None => {
            let spec = object_field(obj, "spec");
            if let Some(spec) = spec {
                add_to_list(spec, "finalizers", NAMESPACE_FINALIZER);
            }
            if let Some(map) = obj.as_object_mut() {
                map.insert("status".into(), json!({"phase": "Active"}));
            }
        }
        Some(old) => {
            let kept = old["spec"].get("finalizers").cloned();
            if let Some(spec) = object_field(obj, "spec") {
                match kept {
                    Some(f) => {
                        spec.insert("finalizers".into(), f);
                    }
                    None => {
                        spec.remove("finalizers");
                    }
                }
            }
            if let Some(status) = object_field(obj, "status") {
                status.entry("phase").or_insert_with(|| json!("Active"));
            }
        }
    }
}

/// A PersistentVolumeClaim's `spec.volumeMode` (`Filesystem`) and `status.phase` (`Pending`)
/// when absent (`SetDefaults_PersistentVolumeClaimSpec`, `SetDefaults_PersistentVolumeClaim`).
pub(crate) fn persistent_volume_claim(_old: Option<&Value>, obj: &mut Value) {
    if let Some(spec) = object_field(obj, "spec") {
        spec.entry("volumeMode")
            .or_insert_with(|| json!("Filesystem"));
    }
    if let Some(status) = object_field(obj, "status") {
        status.entry("phase").or_insert_with(|| json!("Pending"));
    }
}

/// The finalizer `StorageObjectInUseProtection` gives every new PersistentVolumeClaim.
pub(crate) const PVC_PROTECTION_FINALIZER: &str = "kubernetes.io/pvc-protection";

/// A new PersistentVolumeClaim gets the `kubernetes.io/pvc-protection` finalizer
/// (`StorageObjectInUseProtection` admission), unless it already has it. On a cluster the
/// pvc-protection controller removes it once no pod uses the claim; no such controller runs here
/// (on either backend), so a deleted claim waits until a client removes it.
pub(crate) fn protect_claim(obj: &mut Value) {
    if let Some(metadata) = object_field(obj, "metadata") {
        add_to_list(metadata, "finalizers", PVC_PROTECTION_FINALIZER);
    }
}

/// Adds `value` to the string list `map[field]` unless it is there (a missing or non-list
/// field becomes a list).
fn add_to_list(map: &mut Map<String, Value>, field: &str, value: &str) {
    let slot = map.entry(field).or_insert_with(|| json!([]));
    if !slot.is_array() {
        *slot = json!([]);
    }
    if let Some(list) = slot.as_array_mut()
        && !list.iter().any(|f| f == value)
    {
        list.push(json!(value));
    }
}

/// Like [`object_field`], on a map.
fn object_field_of<'a>(
    map: &'a mut Map<String, Value>,
    field: &str,
) -> Option<&'a mut Map<String, Value>> {
    let slot = map
        .entry(field.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtins;

    fn t(plural: &str) -> ResourceType {
        builtins()
            .into_iter()
            .find(|t| t.group.is_empty() && t.plural == plural)
            .unwrap_or_else(|| panic!("no built-in {plural}"))
    }

    #[test]
    fn node_without_spec_or_status_gets_the_always_encoded_structs() {
        let mut n = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}});
        apply(&t("nodes"), None, &mut n);
        assert_eq!(n["spec"], json!({}));
        assert_eq!(
            n["status"]["daemonEndpoints"],
            json!({"kubeletEndpoint": {"Port": 0}})
        );
        for f in NODE_INFO_FIELDS {
            assert_eq!(n["status"]["nodeInfo"][f], json!(""), "{f}");
        }
        assert!(n["status"].get("allocatable").is_none());
    }

    #[test]
    fn node_values_given_are_kept_and_allocatable_defaults_to_capacity() {
        let mut n = json!({"metadata": {"name": "n"}, "spec": {"taints": [], "unschedulable": true},
            "status": {"capacity": {"cpu": "4"}, "nodeInfo": {"kubeletVersion": "v1.37.0"},
                       "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}});
        apply(&t("nodes"), None, &mut n);
        assert_eq!(n["spec"], json!({"taints": [], "unschedulable": true}));
        assert_eq!(n["status"]["nodeInfo"]["kubeletVersion"], "v1.37.0");
        assert_eq!(n["status"]["nodeInfo"]["bootID"], "");
        assert_eq!(
            n["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"],
            10250
        );
        assert_eq!(n["status"]["allocatable"], json!({"cpu": "4"}));
        let mut given = json!({"metadata": {"name": "n"},
            "status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "3"}}});
        apply(&t("nodes"), None, &mut given);
        assert_eq!(given["status"]["allocatable"], json!({"cpu": "3"}));
        // null is absent
        let mut nulls = json!({"metadata": {"name": "n"}, "spec": null, "status": null});
        apply(&t("nodes"), None, &mut nulls);
        assert_eq!(nulls["spec"], json!({}));
        assert!(nulls["status"].is_object());
    }

    #[test]
    fn namespace_create_and_update() {
        let ns = t("namespaces");
        let mut created = json!({"metadata": {"name": "a", "labels": {NAMESPACE_NAME_LABEL: "b"}},
            "spec": {"finalizers": ["example.com/x"]}, "status": {"phase": "Terminating"}});
        apply(&ns, None, &mut created);
        assert_eq!(created["metadata"]["labels"][NAMESPACE_NAME_LABEL], "a");
        assert_eq!(
            created["spec"]["finalizers"],
            json!(["example.com/x", NAMESPACE_FINALIZER])
        );
        assert_eq!(created["status"], json!({"phase": "Active"}));
        let mut updated = json!({"metadata": {"name": "a"}, "spec": {"finalizers": []}});
        apply(&ns, Some(&created), &mut updated);
        assert_eq!(
            updated["spec"]["finalizers"],
            json!(["example.com/x", NAMESPACE_FINALIZER])
        );
        assert_eq!(updated["metadata"]["labels"][NAMESPACE_NAME_LABEL], "a");
        assert_eq!(updated["status"]["phase"], "Active");
    }

    #[test]
    fn other_kinds_and_custom_resources_are_untouched() {
        let mut cm = json!({"metadata": {"name": "c"}});
        apply(&t("configmaps"), None, &mut cm);
        assert_eq!(cm, json!({"metadata": {"name": "c"}}));
    }
}
