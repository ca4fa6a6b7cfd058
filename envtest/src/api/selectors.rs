//! The label and field selectors of a list, watch or deletecollection: parsed from the query,
//! checked against the fields the resource's descriptor lets selectors name, and matched with
//! the defaults of absent fields (a node without `spec.unschedulable` reads `false`).

use serde_json::Value;

use super::query::Query;
use crate::error::ApiError;
use crate::resources::ResourceType;
use crate::selector::{
    FieldSelector, LabelSelector, SelectableField, SelectorError, selectable_value,
};

/// Label and field selectors of a list or watch.
#[derive(Debug, Clone)]
pub(crate) struct Selectors {
    /// The label selector (`labelSelector`).
    pub label: LabelSelector,
    /// The field selector (`fieldSelector`).
    pub field: FieldSelector,
    /// The resource's selectable fields besides the metadata ones.
    fields: &'static [SelectableField],
    /// Field paths name events.k8s.io/v1 fields while objects are stored in core/v1 form.
    events_v1: bool,
}

impl Selectors {
    /// The selectors of a request on `t`: 400 BadRequest for a selector that does not parse or
    /// names a field the resource does not support.
    pub(crate) fn parse(t: &ResourceType, q: &Query) -> Result<Self, ApiError> {
        let label = match q.get("labelSelector") {
            Some(s) => LabelSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?,
            None => LabelSelector::everything(),
        };
        let field = match q.get("fieldSelector") {
            Some(s) => FieldSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?,
            None => FieldSelector::everything(),
        };
        let fields = crate::resources::kinds::of(t).map_or(&[][..], |k| k.fields);
        let mut supported = vec!["metadata.name", "metadata.namespace"];
        supported.extend(fields.iter().map(|f| f.path));
        field.check_supported(&supported).map_err(|e| match e {
            // A kind without field label conversions of its own: the generic conversion's text.
            SelectorError::UnsupportedField(label) if fields.is_empty() => {
                ApiError::bad_request(format!(
                    "{label:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                ))
            }
            other => ApiError::bad_request(other.to_string()),
        })?;
        Ok(Selectors {
            label,
            field,
            fields,
            events_v1: crate::convert::is_events_v1(t),
        })
    }

    /// Whether these selectors select everything.
    pub(crate) fn is_everything(&self) -> bool {
        self.label.is_empty() && self.field.is_empty()
    }

    /// Whether a stored object is selected.
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        (self.label.is_empty() || self.label.matches_object(obj))
            && (self.field.is_empty()
                || if self.events_v1 {
                    self.field.matches_with(|path| {
                        selectable_value(
                            self.fields,
                            obj,
                            &crate::convert::event_field_to_core(path),
                        )
                    })
                } else {
                    self.field.matches_fields(self.fields, obj)
                })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::query::parse_query;
    use crate::resources::Registry;

    fn selectors(key: &str, query: &str) -> Result<Selectors, ApiError> {
        let reg = Registry::with_builtins();
        Selectors::parse(reg.get(key).unwrap(), &parse_query(Some(query)))
    }

    #[test]
    fn descriptor_fields_are_supported_with_their_defaults() {
        let schedulable = selectors("nodes", "fieldSelector=spec.unschedulable%3Dfalse").unwrap();
        assert!(schedulable.matches(&json!({"metadata": {"name": "n"}, "spec": {}})));
        assert!(!schedulable.matches(&json!({"spec": {"unschedulable": true}})));
        let pods = selectors(
            "pods",
            "fieldSelector=status.podIP%3D10.0.0.5,spec.hostNetwork%3Dfalse",
        )
        .unwrap();
        assert!(pods.matches(&json!({"status": {"podIPs": [{"ip": "10.0.0.5"}]}})));
        let err = selectors("configmaps", "fieldSelector=spec.nodeName%3Dx").unwrap_err();
        assert_eq!(err.code, 400);
        assert!(selectors("secrets", "fieldSelector=type%3DOpaque").is_ok());
        assert!(selectors("secrets", "labelSelector=a%20in%20(b").is_err());
        assert!(selectors("configmaps", "").unwrap().is_everything());
    }

    #[test]
    fn events_v1_paths_read_core_fields() {
        let sel = selectors("events.k8s.io/events", "fieldSelector=regarding.name%3Dweb").unwrap();
        assert!(sel.matches(&json!({"involvedObject": {"name": "web"}})));
        assert!(!sel.matches(&json!({"involvedObject": {"name": "db"}})));
    }
}
