//! Server-side printing: `meta.k8s.io/v1` `Table` responses for `kubectl get`
//! (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`). Columns are NAME, the CRD's
//! `additionalPrinterColumns` or, for a built-in kind, the upstream printer's columns its
//! descriptor names ([`Printer`], functions in [`columns`]; wide ones at priority 1, after
//! AGE), and AGE. Events get upstream's own layout (LAST SEEN, TYPE, REASON, OBJECT, MESSAGE;
//! the rest wide). Built-ins without columns of their own print NAME and AGE.

pub(crate) mod columns;

use serde_json::{Value, json};

use crate::resources::ResourceType;

/// How a built-in kind prints: part of its descriptor (`src/resources/kinds.rs`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Printer {
    /// NAME, these columns, and AGE before the first wide column.
    Columns(fn() -> Vec<Column>),
    /// These columns and nothing else (Events: no NAME column first, no AGE).
    Complete(fn() -> Vec<Column>),
}

/// `PartialObjectMetadata` of an object (metadata only), as `as=PartialObjectMetadata` and
/// Table rows without `includeObject=Object` carry it.
pub(crate) fn partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj["metadata"].clone(),
    })
}

/// Human readable age as kubectl prints it (`45s`, `5m3s`, `3h`, `2d`).
pub fn human_age(created: &str) -> String {
    let Ok(ts) = created.parse::<jiff::Timestamp>() else {
        return "<unknown>".into();
    };
    human_duration(jiff::Timestamp::now().as_second() - ts.as_second())
}

/// A number of seconds as kubectl prints durations (`45s`, `5m3s`, `3h`, `2d`).
pub fn human_duration(secs: i64) -> String {
    let secs = secs.max(0);
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86400);
    if secs < 120 {
        format!("{secs}s")
    } else if m < 10 {
        format!("{m}m{}s", secs % 60)
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        format!("{h}h{}m", m % 60)
    } else if h < 48 {
        format!("{h}h")
    } else if d < 8 {
        format!("{d}d{}h", h % 24)
    } else if d < 730 {
        format!("{d}d")
    } else {
        format!("{}y", d / 365)
    }
}

/// Evaluate a simple JSONPath (`.a.b`, `.a[0].b`, `.a[?(@.type=="Ready")].status`).
pub fn json_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let path = path.trim().trim_start_matches('{').trim_end_matches('}');
    let path = path.strip_prefix('$').unwrap_or(path);
    let mut cur = obj;
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let (field, tail) = r.split_at(end);
            if !field.is_empty() {
                cur = cur.get(field)?;
            }
            rest = tail;
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let (inner, tail) = (&r[..end], &r[end + 1..]);
            if let Some(filter) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                let (key, value) = filter.split_once("==")?;
                let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
                cur = cur.as_array()?.iter().find(|item| {
                    json_path(item, &format!(".{}", key.trim())).and_then(Value::as_str)
                        == Some(value)
                })?;
            } else {
                cur = cur.get(inner.parse::<usize>().ok()?)?;
            }
            rest = tail;
        } else {
            return None;
        }
    }
    Some(cur)
}

fn cell_text(v: Option<&Value>) -> Value {
    match v {
        None | Some(Value::Null) => json!("<none>"),
        Some(Value::String(s)) => json!(s),
        Some(other) => other.clone(),
    }
}

/// One column of a table: its definition and how a row's cell is computed.
pub(crate) struct Column {
    name: String,
    kind: String,
    format: String,
    description: String,
    priority: i64,
    cell: Box<dyn Fn(&Value) -> Value>,
}

fn col(name: &str, cell: impl Fn(&Value) -> Value + 'static) -> Column {
    Column {
        name: name.into(),
        kind: "string".into(),
        format: String::new(),
        description: String::new(),
        priority: 0,
        cell: Box::new(cell),
    }
}

/// A column shown only with `-o wide` (priority 1).
fn wide(name: &str, cell: impl Fn(&Value) -> Value + 'static) -> Column {
    Column {
        priority: 1,
        ..col(name, cell)
    }
}

fn int_col(name: &str, cell: impl Fn(&Value) -> i64 + 'static) -> Column {
    Column {
        kind: "integer".into(),
        ..col(name, move |o| json!(cell(o)))
    }
}

/// `ObjectMeta.name`'s documentation, the NAME column's description.
const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

/// `ObjectMeta.creationTimestamp`'s documentation, the AGE column's description.
const AGE_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// A custom resource's cell for a column of `kind`, as the CRD table convertor makes it:
/// `null` when the path finds nothing or the value does not fit the type; strings printed;
/// dates as ages.
fn custom_cell(kind: &str, v: Option<&Value>) -> Value {
    match (kind, v) {
        (_, None | Some(Value::Null)) => Value::Null,
        ("string", Some(Value::String(s))) => json!(s),
        ("string", Some(other)) => json!(other.to_string()),
        ("integer", Some(Value::Number(n))) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .map_or(Value::Null, |i| json!(i)),
        ("number", Some(Value::Number(n))) => n.as_f64().map_or(Value::Null, |f| json!(f)),
        ("boolean", Some(Value::Bool(b))) => json!(b),
        ("date", Some(Value::String(ts))) => match ts.parse::<jiff::Timestamp>() {
            Ok(_) => json!(human_age(ts)),
            Err(_) => json!("<invalid>"),
        },
        _ => Value::Null,
    }
}

/// A custom resource's columns after NAME: the version's `additionalPrinterColumns`, or AGE
/// when it declares none (as the real server serves them).
fn custom_columns(t: &ResourceType, version: &str) -> Vec<Column> {
    let Some(custom) = &t.custom else {
        return Vec::new();
    };
    let declared: &[Value] = custom
        .printer_columns
        .get(version)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let age = [
        json!({"name": "Age", "type": "date", "description": AGE_DESCRIPTION,
        "jsonPath": ".metadata.creationTimestamp"}),
    ];
    let declared = if declared.is_empty() {
        &age[..]
    } else {
        declared
    };
    declared
        .iter()
        .filter_map(|c| {
            let name = c["name"].as_str()?.to_string();
            let path = c["jsonPath"].as_str()?.to_string();
            let kind = c["type"].as_str().unwrap_or("string").to_string();
            let description = match c["description"].as_str() {
                Some(d) if !d.is_empty() => d.to_string(),
                _ => format!("Custom resource definition column (in JSONPath format): {path}"),
            };
            let cell_kind = kind.clone();
            Some(Column {
                name,
                kind,
                format: c["format"].as_str().unwrap_or_default().to_string(),
                description,
                priority: c["priority"].as_i64().unwrap_or(0),
                cell: Box::new(move |o: &Value| custom_cell(&cell_kind, json_path(o, &path))),
            })
        })
        .collect()
}

/// The NAME column every table but the Events' starts with.
fn name_column() -> Column {
    Column {
        format: "name".into(),
        description: NAME_DESCRIPTION.into(),
        ..col("Name", |o| cell_text(o.pointer("/metadata/name")))
    }
}

/// A `Table` for `objects` of resource `t` served at `version`.
pub fn table(
    t: &ResourceType,
    version: &str,
    objects: &[&Value],
    include_object: bool,
    rv: Option<u64>,
) -> Value {
    let printer = crate::resources::kinds::of(t).map(|k| k.printer);
    let complete = matches!(printer, Some(Printer::Complete(_)));
    let mut columns = match printer {
        Some(Printer::Complete(columns)) => columns(),
        Some(Printer::Columns(own)) => {
            let mut columns = vec![name_column()];
            columns.extend(own());
            columns
        }
        None => vec![name_column()],
    };
    // A custom resource's columns are its CRD's (AGE among them when it declares none).
    let has_age = complete || t.custom.is_some();
    columns.extend(custom_columns(t, version));
    if !has_age {
        // As upstream: AGE comes after the columns shown by default, before the wide ones.
        let at = columns
            .iter()
            .position(|c| c.priority > 0)
            .unwrap_or(columns.len());
        columns.insert(
            at,
            Column {
                description: AGE_DESCRIPTION.into(),
                ..col("Age", |o| {
                    json!(human_age(
                        o["metadata"]["creationTimestamp"]
                            .as_str()
                            .unwrap_or_default()
                    ))
                })
            },
        );
    }
    let defs: Vec<Value> = columns
        .iter()
        .map(|c| json!({"name": c.name, "type": c.kind, "format": c.format, "description": c.description, "priority": c.priority}))
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            // events.k8s.io Events print through their core/v1 form: one set of field names,
            // converted by the same code that serves the two APIs.
            let core;
            let printed: &Value = if crate::convert::is_events_v1(t) {
                core = crate::convert::to_storage(t, (*o).clone());
                &core
            } else {
                o
            };
            let cells: Vec<Value> = columns.iter().map(|c| (c.cell)(printed)).collect();
            let object = if include_object {
                (*o).clone()
            } else {
                partial_metadata(o)
            };
            json!({"cells": cells, "object": object})
        })
        .collect();
    let mut meta = json!({});
    if let Some(rv) = rv {
        meta["resourceVersion"] = json!(rv.to_string());
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": defs,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests;
