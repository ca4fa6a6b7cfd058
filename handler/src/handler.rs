//! The [`EventHandler`] trait, closures as handlers, and [`priority_of`].

use std::hash::Hash;
use std::sync::Arc;

use kcr_core::Event;
use kcr_queue::{DEFAULT_PRIORITY, LOW_PRIORITY, WorkQueue};

use crate::Request;

/// Turns an event into zero or more [`Request`]s added to the queue.
///
/// Built-in handlers add create events that a source found by a list (its initial list, or a
/// relist after a `410 Gone`: `initial: true`) with [`LOW_PRIORITY`] (see [`priority_of`]), so
/// that fresh changes overtake a (re)list.
///
/// Any `Fn(&Event<K>, &WorkQueue<Request>) + Send + Sync + 'static` closure is a handler.
///
/// The queue's key is [`Request`] unless said otherwise: a controller keyed by something else
/// (a tenant, a node name, a pair of objects) uses handlers of `EventHandler<K, MyKey>`: any
/// closure `Fn(&Event<K>, &WorkQueue<MyKey>)`, [`EnqueueRequestsFromMapFunc`](crate::EnqueueRequestsFromMapFunc)
/// with a function returning `MyKey`s, or [`Funcs`](crate::Funcs)`<K, MyKey>`. The built-ins
/// that derive a request from an object ([`EnqueueRequestForObject`](crate::EnqueueRequestForObject),
/// [`EnqueueRequestForOwner`](crate::EnqueueRequestForOwner)) produce [`Request`]s.
pub trait EventHandler<K, Q = Request>: Send + Sync + 'static {
    /// Handles one event.
    fn handle(&self, event: &Event<K>, queue: &WorkQueue<Q>);
}

impl<K, Q, F> EventHandler<K, Q> for F
where
    F: Fn(&Event<K>, &WorkQueue<Q>) + Send + Sync + 'static,
{
    fn handle(&self, event: &Event<K>, queue: &WorkQueue<Q>) {
        self(event, queue)
    }
}

impl<K: 'static, Q: 'static> EventHandler<K, Q> for Box<dyn EventHandler<K, Q>> {
    fn handle(&self, event: &Event<K>, queue: &WorkQueue<Q>) {
        (**self).handle(event, queue)
    }
}

impl<K: 'static, Q: 'static> EventHandler<K, Q> for Arc<dyn EventHandler<K, Q>> {
    fn handle(&self, event: &Event<K>, queue: &WorkQueue<Q>) {
        (**self).handle(event, queue)
    }
}

/// The queue priority for requests caused by `event`: [`LOW_PRIORITY`] for creates found by a list
/// (`initial: true`: the initial list or a relist), [`DEFAULT_PRIORITY`] for everything else.
pub fn priority_of<K>(event: &Event<K>) -> i32 {
    match event {
        Event::Create { initial: true, .. } => LOW_PRIORITY,
        _ => DEFAULT_PRIORITY,
    }
}

/// Adds `requests` to `queue` at the priority [`priority_of`] `event` gives, in one
/// [`WorkQueue::add_all`] (one lock hold per 32 requests, however large the fan-out). Duplicates
/// within `requests` are de-duplicated by the queue and not counted as adds.
pub fn enqueue_all<K, Q: Hash + Eq + Clone + Send + Sync + 'static>(
    event: &Event<K>,
    queue: &WorkQueue<Q>,
    requests: impl IntoIterator<Item = Q>,
) {
    queue.add_all(requests, priority_of(event));
}
