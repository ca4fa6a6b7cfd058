//! What both sides share: the queue's `Inner` (the two sides on cache lines of their own, the
//! inbox signal, the waiter count, the mode, rate limiter and metrics) and the reads that need
//! both sides (counts, drained, taking the inbox).

use std::ops::Deref;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::add_side::{AddSide, Signal};
use super::work_side::WorkSide;
use crate::metrics::QueueMetrics;
use crate::rate_limiter::{RateLimiter, nanos_since};

/// Keeps a value on cache lines of its own, so that fields written by one side do not slow the
/// other side's reads of its neighbours.
#[repr(align(128))]
pub(super) struct Padded<T>(pub(super) T);

impl<T> Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Mode {
    Running = 0,
    Draining = 1,
    Stopped = 2,
}

pub(crate) struct Inner<T> {
    /// The add side (see the [module docs](crate::queue)), with the inbox. Lock order: `work`, then
    /// `adds` (a getter takes the inbox while it holds the worker side; adds never take `work`).
    pub(super) adds: Padded<Mutex<AddSide<T>>>,
    /// What the inbox holds, for getters to read without the add-side lock.
    pub(super) signal: Padded<Signal>,
    /// The worker side.
    pub(super) work: Padded<Mutex<WorkSide<T>>>,
    /// Keys marked done so far (see [`WorkSide::handed_out`]).
    pub(super) finished: Padded<AtomicU64>,
    /// Getters waiting: incremented under the worker-side and add-side locks, read under either.
    pub(super) waiters: Padded<AtomicUsize>,
    /// A [`Mode`], changed under the add-side lock.
    pub(super) mode: AtomicU8,
    pub(super) name: String,
    pub(super) notify: Notify,
    pub(super) drained: Notify,
    pub(super) limiter: Box<dyn RateLimiter<T>>,
    pub(super) metrics: Option<QueueMetrics>,
    pub(super) epoch: Instant,
}

impl<T> Inner<T> {
    pub(super) fn now(&self) -> u64 {
        nanos_since(self.epoch, Instant::now())
    }

    pub(super) fn metrics_now(&self) -> Option<u64> {
        self.metrics.as_ref().map(|_| self.now())
    }

    pub(super) fn instant(&self, at: u64) -> Instant {
        self.epoch
            .checked_add(Duration::from_nanos(at))
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365))
    }

    pub(super) fn mode(&self) -> Mode {
        match self.mode.load(Ordering::Acquire) {
            0 => Mode::Running,
            1 => Mode::Draining,
            _ => Mode::Stopped,
        }
    }

    /// Whether a getter must take the inbox before handing out a key of its own: the inbox
    /// holds something and the worker side has no ready key of at least the inbox's best
    /// priority (keys of the worker side are older than the inbox's, so they go first).
    pub(super) fn must_take(&self, work: &WorkSide<T>) -> bool {
        if !self.signal.pending.load(Ordering::Acquire) {
            return false;
        }
        match work.levels.iter().find(|l| !l.keys.is_empty()) {
            None => true,
            Some(level) => self.signal.prio.load(Ordering::Relaxed) > level.prio,
        }
    }

    /// Take everything from the inbox and file it (the caller holds the worker-side lock).
    pub(super) fn take_inbox(&self, work: &mut WorkSide<T>) {
        if !self.signal.pending.load(Ordering::Acquire) {
            return;
        }
        let mut batch = std::mem::take(&mut work.spare);
        {
            let mut adds = self.adds.lock();
            std::mem::swap(&mut adds.inbox, &mut batch);
            adds.inbox_prio = i32::MIN;
            self.signal.pending.store(false, Ordering::Relaxed);
        }
        work.file(&mut batch);
        work.spare = batch;
    }

    /// Keys ready to be handed out (the caller holds the worker-side lock).
    pub(super) fn ready(&self, work: &WorkSide<T>, adds_ready: i64) -> usize {
        usize::try_from(adds_ready + work.ready).unwrap_or(0)
    }

    /// Keys held by workers (the caller holds the worker-side lock).
    pub(super) fn in_flight(&self, work: &WorkSide<T>) -> usize {
        let finished = self.finished.load(Ordering::Acquire);
        usize::try_from(work.handed_out.saturating_sub(finished)).unwrap_or(usize::MAX)
    }

    pub(super) fn is_drained(&self, work: &WorkSide<T>, adds_ready: i64) -> bool {
        self.in_flight(work) == 0
            && (self.mode() == Mode::Stopped || self.ready(work, adds_ready) == 0)
    }

    /// Change the mode under the add-side lock, so that no add is half done.
    pub(super) fn set_mode(&self, mode: Mode, only_if_running: bool) {
        let _adds = self.adds.lock();
        if !only_if_running || self.mode() == Mode::Running {
            self.mode.store(mode as u8, Ordering::Release);
        }
    }

    /// (ready keys of the add side, delayed keys of the add side).
    pub(super) fn add_counts(&self) -> (i64, i64) {
        let counts = self.adds.lock().counts;
        (counts.ready, counts.delayed)
    }
}
