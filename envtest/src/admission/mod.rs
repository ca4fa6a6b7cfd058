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

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use client::call;
pub use matching::matching_webhooks;
use review::{apply_response_patch, denial, parse_response, review_request};

/// The operation of an admission request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// `CREATE`.
    Create,
    /// `UPDATE`.
    Update,
    /// `DELETE`.
    Delete,
    /// `CONNECT`.
    Connect,
}

impl Operation {
    /// The wire name (`CREATE`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
            Self::Connect => "CONNECT",
        }
    }

    /// Parses the wire name (`CREATE`, `UPDATE`, `DELETE`, `CONNECT`).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "CREATE" => Some(Self::Create),
            "UPDATE" => Some(Self::Update),
            "DELETE" => Some(Self::Delete),
            "CONNECT" => Some(Self::Connect),
            _ => None,
        }
    }

    fn options_kind(self) -> &'static str {
        match self {
            Self::Create => "CreateOptions",
            Self::Update => "UpdateOptions",
            Self::Delete => "DeleteOptions",
            Self::Connect => "ConnectOptions",
        }
    }
}

/// The requesting user, as sent in `request.userInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// User name.
    pub username: String,
    /// User UID.
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
}

/// What an admission request is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    /// API group of the resource (`""` for core).
    pub group: String,
    /// API version, e.g. `v1`.
    pub version: String,
    /// Resource (plural), e.g. `pods`.
    pub resource: String,
    /// Subresource, `""` for the main resource (e.g. `status`).
    pub subresource: String,
    /// Kind of the object, e.g. `Pod`.
    pub kind: String,
    /// The operation.
    pub operation: Operation,
    /// Namespace, `None` for cluster-scoped resources.
    pub namespace: Option<String>,
    /// Object name (may be empty on create with `generateName`).
    pub name: String,
    /// The requesting user.
    pub user: UserInfo,
    /// `?dryRun=All`.
    pub dry_run: bool,
    /// Labels of the request's namespace, for `namespaceSelector` (`None`: unknown, treated as
    /// no labels). For `namespaces` objects the object's own labels are used.
    pub namespace_labels: Option<BTreeMap<String, String>>,
}

/// Why admission rejected a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionError {
    /// A webhook answered `allowed: false`.
    #[error("{message}")]
    Denied {
        /// Name of the denying webhook.
        webhook: String,
        /// HTTP status code for the response (the webhook's, at least 400; default 403).
        code: u16,
        /// The webhook's `status.reason` (may be empty).
        reason: String,
        /// `admission webhook "<name>" denied the request: <message>`.
        message: String,
        /// The webhook's `status.details` (name, kind, field causes), passed through as the
        /// real server does: kubectl prints an `Invalid` denial's causes from it.
        details: Option<Value>,
    },
    /// A webhook with `failurePolicy: Fail` could not be called or answered nonsense
    /// (500 InternalError).
    #[error("{message}")]
    CallFailed {
        /// Name of the webhook.
        webhook: String,
        /// `failed calling webhook "<name>": <cause>`.
        message: String,
    },
    /// A mutating webhook's patch could not be applied (500 InternalError).
    #[error("{message}")]
    PatchFailed {
        /// Name of the webhook.
        webhook: String,
        /// What went wrong.
        message: String,
    },
}

impl AdmissionError {
    /// The HTTP status code the API server answers with.
    pub fn status_code(&self) -> u16 {
        match self {
            Self::Denied { code, .. } => *code,
            Self::CallFailed { .. } | Self::PatchFailed { .. } => 500,
        }
    }

    /// The metav1 Status `reason` the API server answers with.
    pub fn status_reason(&self) -> String {
        match self {
            Self::Denied { reason, .. } => reason.clone(),
            Self::CallFailed { .. } | Self::PatchFailed { .. } => "InternalError".into(),
        }
    }
}

/// Outcome of a successful admission.
#[derive(Debug, Clone, PartialEq)]
pub struct Admitted {
    /// The object after mutation (`None` when there was no object, e.g. on delete).
    pub object: Option<Value>,
    /// Warnings returned by webhooks (for the `Warning` header).
    pub warnings: Vec<String>,
    /// Names of the webhooks that were called successfully, in order.
    pub called: Vec<String>,
}

/// Whether a webhook is mutating or validating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookKind {
    /// From a `MutatingWebhookConfiguration`.
    Mutating,
    /// From a `ValidatingWebhookConfiguration`.
    Validating,
}

/// One webhook entry selected for a request.
#[derive(Debug, Clone, PartialEq)]
pub struct Webhook {
    /// `webhooks[].name`.
    pub name: String,
    /// Mutating or validating.
    pub kind: WebhookKind,
    /// `clientConfig.url`.
    pub url: Option<String>,
    /// `clientConfig.caBundle` (base64 of PEM).
    pub ca_bundle: Option<String>,
    /// `timeoutSeconds` (default 10).
    pub timeout: Duration,
    /// `failurePolicy` is `Ignore`.
    pub ignore_failure: bool,
    /// `sideEffects` is `None` or `NoneOnDryRun` (the webhook may be called for dry runs).
    pub dry_run_safe: bool,
    /// `reinvocationPolicy: IfNeeded` (mutating webhooks only).
    pub reinvoke: bool,
}

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
