//! # kcr-controller
//!
//! Controllers for kcr: workers that take requests from a [`kcr_queue::WorkQueue`], call a
//! [`Reconciler`], and map each outcome back onto the queue (done, requeue after a delay, retry
//! with backoff, or a terminal error that is not retried), with panic recovery, per-reconcile
//! timeouts, controller-runtime compatible metrics and a tracing span per reconcile.
//!
//! ```
//! use kcr_controller::{Action, Context, Controller, ControllerOptions, Reconciler};
//! use tokio_util::sync::CancellationToken;
//!
//! struct Hello;
//! impl Reconciler<String> for Hello {
//!     type Error = anyhow::Error;
//!     async fn reconcile(&self, request: &String, _ctx: &Context) -> anyhow::Result<Action> {
//!         println!("reconciling {request}");
//!         Ok(Action::done())
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> anyhow::Result<()> {
//! let controller = Controller::new("hello", Hello, ControllerOptions::default());
//! controller.queue().add("world".to_string());
//! let shutdown = CancellationToken::new();
//! let stop = shutdown.clone();
//! tokio::spawn(async move { tokio::task::yield_now().await; stop.cancel() });
//! controller.run(shutdown).await?;
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

pub mod builder;
pub mod controller;
pub mod error;
pub mod http;
pub mod leader;
pub mod manager;
pub mod metrics;
pub mod reconciler;
pub mod signals;
pub mod watch;

pub use builder::{Builder, EventFilter, SourceWatch, WatchOptions};
pub use controller::{Controller, ControllerOptions, Key};
pub use error::{ControllerError, ManagerError};
pub use http::BindAddress;
pub use leader::{LeaderElectionConfig, LeaderElector};
pub use manager::{Manager, ManagerOptions};
pub use reconciler::{
    Action, Context, FnReconciler, ReconcileError, Reconciler, Terminal, reconciler_fn,
};
pub use watch::{BoxError, StartedWatch, Watch};
