//! Admission webhooks installed in one call ([`TestWebhooks::install`]): a CA and a serving
//! certificate for `127.0.0.1`, a kcr-webhook [`WebhookServer`] on a free loopback port run by
//! the test's manager, and the MutatingWebhookConfiguration and ValidatingWebhookConfiguration
//! pointing at it, written to the API server and removed again at the end.
//!
//! # In effect before `install` returns
//! kube-apiserver applies webhook configurations asynchronously (an informer), so a request
//! made right after they are written may not be sent to the webhooks yet. `install` therefore
//! waits until they are in effect: it writes, after the test's own configurations, a probe
//! pair (a mutating webhook that annotates, a validating one that denies and reports whether
//! the annotation arrived) matching only a labelled Lease, and dry-runs such a Lease until the
//! denial says both ran. The API server's configuration informers deliver in write order, so
//! once the later probe pair is in effect, the test's configurations are too. The probe pair
//! and its small HTTPS server are removed before `install` returns.
//!
//! # On a shared server
//! With a [`TestNamespace`](kcr_envtest::TestNamespace) (other tests share the server), every
//! webhook is limited to the test's namespace with a `namespaceSelector`, so other tests'
//! objects never reach this test's webhooks.
//!
//! The webhook server is served by the manager ([`ManagerWebhookExt::add_webhook_server`]):
//! the API server's calls wait until the manager runs, so start it before writing objects that
//! the webhooks handle.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1 as ar;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kcr_controller::Manager;
use kcr_webhook::{ClientTarget, ManagerWebhookExt, ServerOptions, WebhookError, WebhookServer};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use crate::cluster::TestCluster;
use crate::error::{TestkitError, api_error};

/// How long [`TestWebhooks::install`] waits for the configurations to be in effect.
const IN_EFFECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The label (and annotation) of the probe.
const PROBE_KEY: &str = "kcr-testkit/webhook-probe";
/// The label upstream sets on every namespace with its own name.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The installed webhooks of a test: see the [module docs](self).
pub struct TestWebhooks {
    server: WebhookServer,
    ca_pem: String,
    name: String,
    client: kube::Client,
    paths: Vec<String>,
    installed: bool,
    _cert_dir: tempfile::TempDir,
}

impl std::fmt::Debug for TestWebhooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestWebhooks")
            .field("name", &self.name)
            .field("addr", &self.server.local_addr())
            .field("paths", &self.paths)
            .finish_non_exhaustive()
    }
}

impl TestWebhooks {
    /// Binds a webhook server on `127.0.0.1:<free port>` with a fresh CA and certificate, adds
    /// it to `mgr` (served when the manager runs), calls `register` to register the test's
    /// webhooks on it (`mgr.webhook::<K>(server).defaulter(..).complete()`), writes the
    /// webhook configurations for them to `cluster` and waits until the API server applies
    /// them.
    pub async fn install<T>(
        mgr: &Manager,
        cluster: &impl TestCluster,
        register: impl FnOnce(&WebhookServer) -> Result<T, WebhookError>,
    ) -> Result<TestWebhooks, TestkitError> {
        let ca = kcr_tls::CertificateAuthority::generate("kcr-testkit webhooks")
            .map_err(|e| TestkitError::Certificates(e.to_string()))?;
        let cert = ca
            .issue(&["127.0.0.1"])
            .map_err(|e| TestkitError::Certificates(e.to_string()))?;
        let cert_dir = tempfile::Builder::new()
            .prefix("kcr-testkit-webhook-")
            .tempdir()
            .map_err(|e| TestkitError::Certificates(format!("a temporary directory: {e}")))?;
        cert.write_to_dir(cert_dir.path())
            .map_err(|e| TestkitError::Certificates(e.to_string()))?;
        let server = WebhookServer::bind(
            ServerOptions::default()
                .bind_address(SocketAddr::from(([127, 0, 0, 1], 0)))
                .cert_dir(cert_dir.path()),
        )
        .await?;
        server
            .cert_watcher()
            .load()
            .map_err(|e| TestkitError::Certificates(e.to_string()))?;
        mgr.add_webhook_server(&server)?;
        register(&server)?;

        let name = format!("kcr-testkit-{}", short_id());
        let scope = cluster.is_shared().then(|| cluster.namespace().to_string());
        let (mut mutating, mut validating) = server.webhook_configurations(
            &name,
            &ClientTarget::url_for(server.local_addr()),
            ca.ca_pem().as_bytes(),
        );
        if let Some(ns) = &scope {
            let selector = namespace_selector(ns);
            for w in mutating.webhooks.iter_mut().flatten() {
                w.namespace_selector = Some(selector.clone());
            }
            for w in validating.webhooks.iter_mut().flatten() {
                w.namespace_selector = Some(selector.clone());
            }
        }
        let client = cluster.client();
        let mut hooks = TestWebhooks {
            paths: server.paths(),
            server,
            ca_pem: ca.ca_pem().to_string(),
            name,
            client: client.clone(),
            installed: true,
            _cert_dir: cert_dir,
        };
        let pp = PostParams::default();
        if mutating.webhooks.as_ref().is_some_and(|w| !w.is_empty()) {
            Api::<ar::MutatingWebhookConfiguration>::all(client.clone())
                .create(&pp, &mutating)
                .await
                .map_err(api_error(format!(
                    "creating the MutatingWebhookConfiguration {}",
                    hooks.name
                )))?;
        }
        if validating.webhooks.as_ref().is_some_and(|w| !w.is_empty()) {
            Api::<ar::ValidatingWebhookConfiguration>::all(client.clone())
                .create(&pp, &validating)
                .await
                .map_err(api_error(format!(
                    "creating the ValidatingWebhookConfiguration {}",
                    hooks.name
                )))?;
        }
        let probe = Probe::start(&cert, &ca).await?;
        let in_effect = probe
            .wait_in_effect(&client, &hooks.name, cluster.namespace(), scope.as_deref())
            .await;
        probe.remove(&client, &hooks.name).await;
        if let Err(e) = in_effect {
            hooks.remove().await.ok();
            return Err(e);
        }
        Ok(hooks)
    }

    /// The webhook server (its address, paths, registrations).
    pub fn server(&self) -> &WebhookServer {
        &self.server
    }

    /// The configurations' name (both the mutating and the validating one).
    pub fn configuration_name(&self) -> &str {
        &self.name
    }

    /// The CA certificate (PEM) that signed the server's certificate: the `caBundle`.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The paths of the registered webhooks.
    pub fn paths(&self) -> &[String] {
        &self.paths
    }

    /// Deletes the webhook configurations (a missing one is fine). Dropping the handle does
    /// the same in the background, without reporting.
    pub async fn uninstall(mut self) -> Result<(), TestkitError> {
        self.remove().await
    }

    async fn remove(&mut self) -> Result<(), TestkitError> {
        self.installed = false;
        delete_configurations(&self.client, &self.name).await
    }
}

impl Drop for TestWebhooks {
    fn drop(&mut self) {
        if !self.installed {
            return;
        }
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let (client, name) = (self.client.clone(), self.name.clone());
            handle.spawn(async move {
                if let Err(e) = delete_configurations(&client, &name).await {
                    tracing::warn!(%name, error = %e, "cannot remove test webhook configurations");
                }
            });
        }
    }
}

/// Deletes the mutating and validating configurations named `name`; a 404 is success.
async fn delete_configurations(client: &kube::Client, name: &str) -> Result<(), TestkitError> {
    let dp = DeleteParams::default();
    fn gone<T>(r: Result<T, kube::Error>) -> Result<(), kube::Error> {
        match r {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }
    gone(
        Api::<ar::MutatingWebhookConfiguration>::all(client.clone())
            .delete(name, &dp)
            .await,
    )
    .map_err(api_error(format!(
        "deleting the MutatingWebhookConfiguration {name}"
    )))?;
    gone(
        Api::<ar::ValidatingWebhookConfiguration>::all(client.clone())
            .delete(name, &dp)
            .await,
    )
    .map_err(api_error(format!(
        "deleting the ValidatingWebhookConfiguration {name}"
    )))
}

/// Eight random characters for names.
fn short_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_string()
}

/// A selector of the namespace named `ns`.
fn namespace_selector(ns: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some([(NAMESPACE_NAME_LABEL.to_string(), ns.to_string())].into()),
        ..LabelSelector::default()
    }
}

/// The probe: a small HTTPS server with a mutating path that annotates and a validating path
/// that denies, reporting whether the annotation arrived.
struct Probe {
    addr: SocketAddr,
    ca_pem: String,
    id: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Probe {
    async fn start(
        cert: &kcr_tls::ServingCert,
        ca: &kcr_tls::CertificateAuthority,
    ) -> Result<Probe, TestkitError> {
        let bad = |what: &str, e: &dyn std::fmt::Display| {
            TestkitError::Certificates(format!("the probe's {what}: {e}"))
        };
        let certs: Vec<rustls::pki_types::CertificateDer<'static>> =
            pem::parse_many(&cert.cert_pem)
                .map_err(|e| bad("certificate", &e))?
                .into_iter()
                .map(|p| rustls::pki_types::CertificateDer::from(p.into_contents()))
                .collect();
        let key = pem::parse(&cert.key_pem).map_err(|e| bad("key", &e))?;
        let key = rustls::pki_types::PrivateKeyDer::try_from(key.into_contents())
            .map_err(|e| bad("key", &e))?;
        let tls = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| bad("TLS settings", &e))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| bad("TLS settings", &e))?;
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| bad("listener", &e))?;
        let addr = listener.local_addr().map_err(|e| bad("listener", &e))?;
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // Bounded, as every handshake: a caller that never finishes holds nothing.
                    let accepted =
                        tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp));
                    let Ok(Ok(stream)) = accepted.await else {
                        return;
                    };
                    let service = hyper::service::service_fn(
                        |req: hyper::Request<hyper::body::Incoming>| async move {
                            let mutate = req.uri().path().ends_with("/mutate");
                            let body = req
                                .into_body()
                                .collect()
                                .await
                                .map(|b| b.to_bytes())
                                .unwrap_or_default();
                            let review: Value =
                                serde_json::from_slice(&body).unwrap_or(Value::Null);
                            let answer = probe_answer(mutate, &review).to_string();
                            Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from(
                                answer,
                            ))))
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Probe {
            addr,
            ca_pem: ca.ca_pem().to_string(),
            id: short_id(),
            task,
        })
    }

    fn client_config(&self, path: &str) -> ar::WebhookClientConfig {
        ar::WebhookClientConfig {
            ca_bundle: Some(ByteString(self.ca_pem.clone().into_bytes())),
            service: None,
            url: Some(format!("https://{}/{path}", self.addr)),
        }
    }

    fn object_selector(&self) -> LabelSelector {
        LabelSelector {
            match_labels: Some([(PROBE_KEY.to_string(), self.id.clone())].into()),
            ..LabelSelector::default()
        }
    }

    fn rules() -> Vec<ar::RuleWithOperations> {
        vec![ar::RuleWithOperations {
            api_groups: Some(vec!["coordination.k8s.io".into()]),
            api_versions: Some(vec!["v1".into()]),
            operations: Some(vec!["CREATE".into()]),
            resources: Some(vec!["leases".into()]),
            scope: Some("Namespaced".into()),
        }]
    }

    /// Writes the probe configurations (named `<name>-probe`) and dry-runs a labelled Lease in
    /// `namespace` until both probes ran, up to [`IN_EFFECT_TIMEOUT`].
    async fn wait_in_effect(
        &self,
        client: &kube::Client,
        name: &str,
        namespace: &str,
        scope: Option<&str>,
    ) -> Result<(), TestkitError> {
        let probe_name = format!("{name}-probe");
        let meta = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(probe_name.clone()),
            ..Default::default()
        };
        let mutating = ar::MutatingWebhookConfiguration {
            metadata: meta.clone(),
            webhooks: Some(vec![ar::MutatingWebhook {
                name: "mutate.probe.kcr-testkit.io".into(),
                admission_review_versions: vec!["v1".into()],
                client_config: self.client_config("mutate"),
                failure_policy: Some("Fail".into()),
                object_selector: Some(self.object_selector()),
                namespace_selector: scope.map(namespace_selector),
                rules: Some(Self::rules()),
                side_effects: "None".into(),
                timeout_seconds: Some(5),
                ..Default::default()
            }]),
        };
        let validating = ar::ValidatingWebhookConfiguration {
            metadata: meta,
            webhooks: Some(vec![ar::ValidatingWebhook {
                name: "validate.probe.kcr-testkit.io".into(),
                admission_review_versions: vec!["v1".into()],
                client_config: self.client_config("validate"),
                failure_policy: Some("Fail".into()),
                object_selector: Some(self.object_selector()),
                namespace_selector: scope.map(namespace_selector),
                rules: Some(Self::rules()),
                side_effects: "None".into(),
                timeout_seconds: Some(5),
                ..Default::default()
            }]),
        };
        let pp = PostParams::default();
        Api::<ar::MutatingWebhookConfiguration>::all(client.clone())
            .create(&pp, &mutating)
            .await
            .map_err(api_error(format!(
                "creating the probe MutatingWebhookConfiguration {probe_name}"
            )))?;
        Api::<ar::ValidatingWebhookConfiguration>::all(client.clone())
            .create(&pp, &validating)
            .await
            .map_err(api_error(format!(
                "creating the probe ValidatingWebhookConfiguration {probe_name}"
            )))?;

        let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
        let mut lease = Lease::default();
        lease.metadata.generate_name = Some("kcr-testkit-probe-".into());
        lease.metadata.labels = Some([(PROBE_KEY.to_string(), self.id.clone())].into());
        let dry_run = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        let started = tokio::time::Instant::now();
        loop {
            let last = match leases.create(&dry_run, &lease).await {
                Err(kube::Error::Api(status)) if status.message.contains(PROBE_IN_EFFECT) => {
                    return Ok(());
                }
                Err(e) => e.to_string(),
                Ok(_) => {
                    "the dry-run create was allowed: the probe webhooks were not called".into()
                }
            };
            if started.elapsed() >= IN_EFFECT_TIMEOUT {
                return Err(TestkitError::WebhooksNotInEffect {
                    name: name.to_string(),
                    waited: IN_EFFECT_TIMEOUT,
                    last,
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Deletes the probe configurations (best effort: they match only the probe's own label).
    async fn remove(&self, client: &kube::Client, name: &str) {
        if let Err(e) = delete_configurations(client, &format!("{name}-probe")).await {
            tracing::warn!(error = %e, "cannot remove the webhook probe configurations");
        }
    }
}

/// What the validating probe says once both probes ran.
const PROBE_IN_EFFECT: &str = "kcr-testkit webhook probe: mutated=yes";

/// The probe's AdmissionReview answer: on `mutate`, allow with a patch that sets the probe
/// annotation; otherwise deny, saying whether the annotation is there.
fn probe_answer(mutate: bool, review: &Value) -> Value {
    let uid = review["request"]["uid"].clone();
    let response = if mutate {
        use base64::Engine as _;
        let patch = json!([{"op": "add", "path": "/metadata/annotations",
            "value": {PROBE_KEY: "mutated"}}]);
        json!({"uid": uid, "allowed": true, "patchType": "JSONPatch",
            "patch": base64::engine::general_purpose::STANDARD.encode(patch.to_string())})
    } else {
        let mutated =
            review["request"]["object"]["metadata"]["annotations"][PROBE_KEY] == "mutated";
        let message = if mutated {
            PROBE_IN_EFFECT.to_string()
        } else {
            "kcr-testkit webhook probe: mutated=no".to_string()
        };
        json!({"uid": uid, "allowed": false, "status": {"code": 403, "message": message}})
    };
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_annotates_then_reports_the_annotation() {
        let review = json!({"request": {"uid": "u1", "object": {"metadata": {}}}});
        let mutated = probe_answer(true, &review);
        assert_eq!(mutated["response"]["uid"], "u1");
        assert_eq!(mutated["response"]["allowed"], true);
        assert_eq!(mutated["response"]["patchType"], "JSONPatch");

        let denied = probe_answer(false, &review);
        assert_eq!(denied["response"]["allowed"], false);
        assert_eq!(
            denied["response"]["status"]["message"],
            "kcr-testkit webhook probe: mutated=no"
        );
        let review = json!({"request": {"uid": "u2", "object": {"metadata":
            {"annotations": {PROBE_KEY: "mutated"}}}}});
        assert_eq!(
            probe_answer(false, &review)["response"]["status"]["message"],
            PROBE_IN_EFFECT
        );
    }

    #[test]
    fn namespace_selectors_match_the_name_label() {
        let s = namespace_selector("t-1");
        assert_eq!(
            s.match_labels
                .unwrap()
                .get(NAMESPACE_NAME_LABEL)
                .map(String::as_str),
            Some("t-1")
        );
    }
}
