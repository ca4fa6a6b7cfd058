//! The worker side's API: [`WorkQueue::get`] (one attempt under the worker-side lock, then the
//! waiting rules: busy-wait, yield or sleep) and the `finish` a [`WorkItem`] calls when dropped.

use std::hash::Hash;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::api::WorkQueue;
use super::shared::Mode;
use super::slot::{P, R, Slot, bump_rseq, claim, rseq};
use super::work_side::push_level;
use super::{BUSY_WAIT_WINDOW, MAX_BUSY_POLLS, MAX_SPINS, NO_SLOT, SPIN_WINDOW};
use crate::guard::WorkItem;
use crate::metrics::secs;

/// Result of one attempt to take a key.
pub(super) enum Attempt<T: Hash + Eq + Clone + Send + Sync + 'static> {
    Item(WorkItem<T>),
    Closed,
    Empty(Option<u64>),
    /// Something arrived while registering as a waiter: look again.
    Retry,
    /// Another getter holds the worker side: the caller may do something else first.
    Busy,
}

/// Decrements the waiter count when a waiting getter stops waiting (or is cancelled).
pub(super) struct WaiterGuard<'a>(&'a AtomicUsize);

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> WorkQueue<T> {
    /// One try at taking a key. `known_now` is a clock reading the caller already has.
    pub(super) fn attempt(
        &self,
        register: bool,
        known_now: Option<u64>,
        may_defer: bool,
    ) -> Attempt<T> {
        let inner = &*self.inner;
        // Read before the lock (a clock read is slow): only when metrics are on.
        let metrics_now = inner.metrics_now();
        let mut work = match inner.work.try_lock() {
            Some(work) => work,
            None if may_defer => return Attempt::Busy,
            None => inner.work.lock(),
        };
        let mode = inner.mode();
        if mode == Mode::Stopped {
            return Attempt::Closed;
        }
        if inner.must_take(&work) {
            inner.take_inbox(&mut work);
        }
        if let Some(now) = metrics_now.max(known_now) {
            work.last_now = work.last_now.max(now);
        }
        if mode == Mode::Running && !work.unstamped.is_empty() {
            // Read after the inbox was taken: later than every unstamped add.
            let now = inner.now();
            work.last_now = work.last_now.max(now);
            let now = work.last_now;
            work.stamp(now);
        }
        let mut promoted = (0, 0);
        if mode == Mode::Running
            && let Some(earliest) = work.next_deadline()
        {
            // Read the clock only if the earliest timer is not known to be due already.
            if earliest > work.last_now {
                let now = inner.now();
                work.last_now = work.last_now.max(now);
            }
            let now = work.last_now;
            // Each promoted key's depth is recorded here, under the worker-side lock: timers
            // are the rarer path, and the priorities would otherwise need a buffer.
            promoted = work.promote_due(now, |prio| {
                if let Some(m) = &inner.metrics {
                    m.depth.add(prio, 1.0);
                }
            });
        }
        loop {
            let mut candidate = work.pop_candidate();
            if candidate.is_none() && inner.signal.pending.load(Ordering::Acquire) {
                // What the worker side had was stale, or a key of lower priority than the
                // inbox's: look at the inbox too.
                inner.take_inbox(&mut work);
                candidate = work.pop_candidate();
            }
            let Some((slot, seq, level)) = candidate else {
                break;
            };
            // Counted as handed out now (so that a drain does not finish meanwhile), claimed
            // after the lock is released.
            work.ready -= 1;
            work.handed_out += 1;
            let (start_slot, started) = match metrics_now {
                Some(now) => (work.alloc_start(now), now),
                None => (NO_SLOT, 0),
            };
            // Another getter sleeps while more keys are ready: pass the baton.
            let wake_more = inner.waiters.load(Ordering::Relaxed) > 0
                && work.levels.iter().any(|l| !l.keys.is_empty());
            drop(work);
            if claim(&slot, seq) {
                if wake_more {
                    inner.notify.notify_one();
                }
                if let Some(m) = &inner.metrics {
                    let promoted_adds = promoted.0 + promoted.1;
                    if promoted_adds > 0 {
                        m.adds.increment(promoted_adds as u64);
                    }
                    m.depth.add(level, -1.0);
                    let since = slot.since.load(Ordering::Relaxed);
                    m.queue_duration.record(secs(started.saturating_sub(since)));
                }
                return Attempt::Item(WorkItem {
                    queue: self.clone(),
                    slot,
                    start_slot,
                    started,
                });
            }
            // A stale element: undo, and let getters and drains that counted it look again.
            work = inner.work.lock();
            work.ready += 1;
            work.handed_out -= 1;
            if start_slot != NO_SLOT {
                work.free_start(start_slot);
            }
            // Read the mode afresh: a drain may have begun (and seen the element counted as
            // in flight) since this attempt started.
            if inner.mode() != Mode::Running {
                inner.notify.notify_waiters();
                inner.drained.notify_waiters();
            }
        }
        if let Some(m) = &inner.metrics
            && promoted.0 + promoted.1 > 0
        {
            m.adds.increment((promoted.0 + promoted.1) as u64);
        }
        if mode == Mode::Draining && inner.in_flight(&work) == 0 {
            return Attempt::Closed;
        }
        let deadline = if mode == Mode::Running {
            work.next_deadline()
        } else {
            None
        };
        if register {
            // Under the add-side lock, so that an add either lands before this check (and is
            // seen) or after the increment (and sees a waiter to wake).
            let adds = inner.adds.lock();
            if !adds.inbox.is_empty() {
                return Attempt::Retry;
            }
            inner.waiters.fetch_add(1, Ordering::Relaxed);
        }
        Attempt::Empty(deadline)
    }

    /// Wait for the next key and hand it out as a [`WorkItem`] guard.
    ///
    /// Returns `None` once the queue is shut down; during
    /// [`shutdown_with_drain`](Self::shutdown_with_drain), keys that were ready (or became ready
    /// again when an in-flight duplicate finished) are still handed out, and `None` comes when
    /// nothing is ready and nothing is in flight. Waiting does not spin: the getter sleeps until
    /// an add or the earliest delayed key (see the [module docs](crate::queue) for the one exception,
    /// a timer due within 50 µs). Cancel-safe.
    pub async fn get(&self) -> Option<WorkItem<T>> {
        let mut spins = 0;
        let mut known_now = None;
        let mut may_defer = true;
        loop {
            match self.attempt(false, known_now.take(), may_defer) {
                Attempt::Item(item) => return Some(item),
                Attempt::Closed => return None,
                Attempt::Retry => continue,
                Attempt::Busy => {
                    // Another getter (on another thread) holds the worker side: rather than
                    // spin on its lock, let this thread run other tasks once, then wait for it.
                    may_defer = false;
                    tokio::task::yield_now().await;
                    continue;
                }
                Attempt::Empty(Some(deadline)) => {
                    let mut now = self.inner.now();
                    if deadline > now && u128::from(deadline - now) <= BUSY_WAIT_WINDOW.as_nanos() {
                        // Due within microseconds: watch the clock (not the lock).
                        let mut polls = 0;
                        while deadline > now && polls < MAX_BUSY_POLLS {
                            polls += 1;
                            std::hint::spin_loop();
                            now = self.inner.now();
                        }
                    }
                    if deadline > now && u128::from(deadline - now) <= SPIN_WINDOW.as_nanos() {
                        // Nearly due: yield to the runtime, watching the clock (not the lock).
                        while deadline > now && spins < MAX_SPINS {
                            spins += 1;
                            tokio::task::yield_now().await;
                            now = self.inner.now();
                        }
                    }
                    if deadline <= now {
                        known_now = Some(now);
                        continue;
                    }
                }
                Attempt::Empty(None) => {}
            }
            let mut notified = pin!(self.inner.notify.notified());
            notified.as_mut().enable();
            let deadline = match self.attempt(true, None, false) {
                Attempt::Item(item) => return Some(item),
                Attempt::Closed => return None,
                Attempt::Retry | Attempt::Busy => continue,
                Attempt::Empty(deadline) => deadline,
            };
            let _waiting = WaiterGuard(&self.inner.waiters);
            match deadline {
                None => notified.await,
                Some(at) => {
                    let _ = tokio::time::timeout_at(self.inner.instant(at), notified).await;
                }
            }
        }
    }

    /// Called by [`WorkItem`] when it is dropped.
    pub(crate) fn finish(&self, slot: &Slot<T>, start_slot: u32, started: u64) {
        let inner = &*self.inner;
        let stopped = inner.mode() == Mode::Stopped;
        let mut w = slot.load();
        let requeue = loop {
            if w & P == 0 {
                return; // not in flight: nothing to do (cannot happen through a WorkItem)
            }
            let requeue = w & R != 0 && !stopped;
            let new = if requeue {
                bump_rseq(w & !P)
            } else {
                w & !(P | R)
            };
            match slot.cas(w, new) {
                Ok(()) => break requeue.then(|| rseq(new)),
                Err(current) => w = current,
            }
        };
        let now = inner.metrics_now();
        let mut wake = false;
        let mut requeued_at = None;
        if requeue.is_some() || start_slot != NO_SLOT {
            let mut work = inner.work.lock();
            if let Some(seq) = requeue {
                // File the adds made before this done first, so that FIFO order holds.
                inner.take_inbox(&mut work);
                let prio = slot.prio.load(Ordering::Relaxed);
                push_level(&mut work.levels, Arc::clone(slot), prio, seq);
                requeued_at = Some(prio);
                work.ready += 1;
                wake = inner.waiters.load(Ordering::Relaxed) > 0;
            }
            if start_slot != NO_SLOT {
                work.free_start(start_slot);
            }
        }
        // Only after the requeue: a drain that sees nothing in flight sees the requeued key.
        inner.finished.fetch_add(1, Ordering::AcqRel);
        if wake {
            inner.notify.notify_one();
        }
        if inner.mode() != Mode::Running {
            let (adds_ready, _) = inner.add_counts();
            let drained = inner.is_drained(&inner.work.lock(), adds_ready);
            if drained {
                inner.notify.notify_waiters();
                inner.drained.notify_waiters();
            }
        }
        if let (Some(m), Some(now)) = (&inner.metrics, now) {
            m.work_duration.record(secs(now.saturating_sub(started)));
            if let Some(prio) = requeued_at {
                m.depth.add(prio, 1.0);
            }
        }
    }
}
