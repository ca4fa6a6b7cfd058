//! The `metadata.managedFields` entries: reading and writing them, and [`record_update`], the
//! `Update` ownership that every create, update and patch records.

use serde_json::{Map, Value, json};

use crate::patch::fields::{FieldDiff, FieldSet, fields_v1_contains, fields_v1_of_object};
use crate::patch::strategy::MergeStrategy;

/// One `managedFields` entry, its field set parsed.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) manager: String,
    pub(super) operation: String,
    pub(super) api_version: String,
    pub(super) time: Option<String>,
    pub(super) subresource: Option<String>,
    pub(super) fields: FieldSet,
}

impl Entry {
    pub(super) fn is(&self, manager: &str, operation: &str, subresource: Option<&str>) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
    }

    pub(super) fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), json!(self.manager));
        m.insert("operation".into(), json!(self.operation));
        m.insert("apiVersion".into(), json!(self.api_version));
        if let Some(t) = &self.time {
            m.insert("time".into(), json!(t));
        }
        m.insert("fieldsType".into(), json!("FieldsV1"));
        m.insert("fieldsV1".into(), self.fields.to_fields_v1());
        if let Some(s) = &self.subresource {
            m.insert("subresource".into(), json!(s));
        }
        Value::Object(m)
    }
}

/// The entries of an object's `metadata.managedFields`.
pub(super) fn parse_entries(object: Option<&Value>) -> Vec<Entry> {
    parse_entry_list(object.and_then(|o| o.pointer("/metadata/managedFields")))
}

/// The entries of a `managedFields` list (an entry without `operation` is dropped).
fn parse_entry_list(list: Option<&Value>) -> Vec<Entry> {
    let Some(list) = list.and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|e| {
            let s = |k: &str| e.get(k).and_then(Value::as_str).map(str::to_string);
            Some(Entry {
                manager: s("manager").unwrap_or_default(),
                operation: s("operation")?,
                api_version: s("apiVersion").unwrap_or_default(),
                time: s("time"),
                subresource: s("subresource").filter(|s| !s.is_empty()),
                fields: FieldSet::from_fields_v1(e.get("fieldsV1").unwrap_or(&Value::Null)),
            })
        })
        .collect()
}

/// Writes the non-empty entries to `metadata.managedFields` (removed when none is left).
pub(super) fn write_entries(object: &mut Value, entries: &[Entry]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(Entry::to_value)
        .collect();
    if let Value::Object(map) = object {
        let meta = map
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(meta) = meta {
            if list.is_empty() {
                meta.remove("managedFields");
            } else {
                meta.insert("managedFields".into(), Value::Array(list));
            }
        }
    }
}

/// Parameters of [`record_update`].
#[derive(Debug, Clone, Copy)]
pub struct UpdateOptions<'a> {
    /// The writer (`fieldManager` query parameter, or derived from the user agent).
    pub manager: &'a str,
    /// Timestamp recorded in the entry (RFC 3339).
    pub now: &'a str,
    /// List merge rules of the kind.
    pub strategy: &'a MergeStrategy,
    /// `Some("status")` for writes to the status subresource.
    pub subresource: Option<&'a str>,
}

/// Records `Update` ownership for an ordinary write (create: `old` is `None`; update, patch)
/// and returns `new` with `metadata.managedFields` rewritten.
///
/// The entries are taken from `old`, unless the client sent a different `managedFields` list in
/// `new` (as on the real server, a client may reset them; `[]` clears them). The writer's entry
/// gains every field whose value it changed; other entries lose those fields; every entry loses
/// fields that no longer exist. An entry left empty is dropped. When ownership does not change
/// (the writer already owns every field it changed), the entries are kept byte for byte, `time`
/// included. As on the real server, an update of an object without entries records none (only
/// creates and applies start tracking).
pub fn record_update(old: Option<&Value>, new: &Value, opts: &UpdateOptions<'_>) -> Value {
    record_update_owned(old, new.clone(), opts)
}

/// [`record_update`] taking the new object by value (saves a deep copy per write).
pub fn record_update_owned(old: Option<&Value>, new: Value, opts: &UpdateOptions<'_>) -> Value {
    let mut out = new;
    let old_mf = old.and_then(|o| o.pointer("/metadata/managedFields"));
    let sent = out
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .and_then(|m| m.remove("managedFields"));
    // A client may send its own managedFields (e.g. `[]` to reset them); otherwise keep the old.
    let client_override = sent.is_some() && sent.as_ref() != old_mf;
    let client_reset = client_override && matches!(&sent, Some(Value::Array(a)) if a.is_empty());
    let source: Option<Value> = if client_override || sent.is_some() {
        // Either the client's own list, or an identical copy of the old one (clients send back
        // what they read): no need to copy the old list.
        sent
    } else {
        old_mf.cloned()
    };
    if old.is_none() && source.is_none() && !client_reset {
        // A plain create: one entry owning everything, encoded straight from the object.
        let fields = fields_v1_of_object(&out, opts.strategy);
        if fields.as_object().is_some_and(|m| !m.is_empty()) {
            let mut entry = Map::new();
            entry.insert("manager".into(), json!(opts.manager));
            entry.insert("operation".into(), json!("Update"));
            let api_version = out.get("apiVersion").cloned().unwrap_or(json!(""));
            entry.insert("apiVersion".into(), api_version);
            entry.insert("time".into(), json!(opts.now));
            entry.insert("fieldsType".into(), json!("FieldsV1"));
            entry.insert("fieldsV1".into(), fields);
            if let Some(sub) = opts.subresource {
                entry.insert("subresource".into(), json!(sub));
            }
            if let Some(Value::Object(meta)) = out.get_mut("metadata") {
                meta.insert(
                    "managedFields".into(),
                    Value::Array(vec![Value::Object(entry)]),
                );
            }
        }
        return out;
    }
    if old.is_some()
        && source
            .as_ref()
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
    {
        // As upstream's skip-non-applied manager: an update of an object nobody owns anything
        // of (created owning nothing, or its entries reset) is not tracked.
        return out;
    }
    let diff = match old {
        Some(o) => FieldDiff::between(o, &out, opts.strategy),
        None => FieldDiff::created(&out, opts.strategy),
    };
    let FieldDiff { changed, removed } = diff;
    if client_reset {
        return out;
    }
    if (changed.is_empty() && removed.is_empty())
        || ownership_unchanged(source.as_ref(), &changed, &removed, opts)
    {
        // Nothing changes ownership (the writer already owns every changed field and nobody
        // owns a removed one): the entries stay byte for byte, no re-encoding per write.
        if let (Some(Value::Object(meta)), Some(mf)) = (out.get_mut("metadata"), source) {
            meta.insert("managedFields".into(), mf);
        }
        return out;
    }
    let mut entries = parse_entry_list(source.as_ref());
    let mine = |e: &Entry| e.is(opts.manager, "Update", opts.subresource);
    for e in entries.iter_mut() {
        if !removed.is_empty() {
            e.fields.retain(|p| !removed.contains(p));
        }
        if !mine(e) {
            e.fields.retain(|p| !changed.contains(p));
        }
    }
    let api_version = out
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if !changed.is_empty() {
        match entries.iter_mut().find(|e| mine(e)) {
            Some(e) => {
                e.fields = e.fields.union(&changed);
                e.time = Some(opts.now.to_string());
                e.api_version = api_version;
            }
            None => entries.push(Entry {
                manager: opts.manager.to_string(),
                operation: "Update".into(),
                api_version,
                time: Some(opts.now.to_string()),
                subresource: opts.subresource.map(str::to_string),
                fields: changed,
            }),
        }
    }
    write_entries(&mut out, &entries);
    out
}

/// Checks on the raw FieldsV1 entries whether a write leaves every entry as it is.
fn ownership_unchanged(
    source: Option<&Value>,
    changed: &FieldSet,
    removed: &FieldSet,
    opts: &UpdateOptions<'_>,
) -> bool {
    let Some(list) = source.and_then(Value::as_array) else {
        return false;
    };
    let mut found_mine = false;
    for e in list {
        let s = |k: &str| e.get(k).and_then(Value::as_str);
        let fields = e.get("fieldsV1").unwrap_or(&Value::Null);
        let is_mine = s("manager") == Some(opts.manager)
            && s("operation") == Some("Update")
            && s("subresource").filter(|x| !x.is_empty()) == opts.subresource;
        if removed.iter().any(|p| fields_v1_contains(fields, p)) {
            return false;
        }
        if is_mine {
            found_mine = true;
            if !changed.iter().all(|p| fields_v1_contains(fields, p)) {
                return false;
            }
        } else if changed.iter().any(|p| fields_v1_contains(fields, p)) {
            return false;
        }
    }
    found_mine || changed.is_empty()
}
