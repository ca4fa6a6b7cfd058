//! [`ObjectError`]: why a create-or-update, a server-side apply or a finalizer step failed.

use std::error::Error as StdError;

/// Why an `objects` helper failed. Each variant names the object (`kind namespace/name`) it
/// was working on.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// The client could not address the object (a namespaced object without a namespace, a
    /// namespace other than a scoped client's).
    #[error(transparent)]
    Client(#[from] kcr_client::ClientError),
    /// The object has no `metadata.name`, so it cannot be read or written by key.
    #[error("{kind} has no metadata.name: set the name (and namespace) of the object first")]
    NoName {
        /// The object's kind.
        kind: String,
    },
    /// The mutate function changed the object's name or namespace.
    #[error(
        "the mutate function changed the key of {kind} {before} to {after}: it must not change metadata.name or metadata.namespace"
    )]
    KeyChanged {
        /// The object's kind.
        kind: String,
        /// `namespace/name` before the mutate function ran.
        before: String,
        /// `namespace/name` after it.
        after: String,
    },
    /// The mutate function returned an error: nothing was written.
    #[error("mutating {kind} {key}: {source}")]
    Mutate {
        /// The object's kind.
        kind: String,
        /// `namespace/name`.
        key: String,
        /// The mutate function's error.
        source: Box<dyn StdError + Send + Sync + 'static>,
    },
    /// The object could not be turned into JSON (a `Serialize` impl failed).
    #[error("serialising {kind} {key}: {source}")]
    Serialize {
        /// The object's kind.
        kind: String,
        /// `namespace/name`.
        key: String,
        /// The serde error.
        source: serde_json::Error,
    },
    /// A server-side apply conflicted with fields owned by other managers, and force was not
    /// chosen.
    #[error("applying {kind} {key} as {field_manager}: conflicts with {managers:?} on {fields:?}")]
    ApplyConflict {
        /// The object's kind.
        kind: String,
        /// `namespace/name`.
        key: String,
        /// This applier's field manager.
        field_manager: String,
        /// The managers that own the conflicting fields.
        managers: Vec<String>,
        /// The conflicting fields (`.spec.replicas`).
        fields: Vec<String>,
    },
    /// The finalizer name is not a qualified name (`example.com/cleanup`).
    #[error("invalid finalizer name {name:?}: {reason}")]
    InvalidFinalizer {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A field manager name is empty or longer than the API server accepts (128 bytes).
    #[error("invalid field manager {name:?}: must be 1 to 128 characters")]
    InvalidFieldManager {
        /// The name given.
        name: String,
    },
    /// The API server refused or failed a request.
    #[error("{verb} {kind} {key}: {source}")]
    Api {
        /// `get`, `create`, `update`, `patch`, `patch status`, `apply`.
        verb: &'static str,
        /// The object's kind.
        kind: String,
        /// `namespace/name`.
        key: String,
        /// kube's error (an `Api` status for refusals).
        source: Box<kube::Error>,
    },
}

impl ObjectError {
    /// Whether the API server answered 409 Conflict (a stale `resourceVersion`, a concurrent
    /// create): read again and retry, or let the controller requeue.
    pub fn is_conflict(&self) -> bool {
        matches!(self, ObjectError::ApplyConflict { .. })
            || self.api_status().is_some_and(|s| s.code == 409)
    }

    /// Whether the API server answered 404 Not Found.
    pub fn is_not_found(&self) -> bool {
        self.api_status().is_some_and(|s| s.code == 404)
    }

    /// The API server's Status, for an [`ObjectError::Api`] refusal.
    pub fn api_status(&self) -> Option<&kube::core::Status> {
        match self {
            ObjectError::Api { source, .. } => match source.as_ref() {
                kube::Error::Api(status) => Some(status),
                _ => None,
            },
            _ => None,
        }
    }
}
