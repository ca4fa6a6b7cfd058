//! The add side: the key map (with its sweep and slot pool), the inbox that hands adds over to
//! the worker side, and the state transitions of an immediate and a delayed add.

use std::collections::hash_map::Entry as MapEntry;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};

use super::slot::{D, KeySlot, L, P, R, Slot, bump_dseq, bump_rseq, dseq, make_ready, rseq};
use super::{POOL_MAX, SWEEP_SLACK};
use crate::FastMap;

/// What the inbox holds, written by adds (under the add-side lock) when that changes, so that a
/// getter with keys of its own knows without a lock whether it must take the inbox first.
pub(super) struct Signal {
    /// Whether the inbox holds elements (cleared by the getter that takes them).
    pub(super) pending: AtomicBool,
    /// The highest priority of a ready element in the inbox (`i32::MIN` if none).
    pub(super) prio: AtomicI32,
}

/// An element of the inbox: something an add did that the worker side must file.
pub(super) enum Pending<T> {
    /// The key became ready (or moved to a higher priority) with this ready sequence number.
    Ready { slot: Slot<T>, prio: i32, seq: u64 },
    /// The key got an exactly timed delay.
    Timer { slot: Slot<T>, at: u64, seq: u64 },
    /// The key got a lazily timed delay, to be stamped by the getter that files it.
    Lazy { slot: Slot<T>, delay: u64, seq: u64 },
}

/// What an add did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Added {
    /// The key became ready, with this priority.
    Ready(i32),
    /// The key is in flight and is now dirty.
    Dirty,
    /// The key was ready and moved from priority `from` to `to`.
    Raised { from: i32, to: i32 },
    /// Nothing changed (de-duplicated), or only a dirty key's priority was raised.
    Nothing,
}

/// The add side: the key map and the add-side counters (all written under its lock).
pub(super) struct AddSide<T> {
    pub(super) map: FastMap<T, Slot<T>>,
    /// What adds did that the worker side has not filed yet.
    pub(super) inbox: Vec<Pending<T>>,
    /// The highest priority of a ready element in the inbox (`i32::MIN` if none).
    pub(super) inbox_prio: i32,
    /// Sweep idle slots once the map holds this many.
    pub(super) next_sweep: usize,
    /// Idle slots kept for reuse.
    pub(super) pool: Vec<Slot<T>>,
    pub(super) counts: AddCounts,
}

/// Counters of the add side.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct AddCounts {
    /// Keys this side made ready.
    pub(super) ready: i64,
    /// Delayed keys this side added, minus the delays it cancelled.
    pub(super) delayed: i64,
}

impl<T: Hash + Eq + Clone> AddSide<T> {
    /// Find or create `key`'s slot and run `f` on it.
    pub(super) fn with_slot<R>(
        &mut self,
        key: T,
        f: impl FnOnce(&mut AddCounts, &Slot<T>) -> R,
    ) -> R {
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
    pub(super) fn push(
        &mut self,
        pending: Pending<T>,
        signal: &Signal,
        waiters: &AtomicUsize,
    ) -> bool {
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
    pub(super) fn sweep(&mut self) {
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
    pub(super) fn add_ready<T>(
        &mut self,
        slot: &Slot<T>,
        prio: i32,
        now: u64,
    ) -> (Added, Option<Pending<T>>) {
        let mut w = slot.load();
        loop {
            if w & R != 0 {
                // Ready or dirty already: at most raise the priority.
                let from = slot.prio.load(Ordering::Relaxed);
                if prio <= from {
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
                        return (Added::Raised { from, to: prio }, Some(pending));
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
                    return (Added::Ready(prio), Some(pending));
                }
                Err(current) => w = current,
            }
        }
    }

    /// A delayed add: `at` is a deadline, or (if `lazy`) the delay itself. `clock` reads the
    /// clock, for the rare lazy add that must be compared with an exactly timed one.
    pub(super) fn add_delayed<T>(
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
