//! [`ShardError`]: what can go wrong while sharding a controller.

use kcr_controller::leader::LeaderElectionError;

/// Errors of sharding (configuration, membership, the sharder's writes).
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    /// The configuration is invalid (names, identity, timings).
    #[error("invalid shard configuration: {reason}")]
    InvalidConfig {
        /// What is wrong.
        reason: String,
    },
    /// This replica could not renew its member Lease in time: it stopped reconciling (another
    /// replica takes its objects once the Lease expires).
    #[error("shard membership lost for {group}/{identity}: {source}")]
    MembershipLost {
        /// The shard group (the sharded controller).
        group: String,
        /// This replica's identity.
        identity: String,
        /// Why the Lease was lost.
        #[source]
        source: Box<LeaderElectionError>,
    },
    /// Listing the member Leases failed.
    #[error("listing the member leases of {group} in namespace {namespace}: {source}")]
    ListMembers {
        /// The shard group.
        group: String,
        /// The Leases' namespace.
        namespace: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Writing an object's shard label or drain mark failed (other than a lost race).
    #[error("writing the shard metadata of {kind} {key}: {source}")]
    Write {
        /// The object's kind.
        kind: String,
        /// The object's key (`namespace/name` or `name`).
        key: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// A watch the shard machinery needs could not start.
    #[error("watching {kind} for sharding: {reason}")]
    Watch {
        /// The watched kind.
        kind: String,
        /// Why.
        reason: String,
    },
}
