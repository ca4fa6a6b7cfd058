//! The NodePool reconciler: brings nodes, the RuntimeClass and the status of one pool in line
//! with its spec (see the spec's "Reconcile(pool)").
//!
//! Reads come from the shared cache (pools, nodes, RuntimeClasses); writes are patches:
//! - nodes: the guarded JSON patch of [`crate::nodes`]. A refused patch is classified
//!   ([`classify_refusal`]) before anything is retried:
//!   - a 409, or a 422 whose patch, replayed on the node re-read from the API server (not the
//!     cache, which may lag), fails at a `test`: the node changed under us, a **conflict**. The
//!     node is planned again from the fresh copy and patched, up to five
//!     times, then the reconcile fails with `NodeConflict` and the queue retries with backoff;
//!   - a 422 whose patch fails on the fresh node at an operation other than `test`: the patch
//!     does not fit the node. Not a conflict and not retried in this reconcile: it fails with
//!     `NodePatchInvalid`, naming the operation and carrying the API server's answer;
//!   - a 422 whose patch applies to the fresh node (the node changed back, or the refusal had
//!     another reason): planned again, like a conflict, but reported as `NodePatchRejected`
//!     when attempts run out;
//!   - in every case re-planning stops as soon as the new plan is the patch that was just
//!     refused (it would be refused again): `NodePatchRejected` with the API server's answer;
//!   - anything else (another code, or a 422 with field causes: the patched node is invalid)
//!     fails with `NodePatchFailed` and the API server's answer.
//!
//!   The real API server answers every JSON patch that does not apply with the same 422
//!   ("the server rejected our request due to an error in our request", no causes), a failed
//!   `test` and a missing path alike, hence the replay on the fresh node;
//! - the finalizer: kcr-controller's [`finalizer`] helper (JSON patches guarded by `test`: the
//!   finalizer at its index, or the resourceVersion when the list does not exist yet);
//! - the RuntimeClass: deleted by the finalizer when the pool is (the owner reference alone
//!   leaves it to the garbage collector, which on a cluster with a new CRD may take its 30 s
//!   discovery period); create, replace (with its resourceVersion) when it drifted, delete and
//!   create when the immutable handler changed;
//! - status: merge patch on the status subresource, only when it changed.
//!
//! A failure writes `Ready=False` with a CamelCase reason ([`ReconcileFailure::reason`]), a
//! message with the API server's answer and the API error's code (best effort), records a
//! Warning event with the same reason and message and returns the error (retried with backoff,
//! bounded by [`crate::operator::MAX_RETRY_DELAY`]). Nodes and RuntimeClass
//! changes are recorded as Normal events. There is no periodic requeue: [`Action::done`] always.//!
//! Split by concern: `error` (the failures and the classification of a refused patch), `nodes`
//! (the guarded node patches), `runtime_class`; the reconcile itself is here.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kcr_controller::objects::{FinalizerError, FinalizerEvent, ObjectError, finalizer};
use kcr_controller::{Action, Client, ClientError, Context, Reconciler};
use kcr_handler::Request;
use kcr_source::Reader;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder};
use kube::{Resource, ResourceExt};

use crate::crd::{FINALIZER, NodePool, NodePoolStatus, runtime_class_name};
use crate::nodes::{Applied, Change, Conflict, is_member};
use crate::status::{allocatable_sum, failure_status, merge_patch, needs_write, success_status};

mod error;
mod nodes;
mod runtime_class;

pub use error::{
    ReconcileFailure, Refusal, classify_refusal, describe, is_conflict, is_json_patch_refusal,
};

/// The field manager of every write.
pub const FIELD_MANAGER: &str = "nodepool-operator";

/// What one reconcile did (for events, logs and the demo's report).
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    /// Nodes changed, with their changes.
    pub nodes: Vec<(String, Vec<Change>)>,
    /// Values left alone because another member pool owns them.
    pub conflicts: Vec<(String, Conflict)>,
    /// What happened to the RuntimeClass, if anything.
    pub runtime_class: Option<&'static str>,
    /// Whether the status was written.
    pub status_written: bool,
}

/// The NodePool reconciler; see the [module docs](self).
pub struct NodePoolReconciler {
    /// The manager's client: writes carry its field owner.
    client: Client,
    pools: Reader<NodePool>,
    nodes: Reader<Node>,
    runtime_classes: Reader<RuntimeClass>,
    recorder: Option<Recorder>,
}
/// An `objects` helper's error as the kube error inside it (the API server's answer), for
/// [`ReconcileFailure`]'s variants that carry one; the helper's own refusals (which the
/// operator's fixed names and owners never trigger) keep their text.
fn into_kube(e: ObjectError) -> kube::Error {
    match e {
        ObjectError::Api { source, .. } => *source,
        other => kube::Error::Service(Box::new(other)),
    }
}

/// A client error as the kube error inside it (the API server's answer); the client's own
/// refusals (which the operator's cluster-scoped kinds never trigger) keep their text.
fn client_into_kube(e: ClientError) -> kube::Error {
    match e {
        ClientError::Api { source, .. } => *source,
        other => kube::Error::Service(Box::new(other)),
    }
}

fn now() -> Time {
    Time(jiff::Timestamp::now())
}

impl NodePoolReconciler {
    /// A reconciler reading from the given cache readers and writing with `client` (the
    /// manager's, so every write carries its field owner); events go to `recorder` when given.
    pub fn new(
        client: Client,
        pools: Reader<NodePool>,
        nodes: Reader<Node>,
        runtime_classes: Reader<RuntimeClass>,
        recorder: Option<Recorder>,
    ) -> Self {
        NodePoolReconciler {
            client,
            pools,
            nodes,
            runtime_classes,
            recorder,
        }
    }

    /// The `Api` of a cluster-scoped kind on the client's connection (the operator's kinds
    /// all are).
    pub(super) fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>,
        K::DynamicType: Default,
    {
        Api::all(self.client.kube_client())
    }

    /// Patch parameters carrying the client's field owner.
    pub(super) fn patch_params(&self) -> PatchParams {
        PatchParams {
            field_manager: self.client.write_defaults().field_owner.clone(),
            ..PatchParams::default()
        }
    }

    async fn event(
        &self,
        pool: &NodePool,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let Some(recorder) = &self.recorder else {
            return;
        };
        let mut note = note;
        if note.len() > 1000 {
            let mut cut = 990;
            while !note.is_char_boundary(cut) {
                cut -= 1;
            }
            note.truncate(cut);
            note.push_str(" ...");
        }
        let ev = KubeEvent {
            type_,
            reason: reason.to_owned(),
            note: Some(note),
            action: action.to_owned(),
            secondary: None,
        };
        if let Err(e) = recorder.publish(&ev, &pool.object_ref(&())).await {
            tracing::warn!(error = %e, reason, "failed to record event");
        }
    }
    async fn write_status(
        &self,
        pool: &NodePool,
        new: &NodePoolStatus,
    ) -> Result<bool, kube::Error> {
        let current = pool.status.as_ref();
        if !needs_write(current, new) {
            return Ok(false);
        }
        let patch = Patch::Merge(merge_patch(current, new));
        self.client
            .patch_status::<NodePool, _>(&pool.name_any(), None, &patch)
            .await
            .map_err(client_into_kube)?;
        Ok(true)
    }

    /// The reconcile proper, without the failure handling: under the pool's finalizer
    /// (kcr-controller's [`finalizer`]: added before the first apply, removed once the
    /// cleanup succeeded, every patch guarded by a JSON-patch `test`).
    pub async fn reconcile_pool(&self, pool: &Arc<NodePool>) -> Result<Outcome, ReconcileFailure> {
        let mut outcome = Outcome::default();
        let out = &mut outcome;
        let result = finalizer(
            &self.client,
            FINALIZER,
            Arc::clone(pool),
            |event| async move {
                match event {
                    FinalizerEvent::Apply(pool) => self.apply_pool(&pool, out).await,
                    FinalizerEvent::Cleanup(pool) => self.cleanup_pool(&pool, out).await,
                }
                .map(|()| Action::done())
            },
        )
        .await;
        match result {
            Ok(_) => Ok(outcome),
            Err(FinalizerError::Apply(e) | FinalizerError::Cleanup(e)) => Err(e),
            Err(FinalizerError::Finalizer(e)) => Err(ReconcileFailure::Finalizer(into_kube(e))),
        }
    }

    /// The pool is being deleted: its labels and taints leave the nodes and its RuntimeClass
    /// goes; the finalizer is removed by the caller when this succeeds.
    async fn cleanup_pool(
        &self,
        pool: &NodePool,
        outcome: &mut Outcome,
    ) -> Result<(), ReconcileFailure> {
        let name = pool.name_any();
        self.sync_nodes(&name, None, outcome).await?;
        if !outcome.nodes.is_empty() {
            let nodes: Vec<&str> = outcome.nodes.iter().map(|(n, _)| n.as_str()).collect();
            self.event(
                pool,
                EventType::Normal,
                "NodesCleaned",
                "Cleanup",
                format!(
                    "removed the pool's labels and taints from {}",
                    nodes.join(", ")
                ),
            )
            .await;
        }
        if self.delete_owned_runtime_class(pool).await? {
            self.event(
                pool,
                EventType::Normal,
                "RuntimeClassDeleted",
                "Cleanup",
                format!("deleted RuntimeClass {}", runtime_class_name(&name)),
            )
            .await;
        }
        Ok(())
    }

    /// The pool is live (and carries the finalizer): nodes, RuntimeClass, status.
    async fn apply_pool(
        &self,
        pool: &NodePool,
        outcome: &mut Outcome,
    ) -> Result<(), ReconcileFailure> {
        let name = pool.name_any();

        let desired = Applied::from_spec(&pool.spec);
        self.sync_nodes(&name, Some(&desired), outcome).await?;
        if !outcome.nodes.is_empty() {
            let text: Vec<String> = outcome
                .nodes
                .iter()
                .map(|(n, changes)| {
                    let c: Vec<String> = changes.iter().map(ToString::to_string).collect();
                    format!("{n} ({})", c.join(", "))
                })
                .collect();
            self.event(
                pool,
                EventType::Normal,
                "NodesUpdated",
                "UpdateNodes",
                format!("{} node(s) updated: {}", text.len(), text.join("; ")),
            )
            .await;
        }

        outcome.runtime_class = self.sync_runtime_class(pool).await?;
        if let Some(what) = outcome.runtime_class {
            self.event(
                pool,
                EventType::Normal,
                &format!("RuntimeClass{what}"),
                "SyncRuntimeClass",
                format!(
                    "RuntimeClass {} {}",
                    runtime_class_name(&name),
                    what.to_lowercase()
                ),
            )
            .await;
        }

        let all = self.nodes.list();
        let members: Vec<&Node> = all
            .iter()
            .map(|n| n.as_ref())
            .filter(|n| is_member(n, &name))
            .collect();
        let allocatable = allocatable_sum(members.iter().copied())?;
        let time = now();
        let new_status = if outcome.conflicts.is_empty() {
            success_status(
                pool.status.as_ref(),
                pool.metadata.generation,
                members.len(),
                allocatable,
                &time,
            )
        } else {
            let nodes: BTreeSet<&str> = outcome.conflicts.iter().map(|(n, _)| n.as_str()).collect();
            let first = &outcome.conflicts[0];
            let message = format!(
                "{} node(s) carry values of another member pool ({}); first: node {}: {}",
                nodes.len(),
                nodes.iter().copied().collect::<Vec<_>>().join(", "),
                first.0,
                first.1
            );
            let mut s = success_status(
                pool.status.as_ref(),
                pool.metadata.generation,
                members.len(),
                allocatable,
                &time,
            );
            let failed = failure_status(
                Some(&s),
                pool.metadata.generation,
                409,
                "PoolConflict",
                &message,
                &time,
            );
            s.conditions = failed.conditions;
            s.status = failed.status;
            if pool
                .status
                .as_ref()
                .and_then(NodePoolStatus::ready_condition)
                .map(|c| c.reason.as_str())
                != Some("PoolConflict")
            {
                self.event(
                    pool,
                    EventType::Warning,
                    "PoolConflict",
                    "UpdateNodes",
                    message,
                )
                .await;
            }
            s
        };
        outcome.status_written = self
            .write_status(pool, &new_status)
            .await
            .map_err(ReconcileFailure::Status)?;
        Ok(())
    }
}

impl Reconciler<Request> for NodePoolReconciler {
    type Error = ReconcileFailure;

    async fn reconcile(
        &self,
        request: &Request,
        _ctx: &Context,
    ) -> Result<Action, ReconcileFailure> {
        // A cluster-scoped read names no namespace, so it never fails.
        let Some(pool) = self.pools.get(&request.name, None).unwrap_or_default() else {
            // Gone: nothing to do (its RuntimeClass goes with the owner reference).
            return Ok(Action::done());
        };
        let pool: Arc<NodePool> = pool;
        match self.reconcile_pool(&pool).await {
            Ok(outcome) => {
                tracing::debug!(pool = %request.name, nodes = outcome.nodes.len(), status_written = outcome.status_written, "reconciled");
                Ok(Action::done())
            }
            Err(e) => {
                tracing::warn!(pool = %request.name, error = %e, "reconcile failed");
                if pool.metadata.deletion_timestamp.is_none() {
                    let failed = failure_status(
                        pool.status.as_ref(),
                        pool.metadata.generation,
                        e.code(),
                        e.reason(),
                        &e.to_string(),
                        &now(),
                    );
                    if let Err(se) = self.write_status(&pool, &failed).await {
                        tracing::warn!(pool = %request.name, error = %se, "could not record the failure in status");
                    }
                }
                self.event(
                    &pool,
                    EventType::Warning,
                    e.reason(),
                    "Reconcile",
                    e.to_string(),
                )
                .await;
                Err(e)
            }
        }
    }
}
#[cfg(test)]
mod tests;
