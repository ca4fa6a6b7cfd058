//! The [`Source`] trait and the [`SyncHandle`] a started source returns.
//!
//! A source is started once per consumer: [`Source::start`] returns at once (it spawns whatever
//! it needs) with a [`Started`]: the event stream for this consumer and a handle that says whether
//! the source has synced (for a cached watch: the initial list is in the cache and has been
//! emitted). A controller starts all its sources, then waits for all of them with
//! [`wait_for_sync`] and a timeout before it starts its workers.

use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use tokio::sync::watch;

use crate::{Event, SourceError, SyncError};

/// The stream of a started source. Errors inside it are non-fatal (see [`SourceError`]); the stream
/// ends when the source is finished. Dropping it unsubscribes.
pub type EventStream<K> = BoxStream<'static, Result<Event<K>, SourceError>>;

/// What [`Source::start`] returns.
pub struct Started<K> {
    /// The events for this consumer.
    pub events: EventStream<K>,
    /// Whether (and when) the source has synced.
    pub sync: SyncHandle,
}

impl<K> std::fmt::Debug for Started<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Started")
            .field("sync", &self.sync)
            .finish_non_exhaustive()
    }
}

/// A source of [`Event`]s for objects of type `K`.
///
/// `start` must not block: it spawns background work (a watch, a timer) if it needs any and
/// returns the consumer's stream at once. Sources that can serve several consumers (a
/// [`Kind`](crate::Kind), a [`Channel`](crate::Channel)) may be started several times, each call
/// giving an independent subscription; single-use sources return
/// [`SourceError::AlreadyStarted`] on a second call.
///
/// The trait is object safe: a controller keeps `Box<dyn Source<K>>`.
pub trait Source<K>: Send + Sync + 'static {
    /// Starts (or subscribes to) the source.
    fn start(&self) -> Result<Started<K>, SourceError>;

    /// A human-readable name for logs and errors.
    fn name(&self) -> String {
        std::any::type_name::<Self>().to_string()
    }
}

/// `Box<S>` and `Arc<S>` (also of `dyn Source<K>`) are sources: they start the source inside.
macro_rules! forward_source {
    ($($pointer:ident),*) => {$(
        impl<K, S> Source<K> for $pointer<S>
        where
            S: Source<K> + ?Sized,
        {
            fn start(&self) -> Result<Started<K>, SourceError> {
                (**self).start()
            }
            fn name(&self) -> String {
                (**self).name()
            }
        }
    )*};
}

forward_source!(Box, Arc);

/// Read side of a source's "synced" flag. Cheap to clone.
///
/// Once synced, a handle stays synced (a later relist does not un-sync it, as in
/// controller-runtime's `HasSynced`).
#[derive(Debug, Clone)]
pub struct SyncHandle {
    rx: watch::Receiver<bool>,
}

/// Write side of a source's "synced" flag, kept by the source. Dropping it before calling
/// [`SyncSignal::set_synced`] makes waiters fail with [`SyncError::Stopped`].
#[derive(Debug)]
pub struct SyncSignal {
    tx: watch::Sender<bool>,
}

impl SyncSignal {
    /// Marks the source as synced and wakes every waiter. Idempotent.
    pub fn set_synced(&self) {
        self.tx.send_if_modified(|synced| {
            let changed = !*synced;
            *synced = true;
            changed
        });
    }

    /// A new read handle for this signal.
    pub fn handle(&self) -> SyncHandle {
        SyncHandle {
            rx: self.tx.subscribe(),
        }
    }

    /// Whether [`SyncSignal::set_synced`] was called.
    pub fn is_synced(&self) -> bool {
        *self.tx.borrow()
    }
}

impl SyncHandle {
    /// A new, not yet synced, pair.
    pub fn pair() -> (SyncSignal, SyncHandle) {
        let (tx, rx) = watch::channel(false);
        (SyncSignal { tx }, SyncHandle { rx })
    }

    /// A handle that is synced from the start (for sources without a cache, like a channel or a
    /// timer).
    pub fn ready() -> SyncHandle {
        let (signal, handle) = Self::pair();
        signal.set_synced();
        handle
    }

    /// Whether the source has synced.
    pub fn is_synced(&self) -> bool {
        *self.rx.borrow()
    }

    /// Waits until the source has synced. Fails with [`SyncError::Stopped`] if the source stops
    /// first.
    pub async fn wait(&self) -> Result<(), SyncError> {
        let mut rx = self.rx.clone();
        match rx.wait_for(|synced| *synced).await {
            Ok(_) => Ok(()),
            Err(_) => Err(SyncError::Stopped),
        }
    }

    /// Like [`SyncHandle::wait`], giving up after `timeout` with [`SyncError::Timeout`].
    pub async fn wait_timeout(&self, timeout: Duration) -> Result<(), SyncError> {
        match tokio::time::timeout(timeout, self.wait()).await {
            Ok(result) => result,
            Err(_) => Err(SyncError::Timeout { timeout }),
        }
    }
}

/// Waits until every handle has synced, all within one overall `timeout`.
///
/// Returns the first error: [`SyncError::Timeout`] if some source is still not synced when the
/// time is up, [`SyncError::Stopped`] if one stopped before syncing.
pub async fn wait_for_sync<'a>(
    handles: impl IntoIterator<Item = &'a SyncHandle>,
    timeout: Duration,
) -> Result<(), SyncError> {
    let all = futures::future::try_join_all(handles.into_iter().map(SyncHandle::wait));
    match tokio::time::timeout(timeout, all).await {
        Ok(result) => result.map(|_| ()),
        Err(_) => Err(SyncError::Timeout { timeout }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn pending_handle_times_out_then_syncs() {
        let (signal, handle) = SyncHandle::pair();
        assert!(!handle.is_synced());
        assert_eq!(
            handle.wait_timeout(Duration::from_secs(5)).await,
            Err(SyncError::Timeout {
                timeout: Duration::from_secs(5)
            })
        );
        let waiter = tokio::spawn({
            let handle = handle.clone();
            async move { handle.wait().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        signal.set_synced();
        signal.set_synced();
        assert_eq!(waiter.await.expect("task did not panic"), Ok(()));
        assert!(handle.is_synced());
        assert!(signal.handle().is_synced());
    }

    #[tokio::test(start_paused = true)]
    async fn dropped_signal_means_stopped() {
        let (signal, handle) = SyncHandle::pair();
        drop(signal);
        assert_eq!(handle.wait().await, Err(SyncError::Stopped));
    }

    #[tokio::test(start_paused = true)]
    async fn wait_for_all_needs_every_handle() {
        let a = SyncHandle::ready();
        let (signal_b, b) = SyncHandle::pair();
        let timeout = Duration::from_secs(10);
        assert_eq!(
            wait_for_sync([&a, &b], timeout).await,
            Err(SyncError::Timeout { timeout })
        );
        let task = tokio::spawn({
            let (a, b) = (a.clone(), b.clone());
            async move { wait_for_sync([&a, &b], timeout).await }
        });
        tokio::time::sleep(Duration::from_secs(3)).await;
        signal_b.set_synced();
        assert_eq!(task.await.expect("task did not panic"), Ok(()));
        assert_eq!(wait_for_sync([], timeout).await, Ok(()));
    }
}
