//! The write verbs on an existing object: update (PUT) and patch (PATCH, including
//! server-side apply, which creates an absent object), and the steps they share.

use std::sync::Arc;

use http::{Response, StatusCode};
use serde_json::{Value, json};

use super::conversion::{into_storage, stored_for_comparison, written};
use super::decode::{check_type, parse_body};
use super::query::{Query, dry_run};
use super::read::{existing_object, stored_object, url_name};
use super::response::dry_run_response;
use super::route::Route;
use super::{Body, Call, Shared};
use crate::error::ApiError;

/// The part of an object a write through `subresource` changes (a JSON pointer): `status`
/// for `/status`, the approval conditions for a CertificateSigningRequest's `/approval`, the
/// ephemeral containers for a Pod's `/ephemeralcontainers`.
fn subresource_scope(subresource: Option<&str>) -> Option<&'static str> {
    match subresource? {
        "status" => Some("/status"),
        "approval" => Some("/status/conditions"),
        "ephemeralcontainers" => Some("/spec/ephemeralContainers"),
        _ => None,
    }
}

/// Sets (or, for `None`, removes) the value at `pointer` in `obj`, creating objects on the way.
fn set_pointer(obj: &mut Value, pointer: &str, value: Option<Value>) {
    let Some((parent, field)) = pointer.rsplit_once('/') else {
        return;
    };
    if value.is_none() && obj.pointer(parent).is_none() {
        return;
    }
    let mut target = obj;
    for seg in parent.split('/').filter(|s| !s.is_empty()) {
        if !target[seg].is_object() {
            target[seg] = json!({});
        }
        target = &mut target[seg];
    }
    if let Some(map) = target.as_object_mut() {
        match value {
            Some(v) => {
                map.insert(field.to_string(), v);
            }
            None => {
                map.remove(field);
            }
        }
    }
}

/// Combine the incoming object with the current one according to the subresource rules: a
/// write through `/status` of a built-in kind keeps the stored spec and the metadata fields
/// the kind resets (`Kind::status_resets`); any other write through a subresource changes only its
/// part ([`subresource_scope`]); a write of the main resource of a kind with a status
/// subresource keeps the stored status.
fn split_status(route: &Route, current: &Value, mut incoming: Value) -> Value {
    if route.subresource.as_deref() == Some("status")
        && let Some(kind) = crate::resources::kinds::of(&route.t)
    {
        let reset = kind.status_resets;
        // A built-in kind's status strategy: the stored spec, the sent status and metadata
        // but for the fields the kind resets (labels of a Deployment, a Pod's owners).
        let mut out = incoming;
        set_pointer(&mut out, "/spec", current.get("spec").cloned());
        for field in reset {
            let stored = current["metadata"].get(*field).cloned();
            set_pointer(&mut out, &format!("/metadata/{field}"), stored);
        }
        return out;
    }
    if let Some(scope) = subresource_scope(route.subresource.as_deref()) {
        let mut out = current.clone();
        let part = incoming.pointer(scope).filter(|v| !v.is_null()).cloned();
        set_pointer(&mut out, scope, part);
        // The resourceVersion precondition comes from the incoming object, and so does field
        // ownership computed for this write (server-side apply to /status).
        out["metadata"]["resourceVersion"] = incoming["metadata"]["resourceVersion"].clone();
        if let Some(mf) = incoming["metadata"].get("managedFields") {
            out["metadata"]["managedFields"] = mf.clone();
        }
        out
    } else if route.t.status_subresource {
        match current.get("status") {
            Some(s) => incoming["status"] = s.clone(),
            None => {
                if let Some(o) = incoming.as_object_mut() {
                    o.remove("status");
                }
            }
        }
        incoming
    } else {
        incoming
    }
}

/// What an update-shaped write (PUT or PATCH of an existing object) yields before it is stored.
pub(crate) enum Prepared {
    /// A dry run: the response to send; nothing is stored.
    DryRun(Response<Body>),
    /// The object to store.
    Store(Value),
}

/// The steps PUT and PATCH share between computing the new object and storing it: keep the
/// status subresource separation, record `Update` field ownership when `track` is set
/// (server-side apply records its own), run admission (operation UPDATE) and answer dry runs.
pub(crate) async fn prepare_update(
    shared: &Arc<Shared>,
    route: &Route,
    q: &Query,
    current_view: &Value,
    new: Value,
    track: bool,
) -> Result<Prepared, ApiError> {
    let mut candidate = split_status(route, current_view, new);
    if track {
        super::patch::track_write(route, q, Some(current_view), &mut candidate);
    }
    let candidate = super::admission::admit(
        shared,
        route,
        "UPDATE",
        Some(current_view),
        candidate,
        dry_run(q),
    )
    .await?;
    crate::immutable::check(&route.t, current_view, &candidate)?;
    if dry_run(q) {
        // The generation the update would store (the spec changed: one more).
        let mut answer = candidate;
        let generation =
            crate::store::generation_after_update(&route.t, current_view, current_view, &answer);
        if let Some(meta) = answer.get_mut("metadata").and_then(Value::as_object_mut) {
            match generation {
                Some(g) => meta.insert("generation".into(), g),
                None => meta.remove("generation"),
            };
        }
        return Ok(Prepared::DryRun(dry_run_response(
            StatusCode::OK,
            answer,
            route,
        )));
    }
    Ok(Prepared::Store(candidate))
}

/// An update (PUT): the body replaces the object (a resourceVersion in it is a precondition).
pub(crate) async fn update(call: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let (shared, route, q, body) = (call.shared, call.route, call.q, call.body);
    let t = route.t.clone();
    let name = url_name(route)?;
    super::options::check_write(q, "UpdateOptions")?;
    let mut obj = parse_body(body, &route.t.kind)?;
    check_type(route, &mut obj)?;
    match obj["metadata"]["name"].as_str() {
        Some(n) if n != name => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        _ => obj["metadata"]["name"] = json!(name),
    }
    if t.namespaced {
        match obj["metadata"]["namespace"].as_str() {
            Some(n) if !n.is_empty() && n != route.ns() => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => obj["metadata"]["namespace"] = json!(route.ns()),
        }
    }
    let expected = match obj["metadata"]["resourceVersion"].as_str() {
        Some(r) if !r.is_empty() => Some(super::options::object_rv(r)?),
        _ => None,
    };
    // Custom resources allow no unconditional update (upstream's strategy validates it on
    // the update of an existing object: a missing one is a 404 first).
    if t.custom.is_some() && expected.is_none() {
        existing_object(shared, route, &name)?;
        return Err(ApiError::invalid(
            &t.group,
            &t.plural,
            &name,
            vec![(
                "metadata.resourceVersion".into(),
                "FieldValueInvalid".into(),
                "Invalid value: 0: must be specified for an update".into(),
            )],
        ));
    }
    loop {
        let current = existing_object(shared, route, &name)?;
        let current_view =
            super::conversion::view_stored(super::conversion::StorageRead::Update, route, &current)
                .await?;
        let candidate =
            match prepare_update(shared, route, q, &current_view, obj.clone(), true).await? {
                Prepared::DryRun(response) => return Ok(response),
                Prepared::Store(candidate) => candidate,
            };
        let candidate = into_storage(route, candidate).await?;
        let old = stored_for_comparison(route, &current.value).await?;
        let base = expected.unwrap_or(current.rv);
        match shared
            .mutate(|s| s.update_from(&t, route.ns(), &name, candidate, Some(base), old.as_ref()))
        {
            Ok(stored) => return written(StatusCode::OK, stored, route, call.mode).await,
            // Unconditional update raced with another write: recompute on the new state.
            Err(e) if e.code == 409 && expected.is_none() => continue,
            Err(e) => return Err(e),
        }
    }
}

/// A patch (PATCH) of any type; server-side apply of an absent object creates it.
pub(crate) async fn patch(call: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let (shared, route, q, body) = (call.shared, call.route, call.q, call.body);
    let content_type = call.content_type;
    let t = route.t.clone();
    let name = url_name(route)?;
    let patch_type = crate::patch::PatchType::from_content_type(content_type)
        .ok_or_else(ApiError::no_handler_for_media_type)?;
    super::options::check_write(q, "PatchOptions")?;
    super::options::check_force(q, patch_type == crate::patch::PatchType::Apply)?;
    // kube-apiserver 1.37 checks that a JSON, merge or strategic merge patch is JSON at all
    // before it reads the object (so also for an absent one), in Go's words.
    if patch_type != crate::patch::PatchType::Apply
        && serde_json::from_slice::<serde::de::IgnoredAny>(body).is_err()
    {
        return Err(ApiError::bad_request("invalid JSON patch"));
    }
    loop {
        let current = stored_object(shared, route, &name);
        let current_view = match &current {
            Some(c) => Some(
                super::conversion::view_stored(super::conversion::StorageRead::Update, route, c)
                    .await?,
            ),
            None => None,
        };
        if current.is_none() && route.subresource.is_some() {
            // No create through a subresource, whatever the patch type.
            return Err(ApiError::not_found(&t.group, &t.plural, &name));
        }
        let patched = super::patch::apply_patch(route, q, patch_type, current_view.as_ref(), body)?;
        let Some(current) = current else {
            // Server-side apply of an absent object creates it.
            let mut obj = patched;
            check_type(route, &mut obj)?;
            obj["metadata"]["name"] = json!(name);
            if t.namespaced {
                obj["metadata"]["namespace"] = json!(route.ns());
            }
            if t.status_subresource
                && t.custom.is_some()
                && let Some(o) = obj.as_object_mut()
            {
                o.remove("status");
            }
            let obj =
                super::admission::admit(shared, route, "CREATE", None, obj, dry_run(q)).await?;
            if dry_run(q) {
                return Ok(super::create::dry_run_created(route, obj));
            }
            let obj = into_storage(route, obj).await?;
            match shared.mutate(|s| s.create(&t, obj)) {
                Ok(stored) => return written(StatusCode::CREATED, stored, route, call.mode).await,
                Err(e) if e.code == 409 && e.reason == "AlreadyExists" => continue,
                Err(e) => return Err(e),
            }
        };
        let mut patched = patched;
        check_type(route, &mut patched)?;
        if patched["metadata"]["name"].as_str() != Some(name.as_str()) {
            return Err(ApiError::invalid(
                &t.group,
                &t.kind,
                &name,
                vec![(
                    "metadata.name".into(),
                    "FieldValueInvalid".into(),
                    "field is immutable".into(),
                )],
            ));
        }
        // A resourceVersion in the patch is a precondition.
        if let Some(r) = patched["metadata"]["resourceVersion"].as_str()
            && !r.is_empty()
            && super::options::object_rv(r)? != current.rv
        {
            return Err(ApiError::conflict(
                &t.group,
                &t.plural,
                &name,
                "the object has been modified; please apply your changes to the latest version and try again",
            ));
        }
        let current_view = current_view.unwrap_or_default();
        // Server-side apply has recorded its own field ownership.
        let track = patch_type != crate::patch::PatchType::Apply;
        let candidate =
            match prepare_update(shared, route, q, &current_view, patched, track).await? {
                Prepared::DryRun(response) => return Ok(response),
                Prepared::Store(candidate) => candidate,
            };
        let candidate = into_storage(route, candidate).await?;
        let old = stored_for_comparison(route, &current.value).await?;
        match shared.mutate(|s| {
            s.update_from(
                &t,
                route.ns(),
                &name,
                candidate,
                Some(current.rv),
                old.as_ref(),
            )
        }) {
            Ok(stored) => return written(StatusCode::OK, stored, route, call.mode).await,
            // Lost a race with another writer: re-apply the patch on the new state.
            Err(e) if e.code == 409 && e.reason == "Conflict" => continue,
            Err(e) => return Err(e),
        }
    }
}
