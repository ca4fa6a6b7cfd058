//! HTTP routing and the REST verbs: discovery paths, get/list/create/update/patch/delete/
//! deletecollection, the status subresource, and the hand-off of watches to [`crate::watch`].

use std::collections::HashMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use http::{Method, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::resources::ResourceType;
use crate::selector::{FieldSelector, LabelSelector};
use crate::server::{Body, Shared};
use crate::store::{DeleteOpts, ObjKey, Propagation, StoredObject};

/// Largest accepted request body.
const MAX_BODY: usize = 32 * 1024 * 1024;

/// How objects are rendered, from the request's `Accept` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutputMode {
    /// The objects themselves.
    Full,
    /// `PartialObjectMetadata` (metadata only).
    Metadata,
    /// `meta.k8s.io/v1` `Table` (kubectl get).
    Table {
        /// `includeObject=Object` rather than metadata.
        include_object: bool,
    },
}

/// A resource request after routing.
#[derive(Debug, Clone)]
pub(crate) struct Route {
    pub t: Arc<ResourceType>,
    pub version: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// The request's `User-Agent` (default field manager).
    pub user_agent: String,
    /// `fieldValidation=Strict` was requested: unknown fields are an error, not pruned.
    pub strict: bool,
    /// `fieldValidation=Ignore` was requested: unknown fields are pruned without a warning.
    pub ignore_unknown: bool,
    /// Warnings for `Warning` response headers (admission, unknown fields); shared by clones.
    pub warnings: Arc<parking_lot::Mutex<Vec<String>>>,
}

impl Route {
    /// Record a warning for the response's `Warning` headers.
    pub fn warn(&self, message: impl Into<String>) {
        self.warnings.lock().push(message.into());
    }
}

impl Route {
    fn ns(&self) -> &str {
        self.namespace.as_deref().unwrap_or_default()
    }
}

pub(crate) type Query = HashMap<String, String>;

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(crate) fn parse_query(q: Option<&str>) -> Query {
    q.unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (percent_decode(k), percent_decode(v)),
            None => (percent_decode(p), String::new()),
        })
        .collect()
}

fn flag(q: &Query, key: &str) -> bool {
    q.get(key).is_some_and(|v| v == "true" || v == "1")
}

/// A JSON response.
pub(crate) fn json_bytes(code: StatusCode, body: Bytes) -> Response<Body> {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(body).map_err(|never| match never {}).boxed())
        // invariant: status and a static header are always valid
        .unwrap_or_default()
}

pub(crate) fn json_value(code: StatusCode, value: &Value) -> Response<Body> {
    json_bytes(
        code,
        Bytes::from(serde_json::to_vec(value).unwrap_or_default()),
    )
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

fn output_mode(req_accept: Option<&str>, q: &Query) -> OutputMode {
    let accept = req_accept.unwrap_or_default();
    // Take the first acceptable media type (clients list preferences in order).
    for part in accept.split(',') {
        if part.contains("as=Table") {
            return OutputMode::Table {
                include_object: q.get("includeObject").is_some_and(|v| v == "Object"),
            };
        }
        if part.contains("as=PartialObjectMetadata") {
            return OutputMode::Metadata;
        }
        if part.contains("application/json") || part.contains("*/*") {
            return OutputMode::Full;
        }
    }
    OutputMode::Full
}

/// Entry point for every request.
pub(crate) async fn handle(shared: Arc<Shared>, req: hyper::Request<Incoming>) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let query = parse_query(parts.uri.query());
    let accept = parts
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    let body = match http_body_util::Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return error_response(&ApiError::bad_request(format!("cannot read body: {e}"))),
    };
    shared.faults.wait_unpaused().await;
    let user_agent = parts
        .headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let aggregated = accept
        .as_deref()
        .is_some_and(crate::discovery::wants_aggregated);
    let routed = if aggregated && (path == "/api" || path == "/apis") {
        let store = shared.store.lock();
        Ok(Target::Aggregated(crate::discovery::aggregated(
            &store.registry,
            path == "/api",
        )))
    } else {
        route(&shared, &parts.method, &path, &query, user_agent)
    };
    let (verb, resource) = match &routed {
        Ok(Target::Resource(r)) => (
            verb_of(&parts.method, r, &query).to_string(),
            match &r.subresource {
                Some(sub) => format!("{}/{sub}", r.t.plural),
                None => r.t.plural.clone(),
            },
        ),
        _ => (parts.method.as_str().to_lowercase(), path.clone()),
    };
    let (fault, latency) = shared.faults.on_request(&verb, &resource);
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    if let Some(err) = fault {
        return error_response(&err);
    }
    let target = match routed {
        Ok(t) => t,
        Err(e) => return error_response(&e),
    };
    // JSON (and YAML) bodies; protobuf only for the kinds kubectl's `create` generators send
    // ([`crate::protobuf`]); anything else (CBOR, other protobuf kinds) gets 415.
    let media = content_type.to_ascii_lowercase();
    let mut body = body;
    if !body.is_empty() && media.contains("protobuf") {
        match crate::protobuf::decode(&body) {
            Ok(v) => body = Bytes::from(serde_json::to_vec(&v).unwrap_or_default()),
            Err(crate::protobuf::DecodeError::Unsupported(e)) => {
                let mut err = ApiError::unsupported_media_type(&content_type);
                err.message = format!("{}: {e}", err.message);
                return error_response(&err);
            }
            Err(crate::protobuf::DecodeError::Malformed(e)) => {
                return error_response(&ApiError::bad_request(format!(
                    "the object provided is unrecognized: {e}"
                )));
            }
        }
    } else if !body.is_empty() && media.contains("cbor") {
        return error_response(&ApiError::unsupported_media_type(&content_type));
    }
    let mode = output_mode(accept.as_deref(), &query);
    let mut warnings = None;
    let result = match target {
        Target::Fixed(v) => Ok(json_value(StatusCode::OK, &v)),
        Target::Aggregated(v) => {
            let mut resp = json_value(StatusCode::OK, &v);
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                http::HeaderValue::from_static(crate::discovery::AGGREGATED_V2),
            );
            Ok(resp)
        }
        Target::PageNotFound => Ok(Response::builder()
            .status(StatusCode::NOT_FOUND)
            .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
            .body(
                Full::new(Bytes::from_static(b"404 page not found\n"))
                    .map_err(|never| match never {})
                    .boxed(),
            )
            .unwrap_or_default()),
        Target::Text(t) => Ok(Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "text/plain")
            .body(
                Full::new(Bytes::from(t))
                    .map_err(|never| match never {})
                    .boxed(),
            )
            .unwrap_or_default()),
        Target::Resource(route) => {
            warnings = Some(route.warnings.clone());
            dispatch(
                &shared,
                &parts.method,
                route,
                &query,
                mode,
                &content_type,
                body,
                &verb,
            )
            .await
        }
    };
    let mut resp = match result {
        Ok(resp) => resp,
        Err(e) => error_response(&e),
    };
    for w in warnings
        .map(|w| std::mem::take(&mut *w.lock()))
        .unwrap_or_default()
    {
        let text = format!("299 - {}", json!(w));
        if let Ok(v) = http::HeaderValue::from_str(&text) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    tracing::debug!(%verb, %resource, %path, code = resp.status().as_u16(), "request");
    resp
}

fn verb_of(method: &Method, r: &Route, q: &Query) -> &'static str {
    match *method {
        Method::GET if r.name.is_some() => "get",
        Method::GET if flag(q, "watch") => "watch",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if r.name.is_some() => "delete",
        Method::DELETE => "deletecollection",
        _ => "unknown",
    }
}

pub(crate) enum Target {
    Fixed(Value),
    Aggregated(Value),
    Text(String),
    /// kube-apiserver's plain-text `404 page not found` (no Status body), for paths outside
    /// every served API group.
    PageNotFound,
    Resource(Route),
}

fn route(
    shared: &Shared,
    method: &Method,
    path: &str,
    q: &Query,
    user_agent: String,
) -> Result<Target, ApiError> {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let store = shared.store.lock();
    let reg = &store.registry;
    let (group, version, rest): (&str, &str, &[&str]) = match segs.as_slice() {
        ["version"] => return Ok(Target::Fixed(crate::discovery::version())),
        ["healthz" | "readyz" | "livez", ..] => return Ok(Target::Text("ok".into())),
        ["api"] => return Ok(Target::Fixed(crate::discovery::api_versions())),
        ["apis"] => return Ok(Target::Fixed(crate::discovery::group_list(reg))),
        ["api", "v1"] => {
            return Ok(Target::Fixed(crate::discovery::resource_list(
                reg, "", "v1",
            )));
        }
        ["apis", g] => {
            return Ok(crate::discovery::group(reg, g)
                .map(Target::Fixed)
                .unwrap_or(Target::PageNotFound));
        }
        // A group nothing serves: no API handler at all.
        ["apis", g, ..] if crate::discovery::group(reg, g).is_none() => {
            return Ok(Target::PageNotFound);
        }
        ["apis", g, v] => {
            if !reg.serves_group_version(g, v) {
                return Err(ApiError::no_route(path));
            }
            return Ok(Target::Fixed(crate::discovery::resource_list(reg, g, v)));
        }
        ["openapi", "v3"] => return Ok(Target::Fixed(crate::openapi::root(reg))),
        ["openapi", "v3", gv @ ..] => {
            return crate::openapi::group_version(reg, &gv.join("/"))
                .map(Target::Fixed)
                .ok_or_else(|| ApiError::no_route(path));
        }
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", g, v, rest @ ..] => (g, v, rest),
        ["api", ..] => return Err(ApiError::no_route(path)),
        _ => return Ok(Target::PageNotFound),
    };
    let _ = method;
    // namespaces/{ns}/{resource}/... for namespaced resources.
    let (namespace, rest) = match rest {
        ["namespaces", ns, res, tail @ ..]
            if reg
                .lookup(group, version, res)
                .is_some_and(|t| t.namespaced) =>
        {
            (Some(ns.to_string()), {
                let mut v = vec![*res];
                v.extend_from_slice(tail);
                v
            })
        }
        other => (None, other.to_vec()),
    };
    let (res, name, sub) = match rest.as_slice() {
        [res] => (*res, None, None),
        [res, name] => (*res, Some(name.to_string()), None),
        [res, name, sub] => (*res, Some(name.to_string()), Some(sub.to_string())),
        _ => return Err(ApiError::no_route(path)),
    };
    let t = reg
        .lookup(group, version, res)
        .ok_or_else(|| ApiError::no_route(path))?;
    if t.namespaced && namespace.is_none() && name.is_some() {
        return Err(ApiError::no_route(path));
    }
    if let Some(sub) = &sub {
        let ok = (sub == "status" && t.status_subresource)
            || (sub == "scale" && t.scale.is_some())
            || (sub == "finalize" && t.key() == "namespaces");
        if !ok {
            return Err(ApiError::no_route(path));
        }
    }
    Ok(Target::Resource(Route {
        t,
        version: version.to_string(),
        namespace,
        name,
        subresource: sub,
        user_agent,
        strict: q.get("fieldValidation").is_some_and(|v| v == "Strict"),
        ignore_unknown: q.get("fieldValidation").is_some_and(|v| v == "Ignore"),
        warnings: Arc::default(),
    }))
}

#[allow(clippy::too_many_arguments)]
async fn dispatch(
    shared: &Arc<Shared>,
    method: &Method,
    route: Route,
    q: &Query,
    mode: OutputMode,
    content_type: &str,
    body: Bytes,
    verb: &str,
) -> Result<Response<Body>, ApiError> {
    if route.subresource.as_deref() == Some("scale") {
        return scale(shared, &route, q, verb, content_type, &body).await;
    }
    match verb {
        "get" => get(shared, &route, mode),
        "list" => list(shared, &route, q, mode),
        "watch" => crate::watch::start(shared.clone(), route, q, mode),
        "create" => {
            if route.subresource.is_some() || route.name.is_some() {
                return Err(ApiError::method_not_allowed(format!(
                    "POST is not supported on {}",
                    route.t.plural
                )));
            }
            create(shared, &route, q, &body).await
        }
        "update" => update(shared, &route, q, &body).await,
        "patch" => patch(shared, &route, q, content_type, &body).await,
        "delete" => delete(shared, &route, q, &body).await,
        "deletecollection" => delete_collection(shared, &route, q, &body).await,
        _ => Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({method})"
        ))),
    }
}

/// Render one stored object for `route.version` and the output mode.
/// The response to a write: the stored object, rendered in full for the route's version.
fn written(status: StatusCode, stored: &StoredObject, route: &Route) -> Response<Body> {
    json_bytes(status, render(stored, route, OutputMode::Full))
}

/// The object name on the URL, which `verb` requires.
fn url_name(route: &Route, verb: &str) -> Result<String, ApiError> {
    route
        .name
        .clone()
        .ok_or_else(|| ApiError::method_not_allowed(format!("{verb} requires a name")))
}

/// The stored object named `name` at the route's resource and namespace, if any.
fn stored_object(shared: &Shared, route: &Route, name: &str) -> Option<Arc<StoredObject>> {
    shared
        .store
        .lock()
        .get(&crate::convert::storage_key(&route.t), route.ns(), name)
}

/// Like [`stored_object`], or 404 NotFound.
fn existing_object(
    shared: &Shared,
    route: &Route,
    name: &str,
) -> Result<Arc<StoredObject>, ApiError> {
    stored_object(shared, route, name)
        .ok_or_else(|| ApiError::not_found(&route.t.group, &route.t.plural, name))
}

pub(crate) fn render(obj: &StoredObject, route: &Route, mode: OutputMode) -> Bytes {
    match mode {
        OutputMode::Full if crate::convert::is_identity(&route.t, &route.version) => {
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

pub(crate) fn partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj["metadata"].clone(),
    })
}

fn get(shared: &Shared, route: &Route, mode: OutputMode) -> Result<Response<Body>, ApiError> {
    let name = route.name.as_deref().unwrap_or_default();
    let obj = existing_object(shared, route, name)?;
    Ok(json_bytes(StatusCode::OK, render(&obj, route, mode)))
}

/// Label and field selectors of a list or watch.
#[derive(Debug, Clone)]
pub(crate) struct Selectors {
    pub label: LabelSelector,
    pub field: FieldSelector,
    /// Field paths name events.k8s.io/v1 fields while objects are stored in core/v1 form.
    pub events_v1: bool,
}

impl Selectors {
    pub fn parse(t: &ResourceType, q: &Query) -> Result<Self, ApiError> {
        let label = match q.get("labelSelector") {
            Some(s) => LabelSelector::parse(s)
                .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?,
            None => LabelSelector::everything(),
        };
        let field = match q.get("fieldSelector") {
            Some(s) => FieldSelector::parse(s)
                .map_err(|e| ApiError::bad_request(format!("invalid field selector: {e}")))?,
            None => FieldSelector::everything(),
        };
        let mut supported = vec!["metadata.name", "metadata.namespace"];
        match t.key().as_str() {
            "pods" => supported.extend([
                "spec.nodeName",
                "status.phase",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "status.podIP",
            ]),
            "events" | "events.k8s.io/events" => supported.extend([
                "involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "involvedObject.apiVersion",
                "involvedObject.resourceVersion",
                "involvedObject.fieldPath",
                "reason",
                "reportingComponent",
                "source",
                "type",
                "regarding.kind",
                "regarding.name",
                "regarding.namespace",
                "regarding.uid",
                "regarding.apiVersion",
                "regarding.resourceVersion",
                "regarding.fieldPath",
                "reportingController",
            ]),
            "secrets" => supported.push("type"),
            "nodes" => supported.push("spec.unschedulable"),
            "namespaces" => supported.push("status.phase"),
            _ => {}
        }
        field
            .check_supported(&supported)
            .map_err(|e| ApiError::bad_request(format!("field label not supported: {e}")))?;
        Ok(Selectors {
            label,
            field,
            events_v1: crate::convert::is_events_v1(t),
        })
    }

    pub fn is_everything(&self) -> bool {
        self.label.is_empty() && self.field.is_empty()
    }

    pub fn matches(&self, obj: &Value) -> bool {
        (self.label.is_empty() || self.label.matches_object(obj))
            && (self.field.is_empty()
                || if self.events_v1 {
                    self.field.matches_with(|path| {
                        crate::selector::field_value(
                            obj,
                            &crate::convert::event_field_to_core(path),
                        )
                    })
                } else {
                    self.field.matches(obj)
                })
    }
}

/// Continue token contents.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    rv: u64,
    ns: String,
    name: String,
}

fn encode_continue(rv: u64, key: &ObjKey) -> String {
    use base64::Engine;
    let token = ContinueToken {
        rv,
        ns: key.0.clone(),
        name: key.1.clone(),
    };
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(&token).unwrap_or_default())
}

fn decode_continue(s: &str) -> Result<ContinueToken, ApiError> {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| ApiError::bad_request("invalid continue token"))
}

fn parse_rv(s: &str) -> Result<u64, ApiError> {
    s.parse::<u64>().map_err(|_| {
        ApiError::bad_request(format!(
            "invalid resource version \"{s}\": must be an integer"
        ))
    })
}

fn list(
    shared: &Shared,
    route: &Route,
    q: &Query,
    mode: OutputMode,
) -> Result<Response<Body>, ApiError> {
    let t = &route.t;
    let sel = Selectors::parse(t, q)?;
    let limit = match q.get("limit") {
        Some(l) if !l.is_empty() => l
            .parse::<usize>()
            .map_err(|_| ApiError::bad_request(format!("invalid limit {l}")))?,
        _ => 0,
    };
    let cont = q
        .get("continue")
        .filter(|c| !c.is_empty())
        .map(|c| decode_continue(c))
        .transpose()?;
    let rv_param = q.get("resourceVersion").filter(|r| !r.is_empty()).cloned();
    let rv_match = q.get("resourceVersionMatch").cloned().unwrap_or_default();
    if cont.is_some() && rv_param.as_deref().is_some_and(|r| r != "0") {
        return Err(ApiError::bad_request(
            "specifying resource version is not allowed when using continue",
        ));
    }
    let ns = route.namespace.as_deref();
    let store = shared.store.lock();
    // Decide the snapshot: `None` = current state.
    let (snapshot_rv, after): (Option<u64>, Option<ObjKey>) = match &cont {
        Some(c) => (Some(c.rv), Some((c.ns.clone(), c.name.clone()))),
        None => match (rv_param.as_deref(), rv_match.as_str()) {
            (None, "") | (Some("0"), _) | (None, _) => (None, None),
            (Some(r), "Exact") => (Some(parse_rv(r)?), None),
            (Some(r), "NotOlderThan") | (Some(r), "") => {
                let r = parse_rv(r)?;
                if r > store.rv() {
                    return Err(ApiError::new(
                        504,
                        "Timeout",
                        format!("Too large resource version: {r}, current resource version: {}", store.rv()),
                    )
                    .with_details(json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1})));
                }
                // Legacy semantics: a limit with an explicit RV and no match is Exact.
                if limit > 0 && rv_match.is_empty() {
                    (Some(r), None)
                } else {
                    (None, None)
                }
            }
            (Some(_), other) => {
                return Err(ApiError::bad_request(format!(
                    "resourceVersionMatch: Unsupported value: \"{other}\": supported values: \"Exact\", \"NotOlderThan\""
                )));
            }
        },
    };
    let list_rv = snapshot_rv.unwrap_or(store.rv());
    if snapshot_rv.is_some_and(|r| r > store.rv()) {
        return Err(ApiError::new(504, "Timeout", "Too large resource version"));
    }
    let overlay = match snapshot_rv {
        Some(at) => store.overlay_at(&crate::convert::storage_key(t), at).map_err(|e| {
            ApiError::expired(format!(
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. (oldest available resourceVersion {})",
                e.oldest
            ))
        })?,
        None => Default::default(),
    };
    // Merge the current range with the overlay (state at the snapshot for changed keys).
    let mut items: Vec<Arc<StoredObject>> = Vec::new();
    let mut last_key: Option<ObjKey> = None;
    let mut more = false;
    {
        let in_scope =
            |k: &ObjKey| ns.is_none_or(|ns| k.0 == ns) && after.as_ref().is_none_or(|a| k > a);
        let mut current = store
            .range(&crate::convert::storage_key(t), ns, after.as_ref())
            .peekable();
        let mut over = overlay.iter().filter(|(k, _)| in_scope(k)).peekable();
        loop {
            let next: Option<(ObjKey, Option<Arc<StoredObject>>)> =
                match (current.peek(), over.peek()) {
                    (None, None) => None,
                    (Some((ck, cv)), None) => {
                        let r = ((*ck).clone(), Some((*cv).clone()));
                        current.next();
                        Some(r)
                    }
                    (None, Some((ok, ov))) => {
                        let r = ((*ok).clone(), (*ov).clone());
                        over.next();
                        Some(r)
                    }
                    (Some((ck, cv)), Some((ok, ov))) => {
                        if *ck < *ok {
                            let r = ((*ck).clone(), Some((*cv).clone()));
                            current.next();
                            Some(r)
                        } else if *ck == *ok {
                            let r = ((*ok).clone(), (*ov).clone());
                            current.next();
                            over.next();
                            Some(r)
                        } else {
                            let r = ((*ok).clone(), (*ov).clone());
                            over.next();
                            Some(r)
                        }
                    }
                };
            let Some((key, value)) = next else { break };
            let Some(obj) = value else { continue };
            if !sel.is_everything() && !sel.matches(&obj.value) {
                continue;
            }
            if limit > 0 && items.len() == limit {
                more = true;
                break;
            }
            last_key = Some(key);
            items.push(obj);
        }
    }
    drop(store);
    let continue_token = match (&last_key, more) {
        (Some(k), true) => encode_continue(list_rv, k),
        _ => String::new(),
    };
    Ok(json_bytes(
        StatusCode::OK,
        render_list(route, &items, list_rv, &continue_token, mode),
    ))
}

/// Serialise a list body.
pub(crate) fn render_list(
    route: &Route,
    items: &[Arc<StoredObject>],
    rv: u64,
    continue_token: &str,
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

fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request("request body is empty"));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(v) => Ok(v),
        Err(json_err) => serde_saphyr::from_slice::<Value>(body).map_err(|_| {
            ApiError::bad_request(format!(
                "the body of the request could not be decoded: {json_err}"
            ))
        }),
    }
}

/// Check apiVersion/kind of a body against the route and fill them in when absent.
fn check_type(route: &Route, obj: &mut Value) -> Result<(), ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be a JSON object",
        ));
    }
    let t = &route.t;
    let want_av = t.api_version(&route.version);
    match obj["apiVersion"].as_str() {
        None | Some("") => obj["apiVersion"] = json!(want_av),
        Some(av) if av == want_av => {}
        Some(av) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({want_av})"
            )));
        }
    }
    match obj["kind"].as_str() {
        None | Some("") => obj["kind"] = json!(t.kind),
        Some(k) if k == t.kind => {}
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                t.kind
            )));
        }
    }
    // Store the storage version.
    obj["apiVersion"] = json!(t.api_version(t.storage_version()));
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    Ok(())
}

fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name
            .as_bytes()
            .first()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && name
            .as_bytes()
            .last()
            .is_some_and(|b| b.is_ascii_alphanumeric())
}

/// What the real server does to a built-in kind's body when it decodes it, before admission,
/// whatever the body's encoding: a Secret's `stringData` is merged into `data` (base64, a
/// `stringData` key wins) and dropped, and a Secret without a type is `Opaque`. A
/// `stringData` value that is not a string is a 400, as upstream.
pub(crate) fn decode_builtin(route: &Route, obj: &mut Value) -> Result<(), ApiError> {
    use base64::Engine;
    let t = &route.t;
    if t.custom.is_some() || !t.group.is_empty() || t.kind != "Secret" {
        return Ok(());
    }
    let Some(map) = obj.as_object_mut() else {
        return Ok(());
    };
    if let Some(Value::Object(string_data)) = map.remove("stringData") {
        let data = map
            .entry("data")
            .or_insert_with(|| Value::Object(Default::default()));
        if !data.is_object() {
            *data = Value::Object(Default::default());
        }
        if let Value::Object(data) = data {
            for (k, v) in string_data {
                let Some(text) = v.as_str() else {
                    return Err(ApiError::bad_request(format!(
                        "Secret in version \"v1\" cannot be handled as a Secret: {}",
                        not_a_string_data_value(&v)
                    )));
                };
                data.insert(
                    k,
                    json!(base64::engine::general_purpose::STANDARD.encode(text)),
                );
            }
        }
    }
    if map
        .get("type")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        map.insert("type".into(), json!("Opaque"));
    }
    Ok(())
}

/// Go's JSON decoding error for a `stringData` value that is not a string.
fn not_a_string_data_value(v: &Value) -> String {
    let json_type = match v {
        Value::Null | Value::String(_) => "string",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    format!(
        "json: cannot unmarshal {json_type} into Go struct field Secret.stringData of type string"
    )
}

/// The real server decodes a patched object into its Go type: a patched Secret whose
/// `stringData` holds a value that is not a string fails that decoding, which it reports as
/// 422 Invalid on the field `patch` (a create with such a body is a 400, see
/// [`decode_builtin`]).
pub(crate) fn check_patched_builtin(t: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    if t.custom.is_some() || !t.group.is_empty() || t.kind != "Secret" {
        return Ok(());
    }
    let Some(Value::Object(string_data)) = obj.get("stringData") else {
        return Ok(());
    };
    let Some(bad) = string_data.values().find(|v| !v.is_string()) else {
        return Ok(());
    };
    let message = format!(
        "Invalid value: {}: {}",
        Value::String(obj.to_string()),
        not_a_string_data_value(bad)
    );
    Err(ApiError::invalid(
        "",
        "",
        "",
        vec![("patch".into(), "FieldValueInvalid".into(), message)],
    ))
}

/// The keys a Secret of each built-in type must have in `data` (upstream's
/// `ValidateSecret`; `basic-auth` needs either key, reported as both).
fn required_secret_keys(secret_type: &str) -> &'static [&'static str] {
    match secret_type {
        "kubernetes.io/tls" => &["tls.crt", "tls.key"],
        "kubernetes.io/ssh-auth" => &["ssh-privatekey"],
        "kubernetes.io/dockerconfigjson" => &[".dockerconfigjson"],
        "kubernetes.io/dockercfg" => &[".dockercfg"],
        _ => &[],
    }
}

/// Upstream's validation of built-in kinds, where it is cheap and certain: a Secret's
/// type-specific keys, and on create through events.k8s.io/v1 the fields of a new-style Event
/// (the core-only fields must be unset; `eventTime`, `type`, the reporting fields, `action`
/// and `reason` are required). Causes as `(field, reason, message)`.
fn validate_builtin(
    route: &Route,
    operation: &str,
    old: Option<&Value>,
    obj: &Value,
) -> Vec<(String, String, String)> {
    let t = &route.t;
    let mut causes = Vec::new();
    if let Some(old) = old
        && t.custom.is_none()
        && t.group == "batch"
        && t.kind == "Job"
        && job_template_changed(&old["spec"], &obj["spec"])
    {
        causes.push((
            "spec.template".into(),
            "FieldValueInvalid".into(),
            format!(
                "Invalid value: {}: field is immutable",
                obj["spec"]["template"]
            ),
        ));
    }
    let required = |causes: &mut Vec<(String, String, String)>, field: String| {
        causes.push((field, "FieldValueRequired".into(), "Required value".into()));
    };
    if t.custom.is_none() && t.group.is_empty() && t.kind == "Secret" {
        let data = obj.get("data").and_then(Value::as_object);
        let has = |k: &str| data.is_some_and(|d| d.contains_key(k));
        let secret_type = obj["type"].as_str().unwrap_or_default();
        for key in required_secret_keys(secret_type) {
            if !has(key) {
                required(&mut causes, format!("data[{key}]"));
            }
        }
        if secret_type == "kubernetes.io/basic-auth" && !has("username") && !has("password") {
            required(&mut causes, "data[username]".into());
            required(&mut causes, "data[password]".into());
        }
        if secret_type == "kubernetes.io/service-account-token"
            && obj["metadata"]["annotations"]["kubernetes.io/service-account.name"]
                .as_str()
                .is_none_or(str::is_empty)
        {
            required(
                &mut causes,
                "metadata.annotations[kubernetes.io/service-account.name]".into(),
            );
        }
    }
    if crate::convert::is_events_v1(t) && operation == "CREATE" {
        let unset = |v: &Value| match v {
            Value::Null => true,
            Value::Number(n) => n.as_i64() == Some(0),
            Value::String(s) => s.is_empty(),
            Value::Object(m) => m.values().all(|v| v.as_str().is_none_or(str::is_empty)),
            _ => false,
        };
        let text = |field: &str| obj[field].as_str().unwrap_or_default();
        if unset(&obj["eventTime"]) {
            required(&mut causes, "eventTime".into());
        }
        if !matches!(text("type"), "Normal" | "Warning") {
            causes.push((
                "type".into(),
                "FieldValueInvalid".into(),
                format!("Invalid value: \"\": has invalid value: {}", text("type")),
            ));
        }
        if !unset(&obj["eventTime"]) {
            for field in [
                "reportingController",
                "reportingInstance",
                "action",
                "reason",
            ] {
                if text(field).is_empty() {
                    required(&mut causes, field.into());
                }
            }
        }
        // Reported under the core/v1 names, as upstream validates the internal type.
        for (new, core) in DEPRECATED_EVENT_FIELDS {
            if !unset(&obj[new]) {
                causes.push((
                    core.into(),
                    "FieldValueInvalid".into(),
                    "Invalid value: \"\": needs to be unset".into(),
                ));
            }
        }
    }
    if let Some(old) = old
        && crate::convert::is_events_v1(t)
        && operation == "UPDATE"
    {
        // Through events.k8s.io/v1 only the series (and metadata) of an Event may change.
        for (new, core) in IMMUTABLE_EVENT_FIELDS
            .iter()
            .chain(DEPRECATED_EVENT_FIELDS.iter())
        {
            if old.get(*new) != obj.get(*new) {
                causes.push((
                    (*core).into(),
                    "FieldValueInvalid".into(),
                    format!("Invalid value: {}: field is immutable", obj[*new]),
                ));
            }
        }
    }
    causes
}

/// events.k8s.io/v1 fields that hold core/v1-only data, with their core/v1 names.
const DEPRECATED_EVENT_FIELDS: [(&str, &str); 4] = [
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("deprecatedSource", "source"),
];

/// events.k8s.io/v1 fields an update through that API may not change (upstream's
/// `ValidateEventUpdate`), with their core/v1 names.
const IMMUTABLE_EVENT_FIELDS: [(&str, &str); 9] = [
    ("regarding", "involvedObject"),
    ("reason", "reason"),
    ("note", "message"),
    ("type", "type"),
    ("eventTime", "eventTime"),
    ("action", "action"),
    ("related", "related"),
    ("reportingController", "reportingController"),
    ("reportingInstance", "reportingInstance"),
];

/// Upstream's `ValidateJobUpdate`: a Job's pod template is immutable, except that a
/// suspended Job may change its scheduling directives (node selector, tolerations, affinity,
/// scheduling gates) and its template's labels and annotations.
fn job_template_changed(old_spec: &Value, new_spec: &Value) -> bool {
    let (old, new) = (&old_spec["template"], &new_spec["template"]);
    if old == new {
        return false;
    }
    if new_spec["suspend"] != json!(true) {
        return true;
    }
    let without_directives = |template: &Value| {
        let mut t = template.clone();
        if let Some(meta) = t.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("labels");
            meta.remove("annotations");
        }
        if let Some(spec) = t.get_mut("spec").and_then(Value::as_object_mut) {
            for field in ["nodeSelector", "tolerations", "affinity", "schedulingGates"] {
                spec.remove(field);
            }
        }
        t
    };
    without_directives(old) != without_directives(new)
}

/// Validate an object before it is stored: metadata.name, the checks of
/// [`validate_builtin`] and, for custom resources, the CRD schema (after pruning unknown
/// fields and applying defaults, as the real server does). `operation` is the admission
/// operation (`CREATE` or `UPDATE`), `old` the stored object of an update.
pub(crate) fn validate(
    route: &Route,
    operation: &str,
    old: Option<&Value>,
    obj: &mut Value,
) -> Result<(), ApiError> {
    let t = &route.t;
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let name = name.as_str();
    let mut causes = Vec::new();
    if !is_dns_subdomain(name) {
        causes.push((
            "metadata.name".to_string(),
            "FieldValueInvalid".to_string(),
            format!("Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"),
        ));
    }
    causes.extend(validate_builtin(route, operation, old, obj));
    if let Some(custom) = &t.custom
        && let Some(schema) = custom.schemas.get(t.storage_version())
    {
        let pruned = crate::schema::prune(schema, obj);
        if route.strict && !pruned.is_empty() {
            let fields: Vec<String> = pruned
                .iter()
                .map(|p| format!("unknown field \"{p}\""))
                .collect();
            return Err(ApiError::bad_request(format!(
                "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}",
                t.kind,
                route.version,
                t.kind,
                fields.join(", ")
            )));
        }
        if !route.ignore_unknown {
            for p in &pruned {
                route.warn(format!("unknown field \"{p}\""));
            }
        }
        crate::schema::apply_defaults(schema, obj);
        causes.extend(
            crate::schema::validate(schema, obj)
                .into_iter()
                .map(|e| (e.path, e.reason.as_str().to_string(), e.message)),
        );
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&t.group, &t.kind, name, causes))
    }
}

fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let id = uuid::Uuid::new_v4();
    id.as_bytes()
        .iter()
        .take(5)
        .map(|b| ALPHABET[(*b as usize) % ALPHABET.len()] as char)
        .collect()
}

/// The answer to a dry-run write: the object as it would have been stored.
fn dry_run_response(code: StatusCode, mut obj: Value) -> Response<Body> {
    crate::store::drop_empty_metadata(&mut obj);
    json_value(code, &obj)
}

fn dry_run(q: &Query) -> bool {
    q.get("dryRun").is_some_and(|v| v == "All")
}

async fn create(
    shared: &Arc<Shared>,
    route: &Route,
    q: &Query,
    body: &[u8],
) -> Result<Response<Body>, ApiError> {
    let t = route.t.clone();
    let mut obj = parse_body(body)?;
    check_type(route, &mut obj)?;
    let meta = &mut obj["metadata"];
    if meta["resourceVersion"]
        .as_str()
        .is_some_and(|r| !r.is_empty())
    {
        return Err(ApiError::bad_request(
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
    let obj = crate::admission_glue::admit(shared, route, "CREATE", None, obj, dry_run(q)).await?;
    if dry_run(q) {
        return Ok(dry_run_response(StatusCode::CREATED, obj));
    }
    let obj = crate::patch_glue::track_update(route, q, None, obj);
    let stored = shared.mutate(|s| s.create(&t, obj))?;
    Ok(written(StatusCode::CREATED, &stored, route))
}

/// Combine the incoming object with the current one according to the status subresource rules.
fn split_status(route: &Route, current: &Value, mut incoming: Value) -> Value {
    if route.subresource.as_deref() == Some("status") {
        let mut out = current.clone();
        out["status"] = incoming.get("status").cloned().unwrap_or(Value::Null);
        if out["status"].is_null()
            && let Some(o) = out.as_object_mut()
        {
            o.remove("status");
        }
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
enum Prepared {
    /// A dry run: the response to send; nothing is stored.
    DryRun(Response<Body>),
    /// The object to store.
    Store(Value),
}

/// The steps PUT and PATCH share between computing the new object and storing it: keep the
/// status subresource separation, run admission (operation UPDATE), answer dry runs, and record
/// `Update` field ownership when `track` is set (server-side apply records its own).
async fn prepare_update(
    shared: &Arc<Shared>,
    route: &Route,
    q: &Query,
    current_view: &Value,
    new: Value,
    track: bool,
) -> Result<Prepared, ApiError> {
    let candidate = split_status(route, current_view, new);
    let candidate = crate::admission_glue::admit(
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
        return Ok(Prepared::DryRun(dry_run_response(
            StatusCode::OK,
            candidate,
        )));
    }
    Ok(Prepared::Store(if track {
        crate::patch_glue::track_update(route, q, Some(current_view), candidate)
    } else {
        candidate
    }))
}

/// The `scale` subresource ([`crate::scale`]): get, PUT or PATCH of the object's `Scale` view;
/// a write is stored as an update of the object's spec replicas.
async fn scale(
    shared: &Arc<Shared>,
    route: &Route,
    q: &Query,
    verb: &str,
    content_type: &str,
    body: &[u8],
) -> Result<Response<Body>, ApiError> {
    let t = route.t.clone();
    let Some(paths) = t.scale.clone() else {
        return Err(ApiError::not_found(&t.group, &t.plural, ""));
    };
    let name = url_name(route, verb)?;
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
        let current_view = view(route, &current.value);
        let current_scale = scale_of(&current_view);
        let requested = match verb {
            "get" => return Ok(json_value(StatusCode::OK, &current_scale)),
            "update" => parse_body(body)?,
            "patch" => {
                let patch_type = crate::patch::PatchType::from_content_type(content_type)
                    .ok_or_else(|| ApiError::unsupported_media_type(content_type))?;
                // A Scale has no lists: a strategic merge patch is a merge patch.
                let patch_type = match patch_type {
                    crate::patch::PatchType::Strategic => crate::patch::PatchType::Merge,
                    other => other,
                };
                crate::patch::patch_object(patch_type, &current_scale, body, None)
                    .map_err(|e| crate::patch_glue::patch_error(&t, &name, e))?
            }
            _ => {
                return Err(ApiError::method_not_allowed(format!(
                    "{verb} is not supported on {}/scale",
                    t.plural
                )));
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
        let base = expected.unwrap_or(current.rv);
        match shared.mutate(|s| s.update(&t, route.ns(), &name, candidate, Some(base))) {
            Ok(stored) => {
                return Ok(json_value(
                    StatusCode::OK,
                    &scale_of(&view(route, &stored.value)),
                ));
            }
            // Raced with another write and no precondition was asked for: recompute.
            Err(e) if e.code == 409 && expected.is_none() => continue,
            Err(e) => return Err(e),
        }
    }
}

async fn update(
    shared: &Arc<Shared>,
    route: &Route,
    q: &Query,
    body: &[u8],
) -> Result<Response<Body>, ApiError> {
    let t = route.t.clone();
    let name = url_name(route, "PUT")?;
    let mut obj = parse_body(body)?;
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
        Some(r) if !r.is_empty() => Some(parse_rv(r)?),
        _ => None,
    };
    loop {
        let current = existing_object(shared, route, &name)?;
        let current_view = view(route, &current.value);
        let candidate =
            match prepare_update(shared, route, q, &current_view, obj.clone(), true).await? {
                Prepared::DryRun(response) => return Ok(response),
                Prepared::Store(candidate) => candidate,
            };
        let base = expected.unwrap_or(current.rv);
        match shared.mutate(|s| s.update(&t, route.ns(), &name, candidate, Some(base))) {
            Ok(stored) => return Ok(written(StatusCode::OK, &stored, route)),
            // Unconditional update raced with another write: recompute on the new state.
            Err(e) if e.code == 409 && expected.is_none() => continue,
            Err(e) => return Err(e),
        }
    }
}

async fn patch(
    shared: &Arc<Shared>,
    route: &Route,
    q: &Query,
    content_type: &str,
    body: &[u8],
) -> Result<Response<Body>, ApiError> {
    let t = route.t.clone();
    let name = url_name(route, "PATCH")?;
    let patch_type = crate::patch::PatchType::from_content_type(content_type)
        .ok_or_else(|| ApiError::unsupported_media_type(content_type))?;
    loop {
        let current = stored_object(shared, route, &name);
        let current_view = current.as_ref().map(|c| view(route, &c.value));
        if current.is_none() && route.subresource.is_some() {
            // No create through a subresource, whatever the patch type.
            return Err(ApiError::not_found(&t.group, &t.plural, &name));
        }
        let patched =
            crate::patch_glue::apply_patch(route, q, patch_type, current_view.as_ref(), body)?;
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
            let obj = crate::admission_glue::admit(shared, route, "CREATE", None, obj, dry_run(q))
                .await?;
            if dry_run(q) {
                return Ok(dry_run_response(StatusCode::CREATED, obj));
            }
            match shared.mutate(|s| s.create(&t, obj)) {
                Ok(stored) => return Ok(written(StatusCode::CREATED, &stored, route)),
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
            && r != current.rv.to_string()
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
        match shared.mutate(|s| s.update(&t, route.ns(), &name, candidate, Some(current.rv))) {
            Ok(stored) => return Ok(written(StatusCode::OK, &stored, route)),
            // Lost a race with another writer: re-apply the patch on the new state.
            Err(e) if e.code == 409 && e.reason == "Conflict" => continue,
            Err(e) => return Err(e),
        }
    }
}

/// The DeleteOptions of a request. Without a propagation policy, batch/v1 Jobs orphan their
/// dependents (upstream's default for that version, kept for compatibility); every other
/// resource deletes them in the background.
fn delete_opts(t: &ResourceType, q: &Query, body: &[u8]) -> Result<DeleteOpts, ApiError> {
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
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "propagationPolicy: Unsupported value: \"{other}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
            )));
        }
    };
    Ok(DeleteOpts {
        propagation,
        uid: body["preconditions"]["uid"].as_str().map(str::to_string),
        resource_version: body["preconditions"]["resourceVersion"]
            .as_str()
            .map(str::to_string),
    })
}

async fn delete(
    shared: &Arc<Shared>,
    route: &Route,
    q: &Query,
    body: &[u8],
) -> Result<Response<Body>, ApiError> {
    let t = route.t.clone();
    let name = route.name.clone().unwrap_or_default();
    if route.subresource.is_some() {
        return Err(ApiError::method_not_allowed(
            "DELETE is not supported on subresources",
        ));
    }
    let opts = delete_opts(&t, q, body)?;
    let current = existing_object(shared, route, &name)?;
    let current_view = view(route, &current.value);
    crate::admission_glue::admit(
        shared,
        route,
        "DELETE",
        Some(&current_view),
        current_view.clone(),
        dry_run(q),
    )
    .await?;
    if dry_run(q) {
        return Ok(json_bytes(
            StatusCode::OK,
            render(&current, route, OutputMode::Full),
        ));
    }
    let last = shared.mutate(|s| s.delete(&t, route.ns(), &name, &opts))?;
    Ok(json_bytes(
        StatusCode::OK,
        render(&last, route, OutputMode::Full),
    ))
}

async fn delete_collection(
    shared: &Arc<Shared>,
    route: &Route,
    q: &Query,
    body: &[u8],
) -> Result<Response<Body>, ApiError> {
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
        let v_view = view(route, &v.value);
        crate::admission_glue::admit(
            shared,
            &r,
            "DELETE",
            Some(&v_view),
            v_view.clone(),
            dry_run(q),
        )
        .await?;
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
    Ok(json_bytes(
        StatusCode::OK,
        render_list(route, &deleted, rv, "", OutputMode::Full),
    ))
}
