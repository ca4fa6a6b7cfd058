//! One API server per test binary, shared by its tests, each test in a namespace of its own:
//! [`TestNamespace`], whose docs tell how (they are the public face of this private module).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::Value;
use tokio::sync::watch;

use crate::backend::{Backend, SHARED_CONTROL_PLANE_ENV};
use crate::error::{EnvtestError, kube_error};
use crate::server::TestApiServer;

/// The shared server and the runtime it runs on.
struct Shared {
    server: Arc<TestApiServer>,
    runtime: tokio::runtime::Handle,
}

/// The outcome of the one start: `None` until it is known.
type Started = Option<Result<Arc<Shared>, String>>;

static SHARED: OnceLock<watch::Receiver<Started>> = OnceLock::new();

/// Starts the shared server on a thread of its own (once per process) and returns the channel
/// its outcome arrives on.
fn launch() -> watch::Receiver<Started> {
    let (tx, rx) = watch::channel(None);
    let spawned = std::thread::Builder::new()
        .name("kcr-envtest-shared".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("kcr-envtest-shared")
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tx.send_replace(Some(Err(format!("cannot build its tokio runtime: {e}"))));
                    return;
                }
            };
            runtime.block_on(async move {
                match start().await {
                    Ok(server) => {
                        tx.send_replace(Some(Ok(Arc::new(Shared {
                            server: Arc::new(server),
                            runtime: tokio::runtime::Handle::current(),
                        }))));
                        // Serve until the process ends (see the module docs).
                        std::future::pending::<()>().await;
                    }
                    Err(e) => {
                        tx.send_replace(Some(Err(e.to_string())));
                    }
                }
            });
        });
    if let Err(e) = spawned {
        // The sender was dropped with the closure: waiters see a closed channel.
        tracing::error!(error = %e, "cannot start the shared kcr-envtest thread");
    }
    rx
}

/// The shared server: on the real backend with [`SHARED_CONTROL_PLANE_ENV`] set, attached to
/// the control plane that file describes; otherwise a server of this process's own.
async fn start() -> Result<TestApiServer, EnvtestError> {
    match std::env::var_os(SHARED_CONTROL_PLANE_ENV) {
        Some(path) if !path.is_empty() && Backend::from_env()? == Backend::Real => {
            TestApiServer::builder().attach(path).start().await
        }
        _ => TestApiServer::start().await,
    }
}

/// Waits for the shared server (starting it on the first call).
async fn shared() -> Result<Arc<Shared>, EnvtestError> {
    let mut rx = SHARED.get_or_init(launch).clone();
    let started = rx
        .wait_for(Option::is_some)
        .await
        .map_err(|_| EnvtestError::SharedServer {
            reason: "its thread could not be started".into(),
        })?;
    match &*started {
        Some(Ok(shared)) => Ok(shared.clone()),
        Some(Err(reason)) => Err(EnvtestError::SharedServer {
            reason: reason.clone(),
        }),
        None => Err(EnvtestError::SharedServer {
            reason: "it never reported its start".into(),
        }),
    }
}

/// One API server per test binary, shared by its tests, each test in a namespace of its own
/// (`TestNamespace`).
///
/// Starting a real control plane takes seconds (etcd, kube-apiserver and
/// kube-controller-manager); a test binary whose tests each start one spends most of its time
/// waiting for them. [`TestNamespace::new`] instead starts one server for the whole test
/// binary on its first use (on the backend `KCR_ENVTEST_BACKEND` names) and gives each test a
/// fresh namespace on it, with a client whose default namespace is that namespace.
///
/// # Isolation, and what needs a server of its own
/// - Namespaced objects are isolated by the namespace: use [`TestNamespace::namespace`] (or
///   `Api::default_namespaced`) rather than `"default"`.
/// - Cluster-scoped objects (CRDs aside, which tests install idempotently) are seen by every
///   test of the binary: give them names from [`TestNamespace::unique_name`], and do not
///   assert on whole cluster-scoped lists.
/// - Fault injection ([`Faults`](crate::Faults)) acts on the whole server, so it is not offered
///   here: a test that injects faults, compacts history, pauses the server, counts requests or
///   needs a pristine cluster starts its own [`TestApiServer`].
///
/// # One control plane for a whole run
/// A test runner that gives every test a process of its own (cargo-nextest) would start a
/// control plane per test on the real backend. With
/// [`SHARED_CONTROL_PLANE_ENV`](crate::SHARED_CONTROL_PLANE_ENV) naming the attachment file of a
/// control plane another process runs (`kcr-envtest --attachment FILE` on the real backend, as
/// kcr's CI does), each process's shared server attaches to that one instead
/// ([`TestApiServerBuilder::attach`](crate::TestApiServerBuilder::attach)): a fault proxy of
/// its own in front of the common kube-apiserver. Every test binary then shares the cluster, so
/// the rules above hold across binaries too: unique names for cluster-scoped objects, a CRD
/// installed by several binaries must be the same everywhere, and a test that leaves
/// cluster-wide state behind (a CRD whose conversion webhook dies with the test process) or
/// assumes a CRD absent starts a server of its own.
///
/// # Lifetime
/// The server runs on a runtime of its own (a background thread), so it outlives each test's
/// tokio runtime. It starts on the first use and lives until the test process ends: libtest has
/// no "after the last test" hook, and a process exit runs no destructors, so the real backend's
/// processes are stopped by their watchdogs (see `real/process.rs`), which also remove its
/// temporary directory; they act however the process ends (normal exit, a panic, a signal,
/// SIGKILL). A dropped `TestNamespace` sends its namespace's deletion and waits until the API
/// server accepts it (the namespace controller then removes it in the background). On the
/// `existing` backend the shared server's own `kcr-test-*` namespace (empty: every test works in
/// a namespace of its own) stays when the process ends; it carries the label
/// `app.kubernetes.io/managed-by=kcr-envtest` to find it by.
///
/// A start that fails is reported to every test that asks (with the original error), and is
/// not retried: a missing binary fails each test at once rather than once per test.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::api::{Api, PostParams};
/// use kcr_envtest::TestNamespace;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let ns = TestNamespace::new("doc").await?;
/// let cms: Api<ConfigMap> = Api::default_namespaced(ns.client());
/// let mut cm = ConfigMap::default();
/// cm.metadata.name = Some("settings".into());
/// let created = cms.create(&PostParams::default(), &cm).await?;
/// assert_eq!(created.metadata.namespace.as_deref(), Some(ns.namespace()));
/// # Ok(())
/// # }
/// ```
///
/// The namespace is created by [`TestNamespace::new`] and deleted when the handle is dropped.
pub struct TestNamespace {
    shared: Arc<Shared>,
    namespace: String,
    suffix: String,
    client: kube::Client,
}

impl std::fmt::Debug for TestNamespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestNamespace")
            .field("namespace", &self.namespace)
            .field("backend", &self.backend())
            .field("addr", &self.shared.server.addr())
            .finish_non_exhaustive()
    }
}

/// A DNS-label prefix from `hint`: lower case letters, digits and `-`, at most 40 characters,
/// never empty and never starting or ending with `-`.
fn label_prefix(hint: &str) -> String {
    let mut out: String = hint
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    out.truncate(40);
    let trimmed = out.trim_matches('-');
    if trimmed.is_empty() {
        "test".to_string()
    } else {
        trimmed.to_string()
    }
}

/// Eight random lower-case letters and digits.
fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let bytes = *uuid::Uuid::new_v4().as_bytes();
    bytes[..8]
        .iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect()
}

impl TestNamespace {
    /// Creates a namespace named `<prefix>-<8 random characters>` (the prefix reduced to a
    /// DNS label: lower case, other characters replaced by `-`, at most 40 characters) on the
    /// shared server, starting that server if this is the binary's first use of it.
    pub async fn new(prefix: &str) -> Result<TestNamespace, EnvtestError> {
        let shared = shared().await?;
        let suffix = random_suffix();
        let namespace = format!("{}-{suffix}", label_prefix(prefix));
        let created = {
            let server = shared.server.clone();
            let namespace = namespace.clone();
            shared
                .runtime
                .spawn(async move {
                    let api: Api<Namespace> = Api::all(server.client());
                    let mut ns = Namespace::default();
                    ns.metadata.name = Some(namespace.clone());
                    api.create(&PostParams::default(), &ns)
                        .await
                        .map(|_| ())
                        .map_err(kube_error(format!(
                            "creating the test namespace {namespace}"
                        )))
                })
                .await
        };
        match created {
            Ok(result) => result?,
            Err(join) => {
                return Err(EnvtestError::SharedServer {
                    reason: format!("creating a namespace did not finish: {join}"),
                });
            }
        }
        let client = client_in(&shared.server, &namespace).await?;
        Ok(TestNamespace {
            shared,
            namespace,
            suffix,
            client,
        })
    }

    /// The namespace's name: the default namespace of [`client`](Self::client) and of the
    /// kubeconfig.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// A `kube::Client` for the shared server whose default namespace is this namespace. It
    /// was made on the runtime that called [`new`](Self::new): use it there (a client's pooled
    /// connections belong to the runtime that opened them).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// `<prefix>-u<this namespace's random suffix>`: a name no other test of the binary uses,
    /// for cluster-scoped objects (ClusterRoles, Nodes, PersistentVolumes, Namespaces, ...). The
    /// `u` keeps it apart from every test namespace's name (`<prefix>-<suffix>`), whatever the
    /// prefixes.
    pub fn unique_name(&self, prefix: &str) -> String {
        format!("{}-u{}", label_prefix(prefix), self.suffix)
    }

    /// The backend the shared server runs.
    pub fn backend(&self) -> Backend {
        self.shared.server.backend()
    }

    /// The shared server's base URL.
    pub fn url(&self) -> String {
        self.shared.server.url()
    }

    /// The shared server's listening address.
    pub fn addr(&self) -> SocketAddr {
        self.shared.server.addr()
    }

    /// A kubeconfig for the shared server whose context's namespace is this namespace (kubectl
    /// without `-n` works in it).
    pub fn kubeconfig(&self) -> Kubeconfig {
        let mut config = self.shared.server.kubeconfig();
        for context in &mut config.contexts {
            if let Some(context) = &mut context.context {
                context.namespace = Some(self.namespace.clone());
            }
        }
        config
    }

    /// The kubeconfig as YAML text.
    pub fn kubeconfig_yaml(&self) -> Result<String, EnvtestError> {
        serde_saphyr::to_string(&self.kubeconfig()).map_err(|e| EnvtestError::Prepare {
            what: "the kubeconfig".into(),
            reason: e.to_string(),
        })
    }

    /// Writes the kubeconfig (YAML) to `path`.
    pub fn write_kubeconfig(&self, path: impl AsRef<Path>) -> Result<(), EnvtestError> {
        let path = path.as_ref();
        std::fs::write(path, self.kubeconfig_yaml()?).map_err(|source| {
            EnvtestError::WriteKubeconfig {
                path: path.display().to_string(),
                source,
            }
        })
    }

    /// Whether garbage collection and namespace deletion finish asynchronously (see
    /// [`TestApiServer::has_asynchronous_garbage_collection`]).
    pub fn has_asynchronous_garbage_collection(&self) -> bool {
        self.shared.server.has_asynchronous_garbage_collection()
    }

    /// Runs `f` with the shared server on the shared runtime and waits for its result.
    async fn on_server<T, F, Fut>(&self, what: &str, f: F) -> Result<T, EnvtestError>
    where
        T: Send + 'static,
        F: FnOnce(Arc<TestApiServer>) -> Fut,
        Fut: std::future::Future<Output = Result<T, EnvtestError>> + Send + 'static,
    {
        let fut = f(self.shared.server.clone());
        match self.shared.runtime.spawn(fut).await {
            Ok(result) => result,
            Err(join) => Err(EnvtestError::SharedServer {
                reason: format!("{what} did not finish: {join}"),
            }),
        }
    }

    /// [`TestApiServer::upsert`] on the shared server; a namespaced object without a namespace
    /// goes into this namespace.
    pub async fn upsert(&self, obj: Value) -> Result<Value, EnvtestError> {
        let namespace = self.namespace.clone();
        self.on_server("upsert", move |server| async move {
            server.upsert_defaulting(obj, &namespace).await
        })
        .await
    }

    /// [`TestApiServer::install_crd`] on the shared server (CRDs are cluster-scoped: every test
    /// of the binary sees them; installing the same one again is harmless).
    pub async fn install_crd<K: kube::CustomResourceExt>(&self) -> Result<(), EnvtestError> {
        let crd = serde_json::to_value(K::crd()).map_err(|source| EnvtestError::Serialize {
            what: "CustomResourceDefinition".into(),
            source,
        })?;
        self.install_crd_value(crd).await
    }

    /// [`TestApiServer::install_crd_value`] on the shared server.
    pub async fn install_crd_value(&self, crd: Value) -> Result<(), EnvtestError> {
        self.on_server("installing a CRD", move |server| async move {
            server.install_crd_value(crd).await
        })
        .await
    }

    /// [`TestApiServer::add_nodes`] on the shared server: the nodes are numbered across every
    /// test of the binary (names are unique, but not `envtest-node-0` onwards).
    pub async fn add_nodes(&self, n: usize) -> Result<Vec<String>, EnvtestError> {
        self.on_server("adding nodes", move |server| async move {
            server.add_nodes(n).await
        })
        .await
    }

    /// [`TestApiServer::add_user`] on the shared server: a user with a client certificate of
    /// its own, authorized by RBAC alone (real backend only; [`EnvtestError::Unsupported`] in
    /// process). Users are cluster-wide: take the name from [`unique_name`](Self::unique_name).
    pub fn add_user(&self, name: &str, groups: &[&str]) -> Result<crate::TestUser, EnvtestError> {
        self.shared.server.add_user(name, groups)
    }

    /// [`TestApiServer::resource_version`] of the shared server.
    pub async fn resource_version(&self) -> Result<u64, EnvtestError> {
        self.on_server("reading the resourceVersion", |server| async move {
            server.resource_version().await
        })
        .await
    }
}

/// How long dropping a [`TestNamespace`] waits for the API server to accept the namespace's
/// deletion.
const DELETE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl Drop for TestNamespace {
    /// Sends the namespace's DELETE from the shared server's runtime and waits (up to
    /// ten seconds) until the API server has accepted it; the namespace controller then
    /// removes it in the background. Waiting matters on the `existing` backend: the process can
    /// end right after its last test, and a DELETE that never went out would leave the
    /// namespace in someone's cluster.
    fn drop(&mut self) {
        let server = self.shared.server.clone();
        let namespace = std::mem::take(&mut self.namespace);
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        self.shared.runtime.spawn(async move {
            let api: Api<Namespace> = Api::all(server.client());
            if let Err(e) = api.delete(&namespace, &DeleteParams::default()).await {
                tracing::warn!(%namespace, error = %e, "cannot delete a test namespace");
            }
            let _ = done_tx.send(());
        });
        // Another runtime's threads send the DELETE, so blocking this one cannot deadlock.
        let _ = done_rx.recv_timeout(DELETE_WAIT);
    }
}

/// A client for `server` whose default namespace is `namespace`, made on the caller's runtime.
async fn client_in(server: &TestApiServer, namespace: &str) -> Result<kube::Client, EnvtestError> {
    let mut kubeconfig = server.kubeconfig();
    for context in &mut kubeconfig.contexts {
        if let Some(context) = &mut context.context {
            context.namespace = Some(namespace.to_string());
        }
    }
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| EnvtestError::Client(e.to_string()))?;
    config.default_namespace = namespace.to_string();
    crate::connect::client(config).map_err(EnvtestError::Client)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_become_dns_labels() {
        assert_eq!(label_prefix("crud"), "crud");
        assert_eq!(label_prefix("My_Test::case"), "my-test--case");
        assert_eq!(label_prefix("--"), "test");
        assert_eq!(label_prefix(""), "test");
        assert_eq!(label_prefix(&"a".repeat(100)).len(), 40);
    }

    #[test]
    fn suffixes_are_eight_label_characters_and_differ() {
        let a = random_suffix();
        let b = random_suffix();
        assert_eq!(a.len(), 8);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        );
        assert_ne!(a, b);
    }
}
