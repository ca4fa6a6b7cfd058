//! The secured metrics endpoint through a real manager and real TLS, with a stub reviewer (the
//! API server's reviews are proven by the NodePool operator's `secure_metrics` test): HTTPS
//! only, 401 without or with an unknown token, 403 for a user not allowed, 200 with the
//! metrics for one allowed; verdicts cached; a rotated certificate served at the next
//! handshake; a missing certificate shows in `/readyz`. The TLS options: HTTP/2 refused by
//! default and served when enabled, mutual TLS with the client's subject seen by a route and
//! the client CA reloaded; the certificate-read counters served as the metrics table says.

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

/// `reader` may get /metrics and /whoami, `stranger` may not, `down` fails the review, others are unknown.
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
            if user.username == "reader" && verb == "get" && ["/metrics", "/whoami"].contains(&path)
            {
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

/// A TLS connection to `addr` trusting `ca_pem`, offering `alpn`, with an optional client
/// certificate.
async fn tls_connect(
    addr: SocketAddr,
    ca_pem: &str,
    alpn: &[&[u8]],
    client_cert: Option<&kcr_tls::ServingCert>,
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    use rustls::pki_types::PrivateKeyDer;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    let mut config = match client_cert {
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
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
}

/// Sends the HTTP/2 connection preface and an empty SETTINGS frame; whether the server
/// answered with an HTTP/2 SETTINGS frame (else it refused: an HTTP/1 error or a close).
async fn speaks_http2(mut tls: tokio_rustls::client::TlsStream<tokio::net::TcpStream>) -> bool {
    tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();
    let mut head = [0u8; 9];
    let read = tokio::time::timeout(Duration::from_secs(10), tls.read_exact(&mut head))
        .await
        .expect("the server answers or closes within 10 s");
    read.is_ok() && head[3] == 0x04
}

/// A manager with secured metrics on `tls`, the stub reviewer and a `/whoami` route echoing
/// the client certificate's subject: (manager handle pieces, metrics address, serving CA).
async fn secured(
    prefix: &str,
    tls: kcr_tls::TlsOptions,
) -> (
    TestNamespace,
    tempfile::TempDir,
    SocketAddr,
    CertificateAuthority,
    tokio_util::sync::CancellationToken,
    tokio::task::JoinHandle<Result<(), kcr_controller::ManagerError>>,
) {
    let ns = TestNamespace::new(prefix).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = CertificateAuthority::generate("metrics test CA").unwrap();
    ca.issue(&["127.0.0.1"])
        .unwrap()
        .write_to_dir(dir.path())
        .unwrap();
    let whoami = axum::routing::get(
        |cert: Option<axum::Extension<kcr_tls::ClientCertificate>>| async move {
            cert.map(|c| c.subject())
                .unwrap_or_else(|| "anonymous".into())
        },
    );
    let options = manager_options()
        .secure_metrics(
            SecureMetrics::from_dir(dir.path())
                .reviewer(Stub::default())
                .tls(tls),
        )
        .metrics_extra_handler("/whoami", whoami)
        .unwrap();
    let mgr = Manager::new(ns.client(), options).await.unwrap();
    let metrics = mgr.metrics_addr().unwrap();
    let (_mgr, stop, run) = spawn_manager(mgr);
    (ns, dir, metrics, ca, stop, run)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_is_refused_by_default_and_served_when_enabled() {
    let (_ns, _dir, metrics, ca, stop, run) =
        secured("metrics-h2-off", kcr_tls::TlsOptions::default()).await;
    let ca_pem = ca.ca_pem();
    let tls = tls_connect(metrics, ca_pem, &[b"h2", b"http/1.1"], None)
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    assert!(
        tls_connect(metrics, ca_pem, &[b"h2"], None).await.is_err(),
        "h2 alone is not negotiated"
    );
    let tls = tls_connect(metrics, ca_pem, &[], None).await.unwrap();
    assert!(
        !speaks_http2(tls).await,
        "HTTP/2 with prior knowledge is refused"
    );
    let (code, _) = https_get(metrics, ca_pem, "/metrics", Some("reader"))
        .await
        .unwrap();
    assert_eq!(code, 200, "HTTP/1.1 is served");
    stop.cancel();
    run.await.unwrap().unwrap();

    let (_ns, _dir, metrics, ca, stop, run) = secured(
        "metrics-h2-on",
        kcr_tls::TlsOptions::default().enable_http2(true),
    )
    .await;
    let ca_pem = ca.ca_pem();
    let tls = tls_connect(metrics, ca_pem, &[b"h2"], None).await.unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    assert!(speaks_http2(tls).await);
    let tls = tls_connect(metrics, ca_pem, &[], None).await.unwrap();
    assert!(speaks_http2(tls).await, "prior knowledge too");
    stop.cancel();
    run.await.unwrap().unwrap();
}

/// `GET /whoami` with the `reader` token over a connection with an optional client
/// certificate: (status, body), or the error (a refused handshake, or a connection the server
/// closed after refusing the certificate).
async fn whoami(
    addr: SocketAddr,
    ca_pem: &str,
    client_cert: Option<&kcr_tls::ServingCert>,
) -> std::io::Result<(u16, String)> {
    let mut tls = tls_connect(addr, ca_pem, &[b"http/1.1"], client_cert).await?;
    tls.write_all(
        b"GET /whoami HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer reader\r\nConnection: close\r\n\r\n",
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
        .ok_or_else(|| std::io::Error::other(format!("no HTTP response: {text:?}")))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_refuses_scrapers_without_a_client_certificate() {
    let bundle_dir = tempfile::tempdir().unwrap();
    let bundle = bundle_dir.path().join("ca.crt");
    let clients = CertificateAuthority::generate("scraper CA").unwrap();
    let others = CertificateAuthority::generate("other CA").unwrap();
    std::fs::write(&bundle, clients.ca_pem()).unwrap();
    let options = kcr_tls::TlsOptions::default().client_ca_file(&bundle);
    let watcher = options.client_ca_watcher().unwrap().clone();
    let (_ns, _dir, metrics, ca, stop, run) = secured("metrics-mtls", options).await;
    let ca_pem = ca.ca_pem();
    let prometheus = clients
        .issue_client("prometheus", Some("monitoring"))
        .unwrap();
    let stranger = others.issue_client("prometheus", None).unwrap();

    assert!(whoami(metrics, ca_pem, None).await.is_err());
    assert!(whoami(metrics, ca_pem, Some(&stranger)).await.is_err());
    assert_eq!(
        whoami(metrics, ca_pem, Some(&prometheus)).await.unwrap(),
        (200, "O=monitoring,CN=prometheus".to_owned())
    );

    // The bundle is replaced by the other CA's: picked up at the next handshake.
    std::fs::write(&bundle, others.ca_pem()).unwrap();
    assert_eq!(
        whoami(metrics, ca_pem, Some(&stranger)).await.unwrap(),
        (200, "CN=prometheus".to_owned())
    );
    assert!(whoami(metrics, ca_pem, Some(&prometheus)).await.is_err());
    assert_eq!(watcher.generation(), 2);
    stop.cancel();
    run.await.unwrap().unwrap();
}

/// The certificate-watcher rows of the metrics table are served by a manager with secured
/// metrics, with the documented type and labels, and count the reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_reads_are_served_as_documented() {
    use kcr_controller::metrics::{documented, parse_exposition};
    let (_ns, dir, metrics, ca, stop, run) =
        secured("metrics-certwatcher", kcr_tls::TlsOptions::default()).await;
    let ca_pem = ca.ca_pem().to_owned();
    let scrape = || {
        let ca_pem = ca_pem.clone();
        async move {
            let (code, text) = https_get(metrics, &ca_pem, "/metrics", Some("reader"))
                .await
                .unwrap();
            assert_eq!(code, 200, "{text}");
            text
        }
    };
    let text = scrape().await;
    let scraped = parse_exposition(&text);
    let rows: Vec<_> = documented()
        .into_iter()
        .filter(|r| r.from == "kcr-tls")
        .collect();
    assert_eq!(rows.len(), 2);
    for row in &rows {
        let family = scraped
            .get(&row.name)
            .unwrap_or_else(|| panic!("{} is documented but not served:\n{text}", row.name));
        assert_eq!(
            (&family.kind, &family.labels),
            (&row.kind, &row.labels),
            "{}",
            row.name
        );
    }
    let reads = common::metric_value(&text, "certwatcher_read_certificate_total");
    let errors = common::metric_value(&text, "certwatcher_read_certificate_errors_total");
    assert!(reads >= 1.0, "{text}");
    // A pair that does not load counts as a failed read (the previous pair keeps serving).
    // The counters are process-wide (other tests of this binary read pairs too): at least one
    // more of each.
    std::fs::write(dir.path().join(kcr_tls::KEY_FILE), "garbage").unwrap();
    let text = scrape().await;
    assert!(
        common::metric_value(&text, "certwatcher_read_certificate_total") > reads,
        "{text}"
    );
    assert!(
        common::metric_value(&text, "certwatcher_read_certificate_errors_total") > errors,
        "{text}"
    );
    stop.cancel();
    run.await.unwrap().unwrap();
}
