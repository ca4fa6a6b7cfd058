//! The rules of [`plan_node`]: what one pool changes on one node, and what it leaves to another
//! member pool of that node (see the [module docs](super)).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, Taint};

use super::{APPLIED_ANNOTATION_PREFIX, Applied, PoolTaint, applied_annotation_key, taint_value};
use crate::crd::MEMBERSHIP_LABEL_PREFIX;

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
    pub(super) pool: String,
    pub(super) old_labels: Option<BTreeMap<String, String>>,
    pub(super) label_sets: BTreeMap<String, String>,
    pub(super) label_removals: BTreeMap<String, String>,
    pub(super) spec_exists: bool,
    pub(super) old_taints: Option<Vec<Taint>>,
    pub(super) new_taints: Option<Vec<Taint>>,
    pub(super) annotations_exist: bool,
    pub(super) old_record: Option<String>,
    pub(super) new_record: Option<String>,
    pub(super) resource_version: Option<String>,
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
