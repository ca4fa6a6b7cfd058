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

/// The verbs that read a stored object before they answer, each of which reports a stored
/// object its conversion webhook cannot convert in words of its own (kube-apiserver 1.37 decodes,
/// and so converts, a custom resource as it reads it from etcd, and a failure there is a
/// "corrupt object" storage error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StorageRead {
    /// A get or a delete: 500 `InternalError`, the storage error as its one cause.
    GetOrDelete,
    /// An update or a patch: 500 without a reason, the decoding error alone.
    Update,
}

/// The etcd key kube-apiserver names in a storage error: `/<group>/<plural>/[<ns>/]<name>`
/// (a list's errors carry the `/registry` prefix as well).
fn etcd_key(route: &Route, stored: &Value) -> String {
    let t = &route.t;
    let meta = &stored["metadata"];
    let name = meta["name"].as_str().unwrap_or_default();
    match meta["namespace"].as_str().filter(|n| !n.is_empty()) {
        Some(ns) => format!("/{}/{}/{ns}/{name}", t.group, t.plural),
        None => format!("/{}/{}/{name}", t.group, t.plural),
    }
}

/// `object not decodable revision=<rv>: <conversion error>`.
fn undecodable(rv: u64, e: &ApiError) -> String {
    format!("object not decodable revision={rv}: {}", e.message)
}

/// Go's `StorageError` text for an object that cannot be decoded (converted).
fn corrupt(key: &str, rv: u64, e: &ApiError) -> String {
    format!(
        "StorageError: corrupt object, Code: 7, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: {}",
        undecodable(rv, e)
    )
}

/// A conversion failure of a stored object read by `verb`, as kube-apiserver 1.37 reports it.
fn storage_read_error(
    verb: StorageRead,
    route: &Route,
    stored: &Value,
    rv: u64,
    e: ApiError,
) -> ApiError {
    match verb {
        StorageRead::GetOrDelete => {
            let cause = corrupt(&etcd_key(route, stored), rv, &e);
            ApiError::internal(format!("Internal error occurred: {cause}"))
                .with_details(json!({"causes": [{"message": cause}]}))
        }
        StorageRead::Update => ApiError::new(500, "", undecodable(rv, &e)),
    }
}

/// Most corrupt objects a list reports before it gives up (upstream's
/// `maxCorruptObjErrsToAggregate`).
const MAX_LIST_ERRORS: usize = 100;

/// The stored objects of a list page as served at the route's version. As kube-apiserver 1.37
/// reads a list, each object is converted on its own; the objects that cannot be are reported
/// together, as one 500 `StorageReadError` naming the first and counting the others, with a
/// cause per object.
pub(crate) async fn served_list(
    route: &Route,
    mut objs: Vec<Arc<StoredObject>>,
) -> Result<Vec<Arc<StoredObject>>, ApiError> {
    let t = &route.t;
    let mut failures: Vec<(String, String)> = Vec::new();
    let mut too_many = false;
    for obj in objs.iter_mut() {
        if !needs_webhook(t, &obj.value, &route.version) {
            continue;
        }
        let rv = obj.rv;
        match convert(t, vec![obj.value.clone()], &route.version).await {
            Ok(mut out) => match out.pop() {
                Some(value) => *obj = StoredObject::new(value, rv, false),
                None => return Err(ApiError::internal("the conversion returned no object")),
            },
            Err(e) => {
                let key = format!("/registry{}", etcd_key(route, &obj.value));
                failures.push((corrupt(&key, rv, &e), key));
                if failures.len() >= MAX_LIST_ERRORS {
                    too_many = true;
                    break;
                }
            }
        }
    }
    let Some((first, _)) = failures.first() else {
        return Ok(objs);
    };
    let resource = if t.group.is_empty() {
        t.plural.clone()
    } else {
        format!("{}.{}", t.plural, t.group)
    };
    let mut message = format!("failed to read one or more {resource} from the storage: {first}");
    if failures.len() > 1 {
        message = format!("{message} (and {} more)", failures.len() - 1);
    }
    let mut causes: Vec<Value> = failures
        .iter()
        .map(|(m, key)| json!({"reason": "UnexpectedServerResponse", "message": m, "field": key}))
        .collect();
    if too_many {
        causes.push(
            json!({"reason": "TooMany", "message": "too many errors, the list is truncated"}),
        );
    }
    Err(
        ApiError::new(500, "StorageReadError", message).with_details(
            json!({"name": "list", "group": t.group, "kind": t.plural, "causes": causes}),
        ),
    )
}

/// A stored object read by a get or a delete, as served at the route's version; a conversion
/// failure is the storage error kube-apiserver reports for it ([`StorageRead::GetOrDelete`]).
pub(crate) async fn read_one(
    route: &Route,
    obj: Arc<StoredObject>,
) -> Result<Arc<StoredObject>, ApiError> {
    let (value, rv) = (obj.value.clone(), obj.rv);
    served_one(route, obj)
        .await
        .map_err(|e| storage_read_error(StorageRead::GetOrDelete, route, &value, rv, e))
}

/// A stored object's value in the route's version for a verb that reads it before it writes
/// ([`view`]), a conversion failure reported as that verb reports it.
pub(crate) async fn view_stored(
    verb: StorageRead,
    route: &Route,
    stored: &StoredObject,
) -> Result<Value, ApiError> {
    view(route, &stored.value)
        .await
        .map_err(|e| storage_read_error(verb, route, &stored.value, stored.rv, e))
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
