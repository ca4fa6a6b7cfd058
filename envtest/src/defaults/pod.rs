//! Pod and pod template defaulting (`SetDefaults_Pod`, `SetDefaults_PodSpec`,
//! `SetDefaults_Container` and friends in `pkg/apis/core/v1/defaults.go`), the admission
//! plugins that change a new Pod (`DefaultTolerationSeconds`, `Priority`), and the status a new
//! Pod gets (`PrepareForCreate`: phase `Pending` and its QoS class).

use serde_json::{Map, Value, json};

use super::{items_mut, object_field, or_insert};

/// The defaults of a pod spec (a Pod's or a template's).
pub(crate) fn pod_spec(spec: &mut Map<String, Value>) {
    or_insert(spec, "restartPolicy", json!("Always"));
    or_insert(spec, "terminationGracePeriodSeconds", json!(30));
    or_insert(spec, "dnsPolicy", json!("ClusterFirst"));
    or_insert(spec, "securityContext", json!({}));
    or_insert(spec, "schedulerName", json!("default-scheduler"));
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for c in items_mut(spec, list) {
            container(c);
        }
    }
    for v in items_mut(spec, "volumes") {
        for source in ["secret", "configMap", "downwardAPI", "projected"] {
            if let Some(s) = v.get_mut(source).and_then(Value::as_object_mut) {
                or_insert(s, "defaultMode", json!(420));
            }
        }
        if let Some(downward) = v.get_mut("downwardAPI").and_then(Value::as_object_mut) {
            for item in items_mut(downward, "items") {
                if let Some(field_ref) = item.get_mut("fieldRef").and_then(Value::as_object_mut) {
                    or_insert(field_ref, "apiVersion", json!("v1"));
                }
            }
        }
    }
}

/// Whether an image reference names no tag, or `latest` (then images are always pulled).
fn always_pulled(image: &str) -> bool {
    if image.contains('@') {
        return false;
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        None => true,
        Some((_, tag)) => tag == "latest",
    }
}

/// The defaults of one container.
fn container(c: &mut Map<String, Value>) {
    or_insert(c, "resources", json!({}));
    or_insert(c, "terminationMessagePath", json!("/dev/termination-log"));
    or_insert(c, "terminationMessagePolicy", json!("File"));
    if !c.contains_key("imagePullPolicy") {
        let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
        let policy = if always_pulled(image) {
            "Always"
        } else {
            "IfNotPresent"
        };
        c.insert("imagePullPolicy".into(), json!(policy));
    }
    for p in items_mut(c, "ports") {
        or_insert(p, "protocol", json!("TCP"));
    }
    // `SetDefaults_ObjectFieldSelector`: a field reference names its API version.
    for e in items_mut(c, "env") {
        if let Some(field_ref) = e
            .get_mut("valueFrom")
            .and_then(|v| v.get_mut("fieldRef"))
            .and_then(Value::as_object_mut)
        {
            or_insert(field_ref, "apiVersion", json!("v1"));
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe).and_then(Value::as_object_mut) {
            or_insert(p, "timeoutSeconds", json!(1));
            or_insert(p, "periodSeconds", json!(10));
            or_insert(p, "successThreshold", json!(1));
            or_insert(p, "failureThreshold", json!(3));
        }
    }
}

/// A Pod's defaults: its spec's, `enableServiceLinks`, and requests copied from limits where a
/// container sets limits only (`SetDefaults_Pod`).
pub(crate) fn pod(_old: Option<&Value>, obj: &mut Value) {
    let Some(spec) = object_field(obj, "spec") else {
        return;
    };
    pod_spec(spec);
    or_insert(spec, "enableServiceLinks", json!(true));
    for list in ["initContainers", "containers"] {
        for c in spec
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            let Some(limits) = c["resources"]["limits"].as_object().cloned() else {
                continue;
            };
            if let Some(resources) = c["resources"].as_object_mut() {
                let requests = resources.entry("requests").or_insert_with(|| json!({}));
                if let Some(requests) = requests.as_object_mut() {
                    for (k, v) in limits {
                        requests.entry(k).or_insert(v);
                    }
                }
            }
        }
    }
}

/// The tolerations `DefaultTolerationSeconds` adds to a new Pod without them.
const DEFAULT_TOLERATIONS: [&str; 2] = [
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
];

/// A new Pod through the API: the admission plugins' defaults (`DefaultTolerationSeconds`:
/// `NoExecute` tolerations of not-ready and unreachable nodes for 300 s; `Priority`: priority 0
/// and `PreemptLowerPriority` without a priority class).
pub(crate) fn admit_pod(obj: &mut Value) {
    if let Some(spec) = object_field(obj, "spec") {
        let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
        if !tolerations.is_array() {
            *tolerations = json!([]);
        }
        if let Some(list) = tolerations.as_array_mut() {
            for key in DEFAULT_TOLERATIONS {
                let present = list.iter().any(|t| {
                    (t["key"] == key || t["operator"] == "Exists" && t.get("key").is_none())
                        && (t["effect"] == "NoExecute" || t.get("effect").is_none())
                });
                if !present {
                    list.push(
                        json!({"key": key, "operator": "Exists", "effect": "NoExecute",
                        "tolerationSeconds": 300}),
                    );
                }
            }
        }
        if spec.get("priorityClassName").is_none_or(Value::is_null) {
            or_insert(spec, "priority", json!(0));
            or_insert(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
        }
    }
}

/// An update of a Pod through the API: `DefaultTolerationSeconds` again, and `Priority` keeps
/// the stored priority and preemption policy where the update has none.
pub(crate) fn admit_pod_update(old: &Value, obj: &mut Value) {
    let had_priority = obj["spec"].get("priority").is_some_and(|p| !p.is_null());
    admit_pod(obj);
    if let Some(spec) = object_field(obj, "spec")
        && !had_priority
    {
        for field in ["priority", "preemptionPolicy"] {
            match old["spec"].get(field) {
                Some(v) => {
                    spec.insert(field.into(), v.clone());
                }
                None => {
                    spec.remove(field);
                }
            }
        }
    }
}

/// A new Pod's first status: `Pending` and its QoS class, whatever was sent
/// (`PrepareForCreate`).
pub(crate) fn pod_status(obj: &mut Value) {
    let qos = qos_class(&obj["spec"]);
    if let Some(map) = obj.as_object_mut() {
        map.insert(
            "status".into(),
            json!({"phase": "Pending", "qosClass": qos}),
        );
    }
}

/// The QoS class of a pod spec: `BestEffort` without any requests or limits, `Guaranteed` when
/// every container limits cpu and memory and requests what it limits, else `Burstable`.
pub(crate) fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["initContainers", "containers"]
        .iter()
        .flat_map(|l| spec[*l].as_array().into_iter().flatten())
        .collect();
    let quantities = |c: &Value, what: &str| {
        c["resources"][what]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| *k == "cpu" || *k == "memory")
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect::<Map<String, Value>>()
            })
            .unwrap_or_default()
    };
    if containers
        .iter()
        .all(|c| quantities(c, "requests").is_empty() && quantities(c, "limits").is_empty())
    {
        return "BestEffort";
    }
    let guaranteed = containers.iter().all(|c| {
        let limits = quantities(c, "limits");
        let mut requests = quantities(c, "requests");
        for (k, v) in &limits {
            requests.entry(k.clone()).or_insert(v.clone());
        }
        limits.len() == 2 && requests == limits
    });
    if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qos_classes() {
        let c = |resources: Value| json!({"containers": [{"name": "c", "resources": resources}]});
        assert_eq!(qos_class(&c(json!({}))), "BestEffort");
        assert_eq!(
            qos_class(&c(json!({"limits": {"cpu": "1", "memory": "1Gi"}}))),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(&c(json!({"requests": {"cpu": "1"}}))),
            "Burstable"
        );
        assert_eq!(
            qos_class(&c(json!({"limits": {"cpu": "1", "memory": "1Gi"},
                "requests": {"cpu": "500m"}}))),
            "Burstable"
        );
    }

    #[test]
    fn image_pull_policy() {
        assert!(always_pulled("busybox"));
        assert!(always_pulled("busybox:latest"));
        assert!(always_pulled("localhost:5000/busybox"));
        assert!(!always_pulled("busybox:1"));
        assert!(!always_pulled("busybox@sha256:abc"));
    }
}
