//! Timers of delayed keys: a FIFO while deadlines do not decrease (a constant delay), a binary
//! heap otherwise; lazily timed delays are stamped by the getter that files them; due timers
//! are promoted to ready (see the [module docs](crate::queue) for the clock-reading rules).

use std::cmp::Ordering as CmpOrdering;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::slot::{D, P, Slot, dseq, make_ready, rseq};
use super::work_side::{WorkSide, push_level};

pub(super) struct Timer<T> {
    pub(super) at: u64,
    /// Filing order, to break ties (FIFO among equal deadlines).
    pub(super) order: u64,
    /// The delay sequence number it was pushed with.
    pub(super) seq: u64,
    pub(super) slot: Slot<T>,
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

impl<T> WorkSide<T> {
    pub(super) fn push_timer(&mut self, slot: Slot<T>, at: u64, seq: u64) {
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
    pub(super) fn stamp(&mut self, now: u64) {
        let mut unstamped = std::mem::take(&mut self.unstamped);
        for (slot, delay, seq) in unstamped.drain(..) {
            // Stale elements become stale timers, skipped like any other.
            self.push_timer(slot, now.saturating_add(delay), seq);
        }
        self.unstamped = unstamped;
    }

    pub(super) fn next_deadline(&self) -> Option<u64> {
        match (self.timer_fifo.front(), self.timer_heap.peek()) {
            (Some(f), Some(h)) => Some(f.at.min(h.at)),
            (Some(f), None) => Some(f.at),
            (None, Some(h)) => Some(h.at),
            (None, None) => None,
        }
    }

    /// Move every due delayed key to ready (or dirty). Returns (became ready, became dirty);
    /// `on_ready` is called with the priority of each key that became ready.
    pub(super) fn promote_due(
        &mut self,
        now: u64,
        mut on_ready: impl FnMut(i32),
    ) -> (usize, usize) {
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
                            on_ready(prio);
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
}
