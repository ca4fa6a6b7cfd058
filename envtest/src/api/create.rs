//! The create verb (POST).

use http::{Response, StatusCode};
use serde_json::{Value, json};

use super::conversion::{into_storage, written};
use super::decode::{check_type, parse_body};
use super::query::dry_run;
use super::response::dry_run_response;
use super::{Body, Call};
use crate::error::ApiError;

/// A random suffix for `generateName`, from the alphabet upstream uses.
fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let id = uuid::Uuid::new_v4();
    id.as_bytes()
        .iter()
        .take(5)
        .map(|b| ALPHABET[(*b as usize) % ALPHABET.len()] as char)
        .collect()
}

/// A create: defaults, admission and validation, then the store.
pub(crate) async fn create(call: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let (shared, route, q, body) = (call.shared, call.route, call.q, call.body);
    let t = route.t.clone();
    super::options::check_write(q, "CreateOptions")?;
    let mut obj = parse_body(body, &route.t.kind)?;
    check_type(route, &mut obj)?;
    let meta = &mut obj["metadata"];
    // The store refuses a resourceVersion on create; a dry run never reaches the store, so
    // upstream answers it, with the resourceVersion as sent.
    if !dry_run(q)
        && meta["resourceVersion"]
            .as_str()
            .is_some_and(|r| !r.is_empty())
    {
        // The store's `ErrResourceVersionSetOnCreate` reaches the client unclassified: a 500
        // without a reason.
        return Err(ApiError::new(
            500,
            "",
            "resourceVersion should not be set on objects to be created",
        ));
    }
    if t.namespaced {
        let ns = route.ns();
        match meta["namespace"].as_str() {
            None | Some("") => meta["namespace"] = json!(ns),
            Some(body_ns) if body_ns == ns => {}
            Some(_) => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        }
    } else if let Some(m) = meta.as_object_mut() {
        m.remove("namespace");
    }
    if meta["name"].as_str().is_none_or(str::is_empty) {
        match meta["generateName"].as_str() {
            Some(prefix) if !prefix.is_empty() => {
                meta["name"] = json!(format!("{prefix}{}", random_suffix()));
            }
            _ => {
                return Err(ApiError::invalid(
                    &t.group,
                    &t.kind,
                    "",
                    vec![(
                        "metadata.name".into(),
                        "FieldValueRequired".into(),
                        "Required value: name or generateName is required".into(),
                    )],
                ));
            }
        }
    }
    if t.status_subresource
        && t.custom.is_some()
        && let Some(o) = obj.as_object_mut()
    {
        o.remove("status");
    }
    super::patch::track_write(route, q, None, &mut obj);
    let obj = super::admission::admit(shared, route, "CREATE", None, obj, dry_run(q)).await?;
    if dry_run(q) {
        return Ok(dry_run_created(route, obj));
    }
    let obj = into_storage(route, obj).await?;
    let stored = shared.mutate(|s| s.create(&t, obj))?;
    written(StatusCode::CREATED, stored, route, call.mode).await
}

/// The answer to a dry-run create: the object as it would have been stored, with the metadata
/// the store would give it (a fresh uid, creationTimestamp, generation 1 where tracked), as the
/// real server answers (nothing is stored).
pub(crate) fn dry_run_created(route: &super::route::Route, mut obj: Value) -> Response<Body> {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        meta.insert(
            "creationTimestamp".into(),
            json!(crate::store::now_rfc3339()),
        );
        if crate::store::tracks_generation(&route.t) {
            meta.insert("generation".into(), json!(1));
        }
    }
    // What the store adds on create: the always-encoded fields and the strategy's
    // `PrepareForCreate` (a workload's first status, a Job's generated selector).
    crate::defaults::encode(&route.t, &mut obj);
    crate::defaults::prepare_create(&route.t, &mut obj);
    dry_run_response(StatusCode::CREATED, obj, route)
}
