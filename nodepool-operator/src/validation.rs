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

/// Validates a NodePool given as JSON (as it arrives in an AdmissionReview). Returns every
/// violation; empty means valid.
pub fn validate(pool: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let name = pool
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
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
    let name = pool
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
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
mod tests {
    use super::*;

    fn pool(name: &str, spec: Value) -> Value {
        json!({"apiVersion": "nodes.lailin.xyz/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec})
    }

    fn fields(errors: &[FieldError]) -> Vec<String> {
        errors.iter().map(|e| e.field.clone()).collect()
    }

    #[test]
    fn original_cases() {
        // From the original's webhook tests.
        let refused = validate(&pool(
            "w",
            json!({"labels": {"xxx": "1"}, "handler": "runc"}),
        ));
        assert_eq!(fields(&refused), vec!["spec.labels[xxx]"]);
        let refused = validate(&pool(
            "w",
            json!({"taints": [{"key": "", "effect": "NoSchedule"}], "handler": "runc"}),
        ));
        assert_eq!(fields(&refused), vec!["spec.taints[0].key"]);
        assert_eq!(refused[0].kind, ErrorKind::Required);
        for key in ["node-pool.lailin.xyz", "node-pool.lailin.xyz/xxx"] {
            let ok = validate(&pool(
                "w",
                json!({"labels": {key: "v"}, "taints": [{"key": key, "value": "v", "effect": "NoSchedule"}], "handler": "runc"}),
            ));
            assert!(ok.is_empty(), "{key}: {ok:?}");
        }
    }

    #[test]
    fn key_rule_table() {
        let cases = [
            ("node-pool.lailin.xyz", true),
            ("node-pool.lailin.xyz/xxx", true),
            ("node-pool.lailin.xyz/a.b-c_d", true),
            ("node-pool.lailin.xyz/A9", true),
            (&*format!("node-pool.lailin.xyz/{}", "a".repeat(63)), true),
            (&*format!("node-pool.lailin.xyz/{}", "a".repeat(64)), false),
            ("xxx", false),
            ("", false),
            // The original's unescaped dots matched any character.
            ("node-poolXlailinXxyz", false),
            ("node-pool-lailin-xyz/x", false),
            // The original accepted any run of slashes.
            ("node-pool.lailin.xyz//x", false),
            ("node-pool.lailin.xyz/x/y", false),
            ("node-pool.lailin.xyz/", false),
            ("node-pool.lailin.xyz/-x", false),
            ("node-pool.lailin.xyz/x-", false),
            ("node-pool.lailin.xyz/x y", false),
            ("node-pool.lailin.xyzz", false),
            ("sub.node-pool.lailin.xyz/x", false),
            ("Node-Pool.lailin.xyz", false),
        ];
        for (key, ok) in cases {
            assert_eq!(is_pool_key(key), ok, "{key:?}");
        }
    }

    #[test]
    fn value_and_handler_rule_tables() {
        for (v, ok) in [
            ("", true),
            ("10", true),
            ("a.b_c-d", true),
            ("-a", false),
            ("a-", false),
            ("a b", false),
            ("a/b", false),
            (&*"x".repeat(63), true),
            (&*"x".repeat(64), false),
        ] {
            assert_eq!(is_label_value(v), ok, "{v:?}");
        }
        for (h, ok) in [
            ("runc", true),
            ("kata-qemu", true),
            ("gvisor2", true),
            ("Runc", false),
            ("run_c", false),
            ("run.c", false),
            ("-runc", false),
            ("runc-", false),
            ("", false),
            (&*"a".repeat(63), true),
            (&*"a".repeat(64), false),
        ] {
            assert_eq!(is_dns1123_label(h), ok, "{h:?}");
        }
    }

    #[test]
    fn every_violation_is_listed_with_its_path() {
        let bad = pool(
            "Bad_Name-",
            json!({
                "labels": {"xxx": "ok", "node-pool.lailin.xyz/a": "-bad-"},
                "taints": [
                    {"key": "node-pool.lailin.xyz", "value": "v", "effect": "NoSchedule"},
                    {"key": "node-pool.lailin.xyz", "value": "w", "effect": "NoSchedule"},
                    {"key": "other", "effect": "Sometimes"},
                    {"key": "node-pool.lailin.xyz/b", "value": "a b", "effect": ""}
                ],
                "handler": "Not_DNS"
            }),
        );
        let errors = validate(&bad);
        assert_eq!(
            fields(&errors),
            vec![
                "metadata.name",
                "spec.labels[node-pool.lailin.xyz/a]",
                "spec.labels[xxx]",
                "spec.taints[1]",
                "spec.taints[2].key",
                "spec.taints[2].effect",
                "spec.taints[3].value",
                "spec.taints[3].effect",
                "spec.handler",
            ]
        );
        let kinds: Vec<&ErrorKind> = errors.iter().map(|e| &e.kind).collect();
        assert_eq!(kinds[3], &ErrorKind::Duplicate);
        assert_eq!(kinds[5], &ErrorKind::NotSupported);
        assert_eq!(kinds[7], &ErrorKind::Required);
        let summary = summarize("Bad_Name-", &errors);
        assert!(summary.starts_with("NodePool.nodes.lailin.xyz \"Bad_Name-\" is invalid: ["));
        assert!(summary.contains("spec.taints[2].effect: Unsupported value: \"Sometimes\""));
        assert!(summary.contains("spec.taints[1]: Duplicate value: {key: \"node-pool.lailin.xyz\", effect: \"NoSchedule\"}"));
        assert!(summary.contains("spec.labels[xxx]: Invalid value: \"xxx\""));
        assert_eq!(errors[0].reason(), "FieldValueInvalid");
    }

    #[test]
    fn same_key_different_effects_is_fine() {
        let ok = validate(&pool(
            "w",
            json!({"taints": [
                {"key": "node-pool.lailin.xyz", "effect": "NoSchedule"},
                {"key": "node-pool.lailin.xyz", "effect": "NoExecute"},
                {"key": "node-pool.lailin.xyz", "effect": "PreferNoSchedule"}
            ], "handler": "runc"}),
        ));
        assert!(ok.is_empty(), "{ok:?}");
    }

    #[test]
    fn missing_or_malformed_fields() {
        let e = validate(&pool("w", json!({})));
        assert_eq!(fields(&e), vec!["spec.handler"]);
        assert_eq!(e[0].kind, ErrorKind::Required);
        let e = validate(&pool(
            "w",
            json!({"labels": "x", "taints": {}, "handler": 3}),
        ));
        assert_eq!(
            fields(&e),
            vec!["spec.labels", "spec.taints", "spec.handler"]
        );
        let e = validate(&pool("w", json!([])));
        assert_eq!(fields(&e), vec!["spec"]);
        let e = validate(&pool(
            "w",
            json!({"labels": {"node-pool.lailin.xyz": 1}, "handler": "runc"}),
        ));
        assert_eq!(fields(&e), vec!["spec.labels[node-pool.lailin.xyz]"]);
        let long = "a".repeat(64);
        let e = validate(&pool(&long, json!({"handler": "runc"})));
        assert_eq!(fields(&e), vec!["metadata.name"]);
        assert_eq!(
            summarize(&long, &e).matches('[').count(),
            0,
            "one error: no brackets"
        );
    }

    #[test]
    fn defaulting_table() {
        let apply = |v: &Value| {
            let mut doc = v.clone();
            json_patch::patch(&mut doc, &defaults(v)).unwrap();
            doc
        };
        // Nothing set: both defaults.
        let d = apply(&pool("w", json!({})));
        assert_eq!(
            d["metadata"]["labels"],
            json!({"node-pool.lailin.xyz": "w"})
        );
        assert_eq!(d["spec"]["handler"], "runc");
        // Empty values count as unset.
        let mut v = pool("w", json!({"handler": ""}));
        v["metadata"]["labels"] = json!({});
        let d = apply(&v);
        assert_eq!(
            d["metadata"]["labels"],
            json!({"node-pool.lailin.xyz": "w"})
        );
        assert_eq!(d["spec"]["handler"], "runc");
        // Set values are kept: no patch at all.
        let mut v = pool("w", json!({"handler": "kata"}));
        v["metadata"]["labels"] = json!({"team": "a"});
        assert!(defaults(&v).is_empty());
        // No spec at all.
        let d = apply(&json!({"metadata": {"name": "w"}}));
        assert_eq!(d["spec"]["handler"], "runc");
        // No name yet (generateName): labels are not defaulted.
        let ops =
            defaults(&json!({"metadata": {"generateName": "w-"}, "spec": {"handler": "runc"}}));
        assert!(ops.is_empty());
        // The defaulted object validates when the rest is valid.
        let d = apply(&pool(
            "w",
            json!({"labels": {"node-pool.lailin.xyz/w": "1"}}),
        ));
        assert!(validate(&d).is_empty());
    }
}
