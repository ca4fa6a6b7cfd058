//! # kcr-testkit: testing kcr operators
//!
//! What a test of an operator needs besides an API server (which
//! [kcr-envtest](kcr_envtest) gives):
//!
//! - **A manager in the background** ([`manager()`], [`RunningManager`]): one call makes a
//!   [`Manager`](kcr_controller::Manager) for the test's server with test options (metrics and
//!   probes off, so parallel tests do not clash on ports); [`RunningManager::stop`] stops it
//!   with a bounded wait and reports the manager's error if it failed.
//! - **[`eventually`] and [`consistently`]** with a timeout, a poll interval and failures that
//!   show the last value seen ([`that`], [`that_ok`]).
//! - **A clock the test moves** ([`ManualClock`], re-exported from kcr-controller): reconcilers
//!   read the time through their `Context`; with `options().clock(manual.clock())` a requeue
//!   the reconciler asked for fires when the test advances the clock.
//! - **Webhooks in one call** ([`TestWebhooks::install`]): a CA, the kcr-webhook server run by
//!   the manager, and the webhook configurations pointing at it, in effect when the call
//!   returns and removed at the end.
//! - **RBAC from what the operator does** ([`access`], [`AccessRecorder`]): every request of the
//!   manager's client, recorded as RBAC sees it (verb, group, resource, subresource, namespace);
//!   with `KCR_RBAC_RECORD=<dir>` the managers of [`manager()`] record into that directory, and
//!   `cargo kcr rbac` turns the record into the minimal ClusterRole and Role, or checks the
//!   checked-in ones against it.
//! - **Where a test runs** ([`TestCluster`]): a [`TestApiServer`](kcr_envtest::TestApiServer) of
//!   its own, or a [`TestNamespace`](kcr_envtest::TestNamespace) on the test binary's shared
//!   server (one control plane per test binary); both on the backend `KCR_ENVTEST_BACKEND`
//!   names (`in-process`, `real`, or `existing` for the current kubeconfig's cluster).
//!
//! ```
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kcr_controller::{Action, Context, Reconciler, WatchOptions};
//! use kcr_envtest::TestNamespace;
//! use kcr_handler::Request;
//! use kcr_testkit::{RunningManager, eventually};
//! use kube::api::{Api, Patch, PatchParams, PostParams};
//!
//! /// Marks every ConfigMap it sees.
//! struct Mark(kube::Client);
//!
//! impl Reconciler<Request> for Mark {
//!     type Error = kube::Error;
//!     async fn reconcile(&self, req: &Request, _ctx: &Context) -> Result<Action, kube::Error> {
//!         let api: Api<ConfigMap> = Api::namespaced(self.0.clone(), req.namespace.as_deref().unwrap_or_default());
//!         let patch = serde_json::json!({"metadata": {"labels": {"seen": "yes"}}});
//!         api.patch(&req.name, &PatchParams::default(), &Patch::Merge(patch)).await?;
//!         Ok(Action::done())
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ns = TestNamespace::new("doc-mark").await?;
//! let mgr = kcr_testkit::manager(&ns).await?;
//! mgr.controller()
//!     .for_kind::<ConfigMap>(WatchOptions::new().namespace(ns.namespace()))
//!     .complete(Mark(mgr.kube_client()))?;
//! let running = RunningManager::start(mgr);
//!
//! let cms: Api<ConfigMap> = Api::default_namespaced(ns.client());
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("a".into());
//! cms.create(&PostParams::default(), &cm).await?;
//! eventually("the ConfigMap is marked", || async {
//!     let labels = cms.get("a").await.ok()?.metadata.labels?;
//!     (labels.get("seen")? == "yes").then_some(())
//! })
//! .timeout(Duration::from_secs(30))
//! .await?;
//! running.stop().await?;
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

pub mod access;
pub mod cluster;
pub mod error;
pub mod manager;
pub mod wait;
pub mod webhooks;

pub use access::{Access, AccessRecorder};
pub use cluster::TestCluster;
pub use error::TestkitError;
pub use kcr_controller::{Clock, ManualClock};
pub use manager::{RunningManager, manager, manager_with, options};
pub use wait::{Outcome, Unmet, WaitError, consistently, eventually, that, that_ok};
pub use webhooks::TestWebhooks;
