//! The `existing` backend: the cluster of the current kubeconfig, as Go envtest's
//! `UseExistingCluster`, behind the same fault proxy as the real backend.
//!
//! Starting one:
//! 1. loads the kubeconfig: [`TestApiServerBuilder::kubeconfig_path`] when given, else
//!    `kube::Config::infer` (`KUBECONFIG`, else `~/.kube/config`, else the in-cluster service
//!    account), with its current context;
//! 2. creates a namespace of the test's own, `kcr-test-<8 random hex digits>`, labelled
//!    [`MANAGED_BY_LABEL`]`=kcr-envtest` (a leftover of a killed test process can be found with
//!    `kubectl get namespaces -l app.kubernetes.io/managed-by=kcr-envtest`);
//! 3. starts the fault proxy on loopback in front of the cluster. Its upstream is a
//!    `kube::Client` built from the kubeconfig ([`kube::Client::send`]), so whatever the
//!    kubeconfig authenticates with (client certificates, tokens, exec plugins) works, and
//!    faults, request counters, pauses, `close_watches` and `compact_history` (its Lease goes
//!    into the test's namespace) act as on the real backend. The proxy lends the kubeconfig's
//!    credentials, so, unlike the real backend's, it serves HTTPS with a certificate of a CA
//!    generated for it and admits only requests with a random bearer token; the handle's
//!    client and kubeconfig trust that CA and carry the token (HTTPS because kubectl sends no
//!    credentials over plain HTTP).
//!
//! Impersonation (`client_as`, `client_for_service_account`) passes the proxy as headers and
//! needs a kubeconfig user who may impersonate; a kubeconfig that impersonates by itself
//! (`as:`) and such a client do not mix.
//!
//! Dropping the handle deletes the namespace (the cluster's namespace controller then removes
//! what is in it) without needing a runtime: the DELETE is sent from a thread of its own with
//! its own small tokio runtime and a fresh client, and the drop waits for its answer up to
//! [`CLEANUP_TIMEOUT`]. Not a task on the caller's runtime: `#[tokio::test]` shuts its runtime
//! down right after the test returns, which is when most servers are dropped, and that would
//! cancel such a task before the DELETE went out. A failed deletion is reported on stderr with
//! the command that removes the namespace. The wait blocks the dropping thread: a stand-in
//! cluster served by the test's own runtime (another `TestApiServer` in the same test) needs a
//! multi-thread runtime, or the DELETE is answered only after the wait gave up.
//!
//! [`TestApiServerBuilder::kubeconfig_path`]: crate::TestApiServerBuilder::kubeconfig_path

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::error::{EnvtestError, kube_error};
use crate::faults::Faults;
use crate::real::pki::LoopbackTls;
use crate::real::proxy::{Expiry, Proxy, ProxyAccess, Upstream};

/// The label (value `kcr-envtest`) on every namespace the existing backend creates.
pub(crate) const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";

/// How long dropping the handle waits for the answer to the namespace's DELETE.
pub(crate) const CLEANUP_TIMEOUT: Duration = Duration::from_secs(10);

/// How many fresh names are tried when a namespace name is taken.
const NAME_ATTEMPTS: usize = 3;

/// A test's namespace on an existing cluster and the proxy in front of that cluster.
pub(crate) struct ExistingCluster {
    proxy: Proxy,
    direct: kube::Client,
    /// The kubeconfig's configuration, for the deletion of the namespace on drop.
    config: kube::Config,
    namespace: String,
    token: String,
    tls: LoopbackTls,
}

/// The kubeconfig's client configuration: from `path` when given, else inferred.
async fn load_config(path: Option<&Path>) -> Result<kube::Config, EnvtestError> {
    match path {
        Some(path) => {
            let from = path.display().to_string();
            let kubeconfig = Kubeconfig::read_from(path).map_err(|e| EnvtestError::Kubeconfig {
                from: from.clone(),
                reason: e.to_string(),
            })?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|e| EnvtestError::Kubeconfig {
                    from,
                    reason: e.to_string(),
                })
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| EnvtestError::Kubeconfig {
                from: "KUBECONFIG, ~/.kube/config or the in-cluster service account".into(),
                reason: e.to_string(),
            }),
    }
}

/// `prefix` and 8 random hex digits.
fn random_name(prefix: &str) -> String {
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}{}", &random[..8])
}

/// Create a fresh `kcr-test-*` namespace and return its name.
async fn create_namespace(client: &kube::Client) -> Result<String, EnvtestError> {
    let api: Api<Namespace> = Api::all(client.clone());
    let mut attempt = 1;
    loop {
        let name = random_name("kcr-test-");
        let namespace: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {MANAGED_BY_LABEL: "kcr-envtest"}}
        }))
        .map_err(|source| EnvtestError::Serialize {
            what: format!("namespace {name}"),
            source,
        })?;
        match api.create(&PostParams::default(), &namespace).await {
            Ok(_) => return Ok(name),
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < NAME_ATTEMPTS => attempt += 1,
            Err(e) => {
                return Err(kube_error(format!(
                    "creating the test namespace {name} on the existing cluster (the \
                     kubeconfig's user must be allowed to create namespaces)"
                ))(e));
            }
        }
    }
}

impl ExistingCluster {
    /// Load the kubeconfig (`kubeconfig`, else inferred), create the test's namespace and start
    /// the proxy on `127.0.0.1:port` (0 for any) applying `faults`.
    pub async fn start(
        port: u16,
        kubeconfig: Option<&Path>,
        faults: Faults,
        expiry: Arc<Expiry>,
    ) -> Result<ExistingCluster, EnvtestError> {
        let mut config = load_config(kubeconfig).await?;
        let client = |config: &kube::Config| {
            crate::connect::client(config.clone()).map_err(EnvtestError::Client)
        };
        let namespace = create_namespace(&client(&config)?).await?;
        config.default_namespace = namespace.clone();
        let direct = client(&config)?;
        // The proxy hands answers on as they came (no retries of 429/503/504 of its own) and
        // keeps watches open as long as the cluster does and answers (kcr-connect's bounds: a
        // watch the cluster stops sending bookmarks on ends with an error, as the client's
        // own would).
        let mut upstream = config.clone();
        upstream.default_retry = false;
        let started = async {
            let upstream = client(&upstream)?;
            let token = uuid::Uuid::new_v4().simple().to_string();
            let tls = LoopbackTls::generate()?;
            let access = ProxyAccess {
                tls: Some(Arc::new(tls.server_config()?)),
                token: Some(token.clone()),
                lease_namespace: namespace.clone(),
            };
            let proxy =
                Proxy::start(port, Upstream::Kube(upstream), access, faults, expiry).await?;
            Ok::<_, EnvtestError>((proxy, token, tls))
        }
        .await;
        match started {
            Ok((proxy, token, tls)) => {
                tracing::info!(%namespace, proxy = %proxy.addr(), "existing cluster: test namespace created");
                Ok(ExistingCluster {
                    proxy,
                    direct,
                    config,
                    namespace,
                    token,
                    tls,
                })
            }
            Err(e) => {
                let _ = Api::<Namespace>::all(direct)
                    .delete(&namespace, &DeleteParams::background())
                    .await;
                Err(e)
            }
        }
    }

    /// The proxy's address, where clients connect.
    pub fn proxy_addr(&self) -> std::net::SocketAddr {
        self.proxy.addr()
    }

    /// The bearer token the proxy asks for.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The proxy's CA certificate: PEM and DER.
    pub fn ca_cert(&self) -> (&str, &[u8]) {
        (&self.tls.ca_cert, &self.tls.ca_cert_der)
    }

    /// The test's namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// A client straight to the cluster with the kubeconfig's credentials (default namespace:
    /// the test's), past the proxy: the helpers' requests are neither counted nor failed.
    pub fn direct_client(&self) -> kube::Client {
        self.direct.clone()
    }

    /// Stop the proxy (also done on drop); the namespace stays until the handle is dropped.
    pub fn stop(&self) {
        self.proxy.stop();
    }
}

impl Drop for ExistingCluster {
    fn drop(&mut self) {
        self.proxy.stop();
        delete_namespace(self.config.clone(), self.namespace.clone());
    }
}

/// Delete `namespace` from a thread of its own (its own runtime and client, so it works in and
/// out of a runtime, also one that is shutting down), waiting up to [`CLEANUP_TIMEOUT`] for the
/// answer. A failure is reported on stderr with the command that finishes the job.
fn delete_namespace(config: kube::Config, namespace: String) {
    let (done, finished) = std::sync::mpsc::channel();
    let ns = namespace.clone();
    let spawned = std::thread::Builder::new()
        .name("kcr-envtest-cleanup".into())
        .spawn(move || {
            let result = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start a runtime: {e}"))
                .and_then(|runtime| runtime.block_on(send_delete(config, &ns)));
            let _ = done.send(result);
        });
    let outcome = match spawned {
        Err(e) => Err(format!("cannot start a thread: {e}")),
        Ok(_) => finished
            .recv_timeout(CLEANUP_TIMEOUT + Duration::from_secs(1))
            .unwrap_or_else(|_| Err("no answer in time".into())),
    };
    if let Err(why) = outcome {
        tracing::warn!(%namespace, %why, "kcr-envtest: the test namespace was not deleted");
        eprintln!(
            "kcr-envtest: could not delete the test namespace {namespace} ({why}); remove it with \
             `kubectl delete namespace {namespace}`"
        );
    }
}

/// The DELETE of `namespace` (background propagation); gone already counts as done.
async fn send_delete(config: kube::Config, namespace: &str) -> Result<(), String> {
    let client = crate::connect::client(config)?;
    let api: Api<Namespace> = Api::all(client);
    match tokio::time::timeout(
        CLEANUP_TIMEOUT,
        api.delete(namespace, &DeleteParams::background()),
    )
    .await
    {
        Err(_) => Err(format!("no answer in {} s", CLEANUP_TIMEOUT.as_secs())),
        Ok(Ok(_)) => Ok(()),
        Ok(Err(kube::Error::Api(s))) if s.code == 404 => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_namespaces_are_short_random_dns_labels() {
        let a = random_name("kcr-test-");
        let b = random_name("kcr-test-");
        assert_ne!(a, b);
        assert_eq!(a.len(), "kcr-test-".len() + 8);
        assert!(
            a.strip_prefix("kcr-test-")
                .unwrap()
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
            "{a}"
        );
    }

    #[tokio::test]
    async fn a_missing_kubeconfig_file_is_a_typed_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nowhere.kubeconfig");
        let Err(err) = load_config(Some(&path)).await else {
            panic!("loaded a missing kubeconfig");
        };
        assert!(matches!(err, EnvtestError::Kubeconfig { .. }), "{err}");
        let text = err.to_string();
        assert!(text.contains("nowhere.kubeconfig"), "{text}");
        assert!(text.contains("KUBECONFIG"), "{text}");
    }

    #[test]
    fn an_unreachable_cluster_reports_the_namespace_left_behind_without_panicking() {
        // Nothing listens on port 9 of loopback: the DELETE fails, the drop path reports it.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        delete_namespace(config, "kcr-test-unreachable".into());
    }
}
