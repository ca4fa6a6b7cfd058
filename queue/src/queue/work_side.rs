//! The worker side: one FIFO per priority level (highest first), filing the inbox, picking the
//! next candidate, and the in-flight start-time table of the unfinished-work metrics.

use std::collections::{BinaryHeap, VecDeque};

use super::add_side::Pending;
use super::slot::Slot;
use super::timers::Timer;
use super::{DEFAULT_PRIORITY, FREE, MAX_IDLE_LEVELS, NO_SLOT};

pub(super) struct Level<T> {
    pub(super) prio: i32,
    /// (slot, ready seq) of ready keys; an element whose seq no longer matches is stale.
    pub(super) keys: VecDeque<(Slot<T>, u64)>,
}

/// The worker side: ready FIFOs, timers and the worker-side counters.
pub(super) struct WorkSide<T> {
    /// Sorted by priority, highest first.
    pub(super) levels: Vec<Level<T>>,
    pub(super) timer_fifo: VecDeque<Timer<T>>,
    pub(super) timer_heap: BinaryHeap<Timer<T>>,
    /// Lazily timed delayed adds not yet given a deadline: (slot, delay ns, delay seq).
    pub(super) unstamped: Vec<(Slot<T>, u64, u64)>,
    /// Filing order of timers.
    pub(super) order: u64,
    /// Keys this side made ready (promotions, dirty keys queued again) minus keys handed out.
    pub(super) ready: i64,
    /// Keys handed out so far (minus [`Inner::finished`]: keys in flight).
    pub(super) handed_out: u64,
    /// Delayed keys promoted by this side (negative).
    pub(super) delayed: i64,
    /// The latest clock reading taken by anyone: a lower bound of the current time, so timers
    /// due by then can be promoted without reading the (slow) clock again.
    pub(super) last_now: u64,
    /// The inbox's previous buffer, swapped back in (empty) at the next take, so that the two
    /// buffers' allocations are reused.
    pub(super) spare: Vec<Pending<T>>,
    /// In-flight start times for the unfinished-work gauges (`FREE` marks a free slot).
    pub(super) starts: Vec<u64>,
    pub(super) free_starts: Vec<u32>,
}

pub(super) fn push_level<T>(levels: &mut Vec<Level<T>>, slot: Slot<T>, prio: i32, seq: u64) {
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
    pub(super) fn new() -> Self {
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
    pub(super) fn file(&mut self, batch: &mut Vec<Pending<T>>) {
        for pending in batch.drain(..) {
            match pending {
                Pending::Ready { slot, prio, seq } => push_level(&mut self.levels, slot, prio, seq),
                Pending::Timer { slot, at, seq } => self.push_timer(slot, at, seq),
                Pending::Lazy { slot, delay, seq } => self.unstamped.push((slot, delay, seq)),
            }
        }
    }

    /// Take the next element from the ready FIFOs, highest priority first. The caller claims
    /// it with [`claim`] (outside the lock: the slot's cache line is likely on another core)
    /// and puts the counters right if the element turns out stale.
    /// Returns the element's slot, ready sequence number and priority level.
    pub(super) fn pop_candidate(&mut self) -> Option<(Slot<T>, u64, i32)> {
        let mut found = None;
        for level in &mut self.levels {
            if let Some((slot, seq)) = level.keys.pop_front() {
                found = Some((slot, seq, level.prio));
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

    pub(super) fn alloc_start(&mut self, now: u64) -> u32 {
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

    pub(super) fn free_start(&mut self, slot: u32) {
        if let Some(s) = self.starts.get_mut(slot as usize) {
            *s = FREE;
            self.free_starts.push(slot);
        }
    }
}
