//! [`WorkItem`]: the guard a worker holds while it processes a key.
//!
//! The key stays "in flight" (no other worker gets it; adds only mark it dirty) for exactly as
//! long as its `WorkItem` lives. Dropping the guard marks the key done, so an early `return`, a
//! `?` or a panic in a worker can never leave a key stuck in flight. The consuming helpers make
//! the usual endings one call:
//!
//! ```
//! # use kcr_queue::WorkQueue;
//! # use std::time::Duration;
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let queue = WorkQueue::<u32>::new("guard-doc");
//! queue.add(1);
//! queue.add(2);
//! queue.add(3);
//! let first = queue.get().await.expect("running");
//! first.done_and_forget(); // success: reset the key's back-off, mark done
//! let second = queue.get().await.expect("running");
//! second.retry_rate_limited(); // failure: retry after the limiter's delay, mark done
//! let third = queue.get().await.expect("running");
//! third.retry_after(Duration::from_secs(30)); // "requeue after", mark done
//! assert_eq!(queue.num_requeues(&2), 1);
//! assert_eq!(queue.num_delayed(), 2);
//! # }
//! ```

use std::fmt;
use std::hash::Hash;
use std::ops::Deref;
use std::time::Duration;

use std::sync::Arc;

use crate::queue::{KeySlot, WorkQueue};

/// A key handed out by [`WorkQueue::get`]; marks the key done when dropped.
///
/// Dereferences to the key. See the [module docs](self) for an example.
#[must_use = "dropping a WorkItem immediately marks its key done"]
pub struct WorkItem<T: Hash + Eq + Clone + Send + Sync + 'static> {
    pub(crate) queue: WorkQueue<T>,
    /// The key and its state.
    pub(crate) slot: Arc<KeySlot<T>>,
    /// Slot of the in-flight start time (metrics only).
    pub(crate) start_slot: u32,
    /// When the worker got the key, in queue-clock nanoseconds (metrics only).
    pub(crate) started: u64,
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> WorkItem<T> {
    /// The key.
    pub fn item(&self) -> &T {
        &self.slot.key
    }

    /// Takes the key's add tag: the tag of the first add made under
    /// [`with_add_tag`](crate::queue::with_add_tag) since the key was last taken, or 0 when no
    /// tagged add came. The next call returns 0 until another tagged add comes. Take it when
    /// the work starts: a tagged add while the key is in flight then tags its next hand-out.
    pub fn take_tag(&self) -> u32 {
        self.slot.tag.swap(0, std::sync::atomic::Ordering::AcqRel)
    }

    /// The queue the key came from.
    pub fn queue(&self) -> &WorkQueue<T> {
        &self.queue
    }

    /// Mark the key done now (the same as dropping the guard). If it was added again while in
    /// flight, it becomes ready again.
    pub fn done(self) {}

    /// Success: forget the key in the rate limiter (reset its back-off), then mark it done.
    pub fn done_and_forget(self) {
        self.queue.forget(&self.slot.key);
    }

    /// Failure: add the key again after the rate limiter's delay, then mark it done.
    pub fn retry_rate_limited(self) {
        self.queue.add_rate_limited(self.slot.key.clone());
    }

    /// Add the key again after `delay`, then mark it done.
    pub fn retry_after(self, delay: Duration) {
        self.queue.add_after(self.slot.key.clone(), delay);
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> Deref for WorkItem<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.slot.key
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static + fmt::Debug> fmt::Debug for WorkItem<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkItem")
            .field("key", &self.slot.key)
            .finish_non_exhaustive()
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> Drop for WorkItem<T> {
    fn drop(&mut self) {
        self.queue.finish(&self.slot, self.start_slot, self.started);
    }
}
