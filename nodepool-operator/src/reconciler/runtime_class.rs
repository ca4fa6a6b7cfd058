//! The pool's RuntimeClass: created, repaired, re-created when its immutable handler changed
//! (kcr-controller's `create_or_update`), and deleted by the finalizer when the pool controls it.

use k8s_openapi::api::node::v1::RuntimeClass;
use kcr_controller::objects::{ObjectError, OperationResult, create_or_update};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Preconditions};

use super::error::{ReconcileFailure, is_conflict, is_not_found};
use super::{NodePoolReconciler, into_kube};
use crate::crd::{NodePool, runtime_class_name};
use crate::runtimeclass::{RuntimeClassError, desired_runtime_class, reconcile_runtime_class};

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
        let api: Api<RuntimeClass> = self.api();
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

    /// Creates, repairs or re-creates the pool's RuntimeClass with kcr-controller's
    /// `create_or_update` ([`reconcile_runtime_class`] is the mutate function). A conflict (the
    /// object changed or appeared between the read and the write) or a handler change
    /// (delete, then create) goes round again, three rounds at most. Returns what it did.
    pub(super) async fn sync_runtime_class(
        &self,
        pool: &NodePool,
    ) -> Result<Option<&'static str>, ReconcileFailure> {
        let desired = desired_runtime_class(pool)?;
        let name = runtime_class_name(&pool.name_any());
        let api: Api<RuntimeClass> = self.api();
        let rc_err = |source| ReconcileFailure::RuntimeClass {
            name: name.clone(),
            source,
        };
        // The steady state costs no request: the cached copy needs nothing. (A cache that lags
        // behind a change is followed by that change's watch event, and another reconcile.)
        if let Ok(Some(cached)) = self.runtime_classes.get(&name, None) {
            let mut repaired = (*cached).clone();
            if reconcile_runtime_class(&mut repaired, pool).is_ok() && repaired == *cached {
                return Ok(None);
            }
        }
        let mut recreated = false;
        for attempt in 1..=3 {
            let last = attempt == 3;
            let mut rc = desired.clone();
            let mut read_uid = None;
            let result = create_or_update(&self.client, &mut rc, |current| {
                read_uid.clone_from(&current.metadata.uid);
                reconcile_runtime_class(current, pool)
            })
            .await;
            let error = match result {
                Ok(OperationResult::Created) if recreated => return Ok(Some("Recreated")),
                Ok(OperationResult::Created) => return Ok(Some("Created")),
                Ok(OperationResult::Unchanged) => return Ok(None),
                Ok(_) => return Ok(Some("Repaired")),
                Err(e) => e,
            };
            match error {
                ObjectError::Mutate { source, .. } => {
                    match *source
                        .downcast::<RuntimeClassError>()
                        .map_err(|other| rc_err(kube::Error::Service(other)))?
                    {
                        // Immutable handler: delete the one read (uid precondition, so one
                        // re-created meanwhile by someone else stays), then create.
                        RuntimeClassError::HandlerChanged { .. } if !last => {
                            self.delete_runtime_class(&api, &name, read_uid).await?;
                            recreated = true;
                        }
                        e => return Err(ReconcileFailure::Owner(e)),
                    }
                }
                e if (e.is_conflict() || e.is_not_found()) && !last => {}
                e => return Err(rc_err(into_kube(e))),
            }
        }
        // Every round ended in a conflict; the next event or retry settles it.
        Err(ReconcileFailure::RuntimeClass {
            name: name.clone(),
            source: kube::Error::Api(
                kube::core::Status::failure("RuntimeClass kept changing", "Conflict")
                    .with_code(409)
                    .boxed(),
            ),
        })
    }

    async fn delete_runtime_class(
        &self,
        api: &Api<RuntimeClass>,
        name: &str,
        uid: Option<String>,
    ) -> Result<(), ReconcileFailure> {
        let dp = DeleteParams {
            preconditions: uid.map(|uid| Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(name, &dp).await {
            Ok(_) => Ok(()),
            // Gone already, or replaced meanwhile: the next round reads it again.
            Err(e) if is_not_found(&e) || is_conflict(&e) => Ok(()),
            Err(e) => Err(ReconcileFailure::RuntimeClass {
                name: name.to_string(),
                source: e,
            }),
        }
    }
}
