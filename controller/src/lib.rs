//! # kcr-controller: controllers, their builder, and the manager
//!
//! A complete controller: it watches ConfigMaps (and the Secrets they own) through the manager's
//! shared cache, runs four workers, elects a leader on a Lease, serves `/healthz`, `/readyz` and
//! `/metrics`, and shuts down gracefully on SIGTERM/SIGINT.
//!
//! ```no_run
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::{ConfigMap, Secret};
//! use kcr_controller::{Action, Context, LeaderElectionConfig, Manager, ManagerOptions};
//! use kcr_controller::{Reconciler, WatchOptions};
//! use kcr_handler::Request;
//!
//! struct Hello;
//!
//! impl Reconciler<Request> for Hello {
//!     type Error = anyhow::Error;
//!     async fn reconcile(&self, request: &Request, ctx: &Context) -> anyhow::Result<Action> {
//!         tracing::info!(%request, id = %ctx.reconcile_id(), "reconciling");
//!         Ok(Action::requeue_after(Duration::from_secs(300)))
//!     }
//! }
//!
//! #[tokio::main]
//! async fn main() -> anyhow::Result<()> {
//!     let client = kube::Client::try_default().await?;
//!     let options = ManagerOptions::default().leader_election(LeaderElectionConfig::new("hello"));
//!     let mgr = Manager::new(client, options).await?;
//!     mgr.controller()
//!         .for_kind::<ConfigMap>(WatchOptions::new())
//!         .owns::<Secret>(WatchOptions::new())
//!         .max_concurrent_reconciles(4)
//!         .complete(Hello)?;
//!     mgr.run_until_signal().await?;
//!     Ok(())
//! }
//! ```
//!
//! ## The kubebuilder scaffold's `main.rs`
//!
//! What `kubebuilder init` generates for a Go operator, in kcr: HTTP/2 off on every server it
//! runs (the scaffold's answer to the HTTP/2 rapid-reset CVEs: kcr-tls's
//! [`TlsOptions`](kcr_tls::TlsOptions) default), metrics over HTTPS on `:8443` for callers that
//! pass a TokenReview and a SubjectAccessReview ([`secure_metrics`]), probes on `:8081`, leader
//! election on a Lease, and the usual flags' defaults as manager-wide
//! [controller defaults](ControllerDefaults).
//!
//! ```no_run
//! use std::time::Duration;
//! use k8s_openapi::api::apps::v1::Deployment;
//! use kcr_controller::secure_metrics::SecureMetrics;
//! use kcr_controller::{Action, Context, ControllerDefaults, LeaderElectionConfig, Manager};
//! use kcr_controller::{ManagerOptions, Reconciler, WatchOptions};
//! use kcr_handler::Request;
//! use kcr_tls::{TlsOptions, TlsVersion};
//!
//! struct Guestbook;
//! impl Reconciler<Request> for Guestbook {
//!     type Error = kcr_controller::ClientError;
//!     async fn reconcile(&self, _request: &Request, _ctx: &Context) -> Result<Action, Self::Error> {
//!         Ok(Action::done())
//!     }
//! }
//!
//! #[tokio::main]
//! async fn main() -> anyhow::Result<()> {
//!     // --enable-http2=false (the default of TlsOptions), TLS 1.2 at least.
//!     let tls = TlsOptions::new().min_version(TlsVersion::Tls12);
//!     let options = ManagerOptions::default()
//!         // --metrics-bind-address=:8443 --metrics-secure=true, the certificate from
//!         // cert-manager's Secret volume (reloaded when it rotates).
//!         .metrics_bind_address(":8443")?
//!         .secure_metrics(SecureMetrics::from_dir("/tmp/k8s-metrics-server/metrics-certs").tls(tls))
//!         // --health-probe-bind-address=:8081
//!         .health_probe_bind_address(":8081")?
//!         // --leader-elect, with the scaffold's lease name.
//!         .leader_election(LeaderElectionConfig::new("e5f6a7b8.example.com"))
//!         .field_owner("guestbook-operator")
//!         .controller_defaults(
//!             ControllerDefaults::default().cache_sync_timeout(Duration::from_secs(120)),
//!         );
//!     let mgr = Manager::new(kube::Client::try_default().await?, options).await?;
//!     mgr.controller()
//!         .for_kind::<Deployment>(WatchOptions::new())
//!         .complete(Guestbook)?;
//!     mgr.run_until_signal().await?;
//!     Ok(())
//! }
//! ```
//!
//! ## One client for every kind
//!
//! [`Manager::client`] is controller-runtime's `mgr.GetClient()` ([`kcr_client::Client`]): reads
//! of any kind from the shared cache (a kind's watch starts on first read and is the same watch
//! a controller's `for_kind`/`owns` of it uses), writes to the API server under the manager's
//! field owner ([`ManagerOptions::field_owner`]). A controller-runtime reconciler translates
//! line for line; the Go is in the comments:
//!
//! ```no_run
//! use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
//! use kcr_controller::objects::add_finalizer;
//! use kcr_controller::{Action, Client, ClientError, Context, ListOptions, Reconciler};
//! use kcr_handler::Request;
//! use kube::api::Patch;
//! use serde_json::json;
//!
//! struct DeploymentReconciler {
//!     client: Client, // r.Client
//! }
//!
//! impl Reconciler<Request> for DeploymentReconciler {
//!     type Error = ClientError;
//!     async fn reconcile(&self, req: &Request, _ctx: &Context) -> Result<Action, ClientError> {
//!         let ns = req.namespace.as_deref();
//!         // var dep appsv1.Deployment
//!         // if err := r.Get(ctx, req.NamespacedName, &dep); err != nil {
//!         //     return ctrl.Result{}, client.IgnoreNotFound(err)
//!         // }
//!         let Some(dep) = self.client.get::<Deployment>(&req.name, ns).await? else {
//!             return Ok(Action::done());
//!         };
//!         // var rss appsv1.ReplicaSetList
//!         // err := r.List(ctx, &rss, client.InNamespace(req.Namespace),
//!         //     client.MatchingFields{"owner": req.Name})
//!         let rss = self
//!             .client
//!             .list::<ReplicaSet>(
//!                 &ListOptions::new()
//!                     .namespace(ns.unwrap_or_default())
//!                     .matching_field("owner", &req.name),
//!             )
//!             .await?;
//!         // if controllerutil.AddFinalizer(&dep, "example.com/cleanup") {
//!         //     if err := r.Update(ctx, &dep); err != nil { return ctrl.Result{}, err }
//!         // }
//!         let mut dep = (*dep).clone(); // the cache's copy is shared: write a copy
//!         if add_finalizer(&mut dep, "example.com/cleanup") {
//!             dep = self.client.update(&dep).await?;
//!         }
//!         // patch := client.MergeFrom(dep.DeepCopy()); dep.Status.ReadyReplicas = ready
//!         // err := r.Status().Patch(ctx, &dep, patch)
//!         let ready: i32 = rss.iter().filter_map(|rs| rs.status.as_ref()?.ready_replicas).sum();
//!         let patch = Patch::Merge(json!({"status": {"readyReplicas": ready}}));
//!         self.client.patch_status::<Deployment, _>(&req.name, ns, &patch).await?;
//!         // return ctrl.Result{}, nil
//!         Ok(Action::done())
//!     }
//! }
//!
//! // mgr.GetFieldIndexer().IndexField(ctx, &appsv1.ReplicaSet{}, "owner", ownerOf)
//! fn register(client: &Client) -> Result<(), ClientError> {
//!     client.index_field::<ReplicaSet>("owner", |rs| {
//!         let refs = rs.metadata.owner_references.iter().flatten();
//!         refs.filter(|o| o.kind == "Deployment").map(|o| o.name.clone()).collect()
//!     })
//! }
//! ```
//!
//! A [`ClientError`] returned from a reconcile is retried, unless retrying cannot help (a
//! namespace the cache does not watch, an invalid object: see its [`ReconcileError`] impl).
//!
//! ## The data path
//!
//! event in the cluster → [`Source`](kcr_source::Source) (a cached `Kind` watch shared through
//! the manager's [`Cache`](kcr_source::Cache), a `Channel`, any stream) → the watch's
//! predicates → the controller's event filters → an [`EventHandler`](kcr_handler::EventHandler)
//! → [`Request`](kcr_handler::Request)s in the [`WorkQueue`](kcr_queue::WorkQueue) (de-duplicated,
//! delayed, rate-limited, one in flight per key) → `max_concurrent_reconciles` workers →
//! [`Reconciler::reconcile`] → [`Action::done`] (forget), [`Action::requeue_after`] (forget, add
//! after), an error (retry through the rate limiter) or a [`Terminal`] error (counted, not
//! retried). A panic is caught, counted and retried like an error.
//!
//! Event filters see each object whole (as a `DynamicObject`), so a filter that reads data
//! cannot drop a data edit unseen. No request is lost silently: a source that reports lost
//! events (a `Channel` with `Overflow::Lag`) makes the controller resync every object of its
//! primary kind (see the [`builder`] module).
//!
//! ## Modules
//!
//! The folders follow controller-runtime's packages (`reconcile`, `manager`, `metrics`, `builder`,
//! `controllerutil`); each module is also at its earlier path (`kcr_controller::leader`, ...).
//!
//! - [`reconcile`]: what runs for each request.
//!   - [`reconciler`]: [`Reconciler`], [`Action`], [`Context`], [`ReconcileError`], [`Terminal`].
//!   - [`object_reconciler`]: [`ObjectReconciler`], a reconciler handed the cached object, with
//!     an explicit path for objects that are gone.
//!   - [`reason`]: [`ReconcileReason`], why a reconcile runs ([`Context::reason`]).
//!   - [`error_policy`]: [`ErrorAction`], what a controller does with a request whose reconcile
//!     failed (requeue after, back off, give up).
//!   - [`log`]: each reconcile's tracing span, with controller-runtime's keys by default, or a
//!     [`LogConstructor`] of the controller's own.
//!   - [`clock`]: [`Clock`], the time reconcilers read through [`Context::now`], and
//!     [`ManualClock`], which a test advances by hand (requeues after a delay follow it).
//! - [`controller`]: [`Controller`], the worker loop, start-up sync and graceful shutdown.
//! - [`builder`]: [`Builder`] (`for_kind`, `owns`, `watches`, event filters, concurrency, rate
//!   limiter), controller-runtime's `NewControllerManagedBy`. Watches may be restricted to
//!   several namespaces ([`WatchOptions::namespaces`]), and kinds chosen at run time
//!   (`DynamicObject`s of an `ApiResource`) are `For`, `Owns` and `Watches` kinds through
//!   `for_dynamic`, `owns_dynamic` and `watches_dynamic` (see [`builder::dynamic`]).
//!   [`builder::hook`]: hooks that see a controller's watches, gate its reconciles and register
//!   it (the `kcr-shard` crate shards a controller across replicas this way).
//! - [`manager`]: [`Manager`]: shared cache, the client of every kind ([`Manager::client`]),
//!   readers, event recorders, runnables, HTTP endpoints.
//!   - [`leader`]: Lease-based leader election (and why it is not kube-lease-manager).
//!   - [`signals`]: SIGTERM/SIGINT handling.
//!   - [`extension`]: state a layer built outside the manager sets up once per manager.
//!   - [`defaults`]: [`ControllerDefaults`], manager-wide controller options.
//! - [`observe`]: what the manager shows of itself.
//!   - [`http`]: `/healthz`, `/readyz`, `/metrics`.
//!   - [`metrics`]: every metric kcr exports (a table of names, types, labels and meanings).
//!   - [`rest_client`]: client-go's `rest_client_*` metrics from a tower layer on the client.
//!   - [`process`]: process and tokio runtime metrics, read at scrape time.
//!   - [`secure_metrics`]: the optional HTTPS metrics endpoint with TokenReview authentication
//!     and SubjectAccessReview authorization (401/403), verdicts cached briefly.
//! - [`objects`]: owner references, create-or-update, server-side apply and finalizers
//!   (controller-runtime's `controllerutil` and `finalizer`).
//! - [`watch`]: the type-erased watch a controller holds.
//!
//! A controller also runs on its own, with a queue fed directly:
//!
//! ```
//! use kcr_controller::{Action, Context, Controller, ControllerOptions, Reconciler};
//! use tokio_util::sync::CancellationToken;
//!
//! struct Count(std::sync::atomic::AtomicUsize);
//! impl Reconciler<String> for Count {
//!     type Error = anyhow::Error;
//!     async fn reconcile(&self, _request: &String, _ctx: &Context) -> anyhow::Result<Action> {
//!         self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
//!         Ok(Action::done())
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> anyhow::Result<()> {
//! let controller = Controller::new("count", Count(Default::default()), ControllerOptions::default());
//! let queue = controller.queue().clone();
//! queue.add("world".to_string());
//! let shutdown = CancellationToken::new();
//! let running = tokio::spawn(controller.run(shutdown.clone()));
//! while !queue.is_empty() || queue.num_in_flight() > 0 {
//!     tokio::task::yield_now().await;
//! }
//! shutdown.cancel();
//! running.await??;
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

pub mod builder;
pub mod controller;
pub mod error;
pub mod manager;
pub mod objects;
pub mod observe;
pub mod reconcile;
pub mod watch;

// The modules at their earlier paths (`kcr_controller::leader`, `kcr_controller::metrics`, ...).
pub use manager::{defaults, extension, leader, signals};
pub use observe::{http, metrics, process, rest_client, secure_metrics};
pub use reconcile::{clock, error_policy, log, object_reconciler, reason, reconciler};

pub use builder::{Builder, EventFilter, Resync, SourceWatch, WatchOptions, WatchedObject};
pub use clock::{Clock, ClockError, ManualClock};
pub use controller::{Controller, ControllerOptions, Key};
pub use defaults::ControllerDefaults;
pub use error::{ControllerError, ManagerError};
pub use error_policy::{ErrorAction, ErrorPolicy};
pub use http::BindAddress;
/// One client for every kind ([`kcr_client`]), as [`Manager::client`] returns it.
pub use kcr_client::{Client, ClientError, ClientOptions, ListOptions};
pub use kube::runtime::events::EventType;
pub use leader::{InvalidLeaseTimings, LeaderElectionConfig, LeaderElector, LeaseTimings};
pub use log::{LogConstructor, ReconcileInfo};
pub use manager::{Manager, ManagerOptions};
pub use object_reconciler::{FromCache, FromCacheError, ObjectReconciler};
pub use reason::ReconcileReason;
pub use reconciler::{
    Action, Context, EventError, FnReconciler, ReconcileError, Reconciler, Terminal, reconciler_fn,
};
pub use watch::{BoxError, StartedWatch, Watch};

/// The token [`Manager::run`], [`Controller::run`] and runnables stop on (tokio-util's), so
/// that callers need no tokio-util dependency of their own.
pub use tokio_util::sync::CancellationToken;

/// The repository README's code blocks, compiled as doctests so that its
/// "write your own controller" example cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
