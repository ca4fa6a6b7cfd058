//! The pool's finalizer: added with a JSON patch guarded by `test` (the resourceVersion when
//! the list does not exist yet), removed at its index, guarded by a `test` of that entry.

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use super::NodePoolReconciler;
use super::error::{ReconcileFailure, Refusal, is_not_found};
use crate::crd::{FINALIZER, NodePool};

impl NodePoolReconciler {
    pub(super) async fn ensure_finalizer(&self, pool: &NodePool) -> Result<(), ReconcileFailure> {
        let ops = |pool: &NodePool| match &pool.metadata.finalizers {
            _ if pool.finalizers().iter().any(|f| f == FINALIZER) => None,
            Some(_) => {
                Some(json!([{"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER}]))
            }
            None => Some(json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": pool.resource_version()},
                {"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]}
            ])),
        };
        let Some(first) = ops(pool) else {
            return Ok(());
        };
        match self.patch_pool(pool, first).await {
            // The cached pool was stale: decide again on a fresh read.
            Err(ReconcileFailure::Finalizer(e)) if Refusal::needs_fresh_node(&e) => {
                let api: Api<NodePool> = Api::all(self.client.clone());
                let fresh = api
                    .get(&pool.name_any())
                    .await
                    .map_err(ReconcileFailure::Finalizer)?;
                match ops(&fresh) {
                    Some(again) => self.patch_pool(&fresh, again).await,
                    None => Ok(()),
                }
            }
            other => other,
        }
    }

    pub(super) async fn remove_finalizer(&self, pool: &NodePool) -> Result<(), ReconcileFailure> {
        let Some(i) = pool.finalizers().iter().position(|f| f == FINALIZER) else {
            return Ok(());
        };
        let path = format!("/metadata/finalizers/{i}");
        let ops = json!([
            {"op": "test", "path": path, "value": FINALIZER},
            {"op": "remove", "path": path}
        ]);
        match self.patch_pool(pool, ops).await {
            Err(ReconcileFailure::Finalizer(e)) if is_not_found(&e) => Ok(()),
            other => other,
        }
    }

    pub(super) async fn patch_pool(
        &self,
        pool: &NodePool,
        ops: Value,
    ) -> Result<(), ReconcileFailure> {
        let api: Api<NodePool> = Api::all(self.client.clone());
        let patch: json_patch::Patch = serde_json::from_value(ops)
            .map_err(|e| ReconcileFailure::Finalizer(kube::Error::SerdeError(e)))?;
        api.patch(
            &pool.name_any(),
            &PatchParams::default(),
            &Patch::<()>::Json(patch),
        )
        .await
        .map(|_| ())
        .map_err(ReconcileFailure::Finalizer)
    }
}
