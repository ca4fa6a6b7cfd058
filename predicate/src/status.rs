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
mod tests {
    use super::*;
    use crate::test_support::{all_kinds_accept_except_update, obj};
    use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    use kcr_core::Event;

    fn pod(phase: &str, node: &str, rv: &str, manager: &str) -> Pod {
        Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("p".into()),
                resource_version: Some(rv.into()),
                managed_fields: Some(vec![ManagedFieldsEntry {
                    manager: Some(manager.into()),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some(node.into()),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn truth_table() {
        let p = IgnoreStatusOnlyUpdates;
        let cases = [
            // status, resourceVersion and managedFields changes only: rejected
            (
                pod("Pending", "n1", "1", "a"),
                pod("Running", "n1", "2", "b"),
                false,
            ),
            (
                pod("Pending", "n1", "1", "a"),
                pod("Pending", "n1", "1", "a"),
                false,
            ),
            // a spec change: accepted, whatever the status did
            (
                pod("Pending", "n1", "1", "a"),
                pod("Pending", "n2", "2", "a"),
                true,
            ),
            (
                pod("Pending", "n1", "1", "a"),
                pod("Running", "n2", "2", "b"),
                true,
            ),
        ];
        for (old, new, expected) in cases {
            assert_eq!(
                p.evaluate(&Event::update(old.clone(), new.clone())),
                expected
            );
        }
        // a metadata change (labels) is not status-only
        let old = pod("Pending", "n1", "1", "a");
        let mut new = old.clone();
        new.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
        assert!(p.evaluate(&Event::update(old, new)));
        all_kinds_accept_except_update(&p);
        // data change of a ConfigMap (no status at all) is accepted
        let a = obj(|_| {});
        let mut b = a.clone();
        b.data = Some([("k".to_string(), "v".to_string())].into());
        assert!(p.evaluate(&Event::update(a.clone(), b)));
        assert!(!p.evaluate(&Event::update(a.clone(), a)));
    }
}
