//! The API-server side of dynamic admission: calling mutating and validating webhooks.
//!
//! Given the registered `MutatingWebhookConfiguration` / `ValidatingWebhookConfiguration`
//! objects (as JSON), the [`Attributes`] of a request and its object / old object:
//!
//! 1. [`matching_webhooks`] selects the webhooks whose `rules` match (`apiGroups`,
//!    `apiVersions`, `resources` including `*`, `*/*`, `r/sub`, `r/*`, `*/sub`; `operations`
//!    including `*`; `scope` `Cluster`/`Namespaced`/`*`), and whose `namespaceSelector` and
//!    `objectSelector` (metav1 label selectors) match;
//! 2. [`run_mutating`] sends each matching mutating webhook an `admission.k8s.io/v1`
//!    `AdmissionReview` by HTTPS POST to `clientConfig.url`, trusting only
//!    `clientConfig.caBundle` (base64 PEM), in configuration order, and applies each response's
//!    base64 `JSONPatch` to the object before calling the next one;
//! 3. [`run_validating`] does the same for validating webhooks (no patches);
//! 4. [`admit`] runs both.
//!
//! `timeoutSeconds` (default 10) bounds each call, connection and TLS handshake included.
//! When a call fails (unreachable, TLS error, timeout, non-200 status, bad response),
//! `failurePolicy: Ignore` skips the webhook and `Fail` (the default) rejects the request with
//! [`AdmissionError::CallFailed`] (the server answers 500 InternalError). A denial
//! (`allowed: false`) gives [`AdmissionError::Denied`] with the webhook's status code (403 when
//! absent or below 400) and the message `admission webhook "<name>" denied the request:
//! <message>`, as the real server phrases it. Warnings of responses are collected. A dry-run
//! request (`Attributes::dry_run`) matching a webhook whose `sideEffects` is not `None` /
//! `NoneOnDryRun` is rejected with 400 BadRequest `admission webhook "<name>" does not support
//! dry run` (reported as [`AdmissionError::Denied`]).
//!
//! Webhook configurations (and admission policies) are never sent to webhooks, as upstream.
//! Validating webhooks are called concurrently, as upstream; failures and denials are reported
//! in configuration order. `reinvocationPolicy: IfNeeded` mutating webhooks are called once
//! more after the first pass when a later webhook changed the object they returned.
//!
//! Differences from the real server: `matchConditions` (CEL), `matchPolicy: Equivalent`
//! (other versions of the same resource), `clientConfig.service` (no in-cluster services) and
//! system trust roots (a `caBundle` is required) are not supported; a webhook with only
//! `service` fails like an unreachable one, so its `failurePolicy` applies.

pub(crate) mod client;
mod matching;
mod review;
#[cfg(test)]
mod tests;
mod types;

use serde_json::Value;

use client::call;
pub use matching::matching_webhooks;
use review::{apply_response_patch, denial, parse_response, review_request};
pub use types::{AdmissionError, Admitted, Attributes, Operation, UserInfo, Webhook, WebhookKind};

/// Runs the matching mutating webhooks of `configurations` in order, applying their patches.
pub async fn run_mutating(
    configurations: &[Value],
    attrs: &Attributes,
    object: Option<Value>,
    old_object: Option<&Value>,
) -> Result<Admitted, AdmissionError> {
    let hooks = matching_webhooks(
        configurations,
        WebhookKind::Mutating,
        attrs,
        object.as_ref(),
        old_object,
    );
    run_mutating_hooks(&hooks, attrs, object, old_object).await
}

/// Runs the matching validating webhooks of `configurations`; the first denial wins.
pub async fn run_validating(
    configurations: &[Value],
    attrs: &Attributes,
    object: Option<&Value>,
    old_object: Option<&Value>,
) -> Result<Admitted, AdmissionError> {
    let hooks = matching_webhooks(
        configurations,
        WebhookKind::Validating,
        attrs,
        object,
        old_object,
    );
    run_validating_hooks(&hooks, attrs, object, old_object).await
}

/// Runs mutating then validating admission; returns the (possibly mutated) object.
pub async fn admit(
    mutating: &[Value],
    validating: &[Value],
    attrs: &Attributes,
    object: Option<Value>,
    old_object: Option<&Value>,
) -> Result<Admitted, AdmissionError> {
    let mut first = run_mutating(mutating, attrs, object, old_object).await?;
    let second = run_validating(validating, attrs, first.object.as_ref(), old_object).await?;
    first.warnings.extend(second.warnings);
    first.called.extend(second.called);
    Ok(first)
}

/// Calls one webhook; `Ok(None)` when the call failed and `failurePolicy` is `Ignore`.
async fn call_one(
    hook: &Webhook,
    attrs: &Attributes,
    object: Option<&Value>,
    old_object: Option<&Value>,
) -> Result<Option<Value>, AdmissionError> {
    if attrs.dry_run && !hook.dry_run_safe {
        return Err(AdmissionError::Denied {
            webhook: hook.name.clone(),
            code: 400,
            reason: "BadRequest".into(),
            message: format!("admission webhook {:?} does not support dry run", hook.name),
            details: None,
        });
    }
    let uid = uuid::Uuid::new_v4().to_string();
    let review = review_request(&uid, attrs, object, old_object);
    let outcome = match call(hook, &review).await {
        Ok(v) => parse_response(&v, &uid).cloned(),
        Err(cause) => Err(cause),
    };
    match outcome {
        Ok(resp) => Ok(Some(resp)),
        Err(cause) if hook.ignore_failure => {
            tracing::warn!(webhook = %hook.name, %cause, "failed calling webhook, ignoring (failurePolicy Ignore)");
            Ok(None)
        }
        Err(cause) => Err(AdmissionError::CallFailed {
            webhook: hook.name.clone(),
            message: format!("failed calling webhook {:?}: {cause}", hook.name),
        }),
    }
}

/// Records a response: warnings, denial, and (mutating only) the patch.
fn take_response(
    hook: &Webhook,
    resp: &Value,
    object: &mut Option<Value>,
    out: &mut Admitted,
) -> Result<(), AdmissionError> {
    out.called.push(hook.name.clone());
    out.warnings.extend(
        resp.get("warnings")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|w| w.as_str().map(str::to_string)),
    );
    if !resp
        .get("allowed")
        .and_then(Value::as_bool)
        .unwrap_or(false)
    {
        return Err(denial(&hook.name, resp.get("status")));
    }
    if let Some(patch) = resp.get("patch").and_then(Value::as_str) {
        *object = Some(apply_response_patch(hook, resp, patch, object.take())?);
    }
    Ok(())
}

/// Mutating webhooks: in order, each seeing the previous ones' patches; then one more call of
/// every `reinvocationPolicy: IfNeeded` webhook whose output was changed by a later webhook.
async fn run_mutating_hooks(
    hooks: &[Webhook],
    attrs: &Attributes,
    mut object: Option<Value>,
    old_object: Option<&Value>,
) -> Result<Admitted, AdmissionError> {
    let mut out = Admitted {
        object: None,
        warnings: Vec::new(),
        called: Vec::new(),
    };
    let mut seen_after: Vec<Option<Value>> = Vec::with_capacity(hooks.len());
    for hook in hooks {
        match call_one(hook, attrs, object.as_ref(), old_object).await? {
            Some(resp) => {
                take_response(hook, &resp, &mut object, &mut out)?;
                seen_after.push(object.clone());
            }
            None => seen_after.push(None),
        }
    }
    for (hook, after) in hooks.iter().zip(seen_after) {
        if hook.reinvoke
            && after.is_some()
            && after != object
            && let Some(resp) = call_one(hook, attrs, object.as_ref(), old_object).await?
        {
            take_response(hook, &resp, &mut object, &mut out)?;
        }
    }
    out.object = object;
    Ok(out)
}

/// Validating webhooks: called concurrently (as upstream); failures and denials are reported
/// in configuration order.
async fn run_validating_hooks(
    hooks: &[Webhook],
    attrs: &Attributes,
    object: Option<&Value>,
    old_object: Option<&Value>,
) -> Result<Admitted, AdmissionError> {
    let results =
        futures::future::join_all(hooks.iter().map(|h| call_one(h, attrs, object, old_object)))
            .await;
    let mut out = Admitted {
        object: None,
        warnings: Vec::new(),
        called: Vec::new(),
    };
    let mut unchanged = object.cloned();
    for (hook, result) in hooks.iter().zip(results) {
        if let Some(resp) = result? {
            take_response(hook, &resp, &mut unchanged, &mut out)?;
        }
    }
    out.object = unchanged;
    Ok(out)
}
