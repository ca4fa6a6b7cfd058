//! The API server calls a webhook that requires mutual TLS (issue 27, item 3): the webhook
//! server asks for client certificates of a client CA, and kube-apiserver presents one because
//! its admission configuration (`--admission-control-config-file`, set with
//! `TestApiServerBuilder::admission_control_config_file`) gives the webhook admission plugins a
//! kubeconfig with a user named after the webhook's `host:port`, which is how kube-apiserver
//! picks the credentials of a webhook it calls by URL.
//!
//! Real backend only: kube-apiserver is what reads the admission configuration. On the
//! in-process backend the option is a typed refusal, and the in-process server's admission
//! client, which presents no certificate, is refused by the webhook server.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use common::{CertDir, SLOW};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kcr_envtest::{Backend, EnvtestError, TestApiServer};
use kcr_webhook::{
    AdmissionContext, CertificateAuthority, ServerOptions, TlsOptions, WebhookServer, admission_fn,
};
use kube::Api;
use kube::api::PostParams;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The namespace the test's ConfigMaps are created in (the webhooks see no other).
const NAMESPACE: &str = "mtls";
/// The label whose value picks the webhook configuration: `ip` or `localhost`.
const VIA: &str = "mtls.kcr.dev/via";
/// A ConfigMap with this label is denied by the handler.
const DENY: &str = "mtls.kcr.dev/deny";
/// The common name of the client certificate kube-apiserver presents.
const CLIENT_CN: &str = "kube-apiserver-webhook-client";

/// One call of the handler: the path, the object's name, the client certificate's CN.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Call {
    path: String,
    name: String,
    common_name: Option<String>,
}

/// A webhook server on 127.0.0.1 that requires client certificates of `clients`' CA, with a
/// handler at `/mtls` and `/mtls-localhost` that records every call and denies objects
/// labelled [`DENY`].
struct MtlsWebhook {
    server: WebhookServer,
    serving: CertificateAuthority,
    clients: CertificateAuthority,
    calls: Arc<Mutex<Vec<Call>>>,
    _certs: CertDir,
    dir: tempfile::TempDir,
    stop: CancellationToken,
}

impl Drop for MtlsWebhook {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl MtlsWebhook {
    async fn start() -> MtlsWebhook {
        let serving = CertificateAuthority::generate("mtls serving CA").unwrap();
        let clients = CertificateAuthority::generate("mtls client CA").unwrap();
        let mut certs = CertDir::new();
        certs.publish(&serving.issue(&["localhost", "127.0.0.1"]).unwrap());
        let dir = tempfile::tempdir().unwrap();
        let bundle = dir.path().join("client-ca.crt");
        std::fs::write(&bundle, clients.ca_pem()).unwrap();
        let server = WebhookServer::bind(
            ServerOptions::default()
                .bind_address("127.0.0.1:0".parse().unwrap())
                .cert_dir(certs.path())
                .tls(TlsOptions::default().client_ca_file(&bundle)),
        )
        .await
        .unwrap();
        let calls = Arc::new(Mutex::new(Vec::new()));
        for path in ["/mtls", "/mtls-localhost"] {
            let calls = calls.clone();
            server
                .admission_handler(
                    path,
                    admission_fn(
                        move |ctx: AdmissionContext, req: AdmissionRequest<DynamicObject>| {
                            let calls = calls.clone();
                            async move {
                                let common_name = ctx
                                    .client_certificate()
                                    .and_then(|c| c.common_name().map(str::to_string));
                                calls.lock().push(Call {
                                    path: ctx.path().to_string(),
                                    name: req.name.clone(),
                                    common_name: common_name.clone(),
                                });
                                let denied = req
                                    .object
                                    .as_ref()
                                    .and_then(|o| o.metadata.labels.as_ref())
                                    .is_some_and(|l| l.contains_key(DENY));
                                let response = AdmissionResponse::from(&req);
                                if denied {
                                    response.deny(format!(
                                        "{} is labelled {DENY}; caller CN={}",
                                        req.name,
                                        common_name.as_deref().unwrap_or("none")
                                    ))
                                } else {
                                    response
                                }
                            }
                        },
                    ),
                )
                .unwrap();
        }
        let stop = CancellationToken::new();
        let (run, token) = (server.clone(), stop.clone());
        tokio::spawn(async move { run.run(token).await });
        MtlsWebhook {
            server,
            serving,
            clients,
            calls,
            _certs: certs,
            dir,
            stop,
        }
    }

    fn port(&self) -> u16 {
        self.server.local_addr().port()
    }

    fn calls(&self) -> Vec<Call> {
        self.calls.lock().clone()
    }

    /// Writes the admission configuration and the kubeconfig it names: one user,
    /// `127.0.0.1:<port>`, with a client certificate of the client CA. Returns the
    /// configuration's path.
    fn write_admission_config(&self) -> PathBuf {
        let b64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
        let client = self.clients.issue_client(CLIENT_CN, None).unwrap();
        let kubeconfig_path = self.dir.path().join("webhook-kubeconfig.yaml");
        let kubeconfig = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "users": [{
                "name": format!("127.0.0.1:{}", self.port()),
                "user": {
                    "client-certificate-data": b64(&client.cert_pem),
                    "client-key-data": b64(&client.key_pem),
                },
            }],
        });
        write_json(&kubeconfig_path, &kubeconfig);
        let webhook_admission = json!({
            "apiVersion": "apiserver.config.k8s.io/v1",
            "kind": "WebhookAdmissionConfiguration",
            "kubeConfigFile": kubeconfig_path.display().to_string(),
        });
        let config_path = self.dir.path().join("admission-config.yaml");
        write_json(
            &config_path,
            &json!({
                "apiVersion": "apiserver.config.k8s.io/v1",
                "kind": "AdmissionConfiguration",
                "plugins": [
                    {"name": "ValidatingAdmissionWebhook", "configuration": webhook_admission},
                    {"name": "MutatingAdmissionWebhook", "configuration": webhook_admission},
                ],
            }),
        );
        config_path
    }

    /// A validating webhook configuration `name` for ConfigMap creates in [`NAMESPACE`]
    /// labelled `via=<via>`, calling `https://<host>:<port><path>` with failure policy Fail.
    fn configuration(
        &self,
        name: &str,
        host: &str,
        path: &str,
        via: &str,
    ) -> ValidatingWebhookConfiguration {
        let ca_bundle =
            base64::engine::general_purpose::STANDARD.encode(self.serving.ca_pem().as_bytes());
        serde_json::from_value(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{
                "name": format!("{name}.kcr.dev"),
                "clientConfig": {
                    "url": format!("https://{host}:{}{path}", self.port()),
                    "caBundle": ca_bundle,
                },
                "rules": [{
                    "apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["configmaps"],
                }],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}},
                "objectSelector": {"matchLabels": {VIA: via}},
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 10,
            }],
        }))
        .unwrap()
    }
}

fn write_json(path: &Path, value: &Value) {
    std::fs::write(path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
}

fn config_map(name: &str, via: &str, deny: bool) -> ConfigMap {
    let mut labels = json!({ VIA: via });
    if deny {
        labels[DENY] = json!("true");
    }
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": {"k": "v"},
    }))
    .unwrap()
}

fn dry_run() -> PostParams {
    PostParams {
        dry_run: true,
        ..PostParams::default()
    }
}

fn status(err: kube::Error) -> Box<kube::core::Status> {
    match err {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other}"),
    }
}

async fn create_namespace(client: &kube::Client) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

/// Waits until a dry-run create of `cm` fails with a message containing `expected` (the
/// configuration is in effect: kube-apiserver loads configurations in the background).
async fn wait_for_failure(api: &Api<ConfigMap>, cm: &ConfigMap, expected: &str) {
    kcr_envtest::eventually(
        &format!("a dry-run create fails with {expected:?}"),
        SLOW,
        || async move {
            match api.create(&dry_run(), cm).await {
                Ok(_) => Err("created: the webhook is not in effect yet".to_string()),
                Err(e) if e.to_string().contains(expected) => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_presents_the_client_certificate_of_its_admission_config() {
    let backend = Backend::from_env().unwrap();
    let hooks = MtlsWebhook::start().await;
    let config = hooks.write_admission_config();
    if backend != Backend::Real {
        in_process_refusals(backend, &hooks, &config).await;
        return;
    }
    let server = TestApiServer::builder()
        .admission_control_config_file(&config)
        .start()
        .await
        .unwrap();
    let client = server.client();
    create_namespace(&client).await;
    let vwcs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);

    // 127.0.0.1:<port> has a user in the admission kubeconfig: kube-apiserver presents its
    // certificate, the webhook server verifies it and the handler sees its subject.
    vwcs.create(
        &PostParams::default(),
        &hooks.configuration("mtls-ip", "127.0.0.1", "/mtls", "ip"),
    )
    .await
    .unwrap();
    wait_for_failure(
        &cms,
        &config_map("probe", "ip", true),
        &format!("probe is labelled {DENY}"),
    )
    .await;

    let created = cms
        .create(&PostParams::default(), &config_map("allowed", "ip", false))
        .await
        .unwrap();
    assert_eq!(created.metadata.name.as_deref(), Some("allowed"));
    let allowed: Vec<Call> = hooks
        .calls()
        .into_iter()
        .filter(|c| c.name == "allowed")
        .collect();
    assert_eq!(
        allowed,
        [Call {
            path: "/mtls".into(),
            name: "allowed".into(),
            common_name: Some(CLIENT_CN.into()),
        }]
    );
    // Every call, the probes' too, came with the certificate.
    assert!(
        hooks
            .calls()
            .iter()
            .all(|c| c.common_name.as_deref() == Some(CLIENT_CN)),
        "{:?}",
        hooks.calls()
    );

    // The handler's denial reaches the client with its message (a denial without a code is
    // a 400, as kube-apiserver answers it).
    let denied = status(
        cms.create(&PostParams::default(), &config_map("denied", "ip", true))
            .await
            .unwrap_err(),
    );
    assert_eq!(denied.code, 400, "{denied:?}");
    assert_eq!(
        denied.message,
        format!(
            "admission webhook \"mtls-ip.kcr.dev\" denied the request: denied is labelled \
             {DENY}; caller CN={CLIENT_CN}"
        )
    );
    assert!(cms.get_opt("denied").await.unwrap().is_none());

    // localhost:<port> has no user in the admission kubeconfig: kube-apiserver calls without a
    // certificate, the TLS handshake is refused, and failurePolicy Fail fails the create.
    let before = hooks.calls().len();
    vwcs.create(
        &PostParams::default(),
        &hooks.configuration(
            "mtls-localhost",
            "localhost",
            "/mtls-localhost",
            "localhost",
        ),
    )
    .await
    .unwrap();
    let failed_call = "failed calling webhook \"mtls-localhost.kcr.dev\"";
    wait_for_failure(&cms, &config_map("probe", "localhost", false), failed_call).await;
    let err = status(
        cms.create(
            &PostParams::default(),
            &config_map("no-certificate", "localhost", false),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(err.code, 500, "{err:?}");
    assert!(err.message.contains(failed_call), "{}", err.message);
    assert!(
        err.message.contains(&format!(
            "https://localhost:{}/mtls-localhost",
            hooks.port()
        )),
        "{}",
        err.message
    );
    // The webhook server's TLS alert, as Go's client reports it.
    assert!(
        err.message
            .ends_with("remote error: tls: certificate required"),
        "{}",
        err.message
    );
    assert!(cms.get_opt("no-certificate").await.unwrap().is_none());
    let after: Vec<Call> = hooks.calls().split_off(before);
    assert!(
        after.is_empty(),
        "the handler was called without a certificate: {after:?}"
    );
    // The first webhook still works with its certificate.
    cms.create(&PostParams::default(), &config_map("still", "ip", false))
        .await
        .unwrap();
    assert_eq!(
        hooks.calls().last().and_then(|c| c.common_name.clone()),
        Some(CLIENT_CN.to_string())
    );
}

/// Off the real backend: the option is a typed refusal, and the in-process server's admission
/// client, which presents no certificate, is refused by the webhook server.
async fn in_process_refusals(backend: Backend, hooks: &MtlsWebhook, config: &Path) {
    let err = TestApiServer::builder()
        .admission_control_config_file(config)
        .start()
        .await
        .unwrap_err();
    match err {
        EnvtestError::Unsupported {
            helper, backend: b, ..
        } => {
            assert_eq!(
                helper,
                "TestApiServerBuilder::admission_control_config_file"
            );
            assert_eq!(b, backend);
        }
        other => panic!("expected Unsupported, got {other}"),
    }
    if backend != Backend::InProcess {
        return;
    }
    let server = TestApiServer::start().await.unwrap();
    let client = server.client();
    create_namespace(&client).await;
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .create(
            &PostParams::default(),
            &hooks.configuration("mtls-ip", "127.0.0.1", "/mtls", "ip"),
        )
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
    let err = status(
        cms.create(
            &PostParams::default(),
            &config_map("anonymous", "ip", false),
        )
        .await
        .unwrap_err(),
    );
    assert!(
        err.message
            .contains("failed calling webhook \"mtls-ip.kcr.dev\""),
        "{}",
        err.message
    );
    assert!(cms.get_opt("anonymous").await.unwrap().is_none());
    assert_eq!(hooks.calls(), []);
}
