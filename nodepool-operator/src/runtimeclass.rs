//! The pool's RuntimeClass `node-pool-<pool>`: its desired state and drift detection.
//!
//! Desired state ([`desired_runtime_class`]): `handler` from the spec (default `runc`),
//! `scheduling.nodeSelector` = `spec.labels`, `scheduling.tolerations` = one toleration per taint
//! (same key, value and effect, operator `Equal`), and a controller owner reference to the pool,
//! so the garbage collector deletes it with the pool.
//!
//! [`drift`] compares what exists with that: nothing to do, an in-place update (selector,
//! tolerations or owner reference differ), or a re-creation, because a RuntimeClass's `handler`
//! is immutable on the API server. Empty and absent selectors and tolerations are the same
//! thing, and so are an absent toleration value and an empty one.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Toleration;
use k8s_openapi::api::node::v1::{RuntimeClass, Scheduling};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;

use crate::crd::{NodePool, runtime_class_name};

/// Errors building the desired RuntimeClass.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeClassError {
    /// The pool has no name or uid yet (it was not read from the API server).
    #[error("NodePool has no name or uid, cannot own a RuntimeClass")]
    PoolNotPersisted,
}

/// The RuntimeClass `pool` wants.
pub fn desired_runtime_class(pool: &NodePool) -> Result<RuntimeClass, RuntimeClassError> {
    let owner = pool
        .controller_owner_ref(&())
        .ok_or(RuntimeClassError::PoolNotPersisted)?;
    let name = pool
        .metadata
        .name
        .as_deref()
        .ok_or(RuntimeClassError::PoolNotPersisted)?;
    let spec = &pool.spec;
    let tolerations: Vec<Toleration> = spec
        .taints
        .iter()
        .map(|t| Toleration {
            key: Some(t.key.clone()),
            operator: Some("Equal".to_owned()),
            value: t.value.clone().filter(|v| !v.is_empty()),
            effect: Some(t.effect.clone()),
            toleration_seconds: None,
        })
        .collect();
    let scheduling = Scheduling {
        node_selector: (!spec.labels.is_empty()).then(|| spec.labels.clone()),
        tolerations: (!tolerations.is_empty()).then_some(tolerations),
    };
    Ok(RuntimeClass {
        metadata: ObjectMeta {
            name: Some(runtime_class_name(name)),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        handler: spec.effective_handler().to_owned(),
        scheduling: (!is_empty_scheduling(&scheduling)).then_some(scheduling),
        overhead: None,
    })
}

/// What it takes to bring an existing RuntimeClass to the desired state.
#[derive(Debug, Clone, PartialEq)]
pub enum Drift {
    /// It matches.
    None,
    /// Update it in place to this object (carries the current resourceVersion and keeps the
    /// current labels, annotations and non-controller owner references).
    Update(Box<RuntimeClass>),
    /// The handler differs and is immutable: delete it and create the desired one.
    Recreate,
}

fn is_empty_scheduling(s: &Scheduling) -> bool {
    s.node_selector.as_ref().is_none_or(BTreeMap::is_empty)
        && s.tolerations.as_ref().is_none_or(Vec::is_empty)
}

type NormalizedToleration = (String, String, String, String);

fn normalized_scheduling(
    s: Option<&Scheduling>,
) -> (BTreeMap<String, String>, Vec<NormalizedToleration>) {
    let selector = s.and_then(|s| s.node_selector.clone()).unwrap_or_default();
    let tolerations = s
        .and_then(|s| s.tolerations.as_ref())
        .map(|ts| {
            ts.iter()
                .map(|t| {
                    (
                        t.key.clone().unwrap_or_default(),
                        t.operator.clone().unwrap_or_else(|| "Equal".to_owned()),
                        t.value.clone().unwrap_or_default(),
                        t.effect.clone().unwrap_or_default(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    (selector, tolerations)
}

fn controller_ref(rc: &RuntimeClass) -> Option<&OwnerReference> {
    rc.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))
}

/// Compares `current` with `desired` (from [`desired_runtime_class`]).
pub fn drift(current: &RuntimeClass, desired: &RuntimeClass) -> Drift {
    if current.handler != desired.handler {
        return Drift::Recreate;
    }
    let want_owner = controller_ref(desired);
    let owner_ok = match (controller_ref(current), want_owner) {
        (Some(c), Some(w)) => c.uid == w.uid && c.kind == w.kind && c.api_version == w.api_version,
        (None, None) => true,
        _ => false,
    };
    let scheduling_ok = normalized_scheduling(current.scheduling.as_ref())
        == normalized_scheduling(desired.scheduling.as_ref());
    if owner_ok && scheduling_ok {
        return Drift::None;
    }
    let mut updated = current.clone();
    updated.scheduling = desired.scheduling.clone();
    let mut owners: Vec<OwnerReference> = current
        .metadata
        .owner_references
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|o| o.controller != Some(true))
        .filter(|o| want_owner.is_none_or(|w| w.uid != o.uid))
        .collect();
    owners.extend(want_owner.cloned());
    updated.metadata.owner_references = (!owners.is_empty()).then_some(owners);
    Drift::Update(Box::new(updated))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::NodePoolSpec;
    use k8s_openapi::api::core::v1::Taint;

    fn pool(
        labels: &[(&str, &str)],
        taints: &[(&str, Option<&str>, &str)],
        handler: &str,
    ) -> NodePool {
        let mut p = NodePool::new(
            "worker",
            NodePoolSpec {
                labels: labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                taints: taints
                    .iter()
                    .map(|(k, v, e)| Taint {
                        key: k.to_string(),
                        value: v.map(str::to_owned),
                        effect: e.to_string(),
                        time_added: None,
                    })
                    .collect(),
                handler: handler.to_owned(),
            },
        );
        p.metadata.uid = Some("uid-1".into());
        p
    }

    fn sample() -> NodePool {
        pool(
            &[("node-pool.lailin.xyz/worker", "10")],
            &[("node-pool.lailin.xyz", Some("worker"), "NoSchedule")],
            "runc",
        )
    }

    #[test]
    fn desired_state_from_the_spec() {
        let rc = desired_runtime_class(&sample()).unwrap();
        assert_eq!(rc.metadata.name.as_deref(), Some("node-pool-worker"));
        assert_eq!(rc.handler, "runc");
        let s = rc.scheduling.as_ref().unwrap();
        assert_eq!(
            s.node_selector.as_ref().unwrap()["node-pool.lailin.xyz/worker"],
            "10"
        );
        let t = &s.tolerations.as_ref().unwrap()[0];
        assert_eq!(t.key.as_deref(), Some("node-pool.lailin.xyz"));
        assert_eq!(t.operator.as_deref(), Some("Equal"));
        assert_eq!(t.value.as_deref(), Some("worker"));
        assert_eq!(t.effect.as_deref(), Some("NoSchedule"));
        let owners = rc.metadata.owner_references.as_ref().unwrap();
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].api_version, "nodes.lailin.xyz/v1");
        assert_eq!(owners[0].kind, "NodePool");
        assert_eq!(owners[0].name, "worker");
        assert_eq!(owners[0].uid, "uid-1");
        assert_eq!(owners[0].controller, Some(true));
    }

    #[test]
    fn handler_from_spec_and_default() {
        let kata = pool(&[], &[], "kata");
        assert_eq!(desired_runtime_class(&kata).unwrap().handler, "kata");
        let empty = pool(&[], &[], "");
        let rc = desired_runtime_class(&empty).unwrap();
        assert_eq!(rc.handler, "runc");
        assert!(
            rc.scheduling.is_none(),
            "no labels and no taints: no scheduling"
        );
    }

    #[test]
    fn unpersisted_pool_is_an_error() {
        let mut p = sample();
        p.metadata.uid = None;
        assert_eq!(
            desired_runtime_class(&p).unwrap_err(),
            RuntimeClassError::PoolNotPersisted
        );
    }

    #[test]
    fn drift_table() {
        let desired = desired_runtime_class(&sample()).unwrap();
        let mut current = desired.clone();
        current.metadata.resource_version = Some("5".into());
        current.metadata.labels =
            Some([("keep".to_owned(), "me".to_owned())].into_iter().collect());

        // Equal, including absent-vs-empty toleration value and implied operator.
        assert_eq!(drift(&current, &desired), Drift::None);
        let mut same = current.clone();
        same.scheduling
            .as_mut()
            .unwrap()
            .tolerations
            .as_mut()
            .unwrap()[0]
            .operator = None;
        assert_eq!(drift(&same, &desired), Drift::None);

        // Handler edited by hand: immutable, so re-create.
        let mut h = current.clone();
        h.handler = "other".into();
        assert_eq!(drift(&h, &desired), Drift::Recreate);

        // Selector edited by hand: update in place, keeping labels and resourceVersion.
        let mut sel = current.clone();
        sel.scheduling.as_mut().unwrap().node_selector =
            Some([("x".to_owned(), "y".to_owned())].into_iter().collect());
        match drift(&sel, &desired) {
            Drift::Update(u) => {
                assert_eq!(u.scheduling, desired.scheduling);
                assert_eq!(u.metadata.resource_version.as_deref(), Some("5"));
                assert_eq!(u.metadata.labels, current.metadata.labels);
            }
            other => panic!("want update, got {other:?}"),
        }

        // Tolerations removed by hand.
        let mut tol = current.clone();
        tol.scheduling.as_mut().unwrap().tolerations = None;
        assert!(matches!(drift(&tol, &desired), Drift::Update(_)));

        // Scheduling dropped entirely.
        let mut none = current.clone();
        none.scheduling = None;
        assert!(matches!(drift(&none, &desired), Drift::Update(_)));

        // Owner reference missing or pointing at an older pool: fixed, other owners kept.
        let mut own = current.clone();
        own.metadata.owner_references = Some(vec![
            OwnerReference {
                api_version: "nodes.lailin.xyz/v1".into(),
                kind: "NodePool".into(),
                name: "worker".into(),
                uid: "old-uid".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            },
            OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: "other".into(),
                uid: "cm".into(),
                controller: None,
                block_owner_deletion: None,
            },
        ]);
        match drift(&own, &desired) {
            Drift::Update(u) => {
                let owners = u.metadata.owner_references.unwrap();
                let uids: Vec<&str> = owners.iter().map(|o| o.uid.as_str()).collect();
                assert_eq!(uids, vec!["cm", "uid-1"]);
            }
            other => panic!("want update, got {other:?}"),
        }
        let mut no_owner = current.clone();
        no_owner.metadata.owner_references = None;
        assert!(matches!(drift(&no_owner, &desired), Drift::Update(_)));
    }

    #[test]
    fn spec_change_shows_as_drift() {
        let old = desired_runtime_class(&sample()).unwrap();
        let changed = pool(
            &[("node-pool.lailin.xyz/worker", "11")],
            &[("node-pool.lailin.xyz", Some("worker"), "NoSchedule")],
            "runc",
        );
        let want = desired_runtime_class(&changed).unwrap();
        assert!(matches!(drift(&old, &want), Drift::Update(_)));
        let taint_value = pool(
            &[("node-pool.lailin.xyz/worker", "10")],
            &[("node-pool.lailin.xyz", None, "NoSchedule")],
            "runc",
        );
        let want = desired_runtime_class(&taint_value).unwrap();
        assert!(matches!(drift(&old, &want), Drift::Update(_)));
        let handler = pool(
            &[("node-pool.lailin.xyz/worker", "10")],
            &[("node-pool.lailin.xyz", Some("worker"), "NoSchedule")],
            "kata",
        );
        let want = desired_runtime_class(&handler).unwrap();
        assert_eq!(drift(&old, &want), Drift::Recreate);
    }
}
