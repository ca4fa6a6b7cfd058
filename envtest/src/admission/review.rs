//! The `AdmissionReview` exchange: the request sent, the checks on the response, a denial's
//! error and a mutating webhook's JSONPatch.

use base64::Engine as _;
use serde_json::{Value, json};

use super::{AdmissionError, Attributes, Webhook, WebhookKind};

/// Applies a mutating webhook's base64 `JSONPatch` response to the object.
pub(super) fn apply_response_patch(
    hook: &Webhook,
    resp: &Value,
    patch: &str,
    object: Option<Value>,
) -> Result<Value, AdmissionError> {
    let fail = |message: String| AdmissionError::PatchFailed {
        webhook: hook.name.clone(),
        message,
    };
    if hook.kind == WebhookKind::Validating {
        return Err(fail(format!(
            "validating webhook {:?} returned a patch, which only mutating webhooks may do",
            hook.name
        )));
    }
    let patch_type = resp.get("patchType").and_then(Value::as_str);
    if patch_type != Some("JSONPatch") {
        return Err(fail(format!(
            "webhook {:?} returned unsupported patchType {patch_type:?} (only JSONPatch)",
            hook.name
        )));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .map_err(|e| {
            fail(format!(
                "webhook {:?} returned a patch that is not base64: {e}",
                hook.name
            ))
        })?;
    let ops: Value = serde_json::from_slice(&bytes).map_err(|e| {
        fail(format!(
            "webhook {:?} returned a patch that is not JSON: {e}",
            hook.name
        ))
    })?;
    let Some(target) = object else {
        return Err(fail(format!(
            "webhook {:?} returned a patch for a request without an object",
            hook.name
        )));
    };
    crate::patch::json_patch(&target, &ops).map_err(|e| {
        fail(format!(
            "applying the patch of webhook {:?}: {e}",
            hook.name
        ))
    })
}

/// The error of a denial (`allowed: false`), with the webhook's status code and message.
pub(super) fn denial(webhook: &str, status: Option<&Value>) -> AdmissionError {
    let code = status
        .and_then(|s| s.get("code"))
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(403);
    let text = |k: &str| {
        status
            .and_then(|s| s.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (message, reason) = (text("message"), text("reason"));
    let denied_by = format!("admission webhook {webhook:?} denied the request");
    let message = if !message.is_empty() {
        format!("{denied_by}: {message}")
    } else if !reason.is_empty() {
        format!("{denied_by}: {reason}")
    } else {
        format!("{denied_by} without explanation")
    };
    AdmissionError::Denied {
        webhook: webhook.to_string(),
        code,
        reason,
        message,
        details: status
            .and_then(|s| s.get("details"))
            .filter(|d| d.is_object())
            .cloned(),
    }
}

/// The `AdmissionReview` request sent to a webhook.
pub(super) fn review_request(
    uid: &str,
    attrs: &Attributes,
    object: Option<&Value>,
    old_object: Option<&Value>,
) -> Value {
    let kind = json!({"group": attrs.group, "version": attrs.version, "kind": attrs.kind});
    let resource =
        json!({"group": attrs.group, "version": attrs.version, "resource": attrs.resource});
    let mut request = json!({
        "uid": uid,
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": attrs.name,
        "operation": attrs.operation.as_str(),
        "userInfo": {"username": attrs.user.username, "uid": attrs.user.uid, "groups": attrs.user.groups},
        "object": object.cloned().unwrap_or(Value::Null),
        "oldObject": old_object.cloned().unwrap_or(Value::Null),
        "dryRun": attrs.dry_run,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": attrs.operation.options_kind()},
    });
    if let Value::Object(m) = &mut request {
        if !attrs.subresource.is_empty() {
            m.insert("subResource".into(), json!(attrs.subresource));
            m.insert("requestSubResource".into(), json!(attrs.subresource));
        }
        if let Some(ns) = &attrs.namespace {
            m.insert("namespace".into(), json!(ns));
        }
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

/// The `response` of a webhook's review, after checking its kind and `uid`.
pub(super) fn parse_response<'a>(review: &'a Value, uid: &str) -> Result<&'a Value, String> {
    let api_version = review.get("apiVersion").and_then(Value::as_str);
    let kind = review.get("kind").and_then(Value::as_str);
    if api_version != Some("admission.k8s.io/v1") || kind != Some("AdmissionReview") {
        return Err(format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {}, Kind={}",
            api_version.unwrap_or_default(),
            kind.unwrap_or_default()
        ));
    }
    let resp = review
        .get("response")
        .filter(|r| r.is_object())
        .ok_or_else(|| "webhook response was absent".to_string())?;
    let got = resp.get("uid").and_then(Value::as_str).unwrap_or_default();
    if got != uid {
        return Err(format!("expected response.uid={uid:?}, got {got:?}"));
    }
    Ok(resp)
}
