//! The pool's guarded node patches: plan every relevant node, send the patches concurrently,
//! and after a refusal re-read the node, classify the refusal and plan again when that helps.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, Patch};

use super::error::{ReconcileFailure, Refusal, classify_refusal, describe, is_not_found};
use super::{NodePoolReconciler, Outcome};
use crate::nodes::{Applied, Change, Conflict, NodePlan, is_member, plan_node, relevant_nodes};

/// How many times one node's guarded patch is sent within one reconcile (the first plan and
/// the re-plans after conflicts).
pub(super) const NODE_PATCH_ATTEMPTS: usize = 5;
/// How many node patches one reconcile sends concurrently.
const NODE_PATCH_CONCURRENCY: usize = 16;

impl NodePoolReconciler {
    /// Applies `plan` to its node; after a refusal, re-reads the node, classifies the refusal
    /// ([`classify_refusal`]) and plans again only when that can help.
    pub(super) async fn apply_plan(
        &self,
        pool: &str,
        desired: Option<&Applied>,
        mut plan: NodePlan,
    ) -> Result<Option<(String, Vec<Change>, Vec<Conflict>)>, ReconcileFailure> {
        let api: Api<Node> = self.api();
        let params = self.patch_params();
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
    pub(super) async fn sync_nodes(
        &self,
        pool: &str,
        desired: Option<&Applied>,
        outcome: &mut Outcome,
    ) -> Result<(), ReconcileFailure> {
        let all: Vec<Arc<Node>> = if desired.is_none() {
            // The cleanup before the finalizer goes: the last reconcile of this pool, so the
            // nodes come from the API server. A node the cache did not show with the pool's
            // labels yet (the cache lags the operator's own patch) would keep them for good;
            // kcr-perturb's stale-read class found this (issue 30).
            self.api::<Node>()
                .list(&ListParams::default())
                .await
                .map_err(ReconcileFailure::NodeList)?
                .items
                .into_iter()
                .map(Arc::new)
                .collect()
        } else {
            self.nodes.list()
        };
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
}
