//! Server-side apply: create, update, a 409 conflict naming the managers, force, field removal
//! by omission, and the managedFields shape.

use serde_json::{Value, json};

use super::CM;
use crate::exchange::{Area, Script, get, patch, put};

fn applied(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1", "labels": {"l": "1"}}, "data": data})
}

/// The apply area.
pub fn area() -> Area {
    let mut s = Script::new("apply");
    let c = format!("{CM}/c1");
    s.body(
        "create",
        patch(&c, "apply", applied(json!({"a": "1", "b": "2"}))).q("fieldManager", "alice"),
    );
    s.body(
        "same-again",
        patch(&c, "apply", applied(json!({"a": "1", "b": "2"}))).q("fieldManager", "alice"),
    );
    s.body(
        "update",
        patch(&c, "apply", applied(json!({"a": "1", "b": "3"}))).q("fieldManager", "alice"),
    );
    s.status(
        "conflict",
        patch(&c, "apply", applied(json!({"a": "x"}))).q("fieldManager", "bob"),
    );
    s.body(
        "force",
        patch(&c, "apply", applied(json!({"a": "x"})))
            .q("fieldManager", "bob")
            .q("force", "true"),
    );
    // alice agrees with bob on `a` (shared ownership, no conflict) and omits `b`: removed.
    s.body(
        "removal-by-omission",
        patch(&c, "apply", applied(json!({"a": "x"}))).q("fieldManager", "alice"),
    );
    s.pick("managed-fields", get(&c), &["/metadata/managedFields"]);
    s.body(
        "update-manager",
        put(
            &c,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c1", "labels": {"l": "1"}}, "data": {"a": "x", "u": "1"}}),
        )
        .q("fieldManager", "carol"),
    );
    s.status(
        "conflict-with-update",
        patch(&c, "apply", applied(json!({"u": "2"}))).q("fieldManager", "alice"),
    );
    s.status(
        "no-field-manager",
        patch(&c, "apply", applied(json!({"a": "1"}))),
    );
    s.status(
        "force-on-non-apply",
        patch(&c, "merge", json!({"data": {"z": "1"}})).q("force", "true"),
    );
    s.status(
        "apply-wrong-name",
        patch(
            &c,
            "apply",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "other"}}),
        )
        .q("fieldManager", "alice"),
    );
    s.status(
        "apply-no-kind",
        patch(&c, "apply", json!({"metadata": {"name": "c1"}})).q("fieldManager", "alice"),
    );
    s.body(
        "apply-yaml-text",
        patch(&format!("{CM}/c2"), "apply", json!(null))
            .text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c2\ndata:\n  y: \"1\"\n")
            .q("fieldManager", "dave"),
    );
    s.body(
        "dry-run-apply",
        patch(
            &format!("{CM}/c3"),
            "apply",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c3"}}),
        )
        .q("fieldManager", "dave")
        .q("dryRun", "All"),
    );
    s.status("dry-run-not-stored", get(&format!("{CM}/c3")));
    s.body(
        "apply-deployment",
        patch(
            &format!("{}/d1", super::DEPLOY),
            "apply",
            super::deployment("d1", 2),
        )
        .q("fieldManager", "alice"),
    );
    s.done()
}
