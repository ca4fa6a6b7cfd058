//! Error types of kcr-source.

use std::time::Duration;

/// Errors a [`Source`](crate::Source) reports, either when starting or inside its event stream.
///
/// Inside a stream every error is *non-fatal*: the stream keeps going after it. A consumer logs it
/// (and may count it); the stream ends only when the source is finished.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// The source can be started once only (for example a [`StreamSource`](crate::StreamSource),
    /// which owns a single stream).
    #[error("source {source_name} was already started and can be started only once")]
    AlreadyStarted {
        /// Name of the source.
        source_name: String,
    },
    /// Starting needs a tokio runtime (to spawn the watch task) and none is running.
    #[error("source {source_name} must be started inside a tokio runtime")]
    NoRuntime {
        /// Name of the source.
        source_name: String,
    },
    /// This subscriber fell behind and `missed` events were not delivered to it (a
    /// [`Channel`](crate::Channel) with [`Overflow::Lag`](crate::Overflow::Lag)). Sources never
    /// skip events without this signal.
    #[error("subscriber lagged behind and missed {missed} events")]
    Lagged {
        /// Number of events this subscriber did not receive.
        missed: u64,
    },
    /// The watch was removed from its cache ([`Cache::remove_informer`](crate::Cache::remove_informer)):
    /// the last item of its streams, after every event delivered before the removal.
    #[error("the watch of {kind} was removed from its cache: no more events will come")]
    Removed {
        /// The kind watched.
        kind: String,
    },
}

/// Errors of waiting for a source to sync.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyncError {
    /// The source did not report "synced" within the timeout.
    #[error("source did not sync within {timeout:?}")]
    Timeout {
        /// How long was waited.
        timeout: Duration,
    },
    /// The source stopped (its task ended or was dropped) before it ever synced.
    #[error("source stopped before it synced")]
    Stopped,
}

/// Errors of sending into a [`Channel`](crate::Channel).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The channel was closed; the event was not delivered to anyone.
    #[error("channel is closed")]
    Closed,
    /// (`try_send` on an [`Overflow::Wait`](crate::Overflow::Wait) channel) a subscriber's buffer
    /// is full; the event was not delivered to anyone. Retry later or use `send`.
    #[error("a subscriber's buffer is full")]
    Full,
}
