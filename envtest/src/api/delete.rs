//! The delete verbs: delete of one object and deletecollection, with their DeleteOptions.

use std::sync::Arc;

use http::{Response, StatusCode};
use serde_json::{Value, json};

use super::query::{Query, dry_run};
use super::read::{existing_object, stored_object};
use super::response::{json_bytes, json_value, render_list};
use super::route::Route;
use super::selectors::Selectors;
use super::{Body, Call, Shared};
use crate::error::ApiError;
use crate::resources::ResourceType;
use crate::store::{DeleteOpts, Propagation, StoredObject};

/// The DeleteOptions of a request. Without a propagation policy, batch/v1 Jobs and core/v1
/// ReplicationControllers orphan their dependents (upstream's default for those versions, kept
/// for compatibility); every other resource deletes them in the background.
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
    let orphan_by_default =
        t.custom.is_none() && matches!(t.key().as_str(), "batch/jobs" | "replicationcontrollers");
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

/// Whether the delete is a dry run: `dryRun=All` in the query or in the DeleteOptions body
/// (where kube's `DeleteParams` put it).
fn is_dry_run(q: &Query, body: &[u8]) -> bool {
    dry_run(q)
        || serde_json::from_slice::<Value>(body).is_ok_and(|b| {
            crate::json::strings(&b["dryRun"])
                .iter()
                .any(|v| v == "All")
        })
}

/// Admission of the deletion of `stored` (validating webhooks see it as the old object).
async fn admit_delete(
    shared: &Arc<Shared>,
    route: &Route,
    dry: bool,
    stored: &StoredObject,
) -> Result<(), ApiError> {
    let old =
        super::conversion::view_stored(super::conversion::StorageRead::GetOrDelete, route, stored)
            .await?;
    super::admission::admit(shared, route, "DELETE", Some(&old), old.clone(), dry)
        .await
        .map(|_| ())
}

/// A delete of one object (with finalizers, it only marks it).
pub(crate) async fn delete(call: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let (shared, route, q, body) = (call.shared, call.route, call.q, call.body);
    let t = route.t.clone();
    let name = route.name.clone().unwrap_or_default();
    if route.subresource.is_some() {
        return Err(ApiError::method_not_allowed());
    }
    let opts = delete_opts(&t, q, body)?;
    let current = existing_object(shared, route, &name)?;
    let dry = is_dry_run(q, body);
    admit_delete(shared, route, dry, &current).await?;
    if dry {
        let stays = !crate::json::strings(&current.value["metadata"]["finalizers"]).is_empty();
        if !stays && answers_status(&t, &opts) {
            return Ok(deleted_status(&t, &name, current.uid()));
        }
        return super::conversion::written(StatusCode::OK, current, route, call.mode).await;
    }
    let last = shared.mutate(|s| s.delete(&t, route.ns(), &name, &opts))?;
    let gone = stored_object(shared, route, &name).is_none_or(|o| o.uid() != last.uid());
    if gone && answers_status(&t, &opts) {
        return Ok(deleted_status(&t, &name, last.uid()));
    }
    super::conversion::written(StatusCode::OK, last, route, call.mode).await
}

/// Whether a delete that removes the object at once answers a `Status` (the real server's
/// generic store) rather than the deleted object. The resources whose storage sets
/// `ReturnDeletedObject` answer the object; so does every delete whose propagation policy
/// is Foreground or Orphan, which the real server never completes at once (it adds the
/// `foregroundDeletion` or `orphan` finalizer for its garbage collector), and a
/// CustomResourceDefinition, which always carries the `customresourcecleanup` finalizer.
fn answers_status(t: &ResourceType, opts: &DeleteOpts) -> bool {
    const RETURN_DELETED_OBJECT: [&str; 8] = [
        "pods",
        "services",
        "serviceaccounts",
        "persistentvolumeclaims",
        "persistentvolumes",
        "namespaces",
        "storage.k8s.io/storageclasses",
        "apiextensions.k8s.io/customresourcedefinitions",
    ];
    opts.propagation == Propagation::Background
        && (t.custom.is_some() || !RETURN_DELETED_OBJECT.contains(&t.key().as_str()))
}

/// The `Status` Success answer to a delete that removed the object: its name, group,
/// resource (in `kind`, as upstream) and uid; no `code`.
fn deleted_status(t: &ResourceType, name: &str, uid: &str) -> Response<Body> {
    let mut details = serde_json::Map::new();
    details.insert("name".into(), json!(name));
    if !t.group.is_empty() {
        details.insert("group".into(), json!(t.group));
    }
    details.insert("kind".into(), json!(t.plural));
    if !uid.is_empty() {
        details.insert("uid".into(), json!(uid));
    }
    json_value(
        StatusCode::OK,
        &json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": Value::Object(details),
        }),
    )
}

/// A deletecollection: every selected object, each through admission.
pub(crate) async fn delete_collection(call: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let (shared, route, q, body) = (call.shared, call.route, call.q, call.body);
    let t = route.t.clone();
    let sel = Selectors::parse(&t, q)?;
    let opts = delete_opts(&t, q, body)?;
    let dry = is_dry_run(q, body);
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
        admit_delete(shared, &r, dry, &v).await?;
        if dry {
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
        render_list(route, &deleted, rv, "", None, call.mode),
    ))
}
