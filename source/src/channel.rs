//! [`Channel`]: events pushed from anywhere in the program, fanned out to every consumer.
//!
//! See [`Channel`] for how a slow consumer is handled.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::{Event, SendError, Source, SourceError, Started, SyncHandle};

/// What a [`Channel`] does when a subscriber's buffer is full (see [`Channel`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overflow {
    /// The producer waits for room (lossless back-pressure).
    #[default]
    Wait,
    /// The producer never waits; the full subscriber misses the event and is told so with
    /// [`SourceError::Lagged`].
    Lag,
}

/// One entry of a subscriber's buffer: an event, or the place where events were skipped.
enum Slot<K> {
    Event(Event<K>),
    Missed(u64),
}

struct Subscriber<K> {
    buffer: VecDeque<Slot<K>>,
    waker: Option<Waker>,
}

struct State<K> {
    subscribers: HashMap<u64, Subscriber<K>>,
    next_id: u64,
    closed: bool,
}

struct Shared<K> {
    state: Mutex<State<K>>,
    capacity: usize,
    overflow: Overflow,
    /// Signalled when a full buffer gets room or a subscriber leaves.
    space: Notify,
    /// Number of live `Channel` handles; the last one dropped closes the channel.
    handles: std::sync::atomic::AtomicUsize,
}

/// An in-process event source fed by [`Channel::send`], consumable by several controllers.
///
/// Clone it to get more producer handles; every [`Source::start`] is a new subscriber.
///
/// # How a slow consumer is handled
///
/// controller-runtime's `source.Channel` copies each event to its destinations one after the
/// other, so one destination that does not read blocks the delivery to all others. Here every
/// subscriber (every [`Source::start`] call) has its **own bounded buffer** of `capacity` events,
/// filled by the sender directly; a subscriber only ever waits for its own buffer. When a
/// subscriber's buffer is full, the channel's [`Overflow`] policy decides, and neither policy
/// loses an event silently:
///
/// * [`Overflow::Wait`] (default, lossless): `send` waits until the full subscriber has made room
///   (back-pressure on the *producer*; the other subscribers keep draining their buffers
///   meanwhile); `try_send` returns [`SendError::Full`] and delivers nothing.
/// * [`Overflow::Lag`] (never blocks the producer): the event is delivered to every subscriber
///   with room; for a full one it is skipped and counted, and that subscriber's stream yields
///   [`SourceError::Lagged`] with the number of missed events at the place of the gap (after the
///   events it had buffered). Fast subscribers never slow down because of a slow one. A kcr
///   controller (kcr-controller's `Builder`) answers a `Lagged` by resyncing every object of its
///   primary kind, so the requests the missed events stood for are still reconciled.
///
/// A subscriber receives the events sent after it subscribed. Closing the channel (or dropping
/// every [`Channel`] handle) ends each stream after its buffered events. Dropping a stream
/// unsubscribes it, so an abandoned consumer never blocks the producer.
pub struct Channel<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for Channel<K> {
    fn clone(&self) -> Self {
        self.shared
            .handles
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<K> Drop for Channel<K> {
    fn drop(&mut self) {
        if self
            .shared
            .handles
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel)
            == 1
        {
            close(&self.shared);
        }
    }
}

impl<K> std::fmt::Debug for Channel<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.shared.state.lock();
        f.debug_struct("Channel")
            .field("capacity", &self.shared.capacity)
            .field("overflow", &self.shared.overflow)
            .field("subscribers", &st.subscribers.len())
            .field("closed", &st.closed)
            .finish()
    }
}

fn close<K>(shared: &Shared<K>) {
    let wakers: Vec<Waker> = {
        let mut st = shared.state.lock();
        st.closed = true;
        st.subscribers
            .values_mut()
            .filter_map(|s| s.waker.take())
            .collect()
    };
    wakers.into_iter().for_each(Waker::wake);
    shared.space.notify_waiters();
}

/// Outcome of one delivery attempt under the lock.
enum Attempt<K> {
    Delivered(Vec<Waker>),
    Full(Event<K>),
    Closed,
}

impl<K: Send + Sync + 'static> Channel<K> {
    /// A channel whose subscribers buffer up to `capacity` events each (at least 1), with
    /// [`Overflow::Wait`].
    pub fn new(capacity: usize) -> Self {
        Self::with_overflow(capacity, Overflow::Wait)
    }

    /// A channel with an explicit [`Overflow`] policy.
    pub fn with_overflow(capacity: usize, overflow: Overflow) -> Self {
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    subscribers: HashMap::new(),
                    next_id: 0,
                    closed: false,
                }),
                capacity: capacity.max(1),
                overflow,
                space: Notify::new(),
                handles: std::sync::atomic::AtomicUsize::new(1),
            }),
        }
    }

    /// Number of current subscribers.
    pub fn subscribers(&self) -> usize {
        self.shared.state.lock().subscribers.len()
    }

    /// Closes the channel: later sends fail with [`SendError::Closed`]; streams end after their
    /// buffered events.
    pub fn close(&self) {
        close(&self.shared);
    }

    fn attempt(&self, event: Event<K>, lag: bool) -> Attempt<K> {
        let mut st = self.shared.state.lock();
        if st.closed {
            return Attempt::Closed;
        }
        let capacity = self.shared.capacity;
        if !lag && st.subscribers.values().any(|s| s.buffer.len() >= capacity) {
            return Attempt::Full(event);
        }
        let mut wakers = Vec::new();
        for sub in st.subscribers.values_mut() {
            if sub.buffer.len() >= capacity {
                // Lag mode only: record the gap where it happens, after the buffered events.
                match sub.buffer.back_mut() {
                    Some(Slot::Missed(n)) => *n += 1,
                    _ => {
                        tracing::warn!(
                            capacity,
                            "channel subscriber is full; it will be told how many events it missed"
                        );
                        sub.buffer.push_back(Slot::Missed(1));
                    }
                }
            } else {
                sub.buffer.push_back(Slot::Event(event.clone()));
            }
            if let Some(w) = sub.waker.take() {
                wakers.push(w);
            }
        }
        Attempt::Delivered(wakers)
    }

    /// Sends `event` to every subscriber. With [`Overflow::Wait`] this waits while a subscriber's
    /// buffer is full; with [`Overflow::Lag`] it never waits. An event sent while nobody is
    /// subscribed is delivered to nobody (and is not an error).
    ///
    /// Cancel safe: delivery is all-or-nothing, so if the future is dropped before it completes
    /// the event was delivered to no subscriber.
    pub async fn send(&self, event: Event<K>) -> Result<(), SendError> {
        let lag = self.shared.overflow == Overflow::Lag;
        let mut event = event;
        loop {
            let notified = self.shared.space.notified();
            tokio::pin!(notified);
            // Register before checking, so a wake-up between the check and the await is kept.
            notified.as_mut().enable();
            match self.attempt(event, lag) {
                Attempt::Delivered(wakers) => {
                    wakers.into_iter().for_each(Waker::wake);
                    return Ok(());
                }
                Attempt::Closed => return Err(SendError::Closed),
                Attempt::Full(back) => {
                    event = back;
                    notified.await;
                }
            }
        }
    }

    /// Sends without waiting: with [`Overflow::Wait`], fails with [`SendError::Full`] (delivering
    /// to nobody) if a subscriber's buffer is full; with [`Overflow::Lag`] behaves like `send`.
    pub fn try_send(&self, event: Event<K>) -> Result<(), SendError> {
        let lag = self.shared.overflow == Overflow::Lag;
        match self.attempt(event, lag) {
            Attempt::Delivered(wakers) => {
                wakers.into_iter().for_each(Waker::wake);
                Ok(())
            }
            Attempt::Closed => Err(SendError::Closed),
            Attempt::Full(_) => Err(SendError::Full),
        }
    }

    /// A new subscription (what [`Source::start`] returns as its stream).
    pub fn subscribe(&self) -> ChannelStream<K> {
        let mut st = self.shared.state.lock();
        let id = st.next_id;
        st.next_id += 1;
        st.subscribers.insert(
            id,
            Subscriber {
                buffer: VecDeque::new(),
                waker: None,
            },
        );
        ChannelStream {
            shared: Arc::clone(&self.shared),
            id,
        }
    }
}

impl<K: Send + Sync + 'static> Source<K> for Channel<K> {
    fn start(&self) -> Result<Started<K>, SourceError> {
        use futures::StreamExt;
        Ok(Started {
            events: self.subscribe().boxed(),
            sync: SyncHandle::ready(),
        })
    }

    fn name(&self) -> String {
        format!("channel<{}>", std::any::type_name::<K>())
    }
}

/// One subscriber's stream of a [`Channel`]. Dropping it unsubscribes.
pub struct ChannelStream<K> {
    shared: Arc<Shared<K>>,
    id: u64,
}

impl<K> std::fmt::Debug for ChannelStream<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelStream")
            .field("id", &self.id)
            .finish()
    }
}

impl<K> futures::Stream for ChannelStream<K> {
    type Item = Result<Event<K>, SourceError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let capacity = self.shared.capacity;
        let mut st = self.shared.state.lock();
        let closed = st.closed;
        let Some(sub) = st.subscribers.get_mut(&self.id) else {
            return Poll::Ready(None);
        };
        let was_full = sub.buffer.len() >= capacity;
        match sub.buffer.pop_front() {
            Some(slot) => {
                drop(st);
                if was_full {
                    self.shared.space.notify_waiters();
                }
                Poll::Ready(Some(match slot {
                    Slot::Event(event) => Ok(event),
                    Slot::Missed(missed) => Err(SourceError::Lagged { missed }),
                }))
            }
            None if closed => Poll::Ready(None),
            None => {
                sub.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl<K> Drop for ChannelStream<K> {
    fn drop(&mut self) {
        let removed = self.shared.state.lock().subscribers.remove(&self.id);
        drop(removed);
        self.shared.space.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    #[tokio::test]
    async fn every_subscriber_gets_every_event_in_order() {
        let ch = Channel::<u32>::new(16);
        let a = ch.start().expect("start");
        let b = ch.start().expect("start");
        assert!(a.sync.is_synced());
        assert_eq!(ch.subscribers(), 2);
        for i in 0..10 {
            ch.send(Event::generic(i)).await.expect("open");
        }
        ch.close();
        let a: Vec<_> = a.events.collect().await;
        let b: Vec<_> = b.events.collect().await;
        let expected: Vec<_> = (0..10).map(|i| Ok(Event::generic(i))).collect();
        assert_eq!(a, expected);
        assert_eq!(b, expected);
        assert_eq!(ch.send(Event::generic(1)).await, Err(SendError::Closed));
        assert_eq!(ch.try_send(Event::generic(1)), Err(SendError::Closed));
    }

    #[tokio::test]
    async fn try_send_reports_full_and_delivers_nowhere() {
        let ch = Channel::<u32>::new(2);
        let mut fast = ch.subscribe();
        let mut slow = ch.subscribe();
        ch.try_send(Event::generic(1)).expect("room");
        ch.try_send(Event::generic(2)).expect("room");
        assert_eq!(fast.next().await, Some(Ok(Event::generic(1))));
        assert_eq!(ch.try_send(Event::generic(3)), Err(SendError::Full));
        assert_eq!(slow.next().await, Some(Ok(Event::generic(1))));
        ch.try_send(Event::generic(3)).expect("room again");
        assert_eq!(fast.next().await, Some(Ok(Event::generic(2))));
        assert_eq!(fast.next().await, Some(Ok(Event::generic(3))));
        assert_eq!(slow.next().await, Some(Ok(Event::generic(2))));
        assert_eq!(slow.next().await, Some(Ok(Event::generic(3))));
    }

    #[tokio::test]
    async fn dropping_a_subscriber_unblocks_the_sender() {
        let ch = Channel::<u32>::new(1);
        let stuck = ch.subscribe();
        ch.send(Event::generic(1)).await.expect("room");
        let sender = {
            let ch = ch.clone();
            tokio::spawn(async move { ch.send(Event::generic(2)).await })
        };
        tokio::task::yield_now().await;
        assert!(!sender.is_finished());
        drop(stuck);
        assert_eq!(sender.await.expect("no panic"), Ok(()));
        assert_eq!(ch.subscribers(), 0);
    }

    #[tokio::test]
    async fn dropping_the_last_handle_closes() {
        let ch = Channel::<u32>::new(4);
        let clone = ch.clone();
        let mut s = ch.subscribe();
        clone.send(Event::generic(1)).await.expect("open");
        drop(ch);
        clone.send(Event::generic(2)).await.expect("still open");
        drop(clone);
        assert_eq!(s.next().await, Some(Ok(Event::generic(1))));
        assert_eq!(s.next().await, Some(Ok(Event::generic(2))));
        assert_eq!(s.next().await, None);
    }

    #[tokio::test]
    async fn lag_mode_skips_only_the_full_subscriber_and_says_so() {
        let ch = Channel::<u32>::with_overflow(2, Overflow::Lag);
        let mut fast = ch.subscribe();
        let mut slow = ch.subscribe();
        for i in 0..5 {
            ch.send(Event::generic(i)).await.expect("never waits");
            assert_eq!(fast.next().await, Some(Ok(Event::generic(i))));
        }
        // the gap is reported where it happened: after the buffered events
        assert_eq!(slow.next().await, Some(Ok(Event::generic(0))));
        assert_eq!(slow.next().await, Some(Ok(Event::generic(1))));
        assert_eq!(
            slow.next().await,
            Some(Err(SourceError::Lagged { missed: 3 }))
        );
        ch.try_send(Event::generic(9)).expect("lag mode never full");
        assert_eq!(slow.next().await, Some(Ok(Event::generic(9))));
        assert_eq!(fast.next().await, Some(Ok(Event::generic(9))));
        assert!(format!("{ch:?}").contains("Lag"));
    }
}
