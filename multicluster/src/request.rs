//! Cluster-aware requests: a [`Request`] and the cluster it is about.

use std::fmt;

use kcr_handler::Request;

use crate::cluster::ClusterName;

/// What a multi-cluster controller reconciles: an object's key in one cluster of the fleet
/// (multicluster-runtime's `mcreconcile.Request`). Displays as `cluster/namespace/name`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct ClusterRequest {
    /// The cluster the object lives in.
    pub cluster: ClusterName,
    /// The object's name and namespace there.
    pub request: Request,
}

impl ClusterRequest {
    /// The request for `request` in `cluster`.
    pub fn new(cluster: impl Into<ClusterName>, request: Request) -> Self {
        ClusterRequest {
            cluster: cluster.into(),
            request,
        }
    }
}

impl fmt::Display for ClusterRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.cluster, self.request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_with_the_cluster_first() {
        let r = ClusterRequest::new("east", Request::namespaced("a", "ns"));
        assert_eq!(r.to_string(), "east/ns/a");
        let c = ClusterRequest::new("west", Request::cluster("n"));
        assert_eq!(c.to_string(), "west/n");
        assert_ne!(
            r,
            ClusterRequest::new("west", Request::namespaced("a", "ns"))
        );
    }
}
