//! Add tags: a number a producer attaches to the adds it makes, which the queue keeps with the
//! key until a worker takes it ([`WorkItem::take_tag`](crate::WorkItem::take_tag)). A
//! controller tags the adds of each of its watches to know why a key was queued (see
//! kcr-controller's `ReconcileReason`) without a map of its own: the tag is a word in the key's
//! slot, and an untagged add pays one thread-local read.
//!
//! The first tagged add since the key was last handed out wins (later ones fold into the same
//! hand-out, as the adds themselves do).

use std::cell::Cell;
use std::sync::atomic::Ordering;

use super::slot::KeySlot;

thread_local! {
    static CURRENT: Cell<u32> = const { Cell::new(0) };
}

/// Runs `f` with every add it makes on this thread (to any queue) tagged `tag` (0 clears the
/// tag), then restores the previous tag, even if `f` panics.
///
/// ```
/// use kcr_queue::{WorkQueue, queue::with_add_tag};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let queue = WorkQueue::<&str>::builder("tagged").metrics(false).build();
/// with_add_tag(7, || queue.add("a"));
/// queue.add("b");
/// with_add_tag(8, || queue.add("a")); // folds into the pending add: the first tag stays
/// let a = queue.get().await.unwrap();
/// assert_eq!((*a, a.take_tag()), ("a", 7));
/// assert_eq!(a.take_tag(), 0, "taken");
/// let b = queue.get().await.unwrap();
/// assert_eq!((*b, b.take_tag()), ("b", 0));
/// # }
/// ```
pub fn with_add_tag<R>(tag: u32, f: impl FnOnce() -> R) -> R {
    struct Restore(u32);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CURRENT.with(|c| c.replace(tag)));
    f()
}

/// The tag of adds made on this thread now (0: none).
pub(super) fn current_tag() -> u32 {
    CURRENT.with(Cell::get)
}

/// Tags `slot` with `tag` unless it is 0 or the slot holds a tag already.
pub(super) fn mark_tag<T>(slot: &KeySlot<T>, tag: u32) {
    if tag != 0 {
        let _ = slot
            .tag
            .compare_exchange(0, tag, Ordering::AcqRel, Ordering::Relaxed);
    }
}
