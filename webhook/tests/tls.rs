//! The webhook server's TLS options over real sockets: HTTP/2 refused by default (by ALPN and
//! with prior knowledge) and served when enabled, a minimum TLS version, mutual TLS (a client
//! without a certificate or with one of another CA is refused, the handler sees the subject of
//! one the bundle's CA signed) and the client-CA bundle reloaded when it changes.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use common::{CertDir, admission_review};
use http_body_util::{BodyExt, Full};
use kcr_webhook::{
    AdmissionContext, CertificateAuthority, ServerOptions, ServingCert, TlsOptions, TlsVersion,
    WebhookServer, admission_fn,
};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_util::sync::CancellationToken;

/// A running server with a raw handler at `/whoami` that allows every request and puts the
/// caller's certificate subject (or `anonymous`) into a warning.
struct Server {
    server: WebhookServer,
    ca: CertificateAuthority,
    _certs: CertDir,
    stop: CancellationToken,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn serve(tls: TlsOptions) -> Server {
    let ca = CertificateAuthority::generate("serving CA").unwrap();
    let mut certs = CertDir::new();
    certs.publish(&ca.issue(&["localhost", "127.0.0.1"]).unwrap());
    let server = WebhookServer::bind(
        ServerOptions::default()
            .bind_address("127.0.0.1:0".parse().unwrap())
            .cert_dir(certs.path())
            .tls(tls),
    )
    .await
    .unwrap();
    server
        .admission_handler(
            "/whoami",
            admission_fn(
                |ctx: AdmissionContext, req: AdmissionRequest<DynamicObject>| async move {
                    let who = ctx
                        .client_certificate()
                        .map(|c| c.subject())
                        .unwrap_or_else(|| "anonymous".into());
                    let mut response = AdmissionResponse::from(&req);
                    response.warnings = Some(vec![format!("{} {who}", ctx.path())]);
                    response
                },
            ),
        )
        .unwrap();
    let stop = CancellationToken::new();
    let (run, token) = (server.clone(), stop.clone());
    tokio::spawn(async move { run.run(token).await });
    Server {
        server,
        ca,
        _certs: certs,
        stop,
    }
}

/// What a client offers.
struct Client<'a> {
    versions: &'a [&'static rustls::SupportedProtocolVersion],
    alpn: &'a [&'a [u8]],
    cert: Option<&'a ServingCert>,
}

const BOTH: &[&rustls::SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];

impl Default for Client<'_> {
    fn default() -> Self {
        Client {
            versions: BOTH,
            alpn: &[b"h2", b"http/1.1"],
            cert: None,
        }
    }
}

async fn connect(
    addr: SocketAddr,
    ca_pem: &str,
    client: Client<'_>,
) -> std::io::Result<TlsStream<TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    for der in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(der.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(client.versions)
    .unwrap()
    .with_root_certificates(roots);
    let mut config = match client.cert {
        Some(c) => builder
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(c.cert_pem.as_bytes())
                    .map(Result::unwrap)
                    .collect(),
                PrivateKeyDer::from_pem_slice(c.key_pem.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = client.alpn.iter().map(|p| p.to_vec()).collect();
    let tcp = TcpStream::connect(addr).await?;
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
}

fn review_request() -> http::Request<Full<Bytes>> {
    let review = admission_review(
        "CREATE",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
        Value::Null,
    );
    http::Request::post("https://localhost/whoami")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(&review).unwrap())))
        .unwrap()
}

/// The warning `/whoami` answered over HTTP/1.1 on `tls`, or the error on the way.
async fn whoami_http1(tls: TlsStream<TcpStream>) -> Result<String, String> {
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let mut req = review_request();
    req.headers_mut()
        .insert("host", http::HeaderValue::from_static("localhost"));
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    warning(resp).await
}

/// The same over HTTP/2.
async fn whoami_http2(tls: TlsStream<TcpStream>) -> Result<String, String> {
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tls),
    )
    .await
    .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let resp = sender
        .send_request(review_request())
        .await
        .map_err(|e| e.to_string())?;
    warning(resp).await
}

async fn warning(resp: http::Response<hyper::body::Incoming>) -> Result<String, String> {
    let status = resp.status();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    let body: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
    if status != 200 {
        return Err(format!("{status}: {body}"));
    }
    Ok(body["response"]["warnings"][0]
        .as_str()
        .unwrap_or_default()
        .to_string())
}

#[tokio::test]
async fn http2_is_refused_by_default() {
    let s = serve(TlsOptions::default()).await;
    let (addr, ca) = (s.server.local_addr(), s.ca.ca_pem());
    // A client offering h2 and http/1.1 gets http/1.1 and is served.
    let tls = connect(addr, ca, Client::default()).await.unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    assert_eq!(
        whoami_http1(tls).await.unwrap(),
        "/whoami anonymous",
        "served over HTTP/1.1"
    );
    // A client offering only h2: no protocol in common, no handshake.
    let err = connect(
        addr,
        ca,
        Client {
            alpn: &[b"h2"],
            ..Client::default()
        },
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("NoApplicationProtocol"), "{err}");
    // HTTP/2 with prior knowledge (no ALPN at all): the HTTP/1 server refuses the preface.
    let tls = connect(
        addr,
        ca,
        Client {
            alpn: &[],
            ..Client::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), None);
    let err = whoami_http2(tls).await.unwrap_err();
    assert!(!err.is_empty());
    // And HTTP/2 over the http/1.1 ALPN agreement too.
    let tls = connect(addr, ca, Client::default()).await.unwrap();
    assert!(whoami_http2(tls).await.is_err());
    // The server keeps serving HTTP/1.1 after those.
    let tls = connect(addr, ca, Client::default()).await.unwrap();
    assert_eq!(whoami_http1(tls).await.unwrap(), "/whoami anonymous");
}

#[tokio::test]
async fn http2_is_served_when_enabled() {
    let s = serve(TlsOptions::default().enable_http2(true)).await;
    let (addr, ca) = (s.server.local_addr(), s.ca.ca_pem());
    let tls = connect(addr, ca, Client::default()).await.unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    assert_eq!(whoami_http2(tls).await.unwrap(), "/whoami anonymous");
    // Prior knowledge too, and HTTP/1.1 still.
    let no_alpn = Client {
        alpn: &[],
        ..Client::default()
    };
    let tls = connect(addr, ca, no_alpn).await.unwrap();
    assert_eq!(whoami_http2(tls).await.unwrap(), "/whoami anonymous");
    let tls = connect(
        addr,
        ca,
        Client {
            alpn: &[b"http/1.1"],
            ..Client::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(whoami_http1(tls).await.unwrap(), "/whoami anonymous");
}

#[tokio::test]
async fn a_tls12_client_is_refused_with_minimum_tls13() {
    const ONLY_12: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS12];
    let s = serve(TlsOptions::default().min_version(TlsVersion::Tls13)).await;
    let (addr, ca) = (s.server.local_addr(), s.ca.ca_pem());
    let old = Client {
        versions: ONLY_12,
        ..Client::default()
    };
    assert!(connect(addr, ca, old).await.is_err());
    let tls = connect(addr, ca, Client::default()).await.unwrap();
    assert_eq!(
        tls.get_ref().1.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_3)
    );
    assert_eq!(whoami_http1(tls).await.unwrap(), "/whoami anonymous");
    // The default minimum (1.2) serves that client.
    let s = serve(TlsOptions::default()).await;
    let tls = connect(
        s.server.local_addr(),
        s.ca.ca_pem(),
        Client {
            versions: ONLY_12,
            ..Client::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(whoami_http1(tls).await.unwrap(), "/whoami anonymous");
}

/// Connects and asks `/whoami`; any failure (handshake, or the connection closed by the server
/// once it refused the certificate: with TLS 1.3 the client finishes first) as an error.
async fn whoami(addr: SocketAddr, ca: &str, cert: Option<&ServingCert>) -> Result<String, String> {
    let tls = connect(
        addr,
        ca,
        Client {
            cert,
            ..Client::default()
        },
    )
    .await
    .map_err(|e| e.to_string())?;
    whoami_http1(tls).await
}

#[tokio::test]
async fn mutual_tls_refuses_clients_without_a_certificate_of_the_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("client-ca.crt");
    let clients = CertificateAuthority::generate("client CA").unwrap();
    let others = CertificateAuthority::generate("other CA").unwrap();
    std::fs::write(&bundle, clients.ca_pem()).unwrap();
    let options = TlsOptions::default().client_ca_file(&bundle);
    let watcher = options.client_ca_watcher().unwrap().clone();
    let s = serve(options).await;
    let (addr, ca) = (s.server.local_addr(), s.ca.ca_pem().to_string());
    let apiserver = clients
        .issue_client("kube-apiserver", Some("system:masters"))
        .unwrap();
    let stranger = others.issue_client("kube-apiserver", None).unwrap();

    let err = whoami(addr, &ca, None).await.unwrap_err();
    assert!(!err.is_empty());
    assert!(whoami(addr, &ca, Some(&stranger)).await.is_err());
    assert_eq!(
        whoami(addr, &ca, Some(&apiserver)).await.unwrap(),
        "/whoami O=system:masters,CN=kube-apiserver"
    );
    assert_eq!(watcher.generation(), 1);

    // The bundle rotates to the other CA (written elsewhere and renamed into place): its
    // clients are served from the next handshake on, the first CA's are refused.
    let tmp = dir.path().join(".client-ca.tmp");
    std::fs::write(&tmp, others.ca_pem()).unwrap();
    std::fs::rename(&tmp, &bundle).unwrap();
    assert_eq!(
        whoami(addr, &ca, Some(&stranger)).await.unwrap(),
        "/whoami CN=kube-apiserver"
    );
    assert_eq!(watcher.generation(), 2);
    assert!(whoami(addr, &ca, Some(&apiserver)).await.is_err());
}
