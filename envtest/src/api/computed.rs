//! Answers computed on request rather than read from the store: `componentstatuses` (get and
//! list, as kube-apiserver answers them where no scheduler or controller-manager serves its
//! health port), `serviceaccounts/{name}/token` (TokenRequest), and the reviews of
//! [`super::reviews`] (TokenReview of those tokens, SubjectAccessReview against the stored RBAC
//! objects).

use std::sync::OnceLock;

use http::{Response, StatusCode};
use serde_json::{Value, json};

use super::decode::parse_body;
use super::read::existing_object;
use super::response::json_value;
use super::route::Route;
use super::{Body, Call};
use crate::error::ApiError;

/// The component statuses: kube-apiserver probes the scheduler's and controller-manager's
/// health ports (neither listens on a test control plane) and its storage (kcr-envtest's store
/// is in the process, and always answers).
fn component_statuses() -> Vec<Value> {
    let refused = |name: &str, port: u16| {
        json!({"metadata": {"name": name}, "conditions": [{"type": "Healthy", "status": "False",
            "message": format!("Get \"https://127.0.0.1:{port}/healthz\": dial tcp 127.0.0.1:{port}: connect: connection refused")}]})
    };
    vec![
        refused("scheduler", 10259),
        refused("controller-manager", 10257),
        json!({"metadata": {"name": "etcd-0"},
            "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]}),
    ]
}

/// `GET /api/v1/componentstatuses[/{name}]`; other verbs answer 405 before this is reached.
pub(crate) fn component_status(route: &Route) -> Result<Response<Body>, ApiError> {
    let items = component_statuses();
    match route.name.as_deref() {
        None => Ok(json_value(
            StatusCode::OK,
            &json!({"kind": "ComponentStatusList", "apiVersion": "v1", "metadata": {},
                "items": items}),
        )),
        Some(name) => {
            let mut item = items
                .into_iter()
                .find(|i| i["metadata"]["name"] == name)
                .ok_or_else(|| ApiError::not_found("", "componentstatus", name))?;
            let mut out = json!({"kind": "ComponentStatus", "apiVersion": "v1"});
            if let (Some(out), Some(item)) = (out.as_object_mut(), item.as_object_mut()) {
                out.append(item);
            }
            Ok(json_value(StatusCode::OK, &out))
        }
    }
}

/// Shortest and longest token lifetime a TokenRequest may ask for.
const MIN_EXPIRATION: i64 = 600;
const MAX_EXPIRATION: i64 = 1 << 32;
/// Lifetime of a token whose request names none.
const DEFAULT_EXPIRATION: i64 = 3600;
/// The issuer a token names (kube-apiserver's default `--service-account-issuer`).
const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// The key tokens are signed with (HMAC-SHA256), one per process: only this process can check
/// a signature (its TokenReview does, [`verified_claims`]).
fn signing_key() -> &'static ring::hmac::Key {
    static KEY: OnceLock<ring::hmac::Key> = OnceLock::new();
    KEY.get_or_init(|| {
        let secret = [
            uuid::Uuid::new_v4().into_bytes(),
            uuid::Uuid::new_v4().into_bytes(),
        ]
        .concat();
        ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &secret)
    })
}

fn b64url(bytes: &[u8]) -> String {
    base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, bytes)
}

/// A JWT with the claims kube-apiserver puts in a service account token.
fn token(claims: &Value) -> String {
    let header = b64url(br#"{"alg":"HS256","kid":"kcr-envtest"}"#);
    let payload = b64url(claims.to_string().as_bytes());
    let signed = format!("{header}.{payload}");
    let signature = ring::hmac::sign(signing_key(), signed.as_bytes());
    format!("{signed}.{}", b64url(signature.as_ref()))
}

/// The claims of `token` if this process signed it (the signature alone: expiry and audiences
/// are the reviewer's to check).
pub(super) fn verified_claims(token: &str) -> Option<Value> {
    let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let (signed, signature) = token.rsplit_once('.')?;
    let (_header, payload) = signed.split_once('.')?;
    let signature = base64::Engine::decode(engine, signature).ok()?;
    ring::hmac::verify(signing_key(), signed.as_bytes(), &signature).ok()?;
    serde_json::from_slice(&base64::Engine::decode(engine, payload).ok()?).ok()
}

/// The audiences of a token whose request names none (kube-apiserver's default
/// `--api-audiences`: the issuer).
pub(super) fn default_audiences() -> Vec<String> {
    vec![ISSUER.to_owned()]
}

/// `POST .../serviceaccounts/{name}/token`: a TokenRequest for an existing ServiceAccount,
/// answered with a token (201) and stored nowhere, as upstream.
pub(crate) fn token_request(call: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let route = call.route;
    let name = route.name.as_deref().unwrap_or_default();
    let sa = existing_object(call.shared, route, name)?;
    let mut req = parse_body(call.body, "TokenRequest")?;
    let invalid = |field: &str, message: String| {
        ApiError::invalid(
            "authentication.k8s.io",
            "TokenRequest",
            "",
            vec![(field.into(), "FieldValueInvalid".into(), message)],
        )
    };
    if let Some(kind) = req["kind"].as_str()
        && kind != "TokenRequest"
    {
        return Err(ApiError::bad_request(format!(
            "the body is a {kind}, not a TokenRequest"
        )));
    }
    let expiration = match &req["spec"]["expirationSeconds"] {
        Value::Null => DEFAULT_EXPIRATION,
        v => v.as_i64().ok_or_else(|| {
            invalid(
                "spec.expirationSeconds",
                format!("Invalid value: {v}: must be an integer"),
            )
        })?,
    };
    if expiration < MIN_EXPIRATION {
        return Err(invalid(
            "spec.expirationSeconds",
            format!("Invalid value: {expiration}: may not specify a duration less than 10 minutes"),
        ));
    }
    if expiration > MAX_EXPIRATION {
        return Err(invalid(
            "spec.expirationSeconds",
            format!(
                "Invalid value: {expiration}: may not specify a duration larger than 2^32 seconds"
            ),
        ));
    }
    let audiences = match req["spec"]["audiences"].as_array() {
        Some(a) if !a.is_empty() => Value::Array(a.clone()),
        _ => json!([ISSUER]),
    };
    let now = jiff::Timestamp::now().as_second();
    let expires = now + expiration;
    let ns = route.ns();
    let uid = sa.uid().to_string();
    let claims = json!({
        "aud": audiences, "exp": expires, "iat": now, "nbf": now, "iss": ISSUER,
        "sub": format!("system:serviceaccount:{ns}:{name}"),
        "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": name, "uid": uid}},
    });
    let at = |secs: i64| {
        jiff::Timestamp::from_second(secs)
            .map(|t| t.to_string())
            .unwrap_or_default()
    };
    let bound = req["spec"].get("boundObjectRef").cloned();
    req["spec"] = json!({"audiences": audiences, "expirationSeconds": expiration,
        "boundObjectRef": bound.unwrap_or(Value::Null)});
    let answer = json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": ns, "uid": uid, "creationTimestamp": at(now)},
        "spec": req["spec"],
        "status": {"token": token(&claims), "expirationTimestamp": at(expires)},
    });
    Ok(json_value(StatusCode::CREATED, &answer))
}

/// Whether `route` is answered here rather than from the store.
pub(crate) fn is_computed(route: &Route) -> bool {
    super::reviews::is_review(route)
        || route.t.key() == "componentstatuses"
        || (route.t.key() == "serviceaccounts" && route.subresource.as_deref() == Some("token"))
}

/// Answers a computed route (see [`is_computed`]) for `verb`.
pub(crate) fn answer(call: &Call<'_>, verb: &str) -> Result<Response<Body>, ApiError> {
    if super::reviews::is_review(call.route) {
        return super::reviews::answer(call, verb);
    }
    match (call.route.subresource.as_deref(), verb) {
        (Some("token"), "create") => token_request(call),
        (None, "get" | "list") => component_status(call.route),
        _ => Err(ApiError::method_not_allowed()),
    }
}
