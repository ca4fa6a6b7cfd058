//! The end state: the compared kinds listed, normalised, and diffed.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::PerturbError;

/// A normaliser of your own, applied to each object (as JSON, `apiVersion` and `kind`
/// removed) after the default ones and before the comparison.
pub type Normaliser = Arc<dyn Fn(&mut Value) + Send + Sync>;

/// A filter of your own: objects it returns `true` for are left out of the end state and of
/// the invariants' snapshots.
pub type Exclude = Arc<dyn Fn(&str, &Value) -> bool + Send + Sync>;

/// The namespaces the API server fills itself; their objects are never compared.
const SYSTEM_NAMESPACES: &[&str] = &["kube-system", "kube-public", "kube-node-lease"];

/// Keys whose values are times: replaced by `"<time>"`.
const TIME_KEYS: &[&str] = &[
    "lastTransitionTime",
    "lastUpdateTime",
    "lastHeartbeatTime",
    "lastProbeTime",
    "lastScheduleTime",
];

/// The objects of the compared kinds at one moment, as the API server returned them (system
/// objects and excluded ones left out). Invariants look at one after every settle.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    objects: BTreeMap<String, Vec<Value>>,
}

impl Snapshot {
    /// The objects of `kind` (as the kind's `ApiResource` names it, e.g. `ConfigMap`), in
    /// namespace, then name order. Empty for a kind that is not compared.
    pub fn objects(&self, kind: &str) -> &[Value] {
        self.objects.get(kind).map_or(&[], Vec::as_slice)
    }

    /// The objects of `K`, deserialised.
    pub fn typed<K>(&self) -> Result<Vec<K>, PerturbError>
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned,
    {
        let kind = K::kind(&());
        self.objects(&kind)
            .iter()
            .map(|v| {
                let mut v = v.clone();
                v["apiVersion"] = Value::String(K::api_version(&()).into_owned());
                v["kind"] = Value::String(kind.to_string());
                serde_json::from_value(v).map_err(|source| PerturbError::Json {
                    what: format!("a {kind} of the snapshot"),
                    source,
                })
            })
            .collect()
    }

    /// The kinds in this snapshot.
    pub fn kinds(&self) -> impl Iterator<Item = &str> {
        self.objects.keys().map(String::as_str)
    }
}

/// Lists every compared kind in every namespace with `client`.
pub(crate) async fn snapshot(
    client: &kube::Client,
    kinds: &[ApiResource],
    excludes: &[Exclude],
    run: &str,
) -> Result<Snapshot, PerturbError> {
    let mut objects = BTreeMap::new();
    for resource in kinds {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|source| PerturbError::List {
                run: run.to_owned(),
                kind: resource.kind.clone(),
                source: Box::new(source),
            })?;
        let mut values = Vec::new();
        for item in list.items {
            let mut value = serde_json::to_value(&item).map_err(|source| PerturbError::Json {
                what: format!("a listed {}", resource.kind),
                source,
            })?;
            if let Some(map) = value.as_object_mut() {
                map.remove("apiVersion");
                map.remove("kind");
            }
            if is_system(&resource.kind, &value)
                || excludes.iter().any(|e| e(&resource.kind, &value))
            {
                continue;
            }
            values.push(value);
        }
        values.sort_by_key(|v| {
            (
                v["metadata"]["namespace"].as_str().unwrap_or("").to_owned(),
                v["metadata"]["name"].as_str().unwrap_or("").to_owned(),
            )
        });
        objects.insert(resource.kind.clone(), values);
    }
    Ok(Snapshot { objects })
}

fn is_system(kind: &str, value: &Value) -> bool {
    let meta = &value["metadata"];
    let ns = meta["namespace"].as_str();
    let name = meta["name"].as_str().unwrap_or("");
    ns.is_some_and(|ns| SYSTEM_NAMESPACES.contains(&ns))
        || (kind == "Namespace" && SYSTEM_NAMESPACES.contains(&name))
        || (kind == "ConfigMap" && name == "kube-root-ca.crt")
        || (kind == "ServiceAccount" && name == "default")
}

/// A normalised end state: each object under `Kind namespace/name` (generated names replaced
/// by placeholders), comparable across runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EndState {
    objects: BTreeMap<String, Value>,
}

impl EndState {
    /// The normalised objects by `Kind namespace/name`.
    pub fn objects(&self) -> &BTreeMap<String, Value> {
        &self.objects
    }
}

fn object_key(kind: &str, value: &Value) -> String {
    let meta = &value["metadata"];
    let name = meta["name"].as_str().unwrap_or("?");
    match meta["namespace"].as_str() {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// Normalises a snapshot: drops what differs between two equal runs (uid, resourceVersion,
/// creationTimestamp, managedFields, generation, selfLink; the value of a deletionTimestamp
/// and of condition times; empty lists and maps and nulls, which Kubernetes treats as absent), replaces every uid by the identity of its object (so an owner
/// reference names its owner) and every name made from a `generateName` by
/// `<generateName><n>` (n in the order of the objects' normalised content), then applies
/// `extra`.
pub fn normalise(snapshot: &Snapshot, extra: &[Normaliser]) -> EndState {
    // Every uid, to the identity of its object.
    let mut replacements: HashMap<String, String> = HashMap::new();
    for (kind, values) in &snapshot.objects {
        for v in values {
            if let Some(uid) = v["metadata"]["uid"].as_str() {
                replacements.insert(uid.to_owned(), format!("<uid of {}>", object_key(kind, v)));
            }
        }
    }
    let mut normalised: Vec<(String, Value)> = Vec::new();
    for (kind, values) in &snapshot.objects {
        for v in values {
            let mut v = v.clone();
            if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                for key in [
                    "uid",
                    "resourceVersion",
                    "creationTimestamp",
                    "managedFields",
                    "generation",
                    "selfLink",
                ] {
                    meta.remove(key);
                }
                if meta.contains_key("deletionTimestamp") {
                    meta.insert("deletionTimestamp".into(), Value::String("<set>".into()));
                }
            }
            replace_strings(&mut v, &replacements);
            normalise_times(&mut v);
            for n in extra {
                n(&mut v);
            }
            drop_empty(&mut v);
            normalised.push((kind.clone(), v));
        }
    }
    // Generated names: per kind, namespace and generateName, numbered in content order.
    let mut groups: BTreeMap<(String, String, String), Vec<(String, String)>> = BTreeMap::new();
    for (kind, v) in &normalised {
        let meta = &v["metadata"];
        if let (Some(prefix), Some(name)) = (meta["generateName"].as_str(), meta["name"].as_str())
            && name.starts_with(prefix)
            && name.len() > prefix.len()
        {
            let mut content = v.clone();
            if let Some(m) = content["metadata"].as_object_mut() {
                m.remove("name");
            }
            groups
                .entry((
                    kind.clone(),
                    meta["namespace"].as_str().unwrap_or("").to_owned(),
                    prefix.to_owned(),
                ))
                .or_default()
                .push((content.to_string(), name.to_owned()));
        }
    }
    let mut names: HashMap<String, String> = HashMap::new();
    for ((_, _, prefix), mut members) in groups {
        members.sort();
        for (n, (_, name)) in members.into_iter().enumerate() {
            names.insert(name, format!("{prefix}<{n}>"));
        }
    }
    let mut objects = BTreeMap::new();
    for (kind, mut v) in normalised {
        replace_strings(&mut v, &names);
        let mut key = object_key(&kind, &v);
        // Two objects cannot share a key in one snapshot; keep both if a normaliser made them.
        while objects.contains_key(&key) {
            key.push('\'');
        }
        objects.insert(key, v);
    }
    EndState { objects }
}

fn replace_strings(value: &mut Value, replacements: &HashMap<String, String>) {
    if replacements.is_empty() {
        return;
    }
    match value {
        Value::String(s) => {
            if let Some(r) = replacements.get(s.as_str()) {
                *s = r.clone();
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|i| replace_strings(i, replacements)),
        Value::Object(map) => map
            .values_mut()
            .for_each(|i| replace_strings(i, replacements)),
        _ => {}
    }
}

/// An empty list or map, or a null, means the same as no field at all to Kubernetes
/// (`omitempty`, merge patches): drop such fields, inside out.
fn drop_empty(value: &mut Value) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(drop_empty),
        Value::Object(map) => {
            map.values_mut().for_each(drop_empty);
            map.retain(|_, v| match v {
                Value::Null => false,
                Value::Array(a) => !a.is_empty(),
                Value::Object(o) => !o.is_empty(),
                _ => true,
            });
        }
        _ => {}
    }
}

fn normalise_times(value: &mut Value) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(normalise_times),
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if TIME_KEYS.contains(&k.as_str()) && v.is_string() {
                    *v = Value::String("<time>".into());
                } else {
                    normalise_times(v);
                }
            }
        }
        _ => {}
    }
}

/// One difference between the reference run's end state and a perturbed run's.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The object: `Kind namespace/name`.
    pub object: String,
    /// The JSON pointer of the changed value inside the object (empty: the whole object is
    /// only in one of the two runs).
    pub pointer: String,
    /// The value in the reference run (none: absent there).
    pub reference: Option<Value>,
    /// The value in the perturbed run (none: absent there).
    pub perturbed: Option<Value>,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.reference, &self.perturbed, self.pointer.is_empty()) {
            (None, Some(_), true) => write!(f, "+ {} (only in the perturbed run)", self.object),
            (Some(_), None, true) => write!(f, "- {} (only in the reference run)", self.object),
            (r, p, _) => write!(
                f,
                "~ {} {}: {} -> {}",
                self.object,
                self.pointer,
                show(r.as_ref()),
                show(p.as_ref())
            ),
        }
    }
}

fn show(value: Option<&Value>) -> String {
    match value {
        None => "(absent)".into(),
        Some(v) => {
            let s = v.to_string();
            if s.chars().count() > 200 {
                format!("{}...", s.chars().take(200).collect::<String>())
            } else {
                s
            }
        }
    }
}

/// The differences from `reference` to `perturbed`: objects only in one, then each changed
/// leaf (arrays of different lengths count as one change).
pub fn diff(reference: &EndState, perturbed: &EndState) -> Vec<Change> {
    let mut changes = Vec::new();
    for (key, r) in &reference.objects {
        match perturbed.objects.get(key) {
            None => changes.push(Change {
                object: key.clone(),
                pointer: String::new(),
                reference: Some(r.clone()),
                perturbed: None,
            }),
            Some(p) => diff_value(key, "", r, p, &mut changes),
        }
    }
    for (key, p) in &perturbed.objects {
        if !reference.objects.contains_key(key) {
            changes.push(Change {
                object: key.clone(),
                pointer: String::new(),
                reference: None,
                perturbed: Some(p.clone()),
            });
        }
    }
    changes
}

fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

fn diff_value(object: &str, pointer: &str, r: &Value, p: &Value, out: &mut Vec<Change>) {
    match (r, p) {
        (Value::Object(rm), Value::Object(pm)) => {
            let mut keys: Vec<&String> = rm.keys().chain(pm.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let path = format!("{pointer}/{}", escape(k));
                match (rm.get(k), pm.get(k)) {
                    (Some(a), Some(b)) => diff_value(object, &path, a, b, out),
                    (a, b) => out.push(Change {
                        object: object.to_owned(),
                        pointer: path,
                        reference: a.cloned(),
                        perturbed: b.cloned(),
                    }),
                }
            }
        }
        (Value::Array(ra), Value::Array(pa)) if ra.len() == pa.len() => {
            for (i, (a, b)) in ra.iter().zip(pa).enumerate() {
                diff_value(object, &format!("{pointer}/{i}"), a, b, out);
            }
        }
        _ if r == p => {}
        _ => out.push(Change {
            object: object.to_owned(),
            pointer: pointer.to_owned(),
            reference: Some(r.clone()),
            perturbed: Some(p.clone()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn snap(objects: Vec<(&str, Value)>) -> Snapshot {
        let mut s = Snapshot::default();
        for (k, v) in objects {
            s.objects.entry(k.to_owned()).or_default().push(v);
        }
        s
    }

    #[test]
    fn normalises_uids_generated_names_and_times() {
        let a = snap(vec![
            (
                "Parent",
                json!({"metadata": {"name": "p", "namespace": "d", "uid": "u1",
                "resourceVersion": "5", "creationTimestamp": "x", "generation": 2},
                "status": {"child": "p-abcde",
                "conditions": [{"type": "Ready", "lastTransitionTime": "t1"}]}}),
            ),
            (
                "Child",
                json!({"metadata": {"name": "p-abcde", "generateName": "p-",
                "namespace": "d", "uid": "u2",
                "ownerReferences": [{"name": "p", "uid": "u1"}]}, "data": {"n": "1"}}),
            ),
        ]);
        let b = snap(vec![
            (
                "Parent",
                json!({"metadata": {"name": "p", "namespace": "d", "uid": "u9",
                "resourceVersion": "7", "creationTimestamp": "y", "generation": 3},
                "status": {"child": "p-zzzzz",
                "conditions": [{"type": "Ready", "lastTransitionTime": "t2"}]}}),
            ),
            (
                "Child",
                json!({"metadata": {"name": "p-zzzzz", "generateName": "p-",
                "namespace": "d", "uid": "u8",
                "ownerReferences": [{"name": "p", "uid": "u9"}]}, "data": {"n": "1"}}),
            ),
        ]);
        let (ea, eb) = (normalise(&a, &[]), normalise(&b, &[]));
        assert_eq!(diff(&ea, &eb), vec![]);
        assert!(ea.objects().contains_key("Child d/p-<0>"));
        assert_eq!(
            ea.objects()["Child d/p-<0>"]["metadata"]["ownerReferences"][0]["uid"],
            json!("<uid of Parent d/p>")
        );
    }

    #[test]
    fn diffs_added_removed_and_changed() {
        let a = normalise(
            &snap(vec![
                (
                    "CM",
                    json!({"metadata": {"name": "x", "namespace": "d"}, "data": {"t": "7"}}),
                ),
                ("CM", json!({"metadata": {"name": "y", "namespace": "d"}})),
            ]),
            &[],
        );
        let b = normalise(
            &snap(vec![
                (
                    "CM",
                    json!({"metadata": {"name": "x", "namespace": "d"}, "data": {"t": "10"}}),
                ),
                ("CM", json!({"metadata": {"name": "z", "namespace": "d"}})),
            ]),
            &[],
        );
        let lines: Vec<String> = diff(&a, &b).iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            vec![
                "~ CM d/x /data/t: \"7\" -> \"10\"",
                "- CM d/y (only in the reference run)",
                "+ CM d/z (only in the perturbed run)",
            ]
        );
    }

    #[test]
    fn empty_lists_and_maps_are_absent() {
        let a = snap(vec![(
            "Node",
            json!({"metadata": {"name": "n", "labels": {}}, "spec": {"taints": []}}),
        )]);
        let b = snap(vec![(
            "Node",
            json!({"metadata": {"name": "n"}, "spec": {}}),
        )]);
        assert_eq!(diff(&normalise(&a, &[]), &normalise(&b, &[])), vec![]);
    }

    #[test]
    fn extra_normalisers_apply() {
        let s = snap(vec![(
            "CM",
            json!({"metadata": {"name": "x", "namespace": "d"}, "data": {"at": "now"}}),
        )]);
        let drop_at: Normaliser = Arc::new(|v: &mut Value| {
            if let Some(d) = v["data"].as_object_mut() {
                d.remove("at");
            }
        });
        let e = normalise(&s, &[drop_at]);
        assert_eq!(
            e.objects()["CM d/x"],
            json!({"metadata": {"name": "x", "namespace": "d"}})
        );
    }
}
