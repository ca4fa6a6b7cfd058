//! How a [`NodePlan`] is written: the guarded RFC 6902 patch that performs it, and the replay of
//! a refused patch on a node to find the operation that fails (see the [module docs](super)).

use json_patch::jsonptr::PointerBuf;
use json_patch::{
    AddOperation, Patch, PatchOperation, RemoveOperation, ReplaceOperation, TestOperation,
};
use k8s_openapi::api::core::v1::{Node, Taint};
use serde_json::Value;

use super::applied_annotation_key;
use super::plan::NodePlan;

impl NodePlan {
    /// Whether the node needs no write at all.
    pub fn is_noop(&self) -> bool {
        self.label_sets.is_empty()
            && self.label_removals.is_empty()
            && self.new_taints.is_none()
            && self.old_record == self.new_record
    }

    /// The record annotation's value after the patch (`None`: no record).
    pub fn new_record(&self) -> Option<&str> {
        self.new_record.as_deref()
    }

    /// The RFC 6902 patch that performs the plan atomically (see the module docs for the
    /// preconditions it carries). Empty when [`NodePlan::is_noop`].
    pub fn json_patch(&self) -> Patch {
        let mut ops = Vec::new();
        if self.is_noop() {
            return Patch(ops);
        }
        let labels_missing = self.old_labels.is_none() && !self.label_sets.is_empty();
        let taints_missing = self.old_taints.is_none() && self.new_taints.is_some();
        let annotations_missing = !self.annotations_exist && self.new_record.is_some();
        if labels_missing || taints_missing || annotations_missing {
            // Nothing precise to test for a map or list that does not exist yet.
            if let Some(rv) = &self.resource_version {
                ops.push(test(
                    &["metadata", "resourceVersion"],
                    Value::String(rv.clone()),
                ));
            }
        }
        // Labels.
        if labels_missing {
            let map: serde_json::Map<String, Value> = self
                .label_sets
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            ops.push(add(&["metadata", "labels"], Value::Object(map)));
        } else {
            let old = self.old_labels.as_ref();
            for (k, v) in &self.label_sets {
                match old.and_then(|l| l.get(k)) {
                    Some(prev) => {
                        ops.push(test(
                            &["metadata", "labels", k],
                            Value::String(prev.clone()),
                        ));
                        ops.push(replace(
                            &["metadata", "labels", k],
                            Value::String(v.clone()),
                        ));
                    }
                    None => ops.push(add(&["metadata", "labels", k], Value::String(v.clone()))),
                }
            }
        }
        for (k, v) in &self.label_removals {
            ops.push(test(&["metadata", "labels", k], Value::String(v.clone())));
            ops.push(remove(&["metadata", "labels", k]));
        }
        // Taints.
        if let Some(new) = &self.new_taints {
            let new_value = taints_json(new);
            match &self.old_taints {
                Some(old) => {
                    ops.push(test(&["spec", "taints"], taints_json(old)));
                    ops.push(replace(&["spec", "taints"], new_value));
                }
                None if self.spec_exists => ops.push(add(&["spec", "taints"], new_value)),
                None => {
                    let mut spec = serde_json::Map::new();
                    spec.insert("taints".to_owned(), new_value);
                    ops.push(add(&["spec"], Value::Object(spec)));
                }
            }
        }
        // The record.
        let key = applied_annotation_key(&self.pool);
        match (&self.old_record, &self.new_record) {
            (old, new) if old == new => {}
            (None, Some(new)) if !self.annotations_exist => {
                let mut map = serde_json::Map::new();
                map.insert(key, Value::String(new.clone()));
                ops.push(add(&["metadata", "annotations"], Value::Object(map)));
            }
            (None, Some(new)) => ops.push(add(
                &["metadata", "annotations", &key],
                Value::String(new.clone()),
            )),
            (Some(old), Some(new)) => {
                ops.push(test(
                    &["metadata", "annotations", &key],
                    Value::String(old.clone()),
                ));
                ops.push(replace(
                    &["metadata", "annotations", &key],
                    Value::String(new.clone()),
                ));
            }
            (Some(old), None) => {
                ops.push(test(
                    &["metadata", "annotations", &key],
                    Value::String(old.clone()),
                ));
                ops.push(remove(&["metadata", "annotations", &key]));
            }
            (None, None) => {}
        }
        Patch(ops)
    }
}

fn pointer(parts: &[&str]) -> PointerBuf {
    PointerBuf::from_tokens(parts.iter().copied())
}

fn test(parts: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Test(TestOperation {
        path: pointer(parts),
        value,
    })
}

fn add(parts: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation {
        path: pointer(parts),
        value,
    })
}

fn replace(parts: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Replace(ReplaceOperation {
        path: pointer(parts),
        value,
    })
}

fn remove(parts: &[&str]) -> PatchOperation {
    PatchOperation::Remove(RemoveOperation {
        path: pointer(parts),
    })
}

fn taints_json(taints: &[Taint]) -> Value {
    // Serialising core/v1 taints cannot fail: plain strings and an RFC 3339 time.
    serde_json::to_value(taints).unwrap_or(Value::Array(Vec::new()))
}
/// The first operation of a JSON patch that fails on a node (see [`first_failing_operation`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailingOperation {
    /// Its position in the patch (from 0).
    pub index: usize,
    /// Whether it is a `test`: a precondition that no longer holds (the node changed), as
    /// opposed to an operation that cannot apply to the node as it is.
    pub is_test: bool,
    /// The operation and its path, as `add /spec/taints`.
    pub operation: String,
    /// Why it fails (the JSON patch library's message).
    pub error: String,
}

impl std::fmt::Display for FailingOperation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "operation {} ({}) fails: {}",
            self.index, self.operation, self.error
        )
    }
}

fn describe_operation(op: &PatchOperation) -> String {
    let (name, path) = match op {
        PatchOperation::Add(o) => ("add", &o.path),
        PatchOperation::Remove(o) => ("remove", &o.path),
        PatchOperation::Replace(o) => ("replace", &o.path),
        PatchOperation::Move(o) => ("move", &o.path),
        PatchOperation::Copy(o) => ("copy", &o.path),
        PatchOperation::Test(o) => ("test", &o.path),
    };
    format!("{name} {path}")
}

/// The first operation of `patch` that fails when the patch is applied to `node` as it is
/// (`None`: the whole patch applies). The API server refuses a JSON patch that does not apply
/// with a 422 that does not say which operation failed; replaying the patch on the node as it
/// is now tells a failed `test` (the node changed since it was read) from an operation that
/// cannot apply to it (the patch does not fit the node).
pub fn first_failing_operation(
    patch: &Patch,
    node: &Node,
) -> Result<Option<FailingOperation>, serde_json::Error> {
    let mut doc = serde_json::to_value(node)?;
    for (index, op) in patch.0.iter().enumerate() {
        if let Err(e) = json_patch::patch(&mut doc, std::slice::from_ref(op)) {
            return Ok(Some(FailingOperation {
                index,
                is_test: matches!(op, PatchOperation::Test(_)),
                operation: describe_operation(op),
                error: e.kind.to_string(),
            }));
        }
    }
    Ok(None)
}
