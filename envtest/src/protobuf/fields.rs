//! The fields a built-in kind has, from the same message tables: which fields of a JSON object
//! its Go type does not know. kube-apiserver decodes a built-in's JSON into its Go struct, so
//! an unknown field is never stored; with `fieldValidation=Strict` it is refused, with `Warn`
//! (the default) it is named in a warning. [`prune_unknown`] removes them and names them as the
//! strict decoder does (`spec.containers[0].bogus`).

use serde_json::Value;

use super::{Message, Rule, Shape, Spec, Ty, message_of};

/// The fields of `msg` at its own level: its own, and those of its inlined (embedded) structs.
fn level_fields(msg: &'static Message, out: &mut Vec<&'static Spec>) {
    for spec in msg.fields {
        match (spec.rule, spec.ty) {
            (Rule::Inline, Ty::Msg(inner)) => level_fields(inner, out),
            _ => out.push(spec),
        }
    }
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

/// Removes from `value` (a JSON value of `msg`) the fields `msg` does not have, recording
/// their paths.
fn prune(msg: &'static Message, value: &mut Value, path: &str, found: &mut Vec<String>) {
    if msg.shape != Shape::Object {
        // Quantities, times, raw JSON and the like take any JSON the decoder accepts.
        return;
    }
    let Some(object) = value.as_object_mut() else {
        return;
    };
    let mut known = Vec::new();
    level_fields(msg, &mut known);
    let keys: Vec<String> = object.keys().cloned().collect();
    for key in keys {
        let Some(spec) = known.iter().find(|s| s.name == key) else {
            object.remove(&key);
            found.push(join(path, &key));
            continue;
        };
        let Ty::Msg(inner) = spec.ty else {
            continue;
        };
        let Some(child) = object.get_mut(&key) else {
            continue;
        };
        let at = join(path, &key);
        match spec.rule {
            Rule::Repeated => {
                for (i, item) in child.as_array_mut().into_iter().flatten().enumerate() {
                    prune(inner, item, &format!("{at}[{i}]"), found);
                }
            }
            Rule::Map => {
                for (k, item) in child.as_object_mut().into_iter().flatten() {
                    prune(inner, item, &format!("{at}[{k}]"), found);
                }
            }
            _ => prune(inner, child, &at, found),
        }
    }
}

/// Removes the fields the Go type of `value` (a built-in object: its `apiVersion` and `kind`
/// pick the type) does not have, and returns their paths in the order the strict decoder
/// names them (sorted); `None` when the kind has no table (custom resources, CRDs and the
/// other kinds outside `k8s.io/api`).
pub(crate) fn prune_unknown(value: &mut Value) -> Option<Vec<String>> {
    let api_version = value.get("apiVersion")?.as_str()?.to_string();
    let kind = value.get("kind")?.as_str()?.to_string();
    let msg = message_of(&api_version, &kind)?;
    let mut found = Vec::new();
    // `apiVersion` and `kind` are the inlined `TypeMeta`, not fields of the message.
    let type_meta: Vec<(String, Value)> = ["apiVersion", "kind"]
        .iter()
        .filter_map(|k| {
            value
                .as_object_mut()?
                .remove(*k)
                .map(|v| (k.to_string(), v))
        })
        .collect();
    prune(msg, value, "", &mut found);
    if let Some(object) = value.as_object_mut() {
        object.extend(type_meta);
    }
    found.sort();
    Some(found)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn unknown_fields_are_named_and_removed_at_any_depth() {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "bogus": 1,
            "metadata": {"name": "p", "labels": {"any": "key"}, "extra": true},
            "spec": {"containers": [{"name": "c", "image": "i", "colour": "red",
                "resources": {"limits": {"cpu": "1"}}}],
                "invalidField": {}}});
        let found = prune_unknown(&mut pod).unwrap();
        assert_eq!(
            found,
            [
                "bogus",
                "metadata.extra",
                "spec.containers[0].colour",
                "spec.invalidField"
            ]
        );
        assert_eq!(
            pod,
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "labels": {"any": "key"}},
                "spec": {"containers": [{"name": "c", "image": "i",
                    "resources": {"limits": {"cpu": "1"}}}]}})
        );
    }

    #[test]
    fn known_objects_are_untouched_and_custom_kinds_have_no_table() {
        let mut deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "managedFields": [{"manager": "m",
                "fieldsV1": {"f:spec": {"f:replicas": {}}}}],
                "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"replicas": 1, "strategy": {"rollingUpdate": {"maxSurge": "25%"}},
                "template": {"spec": {"containers": []}}},
            "status": {}});
        let before = deployment.clone();
        assert_eq!(
            prune_unknown(&mut deployment).unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(deployment, before);
        let mut widget = json!({"apiVersion": "example.com/v1", "kind": "Widget", "x": 1});
        assert!(prune_unknown(&mut widget).is_none());
        assert_eq!(widget["x"], 1);
    }
}
