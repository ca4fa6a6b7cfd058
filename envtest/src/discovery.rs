//! Discovery documents: `/version`, `/api`, `/apis`, `/apis/{group}`, `/api/v1` and
//! `/apis/{group}/{version}` (legacy, non-aggregated discovery).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::resources::{Registry, ResourceType};

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "34",
        "gitVersion": "v1.34.0-kcr-envtest",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `/api`.
pub fn api_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    })
}

fn groups(reg: &Registry) -> BTreeMap<String, Vec<String>> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in reg.all().filter(|t| !t.group.is_empty()) {
        let versions = groups.entry(t.group.clone()).or_default();
        for (i, v) in t.versions.iter().enumerate() {
            if !versions.contains(v) {
                // The storage version of the first resource seen is preferred.
                if i == 0 {
                    versions.insert(0, v.clone());
                } else {
                    versions.push(v.clone());
                }
            }
        }
    }
    groups
}

fn group_doc(name: &str, versions: &[String]) -> Value {
    let gv = |v: &String| json!({"groupVersion": format!("{name}/{v}"), "version": v});
    json!({
        "name": name,
        "versions": versions.iter().map(gv).collect::<Vec<_>>(),
        "preferredVersion": versions.first().map(gv).unwrap_or(Value::Null),
    })
}

/// `/apis`.
pub fn group_list(reg: &Registry) -> Value {
    let groups: Vec<Value> = groups(reg)
        .iter()
        .map(|(name, versions)| group_doc(name, versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`, `None` if no resource serves that group.
pub fn group(reg: &Registry, name: &str) -> Option<Value> {
    let groups = groups(reg);
    let versions = groups.get(name)?;
    let mut doc = group_doc(name, versions);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

/// The short names and categories of `t`, when it has any, into a discovery entry.
fn add_names(entry: &mut Value, t: &ResourceType) {
    if !t.short_names.is_empty() {
        entry["shortNames"] = json!(t.short_names);
    }
    if !t.categories.is_empty() {
        entry["categories"] = json!(t.categories);
    }
}

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn resource_entries(t: &ResourceType) -> Vec<Value> {
    let mut main = json!({
        "name": t.plural,
        "singularName": t.singular,
        "namespaced": t.namespaced,
        "kind": t.kind,
        "verbs": VERBS,
    });
    add_names(&mut main, t);
    let mut out = vec![main];
    if t.status_subresource {
        out.push(json!({
            "name": format!("{}/status", t.plural),
            "singularName": "",
            "namespaced": t.namespaced,
            "kind": t.kind,
            "verbs": ["get", "patch", "update"],
        }));
    }
    if t.scale.is_some() {
        out.push(json!({
            "name": format!("{}/scale", t.plural),
            "singularName": "",
            "namespaced": t.namespaced,
            "group": "autoscaling",
            "version": "v1",
            "kind": "Scale",
            "verbs": ["get", "patch", "update"],
        }));
    }
    if t.key() == "namespaces" {
        out.push(json!({
            "name": "namespaces/finalize",
            "singularName": "",
            "namespaced": false,
            "kind": "Namespace",
            "verbs": ["update"],
        }));
    }
    out
}

/// `/api/v1` or `/apis/{group}/{version}`.
pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Value {
    let resources: Vec<Value> = reg
        .all()
        .filter(|t| t.group == group && t.serves(version))
        .flat_map(|t| resource_entries(t))
        .collect();
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    })
}

/// Media type of aggregated discovery responses.
pub const AGGREGATED_V2: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether an `Accept` header asks for aggregated discovery (v2).
pub fn wants_aggregated(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| {
        first.contains("as=APIGroupDiscoveryList")
            && first.contains("v=v2")
            && !first.contains("v2beta1")
    }) || accept.split(',').any(|p| {
        p.contains("as=APIGroupDiscoveryList") && p.contains("v=v2") && !p.contains("v2beta1")
    })
}

fn aggregated_resource(t: &ResourceType, version: &str) -> Value {
    let kind = json!({"group": t.group, "version": version, "kind": t.kind});
    let mut subresources = Vec::new();
    if t.status_subresource {
        subresources.push(json!({"subresource": "status", "responseKind": kind, "verbs": ["get", "patch", "update"]}));
    }
    if t.scale.is_some() {
        subresources.push(json!({"subresource": "scale",
            "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "verbs": ["get", "patch", "update"]}));
    }
    let mut r = json!({
        "resource": t.plural,
        "responseKind": kind,
        "scope": if t.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": t.singular,
        "verbs": VERBS,
    });
    add_names(&mut r, t);
    if !subresources.is_empty() {
        r["subresources"] = json!(subresources);
    }
    r
}

/// Aggregated discovery (`apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`) for `/api`
/// (`core = true`) or `/apis`.
pub fn aggregated(reg: &Registry, core: bool) -> Value {
    let mut items = Vec::new();
    if core {
        let resources: Vec<Value> = reg
            .all()
            .filter(|t| t.group.is_empty())
            .map(|t| aggregated_resource(t, "v1"))
            .collect();
        items.push(json!({
            "metadata": {"creationTimestamp": null},
            "versions": [{"version": "v1", "resources": resources, "freshness": "Current"}],
        }));
    } else {
        for (group, versions) in groups(reg) {
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = reg
                        .all()
                        .filter(|t| t.group == group && t.serves(v))
                        .map(|t| aggregated_resource(t, v))
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            items.push(json!({"metadata": {"name": group, "creationTimestamp": null}, "versions": versions}));
        }
    }
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}
