//! Wiring of the [`crate::patch`] module into the REST handlers: patch type dispatch, merge
//! strategies per resource, managed-fields bookkeeping and error mapping.

use serde_json::{Value, json};

use super::decode::check_patched_builtin;
use super::query::Query;
use super::route::Route;
use crate::error::ApiError;
use crate::patch::{
    ApplyError, ApplyOptions, MergeStrategy, PatchError, PatchType, parse_apply_body, patch_object,
    server_side_apply,
};
use crate::resources::ResourceType;

/// The list merge rules of a resource: the built-in table, or the CRD schema's list markers.
pub(crate) fn strategy_for(t: &ResourceType) -> Option<MergeStrategy> {
    if t.strategic_merge {
        return MergeStrategy::builtin(&t.api_version(t.storage_version()), &t.kind);
    }
    t.custom.as_ref().map(|c| {
        c.schemas
            .get(t.storage_version())
            .map(MergeStrategy::from_openapi_schema)
            .unwrap_or_else(MergeStrategy::atomic)
    })
}

pub(crate) fn patch_error(t: &ResourceType, name: &str, e: PatchError) -> ApiError {
    match e.status_code() {
        415 => ApiError::new(415, "UnsupportedMediaType", e.to_string()),
        // An error the real server does not classify: 500 without a reason.
        500 => ApiError::new(500, "", e.to_string()),
        422 => ApiError::invalid(
            &t.group,
            &t.kind,
            name,
            vec![(String::new(), "FieldValueInvalid".into(), e.to_string())],
        ),
        _ => ApiError::bad_request(e.to_string()),
    }
}

fn apply_error(t: &ResourceType, name: &str, e: ApplyError) -> ApiError {
    match &e {
        ApplyError::Conflicts(conflicts) => {
            let causes: Vec<Value> = conflicts
                .iter()
                .map(|c| {
                    json!({
                        "reason": "FieldManagerConflict",
                        "message": format!("conflict with {}", c.manager_text()),
                        "field": c.field,
                    })
                })
                .collect();
            // Upstream's conflict Status names no object: its details hold the causes only.
            ApiError::new(409, "Conflict", e.to_string()).with_details(json!({ "causes": causes }))
        }
        ApplyError::InvalidBody(m) => ApiError::bad_request(m.clone()),
        ApplyError::Invalid(m) => ApiError::invalid(
            &t.group,
            &t.kind,
            name,
            vec![(String::new(), "FieldValueInvalid".into(), m.clone())],
        ),
    }
}

/// What the real server's patch handler checks of an applied configuration before applying
/// it (400 BadRequest, its texts): a type (`apiVersion` and `kind`), and the name on the URL.
fn check_applied_identity(applied: &Value, name: &str) -> Result<(), ApiError> {
    let field = |k: &str| applied[k].as_str().unwrap_or_default();
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    if api_version.is_empty() || kind.is_empty() {
        // Go's GroupVersionKind.String(): `group/version, Kind=kind`.
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        return Err(ApiError::bad_request(format!(
            "invalid object type: {group}/{version}, Kind={kind}"
        )));
    }
    match applied["metadata"]["name"].as_str() {
        Some(other) if !other.is_empty() && other != name => Err(ApiError::bad_request(format!(
            "the name of the object ({other}) does not match the name on the URL ({name})"
        ))),
        _ => Ok(()),
    }
}

/// Apply the request's patch to `current`. Returns the patched object; `current == None` is
/// only valid for server-side apply (create), anything else gives 404.
pub(crate) fn apply_patch(
    route: &Route,
    q: &Query,
    patch_type: PatchType,
    current: Option<&Value>,
    body: &[u8],
) -> Result<Value, ApiError> {
    let t = &route.t;
    let name = route.name.as_deref().unwrap_or_default();
    let strategy = strategy_for(t);
    if patch_type == PatchType::Apply {
        let manager = q
            .get("fieldManager")
            .filter(|m| !m.is_empty())
            .ok_or_else(|| {
                // As upstream: PatchOptions validation, 422 on the field `fieldManager`.
                ApiError::invalid(
                    "meta.k8s.io",
                    "PatchOptions",
                    "",
                    vec![(
                        "fieldManager".into(),
                        "FieldValueRequired".into(),
                        "Required value: is required for apply patch".into(),
                    )],
                )
            })?;
        let force = q.get("force").is_some_and(|f| f == "true");
        let mut applied = parse_apply_body(body).map_err(|e| apply_error(t, name, e))?;
        check_applied_identity(&applied, name)?;
        if t.status_subresource {
            // Main resource ignores status, /status keeps only status: record ownership only
            // for what is stored.
            applied =
                crate::patch::apply::scope_to_subresource(&applied, route.subresource.as_deref());
        }
        let now = crate::store::now_rfc3339();
        let atomic = MergeStrategy::atomic();
        let opts = ApplyOptions {
            manager,
            force,
            now: &now,
            strategy: strategy.as_ref().unwrap_or(&atomic),
            subresource: route.subresource.as_deref(),
        };
        return server_side_apply(current, &applied, &opts).map_err(|e| apply_error(t, name, e));
    }
    let current = current.ok_or_else(|| ApiError::not_found(&t.group, &t.plural, name))?;
    if patch_type == PatchType::Strategic && !t.strategic_merge {
        return Err(ApiError::unsupported_media_type(&[
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml",
        ]));
    }
    let strategy = if patch_type == PatchType::Strategic {
        strategy.or_else(|| Some(MergeStrategy::atomic()))
    } else {
        None
    };
    let patched = patch_object(patch_type, current, body, strategy.as_ref()).map_err(
        |e| match (patch_type, e) {
            (PatchType::Json, PatchError::Unprocessable(detail)) => {
                tracing::debug!(%detail, resource = %t.plural, name, "json patch does not apply");
                json_patch_refused()
            }
            (_, e) => patch_error(t, name, e),
        },
    )?;
    check_patched_builtin(t, &patched)?;
    Ok(patched)
}

/// How kube-apiserver answers a JSON patch whose operations do not apply to the object (a
/// failed `test`, a path that does not exist, an index out of range): 422 `Invalid` with a
/// fixed message and empty details. The patch handler wraps the JSON patch library's error in
/// `errors.NewGenericServerResponse(422, ..., isUnexpectedResponse=false)`, which drops it, so a
/// client cannot tell a failed `test` from any other operation that does not apply.
pub(crate) fn json_patch_refused() -> ApiError {
    ApiError::new(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
    )
    .with_details(json!({}))
}

/// Records `Update` field ownership for an ordinary write (not apply) into `obj`'s
/// `metadata.managedFields`, before admission, as kube-apiserver does: ownership is computed on
/// the object as decoded (built-in defaults, a custom resource pruned and defaulted by its
/// schema), so what admission plugins and mutating webhooks add later is owned by nobody. On a
/// create through the main resource, `status` of a kind with a status subresource (reset by its
/// strategy) and what the kind's strategy writes on create (a Namespace's `spec.finalizers`)
/// are not the writer's either.
pub(crate) fn track_write(route: &Route, q: &Query, old: Option<&Value>, obj: &mut Value) {
    let t = &route.t;
    let mut decoded = obj.clone();
    if old.is_none() && route.subresource.is_none() {
        let sent_finalizers = obj["spec"].get("finalizers").is_some();
        crate::defaults::apply(t, old, &mut decoded);
        if t.status_subresource
            && let Some(m) = decoded.as_object_mut()
        {
            m.remove("status");
        }
        if t.custom.is_none()
            && t.group.is_empty()
            && t.kind == "Namespace"
            && !sent_finalizers
            && let Some(spec) = decoded.get_mut("spec").and_then(Value::as_object_mut)
        {
            spec.remove("finalizers");
        }
    } else {
        crate::defaults::apply(t, old, &mut decoded);
    }
    // An undecodable body is refused by admission; ownership is computed on what decodes.
    let _ = super::decode::decode_builtin(route, &mut decoded);
    // Fields a built-in's Go type does not have are never decoded, so never owned.
    if t.custom.is_none() {
        let _ = crate::protobuf::prune_unknown(&mut decoded);
    }
    if let Some(custom) = &t.custom
        && let Some(schema) = custom.schemas.get(t.storage_version())
    {
        crate::schema::prune(schema, &mut decoded);
        crate::schema::apply_defaults(schema, &mut decoded);
    }
    let tracked = track_update(route, q, old, decoded);
    let managed = tracked.pointer("/metadata/managedFields").cloned();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        match managed {
            Some(mf) => {
                meta.insert("managedFields".into(), mf);
            }
            None => {
                meta.remove("managedFields");
            }
        }
    }
}

/// Record `Update` field ownership for an ordinary write (not apply).
pub(crate) fn track_update(route: &Route, q: &Query, old: Option<&Value>, new: Value) -> Value {
    let user_agent = route.user_agent.as_str();
    let Some(strategy) = strategy_for(&route.t) else {
        return new;
    };
    let manager = q
        .get("fieldManager")
        .filter(|m| !m.is_empty())
        .cloned()
        .unwrap_or_else(|| {
            let m = user_agent.split('/').next().unwrap_or_default();
            if m.is_empty() {
                "unknown".to_string()
            } else {
                m.to_string()
            }
        });
    let now = crate::store::now_rfc3339();
    crate::patch::apply::record_update_owned(
        old,
        new,
        &crate::patch::apply::UpdateOptions {
            manager: &manager,
            now: &now,
            strategy: &strategy,
            subresource: route.subresource.as_deref(),
        },
    )
}
