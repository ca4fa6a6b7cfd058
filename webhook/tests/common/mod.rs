//! Shared set-up: an envtest API server (the backend `KCR_ENVTEST_BACKEND` names), of the
//! test's own or shared by the binary's tests (a `TestNamespace` each), a webhook server on
//! 127.0.0.1 with a test CA, and HTTPS/HTTP helpers.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kcr_envtest::{TestApiServer, TestNamespace};
use kcr_webhook::example::v1::Widget;
use kcr_webhook::{CertificateAuthority, ClientTarget, ServerOptions, ServingCert, WebhookServer};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_util::sync::CancellationToken;

/// Generous bound for things the API server does asynchronously (the real backend picks up
/// webhook configurations and CRDs in the background).
pub const SLOW: Duration = Duration::from_secs(60);

/// A certificate directory in the layout of a Kubernetes Secret volume:
/// `tls.crt → ..data/tls.crt`, `..data → ..<n>`; [`CertDir::publish`] swaps `..data`
/// atomically, as the kubelet does.
pub struct CertDir {
    pub dir: tempfile::TempDir,
    n: u32,
}

impl CertDir {
    pub fn new() -> Self {
        CertDir {
            dir: tempfile::tempdir().unwrap(),
            n: 0,
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn publish(&mut self, cert: &ServingCert) {
        use std::os::unix::fs::symlink;
        self.n += 1;
        let name = format!("..2026_12_01_00_00_{:02}", self.n);
        let ts = self.dir.path().join(&name);
        cert.write_to_dir(&ts).unwrap();
        let tmp = self.dir.path().join("..data_tmp");
        let _ = std::fs::remove_file(&tmp);
        symlink(&name, &tmp).unwrap();
        std::fs::rename(&tmp, self.dir.path().join("..data")).unwrap();
        for f in ["tls.crt", "tls.key", "ca.crt"] {
            let link = self.dir.path().join(f);
            if std::fs::symlink_metadata(&link).is_err() {
                symlink(PathBuf::from("..data").join(f), &link).unwrap();
            }
        }
    }
}

/// A webhook server on 127.0.0.1 and what tests need around it.
pub struct Hooks {
    pub server: WebhookServer,
    pub ca: CertificateAuthority,
    pub certs: CertDir,
    pub stop: CancellationToken,
    pub task: Option<tokio::task::JoinHandle<Result<(), kcr_webhook::WebhookError>>>,
}

impl Hooks {
    /// Binds a server with a first certificate published; not running yet.
    pub async fn bind() -> Hooks {
        let ca = CertificateAuthority::generate("kcr-webhook test CA").unwrap();
        let mut certs = CertDir::new();
        certs.publish(&ca.issue(&["localhost", "127.0.0.1"]).unwrap());
        let server = WebhookServer::bind(
            ServerOptions::default()
                .bind_address("127.0.0.1:0".parse().unwrap())
                .cert_dir(certs.path()),
        )
        .await
        .unwrap();
        Hooks {
            server,
            ca,
            certs,
            stop: CancellationToken::new(),
            task: None,
        }
    }

    pub fn run(&mut self) {
        let server = self.server.clone();
        let stop = self.stop.clone();
        self.task = Some(tokio::spawn(async move { server.run(stop).await }));
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    pub fn target(&self) -> ClientTarget {
        ClientTarget::url_for(self.addr())
    }

    /// Issues and publishes a new serving certificate of the same CA.
    pub fn rotate(&mut self) -> ServingCert {
        let cert = self.ca.issue(&["localhost", "127.0.0.1"]).unwrap();
        self.certs.publish(&cert);
        cert
    }

    /// Creates (or replaces) the webhook configurations named `name` for every registration.
    pub async fn install(&self, client: &kube::Client, name: &str) {
        let (m, v) =
            self.server
                .webhook_configurations(name, &self.target(), self.ca.ca_pem().as_bytes());
        create_configurations(client, name, m, v).await;
    }

    /// On the binary's shared server: creates the webhook configurations for every
    /// registration, named `ns.unique_name(name)` and restricted to the test's namespace (other
    /// tests' objects never reach these webhooks). Returns the configurations' name.
    pub async fn install_in(&self, ns: &TestNamespace, name: &str) -> String {
        let name = ns.unique_name(name);
        let (mut m, mut v) =
            self.server
                .webhook_configurations(&name, &self.target(), self.ca.ca_pem().as_bytes());
        restrict_to_namespace(&mut m, &mut v, ns.namespace());
        create_configurations(&ns.client(), &name, m, v).await;
        name
    }
}

/// Limits every webhook of the configurations to the namespace `namespace` (a
/// `namespaceSelector` on the label every namespace carries with its own name).
pub fn restrict_to_namespace(
    m: &mut MutatingWebhookConfiguration,
    v: &mut ValidatingWebhookConfiguration,
    namespace: &str,
) {
    let selector = LabelSelector {
        match_labels: Some(
            [(
                "kubernetes.io/metadata.name".to_string(),
                namespace.to_string(),
            )]
            .into(),
        ),
        ..LabelSelector::default()
    };
    for w in m.webhooks.iter_mut().flatten() {
        w.namespace_selector = Some(selector.clone());
    }
    for w in v.webhooks.iter_mut().flatten() {
        w.namespace_selector = Some(selector.clone());
    }
}

/// Creates (or replaces) the configurations named `name` (those with webhooks).
async fn create_configurations(
    client: &kube::Client,
    name: &str,
    m: MutatingWebhookConfiguration,
    v: ValidatingWebhookConfiguration,
) {
    let mapi: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let vapi: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let _ = mapi.delete(name, &DeleteParams::default()).await;
    let _ = vapi.delete(name, &DeleteParams::default()).await;
    if m.webhooks.as_ref().is_some_and(|w| !w.is_empty()) {
        mapi.create(&PostParams::default(), &m).await.unwrap();
    }
    if v.webhooks.as_ref().is_some_and(|w| !w.is_empty()) {
        vapi.create(&PostParams::default(), &v).await.unwrap();
    }
}

impl Drop for Hooks {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

pub async fn api_server() -> TestApiServer {
    TestApiServer::start().await.unwrap()
}

/// The Widget CRD on the binary's shared server, without a conversion webhook (a CRD's
/// conversion webhook serves every namespace: a test that needs one has a server of its own).
pub async fn install_widget_crd_in(ns: &TestNamespace) {
    let crd = kcr_webhook::example::crd().unwrap();
    ns.install_crd_value(serde_json::to_value(&crd).unwrap())
        .await
        .unwrap();
}

pub async fn install_widget_crd(env: &TestApiServer, conversion: Option<(&ClientTarget, &str)>) {
    let mut crd = kcr_webhook::example::crd().unwrap();
    if let Some((target, ca)) = conversion {
        crd.spec.conversion = Some(kcr_webhook::crd_conversion(target, ca.as_bytes()));
    }
    env.install_crd_value(serde_json::to_value(&crd).unwrap())
        .await
        .unwrap();
}

/// A v1 Widget without a namespace (it goes into the namespace of the `Api` it is written to).
pub fn widget(name: &str, spec: Value) -> Widget {
    serde_json::from_value(json!({
        "apiVersion": "example.kcr.dev/v1", "kind": "Widget",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap()
}

/// Waits until the webhooks are in effect in `namespace` (the real API server loads
/// configurations in the background): a dry-run create comes back defaulted.
pub async fn wait_for_defaulting(client: &kube::Client, namespace: &str) {
    let widgets: Api<Widget> = Api::namespaced(client.clone(), namespace);
    kcr_envtest::eventually("the mutating webhook is in effect", SLOW, || {
        let widgets = widgets.clone();
        async move {
            let pp = PostParams {
                dry_run: true,
                ..PostParams::default()
            };
            match widgets.create(&pp, &widget("probe", json!({}))).await {
                Ok(w) if w.spec.replicas == Some(1) => Ok(()),
                Ok(w) => Err(format!("not defaulted yet: {:?}", w.spec)),
                Err(e) => Err(e.to_string()),
            }
        }
    })
    .await;
}

pub fn connector(ca_pem: &str) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for der in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(der.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

/// A raw HTTPS request on a fresh connection: the status, the body as JSON (or as a string
/// when not JSON) and the server's certificate.
pub async fn https(
    addr: SocketAddr,
    ca_pem: &str,
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, Value, Vec<u8>) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let tls = connector(ca_pem)
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let peer = tls.get_ref().1.peer_certificates().unwrap()[0].to_vec();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(conn);
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, v, peer)
}

pub async fn post_json(addr: SocketAddr, ca_pem: &str, path: &str, body: &Value) -> (u16, Value) {
    let (s, v, _) = https(
        addr,
        ca_pem,
        "POST",
        path,
        "application/json",
        serde_json::to_vec(body).unwrap(),
    )
    .await;
    (s, v)
}

/// Plain HTTP GET (the manager's probes).
pub async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .unwrap();
    tokio::spawn(conn);
    let req = http::Request::get(path)
        .header("host", "localhost")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

/// An AdmissionReview for a v1 Widget.
pub fn admission_review(op: &str, object: Value, old: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "uid-1",
            "kind": {"group": "example.kcr.dev", "version": "v1", "kind": "Widget"},
            "resource": {"group": "example.kcr.dev", "version": "v1", "resource": "widgets"},
            "name": "w",
            "namespace": "default",
            "operation": op,
            "userInfo": {"username": "tester"},
            "object": object,
            "oldObject": old,
            "dryRun": false
        }
    })
}
