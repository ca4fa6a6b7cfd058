//! Validation, pruning and defaulting of custom objects against a CRD's `openAPIV3Schema`.
//!
//! The server runs, for every write of a custom object: [`prune`] (drop fields the structural
//! schema does not declare), [`apply_defaults`] (fill `default` values), then [`validate`] and
//! answers `422 Invalid` with one cause per [`FieldError`] (see [`invalid_message`] for the
//! Status message).
//!
//! ```
//! use kcr_envtest::schema::{self, CauseType};
//! use serde_json::json;
//!
//! let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
//!     "required": ["size"], "properties": {
//!         "size": {"type": "integer", "maximum": 10},
//!         "mode": {"type": "string", "enum": ["a", "b"], "default": "a"}}}}});
//! let mut obj = json!({"apiVersion": "example.com/v1", "kind": "Widget",
//!     "metadata": {"name": "w"}, "spec": {"size": 11, "junk": true}});
//! assert_eq!(schema::prune(&schema, &mut obj), vec!["spec.junk"]);
//! schema::apply_defaults(&schema, &mut obj);
//! assert_eq!(obj["spec"]["mode"], "a");
//! let errors = schema::validate(&schema, &obj);
//! assert_eq!(errors[0].path, "spec.size");
//! assert_eq!(errors[0].reason, CauseType::FieldValueInvalid);
//! ```
//!
//! # Supported schema keywords
//!
//! | keyword | behaviour |
//! |---|---|
//! | `type` (`object`, `array`, `string`, `integer`, `number`, `boolean`) | `FieldValueTypeInvalid`; `number` accepts integers; an integral float is an integer |
//! | `nullable` | `null` is accepted only with `nullable: true` (or no `type`) |
//! | `required` | `FieldValueRequired` per missing property |
//! | `properties`, `additionalProperties` (bool or schema), `items` | recursive |
//! | `enum` | `FieldValueNotSupported` listing the supported values |
//! | `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `multipleOf` | `FieldValueInvalid` |
//! | `minLength`, `maxLength` (in characters) | `FieldValueInvalid` / `FieldValueTooLong` |
//! | `pattern` (Rust `regex` syntax, close to ECMA 262 for usual CRD patterns) | `FieldValueInvalid` |
//! | `minItems`, `maxItems` | `FieldValueInvalid` / `FieldValueTooMany` |
//! | `minProperties`, `maxProperties` | `FieldValueInvalid` / `FieldValueTooMany` |
//! | `format`: `date-time`, `date`, `int32`, `int64`, `byte`, `uuid`, `ipv4`, `ipv6`, `cidr`, `hostname` | `FieldValueTypeInvalid`; other formats are accepted unchecked |
//! | `allOf`, `anyOf`, `oneOf`, `not` | `FieldValueInvalid` |
//! | `x-kubernetes-int-or-string` | integer or string |
//! | `x-kubernetes-preserve-unknown-fields` | anything below is kept by [`prune`] |
//! | `x-kubernetes-embedded-resource` | `apiVersion`, `kind`, `metadata` kept by [`prune`] |
//! | `x-kubernetes-list-type: set / map` (+ `x-kubernetes-list-map-keys`) | `FieldValueDuplicate` for repeated items/keys |
//! | `default` | [`apply_defaults`]; a `null` in a non-nullable defaulted field is replaced |
//!
//! Not supported: `x-kubernetes-validations` (CEL), ratcheting, `$ref`. At the root,
//! `apiVersion`, `kind` and `metadata` are never pruned nor validated here (the server validates
//! object metadata itself).

mod prune;
mod structural;
#[cfg(test)]
mod tests;
mod validate;

use std::fmt;

use serde_json::{Map, Value};

use crate::patch::join_path as child;

pub use prune::{apply_defaults, prune};
pub use structural::check_structural;
pub use validate::validate;

/// The metav1 `StatusCause` type of a field error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CauseType {
    /// `FieldValueRequired`.
    FieldValueRequired,
    /// `FieldValueInvalid`.
    FieldValueInvalid,
    /// `FieldValueTypeInvalid`.
    FieldValueTypeInvalid,
    /// `FieldValueNotSupported`.
    FieldValueNotSupported,
    /// `FieldValueTooLong`.
    FieldValueTooLong,
    /// `FieldValueTooMany`.
    FieldValueTooMany,
    /// `FieldValueDuplicate`.
    FieldValueDuplicate,
    /// `FieldValueForbidden`.
    FieldValueForbidden,
}

impl CauseType {
    /// The wire name (`StatusCause.reason`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FieldValueRequired => "FieldValueRequired",
            Self::FieldValueInvalid => "FieldValueInvalid",
            Self::FieldValueTypeInvalid => "FieldValueTypeInvalid",
            Self::FieldValueNotSupported => "FieldValueNotSupported",
            Self::FieldValueTooLong => "FieldValueTooLong",
            Self::FieldValueTooMany => "FieldValueTooMany",
            Self::FieldValueDuplicate => "FieldValueDuplicate",
            Self::FieldValueForbidden => "FieldValueForbidden",
        }
    }
}

impl fmt::Display for CauseType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One validation failure, phrased as the API server does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Kubernetes-style field path, e.g. `spec.taints[0].effect`, `spec.labels[app]`.
    pub path: String,
    /// The StatusCause type.
    pub reason: CauseType,
    /// The message without the path, e.g. `Required value` or
    /// `Invalid value: 11: spec.replicas in body should be less than or equal to 10`.
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// The Status message of a 422 for `errors` on object `name` of `kind_group` (e.g.
/// `Widget.example.com`): `Widget.example.com "w" is invalid: <error>` or `[<e1>, <e2>]`.
pub fn invalid_message(kind_group: &str, name: &str, errors: &[FieldError]) -> String {
    let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
    if list.len() == 1 {
        format!("{kind_group} {name:?} is invalid: {}", list[0])
    } else {
        format!("{kind_group} {name:?} is invalid: [{}]", list.join(", "))
    }
}

/// Whether the boolean keyword `key` of a schema node is `true` (absent: `false`).
fn flag(node: &Map<String, Value>, key: &str) -> bool {
    node.get(key).and_then(Value::as_bool).unwrap_or(false)
}
