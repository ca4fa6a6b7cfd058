//! Error types of the queue and of rate-limiter construction.

use std::time::Duration;

/// Errors returned by [`WorkQueue`](crate::WorkQueue) operations.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    /// [`shutdown_with_drain`](crate::WorkQueue::shutdown_with_drain) gave up waiting; the queue
    /// is shut down hard (no key is handed out any more) but the listed work was unfinished.
    #[error(
        "queue {name:?}: drain timed out after {timeout:?} with {in_flight} keys in flight and {ready} ready"
    )]
    DrainTimeout {
        /// The queue's name.
        name: String,
        /// The timeout that expired.
        timeout: Duration,
        /// Keys still being processed when the timeout expired.
        in_flight: usize,
        /// Keys still waiting to be handed out when the timeout expired.
        ready: usize,
    },
}

/// Invalid rate-limiter parameters.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// A token bucket needs a positive, finite rate.
    #[error("token bucket rate must be a positive finite number of tokens per second, got {qps}")]
    InvalidRate {
        /// The rejected rate.
        qps: f64,
    },
    /// A token bucket needs room for at least one token.
    #[error("token bucket burst must be at least 1")]
    InvalidBurst,
}
