//! Shutting down (at once, or draining with a timeout) and the unfinished-work gauges that a
//! small background task refreshes until the queue is shut down and empty.

use std::hash::Hash;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::FREE;
use super::api::WorkQueue;
use super::shared::Mode;
use crate::error::QueueError;
use crate::metrics::{UNFINISHED_REFRESH, secs};

impl<T: Hash + Eq + Clone + Send + Sync + 'static> WorkQueue<T> {
    pub(super) fn drained_now(&self) -> bool {
        let (adds_ready, _) = self.inner.add_counts();
        self.inner.is_drained(&self.inner.work.lock(), adds_ready)
    }

    /// Refuse new adds and wake every waiting getter; `get` returns `None` from now on. Keys in
    /// flight stay valid until their guards are dropped (dirty marks are discarded).
    pub fn shutdown(&self) {
        let inner = &*self.inner;
        inner.set_mode(Mode::Stopped, false);
        let drained = self.drained_now();
        inner.notify.notify_waiters();
        if drained {
            inner.drained.notify_waiters();
        }
    }

    /// Refuse new adds, let workers finish what is ready and in flight, and wait until nothing
    /// is left or `timeout` passes (delayed keys are dropped). On timeout the queue is shut down
    /// hard ([`shutdown`](Self::shutdown)) and the unfinished work is reported in the error.
    pub async fn shutdown_with_drain(&self, timeout: Duration) -> Result<(), QueueError> {
        let inner = &*self.inner;
        inner.set_mode(Mode::Draining, true);
        inner.notify.notify_waiters();
        let deadline = Instant::now().checked_add(timeout);
        loop {
            let mut drained = pin!(inner.drained.notified());
            drained.as_mut().enable();
            if self.drained_now() {
                return Ok(());
            }
            match deadline {
                None => drained.await,
                Some(deadline) => {
                    if tokio::time::timeout_at(deadline, drained).await.is_err() {
                        if self.drained_now() {
                            return Ok(());
                        }
                        inner.set_mode(Mode::Stopped, false);
                        let (in_flight, ready) = (self.num_in_flight(), self.len());
                        inner.notify.notify_waiters();
                        return Err(QueueError::DrainTimeout {
                            name: inner.name.clone(),
                            timeout,
                            in_flight,
                            ready,
                        });
                    }
                }
            }
        }
    }

    /// Recompute `workqueue_unfinished_work_seconds` and
    /// `workqueue_longest_running_processor_seconds` now. The queue does this every
    /// 500 ms by itself when built inside a tokio runtime. Returns `false` once
    /// the queue is shut down with nothing in flight (the refresher stops then).
    pub fn refresh_unfinished_work(&self) -> bool {
        let inner = &*self.inner;
        let Some(m) = &inner.metrics else {
            return false;
        };
        let now = inner.now();
        let work = inner.work.lock();
        let (mut total, mut longest) = (0u64, 0u64);
        for &start in work.starts.iter().filter(|&&s| s != FREE) {
            let age = now.saturating_sub(start);
            total = total.saturating_add(age);
            longest = longest.max(age);
        }
        drop(work);
        let alive = inner.mode() == Mode::Running || self.num_in_flight() > 0;
        m.unfinished.set(secs(total));
        m.longest.set(secs(longest));
        alive
    }

    pub(super) fn spawn_unfinished_refresher(&self) {
        if self.inner.metrics.is_none() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak = Arc::downgrade(&self.inner);
        runtime.spawn(async move {
            let mut interval = tokio::time::interval(UNFINISHED_REFRESH);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            interval.tick().await;
            loop {
                interval.tick().await;
                let Some(inner) = weak.upgrade() else { break };
                let alive = WorkQueue { inner }.refresh_unfinished_work();
                if !alive {
                    break;
                }
            }
        });
    }
}
