//! The work queue itself: de-duplication, one-in-flight-per-key, priorities, delays, shutdown.
//!
//! # State of a key
//!
//! Every key the queue knows has one slot (`KeySlot`), shared by an `Arc`, whose state is one atomic
//! word with four flags and two sequence numbers:
//! - **ready** (`R`): the key waits to be handed out (or, if it is also in flight, it is
//!   *dirty*: it was added while a worker had it and becomes ready again when that worker is
//!   done);
//! - **in flight** (`P`): a worker holds its [`WorkItem`];
//! - **delayed** (`D`, and `L` when lazily timed, see below): it has one pending delayed add;
//! - a *ready sequence* number, bumped whenever the key is (re)queued, and a *delay sequence*
//!   number, bumped whenever its timer is replaced: a queue element or timer carries the number
//!   it was pushed with and is stale (skipped) once the slot's number has moved on.
//!
//! Every change of state is one compare-and-swap on that word, so adders and workers never need
//! a common lock to agree on a key. A key has at most one pending "ready time": an immediate add
//! of a delayed key cancels the delay (now is earlier), a delayed add of a ready or dirty key is
//! a no-op, and a second delayed add keeps the earlier time. Re-adding keeps the higher priority.
//!
//! # Two sides that share (almost) nothing
//!
//! A producer and a worker running on two cores slow each other down badly if every operation
//! touches the same cache lines (one mutex and one state struct): each then pays a cache miss
//! per access, and the slower side (the worker, with two operations per key) falls behind and
//! lets the queue grow. So the queue is split in two sides that meet at a small inbox:
//! - **the add side** (one `parking_lot` mutex, taken by adds, and by a getter only to take
//!   the inbox): a hash map (foldhash) from key to its slot, and the **inbox**, a `Vec`. An add
//!   finds or creates the slot, changes its state word, and when the key became ready (or got a
//!   new timer) appends one element to the inbox. Slots of keys that are neither ready, in
//!   flight nor delayed stay in the map until the map has doubled since the last sweep (plus
//!   [`SWEEP_SLACK`]); then one pass drops them (keeping up to 4,096 that nothing else refers
//!   to in a pool, reused for new keys instead of allocating), and the map is shrunk when it is
//!   mostly empty, so its size stays within about twice the keys that were live at the last
//!   sweep, at an amortised O(1) per add;
//! - **the worker side** (one mutex, taken by `get` and, only when a dirty key must be queued
//!   again or metrics are on, by `done`): one FIFO (`VecDeque`) per priority level, highest level
//!   first, and the timers. Everything the worker side holds is older than what the inbox holds,
//!   so a getter takes the inbox (swapping it for an empty `Vec`: one lock round trip for any
//!   number of adds, filed in order) only when it has no ready key of at least the inbox's best
//!   priority; the inbox's "not empty" flag and best priority are published in atomics, written
//!   only when they change. FIFO and priority order are exactly those of the adds.
//! - A getter pops an element under the worker-side lock but claims it (the compare-and-swap
//!   that marks the key in flight, on a cache line that is usually on the producer's core) after
//!   releasing the lock, counting it as handed out meanwhile and putting the counts right if the
//!   element was stale. A getter that finds the worker side locked by another getter yields to
//!   the runtime once (so that its thread runs another task) before waiting for the lock. A
//!   worker marks a key done with one compare-and-swap, without any lock in the common case.
//!
//! Counters (ready, delayed, in flight) are kept per side and summed when read, so no counter
//! is written by both sides, and the hot fields of each side sit on cache lines of their own.
//!
//! # Timers
//!
//! Delayed keys sit in a FIFO while their times are non-decreasing (the usual case: a constant
//! delay), and in a binary heap otherwise, so a constant `add_after` costs O(1). Timers are
//! driven lazily by [`WorkQueue::get`]: a getter promotes every due key before looking for
//! work, and a getter with nothing to do sleeps until the earliest timer (or an add wakes it).
//! There is no background task. A timer due within [`SPIN_WINDOW`] (50 µs) is awaited by
//! yielding to the runtime (at most [`MAX_SPINS`] times, reading the clock but not taking a
//! lock) instead of a tokio sleep, whose 1 ms granularity would otherwise turn a 1 µs delay into
//! a 1 ms one; a timer due within [`BUSY_WAIT_WINDOW`] (5 µs) is awaited by watching the clock
//! for at most [`MAX_BUSY_POLLS`] readings, because a tokio yield (which polls the I/O driver)
//! costs about as much as that wait.
//!
//! Reading the clock is not free (50-90 ns on the benchmark VM, more than a whole add), so the
//! queue reads it as rarely as it can: a getter remembers its last reading and promotes every
//! timer already due by then without reading again, and a delay of at most [`LAZY_DELAY_MAX`]
//! (50 µs) is not timed by `add_after` itself. It travels through the inbox unstamped, and the
//! getter that takes it out reads the clock and gives it the deadline *reading + delay*. Such a
//! key is never handed out less than its delay after `add_after` returned, and becomes ready at
//! most its delay after a getter takes the inbox (a sleeping getter is woken for that; a busy
//! one takes it when it runs out of older ready keys). Timers of either kind reach the worker
//! side with the inbox, so while getters are busy with older ready keys a delayed key may become
//! ready later than due, never earlier. For the "earliest time wins" rule, a shorter tiny delay replaces a longer
//! tiny one even if the longer one was already stamped, so the key may become ready up to the
//! difference (< 50 µs) later than the ideal.
//!
//! An add wakes a sleeping getter only when one sleeps (a counter, read under the add-side lock,
//! which a getter increments under that lock after finding the inbox empty) and only with the
//! element that makes the inbox non-empty; the woken getter takes the whole inbox and wakes the
//! next sleeping getter while keys are left. A busy queue makes no wake-up calls at all.

use std::cmp::Ordering as CmpOrdering;
use std::collections::hash_map::Entry as MapEntry;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::hash::Hash;
use std::ops::Deref;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, AtomicU64, AtomicUsize, Ordering};
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
/// Priority for create events found by a list (the initial list or a relist), so that fresh
/// changes overtake a (re)list.
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
/// Idle slots tolerated in the key map beyond twice the live ones before a sweep.
pub const SWEEP_SLACK: usize = 1024;
/// Keys [`WorkQueue::add_all`] files per hold of the add side's lock.
pub const ADD_ALL_CHUNK: usize = 32;

/// No metrics slot.
const NO_SLOT: u32 = u32::MAX;
/// A free slot in the in-flight start-time table.
const FREE: u64 = u64::MAX;
/// Idle key slots kept for reuse by new keys.
const POOL_MAX: usize = 4 * SWEEP_SLACK;
/// Priority levels kept even when empty (beyond these, empty levels are dropped).
const MAX_IDLE_LEVELS: usize = 4;

// The state word of a key: four flags, then two 30-bit sequence numbers. A sequence number
// wraps after 2^30 changes of one key; an element pushed with the old number would have to
// stay queued through all of them to be mistaken for a live one.
/// Ready, or dirty if also in flight.
const R: u64 = 1;
/// In flight.
const P: u64 = 1 << 1;
/// Delayed.
const D: u64 = 1 << 2;
/// The delay is lazily timed: `delay_at` holds the delay, not a deadline.
const L: u64 = 1 << 3;
const SEQ_BITS: u32 = 30;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;
const RSEQ_SHIFT: u32 = 4;
const DSEQ_SHIFT: u32 = RSEQ_SHIFT + SEQ_BITS;

fn rseq(w: u64) -> u64 {
    (w >> RSEQ_SHIFT) & SEQ_MASK
}

fn dseq(w: u64) -> u64 {
    (w >> DSEQ_SHIFT) & SEQ_MASK
}

fn bump_rseq(w: u64) -> u64 {
    (w & !(SEQ_MASK << RSEQ_SHIFT)) | (((rseq(w) + 1) & SEQ_MASK) << RSEQ_SHIFT)
}

fn bump_dseq(w: u64) -> u64 {
    (w & !(SEQ_MASK << DSEQ_SHIFT)) | (((dseq(w) + 1) & SEQ_MASK) << DSEQ_SHIFT)
}

/// One key and its state, shared by the key map, queue elements, timers and the [`WorkItem`].
///
/// Only adds (under the add-side lock) write `prio`, `delay_prio` and `delay_at`, except that
/// the getter that promotes a timer copies `delay_prio` into `prio`; every change of the flags
/// is a compare-and-swap on `word`.
pub(crate) struct KeySlot<T> {
    pub(crate) key: T,
    word: AtomicU64,
    /// Priority of the pending ready (or dirty) add.
    prio: AtomicI32,
    /// Priority for when the pending delay has passed.
    delay_prio: AtomicI32,
    /// Deadline of an exactly timed delay, or the delay itself if lazily timed (`L`).
    delay_at: AtomicU64,
    /// When the key became ready or dirty (metrics only).
    since: AtomicU64,
}

impl<T> KeySlot<T> {
    fn new(key: T) -> Self {
        Self {
            key,
            word: AtomicU64::new(0),
            prio: AtomicI32::new(DEFAULT_PRIORITY),
            delay_prio: AtomicI32::new(DEFAULT_PRIORITY),
            delay_at: AtomicU64::new(0),
            since: AtomicU64::new(0),
        }
    }

    /// A slot of the pool, reused for `key` (the caller holds the only reference).
    fn reset(&mut self, key: T) {
        *self = Self::new(key);
    }

    fn load(&self) -> u64 {
        self.word.load(Ordering::Acquire)
    }

    fn cas(&self, current: u64, new: u64) -> Result<(), u64> {
        self.word
            .compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
    }
}

type Slot<T> = Arc<KeySlot<T>>;

/// Keeps a value on cache lines of its own, so that fields written by one side do not slow the
/// other side's reads of its neighbours.
#[repr(align(128))]
struct Padded<T>(T);

impl<T> Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// What the inbox holds, written by adds (under the add-side lock) when that changes, so that a
/// getter with keys of its own knows without a lock whether it must take the inbox first.
struct Signal {
    /// Whether the inbox holds elements (cleared by the getter that takes them).
    pending: AtomicBool,
    /// The highest priority of a ready element in the inbox (`i32::MIN` if none).
    prio: AtomicI32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Mode {
    Running = 0,
    Draining = 1,
    Stopped = 2,
}

/// An element of the inbox: something an add did that the worker side must file.
enum Pending<T> {
    /// The key became ready (or moved to a higher priority) with this ready sequence number.
    Ready { slot: Slot<T>, prio: i32, seq: u64 },
    /// The key got an exactly timed delay.
    Timer { slot: Slot<T>, at: u64, seq: u64 },
    /// The key got a lazily timed delay, to be stamped by the getter that files it.
    Lazy { slot: Slot<T>, delay: u64, seq: u64 },
}

struct Level<T> {
    prio: i32,
    /// (slot, ready seq) of ready keys; an element whose seq no longer matches is stale.
    keys: VecDeque<(Slot<T>, u64)>,
}

struct Timer<T> {
    at: u64,
    /// Filing order, to break ties (FIFO among equal deadlines).
    order: u64,
    /// The delay sequence number it was pushed with.
    seq: u64,
    slot: Slot<T>,
}

impl<T> PartialEq for Timer<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.order) == (other.at, other.order)
    }
}
impl<T> Eq for Timer<T> {}
impl<T> PartialOrd for Timer<T> {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Timer<T> {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest timer first.
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (other.at, other.order).cmp(&(self.at, self.order))
    }
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

/// The add side: the key map and the add-side counters (all written under its lock).
struct AddSide<T> {
    map: FastMap<T, Slot<T>>,
    /// What adds did that the worker side has not filed yet.
    inbox: Vec<Pending<T>>,
    /// The highest priority of a ready element in the inbox (`i32::MIN` if none).
    inbox_prio: i32,
    /// Sweep idle slots once the map holds this many.
    next_sweep: usize,
    /// Idle slots kept for reuse.
    pool: Vec<Slot<T>>,
    counts: AddCounts,
}

/// Counters of the add side.
#[derive(Debug, Default, Clone, Copy)]
struct AddCounts {
    /// Keys this side made ready.
    ready: i64,
    /// Delayed keys this side added, minus the delays it cancelled.
    delayed: i64,
}

impl<T: Hash + Eq + Clone> AddSide<T> {
    /// Find or create `key`'s slot and run `f` on it.
    fn with_slot<R>(&mut self, key: T, f: impl FnOnce(&mut AddCounts, &Slot<T>) -> R) -> R {
        let AddSide {
            map, counts, pool, ..
        } = self;
        let (result, new) = match map.entry(key) {
            MapEntry::Occupied(o) => (f(counts, o.get()), false),
            MapEntry::Vacant(v) => {
                let key = v.key().clone();
                let slot = match pool.pop() {
                    Some(mut slot) => match Arc::get_mut(&mut slot) {
                        Some(reused) => {
                            reused.reset(key);
                            slot
                        }
                        None => Arc::new(KeySlot::new(key)),
                    },
                    None => Arc::new(KeySlot::new(key)),
                };
                (f(counts, v.insert(slot)), true)
            }
        };
        if new && self.map.len() >= self.next_sweep {
            self.sweep();
        }
        result
    }

    /// Append to the inbox. Returns whether a getter waits to be woken: only the element that
    /// makes the inbox non-empty wakes one (the getter takes the whole inbox, and passes the
    /// baton to the next waiting getter while keys are left).
    fn push(&mut self, pending: Pending<T>, signal: &Signal, waiters: &AtomicUsize) -> bool {
        let first = self.inbox.is_empty();
        if first {
            self.inbox_prio = i32::MIN;
        }
        if let Pending::Ready { prio, .. } = pending
            && prio > self.inbox_prio
        {
            self.inbox_prio = prio;
            signal.prio.store(prio, Ordering::Relaxed);
        } else if first {
            signal.prio.store(i32::MIN, Ordering::Relaxed);
        }
        self.inbox.push(pending);
        if first {
            signal.pending.store(true, Ordering::Release);
        }
        first && waiters.load(Ordering::Relaxed) > 0
    }

    /// Drop the slots of keys that are neither ready, in flight nor delayed, keeping up to
    /// [`POOL_MAX`] of them (those no queue element refers to any more) for new keys: that saves
    /// an allocation and a free per key. Only adds (which hold this side's lock) bring an idle
    /// key back to life, so the check cannot race.
    fn sweep(&mut self) {
        let idle = self
            .map
            .extract_if(|_, slot| slot.load() & (R | P | D) == 0);
        for (_, slot) in idle {
            if self.pool.len() < POOL_MAX && Arc::strong_count(&slot) == 1 {
                self.pool.push(slot);
            }
        }
        let live = self.map.len();
        if self.map.capacity() > 4 * live + 2 * SWEEP_SLACK {
            self.map.shrink_to(2 * live + SWEEP_SLACK);
        }
        self.next_sweep = 2 * live + SWEEP_SLACK;
    }
}

impl AddCounts {
    /// An immediate add; returns what it did and the inbox element to push, if any.
    fn add_ready<T>(&mut self, slot: &Slot<T>, prio: i32, now: u64) -> (Added, Option<Pending<T>>) {
        let mut w = slot.load();
        loop {
            if w & R != 0 {
                // Ready or dirty already: at most raise the priority.
                if prio <= slot.prio.load(Ordering::Relaxed) {
                    return (Added::Nothing, None);
                }
                if w & P != 0 {
                    // Dirty: remember the priority for when it is queued again.
                    slot.prio.store(prio, Ordering::Relaxed);
                    return (Added::Nothing, None);
                }
                let new = bump_rseq(w);
                slot.prio.store(prio, Ordering::Relaxed);
                match slot.cas(w, new) {
                    Ok(()) => {
                        let pending = Pending::Ready {
                            slot: Arc::clone(slot),
                            prio,
                            seq: rseq(new),
                        };
                        return (Added::Nothing, Some(pending));
                    }
                    Err(current) => {
                        w = current;
                        continue;
                    }
                }
            }
            let mut prio = prio;
            if w & D != 0 {
                // The immediate add is earlier than the pending delayed one: it wins.
                prio = prio.max(slot.delay_prio.load(Ordering::Relaxed));
            }
            match make_ready(slot, w, prio, now) {
                Ok(new) => {
                    if w & D != 0 {
                        self.delayed -= 1;
                    }
                    if w & P != 0 {
                        return (Added::Dirty, None);
                    }
                    self.ready += 1;
                    let pending = Pending::Ready {
                        slot: Arc::clone(slot),
                        prio,
                        seq: rseq(new),
                    };
                    return (Added::Ready, Some(pending));
                }
                Err(current) => w = current,
            }
        }
    }

    /// A delayed add: `at` is a deadline, or (if `lazy`) the delay itself. `clock` reads the
    /// clock, for the rare lazy add that must be compared with an exactly timed one.
    fn add_delayed<T>(
        &mut self,
        slot: &Slot<T>,
        prio: i32,
        at: u64,
        lazy: bool,
        clock: impl Fn() -> u64,
    ) -> Option<Pending<T>> {
        let (mut at, mut lazy) = (at, lazy);
        let mut w = slot.load();
        loop {
            if w & R != 0 {
                return None; // ready or dirty: it comes sooner than any delay
            }
            if w & D != 0 {
                slot.delay_prio.fetch_max(prio, Ordering::Relaxed);
                let pending_at = slot.delay_at.load(Ordering::Relaxed);
                match (w & L != 0, lazy) {
                    // A lazily timed delay is at most LAZY_DELAY_MAX: earlier than an exact one.
                    (true, false) => return None,
                    (true, true) | (false, false) if pending_at <= at => return None,
                    (false, true) => {
                        // Compare with a real deadline.
                        at = clock().saturating_add(at);
                        lazy = false;
                        if pending_at <= at {
                            return None;
                        }
                    }
                    _ => {}
                }
            } else {
                slot.delay_prio.store(prio, Ordering::Relaxed);
            }
            let mut new = bump_dseq(w | D);
            if lazy {
                new |= L;
            } else {
                new &= !L;
            }
            slot.delay_at.store(at, Ordering::Relaxed);
            match slot.cas(w, new) {
                Ok(()) => {
                    if w & D == 0 {
                        self.delayed += 1;
                    }
                    let (slot, seq) = (Arc::clone(slot), dseq(new));
                    return Some(if lazy {
                        Pending::Lazy {
                            slot,
                            delay: at,
                            seq,
                        }
                    } else {
                        Pending::Timer { slot, at, seq }
                    });
                }
                Err(current) => w = current,
            }
        }
    }
}

/// The worker side: ready FIFOs, timers and the worker-side counters.
struct WorkSide<T> {
    /// Sorted by priority, highest first.
    levels: Vec<Level<T>>,
    timer_fifo: VecDeque<Timer<T>>,
    timer_heap: BinaryHeap<Timer<T>>,
    /// Lazily timed delayed adds not yet given a deadline: (slot, delay ns, delay seq).
    unstamped: Vec<(Slot<T>, u64, u64)>,
    /// Filing order of timers.
    order: u64,
    /// Keys this side made ready (promotions, dirty keys queued again) minus keys handed out.
    ready: i64,
    /// Keys handed out so far (minus [`Inner::finished`]: keys in flight).
    handed_out: u64,
    /// Delayed keys promoted by this side (negative).
    delayed: i64,
    /// The latest clock reading taken by anyone: a lower bound of the current time, so timers
    /// due by then can be promoted without reading the (slow) clock again.
    last_now: u64,
    /// The inbox's previous buffer, swapped back in (empty) at the next take, so that the two
    /// buffers' allocations are reused.
    spare: Vec<Pending<T>>,
    /// In-flight start times for the unfinished-work gauges (`FREE` marks a free slot).
    starts: Vec<u64>,
    free_starts: Vec<u32>,
}

/// Make the key in `slot` (whose word was `w`) ready with `prio`, or dirty if it is in flight,
/// cancelling a pending delay: one compare-and-swap. Returns the new word, or the current one
/// if the word changed meanwhile (the caller looks again).
fn make_ready<T>(slot: &Slot<T>, w: u64, prio: i32, now: u64) -> Result<u64, u64> {
    let mut new = (w & !(D | L)) | R;
    if w & P == 0 {
        new = bump_rseq(new);
    }
    slot.prio.store(prio, Ordering::Relaxed);
    slot.since.store(now, Ordering::Relaxed);
    slot.cas(w, new).map(|()| new)
}

/// Mark the key of a ready element in flight, unless the element is stale (the key was queued
/// again at another priority, handed out, or its add was cancelled since it was pushed).
fn claim<T>(slot: &Slot<T>, seq: u64) -> bool {
    let mut w = slot.load();
    loop {
        if w & (R | P) != R || rseq(w) != seq {
            return false;
        }
        match slot.cas(w, (w & !R) | P) {
            Ok(()) => return true,
            Err(current) => w = current,
        }
    }
}

fn push_level<T>(levels: &mut Vec<Level<T>>, slot: Slot<T>, prio: i32, seq: u64) {
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

impl<T> WorkSide<T> {
    fn new() -> Self {
        Self {
            levels: Vec::new(),
            timer_fifo: VecDeque::new(),
            timer_heap: BinaryHeap::new(),
            unstamped: Vec::new(),
            order: 0,
            ready: 0,
            handed_out: 0,
            delayed: 0,
            last_now: 0,
            spare: Vec::new(),
            starts: Vec::new(),
            free_starts: Vec::new(),
        }
    }

    /// File the inbox's elements, in order.
    fn file(&mut self, batch: &mut Vec<Pending<T>>) {
        for pending in batch.drain(..) {
            match pending {
                Pending::Ready { slot, prio, seq } => push_level(&mut self.levels, slot, prio, seq),
                Pending::Timer { slot, at, seq } => self.push_timer(slot, at, seq),
                Pending::Lazy { slot, delay, seq } => self.unstamped.push((slot, delay, seq)),
            }
        }
    }

    fn push_timer(&mut self, slot: Slot<T>, at: u64, seq: u64) {
        self.order += 1;
        let timer = Timer {
            at,
            order: self.order,
            seq,
            slot,
        };
        if self.timer_fifo.back().is_none_or(|b| b.at <= timer.at) {
            self.timer_fifo.push_back(timer);
        } else {
            self.timer_heap.push(timer);
        }
    }

    /// Give every lazily timed delayed add its deadline, `now` + its delay. `now` must be a clock
    /// reading taken after those adds were taken from the inbox.
    fn stamp(&mut self, now: u64) {
        let mut unstamped = std::mem::take(&mut self.unstamped);
        for (slot, delay, seq) in unstamped.drain(..) {
            // Stale elements become stale timers, skipped like any other.
            self.push_timer(slot, now.saturating_add(delay), seq);
        }
        self.unstamped = unstamped;
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
            let slot = timer.slot;
            let mut w = slot.load();
            loop {
                if w & D == 0 || dseq(w) != timer.seq {
                    break; // stale timer
                }
                let prio = slot.delay_prio.load(Ordering::Relaxed);
                match make_ready(&slot, w, prio, now) {
                    Ok(new) => {
                        self.delayed -= 1;
                        if w & P != 0 {
                            dirty += 1;
                        } else {
                            self.ready += 1;
                            ready += 1;
                            push_level(&mut self.levels, Arc::clone(&slot), prio, rseq(new));
                        }
                        break;
                    }
                    Err(current) => w = current,
                }
            }
        }
        (ready, dirty)
    }

    /// Take the next element from the ready FIFOs, highest priority first. The caller claims
    /// it with [`claim`] (outside the lock: the slot's cache line is likely on another core)
    /// and puts the counters right if the element turns out stale.
    fn pop_candidate(&mut self) -> Option<(Slot<T>, u64)> {
        let mut found = None;
        for level in &mut self.levels {
            if let Some(element) = level.keys.pop_front() {
                found = Some(element);
                break;
            }
        }
        // Forget emptied priority levels once there are more than a few, so that a queue that
        // saw many distinct priorities does not scan empty levels forever.
        if self.levels.len() > MAX_IDLE_LEVELS {
            self.levels
                .retain(|l| !l.keys.is_empty() || l.prio == DEFAULT_PRIORITY);
        }
        found
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
    /// The add side (see the [module docs](self)), with the inbox. Lock order: `work`, then
    /// `adds` (a getter takes the inbox while it holds the worker side; adds never take `work`).
    adds: Padded<Mutex<AddSide<T>>>,
    /// What the inbox holds, for getters to read without the add-side lock.
    signal: Padded<Signal>,
    /// The worker side.
    work: Padded<Mutex<WorkSide<T>>>,
    /// Keys marked done so far (see [`WorkSide::handed_out`]).
    finished: Padded<AtomicU64>,
    /// Getters waiting: incremented under the worker-side and add-side locks, read under either.
    waiters: Padded<AtomicUsize>,
    /// A [`Mode`], changed under the add-side lock.
    mode: AtomicU8,
    name: String,
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

    fn mode(&self) -> Mode {
        match self.mode.load(Ordering::Acquire) {
            0 => Mode::Running,
            1 => Mode::Draining,
            _ => Mode::Stopped,
        }
    }

    /// Whether a getter must take the inbox before handing out a key of its own: the inbox
    /// holds something and the worker side has no ready key of at least the inbox's best
    /// priority (keys of the worker side are older than the inbox's, so they go first).
    fn must_take(&self, work: &WorkSide<T>) -> bool {
        if !self.signal.pending.load(Ordering::Acquire) {
            return false;
        }
        match work.levels.iter().find(|l| !l.keys.is_empty()) {
            None => true,
            Some(level) => self.signal.prio.load(Ordering::Relaxed) > level.prio,
        }
    }

    /// Take everything from the inbox and file it (the caller holds the worker-side lock).
    fn take_inbox(&self, work: &mut WorkSide<T>) {
        if !self.signal.pending.load(Ordering::Acquire) {
            return;
        }
        let mut batch = std::mem::take(&mut work.spare);
        {
            let mut adds = self.adds.lock();
            std::mem::swap(&mut adds.inbox, &mut batch);
            adds.inbox_prio = i32::MIN;
            self.signal.pending.store(false, Ordering::Relaxed);
        }
        work.file(&mut batch);
        work.spare = batch;
    }

    /// Keys ready to be handed out (the caller holds the worker-side lock).
    fn ready(&self, work: &WorkSide<T>, adds_ready: i64) -> usize {
        usize::try_from(adds_ready + work.ready).unwrap_or(0)
    }

    /// Keys held by workers (the caller holds the worker-side lock).
    fn in_flight(&self, work: &WorkSide<T>) -> usize {
        let finished = self.finished.load(Ordering::Acquire);
        usize::try_from(work.handed_out.saturating_sub(finished)).unwrap_or(usize::MAX)
    }

    fn is_drained(&self, work: &WorkSide<T>, adds_ready: i64) -> bool {
        self.in_flight(work) == 0
            && (self.mode() == Mode::Stopped || self.ready(work, adds_ready) == 0)
    }

    /// Change the mode under the add-side lock, so that no add is half done.
    fn set_mode(&self, mode: Mode, only_if_running: bool) {
        let _adds = self.adds.lock();
        if !only_if_running || self.mode() == Mode::Running {
            self.mode.store(mode as u8, Ordering::Release);
        }
    }

    /// (ready keys of the add side, delayed keys of the add side).
    fn add_counts(&self) -> (i64, i64) {
        let counts = self.adds.lock().counts;
        (counts.ready, counts.delayed)
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
        f.debug_struct("WorkQueue")
            .field("name", &self.inner.name)
            .field("ready", &self.len())
            .field("in_flight", &self.num_in_flight())
            .field("delayed", &self.num_delayed())
            .field("mode", &self.inner.mode())
            .field(
                "waiting_getters",
                &self.inner.waiters.load(Ordering::Relaxed),
            )
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
                adds: Padded(Mutex::new(AddSide {
                    map: FastMap::default(),
                    inbox: Vec::new(),
                    inbox_prio: i32::MIN,
                    next_sweep: SWEEP_SLACK,
                    pool: Vec::new(),
                    counts: AddCounts::default(),
                })),
                signal: Padded(Signal {
                    pending: AtomicBool::new(false),
                    prio: AtomicI32::new(i32::MIN),
                }),
                work: Padded(Mutex::new(WorkSide::new())),
                finished: Padded(AtomicU64::new(0)),
                waiters: Padded(AtomicUsize::new(0)),
                mode: AtomicU8::new(Mode::Running as u8),
                name: self.name,
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
    /// Something arrived while registering as a waiter: look again.
    Retry,
    /// Another getter holds the worker side: the caller may do something else first.
    Busy,
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
        let mut adds = inner.adds.lock();
        if inner.mode() != Mode::Running {
            return;
        }
        let (added, pending) =
            adds.with_slot(item, |counts, slot| counts.add_ready(slot, priority, now));
        let wake = pending.is_some_and(|p| adds.push(p, &inner.signal, &inner.waiters));
        drop(adds);
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

    /// Add every key of `items` with `priority`, as [`add_with_priority`](Self::add_with_priority)
    /// would one by one (same de-duplication, dirty marking, priorities and FIFO order), but
    /// taking the add side's lock once per [`ADD_ALL_CHUNK`] keys rather than once per key, and
    /// waking at most one getter per chunk (which passes the baton while keys are left). For a
    /// producer with many keys at hand (a relist, a map function fanning one event out to many
    /// objects) this saves most of the lock round trips.
    ///
    /// The items are collected first, so the iterator runs before any lock is taken (it may
    /// itself use the queue).
    ///
    /// ```
    /// use kcr_queue::{DEFAULT_PRIORITY, WorkQueue};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let queue = WorkQueue::<u32>::new("batch");
    /// queue.add_all([1, 2, 2, 3], DEFAULT_PRIORITY);
    /// assert_eq!(queue.len(), 3);
    /// let first = queue.get().await.unwrap();
    /// assert_eq!(*first, 1);
    /// # }
    /// ```
    pub fn add_all(&self, items: impl IntoIterator<Item = T>, priority: i32) {
        let items: Vec<T> = items.into_iter().collect();
        let inner = &*self.inner;
        let now = inner.metrics_now().unwrap_or(0);
        let (mut ready, mut dirty) = (0u64, 0u64);
        let mut items = items.into_iter();
        while items.len() > 0 {
            let mut adds = inner.adds.lock();
            if inner.mode() != Mode::Running {
                return;
            }
            // A bounded number of keys per lock hold: getters take the inbox under this lock,
            // and a long hold would make them wait (measured: 256 keys per hold cut a
            // concurrent consumer's throughput by more than half).
            let mut wake = false;
            for item in items.by_ref().take(ADD_ALL_CHUNK) {
                let (added, pending) =
                    adds.with_slot(item, |counts, slot| counts.add_ready(slot, priority, now));
                if let Some(p) = pending {
                    wake |= adds.push(p, &inner.signal, &inner.waiters);
                }
                match added {
                    Added::Ready => ready += 1,
                    Added::Dirty => dirty += 1,
                    Added::Nothing => {}
                }
            }
            drop(adds);
            if wake {
                inner.notify.notify_one();
            }
        }
        if let Some(m) = &inner.metrics {
            if ready + dirty > 0 {
                m.adds.increment(ready + dirty);
            }
            if ready > 0 {
                m.depth.increment(ready as f64);
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
        let lazy = delay <= LAZY_DELAY_MAX;
        // An exactly timed delay reads the clock before taking any lock.
        let at = if lazy {
            delay_ns
        } else {
            inner.now().saturating_add(delay_ns)
        };
        let mut adds = inner.adds.lock();
        if inner.mode() != Mode::Running {
            return;
        }
        let pending = adds.with_slot(item, |counts, slot| {
            counts.add_delayed(slot, priority, at, lazy, || inner.now())
        });
        let wake = pending.is_some_and(|p| adds.push(p, &inner.signal, &inner.waiters));
        drop(adds);
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
        let (adds_ready, _) = self.inner.add_counts();
        let work = self.inner.work.lock();
        self.inner.ready(&work, adds_ready)
    }

    /// Whether no key is ready to be handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keys waiting for a delayed add (`add_after`, `add_rate_limited`), including due ones
    /// that no getter has promoted yet.
    pub fn num_delayed(&self) -> usize {
        let (_, adds_delayed) = self.inner.add_counts();
        let work = self.inner.work.lock();
        usize::try_from(adds_delayed + work.delayed).unwrap_or(0)
    }

    /// Keys currently held by workers.
    pub fn num_in_flight(&self) -> usize {
        self.inner.in_flight(&self.inner.work.lock())
    }

    /// Whether [`shutdown`](Self::shutdown) or [`shutdown_with_drain`](Self::shutdown_with_drain)
    /// was called.
    pub fn is_shutting_down(&self) -> bool {
        self.inner.mode() != Mode::Running
    }

    /// One try at taking a key. `known_now` is a clock reading the caller already has.
    fn attempt(&self, register: bool, known_now: Option<u64>, may_defer: bool) -> Attempt<T> {
        let inner = &*self.inner;
        // Read before the lock (a clock read is slow): only when metrics are on.
        let metrics_now = inner.metrics_now();
        let mut work = match inner.work.try_lock() {
            Some(work) => work,
            None if may_defer => return Attempt::Busy,
            None => inner.work.lock(),
        };
        let mode = inner.mode();
        if mode == Mode::Stopped {
            return Attempt::Closed;
        }
        if inner.must_take(&work) {
            inner.take_inbox(&mut work);
        }
        if let Some(now) = metrics_now.max(known_now) {
            work.last_now = work.last_now.max(now);
        }
        if mode == Mode::Running && !work.unstamped.is_empty() {
            // Read after the inbox was taken: later than every unstamped add.
            let now = inner.now();
            work.last_now = work.last_now.max(now);
            let now = work.last_now;
            work.stamp(now);
        }
        let mut promoted = (0, 0);
        if mode == Mode::Running
            && let Some(earliest) = work.next_deadline()
        {
            // Read the clock only if the earliest timer is not known to be due already.
            if earliest > work.last_now {
                let now = inner.now();
                work.last_now = work.last_now.max(now);
            }
            let now = work.last_now;
            promoted = work.promote_due(now);
        }
        loop {
            let mut candidate = work.pop_candidate();
            if candidate.is_none() && inner.signal.pending.load(Ordering::Acquire) {
                // What the worker side had was stale, or a key of lower priority than the
                // inbox's: look at the inbox too.
                inner.take_inbox(&mut work);
                candidate = work.pop_candidate();
            }
            let Some((slot, seq)) = candidate else { break };
            // Counted as handed out now (so that a drain does not finish meanwhile), claimed
            // after the lock is released.
            work.ready -= 1;
            work.handed_out += 1;
            let (start_slot, started) = match metrics_now {
                Some(now) => (work.alloc_start(now), now),
                None => (NO_SLOT, 0),
            };
            // Another getter sleeps while more keys are ready: pass the baton.
            let wake_more = inner.waiters.load(Ordering::Relaxed) > 0
                && work.levels.iter().any(|l| !l.keys.is_empty());
            drop(work);
            if claim(&slot, seq) {
                if wake_more {
                    inner.notify.notify_one();
                }
                if let Some(m) = &inner.metrics {
                    let promoted_adds = promoted.0 + promoted.1;
                    if promoted_adds > 0 {
                        m.adds.increment(promoted_adds as u64);
                    }
                    m.depth.increment(promoted.0 as f64 - 1.0);
                    let since = slot.since.load(Ordering::Relaxed);
                    m.queue_duration.record(secs(started.saturating_sub(since)));
                }
                return Attempt::Item(WorkItem {
                    queue: self.clone(),
                    slot,
                    start_slot,
                    started,
                });
            }
            // A stale element: undo, and let getters and drains that counted it look again.
            work = inner.work.lock();
            work.ready += 1;
            work.handed_out -= 1;
            if start_slot != NO_SLOT {
                work.free_start(start_slot);
            }
            // Read the mode afresh: a drain may have begun (and seen the element counted as
            // in flight) since this attempt started.
            if inner.mode() != Mode::Running {
                inner.notify.notify_waiters();
                inner.drained.notify_waiters();
            }
        }
        if let Some(m) = &inner.metrics
            && promoted.1 > 0
        {
            m.adds.increment(promoted.1 as u64);
        }
        if mode == Mode::Draining && inner.in_flight(&work) == 0 {
            return Attempt::Closed;
        }
        let deadline = if mode == Mode::Running {
            work.next_deadline()
        } else {
            None
        };
        if register {
            // Under the add-side lock, so that an add either lands before this check (and is
            // seen) or after the increment (and sees a waiter to wake).
            let adds = inner.adds.lock();
            if !adds.inbox.is_empty() {
                return Attempt::Retry;
            }
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
        let mut may_defer = true;
        loop {
            match self.attempt(false, known_now.take(), may_defer) {
                Attempt::Item(item) => return Some(item),
                Attempt::Closed => return None,
                Attempt::Retry => continue,
                Attempt::Busy => {
                    // Another getter (on another thread) holds the worker side: rather than
                    // spin on its lock, let this thread run other tasks once, then wait for it.
                    may_defer = false;
                    tokio::task::yield_now().await;
                    continue;
                }
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
            let deadline = match self.attempt(true, None, false) {
                Attempt::Item(item) => return Some(item),
                Attempt::Closed => return None,
                Attempt::Retry | Attempt::Busy => continue,
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
    pub(crate) fn finish(&self, slot: &Slot<T>, start_slot: u32, started: u64) {
        let inner = &*self.inner;
        let stopped = inner.mode() == Mode::Stopped;
        let mut w = slot.load();
        let requeue = loop {
            if w & P == 0 {
                return; // not in flight: nothing to do (cannot happen through a WorkItem)
            }
            let requeue = w & R != 0 && !stopped;
            let new = if requeue {
                bump_rseq(w & !P)
            } else {
                w & !(P | R)
            };
            match slot.cas(w, new) {
                Ok(()) => break requeue.then(|| rseq(new)),
                Err(current) => w = current,
            }
        };
        let now = inner.metrics_now();
        let mut wake = false;
        if requeue.is_some() || start_slot != NO_SLOT {
            let mut work = inner.work.lock();
            if let Some(seq) = requeue {
                // File the adds made before this done first, so that FIFO order holds.
                inner.take_inbox(&mut work);
                let prio = slot.prio.load(Ordering::Relaxed);
                push_level(&mut work.levels, Arc::clone(slot), prio, seq);
                work.ready += 1;
                wake = inner.waiters.load(Ordering::Relaxed) > 0;
            }
            if start_slot != NO_SLOT {
                work.free_start(start_slot);
            }
        }
        // Only after the requeue: a drain that sees nothing in flight sees the requeued key.
        inner.finished.fetch_add(1, Ordering::AcqRel);
        if wake {
            inner.notify.notify_one();
        }
        if inner.mode() != Mode::Running {
            let (adds_ready, _) = inner.add_counts();
            let drained = inner.is_drained(&inner.work.lock(), adds_ready);
            if drained {
                inner.notify.notify_waiters();
                inner.drained.notify_waiters();
            }
        }
        if let (Some(m), Some(now)) = (&inner.metrics, now) {
            m.work_duration.record(secs(now.saturating_sub(started)));
            if requeue.is_some() {
                m.depth.increment(1.0);
            }
        }
    }

    fn drained_now(&self) -> bool {
        let (adds_ready, _) = self.inner.add_counts();
        self.inner.is_drained(&self.inner.work.lock(), adds_ready)
    }

    /// Refuse new adds and wake every waiting getter; `get` returns `None` from now on. Keys in
    /// flight stay valid until their guards are dropped (dirty marks are discarded).
    pub fn shutdown(&self) {
        let inner = &*self.inner;
        inner.set_mode(Mode::Stopped, false);
        let drained = self.drained_now();
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
        inner.set_mode(Mode::Draining, true);
        inner.notify.notify_waiters();
        let deadline = Instant::now().checked_add(timeout);
        loop {
            let mut drained = pin!(inner.drained.notified());
            drained.as_mut().enable();
            if self.drained_now() {
                return Ok(());
            }
            match deadline {
                None => drained.await,
                Some(deadline) => {
                    if tokio::time::timeout_at(deadline, drained).await.is_err() {
                        if self.drained_now() {
                            return Ok(());
                        }
                        inner.set_mode(Mode::Stopped, false);
                        let (in_flight, ready) = (self.num_in_flight(), self.len());
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
        let work = inner.work.lock();
        let (mut total, mut longest) = (0u64, 0u64);
        for &start in work.starts.iter().filter(|&&s| s != FREE) {
            let age = now.saturating_sub(start);
            total = total.saturating_add(age);
            longest = longest.max(age);
        }
        drop(work);
        let alive = inner.mode() == Mode::Running || self.num_in_flight() > 0;
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

    #[test]
    fn sequence_numbers_wrap_inside_their_field() {
        let w = R | P | (SEQ_MASK << RSEQ_SHIFT) | (5 << DSEQ_SHIFT);
        let bumped = bump_rseq(w);
        assert_eq!(rseq(bumped), 0);
        assert_eq!(dseq(bumped), 5);
        assert_eq!(bumped & (R | P | D | L), R | P);
        let bumped = bump_dseq(w | (SEQ_MASK << DSEQ_SHIFT));
        assert_eq!(dseq(bumped), 0);
        assert_eq!(rseq(bumped), SEQ_MASK);
    }

    #[tokio::test(start_paused = true)]
    async fn empty_priority_levels_are_dropped() {
        let q = WorkQueue::<i32>::builder("levels").metrics(false).build();
        for p in 0..1000 {
            q.add_with_priority(p, p);
        }
        assert_eq!(*q.get().await.expect("running"), 999);
        assert!(q.inner.work.lock().levels.len() >= 999);
        for want in (0..999).rev() {
            assert_eq!(*q.get().await.expect("running"), want);
        }
        let levels = q.inner.work.lock().levels.len();
        assert!(levels <= MAX_IDLE_LEVELS, "{levels} levels left");
    }

    #[tokio::test(start_paused = true)]
    async fn idle_keys_are_swept_from_the_map() {
        let q = WorkQueue::<u64>::builder("sweep").metrics(false).build();
        for key in 0..100_000u64 {
            q.add(key);
            q.get().await.expect("running").done();
        }
        let size = q.inner.adds.lock().map.len();
        assert!(size <= SWEEP_SLACK + 3, "map holds {size}");
        // Keys whose slot is idle (or swept) come back as fresh keys.
        for key in [99_999u64, 99_998, 5] {
            q.add(key);
        }
        assert_eq!(q.len(), 3);
        let mut got = Vec::new();
        for _ in 0..3 {
            got.push(*q.get().await.expect("running"));
        }
        assert_eq!(got, vec![99_999, 99_998, 5]);
        // A sweep never drops a key that is in flight: its dirty mark survives.
        q.add(1);
        let one = q.get().await.expect("running");
        for key in 1_000_000..1_000_000 + 3 * SWEEP_SLACK as u64 {
            q.add(key);
            q.get().await.expect("running").done();
        }
        q.add(1); // dirty
        drop(one);
        assert_eq!(q.len(), 1);
        assert_eq!(*q.get().await.expect("running"), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn pooled_slots_come_back_clean() {
        let q = WorkQueue::<u64>::builder("pool").metrics(false).build();
        // Give keys a priority, a delay, a dirty mark, then let them all go idle.
        let n = 2 * SWEEP_SLACK as u64;
        for key in 0..n {
            q.add_with_priority(key, 7);
            q.add_after(key + n, Duration::from_millis(1));
        }
        let held = q.get().await.expect("running");
        q.add(*held); // dirty
        drop(held);
        tokio::time::advance(Duration::from_millis(2)).await;
        while !q.is_empty() {
            q.get().await.expect("running").done();
        }
        assert_eq!(q.num_delayed(), 0);
        // New keys make the map sweep, which fills the pool.
        for key in 10 * n..13 * n {
            q.add(key);
            q.get().await.expect("running").done();
        }
        assert!(!q.inner.adds.lock().pool.is_empty());
        // Keys 1 and 2 come back in reused slots: no priority, delay or mark carried over.
        q.add(1);
        q.add_with_priority(2, 1);
        assert_eq!(q.len(), 2);
        assert_eq!(q.num_delayed(), 0);
        assert_eq!(*q.get().await.expect("running"), 2);
        assert_eq!(*q.get().await.expect("running"), 1);
        assert!(q.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_map_that_grew_is_shrunk_when_mostly_idle() {
        let q = WorkQueue::<u64>::builder("shrink").metrics(false).build();
        for key in 0..50_000u64 {
            q.add(key);
        }
        for _ in 0..50_000u64 {
            q.get().await.expect("running").done();
        }
        let grown = q.inner.adds.lock().map.capacity();
        assert!(grown >= 50_000);
        for key in 100_000..150_000u64 {
            q.add(key);
            q.get().await.expect("running").done();
        }
        let adds = q.inner.adds.lock();
        assert!(
            adds.map.capacity() < grown / 4,
            "capacity {} after growing to {grown}",
            adds.map.capacity()
        );
    }
}
