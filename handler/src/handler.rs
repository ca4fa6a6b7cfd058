//! The [`EventHandler`] trait, closures as handlers, and [`priority_of`].

use std::sync::Arc;

use kcr_queue::{DEFAULT_PRIORITY, LOW_PRIORITY, WorkQueue};
use kcr_source::Event;

use crate::Request;

/// Turns an event into zero or more [`Request`]s added to the queue.
///
/// Built-in handlers add create events that came from a source's initial list with
/// [`LOW_PRIORITY`] (see [`priority_of`]), so that fresh changes overtake a start-up relist.
///
/// Any `Fn(&Event<K>, &WorkQueue<Request>) + Send + Sync + 'static` closure is a handler.
pub trait EventHandler<K>: Send + Sync + 'static {
    /// Handles one event.
    fn handle(&self, event: &Event<K>, queue: &WorkQueue<Request>);
}

impl<K, F> EventHandler<K> for F
where
    F: Fn(&Event<K>, &WorkQueue<Request>) + Send + Sync + 'static,
{
    fn handle(&self, event: &Event<K>, queue: &WorkQueue<Request>) {
        self(event, queue)
    }
}

impl<K: 'static> EventHandler<K> for Box<dyn EventHandler<K>> {
    fn handle(&self, event: &Event<K>, queue: &WorkQueue<Request>) {
        (**self).handle(event, queue)
    }
}

impl<K: 'static> EventHandler<K> for Arc<dyn EventHandler<K>> {
    fn handle(&self, event: &Event<K>, queue: &WorkQueue<Request>) {
        (**self).handle(event, queue)
    }
}

/// The queue priority for requests caused by `event`: [`LOW_PRIORITY`] for creates from an initial
/// list, [`DEFAULT_PRIORITY`] for everything else.
pub fn priority_of<K>(event: &Event<K>) -> i32 {
    match event {
        Event::Create { initial: true, .. } => LOW_PRIORITY,
        _ => DEFAULT_PRIORITY,
    }
}

/// Adds `requests` to `queue` at the priority [`priority_of`] `event` gives, skipping duplicates
/// within `requests` (the queue would de-duplicate them too, but this keeps its `adds` metric
/// honest).
pub fn enqueue_all<K>(
    event: &Event<K>,
    queue: &WorkQueue<Request>,
    requests: impl IntoIterator<Item = Request>,
) {
    let priority = priority_of(event);
    // Handlers usually produce one or two requests: a linear scan beats hashing there; switch to
    // a set for large fan-outs.
    let mut few: Vec<Request> = Vec::new();
    let mut many: std::collections::HashSet<Request> = std::collections::HashSet::new();
    for request in requests {
        let fresh = if many.is_empty() && few.len() < 16 {
            if few.contains(&request) {
                false
            } else {
                few.push(request.clone());
                true
            }
        } else {
            if many.is_empty() {
                many.extend(few.drain(..));
            }
            many.insert(request.clone())
        };
        if fresh {
            queue.add_with_priority(request, priority);
        }
    }
}
