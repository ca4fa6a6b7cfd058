//! The pool's RuntimeClass: created, repaired, re-created when its immutable handler changed,
//! and deleted by the finalizer when the pool controls it.

use k8s_openapi::api::node::v1::RuntimeClass;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};

use super::NodePoolReconciler;
use super::error::{ReconcileFailure, is_conflict, is_not_found};
use crate::crd::{NodePool, runtime_class_name};
use crate::runtimeclass::{Drift, desired_runtime_class, drift};

impl NodePoolReconciler {
    /// Delete the pool's RuntimeClass if this pool controls it (uid precondition, so a
    /// RuntimeClass re-created by someone else meanwhile stays). The owner reference would have
    /// the garbage collector delete it too, but only once the collector watches NodePools: on a
    /// cluster whose CRD is new that takes up to its 30 s discovery period. Returns whether it
    /// deleted one.
    pub(super) async fn delete_owned_runtime_class(
        &self,
        pool: &NodePool,
    ) -> Result<bool, ReconcileFailure> {
        let name = runtime_class_name(&pool.name_any());
        let api: Api<RuntimeClass> = Api::all(self.client.clone());
        let rc_err = |source| ReconcileFailure::RuntimeClass {
            name: name.clone(),
            source,
        };
        let Some(current) = api.get_opt(&name).await.map_err(rc_err)? else {
            return Ok(false);
        };
        let owned = pool.metadata.uid.as_ref().is_some_and(|uid| {
            current
                .owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && &o.uid == uid)
        });
        if !owned {
            return Ok(false);
        }
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: current.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(&name, &dp).await {
            Ok(_) => Ok(true),
            // Gone already, or replaced by another object of that name: not ours to delete.
            Err(e) if is_not_found(&e) || is_conflict(&e) => Ok(false),
            Err(e) => Err(rc_err(e)),
        }
    }

    pub(super) async fn sync_runtime_class(
        &self,
        pool: &NodePool,
    ) -> Result<Option<&'static str>, ReconcileFailure> {
        let desired = desired_runtime_class(pool)?;
        let name = runtime_class_name(&pool.name_any());
        let api: Api<RuntimeClass> = Api::all(self.client.clone());
        let rc_err = |source| ReconcileFailure::RuntimeClass {
            name: name.clone(),
            source,
        };
        let pp = PostParams::default();
        // The cached copy may be stale; a write that conflicts is retried on a fresh read.
        let mut current = self
            .runtime_classes
            .get(&name, None)
            .map(|rc| (*rc).clone());
        for attempt in 1..=3 {
            let last = attempt == 3;
            let Some(cur) = current.take() else {
                match api.create(&pp, &desired).await {
                    Ok(_) => return Ok(Some("Created")),
                    Err(e) if matches!(&e, kube::Error::Api(s) if s.code == 409) && !last => {
                        current = api.get_opt(&name).await.map_err(rc_err)?;
                        continue;
                    }
                    Err(e) => return Err(rc_err(e)),
                }
            };
            match drift(&cur, &desired) {
                Drift::None => return Ok(None),
                Drift::Update(updated) => match api.replace(&name, &pp, &updated).await {
                    Ok(_) => return Ok(Some("Repaired")),
                    Err(e) if (is_not_found(&e) || is_conflict(&e)) && !last => {
                        current = api.get_opt(&name).await.map_err(rc_err)?;
                    }
                    Err(e) => return Err(rc_err(e)),
                },
                Drift::Recreate => {
                    let dp = DeleteParams {
                        preconditions: cur.metadata.uid.clone().map(|uid| Preconditions {
                            uid: Some(uid),
                            resource_version: None,
                        }),
                        ..DeleteParams::default()
                    };
                    match api.delete(&name, &dp).await {
                        Ok(_) => {}
                        Err(e) if is_not_found(&e) => {}
                        Err(e) if is_conflict(&e) && !last => {
                            current = api.get_opt(&name).await.map_err(rc_err)?;
                            continue;
                        }
                        Err(e) => return Err(rc_err(e)),
                    }
                    return match api.create(&pp, &desired).await {
                        Ok(_) => Ok(Some("Recreated")),
                        Err(e) => Err(rc_err(e)),
                    };
                }
            }
        }
        // Every attempt ended in a conflict that was re-read; the next event or retry settles it.
        Err(ReconcileFailure::RuntimeClass {
            name: name.clone(),
            source: kube::Error::Api(
                kube::core::Status::failure("RuntimeClass kept changing", "Conflict")
                    .with_code(409)
                    .boxed(),
            ),
        })
    }
}
