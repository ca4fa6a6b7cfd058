//! The pool's status: what it reports, and whether it needs writing.
//!
//! A successful reconcile reports `nodeCount`, `allocatable` (the exact per-resource sum of the
//! members' `status.allocatable`, see [`crate::quantity`]), `status: 200`, `Ready=True` and
//! `observedGeneration` ([`success_status`]). A failed one reports `Ready=False` with a CamelCase
//! reason, a non-200 `status` taken from the API error when there is one, and keeps the last
//! known count and sums ([`failure_status`]). The `Ready` condition's `lastTransitionTime` moves
//! only when its status flips, so an unchanged pool yields an identical status and
//! [`needs_write`] says no: there are no status write loops.
//!
//! [`merge_patch`] builds the JSON merge patch for the status subresource, with explicit `null`s
//! for allocatable resources that disappeared (a merge patch would otherwise keep them).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::{Value, json};

use crate::crd::{NodePoolStatus, READY_CONDITION, STATUS_OK};
use crate::quantity::{Quantity, QuantityError};

/// Why a node's allocatable resources could not be summed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("node {node}: allocatable {resource}: {source}")]
pub struct AllocatableError {
    /// The node.
    pub node: String,
    /// The resource name.
    pub resource: String,
    /// The quantity problem.
    pub source: QuantityError,
}

/// The per-resource exact sum of the nodes' `status.allocatable`.
pub fn allocatable_sum<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
) -> Result<BTreeMap<String, K8sQuantity>, AllocatableError> {
    let mut sums: BTreeMap<String, Quantity> = BTreeMap::new();
    for node in nodes {
        let Some(alloc) = node.status.as_ref().and_then(|s| s.allocatable.as_ref()) else {
            continue;
        };
        for (resource, value) in alloc {
            let err = |source| AllocatableError {
                node: node.metadata.name.clone().unwrap_or_default(),
                resource: resource.clone(),
                source,
            };
            let q = Quantity::parse(&value.0).map_err(err)?;
            let entry = sums.entry(resource.clone()).or_insert(Quantity::ZERO);
            *entry = entry.checked_add(&q).map_err(err)?;
        }
    }
    Ok(sums
        .iter()
        .map(|(k, v)| (k.clone(), K8sQuantity::from(v)))
        .collect())
}

/// Sets (or adds) condition `type_`, moving `lastTransitionTime` to `now` only when the status
/// changes.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &Time,
) {
    let new = |last: Time| Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        observed_generation: generation,
        last_transition_time: last,
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            let last = if c.status == status {
                c.last_transition_time.clone()
            } else {
                now.clone()
            };
            *c = new(last);
        }
        None => conditions.push(new(now.clone())),
    }
}

/// The status after a successful reconcile.
pub fn success_status(
    current: Option<&NodePoolStatus>,
    generation: Option<i64>,
    node_count: usize,
    allocatable: BTreeMap<String, K8sQuantity>,
    now: &Time,
) -> NodePoolStatus {
    let mut conditions = current.map(|c| c.conditions.clone()).unwrap_or_default();
    let message = match node_count {
        1 => "1 node carries the pool's labels and taints".to_owned(),
        n => format!("{n} nodes carry the pool's labels and taints"),
    };
    set_condition(
        &mut conditions,
        READY_CONDITION,
        "True",
        "Reconciled",
        &message,
        generation,
        now,
    );
    NodePoolStatus {
        status: STATUS_OK,
        node_count: i32::try_from(node_count).unwrap_or(i32::MAX),
        allocatable,
        conditions,
        observed_generation: generation,
    }
}

/// The status after a failed reconcile: `Ready=False` with `reason`/`message`, `status: code`
/// (forced away from 200), the last known count and sums kept.
pub fn failure_status(
    current: Option<&NodePoolStatus>,
    generation: Option<i64>,
    code: i32,
    reason: &str,
    message: &str,
    now: &Time,
) -> NodePoolStatus {
    let mut status = current.cloned().unwrap_or_default();
    set_condition(
        &mut status.conditions,
        READY_CONDITION,
        "False",
        reason,
        message,
        generation,
        now,
    );
    status.status = if code == STATUS_OK || code == 0 {
        500
    } else {
        code
    };
    status.observed_generation = generation;
    status
}

/// Whether `new` differs from what the pool's status already says.
pub fn needs_write(current: Option<&NodePoolStatus>, new: &NodePoolStatus) -> bool {
    current != Some(new)
}

/// The JSON merge patch (`{"status": ...}`) that turns `current` into `new`.
pub fn merge_patch(current: Option<&NodePoolStatus>, new: &NodePoolStatus) -> Value {
    // Serialising the status (strings, integers, RFC 3339 times) cannot fail.
    let mut body = serde_json::to_value(new).unwrap_or_else(|_| json!({}));
    if let Some(cur) = current {
        if let Some(alloc) = body.get_mut("allocatable").and_then(Value::as_object_mut) {
            for gone in cur
                .allocatable
                .keys()
                .filter(|k| !new.allocatable.contains_key(*k))
            {
                alloc.insert(gone.clone(), Value::Null);
            }
        }
        if cur.observed_generation.is_some() && new.observed_generation.is_none() {
            body["observedGeneration"] = Value::Null;
        }
        if !cur.conditions.is_empty() && new.conditions.is_empty() {
            body["conditions"] = Value::Null;
        }
    }
    json!({ "status": body })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node(name: &str, alloc: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: None,
            status: Some(NodeStatus {
                allocatable: Some(
                    alloc
                        .iter()
                        .map(|(k, v)| (k.to_string(), K8sQuantity(v.to_string())))
                        .collect(),
                ),
                ..Default::default()
            }),
        }
    }

    fn time(s: &str) -> Time {
        Time(s.parse().unwrap())
    }

    fn sums(nodes: &[Node]) -> BTreeMap<String, String> {
        allocatable_sum(nodes)
            .unwrap()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect()
    }

    #[test]
    fn allocatable_sum_table() {
        type Case = (Vec<Node>, Vec<(&'static str, &'static str)>);
        let cases: Vec<Case> = vec![
            (vec![], vec![]),
            (
                vec![
                    node("a", &[("cpu", "4"), ("memory", "1Gi"), ("pods", "110")]),
                    node(
                        "b",
                        &[("cpu", "500m"), ("memory", "512Mi"), ("pods", "110")],
                    ),
                ],
                vec![("cpu", "4500m"), ("memory", "1536Mi"), ("pods", "220")],
            ),
            (
                // A resource only some nodes have.
                vec![
                    node("a", &[("cpu", "2"), ("nvidia.com/gpu", "1")]),
                    node("b", &[("cpu", "2")]),
                ],
                vec![("cpu", "4"), ("nvidia.com/gpu", "1")],
            ),
            (
                // A node without status counts for nothing.
                vec![
                    Node {
                        metadata: ObjectMeta::default(),
                        spec: None,
                        status: None,
                    },
                    node("b", &[("ephemeral-storage", "100Gi")]),
                ],
                vec![("ephemeral-storage", "100Gi")],
            ),
        ];
        for (nodes, want) in cases {
            let want: BTreeMap<String, String> = want
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            assert_eq!(sums(&nodes), want);
        }
    }

    #[test]
    fn invalid_allocatable_names_the_node_and_resource() {
        let err = allocatable_sum(&[node("bad", &[("cpu", "lots")])]).unwrap_err();
        assert_eq!(err.node, "bad");
        assert_eq!(err.resource, "cpu");
        assert!(err.to_string().contains("node bad: allocatable cpu"));
    }

    #[test]
    fn success_status_fields() {
        let now = time("2026-01-01T00:00:00Z");
        let alloc = sums(&[node("a", &[("cpu", "4")]), node("b", &[("cpu", "500m")])])
            .into_iter()
            .map(|(k, v)| (k, K8sQuantity(v)))
            .collect();
        let s = success_status(None, Some(3), 2, alloc, &now);
        assert_eq!(s.status, 200);
        assert_eq!(s.node_count, 2);
        assert_eq!(s.allocatable["cpu"].0, "4500m");
        assert_eq!(s.observed_generation, Some(3));
        let ready = s.ready_condition().unwrap();
        assert_eq!(ready.status, "True");
        assert_eq!(ready.reason, "Reconciled");
        assert_eq!(ready.observed_generation, Some(3));
        assert_eq!(ready.last_transition_time, now);
        assert_eq!(ready.message, "2 nodes carry the pool's labels and taints");
    }

    #[test]
    fn unchanged_pool_needs_no_write_and_transition_time_is_kept() {
        let t0 = time("2026-01-01T00:00:00Z");
        let t1 = time("2026-01-01T00:05:00Z");
        let first = success_status(None, Some(1), 0, BTreeMap::new(), &t0);
        assert!(needs_write(None, &first));
        let second = success_status(Some(&first), Some(1), 0, BTreeMap::new(), &t1);
        assert!(
            !needs_write(Some(&first), &second),
            "a later time alone is no change"
        );
        // A new generation is a change; the transition time still stays (still True).
        let third = success_status(Some(&second), Some(2), 0, BTreeMap::new(), &t1);
        assert!(needs_write(Some(&second), &third));
        assert_eq!(third.ready_condition().unwrap().last_transition_time, t0);
        // A node joining is a change.
        let fourth = success_status(Some(&third), Some(2), 1, BTreeMap::new(), &t1);
        assert!(needs_write(Some(&third), &fourth));
    }

    #[test]
    fn failure_status_flips_ready_and_keeps_counts() {
        let t0 = time("2026-01-01T00:00:00Z");
        let t1 = time("2026-01-01T00:05:00Z");
        let ok = success_status(
            None,
            Some(1),
            3,
            [("cpu".to_owned(), K8sQuantity("12".into()))]
                .into_iter()
                .collect(),
            &t0,
        );
        let failed = failure_status(
            Some(&ok),
            Some(2),
            409,
            "NodePatchFailed",
            "node n1: conflict",
            &t1,
        );
        assert_eq!(failed.status, 409);
        assert_eq!(failed.node_count, 3);
        assert_eq!(failed.allocatable["cpu"].0, "12");
        let ready = failed.ready_condition().unwrap();
        assert_eq!(ready.status, "False");
        assert_eq!(ready.reason, "NodePatchFailed");
        assert_eq!(ready.message, "node n1: conflict");
        assert_eq!(ready.last_transition_time, t1);
        assert!(needs_write(Some(&ok), &failed));
        // Repeating the same failure later writes nothing.
        let again = failure_status(
            Some(&failed),
            Some(2),
            409,
            "NodePatchFailed",
            "node n1: conflict",
            &time("2026-01-01T00:09:00Z"),
        );
        assert!(!needs_write(Some(&failed), &again));
        // A code of 200 or 0 never reads as success.
        assert_eq!(failure_status(None, None, 200, "X", "y", &t1).status, 500);
        assert_eq!(failure_status(None, None, 0, "X", "y", &t1).status, 500);
        // Recovery flips back to True with a new transition time.
        let t2 = time("2026-01-01T00:10:00Z");
        let back = success_status(Some(&failed), Some(2), 3, failed.allocatable.clone(), &t2);
        assert_eq!(back.ready_condition().unwrap().status, "True");
        assert_eq!(back.ready_condition().unwrap().last_transition_time, t2);
        assert_eq!(back.status, 200);
    }

    #[test]
    fn other_conditions_are_kept() {
        let t0 = time("2026-01-01T00:00:00Z");
        let mut cur = NodePoolStatus::default();
        set_condition(&mut cur.conditions, "Custom", "True", "X", "y", None, &t0);
        let s = success_status(Some(&cur), Some(1), 0, BTreeMap::new(), &t0);
        assert_eq!(s.conditions.len(), 2);
        assert_eq!(s.conditions[0].type_, "Custom");
    }

    #[test]
    fn merge_patch_removes_vanished_resources() {
        let t0 = time("2026-01-01T00:00:00Z");
        let old = success_status(
            None,
            Some(1),
            1,
            [
                ("cpu".to_owned(), K8sQuantity("4".into())),
                ("nvidia.com/gpu".to_owned(), K8sQuantity("1".into())),
            ]
            .into_iter()
            .collect(),
            &t0,
        );
        let new = success_status(
            Some(&old),
            Some(1),
            1,
            [("cpu".to_owned(), K8sQuantity("4".into()))]
                .into_iter()
                .collect(),
            &t0,
        );
        let patch = merge_patch(Some(&old), &new);
        assert_eq!(patch["status"]["allocatable"]["cpu"], "4");
        assert_eq!(
            patch["status"]["allocatable"]["nvidia.com/gpu"],
            Value::Null
        );
        assert_eq!(patch["status"]["nodeCount"], 1);
        assert_eq!(patch["status"]["status"], 200);
        // Applying it to the old status gives exactly the new one.
        let mut doc = json!({ "status": serde_json::to_value(&old).unwrap() });
        json_patch::merge(&mut doc, &patch);
        let applied: NodePoolStatus = serde_json::from_value(doc["status"].clone()).unwrap();
        assert_eq!(applied, new);
        // A pool that lost its last node writes nodeCount 0 explicitly.
        let empty = success_status(Some(&new), Some(1), 0, BTreeMap::new(), &t0);
        let patch = merge_patch(Some(&new), &empty);
        assert_eq!(patch["status"]["nodeCount"], 0);
        assert_eq!(patch["status"]["allocatable"]["cpu"], Value::Null);
    }
}
