//! [`KindStream`]: one subscriber's stream of a shared informer, and how a subscriber that fell
//! behind resyncs from the store (see the [module docs](super)).

use std::collections::{HashSet, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::{ByName, CacheObject, Informer, diff};
use crate::{Event, SourceError};
use futures::Stream;

/// One subscriber's events from a shared informer (the stream of a started
/// [`Kind`](crate::Kind)). Dropping it unsubscribes.
///
/// # Slow subscribers
///
/// Each subscriber has a bounded buffer. The informer never waits for a subscriber: if an event
/// does not fit, the subscriber is marked *lagged* and receives nothing more for now. Each stream
/// remembers the last state of every object it delivered (its *view*: shared `Arc`s, not copies).
/// Once a lagged stream has delivered its buffered events, it snapshots the store (atomically
/// with leaving the lagged state) and delivers the difference between its view and the snapshot,
/// like a relist: creates, updates (whose `old` is what this subscriber saw last) and deletes with
/// `state_unknown: true`. A slow subscriber thus never blocks the others and never loses a change
/// silently; intermediate versions of an object collapse into one update, which is what a
/// level-triggered controller needs.
///
/// Cost: the view is one set entry (an `Arc` of the object, keyed by the object's own namespace
/// and name) per object per subscriber; objects themselves are shared with the store, never
/// copied.
pub struct KindStream<K: CacheObject> {
    pub(super) informer: Arc<Informer<K>>,
    pub(super) id: u64,
    /// What this subscriber was told about last, per object.
    pub(super) view: HashSet<ByName<K>>,
    /// Events of a resync, delivered before anything newer.
    pub(super) pending: VecDeque<Event<K>>,
    /// Keeps the owning cache (and so the watch) alive while the stream is consumed.
    pub(super) _keep_alive: Box<dyn Send + Sync>,
}

impl<K: CacheObject> std::fmt::Debug for KindStream<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KindStream")
            .field("id", &self.id)
            .field("known_objects", &self.view.len())
            .field("pending", &self.pending.len())
            .finish()
    }
}

impl<K: CacheObject> KindStream<K> {
    fn track(&mut self, event: &Event<K>) {
        match event {
            Event::Create { object, .. } => {
                self.view.replace(ByName::of(object));
            }
            Event::Update { new, .. } => {
                self.view.replace(ByName::of(new));
            }
            Event::Delete { object, .. } => {
                self.view.remove(&ByName::of(object));
            }
            Event::Generic { .. } => {}
        }
    }
}

// The stream is never structurally pinned (it holds no self-references), whatever `K` is.
impl<K: CacheObject> Unpin for KindStream<K> {}

impl<K: CacheObject> Stream for KindStream<K> {
    type Item = Result<Event<K>, SourceError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(event) = this.pending.pop_front() {
                this.track(&event);
                return Poll::Ready(Some(Ok(event)));
            }
            let informer = Arc::clone(&this.informer);
            let mut st = informer.state.lock();
            let stopped = st.stopped;
            let removed = st.removed.clone();
            let Some(sub) = st.subscribers.get_mut(&this.id) else {
                return Poll::Ready(None);
            };
            if let Some(event) = sub.buffer.pop_front() {
                drop(st);
                this.track(&event);
                return Poll::Ready(Some(Ok(event)));
            }
            // A lagged subscriber resyncs even after the watch stopped, so that it ends with the
            // final state.
            if sub.lagged {
                // Leave the lagged state and snapshot the store under the same lock: every later
                // event goes to the buffer and applies on top of this snapshot.
                sub.lagged = false;
                let initial =
                    std::mem::take(&mut sub.initial) | std::mem::take(&mut sub.missed_list);
                let snapshot = informer.store.state();
                drop(st);
                let events = diff(&this.view, snapshot, initial);
                this.pending = events.into();
                continue;
            }
            if stopped {
                if let Some(kind) = removed
                    && !sub.told_removed
                {
                    sub.told_removed = true;
                    return Poll::Ready(Some(Err(SourceError::Removed { kind })));
                }
                return Poll::Ready(None);
            }
            sub.waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
    }
}

impl<K: CacheObject> Drop for KindStream<K> {
    fn drop(&mut self) {
        let removed = self.informer.state.lock().subscribers.remove(&self.id);
        drop(removed);
    }
}
