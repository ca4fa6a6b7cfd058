//! [`Finalizers`]: several named finalizers of one kind, each with its own cleanup, kept in the
//! object's finalizer list together (controller-runtime's `finalizer.Finalizers`).
//!
//! [`Finalizers::finalize`] is called on every reconcile:
//!
//! - on a live object it adds every registered name that is missing, in one patch;
//! - on an object being deleted it runs the cleanup of every registered name the object still
//!   holds, then removes the names whose cleanup succeeded, in one patch; a failed cleanup keeps
//!   its name (so the object stays) and its error comes back, naming the finalizer, for the
//!   controller to retry;
//! - names it did not register are never touched.
//!
//! Every patch is a JSON patch guarded by `test`s (the `resourceVersion` read for an add, each
//! removed entry at its index for a removal); when a guard fails it reads the object again and
//! plans once more, as [`finalizer`](super::finalizer) does. Writes carry the field owner of the
//! [`ObjectApi`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Value, json};

use super::guard::{Guarded, check_name, guarded_patch};
use crate::objects::error::ObjectError;
use crate::objects::object_api::Object;
use crate::objects::object_api::{ObjectApi, Writer};

type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;
type Cleanup<K> =
    Box<dyn Fn(Arc<K>) -> Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send>> + Send + Sync>;

/// Several named finalizers of the kind `K`, each with its cleanup (controller-runtime's
/// `finalizer.Finalizers`).
///
/// [`finalize`](Self::finalize), called on every reconcile, adds every registered name a live
/// object lacks, in one patch; on an object being deleted it runs the cleanup of every
/// registered name the object holds, then removes the names whose cleanup succeeded, in one
/// patch. A failed cleanup keeps its name (so the object stays) and comes back as
/// [`FinalizersError::Cleanup`], naming the finalizer. Names it did not register are never
/// touched. Every patch is a JSON patch guarded by `test`s, re-planned once on a fresh read
/// when a guard fails, and carries the [`ObjectApi`]'s field owner.
///
/// ```no_run
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcr_controller::objects::Finalizers;
///
/// # async fn demo(client: kcr_controller::Client, cm: Arc<ConfigMap>) -> anyhow::Result<()> {
/// let finalizers = Finalizers::<ConfigMap>::new()
///     .register("example.com/bucket", |_cm| async move {
///         // delete the bucket this ConfigMap names
///         Ok::<_, std::io::Error>(())
///     })?
///     .register("example.com/dns", |_cm| async move {
///         // remove its DNS record
///         Ok::<_, std::io::Error>(())
///     })?;
/// let outcome = finalizers.finalize(&client, cm).await?;
/// # let _ = outcome;
/// # Ok(()) }
/// ```
pub struct Finalizers<K> {
    entries: Vec<(String, Cleanup<K>)>,
}

impl<K> std::fmt::Debug for Finalizers<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Finalizers")
            .field(
                "names",
                &self.entries.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl<K> Default for Finalizers<K> {
    fn default() -> Self {
        Finalizers {
            entries: Vec::new(),
        }
    }
}

/// What [`Finalizers::finalize`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finalized<K> {
    /// The object is live: these names were added (none: all were there). The object as last
    /// read or written.
    Live {
        /// The names added.
        added: Vec<String>,
        /// The object after the write (or as read).
        object: Arc<K>,
    },
    /// The object is being deleted: these finalizers' cleanups ran and their names were
    /// removed.
    Deleting {
        /// The names removed.
        removed: Vec<String>,
    },
    /// The object no longer exists.
    Gone,
}

/// Why [`Finalizers::finalize`] failed.
#[derive(Debug, thiserror::Error)]
pub enum FinalizersError {
    /// A patch was refused (or the object could not be addressed).
    #[error("finalizers: {0}")]
    Write(#[from] ObjectError),
    /// Cleanups failed: their names were kept (the others' were removed).
    #[error("cleanup of {} failed (finalizers kept): {}", .failed.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", "), .failed.iter().map(|(n, e)| format!("{n}: {e}")).collect::<Vec<_>>().join("; "))]
    Cleanup {
        /// Each failed finalizer and its error.
        failed: Vec<(String, BoxError)>,
        /// The names whose cleanup succeeded and were removed.
        removed: Vec<String>,
    },
}

impl<K: Object> Finalizers<K> {
    /// No finalizers yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers the finalizer `name` (a qualified name, best with a domain prefix) with its
    /// cleanup. An invalid name, or one registered already, is an [`ObjectError`].
    pub fn register<F, Fut, E>(mut self, name: &str, cleanup: F) -> Result<Self, ObjectError>
    where
        F: Fn(Arc<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        check_name(name)?;
        if self.entries.iter().any(|(n, _)| n == name) {
            return Err(ObjectError::InvalidFinalizer {
                name: name.to_string(),
                reason: "registered twice".to_string(),
            });
        }
        let cleanup: Cleanup<K> = Box::new(move |object| {
            let fut = cleanup(object);
            Box::pin(async move { fut.await.map_err(Into::into) })
        });
        self.entries.push((name.to_string(), cleanup));
        Ok(self)
    }

    /// The registered names, in registration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _)| n.as_str())
    }

    /// Adds the missing names to a live object, or runs the cleanups of an object being
    /// deleted and removes the names of those that succeeded (see [`Finalizers`]).
    pub async fn finalize(
        &self,
        api: &impl ObjectApi<K>,
        object: Arc<K>,
    ) -> Result<Finalized<K>, FinalizersError> {
        let writer = Writer::new(api, &object)?;
        if object.meta().deletion_timestamp.is_none() {
            return self.add_missing(&writer, &object).await;
        }
        let held: Vec<&(String, Cleanup<K>)> = self
            .entries
            .iter()
            .filter(|(name, _)| holds(object.as_ref(), name))
            .collect();
        let mut done = Vec::new();
        let mut failed = Vec::new();
        for (name, cleanup) in held {
            match cleanup(Arc::clone(&object)).await {
                Ok(()) => done.push(name.clone()),
                Err(e) => failed.push((name.clone(), e)),
            }
        }
        let outcome = guarded_patch(&writer, &object, |current| {
            let mut indexes: Vec<(usize, &String)> = current
                .meta()
                .finalizers
                .iter()
                .flatten()
                .enumerate()
                .filter(|(_, f)| done.contains(f))
                .collect();
            if indexes.is_empty() {
                return None;
            }
            // Highest index first, so each removal leaves the others' indexes valid.
            indexes.reverse();
            let mut ops = Vec::new();
            for (i, name) in &indexes {
                let path = format!("/metadata/finalizers/{i}");
                ops.push(json!({"op": "test", "path": path, "value": name}));
            }
            for (i, _) in &indexes {
                ops.push(json!({"op": "remove", "path": format!("/metadata/finalizers/{i}")}));
            }
            Some(Value::Array(ops))
        })
        .await?;
        if !failed.is_empty() {
            return Err(FinalizersError::Cleanup {
                failed,
                removed: done,
            });
        }
        Ok(match outcome {
            Guarded::Gone => Finalized::Gone,
            _ => Finalized::Deleting { removed: done },
        })
    }

    async fn add_missing(
        &self,
        writer: &Writer<K>,
        object: &Arc<K>,
    ) -> Result<Finalized<K>, FinalizersError> {
        let missing = |current: &K| -> Vec<String> {
            self.names()
                .filter(|name| !holds(current, name))
                .map(str::to_string)
                .collect()
        };
        // What the last plan added (a fresh read after a failed guard plans again).
        let planned = parking_lot::Mutex::new(Vec::new());
        let outcome = guarded_patch(writer, object, |current| {
            let missing = missing(current);
            planned.lock().clone_from(&missing);
            if missing.is_empty() || current.meta().deletion_timestamp.is_some() {
                return None;
            }
            let meta = current.meta();
            let mut ops = vec![json!({
                "op": "test", "path": "/metadata/resourceVersion", "value": meta.resource_version
            })];
            match &meta.finalizers {
                Some(_) => ops.extend(missing.iter().map(
                    |name| json!({"op": "add", "path": "/metadata/finalizers/-", "value": name}),
                )),
                None => {
                    ops.push(json!({"op": "add", "path": "/metadata/finalizers", "value": missing}))
                }
            }
            Some(Value::Array(ops))
        })
        .await?;
        Ok(match outcome {
            Guarded::Written(written) => Finalized::Live {
                added: planned.into_inner(),
                object: Arc::new(written),
            },
            Guarded::Unneeded(current) => Finalized::Live {
                added: Vec::new(),
                object: Arc::new(current),
            },
            Guarded::Gone => Finalized::Gone,
        })
    }
}

fn holds<K: Object>(object: &K, name: &str) -> bool {
    object.meta().finalizers.iter().flatten().any(|f| f == name)
}
