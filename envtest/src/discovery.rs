//! Discovery documents: `/version`, `/api`, `/apis`, `/apis/{group}`, `/api/v1` and
//! `/apis/{group}/{version}` (legacy, non-aggregated discovery).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::resources::kinds::GET_PATCH_UPDATE;
use crate::resources::{Registry, ResourceType};

/// The Kubernetes release whose API the in-process server follows: `/version` reports it (as
/// `v1.37.0-kcr-envtest`), and its behaviour is measured against kube-apiserver of this minor
/// release by the conformance suite.
pub const EMULATED_KUBERNETES_VERSION: &str = "v1.37.0";

/// `/version`.
pub fn version() -> Value {
    let minor = EMULATED_KUBERNETES_VERSION
        .split('.')
        .nth(1)
        .unwrap_or_default();
    json!({
        "major": "1",
        "minor": minor,
        "gitVersion": format!("{EMULATED_KUBERNETES_VERSION}-kcr-envtest"),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.26.0",
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

/// The `storageVersionHash` of `t`: kube-apiserver's `StorageVersionHash`, the first 8 bytes
/// of SHA-256 of `group/version/kind` of the storage version, base64-encoded. events.k8s.io
/// Events are stored as core/v1 Events, and hash as those; CRDs hash as `v1beta1`, the version
/// upstream stores them in.
pub(crate) fn storage_version_hash(t: &ResourceType) -> String {
    let group = if crate::convert::is_events_v1(t) {
        ""
    } else {
        t.group.as_str()
    };
    // CRDs are still stored as apiextensions.k8s.io/v1beta1 upstream.
    let version = if t.key() == "apiextensions.k8s.io/customresourcedefinitions" {
        "v1beta1"
    } else {
        t.storage_version()
    };
    let gvk = format!("{group}/{version}/{}", t.kind);
    let digest = ring::digest::digest(&ring::digest::SHA256, gvk.as_bytes());
    base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        &digest.as_ref()[..8],
    )
}

/// One subresource of `t` as both discovery forms need it: name, response group, version and
/// kind (group and version empty for a kind of `t`'s own API), verbs.
struct Sub {
    name: &'static str,
    group: &'static str,
    version: &'static str,
    kind: String,
    verbs: &'static [&'static str],
}

/// The subresources of `t`, sorted by name as kube-apiserver lists them.
fn subresources(t: &ResourceType) -> Vec<Sub> {
    let own = |name, verbs| Sub {
        name,
        group: "",
        version: "",
        kind: t.kind.clone(),
        verbs,
    };
    let mut out = Vec::new();
    if t.status_subresource {
        out.push(own("status", GET_PATCH_UPDATE));
    }
    if t.scale.is_some() {
        out.push(Sub {
            name: "scale",
            group: "autoscaling",
            version: "v1",
            kind: "Scale".into(),
            verbs: GET_PATCH_UPDATE,
        });
    }
    for s in t.subresources {
        out.push(Sub {
            name: s.name,
            group: s.group,
            version: s.version,
            kind: s.kind.into(),
            verbs: s.verbs,
        });
    }
    out.sort_by_key(|s| s.name);
    out
}

fn resource_entries(t: &ResourceType) -> Vec<Value> {
    let mut main = json!({
        "name": t.plural,
        "singularName": t.singular,
        "namespaced": t.namespaced,
        "kind": t.kind,
        "verbs": t.verbs,
    });
    add_names(&mut main, t);
    // Stored resources have one; computed ones (componentstatuses, not watchable) have none.
    if t.allows("watch") {
        main["storageVersionHash"] = json!(storage_version_hash(t));
    }
    let mut out = vec![main];
    for s in subresources(t) {
        let mut entry = json!({
            "name": format!("{}/{}", t.plural, s.name),
            "singularName": "",
            "namespaced": t.namespaced,
            "kind": s.kind,
            "verbs": s.verbs,
        });
        if !s.group.is_empty() {
            entry["group"] = json!(s.group);
            entry["version"] = json!(s.version);
        }
        out.push(entry);
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

fn aggregated_resource(t: &ResourceType) -> Value {
    // kube-apiserver leaves group and version empty for the resource's own kind.
    let subresources: Vec<Value> = subresources(t)
        .into_iter()
        .map(|s| {
            json!({"subresource": s.name,
                "responseKind": {"group": s.group, "version": s.version, "kind": s.kind},
                "verbs": s.verbs})
        })
        .collect();
    let mut r = json!({
        "resource": t.plural,
        "responseKind": {"group": "", "version": "", "kind": t.kind},
        "scope": if t.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": t.singular,
        "verbs": t.verbs,
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
            .map(|t| aggregated_resource(t))
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
                        .map(|t| aggregated_resource(t))
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
