//! A minimal OpenAPI v3 surface: `/openapi/v3` (the group-version index) and
//! `/openapi/v3/{api/v1 | apis/g/v}` documents that declare, for every served kind, a PATCH
//! operation carrying `x-kubernetes-group-version-kind` and the `fieldValidation` parameter.
//!
//! That is what kubectl looks for to delegate validation to the server (it then sends
//! `fieldValidation=Strict` instead of validating client-side against downloaded schemas), so
//! `kubectl apply -f` and `kubectl create -f` work without `--validate=false`. The documents
//! carry no component schemas: `kubectl explain` has nothing to show, and kubectl computes
//! apply patches from its compiled-in types (built-ins) or as JSON merge patches (custom
//! resources), as it does for servers without OpenAPI.

use serde_json::{Value, json};

use crate::resources::Registry;

fn hash(reg: &Registry, gv: &str) -> String {
    // Changes when the set of served resources of the group-version changes.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for t in reg.all() {
        for v in &t.versions {
            let this = if t.group.is_empty() {
                format!("api/{v}")
            } else {
                format!("apis/{}/{v}", t.group)
            };
            if this == gv {
                for b in t.plural.bytes().chain(t.kind.bytes()) {
                    h ^= u64::from(b);
                    h = h.wrapping_mul(0x0100_0000_01b3);
                }
            }
        }
    }
    format!("{h:016X}")
}

fn group_versions(reg: &Registry) -> Vec<String> {
    let mut gvs: Vec<String> = reg
        .all()
        .flat_map(|t| {
            t.versions.iter().map(move |v| {
                if t.group.is_empty() {
                    format!("api/{v}")
                } else {
                    format!("apis/{}/{v}", t.group)
                }
            })
        })
        .collect();
    gvs.sort();
    gvs.dedup();
    gvs
}

/// `/openapi/v3`: the index of group-version documents.
pub fn root(reg: &Registry) -> Value {
    let paths: serde_json::Map<String, Value> = group_versions(reg)
        .into_iter()
        .map(|gv| {
            let url = format!("/openapi/v3/{gv}?hash={}", hash(reg, &gv));
            (gv, json!({"serverRelativeURL": url}))
        })
        .collect();
    json!({"paths": paths})
}

/// `/openapi/v3/{gv}` for `gv` = `api/v1` or `apis/{group}/{version}`; `None` if not served.
pub fn group_version(reg: &Registry, gv: &str) -> Option<Value> {
    let (group, version) = match gv.split('/').collect::<Vec<_>>().as_slice() {
        ["api", v] => (String::new(), v.to_string()),
        ["apis", g, v] => (g.to_string(), v.to_string()),
        _ => return None,
    };
    let mut paths = serde_json::Map::new();
    for t in reg.all().filter(|t| t.group == group && t.serves(&version)) {
        let prefix = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let path = if t.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", t.plural)
        } else {
            format!("{prefix}/{}/{{name}}", t.plural)
        };
        let gvk = json!({"group": group, "version": version, "kind": t.kind});
        let op = |verb: &str| {
            json!({
                "operationId": format!("{verb}{}", t.kind),
                "x-kubernetes-action": verb,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": [
                    {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                ],
                "responses": {"200": {"description": "OK"}},
            })
        };
        paths.insert(
            path,
            json!({"get": {"operationId": format!("read{}", t.kind), "x-kubernetes-action": "get",
                           "x-kubernetes-group-version-kind": gvk,
                           "responses": {"200": {"description": "OK"}}},
                   "put": op("put"), "patch": op("patch")}),
        );
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (kcr-envtest)", "version": crate::discovery::EMULATED_KUBERNETES_VERSION},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}
