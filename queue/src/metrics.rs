//! Queue metrics through the [`metrics`] facade, with client-go's names and controller-runtime's
//! labels: `controller` and `name`, both the queue's name (a controller's queue is named after
//! the controller, so dashboards written for controller-runtime select on either).
//!
//! | metric | kind | meaning |
//! |---|---|---|
//! | `workqueue_depth` | gauge | keys ready to be handed out ([`WorkQueue::len`](crate::WorkQueue::len)), one series per priority (label `priority`) |
//! | `workqueue_adds_total` | counter | adds that were not de-duplicated away (a key becoming ready, or dirty while in flight) |
//! | `workqueue_queue_duration_seconds` | histogram | from a key becoming ready (or dirty) to a worker getting it |
//! | `workqueue_work_duration_seconds` | histogram | from `get` to the [`WorkItem`](crate::WorkItem) being done |
//! | `workqueue_unfinished_work_seconds` | gauge | sum of the ages of all in-flight keys |
//! | `workqueue_longest_running_processor_seconds` | gauge | age of the oldest in-flight key |
//! | `workqueue_retries_total` | counter | calls to [`add_rate_limited`](crate::WorkQueue::add_rate_limited) |
//!
//! `workqueue_depth` has a third label, `priority` (the priority as a decimal integer, `"0"` for
//! [`DEFAULT_PRIORITY`]), as controller-runtime's priority queue
//! reports it: one series per priority the queue has seen, each the number of ready keys of that
//! priority (their sum is [`WorkQueue::len`](crate::WorkQueue::len)). A ready key whose priority
//! is raised by a second add moves from the old series to the new one; a key handed out leaves the
//! series of the priority it was queued with.
//!
//! Handles are registered once, when the queue is built, with whatever recorder is current then
//! (global or local); no name lookup happens per operation. The one exception is the depth of a
//! priority other than the default: its handle is registered the first time the queue sees that
//! priority (with the recorder current then, on the thread that saw it) and kept, the first 8
//! such priorities in a table read without a lock, further ones behind a mutex. An add at the
//! default priority touches its pre-registered handle directly. If no recorder is installed at that
//! point, metrics are skipped entirely (handles registered with the no-op recorder could never
//! report anything); [`WorkQueueBuilder::metrics`](crate::WorkQueueBuilder::metrics) forces
//! them on or off. The two "unfinished" gauges are
//! refreshed every 500 ms by a background task that the queue spawns when it is
//! built inside a tokio runtime (without a runtime they are not reported), and once more when
//! the queue shuts down. With metrics off the queue reads no clock and touches no handle at all.
//! With metrics on, each key costs three clock reads (add, get, done) plus the recorder's work;
//! on the 2-core benchmark VM a clock read alone costs 50-90 ns, which is why metrics are
//! skipped when there is no recorder. The `metrics_cost` example measures all three cases.

use std::sync::OnceLock;
use std::time::Duration;

use metrics::{Counter, Gauge, Histogram, Unit};
use parking_lot::Mutex;

use crate::DEFAULT_PRIORITY;

/// `workqueue_depth`
pub const DEPTH: &str = "workqueue_depth";
/// `workqueue_adds_total`
pub const ADDS: &str = "workqueue_adds_total";
/// `workqueue_queue_duration_seconds`
pub const QUEUE_DURATION: &str = "workqueue_queue_duration_seconds";
/// `workqueue_work_duration_seconds`
pub const WORK_DURATION: &str = "workqueue_work_duration_seconds";
/// `workqueue_unfinished_work_seconds`
pub const UNFINISHED_WORK: &str = "workqueue_unfinished_work_seconds";
/// `workqueue_longest_running_processor_seconds`
pub const LONGEST_RUNNING: &str = "workqueue_longest_running_processor_seconds";
/// `workqueue_retries_total`
pub const RETRIES: &str = "workqueue_retries_total";
/// How often the unfinished-work gauges are refreshed.
pub(crate) const UNFINISHED_REFRESH: Duration = Duration::from_millis(500);

/// Depth handles of priorities other than the default kept in the lock-free table.
const LOCK_FREE_PRIORITIES: usize = 8;

/// `workqueue_depth{controller, name, priority}`: one gauge per priority seen, registered the
/// first time it is seen.
pub(crate) struct DepthGauges {
    name: String,
    /// `priority = DEFAULT_PRIORITY`, registered with the queue.
    default: Gauge,
    /// Filled in order (under `overflow`'s lock), never emptied: a reader stops at the first
    /// empty entry.
    table: [OnceLock<(i32, Gauge)>; LOCK_FREE_PRIORITIES],
    /// Priorities beyond the table's; its lock also serialises filling the table.
    overflow: Mutex<Vec<(i32, Gauge)>>,
}

impl std::fmt::Debug for DepthGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut seen: Vec<i32> = vec![DEFAULT_PRIORITY];
        seen.extend(self.table.iter().map_while(|e| e.get()).map(|(p, _)| *p));
        seen.extend(self.overflow.lock().iter().map(|(p, _)| *p));
        f.debug_struct("DepthGauges")
            .field("name", &self.name)
            .field("priorities", &seen)
            .finish()
    }
}

impl DepthGauges {
    fn register(name: &str, priority: i32) -> Gauge {
        metrics::gauge!(
            DEPTH,
            "controller" => name.to_owned(),
            "name" => name.to_owned(),
            "priority" => priority.to_string()
        )
    }

    fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            default: Self::register(name, DEFAULT_PRIORITY),
            table: std::array::from_fn(|_| OnceLock::new()),
            overflow: Mutex::new(Vec::new()),
        }
    }

    /// Adds `delta` to the depth of `priority`.
    pub(crate) fn add(&self, priority: i32, delta: f64) {
        if priority == DEFAULT_PRIORITY {
            return self.default.increment(delta);
        }
        for entry in &self.table {
            match entry.get() {
                Some((p, gauge)) if *p == priority => return gauge.increment(delta),
                Some(_) => {}
                None => break,
            }
        }
        self.add_slow(priority, delta);
    }

    /// A priority not in the table: look in the overflow, or register it.
    #[cold]
    fn add_slow(&self, priority: i32, delta: f64) {
        let mut overflow = self.overflow.lock();
        // Filled meanwhile by another thread?
        for entry in &self.table {
            match entry.get() {
                Some((p, gauge)) if *p == priority => return gauge.increment(delta),
                Some(_) => {}
                None => {
                    let gauge = Self::register(&self.name, priority);
                    gauge.increment(delta);
                    // Only this lock's holder fills entries: this one is still empty.
                    let _ = entry.set((priority, gauge));
                    return;
                }
            }
        }
        if let Some((_, gauge)) = overflow.iter().find(|(p, _)| *p == priority) {
            return gauge.increment(delta);
        }
        let gauge = Self::register(&self.name, priority);
        gauge.increment(delta);
        overflow.push((priority, gauge));
    }
}

/// The queue's metric handles, registered once.
#[derive(Debug)]
pub(crate) struct QueueMetrics {
    pub(crate) depth: DepthGauges,
    pub(crate) adds: Counter,
    pub(crate) queue_duration: Histogram,
    pub(crate) work_duration: Histogram,
    pub(crate) unfinished: Gauge,
    pub(crate) longest: Gauge,
    pub(crate) retries: Counter,
}

impl QueueMetrics {
    /// Describe and register every metric for the queue called `name`.
    pub(crate) fn register(name: &str) -> Self {
        metrics::describe_gauge!(
            DEPTH,
            "Current depth of workqueue by workqueue and priority"
        );
        metrics::describe_counter!(ADDS, "Total number of adds handled by workqueue");
        metrics::describe_histogram!(
            QUEUE_DURATION,
            Unit::Seconds,
            "How long in seconds an item stays in workqueue before being requested"
        );
        metrics::describe_histogram!(
            WORK_DURATION,
            Unit::Seconds,
            "How long in seconds processing an item from workqueue takes"
        );
        metrics::describe_gauge!(
            UNFINISHED_WORK,
            Unit::Seconds,
            "How many seconds of work has been done that is in progress"
        );
        metrics::describe_gauge!(
            LONGEST_RUNNING,
            Unit::Seconds,
            "How many seconds has the longest running processor for workqueue been running"
        );
        metrics::describe_counter!(RETRIES, "Total number of retries handled by workqueue");
        let labels = [("controller", name.to_owned()), ("name", name.to_owned())];
        Self {
            depth: DepthGauges::new(name),
            adds: metrics::counter!(ADDS, &labels),
            queue_duration: metrics::histogram!(QUEUE_DURATION, &labels),
            work_duration: metrics::histogram!(WORK_DURATION, &labels),
            unfinished: metrics::gauge!(UNFINISHED_WORK, &labels),
            longest: metrics::gauge!(LONGEST_RUNNING, &labels),
            retries: metrics::counter!(RETRIES, &labels),
        }
    }
}

/// Whether the current recorder (local, else global) is a real one rather than the `metrics`
/// crate's zero-sized no-op recorder.
pub(crate) fn recorder_installed() -> bool {
    metrics::with_recorder(|recorder| std::mem::size_of_val(recorder) != 0)
}

/// Nanoseconds as fractional seconds.
pub(crate) fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}
