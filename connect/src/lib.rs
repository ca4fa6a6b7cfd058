//! # kcr-connect: no request of a kube-rs client hangs on a dead connection
//!
//! A silent network partition (a dead load balancer, a vanished route, an expired NAT entry)
//! freezes connections without closing them: no FIN, no RST, bytes simply stop. A client
//! recovers only if it notices by itself. kube-rs does not by default: `Config::read_timeout`
//! is `None`, and kube-runtime's watcher notices a dead watch only through its idle timeout of
//! 290 s plus a margin. client-go notices in about 45 s through its HTTP/2 health check.
//!
//! This crate gives any `kube::Client` a bound on everything it waits for, each settable in
//! [`ConnectionOptions`] and documented with its trade-off:
//!
//! - **a deadline per request** that is not a watch, on its response headers and on every
//!   silence of its body (30 s);
//! - **watches tied to bookmarks**: a watch must start within 10 s, and a watch that asked for
//!   bookmarks (kube-runtime's watcher does) may not stay silent for 70 s, since kube-apiserver
//!   sends one about every minute. A quiet watch on a healthy server is never cut; a dead one
//!   ends with an error, and the watcher resumes on a new connection from its last
//!   resourceVersion;
//! - **bounded connects and TLS handshakes** (10 s);
//! - **HTTP/2 with PINGs** where the server offers it (kube-apiserver does over TLS): a
//!   connection that leaves a PING unanswered for 10 s is closed with every request on it,
//!   after 10 s without a frame, idle or not;
//! - **short-lived idle HTTP/1.1 connections** (15 s in the pool), so that a connection that
//!   froze while idle does not outlive a partition and catch the next request.
//!
//! With the defaults a process notices a partition within about a minute at worst and recovers
//! within about half a minute of the heal, whether it was running before the partition or
//! started during it.
//!
//! Each request given up on is a [`Timeout`] error (the source of the `kube::Error`), counted
//! in `kcr_client_request_timeouts_total`; each connection closed as dead is counted in
//! `kcr_client_dead_connections_total`; both are logged at `WARN` with the host and what was
//! waiting ([`metrics`]). An operator who sees them rise knows the network is at fault, not
//! the controller.
//!
//! The API server's warnings (`Warning` response headers: a deprecated API version, an
//! unknown field), which kube-rs drops, are logged at `WARN`, each distinct message once per
//! client by default, and counted in `kcr_client_api_warnings_total` ([`warnings`],
//! [`ConnectionOptions::api_warnings`]).
//!
//! The bounds are measured in real time, on a timer thread of their own ([`realtime`]), not
//! on tokio's clock: a test that pauses tokio's clock (`#[tokio::test(start_paused = true)]`),
//! which then jumps forward whenever the runtime waits, does not make them fire while a server
//! in another process is still answering.
//!
//! [`client`] builds a client from a `kube::Config` with all of the above; [`bound`] puts the
//! deadlines in front of a client built elsewhere; [`DeadlineLayer`] is the layer itself, for a
//! stack of your own (`kube::client::ClientBuilder::with_layer`). A kcr `Manager` builds its
//! client with [`client`] (`Manager::connect`) and bounds a client it is given with [`bound`].
//!
//! ```
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kcr_connect::ConnectionOptions;
//! use kube::Api;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> anyhow::Result<()> {
//! # let server = kcr_envtest::TestApiServer::start().await?;
//! # let config = kube::Config::from_custom_kubeconfig(server.kubeconfig(), &Default::default()).await?;
//! // let config = kube::Config::infer().await?;
//! // Two seconds to keep the example short; the default is 30.
//! let options = ConnectionOptions::default().request_timeout(Duration::from_secs(2));
//! let client = kcr_connect::client(config, options)?;
//! let configmaps: Api<ConfigMap> = Api::default_namespaced(client);
//! configmaps.list(&Default::default()).await?;
//!
//! // A server that stops answering: the request fails within its bound, never hangs.
//! server.faults().blackhole();
//! let error = configmaps.get("anything").await.unwrap_err();
//! let timeout = kcr_connect::Timeout::find(&error).expect("a timeout");
//! assert_eq!(timeout.kind, kcr_connect::TimeoutKind::Response);
//! # Ok(()) }
//! ```
//!
//! ## Modules
//!
//! - [`options`]: [`ConnectionOptions`] and the defaults.
//! - [`stack`]: [`client()`], [`bound`], [`host_of`]: the connection stack.
//! - [`deadline`]: [`DeadlineLayer`] and the bounded response body.
//! - [`error`]: [`ConnectError`], [`Timeout`].
//! - [`health`]: [`Health`], whether a client's server answers (for readiness checks).
//! - [`metrics`]: the metric names and what they count.
//! - [`realtime`]: the real-time sleeps the bounds use.
#![forbid(unsafe_code)]

mod classify;
mod connector;
pub mod deadline;
pub mod error;
pub mod health;
pub mod metrics;
pub mod options;
pub mod realtime;
pub mod stack;
pub mod warnings;

pub use deadline::DeadlineLayer;
pub use error::{ConnectError, Timeout, TimeoutKind};
pub use health::Health;
pub use options::{ConnectionOptions, HttpVersion};
pub use stack::{ClientService, bound, bound_with_health, client, client_with_health, host_of};
pub use warnings::{ApiWarnings, WarningLayer};
