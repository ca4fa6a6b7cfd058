//! Unit tests of the failure reasons and codes and of the refusal classification.

use kcr_controller::ReconcileError;
use serde_json::{Value, json};

use super::error::is_not_found;
use super::*;
use crate::nodes::{FailingOperation, first_failing_operation, plan_node};
use crate::runtimeclass::RuntimeClassError;

fn api_error(code: u16) -> kube::Error {
    kube::Error::Api(
        kube::core::Status::failure("boom", "Reason")
            .with_code(code)
            .boxed(),
    )
}

#[test]
fn failure_reasons_and_codes() {
    let cases: Vec<(ReconcileFailure, &str, i32)> = vec![
        (
            ReconcileFailure::NodePatch {
                node: "n".into(),
                source: api_error(500),
            },
            "NodePatchFailed",
            500,
        ),
        (
            ReconcileFailure::NodeConflict {
                node: "n".into(),
                attempts: 5,
            },
            "NodeConflict",
            409,
        ),
        (
            ReconcileFailure::Finalizer(api_error(403)),
            "FinalizerUpdateFailed",
            403,
        ),
        (
            ReconcileFailure::RuntimeClass {
                name: "rc".into(),
                source: api_error(503),
            },
            "RuntimeClassFailed",
            503,
        ),
        (
            ReconcileFailure::Owner(RuntimeClassError::PoolNotPersisted),
            "PoolNotPersisted",
            422,
        ),
        (
            ReconcileFailure::Status(api_error(409)),
            "StatusUpdateFailed",
            409,
        ),
    ];
    for (e, reason, code) in cases {
        assert_eq!(e.reason(), reason);
        assert_eq!(e.code(), code, "{e}");
        assert!(!e.is_terminal());
    }
    assert!(is_conflict(&api_error(409)));
    assert!(!is_conflict(&api_error(422)));
    assert!(!is_conflict(&api_error(500)));
    assert!(is_not_found(&api_error(404)));
}

/// The API server's answer to a JSON patch that does not apply (any operation).
fn json_patch_refused() -> kube::Error {
    let mut s = kube::core::Status::failure(
        "the server rejected our request due to an error in our request",
        "Invalid",
    )
    .with_code(422);
    s.details = Some(serde_json::from_value(json!({})).unwrap());
    kube::Error::Api(s.boxed())
}

/// A 422 from validating the patched node: with field causes.
fn invalid_node() -> kube::Error {
    let mut s = kube::core::Status::failure(
        "Node \"n1\" is invalid: spec.taints[0].effect: Unsupported value: \"Never\"",
        "Invalid",
    )
    .with_code(422);
    s.details = Some(
        serde_json::from_value(json!({"name": "n1", "kind": "nodes", "causes": [{
            "reason": "FieldValueNotSupported",
            "message": "Unsupported value: \"Never\"",
            "field": "spec.taints[0].effect"
        }]}))
        .unwrap(),
    );
    kube::Error::Api(s.boxed())
}

fn node(v: Value) -> Node {
    serde_json::from_value(v).unwrap()
}

fn worker_spec() -> Applied {
    Applied {
        labels: [("node-pool.lailin.xyz/w".to_owned(), "1".to_owned())].into(),
        taints: vec![crate::nodes::PoolTaint {
            key: "node-pool.lailin.xyz".into(),
            value: "w".into(),
            effect: "NoSchedule".into(),
        }],
    }
}

#[test]
fn only_a_failed_test_or_a_409_is_a_conflict() {
    let member = node(json!({"metadata": {"name": "n1", "resourceVersion": "7",
        "labels": {"node-role.kubernetes.io/worker": ""}, "annotations": {}},
        "spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]}}));
    let plan = plan_node("worker", Some(&worker_spec()), &member);
    let sent = plan.json_patch();

    // Someone changed the taints since: the patch's `test /spec/taints` fails on the
    // fresh node. A conflict, whichever of 409 or 422 the server answered.
    let mut changed = member.clone();
    changed.spec.as_mut().unwrap().taints = Some(vec![]);
    changed.metadata.resource_version = Some("8".into());
    for e in [json_patch_refused(), api_error(409)] {
        match classify_refusal(&e, &sent, &changed) {
            Refusal::Conflict(Some(op)) => {
                assert!(op.is_test);
                assert_eq!(op.operation, "test /spec/taints");
            }
            other => panic!("{}: {other:?}", describe(&e)),
        }
    }
    // The node is as it was: the patch applies. A 409 is still a conflict (the
    // resourceVersion moved), a JSON-patch refusal is unexplained.
    assert_eq!(
        classify_refusal(&api_error(409), &sent, &member),
        Refusal::Conflict(None)
    );
    assert_eq!(
        classify_refusal(&json_patch_refused(), &sent, &member),
        Refusal::Unexplained
    );
    // A server that names the failing operation in a cause without a field: the same.
    let mut detailed =
        kube::core::Status::failure("Node \"n1\" is invalid", "Invalid").with_code(422);
    detailed.details = Some(
        serde_json::from_value(json!({"causes": [{"reason": "FieldValueInvalid",
            "message": "json patch failed: testing value /spec/taints failed"}]}))
        .unwrap(),
    );
    let detailed = kube::Error::Api(detailed.boxed());
    assert!(matches!(
        classify_refusal(&detailed, &sent, &changed),
        Refusal::Conflict(Some(_))
    ));
    // Validation of the patched node, server errors, forbidden: reported as they are.
    for e in [
        invalid_node(),
        api_error(500),
        api_error(403),
        api_error(400),
    ] {
        assert_eq!(
            classify_refusal(&e, &sent, &changed),
            Refusal::Other,
            "{}",
            describe(&e)
        );
        assert!(!Refusal::needs_fresh_node(&e));
    }
}

#[test]
fn a_patch_that_does_not_fit_the_node_is_not_a_conflict() {
    // Issue 18: the patch adds /spec/taints, the node has no spec. Replayed on the fresh
    // node, an `add` fails, not a `test`.
    let no_spec = node(json!({"metadata": {"name": "n1", "resourceVersion": "7",
        "labels": {"node-role.kubernetes.io/worker": ""}}}));
    let old_style: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
        {"op": "add", "path": "/spec/taints", "value": [{"key": "k", "effect": "NoSchedule"}]}
    ]))
    .unwrap();
    match classify_refusal(&json_patch_refused(), &old_style, &no_spec) {
        Refusal::Inapplicable(op) => {
            assert_eq!((op.index, op.is_test), (1, false));
            assert_eq!(op.operation, "add /spec/taints");
            assert!(!op.error.is_empty());
        }
        other => panic!("{other:?}"),
    }
    // Today's plan for the same node fits it.
    let plan = plan_node("worker", Some(&worker_spec()), &no_spec);
    assert_eq!(
        first_failing_operation(&plan.json_patch(), &no_spec).unwrap(),
        None
    );
}

#[test]
fn failures_name_the_api_servers_answer() {
    let e = ReconcileFailure::NodePatch {
        node: "n1".into(),
        source: invalid_node(),
    };
    assert_eq!(
        e.to_string(),
        "patching node n1: 422 Invalid: Node \"n1\" is invalid: spec.taints[0].effect: \
         Unsupported value: \"Never\"; spec.taints[0].effect: Unsupported value: \"Never\""
    );
    let e = ReconcileFailure::NodePatchRejected {
        node: "n1".into(),
        source: json_patch_refused(),
    };
    assert_eq!(e.reason(), "NodePatchRejected");
    assert_eq!(e.code(), 422);
    assert!(
        e.to_string().ends_with(
            "422 Invalid: the server rejected our request due to an error in our request"
        ),
        "{e}"
    );
    let e = ReconcileFailure::NodePatchInvalid {
        node: "n1".into(),
        operation: FailingOperation {
            index: 1,
            is_test: false,
            operation: "add /spec/taints".into(),
            error: "path is invalid".into(),
        },
        source: json_patch_refused(),
    };
    assert_eq!(e.reason(), "NodePatchInvalid");
    assert_eq!(e.code(), 422);
    assert!(
        e.to_string()
            .contains("operation 1 (add /spec/taints) fails: path is invalid"),
        "{e}"
    );
}
