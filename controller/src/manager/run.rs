//! The [`Manager`] itself: its options, its construction, what it runs and how it stops
//! (see the [module docs](super)).

use std::collections::HashSet;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use kube::runtime::events::{Recorder, Reporter};
use parking_lot::Mutex;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::controller::{Controller, DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT, Key};
use crate::defaults::ControllerDefaults;
use crate::error::ManagerError;
use crate::http::{
    BindAddress, Checks, metrics_router, probes_router, prometheus_handle, serve, serve_tls,
};
use crate::leader::{LeaderElectionConfig, LeaderElector};
use crate::reconciler::Reconciler;
use crate::secure_metrics::{KubeReviewer, MetricsAuth, SecureMetrics};
use crate::watch::BoxError;
use kcr_client::{Client, ClientOptions};
use kcr_source::{Cache, CacheObject, Reader, ScopedApi, SyncHandle};

/// The `host` label of the metrics and logs of a leader election client of its own
/// ([`LeaderElectionConfig::client`]): its server is not known from the client.
pub(crate) const LEADER_ELECTION_HOST: &str = "leader-election";

/// Options of a [`Manager`].
#[derive(Debug, Clone)]
pub struct ManagerOptions {
    /// Where `/metrics` is served. Default `0.0.0.0:8080`; [`BindAddress::Disabled`] (`"0"`)
    /// turns it off.
    pub metrics_bind_address: BindAddress,
    /// Where `/healthz` and `/readyz` are served. Default `0.0.0.0:8081`.
    pub health_probe_bind_address: BindAddress,
    /// Leader election; `None` (the default) runs controllers at once.
    pub leader_election: Option<LeaderElectionConfig>,
    /// Bound on a graceful shutdown (default 30 s).
    pub graceful_shutdown_timeout: Duration,
    /// The `reportingController` of recorded Kubernetes events (default `kcr-controller`); each
    /// controller's recorder uses `<this>/<controller name>`.
    pub event_reporter: String,
    /// Whether [`Manager::new`] wraps its client to record the `rest_client_*` metrics
    /// ([`crate::rest_client::instrument`]); default `true`.
    pub rest_client_metrics: bool,
    /// The `host` label of those metrics: the API server's `host:port`
    /// ([`crate::rest_client::host_of`] a `kube::Config`); `None` labels them `unknown`
    /// (a [`kube::Client`] does not tell its URL).
    pub api_server_host: Option<String>,
    /// Serve `/metrics` over HTTPS to authenticated and authorized callers only
    /// ([`crate::secure_metrics`]); `None` (the default) serves plain HTTP to anyone.
    pub secure_metrics: Option<SecureMetrics>,
    /// Routes served on the metrics server besides `/metrics` (controller-runtime's
    /// `ExtraHandlers`), behind the same security; see
    /// [`ManagerOptions::metrics_extra_handler`].
    pub metrics_extra_handlers: crate::http::MetricsExtraHandlers,
    /// Layers set up once per manager from its client ([`crate::extension`]), e.g. sharding.
    pub extensions: crate::extension::Extensions,
    /// The clock of every controller the manager runs, unless its builder set one
    /// ([`Builder::clock`](crate::Builder::clock)): what reconcilers read through
    /// [`Context::now`](crate::Context::now) and what times their
    /// [`Action::requeue_after`](crate::Action::requeue_after). Default: the system clock.
    /// Leader election, health checks and the controllers' other timings stay on real time.
    pub clock: Clock,
    /// The options of [`Manager::client`]: its field owner (the field manager of every write;
    /// default `kcr-controller`), its sync timeout and whether reads of unwatched kinds fail
    /// (see [`kcr_client::ClientOptions`]).
    pub client: ClientOptions,
    /// Defaults for every controller built through this manager, which a controller's own
    /// settings override (see [`ControllerDefaults`]).
    pub controller_defaults: ControllerDefaults,
    /// The bounds on every request, watch and connection of the manager's client (see
    /// [`kcr_connect::ConnectionOptions`] for each with its trade-off). [`Manager::connect`]
    /// builds the client with them; [`Manager::new`] bounds the requests of the client it is
    /// given with them.
    pub connection: kcr_connect::ConnectionOptions,
}

impl Default for ManagerOptions {
    fn default() -> Self {
        ManagerOptions {
            metrics_bind_address: BindAddress::Addr(SocketAddr::from(([0, 0, 0, 0], 8080))),
            health_probe_bind_address: BindAddress::Addr(SocketAddr::from(([0, 0, 0, 0], 8081))),
            leader_election: None,
            graceful_shutdown_timeout: DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT,
            event_reporter: "kcr-controller".to_string(),
            rest_client_metrics: true,
            api_server_host: None,
            secure_metrics: None,
            metrics_extra_handlers: crate::http::MetricsExtraHandlers::default(),
            extensions: crate::extension::Extensions::default(),
            clock: Clock::system(),
            client: ClientOptions::default().field_owner(DEFAULT_FIELD_OWNER),
            controller_defaults: ControllerDefaults::default(),
            connection: kcr_connect::ConnectionOptions::default(),
        }
    }
}

/// The field owner of a manager's writes unless [`ManagerOptions::field_owner`] sets another.
pub const DEFAULT_FIELD_OWNER: &str = "kcr-controller";

impl ManagerOptions {
    /// Sets the bounds on the client's requests, watches and connections
    /// ([`ManagerOptions::connection`]).
    pub fn connection(mut self, options: kcr_connect::ConnectionOptions) -> Self {
        self.connection = options;
        self
    }

    /// Sets the metrics bind address (`"0"` disables, `":8080"`, `"127.0.0.1:0"`, ...).
    pub fn metrics_bind_address(mut self, addr: &str) -> Result<Self, ManagerError> {
        self.metrics_bind_address = addr.parse()?;
        Ok(self)
    }

    /// Sets the health probe bind address (`"0"` disables).
    pub fn health_probe_bind_address(mut self, addr: &str) -> Result<Self, ManagerError> {
        self.health_probe_bind_address = addr.parse()?;
        Ok(self)
    }

    /// Sets the field owner of [`Manager::client`]'s writes (default `kcr-controller`; name it
    /// after the operator, as server-side apply attributes fields to it).
    #[must_use]
    pub fn field_owner(mut self, owner: impl Into<String>) -> Self {
        self.client.field_owner = owner.into();
        self
    }

    /// Sets the defaults of every controller built through the manager (see
    /// [`ControllerDefaults`]).
    #[must_use]
    pub fn controller_defaults(mut self, defaults: ControllerDefaults) -> Self {
        self.controller_defaults = defaults;
        self
    }

    /// Sets the options of [`Manager::client`].
    #[must_use]
    pub fn client_options(mut self, options: ClientOptions) -> Self {
        self.client = options;
        self
    }

    /// Enables leader election.
    pub fn leader_election(mut self, config: LeaderElectionConfig) -> Self {
        self.leader_election = Some(config);
        self
    }

    /// Adds a layer's per-manager set-up ([`crate::extension`]): [`Manager::new`] calls its
    /// `init` with the manager's client, and [`Manager::extension`] finds its state.
    #[must_use]
    pub fn extension(mut self, extension: impl crate::extension::ManagerExtension) -> Self {
        self.extensions.push(extension);
        self
    }

    /// Sets the `reportingController` of recorded events (default `kcr-controller`):
    /// each controller's recorder reports as `<reporter>/<controller name>`.
    #[must_use]
    pub fn event_reporter(mut self, reporter: impl Into<String>) -> Self {
        self.event_reporter = reporter.into();
        self
    }

    /// Sets the graceful shutdown timeout.
    pub fn graceful_shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.graceful_shutdown_timeout = timeout;
        self
    }

    /// Sets the `host` label of the `rest_client_*` metrics (the API server's `host:port`).
    pub fn api_server_host(mut self, host: impl Into<String>) -> Self {
        self.api_server_host = Some(host.into());
        self
    }

    /// Secures the metrics endpoint: HTTPS, TokenReview, SubjectAccessReview
    /// ([`crate::secure_metrics`]).
    pub fn secure_metrics(mut self, secure: SecureMetrics) -> Self {
        self.secure_metrics = Some(secure);
        self
    }

    /// Serves `handler` at `path` on the metrics server (e.g. `axum::routing::get(handler)`),
    /// behind the secure-metrics authentication and authorization when those are on. Refuses
    /// `/metrics`, a path already registered and paths that are not plain absolute paths
    /// ([`MetricsExtraHandlers::add`](crate::http::MetricsExtraHandlers::add)).
    pub fn metrics_extra_handler(
        mut self,
        path: &str,
        handler: axum::routing::MethodRouter,
    ) -> Result<Self, crate::http::ExtraHandlerError> {
        self.metrics_extra_handlers.add(path, handler)?;
        Ok(self)
    }

    /// Turns the `rest_client_*` instrumentation of the manager's client on or off.
    pub fn rest_client_metrics(mut self, enabled: bool) -> Self {
        self.rest_client_metrics = enabled;
        self
    }

    /// Sets the clock of the manager's controllers (a [`ManualClock`](crate::ManualClock)'s in
    /// a test); see [`ManagerOptions::clock`].
    #[must_use]
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }
}

/// The future a runnable runs: it should return when its token is cancelled.
pub type RunnableFn =
    Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> + Send>;

struct Registered {
    name: String,
    needs_leader: bool,
    run: RunnableFn,
}

/// Operator process scaffolding: see the [module docs](crate::manager).
pub struct Manager {
    client: kube::Client,
    cache: Cache,
    /// The client of every kind, reading from `cache`.
    kcr_client: Client,
    /// Informers whose sync `/readyz` waits for.
    cache_syncs: Arc<Mutex<Vec<(String, SyncHandle)>>>,
    options: ManagerOptions,
    runnables: Mutex<Vec<Registered>>,
    controller_names: Mutex<HashSet<String>>,
    healthz: Checks,
    readyz: Checks,
    /// Controllers that have not synced yet (readiness).
    unsynced: Arc<AtomicUsize>,
    metrics_listener: Mutex<Option<tokio::net::TcpListener>>,
    probes_listener: Mutex<Option<tokio::net::TcpListener>>,
    metrics_addr: Option<SocketAddr>,
    probes_addr: Option<SocketAddr>,
    /// With secured metrics: the reviews and the TLS acceptor.
    metrics_security: Option<(Arc<MetricsAuth>, tokio_rustls::TlsAcceptor)>,
    started: AtomicBool,
    /// Whether this replica leads (always `true` without leader election).
    leader: Arc<tokio::sync::watch::Sender<bool>>,
    /// The states of [`ManagerOptions::extensions`], by type.
    extensions: crate::extension::ExtensionStates,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("options", &self.options)
            .field("controllers", &*self.controller_names.lock())
            .field("metrics_addr", &self.metrics_addr)
            .field("probes_addr", &self.probes_addr)
            .finish()
    }
}

async fn bind(
    what: &'static str,
    addr: BindAddress,
) -> Result<Option<tokio::net::TcpListener>, ManagerError> {
    match addr {
        BindAddress::Disabled => Ok(None),
        BindAddress::Addr(address) => tokio::net::TcpListener::bind(address)
            .await
            .map(Some)
            .map_err(|source| ManagerError::Bind {
                what,
                address,
                source,
            }),
    }
}

impl Manager {
    /// Creates a manager whose client is built from `config` with kcr's connection stack
    /// ([`kcr_connect::client()`] with [`ManagerOptions::connection`]): no request, watch or
    /// handshake of the manager waits on a dead connection. Sets
    /// [`ManagerOptions::api_server_host`] from the config unless it is set. Then as
    /// [`Manager::new`].
    ///
    /// ```no_run
    /// # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
    /// let config = kube::Config::infer().await?;
    /// let manager = kcr_controller::Manager::connect(config, Default::default()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(
        config: kube::Config,
        mut options: ManagerOptions,
    ) -> Result<Self, ManagerError> {
        if options.api_server_host.is_none() {
            options.api_server_host = Some(kcr_connect::host_of(&config));
        }
        let client = kcr_connect::client(config, options.connection.clone())?;
        Manager::new(client, options).await
    }

    /// Creates a manager. Binds the HTTP listeners now (so a busy port fails here), validates
    /// the leader election configuration and the connection bounds, and installs the
    /// Prometheus recorder if `/metrics` is served. `client` is wrapped so that each of its
    /// requests is bounded by [`ManagerOptions::connection`] ([`kcr_connect::bound`]: deadlines
    /// per request, watches tied to bookmarks; its connections keep their own settings, so
    /// prefer [`Manager::connect`], whose client has kcr's connection stack too) and, unless
    /// [`ManagerOptions::rest_client_metrics`] is off, to record the `rest_client_*` metrics
    /// ([`crate::rest_client`]); [`Manager::kube_client`] is the wrapped one, and
    /// [`Manager::client`] writes through it.
    pub async fn new(
        client: kube::Client,
        mut options: ManagerOptions,
    ) -> Result<Self, ManagerError> {
        if let Some(le) = &options.leader_election {
            le.validate()?;
        }
        options.connection.validate()?;
        let metrics_listener = bind("metrics", options.metrics_bind_address).await?;
        let probes_listener = bind("health probe", options.health_probe_bind_address).await?;
        if metrics_listener.is_some() {
            prometheus_handle();
        }
        // After the recorder is installed: the layer exports its counters from the start.
        let host = options
            .api_server_host
            .clone()
            .unwrap_or_else(|| crate::rest_client::UNKNOWN_HOST.to_owned());
        let client = kcr_connect::bound(client, options.connection.clone(), host);
        // A leader election client of its own is bounded as the manager's is.
        if let Some(le) = options.leader_election.as_mut()
            && let Some(own) = le.client.take()
        {
            le.client = Some(kcr_connect::bound(
                own,
                options.connection.clone(),
                LEADER_ELECTION_HOST,
            ));
        }
        let client = if options.rest_client_metrics {
            crate::rest_client::instrument(
                client,
                options
                    .api_server_host
                    .clone()
                    .unwrap_or_else(|| crate::rest_client::UNKNOWN_HOST.to_owned()),
            )
        } else {
            client
        };
        let extensions = options.extensions.init(&client)?;
        let metrics_addr = metrics_listener.as_ref().and_then(|l| l.local_addr().ok());
        let probes_addr = probes_listener.as_ref().and_then(|l| l.local_addr().ok());
        let unsynced = Arc::new(AtomicUsize::new(0));
        let readyz = Checks::default();
        let healthz = Checks::default();
        let leader = Arc::new(tokio::sync::watch::Sender::new(
            options.leader_election.is_none(),
        ));
        let cache_syncs: Arc<Mutex<Vec<(String, SyncHandle)>>> = Arc::default();
        {
            let unsynced = unsynced.clone();
            let leader = leader.clone();
            let cache_syncs = cache_syncs.clone();
            readyz.add("caches-synced", move || {
                // The shared cache runs on every replica (leader or not).
                let pending: Vec<String> = cache_syncs
                    .lock()
                    .iter()
                    .filter(|(_, h)| !h.is_synced())
                    .map(|(n, _)| n.clone())
                    .collect();
                if !pending.is_empty() {
                    return Err(format!("informers not synced yet: {}", pending.join(", ")));
                }
                if !*leader.borrow() {
                    // A standby replica runs no controllers; with warm caches it is ready to
                    // take over.
                    return Ok(());
                }
                match unsynced.load(Ordering::SeqCst) {
                    0 => Ok(()),
                    n => Err(format!(
                        "{n} controller(s) have not synced their sources yet"
                    )),
                }
            })?;
            healthz.add("ping", || Ok(()))?;
        }
        let metrics_security = match (&options.secure_metrics, &metrics_listener) {
            (Some(secure), Some(_)) => {
                let reviewer = secure.reviewer.clone().unwrap_or_else(|| {
                    Arc::new(KubeReviewer::new(client.clone()))
                        as Arc<dyn crate::secure_metrics::Reviewer>
                });
                let auth = MetricsAuth::new(reviewer, secure.cache_ttl, secure.cache_size)?;
                let tls = secure.server_config()?;
                let certs = secure.certs.clone();
                readyz.add(crate::secure_metrics::READYZ_CHECK, move || certs.check())?;
                if let Some(ca) = secure.tls_options().client_ca_watcher().cloned() {
                    readyz.add(crate::secure_metrics::READYZ_CLIENT_CA_CHECK, move || {
                        ca.check()
                    })?;
                }
                Some((Arc::new(auth), tokio_rustls::TlsAcceptor::from(tls)))
            }
            _ => None,
        };
        let cache = Cache::new(client.clone());
        Ok(Manager {
            kcr_client: Client::new(client.clone(), cache.clone(), options.client.clone()),
            cache,
            cache_syncs,
            client,
            options,
            runnables: Mutex::new(Vec::new()),
            controller_names: Mutex::new(HashSet::new()),
            healthz,
            readyz,
            unsynced,
            metrics_listener: Mutex::new(metrics_listener),
            probes_listener: Mutex::new(probes_listener),
            metrics_addr,
            probes_addr,
            metrics_security,
            started: AtomicBool::new(false),
            leader,
            extensions,
        })
    }

    /// The client of every kind (controller-runtime's `mgr.GetClient()`): reads from the
    /// shared cache, starting a kind's watch on first use (the same watch a controller's
    /// `for_kind`/`owns` of the kind in the cache's scope uses), and writes to the API server
    /// under [`ManagerOptions::field_owner`]. See [`kcr_client`].
    pub fn client(&self) -> Client {
        self.kcr_client.clone()
    }

    /// The kube client (wrapped for the `rest_client_*` metrics unless turned off).
    pub fn kube_client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The shared cache: every controller's `for_kind`/`owns` watch and every
    /// [`reader`](Self::reader) for one type and set of options share one watch and one store.
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// A cache-backed reader of `K` (cached `get`/`list`), sharing the controllers' informers.
    /// Its sync is part of `/readyz`.
    ///
    /// A reconciler that reads the object it was triggered by should use the same options as
    /// the controller's `for_kind` watch: then the reader and the watch are one informer, whose
    /// store is updated before its events are handed out, so the reader never lags the
    /// request. A reader with other options (another namespace or selector) is another watch
    /// and may not have the object yet when the request arrives.
    pub fn reader<K>(&self, options: kcr_source::WatchScope) -> Result<Reader<K>, ManagerError>
    where
        K: CacheObject,
        K::DynamicType: Default,
        K::Scope: ScopedApi,
    {
        let kind = K::kind(&K::DynamicType::default()).into_owned();
        let reader = self
            .cache
            .reader::<K>(options)
            .map_err(|source| ManagerError::Cache {
                kind: kind.clone(),
                source,
            })?;
        self.track_cache_sync(format!("reader/{kind}"), reader.sync());
        Ok(reader)
    }

    /// A cache-backed reader of the run-time kind `resource` (`DynamicObject`s; see
    /// [`kcr_source::dynamic`]), sharing the informers of controllers that watch it with
    /// `for_dynamic`/`owns_dynamic` and the same options. Its sync is part of `/readyz`.
    pub fn reader_dynamic(
        &self,
        resource: &kcr_source::DynamicResource,
        options: kcr_source::WatchScope,
    ) -> Result<Reader<kube::core::DynamicObject>, ManagerError> {
        let kind = resource.resource.kind.clone();
        let reader = self
            .cache
            .reader_dynamic(resource, options)
            .map_err(|source| ManagerError::Cache {
                kind: kind.clone(),
                source,
            })?;
        self.track_cache_sync(format!("reader/{kind}"), reader.sync());
        Ok(reader)
    }

    /// Adds an informer's sync to `/readyz`.
    pub(crate) fn track_cache_sync(&self, name: String, handle: SyncHandle) {
        self.cache_syncs.lock().push((name, handle));
    }

    /// The state of this manager's extension of type `T` ([`ManagerOptions::extension`],
    /// [`crate::extension`]), if one stored it.
    pub fn extension<T: std::any::Any + Send + Sync>(&self) -> Option<Arc<T>> {
        self.extensions.get::<T>()
    }

    /// The options.
    pub fn options(&self) -> &ManagerOptions {
        &self.options
    }

    /// The clock the manager gives its controllers ([`ManagerOptions::clock`]).
    pub fn clock(&self) -> Clock {
        self.options.clock.clone()
    }

    /// The bound address of the metrics server, if enabled.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The bound address of the health probe server, if enabled.
    pub fn health_probe_addr(&self) -> Option<SocketAddr> {
        self.probes_addr
    }

    /// Whether this replica currently leads (always `true` without leader election).
    pub fn is_leader(&self) -> bool {
        *self.leader.borrow()
    }

    /// Resolves once this replica leads (at once without leader election): controller-runtime's
    /// `mgr.Elected()`. It stays pending on a replica that never leads; put it in a
    /// `select!` with your shutdown.
    ///
    /// ```no_run
    /// # async fn doc(manager: &kcr_controller::Manager) {
    /// manager.elected().await;
    /// tracing::info!("leading: starting the leader-only background work");
    /// # }
    /// ```
    pub fn elected(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut leadership = self.leader.subscribe();
        async move {
            if leadership.wait_for(|leads| *leads).await.is_err() {
                // The manager is gone without this replica leading: never elected.
                std::future::pending::<()>().await;
            }
        }
    }

    /// A watch channel of this replica's leadership: `true` while it leads. It turns `false`
    /// when leadership is lost or released, and when [`run`](Self::run) returns.
    pub fn leadership(&self) -> tokio::sync::watch::Receiver<bool> {
        self.leader.subscribe()
    }

    /// An event recorder for the controller `name` (reporting controller
    /// `<event_reporter>/<name>`): kube's recorder of `events.k8s.io/v1` Events, as
    /// controller-runtime's `GetEventRecorder` (its `GetEventRecorderFor` records core/v1
    /// Events). Every controller the manager builds publishes through one of these from
    /// [`Context::event`](crate::Context::event).
    pub fn event_recorder(&self, name: &str) -> Recorder {
        let reporter = Reporter {
            controller: format!("{}/{}", self.options.event_reporter, name),
            instance: self
                .options
                .leader_election
                .as_ref()
                .map(|le| le.identity.clone()),
        };
        Recorder::new(self.client.clone(), reporter)
    }

    /// Adds a liveness check served under `/healthz` (and `/healthz/<name>`).
    pub fn add_healthz_check(
        &self,
        name: impl Into<String>,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) -> Result<(), ManagerError> {
        self.healthz.add(name, check)
    }

    /// Adds a readiness check served under `/readyz` (and `/readyz/<name>`).
    pub fn add_readyz_check(
        &self,
        name: impl Into<String>,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) -> Result<(), ManagerError> {
        self.readyz.add(name, check)
    }

    /// Adds a runnable: `run` receives a token cancelled at shutdown and should return then.
    /// With `needs_leader`, it starts only once this replica leads (and is stopped if leadership
    /// is lost); otherwise it starts at once on every replica. An `Err` stops the manager.
    ///
    /// Fails with [`ManagerError::AlreadyStarted`] once [`run`](Self::run) has begun.
    pub fn add_runnable<F, Fut>(
        &self,
        name: impl Into<String>,
        needs_leader: bool,
        run: F,
    ) -> Result<(), ManagerError>
    where
        F: FnOnce(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        let mut runnables = self.runnables.lock();
        // Checked under the lock `run` takes the runnables with: nothing added is ever lost.
        if self.started.load(Ordering::SeqCst) {
            return Err(ManagerError::AlreadyStarted);
        }
        runnables.push(Registered {
            name: name.into(),
            needs_leader,
            run: Box::new(move |token| run(token).boxed()),
        });
        Ok(())
    }

    /// Registers a controller. Controller names must be unique. It runs on the leader only
    /// unless its [`needs_leader_election`](crate::ControllerOptions::needs_leader_election) is off;
    /// with [`warmup`](crate::ControllerOptions::warmup) its watches start before leadership and its
    /// workers once this replica leads.
    ///
    /// A controller on the system clock gets the manager's [`clock`](Self::clock); one given a
    /// manual clock keeps it. (To run one controller on the system clock under a manager with a
    /// manual clock, register it with [`Builder::clock`](crate::Builder::clock) and `complete`.)
    pub fn add_controller<K: Key, R: Reconciler<K>>(
        &self,
        mut controller: Controller<K, R>,
    ) -> Result<(), ManagerError> {
        if !controller.options().clock.is_manual() {
            controller.set_clock(self.clock());
        }
        self.register_controller(controller)
    }

    /// Registers a controller as it is (the builder has chosen its clock already).
    pub(crate) fn register_controller<K: Key, R: Reconciler<K>>(
        &self,
        controller: Controller<K, R>,
    ) -> Result<(), ManagerError> {
        let name = controller.name().to_string();
        if self.started.load(Ordering::SeqCst) {
            return Err(ManagerError::AlreadyStarted);
        }
        self.reserve_name(&name)?;
        let unsynced = self.unsynced.clone();
        unsynced.fetch_add(1, Ordering::SeqCst);
        let unsynced_on_sync = unsynced.clone();
        let options = controller.options();
        let needs_leader = options.needs_leader_election;
        // A warm controller starts with the replica and waits for leadership to start workers.
        let gate = (needs_leader && options.warmup && self.options.leader_election.is_some())
            .then(|| self.elected().boxed());
        let added = self.add_runnable(
            format!("controller/{name}"),
            needs_leader && gate.is_none(),
            move |token| async move {
                let on_synced: Box<dyn FnOnce() + Send> = Box::new(move || {
                    unsynced_on_sync.fetch_sub(1, Ordering::SeqCst);
                });
                let res = controller
                    .run_with_ready(token, Some(on_synced), gate)
                    .await;
                res.map_err(|e| Box::new(e) as BoxError)
            },
        );
        if added.is_err() {
            // `run` began meanwhile: undo the registration.
            unsynced.fetch_sub(1, Ordering::SeqCst);
            self.controller_names.lock().remove(&name);
        }
        added
    }

    /// Reserves a controller name; fails with [`ManagerError::DuplicateController`] on a
    /// duplicate. For a layer that registers a controller itself
    /// ([`BuilderHook::register`](crate::builder::BuilderHook::register)) with runnables.
    pub fn reserve_name(&self, name: &str) -> Result<(), ManagerError> {
        if !self.controller_names.lock().insert(name.to_string()) {
            return Err(ManagerError::DuplicateController {
                name: name.to_string(),
            });
        }
        Ok(())
    }

    /// Runs until SIGTERM or SIGINT, then shuts down gracefully (a second signal exits at once).
    pub async fn run_until_signal(&self) -> Result<(), ManagerError> {
        self.run(crate::signals::shutdown_on_signals()).await
    }

    /// Runs everything until `shutdown` is cancelled (then shuts down gracefully), a runnable
    /// fails, or leadership is lost. Returns `Ok` only after a clean graceful shutdown.
    pub async fn run(&self, shutdown: CancellationToken) -> Result<(), ManagerError> {
        if self.started.swap(true, Ordering::SeqCst) {
            return Err(ManagerError::AlreadyStarted);
        }
        let http_stop = CancellationToken::new();
        let _stop_http_on_return = http_stop.clone().drop_guard();
        let mut http_tasks = Vec::new();
        if let Some(listener) = self.probes_listener.lock().take() {
            let router = probes_router(self.healthz.clone(), self.readyz.clone());
            http_tasks.push(serve("health probe", listener, router, http_stop.clone()));
        }
        if let Some(listener) = self.metrics_listener.lock().take() {
            let router = metrics_router(prometheus_handle(), &self.options.metrics_extra_handlers);
            match &self.metrics_security {
                None => http_tasks.push(serve("metrics", listener, router, http_stop.clone())),
                Some((auth, acceptor)) => {
                    let router = router.layer(axum::middleware::from_fn_with_state(
                        auth.clone(),
                        crate::secure_metrics::guard,
                    ));
                    http_tasks.push(serve_tls(
                        "metrics",
                        listener,
                        router,
                        acceptor.clone(),
                        http_stop.clone(),
                    ));
                }
            }
        }

        let runnables = std::mem::take(&mut *self.runnables.lock());
        let (leader_runnables, others): (Vec<_>, Vec<_>) =
            runnables.into_iter().partition(|r| r.needs_leader);
        let stop_runnables = CancellationToken::new();
        let mut set: JoinSet<(String, Result<(), BoxError>)> = JoinSet::new();
        let mut running: HashSet<String> = HashSet::new();
        let spawn = |set: &mut JoinSet<_>, running: &mut HashSet<String>, r: Registered| {
            let token = stop_runnables.child_token();
            let name = r.name.clone();
            running.insert(name.clone());
            tracing::info!(runnable = %name, "starting runnable");
            let fut = (r.run)(token);
            set.spawn(async move { (name, fut.await) });
        };
        for r in others {
            spawn(&mut set, &mut running, r);
        }

        // Leader election: a task that acquires, then renews until lost or told to stop.
        let election_stop = CancellationToken::new();
        let (elected_tx, mut elected_rx) = tokio::sync::oneshot::channel::<()>();
        let mut election: Option<tokio::task::JoinHandle<Result<(), ManagerError>>> = None;
        let elector = self.options.leader_election.clone().map(|cfg| {
            let client = cfg.client.clone().unwrap_or_else(|| self.client.clone());
            Arc::new(LeaderElector::new(client, cfg))
        });
        let mut pending_leader = Some(leader_runnables);
        match &elector {
            None => {
                for r in pending_leader.take().into_iter().flatten() {
                    spawn(&mut set, &mut running, r);
                }
            }
            Some(elector) => {
                let elector = elector.clone();
                let stop = election_stop.clone();
                let leader = self.leader.clone();
                election = Some(tokio::spawn(async move {
                    if !elector.acquire(&stop).await {
                        return Ok(());
                    }
                    leader.send_replace(true);
                    let _ = elected_tx.send(());
                    let res = elector.renew_until_lost(&stop).await;
                    if res.is_err() {
                        leader.send_replace(false);
                    }
                    res.map_err(ManagerError::from)
                }));
            }
        }

        // Main loop.
        let mut failure: Option<ManagerError> = None;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => {
                    tracing::info!("shutdown requested; stopping runnables");
                    break;
                }
                Ok(()) = &mut elected_rx, if pending_leader.is_some() => {
                    tracing::info!("became leader; starting controllers");
                    for r in pending_leader.take().into_iter().flatten() {
                        spawn(&mut set, &mut running, r);
                    }
                }
                res = async { election.as_mut().expect("guarded by the select condition").await },
                    if election.is_some() =>
                {
                    election = None;
                    match res {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => {
                            failure = Some(e);
                            break;
                        }
                        Err(join) => {
                            failure = Some(ManagerError::Runnable {
                                name: "leader-election".into(),
                                source: Box::new(join),
                            });
                            break;
                        }
                    }
                }
                Some(res) = set.join_next(), if !set.is_empty() => {
                    match res {
                        Ok((name, Ok(()))) => {
                            tracing::info!(runnable = %name, "runnable finished");
                            running.remove(&name);
                        }
                        Ok((name, Err(source))) => {
                            tracing::error!(runnable = %name, error = %source, "runnable failed; stopping the manager");
                            running.remove(&name);
                            failure = Some(ManagerError::Runnable { name, source });
                            break;
                        }
                        Err(join) => {
                            if join.is_panic() {
                                std::panic::resume_unwind(join.into_panic());
                            }
                            failure = Some(ManagerError::Runnable {
                                name: "<cancelled task>".into(),
                                source: Box::new(join),
                            });
                            break;
                        }
                    }
                }
            }
        }

        // Graceful shutdown: stop runnables (bounded), then leader election, then HTTP.
        if pending_leader.is_some() {
            // Not elected yet: stop campaigning now rather than win a lease nobody will use.
            election_stop.cancel();
        }
        stop_runnables.cancel();
        let mut timeout = self.options.graceful_shutdown_timeout;
        if let (Some(ManagerError::LeaderElection(_)), Some(le)) =
            (&failure, &self.options.leader_election)
        {
            // Leadership is lost: another replica may take the lease once it expires, which is
            // at most `lease_duration - renew_deadline` from now. Reconciles still running
            // then are abandoned rather than overlap with the new leader's.
            timeout = timeout.min(
                le.timings
                    .lease_duration
                    .saturating_sub(le.timings.renew_deadline),
            );
        }
        let drained = tokio::time::timeout(timeout, async {
            while let Some(res) = set.join_next().await {
                match res {
                    Ok((name, r)) => {
                        running.remove(&name);
                        if let Err(source) = r {
                            tracing::error!(runnable = %name, error = %source, "runnable failed during shutdown");
                            if failure.is_none() {
                                failure = Some(ManagerError::Runnable { name, source });
                            }
                        }
                    }
                    Err(join) if join.is_panic() => std::panic::resume_unwind(join.into_panic()),
                    Err(_) => {}
                }
            }
        })
        .await;
        if drained.is_err() {
            set.abort_all();
            let mut pending: Vec<String> = running.into_iter().collect();
            pending.sort();
            tracing::error!(?pending, "graceful shutdown timed out");
            if failure.is_none() {
                failure = Some(ManagerError::ShutdownTimeout { timeout, pending });
            }
        }
        election_stop.cancel();
        if let Some(handle) = election.take()
            && let Ok(Err(e)) = handle.await
            && failure.is_none()
        {
            failure = Some(e);
        }
        if let Some(elector) = &elector
            && elector.config().release_on_cancel
            && self.is_leader()
            && failure.is_none()
        {
            if let Err(e) = elector.release().await {
                tracing::warn!(error = %e, "could not release the leader lease");
            }
            self.leader.send_replace(false);
        }
        // Whatever happened, this replica no longer leads once run returns.
        self.leader
            .send_replace(self.options.leader_election.is_none());
        self.cache.stop();
        http_stop.cancel();
        for task in http_tasks {
            let _ = task.await;
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
