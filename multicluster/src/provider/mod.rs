//! Providers: where the fleet's clusters come from.
//!
//! A [`Provider`] runs beside the manager ([`Fleet::run_provider`]) and engages and disengages
//! clusters on the [`Fleet`] as they appear, change and go:
//!
//! - [`StaticProvider`]: named kubeconfigs (or clients), engaged at start;
//! - [`SecretProvider`]: kubeconfig Secrets in a namespace of the manager's own cluster,
//!   selected by a label, each Secret one cluster, followed at run time;
//! - [`ClusterProfileProvider`]: the Cluster Inventory API's ClusterProfiles
//!   (`multicluster.x-k8s.io/v1alpha1`), with credentials configured per credential provider;
//! - [`ShardedProvider`]: any of them, its clusters distributed across the operator's replicas
//!   by kcr-shard's member Leases and consistent-hash ring.

mod follow;
mod profile;
mod secret;
mod sharded;
mod static_;

pub use profile::{ClusterProfileProvider, cluster_profile_resource};
pub use secret::{DEFAULT_KUBECONFIG_KEY, SecretProvider};
pub use sharded::ShardedProvider;
pub use static_::StaticProvider;

use futures::future::BoxFuture;
use kcr_controller::{BoxError, Manager, ManagerError};
use tokio_util::sync::CancellationToken;

use crate::error::FleetError;
use crate::fleet::Fleet;

/// A source of clusters.
pub trait Provider: Send + 'static {
    /// The provider's name (in logs, errors and the runnable's name).
    fn name(&self) -> String;

    /// Engages and disengages clusters on `fleet` until `stop` is cancelled. A cluster that
    /// cannot be engaged is recorded on the fleet ([`Fleet::errors`]), not returned: an `Err`
    /// means the provider itself cannot go on.
    fn run(
        self: Box<Self>,
        fleet: Fleet,
        stop: CancellationToken,
    ) -> BoxFuture<'static, Result<(), FleetError>>;
}

impl Fleet {
    /// Runs `provider` with `manager`, on every replica (so a standby's fleet is ready when it
    /// becomes leader; the clusters' informers start only when a controller watches). Its
    /// failure stops the manager.
    pub fn run_provider(
        &self,
        manager: &Manager,
        provider: impl Provider,
    ) -> Result<(), ManagerError> {
        let fleet = self.clone();
        let name = format!("multicluster-provider/{}", provider.name());
        manager.add_runnable(name, false, move |stop| async move {
            Box::new(provider)
                .run(fleet, stop)
                .await
                .map_err(|e| Box::new(e) as BoxError)
        })
    }
}
