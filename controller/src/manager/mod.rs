//! The [`Manager`]: what controller-runtime's Manager gives a Go operator.
//!
//! - a [`kube::Client`], one shared [`Cache`](kcr_source::Cache) for every controller's `Kind` watches, and an event
//!   [`Recorder`](kube::runtime::events::Recorder) per controller;
//! - runnables: controllers need leadership unless their
//!   [`needs_leader_election`](crate::ControllerOptions::needs_leader_election) is off (a
//!   [`warmup`](crate::ControllerOptions::warmup) controller starts its watches before it),
//!   other runnables ([`Manager::add_runnable`]) may run
//!   on every replica;
//! - optional leader election on a `coordination.k8s.io/v1` Lease ([`crate::leader`]), with
//!   [`Manager::elected`] and [`Manager::leadership`] to follow it: only the
//!   leader runs controllers; losing the lease stops them and [`Manager::run`] returns
//!   [`ManagerError::LeaderElection`](crate::ManagerError::LeaderElection);
//! - HTTP: `/healthz` and `/readyz` with named checks (`/readyz` fails until every running
//!   controller's caches have synced) and `/metrics` (Prometheus text format; optionally HTTPS
//!   with TokenReview and SubjectAccessReview, [`crate::secure_metrics`]); bind addresses are
//!   configurable and `"0"` disables a server;
//! - the `rest_client_*` metrics of its client ([`crate::rest_client`]);
//! - a bound on every request and watch of its client ([`kcr_connect`]): a manager made by
//!   [`Manager::connect`] builds its client with kcr's connection stack (deadlines, watches
//!   tied to bookmarks, HTTP/2 PINGs, bounded handshakes), and [`Manager::new`] puts the
//!   deadlines in front of the client it is given ([`ManagerOptions::connection`]), so that a
//!   silent network partition never hangs its cache, controllers, leader election, event
//!   recorders or metrics authentication;
//! - one [`Clock`](crate::Clock) for every controller it runs ([`ManagerOptions::clock`]; the system clock
//!   unless a test gives it a [`ManualClock`](crate::ManualClock)'s, see [`crate::clock`]);
//! - graceful shutdown on SIGTERM/SIGINT ([`Manager::run_until_signal`]) or a token
//!   ([`Manager::run`]), bounded by [`ManagerOptions::graceful_shutdown_timeout`] (30 s).
//!
//! Shutdown order: controllers stop taking work and finish in-flight reconciles, then (if
//! configured) the lease is released, then the HTTP servers stop. The lease keeps being renewed
//! while reconciles drain, so no successor starts while this replica still writes.
//!
//! The module holds the manager ([`Manager`], [`ManagerOptions`]) and what it runs besides the
//! controllers: [`leader`] election, [`signals`], [`extension`]s of layers built outside it, and
//! the controller [`defaults`] it hands every builder.

pub mod defaults;
pub mod extension;
pub mod leader;
mod run;
pub mod signals;

pub use run::{DEFAULT_FIELD_OWNER, Manager, ManagerOptions, RunnableFn};
