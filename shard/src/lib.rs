//! Scale-out: one kcr controller sharded across replicas, coordinated through the Kubernetes
//! API.
//!
//! This crate is a layer on kcr-controller: it plugs into the [`Manager`](kcr_controller::Manager) through
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
pub mod config;
pub mod error;
pub mod gate;
pub mod membership;
mod plan;
pub mod ring;
pub mod sharder;
mod target;

pub use config::{DEFAULT_WRITE_CONCURRENCY, DRAIN_PREFIX, LABEL_PREFIX, ShardConfig, object_key};
pub use error::ShardError;
pub use membership::{MemberObserver, Members, member_lease_name, sharder_lease_name};
pub use plan::{ShardBuilderExt, ShardOptionsExt, identity, sharder_view};
pub use ring::{DEFAULT_VIRTUAL_NODES, HashRing};
pub use sharder::{Step, plan};
