//! Typed admission webhooks: a [`Defaulter`] mutates a copy of the object and the JSON patch
//! sent back is the difference; a [`Validator`] checks creates, updates (with the old object)
//! and deletes, and allows with warnings or refuses with a [`Denial`] (field causes, as the API
//! server's own `Invalid` errors) or an internal error.
//!
//! What the API server receives:
//!
//! | handler outcome | AdmissionReview response |
//! |---|---|
//! | `Ok(warnings)` | `allowed: true`, the warnings (shown by kubectl as `Warning:` lines) |
//! | [`Denial::invalid`] | `allowed: false`, status 422 `Invalid`, one cause per field, message `<Kind>.<group> "<name>" is invalid: [<field>: <message>, ...]` as the API server words its own validation errors |
//! | [`Denial::forbidden`] | `allowed: false`, status 403 `Forbidden`, the message |
//! | [`AdmissionError::Internal`] | `allowed: false`, status 500 `InternalError`, `internal error in webhook <path>: <message>` |
//! | a review whose object does not decode as `K` | `allowed: false`, status 400 `BadRequest` naming the decoding error |
//!
//! A body that is not an AdmissionReview at all (not JSON, wrong `kind`, no `request` or `uid`)
//! gets HTTP 400 with a `Status` body saying what is wrong (there is no uid to answer to).

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use base64::Engine;
use futures::future::BoxFuture;
use kube::Resource;
use kube::core::admission::{AdmissionRequest, Operation};
use kube::core::response::{Status, StatusCause, StatusDetails, StatusSummary};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::endpoint::{Endpoint, Reply};

/// `apiVersion` of the AdmissionReviews served.
pub const ADMISSION_API_VERSION: &str = "admission.k8s.io/v1";

/// One field-level reason of a refusal (a `StatusCause`), worded as apimachinery's
/// `field.Error`s are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldCause {
    /// The field path, e.g. `spec.replicas` or `spec.labels[app]`.
    pub field: String,
    /// The cause type, e.g. `FieldValueInvalid`.
    pub reason: String,
    /// The message, e.g. `Invalid value: 11: must be at most 10`.
    pub message: String,
}

fn json_text(value: &impl Serialize) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "<unprintable>".to_string())
}

impl FieldCause {
    /// A cause with the given type and message.
    pub fn new(
        field: impl Into<String>,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        FieldCause {
            field: field.into(),
            reason: reason.into(),
            message: message.into(),
        }
    }

    /// `FieldValueInvalid`: `Invalid value: <value as JSON>: <detail>`.
    pub fn invalid(field: impl Into<String>, value: &impl Serialize, detail: &str) -> Self {
        let mut message = format!("Invalid value: {}", json_text(value));
        if !detail.is_empty() {
            message.push_str(": ");
            message.push_str(detail);
        }
        Self::new(field, "FieldValueInvalid", message)
    }

    /// `FieldValueRequired`: `Required value[: <detail>]`.
    pub fn required(field: impl Into<String>, detail: &str) -> Self {
        let message = if detail.is_empty() {
            "Required value".to_string()
        } else {
            format!("Required value: {detail}")
        };
        Self::new(field, "FieldValueRequired", message)
    }

    /// `FieldValueForbidden`: `Forbidden: <detail>`.
    pub fn forbidden(field: impl Into<String>, detail: &str) -> Self {
        Self::new(field, "FieldValueForbidden", format!("Forbidden: {detail}"))
    }

    /// `FieldValueDuplicate`: `Duplicate value: <value as JSON>`.
    pub fn duplicate(field: impl Into<String>, value: &impl Serialize) -> Self {
        Self::new(
            field,
            "FieldValueDuplicate",
            format!("Duplicate value: {}", json_text(value)),
        )
    }

    /// `FieldValueNotSupported`: `Unsupported value: <value>: supported values: "a", "b"`.
    pub fn not_supported(
        field: impl Into<String>,
        value: &impl Serialize,
        supported: &[&str],
    ) -> Self {
        let list = supported
            .iter()
            .map(|s| format!("\"{s}\""))
            .collect::<Vec<_>>()
            .join(", ");
        Self::new(
            field,
            "FieldValueNotSupported",
            format!(
                "Unsupported value: {}: supported values: {list}",
                json_text(value)
            ),
        )
    }
}

impl fmt::Display for FieldCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// A refusal: the status the API server passes on to its client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// HTTP code of the status (403, 422, ...).
    pub code: u16,
    /// Status reason (`Forbidden`, `Invalid`, ...).
    pub reason: String,
    /// The message; for [`Denial::invalid`] left empty and written by the handler in the API
    /// server's words (it knows the kind and name).
    pub message: String,
    /// Field causes.
    pub causes: Vec<FieldCause>,
    /// Warnings returned with the refusal.
    pub warnings: Vec<String>,
}

impl Denial {
    /// A refusal with the given code, reason and message.
    pub fn new(code: u16, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Denial {
            code,
            reason: reason.into(),
            message: message.into(),
            causes: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// 403 `Forbidden` with a message.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// 422 `Invalid` with field causes (the message lists them).
    pub fn invalid(causes: Vec<FieldCause>) -> Self {
        Denial {
            causes,
            ..Self::new(422, "Invalid", "")
        }
    }

    /// Adds warnings.
    pub fn with_warnings(mut self, warnings: impl IntoIterator<Item = String>) -> Self {
        self.warnings.extend(warnings);
        self
    }
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.message.is_empty() {
            return f.write_str(&self.message);
        }
        let causes: Vec<String> = self.causes.iter().map(|c| c.to_string()).collect();
        write!(f, "{} {}", self.reason, causes.join(", "))
    }
}

/// Why a defaulter or validator did not allow the request.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    /// The request is refused.
    #[error("denied: {0}")]
    Denied(Denial),
    /// The handler failed (a lookup failed, ...): answered as status 500.
    #[error("internal error: {0}")]
    Internal(String),
}

impl AdmissionError {
    /// An internal error from anything printable.
    pub fn internal(error: impl fmt::Display) -> Self {
        AdmissionError::Internal(error.to_string())
    }
}

impl From<Denial> for AdmissionError {
    fn from(d: Denial) -> Self {
        AdmissionError::Denied(d)
    }
}

/// Warnings returned to the client on success.
pub type Warnings = Vec<String>;

/// Defaulting for `K`: sets defaults on `obj` (a copy of the object of a CREATE or UPDATE);
/// the JSON patch of the changes goes back to the API server.
pub trait Defaulter<K: Resource>: Send + Sync + 'static {
    /// Mutates `obj`. `req` is the whole request (operation, user, old object, dry run).
    fn default(
        &self,
        req: &AdmissionRequest<K>,
        obj: &mut K,
    ) -> impl Future<Output = Result<(), AdmissionError>> + Send;
}

/// Validation of `K` on create, update and delete. Every method allows by default.
pub trait Validator<K: Resource>: Send + Sync + 'static {
    /// Validates a new object.
    fn validate_create(
        &self,
        req: &AdmissionRequest<K>,
        obj: &K,
    ) -> impl Future<Output = Result<Warnings, AdmissionError>> + Send {
        let _ = (req, obj);
        async { Ok(Warnings::new()) }
    }

    /// Validates an update of `old` to `new`.
    fn validate_update(
        &self,
        req: &AdmissionRequest<K>,
        old: &K,
        new: &K,
    ) -> impl Future<Output = Result<Warnings, AdmissionError>> + Send {
        let _ = (req, old, new);
        async { Ok(Warnings::new()) }
    }

    /// Validates the deletion of `old` (called only when the validating webhook is registered
    /// for `DELETE`, see [`WebhookBuilder::validate_delete`](crate::WebhookBuilder::validate_delete)).
    fn validate_delete(
        &self,
        req: &AdmissionRequest<K>,
        old: &K,
    ) -> impl Future<Output = Result<Warnings, AdmissionError>> + Send {
        let _ = (req, old);
        async { Ok(Warnings::new()) }
    }
}

/// Bounds every typed webhook object meets.
pub trait WebhookObject:
    Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Send + Sync + 'static
{
}

impl<K> WebhookObject for K where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Send + Sync + 'static
{
}

/// The `response` of an AdmissionReview on the wire.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResponseBody {
    uid: String,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Status>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
}

impl ResponseBody {
    fn allow(uid: &str, warnings: Warnings) -> Self {
        ResponseBody {
            uid: uid.to_string(),
            allowed: true,
            status: None,
            patch: None,
            patch_type: None,
            warnings,
        }
    }

    fn refuse(uid: &str, status: Status, warnings: Warnings) -> Self {
        ResponseBody {
            status: Some(status),
            allowed: false,
            ..Self::allow(uid, warnings)
        }
    }

    fn into_reply(self) -> Reply {
        let review = serde_json::json!({
            "apiVersion": ADMISSION_API_VERSION,
            "kind": "AdmissionReview",
            "response": self,
        });
        Reply::json(http::StatusCode::OK, &review)
    }
}

fn failure(code: u16, reason: &str, message: String, details: Option<StatusDetails>) -> Status {
    Status {
        status: Some(StatusSummary::Failure),
        code,
        message,
        metadata: None,
        reason: reason.to_string(),
        details,
    }
}

/// What a handler knows of the request for its answers.
struct Ctx<'a> {
    path: &'a str,
    uid: String,
    group: String,
    kind: String,
    name: String,
}

impl Ctx<'_> {
    fn error_reply(&self, error: AdmissionError) -> Reply {
        match error {
            AdmissionError::Denied(d) => self.denial_reply(d),
            AdmissionError::Internal(message) => {
                tracing::error!(webhook = self.path, error = %message, "webhook handler failed");
                ResponseBody::refuse(
                    &self.uid,
                    failure(
                        500,
                        "InternalError",
                        format!("internal error in webhook {}: {message}", self.path),
                        None,
                    ),
                    Vec::new(),
                )
                .into_reply()
            }
        }
    }

    fn denial_reply(&self, d: Denial) -> Reply {
        let qualified = if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        };
        let message = if !d.message.is_empty() {
            d.message
        } else if d.causes.is_empty() {
            format!("{qualified} \"{}\" is {}", self.name, d.reason)
        } else {
            let list: Vec<String> = d.causes.iter().map(|c| c.to_string()).collect();
            let list = if list.len() == 1 {
                list.join("")
            } else {
                format!("[{}]", list.join(", "))
            };
            format!("{qualified} \"{}\" is invalid: {list}", self.name)
        };
        let details = (!d.causes.is_empty()).then(|| StatusDetails {
            name: self.name.clone(),
            group: self.group.clone(),
            kind: self.kind.clone(),
            uid: String::new(),
            causes: d
                .causes
                .into_iter()
                .map(|c| StatusCause {
                    reason: c.reason,
                    message: c.message,
                    field: c.field,
                })
                .collect(),
            retry_after_seconds: 0,
        });
        ResponseBody::refuse(
            &self.uid,
            failure(d.code, &d.reason, message, details),
            d.warnings,
        )
        .into_reply()
    }

    fn bad_request(&self, message: String) -> Reply {
        ResponseBody::refuse(
            &self.uid,
            failure(400, "BadRequest", message, None),
            Vec::new(),
        )
        .into_reply()
    }
}

/// Checks an AdmissionReview body: its `request` and the request's uid, or the reply to send
/// (HTTP 400: there is no uid to answer to). Records the uid, operation, name and namespace on
/// the current span.
pub(crate) fn parse_review(path: &str, body: &[u8]) -> Result<(Value, String), Reply> {
    let mut review: Value = serde_json::from_slice(body).map_err(|e| {
        Reply::bad_request(format!("webhook {path}: the request body is not JSON: {e}"))
    })?;
    let api_version = review.get("apiVersion").and_then(Value::as_str);
    let kind = review.get("kind").and_then(Value::as_str);
    if kind != Some("AdmissionReview") || api_version != Some(ADMISSION_API_VERSION) {
        return Err(Reply::bad_request(format!(
            "webhook {path}: expected an AdmissionReview of {ADMISSION_API_VERSION}, got kind {} of {}",
            kind.unwrap_or("<none>"),
            api_version.unwrap_or("<none>")
        )));
    }
    let Some(request) = review
        .get_mut("request")
        .filter(|r| r.is_object())
        .map(Value::take)
    else {
        return Err(Reply::bad_request(format!(
            "webhook {path}: the AdmissionReview has no request"
        )));
    };
    let Some(uid) = request
        .get("uid")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return Err(Reply::bad_request(format!(
            "webhook {path}: the AdmissionReview's request has no uid"
        )));
    };
    let span = tracing::Span::current();
    span.record("uid", uid.as_str());
    span.record("operation", str_at(&request, "/operation"));
    span.record("name", request_name(&request).as_str());
    span.record("namespace", str_at(&request, "/namespace"));
    Ok((request, uid))
}

fn str_at<'v>(request: &'v Value, pointer: &str) -> &'v str {
    request
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The object's name, else the request's (a DELETE has no object).
fn request_name(request: &Value) -> String {
    match str_at(request, "/object/metadata/name") {
        "" => str_at(request, "/name").to_string(),
        n => n.to_string(),
    }
}

/// Parses an AdmissionReview body: the raw `request` and the typed one, or the reply to send
/// (HTTP 400 without a uid, a refusing review with one).
fn parse<'p, K: WebhookObject>(
    path: &'p str,
    body: &[u8],
) -> Result<(Value, AdmissionRequest<K>, Ctx<'p>), Reply> {
    let (request, uid) = parse_review(path, body)?;
    let ctx = Ctx {
        path,
        uid,
        group: K::group(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: request_name(&request),
    };
    match <AdmissionRequest<K> as serde::Deserialize>::deserialize(&request) {
        Ok(req) => Ok((request, req, ctx)),
        Err(e) => Err(ctx.bad_request(format!(
            "webhook {path}: cannot decode the request for {}: {e}",
            ctx.kind
        ))),
    }
}

/// The endpoint serving a [`Defaulter`].
pub(crate) struct DefaultingEndpoint<K, D> {
    pub(crate) path: String,
    pub(crate) defaulter: Arc<D>,
    pub(crate) _k: PhantomData<fn() -> K>,
}

impl<K: WebhookObject, D: Defaulter<K>> Endpoint for DefaultingEndpoint<K, D> {
    fn serve(
        &self,
        body: bytes::Bytes,
        _peer: Option<Arc<kcr_tls::ClientCertificate>>,
    ) -> BoxFuture<'_, Reply> {
        Box::pin(async move {
            let (raw, req, ctx) = match parse::<K>(&self.path, &body) {
                Ok(p) => p,
                Err(reply) => return reply,
            };
            if !matches!(req.operation, Operation::Create | Operation::Update) {
                return ResponseBody::allow(&ctx.uid, Vec::new()).into_reply();
            }
            let Some(obj) = req.object.as_ref() else {
                return ctx.bad_request(format!(
                    "webhook {}: a {:?} request without an object",
                    self.path, req.operation
                ));
            };
            let mut copy = obj.clone();
            if let Err(e) = self.defaulter.default(&req, &mut copy).await {
                return ctx.error_reply(e);
            }
            let (before, after) = match (serde_json::to_value(obj), serde_json::to_value(&copy)) {
                (Ok(b), Ok(a)) => (b, a),
                (Err(e), _) | (_, Err(e)) => {
                    return ctx.error_reply(AdmissionError::internal(format!(
                        "cannot serialise the {}: {e}",
                        ctx.kind
                    )));
                }
            };
            let patch = patch_for(raw.get("object").unwrap_or(&Value::Null), &before, &after);
            if patch.0.is_empty() {
                return ResponseBody::allow(&ctx.uid, Vec::new()).into_reply();
            }
            let bytes = match serde_json::to_vec(&patch) {
                Ok(b) => b,
                Err(e) => {
                    return ctx.error_reply(AdmissionError::internal(format!(
                        "cannot serialise the patch: {e}"
                    )));
                }
            };
            let mut resp = ResponseBody::allow(&ctx.uid, Vec::new());
            resp.patch = Some(base64::engine::general_purpose::STANDARD.encode(bytes));
            resp.patch_type = Some("JSONPatch");
            resp.into_reply()
        })
    }
}

/// The JSON patch taking the received object to the defaulted one.
///
/// The patch is the difference between the typed object before and after defaulting: only the
/// defaulter's changes (fields the type does not know, and the type's own serialisation quirks,
/// are on both sides and cancel out, so unknown fields are never removed). An operation whose
/// parent the received object lacks (the type serialises `spec.appearance: {}` where the
/// request had no `appearance`) becomes an `add` of the missing ancestor, with its value taken
/// from the defaulted object; a `remove` of something the received object lacks is dropped.
pub(crate) fn patch_for(received: &Value, before: &Value, after: &Value) -> json_patch::Patch {
    let diff = json_patch::diff(before, after);
    let mut probe = received.clone();
    let mut out = Vec::with_capacity(diff.0.len());
    for op in diff.0 {
        if json_patch::patch(&mut probe, std::slice::from_ref(&op)).is_ok() {
            out.push(op);
            continue;
        }
        if matches!(op, json_patch::PatchOperation::Remove(_)) {
            continue;
        }
        // The shallowest missing ancestor of the operation's path.
        let mut missing = op.path();
        while let Some(parent) = missing.parent() {
            if parent.is_root() || probe.pointer(parent.as_str()).is_some() {
                break;
            }
            missing = parent;
        }
        let Some(value) = after.pointer(missing.as_str()) else {
            continue;
        };
        let add = json_patch::PatchOperation::Add(json_patch::AddOperation {
            path: missing.to_buf(),
            value: value.clone(),
        });
        if json_patch::patch(&mut probe, std::slice::from_ref(&add)).is_ok() {
            out.push(add);
        }
    }
    json_patch::Patch(out)
}

/// The endpoint serving a [`Validator`].
pub(crate) struct ValidatingEndpoint<K, V> {
    pub(crate) path: String,
    pub(crate) validator: Arc<V>,
    pub(crate) _k: PhantomData<fn() -> K>,
}

impl<K: WebhookObject, V: Validator<K>> Endpoint for ValidatingEndpoint<K, V> {
    fn serve(
        &self,
        body: bytes::Bytes,
        _peer: Option<Arc<kcr_tls::ClientCertificate>>,
    ) -> BoxFuture<'_, Reply> {
        Box::pin(async move {
            let (_raw, req, ctx) = match parse::<K>(&self.path, &body) {
                Ok(p) => p,
                Err(reply) => return reply,
            };
            let missing = |what: &str| {
                ctx.bad_request(format!(
                    "webhook {}: a {:?} request without {what}",
                    self.path, req.operation
                ))
            };
            let outcome = match (&req.operation, &req.object, &req.old_object) {
                (Operation::Create, Some(obj), _) => {
                    self.validator.validate_create(&req, obj).await
                }
                (Operation::Create, None, _) => return missing("an object"),
                (Operation::Update, Some(new), Some(old)) => {
                    self.validator.validate_update(&req, old, new).await
                }
                (Operation::Update, _, _) => return missing("object and oldObject"),
                (Operation::Delete, _, Some(old)) => {
                    self.validator.validate_delete(&req, old).await
                }
                (Operation::Delete, _, None) => return missing("an oldObject"),
                (Operation::Connect, _, _) => Ok(Warnings::new()),
            };
            match outcome {
                Ok(warnings) => ResponseBody::allow(&ctx.uid, warnings).into_reply(),
                Err(e) => ctx.error_reply(e),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cause_wording_matches_apimachinery() {
        assert_eq!(
            FieldCause::invalid("spec.replicas", &11, "must be at most 10").to_string(),
            "spec.replicas: Invalid value: 11: must be at most 10"
        );
        assert_eq!(
            FieldCause::required("spec.x", "").to_string(),
            "spec.x: Required value"
        );
        assert_eq!(
            FieldCause::forbidden("spec.x", "field is immutable").message,
            "Forbidden: field is immutable"
        );
        assert_eq!(
            FieldCause::duplicate("spec.t[1]", &"a").message,
            "Duplicate value: \"a\""
        );
        assert_eq!(
            FieldCause::not_supported("spec.c", &"pink", &["red", "blue"]).message,
            "Unsupported value: \"pink\": supported values: \"red\", \"blue\""
        );
    }

    /// Every prefix of a valid review, and the review with each value swapped for values of
    /// other types, is answered (400 or a refusing review), never a panic.
    #[test]
    fn broken_reviews_never_panic() {
        use crate::example::{WidgetDefaulter, WidgetValidator, v1};
        let mutate = DefaultingEndpoint::<v1::Widget, _> {
            path: "/m".into(),
            defaulter: Arc::new(WidgetDefaulter),
            _k: PhantomData,
        };
        let validate = ValidatingEndpoint::<v1::Widget, _> {
            path: "/v".into(),
            validator: Arc::new(WidgetValidator),
            _k: PhantomData,
        };
        let raw = crate::raw::RawEndpoint {
            path: "/raw".into(),
            handler: crate::raw::admission_fn(|_, req| async move {
                kube::core::admission::AdmissionResponse::from(&req).deny("no")
            }),
        };
        let object = json!({"apiVersion": "example.kcr.dev/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "n", "labels": {"a": "b"}},
            "spec": {"replicas": 2, "appearance": {"colour": "red"}}});
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "kind": {"group": "example.kcr.dev", "version": "v1", "kind": "Widget"},
                "resource": {"group": "example.kcr.dev", "version": "v1", "resource": "widgets"},
                "name": "w", "namespace": "n", "operation": "UPDATE", "userInfo": {"username": "x"},
                "object": object, "oldObject": object, "dryRun": false}});
        let conversion_review = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "c", "desiredAPIVersion": "example.kcr.dev/v1alpha1", "objects": [object]}});
        let bodies = variants(&review);
        let conversion_bodies = variants(&conversion_review);
        let conversions = crate::conversion::ConversionRegistry::default();
        conversions.add(
            "example.kcr.dev".into(),
            "Widget".into(),
            Arc::new(
                crate::Conversion::<v1::Widget>::hub().spoke::<crate::example::v1alpha1::Widget>(),
            ),
        );
        for body in bodies.into_iter().chain(conversion_bodies) {
            for reply in [
                futures::executor::block_on(mutate.serve(bytes::Bytes::from(body.clone()), None)),
                futures::executor::block_on(validate.serve(bytes::Bytes::from(body.clone()), None)),
                futures::executor::block_on(raw.serve(bytes::Bytes::from(body.clone()), None)),
                conversions.review(&body),
            ] {
                assert!(
                    reply.status == http::StatusCode::OK
                        || reply.status == http::StatusCode::BAD_REQUEST,
                    "{}",
                    reply.status
                );
                let v: Value = serde_json::from_slice(&reply.body).unwrap();
                if reply.status == http::StatusCode::BAD_REQUEST {
                    assert!(!v["message"].as_str().unwrap().is_empty());
                }
            }
        }
    }

    /// Every prefix of `review`, and `review` with each value (at every depth) swapped for
    /// values of other types.
    fn variants(review: &Value) -> Vec<Vec<u8>> {
        fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
            let children: Vec<(String, &Value)> = match v {
                Value::Object(m) => m.iter().map(|(k, c)| (k.clone(), c)).collect(),
                Value::Array(a) => a
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (i.to_string(), c))
                    .collect(),
                _ => Vec::new(),
            };
            for (k, c) in children {
                let p = format!("{at}/{k}");
                out.push(p.clone());
                pointers(c, p, out);
            }
        }
        let text = serde_json::to_vec(review).unwrap();
        let mut bodies: Vec<Vec<u8>> = (0..text.len()).map(|end| text[..end].to_vec()).collect();
        let mut paths = Vec::new();
        pointers(review, String::new(), &mut paths);
        for p in &paths {
            for odd in [
                json!(null),
                json!(-1),
                json!("s"),
                json!([]),
                json!({}),
                json!(1e300),
            ] {
                let mut r = review.clone();
                if let Some(slot) = r.pointer_mut(p) {
                    *slot = odd;
                }
                bodies.push(serde_json::to_vec(&r).unwrap());
            }
        }
        bodies
    }

    #[test]
    fn patch_falls_back_to_the_received_object_when_parents_are_missing() {
        // The type serialises `spec: {}` although the received object has no spec.
        let received = json!({"metadata": {"name": "a"}});
        let before = json!({"metadata": {"name": "a"}, "spec": {}});
        let after = json!({"metadata": {"name": "a"}, "spec": {"replicas": 1}});
        let patch = patch_for(&received, &before, &after);
        let mut out = received.clone();
        json_patch::patch(&mut out, &patch).unwrap();
        assert_eq!(out, after);
        assert_eq!(
            serde_json::to_value(&patch).unwrap(),
            json!([{"op": "add", "path": "/spec", "value": {"replicas": 1}}])
        );
        // Unknown fields of the received object stay, in both cases.
        for spec in [json!({}), Value::Null] {
            let mut received = json!({"metadata": {"name": "a"}, "extra": 1});
            if !spec.is_null() {
                received["spec"] = spec;
            }
            let patch = patch_for(&received, &before, &after);
            let mut out = received.clone();
            json_patch::patch(&mut out, &patch).unwrap();
            assert_eq!(out["extra"], 1);
            assert_eq!(out["spec"]["replicas"], 1);
        }
        // A removal of something the received object lacks is dropped.
        let patch = patch_for(&json!({}), &json!({"a": 1}), &json!({}));
        assert!(patch.0.is_empty());
    }
}
