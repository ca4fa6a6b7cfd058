//! The add hook: a function a queue calls with every key given to one of its adds, before the
//! add takes effect. A controller uses it to remember why a key was added (see kcr-controller's
//! `ReconcileReason`); without a hook an add pays one atomic load for the check.

use std::hash::Hash;
use std::sync::Arc;

use super::WorkQueue;

/// The function [`WorkQueue::set_add_hook`] installs.
pub(crate) type AddHook<T> = Arc<dyn Fn(&T) + Send + Sync>;

impl<T: Hash + Eq + Clone + Send + Sync + 'static> WorkQueue<T> {
    /// Installs `hook`, called with the key of every [`add`](Self::add),
    /// [`add_with_priority`](Self::add_with_priority), [`add_all`](Self::add_all) (once per
    /// key) and delayed add ([`add_after`](Self::add_after), and so
    /// [`add_rate_limited`](Self::add_rate_limited)), on the adding thread and before the add
    /// takes effect, whether or not the add then changes anything (a duplicate, a queue shutting
    /// down). It must be quick and must not add to this queue.
    ///
    /// A queue has at most one hook, for its whole life: a second call leaves the first in place
    /// and returns `false`.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use kcr_queue::WorkQueue;
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let queue = WorkQueue::<u32>::builder("hooked").metrics(false).build();
    /// let log = seen.clone();
    /// assert!(queue.set_add_hook(move |key: &u32| log.lock().unwrap().push(*key)));
    /// assert!(!queue.set_add_hook(|_: &u32| {}), "one hook per queue");
    /// queue.add(1);
    /// queue.add(1);
    /// queue.add_all([2, 3], kcr_queue::DEFAULT_PRIORITY);
    /// assert_eq!(*seen.lock().unwrap(), [1, 1, 2, 3]);
    /// assert_eq!(queue.len(), 3);
    /// ```
    pub fn set_add_hook(&self, hook: impl Fn(&T) + Send + Sync + 'static) -> bool {
        self.inner.add_hook.set(Arc::new(hook)).is_ok()
    }

    /// Whether an add hook is installed.
    pub fn has_add_hook(&self) -> bool {
        self.inner.add_hook.get().is_some()
    }
}
