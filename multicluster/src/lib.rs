//! Multi-cluster: one kcr manager reconciling across a dynamic fleet of clusters.
//!
//! - A [`Cluster`] is a name, a client and a cache of its own. The manager's own cluster is
//!   one of them once [`Fleet::engage_local`] adds it.
//! - [`Provider`]s find clusters: [`StaticProvider`] (named kubeconfigs or clients) and
//!   [`SecretProvider`] (kubeconfig Secrets in a namespace of the manager's cluster, selected by
//!   a label, followed at run time) and [`ClusterProfileProvider`] (the Cluster Inventory API's
//!   ClusterProfiles, with credentials configured per credential provider).
//! - **Engagement**: when a provider engages a cluster, every multi-cluster controller starts
//!   its watches there; when it goes, its watches stop, its cache is stopped, and requests still
//!   queued for it finish without calling the reconciler (dropped rather than finished against
//!   a cluster that is gone: there is nothing left to reconcile there, and a client to it may
//!   no longer be valid). A cluster that cannot be reached does not hold the others up: the
//!   controllers do not wait for it, and it shows in [`Fleet::unready`], `/readyz/fleet`
//!   ([`Fleet::install`]) and the `kcr_multicluster_cluster_ready{cluster}` gauge
//!   ([`metrics`]).
//! - **Cluster-aware controllers**: [`Fleet::controller`] builds a controller of
//!   [`ClusterRequest`]s whose [`FleetReconciler`] is handed the request's [`Cluster`]; its
//!   `for_kind` and `owns` watches run in every cluster (an owned object in cluster B enqueues
//!   its owner in cluster B), [`FleetBuilder::from_hub`] fans the hub's objects out to every
//!   member, and [`Fleet::member_watch`] maps objects of every member to requests of an
//!   ordinary controller of the hub. Single-cluster controllers are untouched.
//! - **Leader election** covers the fleet: multi-cluster controllers are ordinary controllers
//!   of the manager and run on its leader only. Or **shard the fleet**: with a
//!   [`ShardedProvider`] each replica engages its share of the clusters (kcr-shard's member
//!   Leases and hash ring) and [`FleetBuilder::every_replica`] controllers reconcile them.
//!
//! kcr-multicluster is a layer on kcr-controller's public API (controllers, `Watch`,
//! runnables, readiness checks); kcr-controller does not know it.
//!
//! # Example: ConfigMaps mirrored from the hub to every member
//!
//! Every ConfigMap labelled `mirror.kcr.io/enabled=true` in the hub's namespace `mirror` is
//! copied to the same namespace in every member cluster; the hub's copy gets an annotation per
//! member, `mirror.kcr.io/<member>`, with the resourceVersion it mirrored. (The label keeps the
//! mirror off ConfigMaps that each cluster manages itself, such as `kube-root-ca.crt`.)
//!
//! ```no_run
//! use std::collections::BTreeMap;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kcr_controller::{Action, Context, Manager, ManagerOptions};
//! use kcr_multicluster::{Cluster, ClusterRequest, Fleet, FleetReconciler, SecretProvider};
//! use kcr_source::WatchScope;
//! use kube::api::{Api, Patch, PatchParams};
//!
//! struct Mirror {
//!     fleet: Fleet,
//! }
//!
//! impl FleetReconciler for Mirror {
//!     type Error = kube::Error;
//!     async fn reconcile(
//!         &self,
//!         request: &ClusterRequest,
//!         member: &Cluster,
//!         _ctx: &Context,
//!     ) -> Result<Action, kube::Error> {
//!         let Some(hub) = self.fleet.cluster(self.fleet.local_name()) else {
//!             return Ok(Action::done());
//!         };
//!         let ns = request.request.namespace.as_deref().unwrap_or("mirror");
//!         let name = &request.request.name;
//!         let hub_api: Api<ConfigMap> = Api::namespaced(hub.client(), ns);
//!         let Some(source) = hub_api.get_opt(name).await? else {
//!             return Ok(Action::done()); // gone from the hub (deletion is left out here)
//!         };
//!         let copy = ConfigMap {
//!             metadata: kube::api::ObjectMeta {
//!                 name: Some(name.clone()),
//!                 namespace: Some(ns.to_string()),
//!                 labels: source.metadata.labels.clone(),
//!                 ..Default::default()
//!             },
//!             data: source.data.clone(),
//!             ..Default::default()
//!         };
//!         let params = PatchParams::apply("kcr-mirror").force();
//!         Api::<ConfigMap>::namespaced(member.client(), ns)
//!             .patch(name, &params, &Patch::Apply(&copy))
//!             .await?;
//!         let status = serde_json::json!({"metadata": {"annotations": {
//!             format!("mirror.kcr.io/{}", member.name()): source.metadata.resource_version,
//!         }}});
//!         hub_api.patch(name, &PatchParams::default(), &Patch::Merge(&status)).await?;
//!         Ok(Action::done())
//!     }
//! }
//!
//! # async fn run() -> anyhow::Result<()> {
//! let client = kube::Client::try_default().await?;
//! let mgr = Manager::new(client.clone(), ManagerOptions::default()).await?;
//! let fleet = Fleet::new("hub");
//! fleet.engage_local(&mgr);
//! fleet.install(&mgr)?;
//! fleet.run_provider(&mgr, SecretProvider::new(client, "fleet", "kcr.io/cluster=true"))?;
//! let mirrored = WatchScope::all()
//!     .namespace("mirror")
//!     .labels("mirror.kcr.io/enabled=true");
//! fleet
//!     .controller(&mgr)
//!     .named("mirror")
//!     .members_only()
//!     .from_hub::<ConfigMap>(mirrored.clone())
//!     .for_kind::<ConfigMap>(mirrored) // a member's copy changed
//!     .complete(Mirror { fleet: fleet.clone() })?;
//! mgr.run_until_signal().await?;
//! # Ok(()) }
//! ```

pub mod cluster;
pub mod controller;
pub mod error;
pub mod fleet;
pub mod metrics;
pub mod provider;
pub mod request;
mod watch;

pub use cluster::{Cluster, ClusterName};
pub use controller::{FleetBuilder, FleetReconciler};
pub use error::FleetError;
pub use fleet::Fleet;
pub use provider::{
    ClusterProfileProvider, DEFAULT_KUBECONFIG_KEY, Provider, SecretProvider, ShardedProvider,
    StaticProvider,
};
pub use request::ClusterRequest;
