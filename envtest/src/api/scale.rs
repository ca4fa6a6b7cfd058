//! The `scale` subresource's verbs ([`crate::scale`] computes the `Scale` views).

use http::{Response, StatusCode};
use serde_json::{Value, json};

use super::decode::parse_body;
use super::pagination::parse_rv;
use super::read::{existing_object, url_name};
use super::response::json_value;
use super::route::Route;
use super::update::{Prepared, prepare_update};
use super::{Body, Call};
use crate::error::ApiError;

/// The `scale` subresource ([`crate::scale`]): get, PUT or PATCH of the object's `Scale` view;
/// a write is stored as an update of the object's spec replicas.
pub(crate) async fn scale(call: &Call<'_>, verb: &str) -> Result<Response<Body>, ApiError> {
    let (shared, route, q, body) = (call.shared, call.route, call.q, call.body);
    let content_type = call.content_type;
    let t = route.t.clone();
    let Some(paths) = t.scale.clone() else {
        return Err(ApiError::not_found(&t.group, &t.plural, ""));
    };
    let name = url_name(route)?;
    let scale_of = |obj: &Value| crate::scale::view(&t, &paths, obj);
    let invalid = |reason: String| {
        ApiError::invalid(
            "autoscaling",
            "Scale",
            &name,
            vec![("spec.replicas".into(), "FieldValueInvalid".into(), reason)],
        )
    };
    // The object's route, for the update that a scale write is.
    let object_route = Route {
        subresource: None,
        ..route.clone()
    };
    loop {
        let current = existing_object(shared, route, &name)?;
        let current_view = super::conversion::view(route, &current.value).await?;
        let current_scale = scale_of(&current_view);
        let requested = match verb {
            "get" => return Ok(json_value(StatusCode::OK, &current_scale)),
            "update" => parse_body(body, "Scale")?,
            "patch" => {
                let patch_type = crate::patch::PatchType::from_content_type(content_type)
                    .ok_or_else(ApiError::no_handler_for_media_type)?;
                // A Scale has no lists: a strategic merge patch is a merge patch.
                let patch_type = match patch_type {
                    crate::patch::PatchType::Strategic => crate::patch::PatchType::Merge,
                    other => other,
                };
                crate::patch::patch_object(patch_type, &current_scale, body, None)
                    .map_err(|e| super::patch::patch_error(&t, &name, e))?
            }
            _ => {
                return Err(ApiError::method_not_allowed());
            }
        };
        let replicas = crate::scale::requested_replicas(&requested).map_err(invalid)?;
        // A resourceVersion in the written Scale is a precondition, as on the object.
        let expected = match requested["metadata"]["resourceVersion"].as_str() {
            Some(r) if !r.is_empty() && verb == "update" => Some(parse_rv(r)?),
            _ => None,
        };
        let new = crate::scale::with_replicas(&paths, current_view.clone(), replicas)
            .map_err(ApiError::internal)?;
        let candidate =
            match prepare_update(shared, &object_route, q, &current_view, new, true).await? {
                Prepared::DryRun(_) => {
                    return Ok(json_value(StatusCode::OK, &{
                        let mut s = current_scale;
                        s["spec"]["replicas"] = json!(replicas);
                        s
                    }));
                }
                Prepared::Store(candidate) => candidate,
            };
        let candidate = super::conversion::into_storage(&object_route, candidate).await?;
        let old = super::conversion::stored_for_comparison(route, &current.value).await?;
        let base = expected.unwrap_or(current.rv);
        match shared
            .mutate(|s| s.update_from(&t, route.ns(), &name, candidate, Some(base), old.as_ref()))
        {
            Ok(stored) => {
                return Ok(json_value(
                    StatusCode::OK,
                    &scale_of(&super::conversion::view(route, &stored.value).await?),
                ));
            }
            // Raced with another write and no precondition was asked for: recompute.
            Err(e) if e.code == 409 && expected.is_none() => continue,
            Err(e) => return Err(e),
        }
    }
}
