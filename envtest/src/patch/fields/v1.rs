//! FieldsV1 JSON built and read directly, without an intermediate
//! [`FieldSet`](super::FieldSet): the fields of a created object, and membership tests on
//! stored entries.

use serde_json::{Map, Value};

use super::{key_element, tracked_fields};
use crate::patch::strategy::{ListType, MergeStrategy};

/// The FieldsV1 JSON of [`FieldSet::of_object`](super::FieldSet::of_object), built directly
/// from the object (no intermediate path set; what a create records).
pub fn fields_v1_of_object(object: &Value, strategy: &MergeStrategy) -> Value {
    let mut root = Map::new();
    let mut metadata = Map::new();
    for (in_metadata, k, v) in tracked_fields(object) {
        if in_metadata {
            let path = format!("metadata.{k}");
            v1_walk(v, &mut metadata, format!("f:{k}"), &path, strategy);
        } else {
            v1_walk(v, &mut root, format!("f:{k}"), k, strategy);
        }
    }
    if !metadata.is_empty() {
        root.insert("f:metadata".into(), Value::Object(metadata));
    }
    Value::Object(root)
}

fn leaf() -> Value {
    Value::Object(Map::new())
}

/// Merges `add` into `into` (both FieldsV1 nodes): union of members.
fn merge_v1(into: &mut Map<String, Value>, add: Map<String, Value>) {
    for (k, v) in add {
        match (into.get_mut(&k), v) {
            (Some(Value::Object(existing)), Value::Object(new)) => {
                let was_leaf = existing.is_empty();
                let new_leaf = new.is_empty();
                merge_v1(existing, new);
                // A member leaf that gained children keeps its membership as ".".
                if (was_leaf || new_leaf)
                    && existing.len() > usize::from(existing.contains_key("."))
                {
                    existing.insert(".".into(), leaf());
                }
            }
            (_, v) => {
                into.insert(k, v);
            }
        }
    }
}

/// Inserts the fields of `value` at `parent[elem]` (a member leaf is `{}`).
fn v1_walk(
    value: &Value,
    parent: &mut Map<String, Value>,
    elem: String,
    path: &str,
    strategy: &MergeStrategy,
) {
    let node = match value {
        Value::Object(map) if !map.is_empty() => {
            let mut node = Map::new();
            for (k, v) in map {
                v1_walk(
                    v,
                    &mut node,
                    format!("f:{k}"),
                    &format!("{path}.{k}"),
                    strategy,
                );
            }
            node
        }
        Value::Array(items) if !items.is_empty() => match strategy.list_type(path) {
            ListType::Atomic => Map::new(),
            ListType::Set => items
                .iter()
                .map(|item| (format!("v:{item}"), leaf()))
                .collect(),
            ListType::Map(keys) => {
                let mut node = Map::new();
                let mut whole = false;
                for item in items {
                    let Some(key) = key_element(item, keys) else {
                        whole = true;
                        continue;
                    };
                    let mut item_node = Map::new();
                    item_node.insert(".".into(), leaf());
                    if let Value::Object(m) = item {
                        for (f, v) in m {
                            v1_walk(
                                v,
                                &mut item_node,
                                format!("f:{f}"),
                                &format!("{path}.{f}"),
                                strategy,
                            );
                        }
                    }
                    insert_v1(&mut node, key, item_node);
                }
                if whole && !node.is_empty() {
                    node.insert(".".into(), leaf());
                }
                node
            }
        },
        _ => Map::new(),
    };
    insert_v1(parent, elem, node);
}

/// Inserts a node, merging with an existing one (duplicate list keys or values).
fn insert_v1(parent: &mut Map<String, Value>, elem: String, node: Map<String, Value>) {
    if parent.contains_key(&elem) {
        let mut single = Map::new();
        single.insert(elem, Value::Object(node));
        merge_v1(parent, single);
    } else {
        parent.insert(elem, Value::Object(node));
    }
}

/// Whether `path` is a member of a FieldsV1 JSON tree, without parsing the whole tree.
pub fn fields_v1_contains(fields_v1: &Value, path: &[String]) -> bool {
    let mut node = fields_v1;
    for elem in path {
        match node.as_object().and_then(|m| m.get(elem)) {
            Some(child) => node = child,
            None => return false,
        }
    }
    match node.as_object() {
        Some(m) => !path.is_empty() && (m.is_empty() || m.contains_key(".")),
        None => false,
    }
}
