//! Generation rules per kind: ConfigMap, Secret and Node (the real server does not version
//! their spec), Deployment, and CRDs with and without a status subresource.

use serde_json::json;

use super::{DEPLOY, GADGETS, WIDGETS, cm, deployment, gadget, widget};
use crate::exchange::{Area, Script, patch, post};

/// The generation area.
pub fn area() -> Area {
    let mut s = Script::new("generation");
    let g = &["/metadata/generation"];
    let cases = [
        (
            "configmap",
            "/api/v1/namespaces/{ns}/configmaps",
            cm("c1", json!({"a": "1"})),
            json!({"data": {"a": "2"}}),
        ),
        (
            "secret",
            "/api/v1/namespaces/{ns}/secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}, "data": {"a": "MQ=="}}),
            json!({"data": {"a": "Mg=="}}),
        ),
        (
            "node",
            "/api/v1/nodes",
            super::node("conf-generation-n1"),
            json!({"spec": {"unschedulable": true}}),
        ),
        (
            "deployment",
            DEPLOY,
            deployment("d1", 1),
            json!({"spec": {"replicas": 2}}),
        ),
        (
            "widget",
            WIDGETS,
            widget("w1", 1),
            json!({"spec": {"size": 2}}),
        ),
        (
            "gadget",
            GADGETS,
            gadget("g1"),
            json!({"spec": {"size": 2}}),
        ),
    ];
    for (k, coll, obj, spec_change) in cases {
        let name = obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let item = format!("{coll}/{name}");
        let mut with_gen = obj.clone();
        with_gen["metadata"]["generation"] = json!(7);
        s.pick(&format!("{k}/create"), post(coll, with_gen), g);
        s.pick(
            &format!("{k}/spec-change"),
            patch(&item, "merge", spec_change.clone()),
            g,
        );
        s.pick(
            &format!("{k}/same-spec"),
            patch(&item, "merge", spec_change),
            g,
        );
        s.pick(
            &format!("{k}/label"),
            patch(&item, "merge", json!({"metadata": {"labels": {"x": "y"}}})),
            g,
        );
        s.pick(
            &format!("{k}/annotation"),
            patch(
                &item,
                "merge",
                json!({"metadata": {"annotations": {"x": "y"}}}),
            ),
            g,
        );
        s.pick(
            &format!("{k}/status-field"),
            patch(&item, "merge", json!({"status": {"phase": "P"}})),
            g,
        );
        s.pick(
            &format!("{k}/set-generation"),
            patch(&item, "merge", json!({"metadata": {"generation": 42}})),
            g,
        );
    }
    s.setup(crate::exchange::delete("/api/v1/nodes/conf-generation-n1"));
    s.done()
}
