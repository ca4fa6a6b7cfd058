//! Field checks the real API server makes on every object or on some built-in kinds, with its
//! messages: label keys and values and annotation keys (`ValidateObjectMeta`), ConfigMap and
//! Secret keys (`ValidateConfigMap`, `ValidateSecret`), a workload's selector against its pod
//! template's labels, a Lease's duration, the webhooks of an admission webhook configuration.
//! Causes as `(field, reason, message)`.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::resources::ResourceType;
use crate::selector::{LabelSelector, labels_of};

type Cause = (String, String, String);

fn invalid(field: impl Into<String>, message: String) -> Cause {
    (field.into(), "FieldValueInvalid".into(), message)
}

/// The causes of `obj` (an object of `t` about to be stored).
pub(crate) fn causes(t: &ResourceType, obj: &Value) -> Vec<Cause> {
    let mut causes = metadata_causes(obj);
    if t.custom.is_some() {
        return causes;
    }
    match (t.group.as_str(), t.kind.as_str()) {
        ("", "ConfigMap") => causes.extend(config_key_causes(obj, &["data", "binaryData"])),
        ("", "Secret") => causes.extend(config_key_causes(obj, &["data"])),
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") => {
            causes.extend(selector_causes(obj));
        }
        (
            "admissionregistration.k8s.io",
            "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration",
        ) => causes.extend(webhook_causes(obj)),
        ("coordination.k8s.io", "Lease") => {
            if let Some(d) = obj["spec"]["leaseDurationSeconds"].as_i64()
                && d <= 0
            {
                causes.push(invalid(
                    "spec.leaseDurationSeconds",
                    format!("Invalid value: {d}: must be greater than 0"),
                ));
            }
        }
        _ => {}
    }
    causes
}

/// Label keys (qualified names) and values, annotation keys (qualified names, compared in
/// lower case as upstream does).
fn metadata_causes(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(labels) = obj["metadata"]["labels"].as_object() {
        for (k, v) in labels {
            for m in kcr_names::validate_qualified_name(k) {
                causes.push(invalid(
                    "metadata.labels",
                    format!("Invalid value: \"{k}\": {m}"),
                ));
            }
            let value = v.as_str().unwrap_or_default();
            for m in kcr_names::validate_label_value(value) {
                causes.push(invalid(
                    "metadata.labels",
                    format!("Invalid value: \"{value}\": {m}"),
                ));
            }
        }
    }
    if let Some(annotations) = obj["metadata"]["annotations"].as_object() {
        for k in annotations.keys() {
            for m in kcr_names::validate_qualified_name(&k.to_lowercase()) {
                causes.push(invalid(
                    "metadata.annotations",
                    format!("Invalid value: \"{k}\": {m}"),
                ));
            }
        }
    }
    causes
}

const CONFIG_KEY_MESSAGE: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// Upstream's `IsConfigMapKey`.
fn config_key_messages(key: &str) -> Vec<String> {
    let mut messages = Vec::new();
    if key.len() > 253 {
        messages.push(kcr_names::max_len_message(253));
    }
    let valid_chars = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !valid_chars {
        messages.push(CONFIG_KEY_MESSAGE.to_string());
    }
    match key {
        "." => messages.push("must not be '.'".into()),
        ".." => messages.push("must not be '..'".into()),
        k if k.starts_with("..") => messages.push("must not start with '..'".into()),
        _ => {}
    }
    messages
}

/// Keys of the maps `fields` (`data`, `binaryData`): each a config key, none in two maps.
fn config_key_causes(obj: &Value, fields: &[&str]) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for field in fields {
        let Some(map) = obj[*field].as_object() else {
            continue;
        };
        for k in map.keys() {
            for m in config_key_messages(k) {
                causes.push(invalid(
                    format!("{field}[{k}]"),
                    format!("Invalid value: \"{k}\": {m}"),
                ));
            }
            // Reported on the first map holding the key, naming the later one.
            if let Some(first) = seen.insert(k, field) {
                causes.push(invalid(
                    format!("{first}[{k}]"),
                    format!("Invalid value: \"{k}\": duplicate of key present in {field}"),
                ));
            }
        }
    }
    causes
}

/// Each webhook of a configuration: a name that is a DNS subdomain of at least three
/// segments, `sideEffects` `None` or `NoneOnDryRun`, exactly one of `url` and `service`.
fn webhook_causes(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(hooks) = obj["webhooks"].as_array() else {
        return causes;
    };
    for (i, hook) in hooks.iter().enumerate() {
        let at = |f: &str| format!("webhooks[{i}].{f}");
        let name = hook["name"].as_str().unwrap_or_default();
        if name.is_empty() {
            causes.push((
                at("name"),
                "FieldValueRequired".into(),
                "Required value".into(),
            ));
        } else {
            for m in kcr_names::validate_dns1123_subdomain(name) {
                causes.push(invalid(
                    at("name"),
                    format!("Invalid value: \"{name}\": {m}"),
                ));
            }
            if name.split('.').count() < 3 {
                causes.push(invalid(
                    at("name"),
                    format!(
                        "Invalid value: \"{name}\": should be a domain with at least three segments separated by dots"
                    ),
                ));
            }
        }
        match hook["sideEffects"].as_str() {
            Some("None" | "NoneOnDryRun") => {}
            Some(other) => causes.push((
                at("sideEffects"),
                "FieldValueNotSupported".into(),
                format!(
                    "Unsupported value: \"{other}\": supported values: \"None\", \"NoneOnDryRun\""
                ),
            )),
            None => causes.push((
                at("sideEffects"),
                "FieldValueRequired".into(),
                "Required value: must specify one of \"None\", \"NoneOnDryRun\"".into(),
            )),
        }
        let config = &hook["clientConfig"];
        let url = config.get("url").is_some_and(|u| !u.is_null());
        let service = config.get("service").is_some_and(|s| !s.is_null());
        if url == service {
            causes.push((
                at("clientConfig"),
                "FieldValueRequired".into(),
                "Required value: exactly one of url or service is required".into(),
            ));
        }
    }
    causes
}

/// A workload's selector must select its pod template's labels.
fn selector_causes(obj: &Value) -> Vec<Cause> {
    let selector = &obj["spec"]["selector"];
    if !selector.is_object() {
        return Vec::new();
    }
    let Ok(parsed) = LabelSelector::from_metav1(selector) else {
        return Vec::new();
    };
    let template = &obj["spec"]["template"];
    let labels = labels_of(template);
    if parsed.is_empty() || parsed.matches(&labels) {
        return Vec::new();
    }
    // Go's JSON of a map: keys sorted.
    let shown = serde_json::to_string(&labels).unwrap_or_default();
    vec![invalid(
        "spec.template.metadata.labels",
        format!("Invalid value: {shown}: `selector` does not match template `labels`"),
    )]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtins;
    use serde_json::json;

    fn t(group: &str, kind: &str) -> ResourceType {
        builtins()
            .into_iter()
            .find(|t| t.group == group && t.kind == kind)
            .unwrap()
    }

    #[test]
    fn labels_annotations_and_config_keys() {
        let cm = t("", "ConfigMap");
        let ok = json!({"metadata": {"labels": {"example.com/a": "b", "c": ""},
            "annotations": {"Example.com/Any": "x"}}, "data": {"a.b-C_d": "v"}});
        assert!(causes(&cm, &ok).is_empty(), "{:?}", causes(&cm, &ok));
        let bad = json!({"metadata": {"labels": {"bad key!": "v", "k": "bad value!"},
            "annotations": {"bad key!": ""}}, "data": {"bad key": "v", "a": "1"},
            "binaryData": {"a": "dg=="}});
        let fields: Vec<String> = causes(&cm, &bad).into_iter().map(|c| c.0).collect();
        assert_eq!(
            fields,
            [
                "metadata.labels",
                "metadata.labels",
                "metadata.annotations",
                "data[bad key]",
                "data[a]"
            ]
        );
        assert_eq!(
            causes(&cm, &bad)[4].2,
            "Invalid value: \"a\": duplicate of key present in binaryData"
        );
    }

    #[test]
    fn selector_and_lease() {
        let d = t("apps", "Deployment");
        let obj = |template: Value| {
            json!({"spec": {"selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": template}}}})
        };
        assert!(causes(&d, &obj(json!({"a": "b", "x": "y"}))).is_empty());
        let c = causes(&d, &obj(json!({"a": "c"})));
        assert_eq!(c.len(), 1);
        assert_eq!(
            c[0].2,
            "Invalid value: {\"a\":\"c\"}: `selector` does not match template `labels`"
        );
        let hooks = t(
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration",
        );
        let bad =
            json!({"webhooks": [{"name": "nodots", "clientConfig": {}, "sideEffects": "Maybe"}]});
        let fields: Vec<String> = causes(&hooks, &bad).into_iter().map(|c| c.0).collect();
        assert_eq!(
            fields,
            [
                "webhooks[0].name",
                "webhooks[0].sideEffects",
                "webhooks[0].clientConfig"
            ]
        );
        let good = json!({"webhooks": [{"name": "a.b.c", "clientConfig": {"url": "https://x"},
            "sideEffects": "None"}]});
        assert!(causes(&hooks, &good).is_empty());
        let lease = t("coordination.k8s.io", "Lease");
        assert_eq!(
            causes(&lease, &json!({"spec": {"leaseDurationSeconds": -1}}))[0].0,
            "spec.leaseDurationSeconds"
        );
        assert!(causes(&lease, &json!({"spec": {"leaseDurationSeconds": 15}})).is_empty());
    }
}
