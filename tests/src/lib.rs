//! # kcr-tests: integration tests across the kcr crates
//!
//! The tests in `tests/tests/` follow the ways people use kcr, each in a namespace of its own on
//! its test binary's [kcr-envtest](https://docs.rs/kcr-envtest) API server (`TestNamespace`:
//! real HTTP on loopback, an unmodified `kube::Client`):
//!
//! - `readme_controller.rs`: the README's "write your own controller" example, run for real: a
//!   `Manager` with leader election, a Deployment controller filtered by `GenerationChanged` that
//!   also owns ReplicaSets, four workers, graceful shutdown;
//! - `own_source.rs`: a controller fed both by a cached watch and by an event source of the
//!   user's own (a channel of "external" events mapped onto objects);
//! - `standalone_crates.rs`: single crates without a kcr controller: kcr-queue driven by
//!   kube-runtime's plain watcher, and kcr-source's `Kind` filtered by kcr-predicate;
//! - `guide.rs`: every code block of the guide (`docs/guide/src/`) is the compiled code it
//!   names;
//! - `any_cluster.rs`: one scenario (a Manager with leader election mirroring labelled
//!   ConfigMaps into owned Secrets) run against envtest, and, `#[ignore]`d unless
//!   `KCR_TEST_REAL_CLUSTER=1`, against the cluster of the current kubeconfig.
//!
//! This library holds what those tests share: [`RunningManager`], a Manager on its own task that
//! a test stops and checks for a clean shutdown, and [`eventually()`] (kcr-envtest's), which polls a
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

use std::time::Duration;

use kcr_controller::{Manager, ManagerError};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use kcr_envtest::eventually;

/// A [`Manager`] running on a task of its own, as an operator's `main` would run it.
#[derive(Debug)]
pub struct RunningManager {
    stop: CancellationToken,
    task: JoinHandle<Result<(), ManagerError>>,
}

impl RunningManager {
    /// Spawns `manager.run` on the current runtime.
    pub fn start(manager: Manager) -> Self {
        let stop = CancellationToken::new();
        let task = tokio::spawn({
            let stop = stop.clone();
            async move { manager.run(stop).await }
        });
        Self { stop, task }
    }

    /// Starts a graceful shutdown and waits for it.
    ///
    /// # Panics
    /// When the manager does not stop within `within`, its task panicked, or `run` returned an
    /// error: each is a failed test.
    pub async fn stop(self, within: Duration) {
        self.stop.cancel();
        tokio::time::timeout(within, self.task)
            .await
            .expect("the manager stops within its graceful timeout")
            .expect("the manager task did not panic")
            .expect("a clean shutdown");
    }
}
