//! CRD schemas: the CRDs the later areas use, then validation errors (field paths, reasons,
//! several causes), defaulting, pruning, `x-kubernetes-preserve-unknown-fields` and printer
//! columns in Table output.

use serde_json::{Value, json};

use super::{GADGETS, WIDGETS, gadget, widget};
use crate::exchange::{Area, Script, get, patch, post, put};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const TABLE: &str = "application/json;as=Table;g=meta.k8s.io;v=v1";

fn crd(plural: &str, kind: &str, status: bool) -> Value {
    let mut version = json!({
        "name": "v1", "served": true, "storage": true,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "color": {"type": "string", "enum": ["red", "blue"], "default": "blue"},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }, "required": ["size"]},
            "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
        }}},
        "additionalPrinterColumns": [
            {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
            {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1},
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase"}
        ]
    });
    if status {
        version["subresources"] = json!({"status": {}});
    }
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.conf.kcr.dev")},
        "spec": {"group": "conf.kcr.dev", "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")},
            "versions": [version]}})
}

/// The CRD schema area.
pub fn area() -> Area {
    let mut s = Script::new("crd_schema");
    for (plural, kind, status) in [("widgets", "Widget", true), ("gadgets", "Gadget", false)] {
        s.pick(
            &format!("create-crd-{plural}"),
            post(CRDS, crd(plural, kind, status)),
            &["/kind", "/metadata/name", "/metadata/generation", "/spec"],
        );
    }
    s.wait_for(get(WIDGETS), 200, 60);
    s.wait_for(get(GADGETS), 200, 60);
    s.pick(
        "crd-established",
        get(&format!("{CRDS}/widgets.conf.kcr.dev")),
        &[
            "/status/conditions[type=Established]/status",
            "/status/acceptedNames",
        ],
    );
    s.body("create-defaulted", post(WIDGETS, widget("w1", 3)));
    let mut no_color = widget("w2", 3);
    no_color["spec"].as_object_mut().map(|m| m.remove("color"));
    s.body("default-applied", post(WIDGETS, no_color));
    let mut unknown = widget("w3", 3);
    unknown["spec"]["bogus"] = json!(1);
    unknown["spec"]["free"] = json!({"anything": {"goes": [1, 2]}});
    unknown["extra"] = json!("top");
    s.body("pruned-and-preserved", post(WIDGETS, unknown.clone()));
    let mut strict = unknown.clone();
    strict["metadata"]["name"] = json!("w3s");
    s.status(
        "strict-unknown-field",
        post(WIDGETS, strict).q("fieldValidation", "Strict"),
    );
    s.status("too-big", post(WIDGETS, widget("w4", 11)));
    s.status("too-small", post(WIDGETS, widget("w4", 0)));
    let mut bad = widget("w4", 0);
    bad["spec"]["color"] = json!("green");
    bad["spec"]["tags"] = json!(["a", "b", "c"]);
    s.status("several-causes", post(WIDGETS, bad));
    let mut wrong_type = widget("w4", 1);
    wrong_type["spec"]["size"] = json!("three");
    s.status("wrong-type", post(WIDGETS, wrong_type));
    let mut missing = widget("w4", 1);
    missing["spec"] = json!({"color": "red"});
    s.status("required-missing", post(WIDGETS, missing));
    s.body("gadget-create", post(GADGETS, gadget("g1")));
    // CRUD on a custom resource.
    let w1 = format!("{WIDGETS}/w1");
    s.body("cr-get", get(&w1))
        .capture("rv_w1", "/metadata/resourceVersion");
    s.pick(
        "cr-list",
        get(WIDGETS),
        &["/kind", "/apiVersion", "/items/*/metadata/name"],
    );
    let mut replaced = widget("w1", 4);
    replaced["metadata"]["resourceVersion"] = json!("{rv_w1}");
    s.body("cr-update", put(&w1, replaced.clone()));
    s.status("cr-update-stale", put(&w1, replaced));
    s.body(
        "cr-merge-patch",
        patch(&w1, "merge", json!({"spec": {"size": 5}})),
    );
    s.body(
        "cr-json-patch",
        patch(
            &w1,
            "json",
            json!([{"op": "replace", "path": "/spec/size", "value": 6}]),
        ),
    );
    s.body(
        "cr-delete",
        crate::exchange::delete(&format!("{WIDGETS}/w2")),
    );
    s.status("cr-get-deleted", get(&format!("{WIDGETS}/w2")));
    s.pick(
        "table",
        get(WIDGETS).h("Accept", TABLE),
        &["/kind", "/columnDefinitions", "/rows/*/cells"],
    );
    s.pick(
        "table-one",
        get(&format!("{WIDGETS}/w1")).h("Accept", TABLE),
        &["/kind", "/columnDefinitions/*/name", "/rows/*/cells"],
    );
    s.pick(
        "table-gadgets",
        get(GADGETS).h("Accept", TABLE),
        &["/kind", "/columnDefinitions/*/name", "/rows/*/cells"],
    );
    s.status(
        "crd-invalid",
        post(
            CRDS,
            json!({"apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition", "metadata": {"name": "bad.conf.kcr.dev"},
        "spec": {"group": "conf.kcr.dev", "scope": "Namespaced",
            "names": {"plural": "things", "kind": "Thing"}, "versions": []}}),
        ),
    );
    s.done()
}
