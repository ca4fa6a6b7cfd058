//! Unit tests of webhook matching, the review exchange and denial messages.

use super::*;
use serde_json::json;
use std::time::Duration;

fn attrs(op: Operation) -> Attributes {
    Attributes {
        group: "".into(),
        version: "v1".into(),
        resource: "pods".into(),
        subresource: "".into(),
        kind: "Pod".into(),
        operation: op,
        namespace: Some("default".into()),
        name: "p".into(),
        user: UserInfo::default(),
        dry_run: false,
        namespace_labels: Some([("team".to_string(), "a".to_string())].into()),
    }
}

fn config(hooks: Value) -> Vec<Value> {
    vec![json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "c"}, "webhooks": hooks})]
}

fn names(hooks: &[Webhook]) -> Vec<&str> {
    hooks.iter().map(|h| h.name.as_str()).collect()
}

#[test]
fn rule_matching() {
    let cfg = config(json!([
        {"name": "all", "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "operations": ["*"]}]},
        {"name": "pods-create", "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE"]}]},
        {"name": "apps", "rules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["*"], "operations": ["*"]}]},
        {"name": "status", "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/status"], "operations": ["UPDATE"]}]},
        {"name": "any-sub", "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["*/*"], "operations": ["UPDATE"]}]},
        {"name": "pods-star", "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/*"], "operations": ["UPDATE"]}]},
        {"name": "cluster", "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "operations": ["*"], "scope": "Cluster"}]},
        {"name": "namespaced", "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "operations": ["*"], "scope": "Namespaced"}]},
        {"name": "norules"}
    ]));
    let create = attrs(Operation::Create);
    assert_eq!(
        names(&matching_webhooks(
            &cfg,
            WebhookKind::Validating,
            &create,
            None,
            None
        )),
        vec!["all", "pods-create", "namespaced"]
    );
    let mut status = attrs(Operation::Update);
    status.subresource = "status".into();
    assert_eq!(
        names(&matching_webhooks(
            &cfg,
            WebhookKind::Validating,
            &status,
            None,
            None
        )),
        vec!["status", "any-sub", "pods-star"]
    );
    let update = attrs(Operation::Update);
    assert_eq!(
        names(&matching_webhooks(
            &cfg,
            WebhookKind::Validating,
            &update,
            None,
            None
        )),
        vec!["all", "any-sub", "pods-star", "namespaced"]
    );
    let mut webhook_cfg = attrs(Operation::Delete);
    webhook_cfg.group = "admissionregistration.k8s.io".into();
    webhook_cfg.resource = "validatingwebhookconfigurations".into();
    webhook_cfg.namespace = None;
    assert!(matching_webhooks(&cfg, WebhookKind::Validating, &webhook_cfg, None, None).is_empty());
    let mut node = attrs(Operation::Delete);
    node.resource = "nodes".into();
    node.namespace = None;
    assert_eq!(
        names(&matching_webhooks(
            &cfg,
            WebhookKind::Validating,
            &node,
            None,
            None
        )),
        vec!["all", "cluster"]
    );
}

#[test]
fn selectors_and_hook_settings() {
    let rule = json!([{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "operations": ["*"]}]);
    let cfg = config(json!([
        {"name": "team-a", "rules": rule, "namespaceSelector": {"matchLabels": {"team": "a"}},
            "timeoutSeconds": 3, "failurePolicy": "Ignore",
            "clientConfig": {"url": "https://127.0.0.1:1/x", "caBundle": "Zm9v"}},
        {"name": "team-b", "rules": rule, "namespaceSelector": {"matchLabels": {"team": "b"}}},
        {"name": "web-objects", "rules": rule, "objectSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
            "timeoutSeconds": 99}
    ]));
    let a = attrs(Operation::Create);
    let web = json!({"metadata": {"labels": {"app": "web"}}});
    let db = json!({"metadata": {"labels": {"app": "db"}}});
    let hooks = matching_webhooks(&cfg, WebhookKind::Mutating, &a, Some(&web), None);
    assert_eq!(names(&hooks), vec!["team-a", "web-objects"]);
    assert_eq!(hooks[0].timeout, Duration::from_secs(3));
    assert!(hooks[0].ignore_failure);
    assert_eq!(hooks[0].url.as_deref(), Some("https://127.0.0.1:1/x"));
    assert_eq!(hooks[0].kind, WebhookKind::Mutating);
    assert_eq!(hooks[1].timeout, Duration::from_secs(30));
    assert!(!hooks[1].ignore_failure);
    // old object labels count too (e.g. on delete)
    let hooks = matching_webhooks(&cfg, WebhookKind::Mutating, &a, Some(&db), Some(&web));
    assert_eq!(names(&hooks), vec!["team-a", "web-objects"]);
    let hooks = matching_webhooks(&cfg, WebhookKind::Mutating, &a, Some(&db), None);
    assert_eq!(names(&hooks), vec!["team-a"]);
}

#[tokio::test]
async fn dry_run_needs_side_effect_free_webhooks() {
    let rule = json!([{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "operations": ["*"]}]);
    let cfg = config(json!([
        {"name": "unknown-effects", "rules": rule, "sideEffects": "Unknown",
            "clientConfig": {"url": "https://127.0.0.1:1/x"}}
    ]));
    let mut a = attrs(Operation::Create);
    a.dry_run = true;
    let err = run_validating(&cfg, &a, Some(&json!({})), None)
        .await
        .unwrap_err();
    assert_eq!(err.status_code(), 400);
    assert_eq!(
        err.to_string(),
        "admission webhook \"unknown-effects\" does not support dry run"
    );
    let hooks = matching_webhooks(
        &config(json!([
            {"name": "safe", "rules": rule, "sideEffects": "NoneOnDryRun"}
        ])),
        WebhookKind::Validating,
        &a,
        None,
        None,
    );
    assert!(hooks[0].dry_run_safe);
}

#[test]
fn operation_names_round_trip() {
    for op in [
        Operation::Create,
        Operation::Update,
        Operation::Delete,
        Operation::Connect,
    ] {
        assert_eq!(Operation::parse(op.as_str()), Some(op));
    }
    assert_eq!(Operation::parse("create"), None);
}

#[test]
fn denial_messages() {
    let e = denial(
        "x",
        Some(&json!({"code": 400, "message": "no", "reason": "BadRequest"})),
    );
    assert_eq!(
        e.to_string(),
        "admission webhook \"x\" denied the request: no"
    );
    assert_eq!(e.status_code(), 400);
    assert_eq!(e.status_reason(), "BadRequest");
    let e = denial("x", Some(&json!({"code": 200})));
    assert_eq!(e.status_code(), 403);
    assert_eq!(
        e.to_string(),
        "admission webhook \"x\" denied the request without explanation"
    );
    let e = denial("x", None);
    assert_eq!(e.status_code(), 403);
}

#[test]
fn review_shape() {
    let mut a = attrs(Operation::Update);
    a.subresource = "status".into();
    let r = review_request("u1", &a, Some(&json!({"a": 1})), None);
    assert_eq!(r["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(r["request"]["uid"], "u1");
    assert_eq!(r["request"]["operation"], "UPDATE");
    assert_eq!(r["request"]["subResource"], "status");
    assert_eq!(r["request"]["namespace"], "default");
    assert_eq!(
        r["request"]["kind"],
        json!({"group": "", "version": "v1", "kind": "Pod"})
    );
    assert_eq!(r["request"]["resource"]["resource"], "pods");
    assert_eq!(r["request"]["options"]["kind"], "UpdateOptions");
    assert_eq!(r["request"]["oldObject"], Value::Null);
    let bad = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": "other", "allowed": true}});
    assert!(
        parse_response(&bad, "u1")
            .unwrap_err()
            .contains("expected response.uid")
    );
    let bad = json!({"apiVersion": "v1", "kind": "Status"});
    assert!(parse_response(&bad, "u1").is_err());
}
