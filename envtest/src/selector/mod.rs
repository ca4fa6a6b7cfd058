//! Label and field selectors, parsed and matched as the Kubernetes API server does.
//!
//! # Label selectors
//!
//! [`LabelSelector::parse`] accepts the full string syntax of `?labelSelector=`:
//!
//! | syntax            | meaning                                               |
//! |-------------------|-------------------------------------------------------|
//! | `k=v`, `k==v`     | label `k` present with value `v`                      |
//! | `k!=v`            | label `k` absent, or present with another value       |
//! | `k in (a,b)`      | label `k` present with value `a` or `b`               |
//! | `k notin (a,b)`   | label `k` absent, or present with neither `a` nor `b` |
//! | `k`               | label `k` present                                     |
//! | `!k`              | label `k` absent                                      |
//! | `k>5`, `k<5`      | label `k` present with an integer value above/below   |
//! | `r1,r2`           | both requirements hold (comma is AND)                 |
//!
//! Whitespace around operators, values and commas is ignored, as in client-go's lexer
//! (`app = web , tier in ( a , b )` is valid). Keys must be qualified names (optional DNS
//! subdomain prefix and `/`, then a name of at most 63 characters of `[A-Za-z0-9._-]` starting
//! and ending alphanumeric); values must be empty or follow the same rule as the name part.
//! The empty string selects everything.
//!
//! [`LabelSelector::from_metav1`] converts a `metav1.LabelSelector` (`matchLabels` +
//! `matchExpressions`, as a JSON value) to the same representation.
//!
//! # Field selectors
//!
//! [`FieldSelector::parse`] accepts `path=value`, `path==value` and `path!=value` terms joined by
//! commas (empty terms are skipped, nothing is trimmed, as upstream); values may escape `\,`,
//! `\=` and `\\`. Paths are dotted field paths
//! (`metadata.name`, `metadata.namespace`, `spec.nodeName`, `status.phase`, ...).
//! [`FieldSelector::matches`] looks the path up in a JSON object; a missing field or `null`
//! reads as the empty string (so `spec.nodeName=` selects unscheduled pods, as on the real
//! server), numbers and booleans read as their JSON text. Which paths a resource supports, and
//! what an absent one reads as, is the server's business (each built-in kind's descriptor
//! lists its [`SelectableField`]s): see [`FieldSelector::check_supported`] and
//! [`FieldSelector::matches_fields`].
//!
//! ```
//! use std::collections::BTreeMap;
//! use kcr_envtest::selector::{FieldSelector, LabelSelector};
//! use serde_json::json;
//!
//! let sel = LabelSelector::parse("app=web, tier in (front, edge), !canary")?;
//! let labels = BTreeMap::from([("app".to_string(), "web".to_string()), ("tier".to_string(), "edge".to_string())]);
//! assert!(sel.matches(&labels));
//! assert!(LabelSelector::parse("app in (a").is_err());
//!
//! let pods_on_node = FieldSelector::parse("spec.nodeName=node-1")?;
//! assert!(pods_on_node.matches(&json!({"spec": {"nodeName": "node-1"}})));
//! # Ok::<(), kcr_envtest::selector::SelectorError>(())
//! ```
//!
//! Errors are [`SelectorError`]s; the server turns them into `400 BadRequest`.

mod field;
mod label;
mod parse;
mod requirement;

pub use field::{
    FieldDefault, FieldOperator, FieldRequirement, FieldSelector, SelectableField, field_value,
    selectable_value,
};
pub use label::{LabelSelector, labels_of};
pub use requirement::{LabelOperator, LabelRequirement};

/// A selector string (or `metav1.LabelSelector`) that cannot be parsed or is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// The label selector string does not follow the grammar. The message is client-go's:
    /// an error inside one requirement starts with `unable to parse requirement: `, one
    /// between requirements (`a=b c`) does not.
    #[error("{0}")]
    Syntax(String),
    /// A label key is not a valid qualified name.
    #[error("unable to parse requirement: <nil>: Invalid value: {key:?}: {reason}")]
    InvalidKey {
        /// The offending key.
        key: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A label value is not a valid label value.
    #[error(
        "unable to parse requirement: values[{index}][{key}]: Invalid value: {value:?}: {reason}"
    )]
    InvalidValue {
        /// The key of the requirement.
        key: String,
        /// Position of the value in the requirement's value list.
        index: usize,
        /// The offending value.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A field selector term has no operator.
    #[error("invalid selector: '{0}'; can't understand '{1}'")]
    FieldSyntax(String, String),
    /// The field path is not supported for the resource.
    #[error("field label not supported: {0}")]
    UnsupportedField(String),
    /// A `metav1.LabelSelector` object is malformed.
    #[error("invalid label selector object: {0}")]
    Object(String),
}

#[cfg(test)]
mod tests;
