use super::*;

fn pool(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "nodes.lailin.xyz/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec})
}

fn fields(errors: &[FieldError]) -> Vec<String> {
    errors.iter().map(|e| e.field.clone()).collect()
}

#[test]
fn original_cases() {
    // From the original's webhook tests.
    let refused = validate(&pool(
        "w",
        json!({"labels": {"xxx": "1"}, "handler": "runc"}),
    ));
    assert_eq!(fields(&refused), vec!["spec.labels[xxx]"]);
    let refused = validate(&pool(
        "w",
        json!({"taints": [{"key": "", "effect": "NoSchedule"}], "handler": "runc"}),
    ));
    assert_eq!(fields(&refused), vec!["spec.taints[0].key"]);
    assert_eq!(refused[0].kind, ErrorKind::Required);
    for key in ["node-pool.lailin.xyz", "node-pool.lailin.xyz/xxx"] {
        let ok = validate(&pool(
            "w",
            json!({"labels": {key: "v"}, "taints": [{"key": key, "value": "v", "effect": "NoSchedule"}], "handler": "runc"}),
        ));
        assert!(ok.is_empty(), "{key}: {ok:?}");
    }
}

#[test]
fn key_rule_table() {
    let cases = [
        ("node-pool.lailin.xyz", true),
        ("node-pool.lailin.xyz/xxx", true),
        ("node-pool.lailin.xyz/a.b-c_d", true),
        ("node-pool.lailin.xyz/A9", true),
        (&*format!("node-pool.lailin.xyz/{}", "a".repeat(63)), true),
        (&*format!("node-pool.lailin.xyz/{}", "a".repeat(64)), false),
        ("xxx", false),
        ("", false),
        // The original's unescaped dots matched any character.
        ("node-poolXlailinXxyz", false),
        ("node-pool-lailin-xyz/x", false),
        // The original accepted any run of slashes.
        ("node-pool.lailin.xyz//x", false),
        ("node-pool.lailin.xyz/x/y", false),
        ("node-pool.lailin.xyz/", false),
        ("node-pool.lailin.xyz/-x", false),
        ("node-pool.lailin.xyz/x-", false),
        ("node-pool.lailin.xyz/x y", false),
        ("node-pool.lailin.xyzz", false),
        ("sub.node-pool.lailin.xyz/x", false),
        ("Node-Pool.lailin.xyz", false),
    ];
    for (key, ok) in cases {
        assert_eq!(is_pool_key(key), ok, "{key:?}");
    }
}

#[test]
fn value_and_handler_rule_tables() {
    for (v, ok) in [
        ("", true),
        ("10", true),
        ("a.b_c-d", true),
        ("-a", false),
        ("a-", false),
        ("a b", false),
        ("a/b", false),
        (&*"x".repeat(63), true),
        (&*"x".repeat(64), false),
    ] {
        assert_eq!(is_label_value(v), ok, "{v:?}");
    }
    for (h, ok) in [
        ("runc", true),
        ("kata-qemu", true),
        ("gvisor2", true),
        ("Runc", false),
        ("run_c", false),
        ("run.c", false),
        ("-runc", false),
        ("runc-", false),
        ("", false),
        (&*"a".repeat(63), true),
        (&*"a".repeat(64), false),
    ] {
        assert_eq!(is_dns1123_label(h), ok, "{h:?}");
    }
}

#[test]
fn every_violation_is_listed_with_its_path() {
    let bad = pool(
        "Bad_Name-",
        json!({
            "labels": {"xxx": "ok", "node-pool.lailin.xyz/a": "-bad-"},
            "taints": [
                {"key": "node-pool.lailin.xyz", "value": "v", "effect": "NoSchedule"},
                {"key": "node-pool.lailin.xyz", "value": "w", "effect": "NoSchedule"},
                {"key": "other", "effect": "Sometimes"},
                {"key": "node-pool.lailin.xyz/b", "value": "a b", "effect": ""}
            ],
            "handler": "Not_DNS"
        }),
    );
    let errors = validate(&bad);
    assert_eq!(
        fields(&errors),
        vec![
            "metadata.name",
            "spec.labels[node-pool.lailin.xyz/a]",
            "spec.labels[xxx]",
            "spec.taints[1]",
            "spec.taints[2].key",
            "spec.taints[2].effect",
            "spec.taints[3].value",
            "spec.taints[3].effect",
            "spec.handler",
        ]
    );
    let kinds: Vec<&ErrorKind> = errors.iter().map(|e| &e.kind).collect();
    assert_eq!(kinds[3], &ErrorKind::Duplicate);
    assert_eq!(kinds[5], &ErrorKind::NotSupported);
    assert_eq!(kinds[7], &ErrorKind::Required);
    let summary = summarize("Bad_Name-", &errors);
    assert!(summary.starts_with("NodePool.nodes.lailin.xyz \"Bad_Name-\" is invalid: ["));
    assert!(summary.contains("spec.taints[2].effect: Unsupported value: \"Sometimes\""));
    assert!(summary.contains(
        "spec.taints[1]: Duplicate value: {key: \"node-pool.lailin.xyz\", effect: \"NoSchedule\"}"
    ));
    assert!(summary.contains("spec.labels[xxx]: Invalid value: \"xxx\""));
    assert_eq!(errors[0].reason(), "FieldValueInvalid");
}

#[test]
fn same_key_different_effects_is_fine() {
    let ok = validate(&pool(
        "w",
        json!({"taints": [
            {"key": "node-pool.lailin.xyz", "effect": "NoSchedule"},
            {"key": "node-pool.lailin.xyz", "effect": "NoExecute"},
            {"key": "node-pool.lailin.xyz", "effect": "PreferNoSchedule"}
        ], "handler": "runc"}),
    ));
    assert!(ok.is_empty(), "{ok:?}");
}

#[test]
fn missing_or_malformed_fields() {
    let e = validate(&pool("w", json!({})));
    assert_eq!(fields(&e), vec!["spec.handler"]);
    assert_eq!(e[0].kind, ErrorKind::Required);
    let e = validate(&pool(
        "w",
        json!({"labels": "x", "taints": {}, "handler": 3}),
    ));
    assert_eq!(
        fields(&e),
        vec!["spec.labels", "spec.taints", "spec.handler"]
    );
    let e = validate(&pool("w", json!([])));
    assert_eq!(fields(&e), vec!["spec"]);
    let e = validate(&pool(
        "w",
        json!({"labels": {"node-pool.lailin.xyz": 1}, "handler": "runc"}),
    ));
    assert_eq!(fields(&e), vec!["spec.labels[node-pool.lailin.xyz]"]);
    let long = "a".repeat(64);
    let e = validate(&pool(&long, json!({"handler": "runc"})));
    assert_eq!(fields(&e), vec!["metadata.name"]);
    assert_eq!(
        summarize(&long, &e).matches('[').count(),
        0,
        "one error: no brackets"
    );
}

#[test]
fn defaulting_table() {
    let apply = |v: &Value| {
        let mut doc = v.clone();
        json_patch::patch(&mut doc, &defaults(v)).unwrap();
        doc
    };
    // Nothing set: both defaults.
    let d = apply(&pool("w", json!({})));
    assert_eq!(
        d["metadata"]["labels"],
        json!({"node-pool.lailin.xyz": "w"})
    );
    assert_eq!(d["spec"]["handler"], "runc");
    // Empty values count as unset.
    let mut v = pool("w", json!({"handler": ""}));
    v["metadata"]["labels"] = json!({});
    let d = apply(&v);
    assert_eq!(
        d["metadata"]["labels"],
        json!({"node-pool.lailin.xyz": "w"})
    );
    assert_eq!(d["spec"]["handler"], "runc");
    // Set values are kept: no patch at all.
    let mut v = pool("w", json!({"handler": "kata"}));
    v["metadata"]["labels"] = json!({"team": "a"});
    assert!(defaults(&v).is_empty());
    // No spec at all.
    let d = apply(&json!({"metadata": {"name": "w"}}));
    assert_eq!(d["spec"]["handler"], "runc");
    // No name yet (generateName): labels are not defaulted.
    let ops = defaults(&json!({"metadata": {"generateName": "w-"}, "spec": {"handler": "runc"}}));
    assert!(ops.is_empty());
    // The defaulted object validates when the rest is valid.
    let d = apply(&pool(
        "w",
        json!({"labels": {"node-pool.lailin.xyz/w": "1"}}),
    ));
    assert!(validate(&d).is_empty());
}
