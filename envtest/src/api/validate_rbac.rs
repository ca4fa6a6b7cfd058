//! Upstream's validation of RBAC objects (`pkg/apis/rbac/validation`): every rule has verbs,
//! and a resource rule API groups and resources (a non-resource rule neither, and none in a
//! namespaced Role); a binding's `roleRef` names a Role or ClusterRole of
//! `rbac.authorization.k8s.io`, and each subject has a name and a supported kind with its API
//! group. Causes as `(field, reason, message)`; where upstream's declarative validation
//! answers (`verbs`, names), its plain `Required value`.

use serde_json::Value;

type Cause = (String, String, String);

const GROUP: &str = "rbac.authorization.k8s.io";

fn required(field: String, detail: &str) -> Cause {
    let message = if detail.is_empty() {
        "Required value".to_string()
    } else {
        format!("Required value: {detail}")
    };
    (field, "FieldValueRequired".into(), message)
}

fn not_supported(field: String, value: &str, supported: &[&str]) -> Cause {
    let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    (
        field,
        "FieldValueNotSupported".into(),
        format!(
            "Unsupported value: {value:?}: supported values: {}",
            list.join(", ")
        ),
    )
}

fn empty(v: &Value) -> bool {
    v.as_array().is_none_or(Vec::is_empty)
}

/// The rules of a Role (`namespaced`) or ClusterRole (`ValidatePolicyRule`).
fn rule_causes(obj: &Value, namespaced: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (i, rule) in obj["rules"].as_array().into_iter().flatten().enumerate() {
        let at = format!("rules[{i}]");
        if empty(&rule["verbs"]) {
            causes.push(required(format!("{at}.verbs"), ""));
        }
        if !empty(&rule["nonResourceURLs"]) {
            let urls = rule["nonResourceURLs"].to_string();
            if namespaced {
                causes.push((
                    format!("{at}.nonResourceURLs"),
                    "FieldValueInvalid".into(),
                    format!(
                        "Invalid value: {urls}: namespaced rules cannot apply to non-resource URLs"
                    ),
                ));
            }
            if !empty(&rule["apiGroups"])
                || !empty(&rule["resources"])
                || !empty(&rule["resourceNames"])
            {
                causes.push((
                    format!("{at}.nonResourceURLs"),
                    "FieldValueInvalid".into(),
                    format!(
                        "Invalid value: {urls}: rules cannot apply to both regular resources and non-resource URLs"
                    ),
                ));
            }
            continue;
        }
        if empty(&rule["apiGroups"]) {
            causes.push(required(
                format!("{at}.apiGroups"),
                "resource rules must supply at least one api group",
            ));
        }
        if empty(&rule["resources"]) {
            causes.push(required(
                format!("{at}.resources"),
                "resource rules must supply at least one resource",
            ));
        }
    }
    causes
}

/// A RoleBinding (`namespaced`) or ClusterRoleBinding: its `roleRef` and subjects.
fn binding_causes(obj: &Value, namespaced: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    let role_ref = &obj["roleRef"];
    let api_group = role_ref["apiGroup"].as_str().unwrap_or_default();
    if api_group != GROUP {
        causes.push(not_supported(
            "roleRef.apiGroup".into(),
            api_group,
            &[GROUP],
        ));
    }
    let kind = role_ref["kind"].as_str().unwrap_or_default();
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    if !kinds.contains(&kind) {
        causes.push(not_supported("roleRef.kind".into(), kind, kinds));
    }
    if role_ref["name"].as_str().unwrap_or_default().is_empty() {
        causes.push(required("roleRef.name".into(), ""));
    }
    for (i, subject) in obj["subjects"].as_array().into_iter().flatten().enumerate() {
        let at = format!("subjects[{i}]");
        let name = subject["name"].as_str().unwrap_or_default();
        if name.is_empty() {
            causes.push(required(format!("{at}.name"), ""));
        }
        let group = subject["apiGroup"].as_str().unwrap_or_default();
        match subject["kind"].as_str().unwrap_or_default() {
            "ServiceAccount" => {
                if !name.is_empty() {
                    for message in kcr_names::validate_dns1123_subdomain(name) {
                        causes.push((
                            format!("{at}.name"),
                            "FieldValueInvalid".into(),
                            format!("Invalid value: {name:?}: {message}"),
                        ));
                    }
                }
                if !group.is_empty() {
                    causes.push(not_supported(format!("{at}.apiGroup"), group, &[""]));
                }
                if !namespaced && subject["namespace"].as_str().unwrap_or_default().is_empty() {
                    causes.push(required(format!("{at}.namespace"), ""));
                }
            }
            "User" | "Group" => {
                if group != GROUP {
                    causes.push(not_supported(format!("{at}.apiGroup"), group, &[GROUP]));
                }
            }
            other => causes.push(not_supported(
                format!("{at}.kind"),
                other,
                &["ServiceAccount", "User", "Group"],
            )),
        }
    }
    causes
}

/// The causes of an RBAC object of `kind` (defaults applied); none for other kinds.
pub(crate) fn causes(kind: &str, obj: &Value) -> Vec<Cause> {
    match kind {
        "Role" => rule_causes(obj, true),
        "ClusterRole" => rule_causes(obj, false),
        "RoleBinding" => binding_causes(obj, true),
        "ClusterRoleBinding" => binding_causes(obj, false),
        _ => Vec::new(),
    }
}
