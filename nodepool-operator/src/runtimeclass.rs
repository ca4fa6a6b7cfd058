//! The pool's RuntimeClass `node-pool-<pool>`: its desired state and drift detection.
//!
//! Desired state ([`desired_runtime_class`]): `handler` from the spec (default `runc`),
//! `scheduling.nodeSelector` = `spec.labels`, `scheduling.tolerations` = one toleration per taint
//! (same key, value and effect, operator `Equal`), and a controller owner reference to the pool,
//! so the garbage collector deletes it with the pool.
//!
//! [`reconcile_runtime_class`] is the mutate function of kcr-controller's `create_or_update`:
//! it brings an existing RuntimeClass to that state in place (selector and tolerations, the
//! controller reference through `set_controller_reference`), keeping what others wrote
//! (labels, annotations, other owner references), or refuses with
//! [`RuntimeClassError::HandlerChanged`] when the `handler` differs, because a RuntimeClass's
//! `handler` is immutable on the API server (the caller deletes and re-creates it). Empty and
//! absent selectors and tolerations are the same thing, and so are an absent toleration value
//! and an empty one, so an equivalent object is left untouched (no write).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Toleration;
use k8s_openapi::api::node::v1::{RuntimeClass, Scheduling};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcr_controller::objects::{OwnerError, set_controller_reference};

use crate::crd::{NodePool, runtime_class_name};

/// Why the RuntimeClass cannot be brought to the desired state in place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeClassError {
    /// The pool has no name or uid yet (it was not read from the API server).
    #[error("NodePool has no name or uid, cannot own a RuntimeClass")]
    PoolNotPersisted,
    /// The existing RuntimeClass has another handler; `handler` is immutable, so it must be
    /// deleted and created again.
    #[error(
        "RuntimeClass handler is {current:?}, the pool wants {wanted:?} (immutable: re-create)"
    )]
    HandlerChanged {
        /// The handler it has.
        current: String,
        /// The handler the pool wants.
        wanted: String,
    },
    /// The RuntimeClass is controlled by something else than this pool.
    #[error(transparent)]
    Owner(#[from] OwnerError),
}

/// The RuntimeClass `pool` wants.
pub fn desired_runtime_class(pool: &NodePool) -> Result<RuntimeClass, RuntimeClassError> {
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
    let mut rc = RuntimeClass {
        metadata: ObjectMeta {
            name: Some(runtime_class_name(name)),
            ..Default::default()
        },
        handler: spec.effective_handler().to_owned(),
        scheduling: (!is_empty_scheduling(&scheduling)).then_some(scheduling),
        overhead: None,
    };
    // controller: true, blockOwnerDeletion: true (the RBAC grants nodepools/finalizers).
    set_controller_reference(pool, &mut rc).map_err(|e| match e {
        OwnerError::OwnerNotPersisted { .. } => RuntimeClassError::PoolNotPersisted,
        other => RuntimeClassError::Owner(other),
    })?;
    Ok(rc)
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

/// Brings `current` (as read from the API server) to what `pool` wants, in place: see the
/// [module docs](self). Leaves an equivalent object exactly as it is.
pub fn reconcile_runtime_class(
    current: &mut RuntimeClass,
    pool: &NodePool,
) -> Result<(), RuntimeClassError> {
    let desired = desired_runtime_class(pool)?;
    if current.handler != desired.handler {
        return Err(RuntimeClassError::HandlerChanged {
            current: current.handler.clone(),
            wanted: desired.handler,
        });
    }
    if normalized_scheduling(current.scheduling.as_ref())
        != normalized_scheduling(desired.scheduling.as_ref())
    {
        current.scheduling = desired.scheduling;
    }
    set_controller_reference(pool, current).map_err(|e| match e {
        OwnerError::OwnerNotPersisted { .. } => RuntimeClassError::PoolNotPersisted,
        other => RuntimeClassError::Owner(other),
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::NodePoolSpec;
    use k8s_openapi::api::core::v1::Taint;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

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

    /// `reconcile_runtime_class` on a copy: `Ok(Some(new))` when it changed it, `Ok(None)`
    /// when it left it exactly as it was.
    fn reconciled(
        current: &RuntimeClass,
        pool: &NodePool,
    ) -> Result<Option<RuntimeClass>, RuntimeClassError> {
        let mut rc = current.clone();
        reconcile_runtime_class(&mut rc, pool)?;
        Ok((rc != *current).then_some(rc))
    }

    #[test]
    fn reconcile_table() {
        let desired = desired_runtime_class(&sample()).unwrap();
        let mut current = desired.clone();
        current.metadata.resource_version = Some("5".into());
        current.metadata.labels =
            Some([("keep".to_owned(), "me".to_owned())].into_iter().collect());

        // Equal, including absent-vs-empty toleration value and implied operator: untouched.
        assert_eq!(reconciled(&current, &sample()), Ok(None));
        let mut same = current.clone();
        same.scheduling
            .as_mut()
            .unwrap()
            .tolerations
            .as_mut()
            .unwrap()[0]
            .operator = None;
        assert_eq!(reconciled(&same, &sample()), Ok(None));

        // Handler edited by hand: immutable, so re-create.
        let mut h = current.clone();
        h.handler = "other".into();
        assert_eq!(
            reconciled(&h, &sample()),
            Err(RuntimeClassError::HandlerChanged {
                current: "other".into(),
                wanted: "runc".into()
            })
        );

        // Selector edited by hand: updated in place, keeping labels and resourceVersion.
        let mut sel = current.clone();
        sel.scheduling.as_mut().unwrap().node_selector =
            Some([("x".to_owned(), "y".to_owned())].into_iter().collect());
        let u = reconciled(&sel, &sample()).unwrap().expect("an update");
        assert_eq!(u.scheduling, desired.scheduling);
        assert_eq!(u.metadata.resource_version.as_deref(), Some("5"));
        assert_eq!(u.metadata.labels, current.metadata.labels);

        // Tolerations removed by hand.
        let mut tol = current.clone();
        tol.scheduling.as_mut().unwrap().tolerations = None;
        let u = reconciled(&tol, &sample()).unwrap().expect("an update");
        assert_eq!(u.scheduling, desired.scheduling);

        // Scheduling dropped entirely.
        let mut none = current.clone();
        none.scheduling = None;
        let u = reconciled(&none, &sample()).unwrap().expect("an update");
        assert_eq!(u.scheduling, desired.scheduling);

        // Owner reference pointing at an older pool of the same name: fixed, other owners kept.
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
        let u = reconciled(&own, &sample()).unwrap().expect("an update");
        let owners = u.metadata.owner_references.unwrap();
        let uids: Vec<&str> = owners.iter().map(|o| o.uid.as_str()).collect();
        assert_eq!(uids, vec!["uid-1", "cm"]);
        assert_eq!(owners[0].controller, Some(true));
        // Missing: added.
        let mut no_owner = current.clone();
        no_owner.metadata.owner_references = None;
        let u = reconciled(&no_owner, &sample())
            .unwrap()
            .expect("an update");
        assert_eq!(
            u.metadata.owner_references,
            desired.metadata.owner_references
        );

        // Controlled by something else: refused, not taken over.
        let mut foreign = current.clone();
        foreign.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            name: "someone".into(),
            uid: "d".into(),
            controller: Some(true),
            block_owner_deletion: None,
        }]);
        assert!(matches!(
            reconciled(&foreign, &sample()),
            Err(RuntimeClassError::Owner(OwnerError::AlreadyOwned { .. }))
        ));
    }

    #[test]
    fn spec_change_shows_as_an_update() {
        let old = desired_runtime_class(&sample()).unwrap();
        let changed = pool(
            &[("node-pool.lailin.xyz/worker", "11")],
            &[("node-pool.lailin.xyz", Some("worker"), "NoSchedule")],
            "runc",
        );
        assert!(reconciled(&old, &changed).unwrap().is_some());
        let taint_value = pool(
            &[("node-pool.lailin.xyz/worker", "10")],
            &[("node-pool.lailin.xyz", None, "NoSchedule")],
            "runc",
        );
        assert!(reconciled(&old, &taint_value).unwrap().is_some());
        let handler = pool(
            &[("node-pool.lailin.xyz/worker", "10")],
            &[("node-pool.lailin.xyz", Some("worker"), "NoSchedule")],
            "kata",
        );
        assert!(matches!(
            reconciled(&old, &handler),
            Err(RuntimeClassError::HandlerChanged { .. })
        ));
    }
}
