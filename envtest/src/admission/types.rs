//! The types of an admission call: the request's [`Attributes`] and operation, the selected
//! [`Webhook`]s, what admission decided ([`Admitted`]) and how it failed ([`AdmissionError`]).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

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

    pub(super) fn options_kind(self) -> &'static str {
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
