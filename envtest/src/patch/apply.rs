//! Server-side apply (`application/apply-patch+yaml`) and `Update` ownership tracking.
//!
//! Ownership lives in `metadata.managedFields`: one entry per (manager, operation,
//! subresource) with `operation` `Apply` or `Update`, `apiVersion`, `time`,
//! `fieldsType: FieldsV1` and the [`FieldSet`] in `fieldsV1`.
//!
//! [`server_side_apply`] does, for manager `m`:
//! 1. compute the field set of the applied configuration;
//! 2. **conflicts**: a field in that set that another manager owns and whose current value
//!    differs from the applied one. Without `force` the apply fails with
//!    [`ApplyError::Conflicts`] (409); with `force` the other managers lose those fields.
//!    Applying the same value as another manager is no conflict: both own the field;
//! 3. **removal**: fields `m` applied last time but not now are removed from the object unless
//!    another manager owns them (or something below them);
//! 4. **merge** of the applied configuration into the object: maps recursively, lists by the
//!    [`MergeStrategy`] (map lists by key, sets by value, atomic lists replaced), `null` removes;
//! 5. `m`'s `Apply` entry becomes the new field set, stamped with `now`.
//!
//! [`record_update`] is the counterpart for create/update/patch: the writer's `Update` entry
//! takes every field whose value it changed (other managers lose them), and fields that no
//! longer exist leave every entry. A later apply by another manager then conflicts with them.
//!
//! Simplifications: server-maintained metadata in the applied body (`uid`, `resourceVersion`,
//! `generation`, `creationTimestamp`, `managedFields`, ...) is ignored (the server checks
//! preconditions itself); a manager's own `Update` entry never conflicts with its `Apply`;
//! the schema is not consulted beyond the list strategy (no type-aware conversion).

use serde_json::{Map, Value, json};

use super::fields::{
    FieldDiff, FieldSet, display_path, fields_v1_contains, fields_v1_of_object, key_element,
    remove_at, value_at,
};
use super::strategy::{ListType, MergeStrategy};

/// One field owned by another manager whose value the apply would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The manager that owns the field.
    pub manager: String,
    /// The apiVersion recorded in that manager's entry.
    pub api_version: String,
    /// The field in the API server's notation, e.g. `.spec.replicas`.
    pub field: String,
}

/// A server-side apply that cannot be performed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// Fields owned by other managers would change and `force` was not set (409 Conflict; each
    /// conflict becomes a `FieldManagerConflict` cause).
    #[error("{}", conflict_message(.0))]
    Conflicts(Vec<Conflict>),
    /// The body is not YAML/JSON or not an object (400 BadRequest).
    #[error("{0}")]
    InvalidBody(String),
    /// The applied configuration is not acceptable, e.g. no `apiVersion`/`kind`, a kind that
    /// differs from the object's, a map-list item without its key (422 Invalid).
    #[error("{0}")]
    Invalid(String),
}

impl ApplyError {
    /// The HTTP status code the API server answers with.
    pub fn status_code(&self) -> u16 {
        match self {
            Self::Conflicts(_) => 409,
            Self::InvalidBody(_) => 400,
            Self::Invalid(_) => 422,
        }
    }
}

fn conflict_message(conflicts: &[Conflict]) -> String {
    let n = conflicts.len();
    let mut msg = format!(
        "Apply failed with {n} conflict{}: ",
        if n == 1 { "" } else { "s" }
    );
    if let [c] = conflicts {
        msg.push_str(&format!(
            "conflict with {:?} using {}: {}",
            c.manager, c.api_version, c.field
        ));
        return msg;
    }
    let mut managers: Vec<(&str, &str)> = Vec::new();
    for c in conflicts {
        if !managers.contains(&(c.manager.as_str(), c.api_version.as_str())) {
            managers.push((&c.manager, &c.api_version));
        }
    }
    for (i, (m, v)) in managers.iter().enumerate() {
        if i > 0 {
            msg.push('\n');
        }
        msg.push_str(&format!("conflicts with {m:?} using {v}:"));
        for c in conflicts.iter().filter(|c| c.manager == *m) {
            msg.push_str(&format!("\n- {}", c.field));
        }
    }
    msg
}

/// Parameters of one apply.
#[derive(Debug, Clone, Copy)]
pub struct ApplyOptions<'a> {
    /// The `fieldManager` query parameter (required by the API for apply).
    pub manager: &'a str,
    /// The `force` query parameter: take conflicting fields instead of failing.
    pub force: bool,
    /// Timestamp recorded in the entry (RFC 3339, e.g. `2024-01-01T00:00:00Z`).
    pub now: &'a str,
    /// List merge rules of the kind.
    pub strategy: &'a MergeStrategy,
    /// `Some("status")` when applying to the status subresource.
    pub subresource: Option<&'a str>,
}

/// Parses an apply body: YAML (JSON is YAML too) that must be a map.
pub fn parse_apply_body(body: &[u8]) -> Result<Value, ApplyError> {
    // kube-rs and client-go send JSON; try the fast parser first.
    let trimmed = body.trim_ascii_start();
    let json = if trimmed.starts_with(b"{") {
        serde_json::from_slice::<Value>(trimmed).ok()
    } else {
        None
    };
    let value: Value = match json {
        Some(v) => v,
        None => serde_saphyr::from_slice(body)
            .map_err(|e| ApplyError::InvalidBody(format!("error decoding YAML: {e}")))?,
    };
    if !value.is_object() {
        return Err(ApplyError::InvalidBody(
            "apply patch must be a YAML or JSON object".into(),
        ));
    }
    Ok(value)
}

#[derive(Debug, Clone)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: Option<String>,
    subresource: Option<String>,
    fields: FieldSet,
}

impl Entry {
    fn is(&self, manager: &str, operation: &str, subresource: Option<&str>) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
    }

    fn to_value(&self) -> Value {
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

fn parse_entries(object: Option<&Value>) -> Vec<Entry> {
    parse_entry_list(object.and_then(|o| o.pointer("/metadata/managedFields")))
}

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

fn write_entries(object: &mut Value, entries: &[Entry]) {
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

const SERVER_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// Applies `applied` for `opts.manager` to `current` (`None`: the object does not exist yet and
/// is created from the applied configuration). Returns the new object with
/// `metadata.managedFields` updated. See the module docs for the algorithm.
pub fn server_side_apply(
    current: Option<&Value>,
    applied: &Value,
    opts: &ApplyOptions<'_>,
) -> Result<Value, ApplyError> {
    let Value::Object(applied_map) = applied else {
        return Err(ApplyError::InvalidBody(
            "apply patch must be a YAML or JSON object".into(),
        ));
    };
    let api_version = applied_map
        .get("apiVersion")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ApplyError::Invalid("apiVersion must be set in an apply patch".into()))?;
    let kind = applied_map
        .get("kind")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ApplyError::Invalid("kind must be set in an apply patch".into()))?;
    if let Some(cur_kind) = current.and_then(|c| c.get("kind")).and_then(Value::as_str)
        && cur_kind != kind
    {
        return Err(ApplyError::Invalid(format!(
            "apply patch kind {kind:?} does not match the object's kind {cur_kind:?}"
        )));
    }
    if opts.manager.is_empty() {
        return Err(ApplyError::Invalid(
            "PATCH, application/apply-patch+yaml requires fieldManager to be set".into(),
        ));
    }
    let mut entries = parse_entries(current);
    let new_set = FieldSet::of_object(applied, opts.strategy);

    // Conflicts with other managers.
    let mut conflicts = Vec::new();
    if let Some(cur) = current {
        for (idx, e) in entries.iter().enumerate() {
            if e.manager == opts.manager {
                continue;
            }
            for path in new_set.intersection(&e.fields).iter() {
                let leaf = path.last().is_some_and(|l| l.starts_with("f:"));
                if !leaf {
                    continue;
                }
                if let (Some(a), Some(b)) = (value_at(cur, path), value_at(applied, path))
                    && a != b
                {
                    conflicts.push((idx, path.clone()));
                }
            }
        }
    }
    if !conflicts.is_empty() {
        if !opts.force {
            return Err(ApplyError::Conflicts(
                conflicts
                    .iter()
                    .map(|(idx, path)| Conflict {
                        manager: entries[*idx].manager.clone(),
                        api_version: entries[*idx].api_version.clone(),
                        field: display_path(path),
                    })
                    .collect(),
            ));
        }
        for (idx, path) in &conflicts {
            entries[*idx].fields.remove(path);
        }
    }

    let mine = |e: &Entry| e.is(opts.manager, "Apply", opts.subresource);
    let previous = entries
        .iter()
        .find(|e| mine(e))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let mut object = current.cloned().unwrap_or_else(|| json!({}));
    for path in previous.difference(&new_set).iter() {
        let owned_elsewhere = entries
            .iter()
            .filter(|e| !mine(e))
            .any(|e| e.fields.contains_prefix(path));
        if !owned_elsewhere {
            remove_at(&mut object, path);
        }
    }
    merge_applied(&mut object, applied, "", opts.strategy)?;

    match entries.iter_mut().find(|e| mine(e)) {
        Some(e) => {
            e.fields = new_set;
            e.time = Some(opts.now.to_string());
            e.api_version = api_version.to_string();
        }
        None => entries.push(Entry {
            manager: opts.manager.to_string(),
            operation: "Apply".into(),
            api_version: api_version.to_string(),
            time: Some(opts.now.to_string()),
            subresource: opts.subresource.map(str::to_string),
            fields: new_set,
        }),
    }
    write_entries(&mut object, &entries);
    Ok(object)
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn merge_applied(
    target: &mut Value,
    applied: &Value,
    path: &str,
    strategy: &MergeStrategy,
) -> Result<(), ApplyError> {
    match applied {
        Value::Object(am) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            let Value::Object(tm) = target else {
                // Made an object just above.
                return Ok(());
            };
            for (k, v) in am {
                if path == "metadata" && SERVER_METADATA.contains(&k.as_str()) {
                    continue;
                }
                let child = join(path, k);
                match v {
                    Value::Null => {
                        tm.remove(k);
                    }
                    Value::Object(_) | Value::Array(_) => {
                        let t = tm.entry(k.clone()).or_insert(Value::Null);
                        merge_applied(t, v, &child, strategy)?;
                    }
                    scalar => {
                        tm.insert(k.clone(), scalar.clone());
                    }
                }
            }
            Ok(())
        }
        Value::Array(items) => {
            let mut list = match target.take() {
                Value::Array(l) => l,
                _ => Vec::new(),
            };
            match strategy.list_type(path) {
                ListType::Atomic => list = items.clone(),
                ListType::Set => {
                    for item in items {
                        if !list.contains(item) {
                            list.push(item.clone());
                        }
                    }
                }
                ListType::Map(keys) => {
                    for item in items {
                        let Some(elem) = key_element(item, keys) else {
                            return Err(ApplyError::Invalid(format!(
                                "{path}: list item {item} is missing its key field {:?}",
                                keys.first().map(String::as_str).unwrap_or_default()
                            )));
                        };
                        let pos = list
                            .iter()
                            .position(|t| key_element(t, keys).as_deref() == Some(elem.as_str()));
                        match pos {
                            Some(i) => merge_applied(&mut list[i], item, path, strategy)?,
                            None => {
                                let mut fresh = Value::Null;
                                merge_applied(&mut fresh, item, path, strategy)?;
                                list.push(fresh);
                            }
                        }
                    }
                }
            }
            *target = Value::Array(list);
            Ok(())
        }
        scalar => {
            *target = scalar.clone();
            Ok(())
        }
    }
}

/// Shapes an apply body for the endpoint it was sent to, for resources **with a status
/// subresource** (the real server's field-reset strategies): the main resource ignores
/// `status`; `/status` keeps only `apiVersion`, `kind`, `metadata.name`/`namespace` and `status`.
/// Call it before [`server_side_apply`] so ownership is recorded only for what is stored.
pub fn scope_to_subresource(applied: &Value, subresource: Option<&str>) -> Value {
    let Value::Object(map) = applied else {
        return applied.clone();
    };
    match subresource {
        None => {
            let mut out = map.clone();
            out.remove("status");
            Value::Object(out)
        }
        Some(_) => {
            let mut out = Map::new();
            for key in ["apiVersion", "kind", "status"] {
                if let Some(v) = map.get(key) {
                    out.insert(key.to_string(), v.clone());
                }
            }
            if let Some(Value::Object(meta)) = map.get("metadata") {
                let kept: Map<String, Value> = meta
                    .iter()
                    .filter(|(k, _)| k.as_str() == "name" || k.as_str() == "namespace")
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                out.insert("metadata".into(), Value::Object(kept));
            }
            Value::Object(out)
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
/// included.
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
    let diff = match old {
        Some(o) => FieldDiff::between(o, &out, opts.strategy),
        None => FieldDiff {
            changed: FieldSet::of_object(&out, opts.strategy),
            removed: FieldSet::new(),
        },
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

#[cfg(test)]
mod tests {
    use super::*;

    const T1: &str = "2024-01-01T00:00:00Z";
    const T2: &str = "2024-01-01T00:01:00Z";

    fn opts<'a>(manager: &'a str, force: bool, s: &'a MergeStrategy) -> ApplyOptions<'a> {
        ApplyOptions {
            manager,
            force,
            now: T1,
            strategy: s,
            subresource: None,
        }
    }

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}, "data": data})
    }

    fn managers(obj: &Value) -> Vec<(String, String)> {
        obj["metadata"]["managedFields"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|e| {
                        (
                            e["manager"].as_str().unwrap_or_default().to_string(),
                            e["operation"].as_str().unwrap_or_default().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn create_records_apply_entry() {
        let s = MergeStrategy::builtin("v1", "ConfigMap").unwrap();
        let out =
            server_side_apply(None, &cm(json!({"a": "1"})), &opts("alice", false, &s)).unwrap();
        assert_eq!(out["data"], json!({"a": "1"}));
        assert_eq!(out["metadata"]["name"], "c");
        let mf = &out["metadata"]["managedFields"][0];
        assert_eq!(mf["manager"], "alice");
        assert_eq!(mf["operation"], "Apply");
        assert_eq!(mf["apiVersion"], "v1");
        assert_eq!(mf["time"], T1);
        assert_eq!(mf["fieldsType"], "FieldsV1");
        assert_eq!(mf["fieldsV1"], json!({"f:data": {"f:a": {}}}));
    }

    #[test]
    fn conflicting_apply_fails_without_force_and_succeeds_with_it() {
        let s = MergeStrategy::builtin("v1", "ConfigMap").unwrap();
        let obj = server_side_apply(
            None,
            &cm(json!({"a": "1", "b": "x"})),
            &opts("alice", false, &s),
        )
        .unwrap();
        let err = server_side_apply(Some(&obj), &cm(json!({"a": "2"})), &opts("bob", false, &s))
            .unwrap_err();
        assert_eq!(err.status_code(), 409);
        let ApplyError::Conflicts(cs) = &err else {
            panic!("expected conflicts, got {err}");
        };
        assert_eq!(
            cs,
            &vec![Conflict {
                manager: "alice".into(),
                api_version: "v1".into(),
                field: ".data.a".into()
            }]
        );
        assert_eq!(
            err.to_string(),
            "Apply failed with 1 conflict: conflict with \"alice\" using v1: .data.a"
        );
        // Same value: shared ownership, no conflict.
        let shared =
            server_side_apply(Some(&obj), &cm(json!({"a": "1"})), &opts("bob", false, &s)).unwrap();
        assert_eq!(managers(&shared).len(), 2);
        // Force: bob takes `a`.
        let forced =
            server_side_apply(Some(&obj), &cm(json!({"a": "2"})), &opts("bob", true, &s)).unwrap();
        assert_eq!(forced["data"], json!({"a": "2", "b": "x"}));
        let mf = forced["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(mf[0]["manager"], "alice");
        assert_eq!(mf[0]["fieldsV1"], json!({"f:data": {"f:b": {}}}));
        assert_eq!(mf[1]["manager"], "bob");
        assert_eq!(mf[1]["fieldsV1"], json!({"f:data": {"f:a": {}}}));
    }

    #[test]
    fn multiple_conflicts_message() {
        let s = MergeStrategy::builtin("v1", "ConfigMap").unwrap();
        let obj = server_side_apply(
            None,
            &cm(json!({"a": "1", "b": "1"})),
            &opts("alice", false, &s),
        )
        .unwrap();
        let err = server_side_apply(
            Some(&obj),
            &cm(json!({"a": "2", "b": "2"})),
            &opts("bob", false, &s),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Apply failed with 2 conflicts: conflicts with \"alice\" using v1:\n- .data.a\n- .data.b"
        );
    }

    #[test]
    fn dropping_a_field_removes_it_unless_someone_else_owns_it() {
        let s = MergeStrategy::builtin("v1", "ConfigMap").unwrap();
        let obj = server_side_apply(
            None,
            &cm(json!({"a": "1", "b": "2", "c": "3"})),
            &opts("alice", false, &s),
        )
        .unwrap();
        // bob co-owns c (same value).
        let obj =
            server_side_apply(Some(&obj), &cm(json!({"c": "3"})), &opts("bob", false, &s)).unwrap();
        // alice drops b and c.
        let obj = server_side_apply(
            Some(&obj),
            &cm(json!({"a": "1"})),
            &opts("alice", false, &s),
        )
        .unwrap();
        assert_eq!(obj["data"], json!({"a": "1", "c": "3"}));
        // bob drops c: now nobody owns it.
        let obj = server_side_apply(
            Some(&obj),
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": {"x": "y"}}}),
            &opts("bob", false, &s),
        )
        .unwrap();
        assert_eq!(obj["data"], json!({"a": "1"}));
        assert_eq!(obj["metadata"]["labels"], json!({"x": "y"}));
    }

    #[test]
    fn map_lists_and_sets_merge_per_manager() {
        let s = MergeStrategy::builtin("v1", "Pod").unwrap();
        let pod = |constraints: Value, fin: Value| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "finalizers": fin},
                "spec": {"topologySpreadConstraints": constraints}})
        };
        let obj = server_side_apply(
            None,
            &pod(
                json!([{"topologyKey": "a", "whenUnsatisfiable": "DoNotSchedule"}]),
                json!(["x"]),
            ),
            &opts("alice", false, &s),
        )
        .unwrap();
        let obj = server_side_apply(
            Some(&obj),
            &pod(
                json!([{"topologyKey": "b", "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 1}]),
                json!(["y"]),
            ),
            &opts("bob", false, &s),
        )
        .unwrap();
        assert_eq!(
            obj["spec"]["topologySpreadConstraints"],
            json!([{"topologyKey": "a", "whenUnsatisfiable": "DoNotSchedule"},
                {"topologyKey": "b", "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 1}])
        );
        assert_eq!(obj["metadata"]["finalizers"], json!(["x", "y"]));
        // alice drops her constraint and finalizer; bob's stay.
        let obj = server_side_apply(
            Some(&obj),
            &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}),
            &opts("alice", false, &s),
        )
        .unwrap();
        assert_eq!(
            obj["spec"]["topologySpreadConstraints"],
            json!([{"topologyKey": "b", "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 1}])
        );
        assert_eq!(obj["metadata"]["finalizers"], json!(["y"]));
        assert_eq!(
            managers(&obj),
            vec![("bob".to_string(), "Apply".to_string())]
        );
        // conflict inside a map-list item
        let err = server_side_apply(
            Some(&obj),
            &pod(
                json!([{"topologyKey": "b", "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 2}]),
                json!([]),
            ),
            &opts("carol", false, &s),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains(
                ".spec.topologySpreadConstraints[topologyKey=\"b\",whenUnsatisfiable=\"ScheduleAnyway\"].maxSkew"
            ),
            "{err}"
        );
        // Node taints are atomic: a second manager applying its own list conflicts on the
        // whole list.
        let node = MergeStrategy::builtin("v1", "Node").unwrap();
        let tainted = |key: &str| {
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
                "spec": {"taints": [{"key": key, "effect": "NoSchedule"}]}})
        };
        let n = server_side_apply(None, &tainted("a"), &opts("alice", false, &node)).unwrap();
        let err =
            server_side_apply(Some(&n), &tainted("b"), &opts("bob", false, &node)).unwrap_err();
        assert!(err.to_string().contains(".spec.taints"), "{err}");
    }

    #[test]
    fn update_ownership_makes_apply_conflict() {
        let s = MergeStrategy::builtin("v1", "ConfigMap").unwrap();
        let uo = |m: &'static str, now: &'static str| UpdateOptions {
            manager: m,
            now,
            strategy: &s,
            subresource: None,
        };
        let created = record_update(None, &cm(json!({"a": "1"})), &uo("kubectl-create", T1));
        assert_eq!(
            managers(&created),
            vec![("kubectl-create".to_string(), "Update".to_string())]
        );
        let err = server_side_apply(
            Some(&created),
            &cm(json!({"a": "2"})),
            &opts("applier", false, &s),
        )
        .unwrap_err();
        assert!(err.to_string().contains("kubectl-create"), "{err}");
        // controller changes a -> takes it from kubectl-create, whose entry disappears.
        let mut next = created.clone();
        next["data"]["a"] = json!("3");
        next["data"]["b"] = json!("new");
        let updated = record_update(Some(&created), &next, &uo("controller", T2));
        assert_eq!(
            managers(&updated),
            vec![("controller".to_string(), "Update".to_string())]
        );
        assert_eq!(
            updated["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {"f:a": {}, "f:b": {}}})
        );
        assert_eq!(updated["metadata"]["managedFields"][0]["time"], T2);
        // removing a field drops it from every entry; a no-op write changes nothing.
        let mut next = updated.clone();
        next["data"].as_object_mut().unwrap().remove("b");
        let after = record_update(Some(&updated), &next, &uo("other", T2));
        assert_eq!(
            after["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {"f:a": {}}})
        );
        assert_eq!(managers(&after).len(), 1);
        // client reset
        let mut reset = after.clone();
        reset["metadata"]["managedFields"] = json!([]);
        let cleared = record_update(Some(&after), &reset, &uo("x", T2));
        assert!(cleared["metadata"].get("managedFields").is_none());
    }

    #[test]
    fn unchanged_ownership_keeps_entries_verbatim() {
        let s = MergeStrategy::builtin("v1", "Node").unwrap();
        let uo = |m: &'static str, now: &'static str| UpdateOptions {
            manager: m,
            now,
            strategy: &s,
            subresource: Some("status"),
        };
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
            "status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "a"}]}});
        let first = record_update(None, &node, &uo("kubelet", T1));
        let mut beat = first.clone();
        beat["status"]["conditions"][0]["lastHeartbeatTime"] = json!("b");
        let second = record_update(Some(&first), &beat, &uo("kubelet", T2));
        assert_eq!(
            second["metadata"]["managedFields"],
            first["metadata"]["managedFields"]
        );
        assert_eq!(second["status"]["conditions"][0]["lastHeartbeatTime"], "b");
        // Another writer changing the same field takes it over.
        let mut other = second.clone();
        other["status"]["conditions"][0]["status"] = json!("False");
        let third = record_update(Some(&second), &other, &uo("node-controller", T2));
        let mf = third["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(mf.len(), 2);
        assert_eq!(mf[1]["manager"], "node-controller");
        assert_eq!(mf[1]["subresource"], "status");
        assert_eq!(
            mf[1]["fieldsV1"],
            json!({"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {"f:status": {}}}}})
        );
        assert!(
            !FieldSet::from_fields_v1(&mf[0]["fieldsV1"])
                .iter()
                .any(|p| p.last().map(String::as_str) == Some("f:status") && p.len() == 4)
        );
    }

    #[test]
    fn scoping_apply_bodies_to_subresources() {
        let body = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n", "labels": {"a": "b"}},
            "spec": {"unschedulable": true}, "status": {"phase": "Running"}});
        assert_eq!(
            scope_to_subresource(&body, None),
            json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": "n", "labels": {"a": "b"}}, "spec": {"unschedulable": true}})
        );
        assert_eq!(
            scope_to_subresource(&body, Some("status")),
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
                "status": {"phase": "Running"}})
        );
        assert_eq!(scope_to_subresource(&json!([1]), None), json!([1]));
    }

    #[test]
    fn invalid_applies() {
        let s = MergeStrategy::atomic();
        let o = opts("m", false, &s);
        assert_eq!(
            server_side_apply(None, &json!({"kind": "ConfigMap"}), &o)
                .unwrap_err()
                .status_code(),
            422
        );
        assert_eq!(
            server_side_apply(None, &json!([1]), &o)
                .unwrap_err()
                .status_code(),
            400
        );
        let existing = cm(json!({}));
        let err = server_side_apply(
            Some(&existing),
            &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c"}}),
            &o,
        )
        .unwrap_err();
        assert!(err.to_string().contains("does not match"), "{err}");
        let err = server_side_apply(None, &cm(json!({})), &opts("", false, &s)).unwrap_err();
        assert!(err.to_string().contains("fieldManager"), "{err}");
        let pod = MergeStrategy::builtin("v1", "Pod").unwrap();
        let err = server_side_apply(
            None,
            &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"topologySpreadConstraints": [{"whenUnsatisfiable": "DoNotSchedule"}]}}),
            &opts("m", false, &pod),
        )
        .unwrap_err();
        assert_eq!(err.status_code(), 422);
    }

    #[test]
    fn yaml_and_json_bodies() {
        let v = parse_apply_body(
            b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: \"1\"\n",
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}})
        );
        let v = parse_apply_body(br#"{"apiVersion":"v1","kind":"ConfigMap"}"#).unwrap();
        assert_eq!(v["kind"], "ConfigMap");
        assert_eq!(
            parse_apply_body(b"- a\n- b\n").unwrap_err().status_code(),
            400
        );
        assert_eq!(parse_apply_body(b"a: [\n").unwrap_err().status_code(), 400);
    }

    #[test]
    fn server_metadata_in_apply_body_is_ignored() {
        let s = MergeStrategy::atomic();
        let current = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "uid": "u1", "resourceVersion": "5"}});
        let out = server_side_apply(
            Some(&current),
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "uid": "evil", "resourceVersion": "1"}, "data": {"k": "v"}}),
            &opts("m", false, &s),
        )
        .unwrap();
        assert_eq!(out["metadata"]["uid"], "u1");
        assert_eq!(out["metadata"]["resourceVersion"], "5");
        assert_eq!(out["data"]["k"], "v");
    }
}
