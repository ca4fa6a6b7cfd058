//! The Pod subresources that act on the stored Pod: `binding` (what a scheduler writes: the
//! Pod's node) and `eviction` (what `kubectl drain` asks for: the Pod's deletion, subject to
//! PodDisruptionBudgets upstream; none are served here, so every eviction is allowed).

use http::{Response, StatusCode};
use serde_json::{Value, json};

use super::decode::parse_body;
use super::read::existing_object;
use super::response::json_value;
use super::{Body, Call};
use crate::error::ApiError;
use crate::store::DeleteOpts;

/// The `Status` a successful binding or eviction answers (201).
fn created() -> Response<Body> {
    json_value(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "code": 201}),
    )
}

/// Whether `route` is a Pod subresource answered here.
pub(crate) fn is_pod_action(call: &Call<'_>) -> bool {
    call.route.t.key() == "pods"
        && matches!(
            call.route.subresource.as_deref(),
            Some("binding" | "eviction")
        )
}

/// `POST .../pods/{name}/binding` or `.../eviction` (other verbs answer 405 before this).
pub(crate) fn answer(call: &Call<'_>) -> Result<Response<Body>, ApiError> {
    match call.route.subresource.as_deref() {
        Some("binding") => bind(call),
        _ => evict(call),
    }
}

/// A Binding: the Pod's `spec.nodeName` becomes the target's name and its `PodScheduled`
/// condition `True`; the binding's annotations are copied to the Pod. A Pod already assigned
/// to a node is a 409 Conflict, as upstream.
fn bind(call: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let route = call.route;
    let name = route.name.as_deref().unwrap_or_default();
    let binding = parse_body(call.body, "Binding")?;
    if let Some(named) = binding["metadata"]["name"].as_str()
        && named != name
    {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Binding object",
        ));
    }
    let target = &binding["target"];
    if let Some(kind) = target["kind"].as_str()
        && !kind.is_empty()
        && kind != "Node"
    {
        return Err(ApiError::new(
            500,
            "",
            format!(
                "target.kind: Unsupported value: \"{kind}\": supported values: \"Node\", \"<empty>\""
            ),
        ));
    }
    let node = target["name"].as_str().unwrap_or_default().to_string();
    if node.is_empty() {
        return Err(ApiError::new(500, "", "target.name: Required value"));
    }
    let current = existing_object(call.shared, route, name)?;
    let mut pod = current.value.clone();
    if let Some(assigned) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
        return Err(ApiError::conflict(
            "",
            "pods/binding",
            name,
            &format!("pod {name} is already assigned to node \"{assigned}\""),
        ));
    }
    pod["spec"]["nodeName"] = json!(node);
    if let Some(annotations) = binding["metadata"]["annotations"].as_object() {
        for (k, v) in annotations {
            pod["metadata"]["annotations"][k] = v.clone();
        }
    }
    let scheduled = json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null,
        "lastTransitionTime": crate::store::now_rfc3339()});
    let conditions = &mut pod["status"]["conditions"];
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    if let Some(list) = conditions.as_array_mut() {
        list.retain(|c| c["type"] != "PodScheduled");
        list.push(scheduled);
    }
    let t = route.t.clone();
    call.shared
        .mutate(|s| s.update(&t, route.ns(), name, pod, Some(current.rv)))?;
    Ok(created())
}

/// An Eviction: the Pod is deleted (with the eviction's `deleteOptions` preconditions).
fn evict(call: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let route = call.route;
    let name = route.name.as_deref().unwrap_or_default();
    let eviction = parse_body(call.body, "Eviction")?;
    if let Some(named) = eviction["metadata"]["name"].as_str()
        && named != name
    {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    existing_object(call.shared, route, name)?;
    let preconditions = &eviction["deleteOptions"]["preconditions"];
    let text = |v: &Value| v.as_str().map(str::to_string);
    let opts = DeleteOpts {
        uid: text(&preconditions["uid"]),
        resource_version: text(&preconditions["resourceVersion"]),
        ..DeleteOpts::default()
    };
    let t = route.t.clone();
    call.shared
        .mutate(|s| s.delete(&t, route.ns(), name, &opts))?;
    Ok(created())
}
