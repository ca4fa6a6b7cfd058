//! The structural-schema rules a CRD's `openAPIV3Schema` must follow.

use serde_json::Value;

use super::prune::prune_rec;
use super::validate::Validator;
use super::{CauseType, FieldError, flag};

/// Checks that a CRD's `openAPIV3Schema` is structural, as the API server does when a
/// CustomResourceDefinition is created or updated (422 on violations). `prefix` is the path of
/// the schema in the CRD, e.g. `spec.versions[0].schema.openAPIV3Schema`.
///
/// Checked: the root is `type: object`; every node that declares `properties`, `items` or
/// `additionalProperties` (and every property, item and additional-properties schema) has a
/// `type` unless it is `x-kubernetes-int-or-string` or `x-kubernetes-preserve-unknown-fields`;
/// `x-kubernetes-int-or-string` nodes have no `type`; `type: array` has `items`; `properties`
/// and `additionalProperties` are not both set; `x-kubernetes-list-type: map` has object items
/// and non-empty `x-kubernetes-list-map-keys` naming declared properties; `allOf`/`anyOf`/
/// `oneOf`/`not` branches set no `type`, `default`, `nullable` or `additionalProperties`; every
/// `default` validates against its own schema.
pub fn check_structural(schema: &Value, prefix: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let root_type = schema.get("type").and_then(Value::as_str);
    if root_type != Some("object") {
        let shown = root_type
            .map(|t| format!("{t:?}"))
            .unwrap_or_else(|| "\"\"".into());
        errors.push(FieldError {
            path: format!("{prefix}.type"),
            reason: CauseType::FieldValueInvalid,
            message: format!("Invalid value: {shown}: must be object at the root"),
        });
    }
    structural_node(schema, prefix, false, &mut errors);
    errors
}

fn structural_node(schema: &Value, path: &str, needs_type: bool, errors: &mut Vec<FieldError>) {
    let Value::Object(s) = schema else {
        errors.push(FieldError {
            path: path.to_string(),
            reason: CauseType::FieldValueInvalid,
            message: "Invalid value: must be a schema object".into(),
        });
        return;
    };
    let ty = s
        .get("type")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty());
    let int_or_string = flag(s, "x-kubernetes-int-or-string");
    let preserve = flag(s, "x-kubernetes-preserve-unknown-fields");
    let mut push = |field: &str, reason: CauseType, message: &str| {
        errors.push(FieldError {
            path: if field.is_empty() {
                path.to_string()
            } else {
                format!("{path}.{field}")
            },
            reason,
            message: message.to_string(),
        });
    };
    let specifies_structure = s.contains_key("properties")
        || s.contains_key("items")
        || s.contains_key("additionalProperties");
    if ty.is_none() && !int_or_string && !preserve && (needs_type || specifies_structure) {
        push(
            "type",
            CauseType::FieldValueRequired,
            "Required value: must not be empty for specified object fields",
        );
    }
    if int_or_string && ty.is_some() {
        push(
            "type",
            CauseType::FieldValueForbidden,
            "Forbidden: must be empty to be structural when x-kubernetes-int-or-string is true",
        );
    }
    if ty == Some("array") && !s.contains_key("items") {
        push(
            "items",
            CauseType::FieldValueRequired,
            "Required value: must be specified",
        );
    }
    if s.contains_key("properties") && s.get("additionalProperties").is_some_and(|a| a.is_object())
    {
        push(
            "additionalProperties",
            CauseType::FieldValueForbidden,
            "Forbidden: additionalProperties and properties are mutual exclusive",
        );
    }
    if s.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map") {
        let keys: Vec<&str> = s
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let items = s.get("items");
        if items.and_then(|i| i.get("type")).and_then(Value::as_str) != Some("object") {
            push(
                "items.type",
                CauseType::FieldValueInvalid,
                "Invalid value: must be object if parent array's x-kubernetes-list-type is map",
            );
        }
        if keys.is_empty() {
            push(
                "x-kubernetes-list-map-keys",
                CauseType::FieldValueRequired,
                "Required value: must not be empty if x-kubernetes-list-type is map",
            );
        }
        let props = items
            .and_then(|i| i.get("properties"))
            .and_then(Value::as_object);
        for k in keys {
            if props.is_none_or(|p| !p.contains_key(k)) {
                push(
                    "x-kubernetes-list-map-keys",
                    CauseType::FieldValueInvalid,
                    &format!("Invalid value: {k:?}: entries must all be names of item properties"),
                );
            }
        }
    }
    for combinator in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = s.get(combinator) {
            for (i, b) in branches.iter().enumerate() {
                branch_restrictions(b, &format!("{path}.{combinator}[{i}]"), errors);
            }
        }
    }
    if let Some(not) = s.get("not") {
        branch_restrictions(not, &format!("{path}.not"), errors);
    }
    if let Some(default) = s.get("default") {
        let mut pruned = default.clone();
        prune_rec(schema, &mut pruned, "", false, &mut Vec::new());
        let mut problems = Vec::new();
        Validator {
            errors: &mut problems,
        }
        .check(schema, &pruned, "");
        for p in problems {
            errors.push(FieldError {
                path: format!("{path}.default"),
                reason: p.reason,
                message: format!("{} (in the default value)", p.message),
            });
        }
    }
    if let Some(Value::Object(props)) = s.get("properties") {
        for (name, sub) in props {
            structural_node(sub, &format!("{path}.properties[{name}]"), true, errors);
        }
    }
    if let Some(items) = s.get("items") {
        structural_node(items, &format!("{path}.items"), true, errors);
    }
    if let Some(add @ Value::Object(_)) = s.get("additionalProperties") {
        structural_node(add, &format!("{path}.additionalProperties"), true, errors);
    }
}

/// In value-validation branches (`allOf`, ...) structure and defaults may not be specified.
fn branch_restrictions(branch: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let Value::Object(b) = branch else {
        return;
    };
    for key in ["type", "default", "nullable", "additionalProperties"] {
        if b.contains_key(key) {
            errors.push(FieldError {
                path: format!("{path}.{key}"),
                reason: CauseType::FieldValueForbidden,
                message: "Forbidden: must be undefined to be structural".into(),
            });
        }
    }
    if let Some(Value::Object(props)) = b.get("properties") {
        for (name, sub) in props {
            branch_restrictions(sub, &format!("{path}.properties[{name}]"), errors);
        }
    }
    if let Some(items) = b.get("items") {
        branch_restrictions(items, &format!("{path}.items"), errors);
    }
}
