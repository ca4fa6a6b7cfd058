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

mod managed;
#[cfg(test)]
mod tests;

use serde_json::{Map, Value, json};

use super::fields::{FieldSet, SERVER_METADATA, display_path, remove_at, value_at};
use super::join_path;
use super::strategy::{ListType, MergeStrategy};

use managed::{Entry, parse_entries, write_entries};
pub use managed::{UpdateOptions, record_update, record_update_owned};

/// One field owned by another manager whose value the apply would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The manager that owns the field.
    pub manager: String,
    /// The apiVersion recorded in that manager's entry.
    pub api_version: String,
    /// The field in the API server's notation, e.g. `.spec.replicas`.
    pub field: String,
    /// The operation of that manager's entry (`Apply` or `Update`).
    pub operation: String,
}

impl Conflict {
    /// The manager as the real server names it in conflict messages: `"alice"` for an
    /// applier, `"kubectl" using v1` for an updater.
    pub fn manager_text(&self) -> String {
        if self.operation == "Update" {
            format!("{:?} using {}", self.manager, self.api_version)
        } else {
            format!("{:?}", self.manager)
        }
    }
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
        msg.push_str(&format!("conflict with {}: {}", c.manager_text(), c.field));
        return msg;
    }
    let mut managers: Vec<String> = Vec::new();
    for c in conflicts {
        if !managers.contains(&c.manager_text()) {
            managers.push(c.manager_text());
        }
    }
    for (i, m) in managers.iter().enumerate() {
        if i > 0 {
            msg.push('\n');
        }
        msg.push_str(&format!("conflicts with {m}:"));
        for c in conflicts.iter().filter(|c| c.manager_text() == *m) {
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
                        operation: entries[*idx].operation.clone(),
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

fn merge_applied(
    target: &mut Value,
    applied: &Value,
    path: &str,
    strategy: &MergeStrategy,
) -> Result<(), ApplyError> {
    match applied {
        Value::Object(_) if strategy.is_atomic_map(path) => {
            // An atomic map or struct (a label selector) is replaced as a whole.
            *target = applied.clone();
            Ok(())
        }
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
                let child = join_path(path, k);
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
            match strategy.field_list_type(path) {
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
                        let Some(elem) = strategy.field_element(path, item, keys) else {
                            return Err(ApplyError::Invalid(format!(
                                "{path}: list item {item} is missing its key field {:?}",
                                keys.first().map(String::as_str).unwrap_or_default()
                            )));
                        };
                        let pos = list.iter().position(|t| {
                            strategy.field_element(path, t, keys).as_deref() == Some(elem.as_str())
                        });
                        match pos {
                            Some(i) if strategy.is_atomic_map(path) => list[i] = item.clone(),
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
