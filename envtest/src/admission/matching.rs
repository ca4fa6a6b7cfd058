//! Which webhooks a request goes to: `rules` (groups, versions, resources with subresource
//! wildcards, operations, scope), `namespaceSelector` and `objectSelector`.

use std::time::Duration;

use serde_json::Value;

use super::{Attributes, Webhook, WebhookKind};
use crate::selector::{LabelSelector, labels_of};

/// The webhooks of `configurations` (objects of one kind) that match the request, in order.
pub fn matching_webhooks(
    configurations: &[Value],
    kind: WebhookKind,
    attrs: &Attributes,
    object: Option<&Value>,
    old_object: Option<&Value>,
) -> Vec<Webhook> {
    let mut out = Vec::new();
    // As upstream, webhook configurations themselves are never sent to webhooks, so a broken
    // webhook can always be removed.
    if attrs.group == "admissionregistration.k8s.io"
        && matches!(
            attrs.resource.as_str(),
            "validatingwebhookconfigurations"
                | "mutatingwebhookconfigurations"
                | "validatingadmissionpolicies"
                | "validatingadmissionpolicybindings"
                | "mutatingadmissionpolicies"
                | "mutatingadmissionpolicybindings"
        )
    {
        return out;
    }
    for config in configurations {
        let Some(hooks) = config.get("webhooks").and_then(Value::as_array) else {
            continue;
        };
        for hook in hooks {
            if !rules_match(hook, attrs)
                || !namespace_selector_matches(hook, attrs, object, old_object)
                || !object_selector_matches(hook, object, old_object)
            {
                continue;
            }
            let cc = hook.get("clientConfig");
            let timeout = hook
                .get("timeoutSeconds")
                .and_then(Value::as_u64)
                .unwrap_or(10)
                .clamp(1, 30);
            out.push(Webhook {
                name: hook
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                kind,
                url: cc
                    .and_then(|c| c.get("url"))
                    .and_then(Value::as_str)
                    .map(str::to_string),
                ca_bundle: cc
                    .and_then(|c| c.get("caBundle"))
                    .and_then(Value::as_str)
                    .map(str::to_string),
                timeout: Duration::from_secs(timeout),
                ignore_failure: hook.get("failurePolicy").and_then(Value::as_str) == Some("Ignore"),
                reinvoke: kind == WebhookKind::Mutating
                    && hook.get("reinvocationPolicy").and_then(Value::as_str) == Some("IfNeeded"),
                dry_run_safe: matches!(
                    hook.get("sideEffects").and_then(Value::as_str),
                    Some("None" | "NoneOnDryRun")
                ),
            });
        }
    }
    out
}

fn list_has(list: Option<&Value>, wanted: &str) -> bool {
    list.and_then(Value::as_array).is_some_and(|items| {
        items
            .iter()
            .filter_map(Value::as_str)
            .any(|s| s == "*" || s == wanted)
    })
}

fn resource_matches(patterns: Option<&Value>, resource: &str, subresource: &str) -> bool {
    let Some(items) = patterns.and_then(Value::as_array) else {
        return false;
    };
    items.iter().filter_map(Value::as_str).any(|p| {
        let (pr, ps) = p.split_once('/').unwrap_or((p, ""));
        // As upstream: `*` = all main resources, `r/*` and `*/*` include the main resource.
        (pr == "*" || pr == resource) && (ps == "*" || ps == subresource)
    })
}

fn rules_match(hook: &Value, attrs: &Attributes) -> bool {
    let Some(rules) = hook.get("rules").and_then(Value::as_array) else {
        return false;
    };
    rules.iter().any(|rule| {
        let scope_ok = match rule.get("scope").and_then(Value::as_str).unwrap_or("*") {
            "Cluster" => attrs.namespace.is_none(),
            "Namespaced" => attrs.namespace.is_some(),
            _ => true,
        };
        scope_ok
            && list_has(rule.get("apiGroups"), &attrs.group)
            && list_has(rule.get("apiVersions"), &attrs.version)
            && list_has(rule.get("operations"), attrs.operation.as_str())
            && resource_matches(rule.get("resources"), &attrs.resource, &attrs.subresource)
    })
}

/// Whether the label selector in `hook[field]` selects, `matches` deciding for a selector
/// that is not empty. An absent, `null` or empty selector selects everything; an invalid one
/// selects nothing (the real server rejects such configurations).
fn hook_selector_matches(
    hook: &Value,
    field: &str,
    matches: impl FnOnce(&LabelSelector) -> bool,
) -> bool {
    let Some(sel) = hook.get(field).filter(|s| !s.is_null()) else {
        return true;
    };
    match LabelSelector::from_metav1(sel) {
        Err(_) => false,
        Ok(selector) if selector.is_empty() => true,
        Ok(selector) => matches(&selector),
    }
}

fn namespace_selector_matches(
    hook: &Value,
    attrs: &Attributes,
    object: Option<&Value>,
    old_object: Option<&Value>,
) -> bool {
    hook_selector_matches(hook, "namespaceSelector", |selector| {
        if attrs.group.is_empty() && attrs.resource == "namespaces" {
            let obj = object.or(old_object);
            return obj.is_some_and(|o| selector.matches_object(o));
        }
        if attrs.namespace.is_none() {
            return true;
        }
        let labels = attrs.namespace_labels.clone().unwrap_or_default();
        selector.matches(&labels)
    })
}

fn object_selector_matches(
    hook: &Value,
    object: Option<&Value>,
    old_object: Option<&Value>,
) -> bool {
    hook_selector_matches(hook, "objectSelector", |selector| {
        [object, old_object]
            .into_iter()
            .flatten()
            .any(|o| selector.matches(&labels_of(o)))
    })
}
