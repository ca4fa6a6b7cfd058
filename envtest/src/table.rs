//! Server-side printing: `meta.k8s.io/v1` `Table` responses for `kubectl get`
//! (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`). Columns are NAME, a few
//! per-kind columns for built-ins or the CRD's `additionalPrinterColumns`, and AGE.

use serde_json::{Value, json};

use crate::resources::ResourceType;

/// Human readable age as kubectl prints it (`45s`, `5m3s`, `3h`, `2d`).
pub fn human_age(created: &str) -> String {
    let Ok(ts) = created.parse::<jiff::Timestamp>() else {
        return "<unknown>".into();
    };
    let secs = (jiff::Timestamp::now().as_second() - ts.as_second()).max(0);
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

struct Column {
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

fn builtin_columns(t: &ResourceType) -> Vec<Column> {
    match t.key().as_str() {
        "namespaces" => vec![col("Status", |o| cell_text(o.pointer("/status/phase")))],
        "nodes" => vec![
            col("Status", |o| {
                let ready = json_path(o, ".status.conditions[?(@.type==\"Ready\")].status");
                let mut status = if ready.and_then(Value::as_str) == Some("True") {
                    "Ready".to_string()
                } else {
                    "NotReady".to_string()
                };
                if o.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
                    status.push_str(",SchedulingDisabled");
                }
                json!(status)
            }),
            col("Roles", |o| {
                let roles: Vec<&str> = o["metadata"]["labels"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter_map(|(k, _)| k.strip_prefix("node-role.kubernetes.io/"))
                    .collect();
                json!(if roles.is_empty() {
                    "<none>".to_string()
                } else {
                    roles.join(",")
                })
            }),
            col("Version", |o| {
                cell_text(o.pointer("/status/nodeInfo/kubeletVersion"))
            }),
        ],
        "pods" => vec![col("Status", |o| cell_text(o.pointer("/status/phase")))],
        "configmaps" => vec![col("Data", |o| {
            json!(
                o["data"].as_object().map_or(0, |m| m.len())
                    + o["binaryData"].as_object().map_or(0, |m| m.len())
            )
        })],
        "secrets" => vec![
            col("Type", |o| cell_text(o.get("type"))),
            col("Data", |o| {
                json!(o["data"].as_object().map_or(0, |m| m.len()))
            }),
        ],
        "coordination.k8s.io/leases" => vec![col("Holder", |o| {
            cell_text(o.pointer("/spec/holderIdentity"))
        })],
        "node.k8s.io/runtimeclasses" => vec![col("Handler", |o| cell_text(o.get("handler")))],
        _ => Vec::new(),
    }
}

fn custom_columns(t: &ResourceType, version: &str) -> Vec<Column> {
    let Some(custom) = &t.custom else {
        return Vec::new();
    };
    custom
        .printer_columns
        .get(version)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let name = c["name"].as_str()?.to_string();
            let path = c["jsonPath"].as_str()?.to_string();
            let kind = c["type"].as_str().unwrap_or("string").to_string();
            let is_date = kind == "date";
            Some(Column {
                name,
                kind: if is_date { "date".into() } else { kind },
                format: c["format"].as_str().unwrap_or_default().to_string(),
                description: c["description"].as_str().unwrap_or_default().to_string(),
                priority: c["priority"].as_i64().unwrap_or(0),
                cell: Box::new(move |o: &Value| {
                    let v = json_path(o, &path);
                    match (is_date, v.and_then(Value::as_str)) {
                        (true, Some(ts)) => json!(human_age(ts)),
                        _ => cell_text(v),
                    }
                }),
            })
        })
        .collect()
}

/// A `Table` for `objects` of resource `t` served at `version`.
pub fn table(
    t: &ResourceType,
    version: &str,
    objects: &[&Value],
    include_object: bool,
    rv: Option<u64>,
) -> Value {
    let mut columns = vec![Column {
        format: "name".into(),
        description: "Name must be unique within a namespace.".into(),
        ..col("Name", |o| cell_text(o.pointer("/metadata/name")))
    }];
    columns.extend(builtin_columns(t));
    let custom = custom_columns(t, version);
    let has_age = custom.iter().any(|c| c.name.eq_ignore_ascii_case("age"));
    columns.extend(custom);
    if !has_age {
        columns.push(Column {
            description: "CreationTimestamp is a timestamp representing the server time when this object was created.".into(),
            ..col("Age", |o| json!(human_age(o["metadata"]["creationTimestamp"].as_str().unwrap_or_default())))
        });
    }
    let defs: Vec<Value> = columns
        .iter()
        .map(|c| json!({"name": c.name, "type": c.kind, "format": c.format, "description": c.description, "priority": c.priority}))
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let cells: Vec<Value> = columns.iter().map(|c| (c.cell)(o)).collect();
            let object = if include_object {
                (*o).clone()
            } else {
                crate::api::partial_metadata(o)
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
mod tests {
    use super::*;

    #[test]
    fn json_paths() {
        let o = json!({"spec": {"n": 3, "items": [{"a": 1}, {"a": 2}]},
                       "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(json_path(&o, ".spec.n"), Some(&json!(3)));
        assert_eq!(json_path(&o, ".spec.items[1].a"), Some(&json!(2)));
        assert_eq!(
            json_path(&o, ".status.conditions[?(@.type==\"Ready\")].status"),
            Some(&json!("True"))
        );
        assert_eq!(json_path(&o, ".spec.missing"), None);
    }

    #[test]
    fn node_status_column() {
        let reg = crate::resources::Registry::with_builtins();
        let nodes = reg.get("nodes").unwrap();
        let node = json!({"metadata": {"name": "n", "creationTimestamp": "2020-01-01T00:00:00Z"},
                          "spec": {"unschedulable": true},
                          "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let t = table(nodes, "v1", &[&node], false, Some(7));
        assert_eq!(t["rows"][0]["cells"][1], "Ready,SchedulingDisabled");
        assert_eq!(t["metadata"]["resourceVersion"], "7");
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        let age = t["rows"][0]["cells"][4].as_str().unwrap();
        assert!(age.ends_with('y') || age.ends_with('d'), "{age}");
    }
}
