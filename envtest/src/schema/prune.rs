//! Structural pruning of unknown fields and defaulting of missing ones.

use serde_json::Value;

use super::{child, flag};

/// Removes every field `schema` does not declare (structural pruning), in place, and returns
/// the pruned paths. Kept: declared `properties`, anything under
/// `x-kubernetes-preserve-unknown-fields: true`, map entries under `additionalProperties`
/// (pruned recursively by its schema), `apiVersion`/`kind`/`metadata` at the root and under
/// `x-kubernetes-embedded-resource`.
pub fn prune(schema: &Value, object: &mut Value) -> Vec<String> {
    let mut pruned = Vec::new();
    prune_rec(schema, object, "", true, &mut pruned);
    pruned
}

pub(super) fn prune_rec(
    schema: &Value,
    value: &mut Value,
    path: &str,
    root: bool,
    pruned: &mut Vec<String>,
) {
    let Value::Object(s) = schema else {
        return;
    };
    let preserve = flag(s, "x-kubernetes-preserve-unknown-fields");
    let embedded = root || flag(s, "x-kubernetes-embedded-resource");
    match value {
        Value::Object(map) => {
            let props = s.get("properties").and_then(Value::as_object);
            let additional = s.get("additionalProperties").filter(|a| a.is_object());
            let mut remove = Vec::new();
            for (k, v) in map.iter_mut() {
                if embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if let Some(sub) = props.and_then(|p| p.get(k)) {
                    prune_rec(sub, v, &child(path, k), false, pruned);
                } else if let Some(sub) = additional {
                    prune_rec(sub, v, &format!("{path}[{k}]"), false, pruned);
                } else if s.get("additionalProperties") == Some(&Value::Bool(true)) || preserve {
                    continue;
                } else {
                    remove.push(k.clone());
                }
            }
            for k in remove {
                map.remove(&k);
                pruned.push(child(path, &k));
            }
        }
        Value::Array(items) => {
            if let Some(sub) = s.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    prune_rec(sub, item, &format!("{path}[{i}]"), false, pruned);
                }
            }
        }
        _ => {}
    }
    // allOf/anyOf/oneOf branches may not declare properties in a structural schema.
}

/// Fills `default` values of missing properties (and replaces `null` in non-nullable
/// properties that have a default), recursively, in place.
pub fn apply_defaults(schema: &Value, object: &mut Value) {
    let Value::Object(s) = schema else {
        return;
    };
    match object {
        Value::Object(map) => {
            if let Some(props) = s.get("properties").and_then(Value::as_object) {
                for (k, sub) in props {
                    let Some(default) = sub.get("default") else {
                        continue;
                    };
                    let nullable = sub.as_object().is_some_and(|sub| flag(sub, "nullable"));
                    match map.get(k) {
                        None => {
                            map.insert(k.clone(), default.clone());
                        }
                        Some(Value::Null) if !nullable => {
                            map.insert(k.clone(), default.clone());
                        }
                        _ => {}
                    }
                }
                for (k, v) in map.iter_mut() {
                    if let Some(sub) = props.get(k) {
                        apply_defaults(sub, v);
                    }
                }
            } else if let Some(sub) = s.get("additionalProperties").filter(|a| a.is_object()) {
                for v in map.values_mut() {
                    apply_defaults(sub, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = s.get("items") {
                for item in items {
                    apply_defaults(sub, item);
                }
            }
        }
        _ => {}
    }
}
