//! Validation of an object before it is stored: its name, upstream's cheap and certain checks
//! of built-in kinds (Secret keys, Events, a Job's pod template), and for custom resources the
//! CRD schema (pruning, defaulting, validation).

use serde_json::{Value, json};

use super::route::Route;
use crate::error::ApiError;

/// The keys a Secret of each built-in type must have in `data` (upstream's
/// `ValidateSecret`; `basic-auth` needs either key, reported as both).
fn required_secret_keys(secret_type: &str) -> &'static [&'static str] {
    match secret_type {
        "kubernetes.io/tls" => &["tls.crt", "tls.key"],
        "kubernetes.io/ssh-auth" => &["ssh-privatekey"],
        "kubernetes.io/dockerconfigjson" => &[".dockerconfigjson"],
        "kubernetes.io/dockercfg" => &[".dockercfg"],
        _ => &[],
    }
}

/// Upstream's validation of built-in kinds, where it is cheap and certain: a Secret's
/// type-specific keys, and on create through events.k8s.io/v1 the fields of a new-style Event
/// (the core-only fields must be unset; `eventTime`, `type`, the reporting fields, `action`
/// and `reason` are required). Causes as `(field, reason, message)`.
fn validate_builtin(
    route: &Route,
    operation: &str,
    old: Option<&Value>,
    obj: &Value,
) -> Vec<(String, String, String)> {
    let t = &route.t;
    let mut causes = Vec::new();
    if let Some(old) = old
        && t.custom.is_none()
        && t.group == "batch"
        && t.kind == "Job"
        && job_template_changed(&old["spec"], &obj["spec"])
    {
        causes.push((
            "spec.template".into(),
            "FieldValueInvalid".into(),
            format!(
                "Invalid value: {}: field is immutable",
                obj["spec"]["template"]
            ),
        ));
    }
    let required = |causes: &mut Vec<(String, String, String)>, field: String| {
        causes.push((field, "FieldValueRequired".into(), "Required value".into()));
    };
    if t.custom.is_none() && t.group.is_empty() && t.kind == "Secret" {
        let data = obj.get("data").and_then(Value::as_object);
        let has = |k: &str| data.is_some_and(|d| d.contains_key(k));
        let secret_type = obj["type"].as_str().unwrap_or_default();
        for key in required_secret_keys(secret_type) {
            if !has(key) {
                required(&mut causes, format!("data[{key}]"));
            }
        }
        if secret_type == "kubernetes.io/basic-auth" && !has("username") && !has("password") {
            required(&mut causes, "data[username]".into());
            required(&mut causes, "data[password]".into());
        }
        if secret_type == "kubernetes.io/service-account-token"
            && obj["metadata"]["annotations"]["kubernetes.io/service-account.name"]
                .as_str()
                .is_none_or(str::is_empty)
        {
            required(
                &mut causes,
                "metadata.annotations[kubernetes.io/service-account.name]".into(),
            );
        }
    }
    let is_core_event = t.custom.is_none() && t.group.is_empty() && t.plural == "events";
    if is_core_event || crate::convert::is_events_v1(t) {
        causes.extend(event_namespace_mismatch(route, obj));
    }
    if crate::convert::is_events_v1(t) && operation == "CREATE" {
        let unset = |v: &Value| match v {
            Value::Null => true,
            Value::Number(n) => n.as_i64() == Some(0),
            Value::String(s) => s.is_empty(),
            Value::Object(m) => m.values().all(|v| v.as_str().is_none_or(str::is_empty)),
            _ => false,
        };
        let text = |field: &str| obj[field].as_str().unwrap_or_default();
        if unset(&obj["eventTime"]) {
            required(&mut causes, "eventTime".into());
        }
        if !matches!(text("type"), "Normal" | "Warning") {
            causes.push((
                "type".into(),
                "FieldValueInvalid".into(),
                format!("Invalid value: \"\": has invalid value: {}", text("type")),
            ));
        }
        if !unset(&obj["eventTime"]) {
            for field in [
                "reportingController",
                "reportingInstance",
                "action",
                "reason",
            ] {
                if text(field).is_empty() {
                    required(&mut causes, field.into());
                }
            }
        }
        // Reported under the core/v1 names, as upstream validates the internal type.
        for (new, core) in DEPRECATED_EVENT_FIELDS {
            if !unset(&obj[new]) {
                causes.push((
                    core.into(),
                    "FieldValueInvalid".into(),
                    "Invalid value: \"\": needs to be unset".into(),
                ));
            }
        }
    }
    if let Some(old) = old
        && crate::convert::is_events_v1(t)
        && operation == "UPDATE"
    {
        // Through events.k8s.io/v1 only the series (and metadata) of an Event may change.
        for (new, core) in IMMUTABLE_EVENT_FIELDS
            .iter()
            .chain(DEPRECATED_EVENT_FIELDS.iter())
        {
            if old.get(*new) != obj.get(*new) {
                causes.push((
                    (*core).into(),
                    "FieldValueInvalid".into(),
                    format!("Invalid value: {}: field is immutable", obj[*new]),
                ));
            }
        }
    }
    causes
}

/// Upstream's `legacyValidateEvent` check of an Event's namespace against its involved
/// object's (`regarding` through events.k8s.io/v1), on every create and update through either
/// API, reported under the core/v1 name: an old-style Event (no `eventTime`) about an object
/// without a namespace lives in `default` (or no namespace), one about a namespaced object in
/// that object's namespace; a new-style Event about an object without a namespace only in
/// `default` or `kube-system`.
fn event_namespace_mismatch(route: &Route, obj: &Value) -> Option<(String, String, String)> {
    let involved = if crate::convert::is_events_v1(&route.t) {
        &obj["regarding"]
    } else {
        &obj["involvedObject"]
    };
    let involved_ns = involved["namespace"].as_str().unwrap_or_default();
    let ns = route.ns();
    let old_style = obj["eventTime"].as_str().is_none_or(str::is_empty);
    let matches = match (old_style, involved_ns.is_empty()) {
        (true, true) => matches!(ns, "" | "default"),
        (true, false) => ns == involved_ns,
        (false, true) => matches!(ns, "default" | "kube-system"),
        (false, false) => true,
    };
    (!matches).then(|| {
        (
            "involvedObject.namespace".into(),
            "FieldValueInvalid".into(),
            format!("Invalid value: \"{involved_ns}\": does not match event.namespace"),
        )
    })
}

/// events.k8s.io/v1 fields that hold core/v1-only data, with their core/v1 names.
const DEPRECATED_EVENT_FIELDS: [(&str, &str); 4] = [
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("deprecatedSource", "source"),
];

/// events.k8s.io/v1 fields an update through that API may not change (upstream's
/// `ValidateEventUpdate`), with their core/v1 names.
const IMMUTABLE_EVENT_FIELDS: [(&str, &str); 9] = [
    ("regarding", "involvedObject"),
    ("reason", "reason"),
    ("note", "message"),
    ("type", "type"),
    ("eventTime", "eventTime"),
    ("action", "action"),
    ("related", "related"),
    ("reportingController", "reportingController"),
    ("reportingInstance", "reportingInstance"),
];

/// Upstream's `ValidateJobUpdate`: a Job's pod template is immutable, except that a
/// suspended Job may change its scheduling directives (node selector, tolerations, affinity,
/// scheduling gates) and its template's labels and annotations.
fn job_template_changed(old_spec: &Value, new_spec: &Value) -> bool {
    let (old, new) = (&old_spec["template"], &new_spec["template"]);
    if old == new {
        return false;
    }
    if new_spec["suspend"] != json!(true) {
        return true;
    }
    let without_directives = |template: &Value| {
        let mut t = template.clone();
        if let Some(meta) = t.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("labels");
            meta.remove("annotations");
        }
        if let Some(spec) = t.get_mut("spec").and_then(Value::as_object_mut) {
            for field in ["nodeSelector", "tolerations", "affinity", "schedulingGates"] {
                spec.remove(field);
            }
        }
        t
    };
    without_directives(old) != without_directives(new)
}

/// Validate an object before it is stored: metadata.name, the checks of
/// [`validate_builtin`] and, for custom resources, the CRD schema (after pruning unknown
/// fields and applying defaults, as the real server does). `operation` is the admission
/// operation (`CREATE` or `UPDATE`), `old` the stored object of an update.
pub(crate) fn validate(
    route: &Route,
    operation: &str,
    old: Option<&Value>,
    obj: &mut Value,
) -> Result<(), ApiError> {
    let t = &route.t;
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let name = name.as_str();
    let mut causes = Vec::new();
    // As upstream's `ValidateObjectMeta` with the kind's name rule: one cause per broken
    // rule of the name.
    for message in crate::resources::kinds::NameRule::of(t).check(name) {
        causes.push((
            "metadata.name".to_string(),
            "FieldValueInvalid".to_string(),
            format!("Invalid value: \"{name}\": {message}"),
        ));
    }
    causes.extend(validate_builtin(route, operation, old, obj));
    causes.extend(super::validate_fields::causes(t, obj));
    causes.extend(super::validate_pod::causes(t, obj));
    if t.custom.is_none() {
        match t.group.as_str() {
            "" if t.kind == "Service" => causes.extend(super::validate_service::causes(obj)),
            "rbac.authorization.k8s.io" => {
                causes.extend(super::validate_rbac::causes(&t.kind, obj));
            }
            _ => {}
        }
    }
    // A built-in's JSON is decoded into its Go type upstream: unknown fields are dropped,
    // named in a warning, or refused with `fieldValidation=Strict`, as for custom resources.
    if t.custom.is_none()
        && let Some(pruned) = crate::protobuf::prune_unknown(obj)
    {
        unknown_fields(route, &pruned)?;
    }
    if let Some(custom) = &t.custom
        && let Some(schema) = custom.schemas.get(&route.version)
    {
        let mut pruned = crate::schema::prune(schema, obj);
        // The real server names unknown fields in sorted order.
        pruned.sort();
        unknown_fields(route, &pruned)?;
        crate::schema::apply_defaults(schema, obj);
        causes.extend(
            crate::schema::validate(schema, obj)
                .into_iter()
                .map(|e| (e.path, e.reason.as_str().to_string(), e.message)),
        );
    }
    if causes.is_empty() {
        Ok(())
    } else {
        // events.k8s.io Events are validated as the internal core Event: no group named.
        let group = if crate::convert::is_events_v1(t) {
            ""
        } else {
            &t.group
        };
        Err(ApiError::invalid(group, &t.kind, name, causes))
    }
}

/// `fieldValidation` for the unknown fields of an object (already removed): `Strict` refuses
/// the write naming them, `Warn` (the default) names each in a warning, `Ignore` says nothing.
fn unknown_fields(route: &Route, pruned: &[String]) -> Result<(), ApiError> {
    let t = &route.t;
    if route.strict && !pruned.is_empty() {
        let fields: Vec<String> = pruned
            .iter()
            .map(|p| format!("unknown field \"{p}\""))
            .collect();
        return Err(ApiError::bad_request(format!(
            "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}",
            t.kind,
            route.version,
            t.kind,
            fields.join(", ")
        )));
    }
    if !route.ignore_unknown {
        for p in pruned {
            route.warn(format!("unknown field \"{p}\""));
        }
    }
    Ok(())
}
