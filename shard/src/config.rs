//! [`ShardConfig`]: a shard group's name, this replica's identity, its Leases' timings and
//! its sharder's settings; the label and annotation prefixes; the key an object is hashed by.

use std::time::Duration;

use kcr_controller::leader::{LeaderElectionConfig, LeaseTimings};
use kcr_source::WatchScope;

use crate::error::ShardError;
use crate::gate::Keys;
use crate::membership::member_lease_name;
use crate::ring::DEFAULT_VIRTUAL_NODES;

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

/// Configuration of sharding (see the [crate docs](crate)).
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
    /// The member (and sharder) Leases' timings, as leader election's: how long a Lease is valid
    /// after its last renewal, how long a replica keeps trying to renew before it stops, and how
    /// often Leases are renewed and polled (and the sharder re-checks).
    pub timings: LeaseTimings,
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
            timings: LeaseTimings::default(),
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
        self.timings = LeaseTimings::new(lease, renew_deadline, retry);
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

    pub(crate) fn election(&self, lease_name: String, release: bool) -> LeaderElectionConfig {
        let mut le = LeaderElectionConfig::new(lease_name)
            .identity(self.identity.clone())
            .release_on_cancel(release);
        le.timings = self.timings;
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
