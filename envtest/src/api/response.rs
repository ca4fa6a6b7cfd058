//! Responses: JSON bodies, `metav1.Status` errors, the plain-text answers, and objects and
//! lists rendered for the route's version and output mode (full, `PartialObjectMetadata`,
//! `Table`).

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use http::{Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

use super::query::OutputMode;
use super::route::Route;
use crate::error::ApiError;
use crate::store::StoredObject;

/// HTTP body type of every response.
pub(crate) type Body = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;
use crate::table::partial_metadata;

/// A response with a body of this content type.
fn with_body(code: StatusCode, content_type: &'static str, body: Bytes) -> Response<Body> {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, content_type)
        .body(Full::new(body).map_err(|never| match never {}).boxed())
        // invariant: status and a static header are always valid
        .unwrap_or_default()
}

/// A JSON response.
pub(crate) fn json_bytes(code: StatusCode, body: Bytes) -> Response<Body> {
    with_body(code, "application/json", body)
}

/// A JSON response of a value (a typed object: see [`crate::json::typed`]), ending with a
/// newline as kube-apiserver's bodies do.
pub(crate) fn json_value(code: StatusCode, value: &Value) -> Response<Body> {
    json_bytes(code, Bytes::from(crate::json::typed_body(value)))
}

/// A plain-text response.
pub(crate) fn text(
    code: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    with_body(code, content_type, body.into())
}

/// A `metav1.Status` error response (with `Retry-After` for 429).
pub(crate) fn error_response(err: &ApiError) -> Response<Body> {
    let code = StatusCode::from_u16(err.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = json_value(code, &err.to_status());
    if let Some(secs) = err.retry_after
        && let Ok(v) = http::HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

/// The JSON of `value` as kube-apiserver writes an object of the route's resource: a
/// built-in's `kind`, `apiVersion` and `metadata` first; a custom resource's members in key
/// order (it is a map to the real server). No trailing newline.
fn object_json(route: &Route, value: &Value) -> Vec<u8> {
    if route.t.custom.is_some() {
        // invariant: a serde_json::Value always serialises (keys are strings)
        serde_json::to_vec(value).unwrap_or_default()
    } else {
        crate::json::typed(value).bytes
    }
}

/// Render one stored object for `route.version` and the output mode, ending with a newline.
pub(crate) fn render(obj: &StoredObject, route: &Route, mode: OutputMode) -> Bytes {
    if mode == OutputMode::Full && crate::convert::is_identity(&route.t, &route.version, &obj.value)
    {
        return obj.bytes.clone();
    }
    let mut out = render_value(route, &obj.value, mode, false);
    out.push(b'\n');
    Bytes::from(out)
}

/// Render one stored value for `route.version` and the output mode (no trailing newline);
/// `as_item` drops a built-in's `kind` and `apiVersion`, as in the items of a typed list.
fn render_value(route: &Route, stored: &Value, mode: OutputMode, as_item: bool) -> Vec<u8> {
    match mode {
        OutputMode::Full => {
            let mut v = view(route, stored);
            if as_item
                && route.t.custom.is_none()
                && let Some(o) = v.as_object_mut()
            {
                o.remove("kind");
                o.remove("apiVersion");
            }
            object_json(route, &v)
        }
        OutputMode::Metadata => crate::json::typed(&partial_metadata(stored)).bytes,
        OutputMode::Table { include_object } => {
            crate::json::typed(&crate::table::table(
                &route.t,
                &route.version,
                &[&view(route, stored)],
                include_object,
                None,
            ))
            .bytes
        }
    }
}

/// A stored object as served through `route` (its group/version, with field conversion).
pub(crate) fn view(route: &Route, stored: &Value) -> Value {
    crate::convert::from_storage(&route.t, &route.version, stored)
}

/// The answer to a dry-run write: the object as it would have been stored.
pub(crate) fn dry_run_response(code: StatusCode, mut obj: Value, route: &Route) -> Response<Body> {
    crate::store::drop_empty_metadata(&mut obj);
    let mut out = object_json(route, &obj);
    out.push(b'\n');
    json_bytes(code, Bytes::from(out))
}

/// Serialise a list body. A built-in's list (a typed list) writes `kind`, `apiVersion`,
/// `metadata` (`resourceVersion` before `continue`, its Go order), then `items` without their
/// own `kind` and `apiVersion`; a custom resource's list is a map to the real server: members
/// in key order, items whole.
pub(crate) fn render_list(
    route: &Route,
    items: &[Arc<StoredObject>],
    rv: u64,
    continue_token: &str,
    remaining: Option<usize>,
    mode: OutputMode,
) -> Bytes {
    let t = &route.t;
    if let OutputMode::Table { include_object } = mode {
        let views: Vec<Value> = items.iter().map(|o| view(route, &o.value)).collect();
        let values: Vec<&Value> = views.iter().collect();
        let mut table = crate::table::table(t, &route.version, &values, include_object, Some(rv));
        if !continue_token.is_empty() {
            table["metadata"]["continue"] = json!(continue_token);
        }
        return Bytes::from(crate::json::typed_body(&table));
    }
    let (kind, api_version) = match mode {
        OutputMode::Metadata => (
            "PartialObjectMetadataList".to_string(),
            "meta.k8s.io/v1".to_string(),
        ),
        _ => (t.list_kind(), t.api_version(&route.version)),
    };
    let mut list_meta = format!(",\"resourceVersion\":{}", json!(rv.to_string()));
    if !continue_token.is_empty() {
        list_meta.push_str(&format!(",\"continue\":{}", json!(continue_token)));
    }
    if let Some(n) = remaining {
        list_meta.push_str(&format!(",\"remainingItemCount\":{n}"));
    }
    let custom = t.custom.is_some() && mode == OutputMode::Full;
    let total: usize = items.iter().map(|o| o.bytes.len() + 1).sum();
    let mut buf = BytesMut::with_capacity(total + 160);
    let items_start = if custom {
        // Go's map order: apiVersion, items, kind, metadata (continue before resourceVersion).
        let head = format!("{{\"apiVersion\":{},\"items\":[", json!(api_version));
        buf.extend_from_slice(head.as_bytes());
        buf.len()
    } else {
        let head = format!(
            "{{\"kind\":{},\"apiVersion\":{},\"metadata\":{{{}}},\"items\":[",
            json!(kind),
            json!(api_version),
            &list_meta[1..]
        );
        buf.extend_from_slice(head.as_bytes());
        buf.len()
    };
    for obj in items {
        if buf.len() > items_start {
            buf.extend_from_slice(b",");
        }
        // Items are converted to the route's version before they get here; events.k8s.io
        // Events are the exception (their fields are converted while rendering).
        if mode == OutputMode::Full && crate::convert::is_identity(t, &route.version, &obj.value) {
            buf.extend_from_slice(b"{");
            buf.extend_from_slice(obj.list_item_members());
        } else {
            buf.extend_from_slice(&render_value(route, &obj.value, mode, true));
        }
    }
    if custom {
        // The real server's unstructured list always carries `continue`, empty or not.
        let mut meta = serde_json::Map::new();
        meta.insert("continue".into(), json!(continue_token));
        if let Some(n) = remaining {
            meta.insert("remainingItemCount".into(), json!(n));
        }
        meta.insert("resourceVersion".into(), json!(rv.to_string()));
        let tail = format!(
            "],\"kind\":{},\"metadata\":{}}}\n",
            json!(kind),
            Value::Object(meta)
        );
        buf.extend_from_slice(tail.as_bytes());
    } else {
        buf.extend_from_slice(b"]}\n");
    }
    buf.freeze()
}
