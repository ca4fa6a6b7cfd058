//! Errors of the fleet and its providers.

/// Why a cluster could not be engaged, or a provider or controller could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FleetError {
    /// A cluster's kubeconfig could not be read or turned into a client.
    #[error("cluster {cluster}: bad kubeconfig: {reason}")]
    Kubeconfig {
        /// The cluster.
        cluster: String,
        /// What was wrong.
        reason: String,
    },
    /// A provider's watch of its own cluster failed.
    #[error("provider {provider}: {reason}")]
    Provider {
        /// The provider.
        provider: String,
        /// What failed.
        reason: String,
    },
    /// A multi-cluster controller was misconfigured.
    #[error("multi-cluster controller {controller}: {reason}")]
    Controller {
        /// The controller.
        controller: String,
        /// What was wrong.
        reason: String,
    },
}
