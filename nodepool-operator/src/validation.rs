//! The admission rules of a `NodePool`: validation (every violation, with its field path) and
//! defaulting (as a JSON patch). Pure functions; [`crate::webhook`] serves them over HTTPS.
//!
//! ## Validation ([`validate`])
//! - every key of `spec.labels` and every taint key is `node-pool.lailin.xyz` or
//!   `node-pool.lailin.xyz/<name>`, where `<name>` is a valid label name (at most 63
//!   characters, alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric). The original's
//!   regular expression left the dots unescaped and accepted any run of slashes; this one is
//!   exact;
//! - label values are valid label values (empty, or a valid label name);
//! - taint values are valid label values too (the API server would refuse them on the node);
//! - taint effects are `NoSchedule`, `PreferNoSchedule` or `NoExecute`;
//! - no two taints share key and effect;
//! - `spec.handler` is a DNS-1123 label;
//! - `metadata.name` is a valid label name, because membership is the label key
//!   `node-role.kubernetes.io/<name>` (and the applied record's annotation key is
//!   `applied.node-pool.lailin.xyz/<name>`): a longer or odd name could never have members.
//!
//! ## Defaulting ([`defaults`])
//! - empty `metadata.labels` becomes `{"node-pool.lailin.xyz": <name>}` (skipped while the name
//!   is still empty, i.e. `generateName` before the API server picked a name);
//! - empty `spec.handler` becomes `runc`.

use std::fmt;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation};
use serde_json::{Value, json};

use kcr_names::{is_dns1123_label, is_label_name, is_label_value};

use crate::crd::{DEFAULT_HANDLER, POOL_KEY_DOMAIN};

/// The taint effects Kubernetes knows.
pub const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// What is wrong with a field (Kubernetes' `field.ErrorType`s that these rules use).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// The value is malformed.
    Invalid,
    /// The value is missing or empty.
    Required,
    /// The value is not one of a fixed set.
    NotSupported,
    /// The value repeats an earlier one.
    Duplicate,
}

/// One violation: the field path, the offending value and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Field path, Kubernetes style: `spec.taints[0].key`, `spec.labels[xxx]`.
    pub field: String,
    /// The kind of violation.
    pub kind: ErrorKind,
    /// The offending value, as shown to the user.
    pub value: String,
    /// Why it is wrong.
    pub detail: String,
}

impl FieldError {
    fn new(
        field: impl Into<String>,
        kind: ErrorKind,
        value: impl Into<String>,
        detail: impl Into<String>,
    ) -> FieldError {
        FieldError {
            field: field.into(),
            kind,
            value: value.into(),
            detail: detail.into(),
        }
    }

    /// The Kubernetes `StatusCause.reason` for this error (`FieldValueInvalid`, ...).
    pub fn reason(&self) -> &'static str {
        match self.kind {
            ErrorKind::Invalid => "FieldValueInvalid",
            ErrorKind::Required => "FieldValueRequired",
            ErrorKind::NotSupported => "FieldValueNotSupported",
            ErrorKind::Duplicate => "FieldValueDuplicate",
        }
    }

    /// The message without the field path (for `StatusCause.message`).
    pub fn message(&self) -> String {
        match self.kind {
            ErrorKind::Invalid => format!("Invalid value: {:?}: {}", self.value, self.detail),
            ErrorKind::Required => format!("Required value: {}", self.detail),
            ErrorKind::NotSupported => {
                format!("Unsupported value: {:?}: {}", self.value, self.detail)
            }
            ErrorKind::Duplicate => format!("Duplicate value: {}", self.value),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message())
    }
}

/// The API server's one-line summary of a list of violations:
/// `NodePool.nodes.lailin.xyz "x" is invalid: [a, b]` (no brackets for one).
pub fn summarize(name: &str, errors: &[FieldError]) -> String {
    let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
    let body = if list.len() == 1 {
        list[0].clone()
    } else {
        format!("[{}]", list.join(", "))
    };
    format!("NodePool.nodes.lailin.xyz {name:?} is invalid: {body}")
}

/// Whether `key` is a key pools may use: `node-pool.lailin.xyz` or
/// `node-pool.lailin.xyz/<label name>`.
pub fn is_pool_key(key: &str) -> bool {
    match key.strip_prefix(POOL_KEY_DOMAIN) {
        Some("") => true,
        Some(rest) => rest.strip_prefix('/').is_some_and(is_label_name),
        None => false,
    }
}

const KEY_DETAIL: &str = "must be node-pool.lailin.xyz or node-pool.lailin.xyz/<name>, where <name> is at most 63 characters of alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric";
const VALUE_DETAIL: &str = "a valid label value must be 63 characters or less and must be empty or begin and end with an alphanumeric character ([a-z0-9A-Z]) with dashes (-), underscores (_), dots (.), and alphanumerics between";

/// The pool's `metadata.name` (empty when missing).
fn pool_name(pool: &Value) -> &str {
    pool.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Validates a NodePool given as JSON (as it arrives in an AdmissionReview). Returns every
/// violation; empty means valid.
pub fn validate(pool: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let name = pool_name(pool);
    if !name.is_empty() && !is_label_name(name) {
        errors.push(FieldError::new("metadata.name", ErrorKind::Invalid, name, "must be a valid label name (at most 63 characters), because members carry the label key node-role.kubernetes.io/<name>"));
    }
    let spec = pool.get("spec").cloned().unwrap_or(Value::Null);
    if !(spec.is_object() || spec.is_null()) {
        errors.push(FieldError::new(
            "spec",
            ErrorKind::Invalid,
            spec.to_string(),
            "must be an object",
        ));
        return errors;
    }
    // Labels.
    match spec.get("labels") {
        None | Some(Value::Null) => {}
        Some(Value::Object(labels)) => {
            // Sorted, whatever the map's order: the error list is deterministic.
            let mut entries: Vec<(&String, &Value)> = labels.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            for (k, v) in entries {
                let field = format!("spec.labels[{k}]");
                if !is_pool_key(k) {
                    errors.push(FieldError::new(
                        field.clone(),
                        ErrorKind::Invalid,
                        k.clone(),
                        KEY_DETAIL,
                    ));
                }
                match v.as_str() {
                    Some(s) if is_label_value(s) => {}
                    Some(s) => {
                        errors.push(FieldError::new(field, ErrorKind::Invalid, s, VALUE_DETAIL))
                    }
                    None => errors.push(FieldError::new(
                        field,
                        ErrorKind::Invalid,
                        v.to_string(),
                        "must be a string",
                    )),
                }
            }
        }
        Some(other) => errors.push(FieldError::new(
            "spec.labels",
            ErrorKind::Invalid,
            other.to_string(),
            "must be a map of strings",
        )),
    }
    // Taints.
    match spec.get("taints") {
        None | Some(Value::Null) => {}
        Some(Value::Array(taints)) => {
            let mut seen: Vec<(String, String)> = Vec::new();
            for (i, t) in taints.iter().enumerate() {
                let key = t.get("key").and_then(Value::as_str).unwrap_or("");
                let value = t.get("value").and_then(Value::as_str).unwrap_or("");
                let effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
                if key.is_empty() {
                    errors.push(FieldError::new(
                        format!("spec.taints[{i}].key"),
                        ErrorKind::Required,
                        "",
                        KEY_DETAIL,
                    ));
                } else if !is_pool_key(key) {
                    errors.push(FieldError::new(
                        format!("spec.taints[{i}].key"),
                        ErrorKind::Invalid,
                        key,
                        KEY_DETAIL,
                    ));
                }
                if !is_label_value(value) {
                    errors.push(FieldError::new(
                        format!("spec.taints[{i}].value"),
                        ErrorKind::Invalid,
                        value,
                        VALUE_DETAIL,
                    ));
                }
                if effect.is_empty() {
                    errors.push(FieldError::new(
                        format!("spec.taints[{i}].effect"),
                        ErrorKind::Required,
                        "",
                        "one of \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
                    ));
                } else if !TAINT_EFFECTS.contains(&effect) {
                    errors.push(FieldError::new(
                        format!("spec.taints[{i}].effect"),
                        ErrorKind::NotSupported,
                        effect,
                        "supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
                    ));
                }
                let id = (key.to_owned(), effect.to_owned());
                if seen.contains(&id) {
                    errors.push(FieldError::new(
                        format!("spec.taints[{i}]"),
                        ErrorKind::Duplicate,
                        format!("{{key: {key:?}, effect: {effect:?}}}"),
                        "",
                    ));
                } else {
                    seen.push(id);
                }
            }
        }
        Some(other) => errors.push(FieldError::new(
            "spec.taints",
            ErrorKind::Invalid,
            other.to_string(),
            "must be a list of taints",
        )),
    }
    // Handler.
    // Absent, null and empty are all missing.
    let handler = spec
        .get("handler")
        .filter(|h| !h.is_null() && h.as_str() != Some(""));
    match handler {
        None => errors.push(FieldError::new("spec.handler", ErrorKind::Required, "", "a DNS-1123 label (the mutating webhook defaults it to runc)")),
        Some(Value::String(h)) if is_dns1123_label(h) => {}
        Some(other) => errors.push(FieldError::new("spec.handler", ErrorKind::Invalid, other.as_str().map_or_else(|| other.to_string(), str::to_owned), "a DNS-1123 label must consist of lower case alphanumeric characters or '-', start and end with an alphanumeric character, and be at most 63 characters")),
    }
    errors
}

fn add(path: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation {
        path: PointerBuf::from_tokens(path.iter().copied()),
        value,
    })
}

/// The defaulting JSON patch for a NodePool given as JSON (empty when nothing to default).
pub fn defaults(pool: &Value) -> Vec<PatchOperation> {
    let mut ops = Vec::new();
    let name = pool_name(pool);
    let labels_empty = match pool.pointer("/metadata/labels") {
        None | Some(Value::Null) => true,
        Some(Value::Object(m)) => m.is_empty(),
        Some(_) => false,
    };
    if labels_empty && !name.is_empty() {
        if pool.get("metadata").is_some_and(Value::is_object) {
            ops.push(add(
                &["metadata", "labels"],
                json!({ POOL_KEY_DOMAIN: name }),
            ));
        } else {
            ops.push(add(
                &["metadata"],
                json!({ "name": name, "labels": { POOL_KEY_DOMAIN: name } }),
            ));
        }
    }
    match pool.get("spec") {
        Some(Value::Object(spec)) => {
            let empty = match spec.get("handler") {
                None | Some(Value::Null) => true,
                Some(Value::String(h)) => h.is_empty(),
                Some(_) => false,
            };
            if empty {
                ops.push(add(&["spec", "handler"], json!(DEFAULT_HANDLER)));
            }
        }
        None | Some(Value::Null) => ops.push(add(&["spec"], json!({ "handler": DEFAULT_HANDLER }))),
        Some(_) => {}
    }
    ops
}

#[cfg(test)]
mod tests;
