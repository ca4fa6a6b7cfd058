//! A fixed set of named clusters.

use futures::future::BoxFuture;
use kube::config::Kubeconfig;
use tokio_util::sync::CancellationToken;

use super::Provider;
use crate::cluster::ClusterName;
use crate::error::FleetError;
use crate::fleet::Fleet;

enum Access {
    Kubeconfig(Box<Kubeconfig>),
    Client(kube::Client),
}

/// Named clusters given up front (kubeconfigs or clients), engaged when the provider starts
/// and disengaged when it stops.
#[must_use]
#[derive(Default)]
pub struct StaticProvider {
    clusters: Vec<(ClusterName, Access)>,
}

impl std::fmt::Debug for StaticProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.clusters.iter().map(|(n, _)| n))
            .finish()
    }
}

impl StaticProvider {
    /// An empty provider.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the cluster `name` reached through `kubeconfig` (its current context).
    pub fn kubeconfig(mut self, name: impl Into<ClusterName>, kubeconfig: Kubeconfig) -> Self {
        self.clusters
            .push((name.into(), Access::Kubeconfig(Box::new(kubeconfig))));
        self
    }

    /// Adds the cluster `name` reached through `client`.
    pub fn client(mut self, name: impl Into<ClusterName>, client: kube::Client) -> Self {
        self.clusters.push((name.into(), Access::Client(client)));
        self
    }
}

impl Provider for StaticProvider {
    fn name(&self) -> String {
        "static".into()
    }

    fn run(
        self: Box<Self>,
        fleet: Fleet,
        stop: CancellationToken,
    ) -> BoxFuture<'static, Result<(), FleetError>> {
        Box::pin(async move {
            let mut engaged = Vec::new();
            for (name, access) in self.clusters {
                match access {
                    Access::Client(client) => {
                        fleet.engage(name.clone(), client);
                        engaged.push(name);
                    }
                    Access::Kubeconfig(kubeconfig) => {
                        // A bad one is recorded on the fleet; the others go on.
                        if fleet
                            .engage_kubeconfig(name.clone(), *kubeconfig)
                            .await
                            .is_ok()
                        {
                            engaged.push(name);
                        }
                    }
                }
            }
            stop.cancelled().await;
            for name in engaged {
                fleet.disengage(&name);
            }
            Ok(())
        })
    }
}
