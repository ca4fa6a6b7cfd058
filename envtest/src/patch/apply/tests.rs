//! Unit tests of server-side apply and Update ownership.

use super::*;

const T1: &str = "2024-01-01T00:00:00Z";
const T2: &str = "2024-01-01T00:01:00Z";

fn opts<'a>(manager: &'a str, force: bool, s: &'a MergeStrategy) -> ApplyOptions<'a> {
    ApplyOptions {
        manager,
        force,
        now: T1,
        strategy: s,
        subresource: None,
    }
}

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}, "data": data})
}

fn managers(obj: &Value) -> Vec<(String, String)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap_or_default().to_string(),
                        e["operation"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn create_records_apply_entry() {
    let s = MergeStrategy::builtin("v1", "ConfigMap").unwrap();
    let out = server_side_apply(None, &cm(json!({"a": "1"})), &opts("alice", false, &s)).unwrap();
    assert_eq!(out["data"], json!({"a": "1"}));
    assert_eq!(out["metadata"]["name"], "c");
    let mf = &out["metadata"]["managedFields"][0];
    assert_eq!(mf["manager"], "alice");
    assert_eq!(mf["operation"], "Apply");
    assert_eq!(mf["apiVersion"], "v1");
    assert_eq!(mf["time"], T1);
    assert_eq!(mf["fieldsType"], "FieldsV1");
    assert_eq!(mf["fieldsV1"], json!({"f:data": {"f:a": {}}}));
}

#[test]
fn conflicting_apply_fails_without_force_and_succeeds_with_it() {
    let s = MergeStrategy::builtin("v1", "ConfigMap").unwrap();
    let obj = server_side_apply(
        None,
        &cm(json!({"a": "1", "b": "x"})),
        &opts("alice", false, &s),
    )
    .unwrap();
    let err =
        server_side_apply(Some(&obj), &cm(json!({"a": "2"})), &opts("bob", false, &s)).unwrap_err();
    assert_eq!(err.status_code(), 409);
    let ApplyError::Conflicts(cs) = &err else {
        panic!("expected conflicts, got {err}");
    };
    assert_eq!(
        cs,
        &vec![Conflict {
            manager: "alice".into(),
            api_version: "v1".into(),
            field: ".data.a".into(),
            operation: "Apply".into(),
        }]
    );
    // An applier is named alone; an updater with the apiVersion it wrote.
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"alice\": .data.a"
    );
    let updater = Conflict {
        operation: "Update".into(),
        ..cs[0].clone()
    };
    assert_eq!(updater.manager_text(), "\"alice\" using v1");
    // Same value: shared ownership, no conflict.
    let shared =
        server_side_apply(Some(&obj), &cm(json!({"a": "1"})), &opts("bob", false, &s)).unwrap();
    assert_eq!(managers(&shared).len(), 2);
    // Force: bob takes `a`.
    let forced =
        server_side_apply(Some(&obj), &cm(json!({"a": "2"})), &opts("bob", true, &s)).unwrap();
    assert_eq!(forced["data"], json!({"a": "2", "b": "x"}));
    let mf = forced["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(mf[0]["manager"], "alice");
    assert_eq!(mf[0]["fieldsV1"], json!({"f:data": {"f:b": {}}}));
    assert_eq!(mf[1]["manager"], "bob");
    assert_eq!(mf[1]["fieldsV1"], json!({"f:data": {"f:a": {}}}));
}

#[test]
fn multiple_conflicts_message() {
    let s = MergeStrategy::builtin("v1", "ConfigMap").unwrap();
    let obj = server_side_apply(
        None,
        &cm(json!({"a": "1", "b": "1"})),
        &opts("alice", false, &s),
    )
    .unwrap();
    let err = server_side_apply(
        Some(&obj),
        &cm(json!({"a": "2", "b": "2"})),
        &opts("bob", false, &s),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 2 conflicts: conflicts with \"alice\":\n- .data.a\n- .data.b"
    );
}

#[test]
fn dropping_a_field_removes_it_unless_someone_else_owns_it() {
    let s = MergeStrategy::builtin("v1", "ConfigMap").unwrap();
    let obj = server_side_apply(
        None,
        &cm(json!({"a": "1", "b": "2", "c": "3"})),
        &opts("alice", false, &s),
    )
    .unwrap();
    // bob co-owns c (same value).
    let obj =
        server_side_apply(Some(&obj), &cm(json!({"c": "3"})), &opts("bob", false, &s)).unwrap();
    // alice drops b and c.
    let obj = server_side_apply(
        Some(&obj),
        &cm(json!({"a": "1"})),
        &opts("alice", false, &s),
    )
    .unwrap();
    assert_eq!(obj["data"], json!({"a": "1", "c": "3"}));
    // bob drops c: now nobody owns it.
    let obj = server_side_apply(
        Some(&obj),
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "labels": {"x": "y"}}}),
        &opts("bob", false, &s),
    )
    .unwrap();
    assert_eq!(obj["data"], json!({"a": "1"}));
    assert_eq!(obj["metadata"]["labels"], json!({"x": "y"}));
}

#[test]
fn map_lists_and_sets_merge_per_manager() {
    let s = MergeStrategy::builtin("v1", "Pod").unwrap();
    let pod = |constraints: Value, fin: Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "finalizers": fin},
            "spec": {"topologySpreadConstraints": constraints}})
    };
    let obj = server_side_apply(
        None,
        &pod(
            json!([{"topologyKey": "a", "whenUnsatisfiable": "DoNotSchedule"}]),
            json!(["x"]),
        ),
        &opts("alice", false, &s),
    )
    .unwrap();
    let obj = server_side_apply(
        Some(&obj),
        &pod(
            json!([{"topologyKey": "b", "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 1}]),
            json!(["y"]),
        ),
        &opts("bob", false, &s),
    )
    .unwrap();
    assert_eq!(
        obj["spec"]["topologySpreadConstraints"],
        json!([{"topologyKey": "a", "whenUnsatisfiable": "DoNotSchedule"},
            {"topologyKey": "b", "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 1}])
    );
    assert_eq!(obj["metadata"]["finalizers"], json!(["x", "y"]));
    // alice drops her constraint and finalizer; bob's stay.
    let obj = server_side_apply(
        Some(&obj),
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}),
        &opts("alice", false, &s),
    )
    .unwrap();
    assert_eq!(
        obj["spec"]["topologySpreadConstraints"],
        json!([{"topologyKey": "b", "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 1}])
    );
    assert_eq!(obj["metadata"]["finalizers"], json!(["y"]));
    assert_eq!(
        managers(&obj),
        vec![("bob".to_string(), "Apply".to_string())]
    );
    // conflict inside a map-list item
    let err = server_side_apply(
        Some(&obj),
        &pod(
            json!([{"topologyKey": "b", "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 2}]),
            json!([]),
        ),
        &opts("carol", false, &s),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains(
            ".spec.topologySpreadConstraints[topologyKey=\"b\",whenUnsatisfiable=\"ScheduleAnyway\"].maxSkew"
        ),
        "{err}"
    );
    // Node taints are atomic: a second manager applying its own list conflicts on the
    // whole list.
    let node = MergeStrategy::builtin("v1", "Node").unwrap();
    let tainted = |key: &str| {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
            "spec": {"taints": [{"key": key, "effect": "NoSchedule"}]}})
    };
    let n = server_side_apply(None, &tainted("a"), &opts("alice", false, &node)).unwrap();
    let err = server_side_apply(Some(&n), &tainted("b"), &opts("bob", false, &node)).unwrap_err();
    assert!(err.to_string().contains(".spec.taints"), "{err}");
}

#[test]
fn update_ownership_makes_apply_conflict() {
    let s = MergeStrategy::builtin("v1", "ConfigMap").unwrap();
    let uo = |m: &'static str, now: &'static str| UpdateOptions {
        manager: m,
        now,
        strategy: &s,
        subresource: None,
    };
    let created = record_update(None, &cm(json!({"a": "1"})), &uo("kubectl-create", T1));
    assert_eq!(
        managers(&created),
        vec![("kubectl-create".to_string(), "Update".to_string())]
    );
    let err = server_side_apply(
        Some(&created),
        &cm(json!({"a": "2"})),
        &opts("applier", false, &s),
    )
    .unwrap_err();
    assert!(err.to_string().contains("kubectl-create"), "{err}");
    // The creator owns the map it added and its key (as the real server writes it).
    assert_eq!(
        created["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:data": {".": {}, "f:a": {}}})
    );
    // controller changes a -> takes it from kubectl-create, which keeps the map itself.
    let mut next = created.clone();
    next["data"]["a"] = json!("3");
    next["data"]["b"] = json!("new");
    let updated = record_update(Some(&created), &next, &uo("controller", T2));
    assert_eq!(
        managers(&updated),
        vec![
            ("kubectl-create".to_string(), "Update".to_string()),
            ("controller".to_string(), "Update".to_string())
        ]
    );
    assert_eq!(
        updated["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:data": {}})
    );
    assert_eq!(
        updated["metadata"]["managedFields"][1]["fieldsV1"],
        json!({"f:data": {"f:a": {}, "f:b": {}}})
    );
    assert_eq!(updated["metadata"]["managedFields"][1]["time"], T2);
    // removing a field drops it from every entry; removing the map drops the map too.
    let mut next = updated.clone();
    next["data"].as_object_mut().unwrap().remove("b");
    let after = record_update(Some(&updated), &next, &uo("other", T2));
    assert_eq!(
        after["metadata"]["managedFields"][1]["fieldsV1"],
        json!({"f:data": {"f:a": {}}})
    );
    assert_eq!(managers(&after).len(), 2);
    let mut gone = after.clone();
    gone.as_object_mut().unwrap().remove("data");
    gone["metadata"]["labels"] = json!({"l": "v"});
    let emptied = record_update(Some(&after), &gone, &uo("other", T2));
    assert_eq!(
        managers(&emptied),
        vec![("other".to_string(), "Update".to_string())]
    );
    assert_eq!(
        emptied["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:metadata": {"f:labels": {".": {}, "f:l": {}}}})
    );
    // client reset
    let mut reset = after.clone();
    reset["metadata"]["managedFields"] = json!([]);
    let cleared = record_update(Some(&after), &reset, &uo("x", T2));
    assert!(cleared["metadata"].get("managedFields").is_none());
}

#[test]
fn unchanged_ownership_keeps_entries_verbatim() {
    let s = MergeStrategy::builtin("v1", "Node").unwrap();
    let uo = |m: &'static str, now: &'static str| UpdateOptions {
        manager: m,
        now,
        strategy: &s,
        subresource: Some("status"),
    };
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
        "status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "a"}]}});
    let first = record_update(None, &node, &uo("kubelet", T1));
    let mut beat = first.clone();
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = json!("b");
    let second = record_update(Some(&first), &beat, &uo("kubelet", T2));
    assert_eq!(
        second["metadata"]["managedFields"],
        first["metadata"]["managedFields"]
    );
    assert_eq!(second["status"]["conditions"][0]["lastHeartbeatTime"], "b");
    // Another writer changing the same field takes it over.
    let mut other = second.clone();
    other["status"]["conditions"][0]["status"] = json!("False");
    let third = record_update(Some(&second), &other, &uo("node-controller", T2));
    let mf = third["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(mf.len(), 2);
    assert_eq!(mf[1]["manager"], "node-controller");
    assert_eq!(mf[1]["subresource"], "status");
    assert_eq!(
        mf[1]["fieldsV1"],
        json!({"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {"f:status": {}}}}})
    );
    assert!(
        !FieldSet::from_fields_v1(&mf[0]["fieldsV1"])
            .iter()
            .any(|p| p.last().map(String::as_str) == Some("f:status") && p.len() == 4)
    );
}

#[test]
fn scoping_apply_bodies_to_subresources() {
    let body = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n", "labels": {"a": "b"}},
        "spec": {"unschedulable": true}, "status": {"phase": "Running"}});
    assert_eq!(
        scope_to_subresource(&body, None),
        json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n", "labels": {"a": "b"}}, "spec": {"unschedulable": true}})
    );
    assert_eq!(
        scope_to_subresource(&body, Some("status")),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
            "status": {"phase": "Running"}})
    );
    assert_eq!(scope_to_subresource(&json!([1]), None), json!([1]));
}

#[test]
fn invalid_applies() {
    let s = MergeStrategy::atomic();
    let o = opts("m", false, &s);
    assert_eq!(
        server_side_apply(None, &json!({"kind": "ConfigMap"}), &o)
            .unwrap_err()
            .status_code(),
        422
    );
    assert_eq!(
        server_side_apply(None, &json!([1]), &o)
            .unwrap_err()
            .status_code(),
        400
    );
    let existing = cm(json!({}));
    let err = server_side_apply(
        Some(&existing),
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c"}}),
        &o,
    )
    .unwrap_err();
    assert!(err.to_string().contains("does not match"), "{err}");
    let err = server_side_apply(None, &cm(json!({})), &opts("", false, &s)).unwrap_err();
    assert!(err.to_string().contains("fieldManager"), "{err}");
    let pod = MergeStrategy::builtin("v1", "Pod").unwrap();
    let err = server_side_apply(
        None,
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"topologySpreadConstraints": [{"whenUnsatisfiable": "DoNotSchedule"}]}}),
        &opts("m", false, &pod),
    )
    .unwrap_err();
    assert_eq!(err.status_code(), 422);
}

#[test]
fn yaml_and_json_bodies() {
    let v = parse_apply_body(
        b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: \"1\"\n",
    )
    .unwrap();
    assert_eq!(
        v,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}})
    );
    let v = parse_apply_body(br#"{"apiVersion":"v1","kind":"ConfigMap"}"#).unwrap();
    assert_eq!(v["kind"], "ConfigMap");
    assert_eq!(
        parse_apply_body(b"- a\n- b\n").unwrap_err().status_code(),
        400
    );
    assert_eq!(parse_apply_body(b"a: [\n").unwrap_err().status_code(), 400);
}

#[test]
fn server_metadata_in_apply_body_is_ignored() {
    let s = MergeStrategy::atomic();
    let current = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "uid": "u1", "resourceVersion": "5"}});
    let out = server_side_apply(
        Some(&current),
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "uid": "evil", "resourceVersion": "1"}, "data": {"k": "v"}}),
        &opts("m", false, &s),
    )
    .unwrap();
    assert_eq!(out["metadata"]["uid"], "u1");
    assert_eq!(out["metadata"]["resourceVersion"], "5");
    assert_eq!(out["data"]["k"], "v");
}
