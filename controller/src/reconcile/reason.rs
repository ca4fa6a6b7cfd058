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
//! reconciled, the reconcile runs once and reports the **first** of them. Reasons travel with
//! the key in the queue as add tags ([`kcr_queue::queue::with_add_tag`]): a watch tags the adds
//! its handler makes, the controller tags its requeues and retries. Adds made by other code
//! (on [`Controller::queue`](crate::Controller::queue)) are untagged: `Unknown`.
//!
//! Cost: one thread-local read per add and a word in the key's queue slot; no map, no lock.

use std::fmt;
use std::sync::Arc;

use parking_lot::RwLock;

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

/// The queue tags of the reasons every controller has; the others are interned from
/// [`FIRST_INTERNED`].
const TAG_OBJECT_CHANGED: u32 = 1;
const TAG_RESYNC: u32 = 2;
const TAG_REQUEUE: u32 = 3;
const TAG_ERROR_RETRY: u32 = 4;
const FIRST_INTERNED: u32 = 5;

/// The reasons naming a kind (owned, mapped), interned: a process has a few (one per watched
/// kind), interned when a watch starts, never per event.
static INTERNED: RwLock<Vec<ReconcileReason>> = RwLock::new(Vec::new());

/// The queue tag of `reason` (see [`kcr_queue::queue::with_add_tag`]).
pub(crate) fn tag_of(reason: &ReconcileReason) -> u32 {
    match reason {
        ReconcileReason::Unknown => 0,
        ReconcileReason::ObjectChanged => TAG_OBJECT_CHANGED,
        ReconcileReason::Resync => TAG_RESYNC,
        ReconcileReason::Requeue => TAG_REQUEUE,
        ReconcileReason::ErrorRetry => TAG_ERROR_RETRY,
        ReconcileReason::OwnedObjectChanged { .. } | ReconcileReason::Mapped { .. } => {
            if let Some(i) = INTERNED.read().iter().position(|r| r == reason) {
                return FIRST_INTERNED + i as u32;
            }
            let mut interned = INTERNED.write();
            let i = match interned.iter().position(|r| r == reason) {
                Some(i) => i,
                None => {
                    interned.push(reason.clone());
                    interned.len() - 1
                }
            };
            FIRST_INTERNED + i as u32
        }
    }
}

/// The reason of a queue tag (`Unknown` for 0 and for tags no controller made).
pub(crate) fn reason_of(tag: u32) -> ReconcileReason {
    match tag {
        TAG_OBJECT_CHANGED => ReconcileReason::ObjectChanged,
        TAG_RESYNC => ReconcileReason::Resync,
        TAG_REQUEUE => ReconcileReason::Requeue,
        TAG_ERROR_RETRY => ReconcileReason::ErrorRetry,
        t if t >= FIRST_INTERNED => INTERNED
            .read()
            .get((t - FIRST_INTERNED) as usize)
            .cloned()
            .unwrap_or_default(),
        _ => ReconcileReason::Unknown,
    }
}

/// Runs `f` with its adds (on this thread) tagged with the tag `tag_of` gave.
pub(crate) fn with_tag<T>(tag: u32, f: impl FnOnce() -> T) -> T {
    kcr_queue::queue::with_add_tag(tag, f)
}

/// Runs `f` with its adds (on this thread) tagged `reason`.
pub(crate) fn with_reason<T>(reason: &ReconcileReason, f: impl FnOnce() -> T) -> T {
    with_tag(tag_of(reason), f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_round_trips_through_its_tag() {
        let kind: Arc<str> = Arc::from("Job");
        let reasons = [
            ReconcileReason::Unknown,
            ReconcileReason::ObjectChanged,
            ReconcileReason::OwnedObjectChanged { kind: kind.clone() },
            ReconcileReason::Mapped { kind: kind.clone() },
            ReconcileReason::Mapped {
                kind: Arc::from("Pod"),
            },
            ReconcileReason::Resync,
            ReconcileReason::Requeue,
            ReconcileReason::ErrorRetry,
        ];
        let tags: Vec<u32> = reasons.iter().map(tag_of).collect();
        for (reason, tag) in reasons.iter().zip(&tags) {
            assert_eq!(&reason_of(*tag), reason);
            assert_eq!(tag_of(reason), *tag, "interned once");
        }
        let mut distinct = tags.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), tags.len(), "{tags:?}");
        assert_eq!(reason_of(u32::MAX), ReconcileReason::Unknown);
    }

    #[tokio::test]
    async fn tagged_adds_carry_their_reason_through_the_queue() {
        let queue = kcr_queue::WorkQueue::<u32>::builder("reasons")
            .metrics(false)
            .build();
        with_reason(&ReconcileReason::Resync, || queue.add(1));
        queue.add(2);
        let one = queue.get().await.unwrap();
        assert_eq!(reason_of(one.take_tag()), ReconcileReason::Resync);
        let two = queue.get().await.unwrap();
        assert_eq!(reason_of(two.take_tag()), ReconcileReason::Unknown);
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
