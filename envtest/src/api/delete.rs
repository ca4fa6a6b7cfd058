//! The delete verbs: delete of one object and deletecollection, with their DeleteOptions.

use std::sync::Arc;

use http::{Response, StatusCode};
use serde_json::{Value, json};

use super::query::{OutputMode, Query, dry_run};
use super::read::existing_object;
use super::response::{json_bytes, render_list};
use super::route::Route;
use super::selectors::Selectors;
use super::{Body, Call, Shared};
use crate::error::ApiError;
use crate::resources::ResourceType;
use crate::store::{DeleteOpts, Propagation, StoredObject};

/// The DeleteOptions of a request. Without a propagation policy, batch/v1 Jobs orphan their
/// dependents (upstream's default for that version, kept for compatibility); every other
/// resource deletes them in the background.
fn delete_opts(t: &ResourceType, q: &Query, body: &[u8]) -> Result<DeleteOpts, ApiError> {
    super::options::check_write(q, "DeleteOptions")?;
    let body: Value = if body.is_empty() {
        json!({})
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
    };
    let policy = body["propagationPolicy"]
        .as_str()
        .map(str::to_string)
        .or_else(|| q.get("propagationPolicy").cloned());
    let orphan = body["orphanDependents"]
        .as_bool()
        .or_else(|| q.get("orphanDependents").map(|v| v == "true"));
    let orphan_by_default = t.custom.is_none() && t.key() == "batch/jobs";
    let propagation = match policy.as_deref() {
        Some("Foreground") => Propagation::Foreground,
        Some("Orphan") => Propagation::Orphan,
        Some("Background") => Propagation::Background,
        None if orphan.unwrap_or(orphan_by_default) => Propagation::Orphan,
        None => Propagation::Background,
        Some(other) => return Err(super::options::bad_propagation(other)),
    };
    Ok(DeleteOpts {
        propagation,
        uid: body["preconditions"]["uid"].as_str().map(str::to_string),
        resource_version: body["preconditions"]["resourceVersion"]
            .as_str()
            .map(str::to_string),
    })
}

/// Admission of the deletion of `stored` (validating webhooks see it as the old object).
async fn admit_delete(
    shared: &Arc<Shared>,
    route: &Route,
    q: &Query,
    stored: &StoredObject,
) -> Result<(), ApiError> {
    let old = super::conversion::view(route, &stored.value).await?;
    super::admission::admit(shared, route, "DELETE", Some(&old), old.clone(), dry_run(q))
        .await
        .map(|_| ())
}

/// A delete of one object (with finalizers, it only marks it).
pub(crate) async fn delete(call: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let (shared, route, q, body) = (call.shared, call.route, call.q, call.body);
    let t = route.t.clone();
    let name = route.name.clone().unwrap_or_default();
    if route.subresource.is_some() {
        return Err(ApiError::method_not_allowed(
            "DELETE is not supported on subresources",
        ));
    }
    let opts = delete_opts(&t, q, body)?;
    let current = existing_object(shared, route, &name)?;
    admit_delete(shared, route, q, &current).await?;
    if dry_run(q) {
        return super::conversion::written(StatusCode::OK, current, route).await;
    }
    let last = shared.mutate(|s| s.delete(&t, route.ns(), &name, &opts))?;
    super::conversion::written(StatusCode::OK, last, route).await
}

/// A deletecollection: every selected object, each through admission.
pub(crate) async fn delete_collection(call: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let (shared, route, q, body) = (call.shared, call.route, call.q, call.body);
    let t = route.t.clone();
    let sel = Selectors::parse(&t, q)?;
    let opts = delete_opts(&t, q, body)?;
    let victims: Vec<Arc<StoredObject>> = shared
        .store
        .lock()
        .range(
            &crate::convert::storage_key(&t),
            route.namespace.as_deref(),
            None,
        )
        .filter(|(_, o)| sel.matches(&o.value))
        .map(|(_, o)| o.clone())
        .collect();
    let mut deleted = Vec::new();
    for v in victims {
        let ns = v.value["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let name = v.value["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let mut r = route.clone();
        r.name = Some(name.clone());
        admit_delete(shared, &r, q, &v).await?;
        if dry_run(q) {
            deleted.push(v);
            continue;
        }
        match shared.mutate(|s| s.delete(&t, &ns, &name, &opts)) {
            Ok(last) => deleted.push(last),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let rv = shared.store.lock().rv();
    let deleted = super::conversion::served(route, deleted).await?;
    Ok(json_bytes(
        StatusCode::OK,
        render_list(route, &deleted, rv, "", None, OutputMode::Full),
    ))
}
