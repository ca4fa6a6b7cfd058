//! [`EnqueueRequestsFromMapFunc`]: requests computed by a function of the object.

use kcr_core::Event;
use kcr_queue::WorkQueue;

use std::hash::Hash;

use crate::{EventHandler, enqueue_all};

/// Enqueues whatever a function returns for the event's object (requests, or the keys of a
/// controller keyed otherwise) (used for `Watches` of related
/// types: "a Secret changed, reconcile every Deployment that mounts it").
///
/// For an update the function runs on the old and the new object and the union is enqueued, each
/// request once.
pub struct EnqueueRequestsFromMapFunc<F> {
    map: F,
}

impl<F> std::fmt::Debug for EnqueueRequestsFromMapFunc<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnqueueRequestsFromMapFunc")
            .finish_non_exhaustive()
    }
}

impl<F> EnqueueRequestsFromMapFunc<F> {
    /// Wraps `map`, a function from an object to the requests it concerns.
    pub fn new<K, I>(map: F) -> Self
    where
        F: Fn(&K) -> I,
        I: IntoIterator,
    {
        Self { map }
    }
}

impl<K, Q, F, I> EventHandler<K, Q> for EnqueueRequestsFromMapFunc<F>
where
    K: Send + Sync + 'static,
    Q: Hash + Eq + Clone + Send + Sync + 'static,
    F: Fn(&K) -> I + Send + Sync + 'static,
    I: IntoIterator<Item = Q>,
{
    fn handle(&self, event: &Event<K>, queue: &WorkQueue<Q>) {
        match event {
            Event::Update { old, new } => enqueue_all(
                event,
                queue,
                (self.map)(old.as_ref())
                    .into_iter()
                    .chain((self.map)(new.as_ref())),
            ),
            _ => enqueue_all(event, queue, (self.map)(event.object().as_ref())),
        }
    }
}
