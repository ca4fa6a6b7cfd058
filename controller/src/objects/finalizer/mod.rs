//! Finalizers, in one module:
//!
//! - [`finalizer`]: one finalizer and its cleanup, the protocol below;
//! - [`Finalizers`] (`named.rs`): several named finalizers of a kind, each with its own
//!   cleanup, managed as one list;
//! - [`add_finalizer`], [`remove_finalizer`], [`contains_finalizer`] (`list.rs`): the list in
//!   memory, for a reconciler that writes the object itself;
//! - `guard.rs`: the guarded patch both writers send, and the check of a finalizer's name.
//!
//! [`finalizer`] runs cleanup before an object goes away, with the finalizer kept until the
//! cleanup succeeded.
//!
//! A finalizer is a name in `metadata.finalizers`; the API server does not remove an object
//! that has one, it only sets `deletionTimestamp`. The helper drives the protocol:
//!
//! 1. The object is live and lacks the finalizer: add it, then run [`Event::Apply`]. It is
//!    added before the first apply, so nothing the apply creates outside the cluster can be
//!    left behind by a delete that races with it.
//! 2. The object is live and has it: run [`Event::Apply`].
//! 3. The object is being deleted and has it: run [`Event::Cleanup`]; only when that
//!    succeeds, remove the finalizer (the API server then deletes the object). A failed
//!    cleanup keeps the finalizer, and its error goes back to the controller, which retries.
//! 4. The object is being deleted and has no finalizer of ours: nothing to do.
//!
//! The patches cannot overwrite a concurrent edit: adding (to an existing list, or the list
//! itself) is guarded by a JSON-patch `test` of the `resourceVersion` read; removing is guarded
//! by a `test` that the entry at the index is ours. Every patch carries the field owner of the
//! [`ObjectApi`] it is given.
//! When a guard fails (the object changed since it was cached), the helper reads the object
//! again and decides once more on the fresh copy.

use std::future::Future;
use std::sync::Arc;

use serde_json::json;

use crate::objects::error::ObjectError;
use crate::objects::object_api::Object;
use crate::objects::object_api::{ObjectApi, Writer};

mod guard;
mod list;
mod named;

use crate::Action;
use guard::{Guarded, check_name, guarded_patch};
pub use list::{add_finalizer, contains_finalizer, remove_finalizer};
pub use named::{Finalized, Finalizers, FinalizersError};

/// What the reconcile function passed to [`finalizer`] is asked to do.
#[derive(Debug, Clone)]
pub enum Event<K> {
    /// The object is live and carries the finalizer: reconcile it as usual.
    Apply(Arc<K>),
    /// The object is being deleted: release what it holds outside the object. The finalizer
    /// is removed when this returns `Ok`.
    Cleanup(Arc<K>),
}

/// Why [`finalizer`] failed.
///
/// `E` is the error type of the reconcile closure: any error type, `anyhow::Error` included
/// (it needs only `Debug` and `Display`). Its message is part of this error's; its own
/// `source()` chain is not followed (an `anyhow::Error` is not a `std::error::Error`), so match
/// on [`FinalizerError::Apply`] or [`FinalizerError::Cleanup`] to get it back.
#[derive(Debug)]
pub enum FinalizerError<E> {
    /// Adding or removing the finalizer failed (the name is invalid, or the API server refused).
    Finalizer(ObjectError),
    /// [`Event::Apply`] failed.
    Apply(E),
    /// [`Event::Cleanup`] failed: the finalizer was kept.
    Cleanup(E),
}

impl<E: std::fmt::Display> std::fmt::Display for FinalizerError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FinalizerError::Finalizer(e) => write!(f, "finalizer: {e}"),
            FinalizerError::Apply(e) => write!(f, "apply: {e}"),
            FinalizerError::Cleanup(e) => write!(f, "cleanup (finalizer kept): {e}"),
        }
    }
}

impl<E: std::fmt::Debug + std::fmt::Display> std::error::Error for FinalizerError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FinalizerError::Finalizer(e) => Some(e),
            FinalizerError::Apply(_) | FinalizerError::Cleanup(_) => None,
        }
    }
}

/// Reconcile `object` under the finalizer `name` (a qualified name, best with a domain prefix:
/// `example.com/cleanup`): the finalizer is added before the first [`Event::Apply`],
/// [`Event::Cleanup`] runs once the object is being deleted, and the finalizer is removed only
/// after the cleanup succeeded; every patch is guarded by JSON-patch `test`s, so a concurrent
/// edit fails the patch instead of being overwritten. `api` must address the object
/// (namespaced or cluster-wide as its kind is).
///
/// ```no_run
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcr_controller::Action;
/// use kcr_controller::objects::{FinalizerError, FinalizerEvent, finalizer};
/// use kube::Api;
///
/// # async fn reconcile(api: Api<ConfigMap>, cm: Arc<ConfigMap>)
/// #     -> Result<Action, FinalizerError<std::io::Error>> {
/// finalizer(&api, "example.com/cleanup", cm, |event| async move {
///     match event {
///         FinalizerEvent::Apply(_cm) => Ok(Action::done()),
///         FinalizerEvent::Cleanup(_cm) => {
///             // release what the object holds outside the cluster
///             Ok(Action::done())
///         }
///     }
/// })
/// .await
/// # }
/// ```
pub async fn finalizer<K, F, Fut, E>(
    api: &impl ObjectApi<K>,
    name: &str,
    object: Arc<K>,
    reconcile: F,
) -> Result<Action, FinalizerError<E>>
where
    K: Object,
    F: FnOnce(Event<K>) -> Fut,
    Fut: Future<Output = Result<Action, E>>,
{
    check_name(name).map_err(FinalizerError::Finalizer)?;
    let api = &Writer::new(api, &object).map_err(FinalizerError::Finalizer)?;
    let has = |o: &K| o.meta().finalizers.iter().flatten().any(|f| f == name);
    let deleting = |o: &K| o.meta().deletion_timestamp.is_some();
    let object = if deleting(&object) || has(&object) {
        object
    } else {
        match add(api, name, &object)
            .await
            .map_err(FinalizerError::Finalizer)?
        {
            // Written, or found deleting (or finalized by now) on a fresh read.
            Some(updated) => Arc::new(updated),
            // Gone while we added: nothing to reconcile.
            None => return Ok(Action::done()),
        }
    };
    match (deleting(&object), has(&object)) {
        (false, _) => reconcile(Event::Apply(object))
            .await
            .map_err(FinalizerError::Apply),
        (true, true) => {
            let action = reconcile(Event::Cleanup(Arc::clone(&object)))
                .await
                .map_err(FinalizerError::Cleanup)?;
            remove(api, name, &object)
                .await
                .map_err(FinalizerError::Finalizer)?;
            Ok(action)
        }
        (true, false) => Ok(Action::done()),
    }
}

/// Adds `name`: returns the object as written, or `None` when it no longer exists. A fresh
/// read that shows the finalizer already there (or the object deleting) is returned as is.
async fn add<K: Object>(api: &Writer<K>, name: &str, object: &K) -> Result<Option<K>, ObjectError> {
    let outcome = guarded_patch(api, object, |current| {
        let meta = current.meta();
        if meta.finalizers.iter().flatten().any(|f| f == name) || meta.deletion_timestamp.is_some()
        {
            return None;
        }
        let add = match &meta.finalizers {
            Some(_) => json!({"op": "add", "path": "/metadata/finalizers/-", "value": name}),
            None => json!({"op": "add", "path": "/metadata/finalizers", "value": [name]}),
        };
        Some(json!([
            {"op": "test", "path": "/metadata/resourceVersion", "value": meta.resource_version},
            add
        ]))
    })
    .await?;
    Ok(match outcome {
        Guarded::Written(object) | Guarded::Unneeded(object) => Some(object),
        Guarded::Gone => None,
    })
}

/// Removes `name`, guarded by a `test` of its entry. An object that is gone has no finalizers
/// left to remove.
async fn remove<K: Object>(api: &Writer<K>, name: &str, object: &K) -> Result<(), ObjectError> {
    guarded_patch(api, object, |current| {
        let i = current
            .meta()
            .finalizers
            .iter()
            .flatten()
            .position(|f| f == name)?;
        let path = format!("/metadata/finalizers/{i}");
        Some(json!([
            {"op": "test", "path": path, "value": name},
            {"op": "remove", "path": path}
        ]))
    })
    .await
    .map(|_| ())
}
