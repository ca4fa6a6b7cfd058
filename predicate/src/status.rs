//! [`IgnoreStatusOnlyUpdates`]: drop updates that changed nothing but the status, for types that
//! have no `metadata.generation` (a long-standing controller-runtime request).

use std::sync::Arc;

use kube_core::Resource;
use serde::Serialize;
use serde_json::Value;

use crate::Predicate;

/// Rejects updates in which nothing but `status`, `metadata.resourceVersion` and
/// `metadata.managedFields` changed; accepts every other event.
///
/// For types with a status subresource, [`GenerationChanged`](crate::GenerationChanged) is
/// cheaper. This predicate is for the types without a generation (many core types and CRDs
/// without a status subresource), where `GenerationChanged` would reject every update. It
/// serialises both objects to JSON, so it costs about one serialisation per object per update. If
/// serialisation fails the update is accepted (never silently lost) and a warning is logged.
#[derive(Debug, Clone, Copy, Default)]
pub struct IgnoreStatusOnlyUpdates;

fn without_status<K: Serialize>(object: &K) -> Result<Value, serde_json::Error> {
    let mut value = serde_json::to_value(object)?;
    if let Value::Object(map) = &mut value {
        map.remove("status");
        if let Some(Value::Object(meta)) = map.get_mut("metadata") {
            meta.remove("resourceVersion");
            meta.remove("managedFields");
        }
    }
    Ok(value)
}

impl<K: Resource + Serialize + Send + Sync + 'static> Predicate<K> for IgnoreStatusOnlyUpdates {
    fn update(&self, old: &Arc<K>, new: &Arc<K>) -> bool {
        match (without_status(old.as_ref()), without_status(new.as_ref())) {
            (Ok(old), Ok(new)) => old != new,
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(error = %e, "IgnoreStatusOnlyUpdates: cannot serialise object, accepting the update");
                true
            }
        }
    }
}

#[cfg(test)]
mod tests;
