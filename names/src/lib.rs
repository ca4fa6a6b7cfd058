//! # kcr-names: the Kubernetes rules for names, label keys and label values
//!
//! One place for the checks that the API server applies to names and labels, so every kcr crate
//! (the sources' selectors, kcr-envtest, the NodePool operator) agrees with the server and with
//! each other. Each `validate_*` function returns the API server's messages for what is wrong, in
//! its order; an empty list means the value is valid. Each `is_*` function is the same check as a
//! yes or no.
//!
//! The rules and the message texts follow `k8s.io/apimachinery/pkg/util/validation`:
//!
//! | function | rule |
//! |---|---|
//! | [`validate_qualified_name`] | a label or annotation key: `[prefix/]name`, the prefix a DNS-1123 subdomain, the name at most 63 characters of alphanumerics, `-`, `_`, `.`, alphanumeric at both ends |
//! | [`validate_label_value`] | empty, or a name part as above |
//! | [`validate_dns1123_label`] | at most 63 characters of `a-z`, `0-9`, `-`, alphanumeric at both ends (namespaces, most names) |
//! | [`validate_dns1123_subdomain`] | at most 253 characters: DNS-1123 labels joined by `.` (most object names) |
//! | [`validate_dns1035_label`] | a DNS-1123 label that starts with a letter (Service names) |
//!
//! The crate has no dependencies, so any crate may use it.
//!
//! ```
//! use kcr_names::{is_qualified_name, validate_label_value, validate_qualified_name};
//!
//! assert!(is_qualified_name("node-role.kubernetes.io/worker"));
//! assert_eq!(
//!     validate_qualified_name("/worker"),
//!     vec!["prefix part must be non-empty".to_string()],
//! );
//! assert!(validate_label_value("").is_empty()); // an empty value is a valid label value
//! assert_eq!(validate_label_value(&"x".repeat(64)), vec!["must be no more than 63 characters"]);
//! ```
#![forbid(unsafe_code)]

/// The longest DNS-1123 or DNS-1035 label.
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
/// The longest DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
/// The longest name part of a qualified name.
pub const QUALIFIED_NAME_MAX_LENGTH: usize = 63;
/// The longest label value.
pub const LABEL_VALUE_MAX_LENGTH: usize = 63;

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_EXAMPLES: &[&str] = &["MyName", "my.name", "123-abc"];
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_EXAMPLES: &[&str] = &["MyValue", "my_value", "12345"];
const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_LABEL_EXAMPLES: &[&str] = &["my-name", "123-abc"];
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_EXAMPLES: &[&str] = &["example.com"];
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const DNS1035_LABEL_EXAMPLES: &[&str] = &["my-name", "abc-123"];

/// The API server's text for a value longer than `max`: `must be no more than <max> characters`.
pub fn max_len_message(max: usize) -> String {
    format!("must be no more than {max} characters")
}

/// The API server's text for a value that does not match a pattern: the rule, examples, and the
/// regular expression it is checked with (as `RegexError` in apimachinery words it).
fn regex_message(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut out = String::from(msg);
    if examples.is_empty() {
        out.push_str(" (regex used for validation is '");
    } else {
        out.push_str(" (e.g. ");
        for (i, example) in examples.iter().enumerate() {
            if i > 0 {
                out.push_str(" or ");
            }
            out.push('\'');
            out.push_str(example);
            out.push_str("', ");
        }
        out.push_str("regex used for validation is '");
    }
    out.push_str(fmt);
    out.push_str("')");
    out
}

/// A name part: alphanumeric at both ends, alphanumerics, `-`, `_` and `.` between.
fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

fn is_lower_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// The DNS-1123 label pattern, without its length limit.
fn matches_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&first), Some(&last)) => {
            is_lower_alnum(first)
                && is_lower_alnum(last)
                && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
        }
        _ => false,
    }
}

/// The DNS-1123 subdomain pattern (labels joined by dots), without its length limit.
fn matches_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(matches_dns1123_label)
}

/// Checks a qualified name (a label or annotation key): an optional DNS-1123 subdomain prefix
/// and `/`, then a name part of at most 63 characters. Returns the API server's messages, empty
/// when valid.
pub fn validate_qualified_name(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_string());
            } else {
                errors.extend(
                    validate_dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errors.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_message(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, QUALIFIED_NAME_EXAMPLES)
            ));
            return errors;
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_string());
    } else if name.len() > QUALIFIED_NAME_MAX_LENGTH {
        errors.push(format!(
            "name part {}",
            max_len_message(QUALIFIED_NAME_MAX_LENGTH)
        ));
    }
    if !is_name_part(name) {
        errors.push(format!(
            "name part {}",
            regex_message(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_FMT,
                QUALIFIED_NAME_EXAMPLES
            )
        ));
    }
    errors
}

/// The API server's messages for `value` against a pattern: too long when over `max_len`, the
/// pattern's message (`msg`, `fmt`, `examples`) when `matches` is false; empty when valid.
fn check(
    value: &str,
    max_len: usize,
    matches: bool,
    (msg, fmt, examples): (&str, &str, &[&str]),
) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > max_len {
        errors.push(max_len_message(max_len));
    }
    if !matches {
        errors.push(regex_message(msg, fmt, examples));
    }
    errors
}

/// Checks a label value: empty, or at most 63 characters of alphanumerics, `-`, `_` and `.`,
/// alphanumeric at both ends. Returns the API server's messages, empty when valid.
pub fn validate_label_value(value: &str) -> Vec<String> {
    check(
        value,
        LABEL_VALUE_MAX_LENGTH,
        value.is_empty() || is_name_part(value),
        (LABEL_VALUE_MSG, LABEL_VALUE_FMT, LABEL_VALUE_EXAMPLES),
    )
}

/// Checks a DNS-1123 label: at most 63 characters of lowercase alphanumerics and `-`,
/// alphanumeric at both ends. Returns the API server's messages, empty when valid: a value
/// that would be a valid DNS-1123 subdomain gets "must not contain dots" instead of the
/// pattern's message, as upstream's `IsDNS1123Label` answers.
pub fn validate_dns1123_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errors.push(max_len_message(DNS1123_LABEL_MAX_LENGTH));
    }
    if !matches_dns1123_label(value) {
        if matches_dns1123_subdomain(value) {
            errors.push("must not contain dots".to_string());
        } else {
            errors.push(regex_message(
                DNS1123_LABEL_MSG,
                DNS1123_LABEL_FMT,
                DNS1123_LABEL_EXAMPLES,
            ));
        }
    }
    errors
}

/// Checks a DNS-1123 subdomain: at most 253 characters, DNS-1123 labels joined by `.`. Returns
/// the API server's messages, empty when valid.
pub fn validate_dns1123_subdomain(value: &str) -> Vec<String> {
    check(
        value,
        DNS1123_SUBDOMAIN_MAX_LENGTH,
        matches_dns1123_subdomain(value),
        (
            DNS1123_SUBDOMAIN_MSG,
            DNS1123_SUBDOMAIN_FMT,
            DNS1123_SUBDOMAIN_EXAMPLES,
        ),
    )
}

/// Checks a DNS-1035 label: a DNS-1123 label that starts with a lowercase letter. Returns the API
/// server's messages, empty when valid.
pub fn validate_dns1035_label(value: &str) -> Vec<String> {
    check(
        value,
        DNS1123_LABEL_MAX_LENGTH,
        matches_dns1123_label(value) && value.as_bytes()[0].is_ascii_lowercase(),
        (DNS1035_LABEL_MSG, DNS1035_LABEL_FMT, DNS1035_LABEL_EXAMPLES),
    )
}

/// Whether `value` is a valid qualified name (label or annotation key).
pub fn is_qualified_name(value: &str) -> bool {
    validate_qualified_name(value).is_empty()
}

/// Whether `value` is a valid label value.
pub fn is_label_value(value: &str) -> bool {
    value.len() <= LABEL_VALUE_MAX_LENGTH && (value.is_empty() || is_name_part(value))
}

/// Whether `value` is a valid name part of a qualified name (a key without prefix): 1 to 63
/// characters of alphanumerics, `-`, `_` and `.`, alphanumeric at both ends.
pub fn is_label_name(value: &str) -> bool {
    value.len() <= QUALIFIED_NAME_MAX_LENGTH && is_name_part(value)
}

/// Whether `value` is a valid DNS-1123 label.
pub fn is_dns1123_label(value: &str) -> bool {
    value.len() <= DNS1123_LABEL_MAX_LENGTH && matches_dns1123_label(value)
}

/// Whether `value` is a valid DNS-1123 subdomain.
pub fn is_dns1123_subdomain(value: &str) -> bool {
    value.len() <= DNS1123_SUBDOMAIN_MAX_LENGTH && matches_dns1123_subdomain(value)
}

/// Whether `value` is a valid DNS-1035 label.
pub fn is_dns1035_label(value: &str) -> bool {
    validate_dns1035_label(value).is_empty()
}

#[cfg(test)]
mod tests;
