//! Defaults of the other built-ins clients see filled in: workloads (`SetDefaults_Deployment`,
//! `SetDefaults_ReplicaSet`, `SetDefaults_ReplicationController` and their pod templates), the
//! admission webhook configurations, core Events (always-encoded fields), CRDs
//! (`spec.conversion`), and ConfigMaps (empty `data` maps are not kept).

use serde_json::{Value, json};

use super::pod::pod_spec;
use super::{items_mut, object_field, or_insert};

/// The template's pod spec defaults, for a workload whose template is at `spec.template`.
fn template(spec: &mut serde_json::Map<String, Value>) {
    if let Some(pod) = spec
        .get_mut("template")
        .and_then(Value::as_object_mut)
        .and_then(|t| t.get_mut("spec"))
        .and_then(Value::as_object_mut)
    {
        pod_spec(pod);
    }
}

/// A Deployment's defaults.
pub(crate) fn deployment(_old: Option<&Value>, obj: &mut Value) {
    let Some(spec) = object_field(obj, "spec") else {
        return;
    };
    or_insert(spec, "replicas", json!(1));
    template(spec);
    let strategy = spec.entry("strategy").or_insert_with(|| json!({}));
    if let Some(strategy) = strategy.as_object_mut() {
        or_insert(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
            let rolling = strategy.entry("rollingUpdate").or_insert_with(|| json!({}));
            if let Some(rolling) = rolling.as_object_mut() {
                or_insert(rolling, "maxUnavailable", json!("25%"));
                or_insert(rolling, "maxSurge", json!("25%"));
            }
        }
    }
    or_insert(spec, "revisionHistoryLimit", json!(10));
    or_insert(spec, "progressDeadlineSeconds", json!(600));
}

/// A ReplicaSet's or ReplicationController's defaults: one replica, the template's.
pub(crate) fn replicated(_old: Option<&Value>, obj: &mut Value) {
    if let Some(spec) = object_field(obj, "spec") {
        or_insert(spec, "replicas", json!(1));
        template(spec);
    }
}

/// A pod template's defaults alone (StatefulSets, DaemonSets, Jobs).
pub(crate) fn templated(_old: Option<&Value>, obj: &mut Value) {
    if let Some(spec) = object_field(obj, "spec") {
        template(spec);
    }
}

/// The first status of a workload: `{}` whatever was sent (`PrepareForCreate`).
pub(crate) fn empty_status(obj: &mut Value) {
    if let Some(map) = obj.as_object_mut() {
        map.insert("status".into(), json!({}));
    }
}

/// The defaults of each webhook of a configuration (`SetDefaults_MutatingWebhook`,
/// `SetDefaults_ValidatingWebhook`, `SetDefaults_Rule`, `SetDefaults_ServiceReference`).
fn webhooks(obj: &mut Value, mutating: bool) {
    for w in obj["webhooks"]
        .as_array_mut()
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        or_insert(w, "failurePolicy", json!("Fail"));
        or_insert(w, "matchPolicy", json!("Equivalent"));
        or_insert(w, "namespaceSelector", json!({}));
        or_insert(w, "objectSelector", json!({}));
        or_insert(w, "timeoutSeconds", json!(10));
        if mutating {
            or_insert(w, "reinvocationPolicy", json!("Never"));
        }
        for r in items_mut(w, "rules") {
            or_insert(r, "scope", json!("*"));
        }
        if let Some(service) = w
            .get_mut("clientConfig")
            .and_then(|c| c.get_mut("service"))
            .and_then(Value::as_object_mut)
        {
            or_insert(service, "port", json!(443));
        }
    }
}

/// A MutatingWebhookConfiguration's defaults.
pub(crate) fn mutating_webhooks(_old: Option<&Value>, obj: &mut Value) {
    webhooks(obj, true);
}

/// A ValidatingWebhookConfiguration's defaults.
pub(crate) fn validating_webhooks(_old: Option<&Value>, obj: &mut Value) {
    webhooks(obj, false);
}

/// A core Event's always-encoded fields (no `omitempty` upstream): the timestamps as `null`,
/// the reporting fields as `""`, `source` and `involvedObject` as `{}`.
pub(crate) fn event(obj: &mut Value) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    for (field, value) in [
        ("involvedObject", json!({})),
        ("source", json!({})),
        ("firstTimestamp", Value::Null),
        ("lastTimestamp", Value::Null),
        ("eventTime", Value::Null),
        ("reportingComponent", json!("")),
        ("reportingInstance", json!("")),
    ] {
        or_insert(map, field, value);
    }
}

/// A CRD's `spec.conversion` (`strategy: None` when absent).
pub(crate) fn custom_resource_definition(_old: Option<&Value>, obj: &mut Value) {
    if let Some(spec) = object_field(obj, "spec") {
        or_insert(spec, "conversion", json!({"strategy": "None"}));
    }
}

/// A ConfigMap's empty `data` and `binaryData` are not stored (`omitempty` maps).
pub(crate) fn config_map(_old: Option<&Value>, obj: &mut Value) {
    if let Some(map) = obj.as_object_mut() {
        for field in ["data", "binaryData"] {
            if map
                .get(field)
                .is_some_and(|v| v.is_null() || v.as_object().is_some_and(|m| m.is_empty()))
            {
                map.remove(field);
            }
        }
    }
}

/// A ReplicationController's defaults: a selector and labels from its template's labels when
/// it has none (`SetDefaults_ReplicationController`), one replica, the template's.
pub(crate) fn replication_controller(old: Option<&Value>, obj: &mut Value) {
    let labels = obj["spec"]["template"]["metadata"]["labels"].clone();
    if labels.as_object().is_some_and(|l| !l.is_empty()) {
        if let Some(spec) = object_field(obj, "spec") {
            or_insert(spec, "selector", labels.clone());
        }
        if let Some(meta) = object_field(obj, "metadata")
            && meta
                .get("labels")
                .is_none_or(|l| l.as_object().is_none_or(|m| m.is_empty()))
        {
            meta.insert("labels".into(), labels);
        }
    }
    replicated(old, obj);
}

/// The first status of a ReplicationController: `{replicas: 0}` (an always-encoded field).
pub(crate) fn no_replicas(obj: &mut Value) {
    if let Some(map) = obj.as_object_mut() {
        map.insert("status".into(), json!({"replicas": 0}));
    }
}

/// The `protocol` of each port in `ports` (`TCP` when absent).
fn port_protocols(ports: Option<&mut Value>) {
    for p in ports
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        or_insert(p, "protocol", json!("TCP"));
    }
}

/// Endpoints' port protocols.
pub(crate) fn endpoints(_old: Option<&Value>, obj: &mut Value) {
    for subset in obj["subsets"].as_array_mut().into_iter().flatten() {
        port_protocols(subset.get_mut("ports"));
    }
}

/// An EndpointSlice's port names (`""`) and protocols, and each endpoint's `conditions`.
pub(crate) fn endpoint_slice(_old: Option<&Value>, obj: &mut Value) {
    port_protocols(obj.get_mut("ports"));
    for p in obj["ports"]
        .as_array_mut()
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        or_insert(p, "name", json!(""));
    }
    for e in obj["endpoints"]
        .as_array_mut()
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        or_insert(e, "conditions", json!({}));
    }
}

/// A Job's defaults (`SetDefaults_Job`): one completion and one pod at a time when neither
/// is set, a backoff limit of 6 (the largest `int32` with a per-index limit), `NonIndexed`,
/// not suspended, no manual selector, pods replaced once terminating or failed (only failed
/// with a pod failure policy), the template's defaults; and metadata labels taken from the
/// template's when the Job has none.
pub(crate) fn job(_old: Option<&Value>, obj: &mut Value) {
    let Some(spec) = object_field(obj, "spec") else {
        return;
    };
    let unset =
        |spec: &serde_json::Map<String, Value>, f: &str| spec.get(f).is_none_or(Value::is_null);
    if unset(spec, "completions") && unset(spec, "parallelism") {
        spec.insert("completions".into(), json!(1));
    }
    or_insert(spec, "parallelism", json!(1));
    let backoff = if unset(spec, "backoffLimitPerIndex") {
        json!(6)
    } else {
        json!(i32::MAX)
    };
    or_insert(spec, "backoffLimit", backoff);
    or_insert(spec, "completionMode", json!("NonIndexed"));
    or_insert(spec, "suspend", json!(false));
    or_insert(spec, "manualSelector", json!(false));
    let replacement = if unset(spec, "podFailurePolicy") {
        "TerminatingOrFailed"
    } else {
        "Failed"
    };
    or_insert(spec, "podReplacementPolicy", json!(replacement));
    template(spec);
    labels_from_template(obj);
}

/// `SetDefaults_Job`'s metadata labels: the template's, when the Job has none.
fn labels_from_template(obj: &mut Value) {
    let template_labels = obj
        .pointer("/spec/template/metadata/labels")
        .filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
        .cloned();
    let has_labels = obj
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .is_some_and(|m| !m.is_empty());
    if let Some(labels) = template_labels
        && !has_labels
        && let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.insert("labels".into(), labels);
    }
}

/// A new Job's generated selector (the Job strategy's `PrepareForCreate`, unless
/// `spec.manualSelector`): the template gets the `job-name` and `controller-uid` labels (legacy
/// and `batch.kubernetes.io/` forms) unless set, the selector matches
/// `batch.kubernetes.io/controller-uid`, and the Job takes the template's labels when it has
/// none (what every read of it shows upstream, through the defaults of its decoding); then the
/// first status, `{}`.
pub(crate) fn job_selector(obj: &mut Value) {
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let uid = obj["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if obj.pointer("/spec/manualSelector") != Some(&json!(true))
        && let Some(spec) = object_field(obj, "spec")
    {
        let template = spec.entry("template").or_insert_with(|| json!({}));
        if !template["metadata"].is_object() {
            template["metadata"] = json!({});
        }
        if !template["metadata"]["labels"].is_object() {
            template["metadata"]["labels"] = json!({});
        }
        if let Some(labels) = template["metadata"]["labels"].as_object_mut() {
            for key in ["job-name", "batch.kubernetes.io/job-name"] {
                or_insert(labels, key, json!(name));
            }
            for key in ["controller-uid", "batch.kubernetes.io/controller-uid"] {
                or_insert(labels, key, json!(uid));
            }
        }
        let selector = spec.entry("selector").or_insert_with(|| json!({}));
        if !selector["matchLabels"].is_object() {
            selector["matchLabels"] = json!({});
        }
        if let Some(match_labels) = selector["matchLabels"].as_object_mut() {
            or_insert(
                match_labels,
                "batch.kubernetes.io/controller-uid",
                json!(uid),
            );
        }
    }
    labels_from_template(obj);
    empty_status(obj);
}
