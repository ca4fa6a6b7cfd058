//! Responses: JSON bodies, `metav1.Status` errors, the plain-text answers, and objects and
//! lists rendered for the route's version and output mode (full, `PartialObjectMetadata`,
//! `Table`).

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use http::{Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

use super::Body;
use super::query::OutputMode;
use super::route::Route;
use crate::error::ApiError;
use crate::store::StoredObject;
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

/// A JSON response of a value.
pub(crate) fn json_value(code: StatusCode, value: &Value) -> Response<Body> {
    json_bytes(
        code,
        Bytes::from(serde_json::to_vec(value).unwrap_or_default()),
    )
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

/// Render one stored object for `route.version` and the output mode.
pub(crate) fn render(obj: &StoredObject, route: &Route, mode: OutputMode) -> Bytes {
    match mode {
        OutputMode::Full if crate::convert::is_identity(&route.t, &route.version, &obj.value) => {
            obj.bytes.clone()
        }
        OutputMode::Full => {
            Bytes::from(serde_json::to_vec(&view(route, &obj.value)).unwrap_or_default())
        }
        OutputMode::Metadata => {
            Bytes::from(serde_json::to_vec(&partial_metadata(&obj.value)).unwrap_or_default())
        }
        OutputMode::Table { include_object } => Bytes::from(
            serde_json::to_vec(&crate::table::table(
                &route.t,
                &route.version,
                &[&view(route, &obj.value)],
                include_object,
                None,
            ))
            .unwrap_or_default(),
        ),
    }
}

/// A stored object as served through `route` (its group/version, with field conversion).
pub(crate) fn view(route: &Route, stored: &Value) -> Value {
    crate::convert::from_storage(&route.t, &route.version, stored)
}

/// The answer to a dry-run write: the object as it would have been stored.
pub(crate) fn dry_run_response(code: StatusCode, mut obj: Value) -> Response<Body> {
    crate::store::drop_empty_metadata(&mut obj);
    json_value(code, &obj)
}

/// Serialise a list body.
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
        return Bytes::from(serde_json::to_vec(&table).unwrap_or_default());
    }
    let (kind, api_version) = match mode {
        OutputMode::Metadata => (
            "PartialObjectMetadataList".to_string(),
            "meta.k8s.io/v1".to_string(),
        ),
        _ => (t.list_kind(), t.api_version(&route.version)),
    };
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if !continue_token.is_empty() {
        meta["continue"] = json!(continue_token);
    }
    if let Some(n) = remaining {
        meta["remainingItemCount"] = json!(n);
    }
    let head = format!(
        "{{\"kind\":{},\"apiVersion\":{},\"metadata\":{},\"items\":[",
        json!(kind),
        json!(api_version),
        meta
    );
    let total: usize = items.iter().map(|o| o.bytes.len() + 1).sum();
    let mut buf = BytesMut::with_capacity(head.len() + total + 2);
    buf.extend_from_slice(head.as_bytes());
    for (i, obj) in items.iter().enumerate() {
        if i > 0 {
            buf.extend_from_slice(b",");
        }
        buf.extend_from_slice(&render(obj, route, mode));
    }
    buf.extend_from_slice(b"]}");
    buf.freeze()
}
