//! Fields of built-in kinds that an update may not change, as the real API server's
//! `ValidateUpdate` refuses them: 422 Invalid, `field is immutable`.
//!
//! Only the fields clients commonly trip over are listed; other built-in fields are not checked.

use serde_json::Value;

use crate::error::ApiError;
use crate::resources::ResourceType;

/// `(group, plural, top-level field)` that keeps its value across updates.
const IMMUTABLE: &[(&str, &str, &str)] = &[("node.k8s.io", "runtimeclasses", "handler")];

/// `Err(422)` when `new` changes an immutable field of `old`.
pub(crate) fn check(t: &ResourceType, old: &Value, new: &Value) -> Result<(), ApiError> {
    if t.custom.is_some() {
        return Ok(());
    }
    let causes: Vec<(String, String, String)> = IMMUTABLE
        .iter()
        .filter(|(group, plural, _)| *group == t.group && *plural == t.plural)
        .filter(|(_, _, field)| old.get(field) != new.get(field))
        .map(|(_, _, field)| {
            // kube-apiserver 1.37 checks these declaratively (`+k8s:immutable`), and its error
            // carries no value: `Invalid value: null` (1.34 showed the new value).
            (
                field.to_string(),
                "FieldValueInvalid".to_string(),
                "Invalid value: null: field is immutable".to_string(),
            )
        })
        .collect();
    if causes.is_empty() {
        return Ok(());
    }
    let name = new["metadata"]["name"].as_str().unwrap_or_default();
    Err(ApiError::invalid(&t.group, &t.kind, name, causes))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_runtime_class_handler_cannot_change() {
        let registry = crate::resources::Registry::with_builtins();
        let t = registry.get("node.k8s.io/runtimeclasses").cloned().unwrap();
        let old = json!({"metadata": {"name": "rc"}, "handler": "runc"});
        let same = json!({"metadata": {"name": "rc", "labels": {"a": "b"}}, "handler": "runc"});
        assert!(check(&t, &old, &same).is_ok());
        let changed = json!({"metadata": {"name": "rc"}, "handler": "kata"});
        let err = check(&t, &old, &changed).unwrap_err();
        assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
        assert!(err.message.contains("handler"), "{}", err.message);
        assert_eq!(
            err.message,
            "RuntimeClass.node.k8s.io \"rc\" is invalid: handler: Invalid value: null: field is immutable"
        );
        let configmaps = registry.get("configmaps").cloned().unwrap();
        assert!(check(&configmaps, &old, &changed).is_ok());
    }
}
