//! What a pool does to its nodes: the pure planning of label and taint changes, and the patch
//! that carries them.
//!
//! ## Remembering what a pool applied
//! Each pool records, on every node it touched, exactly the labels and taints it put there, as
//! JSON in the annotation `applied.node-pool.lailin.xyz/<pool>` (see [`applied_annotation_key`];
//! the name part is the pool name, which the membership label key already limits to a valid
//! label name). The record lives on the node itself, so it survives operator restarts, and it is
//! written in the same atomic patch as the labels and taints it describes, so it can never
//! disagree with them, whatever point a crash interrupts.
//!
//! ## Rules ([`plan_node`])
//! - A member node gets every label and taint of the spec. A taint is identified by key and
//!   effect; a different value is updated in place (same position in the list).
//! - A label or taint this pool applied earlier (in its record) and no longer in the spec is
//!   removed, but only while it still has the value the pool gave it: a value someone else has
//!   since changed belongs to them now and is left alone (this also keeps two pools from
//!   removing each other's values when a node moves between pools that share a key).
//! - A node that is no longer a member, or every node when the pool is being deleted, loses
//!   exactly what the record lists (same value rule), and the record is removed.
//! - Everything else on the node is left untouched.
//! - If another pool the node is still a member of has applied a different value for the same
//!   label key or taint identity, this pool does not overwrite it: the plan reports a
//!   [`Conflict`] instead (two pools overwriting each other would loop forever).
//!
//! ## How nodes are written
//! One RFC 6902 JSON patch per node ([`NodePlan::json_patch`]), applied atomically by the API
//! server. JSON patch rather than merge patches because `spec.taints` is an atomic list on the
//! real API server (a strategic merge or merge patch replaces it wholesale, losing a taint that
//! another controller added meanwhile), and JSON patch can guard it:
//! - `test /spec/taints <list as read>` before `replace /spec/taints <new list>`: a concurrent
//!   taint change makes the whole patch fail instead of being lost;
//! - `test` on the old value before replacing or removing a label or the record annotation;
//! - single label keys are added with `add /metadata/labels/<key>`, so labels other writers add
//!   meanwhile are kept;
//! - only when a map or list does not exist yet (no labels, no annotations, no taints, no
//!   `spec` at all) is there nothing precise to test, and the patch tests
//!   `metadata.resourceVersion` instead; the missing map or list is then added whole
//!   (`add /metadata/labels {...}`, `add /spec/taints [...]`, or `add /spec {"taints": [...]}`
//!   on a node stored without `spec`).
//!
//! The patch applies to a node of any shape: without `spec`, labels, annotations or taints, or
//! with an empty taint list (a real API server always stores `spec`, kcr-envtest does too, but
//! the plan does not depend on it).
//!
//! The patch never touches `status` and never carries the resourceVersion otherwise, so a
//! kubelet's status heartbeats do not make it fail. When a `test` does fail (the API server
//! answers 422, without saying which operation failed), the reconciler re-reads that node from
//! the API server, finds out whether a `test` or another operation is what fails on it
//! ([`first_failing_operation`]), and plans again only in the first case; see `reconciler`.
//!
//! The module is split by concern: [`plan`](plan_node) holds the rules (what to change, what is
//! left to another pool), `patch` turns a plan into its guarded JSON patch and replays a patch
//! on a node ([`first_failing_operation`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Taint};
use serde::{Deserialize, Serialize};

use crate::crd::{NodePoolSpec, membership_label};

mod patch;
mod plan;

pub use patch::{FailingOperation, first_failing_operation};
pub use plan::{Change, Conflict, NodePlan, plan_node};

/// Prefix of the annotation key holding a pool's applied record: `applied.node-pool.lailin.xyz/`.
pub const APPLIED_ANNOTATION_PREFIX: &str = "applied.node-pool.lailin.xyz/";

/// The annotation key under which `pool` records what it applied to a node.
pub fn applied_annotation_key(pool: &str) -> String {
    format!("{APPLIED_ANNOTATION_PREFIX}{pool}")
}

/// A taint as a pool wants it or applied it: identified by `(key, effect)`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PoolTaint {
    /// Taint key.
    pub key: String,
    /// Taint value (empty when the taint has none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// Taint effect.
    pub effect: String,
}

impl PoolTaint {
    /// From a core/v1 taint (an absent value is the empty value).
    pub fn from_taint(t: &Taint) -> PoolTaint {
        PoolTaint {
            key: t.key.clone(),
            value: t.value.clone().unwrap_or_default(),
            effect: t.effect.clone(),
        }
    }

    fn same_identity(&self, t: &Taint) -> bool {
        self.key == t.key && self.effect == t.effect
    }

    fn to_taint(&self) -> Taint {
        Taint {
            key: self.key.clone(),
            value: (!self.value.is_empty()).then(|| self.value.clone()),
            effect: self.effect.clone(),
            time_added: None,
        }
    }
}

impl std::fmt::Display for PoolTaint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}:{}", self.key, self.value, self.effect)
    }
}

fn taint_value(t: &Taint) -> &str {
    t.value.as_deref().unwrap_or("")
}

/// The labels and taints one pool applied to one node (the annotation's JSON), or wants there.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// Labels, key to value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Taints, in spec order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<PoolTaint>,
}

impl Applied {
    /// What a pool's spec asks every member node to carry.
    pub fn from_spec(spec: &NodePoolSpec) -> Applied {
        Applied {
            labels: spec.labels.clone(),
            taints: spec.taints.iter().map(PoolTaint::from_taint).collect(),
        }
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.taints.is_empty()
    }

    fn claims_taint(&self, key: &str, effect: &str, value: &str) -> bool {
        self.taints
            .iter()
            .any(|t| t.key == key && t.effect == effect && t.value == value)
    }
}

/// Whether `node` is a member of `pool` (carries `node-role.kubernetes.io/<pool>`).
pub fn is_member(node: &Node, pool: &str) -> bool {
    node.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(&membership_label(pool)))
}

/// Whether `node` carries `pool`'s applied record.
pub fn has_record(node: &Node, pool: &str) -> bool {
    node.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(&applied_annotation_key(pool)))
}
/// The nodes `pool` has to look at: its members and every node still carrying its record.
pub fn relevant_nodes<'a, N>(pool: &str, nodes: impl IntoIterator<Item = &'a N>) -> Vec<&'a N>
where
    N: AsRef<Node> + 'a,
{
    nodes
        .into_iter()
        .filter(|n| is_member(n.as_ref(), pool) || has_record(n.as_ref(), pool))
        .collect()
}

#[cfg(test)]
mod tests;
