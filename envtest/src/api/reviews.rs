//! `TokenReview` and `SubjectAccessReview`, computed as kube-apiserver computes them for a
//! delegating authenticator and authorizer (a secured metrics endpoint, an aggregated API):
//!
//! - a TokenReview authenticates the tokens this process issued through the TokenRequest API
//!   (signature, `exp`/`nbf`, audiences, and the ServiceAccount still existing with the uid the
//!   token names), as `system:serviceaccount:<ns>:<name>` in the groups
//!   `system:serviceaccounts`, `system:serviceaccounts:<ns>` and `system:authenticated`; any
//!   other token is not authenticated (`status.error`);
//! - a SubjectAccessReview evaluates RBAC over the stored ClusterRoleBindings (and, for a
//!   namespaced resource, the RoleBindings of its namespace) and the roles they reference, the
//!   bootstrap policy included (so `system:masters` may do anything): a rule matches by verb,
//!   API group, resource (`resource/subresource`), resource name, or non-resource URL (`*` and
//!   a trailing `*` prefix as upstream). Aggregated ClusterRoles count with the rules stored in
//!   them. Nothing else is enforced: requests to this server are still not authorized.

use http::{Response, StatusCode};
use serde_json::{Value, json};

use super::decode::parse_body;
use super::response::json_value;
use super::route::Route;
use super::{Body, Call};
use crate::error::ApiError;
use crate::store::Store;

const TOKEN_REVIEWS: &str = "authentication.k8s.io/tokenreviews";
const ACCESS_REVIEWS: &str = "authorization.k8s.io/subjectaccessreviews";
const RBAC: &str = "rbac.authorization.k8s.io";

/// Whether `route` is one of the reviews.
pub(crate) fn is_review(route: &Route) -> bool {
    route.subresource.is_none() && [TOKEN_REVIEWS, ACCESS_REVIEWS].contains(&route.t.key().as_str())
}

/// Answers a review (only `create` reaches here: discovery lists no other verb).
pub(crate) fn answer(call: &Call<'_>, verb: &str) -> Result<Response<Body>, ApiError> {
    if verb != "create" {
        return Err(ApiError::method_not_allowed());
    }
    if call.route.t.key() == TOKEN_REVIEWS {
        token_review(call)
    } else {
        access_review(call)
    }
}

fn check_kind(body: &Value, kind: &str) -> Result<(), ApiError> {
    match body["kind"].as_str() {
        Some(k) if k != kind => Err(ApiError::bad_request(format!(
            "the body is a {k}, not a {kind}"
        ))),
        _ => Ok(()),
    }
}

/// The review echoed with its status, as upstream answers (201, nothing stored).
fn answered(mut review: Value, api_version: &str, kind: &str, status: Value) -> Response<Body> {
    review["apiVersion"] = json!(api_version);
    review["kind"] = json!(kind);
    if !review["metadata"].is_object() {
        review["metadata"] = json!({});
    }
    review["metadata"]["creationTimestamp"] = Value::Null;
    review["status"] = status;
    json_value(StatusCode::CREATED, &review)
}

fn token_review(call: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let review = parse_body(call.body, "TokenReview")?;
    check_kind(&review, "TokenReview")?;
    let Some(token) = review["spec"]["token"].as_str().filter(|t| !t.is_empty()) else {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    };
    let wanted: Vec<String> = review["spec"]["audiences"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .filter(|a: &Vec<String>| !a.is_empty())
        .unwrap_or_else(super::computed::default_audiences);
    let status = match authenticate(&call.shared.store.lock(), token, &wanted) {
        Ok((user, audiences)) => {
            json!({"authenticated": true, "user": user, "audiences": audiences})
        }
        Err(reason) => json!({"user": {}, "error": reason}),
    };
    Ok(answered(
        review,
        "authentication.k8s.io/v1",
        "TokenReview",
        status,
    ))
}

/// The user of `token` and the audiences it was accepted for, or why it is not authenticated.
fn authenticate(store: &Store, token: &str, wanted: &[String]) -> Result<(Value, Value), String> {
    let invalid =
        || "[invalid bearer token, service account token has been invalidated]".to_owned();
    let claims = super::computed::verified_claims(token).ok_or_else(invalid)?;
    let now = jiff::Timestamp::now().as_second();
    if claims["exp"].as_i64().is_none_or(|exp| exp <= now)
        || claims["nbf"].as_i64().is_some_and(|nbf| nbf > now)
    {
        return Err("[invalid bearer token, service account token has expired]".into());
    }
    let audiences: Vec<String> = match &claims["aud"] {
        Value::String(a) => vec![a.clone()],
        Value::Array(a) => a
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    let accepted: Vec<&String> = wanted.iter().filter(|w| audiences.contains(w)).collect();
    if accepted.is_empty() {
        return Err(
            "[invalid bearer token, token audiences [...] is invalid for the target audiences]"
                .into(),
        );
    }
    let sa = &claims["kubernetes.io"]["serviceaccount"];
    let ns = claims["kubernetes.io"]["namespace"]
        .as_str()
        .unwrap_or_default();
    let name = sa["name"].as_str().unwrap_or_default();
    let uid = sa["uid"].as_str().unwrap_or_default();
    match store.get("serviceaccounts", ns, name) {
        Some(stored) if stored.uid() == uid => {}
        _ => {
            return Err(format!(
                "[invalid bearer token, service account {ns}/{name} has been deleted or recreated]"
            ));
        }
    }
    let mut user = json!({
        "username": format!("system:serviceaccount:{ns}:{name}"),
        "uid": uid,
        "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{ns}"), "system:authenticated"],
    });
    if let Some(jti) = claims["jti"].as_str() {
        user["extra"] =
            json!({"authentication.kubernetes.io/credential-id": [format!("JTI={jti}")]});
    }
    Ok((user, json!(accepted)))
}

/// What is asked of the authorizer.
#[derive(Debug)]
enum Attributes {
    Resource {
        verb: String,
        group: String,
        resource: String,
        namespace: String,
        name: String,
    },
    NonResource {
        verb: String,
        path: String,
    },
}

fn access_review(call: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let review = parse_body(call.body, "SubjectAccessReview")?;
    check_kind(&review, "SubjectAccessReview")?;
    let spec = &review["spec"];
    let str_of = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let attributes = match (
        spec["resourceAttributes"].as_object(),
        spec["nonResourceAttributes"].as_object(),
    ) {
        (Some(_), None) => {
            let r = &spec["resourceAttributes"];
            let resource = match r["subresource"].as_str().filter(|s| !s.is_empty()) {
                Some(sub) => format!("{}/{sub}", str_of(&r["resource"])),
                None => str_of(&r["resource"]),
            };
            Attributes::Resource {
                verb: str_of(&r["verb"]),
                group: str_of(&r["group"]),
                resource,
                namespace: str_of(&r["namespace"]),
                name: str_of(&r["name"]),
            }
        }
        (None, Some(_)) => Attributes::NonResource {
            verb: str_of(&spec["nonResourceAttributes"]["verb"]),
            path: str_of(&spec["nonResourceAttributes"]["path"]),
        },
        _ => {
            return Err(ApiError::invalid(
                "authorization.k8s.io",
                "SubjectAccessReview",
                "",
                vec![(
                    "spec.resourceAttributes".into(),
                    "FieldValueInvalid".into(),
                    "Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified".into(),
                )],
            ));
        }
    };
    let user = str_of(&spec["user"]);
    let groups: Vec<String> = spec["groups"]
        .as_array()
        .map(|g| {
            g.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if user.is_empty() && groups.is_empty() {
        return Err(ApiError::invalid(
            "authorization.k8s.io",
            "SubjectAccessReview",
            "",
            vec![(
                "spec.user".into(),
                "FieldValueInvalid".into(),
                "Invalid value: \"\": at least one of user or group must be specified".into(),
            )],
        ));
    }
    let status = match authorize(&call.shared.store.lock(), &user, &groups, &attributes) {
        Some(reason) => json!({"allowed": true, "reason": reason}),
        None => json!({"allowed": false}),
    };
    Ok(answered(
        review,
        "authorization.k8s.io/v1",
        "SubjectAccessReview",
        status,
    ))
}

/// Whether a binding's subject is this user or one of its groups.
fn subject_matches(subject: &Value, user: &str, groups: &[String]) -> bool {
    let name = subject["name"].as_str().unwrap_or_default();
    match subject["kind"].as_str() {
        Some("User") => !user.is_empty() && name == user,
        Some("Group") => groups.iter().any(|g| g == name),
        Some("ServiceAccount") => {
            let ns = subject["namespace"].as_str().unwrap_or_default();
            user == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

fn has(list: &Value, wanted: &str) -> bool {
    list.as_array()
        .is_some_and(|l| l.iter().any(|v| v == "*" || v == wanted))
}

fn rule_allows(rule: &Value, attributes: &Attributes) -> bool {
    match attributes {
        Attributes::NonResource { verb, path } => {
            has(&rule["verbs"], verb)
                && rule["nonResourceURLs"].as_array().is_some_and(|urls| {
                    urls.iter().filter_map(Value::as_str).any(|u| {
                        u == "*"
                            || u == path
                            || u.strip_suffix('*').is_some_and(|p| path.starts_with(p))
                    })
                })
        }
        Attributes::Resource {
            verb,
            group,
            resource,
            name,
            ..
        } => {
            let names_ok = match rule["resourceNames"].as_array() {
                None => true,
                Some(n) if n.is_empty() => true,
                Some(n) => n.iter().any(|v| v == name.as_str()),
            };
            let resource_ok = rule["resources"].as_array().is_some_and(|rs| {
                rs.iter().filter_map(Value::as_str).any(|r| {
                    r == "*"
                        || r == resource
                        || resource
                            .split_once('/')
                            .is_some_and(|(_, sub)| r == format!("*/{sub}"))
                })
            });
            has(&rule["verbs"], verb) && has(&rule["apiGroups"], group) && resource_ok && names_ok
        }
    }
}

/// The reason upstream gives when a binding allows the request, or `None` when none does.
fn authorize(
    store: &Store,
    user: &str,
    groups: &[String],
    attributes: &Attributes,
) -> Option<String> {
    let role_rules = |kind: &str, ns: &str, name: &str| -> Vec<Value> {
        let resource = if kind == "ClusterRole" {
            format!("{RBAC}/clusterroles")
        } else {
            format!("{RBAC}/roles")
        };
        let ns = if kind == "ClusterRole" { "" } else { ns };
        store
            .get(&resource, ns, name)
            .and_then(|r| r.value["rules"].as_array().cloned())
            .unwrap_or_default()
    };
    let namespace = match attributes {
        Attributes::Resource { namespace, .. } if !namespace.is_empty() => Some(namespace.clone()),
        _ => None,
    };
    let cluster_bindings = store
        .range(&format!("{RBAC}/clusterrolebindings"), None, None)
        .map(|(_, b)| ("ClusterRoleBinding", b.value.clone()));
    let role_bindings: Vec<(&str, Value)> = match &namespace {
        Some(ns) => store
            .range(&format!("{RBAC}/rolebindings"), Some(ns.as_str()), None)
            .map(|(_, b)| ("RoleBinding", b.value.clone()))
            .collect(),
        None => Vec::new(),
    };
    for (binding_kind, binding) in cluster_bindings.chain(role_bindings) {
        let Some(subject) = binding["subjects"]
            .as_array()
            .and_then(|s| s.iter().find(|s| subject_matches(s, user, groups)))
        else {
            continue;
        };
        let role_kind = binding["roleRef"]["kind"].as_str().unwrap_or_default();
        let role_name = binding["roleRef"]["name"].as_str().unwrap_or_default();
        let binding_ns = binding["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default();
        if role_rules(role_kind, binding_ns, role_name)
            .iter()
            .any(|rule| rule_allows(rule, attributes))
        {
            let binding_name = binding["metadata"]["name"].as_str().unwrap_or_default();
            let at = if binding_kind == "RoleBinding" {
                format!(" in namespace {binding_ns:?}")
            } else {
                String::new()
            };
            let who = match subject["kind"].as_str() {
                Some("ServiceAccount") => format!(
                    "ServiceAccount \"{}/{}\"",
                    subject["namespace"].as_str().unwrap_or_default(),
                    subject["name"].as_str().unwrap_or_default()
                ),
                Some(kind) => format!("{kind} {:?}", subject["name"].as_str().unwrap_or_default()),
                None => String::new(),
            };
            return Some(format!(
                "RBAC: allowed by {binding_kind} \"{binding_name}\" of {role_kind} \"{role_name}\" to {who}{at}"
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_match_as_upstream() {
        let non_resource = |verb: &str, path: &str| Attributes::NonResource {
            verb: verb.into(),
            path: path.into(),
        };
        let metrics = json!({"nonResourceURLs": ["/metrics"], "verbs": ["get"]});
        assert!(rule_allows(&metrics, &non_resource("get", "/metrics")));
        assert!(!rule_allows(&metrics, &non_resource("post", "/metrics")));
        assert!(!rule_allows(&metrics, &non_resource("get", "/metrics/x")));
        let prefix = json!({"nonResourceURLs": ["/healthz*"], "verbs": ["*"]});
        assert!(rule_allows(&prefix, &non_resource("get", "/healthz/ping")));
        assert!(!rule_allows(&prefix, &non_resource("get", "/metrics")));

        let resource = |verb: &str, group: &str, resource: &str, name: &str| Attributes::Resource {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            namespace: "ns".into(),
            name: name.into(),
        };
        let reviews = json!({"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]});
        assert!(rule_allows(
            &reviews,
            &resource("create", "authentication.k8s.io", "tokenreviews", "")
        ));
        assert!(!rule_allows(
            &reviews,
            &resource("create", "authorization.k8s.io", "tokenreviews", "")
        ));
        assert!(!rule_allows(
            &reviews,
            &resource("get", "authentication.k8s.io", "tokenreviews", "")
        ));
        assert!(!rule_allows(&reviews, &non_resource("create", "/metrics")));
        let named = json!({"apiGroups": [""], "resources": ["configmaps", "*/status"], "resourceNames": ["a"], "verbs": ["get"]});
        assert!(rule_allows(&named, &resource("get", "", "configmaps", "a")));
        assert!(!rule_allows(
            &named,
            &resource("get", "", "configmaps", "b")
        ));
        assert!(rule_allows(
            &named,
            &resource("get", "", "pods/status", "a")
        ));
        assert!(!rule_allows(&named, &resource("get", "", "pods", "a")));
    }

    #[test]
    fn subjects_match_users_groups_and_service_accounts() {
        let groups = vec!["system:serviceaccounts".to_owned()];
        let sa = "system:serviceaccount:ns:reader";
        assert!(subject_matches(
            &json!({"kind": "ServiceAccount", "name": "reader", "namespace": "ns"}),
            sa,
            &groups
        ));
        assert!(!subject_matches(
            &json!({"kind": "ServiceAccount", "name": "reader", "namespace": "other"}),
            sa,
            &groups
        ));
        assert!(subject_matches(
            &json!({"kind": "Group", "name": "system:serviceaccounts"}),
            sa,
            &groups
        ));
        assert!(subject_matches(
            &json!({"kind": "User", "name": sa}),
            sa,
            &groups
        ));
        assert!(!subject_matches(
            &json!({"kind": "User", "name": ""}),
            "",
            &groups
        ));
    }
}
