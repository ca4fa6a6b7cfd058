//! Field sets in the `FieldsV1` format of `metadata.managedFields`.
//!
//! A [`FieldPath`] is a list of encoded path elements, exactly as they appear as keys in
//! FieldsV1: `f:<field name>` (a map field), `k:<json object of key values>` (an item of a map
//! list, keys in sorted order), `v:<json value>` (an item of a set list) and `i:<index>`.
//! A [`FieldSet`] is a set of member paths; [`FieldSet::to_fields_v1`] /
//! [`FieldSet::from_fields_v1`] convert to and from the nested JSON form (a member that also has
//! members below it carries a `"."` key, as on the real server).
//!
//! [`FieldSet::of_object`] computes the fields an object sets: every leaf (scalar, `null`, empty
//! map, atomic list), every map-list and set-list item, descending into maps and map-list items.
//! Server-maintained metadata (`name`, `namespace`, `uid`, `resourceVersion`, `generation`,
//! `creationTimestamp`, `deletionTimestamp`, `deletionGracePeriodSeconds`, `managedFields`,
//! `selfLink`) and the top-level `apiVersion`/`kind` are not tracked.

mod diff;
#[cfg(test)]
mod tests;
mod v1;
pub(crate) mod zero;

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::strategy::{ListType, MergeStrategy};

pub use diff::FieldDiff;
pub use v1::{fields_v1_contains, fields_v1_of_object};

/// One path: encoded elements such as `f:spec`, `k:{"name":"app"}`, `v:"finalizer"`.
pub type FieldPath = Vec<String>;

/// Metadata the server maintains: never owned by a manager, ignored in an apply body.
pub(crate) const SERVER_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// Whether ownership tracks metadata field `key` (not the identity, not server metadata).
fn tracked_metadata(key: &str) -> bool {
    key != "name" && key != "namespace" && !SERVER_METADATA.contains(&key)
}

/// The fields of `object` that ownership tracks, each as `(in_metadata, name, value)`: the
/// top-level fields but `apiVersion`, `kind` and `metadata`, then the tracked metadata fields.
fn tracked_fields(object: &Value) -> impl Iterator<Item = (bool, &String, &Value)> {
    let map = object.as_object();
    let top = map
        .into_iter()
        .flatten()
        .filter(|(k, _)| !matches!(k.as_str(), "apiVersion" | "kind" | "metadata"))
        .map(|(k, v)| (false, k, v));
    let meta = map
        .and_then(|m| m.get("metadata"))
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(k, _)| tracked_metadata(k))
        .map(|(k, v)| (true, k, v));
    top.chain(meta)
}

/// A set of member field paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    paths: BTreeSet<FieldPath>,
}

impl FieldSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the set has no member.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.paths.len()
    }

    /// Whether `path` is a member.
    pub fn contains(&self, path: &FieldPath) -> bool {
        self.paths.contains(path)
    }

    /// Whether `path` or any path below it is a member.
    pub fn contains_prefix(&self, path: &FieldPath) -> bool {
        self.paths
            .range(path.clone()..)
            .next()
            .is_some_and(|p| p.starts_with(path))
    }

    /// Adds a member.
    pub fn insert(&mut self, path: FieldPath) {
        self.paths.insert(path);
    }

    /// Removes a member.
    pub fn remove(&mut self, path: &FieldPath) -> bool {
        self.paths.remove(path)
    }

    /// Keeps the members for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&FieldPath) -> bool) {
        self.paths.retain(|p| keep(p));
    }

    /// The members in order.
    pub fn iter(&self) -> impl Iterator<Item = &FieldPath> {
        self.paths.iter()
    }

    /// Members of `self` that are not in `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        FieldSet {
            paths: self.paths.difference(&other.paths).cloned().collect(),
        }
    }

    /// Members in both.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        FieldSet {
            paths: self.paths.intersection(&other.paths).cloned().collect(),
        }
    }

    /// Members in either.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        FieldSet {
            paths: self.paths.union(&other.paths).cloned().collect(),
        }
    }

    /// The fields `object` sets (see the module docs).
    pub fn of_object(object: &Value, strategy: &MergeStrategy) -> FieldSet {
        let mut set = FieldSet::new();
        for (in_metadata, k, v) in tracked_fields(object) {
            if in_metadata {
                let mut prefix = vec!["f:metadata".to_string(), format!("f:{k}")];
                walk(v, &mut prefix, &format!("metadata.{k}"), strategy, &mut set);
            } else {
                walk(v, &mut vec![format!("f:{k}")], k, strategy, &mut set);
            }
        }
        set
    }

    /// The nested FieldsV1 JSON form.
    pub fn to_fields_v1(&self) -> Value {
        let mut root = Value::Object(Map::new());
        let mut paths = self.paths.iter().peekable();
        while let Some(path) = paths.next() {
            // Sorted order puts a path's descendants right after it: a member with members
            // below it carries the "." marker.
            let has_children = paths.peek().is_some_and(|next| next.starts_with(path));
            let mut node = &mut root;
            for elem in path {
                // Every node created here is an object.
                let Value::Object(map) = node else { break };
                node = map
                    .entry(elem.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
            }
            if has_children && let Value::Object(map) = node {
                map.insert(".".into(), Value::Object(Map::new()));
            }
        }
        root
    }

    /// Parses the nested FieldsV1 JSON form (unknown shapes are ignored).
    pub fn from_fields_v1(value: &Value) -> FieldSet {
        let mut set = FieldSet::new();
        let mut prefix = Vec::new();
        parse_node(value, &mut prefix, &mut set);
        set
    }
}

fn parse_node(value: &Value, prefix: &mut FieldPath, set: &mut FieldSet) {
    let Value::Object(map) = value else {
        return;
    };
    for (k, v) in map {
        if k == "." {
            if !prefix.is_empty() {
                set.insert(prefix.clone());
            }
            continue;
        }
        prefix.push(k.clone());
        match v {
            Value::Object(child) if child.is_empty() => set.insert(prefix.clone()),
            _ => parse_node(v, prefix, set),
        }
        prefix.pop();
    }
}

fn walk(
    value: &Value,
    prefix: &mut FieldPath,
    path: &str,
    strategy: &MergeStrategy,
    set: &mut FieldSet,
) {
    match value {
        Value::Object(map) if !map.is_empty() && !strategy.is_atomic_map(path) => {
            for (k, v) in map {
                prefix.push(format!("f:{k}"));
                walk(v, prefix, &format!("{path}.{k}"), strategy, set);
                prefix.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => match strategy.field_list_type(path) {
            ListType::Atomic => set.insert(prefix.clone()),
            ListType::Set => {
                for item in items {
                    prefix.push(format!("v:{item}"));
                    set.insert(prefix.clone());
                    prefix.pop();
                }
            }
            ListType::Map(keys) => {
                for item in items {
                    let Some(elem) = strategy.field_element(path, item, keys) else {
                        // An item without its keys cannot be addressed: own the whole list.
                        set.insert(prefix.clone());
                        continue;
                    };
                    prefix.push(elem);
                    set.insert(prefix.clone());
                    if !strategy.is_atomic_map(path)
                        && let Value::Object(m) = item
                    {
                        for (k, v) in m {
                            prefix.push(format!("f:{k}"));
                            walk(v, prefix, &format!("{path}.{k}"), strategy, set);
                            prefix.pop();
                        }
                    }
                    prefix.pop();
                }
            }
        },
        _ => set.insert(prefix.clone()),
    }
}

/// The `k:{...}` element of a map-list item (keys sorted), `None` if the first key is missing.
pub fn key_element(item: &Value, keys: &[String]) -> Option<String> {
    let obj = item.as_object()?;
    obj.get(keys.first()?)?;
    let mut sorted: Vec<&String> = keys.iter().filter(|k| obj.contains_key(*k)).collect();
    sorted.sort();
    let mut s = String::from("k:{");
    for (i, k) in sorted.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&Value::String((*k).clone()).to_string());
        s.push(':');
        s.push_str(&obj[k.as_str()].to_string());
    }
    s.push('}');
    Some(s)
}

/// Whether the list item matches an encoded `k:`, `v:` or `i:` element.
fn item_matches(item: &Value, index: usize, elem: &str) -> bool {
    if let Some(k) = elem.strip_prefix("k:") {
        let Ok(Value::Object(keys)) = serde_json::from_str::<Value>(k) else {
            return false;
        };
        keys.iter().all(|(k, v)| item.get(k) == Some(v))
    } else if let Some(v) = elem.strip_prefix("v:") {
        serde_json::from_str::<Value>(v).is_ok_and(|v| &v == item)
    } else if let Some(i) = elem.strip_prefix("i:") {
        i.parse::<usize>().is_ok_and(|i| i == index)
    } else {
        false
    }
}

/// The value at `path` in `object`, if present.
pub fn value_at<'a>(object: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = object;
    for elem in path {
        cur = match elem.strip_prefix("f:") {
            Some(name) => cur.as_object()?.get(name)?,
            None => cur
                .as_array()?
                .iter()
                .enumerate()
                .find(|(i, item)| item_matches(item, *i, elem))
                .map(|(_, item)| item)?,
        };
    }
    Some(cur)
}

/// Removes the value at `path` from `object` (no-op when absent); maps left empty by the
/// removal are removed too.
pub fn remove_at(object: &mut Value, path: &FieldPath) {
    if path.is_empty() {
        return;
    }
    remove_rec(object, path);
}

/// Returns whether `cur` became an empty map after removal.
fn remove_rec(cur: &mut Value, path: &[String]) -> bool {
    let (elem, rest) = (&path[0], &path[1..]);
    if let Some(name) = elem.strip_prefix("f:") {
        let Some(map) = cur.as_object_mut() else {
            return false;
        };
        if rest.is_empty() {
            map.remove(name);
        } else if let Some(child) = map.get_mut(name)
            && remove_rec(child, rest)
        {
            map.remove(name);
        }
        map.is_empty()
    } else {
        let Some(items) = cur.as_array_mut() else {
            return false;
        };
        let Some(pos) = items
            .iter()
            .enumerate()
            .position(|(i, item)| item_matches(item, i, elem))
        else {
            return false;
        };
        if rest.is_empty() {
            items.remove(pos);
        } else {
            remove_rec(&mut items[pos], rest);
        }
        false
    }
}

/// The path in the API server's conflict notation: `.spec.containers[name="app"].image`,
/// `.metadata.finalizers[="x"]`.
pub fn display_path(path: &FieldPath) -> String {
    let mut s = String::new();
    for elem in path {
        if let Some(f) = elem.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(k) = elem.strip_prefix("k:") {
            let parts: Vec<String> = match serde_json::from_str::<Value>(k) {
                Ok(Value::Object(m)) => m.iter().map(|(k, v)| format!("{k}={v}")).collect(),
                _ => vec![k.to_string()],
            };
            s.push('[');
            s.push_str(&parts.join(","));
            s.push(']');
        } else if let Some(v) = elem.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        } else if let Some(i) = elem.strip_prefix("i:") {
            s.push_str(&format!("[{i}]"));
        }
    }
    s
}
