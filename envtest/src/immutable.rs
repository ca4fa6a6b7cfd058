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
            let shown = new
                .get(field)
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .unwrap_or_default();
            (
                field.to_string(),
                "FieldValueInvalid".to_string(),
                format!("Invalid value: {shown:?}: field is immutable"),
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
        assert!(
            err.message.contains("field is immutable"),
            "{}",
            err.message
        );
        let configmaps = registry.get("configmaps").cloned().unwrap();
        assert!(check(&configmaps, &old, &changed).is_ok());
    }
}
