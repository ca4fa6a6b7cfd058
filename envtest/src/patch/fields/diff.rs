//! [`FieldDiff`]: the member paths a write changed or removed, computed by walking the old and
//! new object side by side.

use serde_json::{Map, Value};

use super::{FieldPath, FieldSet, key_element, tracked_metadata, value_at, walk};
use crate::patch::strategy::{ListType, MergeStrategy};

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
                    if !tracked_metadata(mk) || mo.get(mk) == mn.get(mk) {
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

    /// Descends into the fields of two maps at `path` whose values differ.
    fn descend_fields(
        &mut self,
        om: &Map<String, Value>,
        nm: &Map<String, Value>,
        prefix: &mut FieldPath,
        path: &str,
        strategy: &MergeStrategy,
    ) {
        for key in union_keys(om, nm) {
            if om.get(key) == nm.get(key) {
                continue;
            }
            prefix.push(format!("f:{key}"));
            let child = format!("{path}.{key}");
            self.descend(om.get(key), nm.get(key), prefix, &child, strategy);
            prefix.pop();
        }
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
            self.descend_fields(om, nm, prefix, path, strategy);
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
                                self.descend_fields(om, m, prefix, path, strategy);
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
