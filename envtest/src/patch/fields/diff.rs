//! [`FieldDiff`]: the member paths a write added, changed or removed, computed by walking the
//! old and new object side by side, as structured-merge-diff's `Compare` does for an `Update`.

use serde_json::{Map, Value};

use super::{FieldPath, FieldSet, tracked_metadata};
use crate::patch::strategy::{ListType, MergeStrategy};

/// What a write changed, in field-set terms (structured-merge-diff's comparison):
///
/// - `changed` holds the nodes of `new` that `old` lacks (**added**: fields, maps, lists and
///   list items, each with everything below it) and the leaves whose value differs
///   (**modified**: scalars, `null`, atomic lists and maps);
/// - `removed` holds the nodes of `old` that `new` lacks, with everything below them.
///
/// A map or list present on both sides is no member itself (only what changed below it is).
/// Nodes the kind's zero value always has ([`MergeStrategy::zero_present`]: the non-pointer
/// structs of a built-in type, e.g. a Deployment's `spec.template`) count as present on both
/// sides, so they are never added or removed: a create owns `f:spec` only through its fields,
/// while a new `labels` map is owned itself (`f:labels: {.: {}, f:app: {}}`). Equal subtrees are
/// skipped without allocating, so small updates of big objects stay cheap.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldDiff {
    /// Paths added or changed by the write.
    pub changed: FieldSet,
    /// Paths that no longer exist.
    pub removed: FieldSet,
}

/// How a value takes part in the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Compared as a whole: scalars, `null`, atomic lists and maps.
    Leaf,
    /// A map whose fields are members of their own.
    Map,
    /// A set or map list whose items are members of their own.
    List,
}

fn shape(value: &Value, path: &str, strategy: &MergeStrategy) -> Shape {
    match value {
        Value::Object(_) if strategy.is_atomic_map(path) => Shape::Leaf,
        Value::Object(_) => Shape::Map,
        Value::Array(items) => match strategy.field_list_type(path) {
            ListType::Atomic => Shape::Leaf,
            ListType::Set => Shape::List,
            ListType::Map(keys) => {
                if items
                    .iter()
                    .all(|i| strategy.field_element(path, i, keys).is_some())
                {
                    Shape::List
                } else {
                    // An item without its keys cannot be addressed: the list is one leaf.
                    Shape::Leaf
                }
            }
        },
        _ => Shape::Leaf,
    }
}

static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);

impl FieldDiff {
    /// Compares two versions of an object (top-level `apiVersion`/`kind`, `metadata` itself and
    /// server-maintained metadata are not tracked).
    pub fn between(old: &Value, new: &Value, strategy: &MergeStrategy) -> FieldDiff {
        let mut diff = FieldDiff::default();
        let om = old.as_object().unwrap_or(&EMPTY);
        let nm = new.as_object().unwrap_or(&EMPTY);
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
                let mo = o.and_then(Value::as_object).unwrap_or(&EMPTY);
                let mn = n.and_then(Value::as_object).unwrap_or(&EMPTY);
                prefix.push("f:metadata".to_string());
                for mk in union_keys(mo, mn) {
                    if !tracked_metadata(mk) || mo.get(mk) == mn.get(mk) {
                        continue;
                    }
                    prefix.push(format!("f:{mk}"));
                    let path = format!("metadata.{mk}");
                    diff.compare(mo.get(mk), mn.get(mk), &mut prefix, &path, strategy);
                    prefix.pop();
                }
                prefix.pop();
                continue;
            }
            prefix.push(format!("f:{key}"));
            diff.compare(o, n, &mut prefix, key, strategy);
            prefix.pop();
        }
        diff
    }

    /// The fields a create sets: the comparison with an object that has none.
    pub fn created(new: &Value, strategy: &MergeStrategy) -> FieldDiff {
        FieldDiff::between(&Value::Null, new, strategy)
    }

    /// Compares the node at `prefix` (dotted `path`) whose parent is present on both sides.
    fn compare(
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
        let zero = strategy.zero_present(path);
        match (old, new) {
            (None, Some(n)) if !zero => nodes(n, prefix, path, strategy, &mut self.changed),
            (Some(o), None) if !zero => nodes(o, prefix, path, strategy, &mut self.removed),
            _ => {
                let o = old.unwrap_or(&Value::Null);
                let n = new.unwrap_or(&Value::Null);
                self.compare_present(o, n, prefix, path, strategy);
            }
        }
    }

    /// Compares a node present on both sides (`null` for a side where only the zero value has
    /// it).
    fn compare_present(
        &mut self,
        o: &Value,
        n: &Value,
        prefix: &mut FieldPath,
        path: &str,
        strategy: &MergeStrategy,
    ) {
        let (so, sn) = (shape(o, path, strategy), shape(n, path, strategy));
        let container = |s: Shape| s != Shape::Leaf;
        // `null` stands for an empty container of the other side's shape.
        let (so, sn) = match (o.is_null(), n.is_null()) {
            (true, false) if container(sn) => (sn, sn),
            (false, true) if container(so) => (so, so),
            _ => (so, sn),
        };
        if so != sn || so == Shape::Leaf {
            if o != n {
                self.changed.insert(prefix.clone());
            }
            if so != sn {
                // A different shape: what was below the old value is gone, what is below
                // the new one is new.
                below(o, so, prefix, path, strategy, &mut self.removed);
                below(n, sn, prefix, path, strategy, &mut self.changed);
            }
            return;
        }
        match so {
            Shape::Map => {
                let om = o.as_object().unwrap_or(&EMPTY);
                let nm = n.as_object().unwrap_or(&EMPTY);
                self.compare_fields(om, nm, prefix, path, strategy);
            }
            Shape::List => {
                let ol: &[Value] = o.as_array().map(Vec::as_slice).unwrap_or_default();
                let nl: &[Value] = n.as_array().map(Vec::as_slice).unwrap_or_default();
                self.compare_items(ol, nl, prefix, path, strategy);
            }
            Shape::Leaf => {}
        }
    }

    fn compare_fields(
        &mut self,
        om: &Map<String, Value>,
        nm: &Map<String, Value>,
        prefix: &mut FieldPath,
        path: &str,
        strategy: &MergeStrategy,
    ) {
        for key in union_keys(om, nm) {
            let (o, n) = (om.get(key), nm.get(key));
            if o == n {
                continue;
            }
            prefix.push(format!("f:{key}"));
            self.compare(o, n, prefix, &format!("{path}.{key}"), strategy);
            prefix.pop();
        }
    }

    fn compare_items(
        &mut self,
        ol: &[Value],
        nl: &[Value],
        prefix: &mut FieldPath,
        path: &str,
        strategy: &MergeStrategy,
    ) {
        let keys = match strategy.field_list_type(path) {
            ListType::Map(keys) => Some(keys),
            _ => None,
        };
        let elem = |item: &Value| match keys {
            Some(keys) => strategy.field_element(path, item, keys),
            None => Some(format!("v:{item}")),
        };
        let old_elems: Vec<Option<String>> = ol.iter().map(elem).collect();
        let new_elems: Vec<Option<String>> = nl.iter().map(elem).collect();
        for (item, e) in nl.iter().zip(&new_elems) {
            let Some(e) = e else { continue };
            let before = old_elems
                .iter()
                .position(|x| x.as_ref() == Some(e))
                .map(|j| &ol[j]);
            prefix.push(e.clone());
            match before {
                None => item_nodes(
                    item,
                    keys.is_some(),
                    prefix,
                    path,
                    strategy,
                    &mut self.changed,
                ),
                Some(before) if keys.is_some() && before != item => {
                    if strategy.is_atomic_map(path) {
                        self.changed.insert(prefix.clone());
                    } else {
                        let om = before.as_object().unwrap_or(&EMPTY);
                        let nm = item.as_object().unwrap_or(&EMPTY);
                        self.compare_fields(om, nm, prefix, path, strategy);
                    }
                }
                Some(_) => {}
            }
            prefix.pop();
        }
        for (item, e) in ol.iter().zip(&old_elems) {
            let Some(e) = e else { continue };
            if !new_elems.iter().any(|x| x.as_ref() == Some(e)) {
                prefix.push(e.clone());
                item_nodes(
                    item,
                    keys.is_some(),
                    prefix,
                    path,
                    strategy,
                    &mut self.removed,
                );
                prefix.pop();
            }
        }
    }
}

/// Inserts the node at `prefix` and every node below it.
fn nodes(value: &Value, prefix: &mut FieldPath, path: &str, s: &MergeStrategy, set: &mut FieldSet) {
    set.insert(prefix.clone());
    below(value, shape(value, path, s), prefix, path, s, set);
}

/// Inserts a list item (`prefix` ends with its element) and, for a map-list item, its fields.
fn item_nodes(
    item: &Value,
    keyed: bool,
    prefix: &mut FieldPath,
    path: &str,
    s: &MergeStrategy,
    set: &mut FieldSet,
) {
    set.insert(prefix.clone());
    if keyed
        && !s.is_atomic_map(path)
        && let Value::Object(m) = item
    {
        for (k, v) in m {
            prefix.push(format!("f:{k}"));
            nodes(v, prefix, &format!("{path}.{k}"), s, set);
            prefix.pop();
        }
    }
}

/// Inserts every node below `value` (not the node itself).
fn below(
    value: &Value,
    shape: Shape,
    prefix: &mut FieldPath,
    path: &str,
    s: &MergeStrategy,
    set: &mut FieldSet,
) {
    match (shape, value) {
        (Shape::Map, Value::Object(m)) => {
            for (k, v) in m {
                prefix.push(format!("f:{k}"));
                nodes(v, prefix, &format!("{path}.{k}"), s, set);
                prefix.pop();
            }
        }
        (Shape::List, Value::Array(items)) => {
            let keys = match s.field_list_type(path) {
                ListType::Map(keys) => Some(keys),
                _ => None,
            };
            for item in items {
                let e = match keys {
                    Some(keys) => s.field_element(path, item, keys),
                    None => Some(format!("v:{item}")),
                };
                if let Some(e) = e {
                    prefix.push(e);
                    item_nodes(item, keys.is_some(), prefix, path, s, set);
                    prefix.pop();
                }
            }
        }
        _ => {}
    }
}

fn union_keys<'a>(a: &'a Map<String, Value>, b: &'a Map<String, Value>) -> Vec<&'a String> {
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys
}
