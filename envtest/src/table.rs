//! Server-side printing: `meta.k8s.io/v1` `Table` responses for `kubectl get`
//! (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`). Columns are NAME, the CRD's
//! `additionalPrinterColumns` or, for the built-ins kubectl users look at most (pods,
//! deployments, replicasets, statefulsets, daemonsets, jobs, cronjobs, services, nodes,
//! namespaces, configmaps, secrets, leases, runtimeclasses), the upstream printer's columns
//! (wide ones at priority 1, after AGE), and AGE. Events
//! get upstream's own layout (LAST SEEN, TYPE, REASON, OBJECT, MESSAGE; the rest wide). Other
//! built-ins print NAME and AGE.

use serde_json::{Value, json};

use crate::resources::ResourceType;

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

fn int_at(o: &Value, pointer: &str) -> i64 {
    o.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// `spec.replicas`, 1 when unset (the real server defaults it).
fn desired_replicas(o: &Value) -> i64 {
    o.pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

/// `k=v,k2=v2` of a label map, `<none>` when empty (kubectl's `labels.FormatLabels`).
fn format_labels(map: Option<&Value>) -> String {
    let pairs: Vec<String> = map
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    if pairs.is_empty() {
        "<none>".into()
    } else {
        pairs.join(",")
    }
}

/// The wide (`-o wide`) columns of a kind with a pod template at `template` (a JSON pointer):
/// containers, images and, when `selector` is given (a pointer to a label selector), the
/// selector.
fn template_columns(template: &'static str, selector: Option<&'static str>) -> Vec<Column> {
    let containers = move |o: &Value, field: &str| -> Value {
        let names: Vec<&str> = o
            .pointer(&format!("{template}/spec/containers"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c[field].as_str())
            .collect();
        json!(names.join(","))
    };
    let mut cols = vec![
        wide("Containers", move |o| containers(o, "name")),
        wide("Images", move |o| containers(o, "image")),
    ];
    if let Some(selector) = selector {
        cols.push(wide("Selector", move |o| {
            let s = crate::scale::selector_string(o.pointer(selector).unwrap_or(&Value::Null));
            json!(if s.is_empty() {
                "<none>".to_string()
            } else {
                s
            })
        }));
    }
    cols
}

/// Human readable duration between two RFC 3339 timestamps (`end` now when `None`), or `""`
/// without a start.
fn duration_between(start: Option<&str>, end: Option<&str>) -> String {
    let parse = |s: &str| s.parse::<jiff::Timestamp>().ok();
    let Some(start) = start.and_then(parse) else {
        return String::new();
    };
    let end = end.and_then(parse).unwrap_or_else(jiff::Timestamp::now);
    human_duration(end.as_second() - start.as_second())
}

/// The condition `kind` of `o` has status `True`.
fn condition_true(o: &Value, kind: &str) -> bool {
    o.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == kind && c["status"] == "True")
}

/// A Service's EXTERNAL-IP cell, as kubectl prints it.
fn service_external_ip(o: &Value) -> String {
    let spec = &o["spec"];
    let listed = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect()
    };
    let external = listed(&spec["externalIPs"]);
    match spec["type"].as_str().unwrap_or("ClusterIP") {
        "ExternalName" => spec["externalName"]
            .as_str()
            .unwrap_or("<none>")
            .to_string(),
        "LoadBalancer" => {
            let mut ips: Vec<String> = o
                .pointer("/status/loadBalancer/ingress")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|i| i["ip"].as_str().or(i["hostname"].as_str()))
                .map(str::to_string)
                .collect();
            ips.extend(external);
            if ips.is_empty() {
                "<pending>".into()
            } else {
                ips.join(",")
            }
        }
        _ if external.is_empty() => "<none>".into(),
        _ => external.join(","),
    }
}

/// The complete column set of Events, as the real server prints them: no AGE, NAME only with
/// `-o wide`. Rows are in core/v1 form ([`table`] converts events.k8s.io objects first).
fn event_columns() -> Vec<Column> {
    fn first<'a>(o: &'a Value, pointers: &[&str]) -> Option<&'a Value> {
        pointers
            .iter()
            .filter_map(|p| o.pointer(p))
            .find(|v| !v.is_null() && v.as_str() != Some(""))
    }
    fn since(ts: Option<&Value>) -> Value {
        json!(
            ts.and_then(Value::as_str)
                .map_or("<unknown>".to_string(), human_age)
        )
    }
    fn first_seen(o: &Value) -> Option<&Value> {
        first(o, &["/firstTimestamp", "/eventTime"])
    }
    vec![
        col("Last Seen", |o| {
            since(first(o, &["/series/lastObservedTime", "/lastTimestamp"]).or(first_seen(o)))
        }),
        col("Type", |o| cell_text(o.get("type"))),
        col("Reason", |o| cell_text(o.get("reason"))),
        col("Object", |o| {
            let obj = &o["involvedObject"];
            json!(format!(
                "{}/{}",
                obj["kind"].as_str().unwrap_or_default().to_lowercase(),
                obj["name"].as_str().unwrap_or_default()
            ))
        }),
        wide("Subobject", |o| {
            json!(
                o["involvedObject"]["fieldPath"]
                    .as_str()
                    .unwrap_or_default()
            )
        }),
        wide("Source", |o| {
            cell_text(first(o, &["/source/component", "/reportingComponent"]))
        }),
        col("Message", |o| {
            json!(o["message"].as_str().unwrap_or_default())
        }),
        wide("First Seen", |o| since(first_seen(o))),
        wide("Count", |o| {
            let count = first(o, &["/series/count", "/count"])
                .and_then(Value::as_i64)
                .unwrap_or(1);
            json!(count.to_string())
        }),
        wide("Name", |o| cell_text(o.pointer("/metadata/name"))),
    ]
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
        "pods" => vec![
            col("Ready", |o| {
                let statuses = o
                    .pointer("/status/containerStatuses")
                    .and_then(Value::as_array);
                let ready = statuses
                    .into_iter()
                    .flatten()
                    .filter(|c| c["ready"] == true)
                    .count();
                let total = o
                    .pointer("/spec/containers")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                json!(format!("{ready}/{total}"))
            }),
            // Upstream: the reason if any, else the phase (empty for a pod without status).
            col("Status", |o| {
                let status = o.pointer("/status/reason").or(o.pointer("/status/phase"));
                json!(status.and_then(Value::as_str).unwrap_or_default())
            }),
            int_col("Restarts", |o| {
                o.pointer("/status/containerStatuses")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["restartCount"].as_i64())
                    .sum()
            }),
        ],
        "apps/deployments" => {
            let mut cols = vec![
                col("Ready", |o| {
                    json!(format!(
                        "{}/{}",
                        int_at(o, "/status/readyReplicas"),
                        desired_replicas(o)
                    ))
                }),
                int_col("Up-to-date", |o| int_at(o, "/status/updatedReplicas")),
                int_col("Available", |o| int_at(o, "/status/availableReplicas")),
            ];
            cols.extend(template_columns("/spec/template", Some("/spec/selector")));
            cols
        }
        "apps/replicasets" => {
            let mut cols = vec![
                int_col("Desired", desired_replicas),
                int_col("Current", |o| int_at(o, "/status/replicas")),
                int_col("Ready", |o| int_at(o, "/status/readyReplicas")),
            ];
            cols.extend(template_columns("/spec/template", Some("/spec/selector")));
            cols
        }
        "apps/statefulsets" => {
            let mut cols = vec![col("Ready", |o| {
                json!(format!(
                    "{}/{}",
                    int_at(o, "/status/readyReplicas"),
                    desired_replicas(o)
                ))
            })];
            cols.extend(template_columns("/spec/template", None));
            cols
        }
        "apps/daemonsets" => {
            let mut cols = vec![
                int_col("Desired", |o| int_at(o, "/status/desiredNumberScheduled")),
                int_col("Current", |o| int_at(o, "/status/currentNumberScheduled")),
                int_col("Ready", |o| int_at(o, "/status/numberReady")),
                int_col("Up-to-date", |o| {
                    int_at(o, "/status/updatedNumberScheduled")
                }),
                int_col("Available", |o| int_at(o, "/status/numberAvailable")),
                col("Node Selector", |o| {
                    json!(format_labels(o.pointer("/spec/template/spec/nodeSelector")))
                }),
            ];
            cols.extend(template_columns("/spec/template", Some("/spec/selector")));
            cols
        }
        "batch/jobs" => {
            let mut cols = vec![
                col("Status", |o| {
                    let status = if condition_true(o, "Complete") {
                        "Complete"
                    } else if condition_true(o, "Failed") {
                        "Failed"
                    } else if o.pointer("/metadata/deletionTimestamp").is_some() {
                        "Terminating"
                    } else if condition_true(o, "Suspended") {
                        "Suspended"
                    } else if condition_true(o, "FailureTarget") {
                        "FailureTarget"
                    } else if condition_true(o, "SuccessCriteriaMet") {
                        "SuccessCriteriaMet"
                    } else {
                        "Running"
                    };
                    json!(status)
                }),
                col("Completions", |o| {
                    let succeeded = int_at(o, "/status/succeeded");
                    let completions = o.pointer("/spec/completions").and_then(Value::as_i64);
                    let parallelism = int_at(o, "/spec/parallelism");
                    json!(match completions {
                        Some(c) => format!("{succeeded}/{c}"),
                        None if parallelism > 1 => format!("{succeeded}/1 of {parallelism}"),
                        None => format!("{succeeded}/1"),
                    })
                }),
                col("Duration", |o| {
                    json!(duration_between(
                        o.pointer("/status/startTime").and_then(Value::as_str),
                        o.pointer("/status/completionTime").and_then(Value::as_str),
                    ))
                }),
            ];
            cols.extend(template_columns("/spec/template", Some("/spec/selector")));
            cols
        }
        "batch/cronjobs" => {
            let mut cols = vec![
                col("Schedule", |o| cell_text(o.pointer("/spec/schedule"))),
                col("Timezone", |o| cell_text(o.pointer("/spec/timeZone"))),
                col("Suspend", |o| {
                    let suspended = o.pointer("/spec/suspend").and_then(Value::as_bool);
                    json!(if suspended == Some(true) {
                        "True"
                    } else {
                        "False"
                    })
                }),
                int_col("Active", |o| {
                    o.pointer("/status/active")
                        .and_then(Value::as_array)
                        .map_or(0, |a| a.len() as i64)
                }),
                col("Last Schedule", |o| {
                    json!(
                        o.pointer("/status/lastScheduleTime")
                            .and_then(Value::as_str)
                            .map_or("<none>".to_string(), human_age)
                    )
                }),
            ];
            cols.extend(template_columns(
                "/spec/jobTemplate/spec/template",
                Some("/spec/jobTemplate/spec/selector"),
            ));
            cols
        }
        "services" => vec![
            col("Type", |o| cell_text(o.pointer("/spec/type"))),
            col("Cluster-IP", |o| {
                let ip = o.pointer("/spec/clusterIP").and_then(Value::as_str);
                cell_text(ip.filter(|ip| !ip.is_empty()).map(|ip| json!(ip)).as_ref())
            }),
            col("External-IP", |o| json!(service_external_ip(o))),
            col("Port(s)", |o| {
                let ports: Vec<String> = o
                    .pointer("/spec/ports")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|p| {
                        let proto = p["protocol"].as_str().unwrap_or("TCP");
                        match p["nodePort"].as_i64().filter(|n| *n != 0) {
                            Some(node) => format!("{}:{node}/{proto}", p["port"]),
                            None => format!("{}/{proto}", p["port"]),
                        }
                    })
                    .collect();
                json!(if ports.is_empty() {
                    "<none>".to_string()
                } else {
                    ports.join(",")
                })
            }),
            wide("Selector", |o| {
                json!(format_labels(o.pointer("/spec/selector")))
            }),
        ],
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
    let events = t.custom.is_none() && t.kind == "Event";
    let mut columns = if events {
        event_columns()
    } else {
        vec![Column {
            format: "name".into(),
            description: "Name must be unique within a namespace.".into(),
            ..col("Name", |o| cell_text(o.pointer("/metadata/name")))
        }]
    };
    columns.extend(builtin_columns(t));
    let custom = custom_columns(t, version);
    let has_age = events || custom.iter().any(|c| c.name.eq_ignore_ascii_case("age"));
    columns.extend(custom);
    if !has_age {
        // As upstream: AGE comes after the columns shown by default, before the wide ones.
        let at = columns
            .iter()
            .position(|c| c.priority > 0)
            .unwrap_or(columns.len());
        columns.insert(at, Column {
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

    /// `(column name, priority)` of a table, and its first row's cells.
    fn layout(t: &Value) -> (Vec<(String, i64)>, Vec<Value>) {
        let columns = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap().to_string(),
                    c["priority"].as_i64().unwrap(),
                )
            })
            .collect();
        (columns, t["rows"][0]["cells"].as_array().unwrap().clone())
    }

    #[test]
    fn deployment_columns_follow_kubectl() {
        let reg = crate::resources::Registry::with_builtins();
        let d = json!({"metadata": {"name": "web", "creationTimestamp": "2020-01-01T00:00:00Z"},
                       "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                                "template": {"spec": {"containers": [
                                    {"name": "app", "image": "nginx"},
                                    {"name": "log", "image": "busybox"}]}}},
                       "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
        let (columns, cells) = layout(&table(
            reg.get("apps/deployments").unwrap(),
            "v1",
            &[&d],
            false,
            None,
        ));
        let names: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "Name",
                "Ready",
                "Up-to-date",
                "Available",
                "Age",
                "Containers",
                "Images",
                "Selector"
            ]
        );
        assert_eq!(
            (columns[4].1, columns[5].1),
            (0, 1),
            "AGE before the wide columns, which have priority 1"
        );
        assert_eq!(
            [&cells[..4], &cells[5..]].concat(),
            [
                json!("web"),
                json!("2/3"),
                json!(3),
                json!(2),
                json!("app,log"),
                json!("nginx,busybox"),
                json!("app=web")
            ]
        );
        // No replicas in the spec: the server's default, 1.
        let bare = json!({"metadata": {"name": "b"}, "spec": {}});
        let (_, cells) = layout(&table(
            reg.get("apps/deployments").unwrap(),
            "v1",
            &[&bare],
            false,
            None,
        ));
        assert_eq!(cells[1], "0/1");
    }

    #[test]
    fn jobs_cronjobs_statefulsets_and_daemonsets_follow_kubectl() {
        let reg = crate::resources::Registry::with_builtins();
        let shown = |key: &str, o: &Value| -> Vec<(String, Value)> {
            let (columns, cells) = layout(&table(reg.get(key).unwrap(), "v1", &[o], false, None));
            columns
                .into_iter()
                .zip(cells)
                .filter(|((name, prio), _)| *prio == 0 && name != "Age")
                .map(|((name, _), cell)| (name, cell))
                .collect()
        };
        let row = |pairs: &[(&str, Value)]| -> Vec<(String, Value)> {
            pairs
                .iter()
                .map(|(n, v)| (n.to_string(), v.clone()))
                .collect()
        };
        let job = json!({"metadata": {"name": "j"}, "spec": {"completions": 3},
                         "status": {"succeeded": 3, "startTime": "2020-01-01T00:00:00Z",
                                    "completionTime": "2020-01-01T00:02:05Z",
                                    "conditions": [{"type": "Complete", "status": "True"}]}});
        assert_eq!(
            shown("batch/jobs", &job),
            row(&[
                ("Name", json!("j")),
                ("Status", json!("Complete")),
                ("Completions", json!("3/3")),
                ("Duration", json!("2m5s"))
            ])
        );
        let parallel = json!({"metadata": {"name": "p"}, "spec": {"parallelism": 4},
                              "status": {"succeeded": 1}});
        assert_eq!(
            shown("batch/jobs", &parallel)[1..],
            row(&[
                ("Status", json!("Running")),
                ("Completions", json!("1/1 of 4")),
                ("Duration", json!(""))
            ])[..]
        );
        let cron = json!({"metadata": {"name": "c"},
                          "spec": {"schedule": "*/5 * * * *", "suspend": true,
                                   "jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}}},
                          "status": {"active": [{"name": "c-1"}]}});
        assert_eq!(
            shown("batch/cronjobs", &cron),
            row(&[
                ("Name", json!("c")),
                ("Schedule", json!("*/5 * * * *")),
                ("Timezone", json!("<none>")),
                ("Suspend", json!("True")),
                ("Active", json!(1)),
                ("Last Schedule", json!("<none>"))
            ])
        );
        let sts = json!({"metadata": {"name": "s"}, "spec": {"replicas": 3},
                         "status": {"readyReplicas": 1}});
        assert_eq!(
            shown("apps/statefulsets", &sts),
            row(&[("Name", json!("s")), ("Ready", json!("1/3"))])
        );
        let ds = json!({"metadata": {"name": "d"},
                        "spec": {"template": {"spec": {"nodeSelector": {"disk": "ssd"}}}},
                        "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3,
                                   "numberReady": 2, "updatedNumberScheduled": 3,
                                   "numberAvailable": 2}});
        assert_eq!(
            shown("apps/daemonsets", &ds)[1..],
            row(&[
                ("Desired", json!(3)),
                ("Current", json!(3)),
                ("Ready", json!(2)),
                ("Up-to-date", json!(3)),
                ("Available", json!(2)),
                ("Node Selector", json!("disk=ssd"))
            ])[..]
        );
    }

    #[test]
    fn service_columns_follow_kubectl() {
        let reg = crate::resources::Registry::with_builtins();
        let svc = |spec: Value, status: Value| {
            let o = json!({"metadata": {"name": "s"}, "spec": spec, "status": status});
            let (_, cells) = layout(&table(
                reg.get("services").unwrap(),
                "v1",
                &[&o],
                false,
                None,
            ));
            cells[1..5].to_vec()
        };
        assert_eq!(
            svc(
                json!({"type": "NodePort", "clusterIP": "10.0.0.7",
                       "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"},
                                 {"port": 53, "protocol": "UDP"}]}),
                json!({})
            ),
            [
                json!("NodePort"),
                json!("10.0.0.7"),
                json!("<none>"),
                json!("80:30080/TCP,53/UDP")
            ]
        );
        assert_eq!(
            svc(
                json!({"type": "LoadBalancer", "ports": [{"port": 443}]}),
                json!({})
            )[..3],
            [json!("LoadBalancer"), json!("<none>"), json!("<pending>")]
        );
        assert_eq!(
            svc(
                json!({"type": "LoadBalancer", "externalIPs": ["1.2.3.4"]}),
                json!({"loadBalancer": {"ingress": [{"ip": "5.6.7.8"}]}})
            )[2],
            "5.6.7.8,1.2.3.4"
        );
        assert_eq!(
            svc(
                json!({"type": "ExternalName", "externalName": "example.com"}),
                json!({})
            )[2..],
            [json!("example.com"), json!("<none>")]
        );
    }

    #[test]
    fn events_have_their_own_layout_in_both_apis() {
        let reg = crate::resources::Registry::with_builtins();
        let core = json!({"metadata": {"name": "web.1"}, "type": "Warning", "reason": "Failed",
                          "involvedObject": {"kind": "NodePool", "name": "gpu", "fieldPath": "spec"},
                          "source": {"component": "nodepool"}, "message": "patch failed",
                          "firstTimestamp": "2020-01-01T00:00:00Z",
                          "lastTimestamp": "2020-01-01T00:00:00Z", "count": 4});
        let (columns, cells) = layout(&table(
            reg.get("events").unwrap(),
            "v1",
            &[&core],
            false,
            None,
        ));
        let shown: Vec<&str> = columns
            .iter()
            .filter(|(_, p)| *p == 0)
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(shown, ["Last Seen", "Type", "Reason", "Object", "Message"]);
        assert_eq!(
            cells[1..],
            [
                json!("Warning"),
                json!("Failed"),
                json!("nodepool/gpu"),
                json!("spec"),
                json!("nodepool"),
                json!("patch failed"),
                cells[7].clone(),
                json!("4"),
                json!("web.1")
            ]
        );
        assert!(cells[0].as_str().unwrap().ends_with('y'), "{}", cells[0]);
        // events.k8s.io/v1 field names; no count means 1.
        let new_api = json!({"metadata": {"name": "e"}, "type": "Normal", "reason": "Synced",
                             "regarding": {"kind": "Pod", "name": "p"}, "note": "ok",
                             "reportingController": "kcr", "eventTime": "2020-01-01T00:00:00.000001Z"});
        let (_, cells) = layout(&table(
            reg.get("events.k8s.io/events").unwrap(),
            "v1",
            &[&new_api],
            false,
            None,
        ));
        assert_eq!(
            cells[1..7],
            [
                json!("Normal"),
                json!("Synced"),
                json!("pod/p"),
                json!(""),
                json!("kcr"),
                json!("ok")
            ]
        );
        assert_eq!(cells[8], "1");
        assert_ne!(
            cells[0], "<unknown>",
            "eventTime is used when nothing else is set"
        );
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
