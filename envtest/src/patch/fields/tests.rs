//! Unit tests of field sets, FieldsV1 and the incremental diff.

use super::*;
use serde_json::json;

fn p(elems: &[&str]) -> FieldPath {
    elems.iter().map(|s| s.to_string()).collect()
}

#[test]
fn object_field_set_and_fields_v1_round_trip() {
    let strategy = MergeStrategy::builtin("v1", "Pod").unwrap();
    let obj = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "labels": {"app": "web"}, "finalizers": ["x"]},
        "spec": {"containers": [{"name": "app", "image": "nginx"}], "tolerations": [{"key": "a"}],
            "nodeSelector": {}}
    });
    let set = FieldSet::of_object(&obj, &strategy);
    let expected: Vec<FieldPath> = vec![
        p(&["f:metadata", "f:finalizers", "v:\"x\""]),
        p(&["f:metadata", "f:labels", "f:app"]),
        p(&["f:spec", "f:containers", "k:{\"name\":\"app\"}"]),
        p(&["f:spec", "f:containers", "k:{\"name\":\"app\"}", "f:image"]),
        p(&["f:spec", "f:containers", "k:{\"name\":\"app\"}", "f:name"]),
        p(&["f:spec", "f:nodeSelector"]),
        p(&["f:spec", "f:tolerations"]),
    ];
    assert_eq!(set.iter().cloned().collect::<Vec<_>>(), expected);
    let v1 = set.to_fields_v1();
    assert_eq!(
        v1,
        json!({
            "f:metadata": {"f:finalizers": {"v:\"x\"": {}}, "f:labels": {"f:app": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {}}},
                "f:nodeSelector": {}, "f:tolerations": {}}
        })
    );
    assert_eq!(FieldSet::from_fields_v1(&v1), set);
}

#[test]
fn value_lookup_and_removal() {
    let mut obj = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b"}],
        "only": {"one": 1}}, "metadata": {"finalizers": ["f1", "f2"]}});
    let img = p(&["f:spec", "f:containers", "k:{\"name\":\"a\"}", "f:image"]);
    assert_eq!(value_at(&obj, &img), Some(&json!("x")));
    assert_eq!(
        value_at(&obj, &p(&["f:metadata", "f:finalizers", "v:\"f2\""])),
        Some(&json!("f2"))
    );
    assert_eq!(value_at(&obj, &p(&["f:spec", "f:nope"])), None);
    remove_at(&mut obj, &img);
    remove_at(
        &mut obj,
        &p(&["f:spec", "f:containers", "k:{\"name\":\"b\"}"]),
    );
    remove_at(&mut obj, &p(&["f:metadata", "f:finalizers", "v:\"f1\""]));
    remove_at(&mut obj, &p(&["f:spec", "f:only", "f:one"]));
    remove_at(&mut obj, &p(&["f:spec", "f:missing", "f:deep"]));
    assert_eq!(
        obj,
        json!({"spec": {"containers": [{"name": "a"}]}, "metadata": {"finalizers": ["f2"]}})
    );
}

/// Every node of `value` (maps, lists, items, leaves) with its value, the naive way.
fn all_nodes(
    value: &Value,
    prefix: &mut FieldPath,
    path: &str,
    s: &MergeStrategy,
    out: &mut std::collections::BTreeMap<FieldPath, Value>,
) {
    out.insert(prefix.clone(), value.clone());
    match value {
        Value::Object(m) if !s.is_atomic_map(path) => {
            for (k, v) in m {
                prefix.push(format!("f:{k}"));
                all_nodes(v, prefix, &format!("{path}.{k}"), s, out);
                prefix.pop();
            }
        }
        Value::Array(items) => match s.field_list_type(path) {
            ListType::Set => {
                for i in items {
                    prefix.push(format!("v:{i}"));
                    out.insert(prefix.clone(), i.clone());
                    prefix.pop();
                }
            }
            ListType::Map(keys) => {
                for i in items {
                    let Some(e) = s.field_element(path, i, keys) else {
                        continue;
                    };
                    prefix.push(e);
                    out.insert(prefix.clone(), i.clone());
                    let atomic = s.is_atomic_map(path);
                    for (k, v) in i.as_object().into_iter().flatten().filter(|_| !atomic) {
                        prefix.push(format!("f:{k}"));
                        all_nodes(v, prefix, &format!("{path}.{k}"), s, out);
                        prefix.pop();
                    }
                    prefix.pop();
                }
            }
            ListType::Atomic => {}
        },
        _ => {}
    }
}

fn naive_diff(old: &Value, new: &Value, s: &MergeStrategy) -> FieldDiff {
    let nodes = |o: &Value| {
        let mut out = std::collections::BTreeMap::new();
        for key in ["spec", "status"] {
            if let Some(v) = o.get(key) {
                all_nodes(v, &mut vec![format!("f:{key}")], key, s, &mut out);
            }
        }
        for key in ["labels", "finalizers"] {
            if let Some(v) = o["metadata"].get(key) {
                let mut prefix = vec!["f:metadata".to_string(), format!("f:{key}")];
                all_nodes(v, &mut prefix, &format!("metadata.{key}"), s, &mut out);
            }
        }
        out
    };
    let (on, nn) = (nodes(old), nodes(new));
    let container = |v: &Value| matches!(v, Value::Object(_) | Value::Array(_));
    let mut changed = FieldSet::new();
    for (p, n) in &nn {
        let differs = match on.get(p) {
            None => true,
            Some(o) => {
                let item = !p.last().is_some_and(|l| l.starts_with("f:"));
                let granular = |v: &Value, p: &FieldPath| {
                    let path: Vec<&str> = p.iter().filter_map(|e| e.strip_prefix("f:")).collect();
                    let path = path.join(".");
                    match v {
                        Value::Object(_) => !s.is_atomic_map(&path),
                        Value::Array(_) => *s.list_type(&path) != ListType::Atomic,
                        _ => false,
                    }
                };
                !item
                    && o != n
                    && !(granular(o, p) || granular(n, p))
                    && !(o.is_null() && container(n) || n.is_null() && container(o))
            }
        };
        if differs {
            changed.insert(p.clone());
        }
    }
    let mut removed = FieldSet::new();
    for p in on.keys().filter(|p| !nn.contains_key(*p)) {
        removed.insert(p.clone());
    }
    // The zero value always has these.
    for zero in [["f:spec"], ["f:status"]] {
        let p: FieldPath = zero.iter().map(|e| e.to_string()).collect();
        changed.remove(&p);
        removed.remove(&p);
    }
    FieldDiff { changed, removed }
}

/// Randomised: the incremental diff equals the one computed from full field sets.
#[test]
fn incremental_diff_matches_full_sets() {
    let s = MergeStrategy::builtin("v1", "Node").unwrap();
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut cur = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n", "labels": {"a": "1"}, "finalizers": ["f1"]},
        "spec": {"taints": [{"key": "k0", "effect": "NoSchedule"}], "podCIDRs": ["10.0.0.0/24"]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "capacity": {"cpu": "1"}}});
    for round in 0..400 {
        let mut new = cur.clone();
        match next(9) {
            0 => new["metadata"]["labels"][format!("l{}", next(4))] = json!(next(3).to_string()),
            1 => {
                if let Some(m) = new["metadata"]["labels"].as_object_mut() {
                    let k = format!("l{}", next(4));
                    m.remove(&k);
                }
            }
            2 => new["metadata"]["finalizers"] = json!((0..next(3)).map(|i| format!("f{i}")).collect::<Vec<_>>()),
            3 => new["spec"]["taints"] = json!((0..next(3)).map(|i| json!({"key": format!("k{i}"), "effect": "NoSchedule", "value": next(2).to_string()})).collect::<Vec<_>>()),
            4 => new["status"]["conditions"][0]["status"] = json!(if next(2) == 0 { "True" } else { "False" }),
            5 => new["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}, {"type": format!("T{}", next(3)), "status": "False"}]),
            6 => new["status"]["capacity"] = if next(2) == 0 { json!({"cpu": next(4).to_string()}) } else { json!({}) },
            7 => new["spec"]["podCIDRs"] = json!([format!("10.0.{}.0/24", next(3))]),
            _ => new["spec"]["unschedulable"] = if next(2) == 0 { json!(true) } else { Value::Null },
        }
        let fast = FieldDiff::between(&cur, &new, &s);
        let slow = naive_diff(&cur, &new, &s);
        assert_eq!(fast, slow, "round {round}: {cur} -> {new}");
        cur = new;
    }
}

#[test]
fn display_paths_and_prefixes() {
    let path = p(&[
        "f:spec",
        "f:taints",
        "k:{\"effect\":\"NoSchedule\",\"key\":\"a\"}",
        "f:value",
    ]);
    assert_eq!(
        display_path(&path),
        ".spec.taints[effect=\"NoSchedule\",key=\"a\"].value"
    );
    assert_eq!(
        display_path(&p(&["f:metadata", "f:finalizers", "v:\"x\""])),
        ".metadata.finalizers[=\"x\"]"
    );
    let mut set = FieldSet::new();
    set.insert(path.clone());
    assert!(set.contains_prefix(&p(&["f:spec"])));
    assert!(set.contains_prefix(&path));
    assert!(!set.contains_prefix(&p(&["f:status"])));
    assert_eq!(
        key_element(
            &json!({"key": "a", "effect": "NoSchedule"}),
            &["key".into(), "effect".into()]
        ),
        Some("k:{\"effect\":\"NoSchedule\",\"key\":\"a\"}".to_string())
    );
    assert_eq!(key_element(&json!({"effect": "x"}), &["key".into()]), None);
}
