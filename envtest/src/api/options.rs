//! Validation of the request options (`CreateOptions`, `UpdateOptions`, `PatchOptions`,
//! `DeleteOptions`, `ListOptions`, `GetOptions`) as kube-apiserver answers a bad one: 422
//! `Invalid` about the options kind in group `meta.k8s.io` with an empty name, one cause per
//! field; a resourceVersion that is not a number is a 500 carrying Go's `strconv` error.

use super::query::Query;
use crate::error::ApiError;

/// A 422 about one field of the options kind `kind` (`CreateOptions`, `ListOptions`, ...).
pub(crate) fn invalid_option(kind: &str, field: &str, reason: &str, message: String) -> ApiError {
    ApiError::invalid(
        "meta.k8s.io",
        kind,
        "",
        vec![(field.to_string(), reason.to_string(), message)],
    )
}

/// `Unsupported value: "<v>": supported values: "a", "b"`.
fn unsupported(value: &str, supported: &[&str]) -> String {
    let list: Vec<String> = supported.iter().map(|s| format!("\"{s}\"")).collect();
    format!(
        "Unsupported value: \"{value}\": supported values: {}",
        list.join(", ")
    )
}

/// The `dryRun` and `fieldValidation` parameters of a write (`kind`: `CreateOptions`,
/// `UpdateOptions`, `PatchOptions` or `DeleteOptions`; deletes have no `fieldValidation`).
pub(crate) fn check_write(q: &Query, kind: &str) -> Result<(), ApiError> {
    if let Some(d) = q.get("dryRun").filter(|d| d.as_str() != "All") {
        return Err(invalid_option(
            kind,
            "dryRun",
            "FieldValueNotSupported",
            format!("Unsupported value: [\"{d}\"]: supported values: \"All\""),
        ));
    }
    if kind != "DeleteOptions"
        && let Some(v) = q.get("fieldValidation")
        && !matches!(v.as_str(), "" | "Ignore" | "Strict" | "Warn")
    {
        return Err(invalid_option(
            kind,
            "fieldValidation",
            "FieldValueNotSupported",
            unsupported(v, &["", "Ignore", "Strict", "Warn"]),
        ));
    }
    Ok(())
}

/// `force` is for server-side apply only.
pub(crate) fn check_force(q: &Query, apply: bool) -> Result<(), ApiError> {
    if !apply && q.get("force").is_some_and(|f| f == "true" || f == "1") {
        return Err(invalid_option(
            "PatchOptions",
            "force",
            "FieldValueForbidden",
            "Forbidden: may not be specified for non-apply patch".into(),
        ));
    }
    Ok(())
}

/// An unknown `propagationPolicy`.
pub(crate) fn bad_propagation(value: &str) -> ApiError {
    invalid_option(
        "DeleteOptions",
        "propagationPolicy",
        "FieldValueNotSupported",
        unsupported(value, &["Foreground", "Background", "Orphan", "nil"]),
    )
}

/// The `resourceVersionMatch` rules of a list: it needs a `resourceVersion` and is `Exact`,
/// `NotOlderThan` or empty.
pub(crate) fn check_rv_match(q: &Query) -> Result<(), ApiError> {
    let Some(m) = q.get("resourceVersionMatch").filter(|m| !m.is_empty()) else {
        return Ok(());
    };
    if !matches!(m.as_str(), "Exact" | "NotOlderThan") {
        return Err(invalid_option(
            "ListOptions",
            "resourceVersionMatch",
            "FieldValueNotSupported",
            unsupported(m, &["Exact", "NotOlderThan", ""]),
        ));
    }
    if q.get("resourceVersion").is_none_or(String::is_empty) {
        return Err(invalid_option(
            "ListOptions",
            "resourceVersionMatch",
            "FieldValueForbidden",
            "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
                .into(),
        ));
    }
    Ok(())
}

/// Go's `strconv.ParseUint` error for a resourceVersion that is not a number.
pub(crate) fn parse_uint_error(s: &str) -> String {
    format!("strconv.ParseUint: parsing \"{s}\": invalid syntax")
}

/// A resourceVersion in an object that is not a number (500, no reason, as upstream).
pub(crate) fn object_rv(s: &str) -> Result<u64, ApiError> {
    s.parse::<u64>()
        .map_err(|_| ApiError::new(500, "", parse_uint_error(s)))
}

/// The `resourceVersion` of a get: `None` for the latest, an error for one that is not a
/// number (500) or lies in the future (504, as the watch cache answers after waiting).
pub(crate) fn get_rv(q: &Query, current: u64) -> Result<(), ApiError> {
    let Some(r) = q.get("resourceVersion").filter(|r| !r.is_empty()) else {
        return Ok(());
    };
    let rv = r.parse::<u64>().map_err(|_| invalid_rv(r))?;
    if rv > current {
        return Err(too_large_rv(rv, current));
    }
    Ok(())
}

/// A get's or watch's resourceVersion that is not a number (500, no reason, as upstream).
pub(crate) fn invalid_rv(r: &str) -> ApiError {
    ApiError::new(
        500,
        "",
        format!(
            "resourceVersion: Invalid value: \"{r}\": {}",
            parse_uint_error(r)
        ),
    )
}

/// 504 for a resourceVersion the server has not reached.
pub(crate) fn too_large_rv(rv: u64, current: u64) -> ApiError {
    ApiError::new(
        504,
        "Timeout",
        format!("Timeout: Too large resource version: {rv}, current: {current}"),
    )
    .with_details(serde_json::json!({
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        "retryAfterSeconds": 1
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::query::parse_query;

    #[test]
    fn write_options() {
        assert!(
            check_write(
                &parse_query(Some("dryRun=All&fieldValidation=Strict")),
                "CreateOptions"
            )
            .is_ok()
        );
        let e = check_write(&parse_query(Some("dryRun=Some")), "CreateOptions").unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [\"Some\"]: supported values: \"All\""
        );
        let e =
            check_write(&parse_query(Some("fieldValidation=Loud")), "UpdateOptions").unwrap_err();
        assert_eq!(
            e.message,
            "UpdateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"Loud\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
        );
        assert!(check_write(&parse_query(Some("fieldValidation=Loud")), "DeleteOptions").is_ok());
        assert!(check_force(&parse_query(Some("force=true")), true).is_ok());
        assert_eq!(
            check_force(&parse_query(Some("force=true")), false)
                .unwrap_err()
                .code,
            422
        );
        assert!(
            bad_propagation("x")
                .message
                .ends_with("\"Orphan\", \"nil\"")
        );
    }

    #[test]
    fn list_and_get_versions() {
        assert!(
            check_rv_match(&parse_query(Some(
                "resourceVersion=1&resourceVersionMatch=Exact"
            )))
            .is_ok()
        );
        let e = check_rv_match(&parse_query(Some("resourceVersionMatch=Exact"))).unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            e.message
                .contains("forbidden unless resourceVersion is provided")
        );
        let e = check_rv_match(&parse_query(Some(
            "resourceVersion=1&resourceVersionMatch=Sometimes",
        )))
        .unwrap_err();
        assert!(
            e.message
                .ends_with("supported values: \"Exact\", \"NotOlderThan\", \"\""),
            "{}",
            e.message
        );
        assert!(get_rv(&parse_query(Some("resourceVersion=3")), 3).is_ok());
        assert!(get_rv(&parse_query(Some("resourceVersion=0")), 3).is_ok());
        assert_eq!(
            get_rv(&parse_query(Some("resourceVersion=4")), 3)
                .unwrap_err()
                .code,
            504
        );
        let e = get_rv(&parse_query(Some("resourceVersion=abc")), 3).unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (500, ""));
        assert_eq!(
            object_rv("x").unwrap_err().message,
            "strconv.ParseUint: parsing \"x\": invalid syntax"
        );
    }
}
