//! The columns of each built-in kind's `Table` rows, as upstream's printers
//! (`pkg/printers/internalversion/printers.go`) define them: one function per kind, named by
//! the kind's descriptor (`src/resources/kinds.rs`). NAME and AGE are added by [`super::table`].

use serde_json::{Value, json};

use super::{
    Column, cell_text, col, human_age, human_duration, int_col, json_path, name_column, wide,
};

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
    joined_or_none(&pairs)
}

/// `parts` joined by commas, `<none>` when there are none (kubectl's empty cell).
fn joined_or_none<S: AsRef<str>>(parts: &[S]) -> String {
    if parts.is_empty() {
        "<none>".into()
    } else {
        parts
            .iter()
            .map(AsRef::as_ref)
            .collect::<Vec<_>>()
            .join(",")
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
    let external = crate::json::strings(&spec["externalIPs"]);
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
        _ => joined_or_none(&external),
    }
}

/// The complete column set of Events, as the real server prints them: no AGE, NAME only with
/// `-o wide`. Rows are in core/v1 form ([`table`] converts events.k8s.io objects first).
pub(crate) fn events() -> Vec<Column> {
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

pub(crate) fn namespace() -> Vec<Column> {
    vec![col("Status", |o| cell_text(o.pointer("/status/phase")))]
}

pub(crate) fn node() -> Vec<Column> {
    vec![
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
            json!(joined_or_none(&roles))
        }),
        col("Version", |o| {
            cell_text(o.pointer("/status/nodeInfo/kubeletVersion"))
        }),
    ]
}

pub(crate) fn pod() -> Vec<Column> {
    vec![
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
    ]
}

pub(crate) fn deployment() -> Vec<Column> {
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

pub(crate) fn replica_set() -> Vec<Column> {
    let mut cols = vec![
        int_col("Desired", desired_replicas),
        int_col("Current", |o| int_at(o, "/status/replicas")),
        int_col("Ready", |o| int_at(o, "/status/readyReplicas")),
    ];
    cols.extend(template_columns("/spec/template", Some("/spec/selector")));
    cols
}

pub(crate) fn stateful_set() -> Vec<Column> {
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

pub(crate) fn daemon_set() -> Vec<Column> {
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

pub(crate) fn job() -> Vec<Column> {
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

pub(crate) fn cron_job() -> Vec<Column> {
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

pub(crate) fn service() -> Vec<Column> {
    vec![
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
            json!(joined_or_none(&ports))
        }),
        wide("Selector", |o| {
            json!(format_labels(o.pointer("/spec/selector")))
        }),
    ]
}

pub(crate) fn config_map() -> Vec<Column> {
    vec![col("Data", |o| {
        json!(
            o["data"].as_object().map_or(0, |m| m.len())
                + o["binaryData"].as_object().map_or(0, |m| m.len())
        )
    })]
}

pub(crate) fn secret() -> Vec<Column> {
    vec![
        col("Type", |o| cell_text(o.get("type"))),
        col("Data", |o| {
            json!(o["data"].as_object().map_or(0, |m| m.len()))
        }),
    ]
}

pub(crate) fn lease() -> Vec<Column> {
    vec![col("Holder", |o| {
        cell_text(o.pointer("/spec/holderIdentity"))
    })]
}

pub(crate) fn runtime_class() -> Vec<Column> {
    vec![col("Handler", |o| cell_text(o.get("handler")))]
}

/// A ReplicationController: desired, current and ready replicas; wide, its template's
/// containers and images and its selector (a label map).
pub(crate) fn replication_controller() -> Vec<Column> {
    let mut cols = vec![
        int_col("Desired", desired_replicas),
        int_col("Current", |o| int_at(o, "/status/replicas")),
        int_col("Ready", |o| int_at(o, "/status/readyReplicas")),
    ];
    cols.extend(template_columns("/spec/template", None));
    cols.push(wide("Selector", |o| {
        json!(format_labels(o.pointer("/spec/selector")))
    }));
    cols
}

/// Roles and ClusterRoles: NAME and CREATED AT (a date), no AGE, as upstream prints them.
pub(crate) fn role() -> Vec<Column> {
    vec![
        name_column(),
        Column {
            kind: "date".into(),
            ..col("Created At", |o| {
                cell_text(o.pointer("/metadata/creationTimestamp"))
            })
        },
    ]
}

/// RoleBindings and ClusterRoleBindings: the role, AGE, and, wide, the subjects by kind
/// (service accounts as `namespace/name`).
pub(crate) fn role_binding() -> Vec<Column> {
    fn subjects(o: &Value, kind: &str) -> Value {
        let names: Vec<String> = o["subjects"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["kind"] == kind)
            .map(|s| {
                let name = s["name"].as_str().unwrap_or_default();
                match s["namespace"].as_str() {
                    Some(ns) if kind == "ServiceAccount" => format!("{ns}/{name}"),
                    _ => name.to_string(),
                }
            })
            .collect();
        json!(names.join(", "))
    }
    vec![
        name_column(),
        col("Role", |o| {
            json!(format!(
                "{}/{}",
                o["roleRef"]["kind"].as_str().unwrap_or_default(),
                o["roleRef"]["name"].as_str().unwrap_or_default()
            ))
        }),
        col("Age", |o| {
            json!(human_age(
                o["metadata"]["creationTimestamp"]
                    .as_str()
                    .unwrap_or_default()
            ))
        }),
        wide("Users", |o| subjects(o, "User")),
        wide("Groups", |o| subjects(o, "Group")),
        wide("ServiceAccounts", |o| subjects(o, "ServiceAccount")),
    ]
}

/// An Ingress: its class (`<none>`), hosts (`*` for a rule without one), load balancer
/// addresses, and ports (`80`, `80, 443` with TLS).
pub(crate) fn ingress() -> Vec<Column> {
    vec![
        col("Class", |o| cell_text(o.pointer("/spec/ingressClassName"))),
        col("Hosts", |o| {
            let hosts: Vec<&str> = o
                .pointer("/spec/rules")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|r| r["host"].as_str().unwrap_or("*"))
                .collect();
            json!(if hosts.is_empty() {
                "*".to_string()
            } else {
                hosts.join(",")
            })
        }),
        col("Address", |o| {
            let addresses: Vec<&str> = o
                .pointer("/status/loadBalancer/ingress")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|i| i["ip"].as_str().or(i["hostname"].as_str()))
                .collect();
            json!(addresses.join(","))
        }),
        col("Ports", |o| {
            let tls = o
                .pointer("/spec/tls")
                .and_then(Value::as_array)
                .is_some_and(|t| !t.is_empty());
            json!(if tls { "80, 443" } else { "80" })
        }),
    ]
}

/// At most three items of `items`, then ` + N more...` (upstream's endpoint lists).
fn at_most_three(items: Vec<String>, empty: &str) -> Value {
    if items.is_empty() {
        return json!(empty);
    }
    let mut text = items.iter().take(3).cloned().collect::<Vec<_>>().join(",");
    if items.len() > 3 {
        text.push_str(&format!(" + {} more...", items.len() - 3));
    }
    json!(text)
}

/// Endpoints: `ip:port` of each port and address (port by port) of each subset, at most three.
pub(crate) fn endpoints() -> Vec<Column> {
    vec![col("Endpoints", |o| {
        let mut items = Vec::new();
        for subset in o["subsets"].as_array().into_iter().flatten() {
            let ports: Vec<i64> = subset["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["port"].as_i64())
                .collect();
            let ips: Vec<&str> = subset["addresses"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a["ip"].as_str())
                .collect();
            if ports.is_empty() {
                items.extend(ips.iter().map(|ip| ip.to_string()));
            }
            for p in &ports {
                items.extend(ips.iter().map(|ip| format!("{ip}:{p}")));
            }
        }
        at_most_three(items, "<none>")
    })]
}

/// An EndpointSlice: its address type, ports and endpoint addresses (at most three).
pub(crate) fn endpoint_slice() -> Vec<Column> {
    vec![
        col("AddressType", |o| cell_text(o.get("addressType"))),
        col("Ports", |o| {
            let ports: Vec<String> = o["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| {
                    p["port"]
                        .as_i64()
                        .map_or("<unset>".into(), |n| n.to_string())
                })
                .collect();
            json!(if ports.is_empty() {
                "<unset>".to_string()
            } else {
                ports.join(",")
            })
        }),
        col("Endpoints", |o| {
            let addresses: Vec<String> = o["endpoints"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|e| crate::json::strings(&e["addresses"]))
                .collect();
            at_most_three(addresses, "<unset>")
        }),
    ]
}

/// An APIService: its service (`namespace/name`, `Local` without one) and the status of its
/// `Available` condition (with the reason when not `True`).
pub(crate) fn api_service() -> Vec<Column> {
    vec![
        col("Service", |o| {
            let service = &o["spec"]["service"];
            json!(match service["name"].as_str() {
                Some(name) => format!(
                    "{}/{name}",
                    service["namespace"].as_str().unwrap_or_default()
                ),
                None => "Local".to_string(),
            })
        }),
        col("Available", |o| {
            let available = o
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "Available");
            json!(match available {
                None => "Unknown".to_string(),
                Some(c) if c["status"] == "True" => "True".to_string(),
                Some(c) => format!(
                    "{} ({})",
                    c["status"].as_str().unwrap_or_default(),
                    c["reason"].as_str().unwrap_or_default()
                ),
            })
        }),
    ]
}

/// A CertificateSigningRequest: AGE first, the signer, the requestor, the requested
/// duration (`<none>`) and its conditions (`Pending` without any).
pub(crate) fn certificate_signing_request() -> Vec<Column> {
    vec![
        name_column(),
        col("Age", |o| {
            json!(human_age(
                o["metadata"]["creationTimestamp"]
                    .as_str()
                    .unwrap_or_default()
            ))
        }),
        col("SignerName", |o| cell_text(o.pointer("/spec/signerName"))),
        col("Requestor", |o| {
            json!(
                o.pointer("/spec/username")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            )
        }),
        col("RequestedDuration", |o| {
            json!(
                o.pointer("/spec/expirationSeconds")
                    .and_then(Value::as_i64)
                    .map_or("<none>".to_string(), human_duration)
            )
        }),
        col("Condition", |o| {
            let conditions: Vec<&str> = o
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|c| c["type"].as_str())
                .collect();
            json!(if conditions.is_empty() {
                "Pending".to_string()
            } else {
                conditions.join(",")
            })
        }),
    ]
}

/// No columns of its own: the kind prints NAME and AGE.
pub(crate) fn none() -> Vec<Column> {
    Vec::new()
}

/// A PersistentVolumeClaim, as upstream's `printPersistentVolumeClaim`: the phase
/// (`Terminating` while being deleted), the bound volume, and, once bound, the capacity and
/// access modes of the volume; the storage class (the beta annotation, else
/// `spec.storageClassName`), the volume attributes class (`<unset>` when not set), and, wide, the volume
/// mode (`<unset>` when not set).
pub(crate) fn persistent_volume_claim() -> Vec<Column> {
    fn bound(o: &Value) -> bool {
        o.pointer("/spec/volumeName")
            .and_then(Value::as_str)
            .is_some_and(|v| !v.is_empty())
    }
    fn or_unset(v: Option<&Value>) -> Value {
        json!(v.and_then(Value::as_str).unwrap_or("<unset>"))
    }
    vec![
        col("Status", |o| {
            json!(if o.pointer("/metadata/deletionTimestamp").is_some() {
                "Terminating"
            } else {
                o.pointer("/status/phase")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            })
        }),
        col("Volume", |o| {
            json!(
                o.pointer("/spec/volumeName")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            )
        }),
        col("Capacity", |o| {
            let capacity = o
                .pointer("/status/capacity/storage")
                .and_then(Value::as_str);
            json!(if bound(o) {
                capacity.unwrap_or_default()
            } else {
                ""
            })
        }),
        col("Access Modes", |o| {
            json!(if bound(o) {
                access_modes(o.pointer("/status/accessModes"))
            } else {
                String::new()
            })
        }),
        col("StorageClass", |o| {
            // The beta annotation first, as upstream's `GetPersistentVolumeClaimClass`.
            let class = o
                .pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class")
                .or_else(|| o.pointer("/spec/storageClassName"))
                .and_then(Value::as_str);
            json!(class.unwrap_or_default())
        }),
        col("VolumeAttributesClass", |o| {
            or_unset(o.pointer("/spec/volumeAttributesClassName"))
        }),
        wide("VolumeMode", |o| or_unset(o.pointer("/spec/volumeMode"))),
    ]
}

/// Access modes as kubectl abbreviates them (`RWO,ROX,RWX,RWOP`, in that order, each once).
fn access_modes(modes: Option<&Value>) -> String {
    let modes: Vec<&str> = modes
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| modes.contains(mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}
