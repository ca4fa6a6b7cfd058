//! Unit tests of the plan rules and of the patches on nodes of every shape.

use super::*;
use k8s_openapi::api::core::v1::NodeSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

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
    let taints_in =
        |v: &Value| -> Vec<Value> { v["spec"]["taints"].as_array().cloned().unwrap_or_default() };
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
    let n: Node = serde_json::from_value(json!({"metadata": {"name": "n1", "resourceVersion": "7",
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
