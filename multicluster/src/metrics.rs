//! The fleet's metrics (recorded through the `metrics` facade, served by the manager's
//! `/metrics` when it installed the Prometheus recorder):
//!
//! - `kcr_multicluster_engaged_clusters` (gauge): clusters engaged now;
//! - `kcr_multicluster_cluster_ready{cluster}` (gauge, 1 or 0): whether every watch started in
//!   the cluster has synced, as of the last readiness check.
//!
//! The controllers' own metrics (`controller_runtime_*`, `workqueue_*`) stay per controller,
//! without a cluster label: the fleet's gauges carry the cluster.

use crate::cluster::ClusterName;

/// `kcr_multicluster_engaged_clusters`
pub const ENGAGED_CLUSTERS: &str = "kcr_multicluster_engaged_clusters";
/// `kcr_multicluster_cluster_ready`
pub const CLUSTER_READY: &str = "kcr_multicluster_cluster_ready";

pub(crate) fn engaged_clusters(n: usize) {
    ::metrics::gauge!(ENGAGED_CLUSTERS).set(n as f64);
}

pub(crate) fn cluster_ready(cluster: &ClusterName, ready: bool) {
    ::metrics::gauge!(CLUSTER_READY, "cluster" => cluster.to_string()).set(if ready {
        1.0
    } else {
        0.0
    });
}
