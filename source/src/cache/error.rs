//! [`CacheError`]: what can go wrong creating a watch in a [`Cache`](super::Cache).

use crate::{SelectorError, SourceError};

/// Errors of creating a watch in a [`Cache`](crate::Cache).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    /// The label selector does not parse.
    #[error(transparent)]
    Selector(#[from] SelectorError),
    /// A namespace was given for a cluster-scoped type.
    #[error("{kind} is cluster-scoped and cannot be watched in namespace {namespace:?}")]
    NamespaceOnClusterScoped {
        /// The type's kind.
        kind: String,
        /// The namespace that was asked for.
        namespace: String,
    },
    /// A scope names an empty list of namespaces (`None` watches all namespaces).
    #[error(
        "the list of namespaces to watch is empty: name at least one, or none at all (WatchScope::all) to watch every namespace"
    )]
    NoNamespaces,
    /// A scope names a namespace twice.
    #[error("namespace {namespace:?} is listed twice in the namespaces to watch")]
    DuplicateNamespace {
        /// The repeated namespace.
        namespace: String,
    },
    /// A scope names something that cannot be a namespace.
    #[error("{namespace:?} is not a valid namespace name: {reason}")]
    InvalidNamespace {
        /// The name given.
        namespace: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The watch could not start.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The cache was stopped.
    #[error("the cache was stopped")]
    Stopped,
    /// A transform was set for a type after a watch of that type had started with the
    /// previous one.
    #[error(
        "the transform of {kind} was set after its watch started: set transforms before the first kind() or reader() of the type"
    )]
    TransformAfterStart {
        /// The type's kind.
        kind: String,
    },
    /// A sync period of zero.
    #[error("the sync period must be longer than zero")]
    ZeroSyncPeriod,
    /// A scope (the cache-wide default, or a kind's) or the default transform was set after a
    /// watch it would have changed had started (see [`defaults`](crate::defaults)).
    #[error(
        "the scope of {kind} was set after its watch started: set the cache's scopes and default transform before the first kind() or reader() they affect"
    )]
    ScopeAfterStart {
        /// The kind whose watch had started (`every kind` for the cache-wide default).
        kind: String,
    },
}
