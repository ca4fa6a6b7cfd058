//! The type-erased form in which a [`Controller`](crate::Controller) holds its watches: each one
//! is a source of events, the predicates that filter them, and the handler that turns them into
//! requests on the controller's queue. The [`Builder`](crate::Builder) makes these; implement
//! [`Watch`] yourself only for an input that is not a [`Source`](kcr_source::Source).

use futures::future::BoxFuture;
use kcr_queue::WorkQueue;
use tokio_util::sync::CancellationToken;

/// A boxed error from a watch.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A started watch: a task that moves events into the queue, and a future that resolves once the
/// watch's cache has synced.
pub struct StartedWatch {
    /// Pumps events into the queue until the stop token passed to [`Watch::start`] is cancelled
    /// (or the source ends: `Ok`). The controller spawns it. An `Err` means the watch can no
    /// longer tell the controller everything it must reconcile (a source lost events that could
    /// not be resynced): the controller stops with
    /// [`ControllerError::WatchFailed`](crate::ControllerError::WatchFailed).
    pub pump: BoxFuture<'static, Result<(), BoxError>>,
    /// Resolves once the source has delivered its initial state (`Ok`), or with the reason it
    /// never will (`Err`).
    pub synced: BoxFuture<'static, Result<(), BoxError>>,
    /// Explains a sync that is taking too long: the most recent error the source reported, or
    /// what the API server answers for the resource (`404`: not served, e.g. a missing CRD;
    /// `403`: RBAC). Called only when `cache_sync_timeout` expires.
    pub diagnose: Box<dyn FnOnce() -> BoxFuture<'static, Option<String>> + Send>,
}

/// One input of a controller, type-erased over the watched object type.
pub trait Watch<K>: Send {
    /// A human-readable description naming the watched resource (used in errors and logs).
    fn describe(&self) -> String;

    /// Starts the watch: it must not block on the network; events go to `queue` until `stop`.
    fn start(
        self: Box<Self>,
        queue: WorkQueue<K>,
        stop: CancellationToken,
    ) -> BoxFuture<'static, Result<StartedWatch, BoxError>>;
}
