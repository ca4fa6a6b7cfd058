//! Kinds and helpers shared by the tests' small controllers.

#![allow(dead_code)]

use std::time::Duration;

use std::collections::BTreeMap;

use kcr_perturb::{Exploration, Snapshot};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An order: a controller books `amount` into the `ledger` ConfigMap, then marks it processed.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "perturb.kcr.dev",
    version = "v1",
    kind = "Order",
    namespaced,
    status = "OrderStatus"
)]
pub struct OrderSpec {
    /// What to book.
    pub amount: i64,
}

/// The status of an [`Order`].
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
pub struct OrderStatus {
    /// Booked.
    #[serde(default)]
    pub processed: bool,
}

/// A parent: a controller keeps one child ConfigMap for it and records the child's name.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "perturb.kcr.dev",
    version = "v1",
    kind = "Parent",
    namespaced,
    status = "ParentStatus"
)]
pub struct ParentSpec {
    /// Copied into the child.
    pub note: String,
    /// A phase the user moves the parent through (used by the missed-intermediate tests).
    #[serde(default)]
    pub phase: String,
    /// A switch the user flips (used by the missed-intermediate tests).
    #[serde(default)]
    pub on: bool,
}

/// The status of a [`Parent`].
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
pub struct ParentStatus {
    /// The child's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<String>,
    /// How often the switch changed.
    #[serde(default)]
    pub flips: i64,
    /// The switch as last seen.
    #[serde(default)]
    pub last_on: bool,
}

/// A tenant: ConfigMaps labelled `tenant=<name>` belong to it (used by the stale-read tests).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[kube(group = "perturb.kcr.dev", version = "v1", kind = "Tenant", namespaced)]
pub struct TenantSpec {
    /// Free text.
    #[serde(default)]
    pub owner: String,
}

/// An exploration with the tests' timing: a short quiet window and hold, a bounded settle.
pub fn exploration(name: &str) -> Exploration {
    init_tracing();
    Exploration::new(name)
        .quiet_window(Duration::from_millis(120))
        .hold_window(Duration::from_millis(700))
        .settle_timeout(Duration::from_secs(20))
}

/// [`exploration`] on the in-process backend whatever `KCR_ENVTEST_BACKEND` says: for the
/// watch-stream classes (missed intermediate states, stale reads), whose perturbations are made
/// in the controller's client and so are the same on every backend. Their runs need a server
/// each, which on the real backend costs a control plane per run (minutes per test); the crash
/// class and the NodePool sample show the harness on the real backend.
pub fn in_process_exploration(name: &str) -> Exploration {
    exploration(name).server(|| {
        kcr_envtest::TestApiServer::builder()
            .backend(kcr_envtest::Backend::InProcess)
            .start()
    })
}

/// `RUST_LOG=...` shows the harness's and controllers' logs.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "off".into()),
        )
        .with_test_writer()
        .try_init();
}

/// At most one ConfigMap labelled `parent=<name>` per parent.
pub fn one_child_per_parent(snap: &Snapshot) -> Result<(), String> {
    let mut children: BTreeMap<String, usize> = BTreeMap::new();
    for cm in snap.objects("ConfigMap") {
        if let Some(parent) = cm["metadata"]["labels"]["parent"].as_str() {
            *children.entry(parent.to_owned()).or_default() += 1;
        }
    }
    match children.iter().find(|(_, n)| **n > 1) {
        Some((parent, n)) => Err(format!("parent {parent} has {n} children")),
        None => Ok(()),
    }
}
