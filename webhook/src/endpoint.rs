//! What every webhook of the server is: an [`Endpoint`] that answers a request body with a
//! [`Reply`], and the conversion webhook's path. Admission and conversion webhooks implement
//! it; the server routes to it.

use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use http::StatusCode;

use crate::tls::ClientCertificate;

/// Path of the conversion webhook.
pub const CONVERT_PATH: &str = "/convert";

/// A reply of an endpoint.
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) body: Bytes,
}

impl Reply {
    pub(crate) fn json(status: StatusCode, value: &serde_json::Value) -> Reply {
        Reply {
            status,
            body: Bytes::from(serde_json::to_vec(value).unwrap_or_default()),
        }
    }

    /// An error as a `metav1.Status` body.
    pub(crate) fn error(status: StatusCode, message: String) -> Reply {
        let reason = match status {
            StatusCode::BAD_REQUEST => "BadRequest",
            StatusCode::NOT_FOUND => "NotFound",
            StatusCode::METHOD_NOT_ALLOWED => "MethodNotAllowed",
            StatusCode::PAYLOAD_TOO_LARGE => "RequestEntityTooLarge",
            StatusCode::UNSUPPORTED_MEDIA_TYPE => "UnsupportedMediaType",
            StatusCode::GATEWAY_TIMEOUT => "Timeout",
            _ => "InternalError",
        };
        Reply::json(
            status,
            &serde_json::json!({
                "apiVersion": "v1",
                "kind": "Status",
                "status": "Failure",
                "code": status.as_u16(),
                "reason": reason,
                "message": message,
            }),
        )
    }

    pub(crate) fn bad_request(message: String) -> Reply {
        Reply::error(StatusCode::BAD_REQUEST, message)
    }
}

/// One webhook: answers a request body (`peer`: the verified client certificate, with mutual
/// TLS).
pub(crate) trait Endpoint: Send + Sync + 'static {
    fn serve(&self, body: Bytes, peer: Option<Arc<ClientCertificate>>) -> BoxFuture<'_, Reply>;
}
