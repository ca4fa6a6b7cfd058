//! Wiring of CRD version conversion ([`crate::convert::webhook`]) into the verbs. As on the
//! real API server, a request works on objects of its own version: a stored object in another
//! version is converted to the request's version before it is served, patched or admitted, and
//! a written object is converted to the storage version just before it is stored (through the
//! CRD's conversion webhook when its strategy is `Webhook`, otherwise by rewriting
//! `apiVersion`). Objects already stored keep their version until they are written again, so a
//! list after a change of the storage version mixes stored versions and converts each.

use std::sync::Arc;

use http::{Response, StatusCode};
use serde_json::{Value, json};

use super::Body;
use super::query::OutputMode;
use super::response::{json_bytes, render};
use super::route::Route;
use crate::convert::webhook::{convert, needs_webhook, webhook_of};
use crate::error::ApiError;
use crate::store::StoredObject;

/// Stored objects as served at the route's version: those the CRD's conversion webhook must
/// convert are converted (one review for all of them) and returned as new objects; the others
/// are returned as they are (rendering rewrites their `apiVersion`, [`super::response`]).
pub(crate) async fn served(
    route: &Route,
    mut objs: Vec<Arc<StoredObject>>,
) -> Result<Vec<Arc<StoredObject>>, ApiError> {
    let t = &route.t;
    let pending: Vec<usize> = (0..objs.len())
        .filter(|i| needs_webhook(t, &objs[*i].value, &route.version))
        .collect();
    if pending.is_empty() {
        return Ok(objs);
    }
    let values = pending.iter().map(|i| objs[*i].value.clone()).collect();
    let converted = convert(t, values, &route.version).await?;
    for (i, value) in pending.into_iter().zip(converted) {
        let rv = objs[i].rv;
        // Only custom resources are converted by webhooks: not a typed (built-in) kind.
        objs[i] = StoredObject::new(value, rv, false);
    }
    Ok(objs)
}

/// One stored object as served at the route's version (see [`served`]).
pub(crate) async fn served_one(
    route: &Route,
    obj: Arc<StoredObject>,
) -> Result<Arc<StoredObject>, ApiError> {
    let mut objs = served(route, vec![obj]).await?;
    objs.pop()
        .ok_or_else(|| ApiError::internal("the conversion returned no object"))
}

/// A stored object's value in the route's version, as the verbs that change it work on it.
pub(crate) async fn view(route: &Route, stored: &Value) -> Result<Value, ApiError> {
    if needs_webhook(&route.t, stored, &route.version) {
        let mut out = convert(&route.t, vec![stored.clone()], &route.version).await?;
        return out
            .pop()
            .ok_or_else(|| ApiError::internal("the conversion returned no object"));
    }
    Ok(super::response::view(route, stored))
}

/// An object of the route's version in the storage version, to be stored.
pub(crate) async fn into_storage(route: &Route, mut obj: Value) -> Result<Value, ApiError> {
    let t = &route.t;
    let storage = t.storage_version();
    if webhook_of(t).is_some() {
        let mut out = convert(t, vec![obj], storage).await?;
        return out
            .pop()
            .ok_or_else(|| ApiError::internal("the conversion returned no object"));
    }
    obj["apiVersion"] = json!(t.api_version(storage));
    Ok(obj)
}

/// A stored object stored in another version than the storage version (written before the
/// CRD's storage version changed), converted by the CRD's conversion webhook to the storage
/// version, to compare a new object with; `None` when no conversion is needed (the same
/// version, or `strategy: None`, which changes only `apiVersion`).
pub(crate) async fn stored_for_comparison(
    route: &Route,
    stored: &Value,
) -> Result<Option<Value>, ApiError> {
    let t = &route.t;
    if !needs_webhook(t, stored, t.storage_version()) {
        return Ok(None);
    }
    Ok(convert(t, vec![stored.clone()], t.storage_version())
        .await?
        .pop())
}

/// The response to a write: the stored object, in full, in the route's version.
pub(crate) async fn written(
    status: StatusCode,
    stored: Arc<StoredObject>,
    route: &Route,
    mode: OutputMode,
) -> Result<Response<Body>, ApiError> {
    let obj = served_one(route, stored).await?;
    Ok(json_bytes(status, render(&obj, route, mode)))
}
