//! # kcr-tests: integration tests across the kcr crates
//!
//! The tests in `tests/tests/` follow the ways people use kcr, each against its own
//! [kcr-envtest](https://docs.rs/kcr-envtest) API server (real HTTP on loopback, an unmodified
//! `kube::Client`):
//!
//! - `readme_controller.rs`: the README's "write your own controller" example, run for real: a
//!   `Manager` with leader election, a Deployment controller filtered by `GenerationChanged` that
//!   also owns ReplicaSets, four workers, graceful shutdown;
//! - `own_source.rs`: a controller fed both by a cached watch and by an event source of the
//!   user's own (a channel of "external" events mapped onto objects);
//! - `standalone_crates.rs`: single crates without a kcr controller: kcr-queue driven by
//!   kube-runtime's plain watcher, and kcr-source's `Kind` filtered by kcr-predicate;
//! - `any_cluster.rs`: one scenario (a Manager with leader election mirroring labelled
//!   ConfigMaps into owned Secrets) run against envtest, and, `#[ignore]`d unless
//!   `KCR_TEST_REAL_CLUSTER=1`, against the cluster of the current kubeconfig.
//!
//! This library holds what those tests share: [`eventually()`] (kcr-envtest's), which polls a
//! condition on real time (these tests talk to a server over sockets, so tokio's paused clock
//! does not apply). To assert that something did *not* happen, the tests never sleep and hope:
//! they follow the change that must be filtered out with a change that must pass, on the same
//! watch (events of one watch arrive in order), and wait for that one instead.
//!
//! ```
//! use std::sync::atomic::{AtomicBool, Ordering};
//! use std::time::Duration;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let flag = AtomicBool::new(false);
//! flag.store(true, Ordering::SeqCst);
//! kcr_tests::eventually("the flag is set", Duration::from_secs(1), || async {
//!     flag.load(Ordering::SeqCst)
//! })
//! .await;
//! # }
//! ```

pub use kcr_envtest::eventually::eventually;
