//! A [`Manager`] for a test: made for the test's server in one call ([`manager()`]), run in the
//! background ([`RunningManager`]), stopped with a bounded wait that reports how it ended.
//!
//! [`options`] are a test's defaults: the metrics and health-probe servers are off (tests run
//! in parallel, and the defaults `:8080` and `:8081` would clash), no leader election, a 10 s
//! graceful shutdown. Turn on what a test is about with the `ManagerOptions` setters.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use kcr_controller::{BindAddress, Manager, ManagerError, ManagerOptions};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::access::record_from_env;
use crate::cluster::TestCluster;
use crate::error::TestkitError;

/// The graceful shutdown bound of [`options`].
pub const TEST_GRACEFUL_SHUTDOWN: Duration = Duration::from_secs(10);

/// How much longer than the manager's own graceful shutdown timeout
/// [`RunningManager::stop`] waits before it reports [`TestkitError::StopTimeout`].
const STOP_SLACK: Duration = Duration::from_secs(5);

/// A test's manager options: metrics and probes off, no leader election, a
/// [`TEST_GRACEFUL_SHUTDOWN`] shutdown bound.
pub fn options() -> ManagerOptions {
    let mut options = ManagerOptions::default().graceful_shutdown_timeout(TEST_GRACEFUL_SHUTDOWN);
    options.metrics_bind_address = BindAddress::Disabled;
    options.health_probe_bind_address = BindAddress::Disabled;
    options
}

/// A manager for `cluster` with [`options`].
pub async fn manager(cluster: &impl TestCluster) -> Result<Manager, TestkitError> {
    manager_with(cluster, options()).await
}

/// A manager for `cluster` with the given options (start from [`options`]).
///
/// With `KCR_RBAC_RECORD` set ([`crate::access::RECORD_ENV`]), the manager's client records
/// every request into that directory, for `cargo kcr rbac` ([`crate::access`]).
pub async fn manager_with(
    cluster: &impl TestCluster,
    options: ManagerOptions,
) -> Result<Manager, TestkitError> {
    let client = record_from_env(cluster.client())?;
    Manager::new(client, options)
        .await
        .map_err(TestkitError::NewManager)
}

/// A [`Manager`] running on a task of its own, as an operator's `main` runs it. Dropping it
/// asks the manager to stop without waiting; [`stop`](Self::stop) waits and reports.
#[derive(Debug)]
pub struct RunningManager {
    manager: Arc<Manager>,
    stop: CancellationToken,
    task: Option<JoinHandle<Result<(), ManagerError>>>,
}

impl RunningManager {
    /// Spawns `manager.run` on the current tokio runtime.
    pub fn start(manager: Manager) -> Self {
        let manager = Arc::new(manager);
        let stop = CancellationToken::new();
        let task = tokio::spawn({
            let manager = manager.clone();
            let stop = stop.clone();
            async move { manager.run(stop).await }
        });
        RunningManager {
            manager,
            stop,
            task: Some(task),
        }
    }

    /// The running manager (its client, cache, readers, leadership).
    pub fn manager(&self) -> &Manager {
        &self.manager
    }

    /// `Ok` while the manager runs; the manager's error (or [`TestkitError::ManagerStoppedEarly`])
    /// once it has returned by itself. Cheap: it does not wait.
    pub fn check(&mut self) -> Result<(), TestkitError> {
        let Some(task) = &mut self.task else {
            return Err(TestkitError::ManagerStoppedEarly);
        };
        if !task.is_finished() {
            return Ok(());
        }
        let result = task.now_or_never();
        self.task = None;
        match result {
            None => Ok(()),
            Some(joined) => Err(Self::outcome(joined)
                .err()
                .unwrap_or(TestkitError::ManagerStoppedEarly)),
        }
    }

    /// Starts a graceful shutdown and waits for it, up to the manager's graceful shutdown
    /// timeout plus 5 s. `Ok` only for a clean shutdown.
    pub async fn stop(self) -> Result<(), TestkitError> {
        let within = self.manager.options().graceful_shutdown_timeout + STOP_SLACK;
        self.stop_within(within).await
    }

    /// Starts a graceful shutdown and waits for it up to `within`.
    pub async fn stop_within(mut self, within: Duration) -> Result<(), TestkitError> {
        let Some(task) = self.task.take() else {
            return Err(TestkitError::ManagerStoppedEarly);
        };
        // Looked at before the stop is asked for: a manager that stops quickly is not early.
        let was_finished = task.is_finished();
        self.stop.cancel();
        match tokio::time::timeout(within, task).await {
            Err(_) => Err(TestkitError::StopTimeout(within)),
            Ok(joined) => match Self::outcome(joined) {
                // Finished before it was asked to: an early stop, however clean.
                Ok(()) if was_finished => Err(TestkitError::ManagerStoppedEarly),
                other => other,
            },
        }
    }

    fn outcome(
        joined: Result<Result<(), ManagerError>, tokio::task::JoinError>,
    ) -> Result<(), TestkitError> {
        match joined {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(TestkitError::Manager(e)),
            Err(join) => Err(TestkitError::ManagerPanicked(join.to_string())),
        }
    }
}

impl Drop for RunningManager {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
