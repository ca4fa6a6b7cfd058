//! Scale-out: one kcr controller sharded across replicas, coordinated through the Kubernetes
//! API.
//!
//! This crate is a layer on kcr-controller: it plugs into the [`Manager`] through
//! [`ManagerOptions::extension`](kcr_controller::ManagerOptions::extension) (the
//! [`ShardOptionsExt::shard_by_lease`] extension trait) and into the controller's builder
//! through [`Builder::with_hook`](kcr_controller::Builder::with_hook) (the
//! [`ShardBuilderExt::sharded`] extension trait); kcr-controller does not know it.
//!
//! Leader election ([`kcr_controller::leader`]) makes one replica do all the work of a controller and
//! hold every object of its kinds in its cache. Sharding spreads one controller over N
//! replicas: each reconciles, and caches, only its share of the objects.
//!
//! ```no_run
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::{ConfigMap, Secret};
//! use kcr_controller::{Action, Context, Manager, ManagerOptions, Reconciler, WatchOptions};
//! use kcr_shard::{ShardBuilderExt, ShardConfig, ShardOptionsExt};
//! use kcr_handler::Request;
//!
//! struct Hello;
//! impl Reconciler<Request> for Hello {
//!     type Error = anyhow::Error;
//!     async fn reconcile(&self, request: &Request, _ctx: &Context) -> anyhow::Result<Action> {
//!         tracing::info!(%request, "reconciling my share");
//!         Ok(Action::done())
//!     }
//! }
//!
//! # async fn run() -> anyhow::Result<()> {
//! let client = kube::Client::try_default().await?;
//! let options = ManagerOptions::default()
//!     .shard_by_lease(ShardConfig::new("hello").namespace("operators"));
//! let mgr = Manager::new(client, options).await?;
//! mgr.controller()
//!     .named("hello")
//!     .sharded() // before for_kind / owns
//!     .for_kind::<ConfigMap>(WatchOptions::new())
//!     .owns::<Secret>(WatchOptions::new())
//!     .max_concurrent_reconciles(5)
//!     .complete(Hello)?;
//! mgr.run_until_signal().await?;
//! # Ok(()) }
//! ```
//!
//! # How it works
//!
//! - **Membership** ([`membership`]): each replica holds a Lease of its own,
//!   `kcr-shard.<group>.<identity>`, renewed as in leader election. The members are the holders
//!   of the unexpired Leases of the group, expiry judged on the observer's monotonic clock.
//! - **Assignment** ([`ring`], [`sharder`]): a consistent-hash ring with virtual nodes maps each
//!   object's key (`namespace/name`) to a member. The **sharder**, one replica elected on the
//!   Lease `kcr-sharder.<group>`, writes the label `shard.kcr.io/<group>=<member>` onto each
//!   object with a metadata merge patch when the object appears and when membership changes.
//!   Owned objects are hashed by their controller owner's key, so an owner and its children land
//!   on the same replica.
//! - **Caching**: every watch of the sharded controller (`for_kind`, `owns`) carries the label
//!   selector `shard.kcr.io/<group>=<identity>`: a replica's cache holds its share only. The
//!   sharder alone watches all objects, metadata only, and only while it leads.
//! - **Moving an object without two owners** ([`gate`]): the sharder marks the object draining
//!   (annotation `drain.shard.kcr.io/<group>: <current owner>`); the owner stops admitting
//!   reconciles of it, waits for the one in flight, and acknowledges by removing its label and
//!   the mark; only then does the sharder write the new owner. A dead owner cannot acknowledge:
//!   once its Lease has expired (as the sharder observes it), the sharder writes the new owner
//!   directly. A replica that cannot renew its Lease within the renew deadline drops its
//!   in-flight reconciles and stops, before the Lease can expire for anyone else.
//! - **Configuration**: [`ShardOptionsExt::shard_by_lease`] on the manager's options and
//!   [`ShardBuilderExt::sharded`] on the one controller to shard. The
//!   manager's other controllers keep today's behaviour (leader election if configured).
//!
//! Why this design, and not another: the Lease-per-replica membership and the label-selected
//! watches need nothing but the Kubernetes API, which every operator has already; the
//! drain-and-acknowledge hand-over makes "never two replicas reconcile one object at once" hold
//! by construction instead of by timing, except for a replica that died, where it falls back on
//! leader election's timing argument (`renew_deadline < lease_duration`). Rendezvous hashing
//! would balance as well, but costs one hash per member per object on every pass; the ring
//! costs one binary search.
//!
//! # Limits
//!
//! - **How long a move takes.** A move to a live replica: the sharder's next pass after the
//!   membership change (it polls Leases every `retry_period`, so up to `retry_period` after the
//!   new Lease appears) writes the drain mark; the owner sees it through its watch and
//!   acknowledges as soon as the reconcile in flight for that object ends (one API write); the
//!   sharder sees the acknowledgement through its watch and writes the new owner (one write); the
//!   new owner's watch delivers the object and it is reconciled. So: `retry_period` + the
//!   longest reconcile in flight + four watch deliveries and three writes (milliseconds on an
//!   idle API server). Off a dead replica: `lease_duration` after its last renewal as observed by
//!   the sharder, plus up to `retry_period`, plus the same writes. Measured (`tests/sharding.rs`,
//!   lease 3 s, renew deadline 2 s, retry 250 ms): when a fourth replica joins three holding
//!   3,000 objects, the 771 objects that move (25.7 %) are all drained, acknowledged and
//!   reassigned 9.4 s (in process) and 14 s (real kube-apiserver) after the sharder saw the new
//!   member, about 80 and 55 moves per second, with the test listing all 3,000 objects every
//!   20 ms meanwhile (debug build); when the replica running the sharder crashes, its objects
//!   are reconciled by the others 5 to 8 s later on either backend (two lease durations: the
//!   sharder's election, then the dead member's Lease judged afresh).
//! - **While the sharder itself fails over** nothing moves and nothing new is assigned: objects
//!   created meanwhile wait unlabelled (no replica sees them), drains already marked wait for
//!   the new sharder. Replicas keep reconciling the objects they hold, so the controller keeps
//!   working on everything already assigned. The new sharder is elected `lease_duration` after the
//!   old one's last renewal (immediately if it released its Lease on a graceful stop) plus up to
//!   `1.2 × retry_period` of jitter, and it then judges every member Lease afresh, so a member
//!   that died together with the old sharder is declared dead only another `lease_duration`
//!   later. Two sharders overlapping (the old one not yet aware it lost) cannot corrupt the
//!   assignment: every write carries the resourceVersion it was decided on.
//! - **Deletions.** A replica reconciles only objects its cache holds with its label: the
//!   request of an object that is already gone is dropped. Use a finalizer to act on deletion
//!   (the object stays, with its label, until the finalizer is removed).
//! - **Identities** must be unique among live replicas (the default adds a random suffix). A
//!   restart is a new member: its predecessor's objects move when the predecessor's Lease expires
//!   (or at once if it released it on a graceful stop).
//! - **One sharded controller per manager**; the sharder replica watches the metadata of all the
//!   controller's objects.
//!
//! # Throughput
//!
//! `cargo run --release -p kcr-shard --example sharding` runs 1 and then 3 replicas of a
//! controller with 5 workers whose reconcile waits 10 ms, over 3,000 ConfigMaps. On the
//! development machine (2 shared cores, two runs each): in process 390–443 reconciles/s with
//! 1 replica and 1,176–1,335 with 3 (3.01× both times); on the real kube-apiserver 444–446 and
//! 1,319–1,335 (2.96–3.01×). The ideal is 500 and 1,500 (5 workers / 10 ms per replica); the
//! shortfall is the same fraction with 1 and 3 replicas (likely the 10 ms timer rounding up and
//! per-reconcile overhead; not measured separately).

use std::sync::Arc;
use std::time::Duration;

use kcr_controller::builder::{
    BuilderHook, ControllerRunnable, MadeWatch, PlannedWatch, ReconcileGate, WatchRole,
};
use kcr_controller::extension::ManagerExtension;
use kcr_controller::leader::{
    DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, LeaderElectionConfig,
    LeaderElector,
};
use kcr_controller::{BoxError, Builder, Manager, ManagerError, ManagerOptions};
use kcr_handler::Request;
use kcr_source::WatchScope;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

pub mod error;
pub mod gate;
pub mod membership;
pub mod ring;
pub mod sharder;
mod target;

pub use error::ShardError;
pub use membership::{MemberObserver, Members, member_lease_name, sharder_lease_name};
pub use ring::{DEFAULT_VIRTUAL_NODES, HashRing};
pub use sharder::{Step, plan};

use gate::{DrainSource, DrainTask, Keys, Lookup, Ownership, ShardGate, ShardMeta};
use sharder::{KindSharder, KindSpec, OwnerSpec};

/// Prefix of the shard label key: `shard.kcr.io/<group>`.
pub const LABEL_PREFIX: &str = "shard.kcr.io/";
/// Prefix of the drain annotation key: `drain.shard.kcr.io/<group>`.
pub const DRAIN_PREFIX: &str = "drain.shard.kcr.io/";
/// Default number of concurrent writes of the sharder.
pub const DEFAULT_WRITE_CONCURRENCY: usize = 16;

/// The key an object is hashed by: `namespace/name`, or `name` for a cluster-scoped object.
pub fn object_key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

/// Configuration of sharding (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct ShardConfig {
    /// The shard group: names the label `shard.kcr.io/<name>` and the Leases. A DNS label
    /// (lower-case letters, digits and `-`, at most 63 characters); usually the controller's
    /// name.
    pub name: String,
    /// Namespace of the Leases; `None` uses the client's default namespace.
    pub namespace: Option<String>,
    /// This replica's identity: the label value of its objects. A DNS label, unique among live
    /// replicas. Default: the host name (shortened) plus a random suffix.
    pub identity: String,
    /// How long a member (and the sharder) Lease is valid after its last renewal.
    pub lease_duration: Duration,
    /// How long a replica keeps trying to renew before it stops.
    pub renew_deadline: Duration,
    /// How often Leases are renewed and polled, and how often the sharder re-checks.
    pub retry_period: Duration,
    /// Release the member Lease on graceful shutdown (default `true`), so that the objects move
    /// at once instead of after the Lease expires.
    pub release_on_cancel: bool,
    /// Points per member on the ring (default [`DEFAULT_VIRTUAL_NODES`]).
    pub virtual_nodes: usize,
    /// How many writes the sharder makes at once (default [`DEFAULT_WRITE_CONCURRENCY`]).
    pub write_concurrency: usize,
}

impl ShardConfig {
    /// A configuration for the shard group `name` with controller-runtime's leader election
    /// timings (15 s / 10 s / 2 s).
    pub fn new(name: impl Into<String>) -> Self {
        ShardConfig {
            name: name.into(),
            namespace: None,
            identity: default_identity(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
            release_on_cancel: true,
            virtual_nodes: DEFAULT_VIRTUAL_NODES,
            write_concurrency: DEFAULT_WRITE_CONCURRENCY,
        }
    }

    /// Sets the Leases' namespace.
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Sets this replica's identity.
    #[must_use]
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = identity.into();
        self
    }

    /// Sets lease duration, renew deadline and retry period.
    #[must_use]
    pub fn timings(mut self, lease: Duration, renew_deadline: Duration, retry: Duration) -> Self {
        self.lease_duration = lease;
        self.renew_deadline = renew_deadline;
        self.retry_period = retry;
        self
    }

    /// Whether to release the member Lease on graceful shutdown.
    #[must_use]
    pub fn release_on_cancel(mut self, release: bool) -> Self {
        self.release_on_cancel = release;
        self
    }

    /// Sets the points per member on the ring.
    #[must_use]
    pub fn virtual_nodes(mut self, n: usize) -> Self {
        self.virtual_nodes = n;
        self
    }

    /// Sets how many writes the sharder makes at once.
    #[must_use]
    pub fn write_concurrency(mut self, n: usize) -> Self {
        self.write_concurrency = n;
        self
    }

    /// The shard label key, `shard.kcr.io/<name>`.
    pub fn label_key(&self) -> String {
        format!("{LABEL_PREFIX}{}", self.name)
    }

    /// The drain annotation key, `drain.shard.kcr.io/<name>`.
    pub fn drain_key(&self) -> String {
        format!("{DRAIN_PREFIX}{}", self.name)
    }

    /// The label selector of this replica's shard, `shard.kcr.io/<name>=<identity>`.
    pub fn selector(&self) -> String {
        format!("{}={}", self.label_key(), self.identity)
    }

    pub(crate) fn keys(&self) -> Keys {
        Keys {
            label: self.label_key(),
            drain: self.drain_key(),
        }
    }

    fn election(&self, lease_name: String, release: bool) -> LeaderElectionConfig {
        let mut le = LeaderElectionConfig::new(lease_name)
            .identity(self.identity.clone())
            .timings(self.lease_duration, self.renew_deadline, self.retry_period)
            .release_on_cancel(release);
        le.namespace = self.namespace.clone();
        le
    }

    /// Checks names and timings.
    pub fn validate(&self) -> Result<(), ShardError> {
        let bad = |reason: String| Err(ShardError::InvalidConfig { reason });
        if !kcr_names::is_dns1123_label(&self.name) {
            return bad(format!(
                "the shard group name {:?} must be a DNS label (lower-case letters, digits and '-', at most 63 characters)",
                self.name
            ));
        }
        if !kcr_names::is_dns1123_label(&self.identity) {
            return bad(format!(
                "the identity {:?} must be a DNS label (lower-case letters, digits and '-', at most 63 characters)",
                self.identity
            ));
        }
        if self.virtual_nodes == 0 {
            return bad("virtual_nodes must be at least 1".into());
        }
        if self.write_concurrency == 0 {
            return bad("write_concurrency must be at least 1".into());
        }
        self.election(member_lease_name(&self.name, &self.identity), false)
            .validate()
            .or_else(|e| bad(e.to_string()))
    }
}

/// A DNS label: the host name (lower-cased, other characters turned into `-`, at most 40
/// characters) plus `-` and 12 random hex digits.
fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .unwrap_or_default();
    let mut cleaned: String = host
        .trim()
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(40)
        .collect();
    cleaned = cleaned.trim_matches('-').to_string();
    if cleaned.is_empty() {
        cleaned = "kcr".to_string();
    }
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{cleaned}-{}", &suffix[..12])
}

/// Sharding on a [`ManagerOptions`]: the extension trait that sets it up.
pub trait ShardOptionsExt {
    /// Shards the controller built with [`ShardBuilderExt::sharded`] across the replicas
    /// running this option with the same group name (see the [crate docs](crate)); the
    /// manager's other controllers are unaffected. A bad configuration fails
    /// [`Manager::new`] ([`ManagerError::Extension`] with the [`ShardError`]).
    #[must_use]
    fn shard_by_lease(self, config: ShardConfig) -> Self;
}

impl ShardOptionsExt for ManagerOptions {
    fn shard_by_lease(self, config: ShardConfig) -> Self {
        self.extension(ShardExtension { config })
    }
}

/// Sharding on a controller's [`Builder`]: the extension trait.
pub trait ShardBuilderExt {
    /// Shards this controller across the replicas of its manager's
    /// [`shard_by_lease`](ShardOptionsExt::shard_by_lease) group: its `for_kind` and `owns`
    /// watches see only this replica's objects, and it runs on every replica that holds its
    /// member Lease, not only on the leader. Call before `for_kind` and `owns`; register with
    /// `complete` or `complete_objects`.
    #[must_use]
    fn sharded(self) -> Self;
}

impl ShardBuilderExt for Builder<'_, Request> {
    fn sharded(self) -> Self {
        let runtime = self.manager().and_then(|m| m.extension::<ShardRuntime>());
        let Some(runtime) = runtime else {
            return self.failed(ManagerError::Builder {
                reason: "sharded() needs a manager made with ManagerOptions::shard_by_lease".into(),
            });
        };
        if self.has_watches() {
            return self.failed(ManagerError::Builder {
                reason: "call sharded() before for_kind, owns and watches: their caches hold only this replica's shard".into(),
            });
        }
        self.with_hook(ShardPlan::new(runtime))
    }
}

/// The [`ManagerExtension`] of [`ShardOptionsExt::shard_by_lease`].
struct ShardExtension {
    config: ShardConfig,
}

impl ManagerExtension for ShardExtension {
    fn name(&self) -> &str {
        "kcr-shard"
    }

    fn init(
        &self,
        client: &kube::Client,
    ) -> Result<Arc<dyn std::any::Any + Send + Sync>, BoxError> {
        Ok(Arc::new(ShardRuntime::new(
            client.clone(),
            self.config.clone(),
        )?))
    }
}

/// The per-manager sharding state.
pub(crate) struct ShardRuntime {
    pub(crate) config: Arc<ShardConfig>,
    pub(crate) namespace: String,
    client: kube::Client,
    /// The sharded controller's name, once one is registered.
    sharded: Mutex<Option<String>>,
    /// Cancelled when the member Lease is lost.
    lost: CancellationToken,
    /// The live members as this replica's sharder sees them, while it leads.
    view: sharder::View,
}

impl std::fmt::Debug for ShardRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardRuntime")
            .field("config", &self.config)
            .field("namespace", &self.namespace)
            .field("sharded", &*self.sharded.lock())
            .finish()
    }
}

impl ShardRuntime {
    pub(crate) fn new(client: kube::Client, config: ShardConfig) -> Result<Self, ShardError> {
        config.validate()?;
        let namespace = config
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string());
        Ok(ShardRuntime {
            config: Arc::new(config),
            namespace,
            client,
            sharded: Mutex::new(None),
            lost: CancellationToken::new(),
            view: Arc::default(),
        })
    }
}

/// What a sharded controller's builder gathers, as its [`BuilderHook`]: the gate's lookup, the
/// sharder's kinds and the replica's drain watchers.
struct ShardPlan {
    runtime: Arc<ShardRuntime>,
    ownership: Arc<Ownership<Request>>,
    lookup: Option<Lookup<Request>>,
    primary: Option<OwnerSpec>,
    kinds: Vec<Arc<dyn KindSharder>>,
    drains: Vec<DrainTask>,
}

impl std::fmt::Debug for ShardPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardPlan")
            .field("group", &self.runtime.config.name)
            .field("kinds", &self.kinds.len())
            .finish()
    }
}

impl ShardPlan {
    fn new(runtime: Arc<ShardRuntime>) -> Self {
        let ownership = Arc::new(Ownership::new(
            runtime.config.identity.clone(),
            runtime.lost.clone(),
        ));
        ShardPlan {
            runtime,
            ownership,
            lookup: None,
            primary: None,
            kinds: Vec::new(),
            drains: Vec::new(),
        }
    }

    /// Refuses a scope the sharder cannot follow: it labels the objects of one namespace or of
    /// all, not of a list of namespaces.
    fn check_scope(kind: &str, base: &WatchScope) -> Result<(), String> {
        match base.namespaces.as_deref() {
            Some([_, _, ..]) => Err(format!(
                "a sharded controller watches {kind} in one namespace or in all, not in several ({})",
                base.namespaces.as_deref().unwrap_or_default().join(", ")
            )),
            _ => Ok(()),
        }
    }

    /// `base` restricted to this replica's shard.
    fn scope(&self, base: &WatchScope) -> WatchScope {
        let mine = self.runtime.config.selector();
        let labels = match &base.label_selector {
            Some(l) if !l.trim().is_empty() => format!("{l},{mine}"),
            _ => mine,
        };
        WatchScope {
            label_selector: Some(labels),
            ..base.clone()
        }
    }

    /// The primary kind: sharded by its own key, gated, drained after in-flight reconciles.
    fn add_primary(&mut self, watch: MadeWatch) {
        let keys = self.runtime.config.keys();
        let (label, drain) = (keys.label.clone(), keys.drain.clone());
        let meta = watch.meta.clone();
        self.lookup = Some(Arc::new(move |r: &Request| {
            let object = meta.get(&r.name, r.namespace.as_deref())?;
            Some(ShardMeta::of(&object, &label, &drain))
        }));
        let target = target::Target {
            resource: watch.resource.clone(),
            cluster_scoped: watch.cluster_scoped,
        };
        self.primary = Some(OwnerSpec {
            group: watch.resource.group.clone(),
            kind: watch.resource.kind.clone(),
            cluster_scoped: watch.cluster_scoped,
        });
        self.kinds.push(Arc::new(KindSpec {
            target: target.clone(),
            scope: watch.base.clone(),
            owner: None,
        }));
        self.drains.push(gate::drain_watcher(
            DrainSource {
                target,
                meta: watch.meta,
            },
            self.runtime.client.clone(),
            keys,
            self.ownership.clone(),
            true,
            self.runtime.config.retry_period,
        ));
    }

    /// An owned kind: sharded by its controller owner's key, drained at once.
    fn add_child(&mut self, watch: MadeWatch) -> Result<(), String> {
        let Some(owner) = self.primary.clone() else {
            return Err(format!(
                "on a sharded controller, call for_kind before owns::<{}>(): children are sharded by their owner",
                watch.kind
            ));
        };
        let target = target::Target {
            resource: watch.resource.clone(),
            cluster_scoped: watch.cluster_scoped,
        };
        self.kinds.push(Arc::new(KindSpec {
            target: target.clone(),
            scope: watch.base.clone(),
            owner: Some(owner),
        }));
        self.drains.push(gate::drain_watcher(
            DrainSource {
                target,
                meta: watch.meta,
            },
            self.runtime.client.clone(),
            self.runtime.config.keys(),
            self.ownership.clone(),
            false,
            self.runtime.config.retry_period,
        ));
        Ok(())
    }
}

impl BuilderHook<Request> for ShardPlan {
    fn name(&self) -> &str {
        "kcr-shard"
    }

    fn plan_watch(&mut self, watch: &mut PlannedWatch<'_>) -> Result<(), String> {
        if watch.dynamic {
            return Err(format!(
                "a sharded controller takes typed kinds (for_kind, owns), not the run-time kind {}: \
                 sharding does not support DynamicObject yet",
                watch.kind
            ));
        }
        Self::check_scope(watch.kind, watch.base)?;
        if watch.role == WatchRole::Owned && self.primary.is_none() {
            return Err(format!(
                "on a sharded controller, call for_kind before owns::<{}>(): children are sharded by their owner",
                watch.kind
            ));
        }
        // A sharded controller's cache holds only this replica's shard of the kind.
        watch.scope = self.scope(&watch.scope);
        Ok(())
    }

    fn watch_made(&mut self, watch: MadeWatch) -> Result<(), String> {
        match watch.role {
            WatchRole::Primary => {
                self.add_primary(watch);
                Ok(())
            }
            _ => self.add_child(watch),
        }
    }

    fn gate(&mut self) -> Result<Option<Arc<dyn ReconcileGate<Request>>>, String> {
        let lookup = self.lookup.clone().ok_or_else(|| {
            "a sharded controller needs for_kind::<K>(): its objects are what is sharded"
                .to_string()
        })?;
        Ok(Some(Arc::new(ShardGate {
            ownership: self.ownership.clone(),
            lookup,
        })))
    }

    fn takes_registration(&self) -> bool {
        true
    }

    fn register(
        self: Box<Self>,
        manager: &Manager,
        controller: ControllerRunnable,
    ) -> Result<(), ManagerError> {
        register(manager, controller, *self)
    }
}

/// Registers a sharded controller: its member Lease, the controller (on every replica, once
/// the Lease is held) with its drain watchers, and the sharder's election.
fn register(
    manager: &Manager,
    controller: ControllerRunnable,
    plan: ShardPlan,
) -> Result<(), ManagerError> {
    let runtime = plan.runtime.clone();
    let name = controller.name().to_string();
    {
        let mut sharded = runtime.sharded.lock();
        if let Some(existing) = &*sharded {
            return Err(ManagerError::Builder {
                reason: format!(
                    "controller {name}: this manager already shards controller {existing} (one sharded controller per manager)"
                ),
            });
        }
        manager.reserve_name(&name)?;
        *sharded = Some(name.clone());
    }
    let config = runtime.config.clone();
    let group = config.name.clone();
    let (joined_tx, joined_rx) = tokio::sync::watch::channel(false);
    let controller_done = CancellationToken::new();

    // 1. The member Lease: renewed until the manager stops *and* the controller has finished,
    //    so that no reconcile runs after the Lease is released or left to expire.
    let member = {
        let client = runtime.client.clone();
        let le = config.election(
            member_lease_name(&config.name, &config.identity),
            config.release_on_cancel,
        );
        let lost = runtime.lost.clone();
        let done = controller_done.clone();
        let (group, identity) = (config.name.clone(), config.identity.clone());
        move |token: CancellationToken| async move {
            let elector = LeaderElector::new(client, le);
            let stop = CancellationToken::new();
            let stopper = tokio::spawn({
                let stop = stop.clone();
                async move {
                    token.cancelled().await;
                    done.cancelled().await;
                    stop.cancel();
                }
            });
            let _stopper = AbortOnDrop(stopper);
            if !elector.acquire(&stop).await {
                return Ok(());
            }
            tracing::info!(%group, %identity, "joined the shard group");
            let _ = joined_tx.send(true);
            match elector.renew_until_lost(&stop).await {
                Ok(()) => {
                    if elector.config().release_on_cancel
                        && let Err(e) = elector.release().await
                    {
                        tracing::warn!(error = %e, "could not release the member lease");
                    }
                    Ok(())
                }
                Err(source) => {
                    lost.cancel();
                    Err(Box::new(ShardError::MembershipLost {
                        group,
                        identity,
                        source: Box::new(source),
                    }) as BoxError)
                }
            }
        }
    };
    manager.add_runnable(format!("shard-member/{group}"), false, member)?;

    // 2. The controller and its drain watchers, once this replica is a member.
    let run_controller = {
        let lost = runtime.lost.clone();
        let drains = plan.drains;
        let mut joined = joined_rx;
        move |token: CancellationToken| async move {
            let _done = controller_done.drop_guard();
            tokio::select! {
                _ = token.cancelled() => return Ok(()),
                _ = lost.cancelled() => return Ok(()),
                j = joined.wait_for(|j| *j) => if j.is_err() { return Ok(()) },
            }
            let stop = token.child_token();
            let link = tokio::spawn({
                let (stop, lost) = (stop.clone(), lost.clone());
                async move {
                    lost.cancelled().await;
                    stop.cancel();
                }
            });
            let _link = AbortOnDrop(link);
            let mut watchers = tokio::task::JoinSet::new();
            for drain in drains {
                watchers.spawn(drain(stop.clone()));
            }
            let res = controller.run(stop.clone()).await;
            stop.cancel();
            watchers.abort_all();
            res.map_err(|e| Box::new(e) as BoxError)
        }
    };
    manager.add_runnable(format!("controller/{name}"), false, run_controller)?;

    // 3. The sharder: its own leader election; while it leads, it assigns.
    let sharder = {
        let client = runtime.client.clone();
        let namespace = runtime.namespace.clone();
        let le = config.election(sharder_lease_name(&config.name), true);
        let kinds = plan.kinds;
        let view = runtime.view.clone();
        move |token: CancellationToken| async move {
            let elector = LeaderElector::new(client.clone(), le);
            loop {
                if !elector.acquire(&token).await {
                    return Ok(());
                }
                tracing::info!(group = %config.name, identity = %config.identity, "leading the sharder");
                let lead = token.child_token();
                // Aborted if this runnable is dropped (a crash must not leave a sharder behind).
                let mut work = AbortOnDrop(tokio::spawn(sharder::lead(
                    client.clone(),
                    config.clone(),
                    namespace.clone(),
                    kinds.clone(),
                    view.clone(),
                    lead.clone(),
                )));
                let res = elector.renew_until_lost(&token).await;
                lead.cancel();
                let _ = (&mut work.0).await;
                match res {
                    Ok(()) => {
                        if let Err(e) = elector.release().await {
                            tracing::warn!(error = %e, "could not release the sharder lease");
                        }
                        return Ok(());
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "lost the sharder lease; campaigning again");
                    }
                }
            }
        }
    };
    manager.add_runnable(format!("sharder/{group}"), false, sharder)?;
    Ok(())
}

/// The live members of `manager`'s shard group as its sharder sees them, if this replica runs
/// the sharder now (`None` otherwise, or without sharding). For status pages and tests: the
/// sharder assigns objects to exactly these members.
pub fn sharder_view(manager: &Manager) -> Option<std::collections::BTreeSet<String>> {
    manager.extension::<ShardRuntime>()?.view.lock().clone()
}

/// This replica's identity in `manager`'s shard group, if it shards.
pub fn identity(manager: &Manager) -> Option<String> {
    manager
        .extension::<ShardRuntime>()
        .map(|r| r.config.identity.clone())
}

/// Aborts a task when dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The one namespace of `scope` (`None`: every namespace); a sharded scope with several is
/// refused when the controller is built.
pub(crate) fn single_namespace(scope: &WatchScope) -> Option<&str> {
    match scope.namespaces.as_deref() {
        Some([one]) => Some(one.as_str()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_validation_names_the_problem() {
        let ok = ShardConfig::new("web").identity("r-1").timings(
            Duration::from_secs(2),
            Duration::from_secs(1),
            Duration::from_millis(250),
        );
        ok.validate().unwrap();
        let err = ok.clone().identity("R_1").validate().unwrap_err();
        assert!(err.to_string().contains("identity \"R_1\""), "{err}");
        let err = ShardConfig::new("a.b").validate().unwrap_err();
        assert!(err.to_string().contains("shard group name"), "{err}");
        let err = ok
            .clone()
            .timings(
                Duration::from_secs(1),
                Duration::from_secs(2),
                Duration::from_millis(250),
            )
            .validate()
            .unwrap_err();
        assert!(err.to_string().contains("lease_duration"), "{err}");
        assert!(ok.clone().virtual_nodes(0).validate().is_err());
        assert_eq!(ok.selector(), "shard.kcr.io/web=r-1");
        assert_eq!(ok.drain_key(), "drain.shard.kcr.io/web");
    }

    #[test]
    fn default_identities_are_unique_dns_labels() {
        let (a, b) = (default_identity(), default_identity());
        assert_ne!(a, b);
        assert!(kcr_names::is_dns1123_label(&a), "{a}");
        ShardConfig::new("g").validate().unwrap();
    }

    #[test]
    fn object_keys() {
        assert_eq!(object_key(Some("ns"), "a"), "ns/a");
        assert_eq!(object_key(None, "a"), "a");
        assert_eq!(object_key(Some(""), "a"), "a");
    }
}
