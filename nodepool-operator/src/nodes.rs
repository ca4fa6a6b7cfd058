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

use std::collections::{BTreeMap, BTreeSet};

use json_patch::jsonptr::PointerBuf;
use json_patch::{
    AddOperation, Patch, PatchOperation, RemoveOperation, ReplaceOperation, TestOperation,
};
use k8s_openapi::api::core::v1::{Node, Taint};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::crd::{MEMBERSHIP_LABEL_PREFIX, NodePoolSpec, membership_label};

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

/// One change a plan makes on a node, for events and for the demo's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A label added or given a new value.
    LabelSet {
        /// Label key.
        key: String,
        /// Previous value, if the key existed.
        old: Option<String>,
        /// New value.
        new: String,
    },
    /// A label removed.
    LabelRemoved {
        /// Label key.
        key: String,
        /// The value it had.
        value: String,
    },
    /// A taint added.
    TaintAdded(PoolTaint),
    /// A taint's value updated in place.
    TaintUpdated {
        /// The taint before.
        old: PoolTaint,
        /// The taint after.
        new: PoolTaint,
    },
    /// A taint removed.
    TaintRemoved(PoolTaint),
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::LabelSet {
                key,
                old: None,
                new,
            } => write!(f, "+label {key}={new}"),
            Change::LabelSet {
                key,
                old: Some(old),
                new,
            } => write!(f, "~label {key}={old} -> {new}"),
            Change::LabelRemoved { key, value } => write!(f, "-label {key}={value}"),
            Change::TaintAdded(t) => write!(f, "+taint {t}"),
            Change::TaintUpdated { old, new } => write!(f, "~taint {old} -> {new}"),
            Change::TaintRemoved(t) => write!(f, "-taint {t}"),
        }
    }
}

/// A value this pool wants but another member pool of the node applied differently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The other pool.
    pub other_pool: String,
    /// `label <key>` or `taint <key>:<effect>`.
    pub what: String,
    /// The value on the node (the other pool's).
    pub current: String,
    /// The value this pool wants.
    pub wanted: String,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is {:?} from pool {}, this pool wants {:?}",
            self.what, self.current, self.other_pool, self.wanted
        )
    }
}

/// Everything one pool changes on one node, and the state it starts from.
#[derive(Debug, Clone, PartialEq)]
pub struct NodePlan {
    /// Node name.
    pub node: String,
    /// The changes, labels first, in a stable order.
    pub changes: Vec<Change>,
    /// Values left alone because another member pool owns them.
    pub conflicts: Vec<Conflict>,
    /// The record annotation could not be parsed (hand-edited); it is rewritten from scratch.
    pub record_was_invalid: bool,
    pool: String,
    old_labels: Option<BTreeMap<String, String>>,
    label_sets: BTreeMap<String, String>,
    label_removals: BTreeMap<String, String>,
    spec_exists: bool,
    old_taints: Option<Vec<Taint>>,
    new_taints: Option<Vec<Taint>>,
    annotations_exist: bool,
    old_record: Option<String>,
    new_record: Option<String>,
    resource_version: Option<String>,
}

impl NodePlan {
    /// Whether the node needs no write at all.
    pub fn is_noop(&self) -> bool {
        self.label_sets.is_empty()
            && self.label_removals.is_empty()
            && self.new_taints.is_none()
            && self.old_record == self.new_record
    }

    /// The record annotation's value after the patch (`None`: no record).
    pub fn new_record(&self) -> Option<&str> {
        self.new_record.as_deref()
    }

    /// The RFC 6902 patch that performs the plan atomically (see the module docs for the
    /// preconditions it carries). Empty when [`NodePlan::is_noop`].
    pub fn json_patch(&self) -> Patch {
        let mut ops = Vec::new();
        if self.is_noop() {
            return Patch(ops);
        }
        let labels_missing = self.old_labels.is_none() && !self.label_sets.is_empty();
        let taints_missing = self.old_taints.is_none() && self.new_taints.is_some();
        let annotations_missing = !self.annotations_exist && self.new_record.is_some();
        if labels_missing || taints_missing || annotations_missing {
            // Nothing precise to test for a map or list that does not exist yet.
            if let Some(rv) = &self.resource_version {
                ops.push(test(
                    &["metadata", "resourceVersion"],
                    Value::String(rv.clone()),
                ));
            }
        }
        // Labels.
        if labels_missing {
            let map: serde_json::Map<String, Value> = self
                .label_sets
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            ops.push(add(&["metadata", "labels"], Value::Object(map)));
        } else {
            let old = self.old_labels.as_ref();
            for (k, v) in &self.label_sets {
                match old.and_then(|l| l.get(k)) {
                    Some(prev) => {
                        ops.push(test(
                            &["metadata", "labels", k],
                            Value::String(prev.clone()),
                        ));
                        ops.push(replace(
                            &["metadata", "labels", k],
                            Value::String(v.clone()),
                        ));
                    }
                    None => ops.push(add(&["metadata", "labels", k], Value::String(v.clone()))),
                }
            }
        }
        for (k, v) in &self.label_removals {
            ops.push(test(&["metadata", "labels", k], Value::String(v.clone())));
            ops.push(remove(&["metadata", "labels", k]));
        }
        // Taints.
        if let Some(new) = &self.new_taints {
            let new_value = taints_json(new);
            match &self.old_taints {
                Some(old) => {
                    ops.push(test(&["spec", "taints"], taints_json(old)));
                    ops.push(replace(&["spec", "taints"], new_value));
                }
                None if self.spec_exists => ops.push(add(&["spec", "taints"], new_value)),
                None => {
                    let mut spec = serde_json::Map::new();
                    spec.insert("taints".to_owned(), new_value);
                    ops.push(add(&["spec"], Value::Object(spec)));
                }
            }
        }
        // The record.
        let key = applied_annotation_key(&self.pool);
        match (&self.old_record, &self.new_record) {
            (old, new) if old == new => {}
            (None, Some(new)) if !self.annotations_exist => {
                let mut map = serde_json::Map::new();
                map.insert(key, Value::String(new.clone()));
                ops.push(add(&["metadata", "annotations"], Value::Object(map)));
            }
            (None, Some(new)) => ops.push(add(
                &["metadata", "annotations", &key],
                Value::String(new.clone()),
            )),
            (Some(old), Some(new)) => {
                ops.push(test(
                    &["metadata", "annotations", &key],
                    Value::String(old.clone()),
                ));
                ops.push(replace(
                    &["metadata", "annotations", &key],
                    Value::String(new.clone()),
                ));
            }
            (Some(old), None) => {
                ops.push(test(
                    &["metadata", "annotations", &key],
                    Value::String(old.clone()),
                ));
                ops.push(remove(&["metadata", "annotations", &key]));
            }
            (None, None) => {}
        }
        Patch(ops)
    }
}

fn pointer(parts: &[&str]) -> PointerBuf {
    PointerBuf::from_tokens(parts.iter().copied())
}

fn test(parts: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Test(TestOperation {
        path: pointer(parts),
        value,
    })
}

fn add(parts: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation {
        path: pointer(parts),
        value,
    })
}

fn replace(parts: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Replace(ReplaceOperation {
        path: pointer(parts),
        value,
    })
}

fn remove(parts: &[&str]) -> PatchOperation {
    PatchOperation::Remove(RemoveOperation {
        path: pointer(parts),
    })
}

fn taints_json(taints: &[Taint]) -> Value {
    // Serialising core/v1 taints cannot fail: plain strings and an RFC 3339 time.
    serde_json::to_value(taints).unwrap_or(Value::Array(Vec::new()))
}

/// The records of the *other* pools this node is still a member of.
fn other_member_records(node: &Node, pool: &str) -> Vec<(String, Applied)> {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let Some(annotations) = &node.metadata.annotations else {
        return Vec::new();
    };
    annotations
        .iter()
        .filter_map(|(k, v)| {
            let other = k.strip_prefix(APPLIED_ANNOTATION_PREFIX)?;
            if other == pool || !labels.contains_key(&format!("{MEMBERSHIP_LABEL_PREFIX}{other}")) {
                return None;
            }
            let record: Applied = serde_json::from_str(v).ok()?;
            Some((other.to_owned(), record))
        })
        .collect()
}

/// Plans what `pool` changes on `node`.
///
/// `desired` is `Some(what the spec asks)` when the node is a member and the pool is not being
/// deleted, and `None` when the pool must clean the node (it left the pool, or the pool is being
/// deleted). The result says what to change ([`NodePlan::changes`]), how
/// ([`NodePlan::json_patch`]), and what was left alone ([`NodePlan::conflicts`]).
pub fn plan_node(pool: &str, desired: Option<&Applied>, node: &Node) -> NodePlan {
    let node_name = node.metadata.name.clone().unwrap_or_default();
    let old_labels = node.metadata.labels.clone();
    let labels = old_labels.clone().unwrap_or_default();
    let annotations = node.metadata.annotations.as_ref();
    let key = applied_annotation_key(pool);
    let old_record = annotations.and_then(|a| a.get(&key)).cloned();
    let (record, record_was_invalid) = match &old_record {
        None => (Applied::default(), false),
        Some(raw) => match serde_json::from_str::<Applied>(raw) {
            Ok(r) => (r, false),
            Err(_) => (Applied::default(), true),
        },
    };
    let empty = Applied::default();
    let want = desired.unwrap_or(&empty);
    let others = if desired.is_some() {
        other_member_records(node, pool)
    } else {
        Vec::new()
    };

    let mut changes = Vec::new();
    let mut conflicts = Vec::new();
    let mut new_record = Applied::default();

    // Labels.
    let mut label_sets = BTreeMap::new();
    let mut label_removals = BTreeMap::new();
    for (k, v) in &want.labels {
        match labels.get(k) {
            Some(cur) if cur == v => {
                new_record.labels.insert(k.clone(), v.clone());
            }
            Some(cur) => {
                let owner = others
                    .iter()
                    .find(|(_, r)| r.labels.get(k) == Some(cur))
                    .map(|(p, _)| p.clone());
                if let Some(other_pool) = owner {
                    conflicts.push(Conflict {
                        other_pool,
                        what: format!("label {k}"),
                        current: cur.clone(),
                        wanted: v.clone(),
                    });
                } else {
                    label_sets.insert(k.clone(), v.clone());
                    changes.push(Change::LabelSet {
                        key: k.clone(),
                        old: Some(cur.clone()),
                        new: v.clone(),
                    });
                    new_record.labels.insert(k.clone(), v.clone());
                }
            }
            None => {
                label_sets.insert(k.clone(), v.clone());
                changes.push(Change::LabelSet {
                    key: k.clone(),
                    old: None,
                    new: v.clone(),
                });
                new_record.labels.insert(k.clone(), v.clone());
            }
        }
    }
    for (k, v) in &record.labels {
        if want.labels.contains_key(k) {
            continue;
        }
        if labels.get(k) == Some(v) {
            label_removals.insert(k.clone(), v.clone());
            changes.push(Change::LabelRemoved {
                key: k.clone(),
                value: v.clone(),
            });
        }
    }

    // Taints.
    let old_taints = node.spec.as_ref().and_then(|s| s.taints.clone());
    let mut taints = old_taints.clone().unwrap_or_default();
    let mut taints_changed = false;
    for t in &want.taints {
        match taints.iter_mut().find(|cur| t.same_identity(cur)) {
            Some(cur) if taint_value(cur) == t.value => new_record.taints.push(t.clone()),
            Some(cur) => {
                let current = taint_value(cur).to_owned();
                let owner = others
                    .iter()
                    .find(|(_, r)| r.claims_taint(&t.key, &t.effect, &current))
                    .map(|(p, _)| p.clone());
                if let Some(other_pool) = owner {
                    conflicts.push(Conflict {
                        other_pool,
                        what: format!("taint {}:{}", t.key, t.effect),
                        current,
                        wanted: t.value.clone(),
                    });
                } else {
                    let old = PoolTaint::from_taint(cur);
                    cur.value = (!t.value.is_empty()).then(|| t.value.clone());
                    taints_changed = true;
                    changes.push(Change::TaintUpdated {
                        old,
                        new: t.clone(),
                    });
                    new_record.taints.push(t.clone());
                }
            }
            None => {
                taints.push(t.to_taint());
                taints_changed = true;
                changes.push(Change::TaintAdded(t.clone()));
                new_record.taints.push(t.clone());
            }
        }
    }
    let wanted_ids: BTreeSet<(&str, &str)> = want
        .taints
        .iter()
        .map(|t| (t.key.as_str(), t.effect.as_str()))
        .collect();
    for t in &record.taints {
        if wanted_ids.contains(&(t.key.as_str(), t.effect.as_str())) {
            continue;
        }
        let before = taints.len();
        taints.retain(|cur| !(t.same_identity(cur) && taint_value(cur) == t.value));
        if taints.len() != before {
            taints_changed = true;
            changes.push(Change::TaintRemoved(t.clone()));
        }
    }

    let new_record_raw = if new_record.is_empty() {
        None
    } else if !record_was_invalid && record == new_record {
        // Unchanged: keep the exact text, so no write happens for formatting alone.
        old_record.clone()
    } else {
        // Serialising plain strings cannot fail.
        serde_json::to_string(&new_record).ok()
    };

    NodePlan {
        node: node_name,
        changes,
        conflicts,
        record_was_invalid,
        pool: pool.to_owned(),
        old_labels,
        label_sets,
        label_removals,
        spec_exists: node.spec.is_some(),
        old_taints,
        new_taints: taints_changed.then_some(taints),
        annotations_exist: annotations.is_some(),
        old_record,
        new_record: new_record_raw,
        resource_version: node.metadata.resource_version.clone(),
    }
}

/// The first operation of a JSON patch that fails on a node (see [`first_failing_operation`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailingOperation {
    /// Its position in the patch (from 0).
    pub index: usize,
    /// Whether it is a `test`: a precondition that no longer holds (the node changed), as
    /// opposed to an operation that cannot apply to the node as it is.
    pub is_test: bool,
    /// The operation and its path, as `add /spec/taints`.
    pub operation: String,
    /// Why it fails (the JSON patch library's message).
    pub error: String,
}

impl std::fmt::Display for FailingOperation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "operation {} ({}) fails: {}",
            self.index, self.operation, self.error
        )
    }
}

fn describe_operation(op: &PatchOperation) -> String {
    let (name, path) = match op {
        PatchOperation::Add(o) => ("add", &o.path),
        PatchOperation::Remove(o) => ("remove", &o.path),
        PatchOperation::Replace(o) => ("replace", &o.path),
        PatchOperation::Move(o) => ("move", &o.path),
        PatchOperation::Copy(o) => ("copy", &o.path),
        PatchOperation::Test(o) => ("test", &o.path),
    };
    format!("{name} {path}")
}

/// The first operation of `patch` that fails when the patch is applied to `node` as it is
/// (`None`: the whole patch applies). The API server refuses a JSON patch that does not apply
/// with a 422 that does not say which operation failed; replaying the patch on the node as it
/// is now tells a failed `test` (the node changed since it was read) from an operation that
/// cannot apply to it (the patch does not fit the node).
pub fn first_failing_operation(
    patch: &Patch,
    node: &Node,
) -> Result<Option<FailingOperation>, serde_json::Error> {
    let mut doc = serde_json::to_value(node)?;
    for (index, op) in patch.0.iter().enumerate() {
        if let Err(e) = json_patch::patch(&mut doc, std::slice::from_ref(op)) {
            return Ok(Some(FailingOperation {
                index,
                is_test: matches!(op, PatchOperation::Test(_)),
                operation: describe_operation(op),
                error: e.kind.to_string(),
            }));
        }
    }
    Ok(None)
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
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde_json::json;

    fn node(labels: &[(&str, &str)], taints: &[(&str, &str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                resource_version: Some("7".into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                taints: (!taints.is_empty()).then(|| {
                    taints
                        .iter()
                        .map(|(k, v, e)| Taint {
                            key: k.to_string(),
                            value: (!v.is_empty()).then(|| v.to_string()),
                            effect: e.to_string(),
                            time_added: None,
                        })
                        .collect()
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn with_record(mut n: Node, pool: &str, record: &Applied) -> Node {
        n.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(
                applied_annotation_key(pool),
                serde_json::to_string(record).unwrap(),
            );
        n
    }

    fn desired(labels: &[(&str, &str)], taints: &[(&str, &str, &str)]) -> Applied {
        Applied {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            taints: taints
                .iter()
                .map(|(k, v, e)| PoolTaint {
                    key: k.to_string(),
                    value: v.to_string(),
                    effect: e.to_string(),
                })
                .collect(),
        }
    }

    /// Applies the plan's patch to the node as the API server would.
    fn apply(n: &Node, plan: &NodePlan) -> Result<Node, json_patch::PatchError> {
        let mut v = serde_json::to_value(n).unwrap();
        json_patch::patch(&mut v, &plan.json_patch())?;
        Ok(serde_json::from_value(v).unwrap())
    }

    fn labels_of(n: &Node) -> BTreeMap<String, String> {
        n.metadata.labels.clone().unwrap_or_default()
    }

    fn taints_of(n: &Node) -> Vec<(String, String, String)> {
        n.spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default()
            .iter()
            .map(|t| (t.key.clone(), taint_value(t).to_owned(), t.effect.clone()))
            .collect()
    }

    fn record_of(n: &Node, pool: &str) -> Option<Applied> {
        n.metadata
            .annotations
            .as_ref()?
            .get(&applied_annotation_key(pool))
            .map(|s| serde_json::from_str(s).unwrap())
    }

    fn t(k: &str, v: &str, e: &str) -> (String, String, String) {
        (k.into(), v.into(), e.into())
    }

    const ROLE: (&str, &str) = ("node-role.kubernetes.io/worker", "");
    const HOST: (&str, &str) = ("kubernetes.io/hostname", "n1");

    /// A table of (name, node before, desired, expected labels, expected taints, expected
    /// record) run through plan + patch.
    #[test]
    fn plan_table() {
        struct Case {
            name: &'static str,
            node: Node,
            desired: Option<Applied>,
            labels: Vec<(&'static str, &'static str)>,
            taints: Vec<(String, String, String)>,
            record: Option<Applied>,
        }
        let spec = desired(
            &[("node-pool.lailin.xyz/worker", "10")],
            &[("node-pool.lailin.xyz", "worker", "NoSchedule")],
        );
        let cases = vec![
            Case {
                name: "fresh member gets labels and taints",
                node: node(&[ROLE, HOST], &[]),
                desired: Some(spec.clone()),
                labels: vec![ROLE, HOST, ("node-pool.lailin.xyz/worker", "10")],
                taints: vec![t("node-pool.lailin.xyz", "worker", "NoSchedule")],
                record: Some(spec.clone()),
            },
            Case {
                name: "foreign labels and taints are kept",
                node: node(
                    &[ROLE, HOST, ("team", "a")],
                    &[("node.kubernetes.io/not-ready", "", "NoExecute")],
                ),
                desired: Some(spec.clone()),
                labels: vec![
                    ROLE,
                    HOST,
                    ("team", "a"),
                    ("node-pool.lailin.xyz/worker", "10"),
                ],
                taints: vec![
                    t("node.kubernetes.io/not-ready", "", "NoExecute"),
                    t("node-pool.lailin.xyz", "worker", "NoSchedule"),
                ],
                record: Some(spec.clone()),
            },
            Case {
                name: "taint value updated in place, same identity",
                node: node(
                    &[ROLE],
                    &[
                        ("a", "1", "NoSchedule"),
                        ("node-pool.lailin.xyz", "old", "NoSchedule"),
                        ("z", "", "NoExecute"),
                    ],
                ),
                desired: Some(spec.clone()),
                labels: vec![ROLE, ("node-pool.lailin.xyz/worker", "10")],
                taints: vec![
                    t("a", "1", "NoSchedule"),
                    t("node-pool.lailin.xyz", "worker", "NoSchedule"),
                    t("z", "", "NoExecute"),
                ],
                record: Some(spec.clone()),
            },
            Case {
                name: "same key with another effect is another taint",
                node: node(&[ROLE], &[("node-pool.lailin.xyz", "worker", "NoExecute")]),
                desired: Some(spec.clone()),
                labels: vec![ROLE, ("node-pool.lailin.xyz/worker", "10")],
                taints: vec![
                    t("node-pool.lailin.xyz", "worker", "NoExecute"),
                    t("node-pool.lailin.xyz", "worker", "NoSchedule"),
                ],
                record: Some(spec.clone()),
            },
            Case {
                name: "dropped from spec: removed, other values kept",
                node: with_record(
                    node(
                        &[
                            ROLE,
                            ("node-pool.lailin.xyz/worker", "10"),
                            ("node-pool.lailin.xyz/old", "x"),
                        ],
                        &[
                            ("node-pool.lailin.xyz", "worker", "NoSchedule"),
                            ("old", "o", "NoExecute"),
                        ],
                    ),
                    "worker",
                    &desired(
                        &[
                            ("node-pool.lailin.xyz/worker", "10"),
                            ("node-pool.lailin.xyz/old", "x"),
                        ],
                        &[
                            ("node-pool.lailin.xyz", "worker", "NoSchedule"),
                            ("old", "o", "NoExecute"),
                        ],
                    ),
                ),
                desired: Some(spec.clone()),
                labels: vec![ROLE, ("node-pool.lailin.xyz/worker", "10")],
                taints: vec![t("node-pool.lailin.xyz", "worker", "NoSchedule")],
                record: Some(spec.clone()),
            },
            Case {
                name: "a value someone changed since is theirs: not removed",
                node: with_record(
                    node(
                        &[ROLE, ("node-pool.lailin.xyz/old", "person")],
                        &[("old", "person", "NoExecute")],
                    ),
                    "worker",
                    &desired(
                        &[("node-pool.lailin.xyz/old", "x")],
                        &[("old", "o", "NoExecute")],
                    ),
                ),
                desired: Some(Applied::default()),
                labels: vec![ROLE, ("node-pool.lailin.xyz/old", "person")],
                taints: vec![t("old", "person", "NoExecute")],
                record: None,
            },
            Case {
                name: "left the pool: exactly the record is removed",
                node: with_record(
                    node(
                        &[HOST, ("node-pool.lailin.xyz/worker", "10"), ("mine", "1")],
                        &[
                            ("node-pool.lailin.xyz", "worker", "NoSchedule"),
                            ("mine", "", "NoSchedule"),
                        ],
                    ),
                    "worker",
                    &spec,
                ),
                desired: None,
                labels: vec![HOST, ("mine", "1")],
                taints: vec![t("mine", "", "NoSchedule")],
                record: None,
            },
            Case {
                name: "label a person set with our value is adopted",
                node: node(&[ROLE, ("node-pool.lailin.xyz/worker", "10")], &[]),
                desired: Some(desired(&[("node-pool.lailin.xyz/worker", "10")], &[])),
                labels: vec![ROLE, ("node-pool.lailin.xyz/worker", "10")],
                taints: vec![],
                record: Some(desired(&[("node-pool.lailin.xyz/worker", "10")], &[])),
            },
            Case {
                name: "label value overwritten when no other member pool owns it",
                node: node(&[ROLE, ("node-pool.lailin.xyz/worker", "9")], &[]),
                desired: Some(desired(&[("node-pool.lailin.xyz/worker", "10")], &[])),
                labels: vec![ROLE, ("node-pool.lailin.xyz/worker", "10")],
                taints: vec![],
                record: Some(desired(&[("node-pool.lailin.xyz/worker", "10")], &[])),
            },
        ];
        for c in cases {
            let plan = plan_node("worker", c.desired.as_ref(), &c.node);
            let after = apply(&c.node, &plan).unwrap_or_else(|e| panic!("{}: {e}", c.name));
            let want_labels: BTreeMap<String, String> = c
                .labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            assert_eq!(labels_of(&after), want_labels, "{}: labels", c.name);
            assert_eq!(taints_of(&after), c.taints, "{}: taints", c.name);
            assert_eq!(record_of(&after, "worker"), c.record, "{}: record", c.name);
            // Converged: planning again changes nothing.
            let again = plan_node("worker", c.desired.as_ref(), &after);
            assert!(
                again.is_noop(),
                "{}: not idempotent: {:?}",
                c.name,
                again.changes
            );
            assert!(again.json_patch().0.is_empty(), "{}", c.name);
        }
    }

    #[test]
    fn converged_node_needs_no_write() {
        let spec = desired(
            &[("node-pool.lailin.xyz/worker", "10")],
            &[("k", "v", "NoSchedule")],
        );
        let n = with_record(
            node(
                &[ROLE, ("node-pool.lailin.xyz/worker", "10")],
                &[("k", "v", "NoSchedule")],
            ),
            "worker",
            &spec,
        );
        let plan = plan_node("worker", Some(&spec), &n);
        assert!(plan.is_noop());
        assert!(plan.changes.is_empty());
    }

    #[test]
    fn changes_describe_what_happened() {
        let n = with_record(
            node(
                &[ROLE, ("node-pool.lailin.xyz/a", "1")],
                &[("k", "old", "NoSchedule"), ("gone", "", "NoExecute")],
            ),
            "worker",
            &desired(
                &[("node-pool.lailin.xyz/a", "1")],
                &[("k", "old", "NoSchedule"), ("gone", "", "NoExecute")],
            ),
        );
        let want = desired(
            &[("node-pool.lailin.xyz/b", "2")],
            &[("k", "new", "NoSchedule")],
        );
        let plan = plan_node("worker", Some(&want), &n);
        let text: Vec<String> = plan.changes.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            vec![
                "+label node-pool.lailin.xyz/b=2",
                "-label node-pool.lailin.xyz/a=1",
                "~taint k=old:NoSchedule -> k=new:NoSchedule",
                "-taint gone=:NoExecute",
            ]
        );
    }

    #[test]
    fn conflicting_member_pools_do_not_overwrite_each_other() {
        // The node is in pools a and b; a applied taint k=a:NoSchedule, b wants k=b.
        let a_record = desired(
            &[("node-pool.lailin.xyz", "a")],
            &[("k", "a", "NoSchedule")],
        );
        let n = with_record(
            node(
                &[
                    ("node-role.kubernetes.io/a", ""),
                    ("node-role.kubernetes.io/b", ""),
                    ("node-pool.lailin.xyz", "a"),
                ],
                &[("k", "a", "NoSchedule")],
            ),
            "a",
            &a_record,
        );
        let want_b = desired(
            &[("node-pool.lailin.xyz", "b")],
            &[("k", "b", "NoSchedule")],
        );
        let plan = plan_node("b", Some(&want_b), &n);
        assert!(plan.is_noop(), "{:?}", plan.changes);
        assert_eq!(plan.conflicts.len(), 2);
        assert_eq!(plan.conflicts[0].other_pool, "a");
        assert_eq!(plan.conflicts[0].what, "label node-pool.lailin.xyz");
        assert_eq!(plan.conflicts[1].what, "taint k:NoSchedule");
        assert_eq!(plan.conflicts[1].current, "a");
        assert_eq!(plan.conflicts[1].wanted, "b");
        assert!(plan.conflicts[1].to_string().contains("from pool a"));
    }

    #[test]
    fn moving_between_pools_sharing_a_taint_key_converges_in_either_order() {
        // Pools a and b both use taint key k (NoSchedule) with values "a" and "b".
        let want_a = desired(
            &[("node-pool.lailin.xyz/a", "1")],
            &[("k", "a", "NoSchedule")],
        );
        let want_b = desired(
            &[("node-pool.lailin.xyz/b", "1")],
            &[("k", "b", "NoSchedule")],
        );
        let start = with_record(
            node(
                &[
                    ("node-role.kubernetes.io/b", ""),
                    ("node-pool.lailin.xyz/a", "1"),
                ],
                &[("k", "a", "NoSchedule")],
            ),
            "a",
            &want_a,
        );
        // Order 1: a cleans first, then b applies.
        let p = plan_node("a", None, &start);
        let n1 = apply(&start, &p).unwrap();
        let n1 = apply(&n1, &plan_node("b", Some(&want_b), &n1)).unwrap();
        // Order 2: b applies first (stale record of a, a no longer member), then a cleans.
        let n2 = apply(&start, &plan_node("b", Some(&want_b), &start)).unwrap();
        let p2 = plan_node("a", None, &n2);
        assert!(
            !p2.changes
                .iter()
                .any(|c| matches!(c, Change::TaintRemoved(_))),
            "a must not remove b's value"
        );
        let n2 = apply(&n2, &p2).unwrap();
        for n in [&n1, &n2] {
            assert_eq!(taints_of(n), vec![t("k", "b", "NoSchedule")]);
            let l = labels_of(n);
            assert!(!l.contains_key("node-pool.lailin.xyz/a"));
            assert_eq!(l["node-pool.lailin.xyz/b"], "1");
            assert_eq!(record_of(n, "a"), None);
            assert_eq!(record_of(n, "b"), Some(want_b.clone()));
        }
    }

    #[test]
    fn concurrent_taint_change_makes_the_patch_fail_instead_of_losing_it() {
        let n = node(&[ROLE], &[("x", "", "NoSchedule")]);
        let spec = desired(&[], &[("k", "v", "NoSchedule")]);
        let plan = plan_node("worker", Some(&spec), &n);
        // Meanwhile the node lifecycle controller adds a taint.
        let mut raced = n.clone();
        raced
            .spec
            .as_mut()
            .unwrap()
            .taints
            .as_mut()
            .unwrap()
            .push(Taint {
                key: "node.kubernetes.io/unreachable".into(),
                effect: "NoExecute".into(),
                ..Default::default()
            });
        assert!(apply(&raced, &plan).is_err());
        // Re-planning on the fresh node keeps both.
        let after = apply(&raced, &plan_node("worker", Some(&spec), &raced)).unwrap();
        assert_eq!(
            taints_of(&after),
            vec![
                t("x", "", "NoSchedule"),
                t("node.kubernetes.io/unreachable", "", "NoExecute"),
                t("k", "v", "NoSchedule")
            ]
        );
    }

    #[test]
    fn concurrent_label_and_status_writes_do_not_conflict() {
        let n = node(&[ROLE], &[]);
        let spec = desired(&[("node-pool.lailin.xyz/w", "1")], &[]);
        let plan = plan_node("worker", Some(&spec), &n);
        // Meanwhile a person adds a label and the kubelet writes status (new resourceVersion).
        let mut raced = n.clone();
        raced
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("team".into(), "x".into());
        raced.metadata.resource_version = Some("8".into());
        raced.metadata.annotations = Some(Default::default());
        let mut v = serde_json::to_value(&raced).unwrap();
        // The plan was made when annotations did not exist, so it guards with the
        // resourceVersion: it must fail now, and succeed after re-planning.
        assert!(json_patch::patch(&mut v.clone(), &plan.json_patch()).is_err());
        let fresh = plan_node("worker", Some(&spec), &raced);
        json_patch::patch(&mut v, &fresh.json_patch()).unwrap();
        let after: Node = serde_json::from_value(v).unwrap();
        assert_eq!(labels_of(&after)["team"], "x");
        assert_eq!(labels_of(&after)["node-pool.lailin.xyz/w"], "1");
    }

    #[test]
    fn labels_added_by_others_meanwhile_survive_when_annotations_exist() {
        let mut n = node(&[ROLE], &[]);
        n.metadata.annotations = Some(Default::default());
        let spec = desired(&[("node-pool.lailin.xyz/w", "1")], &[]);
        let plan = plan_node("worker", Some(&spec), &n);
        let ops = serde_json::to_value(plan.json_patch()).unwrap();
        assert!(
            !ops.to_string().contains("resourceVersion"),
            "no resourceVersion guard needed: {ops}"
        );
        let mut raced = n.clone();
        raced
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("team".into(), "x".into());
        raced.metadata.resource_version = Some("99".into());
        let after = apply(&raced, &plan).unwrap();
        assert_eq!(labels_of(&after)["team"], "x");
        assert_eq!(labels_of(&after)["node-pool.lailin.xyz/w"], "1");
    }

    #[test]
    fn patch_shape_for_a_fresh_member() {
        let mut n = node(&[ROLE], &[]);
        n.metadata.annotations = Some(Default::default());
        let spec = desired(
            &[("node-pool.lailin.xyz/w", "1")],
            &[("k", "v", "NoSchedule")],
        );
        let ops = serde_json::to_value(plan_node("worker", Some(&spec), &n).json_patch()).unwrap();
        assert_eq!(
            ops,
            json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "add", "path": "/metadata/labels/node-pool.lailin.xyz~1w", "value": "1"},
                {"op": "add", "path": "/spec/taints", "value": [{"effect": "NoSchedule", "key": "k", "value": "v"}]},
                {"op": "add", "path": "/metadata/annotations/applied.node-pool.lailin.xyz~1worker",
                 "value": "{\"labels\":{\"node-pool.lailin.xyz/w\":\"1\"},\"taints\":[{\"key\":\"k\",\"value\":\"v\",\"effect\":\"NoSchedule\"}]}"}
            ])
        );
    }

    #[test]
    fn invalid_record_is_rewritten() {
        let mut n = node(&[ROLE, ("node-pool.lailin.xyz/w", "1")], &[]);
        n.metadata.annotations = Some(
            [(applied_annotation_key("worker"), "not json".to_owned())]
                .into_iter()
                .collect(),
        );
        let spec = desired(&[("node-pool.lailin.xyz/w", "1")], &[]);
        let plan = plan_node("worker", Some(&spec), &n);
        assert!(plan.record_was_invalid);
        assert!(!plan.is_noop());
        let after = apply(&n, &plan).unwrap();
        assert_eq!(record_of(&after, "worker"), Some(spec));
    }

    #[test]
    fn node_without_labels_annotations_or_spec() {
        let n = Node {
            metadata: ObjectMeta {
                name: Some("bare".into()),
                resource_version: Some("3".into()),
                ..Default::default()
            },
            spec: Some(NodeSpec::default()),
            status: None,
        };
        // Cleanup of a node with nothing on it is a no-op.
        assert!(plan_node("worker", None, &n).is_noop());
        let spec = desired(
            &[("node-pool.lailin.xyz/w", "1")],
            &[("k", "", "NoExecute")],
        );
        let plan = plan_node("worker", Some(&spec), &n);
        let after = apply(&n, &plan).unwrap();
        assert_eq!(labels_of(&after)["node-pool.lailin.xyz/w"], "1");
        assert_eq!(taints_of(&after), vec![t("k", "", "NoExecute")]);
        assert_eq!(record_of(&after, "worker"), Some(spec));
    }

    /// Issue 18: the planned patch, applied to the node as the API server could hold it
    /// (raw JSON, so an absent `spec` really is absent), gives the intended node, for every
    /// shape a node can have; and cleaning up afterwards leaves exactly what was there.
    #[test]
    fn patches_apply_to_nodes_of_every_shape() {
        let role = json!({"node-role.kubernetes.io/worker": ""});
        let mine = json!({"node-role.kubernetes.io/worker": "", "team": "a"});
        let foreign = json!([{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]);
        let meta = |labels: Option<&Value>, annotations: bool| {
            let mut m = json!({"name": "n1", "resourceVersion": "7"});
            if let Some(l) = labels {
                m["labels"] = l.clone();
            }
            if annotations {
                m["annotations"] = json!({"note": "kept"});
            }
            m
        };
        let shapes: Vec<(&str, Value)> = vec![
            ("no spec", json!({"metadata": meta(Some(&role), false)})),
            (
                "null spec",
                json!({"metadata": meta(Some(&role), false), "spec": null}),
            ),
            (
                "no labels (cleanup only)",
                json!({"metadata": meta(None, false), "spec": {}}),
            ),
            (
                "no labels, no annotations, no spec",
                json!({"metadata": meta(None, false)}),
            ),
            (
                "no annotations",
                json!({"metadata": meta(Some(&mine), false), "spec": {}}),
            ),
            (
                "annotations",
                json!({"metadata": meta(Some(&mine), true), "spec": {}}),
            ),
            (
                "no taints",
                json!({"metadata": meta(Some(&role), true), "spec": {"unschedulable": true}}),
            ),
            (
                "empty taint list",
                json!({"metadata": meta(Some(&role), false), "spec": {"taints": []}}),
            ),
            (
                "foreign taint",
                json!({"metadata": meta(Some(&mine), true), "spec": {"taints": foreign}}),
            ),
        ];
        let wants = [
            desired(
                &[("node-pool.lailin.xyz/w", "1")],
                &[("node-pool.lailin.xyz", "w", "NoSchedule")],
            ),
            desired(&[("node-pool.lailin.xyz/w", "1")], &[]),
            desired(&[], &[("node-pool.lailin.xyz", "w", "NoExecute")]),
        ];
        let labels_in = |v: &Value| -> BTreeMap<String, String> {
            serde_json::from_value(v["metadata"]["labels"].clone()).unwrap_or_default()
        };
        let taints_in = |v: &Value| -> Vec<Value> {
            v["spec"]["taints"].as_array().cloned().unwrap_or_default()
        };
        for (shape, raw) in &shapes {
            for want in &wants {
                let name = format!("{shape}, {want:?}");
                let n: Node = serde_json::from_value(raw.clone()).unwrap();
                let plan = plan_node("worker", Some(want), &n);
                let mut after = raw.clone();
                json_patch::patch(&mut after, &plan.json_patch())
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                // Exactly the wanted labels and taints added, everything else as it was.
                let mut expect_labels = labels_in(raw);
                expect_labels.extend(want.labels.clone());
                assert_eq!(labels_in(&after), expect_labels, "{name}: labels");
                let mut expect_taints = taints_in(raw);
                expect_taints.extend(
                    want.taints
                        .iter()
                        .map(|t| serde_json::to_value(t.to_taint()).unwrap()),
                );
                assert_eq!(taints_in(&after), expect_taints, "{name}: taints");
                if raw["spec"]["unschedulable"] == json!(true) {
                    assert_eq!(after["spec"]["unschedulable"], json!(true), "{name}");
                }
                if raw["metadata"]["annotations"]["note"] == json!("kept") {
                    assert_eq!(after["metadata"]["annotations"]["note"], "kept", "{name}");
                }
                let patched: Node = serde_json::from_value(after.clone()).unwrap();
                assert_eq!(record_of(&patched, "worker").as_ref(), Some(want), "{name}");
                assert!(
                    plan_node("worker", Some(want), &patched).is_noop(),
                    "{name}: converged"
                );
                // Leaving the pool removes exactly what was added.
                let cleanup = plan_node("worker", None, &patched);
                let mut cleaned = after.clone();
                json_patch::patch(&mut cleaned, &cleanup.json_patch())
                    .unwrap_or_else(|e| panic!("{name}: cleanup: {e}"));
                assert_eq!(
                    labels_in(&cleaned),
                    labels_in(raw),
                    "{name}: cleaned labels"
                );
                assert_eq!(
                    taints_in(&cleaned),
                    taints_in(raw),
                    "{name}: cleaned taints"
                );
                let cleaned: Node = serde_json::from_value(cleaned).unwrap();
                assert_eq!(record_of(&cleaned, "worker"), None, "{name}");
            }
        }
    }

    #[test]
    fn a_node_without_spec_gets_one_guarded_by_the_resource_version() {
        let n: Node =
            serde_json::from_value(json!({"metadata": {"name": "n1", "resourceVersion": "7",
            "labels": {"node-role.kubernetes.io/worker": ""}, "annotations": {}}}))
            .unwrap();
        let spec = desired(&[], &[("k", "v", "NoSchedule")]);
        let ops = serde_json::to_value(plan_node("worker", Some(&spec), &n).json_patch()).unwrap();
        assert_eq!(
            ops[0],
            json!({"op": "test", "path": "/metadata/resourceVersion", "value": "7"})
        );
        assert_eq!(
            ops[1],
            json!({"op": "add", "path": "/spec", "value": {"taints": [{"effect": "NoSchedule", "key": "k", "value": "v"}]}})
        );
        // Should a spec have appeared meanwhile, the resourceVersion moved: nothing is replaced.
        let mut raced = serde_json::to_value(&n).unwrap();
        raced["spec"] = json!({"podCIDR": "10.0.0.0/24"});
        raced["metadata"]["resourceVersion"] = json!("8");
        let plan = plan_node("worker", Some(&spec), &n);
        let failing =
            first_failing_operation(&plan.json_patch(), &serde_json::from_value(raced).unwrap())
                .unwrap()
                .unwrap();
        assert!(failing.is_test, "{failing}");
    }

    #[test]
    fn membership_and_relevance() {
        let member = node(&[ROLE], &[]);
        let other = node(&[HOST], &[]);
        let leftover = with_record(node(&[HOST], &[]), "worker", &desired(&[("a", "b")], &[]));
        assert!(is_member(&member, "worker"));
        assert!(!is_member(&other, "worker"));
        assert!(has_record(&leftover, "worker"));
        let all = [
            std::sync::Arc::new(member),
            std::sync::Arc::new(other),
            std::sync::Arc::new(leftover),
        ];
        assert_eq!(relevant_nodes("worker", all.iter()).len(), 2);
    }

    #[test]
    fn from_spec_maps_taints() {
        let spec = NodePoolSpec {
            labels: [("a".to_owned(), "b".to_owned())].into_iter().collect(),
            taints: vec![Taint {
                key: "k".into(),
                value: None,
                effect: "NoSchedule".into(),
                time_added: None,
            }],
            handler: String::new(),
        };
        let a = Applied::from_spec(&spec);
        assert_eq!(a.labels["a"], "b");
        assert_eq!(
            a.taints,
            vec![PoolTaint {
                key: "k".into(),
                value: String::new(),
                effect: "NoSchedule".into()
            }]
        );
    }
}
