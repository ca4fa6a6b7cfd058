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

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::strategy::{ListType, MergeStrategy};

/// One path: encoded elements such as `f:spec`, `k:{"name":"app"}`, `v:"finalizer"`.
pub type FieldPath = Vec<String>;

const UNTRACKED_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

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
        if let Value::Object(map) = object {
            for (k, v) in map {
                if k == "apiVersion" || k == "kind" {
                    continue;
                }
                if k == "metadata" {
                    if let Value::Object(meta) = v {
                        let mut prefix = vec!["f:metadata".to_string()];
                        for (mk, mv) in meta {
                            if UNTRACKED_METADATA.contains(&mk.as_str()) {
                                continue;
                            }
                            prefix.push(format!("f:{mk}"));
                            walk(
                                mv,
                                &mut prefix,
                                &format!("metadata.{mk}"),
                                strategy,
                                &mut set,
                            );
                            prefix.pop();
                        }
                    }
                    continue;
                }
                let mut prefix = vec![format!("f:{k}")];
                walk(v, &mut prefix, k, strategy, &mut set);
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
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                prefix.push(format!("f:{k}"));
                walk(v, prefix, &format!("{path}.{k}"), strategy, set);
                prefix.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => match strategy.list_type(path) {
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
                    let Some(elem) = key_element(item, keys) else {
                        // An item without its keys cannot be addressed: own the whole list.
                        set.insert(prefix.clone());
                        continue;
                    };
                    prefix.push(elem);
                    set.insert(prefix.clone());
                    if let Value::Object(m) = item {
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

/// The FieldsV1 JSON of [`FieldSet::of_object`], built directly from the object (no
/// intermediate path set; what a create records).
pub fn fields_v1_of_object(object: &Value, strategy: &MergeStrategy) -> Value {
    let mut root = Map::new();
    if let Value::Object(map) = object {
        for (k, v) in map {
            if k == "apiVersion" || k == "kind" {
                continue;
            }
            if k == "metadata" {
                if let Value::Object(meta) = v {
                    let mut node = Map::new();
                    for (mk, mv) in meta {
                        if UNTRACKED_METADATA.contains(&mk.as_str()) {
                            continue;
                        }
                        v1_walk(
                            mv,
                            &mut node,
                            format!("f:{mk}"),
                            &format!("metadata.{mk}"),
                            strategy,
                        );
                    }
                    if !node.is_empty() {
                        root.insert("f:metadata".into(), Value::Object(node));
                    }
                }
                continue;
            }
            v1_walk(v, &mut root, format!("f:{k}"), k, strategy);
        }
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

/// What a write changed, in field-set terms: `changed` holds the member paths of `new` whose
/// value differs from `old` (leaves) or that `old` lacks (list items, new fields); `removed`
/// holds the member paths of `old` that `new` lacks. Equal subtrees are skipped without
/// allocating, so small updates of big objects stay cheap.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldDiff {
    /// Paths set or changed by the write.
    pub changed: FieldSet,
    /// Paths that no longer exist.
    pub removed: FieldSet,
}

impl FieldDiff {
    /// Compares two versions of an object (same tracking rules as [`FieldSet::of_object`]).
    pub fn between(old: &Value, new: &Value, strategy: &MergeStrategy) -> FieldDiff {
        let mut diff = FieldDiff::default();
        let empty = Map::new();
        let om = old.as_object().unwrap_or(&empty);
        let nm = new.as_object().unwrap_or(&empty);
        let mut prefix = Vec::new();
        for key in union_keys(om, nm) {
            if key == "apiVersion" || key == "kind" {
                continue;
            }
            let (o, n) = (om.get(key), nm.get(key));
            if o == n {
                continue;
            }
            if key == "metadata" {
                let mo = o.and_then(Value::as_object).unwrap_or(&empty);
                let mn = n.and_then(Value::as_object).unwrap_or(&empty);
                prefix.push("f:metadata".to_string());
                for mk in union_keys(mo, mn) {
                    if UNTRACKED_METADATA.contains(&mk.as_str()) || mo.get(mk) == mn.get(mk) {
                        continue;
                    }
                    prefix.push(format!("f:{mk}"));
                    diff.descend(
                        mo.get(mk),
                        mn.get(mk),
                        &mut prefix,
                        &format!("metadata.{mk}"),
                        strategy,
                    );
                    prefix.pop();
                }
                prefix.pop();
                continue;
            }
            prefix.push(format!("f:{key}"));
            diff.descend(o, n, &mut prefix, key, strategy);
            prefix.pop();
        }
        diff
    }

    fn descend(
        &mut self,
        old: Option<&Value>,
        new: Option<&Value>,
        prefix: &mut FieldPath,
        path: &str,
        strategy: &MergeStrategy,
    ) {
        if old == new {
            return;
        }
        if let (Some(Value::Object(om)), Some(Value::Object(nm))) = (old, new)
            && !om.is_empty()
            && !nm.is_empty()
        {
            for key in union_keys(om, nm) {
                if om.get(key) == nm.get(key) {
                    continue;
                }
                prefix.push(format!("f:{key}"));
                self.descend(
                    om.get(key),
                    nm.get(key),
                    prefix,
                    &format!("{path}.{key}"),
                    strategy,
                );
                prefix.pop();
            }
            return;
        }
        if let (Some(Value::Array(ol)), Some(Value::Array(nl))) = (old, new)
            && !ol.is_empty()
            && !nl.is_empty()
        {
            match strategy.list_type(path) {
                ListType::Set => {
                    for item in nl.iter().filter(|i| !ol.contains(i)) {
                        prefix.push(format!("v:{item}"));
                        self.changed.insert(prefix.clone());
                        prefix.pop();
                    }
                    for item in ol.iter().filter(|i| !nl.contains(i)) {
                        prefix.push(format!("v:{item}"));
                        self.removed.insert(prefix.clone());
                        prefix.pop();
                    }
                    return;
                }
                ListType::Map(keys) => {
                    let keyed = |l: &'_ [Value]| -> Option<Vec<String>> {
                        l.iter().map(|i| key_element(i, keys)).collect()
                    };
                    if let (Some(ok), Some(nk)) = (keyed(ol), keyed(nl)) {
                        for (i, k) in nk.iter().enumerate() {
                            let before = ok.iter().position(|x| x == k).map(|j| &ol[j]);
                            prefix.push(k.clone());
                            if before.is_none() {
                                self.changed.insert(prefix.clone());
                            }
                            if let Value::Object(m) = &nl[i] {
                                let empty = Map::new();
                                let om = before.and_then(Value::as_object).unwrap_or(&empty);
                                for key in union_keys(om, m) {
                                    if om.get(key) == m.get(key) {
                                        continue;
                                    }
                                    prefix.push(format!("f:{key}"));
                                    self.descend(
                                        om.get(key),
                                        m.get(key),
                                        prefix,
                                        &format!("{path}.{key}"),
                                        strategy,
                                    );
                                    prefix.pop();
                                }
                            }
                            prefix.pop();
                        }
                        for (j, k) in ok.iter().enumerate() {
                            if !nk.contains(k) {
                                prefix.push(k.clone());
                                let mut gone = FieldSet::new();
                                gone.insert(prefix.clone());
                                if let Value::Object(m) = &ol[j] {
                                    for (key, v) in m {
                                        prefix.push(format!("f:{key}"));
                                        walk(
                                            v,
                                            prefix,
                                            &format!("{path}.{key}"),
                                            strategy,
                                            &mut gone,
                                        );
                                        prefix.pop();
                                    }
                                }
                                self.removed = self.removed.union(&gone);
                                prefix.pop();
                            }
                        }
                        return;
                    }
                }
                ListType::Atomic => {}
            }
        }
        // Differing leaves, atomic lists or shapes: compare the subtrees' member sets.
        let mut old_set = FieldSet::new();
        let mut new_set = FieldSet::new();
        let mut scratch = prefix.clone();
        if let Some(o) = old {
            walk(o, &mut scratch, path, strategy, &mut old_set);
        }
        if let Some(n) = new {
            walk(n, &mut scratch, path, strategy, &mut new_set);
        }
        // `prefix` is non-empty: it ends with this subtree's own element.
        let depth = prefix.len().saturating_sub(1);
        for p in new_set.iter() {
            let rel = &p[depth..];
            let leaf = p.last().is_some_and(|l| l.starts_with("f:"));
            let differs = match old.and_then(|o| value_at_rel(o, rel)) {
                None => true,
                Some(ov) => leaf && new.and_then(|n| value_at_rel(n, rel)) != Some(ov),
            };
            if differs {
                self.changed.insert(p.clone());
            }
        }
        for p in old_set.difference(&new_set).iter() {
            self.removed.insert(p.clone());
        }
    }
}

/// Looks up `rel` (whose first element addresses the subtree root itself) inside `root`.
fn value_at_rel<'a>(root: &'a Value, rel: &[String]) -> Option<&'a Value> {
    value_at(root, rel.get(1..).unwrap_or_default())
}

fn union_keys<'a>(a: &'a Map<String, Value>, b: &'a Map<String, Value>) -> Vec<&'a String> {
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(elems: &[&str]) -> FieldPath {
        elems.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn object_field_set_and_fields_v1_round_trip() {
        let strategy = MergeStrategy::builtin("v1", "Pod").unwrap();
        let obj = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"app": "web"}, "finalizers": ["x"]},
            "spec": {"containers": [{"name": "app", "image": "nginx"}], "tolerations": [{"key": "a"}],
                "nodeSelector": {}}
        });
        let set = FieldSet::of_object(&obj, &strategy);
        let expected: Vec<FieldPath> = vec![
            p(&["f:metadata", "f:finalizers", "v:\"x\""]),
            p(&["f:metadata", "f:labels", "f:app"]),
            p(&["f:spec", "f:containers", "k:{\"name\":\"app\"}"]),
            p(&["f:spec", "f:containers", "k:{\"name\":\"app\"}", "f:image"]),
            p(&["f:spec", "f:containers", "k:{\"name\":\"app\"}", "f:name"]),
            p(&["f:spec", "f:nodeSelector"]),
            p(&["f:spec", "f:tolerations"]),
        ];
        assert_eq!(set.iter().cloned().collect::<Vec<_>>(), expected);
        let v1 = set.to_fields_v1();
        assert_eq!(
            v1,
            json!({
                "f:metadata": {"f:finalizers": {"v:\"x\"": {}}, "f:labels": {"f:app": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {}}},
                    "f:nodeSelector": {}, "f:tolerations": {}}
            })
        );
        assert_eq!(FieldSet::from_fields_v1(&v1), set);
    }

    #[test]
    fn value_lookup_and_removal() {
        let mut obj = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b"}],
            "only": {"one": 1}}, "metadata": {"finalizers": ["f1", "f2"]}});
        let img = p(&["f:spec", "f:containers", "k:{\"name\":\"a\"}", "f:image"]);
        assert_eq!(value_at(&obj, &img), Some(&json!("x")));
        assert_eq!(
            value_at(&obj, &p(&["f:metadata", "f:finalizers", "v:\"f2\""])),
            Some(&json!("f2"))
        );
        assert_eq!(value_at(&obj, &p(&["f:spec", "f:nope"])), None);
        remove_at(&mut obj, &img);
        remove_at(
            &mut obj,
            &p(&["f:spec", "f:containers", "k:{\"name\":\"b\"}"]),
        );
        remove_at(&mut obj, &p(&["f:metadata", "f:finalizers", "v:\"f1\""]));
        remove_at(&mut obj, &p(&["f:spec", "f:only", "f:one"]));
        remove_at(&mut obj, &p(&["f:spec", "f:missing", "f:deep"]));
        assert_eq!(
            obj,
            json!({"spec": {"containers": [{"name": "a"}]}, "metadata": {"finalizers": ["f2"]}})
        );
    }

    fn naive_diff(old: &Value, new: &Value, s: &MergeStrategy) -> FieldDiff {
        let old_set = FieldSet::of_object(old, s);
        let new_set = FieldSet::of_object(new, s);
        let mut changed = FieldSet::new();
        for p in new_set.iter() {
            let leaf = p.last().is_some_and(|l| l.starts_with("f:"));
            let differs = match value_at(old, p) {
                None => true,
                Some(o) => leaf && value_at(new, p) != Some(o),
            };
            if differs {
                changed.insert(p.clone());
            }
        }
        FieldDiff {
            changed,
            removed: old_set.difference(&new_set),
        }
    }

    /// Randomised: the incremental diff equals the one computed from full field sets.
    #[test]
    fn incremental_diff_matches_full_sets() {
        let s = MergeStrategy::builtin("v1", "Node").unwrap();
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut cur = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n", "labels": {"a": "1"}, "finalizers": ["f1"]},
            "spec": {"taints": [{"key": "k0", "effect": "NoSchedule"}], "podCIDRs": ["10.0.0.0/24"]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "capacity": {"cpu": "1"}}});
        for round in 0..400 {
            let mut new = cur.clone();
            match next(9) {
                0 => new["metadata"]["labels"][format!("l{}", next(4))] = json!(next(3).to_string()),
                1 => {
                    if let Some(m) = new["metadata"]["labels"].as_object_mut() {
                        let k = format!("l{}", next(4));
                        m.remove(&k);
                    }
                }
                2 => new["metadata"]["finalizers"] = json!((0..next(3)).map(|i| format!("f{i}")).collect::<Vec<_>>()),
                3 => new["spec"]["taints"] = json!((0..next(3)).map(|i| json!({"key": format!("k{i}"), "effect": "NoSchedule", "value": next(2).to_string()})).collect::<Vec<_>>()),
                4 => new["status"]["conditions"][0]["status"] = json!(if next(2) == 0 { "True" } else { "False" }),
                5 => new["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}, {"type": format!("T{}", next(3)), "status": "False"}]),
                6 => new["status"]["capacity"] = if next(2) == 0 { json!({"cpu": next(4).to_string()}) } else { json!({}) },
                7 => new["spec"]["podCIDRs"] = json!([format!("10.0.{}.0/24", next(3))]),
                _ => new["spec"]["unschedulable"] = if next(2) == 0 { json!(true) } else { Value::Null },
            }
            let fast = FieldDiff::between(&cur, &new, &s);
            let slow = naive_diff(&cur, &new, &s);
            assert_eq!(fast, slow, "round {round}: {cur} -> {new}");
            cur = new;
        }
    }

    #[test]
    fn display_paths_and_prefixes() {
        let path = p(&[
            "f:spec",
            "f:taints",
            "k:{\"effect\":\"NoSchedule\",\"key\":\"a\"}",
            "f:value",
        ]);
        assert_eq!(
            display_path(&path),
            ".spec.taints[effect=\"NoSchedule\",key=\"a\"].value"
        );
        assert_eq!(
            display_path(&p(&["f:metadata", "f:finalizers", "v:\"x\""])),
            ".metadata.finalizers[=\"x\"]"
        );
        let mut set = FieldSet::new();
        set.insert(path.clone());
        assert!(set.contains_prefix(&p(&["f:spec"])));
        assert!(set.contains_prefix(&path));
        assert!(!set.contains_prefix(&p(&["f:status"])));
        assert_eq!(
            key_element(
                &json!({"key": "a", "effect": "NoSchedule"}),
                &["key".into(), "effect".into()]
            ),
            Some("k:{\"effect\":\"NoSchedule\",\"key\":\"a\"}".to_string())
        );
        assert_eq!(key_element(&json!({"effect": "x"}), &["key".into()]), None);
    }
}
