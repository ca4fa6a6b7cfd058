//! [`EnqueueRequestForObject`]: the request for the event's own object.

use kcr_core::Event;
use kcr_queue::WorkQueue;
use kube_core::Resource;

use crate::{EventHandler, Request, priority_of};

/// Enqueues the object the event is about (for updates, the new object; old and new always have
/// the same name and namespace). Used for a controller's primary type (`For`).
#[derive(Debug, Clone, Copy, Default)]
pub struct EnqueueRequestForObject;

impl<K: Resource + Send + Sync + 'static> EventHandler<K> for EnqueueRequestForObject {
    fn handle(&self, event: &Event<K>, queue: &WorkQueue<Request>) {
        queue.add_with_priority(
            Request::from_object(event.object().as_ref()),
            priority_of(event),
        );
    }
}
