//! Strategic merge patch (`application/strategic-merge-patch+json`) for built-in kinds.
//!
//! Maps merge recursively and `null` deletes a key, as in a JSON merge patch. Lists follow the
//! kind's [`MergeStrategy`]:
//!
//! * **map lists** (merge keys, e.g. containers by `name`): each patch item is merged into the
//!   target item with the same key values, or appended when there is none; target items the
//!   patch does not mention stay;
//! * **sets** (e.g. `metadata.finalizers`): patch values are added once, in order;
//! * **atomic lists**: replaced.
//!
//! Directives: `$patch: replace` (in a map: replace the map with the rest of the patch map; as a
//! list element `{"$patch": "replace"}`: replace the list with the other elements), `$patch:
//! delete` (in a map: delete the field; in a map-list item: delete the target item with that
//! key), `$patch: merge` (the default), `$deleteFromPrimitiveList/<field>: [values]`,
//! `$retainKeys: [keys]` (drop every other key of the result map), `$setElementOrder/<field>`
//! (items it names come in its order, server-only items keep their place relative to the server
//! order, as upstream's `normalizeElementOrder`; without it the patch list is the order, so
//! items new to the server come first, as upstream: patching `[b]` into `[a]` gives `[b, a]`).

use serde_json::{Map, Value};

use super::strategy::{ListType, MergeStrategy};
use super::{PatchError, join_path};

/// Applies a strategic merge patch to a copy of `target` using `strategy` for lists.
pub fn strategic_merge_patch(
    target: &Value,
    patch: &Value,
    strategy: &MergeStrategy,
) -> Result<Value, PatchError> {
    let Value::Object(patch_map) = patch else {
        return Err(PatchError::InvalidBody(
            "strategic merge patch must be a JSON object".into(),
        ));
    };
    let empty = Map::new();
    let target_map = target.as_object().unwrap_or(&empty);
    match merge_map(target_map, patch_map, "", strategy)? {
        Some(m) => Ok(Value::Object(m)),
        None => Err(PatchError::Unprocessable(
            "$patch: delete at the top level would delete the object".into(),
        )),
    }
}

/// `v` as Go's `%v` prints a decoded JSON value: strings bare, maps `map[k:v ...]` with
/// sorted keys, lists `[a b]`, null `<nil>`.
fn go_format(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::String(s) => s.clone(),
        Value::Bool(_) | Value::Number(_) => v.to_string(),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(go_format).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(m) => format!(
            "map[{}]",
            m.iter()
                .map(|(k, v)| format!("{k}:{}", go_format(v)))
                .collect::<Vec<_>>()
                .join(" ")
        ),
    }
}

/// Merges `patch` into `target`; `None` means "delete this map" (`$patch: delete`).
fn merge_map(
    target: &Map<String, Value>,
    patch: &Map<String, Value>,
    path: &str,
    strategy: &MergeStrategy,
) -> Result<Option<Map<String, Value>>, PatchError> {
    let mut out = match patch.get("$patch") {
        None => target.clone(),
        Some(Value::String(d)) if d == "merge" => target.clone(),
        Some(Value::String(d)) if d == "delete" => return Ok(None),
        Some(Value::String(d)) if d == "replace" => Map::new(),
        Some(other) => {
            // As upstream (a 500, in Go's formatting of the directive and of the patch map).
            return Err(PatchError::Internal(format!(
                "unknown patch type: {} in map: {}",
                go_format(other),
                go_format(&Value::Object(patch.clone()))
            )));
        }
    };
    for (key, value) in patch {
        if key == "$patch" || key == "$retainKeys" || key.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            let Value::Array(remove) = value else {
                return Err(PatchError::Unprocessable(format!(
                    "{key} at {} must be a list",
                    display_path(path)
                )));
            };
            if let Some(Value::Array(items)) = out.get_mut(field) {
                items.retain(|v| !remove.contains(v));
            }
            continue;
        }
        if key.starts_with('$') {
            return Err(PatchError::Unprocessable(format!(
                "unknown directive {key} at {}",
                display_path(path)
            )));
        }
        let child_path = join_path(path, key);
        match value {
            Value::Null => {
                out.remove(key);
            }
            Value::Object(pm) => {
                let empty = Map::new();
                let tm = out.get(key).and_then(Value::as_object).unwrap_or(&empty);
                match merge_map(tm, pm, &child_path, strategy)? {
                    Some(m) => out.insert(key.clone(), Value::Object(m)),
                    None => out.remove(key),
                };
            }
            Value::Array(pl) => {
                let tl = out
                    .get(key)
                    .and_then(Value::as_array)
                    .map_or(&[][..], Vec::as_slice);
                let merged = merge_list(tl, pl, &child_path, strategy)?;
                out.insert(key.clone(), Value::Array(merged));
            }
            scalar => {
                out.insert(key.clone(), scalar.clone());
            }
        }
    }
    for (key, order) in patch {
        let Some(field) = key.strip_prefix("$setElementOrder/") else {
            continue;
        };
        let (Value::Array(order), Some(Value::Array(result))) = (order, out.get(field)) else {
            continue;
        };
        let server: &[Value] = match target.get(field) {
            Some(Value::Array(l)) => l,
            _ => &[],
        };
        let list_type = strategy.list_type(&join_path(path, field));
        if let Some(sorted) = apply_element_order(result, order, server, list_type) {
            out.insert(field.to_string(), Value::Array(sorted));
        }
    }
    if let Some(retain) = patch.get("$retainKeys") {
        let Value::Array(keys) = retain else {
            return Err(PatchError::Unprocessable(format!(
                "$retainKeys at {} must be a list of strings",
                display_path(path)
            )));
        };
        let keys: Vec<&str> = keys.iter().filter_map(Value::as_str).collect();
        out.retain(|k, _| keys.contains(&k.as_str()));
    }
    Ok(Some(out))
}

fn display_path(path: &str) -> &str {
    if path.is_empty() { "<root>" } else { path }
}

fn is_replace_directive(v: &Value) -> bool {
    v.as_object()
        .is_some_and(|m| m.len() == 1 && m.get("$patch").and_then(Value::as_str) == Some("replace"))
}

/// Strips directives (and `null`s) from a new list item by merging it into nothing.
fn fresh(item: &Value, path: &str, strategy: &MergeStrategy) -> Result<Option<Value>, PatchError> {
    match item {
        Value::Object(m) => Ok(merge_map(&Map::new(), m, path, strategy)?.map(Value::Object)),
        other => Ok(Some(other.clone())),
    }
}

fn merge_list(
    target: &[Value],
    patch: &[Value],
    path: &str,
    strategy: &MergeStrategy,
) -> Result<Vec<Value>, PatchError> {
    let list_type = strategy.list_type(path);
    if patch.iter().any(is_replace_directive) {
        return replace_list(patch, path, strategy);
    }
    match list_type {
        ListType::Atomic => replace_list(patch, path, strategy),
        ListType::Set => {
            let mut out = target.to_vec();
            for item in patch {
                if !out.contains(item) {
                    out.push(item.clone());
                }
            }
            Ok(out)
        }
        ListType::Map(keys) => {
            // `MergeStrategy` never stores a map list without keys; be safe anyway.
            let Some(first_key) = keys.first() else {
                return replace_list(patch, path, strategy);
            };
            let mut out = target.to_vec();
            for item in patch {
                let Value::Object(pm) = item else {
                    return Err(PatchError::Unprocessable(format!(
                        "{path}: list items must be objects with merge key {first_key:?}, got {item}"
                    )));
                };
                if !pm.contains_key(first_key) {
                    return Err(PatchError::Unprocessable(format!(
                        "map: {item} does not contain declared merge key: {first_key} (at {path})"
                    )));
                }
                let same_key = |t: &Value| keys.iter().all(|k| t.get(k) == pm.get(k));
                if pm.get("$patch").and_then(Value::as_str) == Some("delete") {
                    out.retain(|t| !same_key(t));
                    continue;
                }
                match out.iter().position(same_key) {
                    Some(i) => {
                        let empty = Map::new();
                        let tm = out[i].as_object().unwrap_or(&empty);
                        match merge_map(tm, pm, path, strategy)? {
                            Some(m) => out[i] = Value::Object(m),
                            None => {
                                out.remove(i);
                            }
                        }
                    }
                    None => {
                        if let Some(v) = fresh(item, path, strategy)? {
                            out.push(v);
                        }
                    }
                }
            }
            // Upstream then orders the result by the patch (its `normalizeElementOrder` with
            // the patch list as the order): items the server does not have yet come before
            // the server-only ones, unless `$setElementOrder` (applied later) says otherwise.
            Ok(
                apply_element_order(&out, patch, target, &ListType::Map(keys.clone()))
                    .unwrap_or(out),
            )
        }
    }
}

/// `$setElementOrder`: items named in `order` come in that order; items only on the server
/// keep their place relative to the server order (upstream's `normalizeElementOrder`).
/// `None` for atomic lists (no identity, order untouched).
fn apply_element_order(
    result: &[Value],
    order: &[Value],
    server: &[Value],
    list_type: &ListType,
) -> Option<Vec<Value>> {
    let identity = |v: &Value| -> Option<Value> {
        match list_type {
            ListType::Atomic => None,
            ListType::Set => Some(v.clone()),
            ListType::Map(keys) => Some(Value::Array(
                keys.iter()
                    .map(|k| v.get(k).cloned().unwrap_or(Value::Null))
                    .collect(),
            )),
        }
    };
    if *list_type == ListType::Atomic {
        return None;
    }
    let order_ids: Vec<Option<Value>> = order.iter().map(&identity).collect();
    let server_ids: Vec<Option<Value>> = server.iter().map(&identity).collect();
    let index_in = |ids: &[Option<Value>], v: &Value| {
        let id = identity(v);
        ids.iter().position(|x| *x == id)
    };
    let (mut from_patch, mut server_only): (Vec<&Value>, Vec<&Value>) = result
        .iter()
        .partition(|v| index_in(&order_ids, v).is_some());
    from_patch.sort_by_key(|v| index_in(&order_ids, v));
    server_only.sort_by_key(|v| index_in(&server_ids, v).unwrap_or(usize::MAX));
    let mut out = Vec::with_capacity(result.len());
    let (mut i, mut j) = (0, 0);
    while i < server_only.len() || j < from_patch.len() {
        let take_server = if j >= from_patch.len() {
            true
        } else if i >= server_only.len() {
            false
        } else {
            match (
                index_in(&server_ids, server_only[i]),
                index_in(&server_ids, from_patch[j]),
            ) {
                (Some(a), Some(b)) => a < b,
                _ => false,
            }
        };
        if take_server {
            out.push(server_only[i].clone());
            i += 1;
        } else {
            out.push(from_patch[j].clone());
            j += 1;
        }
    }
    Some(out)
}

/// The patch list (without `{"$patch": "replace"}` markers) replaces the target list.
fn replace_list(
    patch: &[Value],
    path: &str,
    strategy: &MergeStrategy,
) -> Result<Vec<Value>, PatchError> {
    let mut out = Vec::with_capacity(patch.len());
    for item in patch.iter().filter(|v| !is_replace_directive(v)) {
        if let Some(v) = fresh(item, path, strategy)? {
            out.push(v);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node() -> MergeStrategy {
        MergeStrategy::builtin("v1", "Node").unwrap()
    }
    fn pod() -> MergeStrategy {
        MergeStrategy::builtin("v1", "Pod").unwrap()
    }

    #[test]
    fn maps_merge_and_null_deletes() {
        let t = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"x": 1}});
        let out = strategic_merge_patch(
            &t,
            &json!({"metadata": {"labels": {"a": null, "c": "3"}}, "spec": {"y": 2}}),
            &node(),
        )
        .unwrap();
        assert_eq!(
            out,
            json!({"metadata": {"labels": {"b": "2", "c": "3"}}, "spec": {"x": 1, "y": 2}})
        );
    }

    #[test]
    fn taints_are_atomic() {
        let t = json!({"spec": {"taints": [
            {"key": "a", "effect": "NoSchedule", "value": "1"},
            {"key": "b", "effect": "NoSchedule"}
        ]}});
        let out = strategic_merge_patch(
            &t,
            &json!({"spec": {"taints": [{"key": "c", "effect": "NoSchedule"}]}}),
            &node(),
        )
        .unwrap();
        assert_eq!(
            out["spec"]["taints"],
            json!([{"key": "c", "effect": "NoSchedule"}])
        );
    }

    #[test]
    fn two_key_lists_merge_by_both_keys() {
        let c = |key: &str, when: &str| json!({"topologyKey": key, "whenUnsatisfiable": when});
        let t = json!({"spec": {"topologySpreadConstraints": [
            {"topologyKey": "a", "whenUnsatisfiable": "DoNotSchedule", "maxSkew": 1},
            c("a", "ScheduleAnyway"),
            c("b", "DoNotSchedule")
        ]}});
        let out = strategic_merge_patch(
            &t,
            &json!({"spec": {"topologySpreadConstraints": [
                {"topologyKey": "a", "whenUnsatisfiable": "DoNotSchedule", "maxSkew": 2},
                c("c", "DoNotSchedule"),
                {"topologyKey": "b", "whenUnsatisfiable": "DoNotSchedule", "$patch": "delete"}
            ]}}),
            &pod(),
        )
        .unwrap();
        // Upstream's order: the patch's items in patch order, the server-only a/ScheduleAnyway
        // after a/DoNotSchedule (its server predecessor) but behind the new c.
        assert_eq!(
            out["spec"]["topologySpreadConstraints"],
            json!([
                {"topologyKey": "a", "whenUnsatisfiable": "DoNotSchedule", "maxSkew": 2},
                c("c", "DoNotSchedule"),
                c("a", "ScheduleAnyway")
            ])
        );
    }

    #[test]
    fn conditions_by_type_and_finalizers_as_set() {
        let t = json!({"metadata": {"finalizers": ["a", "b"]},
            "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "DiskPressure", "status": "False"}]}});
        let out = strategic_merge_patch(
            &t,
            &json!({"metadata": {"finalizers": ["b", "c"]},
                "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}),
            &node(),
        )
        .unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "b", "c"]));
        assert_eq!(
            out["status"]["conditions"],
            json!([{"type": "Ready", "status": "True", "reason": "KubeletReady"},
                {"type": "DiskPressure", "status": "False"}])
        );
        let out = strategic_merge_patch(
            &out,
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a", "c"]}}),
            &node(),
        )
        .unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["b"]));
    }

    #[test]
    fn owner_references_by_uid() {
        let t = json!({"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}]}});
        let out = strategic_merge_patch(
            &t,
            &json!({"metadata": {"ownerReferences": [{"uid": "2", "name": "b"}, {"uid": "1", "controller": true}]}}),
            &MergeStrategy::builtin("v1", "ConfigMap").unwrap(),
        )
        .unwrap();
        // In patch order, as upstream.
        assert_eq!(
            out["metadata"]["ownerReferences"],
            json!([{"uid": "2", "name": "b"}, {"uid": "1", "name": "a", "controller": true}])
        );
    }

    #[test]
    fn containers_env_ports_and_atomic_tolerations() {
        let t = json!({"spec": {
            "containers": [{"name": "app", "image": "v1", "env": [{"name": "A", "value": "1"}],
                "ports": [{"containerPort": 80}], "args": ["x", "y"]},
                {"name": "side", "image": "s1"}],
            "tolerations": [{"key": "a", "operator": "Exists"}],
            "volumes": [{"name": "v1", "emptyDir": {}}]
        }});
        let out = strategic_merge_patch(
            &t,
            &json!({"spec": {
                "containers": [{"name": "app", "image": "v2", "env": [{"name": "B", "value": "2"}],
                    "ports": [{"containerPort": 80, "name": "http"}], "args": ["z"]}],
                "tolerations": [{"key": "b", "operator": "Exists"}],
                "volumes": [{"name": "v2", "configMap": {"name": "c"}}]
            }}),
            &pod(),
        )
        .unwrap();
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "app", "image": "v2",
                "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}],
                "ports": [{"containerPort": 80, "name": "http"}], "args": ["z"]},
                {"name": "side", "image": "s1"}])
        );
        assert_eq!(
            out["spec"]["tolerations"],
            json!([{"key": "b", "operator": "Exists"}])
        );
        assert_eq!(
            out["spec"]["volumes"],
            json!([{"name": "v2", "configMap": {"name": "c"}}, {"name": "v1", "emptyDir": {}}])
        );
    }

    #[test]
    fn replace_and_delete_directives() {
        let t = json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}], "podCIDRs": ["10.0.0.0/24"]},
            "metadata": {"labels": {"a": "1", "b": "2"}, "annotations": {"x": "y"}}});
        let out = strategic_merge_patch(
            &t,
            &json!({
                "spec": {"taints": [{"$patch": "replace"}, {"key": "z", "effect": "NoExecute"}],
                    "podCIDRs": [{"$patch": "replace"}]},
                "metadata": {"labels": {"$patch": "replace", "c": "3"}, "annotations": {"$patch": "delete"}}
            }),
            &node(),
        )
        .unwrap();
        assert_eq!(
            out["spec"]["taints"],
            json!([{"key": "z", "effect": "NoExecute"}])
        );
        assert_eq!(out["spec"]["podCIDRs"], json!([]));
        assert_eq!(out["metadata"], json!({"labels": {"c": "3"}}));
    }

    #[test]
    fn retain_keys_and_set_element_order() {
        let t = json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}});
        let out = strategic_merge_patch(
            &t,
            &json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"},
                "$setElementOrder/containers": [{"name": "a"}]}}),
            &MergeStrategy::builtin("apps/v1", "Deployment").unwrap(),
        )
        .unwrap();
        assert_eq!(out, json!({"spec": {"strategy": {"type": "Recreate"}}}));
    }

    #[test]
    fn set_element_order_reorders_like_upstream() {
        let t = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}]},
            "metadata": {"finalizers": ["x", "y", "z"]}});
        let out = strategic_merge_patch(
            &t,
            &json!({"spec": {
                "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}, {"name": "d"}],
                "containers": [{"name": "d", "image": "new"}]},
                "metadata": {"$setElementOrder/finalizers": ["z", "x"]}}),
            &pod(),
        )
        .unwrap();
        // a, b reordered as asked, the new d after them, server-only c keeps its place at the end.
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "b"}, {"name": "a"}, {"name": "d", "image": "new"}, {"name": "c"}])
        );
        // Upstream's merge of the two sorted runs: server-only y (server index 1) precedes z
        // (server index 2), then x follows z as the patch order says.
        assert_eq!(out["metadata"]["finalizers"], json!(["y", "z", "x"]));
    }

    #[test]
    fn errors() {
        let t = json!({"spec": {"topologySpreadConstraints": []}});
        let err = strategic_merge_patch(
            &t,
            &json!({"spec": {"topologySpreadConstraints": [{"whenUnsatisfiable": "DoNotSchedule"}]}}),
            &pod(),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("does not contain declared merge key: topologyKey"),
            "{err}"
        );
        assert_eq!(err.status_code(), 422);
        let err = strategic_merge_patch(&t, &json!({"spec": {"$patch": "explode"}}), &node())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown patch type: explode in map: map[$patch:explode]"
        );
        assert_eq!(err.status_code(), 500);
        let patch = json!({"spec": {"taints": [{"key": "k", "$patch": 3}]}});
        let err = strategic_merge_patch(&t, &patch, &node()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown patch type: 3 in map: map[$patch:3 key:k]"
        );
        let err = strategic_merge_patch(&t, &json!([1]), &node()).unwrap_err();
        assert_eq!(err.status_code(), 400);
        let err = strategic_merge_patch(&t, &json!({"$patch": "delete"}), &node()).unwrap_err();
        assert_eq!(err.status_code(), 422);
        let err = strategic_merge_patch(&t, &json!({"spec": {"$bogus": 1}}), &node()).unwrap_err();
        assert!(err.to_string().contains("$bogus"), "{err}");
    }

    #[test]
    fn new_items_are_stripped_of_directives() {
        let t = json!({"spec": {}});
        let out = strategic_merge_patch(
            &t,
            &json!({"spec": {"containers": [{"name": "a", "env": [{"name": "X", "value": null}],
                "resources": {"$patch": "replace", "limits": {"cpu": "1"}}}]}}),
            &pod(),
        )
        .unwrap();
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "a", "env": [{"name": "X"}], "resources": {"limits": {"cpu": "1"}}}])
        );
    }
}
