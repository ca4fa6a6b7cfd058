//! Upstream's validation of pod specs that operators hit most, on Pods and on the pod templates
//! of workloads (`ValidatePodSpec` through `ValidatePodTemplateSpec`, and the template rules of
//! `pkg/apis/apps` and `pkg/apis/batch`): at least one container; each container named with a
//! DNS-1123 label, once, and given an image, its ports numbered, its env vars named and its
//! probes given one handler; a pod's restart policy one of the three; a
//! replicated workload's template restarting `Always`, a Job's `OnFailure` or `Never`. Causes as
//! `(field, reason, message)`, in upstream's order, with its messages.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::resources::ResourceType;

type Cause = (String, String, String);

/// What the template of a kind must restart with.
enum TemplateRestart {
    /// A bare Pod: any of the three policies.
    Any,
    /// Deployments, ReplicaSets, StatefulSets, DaemonSets, ReplicationControllers.
    Always,
    /// Jobs and CronJobs' job templates.
    OnFailureOrNever,
}

/// The pod spec of `t`'s objects: its JSON pointer, its field path prefix in messages, and its
/// restart rule; `None` for kinds without one.
fn pod_spec_of(t: &ResourceType) -> Option<(&'static str, &'static str, TemplateRestart)> {
    if t.custom.is_some() {
        return None;
    }
    Some(match (t.group.as_str(), t.kind.as_str()) {
        ("", "Pod") => ("/spec", "spec.", TemplateRestart::Any),
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet")
        | ("", "ReplicationController") => (
            "/spec/template/spec",
            "spec.template.spec.",
            TemplateRestart::Always,
        ),
        ("batch", "Job") => (
            "/spec/template/spec",
            "spec.template.spec.",
            TemplateRestart::OnFailureOrNever,
        ),
        ("batch", "CronJob") => (
            "/spec/jobTemplate/spec/template/spec",
            "spec.jobTemplate.spec.template.spec.",
            TemplateRestart::OnFailureOrNever,
        ),
        _ => return None,
    })
}

fn required(field: String, detail: &str) -> Cause {
    let message = if detail.is_empty() {
        "Required value".to_string()
    } else {
        format!("Required value: {detail}")
    };
    (field, "FieldValueRequired".into(), message)
}

/// Go's `%q` of each value, joined by `, `.
fn quoted(values: &[&str]) -> String {
    values
        .iter()
        .map(|v| format!("{v:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn not_supported(field: String, value: &str, supported: &[&str]) -> Cause {
    (
        field,
        "FieldValueNotSupported".into(),
        format!(
            "Unsupported value: {value:?}: supported values: {}",
            quoted(supported)
        ),
    )
}

/// The containers' causes (`validateContainers`): none at all is one `Required`; otherwise
/// each container's name (required, a DNS-1123 label, not a duplicate) and image (required).
fn container_causes(containers: Option<&Value>, prefix: &str) -> Vec<Cause> {
    let path = format!("{prefix}containers");
    let list = containers.and_then(Value::as_array);
    let Some(list) = list.filter(|l| !l.is_empty()) else {
        return vec![required(path, "")];
    };
    let mut causes = Vec::new();
    let mut names = BTreeSet::new();
    for (i, ctr) in list.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let name = ctr["name"].as_str().unwrap_or_default();
        if name.is_empty() {
            causes.push(required(format!("{at}.name"), ""));
        } else {
            for message in kcr_names::validate_dns1123_label(name) {
                causes.push((
                    format!("{at}.name"),
                    "FieldValueInvalid".into(),
                    format!("Invalid value: {name:?}: {message}"),
                ));
            }
        }
        if ctr["image"].as_str().unwrap_or_default().is_empty() {
            causes.push(required(format!("{at}.image"), ""));
        }
        causes.extend(port_causes(ctr, &at));
        for (j, env) in ctr["env"].as_array().into_iter().flatten().enumerate() {
            if env["name"].as_str().unwrap_or_default().is_empty() {
                causes.push(required(format!("{at}.env[{j}].name"), ""));
            }
        }
        if !names.insert(name.to_string()) {
            causes.push((
                format!("{at}.name"),
                "FieldValueDuplicate".into(),
                format!("Duplicate value: {name:?}"),
            ));
        }
        for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
            causes.extend(probe_causes(&ctr[probe], &format!("{at}.{probe}")));
        }
    }
    causes
}

/// A port number's message, as `IsValidPortNum`.
pub(super) fn port_number_message(port: i64) -> Option<String> {
    (!(1..=65535).contains(&port)).then(|| "must be between 1 and 65535, inclusive".to_string())
}

/// A container's ports (`validateContainerPorts`): a `containerPort` is required and a port
/// number.
fn port_causes(ctr: &Value, at: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (j, port) in ctr["ports"].as_array().into_iter().flatten().enumerate() {
        let path = format!("{at}.ports[{j}].containerPort");
        match port["containerPort"].as_i64().unwrap_or(0) {
            0 => causes.push(required(path, "")),
            n => {
                if let Some(message) = port_number_message(n) {
                    causes.push((
                        path,
                        "FieldValueInvalid".into(),
                        format!("Invalid value: {n}: {message}"),
                    ));
                }
            }
        }
    }
    causes
}

/// A probe (`validateProbe` and its handler): exactly one of exec, httpGet, tcpSocket, grpc.
fn probe_causes(probe: &Value, at: &str) -> Vec<Cause> {
    if !probe.is_object() {
        return Vec::new();
    }
    let handlers = ["exec", "httpGet", "tcpSocket", "grpc"]
        .iter()
        .filter(|h| probe.get(**h).is_some_and(|v| !v.is_null()))
        .count();
    match handlers {
        0 => vec![required(at.to_string(), "must specify a handler type")],
        1 => Vec::new(),
        _ => vec![(
            at.to_string(),
            "FieldValueForbidden".into(),
            "Forbidden: may not specify more than 1 handler type".into(),
        )],
    }
}

/// The pod spec causes of `obj` (an object of `t` about to be stored, defaults applied).
pub(crate) fn causes(t: &ResourceType, obj: &Value) -> Vec<Cause> {
    let Some((pointer, prefix, restart)) = pod_spec_of(t) else {
        return Vec::new();
    };
    let spec = obj.pointer(pointer);
    let mut causes = container_causes(spec.and_then(|s| s.get("containers")), prefix);
    let policy = spec
        .and_then(|s| s.get("restartPolicy"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let field = format!("{prefix}restartPolicy");
    const ALL: [&str; 3] = ["Always", "OnFailure", "Never"];
    if !policy.is_empty() && !ALL.contains(&policy) {
        // `validateRestartPolicy` of every pod spec, templates included.
        causes.push(not_supported(field.clone(), policy, &ALL));
    }
    match restart {
        TemplateRestart::Any => {}
        TemplateRestart::Always => {
            if policy != "Always" {
                causes.push(not_supported(field, policy, &["Always"]));
            }
        }
        TemplateRestart::OnFailureOrNever => {
            if policy == "Always" || policy.is_empty() {
                causes.push(required(
                    field,
                    &format!("valid values: {}", quoted(&["OnFailure", "Never"])),
                ));
            } else if policy != "OnFailure" && policy != "Never" {
                causes.push(not_supported(field, policy, &["OnFailure", "Never"]));
            }
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn kind(group: &str, kind: &str) -> ResourceType {
        crate::resources::builtins()
            .into_iter()
            .find(|t| t.group == group && t.kind == kind)
            .expect("served kind")
    }

    fn fields(causes: &[Cause]) -> Vec<(&str, &str)> {
        causes
            .iter()
            .map(|(f, _, m)| (f.as_str(), m.as_str()))
            .collect()
    }

    #[test]
    fn pods_need_named_containers_with_images() {
        let pod = kind("", "Pod");
        let spec = |s: Value| json!({"spec": s});
        assert_eq!(
            fields(&causes(&pod, &spec(json!({"containers": []})))),
            [("spec.containers", "Required value")]
        );
        assert_eq!(
            fields(&causes(&pod, &json!({}))),
            [("spec.containers", "Required value")]
        );
        assert_eq!(
            fields(&causes(&pod, &spec(json!({"containers": [{}]})))),
            [
                ("spec.containers[0].name", "Required value"),
                ("spec.containers[0].image", "Required value")
            ]
        );
        let dup = causes(
            &pod,
            &spec(
                json!({"containers": [{"name": "c", "image": "a"}, {"name": "c", "image": "b"}]}),
            ),
        );
        assert_eq!(
            fields(&dup),
            [("spec.containers[1].name", "Duplicate value: \"c\"")]
        );
        assert_eq!(dup[0].1, "FieldValueDuplicate");
        let bad = causes(
            &pod,
            &spec(
                json!({"restartPolicy": "Sometimes", "containers": [{"name": "c", "image": "a"}]}),
            ),
        );
        assert_eq!(
            fields(&bad),
            [(
                "spec.restartPolicy",
                "Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\""
            )]
        );
        assert!(
            causes(
                &pod,
                &spec(
                    json!({"restartPolicy": "Never", "containers": [{"name": "c", "image": "a"}]})
                )
            )
            .is_empty()
        );
    }

    #[test]
    fn templates_follow_their_kind() {
        let ok = json!({"containers": [{"name": "c", "image": "a"}]});
        let with = |policy: &str| {
            let mut s = ok.clone();
            s["restartPolicy"] = json!(policy);
            s
        };
        let deployment = kind("apps", "Deployment");
        let d = |s: Value| json!({"spec": {"template": {"spec": s}}});
        assert!(causes(&deployment, &d(with("Always"))).is_empty());
        assert_eq!(
            fields(&causes(&deployment, &d(with("Never")))),
            [(
                "spec.template.spec.restartPolicy",
                "Unsupported value: \"Never\": supported values: \"Always\""
            )]
        );
        let job = kind("batch", "Job");
        assert!(causes(&job, &d(with("OnFailure"))).is_empty());
        assert_eq!(
            fields(&causes(&job, &d(with("Always")))),
            [(
                "spec.template.spec.restartPolicy",
                "Required value: valid values: \"OnFailure\", \"Never\""
            )]
        );
        let cron = kind("batch", "CronJob");
        let c = |s: Value| json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": s}}}}});
        assert_eq!(
            fields(&causes(
                &cron,
                &c(json!({"restartPolicy": "Never", "containers": []}))
            )),
            [(
                "spec.jobTemplate.spec.template.spec.containers",
                "Required value"
            )]
        );
        // Kinds without a pod spec have no such causes.
        assert!(causes(&kind("", "ConfigMap"), &json!({})).is_empty());
    }
}
