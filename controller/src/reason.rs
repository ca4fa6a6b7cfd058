//! Why a reconcile runs: the [`ReconcileReason`] a reconciler reads from
//! [`Context::reason`](crate::Context::reason), as kube-runtime's `ReconcileReason` gives it.
//!
//! | reason | when |
//! |---|---|
//! | [`ObjectChanged`](ReconcileReason::ObjectChanged) | an event of the primary kind's watch ([`for_kind`](crate::Builder::for_kind)): created, updated, deleted |
//! | [`OwnedObjectChanged`](ReconcileReason::OwnedObjectChanged) | an event of an owned kind's watch ([`owns`](crate::Builder::owns)) |
//! | [`Mapped`](ReconcileReason::Mapped) | an event of another watch ([`watches`](crate::Builder::watches)), mapped to this request by its handler |
//! | [`Resync`](ReconcileReason::Resync) | a periodic resync (an update event that changed no `resourceVersion`), or the recovery after a source lagged |
//! | [`Requeue`](ReconcileReason::Requeue) | the previous reconcile returned [`Action::requeue_after`](crate::Action::requeue_after) |
//! | [`ErrorRetry`](ReconcileReason::ErrorRetry) | the previous reconcile failed (an error, a panic or a timeout) and is retried with backoff |
//! | [`Unknown`](ReconcileReason::Unknown) | a request added to the queue by other code |
//!
//! Requests are de-duplicated: when several triggers for one request arrive before it is
//! reconciled, the reconcile runs once and reports the **first** of them. Reasons are recorded
//! through the queue's add hook ([`kcr_queue::WorkQueue::set_add_hook`]), which the controller
//! installs when it runs; a hook installed on the queue by other code first means every reason
//! is `Unknown` (the controller logs a warning).
//!
//! Cost: one thread-local read per add and, for an add made by a watch, one insert into a
//! per-controller map (removed when the request is reconciled).

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;

use parking_lot::Mutex;

/// Why a reconcile runs; see the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ReconcileReason {
    /// Not known: the request was added to the queue directly.
    #[default]
    Unknown,
    /// The controller's own object (its primary kind) was created, changed or deleted.
    ObjectChanged,
    /// An object of the owned kind `kind` changed.
    OwnedObjectChanged {
        /// The owned object's kind.
        kind: Arc<str>,
    },
    /// An event of a watch of `kind` mapped to this request.
    Mapped {
        /// The kind (or source) the event came from.
        kind: Arc<str>,
    },
    /// A periodic resync, or the resync of every object after a source lagged.
    Resync,
    /// The reconciler asked to be called again ([`Action::requeue_after`](crate::Action::requeue_after)).
    Requeue,
    /// A retry after an error, a panic or a timeout.
    ErrorRetry,
}

impl fmt::Display for ReconcileReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReconcileReason::Unknown => f.write_str("unknown"),
            ReconcileReason::ObjectChanged => f.write_str("object changed"),
            ReconcileReason::OwnedObjectChanged { kind } => write!(f, "owned {kind} changed"),
            ReconcileReason::Mapped { kind } => write!(f, "mapped from {kind}"),
            ReconcileReason::Resync => f.write_str("resync"),
            ReconcileReason::Requeue => f.write_str("requeue requested"),
            ReconcileReason::ErrorRetry => f.write_str("retry after error"),
        }
    }
}

thread_local! {
    /// The reason of the adds the current thread is making (set by a watch's pump around its
    /// handler, which adds synchronously).
    static CURRENT: RefCell<Option<ReconcileReason>> = const { RefCell::new(None) };
}

/// Runs `f` with `reason` as the reason of every add it makes on this thread.
pub(crate) fn with_reason<T>(reason: &ReconcileReason, f: impl FnOnce() -> T) -> T {
    struct Reset(Option<ReconcileReason>);
    impl Drop for Reset {
        fn drop(&mut self) {
            let previous = self.0.take();
            CURRENT.with(|c| *c.borrow_mut() = previous);
        }
    }
    let previous = CURRENT.with(|c| c.borrow_mut().replace(reason.clone()));
    let _reset = Reset(previous);
    f()
}

/// The reason of each request waiting to be reconciled (first trigger wins).
pub(crate) struct Reasons<K> {
    map: Mutex<HashMap<K, ReconcileReason>>,
}

impl<K: Hash + Eq + Clone> Reasons<K> {
    pub(crate) fn new() -> Self {
        Reasons {
            map: Mutex::new(HashMap::new()),
        }
    }

    /// Records the reason of the add being made on this thread, if a watch set one.
    pub(crate) fn record_current(&self, key: &K) {
        let current = CURRENT.with(|c| c.borrow().clone());
        if let Some(reason) = current {
            self.record(key, reason);
        }
    }

    /// Records `reason` for `key` unless an earlier trigger is pending.
    pub(crate) fn record(&self, key: &K, reason: ReconcileReason) {
        self.map.lock().entry(key.clone()).or_insert(reason);
    }

    /// Takes the reason of `key`'s reconcile (`Unknown` when none was recorded).
    pub(crate) fn take(&self, key: &K) -> ReconcileReason {
        self.map.lock().remove(key).unwrap_or_default()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_trigger_wins_and_take_clears() {
        let reasons = Reasons::<u32>::new();
        reasons.record_current(&1);
        assert_eq!(reasons.len(), 0, "no reason outside with_reason");
        with_reason(&ReconcileReason::ObjectChanged, || {
            reasons.record_current(&1);
            with_reason(&ReconcileReason::Resync, || reasons.record_current(&2));
            reasons.record_current(&3);
        });
        reasons.record(&1, ReconcileReason::Requeue);
        assert_eq!(reasons.take(&1), ReconcileReason::ObjectChanged);
        assert_eq!(reasons.take(&1), ReconcileReason::Unknown);
        assert_eq!(reasons.take(&2), ReconcileReason::Resync);
        assert_eq!(
            reasons.take(&3),
            ReconcileReason::ObjectChanged,
            "the outer reason is restored"
        );
        reasons.record_current(&4);
        assert_eq!(reasons.take(&4), ReconcileReason::Unknown, "reset after");
    }

    #[test]
    fn reasons_display() {
        let kind: Arc<str> = Arc::from("Pod");
        assert_eq!(
            ReconcileReason::OwnedObjectChanged { kind: kind.clone() }.to_string(),
            "owned Pod changed"
        );
        assert_eq!(
            ReconcileReason::Mapped { kind }.to_string(),
            "mapped from Pod"
        );
        assert_eq!(ReconcileReason::default().to_string(), "unknown");
    }
}
