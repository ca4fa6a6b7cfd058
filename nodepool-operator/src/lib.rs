//! # nodepool-operator
//!
//! The NodePool operator, rebuilt on kcr: a cluster-scoped `NodePool` resource
//! (`nodes.lailin.xyz/v1`) names the labels and taints that every member node (a node carrying
//! the label key `node-role.kubernetes.io/<pool>`) must carry, and the handler of a RuntimeClass
//! `node-pool-<pool>` that schedules pods onto the pool.
//!
//! The crate is split by concern:
//! - [`crd`]: the resource types and the generated CustomResourceDefinition.
//! - `demo`: `nodepool-operator demo` (cargo feature `demo`, on by default).
//! - `embedded`: the operator on kcr-envtest, for the demo, tests and benchmark (cargo feature
//!   `demo`: without it the crate, and the binary's `run`, do without the in-process API server).
//! - [`deploy`]: generated deployment objects (RBAC with exactly the verbs used, webhook
//!   configurations).
//! - [`nodes`]: what a pool changes on its nodes (labels, taints, the applied record) and the
//!   JSON patch that does it.
//! - [`operator`]: the controller's watches and the webhook server on a kcr manager, run options.
//! - [`reconciler`]: the reconcile of one pool (nodes, finalizer, RuntimeClass, status, events).
//! - [`quantity`]: exact resource-quantity arithmetic for the allocatable sums.
//! - [`runtimeclass`]: the pool's RuntimeClass, desired state and drift.
//! - [`status`]: the pool's status, and whether it needs writing.
//! - [`validation`]: the admission rules (validation with field paths, defaulting).
//! - [`webhook`]: the admission webhooks (defaulting, validation) on kcr-webhook, whose server
//!   (HTTPS, certificates reloaded on change) the manager runs.
//!
//! The `embedded` module's docs show the operator run exactly as in production against the
//! embedded API server: a pool created, a node put in it, the node converged.

#![forbid(unsafe_code)]

pub mod crd;
#[cfg(feature = "demo")]
pub mod demo;
pub mod deploy;
#[cfg(feature = "demo")]
pub mod embedded;
pub mod nodes;
pub mod operator;
#[cfg(feature = "demo")]
pub mod partition;
pub mod quantity;
pub mod reconciler;
pub mod runtimeclass;
pub mod status;
pub mod validation;
pub mod webhook;
