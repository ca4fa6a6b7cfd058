//! The work queue itself: de-duplication, one-in-flight-per-key, priorities, delays, shutdown.
//!
//! # State of a key
//!
//! Every key the queue knows has one slot (see below) with three flags:
//! - **ready**: the key waits to be handed out (or, if it is also in flight, it is *dirty*: it
//!   was added while a worker had it and becomes ready again when that worker is done);
//! - **in flight**: a worker holds its [`WorkItem`];
//! - **delayed**: it has one pending delayed add (time and priority).
//!
//! A key has at most one pending "ready time": an immediate add of a delayed key cancels the
//! delay (now is earlier), a delayed add of a ready or dirty key is a no-op, and a second delayed
//! add keeps the earlier time. Re-adding keeps the higher priority.
//!
//! # Data structures
//!
//! One `parking_lot` mutex guards the whole state, so every operation is one short critical
//! section with no allocation in the steady state:
//! - a hash map (foldhash) from key to (slot index, generation) in a `Vec` of slots; freed slots
//!   are reused last-in first-out, so the live slots stay few and cache-warm. The map is probed
//!   once per add call and never again: everything else (ready FIFOs, timers, the [`WorkItem`]
//!   guard) refers to the slot by index. Freeing a slot bumps its generation instead of removing
//!   the key from the map; the stale entry is reused by the key's next add, and stale entries
//!   are swept (one pass over the map) once they outnumber the live keys by more than 1,024, so
//!   the map stays within about twice the live keys, at an amortised cost of O(1) per add. The
//!   slot owns one copy of the key and lends it to the guard while a worker holds it;
//! - ready keys sit in one FIFO (`VecDeque`) per priority level, highest level first. A priority
//!   bump pushes the key again at its new level; the old element is recognised as stale by a
//!   sequence number and skipped when it reaches the front (no search, no removal);
//! - delayed keys sit in a FIFO while their times are non-decreasing (the usual case: a constant
//!   delay), and in a binary heap otherwise, so a constant `add_after` costs O(1);
//! - timers are driven lazily by [`WorkQueue::get`]: a getter promotes every due key before
//!   looking for work, and a getter with nothing to do sleeps until the earliest timer (or an
//!   add wakes it). There is no background task. A timer due within [`SPIN_WINDOW`] (50 µs) is
//!   awaited by yielding to the runtime (at most [`MAX_SPINS`] times, reading the clock but not
//!   taking the lock) instead of a tokio sleep, whose 1 ms granularity would otherwise turn a
//!   1 µs delay into a 1 ms one; a timer due within [`BUSY_WAIT_WINDOW`] (5 µs) is awaited by
//!   watching the clock for at most [`MAX_BUSY_POLLS`] readings, because a tokio yield (which
//!   polls the I/O driver) costs about as much as that wait;
//! - reading the clock is not free (50-90 ns on the benchmark VM, more than a whole add), so the
//!   queue reads it as rarely as it can: a getter remembers its last reading and promotes every
//!   timer already due by then without reading again, and a delay of at most
//!   [`LAZY_DELAY_MAX`] (50 µs) is not timed by `add_after` itself. It waits, unstamped, until
//!   the next getter reads the clock under the lock and gives every unstamped key the deadline
//!   *reading + delay*. Such a key is never handed out less than its delay after `add_after`
//!   returned, and becomes ready at most its delay after the first getter looks at the queue
//!   after the add (a waiting getter is woken for that). For the "earliest time wins" rule,
//!   a shorter tiny delay replaces a longer tiny one even if the longer one was already
//!   stamped, so the key may become ready up to the difference (< 50 µs) later than the ideal.
//!
//! Adds wake a waiting getter only when one is waiting (a counter, read under the lock), so a
//! busy queue makes no wake-up calls at all.

use std::cmp::Ordering as CmpOrdering;
use std::collections::hash_map::Entry as MapEntry;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::hash::Hash;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::FastMap;
use crate::error::QueueError;
use crate::guard::WorkItem;
use crate::metrics::{QueueMetrics, UNFINISHED_REFRESH, secs};
use crate::rate_limiter::{RateLimiter, default_controller_rate_limiter, nanos_since};

/// Priority of ordinary adds ([`WorkQueue::add`]).
pub const DEFAULT_PRIORITY: i32 = 0;
/// Priority for create events from an initial list, so that fresh changes overtake a re-list.
pub const LOW_PRIORITY: i32 = -100;
/// A getter whose earliest timer is due within this window yields instead of sleeping.
pub const SPIN_WINDOW: Duration = Duration::from_micros(50);
/// The most yields a getter spends waiting for one timer inside [`SPIN_WINDOW`].
pub const MAX_SPINS: u32 = 1000;
/// A getter whose earliest timer is due within this window busy-waits on the clock (a tokio
/// yield costs a poll of the I/O driver, about a microsecond, more than this wait).
pub const BUSY_WAIT_WINDOW: Duration = Duration::from_micros(5);
/// The most clock readings a getter busy-waits for within [`BUSY_WAIT_WINDOW`].
pub const MAX_BUSY_POLLS: u32 = 256;
/// Delays up to this long are timed from the queue's next clock reading instead of a clock
/// reading of their own (see the [module docs](self)).
pub const LAZY_DELAY_MAX: Duration = SPIN_WINDOW;

/// No metrics slot.
const NO_SLOT: u32 = u32::MAX;
/// A free slot in the in-flight start-time table.
const FREE: u64 = u64::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Running,
    Draining,
    Stopped,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Waiting to be handed out, or dirty if `processing`.
    ready: bool,
    processing: bool,
    delayed: bool,
    /// The pending delay is lazily timed: `delay_at` holds the delay, not a deadline.
    lazy: bool,
    prio: i32,
    delay_prio: i32,
    /// Sequence number of the live element in a ready level.
    seq: u64,
    /// Sequence number of the live timer.
    delay_seq: u64,
    delay_at: u64,
    /// When the key became ready or dirty (metrics only).
    since: u64,
}

impl Entry {
    const EMPTY: Entry = Entry {
        ready: false,
        processing: false,
        delayed: false,
        lazy: false,
        prio: 0,
        delay_prio: 0,
        seq: 0,
        delay_seq: 0,
        delay_at: 0,
        since: 0,
    };
}

/// One key's state, stored at a fixed index so that queues and timers refer to it by index
/// (no hashing after the add) and reuse freed indices (good locality).
#[derive(Debug)]
struct Slot<T> {
    /// The key, except while a worker holds it (its [`WorkItem`] owns it then) or the slot is free.
    key: Option<T>,
    live: bool,
    /// Bumped when the slot is freed: index entries naming an older generation are stale.
    generation: u64,
    e: Entry,
}

#[derive(Debug)]
struct Level {
    prio: i32,
    /// (slot, seq) of ready keys; an element whose seq no longer matches its slot is stale.
    keys: VecDeque<(usize, u64)>,
}

#[derive(Debug)]
struct Timer {
    at: u64,
    seq: u64,
    slot: usize,
}

impl PartialEq for Timer {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Timer {}
impl PartialOrd for Timer {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl Ord for Timer {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest timer first.
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// What a lazily timed delayed add did.
enum Lazy<T> {
    /// Queued for stamping; `first` if nothing else was waiting to be stamped.
    Pushed { first: bool },
    /// Nothing to do (the key is ready, or already delayed to an earlier time).
    Noop,
    /// The key has an exactly timed delay: compare with a real clock reading.
    NeedClock(T),
}

/// What an add did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Added {
    /// The key became ready.
    Ready,
    /// The key is in flight and is now dirty.
    Dirty,
    /// Nothing changed (de-duplicated), or only a priority was raised.
    Nothing,
}

#[derive(Debug)]
struct State<T> {
    /// Key → (slot, generation). Freeing a slot does not touch the map (no hash probe on the
    /// worker's path): the entry goes stale and is reused by the key's next add or swept away
    /// once stale entries outnumber live ones (plus a slack of [`SWEEP_SLACK`]).
    index: FastMap<T, (usize, u64)>,
    slots: Vec<Slot<T>>,
    free: Vec<usize>,
    /// Sorted by priority, highest first.
    levels: Vec<Level>,
    ready: usize,
    in_flight: usize,
    delayed: usize,
    timer_fifo: VecDeque<Timer>,
    timer_heap: BinaryHeap<Timer>,
    /// Lazily timed delayed adds not yet given a deadline: (slot, delay ns, seq).
    unstamped: VecDeque<(usize, u64, u64)>,
    seq: u64,
    /// The latest clock reading taken by anyone: a lower bound of the current time, so timers
    /// due by then can be promoted without reading the (slow) clock again.
    last_now: u64,
    mode: Mode,
    /// In-flight start times for the unfinished-work gauges (`FREE` marks a free slot).
    starts: Vec<u64>,
    free_starts: Vec<u32>,
}

fn push_level(levels: &mut Vec<Level>, slot: usize, prio: i32, seq: u64) {
    let idx = match levels.iter().position(|l| l.prio <= prio) {
        Some(i) if levels[i].prio == prio => i,
        Some(i) => {
            levels.insert(
                i,
                Level {
                    prio,
                    keys: VecDeque::new(),
                },
            );
            i
        }
        None => {
            levels.push(Level {
                prio,
                keys: VecDeque::new(),
            });
            levels.len() - 1
        }
    };
    levels[idx].keys.push_back((slot, seq));
}

/// Priority levels kept even when empty (beyond these, empty levels are dropped).
const MAX_IDLE_LEVELS: usize = 4;

/// Stale index entries tolerated beyond the number of live slots before a sweep.
const SWEEP_SLACK: usize = 1024;

/// A slot for `key`: a freed one (keeping its generation) or a new one. Returns (slot, generation).
fn alloc<T>(slots: &mut Vec<Slot<T>>, free: &mut Vec<usize>, key: T, e: Entry) -> (usize, u64) {
    match free.pop() {
        Some(i) => {
            let generation = slots[i].generation;
            slots[i] = Slot {
                key: Some(key),
                live: true,
                generation,
                e,
            };
            (i, generation)
        }
        None => {
            slots.push(Slot {
                key: Some(key),
                live: true,
                generation: 0,
                e,
            });
            (slots.len() - 1, 0)
        }
    }
}

fn is_live<T>(slots: &[Slot<T>], (i, generation): (usize, u64)) -> bool {
    slots
        .get(i)
        .is_some_and(|s| s.live && s.generation == generation)
}

impl<T: Hash + Eq + Clone> State<T> {
    fn new() -> Self {
        Self {
            index: FastMap::default(),
            slots: Vec::new(),
            free: Vec::new(),
            levels: Vec::new(),
            ready: 0,
            in_flight: 0,
            delayed: 0,
            timer_fifo: VecDeque::new(),
            timer_heap: BinaryHeap::new(),
            unstamped: VecDeque::new(),
            seq: 0,
            last_now: 0,
            mode: Mode::Running,
            starts: Vec::new(),
            free_starts: Vec::new(),
        }
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn add_ready(&mut self, key: T, prio: i32, now: u64) -> Added {
        let seq = self.next_seq();
        let fresh = Entry {
            ready: true,
            prio,
            seq,
            since: now,
            ..Entry::EMPTY
        };
        let (i, new) = self.resolve(key, fresh);
        if new {
            push_level(&mut self.levels, i, prio, seq);
            self.ready += 1;
            return Added::Ready;
        }
        let e = &mut self.slots[i].e;
        if e.ready {
            if prio > e.prio {
                e.prio = prio;
                if !e.processing {
                    e.seq = seq;
                    push_level(&mut self.levels, i, prio, seq);
                }
            }
            return Added::Nothing;
        }
        e.ready = true;
        e.prio = prio;
        e.since = now;
        if e.delayed {
            // The immediate add is earlier than the pending delayed one: it wins.
            e.delayed = false;
            e.lazy = false;
            e.prio = prio.max(e.delay_prio);
            self.delayed -= 1;
        }
        if e.processing {
            return Added::Dirty;
        }
        e.seq = seq;
        let prio = e.prio;
        push_level(&mut self.levels, i, prio, seq);
        self.ready += 1;
        Added::Ready
    }

    /// The live slot of `key`, or a fresh one holding `fresh`: (slot, whether fresh).
    fn resolve(&mut self, key: T, fresh: Entry) -> (usize, bool) {
        match self.index.entry(key) {
            MapEntry::Occupied(mut o) => {
                if is_live(&self.slots, *o.get()) {
                    return (o.get().0, false);
                }
                let (i, generation) =
                    alloc(&mut self.slots, &mut self.free, o.key().clone(), fresh);
                *o.get_mut() = (i, generation);
                (i, true)
            }
            MapEntry::Vacant(v) => {
                let (i, generation) =
                    alloc(&mut self.slots, &mut self.free, v.key().clone(), fresh);
                v.insert((i, generation));
                self.maybe_sweep();
                (i, true)
            }
        }
    }

    /// Drop stale index entries once they outnumber the live slots (plus [`SWEEP_SLACK`]):
    /// amortised O(1) per add, and the map stays within about twice the live keys.
    fn maybe_sweep(&mut self) {
        let live = self.slots.len() - self.free.len();
        if self.index.len() > 2 * live + SWEEP_SLACK {
            let slots = &self.slots;
            self.index.retain(|_, entry| is_live(slots, *entry));
        }
    }

    /// The slot of `key`, allocated (with an empty entry) if needed.
    fn slot_of(&mut self, key: T) -> usize {
        self.resolve(key, Entry::EMPTY).0
    }

    /// Returns whether a new timer was pushed.
    fn add_delayed(&mut self, key: T, prio: i32, at: u64) -> bool {
        let seq = self.next_seq();
        let i = self.slot_of(key);
        let e = &mut self.slots[i].e;
        if e.ready {
            return false;
        }
        if e.delayed {
            e.delay_prio = e.delay_prio.max(prio);
            // A lazily timed delay is at most LAZY_DELAY_MAX, shorter than this one (callers
            // only come here with a lazily timed one for longer delays): it is earlier.
            if e.lazy || e.delay_at <= at {
                return false;
            }
        } else {
            e.delayed = true;
            e.delay_prio = prio;
            self.delayed += 1;
        }
        e.delay_at = at;
        e.delay_seq = seq;
        self.push_timer(Timer { at, seq, slot: i });
        true
    }

    fn push_timer(&mut self, timer: Timer) {
        if self.timer_fifo.back().is_none_or(|b| b.at <= timer.at) {
            self.timer_fifo.push_back(timer);
        } else {
            self.timer_heap.push(timer);
        }
    }

    /// A delayed add of at most [`LAZY_DELAY_MAX`], timed from the next stamp.
    fn add_delayed_lazy(&mut self, key: T, prio: i32, delay: u64) -> Lazy<T> {
        let seq = self.next_seq();
        let i = match self.index.entry(key) {
            MapEntry::Occupied(o) if is_live(&self.slots, *o.get()) => {
                let i = o.get().0;
                let e = &self.slots[i].e;
                if !e.ready && e.delayed && !e.lazy {
                    return Lazy::NeedClock(o.key().clone());
                }
                i
            }
            MapEntry::Occupied(mut o) => {
                let (i, generation) = alloc(
                    &mut self.slots,
                    &mut self.free,
                    o.key().clone(),
                    Entry::EMPTY,
                );
                *o.get_mut() = (i, generation);
                i
            }
            MapEntry::Vacant(v) => {
                let (i, generation) = alloc(
                    &mut self.slots,
                    &mut self.free,
                    v.key().clone(),
                    Entry::EMPTY,
                );
                v.insert((i, generation));
                self.maybe_sweep();
                i
            }
        };
        let e = &mut self.slots[i].e;
        if e.ready {
            return Lazy::Noop;
        }
        if e.delayed {
            e.delay_prio = e.delay_prio.max(prio);
            if e.delay_at <= delay {
                return Lazy::Noop;
            }
        } else {
            e.delayed = true;
            e.lazy = true;
            e.delay_prio = prio;
            self.delayed += 1;
        }
        e.delay_at = delay;
        e.delay_seq = seq;
        let first = self.unstamped.is_empty();
        self.unstamped.push_back((i, delay, seq));
        Lazy::Pushed { first }
    }

    /// Give every lazily timed delayed add its deadline, `now` + its delay. `now` must be a clock
    /// reading taken while holding the lock, so that it is not earlier than any of those adds.
    fn stamp(&mut self, now: u64) {
        while let Some((slot, delay, seq)) = self.unstamped.pop_front() {
            // Stale elements become stale timers, skipped like any other.
            self.push_timer(Timer {
                at: now.saturating_add(delay),
                seq,
                slot,
            });
        }
    }

    fn next_deadline(&self) -> Option<u64> {
        match (self.timer_fifo.front(), self.timer_heap.peek()) {
            (Some(f), Some(h)) => Some(f.at.min(h.at)),
            (Some(f), None) => Some(f.at),
            (None, Some(h)) => Some(h.at),
            (None, None) => None,
        }
    }

    /// Move every due delayed key to ready (or dirty). Returns (became ready, became dirty).
    fn promote_due(&mut self, now: u64) -> (usize, usize) {
        let (mut ready, mut dirty) = (0, 0);
        loop {
            let from_fifo = match (self.timer_fifo.front(), self.timer_heap.peek()) {
                (Some(f), Some(h)) => f.at <= h.at,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            let timer = if from_fifo {
                match self.timer_fifo.front() {
                    Some(t) if t.at <= now => self.timer_fifo.pop_front(),
                    _ => None,
                }
            } else {
                match self.timer_heap.peek() {
                    Some(t) if t.at <= now => self.timer_heap.pop(),
                    _ => None,
                }
            };
            let Some(timer) = timer else { break };
            let slot = &mut self.slots[timer.slot];
            let e = &mut slot.e;
            if !slot.live || !e.delayed || e.delay_seq != timer.seq {
                continue; // stale timer
            }
            e.delayed = false;
            e.lazy = false;
            self.delayed -= 1;
            e.ready = true;
            e.prio = e.delay_prio;
            e.since = now;
            if e.processing {
                dirty += 1;
            } else {
                self.seq += 1;
                e.seq = self.seq;
                push_level(&mut self.levels, timer.slot, e.prio, self.seq);
                self.ready += 1;
                ready += 1;
            }
        }
        (ready, dirty)
    }

    /// Hand out the next ready key: (slot, key, since).
    fn pop(&mut self) -> Option<(usize, T, u64)> {
        if self.ready == 0 {
            return None;
        }
        let mut found = None;
        for level in &mut self.levels {
            while let Some((i, seq)) = level.keys.pop_front() {
                let slot = &mut self.slots[i];
                let e = &mut slot.e;
                if slot.live && e.ready && !e.processing && e.seq == seq {
                    // A live slot that is not in flight holds its key.
                    let Some(key) = slot.key.take() else { continue };
                    e.ready = false;
                    e.processing = true;
                    found = Some((i, key, e.since));
                    break;
                }
            }
            if found.is_some() {
                break;
            }
        }
        if found.is_some() {
            self.ready -= 1;
            self.in_flight += 1;
        }
        // Forget emptied priority levels once there are more than a few, so that a queue that
        // saw many distinct priorities does not scan empty levels forever.
        if self.levels.len() > MAX_IDLE_LEVELS {
            self.levels
                .retain(|l| !l.keys.is_empty() || l.prio == DEFAULT_PRIORITY);
        }
        found
    }

    /// The worker is done with `key` (in `slot`). Returns whether the key became ready again.
    fn done(&mut self, slot: usize, key: &T) -> bool {
        let Some(s) = self.slots.get_mut(slot) else {
            return false;
        };
        let e = &mut s.e;
        if !s.live || !e.processing {
            return false;
        }
        e.processing = false;
        self.in_flight -= 1;
        let mut requeued = false;
        if e.ready {
            if self.mode == Mode::Stopped {
                e.ready = false;
            } else {
                self.seq += 1;
                e.seq = self.seq;
                push_level(&mut self.levels, slot, e.prio, self.seq);
                self.ready += 1;
                requeued = true;
            }
        }
        if e.ready || e.delayed {
            s.key = Some(key.clone());
        } else {
            // The index entry goes stale (no hash probe here); see `State::index`.
            s.live = false;
            s.generation = s.generation.wrapping_add(1);
            self.free.push(slot);
        }
        requeued
    }

    fn is_drained(&self) -> bool {
        self.in_flight == 0 && (self.mode == Mode::Stopped || self.ready == 0)
    }

    fn alloc_start(&mut self, now: u64) -> u32 {
        match self.free_starts.pop() {
            Some(i) => {
                self.starts[i as usize] = now;
                i
            }
            None => {
                self.starts.push(now);
                u32::try_from(self.starts.len() - 1).unwrap_or(NO_SLOT)
            }
        }
    }

    fn free_start(&mut self, slot: u32) {
        if let Some(s) = self.starts.get_mut(slot as usize) {
            *s = FREE;
            self.free_starts.push(slot);
        }
    }
}

pub(crate) struct Inner<T> {
    name: String,
    state: Mutex<State<T>>,
    /// Getters waiting (read under the state lock; incremented under it).
    waiters: AtomicUsize,
    notify: Notify,
    drained: Notify,
    limiter: Box<dyn RateLimiter<T>>,
    metrics: Option<QueueMetrics>,
    epoch: Instant,
}

impl<T> Inner<T> {
    fn now(&self) -> u64 {
        nanos_since(self.epoch, Instant::now())
    }

    fn metrics_now(&self) -> Option<u64> {
        self.metrics.as_ref().map(|_| self.now())
    }

    fn instant(&self, at: u64) -> Instant {
        self.epoch
            .checked_add(Duration::from_nanos(at))
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365))
    }
}

/// A de-duplicating, rate-limited, priority work queue; cheap to clone (an `Arc` inside).
///
/// See the [crate docs](crate) for an overview and [`WorkItem`] for the guard a worker holds.
pub struct WorkQueue<T> {
    inner: Arc<Inner<T>>,
}

impl<T> Clone for WorkQueue<T> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> fmt::Debug for WorkQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.inner.state.lock();
        f.debug_struct("WorkQueue")
            .field("name", &self.inner.name)
            .field("ready", &st.ready)
            .field("in_flight", &st.in_flight)
            .field("delayed", &st.delayed)
            .field("mode", &st.mode)
            .finish()
    }
}

/// Builds a [`WorkQueue`] with a chosen rate limiter and metrics setting.
pub struct WorkQueueBuilder<T> {
    name: String,
    limiter: Option<Box<dyn RateLimiter<T>>>,
    /// `None`: on if a recorder is installed when the queue is built.
    metrics: Option<bool>,
}

impl<T> fmt::Debug for WorkQueueBuilder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkQueueBuilder")
            .field("name", &self.name)
            .field("custom_rate_limiter", &self.limiter.is_some())
            .field("metrics", &self.metrics)
            .finish()
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> WorkQueueBuilder<T> {
    /// Use `limiter` for [`WorkQueue::add_rate_limited`] instead of the default controller
    /// limiter.
    #[must_use]
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<T>) -> Self {
        self.limiter = Some(Box::new(limiter));
        self
    }

    /// Force metrics on or off. By default they are on exactly when a recorder is installed
    /// (globally, or locally around `build`) at the time the queue is built: handles registered
    /// with the `metrics` crate's no-op recorder can never report anything, so the queue then
    /// skips the clock reads that timing metrics need. The no-op recorder is recognised by being
    /// zero-sized: a zero-sized recorder of your own needs `metrics(true)`.
    #[must_use]
    pub fn metrics(mut self, enabled: bool) -> Self {
        self.metrics = Some(enabled);
        self
    }

    /// Build the queue. Metric handles are registered now, with the recorder current now; inside
    /// a tokio runtime a small task refreshing the unfinished-work gauges is spawned.
    pub fn build(self) -> WorkQueue<T> {
        let enabled = self
            .metrics
            .unwrap_or_else(crate::metrics::recorder_installed);
        let metrics = enabled.then(|| QueueMetrics::register(&self.name));
        let limiter = self
            .limiter
            .unwrap_or_else(|| Box::new(default_controller_rate_limiter()));
        let queue = WorkQueue {
            inner: Arc::new(Inner {
                name: self.name,
                state: Mutex::new(State::new()),
                waiters: AtomicUsize::new(0),
                notify: Notify::new(),
                drained: Notify::new(),
                limiter,
                metrics,
                epoch: Instant::now(),
            }),
        };
        queue.spawn_unfinished_refresher();
        queue
    }
}

/// Result of one attempt to take a key.
enum Attempt<T: Hash + Eq + Clone + Send + Sync + 'static> {
    Item(WorkItem<T>),
    Closed,
    Empty(Option<u64>),
}

/// Decrements the waiter count when a waiting getter stops waiting (or is cancelled).
struct WaiterGuard<'a>(&'a AtomicUsize);

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> WorkQueue<T> {
    /// A queue with the [default controller rate limiter](crate::DefaultControllerRateLimiter)
    /// and metrics on if a recorder is installed (see [`WorkQueueBuilder::metrics`]).
    pub fn new(name: impl Into<String>) -> Self {
        Self::builder(name).build()
    }

    /// A builder, to choose the rate limiter or turn metrics off.
    pub fn builder(name: impl Into<String>) -> WorkQueueBuilder<T> {
        WorkQueueBuilder {
            name: name.into(),
            limiter: None,
            metrics: None,
        }
    }

    /// The queue's name (the `name` label of its metrics).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Add `item` with [`DEFAULT_PRIORITY`]. A no-op if it is already waiting; marks it dirty if
    /// it is in flight; ignored once the queue is shutting down.
    pub fn add(&self, item: T) {
        self.add_with_priority(item, DEFAULT_PRIORITY);
    }

    /// Add `item` with `priority` (higher is handed out first, FIFO within a priority). A key
    /// that is already waiting keeps the higher of its priorities.
    pub fn add_with_priority(&self, item: T, priority: i32) {
        let inner = &*self.inner;
        let now = inner.metrics_now().unwrap_or(0);
        let mut st = inner.state.lock();
        if st.mode != Mode::Running {
            return;
        }
        let added = st.add_ready(item, priority, now);
        let wake = added == Added::Ready && inner.waiters.load(Ordering::Relaxed) > 0;
        drop(st);
        if wake {
            inner.notify.notify_one();
        }
        if let Some(m) = &inner.metrics {
            match added {
                Added::Ready => {
                    m.adds.increment(1);
                    m.depth.increment(1.0);
                }
                Added::Dirty => m.adds.increment(1),
                Added::Nothing => {}
            }
        }
    }

    /// Add `item` after `delay` with [`DEFAULT_PRIORITY`]. A zero delay is an immediate add; a
    /// key that is already waiting (or delayed to an earlier time) keeps the earlier time.
    /// Delays up to [`LAZY_DELAY_MAX`] are timed from the queue's next clock reading (see the
    /// [module docs](self)): never less than `delay`, at most about twice `delay`.
    pub fn add_after(&self, item: T, delay: Duration) {
        self.add_after_with_priority(item, delay, DEFAULT_PRIORITY);
    }

    /// [`add_after`](Self::add_after) with a priority for when the delay has passed.
    pub fn add_after_with_priority(&self, item: T, delay: Duration, priority: i32) {
        if delay.is_zero() {
            return self.add_with_priority(item, priority);
        }
        let inner = &*self.inner;
        let delay_ns = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
        let mut item = item;
        if delay <= LAZY_DELAY_MAX {
            let mut st = inner.state.lock();
            if st.mode != Mode::Running {
                return;
            }
            match st.add_delayed_lazy(item, priority, delay_ns) {
                Lazy::Pushed { first } => {
                    let wake = first && inner.waiters.load(Ordering::Relaxed) > 0;
                    drop(st);
                    if wake {
                        inner.notify.notify_one();
                    }
                    return;
                }
                Lazy::Noop => return,
                Lazy::NeedClock(key) => item = key,
            }
        }
        let now = inner.now();
        let at = now.saturating_add(delay_ns);
        let mut st = inner.state.lock();
        if st.mode != Mode::Running {
            return;
        }
        let earliest = st.next_deadline();
        let pushed = st.add_delayed(item, priority, at);
        let wake =
            pushed && earliest.is_none_or(|e| at < e) && inner.waiters.load(Ordering::Relaxed) > 0;
        drop(st);
        if wake {
            inner.notify.notify_one();
        }
    }

    /// Add `item` after the rate limiter's delay for it (counts a retry).
    pub fn add_rate_limited(&self, item: T) {
        if self.is_shutting_down() {
            return;
        }
        let delay = self.inner.limiter.when(&item);
        if let Some(m) = &self.inner.metrics {
            m.retries.increment(1);
        }
        self.add_after(item, delay);
    }

    /// Reset the rate limiter's memory of `item` (call it when the key succeeded).
    pub fn forget(&self, item: &T) {
        self.inner.limiter.forget(item);
    }

    /// How many times `item` was rate-limited since it was last forgotten.
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.inner.limiter.num_requeues(item)
    }

    /// Keys ready to be handed out (not counting delayed keys, keys in flight, or dirty keys
    /// that will become ready when their worker is done).
    pub fn len(&self) -> usize {
        self.inner.state.lock().ready
    }

    /// Whether no key is ready to be handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keys waiting for a delayed add (`add_after`, `add_rate_limited`), including due ones
    /// that no getter has promoted yet.
    pub fn num_delayed(&self) -> usize {
        self.inner.state.lock().delayed
    }

    /// Keys currently held by workers.
    pub fn num_in_flight(&self) -> usize {
        self.inner.state.lock().in_flight
    }

    /// Whether [`shutdown`](Self::shutdown) or [`shutdown_with_drain`](Self::shutdown_with_drain)
    /// was called.
    pub fn is_shutting_down(&self) -> bool {
        self.inner.state.lock().mode != Mode::Running
    }

    /// One try at taking a key. `known_now` is a clock reading the caller already has.
    fn attempt(&self, register: bool, known_now: Option<u64>) -> Attempt<T> {
        let inner = &*self.inner;
        let metrics_now = inner.metrics_now();
        let mut st = inner.state.lock();
        if st.mode == Mode::Stopped {
            return Attempt::Closed;
        }
        if let Some(now) = metrics_now.max(known_now) {
            st.last_now = st.last_now.max(now);
        }
        if st.mode == Mode::Running && !st.unstamped.is_empty() {
            // Read under the lock: later than every unstamped add.
            let now = inner.now();
            st.last_now = st.last_now.max(now);
            let now = st.last_now;
            st.stamp(now);
        }
        let mut promoted = (0, 0);
        if st.mode == Mode::Running
            && let Some(earliest) = st.next_deadline()
        {
            // Read the clock only if the earliest timer is not known to be due already.
            if earliest > st.last_now {
                let now = inner.now();
                st.last_now = st.last_now.max(now);
            }
            let now = st.last_now;
            promoted = st.promote_due(now);
        }
        if let Some((index, key, since)) = st.pop() {
            let (slot, started) = match metrics_now {
                Some(now) => (st.alloc_start(now), now),
                None => (NO_SLOT, 0),
            };
            let wake_more = promoted.0 > 1 && inner.waiters.load(Ordering::Relaxed) > 0;
            drop(st);
            if wake_more {
                inner.notify.notify_one();
            }
            if let Some(m) = &inner.metrics {
                let promoted_adds = promoted.0 + promoted.1;
                if promoted_adds > 0 {
                    m.adds.increment(promoted_adds as u64);
                }
                m.depth.increment(promoted.0 as f64 - 1.0);
                m.queue_duration.record(secs(started.saturating_sub(since)));
            }
            return Attempt::Item(WorkItem {
                index,
                queue: self.clone(),
                key,
                slot,
                started,
            });
        }
        if let Some(m) = &inner.metrics
            && promoted.1 > 0
        {
            m.adds.increment(promoted.1 as u64);
        }
        if st.mode == Mode::Draining && st.in_flight == 0 {
            return Attempt::Closed;
        }
        let deadline = if st.mode == Mode::Running {
            st.next_deadline()
        } else {
            None
        };
        if register {
            inner.waiters.fetch_add(1, Ordering::Relaxed);
        }
        Attempt::Empty(deadline)
    }

    /// Wait for the next key and hand it out as a [`WorkItem`] guard.
    ///
    /// Returns `None` once the queue is shut down; during
    /// [`shutdown_with_drain`](Self::shutdown_with_drain), keys that were ready (or became ready
    /// again when an in-flight duplicate finished) are still handed out, and `None` comes when
    /// nothing is ready and nothing is in flight. Waiting does not spin: the getter sleeps until
    /// an add or the earliest delayed key (see the [module docs](self) for the one exception,
    /// a timer due within [`SPIN_WINDOW`]). Cancel-safe.
    pub async fn get(&self) -> Option<WorkItem<T>> {
        let mut spins = 0;
        let mut known_now = None;
        loop {
            match self.attempt(false, known_now.take()) {
                Attempt::Item(item) => return Some(item),
                Attempt::Closed => return None,
                Attempt::Empty(Some(deadline)) => {
                    let mut now = self.inner.now();
                    if deadline > now && u128::from(deadline - now) <= BUSY_WAIT_WINDOW.as_nanos() {
                        // Due within microseconds: watch the clock (not the lock).
                        let mut polls = 0;
                        while deadline > now && polls < MAX_BUSY_POLLS {
                            polls += 1;
                            std::hint::spin_loop();
                            now = self.inner.now();
                        }
                    }
                    if deadline > now && u128::from(deadline - now) <= SPIN_WINDOW.as_nanos() {
                        // Nearly due: yield to the runtime, watching the clock (not the lock).
                        while deadline > now && spins < MAX_SPINS {
                            spins += 1;
                            tokio::task::yield_now().await;
                            now = self.inner.now();
                        }
                    }
                    if deadline <= now {
                        known_now = Some(now);
                        continue;
                    }
                }
                Attempt::Empty(None) => {}
            }
            let mut notified = pin!(self.inner.notify.notified());
            notified.as_mut().enable();
            let deadline = match self.attempt(true, None) {
                Attempt::Item(item) => return Some(item),
                Attempt::Closed => return None,
                Attempt::Empty(deadline) => deadline,
            };
            let _waiting = WaiterGuard(&self.inner.waiters);
            match deadline {
                None => notified.await,
                Some(at) => {
                    let _ = tokio::time::timeout_at(self.inner.instant(at), notified).await;
                }
            }
        }
    }

    /// Called by [`WorkItem`] when it is dropped.
    pub(crate) fn finish(&self, key: &T, index: usize, slot: u32, started: u64) {
        let inner = &*self.inner;
        let now = inner.metrics_now();
        let mut st = inner.state.lock();
        let requeued = st.done(index, key);
        if slot != NO_SLOT {
            st.free_start(slot);
        }
        let wake = requeued && inner.waiters.load(Ordering::Relaxed) > 0;
        let drained = st.mode != Mode::Running && st.is_drained();
        drop(st);
        if wake {
            inner.notify.notify_one();
        }
        if drained {
            inner.notify.notify_waiters();
            inner.drained.notify_waiters();
        }
        if let (Some(m), Some(now)) = (&inner.metrics, now) {
            m.work_duration.record(secs(now.saturating_sub(started)));
            if requeued {
                m.depth.increment(1.0);
            }
        }
    }

    /// Refuse new adds and wake every waiting getter; `get` returns `None` from now on. Keys in
    /// flight stay valid until their guards are dropped (dirty marks are discarded).
    pub fn shutdown(&self) {
        let inner = &*self.inner;
        let mut st = inner.state.lock();
        st.mode = Mode::Stopped;
        let drained = st.is_drained();
        drop(st);
        inner.notify.notify_waiters();
        if drained {
            inner.drained.notify_waiters();
        }
    }

    /// Refuse new adds, let workers finish what is ready and in flight, and wait until nothing
    /// is left or `timeout` passes (delayed keys are dropped). On timeout the queue is shut down
    /// hard ([`shutdown`](Self::shutdown)) and the unfinished work is reported in the error.
    pub async fn shutdown_with_drain(&self, timeout: Duration) -> Result<(), QueueError> {
        let inner = &*self.inner;
        {
            let mut st = inner.state.lock();
            if st.mode == Mode::Running {
                st.mode = Mode::Draining;
            }
        }
        inner.notify.notify_waiters();
        let deadline = Instant::now().checked_add(timeout);
        loop {
            let mut drained = pin!(inner.drained.notified());
            drained.as_mut().enable();
            if inner.state.lock().is_drained() {
                return Ok(());
            }
            match deadline {
                None => drained.await,
                Some(deadline) => {
                    if tokio::time::timeout_at(deadline, drained).await.is_err() {
                        let mut st = inner.state.lock();
                        if st.is_drained() {
                            return Ok(());
                        }
                        st.mode = Mode::Stopped;
                        let (in_flight, ready) = (st.in_flight, st.ready);
                        drop(st);
                        inner.notify.notify_waiters();
                        return Err(QueueError::DrainTimeout {
                            name: inner.name.clone(),
                            timeout,
                            in_flight,
                            ready,
                        });
                    }
                }
            }
        }
    }

    /// Recompute `workqueue_unfinished_work_seconds` and
    /// `workqueue_longest_running_processor_seconds` now. The queue does this every
    /// [`UNFINISHED_REFRESH`] by itself when built inside a tokio runtime. Returns `false` once
    /// the queue is shut down with nothing in flight (the refresher stops then).
    pub fn refresh_unfinished_work(&self) -> bool {
        let inner = &*self.inner;
        let Some(m) = &inner.metrics else {
            return false;
        };
        let now = inner.now();
        let st = inner.state.lock();
        let (mut total, mut longest) = (0u64, 0u64);
        for &start in st.starts.iter().filter(|&&s| s != FREE) {
            let age = now.saturating_sub(start);
            total = total.saturating_add(age);
            longest = longest.max(age);
        }
        let alive = st.mode == Mode::Running || st.in_flight > 0;
        drop(st);
        m.unfinished.set(secs(total));
        m.longest.set(secs(longest));
        alive
    }

    fn spawn_unfinished_refresher(&self) {
        if self.inner.metrics.is_none() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak = Arc::downgrade(&self.inner);
        runtime.spawn(async move {
            let mut interval = tokio::time::interval(UNFINISHED_REFRESH);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            interval.tick().await;
            loop {
                interval.tick().await;
                let Some(inner) = weak.upgrade() else { break };
                let alive = WorkQueue { inner }.refresh_unfinished_work();
                if !alive {
                    break;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn empty_priority_levels_are_dropped() {
        let q = WorkQueue::<i32>::builder("levels").metrics(false).build();
        for p in 0..1000 {
            q.add_with_priority(p, p);
        }
        assert_eq!(q.inner.state.lock().levels.len(), 1000);
        for want in (0..1000).rev() {
            assert_eq!(*q.get().await.expect("running"), want);
        }
        let levels = q.inner.state.lock().levels.len();
        assert!(levels <= MAX_IDLE_LEVELS, "{levels} levels left");
    }

    #[tokio::test(start_paused = true)]
    async fn stale_index_entries_are_reused_and_swept() {
        let q = WorkQueue::<u64>::builder("sweep").metrics(false).build();
        for key in 0..100_000u64 {
            q.add(key);
            q.get().await.expect("running").done();
        }
        {
            let st = q.inner.state.lock();
            assert_eq!(st.slots.len(), 1, "one slot, reused for every key");
            assert!(
                st.index.len() <= SWEEP_SLACK + 3,
                "index holds {}",
                st.index.len()
            );
        }
        // Keys whose index entry is stale (or swept) come back as fresh keys.
        for key in [99_999u64, 99_998, 5] {
            q.add(key);
        }
        assert_eq!(q.len(), 3);
        let mut got = Vec::new();
        for _ in 0..3 {
            got.push(*q.get().await.expect("running"));
        }
        assert_eq!(got, vec![99_999, 99_998, 5]);
        // A stale entry reused while its old slot serves another key does not alias it.
        q.add(1);
        let one = q.get().await.expect("running");
        q.add(2); // reuses a slot freed above
        q.add(1); // dirty
        drop(one);
        assert_eq!(q.len(), 2);
    }
}
