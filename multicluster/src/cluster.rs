//! A cluster of the fleet: a name, a client and a cache of its own.

use std::fmt;
use std::sync::Arc;

use kcr_source::Cache;

/// A cluster's name in the fleet (cheap to clone). The manager's own cluster has the name its
/// [`Fleet`](crate::Fleet) was given ([`Fleet::local_name`](crate::Fleet::local_name)).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterName(Arc<str>);

impl ClusterName {
    /// A cluster name.
    pub fn new(name: impl AsRef<str>) -> Self {
        ClusterName(Arc::from(name.as_ref()))
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", &*self.0)
    }
}

impl From<&str> for ClusterName {
    fn from(s: &str) -> Self {
        ClusterName::new(s)
    }
}

impl From<String> for ClusterName {
    fn from(s: String) -> Self {
        ClusterName::new(s)
    }
}

/// An engaged cluster: its name, a client to its API server, and a cache of its own (readers,
/// informers, indexes) that the fleet's controllers watch through. Cheap to clone.
#[derive(Clone)]
pub struct Cluster {
    name: ClusterName,
    client: kube::Client,
    cache: Cache,
    /// Distinguishes two engagements of one name (a kubeconfig that changed).
    epoch: u64,
}

impl fmt::Debug for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cluster")
            .field("name", &self.name)
            .field("epoch", &self.epoch)
            .finish()
    }
}

impl Cluster {
    pub(crate) fn new(name: ClusterName, client: kube::Client, cache: Cache, epoch: u64) -> Self {
        Cluster {
            name,
            client,
            cache,
            epoch,
        }
    }

    /// The cluster's name.
    pub fn name(&self) -> &ClusterName {
        &self.name
    }

    /// A client to the cluster's API server.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The cluster's cache (its informers stop when the cluster is disengaged).
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// Which engagement of this name it is (a re-engaged cluster gets a new epoch).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_compare_and_print_as_strings() {
        let a = ClusterName::from("east");
        assert_eq!(a, ClusterName::new(String::from("east")));
        assert_eq!(a.to_string(), "east");
        assert_eq!(format!("{a:?}"), "\"east\"");
        assert!(ClusterName::from("a") < ClusterName::from("b"));
    }
}
