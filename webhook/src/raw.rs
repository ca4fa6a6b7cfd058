//! Raw admission handlers: any `AdmissionReview`, of any kind (several kinds on one path), with
//! kube's own types, as controller-runtime's `admission.Handler`.
//!
//! An [`AdmissionHandler`] gets the request as an [`AdmissionRequest<DynamicObject>`] (the
//! object and old object untyped, `kind` and `resource` saying what they are) and an
//! [`AdmissionContext`] (the path, and the client certificate when the server requires mutual
//! TLS), and returns an [`AdmissionResponse`] (built with `AdmissionResponse::from(&request)`,
//! then `deny`, `with_patch`, warnings). Register it on any path with
//! [`WebhookServer::admission_handler`](crate::WebhookServer::admission_handler), and list the
//! resources it admits in the webhook configurations with
//! [`WebhookServer::add_registration`](crate::WebhookServer::add_registration).
//!
//! ```no_run
//! use kcr_webhook::raw::{AdmissionContext, admission_fn};
//! use kube::core::DynamicObject;
//! use kube::core::admission::{AdmissionRequest, AdmissionResponse};
//!
//! # fn f(server: &kcr_webhook::WebhookServer) -> Result<(), kcr_webhook::WebhookError> {
//! // Refuse ConfigMaps and Secrets labelled `frozen`, whoever sends them.
//! server.admission_handler(
//!     "/validate-frozen",
//!     admission_fn(|ctx: AdmissionContext, req: AdmissionRequest<DynamicObject>| async move {
//!         let frozen = req.object.as_ref().is_some_and(|o| {
//!             o.metadata.labels.as_ref().is_some_and(|l| l.contains_key("frozen"))
//!         });
//!         let response = AdmissionResponse::from(&req);
//!         if frozen {
//!             let caller = ctx.client_certificate().map(|c| c.subject()).unwrap_or_default();
//!             response.deny(format!("{} {} is frozen (called by {caller})", req.kind.kind, req.name))
//!         } else {
//!             response
//!         }
//!     }),
//! )?;
//! # Ok(()) }
//! ```
//!
//! A body that is not an AdmissionReview of `admission.k8s.io/v1` with a request and a uid is
//! answered with HTTP 400 and a `Status` (there is no uid to answer to); a request that does not
//! decode (an object that is not an object) gets a refusing review with status 400. The
//! response's `uid` is always the request's.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use kcr_tls::ClientCertificate;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};

use crate::admission::ADMISSION_API_VERSION;
use crate::endpoint::{Endpoint, Reply};

/// What a raw handler knows besides the request.
#[derive(Debug, Clone)]
pub struct AdmissionContext {
    path: Arc<str>,
    client_certificate: Option<Arc<ClientCertificate>>,
}

impl AdmissionContext {
    /// A context for `path` with an optional verified client certificate (for calling a
    /// handler directly, in a unit test for instance).
    pub fn new(path: &str, client_certificate: Option<Arc<ClientCertificate>>) -> Self {
        AdmissionContext {
            path: path.into(),
            client_certificate,
        }
    }

    /// The path the request came in on.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The verified certificate of the caller, when the server requires client certificates
    /// ([`TlsOptions::client_ca_file`](kcr_tls::TlsOptions::client_ca_file)); `None` otherwise.
    pub fn client_certificate(&self) -> Option<&ClientCertificate> {
        self.client_certificate.as_deref()
    }
}

/// A raw admission handler: see the [module docs](self). A panic in it is answered with HTTP
/// 500 and counted in `controller_runtime_webhook_panics_total`.
pub trait AdmissionHandler: Send + Sync + 'static {
    /// Answers one request.
    fn handle(
        &self,
        ctx: AdmissionContext,
        request: AdmissionRequest<DynamicObject>,
    ) -> impl Future<Output = AdmissionResponse> + Send;
}

/// A closure as an [`AdmissionHandler`]: from [`admission_fn`].
#[derive(Clone)]
pub struct AdmissionFn<F>(F);

impl<F> std::fmt::Debug for AdmissionFn<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdmissionFn")
    }
}

/// Makes an [`AdmissionHandler`] of an async closure taking the context and the request.
pub fn admission_fn<F, Fut>(f: F) -> AdmissionFn<F>
where
    F: Fn(AdmissionContext, AdmissionRequest<DynamicObject>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = AdmissionResponse> + Send,
{
    AdmissionFn(f)
}

impl<F, Fut> AdmissionHandler for AdmissionFn<F>
where
    F: Fn(AdmissionContext, AdmissionRequest<DynamicObject>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = AdmissionResponse> + Send,
{
    fn handle(
        &self,
        ctx: AdmissionContext,
        request: AdmissionRequest<DynamicObject>,
    ) -> impl Future<Output = AdmissionResponse> + Send {
        (self.0)(ctx, request)
    }
}

/// The endpoint serving an [`AdmissionHandler`].
pub(crate) struct RawEndpoint<H> {
    pub(crate) path: Arc<str>,
    pub(crate) handler: H,
}

fn review(response: &AdmissionResponse) -> Reply {
    let value = serde_json::json!({
        "apiVersion": ADMISSION_API_VERSION,
        "kind": "AdmissionReview",
        "response": response,
    });
    Reply::json(http::StatusCode::OK, &value)
}

impl<H: AdmissionHandler> Endpoint for RawEndpoint<H> {
    fn serve(
        &self,
        body: bytes::Bytes,
        peer: Option<Arc<ClientCertificate>>,
    ) -> BoxFuture<'_, Reply> {
        Box::pin(async move {
            let path = &*self.path;
            let (request, uid) = match crate::admission::parse_review(path, &body) {
                Ok(p) => p,
                Err(reply) => return reply,
            };
            let request = match <AdmissionRequest<DynamicObject> as serde::Deserialize>::deserialize(
                &request,
            ) {
                Ok(r) => r,
                Err(e) => {
                    let mut refusal = AdmissionResponse::invalid(format!(
                        "webhook {path}: cannot decode the request: {e}"
                    ));
                    refusal.uid = uid;
                    refusal.result.code = 400;
                    refusal.result.reason = "BadRequest".into();
                    return review(&refusal);
                }
            };
            let ctx = AdmissionContext {
                path: self.path.clone(),
                client_certificate: peer,
            };
            let mut response = self.handler.handle(ctx, request).await;
            response.uid = uid;
            review(&response)
        })
    }
}
