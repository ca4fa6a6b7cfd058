//! [`TestkitError`]: what the kit's helpers fail with.

use std::time::Duration;

/// Errors of the test kit's helpers.
#[derive(Debug, thiserror::Error)]
pub enum TestkitError {
    /// The manager could not be created.
    #[error("cannot create the manager: {0}")]
    NewManager(#[source] kcr_controller::ManagerError),
    /// The manager's `run` returned an error (a runnable failed, leadership was lost, the
    /// shutdown timed out, ...).
    #[error("the manager failed: {0}")]
    Manager(#[source] kcr_controller::ManagerError),
    /// The manager's task panicked.
    #[error("the manager's task panicked: {0}")]
    ManagerPanicked(String),
    /// The manager returned before it was asked to stop.
    #[error("the manager stopped on its own before the test stopped it (it returned Ok)")]
    ManagerStoppedEarly,
    /// The manager did not stop within the bound given to
    /// [`RunningManager::stop_within`](crate::RunningManager::stop_within).
    #[error("the manager did not stop within {0:?} after it was asked to")]
    StopTimeout(Duration),
    /// Preparing or running the webhook server failed.
    #[error("webhook server: {0}")]
    Webhook(#[from] kcr_webhook::WebhookError),
    /// Generating or writing the webhook certificates failed.
    #[error("webhook certificates: {0}")]
    Certificates(String),
    /// An API request of a helper failed.
    #[error("{what}: {source}")]
    Api {
        /// What the helper was doing.
        what: String,
        /// The client error.
        #[source]
        source: Box<kube::Error>,
    },
    /// The webhook configurations were written, but the API server did not apply them in
    /// time.
    #[error("the webhook configurations {name} were not in effect after {waited:?}: {last}")]
    WebhooksNotInEffect {
        /// The configurations' name.
        name: String,
        /// How long the kit waited.
        waited: Duration,
        /// What the last probe saw.
        last: String,
    },
    /// The request record (`KCR_RBAC_RECORD`) could not be written.
    #[error(transparent)]
    Record(#[from] crate::access::RecordError),
    /// A kcr-envtest helper failed.
    #[error(transparent)]
    Envtest(#[from] kcr_envtest::EnvtestError),
}

/// Maps a client error to [`TestkitError::Api`], saying what the helper did.
pub(crate) fn api_error(what: impl Into<String>) -> impl FnOnce(kube::Error) -> TestkitError {
    let what = what.into();
    move |source| TestkitError::Api {
        what,
        source: Box::new(source),
    }
}
