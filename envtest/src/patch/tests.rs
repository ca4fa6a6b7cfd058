use super::*;
use serde_json::json;

#[test]
fn content_types() {
    assert_eq!(
        PatchType::from_content_type("application/merge-patch+json; charset=utf-8"),
        Some(PatchType::Merge)
    );
    assert_eq!(
        PatchType::from_content_type("application/apply-patch+yaml"),
        Some(PatchType::Apply)
    );
    assert_eq!(
        PatchType::from_content_type("application/strategic-merge-patch+json"),
        Some(PatchType::Strategic)
    );
    assert_eq!(
        PatchType::from_content_type("application/json-patch+json"),
        Some(PatchType::Json)
    );
    assert_eq!(PatchType::from_content_type("application/json"), None);
    for t in [
        PatchType::Json,
        PatchType::Merge,
        PatchType::Strategic,
        PatchType::Apply,
    ] {
        assert_eq!(PatchType::from_content_type(t.content_type()), Some(t));
    }
}

#[test]
fn json_patch_all_operations() {
    let doc = json!({"a": {"b/c": 1, "t~": [1, 2]}, "list": [1, 2, 3]});
    let out = json_patch(
        &doc,
        &json!([
            {"op": "test", "path": "/a/b~1c", "value": 1},
            {"op": "add", "path": "/list/-", "value": 4},
            {"op": "add", "path": "/list/0", "value": 0},
            {"op": "remove", "path": "/list/1"},
            {"op": "replace", "path": "/a/t~0", "value": "x"},
            {"op": "copy", "from": "/a/t~0", "path": "/copied"},
            {"op": "move", "from": "/a/b~1c", "path": "/moved"}
        ]),
    )
    .unwrap();
    assert_eq!(
        out,
        json!({"a": {"t~": "x"}, "list": [0, 2, 3, 4], "copied": "x", "moved": 1})
    );
}

#[test]
fn json_patch_failures_are_typed_and_atomic() {
    let doc = json!({"a": 1});
    let err = json_patch(&doc, &json!([{"op": "test", "path": "/a", "value": 2}])).unwrap_err();
    assert_eq!(err.status_code(), 422);
    let err = json_patch(&doc, &json!([{"op": "remove", "path": "/missing"}])).unwrap_err();
    assert_eq!(err.status_code(), 422);
    assert!(err.to_string().contains("/missing"), "{err}");
    // Not a list: the real server's decoding error (400).
    let err = json_patch(&doc, &json!({"op": "add"})).unwrap_err();
    assert_eq!(err.status_code(), 400);
    assert_eq!(
        err.to_string(),
        "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp"
    );
    // An unknown operation does not apply (422), as any other operation that does not.
    let err = json_patch(&doc, &json!([{"op": "frobnicate", "path": "/a"}])).unwrap_err();
    assert_eq!(err.status_code(), 422);
    // `null` is no operation at all.
    assert_eq!(json_patch(&doc, &json!(null)).unwrap(), doc);
    // nothing of a failed patch is visible
    let err = json_patch(
        &doc,
        &json!([{"op": "add", "path": "/b", "value": 1}, {"op": "test", "path": "/a", "value": 0}]),
    );
    assert!(err.is_err());
}

#[test]
fn merge_patch_rfc7386_examples() {
    let target = json!({"title": "Goodbye!", "author": {"givenName": "John", "familyName": "Doe"},
        "tags": ["example", "sample"], "content": "This will be unchanged"});
    let patch = json!({"title": "Hello!", "phoneNumber": "+01-123-456-7890",
        "author": {"familyName": null}, "tags": ["example"]});
    assert_eq!(
        merge_patch(&target, &patch).unwrap(),
        json!({"title": "Hello!", "author": {"givenName": "John"}, "tags": ["example"],
            "content": "This will be unchanged", "phoneNumber": "+01-123-456-7890"})
    );
    assert_eq!(
        merge_patch(&json!({"a": "b"}), &json!({"a": {"b": "c"}})).unwrap(),
        json!({"a": {"b": "c"}})
    );
    assert_eq!(
        merge_patch(&json!({"a": [{"b": "c"}]}), &json!({"a": [1]})).unwrap(),
        json!({"a": [1]})
    );
    assert_eq!(
        merge_patch(&json!({"e": null}), &json!({"a": 1})).unwrap(),
        json!({"e": null, "a": 1})
    );
    assert_eq!(
        merge_patch(&json!({}), &json!({"a": {"bb": {"ccc": null}}})).unwrap(),
        json!({"a": {"bb": {}}})
    );
}

#[test]
fn patch_object_dispatch() {
    let target = json!({"metadata": {"name": "x"}, "spec": {"a": 1}});
    let out = patch_object(PatchType::Merge, &target, br#"{"spec":{"b":2}}"#, None).unwrap();
    assert_eq!(out["spec"], json!({"a": 1, "b": 2}));
    let err = patch_object(PatchType::Strategic, &target, b"{}", None).unwrap_err();
    assert_eq!(err.status_code(), 415);
    let err = patch_object(PatchType::Merge, &target, b"{nope", None).unwrap_err();
    assert_eq!(err.status_code(), 400);
    let err = patch_object(PatchType::Merge, &target, b"[1]", None).unwrap_err();
    assert_eq!(err.status_code(), 400);
    let s = MergeStrategy::builtin("v1", "ConfigMap").unwrap();
    let out = patch_object(
        PatchType::Strategic,
        &target,
        br#"{"spec":{"a":null}}"#,
        Some(&s),
    )
    .unwrap();
    assert_eq!(out["spec"], json!({}));
}
