//! Shared helpers of kcr-shard's envtest-backed tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kcr_controller::{Manager, ManagerOptions};
use kube::ResourceExt;

pub use kcr_envtest::eventually;

/// Runs `mgr` on the runtime until the returned token is cancelled: the shared manager, the
/// token, and the task whose output is `Manager::run`'s result.
pub fn spawn_manager(
    mgr: Manager,
) -> (
    Arc<Manager>,
    tokio_util::sync::CancellationToken,
    tokio::task::JoinHandle<Result<(), kcr_controller::ManagerError>>,
) {
    let mgr = Arc::new(mgr);
    let stop = tokio_util::sync::CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });
    (mgr, stop, run)
}

/// Options with both servers on ephemeral loopback ports.
pub fn manager_options() -> ManagerOptions {
    ManagerOptions::default()
        .metrics_bind_address("127.0.0.1:0")
        .unwrap()
        .health_probe_bind_address("127.0.0.1:0")
        .unwrap()
        .graceful_shutdown_timeout(Duration::from_secs(10))
}

/// An owner reference making `cm` the controller of the object that carries it.
pub fn controlled_by(cm: &ConfigMap) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: cm.name_any(),
        uid: cm.uid().unwrap_or_default(),
        controller: Some(true),
        ..Default::default()
    }
}

/// A config map with `data.value = value`.
pub fn configmap(name: &str, value: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_string());
    cm.data = Some(BTreeMap::from([("value".to_string(), value.to_string())]));
    cm
}
