//! The admission webhook server: AdmissionReview v1 over HTTPS (rustls).
//!
//! - `POST /mutate-nodes-lailin-xyz-v1-nodepool` ([`MUTATE_PATH`]): answers with the defaulting
//!   JSON patch of [`crate::validation::defaults`].
//! - `POST /validate-nodes-lailin-xyz-v1-nodepool` ([`VALIDATE_PATH`]): allows, or denies with
//!   every violation of [`crate::validation::validate`]: the message is the API server's usual
//!   `NodePool.nodes.lailin.xyz "x" is invalid: [...]` line, and the status carries code 422,
//!   reason `Invalid` and one cause per violation with its field path (as controller-runtime
//!   does when a validator returns an `Invalid` error).
//!
//! Updates of a pool that is being deleted are always allowed, so that the operator can release
//! its finalizer even from a pool created before the webhook existed. A request body that is
//! not an AdmissionReview gets an AdmissionReview that refuses it (never a panic, never a hang).
//!
//! [`serve`] runs the HTTPS accept loop (HTTP/1.1 and HTTP/2) until a shutdown future resolves;
//! the certificate comes from [`crate::tls`] and is reloaded when its files change.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::response::{StatusCause, StatusDetails};
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::crd::{GROUP, KIND, PLURAL};
use crate::validation::{defaults, summarize, validate};

/// Path of the mutating (defaulting) webhook.
pub const MUTATE_PATH: &str = "/mutate-nodes-lailin-xyz-v1-nodepool";
/// Path of the validating webhook.
pub const VALIDATE_PATH: &str = "/validate-nodes-lailin-xyz-v1-nodepool";
/// Default port of the webhook server.
pub const DEFAULT_PORT: u16 = 9443;

/// Webhook server errors.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The listener failed.
    #[error("webhook server: {0}")]
    Io(#[from] std::io::Error),
}

fn parse(body: &[u8]) -> Result<AdmissionRequest<DynamicObject>, Box<AdmissionResponse>> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body).map_err(|e| {
        Box::new(AdmissionResponse::invalid(format!(
            "not an AdmissionReview: {e}"
        )))
    })?;
    review.try_into().map_err(|e| {
        Box::new(AdmissionResponse::invalid(format!(
            "AdmissionReview without request: {e}"
        )))
    })
}

fn object_json(req: &AdmissionRequest<DynamicObject>) -> Option<serde_json::Value> {
    req.object
        .as_ref()
        .and_then(|o| serde_json::to_value(o).ok())
}

/// Answers a mutating AdmissionReview (JSON body) with the defaulting patch.
pub fn mutate_review(body: &[u8]) -> AdmissionReview<DynamicObject> {
    let req = match parse(body) {
        Ok(r) => r,
        Err(resp) => return resp.into_review(),
    };
    let resp = AdmissionResponse::from(&req);
    let Some(obj) = object_json(&req) else {
        return resp.into_review();
    };
    let ops = defaults(&obj);
    if ops.is_empty() {
        return resp.into_review();
    }
    match resp.clone().with_patch(json_patch::Patch(ops)) {
        Ok(r) => r.into_review(),
        Err(e) => resp
            .deny(format!("cannot serialise the defaulting patch: {e}"))
            .into_review(),
    }
}

/// Answers a validating AdmissionReview (JSON body).
pub fn validate_review(body: &[u8]) -> AdmissionReview<DynamicObject> {
    let req = match parse(body) {
        Ok(r) => r,
        Err(resp) => return resp.into_review(),
    };
    let resp = AdmissionResponse::from(&req);
    if matches!(req.operation, Operation::Delete | Operation::Connect) {
        return resp.into_review();
    }
    let Some(obj) = object_json(&req) else {
        return resp.into_review();
    };
    if obj
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
    {
        return resp.into_review();
    }
    let errors = validate(&obj);
    if errors.is_empty() {
        return resp.into_review();
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(|v| v.as_str())
        .unwrap_or(&req.name)
        .to_owned();
    let message = summarize(&name, &errors);
    let mut denied = resp.deny(&message);
    denied.result.code = 422;
    denied.result.reason = "Invalid".to_owned();
    denied.result.details = Some(StatusDetails {
        name,
        group: GROUP.to_owned(),
        kind: KIND.to_owned(),
        uid: String::new(),
        causes: errors
            .iter()
            .map(|e| StatusCause {
                reason: e.reason().to_owned(),
                message: e.message(),
                field: e.field.clone(),
            })
            .collect(),
        retry_after_seconds: 0,
    });
    denied.into_review()
}

/// The AdmissionReview as the API server expects it on the wire. kube-core serialises the
/// patch (`Vec<u8>`) as a JSON array of numbers; Kubernetes' `[]byte` wire form is a base64
/// string, so it is rewritten here.
pub fn review_to_json(review: &AdmissionReview<DynamicObject>) -> serde_json::Value {
    use base64::Engine;
    let mut v = serde_json::to_value(review).unwrap_or_else(|_| serde_json::json!({}));
    if let Some(patch) = review.response.as_ref().and_then(|r| r.patch.as_ref()) {
        v["response"]["patch"] =
            serde_json::Value::String(base64::engine::general_purpose::STANDARD.encode(patch));
    }
    v
}

fn json_reply(review: AdmissionReview<DynamicObject>) -> axum::response::Response {
    use axum::response::IntoResponse;
    axum::Json(review_to_json(&review)).into_response()
}

/// The webhook's HTTP routes (without TLS).
pub fn router() -> Router {
    Router::new()
        .route(
            MUTATE_PATH,
            post(|body: Bytes| async move { json_reply(mutate_review(&body)) }),
        )
        .route(
            VALIDATE_PATH,
            post(|body: Bytes| async move { json_reply(validate_review(&body)) }),
        )
}

/// Serves the webhook over HTTPS on `listener` until `shutdown` resolves. Connections that are
/// open at that point are finished in the background.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), WebhookError> {
    let acceptor = TlsAcceptor::from(tls);
    let router = router();
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            _ = &mut shutdown => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Transient accept errors (EMFILE, aborted handshakes) must not stop the server.
                    tracing::warn!(error = %e, "webhook accept failed");
                    continue;
                }
            },
        };
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let stream = match acceptor.accept(tcp).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "webhook TLS handshake failed");
                    return;
                }
            };
            if let Err(e) = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%peer, error = %e, "webhook connection ended with an error");
            }
        });
    }
}

/// Binds `addr` and serves the webhook there (see [`serve`]); returns the bound address and the
/// server task.
pub async fn spawn(
    addr: SocketAddr,
    tls: Arc<ServerConfig>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<
    (
        SocketAddr,
        tokio::task::JoinHandle<Result<(), WebhookError>>,
    ),
    WebhookError,
> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let task = tokio::spawn(serve(listener, tls, shutdown));
    Ok((local, task))
}

/// The resource the webhook configurations must match: `nodes.lailin.xyz/v1 nodepools`.
pub fn webhook_resource() -> (&'static str, &'static str, &'static str) {
    (GROUP, crate::crd::VERSION, PLURAL)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn review(op: &str, object: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u-1",
                "kind": {"group": "nodes.lailin.xyz", "version": "v1", "kind": "NodePool"},
                "resource": {"group": "nodes.lailin.xyz", "version": "v1", "resource": "nodepools"},
                "name": object.pointer("/metadata/name").cloned().unwrap_or(json!("")),
                "operation": op,
                "userInfo": {"username": "tester"},
                "object": object,
                "oldObject": null,
                "dryRun": false
            }
        }))
        .unwrap()
    }

    fn pool(name: &str, spec: Value) -> Value {
        json!({"apiVersion": "nodes.lailin.xyz/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec})
    }

    fn response(r: AdmissionReview<DynamicObject>) -> Value {
        review_to_json(&r)["response"].clone()
    }

    #[test]
    fn mutate_returns_a_json_patch() {
        let r = response(mutate_review(&review("CREATE", pool("w", json!({})))));
        assert_eq!(r["uid"], "u-1");
        assert_eq!(r["allowed"], true);
        assert_eq!(r["patchType"], "JSONPatch");
        let patch: Value =
            serde_json::from_slice(&base64_decode(r["patch"].as_str().unwrap())).unwrap();
        assert_eq!(
            patch,
            json!([
                {"op": "add", "path": "/metadata/labels", "value": {"node-pool.lailin.xyz": "w"}},
                {"op": "add", "path": "/spec/handler", "value": "runc"}
            ])
        );
        // Nothing to default: no patch.
        let mut full = pool("w", json!({"handler": "kata"}));
        full["metadata"]["labels"] = json!({"a": "b"});
        let r = response(mutate_review(&review("UPDATE", full)));
        assert_eq!(r["allowed"], true);
        assert!(r.get("patch").is_none());
    }

    fn base64_decode(s: &str) -> Vec<u8> {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.decode(s).unwrap()
    }

    #[test]
    fn validate_allows_valid_and_denies_with_every_cause() {
        let ok = response(validate_review(&review(
            "CREATE",
            pool(
                "w",
                json!({"labels": {"node-pool.lailin.xyz/w": "1"}, "handler": "runc"}),
            ),
        )));
        assert_eq!(ok["allowed"], true);

        let bad = response(validate_review(&review(
            "UPDATE",
            pool(
                "w",
                json!({"labels": {"xxx": "1"}, "taints": [{"key": "", "effect": "NoSchedule"}], "handler": "runc"}),
            ),
        )));
        assert_eq!(bad["allowed"], false);
        assert_eq!(bad["status"]["code"], 422);
        assert_eq!(bad["status"]["reason"], "Invalid");
        let msg = bad["status"]["message"].as_str().unwrap();
        assert!(
            msg.starts_with("NodePool.nodes.lailin.xyz \"w\" is invalid: ["),
            "{msg}"
        );
        assert!(msg.contains("spec.labels[xxx]"), "{msg}");
        assert!(msg.contains("spec.taints[0].key: Required value"), "{msg}");
        let causes: Vec<&str> = bad["status"]["details"]["causes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["field"].as_str().unwrap())
            .collect();
        assert_eq!(causes, vec!["spec.labels[xxx]", "spec.taints[0].key"]);
    }

    #[test]
    fn deletes_and_pools_being_deleted_are_allowed() {
        let invalid = pool("w", json!({"labels": {"xxx": "1"}, "handler": "runc"}));
        let r = response(validate_review(&review("DELETE", invalid.clone())));
        assert_eq!(r["allowed"], true);
        let mut deleting = invalid;
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let r = response(validate_review(&review("UPDATE", deleting)));
        assert_eq!(r["allowed"], true);
    }

    #[test]
    fn garbage_bodies_are_refused_not_panicked_on() {
        for body in [
            &b"not json"[..],
            b"{}",
            b"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}",
        ] {
            for r in [mutate_review(body), validate_review(body)] {
                let r = response(r);
                assert_eq!(r["allowed"], false, "{r}");
                assert_eq!(r["status"]["reason"], "InvalidRequest");
            }
        }
    }
}
