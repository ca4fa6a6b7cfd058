//! The secured metrics endpoint against the API server's own reviews, with the roles shipped in
//! `config/rbac/`: the manager runs as a ServiceAccount bound only to `metrics_auth_role.yaml`
//! (create TokenReviews and SubjectAccessReviews), and scrapes carry ServiceAccount tokens from
//! the TokenRequest API. No token: 401; a token that is not one: 401; a ServiceAccount without
//! the metrics-reader role: 403; one bound to `metrics_reader_role.yaml`: 200.
//!
//! Runs on either backend (kcr-envtest in process answers both reviews from its own tokens and
//! the stored RBAC objects; `KCR_ENVTEST_BACKEND=real` has kube-apiserver answer them).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Subject};
use kcr_controller::secure_metrics::SecureMetrics;
use kcr_controller::{Manager, ManagerOptions};
use kcr_envtest::TestApiServer;
use kcr_webhook::CertificateAuthority;
use kube::api::{Api, PostParams};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NS: &str = "default";
const MANAGER_SA: &str = "metrics-manager";

fn manifest<T: serde::de::DeserializeOwned>(file: &str) -> T {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("config/rbac")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn sa_subject(name: &str) -> Subject {
    Subject {
        kind: "ServiceAccount".into(),
        name: name.into(),
        namespace: Some(NS.into()),
        api_group: None,
    }
}

fn sa_user(name: &str) -> String {
    format!("system:serviceaccount:{NS}:{name}")
}

/// A SubjectAccessReview by the admin: whether `name`'s ServiceAccount may do `attrs`.
async fn allowed(
    client: &kube::Client,
    name: &str,
    resource: Option<ResourceAttributes>,
    non_resource: Option<NonResourceAttributes>,
) -> bool {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(sa_user(name)),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{NS}"),
                "system:authenticated".into(),
            ]),
            resource_attributes: resource,
            non_resource_attributes: non_resource,
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap()
        .status
        .is_some_and(|s| s.allowed)
}

async fn token(client: &kube::Client, name: &str) -> String {
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), NS);
    let mut sa = ServiceAccount::default();
    sa.metadata.name = Some(name.into());
    sas.create(&PostParams::default(), &sa).await.unwrap();
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: Some(vec![]),
            expiration_seconds: Some(600),
            ..Default::default()
        }),
        ..Default::default()
    };
    sas.create_token_request(name, &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .expect("a TokenRequest answers with a token")
        .token
        .expect("a token")
}

async fn https_get(addr: SocketAddr, ca_pem: &str, token: Option<&str>) -> (u16, String) {
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
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
        .unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    tls.write_all(
        format!("GET /metrics HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut response))
        .await
        .expect("an answer within 10 s")
        .unwrap();
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
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrapes_are_authenticated_and_authorized_by_the_api_server() {
    // A server of its own: it impersonates a ServiceAccount (client_as) and binds the shipped
    // ClusterRoles under their fixed names.
    let server = TestApiServer::start().await.unwrap();
    let admin = server.client();

    // The shipped roles, bound to ServiceAccounts of this test.
    let auth_role: ClusterRole = manifest("metrics_auth_role.yaml");
    let reader_role: ClusterRole = manifest("metrics_reader_role.yaml");
    let mut auth_binding: ClusterRoleBinding = manifest("metrics_auth_role_binding.yaml");
    assert_eq!(
        auth_binding.role_ref.name,
        auth_role.metadata.name.clone().unwrap(),
        "the shipped binding binds the shipped role"
    );
    auth_binding.subjects = Some(vec![sa_subject(MANAGER_SA)]);
    let reader_binding = ClusterRoleBinding {
        metadata: kube::api::ObjectMeta {
            name: Some("metrics-reader-scraper".into()),
            ..Default::default()
        },
        role_ref: k8s_openapi::api::rbac::v1::RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: reader_role.metadata.name.clone().unwrap(),
        },
        subjects: Some(vec![sa_subject("scraper")]),
    };
    let pp = PostParams::default();
    Api::<ClusterRole>::all(admin.clone())
        .create(&pp, &auth_role)
        .await
        .unwrap();
    Api::<ClusterRole>::all(admin.clone())
        .create(&pp, &reader_role)
        .await
        .unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&pp, &auth_binding)
        .await
        .unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&pp, &reader_binding)
        .await
        .unwrap();
    let _manager_token = token(&admin, MANAGER_SA).await;
    let scraper = token(&admin, "scraper").await;
    let stranger = token(&admin, "stranger").await;

    // RBAC takes effect asynchronously on a real server: wait until the authorizer sees it.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let manager_may_review = allowed(
            &admin,
            MANAGER_SA,
            Some(ResourceAttributes {
                group: Some("authentication.k8s.io".into()),
                resource: Some("tokenreviews".into()),
                verb: Some("create".into()),
                ..Default::default()
            }),
            None,
        )
        .await;
        let scraper_may_read = allowed(
            &admin,
            "scraper",
            None,
            Some(NonResourceAttributes {
                path: Some("/metrics".into()),
                verb: Some("get".into()),
            }),
        )
        .await;
        if manager_may_review && scraper_may_read {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "RBAC not in effect after 30 s (manager {manager_may_review}, scraper {scraper_may_read})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The manager acts as its ServiceAccount: only the metrics-auth role lets it review. (In
    // process, requests to kcr-envtest are not authorized, so impersonation would prove
    // nothing there and is not offered: the manager reviews as the admin.)
    let manager_client = match server.backend() {
        kcr_envtest::Backend::Real => server
            .client_as(
                &sa_user(MANAGER_SA),
                &[
                    "system:serviceaccounts",
                    &format!("system:serviceaccounts:{NS}"),
                    "system:authenticated",
                ],
            )
            .unwrap(),
        _ => server.client(),
    };
    // The operator's secured metrics are this manager's (`RunOptions::metrics_cert_dir`): its
    // reviews join the suite's RBAC record when KCR_RBAC_RECORD is set (`.ci/check-rbac`).
    let manager_client = kcr_testkit::access::record_from_env(manager_client).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = CertificateAuthority::generate("metrics CA").unwrap();
    ca.issue(&["127.0.0.1"])
        .unwrap()
        .write_to_dir(dir.path())
        .unwrap();
    let options = ManagerOptions::default()
        .metrics_bind_address("127.0.0.1:0")
        .unwrap()
        .health_probe_bind_address("0")
        .unwrap()
        .secure_metrics(SecureMetrics::from_dir(dir.path()));
    let mgr = Arc::new(Manager::new(manager_client, options).await.unwrap());
    let addr = mgr.metrics_addr().unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });

    let ca_pem = ca.ca_pem();
    let (code, body) = https_get(addr, ca_pem, None).await;
    assert_eq!(code, 401, "no token: {body}");
    let (code, body) = https_get(addr, ca_pem, Some("not-a-token")).await;
    assert_eq!(code, 401, "an invalid token: {body}");
    let (code, body) = https_get(addr, ca_pem, Some(&stranger)).await;
    assert_eq!(code, 403, "a ServiceAccount without the role: {body}");
    assert!(body.contains(&sa_user("stranger")), "{body}");
    let (code, body) = https_get(addr, ca_pem, Some(&scraper)).await;
    assert_eq!(
        code, 200,
        "a ServiceAccount with the metrics-reader role: {body}"
    );
    assert!(body.contains("rest_client_requests_total"), "{body}");
    // The reviews the manager made (as its ServiceAccount) all succeeded.
    assert!(
        !body.contains("rest_client_requests_total{code=\"403\""),
        "the manager was refused a review: {body}"
    );

    stop.cancel();
    run.await.unwrap().unwrap();
}
