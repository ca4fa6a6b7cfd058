//! The HTTPS client that POSTs a review to `clientConfig.url`, trusting only the webhook's
//! `caBundle`, within its `timeoutSeconds`.

use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use serde_json::Value;

use super::Webhook;

/// POSTs the review to the webhook and returns the decoded response body.
pub(super) async fn call(hook: &Webhook, review: &Value) -> Result<Value, String> {
    let url = hook
        .url
        .as_deref()
        .ok_or_else(|| "only clientConfig.url is supported (no in-cluster services)".to_string())?;
    let body = serde_json::to_vec(review).map_err(|e| format!("encoding AdmissionReview: {e}"))?;
    match tokio::time::timeout(hook.timeout, post(url, hook.ca_bundle.as_deref(), body)).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("failed to call webhook: Post {url:?}: {e}")),
        Err(_) => Err(format!(
            "failed to call webhook: Post {url:?}: context deadline exceeded (timeout {}s)",
            hook.timeout.as_secs()
        )),
    }
}

/// Aborts the connection task when the request is done (or dropped on timeout).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A TLS client configuration that trusts only the certificates of `ca_bundle` (base64 PEM).
fn tls_config(ca_bundle: Option<&str>) -> Result<rustls::ClientConfig, String> {
    let bundle = ca_bundle
        .filter(|b| !b.is_empty())
        .ok_or_else(|| "clientConfig.caBundle is required (no system trust roots)".to_string())?;
    let pem = base64::engine::general_purpose::STANDARD
        .decode(bundle.trim())
        .map_err(|e| format!("caBundle is not base64: {e}"))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| format!("caBundle is not PEM: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("caBundle certificate rejected: {e}"))?;
    }
    if roots.is_empty() {
        return Err("caBundle contains no certificate".into());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS configuration: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// One HTTP/1.1 POST over TLS; the decoded JSON body of a 200 response.
pub(crate) async fn post(
    url: &str,
    ca_bundle: Option<&str>,
    body: Vec<u8>,
) -> Result<Value, String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("invalid url: {e}"))?;
    if uri.scheme_str() != Some("https") {
        return Err("webhook url must use https".into());
    }
    let host = uri
        .host()
        .ok_or_else(|| "webhook url has no host".to_string())?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri.port_u16().unwrap_or(443);
    let config = tls_config(ca_bundle)?;
    let server_name = rustls::pki_types::ServerName::try_from(host.clone())
        .map_err(|e| format!("invalid server name {host:?}: {e}"))?;
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| format!("dial tcp {host}:{port}: {e}"))?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(server_name, tcp)
        .await
        .map_err(|e| format!("tls: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| format!("http handshake: {e}"))?;
    let _conn = AbortOnDrop(tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "webhook connection ended");
        }
    }));
    let path = uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let authority = uri
        .authority()
        .map(|a| a.as_str().to_string())
        .unwrap_or_else(|| host.clone());
    let request = http::Request::post(path)
        .header(http::header::HOST, authority)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| format!("building request: {e}"))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("sending request: {e}"))?;
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("reading response: {e}"))?
        .to_bytes();
    if status != http::StatusCode::OK {
        return Err(format!(
            "received invalid webhook response status {}: {}",
            status.as_u16(),
            String::from_utf8_lossy(&bytes)
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("decoding webhook response: {e}"))
}
