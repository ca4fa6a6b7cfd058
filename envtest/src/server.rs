//! The server handle: listener, connection handling, kube client and kubeconfig, helpers.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kube::config::{Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::error::{ApiError, EnvtestError};
use crate::faults::Faults;
use crate::store::Store;

/// HTTP body type of every response.
pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// State shared by all request handlers of one server.
pub(crate) struct Shared {
    pub store: Arc<Mutex<Store>>,
    /// The latest resourceVersion, published after every write (watchers wait on it).
    pub rv_tx: Arc<watch::Sender<u64>>,
    pub faults: Faults,
    pub bookmark_interval: Duration,
    pub shutdown: watch::Sender<bool>,
}

impl Shared {
    /// Run `f` on the locked store and wake watchers if it wrote anything.
    pub fn mutate<R>(&self, f: impl FnOnce(&mut Store) -> R) -> R {
        let (result, rv) = {
            let mut store = self.store.lock();
            let before = store.rv();
            let result = f(&mut store);
            let after = store.rv();
            (result, (after != before).then_some(after))
        };
        if let Some(rv) = rv {
            self.rv_tx.send_replace(rv);
        }
        result
    }
}

/// Options for [`TestApiServer`]; obtained from [`TestApiServer::builder`].
#[derive(Debug, Clone)]
pub struct TestApiServerBuilder {
    port: u16,
    history_window: usize,
    bookmark_interval: Duration,
    nodes: usize,
}

impl Default for TestApiServerBuilder {
    fn default() -> Self {
        TestApiServerBuilder {
            port: 0,
            history_window: 100_000,
            bookmark_interval: Duration::from_secs(10),
            nodes: 0,
        }
    }
}

impl TestApiServerBuilder {
    /// Listen on this port of 127.0.0.1 (default 0: a random free port).
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Number of events kept for watch resumption and consistent pagination (default
    /// 100,000). Resuming from an older resourceVersion gets 410 Expired.
    pub fn history_window(mut self, events: usize) -> Self {
        self.history_window = events;
        self
    }

    /// Interval of BOOKMARK events on watches that asked for them (default 10 s, tokio time).
    pub fn bookmark_interval(mut self, interval: Duration) -> Self {
        self.bookmark_interval = interval;
        self
    }

    /// Create this many simulated nodes at start (see [`TestApiServer::add_nodes`]).
    pub fn nodes(mut self, nodes: usize) -> Self {
        self.nodes = nodes;
        self
    }

    /// Bind and start serving.
    pub async fn start(self) -> Result<TestApiServer, EnvtestError> {
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
        let store = Arc::new(Mutex::new(Store::new(self.history_window)));
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
            bookmark_interval: self.bookmark_interval,
            shutdown: watch::channel(false).0,
        });
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let t = shared
                .store
                .lock()
                .registry
                .get("namespaces")
                .cloned()
                .ok_or_else(|| EnvtestError::Client("namespaces not registered".into()))?;
            shared
                .mutate(|s| {
                    s.create(
                        &t,
                        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                    )
                })
                .map_err(|error| EnvtestError::Api {
                    what: format!("namespace {ns}"),
                    error: Box::new(error),
                })?;
        }
        let url = format!("http://{addr}");
        let config = kube::Config::new(
            url.parse()
                .map_err(|e| EnvtestError::Client(format!("bad url {url}: {e}")))?,
        );
        let mut config = config;
        config.default_namespace = "default".to_string();
        config.read_timeout = None;
        let client =
            kube::Client::try_from(config).map_err(|e| EnvtestError::Client(e.to_string()))?;
        let task = tokio::spawn(accept_loop(listener, shared.clone()));
        let server = TestApiServer {
            shared,
            addr,
            client,
            task,
            node_counter: Mutex::new(0),
        };
        if self.nodes > 0 {
            server.add_nodes(self.nodes)?;
        }
        Ok(server)
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut shutdown = shared.shutdown.subscribe();
    let mut conns = JoinSet::new();
    loop {
        while conns.try_join_next().is_some() {}
        tokio::select! {
            _ = async { let _ = shutdown.wait_for(|s| *s).await; } => break,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                let shared = shared.clone();
                conns.spawn(async move {
                    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                        let shared = shared.clone();
                        async move { Ok::<_, Infallible>(crate::api::handle(shared, req).await) }
                    });
                    // Connection errors (client went away) end this connection only.
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        }
    }
    conns.shutdown().await;
}

/// A running in-process API server. Stops when dropped.
pub struct TestApiServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    client: kube::Client,
    task: tokio::task::JoinHandle<()>,
    node_counter: Mutex<usize>,
}

impl std::fmt::Debug for TestApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestApiServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl TestApiServer {
    /// Start a server on `127.0.0.1:<random port>` with default options.
    pub async fn start() -> Result<TestApiServer, EnvtestError> {
        TestApiServerBuilder::default().start().await
    }

    /// Options (port, history window, bookmark interval, initial nodes).
    pub fn builder() -> TestApiServerBuilder {
        TestApiServerBuilder::default()
    }

    /// The base URL (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A `kube::Client` for this server (default namespace `default`).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// A kubeconfig pointing at this server (cluster, user and context named `envtest`).
    pub fn kubeconfig(&self) -> Kubeconfig {
        Kubeconfig {
            clusters: vec![NamedCluster {
                name: "envtest".into(),
                cluster: Some(Cluster {
                    server: Some(self.url()),
                    ..Cluster::default()
                }),
                ..NamedCluster::default()
            }],
            auth_infos: vec![NamedAuthInfo {
                name: "envtest".into(),
                auth_info: Some(kube::config::AuthInfo::default()),
                ..NamedAuthInfo::default()
            }],
            contexts: vec![NamedContext {
                name: "envtest".into(),
                context: Some(Context {
                    cluster: "envtest".into(),
                    user: Some("envtest".into()),
                    namespace: Some("default".into()),
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

    /// The kubeconfig as YAML text.
    pub fn kubeconfig_yaml(&self) -> String {
        kubeconfig_yaml(&self.url())
    }

    /// Write the kubeconfig (YAML) to `path`, for kubectl or other processes.
    pub fn write_kubeconfig(&self, path: impl AsRef<Path>) -> Result<(), EnvtestError> {
        let path = path.as_ref();
        std::fs::write(path, self.kubeconfig_yaml()).map_err(|source| {
            EnvtestError::WriteKubeconfig {
                path: path.display().to_string(),
                source,
            }
        })
    }

    /// Fault injection and request counters.
    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// The current (latest) resourceVersion of the store.
    pub fn resource_version(&self) -> u64 {
        self.shared.store.lock().rv()
    }

    /// Add `n` simulated Nodes named `envtest-node-<i>` (continuing the numbering), each with
    /// capacity and allocatable (4 CPU, 16Gi memory, 110 pods), a Ready condition, the
    /// `kubernetes.io/hostname` label and the usual os/arch labels. Returns their names.
    pub fn add_nodes(&self, n: usize) -> Result<Vec<String>, EnvtestError> {
        let t = self
            .shared
            .store
            .lock()
            .registry
            .get("nodes")
            .cloned()
            .ok_or_else(|| EnvtestError::Client("nodes not registered".into()))?;
        let mut names = Vec::with_capacity(n);
        let start = {
            let mut counter = self.node_counter.lock();
            let start = *counter;
            *counter += n;
            start
        };
        let now = crate::store::now_rfc3339();
        for i in start..start + n {
            let name = format!("envtest-node-{i}");
            let node = crate::nodes::simulated_node(&name, &now);
            self.shared
                .mutate(|s| s.upsert(&t, node))
                .map_err(|error| EnvtestError::Api {
                    what: format!("node {name}"),
                    error: Box::new(error),
                })?;
            names.push(name);
        }
        Ok(names)
    }

    /// Create or replace an object directly in the store, bypassing HTTP, admission and
    /// schema validation but keeping the metadata rules (uid, resourceVersion, generation,
    /// watch events). The resource is found from `apiVersion` and `kind`. Handy to seed state
    /// quickly; returns the stored object.
    pub fn upsert(&self, mut obj: Value) -> Result<Value, EnvtestError> {
        let api_version = obj["apiVersion"].as_str().unwrap_or_default().to_string();
        let kind = obj["kind"].as_str().unwrap_or_default().to_string();
        let t = self
            .shared
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
            obj["metadata"]["namespace"] = json!("default");
        }
        obj["apiVersion"] = json!(t.api_version(t.storage_version()));
        let name = obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        self.shared
            .mutate(|s| s.upsert(&t, obj))
            .map(|stored| crate::convert::from_storage(&t, t.storage_version(), &stored.value))
            .map_err(|error| EnvtestError::Api {
                what: format!("{kind} {name}"),
                error: Box::new(error),
            })
    }

    /// Install (create or replace) the CustomResourceDefinition of a kube-derive
    /// `CustomResource` type; its resource is served as soon as this returns.
    pub fn install_crd<K: kube::CustomResourceExt>(&self) -> Result<(), EnvtestError> {
        let crd = serde_json::to_value(K::crd()).map_err(|source| EnvtestError::Serialize {
            what: "CustomResourceDefinition".into(),
            source,
        })?;
        self.install_crd_value(crd)
    }

    /// Install (create or replace) a CustomResourceDefinition given as JSON.
    pub fn install_crd_value(&self, mut crd: Value) -> Result<(), EnvtestError> {
        let t = self
            .shared
            .store
            .lock()
            .registry
            .get("apiextensions.k8s.io/customresourcedefinitions")
            .cloned()
            .ok_or_else(|| EnvtestError::Client("CRDs not registered".into()))?;
        crd["apiVersion"] = json!("apiextensions.k8s.io/v1");
        crd["kind"] = json!("CustomResourceDefinition");
        let name = crd["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        self.shared
            .mutate(|s| s.upsert(&t, crd))
            .map(|_| ())
            .map_err(|error: ApiError| EnvtestError::Api {
                what: format!("CustomResourceDefinition {name}"),
                error: Box::new(error),
            })
    }

    /// Stop serving (also done on drop): the listener closes, open connections and watches end.
    pub fn shutdown(&self) {
        self.shared.shutdown.send_replace(true);
    }
}

impl Drop for TestApiServer {
    fn drop(&mut self) {
        self.shared.shutdown.send_replace(true);
        self.task.abort();
    }
}

/// A kubeconfig (YAML) for a server at `url`.
pub fn kubeconfig_yaml(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: envtest\n  cluster:\n    server: {url}\nusers:\n- name: envtest\n  user: {{}}\ncontexts:\n- name: envtest\n  context:\n    cluster: envtest\n    user: envtest\n    namespace: default\ncurrent-context: envtest\n"
    )
}
