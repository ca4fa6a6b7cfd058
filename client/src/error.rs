//! [`ClientError`]: every way a [`Client`](crate::Client) call fails, naming the kind, the
//! object and the verb.

use std::time::Duration;

use kcr_source::{CacheError, IndexError, ReadError, SelectorError};

/// What a write or an uncached read was doing when the API server refused it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// `get` (uncached read).
    Get,
    /// `list` (uncached read).
    List,
    /// `create`.
    Create,
    /// `update` (a PUT of the whole object).
    Update,
    /// `patch` (merge, JSON, strategic merge or apply).
    Patch,
    /// `delete`.
    Delete,
    /// `deletecollection`.
    DeleteCollection,
}

impl std::fmt::Display for Verb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        })
    }
}

/// Errors of the [`Client`](crate::Client).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The API server (or the transport to it) refused a request. [`status_code`] and the
    /// `is_*` helpers classify it.
    ///
    /// [`status_code`]: ClientError::status_code
    #[error("{verb} {kind} {}: {source}", object(namespace.as_deref(), name.as_deref()))]
    Api {
        /// What was being done.
        verb: Verb,
        /// The kind.
        kind: String,
        /// The object's name (`None` for lists and collections).
        name: Option<String>,
        /// The namespace (`None` for cluster-scoped kinds and all-namespace lists).
        namespace: Option<String>,
        /// kube's error.
        #[source]
        source: Box<kube::Error>,
    },
    /// A namespaced kind was read or written without a namespace, and the client is not
    /// scoped to one ([`Client::in_namespace`](crate::Client::in_namespace)).
    #[error("{kind} {name:?} is namespaced: give a namespace, or scope the client to one")]
    NamespaceRequired {
        /// The kind.
        kind: String,
        /// The object's name (empty for a list).
        name: String,
    },
    /// The client is scoped to one namespace and the call names another.
    #[error(
        "the client is scoped to namespace {client:?}, and the {kind} named {name:?} is in namespace {asked:?}"
    )]
    NamespaceMismatch {
        /// The kind.
        kind: String,
        /// The object's name (empty for a list).
        name: String,
        /// The client's namespace.
        client: String,
        /// The namespace of the call.
        asked: String,
    },
    /// A write needs the object's name and the object has none.
    #[error("the {kind} to {verb} has no metadata.name")]
    MissingName {
        /// The kind.
        kind: String,
        /// The write.
        verb: Verb,
    },
    /// The object could not be serialized.
    #[error("serializing the {kind} to {verb}: {source}")]
    Serialize {
        /// The kind.
        kind: String,
        /// The write.
        verb: Verb,
        /// serde's error.
        #[source]
        source: serde_json::Error,
    },
    /// The cache could not start a watch of the kind (an invalid scope, a stopped cache).
    #[error("cache of {kind}: {source}")]
    Cache {
        /// The kind.
        kind: String,
        /// The cache's error.
        #[source]
        source: CacheError,
    },
    /// The kind's watch did not hold its first complete list within the client's sync timeout.
    /// `last_error` is what the watch last failed with: a kind the API server does not serve
    /// shows its 404 here.
    #[error(
        "the cache of {kind} did not sync within {timeout:?}{}",
        last_error.as_deref().map(|e| format!("; the watch last failed with: {e}")).unwrap_or_default()
    )]
    SyncTimeout {
        /// The kind.
        kind: String,
        /// The client's sync timeout.
        timeout: Duration,
        /// The watch's most recent error.
        last_error: Option<String>,
    },
    /// The client was made with [`ClientOptions::fail_on_missing_informer`](crate::ClientOptions::fail_on_missing_informer)
    /// and nothing watches this kind (controller-runtime's `ErrResourceNotCached`).
    #[error(
        "no informer watches {kind} and the client is set to fail instead of starting one: watch it first (a controller's for_kind/owns, or Client::reader)"
    )]
    NoInformer {
        /// The kind.
        kind: String,
    },
    /// A cached read of a namespace the cache does not watch.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A list by an index that is not registered, or an index registered twice.
    #[error("{0}; register it with Client::index_field")]
    Index(#[from] IndexError),
    /// A label selector that does not parse.
    #[error(transparent)]
    Selector(#[from] SelectorError),
}

fn object(namespace: Option<&str>, name: Option<&str>) -> String {
    match (namespace, name) {
        (Some(ns), Some(name)) => format!("{ns}/{name}"),
        (None, Some(name)) => name.to_string(),
        (Some(ns), None) => format!("in namespace {ns}"),
        (None, None) => "in every namespace".to_string(),
    }
}

impl ClientError {
    /// The HTTP status of an [`Api`](ClientError::Api) error the API server answered, else
    /// `None`.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            ClientError::Api { source, .. } => match source.as_ref() {
                kube::Error::Api(status) => Some(status.code),
                _ => None,
            },
            _ => None,
        }
    }

    /// 404: the object (or the kind) does not exist. controller-runtime's
    /// `client.IgnoreNotFound` is `Err(e) if e.is_not_found() => ...`.
    pub fn is_not_found(&self) -> bool {
        self.status_code() == Some(404)
    }

    /// 409 on an update or patch: the object changed since it was read (a stale
    /// `resourceVersion`), or an apply conflicts with another field manager.
    pub fn is_conflict(&self) -> bool {
        self.status_code() == Some(409) && !self.is_already_exists()
    }

    /// 409 on a create: an object of that name exists.
    pub fn is_already_exists(&self) -> bool {
        matches!(
            self,
            ClientError::Api {
                verb: Verb::Create,
                ..
            }
        ) && self.status_code() == Some(409)
    }

    /// 403: RBAC (or an admission policy) refused the request.
    pub fn is_forbidden(&self) -> bool {
        self.status_code() == Some(403)
    }

    /// 422: the object is invalid (validation, or a strict field validation's unknown field).
    pub fn is_invalid(&self) -> bool {
        self.status_code() == Some(422)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(verb: Verb, code: u16) -> ClientError {
        ClientError::Api {
            verb,
            kind: "ConfigMap".into(),
            name: Some("a".into()),
            namespace: Some("ns".into()),
            source: Box::new(kube::Error::Api(Box::new(
                kube::core::Status::failure("boom", "Reason").with_code(code),
            ))),
        }
    }

    #[test]
    fn classifies_status_codes_and_names_the_object() {
        let e = api_error(Verb::Create, 409);
        assert!(e.is_already_exists() && !e.is_conflict());
        let e = api_error(Verb::Update, 409);
        assert!(e.is_conflict() && !e.is_already_exists());
        assert!(api_error(Verb::Get, 404).is_not_found());
        assert!(api_error(Verb::Patch, 403).is_forbidden());
        assert!(api_error(Verb::Patch, 422).is_invalid());
        let message = api_error(Verb::Delete, 500).to_string();
        assert!(message.starts_with("delete ConfigMap ns/a: "), "{message}");
        let timeout = ClientError::SyncTimeout {
            kind: "Widget".into(),
            timeout: Duration::from_secs(2),
            last_error: Some("404 not found".into()),
        };
        assert!(timeout.to_string().contains("404 not found"), "{timeout}");
        assert_eq!(timeout.status_code(), None);
    }
}
