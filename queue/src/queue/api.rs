//! The public face of the queue: [`WorkQueue`], its builder, the adds (immediate, batched,
//! delayed, rate-limited) and the counts.

use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::add_side::{AddCounts, AddSide, Added, Signal};
use super::shared::{Inner, Mode, Padded};
use super::tag::{current_tag, mark_tag};
use super::work_side::WorkSide;
use super::{ADD_ALL_CHUNK, DEFAULT_PRIORITY, LAZY_DELAY_MAX, SWEEP_SLACK};
use crate::FastMap;
use crate::metrics::QueueMetrics;
use crate::rate_limiter::{RateLimiter, default_controller_rate_limiter};

/// A de-duplicating, rate-limited, priority work queue; cheap to clone (an `Arc` inside).
///
/// See the [crate docs](crate) for an overview and [`WorkItem`](crate::WorkItem) for the guard a worker holds.
pub struct WorkQueue<T> {
    pub(super) inner: Arc<Inner<T>>,
}

impl<T> Clone for WorkQueue<T> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> fmt::Debug for WorkQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkQueue")
            .field("name", &self.inner.name)
            .field("ready", &self.len())
            .field("in_flight", &self.num_in_flight())
            .field("delayed", &self.num_delayed())
            .field("mode", &self.inner.mode())
            .field(
                "waiting_getters",
                &self.inner.waiters.load(Ordering::Relaxed),
            )
            .finish()
    }
}

/// Builds a [`WorkQueue`] with a chosen rate limiter and metrics setting.
pub struct WorkQueueBuilder<T> {
    name: String,
    limiter: Option<Box<dyn RateLimiter<T>>>,
    /// `None`: on if a recorder is installed when the queue is built.
    metrics: Option<bool>,
}

impl<T> fmt::Debug for WorkQueueBuilder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkQueueBuilder")
            .field("name", &self.name)
            .field("custom_rate_limiter", &self.limiter.is_some())
            .field("metrics", &self.metrics)
            .finish()
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> WorkQueueBuilder<T> {
    /// Use `limiter` for [`WorkQueue::add_rate_limited`] instead of the default controller
    /// limiter.
    #[must_use]
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<T>) -> Self {
        self.limiter = Some(Box::new(limiter));
        self
    }

    /// Force metrics on or off. By default they are on exactly when a recorder is installed
    /// (globally, or locally around `build`) at the time the queue is built: handles registered
    /// with the `metrics` crate's no-op recorder can never report anything, so the queue then
    /// skips the clock reads that timing metrics need. The no-op recorder is recognised by being
    /// zero-sized: a zero-sized recorder of your own needs `metrics(true)`.
    #[must_use]
    pub fn metrics(mut self, enabled: bool) -> Self {
        self.metrics = Some(enabled);
        self
    }

    /// Build the queue. Metric handles are registered now, with the recorder current now; inside
    /// a tokio runtime a small task refreshing the unfinished-work gauges is spawned.
    pub fn build(self) -> WorkQueue<T> {
        let enabled = self
            .metrics
            .unwrap_or_else(crate::metrics::recorder_installed);
        let metrics = enabled.then(|| QueueMetrics::register(&self.name));
        let limiter = self
            .limiter
            .unwrap_or_else(|| Box::new(default_controller_rate_limiter()));
        let queue = WorkQueue {
            inner: Arc::new(Inner {
                adds: Padded(Mutex::new(AddSide {
                    map: FastMap::default(),
                    inbox: Vec::new(),
                    inbox_prio: i32::MIN,
                    next_sweep: SWEEP_SLACK,
                    pool: Vec::new(),
                    counts: AddCounts::default(),
                })),
                signal: Padded(Signal {
                    pending: AtomicBool::new(false),
                    prio: AtomicI32::new(i32::MIN),
                }),
                work: Padded(Mutex::new(WorkSide::new())),
                finished: Padded(AtomicU64::new(0)),
                waiters: Padded(AtomicUsize::new(0)),
                mode: AtomicU8::new(Mode::Running as u8),
                name: self.name,
                notify: Notify::new(),
                drained: Notify::new(),
                limiter,
                metrics,
                epoch: Instant::now(),
            }),
        };
        queue.spawn_unfinished_refresher();
        queue
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> WorkQueue<T> {
    /// A queue with the [default controller rate limiter](crate::DefaultControllerRateLimiter)
    /// and metrics on if a recorder is installed (see [`WorkQueueBuilder::metrics`]).
    pub fn new(name: impl Into<String>) -> Self {
        Self::builder(name).build()
    }

    /// A builder, to choose the rate limiter or turn metrics off.
    pub fn builder(name: impl Into<String>) -> WorkQueueBuilder<T> {
        WorkQueueBuilder {
            name: name.into(),
            limiter: None,
            metrics: None,
        }
    }

    /// The queue's name (the `controller` and `name` labels of its metrics).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Add `item` with [`DEFAULT_PRIORITY`]. A no-op if it is already waiting; marks it dirty if
    /// it is in flight; ignored once the queue is shutting down.
    pub fn add(&self, item: T) {
        self.add_with_priority(item, DEFAULT_PRIORITY);
    }

    /// Add `item` with `priority` (higher is handed out first, FIFO within a priority). A key
    /// that is already waiting keeps the higher of its priorities.
    pub fn add_with_priority(&self, item: T, priority: i32) {
        let inner = &*self.inner;
        let tag = current_tag();
        let now = inner.metrics_now().unwrap_or(0);
        let mut adds = inner.adds.lock();
        if inner.mode() != Mode::Running {
            return;
        }
        let (added, pending) = adds.with_slot(item, |counts, slot| {
            mark_tag(slot, tag);
            counts.add_ready(slot, priority, now)
        });
        let wake = pending.is_some_and(|p| adds.push(p, &inner.signal, &inner.waiters));
        drop(adds);
        if wake {
            inner.notify.notify_one();
        }
        if let Some(m) = &inner.metrics {
            match added {
                Added::Ready(prio) => {
                    m.adds.increment(1);
                    m.depth.add(prio, 1.0);
                }
                Added::Dirty => m.adds.increment(1),
                Added::Raised { from, to } => {
                    m.depth.add(from, -1.0);
                    m.depth.add(to, 1.0);
                }
                Added::Nothing => {}
            }
        }
    }

    /// Add every key of `items` with `priority`, as [`add_with_priority`](Self::add_with_priority)
    /// would one by one (same de-duplication, dirty marking, priorities and FIFO order), but
    /// taking the add side's lock once per 32 keys rather than once per key, and
    /// waking at most one getter per chunk (which passes the baton while keys are left). For a
    /// producer with many keys at hand (a relist, a map function fanning one event out to many
    /// objects) this saves most of the lock round trips.
    ///
    /// The items are collected first, so the iterator runs before any lock is taken (it may
    /// itself use the queue).
    ///
    /// ```
    /// use kcr_queue::{DEFAULT_PRIORITY, WorkQueue};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let queue = WorkQueue::<u32>::new("batch");
    /// queue.add_all([1, 2, 2, 3], DEFAULT_PRIORITY);
    /// assert_eq!(queue.len(), 3);
    /// let first = queue.get().await.unwrap();
    /// assert_eq!(*first, 1);
    /// # }
    /// ```
    pub fn add_all(&self, items: impl IntoIterator<Item = T>, priority: i32) {
        let items: Vec<T> = items.into_iter().collect();
        let inner = &*self.inner;
        let tag = current_tag();
        let now = inner.metrics_now().unwrap_or(0);
        let (mut ready, mut dirty) = (0u64, 0u64);
        // Keys made ready at a higher priority than `priority` (a delayed key keeps its
        // delay's priority when higher), and the priorities that raised keys left: rare, so
        // these stay unallocated in the common case.
        let mut ready_elsewhere: Vec<i32> = Vec::new();
        let mut raised_from: Vec<i32> = Vec::new();
        let mut items = items.into_iter();
        while items.len() > 0 {
            let mut adds = inner.adds.lock();
            if inner.mode() != Mode::Running {
                // Keys of earlier chunks were added: their metrics are still recorded below.
                break;
            }
            // A bounded number of keys per lock hold: getters take the inbox under this lock,
            // and a long hold would make them wait (measured: 256 keys per hold cut a
            // concurrent consumer's throughput by more than half).
            let mut wake = false;
            for item in items.by_ref().take(ADD_ALL_CHUNK) {
                let (added, pending) = adds.with_slot(item, |counts, slot| {
                    mark_tag(slot, tag);
                    counts.add_ready(slot, priority, now)
                });
                if let Some(p) = pending {
                    wake |= adds.push(p, &inner.signal, &inner.waiters);
                }
                match added {
                    Added::Ready(p) if p == priority => ready += 1,
                    Added::Ready(p) => ready_elsewhere.push(p),
                    Added::Dirty => dirty += 1,
                    Added::Raised { from, .. } => raised_from.push(from),
                    Added::Nothing => {}
                }
            }
            drop(adds);
            if wake {
                inner.notify.notify_one();
            }
        }
        if let Some(m) = &inner.metrics {
            let adds = ready + dirty + ready_elsewhere.len() as u64;
            if adds > 0 {
                m.adds.increment(adds);
            }
            let into_priority = ready + raised_from.len() as u64;
            if into_priority > 0 {
                m.depth.add(priority, into_priority as f64);
            }
            for p in ready_elsewhere {
                m.depth.add(p, 1.0);
            }
            for from in raised_from {
                m.depth.add(from, -1.0);
            }
        }
    }

    /// Add `item` after `delay` with [`DEFAULT_PRIORITY`]. A zero delay is an immediate add; a
    /// key that is already waiting (or delayed to an earlier time) keeps the earlier time.
    /// Delays up to 50 µs are timed from the queue's next clock reading (see the
    /// [module docs](crate::queue)): never less than `delay`, at most about twice `delay`.
    pub fn add_after(&self, item: T, delay: Duration) {
        self.add_after_with_priority(item, delay, DEFAULT_PRIORITY);
    }

    /// [`add_after`](Self::add_after) with a priority for when the delay has passed.
    pub fn add_after_with_priority(&self, item: T, delay: Duration, priority: i32) {
        if delay.is_zero() {
            return self.add_with_priority(item, priority);
        }
        let inner = &*self.inner;
        let tag = current_tag();
        let delay_ns = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
        let lazy = delay <= LAZY_DELAY_MAX;
        // An exactly timed delay reads the clock before taking any lock.
        let at = if lazy {
            delay_ns
        } else {
            inner.now().saturating_add(delay_ns)
        };
        let mut adds = inner.adds.lock();
        if inner.mode() != Mode::Running {
            return;
        }
        let pending = adds.with_slot(item, |counts, slot| {
            mark_tag(slot, tag);
            counts.add_delayed(slot, priority, at, lazy, || inner.now())
        });
        let wake = pending.is_some_and(|p| adds.push(p, &inner.signal, &inner.waiters));
        drop(adds);
        if wake {
            inner.notify.notify_one();
        }
    }

    /// Add `item` after the rate limiter's delay for it (counts a retry).
    pub fn add_rate_limited(&self, item: T) {
        if self.is_shutting_down() {
            return;
        }
        let delay = self.inner.limiter.when(&item);
        if let Some(m) = &self.inner.metrics {
            m.retries.increment(1);
        }
        self.add_after(item, delay);
    }

    /// Reset the rate limiter's memory of `item` (call it when the key succeeded).
    pub fn forget(&self, item: &T) {
        self.inner.limiter.forget(item);
    }

    /// How many times `item` was rate-limited since it was last forgotten.
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.inner.limiter.num_requeues(item)
    }

    /// Keys ready to be handed out (not counting delayed keys, keys in flight, or dirty keys
    /// that will become ready when their worker is done).
    pub fn len(&self) -> usize {
        let (adds_ready, _) = self.inner.add_counts();
        let work = self.inner.work.lock();
        self.inner.ready(&work, adds_ready)
    }

    /// Whether no key is ready to be handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keys waiting for a delayed add (`add_after`, `add_rate_limited`), including due ones
    /// that no getter has promoted yet.
    pub fn num_delayed(&self) -> usize {
        let (_, adds_delayed) = self.inner.add_counts();
        let work = self.inner.work.lock();
        usize::try_from(adds_delayed + work.delayed).unwrap_or(0)
    }

    /// Keys currently held by workers.
    pub fn num_in_flight(&self) -> usize {
        self.inner.in_flight(&self.inner.work.lock())
    }

    /// Whether [`shutdown`](Self::shutdown) or [`shutdown_with_drain`](Self::shutdown_with_drain)
    /// was called.
    pub fn is_shutting_down(&self) -> bool {
        self.inner.mode() != Mode::Running
    }
}
