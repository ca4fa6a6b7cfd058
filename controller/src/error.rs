//! Errors of controllers, builders and the manager.

use std::time::Duration;

use crate::watch::BoxError;

/// The likely causes of a watch that never syncs, spelled out in [`ControllerError::CacheSyncTimeout`].
pub const CACHE_SYNC_HINT: &str = "likely causes: the resource's CustomResourceDefinition is not \
installed, or RBAC forbids list/watch on it (check the service account's Role/ClusterRole)";

/// An error that stops a controller.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// A watch did not sync within `cache_sync_timeout`.
    #[error(
        "controller {controller}: timed out after {timeout:?} waiting for {watch} to sync; \
         diagnosis: {diagnosis}; {hint}",
        hint = CACHE_SYNC_HINT,
        diagnosis = diagnosis.as_deref().unwrap_or("none available")
    )]
    CacheSyncTimeout {
        /// The controller's name.
        controller: String,
        /// The watch (names the resource).
        watch: String,
        /// The timeout that expired.
        timeout: Duration,
        /// What the source or the API server says about the resource, if anything.
        diagnosis: Option<String>,
    },
    /// A watch failed to start or reported that it cannot sync.
    #[error("controller {controller}: {watch} failed: {source}")]
    WatchStart {
        /// The controller's name.
        controller: String,
        /// The watch (names the resource).
        watch: String,
        /// The cause.
        #[source]
        source: BoxError,
    },
    /// A running watch failed: its source lost events and nothing could resync them (a lagged
    /// source in a controller without a primary kind), so the controller stopped rather than run
    /// on with requests lost.
    #[error("controller {controller}: {watch} failed while running: {source}")]
    WatchFailed {
        /// The controller's name.
        controller: String,
        /// The watch (names the resource).
        watch: String,
        /// The cause.
        #[source]
        source: BoxError,
    },
    /// In-flight reconciles did not finish within the graceful shutdown timeout; they were
    /// abandoned.
    #[error(
        "controller {controller}: {in_flight} reconcile(s) still running after the graceful \
         shutdown timeout of {timeout:?}; abandoned them"
    )]
    ShutdownTimeout {
        /// The controller's name.
        controller: String,
        /// The timeout that expired.
        timeout: Duration,
        /// How many workers were still busy.
        in_flight: usize,
    },
}

/// An error of the [`Manager`](crate::Manager) or of building a controller.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// Two controllers with one name in one manager (names label metrics and queues).
    #[error(
        "a controller named {name:?} is already registered with this manager; controller names must be unique"
    )]
    DuplicateController {
        /// The duplicated name.
        name: String,
    },
    /// A controller was built without a name and without a `for` kind to derive it from.
    #[error("controller has no name: call .named(..) or .for_kind::<K>() on the builder")]
    MissingName,
    /// A bind address could not be parsed.
    #[error("invalid bind address {address:?}: {reason}")]
    InvalidBindAddress {
        /// The address given.
        address: String,
        /// The parse error.
        reason: String,
    },
    /// Binding a listener failed.
    #[error("cannot bind the {what} server to {address}: {source}")]
    Bind {
        /// Which server.
        what: &'static str,
        /// The address.
        address: std::net::SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A health or readiness check name is empty or contains `/`.
    #[error("invalid check name {name:?}")]
    InvalidCheckName {
        /// The name.
        name: String,
    },
    /// Two checks with one name.
    #[error("a check named {name:?} already exists")]
    DuplicateCheck {
        /// The name.
        name: String,
    },
    /// Leader election failed or leadership was lost.
    #[error(transparent)]
    LeaderElection(#[from] crate::leader::LeaderElectionError),
    /// The connection bounds are not usable, or the client could not be built from its
    /// configuration ([`Manager::connect`](crate::Manager::connect)).
    #[error(transparent)]
    Connect(#[from] kcr_connect::ConnectError),
    /// A runnable (controller or other) failed.
    #[error("runnable {name} failed: {source}")]
    Runnable {
        /// The runnable's name.
        name: String,
        /// The cause.
        #[source]
        source: BoxError,
    },
    /// Runnables did not stop within the graceful shutdown timeout.
    #[error("graceful shutdown timed out after {timeout:?}; still running: {pending:?}")]
    ShutdownTimeout {
        /// The timeout.
        timeout: Duration,
        /// Runnables still running.
        pending: Vec<String>,
    },
    /// The builder was misused (owns without for_kind, for_kind twice, no cache, ...).
    #[error("controller builder: {reason}")]
    Builder {
        /// What is wrong.
        reason: String,
    },
    /// The shared cache refused a watch.
    #[error("cannot watch {kind} through the cache: {source}")]
    Cache {
        /// The kind.
        kind: String,
        /// The cache's error.
        #[source]
        source: kcr_source::CacheError,
    },
    /// `complete` was called on a builder made without a manager.
    #[error(
        "this builder has no manager: use Manager::controller() or call build() instead of complete()"
    )]
    NoManager,
    /// `run` was called twice.
    #[error("the manager was already started")]
    AlreadyStarted,
    /// The secured metrics endpoint could not be set up.
    #[error(transparent)]
    SecureMetrics(#[from] crate::secure_metrics::SecureMetricsError),
    /// A manager extension ([`crate::extension`]) failed to set up.
    #[error("manager extension {name}: {source}")]
    Extension {
        /// The extension's name.
        name: String,
        /// Why it failed.
        #[source]
        source: crate::watch::BoxError,
    },
}
