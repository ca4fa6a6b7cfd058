//! Deletion: finalizers and deletionTimestamp; garbage collection (background, foreground,
//! orphan) with owner references; dry run; preconditions; deletecollection.
//!
//! Garbage collection is asynchronous on the real backend (kube-controller-manager): each GC
//! case waits, bounded at 60 s, until the dependent's GET answers what the in-process server
//! answers at once.

use serde_json::{Value, json};

use super::{CM, cm};
use crate::exchange::{Area, Script, delete, get, patch, post};

fn dependent(name: &str, owner: &str, uid_var: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": format!("{{{uid_var}}}")}]}})
}

/// The deletion area.
pub fn area() -> Area {
    let mut s = Script::new("deletion");
    let mut f = cm("f1", json!({}));
    f["metadata"]["finalizers"] = json!(["conf.kcr.dev/hold"]);
    s.body("create-with-finalizer", post(CM, f));
    s.body("delete-with-finalizer", delete(&format!("{CM}/f1")));
    s.body("get-terminating", get(&format!("{CM}/f1")));
    s.status(
        "update-while-terminating-add-finalizer",
        patch(
            &format!("{CM}/f1"),
            "merge",
            json!({"metadata": {"finalizers": ["conf.kcr.dev/hold", "x.io/new"]}}),
        ),
    );
    s.body("delete-again", delete(&format!("{CM}/f1")));
    s.body(
        "remove-finalizer",
        patch(
            &format!("{CM}/f1"),
            "merge",
            json!({"metadata": {"finalizers": null}}),
        ),
    );
    s.status("gone-after-finalizer", get(&format!("{CM}/f1")));

    for (mode, prop) in [
        ("background", "Background"),
        ("foreground", "Foreground"),
        ("orphan", "Orphan"),
    ] {
        let owner = format!("owner-{mode}");
        let dep = format!("dep-{mode}");
        let uid = format!("uid_{mode}");
        s.body(&format!("gc-{mode}/owner"), post(CM, cm(&owner, json!({}))))
            .capture(&uid, "/metadata/uid");
        s.body(
            &format!("gc-{mode}/dependent"),
            post(CM, dependent(&dep, &owner, &uid)),
        );
        s.pick(
            &format!("gc-{mode}/delete-owner"),
            delete(&format!("{CM}/{owner}")).json(
                json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": prop}),
            ),
            &[
                "/kind",
                "/metadata/name",
                "/metadata/finalizers",
                "/status",
                "/reason",
            ],
        );
        let gone = if mode == "orphan" { 200 } else { 404 };
        s.wait_for(get(&format!("{CM}/{owner}")), 404, 60);
        s.wait_for(get(&format!("{CM}/{dep}")), gone, 60);
        s.pick(
            &format!("gc-{mode}/dependent-after"),
            get(&format!("{CM}/{dep}")),
            &["/kind", "/reason", "/metadata/name"],
        );
    }
    s.setup(post(CM, cm("dry", json!({}))));
    s.body(
        "dry-run-delete",
        delete(&format!("{CM}/dry")).q("dryRun", "All"),
    );
    s.status("dry-run-still-there", get(&format!("{CM}/dry")));
    s.body(
        "dry-run-create",
        post(CM, cm("dry2", json!({}))).q("dryRun", "All"),
    );
    s.status("dry-run-create-not-stored", get(&format!("{CM}/dry2")));
    s.status(
        "dry-run-bad-value",
        post(CM, cm("dry3", json!({}))).q("dryRun", "Some"),
    );
    s.status(
        "precondition-uid-mismatch",
        delete(&format!("{CM}/dry")).json(json!({"kind": "DeleteOptions",
        "apiVersion": "v1", "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}})),
    );
    s.status(
        "precondition-rv-mismatch",
        delete(&format!("{CM}/dry")).json(json!({"kind": "DeleteOptions",
        "apiVersion": "v1", "preconditions": {"resourceVersion": "1"}})),
    );
    s.body("precondition-ok", post(CM, cm("pre", json!({}))))
        .capture("uid_pre", "/metadata/uid");
    s.body(
        "precondition-uid-match",
        delete(&format!("{CM}/pre")).json(json!({"kind": "DeleteOptions",
        "apiVersion": "v1", "preconditions": {"uid": "{uid_pre}"}})),
    );
    s.status(
        "bad-propagation",
        delete(&format!("{CM}/dry")).q("propagationPolicy", "Sometimes"),
    );
    for i in 0..3 {
        let mut c = cm(&format!("dc{i}"), json!({}));
        c["metadata"]["labels"] = json!({"dc": "yes"});
        s.setup(post(CM, c));
    }
    s.pick(
        "deletecollection",
        delete(CM).q("labelSelector", "dc=yes"),
        &["/kind", "/items/*/metadata/name"],
    );
    s.pick(
        "after-deletecollection",
        get(CM).q("labelSelector", "dc=yes"),
        &["/items"],
    );
    s.done()
}
