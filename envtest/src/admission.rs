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

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

use crate::selector::{LabelSelector, labels_of};

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

fn namespace_selector_matches(
    hook: &Value,
    attrs: &Attributes,
    object: Option<&Value>,
    old_object: Option<&Value>,
) -> bool {
    let Some(sel) = hook.get("namespaceSelector").filter(|s| !s.is_null()) else {
        return true;
    };
    let Ok(selector) = LabelSelector::from_metav1(sel) else {
        // An invalid selector matches nothing (the real server rejects such configurations).
        return false;
    };
    if selector.is_empty() {
        return true;
    }
    if attrs.group.is_empty() && attrs.resource == "namespaces" {
        let obj = object.or(old_object);
        return obj.is_some_and(|o| selector.matches_object(o));
    }
    if attrs.namespace.is_none() {
        return true;
    }
    let labels = attrs.namespace_labels.clone().unwrap_or_default();
    selector.matches(&labels)
}

fn object_selector_matches(
    hook: &Value,
    object: Option<&Value>,
    old_object: Option<&Value>,
) -> bool {
    let Some(sel) = hook.get("objectSelector").filter(|s| !s.is_null()) else {
        return true;
    };
    let Ok(selector) = LabelSelector::from_metav1(sel) else {
        return false;
    };
    if selector.is_empty() {
        return true;
    }
    [object, old_object]
        .into_iter()
        .flatten()
        .any(|o| selector.matches(&labels_of(o)))
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

fn apply_response_patch(
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

fn denial(webhook: &str, status: Option<&Value>) -> AdmissionError {
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

fn review_request(
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

fn parse_response<'a>(review: &'a Value, uid: &str) -> Result<&'a Value, String> {
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

/// POSTs the review to the webhook and returns the decoded response body.
async fn call(hook: &Webhook, review: &Value) -> Result<Value, String> {
    let url = hook
        .url
        .as_deref()
        .ok_or_else(|| "only clientConfig.url is supported (no in-cluster services)".to_string())?;
    let body = serde_json::to_vec(review).map_err(|e| format!("encoding AdmissionReview: {e}"))?;
    match tokio::time::timeout(hook.timeout, post(url, hook.ca_bundle.as_deref(), body)).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("failed to call webhook: Post {url:?}: {e}")),
        Err(_) => Err(format!(
            "failed to call webhook: Post {url:?}: context deadline exceeded (timeout {}s)",
            hook.timeout.as_secs()
        )),
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn tls_config(ca_bundle: Option<&str>) -> Result<rustls::ClientConfig, String> {
    let bundle = ca_bundle
        .filter(|b| !b.is_empty())
        .ok_or_else(|| "clientConfig.caBundle is required (no system trust roots)".to_string())?;
    let pem = base64::engine::general_purpose::STANDARD
        .decode(bundle.trim())
        .map_err(|e| format!("caBundle is not base64: {e}"))?;
    let mut roots = rustls::RootCertStore::empty();
    let mut reader = std::io::Cursor::new(pem);
    for cert in rustls_pemfile::certs(&mut reader) {
        let cert = cert.map_err(|e| format!("caBundle is not PEM: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("caBundle certificate rejected: {e}"))?;
    }
    if roots.is_empty() {
        return Err("caBundle contains no certificate".into());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS configuration: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

async fn post(url: &str, ca_bundle: Option<&str>, body: Vec<u8>) -> Result<Value, String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("invalid url: {e}"))?;
    if uri.scheme_str() != Some("https") {
        return Err("webhook url must use https".into());
    }
    let host = uri
        .host()
        .ok_or_else(|| "webhook url has no host".to_string())?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri.port_u16().unwrap_or(443);
    let config = tls_config(ca_bundle)?;
    let server_name = rustls::pki_types::ServerName::try_from(host.clone())
        .map_err(|e| format!("invalid server name {host:?}: {e}"))?;
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| format!("dial tcp {host}:{port}: {e}"))?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(server_name, tcp)
        .await
        .map_err(|e| format!("tls: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| format!("http handshake: {e}"))?;
    let _conn = AbortOnDrop(tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "webhook connection ended");
        }
    }));
    let path = uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let authority = uri
        .authority()
        .map(|a| a.as_str().to_string())
        .unwrap_or_else(|| host.clone());
    let request = http::Request::post(path)
        .header(http::header::HOST, authority)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| format!("building request: {e}"))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("sending request: {e}"))?;
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("reading response: {e}"))?
        .to_bytes();
    if status != http::StatusCode::OK {
        return Err(format!(
            "received invalid webhook response status {}: {}",
            status.as_u16(),
            String::from_utf8_lossy(&bytes)
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("decoding webhook response: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(op: Operation) -> Attributes {
        Attributes {
            group: "".into(),
            version: "v1".into(),
            resource: "pods".into(),
            subresource: "".into(),
            kind: "Pod".into(),
            operation: op,
            namespace: Some("default".into()),
            name: "p".into(),
            user: UserInfo::default(),
            dry_run: false,
            namespace_labels: Some([("team".to_string(), "a".to_string())].into()),
        }
    }

    fn config(hooks: Value) -> Vec<Value> {
        vec![json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "c"}, "webhooks": hooks})]
    }

    fn names(hooks: &[Webhook]) -> Vec<&str> {
        hooks.iter().map(|h| h.name.as_str()).collect()
    }

    #[test]
    fn rule_matching() {
        let cfg = config(json!([
            {"name": "all", "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "operations": ["*"]}]},
            {"name": "pods-create", "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE"]}]},
            {"name": "apps", "rules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["*"], "operations": ["*"]}]},
            {"name": "status", "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/status"], "operations": ["UPDATE"]}]},
            {"name": "any-sub", "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["*/*"], "operations": ["UPDATE"]}]},
            {"name": "pods-star", "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/*"], "operations": ["UPDATE"]}]},
            {"name": "cluster", "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "operations": ["*"], "scope": "Cluster"}]},
            {"name": "namespaced", "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "operations": ["*"], "scope": "Namespaced"}]},
            {"name": "norules"}
        ]));
        let create = attrs(Operation::Create);
        assert_eq!(
            names(&matching_webhooks(
                &cfg,
                WebhookKind::Validating,
                &create,
                None,
                None
            )),
            vec!["all", "pods-create", "namespaced"]
        );
        let mut status = attrs(Operation::Update);
        status.subresource = "status".into();
        assert_eq!(
            names(&matching_webhooks(
                &cfg,
                WebhookKind::Validating,
                &status,
                None,
                None
            )),
            vec!["status", "any-sub", "pods-star"]
        );
        let update = attrs(Operation::Update);
        assert_eq!(
            names(&matching_webhooks(
                &cfg,
                WebhookKind::Validating,
                &update,
                None,
                None
            )),
            vec!["all", "any-sub", "pods-star", "namespaced"]
        );
        let mut webhook_cfg = attrs(Operation::Delete);
        webhook_cfg.group = "admissionregistration.k8s.io".into();
        webhook_cfg.resource = "validatingwebhookconfigurations".into();
        webhook_cfg.namespace = None;
        assert!(
            matching_webhooks(&cfg, WebhookKind::Validating, &webhook_cfg, None, None).is_empty()
        );
        let mut node = attrs(Operation::Delete);
        node.resource = "nodes".into();
        node.namespace = None;
        assert_eq!(
            names(&matching_webhooks(
                &cfg,
                WebhookKind::Validating,
                &node,
                None,
                None
            )),
            vec!["all", "cluster"]
        );
    }

    #[test]
    fn selectors_and_hook_settings() {
        let rule = json!([{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "operations": ["*"]}]);
        let cfg = config(json!([
            {"name": "team-a", "rules": rule, "namespaceSelector": {"matchLabels": {"team": "a"}},
                "timeoutSeconds": 3, "failurePolicy": "Ignore",
                "clientConfig": {"url": "https://127.0.0.1:1/x", "caBundle": "Zm9v"}},
            {"name": "team-b", "rules": rule, "namespaceSelector": {"matchLabels": {"team": "b"}}},
            {"name": "web-objects", "rules": rule, "objectSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
                "timeoutSeconds": 99}
        ]));
        let a = attrs(Operation::Create);
        let web = json!({"metadata": {"labels": {"app": "web"}}});
        let db = json!({"metadata": {"labels": {"app": "db"}}});
        let hooks = matching_webhooks(&cfg, WebhookKind::Mutating, &a, Some(&web), None);
        assert_eq!(names(&hooks), vec!["team-a", "web-objects"]);
        assert_eq!(hooks[0].timeout, Duration::from_secs(3));
        assert!(hooks[0].ignore_failure);
        assert_eq!(hooks[0].url.as_deref(), Some("https://127.0.0.1:1/x"));
        assert_eq!(hooks[0].kind, WebhookKind::Mutating);
        assert_eq!(hooks[1].timeout, Duration::from_secs(30));
        assert!(!hooks[1].ignore_failure);
        // old object labels count too (e.g. on delete)
        let hooks = matching_webhooks(&cfg, WebhookKind::Mutating, &a, Some(&db), Some(&web));
        assert_eq!(names(&hooks), vec!["team-a", "web-objects"]);
        let hooks = matching_webhooks(&cfg, WebhookKind::Mutating, &a, Some(&db), None);
        assert_eq!(names(&hooks), vec!["team-a"]);
    }

    #[tokio::test]
    async fn dry_run_needs_side_effect_free_webhooks() {
        let rule = json!([{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "operations": ["*"]}]);
        let cfg = config(json!([
            {"name": "unknown-effects", "rules": rule, "sideEffects": "Unknown",
                "clientConfig": {"url": "https://127.0.0.1:1/x"}}
        ]));
        let mut a = attrs(Operation::Create);
        a.dry_run = true;
        let err = run_validating(&cfg, &a, Some(&json!({})), None)
            .await
            .unwrap_err();
        assert_eq!(err.status_code(), 400);
        assert_eq!(
            err.to_string(),
            "admission webhook \"unknown-effects\" does not support dry run"
        );
        let hooks = matching_webhooks(
            &config(json!([
                {"name": "safe", "rules": rule, "sideEffects": "NoneOnDryRun"}
            ])),
            WebhookKind::Validating,
            &a,
            None,
            None,
        );
        assert!(hooks[0].dry_run_safe);
    }

    #[test]
    fn operation_names_round_trip() {
        for op in [
            Operation::Create,
            Operation::Update,
            Operation::Delete,
            Operation::Connect,
        ] {
            assert_eq!(Operation::parse(op.as_str()), Some(op));
        }
        assert_eq!(Operation::parse("create"), None);
    }

    #[test]
    fn denial_messages() {
        let e = denial(
            "x",
            Some(&json!({"code": 400, "message": "no", "reason": "BadRequest"})),
        );
        assert_eq!(
            e.to_string(),
            "admission webhook \"x\" denied the request: no"
        );
        assert_eq!(e.status_code(), 400);
        assert_eq!(e.status_reason(), "BadRequest");
        let e = denial("x", Some(&json!({"code": 200})));
        assert_eq!(e.status_code(), 403);
        assert_eq!(
            e.to_string(),
            "admission webhook \"x\" denied the request without explanation"
        );
        let e = denial("x", None);
        assert_eq!(e.status_code(), 403);
    }

    #[test]
    fn review_shape() {
        let mut a = attrs(Operation::Update);
        a.subresource = "status".into();
        let r = review_request("u1", &a, Some(&json!({"a": 1})), None);
        assert_eq!(r["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(r["request"]["uid"], "u1");
        assert_eq!(r["request"]["operation"], "UPDATE");
        assert_eq!(r["request"]["subResource"], "status");
        assert_eq!(r["request"]["namespace"], "default");
        assert_eq!(
            r["request"]["kind"],
            json!({"group": "", "version": "v1", "kind": "Pod"})
        );
        assert_eq!(r["request"]["resource"]["resource"], "pods");
        assert_eq!(r["request"]["options"]["kind"], "UpdateOptions");
        assert_eq!(r["request"]["oldObject"], Value::Null);
        let bad = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": "other", "allowed": true}});
        assert!(
            parse_response(&bad, "u1")
                .unwrap_err()
                .contains("expected response.uid")
        );
        let bad = json!({"apiVersion": "v1", "kind": "Status"});
        assert!(parse_response(&bad, "u1").is_err());
    }
}
