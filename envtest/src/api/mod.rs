//! The REST API over HTTP: every request enters at [`handle`], which reads the body, applies
//! faults, routes the path ([`route`]), decodes the body ([`decode`]) and runs the verb; the
//! answer is rendered by [`response`].
//!
//! | module | concern |
//! |---|---|
//! | this module | the shared server state, the entry point, verb dispatch |
//! | [`query`] | query string parsing, output mode, flags |
//! | [`route`] | paths to documents and resources, the verb of a request |
//! | [`response`] | JSON and text responses, Status errors, rendering of objects and lists |
//! | [`pagination`] | limit/continue, resourceVersion semantics, snapshot merge |
//! | [`selectors`] | label and field selectors of a request, per the resource's descriptor |
//! | [`decode`] | body decoding (JSON, YAML, protobuf), apiVersion/kind checks, Secret decoding |
//! | [`validate`] | object validation (name, built-in checks, CRD schemas) |
//! | [`read`], [`create`], [`update`], [`scale`], [`delete`], [`watch`] | the verbs |
//! | [`admission`], [`patch`], [`conversion`] | the wiring of the admission, patch and CRD version conversion engines into the verbs |
//!
//! Dependencies point one way: the entry point uses the verbs, the verbs use the wiring
//! modules, and everything uses the plumbing (query, route, response, decode, validate); the
//! engines ([`crate::patch`], [`crate::admission`], [`crate::table`], [`crate::selector`]) know
//! nothing of HTTP.

mod admission;
mod computed;
mod conversion;
mod create;
mod decode;
mod delete;
mod options;
mod pagination;
mod patch;
mod pods;
mod query;
mod read;
mod response;
mod reviews;
mod route;
mod scale;
mod selectors;
mod update;
mod validate;
mod validate_fields;
mod validate_pod;
mod validate_rbac;
mod validate_service;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::watch as signal;

pub(crate) use response::error_response;

use crate::error::ApiError;
use crate::faults::Faults;
use crate::store::Store;
use query::{OutputMode, Query, output_mode, parse_query};
use response::{json_value, text};
use route::{Route, Target, route, verb_of};

/// Largest accepted request body.
const MAX_BODY: usize = 32 * 1024 * 1024;

pub(crate) use response::Body;

/// State shared by all request handlers of one server.
pub(crate) struct Shared {
    /// The objects.
    pub store: Arc<Mutex<Store>>,
    /// The latest resourceVersion, published after every write (watchers wait on it).
    pub rv_tx: Arc<signal::Sender<u64>>,
    /// Fault injection and request counters.
    pub faults: Faults,
    /// How often watches with bookmarks get one.
    pub bookmark_interval: Duration,
    /// Set to `true` to stop the server (and end its watches).
    pub shutdown: signal::Sender<bool>,
}

impl Shared {
    /// Run `f` on the locked store and wake watchers if it wrote anything.
    pub fn mutate<R>(&self, f: impl FnOnce(&mut Store) -> R) -> R {
        let (result, rv) = {
            let mut store = self.store.lock();
            let before = store.rv();
            let result = f(&mut store);
            let after = store.rv();
            (result, (after != before).then_some(after))
        };
        if let Some(rv) = rv {
            self.rv_tx.send_replace(rv);
        }
        result
    }
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
        route(&shared.store.lock().registry, &path, &query, user_agent)
    };
    let (verb, resource, namespace) = match &routed {
        Ok(Target::Resource(r)) => (
            verb_of(&parts.method, r, &query).to_string(),
            match &r.subresource {
                Some(sub) => format!("{}/{sub}", r.t.plural),
                None => r.t.plural.clone(),
            },
            r.namespace.clone(),
        ),
        _ => (parts.method.as_str().to_lowercase(), path.clone(), None),
    };
    // A watch is open from the moment it is counted: `close_watches` after that (while the
    // watch is on its way to its stream) ends it as soon as it starts, as on the real backend's
    // proxy. Subscribed before counting, so no close can fall between the two.
    let closes = shared.faults.close_watches_receiver();
    let (fault, latency) = shared
        .faults
        .on_request(&verb, &resource, namespace.as_deref());
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
    // JSON (and YAML) bodies; protobuf ones of built-in kinds are decoded to JSON first;
    // anything else (CBOR, protobuf of other kinds) gets 415.
    let body = match decode::decode_protobuf(&content_type, body) {
        Ok(body) => body,
        Err(e) => return error_response(&e),
    };
    let mode = output_mode(accept.as_deref(), &query);
    // A Go client that prefers protobuf gets the answers of built-in kinds in protobuf, watch
    // streams included. For custom resources (no protobuf form) objects and watch streams stay
    // JSON while errors, a Status, are protobuf: as upstream negotiates them.
    let protobuf =
        matches!(target, Target::Resource(_)) && decode::wants_protobuf(accept.as_deref());
    let protobuf_answer = protobuf && verb != "watch";
    let protobuf_watch = match &target {
        Target::Resource(r) if protobuf && verb == "watch" => {
            mode == OutputMode::Metadata
                || crate::protobuf::has_table(&r.t.api_version(&r.version), &r.t.kind)
        }
        _ => false,
    };
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
        Target::PageNotFound => Ok(text(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            Bytes::from_static(b"404 page not found\n"),
        )),
        Target::Text(t) => Ok(text(StatusCode::OK, "text/plain", t)),
        Target::Resource(route) => {
            warnings = Some(route.warnings.clone());
            dispatch(
                &shared,
                route,
                &query,
                mode,
                &content_type,
                body,
                &verb,
                closes,
            )
            .await
        }
    };
    let mut resp = match result {
        Ok(resp) => resp,
        Err(e) => error_response(&e),
    };
    if protobuf_answer {
        resp = decode::protobuf_answer(resp).await;
    } else if protobuf_watch {
        resp = decode::protobuf_watch(resp).await;
    }
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

/// One resource request, as the verbs that take a body get it.
#[derive(Clone, Copy)]
pub(crate) struct Call<'a> {
    /// The server state.
    pub shared: &'a Arc<Shared>,
    /// The routed request.
    pub route: &'a Route,
    /// Its query parameters.
    pub q: &'a Query,
    /// Its `Content-Type`.
    pub content_type: &'a str,
    /// Its body, decoded to JSON where it was protobuf.
    pub body: &'a [u8],
    /// The output mode the `Accept` header asks for (writes answer in it too).
    pub mode: OutputMode,
}

/// 405 MethodNotAllowed unless the resource (or the subresource) allows `verb`, as discovery
/// lists its verbs (`namespaces` have no `deletecollection`, `componentstatuses` only `get` and
/// `list`, `serviceaccounts/token` only `create`).
fn allowed(route: &Route, verb: &str) -> Result<(), ApiError> {
    let allows = match route.subresource.as_deref() {
        None => route.t.allows(verb),
        Some(sub) => route
            .t
            .subresource(sub)
            .is_none_or(|s| s.verbs.contains(&verb)),
    };
    if allows {
        return Ok(());
    }
    Err(if verb == "watch" {
        ApiError::new(
            405,
            "MethodNotAllowed",
            format!(
                "watch is not supported on resources of kind \"{}\"",
                route.t.plural
            ),
        )
        .with_details(json!({"kind": route.t.plural}))
    } else {
        ApiError::method_not_allowed()
    })
}

/// Runs a resource request's verb.
#[allow(clippy::too_many_arguments)]
async fn dispatch(
    shared: &Arc<Shared>,
    route: Route,
    q: &Query,
    mode: OutputMode,
    content_type: &str,
    body: Bytes,
    verb: &str,
    closes: tokio::sync::watch::Receiver<u64>,
) -> Result<Response<Body>, ApiError> {
    let call = Call {
        shared,
        route: &route,
        q,
        content_type,
        body: &body,
        mode,
    };
    allowed(&route, verb)?;
    if computed::is_computed(&route) {
        return computed::answer(&call, verb);
    }
    if pods::is_pod_action(&call) {
        return pods::answer(&call);
    }
    if route.subresource.as_deref() == Some("scale") {
        return scale::scale(&call, verb).await;
    }
    match verb {
        "get" => read::get(shared, &route, q, mode).await,
        "list" => read::list(shared, &route, q, mode).await,
        "watch" => watch::start(shared.clone(), route.clone(), q, mode, closes),
        "create" => {
            if route.subresource.is_some() || route.name.is_some() {
                return Err(ApiError::method_not_allowed());
            }
            decode::check_write_media_type(content_type)?;
            create::create(&call).await
        }
        "update" => {
            decode::check_write_media_type(content_type)?;
            update::update(&call).await
        }
        "patch" => update::patch(&call).await,
        "delete" => delete::delete(&call).await,
        "deletecollection" => delete::delete_collection(&call).await,
        _ => Err(ApiError::method_not_allowed()),
    }
}
