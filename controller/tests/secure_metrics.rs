//! The secured metrics endpoint through a real manager and real TLS, with a stub reviewer (the
//! API server's reviews are proven by the NodePool operator's `secure_metrics` test): HTTPS
//! only, 401 without or with an unknown token, 403 for a user not allowed, 200 with the
//! metrics for one allowed; verdicts cached; a rotated certificate served at the next
//! handshake; a missing certificate shows in `/readyz`.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{http_get, manager_options, spawn_manager};
use futures::future::BoxFuture;
use kcr_controller::Manager;
use kcr_controller::secure_metrics::{Reviewer, SecureMetrics, SecureMetricsError, UserInfo};
use kcr_envtest::TestNamespace;
use kcr_tls::{CertWatcher, CertificateAuthority};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `reader` may get /metrics, `stranger` may not, `down` fails the review, others are unknown.
/// Clones share the review count.
#[derive(Default, Clone)]
struct Stub {
    reviews: Arc<AtomicUsize>,
}

impl Reviewer for Stub {
    fn authenticate<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Result<UserInfo, String>, SecureMetricsError>> {
        Box::pin(async move {
            self.reviews.fetch_add(1, Ordering::SeqCst);
            match token {
                "down" => Err(SecureMetricsError::Reviewer {
                    stage: "authentication",
                    source: "connection refused".into(),
                }),
                "reader" | "stranger" => Ok(Ok(UserInfo {
                    username: token.to_owned(),
                    ..UserInfo::default()
                })),
                _ => Ok(Err("invalid bearer token".to_owned())),
            }
        })
    }

    fn authorize<'a>(
        &'a self,
        user: &'a UserInfo,
        verb: &'a str,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Result<(), String>, SecureMetricsError>> {
        Box::pin(async move {
            if user.username == "reader" && verb == "get" && path == "/metrics" {
                Ok(Ok(()))
            } else {
                Ok(Err(String::new()))
            }
        })
    }
}

/// An HTTPS GET trusting `ca_pem`, with an optional bearer token: (status, body).
async fn https_get(
    addr: SocketAddr,
    ca_pem: &str,
    path: &str,
    token: Option<&str>,
) -> std::io::Result<(u16, String)> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let mut tls = connector
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await?;
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    tls.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n")
            .as_bytes(),
    )
    .await?;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut response))
        .await
        .map_err(|_| std::io::Error::other("no answer within 10 s"))??;
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_authorized_callers_read_metrics_over_tls() {
    let ns = TestNamespace::new("metrics-tls").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = CertificateAuthority::generate("metrics test CA").unwrap();
    ca.issue(&["127.0.0.1"])
        .unwrap()
        .write_to_dir(dir.path())
        .unwrap();
    let stub = Stub::default();
    let certs = Arc::new(CertWatcher::from_dir(dir.path()));
    let options = manager_options().secure_metrics(
        SecureMetrics::from_watcher(certs.clone())
            .cache_ttl(Duration::from_secs(60))
            .reviewer(stub.clone()),
    );
    let mgr = Manager::new(ns.client(), options).await.unwrap();
    let metrics = mgr.metrics_addr().unwrap();
    let probes = mgr.health_probe_addr().unwrap();
    let (_mgr, stop, run) = spawn_manager(mgr);
    let ca_pem = ca.ca_pem().to_owned();

    let get = |token: Option<&'static str>| {
        let ca_pem = ca_pem.clone();
        async move {
            https_get(metrics, &ca_pem, "/metrics", token)
                .await
                .unwrap()
        }
    };
    let (code, body) = get(None).await;
    assert_eq!(code, 401, "{body}");
    let (code, body) = get(Some("made-up")).await;
    assert_eq!(code, 401, "{body}");
    let (code, body) = get(Some("stranger")).await;
    assert_eq!(code, 403, "{body}");
    assert!(
        body.contains("stranger") && body.contains("/metrics"),
        "{body}"
    );
    let (code, body) = get(Some("down")).await;
    assert_eq!(code, 500, "a failed review is neither 401 nor 403: {body}");
    let (code, body) = get(Some("reader")).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("# TYPE process_"), "{body}");
    // Every verdict but the failed one is cached: scraping again costs no review.
    let reviews = stub.reviews.load(Ordering::SeqCst);
    assert_eq!(reviews, 4);
    for token in ["reader", "stranger", "made-up"] {
        get(Some(token)).await;
    }
    assert_eq!(stub.reviews.load(Ordering::SeqCst), reviews);
    get(Some("down")).await;
    assert_eq!(stub.reviews.load(Ordering::SeqCst), reviews + 1);

    // Plain HTTP on the HTTPS port gets no metrics.
    let plain = http_get(metrics, "/metrics").await;
    assert!(
        plain.as_ref().is_none_or(|(code, _)| *code != 200),
        "{plain:?}"
    );
    assert_eq!(
        http_get(probes, "/readyz/metrics-certificate").await,
        Some((200, "ok".to_owned()))
    );

    // Rotation: a pair from another CA is served from the next handshake on.
    let other = CertificateAuthority::generate("rotated CA").unwrap();
    other
        .issue(&["127.0.0.1"])
        .unwrap()
        .write_to_dir(dir.path())
        .unwrap();
    let (code, _) = https_get(metrics, other.ca_pem(), "/metrics", Some("reader"))
        .await
        .unwrap();
    assert_eq!(code, 200);
    assert_eq!(certs.generation(), 2);
    assert!(
        https_get(metrics, &ca_pem, "/metrics", Some("reader"))
            .await
            .is_err(),
        "the old CA no longer verifies the server"
    );

    stop.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_certificate_the_endpoint_is_not_ready() {
    let ns = TestNamespace::new("metrics-no-cert").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let options = manager_options()
        .secure_metrics(SecureMetrics::from_dir(dir.path()).reviewer(Stub::default()));
    let mgr = Manager::new(ns.client(), options).await.unwrap();
    let metrics = mgr.metrics_addr().unwrap();
    let probes = mgr.health_probe_addr().unwrap();
    let (_mgr, stop, run) = spawn_manager(mgr);
    let (code, body) = http_get(probes, "/readyz/metrics-certificate")
        .await
        .unwrap();
    assert_eq!(code, 500);
    assert!(body.contains("tls.crt"), "{body}");
    let ca = CertificateAuthority::generate("late CA").unwrap();
    assert!(
        https_get(metrics, ca.ca_pem(), "/metrics", Some("reader"))
            .await
            .is_err(),
        "no handshake without a certificate"
    );
    // cert-manager writes the pair later: served from then on.
    ca.issue(&["127.0.0.1"])
        .unwrap()
        .write_to_dir(dir.path())
        .unwrap();
    let (code, _) = https_get(metrics, ca.ca_pem(), "/metrics", Some("reader"))
        .await
        .unwrap();
    assert_eq!(code, 200);
    assert_eq!(
        http_get(probes, "/readyz/metrics-certificate").await,
        Some((200, "ok".to_owned()))
    );
    stop.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_zero_cache_size_fails_manager_creation() {
    let ns = TestNamespace::new("metrics-zero-cache").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let options = manager_options().secure_metrics(
        SecureMetrics::from_dir(dir.path())
            .cache_size(0)
            .reviewer(Stub::default()),
    );
    let err = Manager::new(ns.client(), options).await.unwrap_err();
    assert!(
        matches!(
            err,
            kcr_controller::ManagerError::SecureMetrics(SecureMetricsError::ZeroCacheSize)
        ),
        "{err}"
    );
}
