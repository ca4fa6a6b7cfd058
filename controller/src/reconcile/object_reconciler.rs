//! [`ObjectReconciler`]: a reconciler that is handed the object from the cache, with a path
//! of its own for "the object is gone".
//!
//! The [`Reconciler`] form receives a [`Request`] (a name and namespace) and reads what it
//! needs. Most reconcilers start by reading the primary object from the cache and branching on
//! whether it exists; an `ObjectReconciler` has that done for it, as kube-runtime's reconcilers
//! and controller-runtime's `ObjectReconciler` are: [`reconcile`](ObjectReconciler::reconcile)
//! gets the cached `Arc<K>`, and [`gone`](ObjectReconciler::gone) gets the request of an object
//! that is no longer in the cache (deleted, or named by an owned object's reference to an owner
//! that does not exist). The [`Builder`](crate::Builder) wires it with
//! [`complete_objects`](crate::Builder::complete_objects).
//!
//! The object is the cache's copy at the moment the worker takes the request: as fresh as the
//! watch, never fresher. Write with an optimistic lock (the object's `resourceVersion`) or a
//! patch, as with any cached read.
//!
//! A request for a namespace the primary kind's cache does not watch (its
//! [`WatchScope`](kcr_source::WatchScope) names namespaces, and another watch of the controller
//! produced a request outside them) cannot be looked up: it fails with
//! [`FromCacheError::Read`], a terminal error (counted and logged, not retried), rather than
//! being taken for an object that is gone.

use std::future::Future;
use std::sync::Arc;

use kcr_handler::Request;
use kcr_source::{CacheObject, ReadError, Reader};

use crate::reconciler::{Action, Context, ReconcileError, Reconciler};

/// Reconciles the object itself, taken from the controller's cache.
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcr_controller::{Action, Context, ObjectReconciler};
/// use kcr_handler::Request;
/// use kube::ResourceExt;
///
/// struct CountKeys;
///
/// impl ObjectReconciler for CountKeys {
///     type Object = ConfigMap;
///     type Error = anyhow::Error;
///
///     async fn reconcile(&self, cm: Arc<ConfigMap>, _ctx: &Context) -> anyhow::Result<Action> {
///         let keys = cm.data.as_ref().map_or(0, |d| d.len());
///         tracing::info!(name = %cm.name_any(), keys, "reconciled");
///         Ok(Action::done())
///     }
///
///     async fn gone(&self, request: &Request, _ctx: &Context) -> anyhow::Result<Action> {
///         tracing::info!(%request, "deleted");
///         Ok(Action::done())
///     }
/// }
/// ```
pub trait ObjectReconciler: Send + Sync + 'static {
    /// The primary kind: the `for_kind` of the controller.
    type Object: CacheObject;
    /// The error type; see [`ReconcileError`] for terminal errors.
    type Error: ReconcileError;

    /// Reconciles an object that is in the cache.
    fn reconcile(
        &self,
        object: Arc<Self::Object>,
        ctx: &Context,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send;

    /// The request's object is not in the cache: it was deleted (its last state is gone with
    /// it; use a finalizer to act before that), or it never existed. The default does nothing.
    fn gone(
        &self,
        request: &Request,
        ctx: &Context,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send {
        let _ = (request, ctx);
        async { Ok(Action::done()) }
    }
}

/// A [`Reconciler`] of [`Request`]s that looks each request up in a [`Reader`] and calls an
/// [`ObjectReconciler`]. The builder makes one; it can also be made by hand to run an
/// `ObjectReconciler` in a [`Controller`](crate::Controller) built some other way.
pub struct FromCache<R: ObjectReconciler> {
    reader: Reader<R::Object>,
    inner: R,
}

impl<R: ObjectReconciler> FromCache<R> {
    /// `inner`, fed from `reader`.
    pub fn new(reader: Reader<R::Object>, inner: R) -> Self {
        FromCache { reader, inner }
    }

    /// The wrapped reconciler.
    pub fn inner(&self) -> &R {
        &self.inner
    }
}

impl<R: ObjectReconciler> std::fmt::Debug for FromCache<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FromCache")
            .field("reconciler", &std::any::type_name::<R>())
            .finish()
    }
}

/// The error of a [`FromCache`] reconcile.
#[derive(Debug, thiserror::Error)]
pub enum FromCacheError<E> {
    /// The request names a namespace the primary kind's cache does not watch. Terminal:
    /// retrying cannot make the cache see that namespace.
    #[error("{0}")]
    Read(#[source] ReadError),
    /// The [`ObjectReconciler`] failed.
    #[error("{0}")]
    Reconcile(E),
}

impl<E: ReconcileError> ReconcileError for FromCacheError<E> {
    fn is_terminal(&self) -> bool {
        match self {
            FromCacheError::Read(_) => true,
            FromCacheError::Reconcile(e) => e.is_terminal(),
        }
    }
}

impl<R: ObjectReconciler> Reconciler<Request> for FromCache<R> {
    type Error = FromCacheError<R::Error>;

    async fn reconcile(&self, request: &Request, ctx: &Context) -> Result<Action, Self::Error> {
        let cached = self
            .reader
            .get(&request.name, request.namespace.as_deref())
            .map_err(FromCacheError::Read)?;
        match cached {
            Some(object) => self.inner.reconcile(object, ctx).await,
            None => self.inner.gone(request, ctx).await,
        }
        .map_err(FromCacheError::Reconcile)
    }
}
