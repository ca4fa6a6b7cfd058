//! The state of one key: its slot (`KeySlot`), an atomic word of four flags and two sequence
//! numbers, and the two compare-and-swap transitions both sides use (`make_ready`, `claim`).

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

use super::DEFAULT_PRIORITY;

// The state word of a key: four flags, then two 30-bit sequence numbers. A sequence number
// wraps after 2^30 changes of one key; an element pushed with the old number would have to
// stay queued through all of them to be mistaken for a live one.
/// Ready, or dirty if also in flight.
pub(super) const R: u64 = 1;
/// In flight.
pub(super) const P: u64 = 1 << 1;
/// Delayed.
pub(super) const D: u64 = 1 << 2;
/// The delay is lazily timed: `delay_at` holds the delay, not a deadline.
pub(super) const L: u64 = 1 << 3;
pub(super) const SEQ_BITS: u32 = 30;
pub(super) const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;
pub(super) const RSEQ_SHIFT: u32 = 4;
pub(super) const DSEQ_SHIFT: u32 = RSEQ_SHIFT + SEQ_BITS;

pub(super) fn rseq(w: u64) -> u64 {
    (w >> RSEQ_SHIFT) & SEQ_MASK
}

pub(super) fn dseq(w: u64) -> u64 {
    (w >> DSEQ_SHIFT) & SEQ_MASK
}

pub(super) fn bump_rseq(w: u64) -> u64 {
    (w & !(SEQ_MASK << RSEQ_SHIFT)) | (((rseq(w) + 1) & SEQ_MASK) << RSEQ_SHIFT)
}

pub(super) fn bump_dseq(w: u64) -> u64 {
    (w & !(SEQ_MASK << DSEQ_SHIFT)) | (((dseq(w) + 1) & SEQ_MASK) << DSEQ_SHIFT)
}

/// One key and its state, shared by the key map, queue elements, timers and the [`WorkItem`](crate::WorkItem).
///
/// Only adds (under the add-side lock) write `prio`, `delay_prio` and `delay_at`, except that
/// the getter that promotes a timer copies `delay_prio` into `prio`; every change of the flags
/// is a compare-and-swap on `word`.
pub(crate) struct KeySlot<T> {
    pub(crate) key: T,
    pub(super) word: AtomicU64,
    /// Priority of the pending ready (or dirty) add.
    pub(super) prio: AtomicI32,
    /// Priority for when the pending delay has passed.
    pub(super) delay_prio: AtomicI32,
    /// Deadline of an exactly timed delay, or the delay itself if lazily timed (`L`).
    pub(super) delay_at: AtomicU64,
    /// When the key became ready or dirty (metrics only).
    pub(super) since: AtomicU64,
    /// The add tag of the first tagged add since the key was last handed out (0: none; see
    /// [`crate::queue::with_add_tag`]).
    pub(crate) tag: AtomicU32,
}

impl<T> KeySlot<T> {
    pub(super) fn new(key: T) -> Self {
        Self {
            key,
            word: AtomicU64::new(0),
            prio: AtomicI32::new(DEFAULT_PRIORITY),
            delay_prio: AtomicI32::new(DEFAULT_PRIORITY),
            delay_at: AtomicU64::new(0),
            since: AtomicU64::new(0),
            tag: AtomicU32::new(0),
        }
    }

    /// A slot of the pool, reused for `key` (the caller holds the only reference).
    pub(super) fn reset(&mut self, key: T) {
        *self = Self::new(key);
    }

    pub(super) fn load(&self) -> u64 {
        self.word.load(Ordering::Acquire)
    }

    pub(super) fn cas(&self, current: u64, new: u64) -> Result<(), u64> {
        self.word
            .compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
    }
}

pub(super) type Slot<T> = Arc<KeySlot<T>>;

/// Make the key in `slot` (whose word was `w`) ready with `prio`, or dirty if it is in flight,
/// cancelling a pending delay: one compare-and-swap. Returns the new word, or the current one
/// if the word changed meanwhile (the caller looks again).
pub(super) fn make_ready<T>(slot: &Slot<T>, w: u64, prio: i32, now: u64) -> Result<u64, u64> {
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
pub(super) fn claim<T>(slot: &Slot<T>, seq: u64) -> bool {
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
