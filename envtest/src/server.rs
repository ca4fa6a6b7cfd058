//! The server handle: listener, connection handling, kube client and kubeconfig, helpers.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kube::config::{Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::api::Shared;
use crate::backend::Backend;
use crate::defaults::NOT_READY_TAINT;
use crate::error::{ApiError, EnvtestError, kube_error};
use crate::existing::ExistingCluster;
use crate::faults::Faults;
use crate::real::ControlPlane;
use crate::resources::ResourceType;
use crate::store::{Store, StoredObject};
use crate::user::TestUser;

/// Options for [`TestApiServer`]; obtained from [`TestApiServer::builder`].
#[derive(Debug, Clone, Default)]
pub struct TestApiServerBuilder {
    port: u16,
    history_window: Option<usize>,
    bookmark_interval: Option<Duration>,
    nodes: usize,
    backend: Option<Backend>,
    kubeconfig: Option<PathBuf>,
    admission_control_config: Option<PathBuf>,
    apiserver_flags: Vec<String>,
    etcd_flags: Vec<String>,
    attach: Option<PathBuf>,
}

impl TestApiServerBuilder {
    /// Listen on this port of 127.0.0.1 (default 0: a random free port).
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Number of events kept for watch resumption and consistent pagination (default
    /// 100,000). Resuming from an older resourceVersion gets 410 Expired. In-process backend
    /// only: [`start`](Self::start) on the real backend fails with
    /// [`EnvtestError::Unsupported`].
    pub fn history_window(mut self, events: usize) -> Self {
        self.history_window = Some(events);
        self
    }

    /// Interval of BOOKMARK events on watches that asked for them (default 10 s, tokio time).
    /// In-process backend only (kube-apiserver's interval is fixed): [`start`](Self::start) on
    /// the real backend fails with [`EnvtestError::Unsupported`].
    pub fn bookmark_interval(mut self, interval: Duration) -> Self {
        self.bookmark_interval = Some(interval);
        self
    }

    /// Run this backend whatever `KCR_ENVTEST_BACKEND` says (default: [`Backend::from_env`]).
    /// For tests of one backend's own behaviour.
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = Some(backend);
        self
    }

    /// Create this many simulated nodes at start (see [`TestApiServer::add_nodes`]; not on
    /// the existing backend, where [`start`](Self::start) fails with
    /// [`EnvtestError::Unsupported`]).
    pub fn nodes(mut self, nodes: usize) -> Self {
        self.nodes = nodes;
        self
    }

    /// The kubeconfig file of the existing cluster ([`Backend::Existing`]; its current
    /// context), instead of `KUBECONFIG` / `~/.kube/config`. Existing backend only: on the
    /// others, which start a server of their own, [`start`](Self::start) fails with
    /// [`EnvtestError::Unsupported`].
    pub fn kubeconfig_path(mut self, path: impl AsRef<Path>) -> Self {
        self.kubeconfig = Some(path.as_ref().to_path_buf());
        self
    }

    /// Start kube-apiserver with `--admission-control-config-file=<path>`: an
    /// `AdmissionConfiguration` (`apiserver.config.k8s.io/v1`) that configures its admission
    /// plugins, e.g. the `kubeConfigFile` with which `ValidatingAdmissionWebhook` and
    /// `MutatingAdmissionWebhook` authenticate to webhooks (a client certificate per webhook
    /// `host:port`, for webhooks that require mutual TLS). The file, and the files it names, must
    /// stay in place while the server runs (kube-apiserver reads them at start); a relative path
    /// is taken relative to the current directory.
    ///
    /// Real backend only: the in-process server's admission client presents no credentials,
    /// and an existing cluster's API server is configured already; on those
    /// [`start`](Self::start) fails with [`EnvtestError::Unsupported`]. The server is a control
    /// plane of its own, as every server this builder starts is (the binary's shared server,
    /// [`TestNamespace`](crate::TestNamespace), always runs kube-apiserver's defaults).
    #[must_use]
    pub fn admission_control_config_file(mut self, path: impl AsRef<Path>) -> Self {
        self.admission_control_config = Some(path.as_ref().to_path_buf());
        self
    }

    /// Adds a kube-apiserver flag (`--name=value`) after kcr-envtest's own, as envtest's
    /// `ControlPlane.APIServer.Configure()` does: a feature gate
    /// (`--feature-gates=Name=true`), an API group version (`--runtime-config=api/alpha=true`),
    /// any other setting; a flag kcr-envtest also sets is overridden (kube-apiserver takes the
    /// last). The flags that wire the control plane (addresses, ports, certificates, etcd) are
    /// kcr-envtest's: [`start`](Self::start) refuses them with an
    /// [`EnvtestError::Prepare`] naming the flag, as it refuses a flag not written
    /// `--name[=value]`.
    ///
    /// Real backend only (the in-process server has no flags; an existing cluster's API server
    /// is configured already): elsewhere [`start`](Self::start) fails with
    /// [`EnvtestError::Unsupported`]. The server is a control plane of its own.
    #[must_use]
    pub fn apiserver_flag(mut self, flag: impl Into<String>) -> Self {
        self.apiserver_flags.push(flag.into());
        self
    }

    /// Adds an etcd flag (`--name=value`) after kcr-envtest's own, as
    /// [`apiserver_flag`](Self::apiserver_flag) does for kube-apiserver (etcd's name, data
    /// directory and URLs are kcr-envtest's). Real backend only.
    #[must_use]
    pub fn etcd_flag(mut self, flag: impl Into<String>) -> Self {
        self.etcd_flags.push(flag.into());
        self
    }

    /// On the real backend, use the control plane another process runs, described by the
    /// attachment file it wrote ([`TestApiServer::write_attachment`]; the standalone
    /// `kcr-envtest --attachment FILE`), instead of starting one: this server is a fault proxy
    /// of its own in front of that kube-apiserver, so its faults and counters are its own, and
    /// every real-backend helper works; but the cluster (its cluster-scoped objects, its
    /// garbage collector) is shared with every other process attached to it. Nodes from
    /// [`add_nodes`](TestApiServer::add_nodes) get names unique to this server. How
    /// [`TestNamespace`](crate::TestNamespace) shares one control plane across the test
    /// processes of a run ([`SHARED_CONTROL_PLANE_ENV`](crate::SHARED_CONTROL_PLANE_ENV)).
    pub fn attach(mut self, attachment: impl AsRef<Path>) -> Self {
        self.attach = Some(attachment.as_ref().to_path_buf());
        self
    }

    /// Start the chosen backend and serve (see [`TestApiServer`]).
    pub async fn start(self) -> Result<TestApiServer, EnvtestError> {
        let backend = match self.backend {
            Some(b) => b,
            None => Backend::from_env()?,
        };
        if self.kubeconfig.is_some() && backend != Backend::Existing {
            return Err(EnvtestError::Unsupported {
                helper: "TestApiServerBuilder::kubeconfig_path",
                backend,
                why: "it names the cluster of the existing backend; this backend starts its own",
            });
        }
        if self.attach.is_some() && backend != Backend::Real {
            return Err(EnvtestError::Unsupported {
                helper: "TestApiServerBuilder::attach",
                backend,
                why: "it attaches to a real control plane another process runs",
            });
        }
        if !(self.apiserver_flags.is_empty() && self.etcd_flags.is_empty())
            && backend != Backend::Real
        {
            return Err(EnvtestError::Unsupported {
                helper: "TestApiServerBuilder::apiserver_flag and etcd_flag",
                backend,
                why: "only the real backend starts a kube-apiserver and an etcd (the in-process \
                      server has no flags; an existing cluster's API server is configured \
                      already)",
            });
        }
        if self.admission_control_config.is_some() && backend != Backend::Real {
            return Err(EnvtestError::Unsupported {
                helper: "TestApiServerBuilder::admission_control_config_file",
                backend,
                why: "it is a kube-apiserver flag: only the real backend starts a kube-apiserver \
                      (the in-process server's admission client presents no credentials; an \
                      existing cluster's API server is configured already)",
            });
        }
        let server = match backend {
            Backend::InProcess => self.start_in_process().await?,
            Backend::Real => self.start_real().await?,
            Backend::Existing => self.start_existing().await?,
        };
        if self.nodes > 0 {
            server.add_nodes(self.nodes).await?;
        }
        Ok(server)
    }

    async fn start_existing(&self) -> Result<TestApiServer, EnvtestError> {
        let unsupported = |helper, why| EnvtestError::Unsupported {
            helper,
            backend: Backend::Existing,
            why,
        };
        if self.history_window.is_some() {
            return Err(unsupported(
                "TestApiServerBuilder::history_window",
                "the cluster's API server sizes its watch cache itself; use \
                 Faults::compact_history for 410s",
            ));
        }
        if self.bookmark_interval.is_some() {
            return Err(unsupported(
                "TestApiServerBuilder::bookmark_interval",
                "the cluster's bookmark interval is fixed",
            ));
        }
        if self.nodes > 0 {
            return Err(unsupported(
                "TestApiServerBuilder::nodes",
                NO_NODES_ON_EXISTING,
            ));
        }
        let expiry = Arc::new(crate::real::proxy::Expiry::default());
        let compact = {
            let expiry = expiry.clone();
            Arc::new(move || expiry.request())
        };
        let faults = Faults::new(compact);
        let cluster = ExistingCluster::start(
            self.port,
            self.kubeconfig.as_deref(),
            faults.clone(),
            expiry,
        )
        .await?;
        let addr = cluster.proxy_addr();
        let (ca_pem, ca_der) = cluster.ca_cert();
        let access = Access {
            namespace: cluster.namespace().to_string(),
            token: Some(cluster.token().to_string()),
            ca_cert: Some((ca_pem.to_string(), ca_der.to_vec())),
        };
        Ok(TestApiServer {
            client: client_with(addr, &access, |_| {})?,
            running: Running::Existing(Box::new(cluster)),
            access,
            faults,
            addr,
            node_counter: Mutex::new(0),
            node_prefix: "envtest-node-".to_owned(),
        })
    }

    async fn start_real(&self) -> Result<TestApiServer, EnvtestError> {
        let unsupported = |helper, why| EnvtestError::Unsupported {
            helper,
            backend: Backend::Real,
            why,
        };
        if self.history_window.is_some() {
            return Err(unsupported(
                "TestApiServerBuilder::history_window",
                "kube-apiserver sizes its watch cache itself; use Faults::compact_history for 410s",
            ));
        }
        if self.bookmark_interval.is_some() {
            return Err(unsupported(
                "TestApiServerBuilder::bookmark_interval",
                "kube-apiserver's bookmark interval is fixed",
            ));
        }
        let expiry = Arc::new(crate::real::proxy::Expiry::default());
        let compact = {
            let expiry = expiry.clone();
            Arc::new(move || expiry.request())
        };
        let faults = Faults::new(compact);
        let (plane, node_prefix) = match &self.attach {
            Some(path) => {
                if !(self.apiserver_flags.is_empty() && self.etcd_flags.is_empty()) {
                    return Err(EnvtestError::Unsupported {
                        helper: "TestApiServerBuilder::apiserver_flag and etcd_flag",
                        backend: Backend::Real,
                        why: "an attached control plane runs already",
                    });
                }
                if self.admission_control_config.is_some() {
                    return Err(EnvtestError::Unsupported {
                        helper: "TestApiServerBuilder::admission_control_config_file",
                        backend: Backend::Real,
                        why: "an attached control plane's kube-apiserver runs already",
                    });
                }
                let attachment = read_attachment(path)?;
                let plane =
                    ControlPlane::attach(attachment, self.port, faults.clone(), expiry).await?;
                let tag = uuid::Uuid::new_v4().simple().to_string();
                (plane, format!("envtest-node-{}-", &tag[..8]))
            }
            None => {
                let flags = crate::real::ApiServerFlags {
                    admission_control_config: self.admission_control_config.clone(),
                    apiserver: self.apiserver_flags.clone(),
                    etcd: self.etcd_flags.clone(),
                };
                let plane = ControlPlane::start(self.port, &flags, faults.clone(), expiry).await?;
                (plane, "envtest-node-".to_owned())
            }
        };
        let addr = plane.proxy_addr();
        Ok(TestApiServer {
            client: client_for(addr)?,
            running: Running::Real(Box::new(plane)),
            access: Access::default(),
            faults,
            addr,
            node_counter: Mutex::new(0),
            node_prefix,
        })
    }

    async fn start_in_process(&self) -> Result<TestApiServer, EnvtestError> {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| EnvtestError::Bind {
                addr: addr.to_string(),
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| EnvtestError::Bind {
            addr: addr.to_string(),
            source,
        })?;
        let store = Arc::new(Mutex::new(Store::new(
            self.history_window.unwrap_or(DEFAULT_HISTORY_WINDOW),
        )));
        let rv_tx = Arc::new(watch::channel(0u64).0);
        let compact = {
            let store = store.clone();
            let rv_tx = rv_tx.clone();
            Arc::new(move || {
                let rv = {
                    let mut store = store.lock();
                    store.compact();
                    store.rv()
                };
                rv_tx.send_replace(rv);
            })
        };
        let shared = Arc::new(Shared {
            store,
            rv_tx,
            faults: Faults::new(compact),
            bookmark_interval: self.bookmark_interval.unwrap_or(DEFAULT_BOOKMARK_INTERVAL),
            shutdown: watch::channel(false).0,
        });
        for ns in crate::bootstrap::SYSTEM_NAMESPACES {
            let t = shared
                .store
                .lock()
                .registry
                .get("namespaces")
                .cloned()
                .ok_or_else(|| EnvtestError::Client("namespaces not registered".into()))?;
            shared
                .mutate(|s| {
                    // Created by kube-apiserver itself, which owns the name label.
                    let managed = json!([{"manager": "kube-apiserver", "operation": "Update",
                        "apiVersion": "v1", "time": crate::store::now_rfc3339(),
                        "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels":
                            {".": {}, "f:kubernetes.io/metadata.name": {}}}}}]);
                    s.create(
                        &t,
                        json!({"apiVersion": "v1", "kind": "Namespace",
                            "metadata": {"name": ns, "managedFields": managed}}),
                    )
                })
                .map_err(|error| EnvtestError::Api {
                    what: format!("namespace {ns}"),
                    error: Box::new(error),
                })?;
        }
        for (key, obj) in crate::bootstrap::objects(addr.port()) {
            let name = obj["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            shared
                .mutate(|s| {
                    let t = s.registry.get(key).cloned().ok_or_else(|| {
                        ApiError::new(500, "InternalError", format!("{key} not registered"))
                    })?;
                    s.create(&t, obj)
                })
                .map_err(|error| EnvtestError::Api {
                    what: format!("{key} {name}"),
                    error: Box::new(error),
                })?;
        }
        let client = client_for(addr)?;
        let handler = shared.clone();
        let task = tokio::spawn(crate::serve::serve(
            listener,
            shared.shutdown.subscribe(),
            None,
            shared.faults.partition(),
            move |req| crate::api::handle(handler.clone(), req),
        ));
        Ok(TestApiServer {
            faults: shared.faults.clone(),
            running: Running::InProcess { shared, task },
            access: Access::default(),
            addr,
            client,
            node_counter: Mutex::new(0),
            node_prefix: "envtest-node-".to_owned(),
        })
    }
}

/// The default of [`TestApiServerBuilder::history_window`].
const DEFAULT_HISTORY_WINDOW: usize = 100_000;
/// The default of [`TestApiServerBuilder::bookmark_interval`].
const DEFAULT_BOOKMARK_INTERVAL: Duration = Duration::from_secs(10);

/// Reads an attachment file ([`TestApiServer::write_attachment`]).
fn read_attachment(path: &Path) -> Result<crate::real::Attachment, EnvtestError> {
    let fail = |reason: String| EnvtestError::SharedServer {
        reason: format!("the control plane attachment {}: {reason}", path.display()),
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| fail(e.to_string()))
}

/// The message of [`EnvtestError::Unsupported`] for nodes on the existing backend.
const NO_NODES_ON_EXISTING: &str = "simulated Nodes are never created in a cluster that is not the test's own; \
     the existing cluster's own nodes are there to be listed";

/// What the clients of a [`TestApiServer`] use besides its address.
#[derive(Debug, Clone)]
struct Access {
    /// The default namespace of its client and kubeconfig.
    namespace: String,
    /// The bearer token its endpoint asks for (the existing backend's proxy).
    token: Option<String>,
    /// The CA certificate (PEM, DER) of its endpoint when that serves HTTPS (the existing
    /// backend's proxy).
    ca_cert: Option<(String, Vec<u8>)>,
}

impl Access {
    /// The URL of the endpoint at `addr`.
    fn url(&self, addr: SocketAddr) -> String {
        match self.ca_cert {
            Some(_) => format!("https://{addr}"),
            None => format!("http://{addr}"),
        }
    }
}

impl Default for Access {
    fn default() -> Self {
        Access {
            namespace: "default".to_string(),
            token: None,
            ca_cert: None,
        }
    }
}

/// A client for plain HTTP at `addr` (the in-process server or the real backend's proxy) with
/// default namespace `default`.
fn client_for(addr: SocketAddr) -> Result<kube::Client, EnvtestError> {
    client_with(addr, &Access::default(), |_| {})
}

/// A client for the endpoint at `addr` with `access`'s namespace, token and CA, its config
/// adjusted by `adjust` first.
fn client_with(
    addr: SocketAddr,
    access: &Access,
    adjust: impl FnOnce(&mut kube::Config),
) -> Result<kube::Client, EnvtestError> {
    let url = access.url(addr);
    let mut config = kube::Config::new(
        url.parse()
            .map_err(|e| EnvtestError::Client(format!("bad url {url}: {e}")))?,
    );
    config.default_namespace = access.namespace.clone();
    if let Some(token) = &access.token {
        config.auth_info.token = Some(token.clone().into());
    }
    if let Some((_, der)) = &access.ca_cert {
        config.root_cert = Some(vec![der.clone()]);
    }
    adjust(&mut config);
    crate::connect::client(config).map_err(EnvtestError::Client)
}

/// The backend a [`TestApiServer`] runs.
enum Running {
    InProcess {
        shared: Arc<Shared>,
        task: tokio::task::JoinHandle<()>,
    },
    Real(Box<ControlPlane>),
    Existing(Box<ExistingCluster>),
}

/// A running test API server: the in-process server, a real control plane behind a proxy, or
/// a namespace of its own on an existing cluster behind the same proxy ([`Backend`]). Stops
/// when dropped (on an existing cluster: deletes its namespace).
///
/// Clients connect on loopback in every case ([`TestApiServer::client`],
/// [`TestApiServer::kubeconfig`]): over plain HTTP, except to the existing backend's proxy,
/// which serves HTTPS with a CA of its own and asks for a bearer token (both in that client
/// and kubeconfig) because it lends the kubeconfig's credentials. [`TestApiServer::faults`]
/// works on all three. Helpers that write (`add_nodes`, `upsert`, `install_crd`,
/// `install_crds_from`) are `async`: on the real and existing backends they are API requests
/// that bypass the fault proxy.
pub struct TestApiServer {
    running: Running,
    access: Access,
    faults: Faults,
    addr: SocketAddr,
    client: kube::Client,
    node_counter: Mutex<usize>,
    /// Names of [`add_nodes`](Self::add_nodes): `envtest-node-`, with a tag of this server's
    /// own on an attached control plane.
    node_prefix: String,
}

impl std::fmt::Debug for TestApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestApiServer")
            .field("backend", &self.backend())
            .field("addr", &self.addr)
            .field("namespace", &self.access.namespace)
            .finish_non_exhaustive()
    }
}

impl TestApiServer {
    /// Start a server with default options on the backend `KCR_ENVTEST_BACKEND` names
    /// (default: in-process on `127.0.0.1:<random port>`).
    pub async fn start() -> Result<TestApiServer, EnvtestError> {
        TestApiServerBuilder::default().start().await
    }

    /// Options (backend, port, history window, bookmark interval, initial nodes, the existing
    /// cluster's kubeconfig, kube-apiserver's admission configuration).
    pub fn builder() -> TestApiServerBuilder {
        TestApiServerBuilder::default()
    }

    /// Which backend this server runs.
    pub fn backend(&self) -> Backend {
        match self.running {
            Running::InProcess { .. } => Backend::InProcess,
            Running::Real(_) => Backend::Real,
            Running::Existing(_) => Backend::Existing,
        }
    }

    /// The namespace this server's tests work in: the default namespace of [`client`] and of
    /// [`kubeconfig`] (so `Api::default_namespaced` and kubectl without `-n` land there), and
    /// where [`upsert`] puts a namespaced object that names none. On the existing backend a
    /// fresh `kcr-test-<random>` namespace created at start and deleted when the server is
    /// dropped; `default` on the others, which are the test's own.
    ///
    /// [`client`]: Self::client
    /// [`kubeconfig`]: Self::kubeconfig
    /// [`upsert`]: Self::upsert
    pub fn namespace(&self) -> &str {
        &self.access.namespace
    }

    /// The base URL clients use: `http://127.0.0.1:PORT` (the in-process server, or the real
    /// backend's fault proxy) or `https://127.0.0.1:PORT` (the existing backend's fault proxy,
    /// which asks for the bearer token and is signed by the CA that [`client`](Self::client)
    /// and [`kubeconfig`](Self::kubeconfig) carry).
    pub fn url(&self) -> String {
        self.access.url(self.addr)
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A `kube::Client` for this server (default namespace [`namespace`](Self::namespace); on
    /// the real backend it acts as an admin, on the existing one as the kubeconfig's user,
    /// through the fault proxy).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// A client that acts as `user` in `groups` (impersonation through the admin credential,
    /// or the existing cluster's kubeconfig user, who must be allowed to impersonate), for
    /// tests of RBAC: requests are authorized as that user. It goes through the fault proxy,
    /// so faults and counters apply. See also [`add_user`](Self::add_user) (a certificate of
    /// the user's own) and [`client_for_service_account`](Self::client_for_service_account).
    /// Real and existing backends: the in-process server authorizes nothing, so such a test
    /// would pass without proving anything.
    pub fn client_as(&self, user: &str, groups: &[&str]) -> Result<kube::Client, EnvtestError> {
        match &self.running {
            Running::Real(_) | Running::Existing(_) => {
                client_with(self.addr, &self.access, |config| {
                    config.auth_info.impersonate = Some(user.to_string());
                    config.auth_info.impersonate_groups = (!groups.is_empty())
                        .then(|| groups.iter().map(|g| g.to_string()).collect());
                })
            }
            Running::InProcess { .. } => Err(EnvtestError::Unsupported {
                helper: "TestApiServer::client_as",
                backend: Backend::InProcess,
                why: "the in-process server has no authentication or authorization",
            }),
        }
    }

    /// A kubeconfig pointing at this server (cluster, user and context named `envtest`; the
    /// context's namespace is [`namespace`](Self::namespace); on the existing backend the
    /// user holds the proxy's bearer token).
    pub fn kubeconfig(&self) -> Kubeconfig {
        envtest_kubeconfig(
            Cluster {
                server: Some(self.url()),
                certificate_authority_data: self
                    .access
                    .ca_cert
                    .as_ref()
                    .map(|(pem, _)| base64_text(pem)),
                ..Cluster::default()
            },
            kube::config::AuthInfo {
                token: self.access.token.clone().map(Into::into),
                ..kube::config::AuthInfo::default()
            },
            &self.access.namespace,
        )
    }

    /// The kubeconfig as YAML text.
    pub fn kubeconfig_yaml(&self) -> String {
        kubeconfig_text(
            &self.url(),
            &self.access.namespace,
            self.access.token.as_deref(),
            self.access.ca_cert.as_ref().map(|(pem, _)| pem.as_str()),
        )
    }

    /// Write the kubeconfig (YAML) to `path`, for kubectl or other processes.
    /// On the existing backend the file holds the proxy's bearer token and is written readable
    /// by its owner only.
    pub fn write_kubeconfig(&self, path: impl AsRef<Path>) -> Result<(), EnvtestError> {
        let path = path.as_ref();
        let yaml = self.kubeconfig_yaml();
        if self.access.token.is_some() {
            return crate::user::write_owner_only(path, &yaml);
        }
        std::fs::write(path, yaml).map_err(|source| EnvtestError::WriteKubeconfig {
            path: path.display().to_string(),
            source,
        })
    }

    /// A kubeconfig straight to kube-apiserver (HTTPS with the generated CA, the admin client
    /// certificate), past the fault proxy. Real backend only (in process there is no TLS
    /// endpoint; on an existing cluster the direct way is the user's own kubeconfig, whose
    /// credentials this crate does not hand out).
    pub fn direct_kubeconfig(&self) -> Result<Kubeconfig, EnvtestError> {
        match &self.running {
            Running::Real(plane) => Ok(plane.direct_kubeconfig().clone()),
            Running::InProcess { .. } => Err(EnvtestError::Unsupported {
                helper: "TestApiServer::direct_kubeconfig",
                backend: Backend::InProcess,
                why: "the in-process server has no TLS endpoint; use kubeconfig()",
            }),
            Running::Existing(_) => Err(EnvtestError::Unsupported {
                helper: "TestApiServer::direct_kubeconfig",
                backend: Backend::Existing,
                why: "the direct way to an existing cluster is your own kubeconfig (KUBECONFIG), \
                      whose credentials are not handed out; use kubeconfig() for the proxy",
            }),
        }
    }

    /// A user of the real backend with credentials of its own: a fresh client certificate for
    /// `CN=name, O=groups` (the API server's x509 authenticator makes the CN the user name and
    /// each O a group, and adds `system:authenticated`), signed by the control plane's CA, and
    /// a client and kubeconfig that present it straight to kube-apiserver over HTTPS.
    ///
    /// The user is authenticated, not impersonated: nothing but RBAC decides what it may do
    /// (a user in `system:masters` may do anything), and `SelfSubjectReview` reports exactly
    /// that name and those groups. Its requests do not go through the fault proxy, which
    /// authenticates upstream with the admin certificate and so cannot carry a user's own
    /// credentials: faults and request counters do not apply to them. For RBAC tests through
    /// the proxy use [`client_as`](Self::client_as) (impersonation) or
    /// [`client_for_service_account`](Self::client_for_service_account).
    ///
    /// Real backend only ([`EnvtestError::Unsupported`] otherwise): the in-process server
    /// authenticates nothing, and an existing cluster's CA key is not at hand.
    pub fn add_user(&self, name: &str, groups: &[&str]) -> Result<TestUser, EnvtestError> {
        match &self.running {
            Running::Real(plane) => {
                if name.is_empty() {
                    return Err(EnvtestError::Prepare {
                        what: "a user's client certificate".into(),
                        reason: "the user name is empty: the API server's x509 authenticator \
                                 needs a common name"
                            .into(),
                    });
                }
                let kubeconfig = plane.user_kubeconfig(name, groups)?;
                TestUser::new(name, groups, kubeconfig)
            }
            Running::InProcess { .. } => Err(EnvtestError::Unsupported {
                helper: "TestApiServer::add_user",
                backend: Backend::InProcess,
                why: "the in-process server authenticates and authorizes nothing",
            }),
            Running::Existing(_) => Err(EnvtestError::Unsupported {
                helper: "TestApiServer::add_user",
                backend: Backend::Existing,
                why: "the existing cluster's CA key is not at hand to sign a certificate; use \
                      client_as (impersonation) or client_for_service_account",
            }),
        }
    }

    /// Whether other servers share this server's cluster, so that what a test writes
    /// cluster-wide (webhook configurations, CRDs, Nodes) reaches their tests too: on the
    /// existing backend (every server is a namespace of the kubeconfig's cluster) and on a
    /// control plane another process runs ([`TestApiServerBuilder::attach`]). Test helpers
    /// restrict what they install to [`namespace`](Self::namespace) then (kcr-testkit's
    /// webhooks do).
    pub fn shares_its_cluster(&self) -> bool {
        match &self.running {
            Running::InProcess { .. } => false,
            Running::Real(plane) => plane.is_attached(),
            Running::Existing(_) => true,
        }
    }

    /// Whether this backend runs the garbage collector and the namespace controller as separate
    /// controllers (the real backend with kube-controller-manager, and an existing cluster:
    /// deletions of owners and namespaces finish asynchronously). The in-process server does
    /// both inside the delete request.
    pub fn has_asynchronous_garbage_collection(&self) -> bool {
        match &self.running {
            Running::Real(plane) => plane.has_controller_manager(),
            Running::InProcess { .. } => false,
            Running::Existing(_) => true,
        }
    }

    /// The temporary directory of the real backend (etcd data, certificates, logs under
    /// `logs/`), for a test that wants to show a log on failure. `None` on the others.
    pub fn real_dir(&self) -> Option<&Path> {
        match &self.running {
            Running::Real(plane) => plane.dir(),
            Running::InProcess { .. } | Running::Existing(_) => None,
        }
    }

    /// Write what another process needs to use this server's control plane (real backend):
    /// see [`TestApiServerBuilder::attach`]. JSON, readable by its owner only (it holds the
    /// control plane's CA key and admin credential).
    pub fn write_attachment(&self, path: impl AsRef<Path>) -> Result<(), EnvtestError> {
        let Running::Real(plane) = &self.running else {
            return Err(EnvtestError::Unsupported {
                helper: "TestApiServer::write_attachment",
                backend: self.backend(),
                why: "only the real backend runs a control plane other processes can use",
            });
        };
        let json = serde_json::to_string_pretty(plane.attachment()).map_err(|source| {
            EnvtestError::Serialize {
                what: "the control plane's attachment".into(),
                source,
            }
        })?;
        crate::user::write_owner_only(path.as_ref(), &json)
    }

    /// Fault injection and request counters (on the real and existing backends, applied by the
    /// proxy to the requests that go through it: those of [`client`](Self::client),
    /// [`client_as`](Self::client_as) and [`kubeconfig`](Self::kubeconfig), not the helpers'
    /// or an [`add_user`](Self::add_user) client's).
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// The current (latest) resourceVersion of the server: the store's counter in process, the
    /// resourceVersion of a fresh list on the real backend (of namespaces) and on an existing
    /// cluster (of ConfigMaps in [`namespace`](Self::namespace), which the kubeconfig's user
    /// may list).
    pub async fn resource_version(&self) -> Result<u64, EnvtestError> {
        use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
        use kube::api::{Api, ListParams};
        let params = ListParams::default().limit(1);
        let rv = match &self.running {
            Running::InProcess { shared, .. } => return Ok(shared.store.lock().rv()),
            Running::Real(plane) => {
                Api::<Namespace>::all(plane.direct_client())
                    .list_metadata(&params)
                    .await
                    .map_err(kube_error("reading the current resourceVersion"))?
                    .metadata
                    .resource_version
            }
            Running::Existing(cluster) => {
                Api::<ConfigMap>::namespaced(cluster.direct_client(), cluster.namespace())
                    .list_metadata(&params)
                    .await
                    .map_err(kube_error("reading the current resourceVersion"))?
                    .metadata
                    .resource_version
            }
        };
        let rv = rv.unwrap_or_default();
        rv.parse().map_err(|_| {
            EnvtestError::Client(format!(
                "the API server answered a non-numeric resourceVersion {rv:?}"
            ))
        })
    }

    /// Add `n` simulated Nodes named `envtest-node-<i>` (continuing the numbering), each with
    /// capacity and allocatable (4 CPU, 16Gi memory, 110 pods), a Ready condition, the
    /// `kubernetes.io/hostname` label and the usual os/arch labels, and no taints. Returns their
    /// names.
    ///
    /// They look like nodes a cluster has finished registering: the real API server taints every
    /// new Node `node.kubernetes.io/not-ready:NoSchedule` (its TaintNodesByCondition admission)
    /// and the node lifecycle controller removes the taint once the node is Ready; no such
    /// controller runs here, so on the real backend this helper removes it. A Node created
    /// through the API keeps the taint on both backends.
    ///
    /// Not on the existing backend ([`EnvtestError::Unsupported`]): Nodes are never created in
    /// a cluster that is not the test's own.
    pub async fn add_nodes(&self, n: usize) -> Result<Vec<String>, EnvtestError> {
        if let Running::Existing(_) = self.running {
            return Err(EnvtestError::Unsupported {
                helper: "TestApiServer::add_nodes",
                backend: Backend::Existing,
                why: NO_NODES_ON_EXISTING,
            });
        }
        let mut names = Vec::with_capacity(n);
        let start = {
            let mut counter = self.node_counter.lock();
            let start = *counter;
            *counter += n;
            start
        };
        let now = crate::store::now_rfc3339();
        for i in start..start + n {
            let name = format!("{}{i}", self.node_prefix);
            let node = crate::nodes::simulated_node(&name, &now);
            let stored = self.upsert(node).await?;
            if let Running::Real(plane) = &self.running {
                mark_registered(&plane.direct_client(), &name, &stored).await?;
            }
            names.push(name);
        }
        Ok(names)
    }

    /// Create or replace an object, status included, bypassing fault injection. In process it
    /// is written straight into the store (no HTTP, admission or schema validation, but the
    /// metadata rules: uid, resourceVersion, generation, watch events); on the real and
    /// existing backends it is a create (or a replace of the existing object) and, when the
    /// object carries a status and the resource has a status subresource, a replace of the
    /// status. The resource is found from `apiVersion` and `kind`; a namespaced object without
    /// a namespace goes into [`namespace`](Self::namespace). Returns the stored object.
    pub async fn upsert(&self, obj: Value) -> Result<Value, EnvtestError> {
        self.upsert_defaulting(obj, self.namespace()).await
    }

    /// [`upsert`](Self::upsert), with `namespace` for a namespaced object that names none.
    pub(crate) async fn upsert_defaulting(
        &self,
        obj: Value,
        namespace: &str,
    ) -> Result<Value, EnvtestError> {
        match &self.running {
            Running::InProcess { shared, .. } => upsert_in_process(shared, obj, namespace),
            Running::Real(plane) => upsert_real(&plane.direct_client(), namespace, obj).await,
            Running::Existing(cluster) => {
                upsert_real(&cluster.direct_client(), namespace, obj).await
            }
        }
    }

    /// Install (create or replace) the CustomResourceDefinition of a kube-derive
    /// `CustomResource` type; its resource is served as soon as this returns.
    pub async fn install_crd<K: kube::CustomResourceExt>(&self) -> Result<(), EnvtestError> {
        let crd = serde_json::to_value(K::crd()).map_err(|source| EnvtestError::Serialize {
            what: "CustomResourceDefinition".into(),
            source,
        })?;
        self.install_crd_value(crd).await
    }

    /// Install (create or replace) a CustomResourceDefinition given as JSON; its resources are
    /// served (in discovery too) when this returns. On an existing cluster the CRD stays when
    /// the server is dropped (CRDs are cluster-wide; as Go envtest, which leaves them unless
    /// told to clean up).
    pub async fn install_crd_value(&self, mut crd: Value) -> Result<(), EnvtestError> {
        crd["apiVersion"] = json!("apiextensions.k8s.io/v1");
        crd["kind"] = json!("CustomResourceDefinition");
        match &self.running {
            Running::InProcess { shared, .. } => install_crd_in_process(shared, crd),
            Running::Real(plane) => crate::real::crds::install(&plane.direct_client(), crd).await,
            Running::Existing(cluster) => {
                crate::real::crds::install(&cluster.direct_client(), crd).await
            }
        }
    }

    /// Install the CustomResourceDefinitions of YAML or JSON files, as Go envtest's
    /// `CRDDirectoryPaths`; returns their names in install order.
    ///
    /// `path` is a file or a directory. A file holds one or more YAML documents (`---`
    /// separated, empty documents skipped) or, named `*.json`, one JSON object. A directory
    /// stands for every `*.yaml`, `*.yml` and `*.json` file directly in it, in the order of their
    /// names; subdirectories are not read (one level, as Go envtest). Every document must be an
    /// `apiextensions.k8s.io/v1` CustomResourceDefinition.
    ///
    /// All files are read and checked before anything is installed: a missing or unreadable
    /// path, a directory without such files, YAML or JSON that does not parse, and a document
    /// that is not a v1 CRD are an [`EnvtestError::CrdFile`] naming the file (and the
    /// document's index, counted from 1 without empty documents), and nothing is installed.
    /// Each CRD is then installed with [`install_crd_value`](Self::install_crd_value), so it
    /// works on every backend; an API error there stops the installation (the CRDs before it
    /// stay installed).
    ///
    /// ```no_run
    /// # async fn f(server: &kcr_envtest::TestApiServer) -> Result<(), kcr_envtest::EnvtestError> {
    /// let installed = server.install_crds_from("config/crd/bases").await?;
    /// assert!(!installed.is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn install_crds_from(
        &self,
        path: impl AsRef<Path>,
    ) -> Result<Vec<String>, EnvtestError> {
        let crds = crate::crd_files::read(path.as_ref())?;
        let mut names = Vec::with_capacity(crds.len());
        for crd in crds {
            self.install_crd_value(crd.value).await?;
            names.push(crd.name);
        }
        Ok(names)
    }

    /// Stop serving (also done on drop): the listener closes, open connections and watches
    /// end; on the real backend the processes are killed; on the existing one the proxy stops
    /// (the namespace is deleted when the server is dropped).
    pub fn shutdown(&self) {
        match &self.running {
            Running::InProcess { shared, .. } => {
                shared.shutdown.send_replace(true);
            }
            Running::Real(plane) => plane.stop(),
            Running::Existing(cluster) => cluster.stop(),
        }
    }
}

fn upsert_in_process(
    shared: &Shared,
    mut obj: Value,
    namespace: &str,
) -> Result<Value, EnvtestError> {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default().to_string();
    let kind = obj["kind"].as_str().unwrap_or_default().to_string();
    let t = shared
        .store
        .lock()
        .registry
        .lookup_kind(&api_version, &kind)
        .ok_or_else(|| EnvtestError::Api {
            what: format!("{api_version} {kind}"),
            error: Box::new(ApiError::not_found("", &kind, "")),
        })?;
    if t.namespaced
        && obj["metadata"]["namespace"]
            .as_str()
            .is_none_or(str::is_empty)
    {
        obj["metadata"]["namespace"] = json!(namespace);
    }
    obj["apiVersion"] = json!(t.api_version(t.storage_version()));
    let stored = upsert_stored(shared, &t, obj)?;
    Ok(crate::convert::from_storage(
        &t,
        t.storage_version(),
        &stored.value,
    ))
}

/// Writes `obj` straight into the store as a `t`; an error names the object (`Kind name`).
fn upsert_stored(
    shared: &Shared,
    t: &ResourceType,
    obj: Value,
) -> Result<Arc<StoredObject>, EnvtestError> {
    let what = format!(
        "{} {}",
        t.kind,
        obj["metadata"]["name"].as_str().unwrap_or_default()
    );
    shared
        .mutate(|s| s.upsert(t, obj))
        .map_err(|error| EnvtestError::Api {
            what,
            error: Box::new(error),
        })
}

fn install_crd_in_process(shared: &Shared, crd: Value) -> Result<(), EnvtestError> {
    let t = shared
        .store
        .lock()
        .registry
        .get("apiextensions.k8s.io/customresourcedefinitions")
        .cloned()
        .ok_or_else(|| EnvtestError::Client("CRDs not registered".into()))?;
    upsert_stored(shared, &t, crd).map(|_| ())
}

/// What the node lifecycle controller does for a Ready node: remove the not-ready taint from
/// `stored` (the node as the write returned it), guarded by a `test` of the taint list, so a
/// concurrent change is never overwritten.
async fn mark_registered(
    client: &kube::Client,
    name: &str,
    stored: &Value,
) -> Result<(), EnvtestError> {
    use kube::api::{Api, Patch, PatchParams};
    let api: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let taints = stored["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !taints.iter().any(|t| t["key"] == NOT_READY_TAINT) {
        return Ok(());
    }
    let kept: Vec<&Value> = taints
        .iter()
        .filter(|t| t["key"] != NOT_READY_TAINT)
        .collect();
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/spec/taints", "value": taints},
        {"op": "replace", "path": "/spec/taints", "value": kept},
    ]))
    .map_err(|source| EnvtestError::Serialize {
        what: format!("the taint patch of node {name}"),
        source,
    })?;
    api.patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
        .map_err(kube_error(format!(
            "removing the not-ready taint of node {name}"
        )))?;
    Ok(())
}

/// How often [`upsert_real`] starts over when another writer overtakes it.
const UPSERT_ATTEMPTS: usize = 10;

/// [`TestApiServer::upsert`] on the real and existing backends: a namespaced object without a
/// namespace goes into `default_namespace`.
async fn upsert_real(
    client: &kube::Client,
    default_namespace: &str,
    mut obj: Value,
) -> Result<Value, EnvtestError> {
    use kube::api::{Api, DynamicObject, PostParams};
    use kube::discovery::pinned_kind;
    let api_version = obj["apiVersion"].as_str().unwrap_or_default().to_string();
    let kind = obj["kind"].as_str().unwrap_or_default().to_string();
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let what = format!("{api_version} {kind} {name}");
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), api_version.clone()),
    };
    let gvk = kube::api::GroupVersionKind::gvk(&group, &version, &kind);
    let (resource, caps) = pinned_kind(client, &gvk)
        .await
        .map_err(kube_error(format!("finding the resource of {what}")))?;
    let api: Api<DynamicObject> = if caps.scope == kube::discovery::Scope::Namespaced {
        let ns = obj["metadata"]["namespace"]
            .as_str()
            .filter(|ns| !ns.is_empty())
            .unwrap_or(default_namespace)
            .to_string();
        obj["metadata"]["namespace"] = json!(ns);
        Api::namespaced_with(client.clone(), &ns, &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    };
    let status = obj.get("status").cloned();
    let typed: DynamicObject =
        serde_json::from_value(obj.clone()).map_err(|source| EnvtestError::Serialize {
            what: what.clone(),
            source,
        })?;
    let pp = PostParams::default();
    // Create, or replace what is there. Another writer can come between the read and the
    // replace (a CRD's status is written by the API server itself just after its creation, and
    // the tests of one binary install the same CRDs concurrently on a shared server): a 409 on
    // the replace, or a 404 when the object went away, starts over from the current state.
    let mut last_error = None;
    let mut stored = None;
    for _ in 0..UPSERT_ATTEMPTS {
        let current = match api.create(&pp, &typed).await {
            Ok(o) => {
                stored = Some(o);
                break;
            }
            Err(kube::Error::Api(s)) if s.code == 409 => match api.get(&name).await {
                Ok(current) => current,
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    last_error = Some(kube::Error::Api(s));
                    continue;
                }
                Err(e) => return Err(kube_error(format!("reading {what}"))(e)),
            },
            Err(e) => return Err(kube_error(format!("creating {what}"))(e)),
        };
        let mut replacement = typed.clone();
        replacement.metadata.resource_version = current.metadata.resource_version;
        match api.replace(&name, &pp, &replacement).await {
            Ok(o) => {
                stored = Some(o);
                break;
            }
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {
                last_error = Some(kube::Error::Api(s));
            }
            Err(e) => return Err(kube_error(format!("replacing {what}"))(e)),
        }
    }
    let mut stored = match (stored, last_error) {
        (Some(stored), _) => stored,
        (None, Some(e)) => {
            return Err(kube_error(format!(
                "replacing {what} ({UPSERT_ATTEMPTS} attempts, each overtaken by another writer)"
            ))(e));
        }
        (None, None) => {
            return Err(EnvtestError::Api {
                what,
                error: Box::new(ApiError::new(409, "Conflict", "no attempt was made")),
            });
        }
    };
    let has_status_subresource = caps.subresources.iter().any(|(r, _)| r.plural == "status");
    if let Some(status) = status
        && has_status_subresource
        && stored.data.get("status") != Some(&status)
    {
        let mut with_status = stored.clone();
        with_status.data["status"] = status;
        stored = api
            .replace_status(&name, &pp, &with_status)
            .await
            .map_err(kube_error(format!("writing the status of {what}")))?;
    }
    serde_json::to_value(stored).map_err(|source| EnvtestError::Serialize { what, source })
}

impl Drop for TestApiServer {
    fn drop(&mut self) {
        match &self.running {
            Running::InProcess { shared, task } => {
                shared.shutdown.send_replace(true);
                task.abort();
            }
            // ControlPlane's own Drop kills the processes; ExistingCluster's deletes the
            // namespace.
            Running::Real(_) | Running::Existing(_) => {}
        }
    }
}

/// A kubeconfig with one cluster, user and context, each named `envtest` (the context's
/// namespace `namespace`).
pub(crate) fn envtest_kubeconfig(
    cluster: Cluster,
    user: kube::config::AuthInfo,
    namespace: &str,
) -> Kubeconfig {
    Kubeconfig {
        clusters: vec![NamedCluster {
            name: "envtest".into(),
            cluster: Some(cluster),
            ..NamedCluster::default()
        }],
        auth_infos: vec![NamedAuthInfo {
            name: "envtest".into(),
            auth_info: Some(user),
            ..NamedAuthInfo::default()
        }],
        contexts: vec![NamedContext {
            name: "envtest".into(),
            context: Some(Context {
                cluster: "envtest".into(),
                user: Some("envtest".into()),
                namespace: Some(namespace.into()),
                ..Context::default()
            }),
            ..NamedContext::default()
        }],
        current_context: Some("envtest".into()),
        api_version: Some("v1".into()),
        kind: Some("Config".into()),
        ..Kubeconfig::default()
    }
}

/// A kubeconfig (YAML) for a server at `url`.
pub fn kubeconfig_yaml(url: &str) -> String {
    kubeconfig_text(url, "default", None, None)
}

/// Base64 of `text` (kubeconfig `*-data` fields).
fn base64_text(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// A kubeconfig (YAML) for a server at `url` (trusting the PEM CA certificate `ca_cert` if
/// any), context namespace `namespace`, the user holding `token` if any.
fn kubeconfig_text(
    url: &str,
    namespace: &str,
    token: Option<&str>,
    ca_cert: Option<&str>,
) -> String {
    let user = match token {
        Some(token) => format!("\n    token: {token}"),
        None => " {}".to_string(),
    };
    let ca = match ca_cert {
        Some(pem) => format!("\n    certificate-authority-data: {}", base64_text(pem)),
        None => String::new(),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: envtest\n  cluster:\n    server: {url}{ca}\nusers:\n- name: envtest\n  user:{user}\ncontexts:\n- name: envtest\n  context:\n    cluster: envtest\n    user: envtest\n    namespace: {namespace}\ncurrent-context: envtest\n"
    )
}
