//! The work queue itself: de-duplication, one-in-flight-per-key, priorities, delays, shutdown.
//!
//! # State of a key
//!
//! Every key the queue knows has one slot (`KeySlot`), shared by an `Arc`, whose state is one atomic
//! word with four flags and two sequence numbers:
//! - **ready** (`R`): the key waits to be handed out (or, if it is also in flight, it is
//!   *dirty*: it was added while a worker had it and becomes ready again when that worker is
//!   done);
//! - **in flight** (`P`): a worker holds its [`WorkItem`](crate::WorkItem);
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
//!   `SWEEP_SLACK`); then one pass drops them (keeping up to 4,096 that nothing else refers
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
//! There is no background task. A timer due within `SPIN_WINDOW` (50 µs) is awaited by
//! yielding to the runtime (at most `MAX_SPINS` times, reading the clock but not taking a
//! lock) instead of a tokio sleep, whose 1 ms granularity would otherwise turn a 1 µs delay into
//! a 1 ms one; a timer due within `BUSY_WAIT_WINDOW` (5 µs) is awaited by watching the clock
//! for at most `MAX_BUSY_POLLS` readings, because a tokio yield (which polls the I/O driver)
//! costs about as much as that wait.
//!
//! Reading the clock is not free (50-90 ns on the benchmark VM, more than a whole add), so the
//! queue reads it as rarely as it can: a getter remembers its last reading and promotes every
//! timer already due by then without reading again, and a delay of at most `LAZY_DELAY_MAX`
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

mod add_side;
mod api;
mod shared;
mod shutdown;
mod slot;
mod tag;
#[cfg(test)]
mod tests;
mod timers;
mod work_side;
mod worker;

use std::time::Duration;

pub use api::{WorkQueue, WorkQueueBuilder};
pub(crate) use slot::KeySlot;
pub use tag::with_add_tag;

/// Priority of ordinary adds ([`WorkQueue::add`]).
pub const DEFAULT_PRIORITY: i32 = 0;
/// Priority for create events found by a list (the initial list or a relist), so that fresh
/// changes overtake a (re)list.
pub const LOW_PRIORITY: i32 = -100;

// Tuning: the values the design above was measured with (not part of the API).
/// A getter whose earliest timer is due within this window yields instead of sleeping.
const SPIN_WINDOW: Duration = Duration::from_micros(50);
/// The most yields a getter spends waiting for one timer inside `SPIN_WINDOW`.
const MAX_SPINS: u32 = 1000;
/// A getter whose earliest timer is due within this window busy-waits on the clock (a tokio
/// yield costs a poll of the I/O driver, about a microsecond, more than this wait).
const BUSY_WAIT_WINDOW: Duration = Duration::from_micros(5);
/// The most clock readings a getter busy-waits for within `BUSY_WAIT_WINDOW`.
const MAX_BUSY_POLLS: u32 = 256;
/// Delays up to this long are timed from the queue's next clock reading instead of a clock
/// reading of their own (see the module docs).
const LAZY_DELAY_MAX: Duration = SPIN_WINDOW;
/// Idle slots tolerated in the key map beyond twice the live ones before a sweep.
const SWEEP_SLACK: usize = 1024;
/// Keys [`WorkQueue::add_all`] files per hold of the add side's lock.
const ADD_ALL_CHUNK: usize = 32;

/// No metrics slot.
const NO_SLOT: u32 = u32::MAX;
/// A free slot in the in-flight start-time table.
const FREE: u64 = u64::MAX;
/// Idle key slots kept for reuse by new keys.
const POOL_MAX: usize = 4 * SWEEP_SLACK;
/// Priority levels kept even when empty (beyond these, empty levels are dropped).
const MAX_IDLE_LEVELS: usize = 4;
