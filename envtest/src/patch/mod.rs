//! The four patch flavours of the Kubernetes API, as pure functions on [`serde_json::Value`].
//!
//! | content type                                   | function                      | module        |
//! |------------------------------------------------|-------------------------------|---------------|
//! | `application/json-patch+json` (RFC 6902)       | [`json_patch()`]              | this module   |
//! | `application/merge-patch+json` (RFC 7386)      | [`merge_patch`]               | this module   |
//! | `application/strategic-merge-patch+json`       | [`strategic_merge_patch`]     | [`strategic`] |
//! | `application/apply-patch+yaml` (server-side apply) | [`server_side_apply`]     | [`apply`]     |
//!
//! [`PatchType::from_content_type`] maps a request's `Content-Type` to the flavour, and
//! [`patch_object`] runs one of the first three on raw body bytes. Strategic merge and
//! server-side apply need to know how each list merges; [`MergeStrategy`] (module
//! [`strategy`]) carries that, from a static table for built-in kinds
//! ([`MergeStrategy::builtin`]) or from a CRD schema's `x-kubernetes-list-type` markers
//! ([`MergeStrategy::from_openapi_schema`]). Ownership for server-side apply lives in
//! `metadata.managedFields` (FieldsV1), see [`fields`] and [`apply`]; ordinary writes record
//! `Update` ownership through [`record_update`] / [`record_update_owned`]; for resources with a
//! status subresource, [`scope_to_subresource`] trims an apply body to what the endpoint stores.
//!
//! ```
//! use kcr_envtest::patch::{self, ApplyOptions, MergeStrategy};
//! use serde_json::json;
//!
//! let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
//!     "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]},
//!     "status": {"conditions": [{"type": "Ready", "status": "False"}]}});
//! let strategy = MergeStrategy::builtin("v1", "Node").expect("Node is a built-in kind");
//! // Strategic merge: conditions merge by type; taints are atomic (replaced), as upstream.
//! let patched = patch::strategic_merge_patch(&node,
//!     &json!({"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]},
//!         "status": {"conditions": [{"type": "DiskPressure", "status": "False"}]}}), &strategy)?;
//! assert_eq!(patched["spec"]["taints"].as_array().map(Vec::len), Some(1));
//! assert_eq!(patched["status"]["conditions"].as_array().map(Vec::len), Some(2));
//!
//! // Server-side apply records ownership; another manager changing the field conflicts.
//! let opts = |manager| ApplyOptions { manager, force: false, now: "2024-01-01T00:00:00Z",
//!     strategy: &strategy, subresource: None };
//! let applied = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"pool": "a"}}});
//! let owned = patch::server_side_apply(Some(&patched), &applied, &opts("operator"))?;
//! assert_eq!(owned["metadata"]["managedFields"][0]["manager"], "operator");
//! let other = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"pool": "b"}}});
//! let err = patch::server_side_apply(Some(&owned), &other, &opts("someone-else")).unwrap_err();
//! assert_eq!(err.status_code(), 409);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Errors are typed: [`PatchError::status_code`] and [`ApplyError::status_code`] give the HTTP
//! code the API server answers with.

pub mod apply;
pub mod fields;
pub mod strategic;
pub mod strategy;

pub use apply::{
    ApplyError, ApplyOptions, Conflict, UpdateOptions, parse_apply_body, record_update,
    record_update_owned, scope_to_subresource, server_side_apply,
};
pub use fields::{FieldPath, FieldSet};
pub use strategic::strategic_merge_patch;
pub use strategy::{ListType, MergeStrategy};

use serde_json::Value;

/// The dotted path of field `key` below `path` (`key` alone at the root): `spec.replicas`.
pub(crate) fn join_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The patch flavour of a request, from its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PatchType {
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

/// The media type of a `Content-Type` header value: lower-cased, parameters such as
/// `; charset=utf-8` dropped (empty when there is none).
pub(crate) fn media_type(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

impl PatchType {
    /// Maps a `Content-Type` header value (parameters such as `; charset=utf-8` are ignored).
    pub fn from_content_type(content_type: &str) -> Option<Self> {
        match media_type(content_type).as_str() {
            "application/json-patch+json" => Some(Self::Json),
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Some(Self::Apply),
            _ => None,
        }
    }

    /// The canonical media type.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Json => "application/json-patch+json",
            Self::Merge => "application/merge-patch+json",
            Self::Strategic => "application/strategic-merge-patch+json",
            Self::Apply => "application/apply-patch+yaml",
        }
    }
}

/// A patch that cannot be decoded or applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The body is not valid JSON/YAML or not the shape the patch type needs (400).
    #[error("{0}")]
    InvalidBody(String),
    /// The patch type is not supported for this resource, e.g. strategic merge on a custom
    /// resource (415).
    #[error("the body of the request was in an unknown format - accepted media types include: {0}")]
    UnsupportedMediaType(String),
    /// The patch is well-formed but cannot be applied to the object (422), e.g. a failed
    /// JSON-patch `test`, a path that does not exist, a missing merge key.
    #[error("{0}")]
    Unprocessable(String),
    /// The patch trips an error the real server does not classify (500 with no reason), e.g.
    /// an unknown strategic merge `$patch` directive.
    #[error("{0}")]
    Internal(String),
}

impl PatchError {
    /// The HTTP status code the API server answers with.
    pub fn status_code(&self) -> u16 {
        match self {
            Self::InvalidBody(_) => 400,
            Self::UnsupportedMediaType(_) => 415,
            Self::Unprocessable(_) => 422,
            Self::Internal(_) => 500,
        }
    }
}

/// Applies an RFC 6902 JSON patch (a JSON array of operations) to a copy of `target`.
///
/// All of `add`, `remove`, `replace`, `move`, `copy` and `test` are supported, with JSON
/// pointer escaping (`~0` for `~`, `~1` for `/`) and `-` for "append". The patch applies
/// atomically: on any failing operation the error names it and nothing is returned.
pub fn json_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    let kind = match patch {
        Value::Array(_) => None,
        Value::Object(_) => Some("object"),
        Value::String(_) => Some("string"),
        Value::Number(_) => Some("number"),
        Value::Bool(_) => Some("bool"),
        Value::Null => None,
    };
    if patch.is_null() {
        // Go decodes `null` into an empty list of operations.
        return Ok(target.clone());
    }
    if let Some(kind) = kind {
        // The real server's decoding error, word for word.
        return Err(PatchError::InvalidBody(format!(
            "error decoding patch: json: cannot unmarshal {kind} into Go value of type []handlers.jsonPatchOp"
        )));
    }
    // An operation the library does not know (or without its fields) does not apply, as on
    // the real server, whose JSON patch library fails it when applying.
    let ops: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| PatchError::Unprocessable(format!("invalid json patch: {e}")))?;
    let mut doc = target.clone();
    json_patch::patch(&mut doc, &ops)
        .map_err(|e| PatchError::Unprocessable(format!("json patch failed: {e}")))?;
    Ok(doc)
}

/// Applies an RFC 7386 JSON merge patch to a copy of `target`: objects merge recursively,
/// `null` deletes a key, anything else (arrays included) replaces.
pub fn merge_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    Ok(merge_value(target, patch))
}

fn merge_value(target: &Value, patch: &Value) -> Value {
    let Value::Object(patch_map) = patch else {
        return patch.clone();
    };
    let mut out = match target {
        Value::Object(m) => m.clone(),
        _ => serde_json::Map::new(),
    };
    for (k, v) in patch_map {
        if v.is_null() {
            out.remove(k);
        } else {
            let merged = merge_value(out.get(k).unwrap_or(&Value::Null), v);
            out.insert(k.clone(), merged);
        }
    }
    Value::Object(out)
}

/// Decodes a JSON body and runs a JSON, merge or strategic merge patch on `target`.
///
/// `strategy` is required for [`PatchType::Strategic`]; `None` (a custom resource, or a kind
/// without a strategy table) gives [`PatchError::UnsupportedMediaType`] like the real server.
/// [`PatchType::Apply`] is not handled here (it needs ownership, see [`server_side_apply`]) and
/// gives [`PatchError::InvalidBody`].
pub fn patch_object(
    patch_type: PatchType,
    target: &Value,
    body: &[u8],
    strategy: Option<&MergeStrategy>,
) -> Result<Value, PatchError> {
    let patch: Value = serde_json::from_slice(body).map_err(|e| {
        PatchError::InvalidBody(format!(
            "error decoding patch: {}",
            crate::json::go_syntax_error(body, &e)
        ))
    })?;
    match patch_type {
        PatchType::Json => json_patch(target, &patch),
        PatchType::Merge => {
            if !patch.is_object() {
                return Err(PatchError::InvalidBody(
                    "merge patch must be a JSON object".into(),
                ));
            }
            merge_patch(target, &patch)
        }
        PatchType::Strategic => match strategy {
            Some(s) => strategic_merge_patch(target, &patch, s),
            None => Err(PatchError::UnsupportedMediaType(
                "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
                    .into(),
            )),
        },
        PatchType::Apply => Err(PatchError::InvalidBody(
            "apply patches go through server_side_apply".into(),
        )),
    }
}

#[cfg(test)]
mod tests;
