//! Unit tests of schema validation, pruning, defaulting and the structural checks.

use super::*;
use serde_json::{Value, json};

fn schema() -> Value {
    json!({
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "required": ["replicas", "color"],
                "properties": {
                    "replicas": {"type": "integer", "minimum": 0, "maximum": 10, "format": "int32"},
                    "color": {"type": "string", "enum": ["red", "green"]},
                    "name": {"type": "string", "minLength": 1, "maxLength": 5, "pattern": "^[a-z]+$"},
                    "ratio": {"type": "number", "exclusiveMaximum": true, "maximum": 1},
                    "port": {"x-kubernetes-int-or-string": true},
                    "when": {"type": "string", "format": "date-time"},
                    "note": {"type": "string", "nullable": true},
                    "enabled": {"type": "boolean", "default": true},
                    "mode": {"type": "string", "default": "fast"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}},
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "taints": {
                        "type": "array", "maxItems": 2, "minItems": 1,
                        "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["key"],
                        "items": {"type": "object", "required": ["key", "effect"], "properties": {
                            "key": {"type": "string"},
                            "effect": {"type": "string", "enum": ["NoSchedule", "NoExecute"]},
                            "weight": {"type": "integer", "default": 1}
                        }}
                    },
                    "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}
                }
            },
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
        }
    })
}

fn obj(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec})
}

fn errors(spec: Value) -> Vec<String> {
    validate(&schema(), &obj(spec))
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn valid_object_has_no_errors() {
    let e = errors(
        json!({"replicas": 3, "color": "red", "name": "abc", "ratio": 0.5,
        "port": "http", "when": "2024-01-01T00:00:00Z", "note": null,
        "labels": {"a": "xyz"}, "extra": {"anything": [1, {"x": 2}]},
        "taints": [{"key": "a", "effect": "NoSchedule"}], "tags": ["x", "y"]}),
    );
    assert!(e.is_empty(), "{e:?}");
    let e = errors(json!({"replicas": 3.0, "color": "green", "port": 8080}));
    assert!(e.is_empty(), "{e:?}");
}

#[test]
fn required_fields() {
    let errs = validate(
        &schema(),
        &json!({"apiVersion": "v", "kind": "Widget", "metadata": {}}),
    );
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].path, "spec");
    assert_eq!(errs[0].reason, CauseType::FieldValueRequired);
    assert_eq!(errs[0].to_string(), "spec: Required value");
    assert_eq!(
        errors(json!({"color": "red"})),
        vec!["spec.replicas: Required value"]
    );
    assert_eq!(
        errors(json!({"replicas": 1, "color": "red", "taints": [{"key": "a"}]})),
        vec!["spec.taints[0].effect: Required value"]
    );
}

#[test]
fn types() {
    let errs = validate(
        &schema(),
        &obj(json!({"replicas": "three", "color": "red"})),
    );
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].reason, CauseType::FieldValueTypeInvalid);
    assert_eq!(
        errs[0].to_string(),
        "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""
    );
    assert_eq!(
        errors(json!({"replicas": 1.5, "color": "red"})),
        vec![
            "spec.replicas: Invalid value: \"number\": spec.replicas in body must be of type integer: \"number\""
        ]
    );
    assert_eq!(
        errors(json!({"replicas": 1, "color": "red", "port": true})).len(),
        1
    );
    assert_eq!(
        errors(json!({"replicas": 1, "color": "red", "enabled": "yes"})).len(),
        1
    );
    assert_eq!(
        errors(json!({"replicas": 1, "color": null})),
        vec![
            "spec.color: Invalid value: \"null\": spec.color in body must be of type string: \"null\""
        ]
    );
    assert_eq!(
        errors(json!({"replicas": 1, "color": "red", "taints": {"key": "a"}})),
        vec![
            "spec.taints: Invalid value: \"object\": spec.taints in body must be of type array: \"object\""
        ]
    );
}

#[test]
fn enums_and_bounds() {
    let errs = validate(&schema(), &obj(json!({"replicas": 11, "color": "purple"})));
    let text: Vec<String> = errs.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        vec![
            "spec.color: Unsupported value: \"purple\": supported values: \"red\", \"green\"",
            "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10",
        ]
    );
    assert_eq!(errs[0].reason, CauseType::FieldValueNotSupported);
    assert_eq!(errs[1].reason, CauseType::FieldValueInvalid);
    assert_eq!(
        errors(json!({"replicas": -1, "color": "red"})),
        vec![
            "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"
        ]
    );
    assert_eq!(
        errors(json!({"replicas": 1, "color": "red", "ratio": 1})),
        vec!["spec.ratio: Invalid value: 1: spec.ratio in body should be less than 1"]
    );
    assert_eq!(
        errors(json!({"replicas": 3000000000u64, "color": "red"})).len(),
        2 // maximum and int32 format
    );
}

#[test]
fn strings() {
    assert_eq!(
        errors(json!({"replicas": 1, "color": "red", "name": "abcdef"})),
        vec!["spec.name: Too long: may not be longer than 5"]
    );
    assert_eq!(
        errors(json!({"replicas": 1, "color": "red", "name": ""})),
        vec![
            "spec.name: Invalid value: \"\": spec.name in body should be at least 1 chars long",
            "spec.name: Invalid value: \"\": spec.name in body should match '^[a-z]+$'"
        ]
    );
    assert_eq!(
        errors(json!({"replicas": 1, "color": "red", "when": "yesterday"})),
        vec![
            "spec.when: Invalid value: \"yesterday\": spec.when in body must be of type date-time: \"string\""
        ]
    );
    assert_eq!(
        errors(json!({"replicas": 1, "color": "red", "labels": {"a": "toolong"}})),
        vec!["spec.labels[a]: Too long: may not be longer than 3"]
    );
}

#[test]
fn arrays_and_duplicates() {
    let e = errors(json!({"replicas": 1, "color": "red", "taints": [
        {"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoExecute"}, {"key": "b", "effect": "Bad"}]}));
    assert_eq!(
        e,
        vec![
            "spec.taints: Too many: 3: must have at most 2 items",
            "spec.taints[2].effect: Unsupported value: \"Bad\": supported values: \"NoSchedule\", \"NoExecute\"",
            "spec.taints[1]: Duplicate value: {\"key\":\"a\"}",
        ]
    );
    assert_eq!(
        errors(json!({"replicas": 1, "color": "red", "taints": []})),
        vec![
            "spec.taints: Invalid value: \"array\": spec.taints in body should have at least 1 items"
        ]
    );
    assert_eq!(
        errors(json!({"replicas": 1, "color": "red", "tags": ["a", "a"]})),
        vec!["spec.tags[1]: Duplicate value: \"a\""]
    );
}

#[test]
fn combinators_and_formats() {
    let s = json!({"type": "object", "properties": {
        "a": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        "b": {"anyOf": [{"type": "string", "format": "ipv4"}, {"type": "string", "format": "cidr"}]},
        "c": {"not": {"type": "string", "enum": ["x"]}},
        "d": {"type": "string", "format": "uuid"},
        "e": {"type": "string", "format": "byte"},
        "f": {"type": "number", "multipleOf": 0.5}
    }});
    assert!(
        validate(
            &s,
            &json!({"a": 1, "b": "10.0.0.0/8", "c": "y",
        "d": "67e55044-10b1-426f-9247-bb680e5fe0c8", "e": "aGk=", "f": 1.5})
        )
        .is_empty()
    );
    let errs = validate(
        &s,
        &json!({"a": 1.5, "b": "nope", "c": "x", "d": "nope", "e": "!!", "f": 0.3}),
    );
    let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, vec!["a", "b", "c", "d", "e", "f"]);
    assert!(errs[0].message.contains("oneOf"), "{}", errs[0]);
}

#[test]
fn pruning_keeps_declared_and_preserved_fields() {
    let mut o = obj(json!({"replicas": 1, "color": "red", "unknown": 1,
        "extra": {"kept": {"deep": true}},
        "labels": {"a": "b"},
        "taints": [{"key": "a", "effect": "NoSchedule", "bogus": 1}]}));
    o["status"] = json!({"ready": true, "junk": 1});
    o["topLevelJunk"] = json!(1);
    let pruned = prune(&schema(), &mut o);
    assert_eq!(
        pruned,
        vec![
            "spec.taints[0].bogus",
            "spec.unknown",
            "status.junk",
            "topLevelJunk"
        ]
    );
    assert_eq!(o["spec"]["extra"], json!({"kept": {"deep": true}}));
    assert_eq!(o["spec"]["labels"], json!({"a": "b"}));
    assert_eq!(o["metadata"]["name"], "w");
    assert_eq!(o["kind"], "Widget");
    assert!(o.get("topLevelJunk").is_none());
}

#[test]
fn defaults_are_applied() {
    let mut o = obj(json!({"replicas": 1, "color": "red", "mode": null,
        "taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoSchedule", "weight": 5}]}));
    apply_defaults(&schema(), &mut o);
    assert_eq!(o["spec"]["enabled"], json!(true));
    assert_eq!(o["spec"]["mode"], json!("fast"));
    assert_eq!(o["spec"]["taints"][0]["weight"], json!(1));
    assert_eq!(o["spec"]["taints"][1]["weight"], json!(5));
    assert!(o["spec"].get("note").is_none());
}

#[test]
fn structural_schema_checks() {
    assert!(
        check_structural(&schema(), "s").is_empty(),
        "{:?}",
        check_structural(&schema(), "s")
    );
    let bad = json!({"type": "string"});
    assert_eq!(
        check_structural(&bad, "s")[0].to_string(),
        "s.type: Invalid value: \"string\": must be object at the root"
    );
    let bad = json!({"type": "object", "properties": {
        "untyped": {"properties": {"a": {"type": "string"}}},
        "list": {"type": "array"},
        "both": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}},
        "ios": {"type": "string", "x-kubernetes-int-or-string": true},
        "keyed": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "properties": {"id": {"type": "string"}}}},
        "branchy": {"type": "string", "anyOf": [{"type": "integer"}]},
        "defaulted": {"type": "integer", "maximum": 3, "default": 5},
        "free": {"x-kubernetes-preserve-unknown-fields": true},
        "leafless": {"description": "no type"}
    }});
    let errs: Vec<String> = check_structural(&bad, "s")
        .iter()
        .map(ToString::to_string)
        .collect();
    let expected = [
        "s.properties[untyped].type: Required value: must not be empty for specified object fields",
        "s.properties[list].items: Required value: must be specified",
        "s.properties[both].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
        "s.properties[ios].type: Forbidden: must be empty to be structural when x-kubernetes-int-or-string is true",
        "s.properties[keyed].x-kubernetes-list-map-keys: Invalid value: \"name\": entries must all be names of item properties",
        "s.properties[branchy].anyOf[0].type: Forbidden: must be undefined to be structural",
        "s.properties[defaulted].default: Invalid value: 5: <root> in body should be less than or equal to 3 (in the default value)",
        "s.properties[leafless].type: Required value: must not be empty for specified object fields",
    ];
    for e in expected {
        assert!(errs.iter().any(|x| x == e), "missing {e:?} in {errs:#?}");
    }
    assert_eq!(errs.len(), expected.len(), "{errs:#?}");
}

#[test]
fn status_message() {
    let errs = validate(&schema(), &obj(json!({"color": "purple"})));
    assert_eq!(
        invalid_message("Widget.example.com", "w", &errs),
        "Widget.example.com \"w\" is invalid: [spec.replicas: Required value, spec.color: Unsupported value: \"purple\": supported values: \"red\", \"green\"]"
    );
    assert_eq!(
        invalid_message("Widget.example.com", "w", &errs[..1]),
        "Widget.example.com \"w\" is invalid: spec.replicas: Required value"
    );
}
