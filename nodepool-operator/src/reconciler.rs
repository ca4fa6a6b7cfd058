//! The NodePool reconciler: brings nodes, the RuntimeClass and the status of one pool in line
//! with its spec (see the spec's "Reconcile(pool)").
//!
//! Reads come from the shared cache (pools, nodes, RuntimeClasses); writes are patches:
//! - nodes: the guarded JSON patch of [`crate::nodes`]. A refused patch is classified
//!   ([`classify_refusal`]) before anything is retried:
//!   - a 409, or a 422 whose patch, replayed on the node re-read from the API server (not the
//!     cache, which may lag), fails at a `test`: the node changed under us, a **conflict**. The
//!     node is planned again from the fresh copy and patched, up to [`NODE_PATCH_ATTEMPTS`]
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
//! - the finalizer: JSON patch guarded by `test` (the finalizer at its index, or the
//!   resourceVersion when the list does not exist yet);
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
//! changes are recorded as Normal events. There is no periodic requeue: [`Action::done`] always.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kcr_controller::{Action, Context, ReconcileError, Reconciler};
use kcr_handler::Request;
use kcr_source::Reader;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use crate::crd::{FINALIZER, NodePool, NodePoolStatus, runtime_class_name};
use crate::nodes::{
    Applied, Change, Conflict, FailingOperation, NodePlan, first_failing_operation, is_member,
    plan_node, relevant_nodes,
};
use crate::runtimeclass::{Drift, RuntimeClassError, desired_runtime_class, drift};
use crate::status::{
    AllocatableError, allocatable_sum, failure_status, merge_patch, needs_write, success_status,
};

/// How many times one node's guarded patch is sent within one reconcile (the first plan and
/// the re-plans after conflicts).
pub const NODE_PATCH_ATTEMPTS: usize = 5;
/// How many node patches one reconcile sends concurrently.
pub const NODE_PATCH_CONCURRENCY: usize = 16;
/// The field manager of every write.
pub const FIELD_MANAGER: &str = "nodepool-operator";

/// Why a reconcile failed. Every variant is retryable.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileFailure {
    /// A node patch failed for a reason other than the patch's content (a 5xx, a 403, a 422
    /// with field causes, a transport error), or re-reading the node after a refusal failed.
    #[error("patching node {node}: {}", describe(.source))]
    NodePatch {
        /// The node.
        node: String,
        /// The API error.
        source: kube::Error,
    },
    /// A node kept changing under the guarded patch: a `test` failed (or 409) on every attempt.
    #[error("node {node} changed during every one of {attempts} guarded patch attempts")]
    NodeConflict {
        /// The node.
        node: String,
        /// Attempts made.
        attempts: usize,
    },
    /// The patch does not fit the node: an operation other than `test` fails on the node as
    /// the API server has it.
    #[error("patching node {node}: the patch does not apply to the node as it is ({operation}); the API server answered {}", describe(.source))]
    NodePatchInvalid {
        /// The node.
        node: String,
        /// The failing operation.
        operation: FailingOperation,
        /// The API server's refusal.
        source: kube::Error,
    },
    /// The API server refused the patch and planning again from the node as it is now gives
    /// the same patch (or the attempts ran out without a failing `test` to explain it).
    #[error("patching node {node}: the API server refused the patch planned from the node as it is now: {}", describe(.source))]
    NodePatchRejected {
        /// The node.
        node: String,
        /// The API server's refusal.
        source: kube::Error,
    },
    /// Adding or removing the finalizer failed.
    #[error("updating the finalizer: {}", describe(.0))]
    Finalizer(#[source] kube::Error),
    /// Creating, repairing or deleting the RuntimeClass failed.
    #[error("RuntimeClass {name}: {}", describe(.source))]
    RuntimeClass {
        /// The RuntimeClass.
        name: String,
        /// The API error.
        source: kube::Error,
    },
    /// The pool cannot own a RuntimeClass (no uid).
    #[error(transparent)]
    Owner(#[from] RuntimeClassError),
    /// A member node reports an allocatable quantity that cannot be summed.
    #[error(transparent)]
    Allocatable(#[from] AllocatableError),
    /// Writing the status failed.
    #[error("writing status: {}", describe(.0))]
    Status(#[source] kube::Error),
}

impl ReconcileFailure {
    /// The CamelCase reason used for the Ready condition and the Warning event.
    pub fn reason(&self) -> &'static str {
        match self {
            ReconcileFailure::NodePatch { .. } => "NodePatchFailed",
            ReconcileFailure::NodeConflict { .. } => "NodeConflict",
            ReconcileFailure::NodePatchInvalid { .. } => "NodePatchInvalid",
            ReconcileFailure::NodePatchRejected { .. } => "NodePatchRejected",
            ReconcileFailure::Finalizer(_) => "FinalizerUpdateFailed",
            ReconcileFailure::RuntimeClass { .. } => "RuntimeClassFailed",
            ReconcileFailure::Owner(_) => "PoolNotPersisted",
            ReconcileFailure::Allocatable(_) => "InvalidAllocatable",
            ReconcileFailure::Status(_) => "StatusUpdateFailed",
        }
    }

    /// The HTTP-like code for `status.status`: the API server's code when there is one.
    pub fn code(&self) -> i32 {
        let api = |e: &kube::Error| match e {
            kube::Error::Api(s) if s.code >= 400 => i32::from(s.code),
            _ => 500,
        };
        match self {
            ReconcileFailure::NodePatch { source, .. }
            | ReconcileFailure::NodePatchInvalid { source, .. }
            | ReconcileFailure::NodePatchRejected { source, .. }
            | ReconcileFailure::RuntimeClass { source, .. } => api(source),
            ReconcileFailure::Finalizer(e) | ReconcileFailure::Status(e) => api(e),
            ReconcileFailure::NodeConflict { .. } => 409,
            ReconcileFailure::Owner(_) | ReconcileFailure::Allocatable(_) => 422,
        }
    }
}

impl ReconcileError for ReconcileFailure {}

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
    client: kube::Client,
    pools: Reader<NodePool>,
    nodes: Reader<Node>,
    runtime_classes: Reader<RuntimeClass>,
    recorder: Option<Recorder>,
}

/// An API error as the API server put it: `<code> <reason>: <message>`, then the field causes;
/// other errors as they display.
pub fn describe(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => {
            let mut out = format!("{} {}: {}", s.code, s.reason, s.message);
            for c in s.details.iter().flat_map(|d| &d.causes) {
                out.push_str("; ");
                if !c.field.is_empty() {
                    out.push_str(&c.field);
                    out.push_str(": ");
                }
                out.push_str(&c.message);
            }
            out
        }
        other => other.to_string(),
    }
}

/// A 409: the object changed since it was read (stale resourceVersion, failed precondition).
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// The API server's refusal of a JSON patch whose operations do not apply: a 422 none of whose
/// causes names a field. Upstream answers a failed `test`, a missing path and any other
/// operation that does not apply alike ("the server rejected our request due to an error in
/// our request", no causes; a server that says more puts it in a cause without a field), so
/// this alone does not say that the node changed. A 422 with a field cause is the validation
/// of the patched object instead.
pub fn is_json_patch_refusal(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s)
        if s.code == 422
            && s.details.as_ref().is_none_or(|d| d.causes.iter().all(|c| c.field.is_empty())))
}

/// What a refused node patch means (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The node changed since it was read: a 409, or a `test` of the patch fails on the node
    /// as it is now. Plan again from the fresh node.
    Conflict(Option<FailingOperation>),
    /// An operation other than `test` fails on the node as it is now: the patch does not fit
    /// the node. Report it; planning again from the same node would give the same patch.
    Inapplicable(FailingOperation),
    /// A JSON-patch refusal, but the patch applies to the node as it is now: it changed back,
    /// or the refusal had another reason. Plan again, and report it if that gives the same
    /// patch.
    Unexplained,
    /// Not a refusal of the patch's content (another code, or a 422 with field causes):
    /// report the API server's answer as it is.
    Other,
}

impl Refusal {
    /// Whether the node should be re-read to classify `e` ([`classify_refusal`]).
    pub fn needs_fresh_node(e: &kube::Error) -> bool {
        is_conflict(e) || is_json_patch_refusal(e)
    }
}

/// Classifies the API server's refusal `e` of `patch`, replaying the patch on `fresh`, the node
/// as the API server has it now (re-read after the refusal).
pub fn classify_refusal(e: &kube::Error, patch: &json_patch::Patch, fresh: &Node) -> Refusal {
    if !Refusal::needs_fresh_node(e) {
        return Refusal::Other;
    }
    // A node that cannot be serialised cannot be replayed on: only a 409 is then a conflict.
    let failing = first_failing_operation(patch, fresh).ok().flatten();
    match failing {
        Some(op) if !op.is_test => Refusal::Inapplicable(op),
        Some(op) => Refusal::Conflict(Some(op)),
        None if is_conflict(e) => Refusal::Conflict(None),
        None => Refusal::Unexplained,
    }
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

fn now() -> Time {
    Time(jiff::Timestamp::now())
}

impl NodePoolReconciler {
    /// A reconciler reading from the given cache readers and writing with `client`; events go to
    /// `recorder` when given.
    pub fn new(
        client: kube::Client,
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

    /// Applies `plan` to its node; after a refusal, re-reads the node, classifies the refusal
    /// ([`classify_refusal`]) and plans again only when that can help.
    async fn apply_plan(
        &self,
        pool: &str,
        desired: Option<&Applied>,
        mut plan: NodePlan,
    ) -> Result<Option<(String, Vec<Change>, Vec<Conflict>)>, ReconcileFailure> {
        let api: Api<Node> = Api::all(self.client.clone());
        let params = PatchParams::default();
        for attempt in 1..=NODE_PATCH_ATTEMPTS {
            if plan.is_noop() {
                return Ok((!plan.conflicts.is_empty())
                    .then(|| (plan.node.clone(), Vec::new(), plan.conflicts.clone())));
            }
            let sent = plan.json_patch();
            let e = match api
                .patch(&plan.node, &params, &Patch::<()>::Json(sent.clone()))
                .await
            {
                Ok(_) => {
                    return Ok(Some((
                        plan.node.clone(),
                        plan.changes.clone(),
                        plan.conflicts.clone(),
                    )));
                }
                Err(e) if is_not_found(&e) => return Ok(None),
                Err(e) if Refusal::needs_fresh_node(&e) => e,
                Err(e) => {
                    return Err(ReconcileFailure::NodePatch {
                        node: plan.node.clone(),
                        source: e,
                    });
                }
            };
            let fresh = match api.get(&plan.node).await {
                Ok(n) => n,
                Err(ge) if is_not_found(&ge) => return Ok(None),
                Err(ge) => {
                    return Err(ReconcileFailure::NodePatch {
                        node: plan.node.clone(),
                        source: ge,
                    });
                }
            };
            let refusal = classify_refusal(&e, &sent, &fresh);
            tracing::debug!(node = %plan.node, attempt, error = %describe(&e), ?refusal, "node patch refused");
            let conflict = match refusal {
                Refusal::Conflict(_) => true,
                Refusal::Unexplained => false,
                Refusal::Inapplicable(operation) => {
                    return Err(ReconcileFailure::NodePatchInvalid {
                        node: plan.node.clone(),
                        operation,
                        source: e,
                    });
                }
                Refusal::Other => {
                    return Err(ReconcileFailure::NodePatch {
                        node: plan.node.clone(),
                        source: e,
                    });
                }
            };
            let still_member = desired.is_some() && is_member(&fresh, pool);
            let next = plan_node(pool, if still_member { desired } else { None }, &fresh);
            if !next.is_noop() && next.json_patch() == sent {
                // It would be refused again: not a conflict, whatever the server said.
                return Err(ReconcileFailure::NodePatchRejected {
                    node: plan.node.clone(),
                    source: e,
                });
            }
            if attempt == NODE_PATCH_ATTEMPTS && !next.is_noop() {
                return Err(if conflict {
                    ReconcileFailure::NodeConflict {
                        node: plan.node.clone(),
                        attempts: attempt,
                    }
                } else {
                    ReconcileFailure::NodePatchRejected {
                        node: plan.node.clone(),
                        source: e,
                    }
                });
            }
            plan = next;
        }
        // The last refusal's re-plan was a no-op: the node already is as wanted.
        Ok((!plan.conflicts.is_empty())
            .then(|| (plan.node.clone(), Vec::new(), plan.conflicts.clone())))
    }

    /// Plans and applies `pool`'s changes on every relevant node (`desired = None`: clean all).
    async fn sync_nodes(
        &self,
        pool: &str,
        desired: Option<&Applied>,
        outcome: &mut Outcome,
    ) -> Result<(), ReconcileFailure> {
        let all = self.nodes.list();
        let plans: Vec<NodePlan> = relevant_nodes(pool, all.iter())
            .into_iter()
            .map(|n| {
                let want = if is_member(n, pool) { desired } else { None };
                plan_node(pool, want, n)
            })
            .filter(|p| !p.is_noop() || !p.conflicts.is_empty())
            .collect();
        let results: Vec<_> = futures::stream::iter(plans)
            .map(|plan| self.apply_plan(pool, desired, plan))
            .buffer_unordered(NODE_PATCH_CONCURRENCY)
            .collect()
            .await;
        let mut first_error = None;
        for r in results {
            match r {
                Ok(Some((node, changes, conflicts))) => {
                    if !changes.is_empty() {
                        outcome.nodes.push((node.clone(), changes));
                    }
                    outcome
                        .conflicts
                        .extend(conflicts.into_iter().map(|c| (node.clone(), c)));
                }
                Ok(None) => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        outcome.nodes.sort_by(|a, b| a.0.cmp(&b.0));
        first_error.map_or(Ok(()), Err)
    }

    async fn ensure_finalizer(&self, pool: &NodePool) -> Result<(), ReconcileFailure> {
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

    async fn remove_finalizer(&self, pool: &NodePool) -> Result<(), ReconcileFailure> {
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

    async fn patch_pool(&self, pool: &NodePool, ops: Value) -> Result<(), ReconcileFailure> {
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

    /// Delete the pool's RuntimeClass if this pool controls it (uid precondition, so a
    /// RuntimeClass re-created by someone else meanwhile stays). The owner reference would have
    /// the garbage collector delete it too, but only once the collector watches NodePools: on a
    /// cluster whose CRD is new that takes up to its 30 s discovery period. Returns whether it
    /// deleted one.
    async fn delete_owned_runtime_class(&self, pool: &NodePool) -> Result<bool, ReconcileFailure> {
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

    async fn sync_runtime_class(
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

    async fn write_status(
        &self,
        pool: &NodePool,
        new: &NodePoolStatus,
    ) -> Result<bool, kube::Error> {
        let current = pool.status.as_ref();
        if !needs_write(current, new) {
            return Ok(false);
        }
        let api: Api<NodePool> = Api::all(self.client.clone());
        api.patch_status(
            &pool.name_any(),
            &PatchParams::default(),
            &Patch::Merge(merge_patch(current, new)),
        )
        .await?;
        Ok(true)
    }

    /// The reconcile proper, without the failure handling.
    pub async fn reconcile_pool(&self, pool: &NodePool) -> Result<Outcome, ReconcileFailure> {
        let name = pool.name_any();
        let mut outcome = Outcome::default();
        if pool.metadata.deletion_timestamp.is_some() {
            if !pool.finalizers().iter().any(|f| f == FINALIZER) {
                return Ok(outcome);
            }
            self.sync_nodes(&name, None, &mut outcome).await?;
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
                    format!(
                        "deleted RuntimeClass {}",
                        runtime_class_name(&pool.name_any())
                    ),
                )
                .await;
            }
            self.remove_finalizer(pool).await?;
            return Ok(outcome);
        }
        self.ensure_finalizer(pool).await?;

        let desired = Applied::from_spec(&pool.spec);
        self.sync_nodes(&name, Some(&desired), &mut outcome).await?;
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
        Ok(outcome)
    }
}

impl Reconciler<Request> for NodePoolReconciler {
    type Error = ReconcileFailure;

    async fn reconcile(
        &self,
        request: &Request,
        _ctx: &Context,
    ) -> Result<Action, ReconcileFailure> {
        let Some(pool) = self.pools.get(&request.name, None) else {
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
mod tests {
    use super::*;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("boom", "Reason")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn failure_reasons_and_codes() {
        let cases: Vec<(ReconcileFailure, &str, i32)> = vec![
            (
                ReconcileFailure::NodePatch {
                    node: "n".into(),
                    source: api_error(500),
                },
                "NodePatchFailed",
                500,
            ),
            (
                ReconcileFailure::NodeConflict {
                    node: "n".into(),
                    attempts: 5,
                },
                "NodeConflict",
                409,
            ),
            (
                ReconcileFailure::Finalizer(api_error(403)),
                "FinalizerUpdateFailed",
                403,
            ),
            (
                ReconcileFailure::RuntimeClass {
                    name: "rc".into(),
                    source: api_error(503),
                },
                "RuntimeClassFailed",
                503,
            ),
            (
                ReconcileFailure::Owner(RuntimeClassError::PoolNotPersisted),
                "PoolNotPersisted",
                422,
            ),
            (
                ReconcileFailure::Status(api_error(409)),
                "StatusUpdateFailed",
                409,
            ),
        ];
        for (e, reason, code) in cases {
            assert_eq!(e.reason(), reason);
            assert_eq!(e.code(), code, "{e}");
            assert!(!e.is_terminal());
        }
        assert!(is_conflict(&api_error(409)));
        assert!(!is_conflict(&api_error(422)));
        assert!(!is_conflict(&api_error(500)));
        assert!(is_not_found(&api_error(404)));
    }

    /// The API server's answer to a JSON patch that does not apply (any operation).
    fn json_patch_refused() -> kube::Error {
        let mut s = kube::core::Status::failure(
            "the server rejected our request due to an error in our request",
            "Invalid",
        )
        .with_code(422);
        s.details = Some(serde_json::from_value(json!({})).unwrap());
        kube::Error::Api(s.boxed())
    }

    /// A 422 from validating the patched node: with field causes.
    fn invalid_node() -> kube::Error {
        let mut s = kube::core::Status::failure(
            "Node \"n1\" is invalid: spec.taints[0].effect: Unsupported value: \"Never\"",
            "Invalid",
        )
        .with_code(422);
        s.details = Some(
            serde_json::from_value(json!({"name": "n1", "kind": "nodes", "causes": [{
                "reason": "FieldValueNotSupported",
                "message": "Unsupported value: \"Never\"",
                "field": "spec.taints[0].effect"
            }]}))
            .unwrap(),
        );
        kube::Error::Api(s.boxed())
    }

    fn node(v: Value) -> Node {
        serde_json::from_value(v).unwrap()
    }

    fn worker_spec() -> Applied {
        Applied {
            labels: [("node-pool.lailin.xyz/w".to_owned(), "1".to_owned())].into(),
            taints: vec![crate::nodes::PoolTaint {
                key: "node-pool.lailin.xyz".into(),
                value: "w".into(),
                effect: "NoSchedule".into(),
            }],
        }
    }

    #[test]
    fn only_a_failed_test_or_a_409_is_a_conflict() {
        let member = node(json!({"metadata": {"name": "n1", "resourceVersion": "7",
            "labels": {"node-role.kubernetes.io/worker": ""}, "annotations": {}},
            "spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]}}));
        let plan = plan_node("worker", Some(&worker_spec()), &member);
        let sent = plan.json_patch();

        // Someone changed the taints since: the patch's `test /spec/taints` fails on the
        // fresh node. A conflict, whichever of 409 or 422 the server answered.
        let mut changed = member.clone();
        changed.spec.as_mut().unwrap().taints = Some(vec![]);
        changed.metadata.resource_version = Some("8".into());
        for e in [json_patch_refused(), api_error(409)] {
            match classify_refusal(&e, &sent, &changed) {
                Refusal::Conflict(Some(op)) => {
                    assert!(op.is_test);
                    assert_eq!(op.operation, "test /spec/taints");
                }
                other => panic!("{}: {other:?}", describe(&e)),
            }
        }
        // The node is as it was: the patch applies. A 409 is still a conflict (the
        // resourceVersion moved), a JSON-patch refusal is unexplained.
        assert_eq!(
            classify_refusal(&api_error(409), &sent, &member),
            Refusal::Conflict(None)
        );
        assert_eq!(
            classify_refusal(&json_patch_refused(), &sent, &member),
            Refusal::Unexplained
        );
        // A server that names the failing operation in a cause without a field: the same.
        let mut detailed =
            kube::core::Status::failure("Node \"n1\" is invalid", "Invalid").with_code(422);
        detailed.details = Some(
            serde_json::from_value(json!({"causes": [{"reason": "FieldValueInvalid",
                "message": "json patch failed: testing value /spec/taints failed"}]}))
            .unwrap(),
        );
        let detailed = kube::Error::Api(detailed.boxed());
        assert!(matches!(
            classify_refusal(&detailed, &sent, &changed),
            Refusal::Conflict(Some(_))
        ));
        // Validation of the patched node, server errors, forbidden: reported as they are.
        for e in [
            invalid_node(),
            api_error(500),
            api_error(403),
            api_error(400),
        ] {
            assert_eq!(
                classify_refusal(&e, &sent, &changed),
                Refusal::Other,
                "{}",
                describe(&e)
            );
            assert!(!Refusal::needs_fresh_node(&e));
        }
    }

    #[test]
    fn a_patch_that_does_not_fit_the_node_is_not_a_conflict() {
        // Issue 18: the patch adds /spec/taints, the node has no spec. Replayed on the fresh
        // node, an `add` fails, not a `test`.
        let no_spec = node(json!({"metadata": {"name": "n1", "resourceVersion": "7",
            "labels": {"node-role.kubernetes.io/worker": ""}}}));
        let old_style: json_patch::Patch = serde_json::from_value(json!([
            {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
            {"op": "add", "path": "/spec/taints", "value": [{"key": "k", "effect": "NoSchedule"}]}
        ]))
        .unwrap();
        match classify_refusal(&json_patch_refused(), &old_style, &no_spec) {
            Refusal::Inapplicable(op) => {
                assert_eq!((op.index, op.is_test), (1, false));
                assert_eq!(op.operation, "add /spec/taints");
                assert!(!op.error.is_empty());
            }
            other => panic!("{other:?}"),
        }
        // Today's plan for the same node fits it.
        let plan = plan_node("worker", Some(&worker_spec()), &no_spec);
        assert_eq!(
            first_failing_operation(&plan.json_patch(), &no_spec).unwrap(),
            None
        );
    }

    #[test]
    fn failures_name_the_api_servers_answer() {
        let e = ReconcileFailure::NodePatch {
            node: "n1".into(),
            source: invalid_node(),
        };
        assert_eq!(
            e.to_string(),
            "patching node n1: 422 Invalid: Node \"n1\" is invalid: spec.taints[0].effect: \
             Unsupported value: \"Never\"; spec.taints[0].effect: Unsupported value: \"Never\""
        );
        let e = ReconcileFailure::NodePatchRejected {
            node: "n1".into(),
            source: json_patch_refused(),
        };
        assert_eq!(e.reason(), "NodePatchRejected");
        assert_eq!(e.code(), 422);
        assert!(
            e.to_string().ends_with(
                "422 Invalid: the server rejected our request due to an error in our request"
            ),
            "{e}"
        );
        let e = ReconcileFailure::NodePatchInvalid {
            node: "n1".into(),
            operation: FailingOperation {
                index: 1,
                is_test: false,
                operation: "add /spec/taints".into(),
                error: "path is invalid".into(),
            },
            source: json_patch_refused(),
        };
        assert_eq!(e.reason(), "NodePatchInvalid");
        assert_eq!(e.code(), 422);
        assert!(
            e.to_string()
                .contains("operation 1 (add /spec/taints) fails: path is invalid"),
            "{e}"
        );
    }
}
