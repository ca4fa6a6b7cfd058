//! FieldsV1 JSON read directly, without an intermediate [`FieldSet`](super::FieldSet):
//! the fields of a created object, and membership tests on stored entries.

use serde_json::Value;

use super::FieldDiff;
use crate::patch::strategy::MergeStrategy;

/// The FieldsV1 JSON of the `Update` entry a create records: every node of `object` its kind's
/// zero value lacks ([`FieldDiff::created`]), maps and keyed list items with their `"."`
/// marker.
pub fn fields_v1_of_object(object: &Value, strategy: &MergeStrategy) -> Value {
    FieldDiff::created(object, strategy).changed.to_fields_v1()
}

/// Whether `path` is a member of a FieldsV1 JSON tree, without parsing the whole tree.
pub fn fields_v1_contains(fields_v1: &Value, path: &[String]) -> bool {
    let mut node = fields_v1;
    for elem in path {
        match node.as_object().and_then(|m| m.get(elem)) {
            Some(child) => node = child,
            None => return false,
        }
    }
    match node.as_object() {
        Some(m) => !path.is_empty() && (m.is_empty() || m.contains_key(".")),
        None => false,
    }
}
